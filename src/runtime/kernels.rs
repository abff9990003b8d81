//! The built-in kernel library as `extern "C"` functions, one per kernel and element type
//! (`saxpy_f32`, `saxpy_f64`, ... `spin_u8`), looked up with [`builtin_symbol`].
//!
//! Host ABI (the same a user shared library must export): every buffer parameter is
//! passed as `(T* ptr, int64_t len_elements)`, every scalar by value, in signature order;
//! the return type is `void`. See [`crate::model::builtin_kernels`] for what each kernel
//! computes.
//!
//! Arithmetic: floats use IEEE operations in `T`; integers wrap (two's complement, `u8`
//! modulo 256); integer division truncates. Element-wise loops run over the shortest
//! buffer argument's length; kernels longer than [`PAR_THRESHOLD`] elements are split over
//! rayon's pool (element-wise results do not depend on the split). `reduce_sum` is
//! sequential in index order so its float result is reproducible.
//!
//! Buffers may alias (e.g. `add(x, x, z)`), so the kernels work through raw pointers
//! element by element and never form overlapping Rust references.

use rayon::prelude::*;
use std::ffi::c_void;
use std::time::{Duration, Instant};

/// Element counts above this run in parallel on rayon's pool.
pub const PAR_THRESHOLD: i64 = 1 << 16;

/// Element arithmetic for the kernels.
pub(crate) trait Elem: Copy + Send + Sync + 'static {
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn div_small(self, d: u8) -> Self;
    fn one() -> Self;
    fn zero() -> Self;
}

