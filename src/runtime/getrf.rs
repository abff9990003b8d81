//! `getrf` without pivoting on the host ([`crate::model::library`]): LAPACK has no
//! non-pivoting `?getrf`, so this is a recursive right-looking LU (Toledo's recursion,
//! the shape of LAPACK 3.6's `?getrf2` without its row interchanges) whose work is BLAS
//! level-3 calls of the system OpenBLAS, on the calling thread (the caller set OpenBLAS
//! to one thread, `blas.rs`):
//!
//! ```text
//! lu(A: m×n), m ≥ n:
//!   n ≤ BASE:  unblocked: for each column j, pivot p = A(j, j) (zero or non-finite:
//!              fail with info = j + 1), A(j+1:, j) /= p, A(j+1:, j+1:) −= A(j+1:, j)·A(j, j+1:)
//!   else:      n1 = n / 2, A = [A11 A12; A21 A22] (A11 n1×n1)
//!              lu([A11; A21])
//!              A12 ← L11⁻¹·A12                      trsm(left, lower, N, unit)
//!              A22 ← A22 − A21·A12                  gemm(N, N, −1, 1)
//!              lu(A22)
//! lu(A: m×n), m < n:  lu(A(:, 0:m)), then A(:, m:) ← L⁻¹·A(:, m:) (trsm as above)
//! ```
//!
//! The result is stored as LAPACK `?getrf` stores it with `IPIV(i) = i`: `U` on and above
//! the diagonal, the strict lower part of the unit lower triangular `L` below it.
//!
//! A pivot `U(k, k)` (1-based `k`) that is zero or not finite stops the factorization
//! with `info = k`: the error is [`library::getrf_failure`] (zero, LAPACK's `info > 0`)
//! or [`library::getrf_nonfinite_failure`]; the tile then holds the partial factor.

use crate::model::library;
use crate::model::ElemType;
use cblas_sys::{CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasUnit};
use std::ffi::c_int;

/// Columns at or below which the recursion ends in the unblocked loop.
const BASE: usize = 16;

/// The real types with their BLAS routines.
trait Real: Copy + PartialEq + std::ops::Div<Output = Self> + std::ops::Mul<Output = Self> {
    fn zero() -> Self;
    fn finite(self) -> bool;
    fn sub(self, o: Self) -> Self;
    /// `B ← L⁻¹·B`, `L` the unit lower triangle of the `m × m` `a`, `B` `m × n`.
    ///
    /// # Safety
    /// Both matrices valid for their column-major extents.
    unsafe fn trsm_llnu(m: c_int, n: c_int, a: *const Self, lda: c_int, b: *mut Self);
    /// `C ← C − A·B`, `A` `m × k`, `B` `k × n`, all with leading dimension `ld`.
    ///
    /// # Safety
    /// All three valid for their column-major extents; `C` overlapping neither.
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemm_sub(
        m: c_int,
        n: c_int,
        k: c_int,
        a: *const Self,
        b: *const Self,
        c: *mut Self,
        ld: c_int,
    );
}

macro_rules! real {
    ($t:ty, $trsm:ident, $gemm:ident) => {
        impl Real for $t {
            fn zero() -> Self {
                0.0
            }
            fn finite(self) -> bool {
                self.is_finite()
            }
            fn sub(self, o: Self) -> Self {
                self - o
            }
            unsafe fn trsm_llnu(m: c_int, n: c_int, a: *const Self, lda: c_int, b: *mut Self) {
                // SAFETY: the caller's contract.
                unsafe {
                    cblas_sys::$trsm(
                        CblasColMajor,
                        CblasLeft,
                        CblasLower,
                        CblasNoTrans,
                        CblasUnit,
                        m,
                        n,
                        1.0,
                        a,
                        lda,
                        b,
                        lda,
                    )
                }
            }
            unsafe fn gemm_sub(
                m: c_int,
                n: c_int,
                k: c_int,
                a: *const Self,
                b: *const Self,
                c: *mut Self,
                ld: c_int,
            ) {
                // SAFETY: the caller's contract.
                unsafe {
                    cblas_sys::$gemm(
                        CblasColMajor,
                        CblasNoTrans,
                        CblasNoTrans,
                        m,
                        n,
                        k,
                        -1.0,
                        a,
                        ld,
                        b,
                        ld,
                        1.0,
                        c,
                        ld,
                    )
                }
            }
        }
    };
}

