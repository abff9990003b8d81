// Built-in kernels of offload-sched for the CUDA plugin: one `extern "C"` entry point per
// kernel and element type (`saxpy_f32` ... `spin_u8`), compiled once per process and
// device with NVRTC (`--fmad=false`, so float results equal the host plugin's).
//
// ABI (the host plugin's): every buffer parameter is `(T* ptr, long long len_elements)`,
// every scalar by value, in signature order. Element-wise loops are grid-stride loops over
// the shortest buffer's length, so any launch shape computes the whole result. Integers
// wrap (arithmetic through unsigned types); integer division truncates. `reduce_sum` runs
// sequentially in index order on one thread so its float result equals the host's.

typedef long long i64;
typedef unsigned long long u64;

__device__ __forceinline__ i64 nmin(i64 a, i64 b) { return a < b ? a : b; }
__device__ __forceinline__ i64 nz(i64 a) { return a < 0 ? 0 : a; }

template <typename T> struct Ar {
  __device__ static T add(T a, T b) { return a + b; }
  __device__ static T mul(T a, T b) { return a * b; }
};
template <> struct Ar<int> {
  __device__ static int add(int a, int b) { return (int)((unsigned)a + (unsigned)b); }
  __device__ static int mul(int a, int b) { return (int)((unsigned)a * (unsigned)b); }
};
template <> struct Ar<i64> {
  __device__ static i64 add(i64 a, i64 b) { return (i64)((u64)a + (u64)b); }
  __device__ static i64 mul(i64 a, i64 b) { return (i64)((u64)a * (u64)b); }
};
template <> struct Ar<unsigned char> {
  __device__ static unsigned char add(unsigned char a, unsigned char b) { return (unsigned char)(a + b); }
  __device__ static unsigned char mul(unsigned char a, unsigned char b) { return (unsigned char)(a * b); }
};

#define GRID_STRIDE(n) \
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (i64)gridDim.x * blockDim.x)

// Timing slots (the CUDA plugin's option `timing`, plugin/cuda/timing.rs). A kernel given
// the device address `st` of a slot (3 words; 0: none) times itself: block (0, 0)'s first
// thread writes %globaltimer (ns) at entry into word 0 (k_stamp_begin); at exit a lone
// block writes %globaltimer into word 1; of several, each counts itself in word 2, and
// the last one writes %globaltimer into word 1 and
// sets word 2 back to 0, so the slot can be used again without the host resetting it
// (k_stamp_end; the first use finds word 2 zeroed). Every thread of the block must reach
// k_stamp_end (a barrier).
__device__ __forceinline__ u64 k_globaltimer() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ bool k_first_thread() {
  return threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0;
}
__device__ __forceinline__ void k_stamp_begin(u64 st) {
  if (st && k_first_thread() && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0)
    ((u64*)st)[0] = k_globaltimer();
}
__device__ __forceinline__ void k_stamp_end(u64 st) {
  if (!st) return;
  __syncthreads();
  if (k_first_thread()) {
    u64* s = (u64*)st;
    u64 blocks = (u64)gridDim.x * gridDim.y * gridDim.z;
    if (blocks == 1) {  // one block: its barrier is the end
      s[1] = k_globaltimer();
      return;
    }
    __threadfence();
    if (atomicAdd((unsigned long long*)&s[2], 1ull) == blocks - 1) {
      __threadfence();
      s[1] = k_globaltimer();
      s[2] = 0;
    }
  }
}