macro_rules! float_elem {
    ($t:ty) => {
        impl Elem for $t {
            fn add(self, o: Self) -> Self {
                self + o
            }
            fn mul(self, o: Self) -> Self {
                self * o
            }
            fn div_small(self, d: u8) -> Self {
                self / (d as $t)
            }
            fn one() -> Self {
                1.0
            }
            fn zero() -> Self {
                0.0
            }
        }
    };
}
macro_rules! int_elem {
    ($t:ty) => {
        impl Elem for $t {
            fn add(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            fn mul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            fn div_small(self, d: u8) -> Self {
                self.wrapping_div(d as $t)
            }
            fn one() -> Self {
                1
            }
            fn zero() -> Self {
                0
            }
        }
    };
}
float_elem!(f32);
float_elem!(f64);
int_elem!(i32);
int_elem!(i64);
int_elem!(u8);

/// A raw pointer that may cross to rayon's threads.
#[derive(Clone, Copy)]
struct P<T>(*mut T);
// SAFETY: the pointer is only dereferenced inside the kernel call, whose caller
// guarantees the memory stays valid for the call; element accesses are per index.
unsafe impl<T> Send for P<T> {}
// SAFETY: as above; distinct indices are touched by distinct rayon tasks.
unsafe impl<T> Sync for P<T> {}

impl<T: Copy> P<T> {
    /// # Safety
    /// `i` is below the length the caller passed for this pointer.
    unsafe fn get(self, i: i64) -> T {
        self.0.add(i as usize).read()
    }
    /// # Safety
    /// As for `get`.
    unsafe fn set(self, i: i64, v: T) {
        self.0.add(i as usize).write(v)
    }
}

fn n_of(lens: &[i64]) -> i64 {
    lens.iter().copied().min().unwrap_or(0).max(0)
}

/// Runs `f(i)` for `i in 0..n`, in parallel for large `n`.
fn for_each(n: i64, f: impl Fn(i64) + Send + Sync) {
    if n > PAR_THRESHOLD {
        (0..n as usize)
            .into_par_iter()
            .with_min_len(4096)
            .for_each(|i| f(i as i64));
    } else {
        (0..n).for_each(f);
    }
}

/// # Safety (all kernel bodies)
/// Each pointer is valid for reads (and writes, for output parameters) of its length in
/// elements; lengths are never negative (negative lengths are treated as 0).
unsafe fn saxpy<T: Elem>(a: T, x: *mut T, nx: i64, y: *mut T, ny: i64) {
    let (x, y) = (P(x), P(y));
    // SAFETY: i < min(nx, ny).
    for_each(n_of(&[nx, ny]), |i| unsafe {
        y.set(i, a.mul(x.get(i)).add(y.get(i)))
    });
}
unsafe fn scale<T: Elem>(a: T, x: *mut T, nx: i64) {
    let x = P(x);
    // SAFETY: i < nx.
    for_each(n_of(&[nx]), |i| unsafe { x.set(i, a.mul(x.get(i))) });
}
unsafe fn add<T: Elem>(x: *mut T, nx: i64, y: *mut T, ny: i64, z: *mut T, nz: i64) {
    let (x, y, z) = (P(x), P(y), P(z));
    // SAFETY: i < min(nx, ny, nz).
    for_each(n_of(&[nx, ny, nz]), |i| unsafe {
        z.set(i, x.get(i).add(y.get(i)))
    });
}
unsafe fn triad<T: Elem>(a: T, x: *mut T, nx: i64, y: *mut T, ny: i64, z: *mut T, nz: i64) {
    let (x, y, z) = (P(x), P(y), P(z));
    // SAFETY: i < min(nx, ny, nz).
    for_each(n_of(&[nx, ny, nz]), |i| unsafe {
        z.set(i, x.get(i).add(a.mul(y.get(i))))
    });
}
unsafe fn copy<T: Elem>(s: *mut T, ns: i64, d: *mut T, nd: i64) {
    let (s, d) = (P(s), P(d));
    // SAFETY: i < min(ns, nd).
    for_each(n_of(&[ns, nd]), |i| unsafe { d.set(i, s.get(i)) });
}
unsafe fn fill<T: Elem>(b: *mut T, nb: i64, v: T) {
    let b = P(b);
    // SAFETY: i < nb.
    for_each(n_of(&[nb]), |i| unsafe { b.set(i, v) });
}
unsafe fn increment<T: Elem>(b: *mut T, nb: i64) {
    let b = P(b);
    // SAFETY: i < nb.
    for_each(n_of(&[nb]), |i| unsafe { b.set(i, b.get(i).add(T::one())) });
}
unsafe fn add_scalar<T: Elem>(b: *mut T, nb: i64, v: T) {
    let b = P(b);
    // SAFETY: i < nb.
    for_each(n_of(&[nb]), |i| unsafe { b.set(i, b.get(i).add(v)) });
}
/// `nx` columns, rows as many of `ny` as fit in the shorter buffer; row-major
/// (`idx = row * nx + col`). Interior: `(c + n + s + w + e) / 5`; boundary copied.
unsafe fn jacobi5<T: Elem>(nx: i64, ny: i64, s: *mut T, ns: i64, d: *mut T, nd: i64) {
    let n = n_of(&[ns, nd]);
    if nx <= 0 || ny <= 0 {
        return;
    }
    let rows = ny.min(n / nx);
    let (s, d) = (P(s), P(d));
    let row = |r: i64| {
        for c in 0..nx {
            let i = r * nx + c;
            // SAFETY: r < rows and c < nx, so every index is < rows * nx <= n.
            unsafe {
                if r == 0 || c == 0 || r == rows - 1 || c == nx - 1 {
                    d.set(i, s.get(i));
                } else {
                    let v = s
                        .get(i)
                        .add(s.get(i - nx))
                        .add(s.get(i + nx))
                        .add(s.get(i - 1))
                        .add(s.get(i + 1));
                    d.set(i, v.div_small(5));
                }
            }
        }
    };
    if rows * nx > PAR_THRESHOLD {
        (0..rows).into_par_iter().for_each(row);
    } else {
        (0..rows).for_each(row);
    }
}
/// `c += a·b` for `n × n` row-major blocks; does nothing if a buffer is shorter than `n²`.
unsafe fn matmul_block<T: Elem>(
    n: i64,
    a: *mut T,
    na: i64,
    b: *mut T,
    nb: i64,
    c: *mut T,
    nc: i64,
) {
    if n <= 0 || n.checked_mul(n).is_none_or(|nn| nn > n_of(&[na, nb, nc])) {
        return;
    }
    let (a, b, c) = (P(a), P(b), P(c));
    let row = |i: i64| {
        for j in 0..n {
            // SAFETY: i, j, k < n, so every index is < n² <= every length.
            unsafe {
                let mut acc = c.get(i * n + j);
                for k in 0..n {
                    acc = acc.add(a.get(i * n + k).mul(b.get(k * n + j)));
                }
                c.set(i * n + j, acc);
            }
        }
    };
    if n * n > PAR_THRESHOLD {
        (0..n).into_par_iter().for_each(row);
    } else {
        (0..n).for_each(row);
    }
}
/// `out[0] = Σ x[i]` over all of `x`, sequentially; nothing if `out` is empty.
unsafe fn reduce_sum<T: Elem>(x: *mut T, nx: i64, out: *mut T, nout: i64) {
    if nout < 1 {
        return;
    }
    let x = P(x);
    let mut acc = T::zero();
    for i in 0..nx.max(0) {
        // SAFETY: i < nx.
        acc = acc.add(unsafe { x.get(i) });
    }
    // SAFETY: nout >= 1.
    unsafe { P(out).set(0, acc) }
}
/// Busy-waits `us` microseconds (negative or NaN: returns at once).
fn spin(us: f64) {
    if us.is_nan() || us <= 0.0 {
        return;
    }
    let d = Duration::from_secs_f64(us.min(crate::model::SPIN_MAX_US) * 1e-6);
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

// Generates the `extern "C"` wrappers: one module per element type.
macro_rules! instantiate {
    ($($m:ident: $t:ty),*) => {
        $(
            mod $m {
                type T = $t;
                // SAFETY (all wrappers): callers pass valid `(ptr, len)` pairs per the
                // host ABI; the generic bodies document their requirements.
                pub(super) unsafe extern "C" fn saxpy(a: T, x: *mut T, nx: i64, y: *mut T, ny: i64) { super::saxpy(a, x, nx, y, ny) }
                pub(super) unsafe extern "C" fn scale(a: T, x: *mut T, nx: i64) { super::scale(a, x, nx) }
                pub(super) unsafe extern "C" fn add(x: *mut T, nx: i64, y: *mut T, ny: i64, z: *mut T, nz: i64) { super::add(x, nx, y, ny, z, nz) }
                pub(super) unsafe extern "C" fn triad(a: T, x: *mut T, nx: i64, y: *mut T, ny: i64, z: *mut T, nz: i64) { super::triad(a, x, nx, y, ny, z, nz) }
                pub(super) unsafe extern "C" fn copy(s: *mut T, ns: i64, d: *mut T, nd: i64) { super::copy(s, ns, d, nd) }
                pub(super) unsafe extern "C" fn fill(b: *mut T, nb: i64, v: T) { super::fill(b, nb, v) }
                pub(super) unsafe extern "C" fn increment(b: *mut T, nb: i64) { super::increment(b, nb) }
                pub(super) unsafe extern "C" fn add_scalar(b: *mut T, nb: i64, v: T) { super::add_scalar(b, nb, v) }
                pub(super) unsafe extern "C" fn jacobi5(nx: i64, ny: i64, s: *mut T, ns: i64, d: *mut T, nd: i64) { super::jacobi5(nx, ny, s, ns, d, nd) }
                pub(super) unsafe extern "C" fn matmul_block(n: i64, a: *mut T, na: i64, b: *mut T, nb: i64, c: *mut T, nc: i64) { super::matmul_block(n, a, na, b, nb, c, nc) }
                pub(super) unsafe extern "C" fn reduce_sum(x: *mut T, nx: i64, o: *mut T, no: i64) { super::reduce_sum(x, nx, o, no) }
                pub(super) extern "C" fn spin(us: f64) { super::spin(us) }
            }
        )*
    };
}
instantiate!(k_f32: f32, k_f64: f64, k_i32: i32, k_i64: i64, k_u8: u8);

macro_rules! lookup {
    ($m:ident, $name:expr) => {
        match $name {
            "saxpy" => Some($m::saxpy as *const c_void),
            "scale" => Some($m::scale as *const c_void),
            "add" => Some($m::add as *const c_void),
            "triad" => Some($m::triad as *const c_void),
            "copy" => Some($m::copy as *const c_void),
            "fill" => Some($m::fill as *const c_void),
            "increment" => Some($m::increment as *const c_void),
            "add_scalar" => Some($m::add_scalar as *const c_void),
            "jacobi5" => Some($m::jacobi5 as *const c_void),
            "matmul_block" => Some($m::matmul_block as *const c_void),
            "reduce_sum" => Some($m::reduce_sum as *const c_void),
            "spin" => Some($m::spin as *const c_void),
            _ => None,
        }
    };
}

/// The code address of built-in `name` instantiated for `ty`; `None` if no such kernel.
pub fn builtin_symbol(name: &str, ty: crate::model::ElemType) -> Option<*const c_void> {
    use crate::model::ElemType;
    match ty {
        ElemType::F32 => lookup!(k_f32, name),
        ElemType::F64 => lookup!(k_f64, name),
        ElemType::I32 => lookup!(k_i32, name),
        ElemType::I64 => lookup!(k_i64, name),
        ElemType::U8 => lookup!(k_u8, name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saxpy_and_aliasing_add() {
        let x = [1.0f32, 2.0, 3.0];
        let mut y = [10.0f32, 20.0, 30.0, 40.0];
        // SAFETY: lengths match the arrays.
        unsafe { saxpy(2.0f32, x.as_ptr() as *mut f32, 3, y.as_mut_ptr(), 4) };
        assert_eq!(y, [12.0, 24.0, 36.0, 40.0]);
        let mut a = [1i32, 2, 3];
        let p = a.as_mut_ptr();
        // SAFETY: all three pointers cover `a` (aliasing is allowed).
        unsafe { add(p, 3, p, 3, p, 3) };
        assert_eq!(a, [2, 4, 6]);
    }

    #[test]
    fn integer_kernels_wrap() {
        let mut b = [255u8, 1];
        // SAFETY: length 2.
        unsafe { increment(b.as_mut_ptr(), 2) };
        assert_eq!(b, [0, 2]);
    }

    #[test]
    fn jacobi_matmul_reduce() {
        // 3x3 grid: only the centre is interior.
        let s: Vec<f64> = (0..9).map(|i| i as f64).collect();
        let mut d = vec![0.0f64; 9];
        // SAFETY: both 9 elements.
        unsafe { jacobi5(3, 3, s.as_ptr() as *mut f64, 9, d.as_mut_ptr(), 9) };
        assert_eq!(d, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
        let a = [1i64, 2, 3, 4];
        let b = [5i64, 6, 7, 8];
        let mut c = [1i64, 1, 1, 1];
        // SAFETY: all 4 elements (n = 2).
        unsafe {
            matmul_block(
                2,
                a.as_ptr() as *mut i64,
                4,
                b.as_ptr() as *mut i64,
                4,
                c.as_mut_ptr(),
                4,
            )
        };
        assert_eq!(c, [20, 23, 44, 51]);
        let x = [1u8, 2, 3];
        let mut o = [0u8];
        // SAFETY: lengths match.
        unsafe { reduce_sum(x.as_ptr() as *mut u8, 3, o.as_mut_ptr(), 1) };
        assert_eq!(o, [6]);
    }

    #[test]
    fn large_saxpy_runs_in_parallel_and_matches() {
        let n = (PAR_THRESHOLD * 2 + 3) as usize;
        let x: Vec<f64> = (0..n).map(|i| i as f64).collect();
        let mut y = vec![1.0f64; n];
        // SAFETY: lengths match.
        unsafe {
            saxpy(
                0.5,
                x.as_ptr() as *mut f64,
                n as i64,
                y.as_mut_ptr(),
                n as i64,
            )
        };
        assert!(y
            .iter()
            .enumerate()
            .all(|(i, v)| *v == 0.5 * i as f64 + 1.0));
        assert!(builtin_symbol("saxpy", crate::model::ElemType::U8).is_some());
        assert!(builtin_symbol("nope", crate::model::ElemType::U8).is_none());
    }
}
