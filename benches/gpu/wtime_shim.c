/* wtime_shim.c: LD_PRELOAD shim that records every omp_get_wtime() result, so that
 * offload-bench can take the median of every timed repetition of the libomptarget
 * baseline (saxpy_regions prints only the best). The values are kept in memory (no I/O
 * inside the timed loop) and written, one per line, to $WTIME_LOG when the process
 * exits normally. Build: gcc -O2 -shared -fPIC -o wtime_shim.so wtime_shim.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#define CAP 65536
static double stamps[CAP];
static unsigned long count;

double omp_get_wtime(void) {
  static double (*real)(void);
  if (!real) real = (double (*)(void))dlsym(RTLD_NEXT, "omp_get_wtime");
  double t = real ? real() : 0.0;
  if (count < CAP) stamps[count] = t;
  count++;
  return t;
}

__attribute__((destructor)) static void dump(void) {
  const char *path = getenv("WTIME_LOG");
  if (!path || count == 0) return;
  FILE *f = fopen(path, "w");
  if (!f) return;
  if (count > CAP) fprintf(f, "overflow %lu\n", count);
  for (unsigned long i = 0; i < count && i < CAP; i++) fprintf(f, "%.9f\n", stamps[i]);
  fclose(f);
}
