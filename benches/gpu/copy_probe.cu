// copy_probe: what bounds 64 small regions (2 H2D + saxpy + 1 D2H) on 4 streams?
// A probe, not part of the product: it times, on the GPU machine, the same regions with
// the copies done by the copy engines (cudaMemcpyAsync) or by SM kernels that read and
// write pinned host memory through unified addressing, issued by one thread, by one
// thread per stream, or replayed as a CUDA graph. Build there:
//   nvcc -O2 -arch=sm_90 -DBATCH -o /tmp/copy_probe benches/gpu/copy_probe.cu -lpthread
// (-DBATCH adds cudaMemcpyBatchAsync, CUDA 12.8 or later.)
// Prints µs per region, median of REPS repetitions after WARM warm-ups.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
#include <cuda_runtime.h>

#define CK(x)                                                                   \
  do {                                                                          \
    cudaError_t e_ = (x);                                                       \
    if (e_ != cudaSuccess) {                                                    \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                  \
    }                                                                           \
  } while (0)

static const int R = 64, S = 4, WARM = 5, REPS = 30;

__global__ void saxpy(float *y, const float *x, float a, long n, float *out) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}

// n bytes, n a multiple of 16; 16 bytes per thread.
__global__ void copy16(uint4 *dst, const uint4 *src, long n16) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n16; i += (long)gridDim.x * blockDim.x)
    dst[i] = src[i];
}

// two copies in one launch: blockIdx.y picks the pair.
__global__ void copy16x2(uint4 *d0, const uint4 *s0, uint4 *d1, const uint4 *s1, long n16) {
  uint4 *d = blockIdx.y ? d1 : d0;
  const uint4 *s = blockIdx.y ? s1 : s0;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n16; i += (long)gridDim.x * blockDim.x)
    d[i] = s[i];
}

// up to 3 copies in one launch, blockIdx.y picks the copy (n16[k] 16-byte words each).
struct Copy3 {
  uint4 *d[3];
  const uint4 *s[3];
  long n16[3];
};
__global__ void copy16x3(Copy3 c) {
  int k = blockIdx.y;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < c.n16[k]; i += (long)gridDim.x * blockDim.x)
    c.d[k][i] = c.s[k][i];
}

struct Region {
  float *hx, *hy, *hout;  // pinned; hx and hy adjacent (hy = hx + n)
  float *dx, *dy, *dout;  // device; dy = dx + n
};

static long N;  // elements per buffer
static std::vector<Region> regs;
static cudaStream_t st[S];
static bool alloc_per_region = false;

static unsigned blocks_for(long n16) { return (unsigned)std::min<long>((n16 + 255) / 256, 1024); }

