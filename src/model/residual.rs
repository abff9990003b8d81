//! Scaled residuals that check tiled factorizations and products ([`super::tiled`]), the
//! tests LAPACK's test suite applies (`dpot01`: `‖L·Lᵀ − A‖₁ / (n·‖A‖₁·ε)`, `dget01`
//! for LU: `‖L·U − A‖₁ / (n·‖A‖₁·ε)`, accepted
//! below its threshold 30, `THRESH` of the distributed `dtest.in`). Computed in f64 with
//! the system BLAS (`dsyrk`, `dgemm` on the column-major matrices), whatever the
//! precision of the factor; `ε` is the precision's machine epsilon as LAPACK's `xLAMCH('E')`
//! returns it (relative machine precision, `2⁻²⁴` for f32, `2⁻⁵³` for f64).
//!
//! Inputs are in tile layout (as the tiled programs keep their buffers), as f64.

use super::tiled::from_tile_layout;
use super::types::ElemType;
use cblas_sys::{CblasColMajor, CblasLower, CblasNoTrans};

/// The bound a scaled residual must stay below: LAPACK's test threshold (30).
pub const RESIDUAL_BOUND: f64 = 30.0;

/// `xLAMCH('E')` of `ty`: `2⁻²⁴` (f32), `2⁻⁵³` (f64 and anything else).
pub fn epsilon(ty: ElemType) -> f64 {
    if ty == ElemType::F32 {
        (-24f64).exp2()
    } else {
        (-53f64).exp2()
    }
}

/// `d ← d − x·y` for column-major `n × n` matrices (leading dimension `n`): one BLAS
/// `dgemm`, `2n³` flops. Panics if a slice is shorter than `n²`.
fn minus_product(d: &mut [f64], x: &[f64], y: &[f64], n: usize) {
    let nn = n * n;
    assert!(
        d.len() >= nn && x.len() >= nn && y.len() >= nn,
        "minus_product: short matrix"
    );
    if n == 0 {
        return;
    }
    let ni = n as i32;
    // SAFETY: all three hold at least n² elements (asserted), column-major with leading
    // dimension n.
    unsafe {
        cblas_sys::cblas_dgemm(
            CblasColMajor,
            CblasNoTrans,
            CblasNoTrans,
            ni,
            ni,
            ni,
            -1.0,
            x.as_ptr(),
            ni,
            y.as_ptr(),
            ni,
            1.0,
            d.as_mut_ptr(),
            ni,
        )
    };
}

/// The 1-norm (largest column sum of magnitudes) of the symmetric `n × n` matrix whose
/// lower triangle is that of column-major `s`.
fn sym_norm1(s: &[f64], n: usize) -> f64 {
    let mut cols = vec![0.0f64; n];
    for j in 0..n {
        for i in j..n {
            let v = s[i + j * n].abs();
            cols[j] += v;
            if i != j {
                cols[i] += v;
            }
        }
    }
    cols.into_iter().fold(0.0, f64::max)
}

/// `‖A − L·Lᵀ‖₁ / (‖A‖₁·n·ε)` for a Cholesky factor: `a` the matrix before (its lower
/// triangle defines the symmetric `A`) and `l` the factor (its lower triangle is `L`),
/// both `n × n` in tile layout of `tile × tile` tiles; `ty` the precision factored.
/// A correct factorization stays below [`RESIDUAL_BOUND`]; a wrong tile gives `~1/ε`.
/// Returns infinity for a zero `A` with a nonzero difference, NaN if `l` has NaNs.
///
/// Cost: one `dsyrk` of order `n` (`n³` flops) and `O(n²)` more.
///
/// Panics if the lengths are not `n²` or `tile` does not divide `n`.
pub fn cholesky_residual(a: &[f64], l: &[f64], n: usize, tile: usize, ty: ElemType) -> f64 {
    let a = from_tile_layout(a, n, tile);
    let mut l = from_tile_layout(l, n, tile);
    for j in 0..n {
        for i in 0..j {
            l[i + j * n] = 0.0; // the strict upper triangle is not L
        }
    }
    // d ← A − L·Lᵀ in the lower triangle (dsyrk with alpha −1, beta 1).
    let mut d = a.clone();
    if n > 0 {
        let ni = n as i32;
        // SAFETY: `l` and `d` are n×n column-major with leading dimension n.
        unsafe {
            cblas_sys::cblas_dsyrk(
                CblasColMajor,
                CblasLower,
                CblasNoTrans,
                ni,
                ni,
                -1.0,
                l.as_ptr(),
                ni,
                1.0,
                d.as_mut_ptr(),
                ni,
            )
        };
    }
    sym_norm1(&d, n) / (sym_norm1(&a, n) * n as f64 * epsilon(ty))
}

