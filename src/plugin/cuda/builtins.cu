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
  u64 t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  u64 ns = (u64)(us * 1000.0);
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

#define INSTANTIATE(T, S)                                                                      \
  extern "C" __global__ void saxpy_##S(T a, T* x, i64 nx, T* y, i64 ny) { k_saxpy<T>(a, x, nx, y, ny); } \
  extern "C" __global__ void scale_##S(T a, T* x, i64 nx) { k_scale<T>(a, x, nx); }                   \
  extern "C" __global__ void add_##S(T* x, i64 nx, T* y, i64 ny, T* z, i64 nzz) { k_add<T>(x, nx, y, ny, z, nzz); } \
  extern "C" __global__ void triad_##S(T a, T* x, i64 nx, T* y, i64 ny, T* z, i64 nzz) { k_triad<T>(a, x, nx, y, ny, z, nzz); } \
  extern "C" __global__ void copy_##S(T* s, i64 ns, T* d, i64 nd) { k_copy<T>(s, ns, d, nd); }          \
  extern "C" __global__ void fill_##S(T* b, i64 nb, T v) { k_fill<T>(b, nb, v); }                      \
  extern "C" __global__ void increment_##S(T* b, i64 nb) { k_increment<T>(b, nb); }                    \
  extern "C" __global__ void add_scalar_##S(T* b, i64 nb, T v) { k_add_scalar<T>(b, nb, v); }          \
  extern "C" __global__ void jacobi5_##S(i64 nx, i64 ny, T* s, i64 ns, T* d, i64 nd) { k_jacobi5<T>(nx, ny, s, ns, d, nd); } \
  extern "C" __global__ void matmul_block_##S(i64 n, T* a, i64 na, T* b, i64 nb, T* c, i64 nc) { k_matmul_block<T>(n, a, na, b, nb, c, nc); } \
  extern "C" __global__ void reduce_sum_##S(T* x, i64 nx, T* o, i64 no) { k_reduce_sum<T>(x, nx, o, no); } \
  extern "C" __global__ void spin_##S(double us) { k_spin(us); }

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
//
// With `stamp` (not 0: the device address of a timing slot of 3 words, timing.rs), the
// kernel times itself: block (0, 0)'s first thread writes %globaltimer (ns) at entry into
// word 0; each block, when done, counts itself in word 2, and the last one writes
// %globaltimer into word 1 and sets word 2 back to 0 (so the slot can be used again
// without the host resetting it). The first launch on a slot finds word 2 zeroed.
struct CopyBatch {
  u64 dst[8];
  u64 src[8];
  u64 bytes[8];
  u64 count;
  u64 ordered;
  u64 stamp;
};
__device__ __forceinline__ u64 k_globaltimer() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
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
  u64* st = (u64*)b.stamp;
  if (st && threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.y == 0) st[0] = k_globaltimer();
  if (b.ordered) {
    for (u64 k = 0; k < b.count && k < 8; k++) {
      k_copy_one(b.dst[k], b.src[k], b.bytes[k]);
      __syncthreads();
    }
  } else if (blockIdx.y < b.count) {
    k_copy_one(b.dst[blockIdx.y], b.src[blockIdx.y], b.bytes[blockIdx.y]);
  }
  if (st) {
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();
      unsigned long long blocks = (unsigned long long)gridDim.x * gridDim.y;
      if (atomicAdd((unsigned long long*)&st[2], 1ull) == blocks - 1) {
        __threadfence();
        st[1] = k_globaltimer();
        st[2] = 0;
      }
    }
  }
}
