//! [`LibraryCall`]: a library kernel call with typed arguments, for
//! [`crate::model::ProgramBuilder::library`].

use super::{Diag, Flag, LibraryKernel, Side, Trans, Uplo};
use crate::model::Sel;

/// A library kernel call with typed arguments, for [`crate::model::ProgramBuilder::library`]:
/// the fields are the parameters of the module docs' table, in order; tiles are
/// selections ([`Sel`]: a whole buffer or a section of one).
#[derive(Clone, Copy, Debug)]
pub enum LibraryCall {
    /// `C ← α·op(A)·op(B) + β·C`.
    Gemm {
        transa: Trans,
        transb: Trans,
        m: u64,
        n: u64,
        k: u64,
        alpha: f64,
        a: Sel,
        lda: u64,
        b: Sel,
        ldb: u64,
        beta: f64,
        c: Sel,
        ldc: u64,
    },
    /// `C ← α·op(A)·op(A)ᵀ + β·C` in the `uplo` triangle.
    Syrk {
        uplo: Uplo,
        trans: Trans,
        n: u64,
        k: u64,
        alpha: f64,
        a: Sel,
        lda: u64,
        beta: f64,
        c: Sel,
        ldc: u64,
    },
    /// `B ← α·op(A)⁻¹·B` or `α·B·op(A)⁻¹`.
    Trsm {
        side: Side,
        uplo: Uplo,
        transa: Trans,
        diag: Diag,
        m: u64,
        n: u64,
        alpha: f64,
        a: Sel,
        lda: u64,
        b: Sel,
        ldb: u64,
    },
    /// Cholesky factorization of `A` in its `uplo` triangle.
    Potrf {
        uplo: Uplo,
        n: u64,
        a: Sel,
        lda: u64,
    },
    /// LU factorization without pivoting of the m×n `A`: `A = L·U` in place.
    Getrf { m: u64, n: u64, a: Sel, lda: u64 },
}

/// One argument of a [`LibraryCall`] in signature order.
#[derive(Clone, Copy, Debug)]
pub enum CallArg {
    Number(f64),
    Tile(Sel),
}

impl LibraryCall {
    /// The kernel called.
    pub fn kernel(&self) -> LibraryKernel {
        match self {
            LibraryCall::Gemm { .. } => LibraryKernel::Gemm,
            LibraryCall::Syrk { .. } => LibraryKernel::Syrk,
            LibraryCall::Trsm { .. } => LibraryKernel::Trsm,
            LibraryCall::Potrf { .. } => LibraryKernel::Potrf,
            LibraryCall::Getrf { .. } => LibraryKernel::Getrf,
        }
    }

    /// The arguments in signature order (flags as their codes).
    pub fn args(&self) -> Vec<CallArg> {
        use CallArg::{Number as N, Tile as S};
        let f = |x: Flag| N(f64::from(x.code()));
        let u = |x: u64| N(x as f64);
        match *self {
            LibraryCall::Gemm {
                transa,
                transb,
                m,
                n,
                k,
                alpha,
                a,
                lda,
                b,
                ldb,
                beta,
                c,
                ldc,
            } => vec![
                f(transa.into()),
                f(transb.into()),
                u(m),
                u(n),
                u(k),
                N(alpha),
                S(a),
                u(lda),
                S(b),
                u(ldb),
                N(beta),
                S(c),
                u(ldc),
            ],
            LibraryCall::Syrk {
                uplo,
                trans,
                n,
                k,
                alpha,
                a,
                lda,
                beta,
                c,
                ldc,
            } => vec![
                f(uplo.into()),
                f(trans.into()),
                u(n),
                u(k),
                N(alpha),
                S(a),
                u(lda),
                N(beta),
                S(c),
                u(ldc),
            ],
            LibraryCall::Trsm {
                side,
                uplo,
                transa,
                diag,
                m,
                n,
                alpha,
                a,
                lda,
                b,
                ldb,
            } => vec![
                f(side.into()),
                f(uplo.into()),
                f(transa.into()),
                f(diag.into()),
                u(m),
                u(n),
                N(alpha),
                S(a),
                u(lda),
                S(b),
                u(ldb),
            ],
            LibraryCall::Potrf { uplo, n, a, lda } => {
                vec![f(uplo.into()), u(n), S(a), u(lda)]
            }
            LibraryCall::Getrf { m, n, a, lda } => vec![u(m), u(n), S(a), u(lda)],
        }
    }
}
