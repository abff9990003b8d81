// What per-op timing costs on the issue path (issue 16: a traced run within 10% of an
// untraced one), and whether CUPTI activity records could replace timing events.
//
// The workload imitates the blocked-matmul DAG as the CUDA plugin issues it (n 256, bs 16:
// 4096 regions over 4 streams, a chain of 16 regions per C block on one stream): per
// region a copy kernel (the batched H2D of A, B and C blocks, 3 KiB from pinned memory),
// the block kernel, and at the end of each chain a 1 KiB D2H on the copy engine; an event
// record and a wait across streams every 16 regions. Modes, each the same work:
//   none      nothing timed
//   marks     a timing event before and after each unit, one cudaEventQuery before it
//             (the plugin's event timing at its worst)
//   end       one timing event after each unit (its least)
//   stamp1    the copy kernel stamps its own start and end (%globaltimer), one timing
//             event after each other unit (the block kernel, the D2H)
//   stamp0    the copy kernel's stamps alone (no driver call for timing)
//   cupti     CUPTI activity (CONCURRENT_KERNEL, MEMCPY) enabled, nothing on the issue path
//   cupti-ext the same plus cuptiActivityPushExternalCorrelationId / Pop around each unit
//   none+     nothing timed, CUPTI attached but its activity disabled
// Prints per mode the median over REPS of the host issue time (first call to last call
// returned) and of the wall time to cudaDeviceSynchronize, in µs per region; for the
// CUPTI modes the records counted against the units issued, and the mean kernel time
// from the records against the one from the marks. Then the layouts the header gives
// (offsets of start, end, deviceId, contextId, streamId, correlationId in the kernel,
// memcpy and memset records; -DKERNEL_T=..., -DMEMCPY_T=..., -DMEMSET_T=...).
// Build: nvcc -O2 -arch=sm_90 -I$CUPTI/include -DKERNEL_T=CUpti_ActivityKernel10
//        -DMEMCPY_T=CUpti_ActivityMemcpy6 -DMEMSET_T=CUpti_ActivityMemset4
//        timing_probe.cu -L$CUPTI/lib64 -lcupti
#include <cstdio>
#include <cstdlib>
#include <cstddef>
#include <vector>
#include <algorithm>
#include <chrono>
#include <cuda_runtime.h>
#include <cupti.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); exit(1); } } while (0)
#define CP(x) do { CUptiResult r = (x); if (r != CUPTI_SUCCESS) { const char *s = ""; \
  cuptiGetResultString(r, &s); fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s); exit(1); } } while (0)

static const int NB = 16, BS = 16, S = 4, REGIONS = NB * NB * NB;

__global__ void copy3(const float *__restrict__ h, float *__restrict__ d, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) d[i] = h[i];
}
// The copy kernel stamping its own start and end with %globaltimer (ns) into st[0..2].
__global__ void copy3s(const float *__restrict__ h, float *__restrict__ d, int n, unsigned long long *st) {
  unsigned long long t;
  if (threadIdx.x == 0) { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); st[0] = t; }
  for (int i = threadIdx.x; i < n; i += blockDim.x) d[i] = h[i];
  __syncthreads();
  if (threadIdx.x == 0) { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); st[1] = t; }
}
__global__ void mm(const float *a, const float *b, float *c) {
  int r = threadIdx.y, col = threadIdx.x;
  float s = c[r * BS + col];
  for (int k = 0; k < BS; k++) s += a[r * BS + k] * b[k * BS + col];
  c[r * BS + col] = s;
}

enum Mode { NONE, MARKS, END, STAMP1, STAMP0, CUPTI, CUPTI_EXT, NONE_ATTACHED, MODES };
static const char *NAMES[] = {"none", "marks", "end", "stamp1", "stamp0", "cupti", "cupti-ext", "none+"};

// CUPTI records, counted and summed as they come back.
static long long g_kernels, g_memcpys, g_other, g_kernel_ns;
static void CUPTIAPI buf_req(uint8_t **b, size_t *size, size_t *max) {
  *size = 8 << 20;
  *b = (uint8_t *)aligned_alloc(8, *size);
  *max = 0;
}
static void CUPTIAPI buf_done(CUcontext, uint32_t, uint8_t *b, size_t, size_t valid) {
  CUpti_Activity *r = nullptr;
  while (cuptiActivityGetNextRecord(b, valid, &r) == CUPTI_SUCCESS) {
    if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      auto *k = (KERNEL_T *)r;
      g_kernels++;
      g_kernel_ns += (long long)(k->end - k->start);
    } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      g_memcpys++;
    } else {
      g_other++;
    }
  }
  free(b);
}

struct Bufs { float *hA, *dIn, *dC, *hOut; unsigned long long *stamps; };

