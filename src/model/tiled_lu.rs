//! Tiled LU factorization without pivoting as a program of library tile kernels
//! ([`tiled_lu`]), in the tile layout, data styles and matrix of [`super::tiled`]; its
//! result is checked by [`super::residual::lu_residual`].

use super::library::{Diag, LibraryCall, Side, Trans, Uplo};
use super::program::Program;
use super::tiled::{factorization, square_gemm, Tiling, TilingError};
use super::Sel;

/// The tiled LU of [`tiled_lu_lookahead`] in its written order (look-ahead 0).
///
/// Panics if [`Tiling::validate`] refuses `t`, with its message; [`try_tiled_lu`] returns
/// it instead.
pub fn tiled_lu(t: &Tiling) -> Program {
    tiled_lu_lookahead(t, 0)
}

/// [`tiled_lu`], or the [`TilingError`] for `t` (nothing is built).
pub fn try_tiled_lu(t: &Tiling) -> Result<Program, TilingError> {
    try_tiled_lu_lookahead(t, 0)
}

/// Right-looking tiled LU `A = L·U` without pivoting (`L` unit lower, `U` upper), as
/// StarPU's `lu_implicit` example (`examples/lu/xlu_implicit.c`, non-pivoting unless
/// `-piv`) and PLASMA's `pdgetrf_nopiv` order the tasks:
///
/// ```text
/// for k in 0..nt:
///   getrf_k:      getrf(A[k][k])                                     A_kk = L_kk·U_kk
///   for j in k+1..nt:
///     trsm_k_j:   trsm(left, L, N, unit, 1, A[k][k], A[k][j])        A_kj ← L_kk⁻¹·A_kj
///   for i in k+1..nt:
///     trsm_i_k:   trsm(right, U, N, non-unit, 1, A[k][k], A[i][k])   A_ik ← A_ik·U_kk⁻¹
///   for i in k+1..nt, j in k+1..nt:
///     gemm_i_j_k: gemm(N, N, -1, A[i][k], A[k][j], 1, A[i][j])       A_ij −= A_ik·A_kj
/// taskwait
/// ```
///
/// One buffer `A` (`n²` elements of `t.ty`, tile layout, overwritten by `L` below the
/// diagonal and `U` on and above it, as LAPACK `?getrf` stores them); with
/// [`super::MatrixInit::Random`] also `ones` and the `shift_k` regions that add `n` to the
/// diagonal, making `A` strictly diagonally dominant, so no pivot is needed ([`super::tiled`]
/// module docs). Regions: `nt` getrf, `nt(nt−1)` trsm, `nt(nt−1)(2nt−1)/6` gemm. Program
/// name `lu_{s|d}_n{n}_t{tile}_{style}` (`_la{lookahead}` added when `lookahead > 0`).
/// Flops: [`lu_flops`].
///
/// `lookahead` as for [`super::tiled::tiled_cholesky_lookahead`]: with depth `d > 0` the
/// updates of step `k` that feed the next `d` panels (tiles `(i, j)` with
/// `min(i, j) ≤ k + d`: the panel of step `k + 1` reads row and column `k + 1`) come right
/// after panel `k`, the others after the panel (getrf and both trsm) of step `k + 1`;
/// the dependences are the same.
///
/// Panics if [`Tiling::validate`] refuses `t`, with its message;
/// [`try_tiled_lu_lookahead`] returns it instead.
pub fn tiled_lu_lookahead(t: &Tiling, lookahead: u64) -> Program {
    try_tiled_lu_lookahead(t, lookahead).unwrap_or_else(|e| panic!("{e}"))
}

/// [`tiled_lu_lookahead`], or the [`TilingError`] for `t` (nothing is built).
pub fn try_tiled_lu_lookahead(t: &Tiling, lookahead: u64) -> Result<Program, TilingError> {
    factorization(t, ("lu", lookahead, 0), |e, tile| {
        let (nt, b) = (t.tiles(), t.tile);
        let trsm = |side, uplo, diag, kk, x| LibraryCall::Trsm {
            side,
            uplo,
            transa: Trans::N,
            diag,
            m: b,
            n: b,
            alpha: 1.0,
            a: Sel::Part(kk),
            lda: b,
            b: Sel::Part(x),
            ldb: b,
        };
        for k in 0..nt {
            let kk = tile(k, k);
            let getrf = LibraryCall::Getrf {
                m: b,
                n: b,
                a: Sel::Part(kk),
                lda: b,
            };
            e.task((k, None), &format!("getrf_{k}"), getrf, &[], kk);
            for j in k + 1..nt {
                let call = trsm(Side::Left, Uplo::Lower, Diag::Unit, kk, tile(k, j));
                e.task((k, None), &format!("trsm_{k}_{j}"), call, &[kk], tile(k, j));
            }
            for i in k + 1..nt {
                let call = trsm(Side::Right, Uplo::Upper, Diag::NonUnit, kk, tile(i, k));
                e.task((k, None), &format!("trsm_{i}_{k}"), call, &[kk], tile(i, k));
            }
            for i in k + 1..nt {
                for j in k + 1..nt {
                    let (aik, akj) = (tile(i, k), tile(k, j));
                    let gemm = square_gemm(b, Trans::N, Trans::N, -1.0, aik, akj, 1.0);
                    e.task(
                        (k, Some((i, j))),
                        &format!("gemm_{i}_{j}_{k}"),
                        gemm(tile(i, j)),
                        &[aik, akj],
                        tile(i, j),
                    );
                }
            }
        }
    })
}

/// The flops credited to an LU factorization of order `n`: `2n³/3` (the count StarPU's
/// `lu_implicit` and LAPACK's benchmarks report GFLOP/s by).
pub fn lu_flops(n: u64) -> f64 {
    2.0 * (n as f64).powi(3) / 3.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Construct, DataStyle, ElemType, MatrixInit};

    #[test]
    fn tiled_lu_has_starpu_lu_implicit_regions() {
        let t = Tiling {
            n: 12,
            tile: 3,
            ty: ElemType::F64,
            style: DataStyle::Entered,
            init: MatrixInit::Random(1),
        };
        let p = tiled_lu(&t);
        assert_eq!(p.name, "lu_d_n12_t3_entered");
        let names: Vec<&str> = p
            .body
            .iter()
            .filter_map(|c| match c {
                Construct::Target(r) => Some(r.name.as_str()),
                _ => None,
            })
            .collect();
        let count = |k: &str| names.iter().filter(|n| n.starts_with(k)).count();
        // nt = 4: 4 shift, 4 getrf, 12 trsm, 1 + 4 + 9 = 14 gemm.
        assert_eq!(
            [
                count("shift_"),
                count("getrf_"),
                count("trsm_"),
                count("gemm_")
            ],
            [4, 4, 12, 14]
        );
        assert_eq!(names[4..6], ["getrf_0", "trsm_0_1"]);
        assert_eq!(lu_flops(3), 18.0);
    }
}