template <typename T> __device__ void k_saxpy(T a, T* x, i64 nx, T* y, i64 ny) {
  i64 n = nz(nmin(nx, ny));
  GRID_STRIDE(n) y[i] = Ar<T>::add(Ar<T>::mul(a, x[i]), y[i]);
}
template <typename T> __device__ void k_scale(T a, T* x, i64 nx) {
  GRID_STRIDE(nz(nx)) x[i] = Ar<T>::mul(a, x[i]);
}
template <typename T> __device__ void k_add(T* x, i64 nx, T* y, i64 ny, T* z, i64 nzz) {
  i64 n = nz(nmin(nmin(nx, ny), nzz));
  GRID_STRIDE(n) z[i] = Ar<T>::add(x[i], y[i]);
}
template <typename T> __device__ void k_triad(T a, T* x, i64 nx, T* y, i64 ny, T* z, i64 nzz) {
  i64 n = nz(nmin(nmin(nx, ny), nzz));
  GRID_STRIDE(n) z[i] = Ar<T>::add(x[i], Ar<T>::mul(a, y[i]));
}
template <typename T> __device__ void k_copy(T* s, i64 ns, T* d, i64 nd) {
  GRID_STRIDE(nz(nmin(ns, nd))) d[i] = s[i];
}
template <typename T> __device__ void k_fill(T* b, i64 nb, T v) {
  GRID_STRIDE(nz(nb)) b[i] = v;
}
template <typename T> __device__ void k_increment(T* b, i64 nb) {
  GRID_STRIDE(nz(nb)) b[i] = Ar<T>::add(b[i], (T)1);
}
template <typename T> __device__ void k_add_scalar(T* b, i64 nb, T v) {
  GRID_STRIDE(nz(nb)) b[i] = Ar<T>::add(b[i], v);
}
template <typename T> __device__ void k_jacobi5(i64 nx, i64 ny, T* s, i64 ns, T* d, i64 nd) {
  i64 n = nz(nmin(ns, nd));
  if (nx <= 0 || ny <= 0) return;
  i64 rows = nmin(ny, n / nx);
  GRID_STRIDE(rows * nx) {
    i64 r = i / nx, c = i % nx;
    if (r == 0 || c == 0 || r == rows - 1 || c == nx - 1) {
      d[i] = s[i];
    } else {
      T v = Ar<T>::add(Ar<T>::add(Ar<T>::add(Ar<T>::add(s[i], s[i - nx]), s[i + nx]), s[i - 1]), s[i + 1]);
      d[i] = (T)(v / (T)5);
    }
  }
}
template <typename T> __device__ void k_matmul_block(i64 n, T* a, i64 na, T* b, i64 nb, T* c, i64 nc) {
  if (n <= 0 || n > 3037000499LL || n * n > nz(nmin(nmin(na, nb), nc))) return;
  GRID_STRIDE(n * n) {
    i64 r = i / n, col = i % n;
    T acc = c[i];
    for (i64 k = 0; k < n; k++) acc = Ar<T>::add(acc, Ar<T>::mul(a[r * n + k], b[k * n + col]));
    c[i] = acc;
  }
}
template <typename T> __device__ void k_reduce_sum(T* x, i64 nx, T* out, i64 nout) {
  if (nout < 1 || blockIdx.x != 0 || threadIdx.x != 0) return;
  T acc = (T)0;
  for (i64 i = 0; i < nx; i++) acc = Ar<T>::add(acc, x[i]);
  out[0] = acc;
}
__device__ void k_spin(double us) {
  if (!(us > 0.0)) return;
  if (us > 3.6e9) us = 3.6e9;  // model::SPIN_MAX_US
  u64 t0 = k_globaltimer();
  u64 ns = (u64)(us * 1000.0);
  while (k_globaltimer() - t0 < ns) {
  }
}

// One entry point NAME(params) running CALL, and NAME_timed(params, u64 stamp) running
// it between the stamps of timing slot `stamp` (the CUDA plugin launches the timed one
// when it times kernels).
#define KERNEL(NAME, CALL, ...)                                                                \
  extern "C" __global__ void NAME(__VA_ARGS__) { CALL; }                                       \
  extern "C" __global__ void NAME##_timed(__VA_ARGS__, u64 stamp_) {                          \
    k_stamp_begin(stamp_);                                                                     \
    CALL;                                                                                      \
    k_stamp_end(stamp_);                                                                       \
  }

