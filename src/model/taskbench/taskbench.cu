// Task Bench's task body for the CUDA plugin (offload-sched, src/model/taskbench): the
// device side of `TaskGraph::execute_point` and its compute_bound / memory_bound kernels
// (StanfordLegion/task-bench core/core.cc, core/core_kernel.cc). Launched as one block of
// 64 threads; entry points `taskbench_{empty,compute,memory}_{n}` follow this file
// (generated per input count n, kernel.rs). ABI: every buffer is (T* ptr, i64 len).

typedef long long i64;
typedef unsigned long long u64;

#define TB_MAGIC 0x5C4A7C8BLL
#define TB_SAMPLES 16

#define BLOCK_STRIDE(i, n) for (i64 i = threadIdx.x; i < (n); i += blockDim.x)

// Checks the inputs (pair i of input k must be (t - 1, first_k + i / pairs)) and writes
// the output pairs (t, p); a wrong pair traps, failing the launch (Task Bench asserts).
__device__ void tb_point(i64 t, i64 p, i64* out, i64 nout, int n, const i64* const* ins,
                         const i64* lens, const i64* firsts) {
  i64 pairs = nout / 2;
  for (int k = 0; k < n; k++) {
    if (pairs == 0 || lens[k] == 0 || lens[k] % (2 * pairs) != 0) __trap();
    BLOCK_STRIDE(i, lens[k] / 2) {
      if (ins[k][2 * i] != t - 1 || ins[k][2 * i + 1] != firsts[k] + i / pairs) __trap();
    }
  }
  BLOCK_STRIDE(i, pairs) {
    out[2 * i] = t;
    out[2 * i + 1] = p;
  }
}

__device__ void tb_none() {}

// Task Bench's execute_point checks the scratch's first word before the kernel.
__device__ void tb_check_scratch(const i64* scratch, i64 nscratch) {
  if (threadIdx.x == 0 && (nscratch < 1 || scratch[0] != TB_MAGIC)) __trap();
}

// execute_kernel_compute: 64 doubles from 1.2345, one per thread, `iterations` rounds of
// a = a*a + a (NVRTC runs with --fmad=false: a multiply and an add, Task Bench's 2 flops).
// The result must reach memory on some path, or ptxas drops the loop: an empty
// `asm volatile` with `a` as input kept it in the front end only (run 24: 2^24 rounds
// took the time of 1). The store happens only if a equals -1, which a*a + a from
// 1.2345 never reaches, but no compiler pass can tell.
__device__ double tb_sink;
__device__ void tb_compute(i64 iterations) {
  if (threadIdx.x >= 64) return;
  double a = 1.2345;
  for (i64 it = 0; it < iterations; it++) a = a * a + a;
  if (a == -1.0) tb_sink = a;
}

// Copies the first half of scratch[off, off + len) onto its second half (words).
__device__ void tb_copy(i64* scratch, i64 off, i64 len) {
  i64 half = len / 2;
  BLOCK_STRIDE(i, half) scratch[off + half + i] = scratch[off + i];
  __syncthreads();
}

// execute_kernel_memory: prologue, body and epilogue over the 16 samples (kernel.rs's
// memory_bound).
__device__ void tb_memory(i64 t, i64 iterations, i64* scratch, i64 nscratch) {
  const i64 s = TB_SAMPLES;
  i64 sample = nscratch / s;
  i64 base = ((t % s) * (iterations % s)) % s;
  i64 iter = 0;
  i64 start = base;
  i64 stop = start + iterations < s ? start + iterations : s;
  if (stop > start) {
    tb_copy(scratch, start * sample, (stop - start) * sample);
    iter += stop - start;
  }
  for (; iter + s <= iterations; iter += s) tb_copy(scratch, ((base + iter % s) % s) * sample, s * sample);
  if (iterations > iter) tb_copy(scratch, ((base + iter % s) % s) * sample, (iterations - iter) * sample);
}