real!(f32, cblas_strsm, cblas_sgemm);
real!(f64, cblas_dtrsm, cblas_dgemm);

/// A failed pivot: its 1-based index and whether it was zero (else non-finite).
struct Pivot {
    info: usize,
    zero: bool,
}

/// Factors the `m × n` tile at `a` (leading dimension `lda`) in place (module docs).
///
/// Errors: a zero or non-finite pivot ([`library::getrf_failure`],
/// [`library::getrf_nonfinite_failure`]).
///
/// # Safety
/// `a` valid for reads and writes of `lda·(n − 1) + m` elements of `ty` (f32 or f64),
/// used by no one else during the call; `m, n ≤ lda`-wise checked by the caller
/// (`library::check_shapes`).
pub(super) unsafe fn getrf(
    ty: ElemType,
    m: usize,
    n: usize,
    a: *mut u8,
    lda: usize,
) -> Result<(), String> {
    // SAFETY: the caller's contract.
    let r = unsafe {
        match ty {
            ElemType::F32 => lu(m, n, a as *mut f32, lda),
            _ => lu(m, n, a as *mut f64, lda),
        }
    };
    r.map_err(|p| {
        let info = p.info as i32;
        match p.zero {
            true => library::getrf_failure(ty, info),
            false => library::getrf_nonfinite_failure(ty, info),
        }
    })
}

/// # Safety
/// As [`getrf`].
unsafe fn lu<T: Real>(m: usize, n: usize, a: *mut T, lda: usize) -> Result<(), Pivot> {
    if m == 0 || n == 0 {
        return Ok(());
    }
    let at = |i: usize, j: usize| i + j * lda;
    let ld = lda as c_int;
    if m < n {
        // SAFETY (both): sub-blocks of the caller's tile.
        unsafe { lu(m, m, a, lda) }?;
        unsafe { T::trsm_llnu(m as c_int, (n - m) as c_int, a, ld, a.add(at(0, m))) };
        return Ok(());
    }
    if n <= BASE {
        // SAFETY: as the caller's.
        return unsafe { unblocked(m, n, a, lda) };
    }
    let n1 = n / 2;
    let n2 = n - n1;
    // SAFETY (all): sub-blocks of the caller's tile, m ≥ n ≥ n1, disjoint where written.
    unsafe { lu(m, n1, a, lda) }?;
    let (a12, a21, a22) = unsafe { (a.add(at(0, n1)), a.add(at(n1, 0)), a.add(at(n1, n1))) };
    unsafe { T::trsm_llnu(n1 as c_int, n2 as c_int, a, ld, a12) };
    unsafe {
        T::gemm_sub(
            (m - n1) as c_int,
            n2 as c_int,
            n1 as c_int,
            a21,
            a12,
            a22,
            ld,
        )
    };
    unsafe { lu(m - n1, n2, a22, lda) }.map_err(|p| Pivot {
        info: p.info + n1,
        ..p
    })
}

/// The unblocked loop (module docs) on an `m × n` tile, `m ≥ n`.
///
/// # Safety
/// As [`getrf`].
unsafe fn unblocked<T: Real>(m: usize, n: usize, a: *mut T, lda: usize) -> Result<(), Pivot> {
    // SAFETY: every index below is (i, j) with i < m, j < n: inside the tile.
    let a = unsafe { std::slice::from_raw_parts_mut(a, lda * (n - 1) + m) };
    for j in 0..n {
        let p = a[j + j * lda];
        if p == T::zero() || !p.finite() {
            return Err(Pivot {
                info: j + 1,
                zero: p == T::zero(),
            });
        }
        for i in j + 1..m {
            a[i + j * lda] = a[i + j * lda] / p;
        }
        for k in j + 1..n {
            let u = a[j + k * lda];
            for i in j + 1..m {
                a[i + k * lda] = a[i + k * lda].sub(a[i + j * lda] * u);
            }
        }
    }
    Ok(())
}