#define INSTANTIATE(T, S)                                                                      \
  KERNEL(saxpy_##S, k_saxpy<T>(a, x, nx, y, ny), T a, T* x, i64 nx, T* y, i64 ny)              \
  KERNEL(scale_##S, k_scale<T>(a, x, nx), T a, T* x, i64 nx)                                   \
  KERNEL(add_##S, k_add<T>(x, nx, y, ny, z, nzz), T* x, i64 nx, T* y, i64 ny, T* z, i64 nzz)   \
  KERNEL(triad_##S, k_triad<T>(a, x, nx, y, ny, z, nzz), T a, T* x, i64 nx, T* y, i64 ny, T* z, i64 nzz) \
  KERNEL(copy_##S, k_copy<T>(s, ns, d, nd), T* s, i64 ns, T* d, i64 nd)                        \
  KERNEL(fill_##S, k_fill<T>(b, nb, v), T* b, i64 nb, T v)                                     \
  KERNEL(increment_##S, k_increment<T>(b, nb), T* b, i64 nb)                                   \
  KERNEL(add_scalar_##S, k_add_scalar<T>(b, nb, v), T* b, i64 nb, T v)                         \
  KERNEL(jacobi5_##S, k_jacobi5<T>(nx, ny, s, ns, d, nd), i64 nx, i64 ny, T* s, i64 ns, T* d, i64 nd) \
  KERNEL(matmul_block_##S, k_matmul_block<T>(n, a, na, b, nb, c, nc), i64 n, T* a, i64 na, T* b, i64 nb, T* c, i64 nc) \
  KERNEL(reduce_sum_##S, k_reduce_sum<T>(x, nx, o, no), T* x, i64 nx, T* o, i64 no)            \
  KERNEL(spin_##S, k_spin(us), double us)

INSTANTIATE(float, f32)
INSTANTIATE(double, f64)
INSTANTIATE(int, i32)
INSTANTIATE(i64, i64)
INSTANTIATE(unsigned char, u8)

// The CUDA plugin's small-copy batches (plugin/cuda/batch.rs): up to 8 copies in one
// launch, copy k moving `bytes[k]` bytes from `src[k]` to `dst[k]`. Unordered: block row
// `blockIdx.y` runs copy `blockIdx.y` (grid-stride over blockIdx.x). Ordered (a copy
// overlaps an earlier one): one block runs the copies one after the other, a barrier
// between them (bar.sync orders the block's memory accesses, host memory included, for
// the whole block). Host addresses are the plugin's pinned host memory, which unified
// addressing makes readable and writable from the device at the same address. Loads must
// stay coherent: no __restrict__ or __ldg on the sources (a later copy of the batch may
// read what an earlier one wrote). 16-byte words when both addresses and the size allow,
// else 4-byte, else bytes (batch.rs sizes the grid the same way).
// With `stamp` (not 0), the kernel times itself in that timing slot (k_stamp_begin).
struct CopyBatch {
  u64 dst[8];
  u64 src[8];
  u64 bytes[8];
  u64 count;
  u64 ordered;
  u64 stamp;
};
template <typename W> __device__ void k_copy_words(u64 dst, u64 src, u64 bytes) {
  W* d = (W*)dst;
  const W* s = (const W*)src;
  GRID_STRIDE((i64)(bytes / sizeof(W))) d[i] = s[i];
}
__device__ void k_copy_one(u64 d, u64 s, u64 n) {
  if (((d | s | n) & 15) == 0) k_copy_words<uint4>(d, s, n);
  else if (((d | s | n) & 3) == 0) k_copy_words<unsigned>(d, s, n);
  else k_copy_words<unsigned char>(d, s, n);
}
extern "C" __global__ void offload_copy_batch(CopyBatch b) {
  k_stamp_begin(b.stamp);
  if (b.ordered) {
    for (u64 k = 0; k < b.count && k < 8; k++) {
      k_copy_one(b.dst[k], b.src[k], b.bytes[k]);
      __syncthreads();
    }
  } else if (blockIdx.y < b.count) {
    k_copy_one(b.dst[blockIdx.y], b.src[blockIdx.y], b.bytes[blockIdx.y]);
  }
  k_stamp_end(b.stamp);
}

// Library tile kernels (plugin/cuda/library.rs): launched after each cuSOLVER potrf or
// getrf on the same stream (or in the same captured graph), one block of 256 threads. It
// checks the diagonal of the factored tile `a` (`n` elements apart by `lda + 1`; f32 or f64
// by the tag) and copies a failure into the sticky record `st` in pinned host memory
// ({info, tag, seq}: two ints and a 64-bit word at byte 8; seq the call's stream call, all
// ones when unknown), keeping the first failure until the host reads and clears it at its
// next synchronize. Tag: 1 = f32, 2 = f64, plus 4 for getrf; the kernel adds 8 when the
// failure is the diagonal check's. potrf: cuSOLVER's info if nonzero, else the first NaN
// on the factor's diagonal at index i gives info i + 1 (reference LAPACK's DISNAN test,
// which OpenBLAS and cuSOLVER lack); getrf (no pivoting): the first pivot that is not
// finite before cuSOLVER's first zero one (its info), else that zero one: the host's rule,
// which stops at the first failing pivot.
__device__ __forceinline__ bool k_nonfinite(const void* a, i64 k, bool f64, bool nan_only) {
  if (f64) {
    u64 b = (u64)__double_as_longlong(((const double*)a)[k]);
    u64 e = (b >> 52) & 0x7ff, m = b & 0xfffffffffffffull;
    return e == 0x7ff && (!nan_only || m != 0);
  }
  unsigned b = (unsigned)__float_as_int(((const float*)a)[k]);
  unsigned e = (b >> 23) & 0xff, m = b & 0x7fffff;
  return e == 0xff && (!nan_only || m != 0);
}
extern "C" __global__ void offload_solver_info(const int* info, volatile int* st, int tag,
                                               unsigned long long seq, const void* a, i64 n,
                                               i64 lda) {
  __shared__ unsigned long long first;
  if (threadIdx.x == 0) first = (u64)n;
  __syncthreads();
  int v = *info;
  bool getrf = (tag & 4) != 0, f64 = (tag & 3) == 2;
  i64 upto = getrf ? (v > 0 ? (i64)v - 1 : n) : (v == 0 ? n : 0);
  for (i64 i = threadIdx.x; i < upto; i += blockDim.x)
    if (k_nonfinite(a, i + i * lda, f64, !getrf)) atomicMin(&first, (u64)i);
  __syncthreads();
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    int code = v, t = tag;
    if ((i64)first < upto) {
      code = (int)first + 1;
      t = tag | 8;
    }
    if (code != 0 && st[0] == 0) {
      *(volatile unsigned long long*)(st + 2) = seq;
      st[1] = t;
      __threadfence_system();
      st[0] = code;
    }
  }
}