// one region's ops on stream s, in the given mode
static void issue(int r, cudaStream_t s, const char *mode) {
  Region &g = regs[r];
  size_t b = N * sizeof(float);
  float *dx = g.dx, *dy = g.dy, *dout = g.dout;
  if (alloc_per_region) {
    CK(cudaMallocAsync((void **)&dx, 2 * b, s));
    dy = dx + N;
    CK(cudaMallocAsync((void **)&dout, b, s));
  }
  long n16 = b / 16;
  unsigned tb = (unsigned)((N + 255) / 256);
  if (!strcmp(mode, "ce")) {
    CK(cudaMemcpyAsync(dx, g.hx, b, cudaMemcpyHostToDevice, s));
    CK(cudaMemcpyAsync(dy, g.hy, b, cudaMemcpyHostToDevice, s));
    saxpy<<<tb, 256, 0, s>>>(dy, dx, 2.0f, N, dout);
    CK(cudaMemcpyAsync(g.hout, dout, b, cudaMemcpyDeviceToHost, s));
  } else if (!strcmp(mode, "ce1")) {  // both inputs in one copy (adjacent both sides)
    CK(cudaMemcpyAsync(dx, g.hx, 2 * b, cudaMemcpyHostToDevice, s));
    saxpy<<<tb, 256, 0, s>>>(dy, dx, 2.0f, N, dout);
    CK(cudaMemcpyAsync(g.hout, dout, b, cudaMemcpyDeviceToHost, s));
  } else if (!strcmp(mode, "sm")) {  // every copy an SM kernel
    copy16<<<blocks_for(n16), 256, 0, s>>>((uint4 *)dx, (const uint4 *)g.hx, n16);
    copy16<<<blocks_for(n16), 256, 0, s>>>((uint4 *)dy, (const uint4 *)g.hy, n16);
    saxpy<<<tb, 256, 0, s>>>(dy, dx, 2.0f, N, dout);
    copy16<<<blocks_for(n16), 256, 0, s>>>((uint4 *)g.hout, (const uint4 *)dout, n16);
  } else if (!strcmp(mode, "sm2")) {  // both inputs in one SM kernel
    dim3 grid(blocks_for(n16), 2);
    copy16x2<<<grid, 256, 0, s>>>((uint4 *)dx, (const uint4 *)g.hx, (uint4 *)dy, (const uint4 *)g.hy, n16);
    saxpy<<<tb, 256, 0, s>>>(dy, dx, 2.0f, N, dout);
    copy16<<<blocks_for(n16), 256, 0, s>>>((uint4 *)g.hout, (const uint4 *)dout, n16);
  } else if (!strcmp(mode, "smin")) {  // SM for H2D, copy engine for D2H
    copy16<<<blocks_for(n16), 256, 0, s>>>((uint4 *)dx, (const uint4 *)g.hx, n16);
    copy16<<<blocks_for(n16), 256, 0, s>>>((uint4 *)dy, (const uint4 *)g.hy, n16);
    saxpy<<<tb, 256, 0, s>>>(dy, dx, 2.0f, N, dout);
    CK(cudaMemcpyAsync(g.hout, dout, b, cudaMemcpyDeviceToHost, s));
#ifdef BATCH
  } else if (!strcmp(mode, "cb") || !strcmp(mode, "cbx") || !strcmp(mode, "cbxce")) {
    // cudaMemcpyBatchAsync: the 2 H2D ("cb"), or with the D2H of this stream's previous
    // region in the same batch ("cbx"; "cbxce" asks for the copy engines)
    int prev = r - S;
    bool x = strcmp(mode, "cb") != 0;
    void *dsts[3], *srcs[3];
    size_t sizes[3], idx[2] = {0, 0};
    int n = 0;
    cudaMemcpyAttributes at[2];
    memset(at, 0, sizeof at);
    if (x && prev >= 0) {
      dsts[n] = regs[prev].hout; srcs[n] = regs[prev].dout; sizes[n++] = b;
      at[0].srcAccessOrder = cudaMemcpySrcAccessOrderStream;
      at[0].srcLocHint.type = cudaMemLocationTypeDevice; at[0].srcLocHint.id = 0;
      at[0].dstLocHint.type = cudaMemLocationTypeHost;
      at[0].flags = strcmp(mode, "cbxce") ? 0 : cudaMemcpyFlagPreferOverlapWithCompute;
    }
    int a = n ? 1 : 0;
    idx[a] = n;
    dsts[n] = dx; srcs[n] = g.hx; sizes[n++] = b;
    dsts[n] = dy; srcs[n] = g.hy; sizes[n++] = b;
    at[a].srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    at[a].srcLocHint.type = cudaMemLocationTypeHost;
    at[a].dstLocHint.type = cudaMemLocationTypeDevice; at[a].dstLocHint.id = 0;
    at[a].flags = strcmp(mode, "cbxce") ? 0 : cudaMemcpyFlagPreferOverlapWithCompute;
#if CUDART_VERSION >= 13000
    CK(cudaMemcpyBatchAsync((const void **)dsts, (const void **)srcs, sizes, n, at, idx, a + 1, s));
#else
    size_t fail = 0;
    CK(cudaMemcpyBatchAsync(dsts, srcs, sizes, n, at, idx, a + 1, &fail, s));
#endif
    saxpy<<<tb, 256, 0, s>>>(dy, dx, 2.0f, N, dout);
    if (!x || r + S >= R) CK(cudaMemcpyAsync(g.hout, dout, b, cudaMemcpyDeviceToHost, s));
#endif
  } else if (!strcmp(mode, "smx")) {
    // one SM kernel per region for the D2H of this stream's previous region and the 2 H2D
    int prev = r - S;
    Copy3 c;
    int n = 0;
    if (prev >= 0) { c.d[n] = (uint4 *)regs[prev].hout; c.s[n] = (const uint4 *)regs[prev].dout; c.n16[n++] = n16; }
    c.d[n] = (uint4 *)dx; c.s[n] = (const uint4 *)g.hx; c.n16[n++] = n16;
    c.d[n] = (uint4 *)dy; c.s[n] = (const uint4 *)g.hy; c.n16[n++] = n16;
    dim3 grid(blocks_for(n16), n);
    copy16x3<<<grid, 256, 0, s>>>(c);
    saxpy<<<tb, 256, 0, s>>>(dy, dx, 2.0f, N, dout);
    if (r + S >= R) copy16<<<blocks_for(n16), 256, 0, s>>>((uint4 *)g.hout, (const uint4 *)dout, n16);
  } else if (!strcmp(mode, "zc")) {  // zero-copy: saxpy on host memory (floor, not a copy)
    saxpy<<<tb, 256, 0, s>>>(g.hy, g.hx, 2.0f, N, g.hout);
  } else {
    fprintf(stderr, "mode %s?\n", mode);
    exit(2);
  }
  if (alloc_per_region) {
    CK(cudaFreeAsync(dx, s));
    CK(cudaFreeAsync(dout, s));
  }
}

static void all_serial(const char *mode) {
  for (int r = 0; r < R; r++) issue(r, st[r % S], mode);
  for (int s = 0; s < S; s++) CK(cudaStreamSynchronize(st[s]));
}

