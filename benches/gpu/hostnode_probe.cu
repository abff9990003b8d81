// Host steps inside a replayed plan: CUDA graph *segments* (launch, synchronize, run the
// host step, launch the next) against *host nodes* (one graph, the host step a
// cudaGraphAddHostNode between the parts). Issue 14 point 1 asks which is faster.
//
// The plan: 64 saxpy regions of 4 KiB (kernel nodes) split into S+1 parts by S host
// steps; each host step reads one 4 KiB slice that a D2H node of the part before it
// copied into pinned memory (sums it), as a host task does. Both variants run the same
// nodes with the same edges (a chain per part, parts in order). Prints per S the median
// µs per run of 300 runs, alternating the two variants.
// Build: nvcc -O2 -arch=sm_90 -o hostnode_probe hostnode_probe.cu
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <chrono>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); exit(1); } } while (0)

__global__ void saxpy(float a, const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

static const int R = 64, N = 1024;  // regions, floats per region (4 KiB)
static float *hy;                   // pinned: the slices the host steps read
static volatile double sink;

static void CUDART_CB host_step(void *p) {
  const float *v = hy + (size_t)(long)p * N;
  double s = 0;
  for (int i = 0; i < N; i++) s += v[i];
  sink = s;
}

// Builds the graph of parts [from, to) of S+1 parts; with host nodes, the host steps
// between them are nodes; returns the instantiated graph.
static cudaGraphExec_t build(int S, int part_from, int part_to, bool host_nodes, float *dx, float *dy) {
  cudaGraph_t g;
  CK(cudaGraphCreate(&g, 0));
  cudaGraphNode_t prev = nullptr;
  int per = R / (S + 1);
  for (int part = part_from; part < part_to; part++) {
    int lo = part * per, hi = part == S ? R : lo + per;
    for (int r = lo; r < hi; r++) {
      float a = 2.0f; const float *x = dx + (size_t)r * N; float *y = dy + (size_t)r * N; int n = N;
      void *args[] = {&a, &x, &y, &n};
      cudaKernelNodeParams kp = {};
      kp.func = (void *)saxpy; kp.gridDim = dim3((N + 255) / 256); kp.blockDim = dim3(256);
      kp.kernelParams = args;
      cudaGraphNode_t k;
      CK(cudaGraphAddKernelNode(&k, g, prev ? &prev : nullptr, prev ? 1 : 0, &kp));
      prev = k;
    }
    if (part < S) {  // the D2H the host step reads
      cudaGraphNode_t c;
      CK(cudaGraphAddMemcpyNode1D(&c, g, &prev, 1, hy + (size_t)part * N, dy + (size_t)(hi - 1) * N,
                                  N * sizeof(float), cudaMemcpyDeviceToHost));
      prev = c;
      if (host_nodes && part + 1 < part_to) {
        cudaHostNodeParams hp = {host_step, (void *)(long)part};
        cudaGraphNode_t h;
        CK(cudaGraphAddHostNode(&h, g, &prev, 1, &hp));
        prev = h;
      }
    }
  }
  cudaGraphExec_t exec;
  CK(cudaGraphInstantiate(&exec, g, 0ULL));
  CK(cudaGraphDestroy(g));
  return exec;
}

int main() {
  float *dx, *dy;
  CK(cudaMalloc(&dx, (size_t)R * N * 4)); CK(cudaMalloc(&dy, (size_t)R * N * 4));
  CK(cudaMemset(dx, 0, (size_t)R * N * 4)); CK(cudaMemset(dy, 0, (size_t)R * N * 4));
  CK(cudaHostAlloc((void **)&hy, (size_t)R * N * 4, cudaHostAllocDefault));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  printf("host steps | segments us/run | host nodes us/run | segments / host nodes\n");
  for (int S : {1, 4, 16}) {
    std::vector<cudaGraphExec_t> segs;
    for (int p = 0; p <= S; p++) segs.push_back(build(S, p, p + 1, false, dx, dy));
    cudaGraphExec_t one = build(S, 0, S + 1, true, dx, dy);
    std::vector<double> ts, tn;
    for (int rep = 0; rep < 320; rep++) {
      auto t0 = std::chrono::steady_clock::now();
      for (int p = 0; p <= S; p++) {
        CK(cudaGraphLaunch(segs[p], st));
        if (p < S) { CK(cudaStreamSynchronize(st)); host_step((void *)(long)p); }
      }
      CK(cudaStreamSynchronize(st));
      auto t1 = std::chrono::steady_clock::now();
      CK(cudaGraphLaunch(one, st));
      CK(cudaStreamSynchronize(st));
      auto t2 = std::chrono::steady_clock::now();
      if (rep >= 20) {
        ts.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        tn.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
      }
    }
    std::sort(ts.begin(), ts.end()); std::sort(tn.begin(), tn.end());
    double ms = ts[ts.size() / 2], mn = tn[tn.size() / 2];
    printf("%d | %.1f | %.1f | %.2f\n", S, ms, mn, ms / mn);
    for (auto x : segs) CK(cudaGraphExecDestroy(x));
    CK(cudaGraphExecDestroy(one));
  }
  return 0;
}