// Per stream: the marks of its units and whether it has a last end mark.
struct Lane { std::vector<cudaEvent_t> pool, used; cudaEvent_t last = nullptr; };

static cudaEvent_t take(Lane &l) {
  cudaEvent_t e = l.pool.back();
  l.pool.pop_back();
  l.used.push_back(e);
  return e;
}

// One unit on stream s under mode m: `issue` enqueues it.
template <class F> static void unit(Mode m, Lane &l, cudaStream_t s, uint64_t id, F issue, bool stamped = false) {
  if (m == MARKS) {
    bool busy = l.last && cudaEventQuery(l.last) == cudaErrorNotReady;
    if (!busy) CK(cudaEventRecord(take(l), s));
  }
  if (m == CUPTI_EXT) cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id);
  issue();
  if (m == CUPTI_EXT) { uint64_t x; cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &x); }
  if (m == MARKS || m == END || (m == STAMP1 && !stamped)) {
    l.last = take(l);
    CK(cudaEventRecord(l.last, s));
  }
}

// One run of the workload: (issue µs, wall µs).
static std::pair<double, double> run(Mode m, cudaStream_t *st, Lane *lanes, cudaEvent_t *sync, Bufs &b) {
  for (int s = 0; s < S; s++) {
    lanes[s].pool.insert(lanes[s].pool.end(), lanes[s].used.begin(), lanes[s].used.end());
    lanes[s].used.clear();
    lanes[s].last = nullptr;
  }
  CK(cudaDeviceSynchronize());
  auto t0 = std::chrono::steady_clock::now();
  uint64_t id = 0;
  for (int i = 0; i < NB; i++)
    for (int j = 0; j < NB; j++) {
      int c = i * NB + j, s = c % S;
      for (int k = 0; k < NB; k++) {
        float *in = b.dIn + (size_t)(c * NB + k) * 3 * BS * BS;
        const float *h = b.hA + (size_t)((c * NB + k) % 64) * 3 * BS * BS;
        bool self = m == STAMP1 || m == STAMP0;
        unsigned long long *stp = b.stamps + 2 * (c * NB + k);
        unit(m, lanes[s], st[s], ++id, [&] {
          if (self) copy3s<<<1, 256, 0, st[s]>>>(h, in, 3 * BS * BS, stp);
          else copy3<<<1, 256, 0, st[s]>>>(h, in, 3 * BS * BS);
        }, self);
        unit(m, lanes[s], st[s], ++id, [&] {
          mm<<<1, dim3(BS, BS), 0, st[s]>>>(in, in + BS * BS, b.dC + (size_t)c * BS * BS);
        });
      }
      unit(m, lanes[s], st[s], ++id, [&] {
        CK(cudaMemcpyAsync(b.hOut + (size_t)c * BS * BS, b.dC + (size_t)c * BS * BS, BS * BS * 4,
                           cudaMemcpyDeviceToHost, st[s]));
      });
      // An event across streams (not timed), as the schedule's sync; the lane's next
      // unit starts on a fresh mark.
      CK(cudaEventRecord(sync[s], st[s]));
      CK(cudaStreamWaitEvent(st[(s + 1) % S], sync[s], 0));
      lanes[(s + 1) % S].last = nullptr;
    }
  auto t1 = std::chrono::steady_clock::now();
  CK(cudaDeviceSynchronize());
  auto t2 = std::chrono::steady_clock::now();
  auto us = [](auto a, auto z) { return std::chrono::duration<double, std::micro>(z - a).count(); };
  return {us(t0, t1), us(t0, t2)};
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 15;
  uint32_t ver = 0;
  cuptiGetVersion(&ver);
  printf("CUPTI API version %u; record layouts (offsets in bytes):\n", ver);
#define OFF(T, f) (int)offsetof(T, f)
  printf("  %s size %zu: start %d end %d deviceId %d contextId %d streamId %d correlationId %d\n", "kernel",
         sizeof(KERNEL_T), OFF(KERNEL_T, start), OFF(KERNEL_T, end), OFF(KERNEL_T, deviceId),
         OFF(KERNEL_T, contextId), OFF(KERNEL_T, streamId), OFF(KERNEL_T, correlationId));
  printf("  %s size %zu: bytes %d start %d end %d deviceId %d contextId %d streamId %d correlationId %d\n",
         "memcpy", sizeof(MEMCPY_T), OFF(MEMCPY_T, bytes), OFF(MEMCPY_T, start), OFF(MEMCPY_T, end),
         OFF(MEMCPY_T, deviceId), OFF(MEMCPY_T, contextId), OFF(MEMCPY_T, streamId), OFF(MEMCPY_T, correlationId));
  printf("  %s size %zu: bytes %d start %d end %d deviceId %d contextId %d streamId %d correlationId %d\n",
         "memset", sizeof(MEMSET_T), OFF(MEMSET_T, bytes), OFF(MEMSET_T, start), OFF(MEMSET_T, end),
         OFF(MEMSET_T, deviceId), OFF(MEMSET_T, contextId), OFF(MEMSET_T, streamId), OFF(MEMSET_T, correlationId));
  printf("  external correlation size %zu: externalKind %d externalId %d correlationId %d\n",
         sizeof(CUpti_ActivityExternalCorrelation), OFF(CUpti_ActivityExternalCorrelation, externalKind),
         OFF(CUpti_ActivityExternalCorrelation, externalId), OFF(CUpti_ActivityExternalCorrelation, correlationId));

  CK(cudaSetDevice(0));
  cudaStream_t st[S];
  Lane lanes[S];
  cudaEvent_t sync[S];
  for (int s = 0; s < S; s++) {
    CK(cudaStreamCreateWithFlags(&st[s], cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&sync[s], cudaEventDisableTiming));
    for (int e = 0; e < 3 * REGIONS; e++) {
      cudaEvent_t ev;
      CK(cudaEventCreate(&ev));
      lanes[s].pool.push_back(ev);
    }
  }
  Bufs b;
  CK(cudaMallocHost(&b.hA, 64 * 3 * BS * BS * 4));
  CK(cudaMallocHost(&b.hOut, NB * NB * BS * BS * 4));
  CK(cudaMalloc(&b.dIn, (size_t)REGIONS * 3 * BS * BS * 4));
  CK(cudaMalloc(&b.dC, NB * NB * BS * BS * 4));
  CK(cudaMalloc(&b.stamps, (size_t)REGIONS * 2 * 8));
  for (int i = 0; i < 64 * 3 * BS * BS; i++) b.hA[i] = (i % 7) * 0.25f;
  for (int w = 0; w < 2; w++) run(NONE, st, lanes, sync, b);

  std::vector<double> issue[MODES], wall[MODES];
  // Event modes first, alternating, before CUPTI is attached (attaching may cost launches
  // afterwards: none+ shows whether it does).
  for (int r = 0; r < reps; r++)
    for (Mode m : {NONE, MARKS, END, STAMP1, STAMP0}) {
      auto [i, w] = run(m, st, lanes, sync, b);
      issue[m].push_back(i / REGIONS);
      wall[m].push_back(w / REGIONS);
    }
  CP(cuptiActivityRegisterCallbacks(buf_req, buf_done));
  long long want_k = 0, want_m = 0, bad = 0;
  for (int r = 0; r < reps; r++)
    for (Mode m : {CUPTI, CUPTI_EXT, NONE_ATTACHED}) {
      if (m != NONE_ATTACHED) {
        CP(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
        CP(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
        if (m == CUPTI_EXT) CP(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION));
      }
      auto [i, w] = run(m, st, lanes, sync, b);
      issue[m].push_back(i / REGIONS);
      wall[m].push_back(w / REGIONS);
      if (m != NONE_ATTACHED) {
        CP(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
        CP(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
        CP(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMCPY));
        if (m == CUPTI_EXT) CP(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION));
        want_k += 2 * REGIONS;
        want_m += NB * NB;
        if (g_kernels != want_k || g_memcpys != want_m) bad++;
      }
    }
  CP(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  // The copy kernels' own stamps of the last stamp0 run: mean duration.
  std::vector<unsigned long long> hs((size_t)REGIONS * 2);
  run(STAMP0, st, lanes, sync, b);
  CK(cudaMemcpy(hs.data(), b.stamps, hs.size() * 8, cudaMemcpyDeviceToHost));
  double sum = 0;
  for (int r = 0; r < REGIONS; r++) sum += (double)(hs[2 * r + 1] - hs[2 * r]);
  printf("copy kernel by its own stamps: mean %.3f µs\n", sum / REGIONS / 1e3);
  printf("\n%d regions, %d streams, %d reps; µs per region, median\n", REGIONS, S, reps);
  printf("| mode | issue | wall | issue / none | wall / none |\n|---|---:|---:|---:|---:|\n");
  double i0 = median(issue[NONE]), w0 = median(wall[NONE]);
  for (int m = 0; m < MODES; m++)
    printf("| %s | %.3f | %.3f | %.3f | %.3f |\n", NAMES[m], median(issue[m]), median(wall[m]),
           median(issue[m]) / i0, median(wall[m]) / w0);
  printf("\nCUPTI records: %lld kernels (want %lld), %lld memcpys (want %lld), %lld other; reps with a "
         "short count %lld; mean kernel %.3f µs\n",
         g_kernels, want_k, g_memcpys, want_m, g_other, bad, g_kernels ? g_kernel_ns / 1e3 / g_kernels : 0.0);
  return 0;
}