static void all_threads(const char *mode) {
  std::vector<std::thread> ts;
  for (int s = 0; s < S; s++)
    ts.emplace_back([s, mode] {
      for (int r = s; r < R; r += S) issue(r, st[s], mode);
      CK(cudaStreamSynchronize(st[s]));
    });
  for (auto &t : ts) t.join();
}

static bool check() {
  for (int r = 0; r < R; r++)
    for (long i = 0; i < N; i += std::max<long>(1, N / 97)) {
      float want = 2.0f * regs[r].hx[i] + regs[r].hy[i];
      if (regs[r].hout[i] != want) return false;
    }
  return true;
}

static double time_it(const char *how, const char *mode) {
  cudaGraphExec_t exec = nullptr;
  if (!strcmp(how, "graph")) {
    // capture all regions on st[0] forked to S streams via events
    cudaEvent_t fork, join[S];
    CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    for (int s = 0; s < S; s++) CK(cudaEventCreateWithFlags(&join[s], cudaEventDisableTiming));
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(st[0], cudaStreamCaptureModeThreadLocal));
    CK(cudaEventRecord(fork, st[0]));
    for (int s = 1; s < S; s++) CK(cudaStreamWaitEvent(st[s], fork, 0));
    for (int r = 0; r < R; r++) issue(r, st[r % S], mode);
    for (int s = 1; s < S; s++) {
      CK(cudaEventRecord(join[s], st[s]));
      CK(cudaStreamWaitEvent(st[0], join[s], 0));
    }
    CK(cudaStreamEndCapture(st[0], &g));
    CK(cudaGraphInstantiate(&exec, g, 0));
  }
  std::vector<double> t;
  for (int k = 0; k < WARM + REPS; k++) {
    for (int r = 0; r < R; r++) memset(regs[r].hout, 0, N * sizeof(float));
    auto t0 = std::chrono::steady_clock::now();
    if (exec) {
      CK(cudaGraphLaunch(exec, st[0]));
      CK(cudaStreamSynchronize(st[0]));
    } else if (!strcmp(how, "threads")) {
      all_threads(mode);
    } else {
      all_serial(mode);
    }
    auto t1 = std::chrono::steady_clock::now();
    if (!check()) {
      printf("%s %s: WRONG RESULT\n", how, mode);
      return -1;
    }
    if (k >= WARM) t.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / R);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main(int argc, char **argv) {
  long bytes = argc > 1 ? atol(argv[1]) : 4096;
  N = bytes / sizeof(float);
  CK(cudaSetDevice(0));
  cudaMemPool_t pool;
  CK(cudaDeviceGetDefaultMemPool(&pool, 0));
  unsigned long long thr = ~0ull;
  CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &thr));
  for (int s = 0; s < S; s++) CK(cudaStreamCreateWithFlags(&st[s], cudaStreamNonBlocking));
  regs.resize(R);
  for (int r = 0; r < R; r++) {
    Region &g = regs[r];
    CK(cudaHostAlloc((void **)&g.hx, 2 * bytes, cudaHostAllocPortable));
    g.hy = g.hx + N;
    CK(cudaHostAlloc((void **)&g.hout, bytes, cudaHostAllocPortable));
    CK(cudaMalloc((void **)&g.dx, 2 * bytes));
    g.dy = g.dx + N;
    CK(cudaMalloc((void **)&g.dout, bytes));
    for (long i = 0; i < N; i++) {
      g.hx[i] = (float)((i * 7 + r) % 1000) * 0.5f;
      g.hy[i] = (float)((i * 3 + r) % 100);
    }
  }
#ifdef BATCH
  const char *modes[] = {"ce", "ce1", "sm", "sm2", "smin", "smx", "cb", "cbx", "cbxce", "zc"};
#else
  const char *modes[] = {"ce", "ce1", "sm", "sm2", "smin", "smx", "zc"};
#endif
  const char *hows[] = {"serial", "threads", "graph"};
  printf("bytes per buffer %ld, R=%d, S=%d, median of %d (µs/region)\n", bytes, R, S, REPS);
  printf("%-6s %10s %10s %10s %10s\n", "mode", "serial", "threads", "graph", "serial+alloc");
  for (const char *m : modes) {
    printf("%-6s", m);
    for (const char *h : hows) {
      // cudaMemcpyBatchAsync is not permitted while a stream captures (run 14, call 2)
      if (!strcmp(h, "graph") && !strncmp(m, "cb", 2)) printf(" %10s", "n/a");
      else printf(" %10.2f", time_it(h, m));
    }
    bool x = m[strlen(m) - 1] == 'x' || !strcmp(m, "cbxce");
    alloc_per_region = !x;  // the x modes use the previous region's buffers
    printf(" %10.2f\n", x ? 0.0 : time_it("serial", m));
    alloc_per_region = false;
    fflush(stdout);
  }
  return 0;
}