/// `‖C − A·B‖₁ / (‖A‖₁·‖B‖₁·n·ε)` for a product `C = A·B` of `n × n` matrices in tile
/// layout; `ty` the precision computed. Below [`RESIDUAL_BOUND`] when correct.
///
/// Cost: one `dgemm` of order `n` (`2n³` flops) and `O(n²)` more.
///
/// Panics as [`cholesky_residual`].
pub fn gemm_residual(a: &[f64], b: &[f64], c: &[f64], n: usize, tile: usize, ty: ElemType) -> f64 {
    let (a, b) = (from_tile_layout(a, n, tile), from_tile_layout(b, n, tile));
    let mut d = from_tile_layout(c, n, tile);
    minus_product(&mut d, &a, &b, n);
    norm1(&d, n) / (norm1(&a, n) * norm1(&b, n) * n as f64 * epsilon(ty))
}

/// `‖A − L·U‖₁ / (‖A‖₁·n·ε)` for an LU factorization without pivoting (LAPACK's `dget01`
/// test with `IPIV(i) = i`): `a` the matrix before and `lu` the factors as `?getrf`
/// stores them (`U` on and above the diagonal, the strict lower part of the unit lower
/// `L` below it), both `n × n` in tile layout; `ty` the precision factored. Below
/// [`RESIDUAL_BOUND`] when correct; NaN if `lu` has NaNs.
///
/// Cost: one `dgemm` of order `n` (`2n³` flops) and `O(n²)` more.
///
/// Panics as [`cholesky_residual`].
pub fn lu_residual(a: &[f64], lu: &[f64], n: usize, tile: usize, ty: ElemType) -> f64 {
    let a = from_tile_layout(a, n, tile);
    let f = from_tile_layout(lu, n, tile);
    let (mut l, mut u) = (vec![0.0f64; n * n], vec![0.0f64; n * n]);
    for j in 0..n {
        for i in 0..n {
            let v = f[i + j * n];
            match i.cmp(&j) {
                std::cmp::Ordering::Greater => l[i + j * n] = v,
                std::cmp::Ordering::Equal => {
                    l[i + j * n] = 1.0;
                    u[i + j * n] = v;
                }
                std::cmp::Ordering::Less => u[i + j * n] = v,
            }
        }
    }
    let mut d = a.clone();
    minus_product(&mut d, &l, &u, n);
    norm1(&d, n) / (norm1(&a, n) * n as f64 * epsilon(ty))
}

/// The 1-norm (largest column sum of magnitudes) of the column-major `n × n` `m`.
fn norm1(m: &[f64], n: usize) -> f64 {
    (0..n)
        .map(|j| m[j * n..(j + 1) * n].iter().map(|v| v.abs()).sum::<f64>())
        .fold(0.0, f64::max)
}

/// `A` as a [`super::tiled::tiled_cholesky`] (or [`super::tiled_lu::tiled_lu`]) program
/// with [`super::tiled::MatrixInit::Random`] factors it: the initial buffer `initial` (tile layout) with `n` added to the diagonal
/// (what its `shift_k` regions do), for [`cholesky_residual`]. Panics as
/// [`super::tiled::to_tile_layout`].
pub fn shifted_matrix(initial: &[f64], n: usize, tile: usize) -> Vec<f64> {
    let mut full = from_tile_layout(initial, n, tile);
    for i in 0..n {
        full[i + i * n] += n as f64;
    }
    super::tiled::to_tile_layout(&full, n, tile)
}
