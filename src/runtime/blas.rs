//! The library tile kernels ([`crate::model::library`]) on the host: the system
//! BLAS/LAPACK, OpenBLAS (Debian's `libopenblas-dev`, the BLAS StarPU's Debian packages
//! use; installed by `scripts/setup.sh`), called through the `cblas-sys` (CBLAS) and
//! `lapack-sys` (Fortran LAPACK) bindings of the blas-lapack-rs project and linked here
//! with `-lopenblas` (one `#[link]`, no build script).
//!
//! One thread per tile: the streams (the host plugin's workers) are the parallelism, as
//! in StarPU (`OPENBLAS_NUM_THREADS=1`). Before each call, OpenBLAS's thread count is set
//! to 1 if it is not (`openblas_set_num_threads`; OpenBLAS 0.3.21 has no per-thread
//! count, so this is for the whole process: a caller that wants a multi-threaded OpenBLAS
//! call in the same process sets its own count before it).
//!
//! Used by the host plugin's stream workers, host tasks and the reference interpreter,
//! through [`super::ffi::HostKernel::call`].

use super::ffi::RawArg;
use crate::model::library::{self, LibraryKernel, Side, TileArgs, Trans, Uplo};
use crate::model::ElemType;
use cblas_sys::{
    CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, CblasRight, CblasTrans,
    CblasUnit, CblasUpper, CBLAS_DIAG, CBLAS_SIDE, CBLAS_TRANSPOSE, CBLAS_UPLO,
};
use std::ffi::{c_char, c_int};

#[link(name = "openblas")]
extern "C" {
    fn openblas_set_num_threads(n: c_int);
    fn openblas_get_num_threads() -> c_int;
}

/// Makes OpenBLAS run each call on the calling thread alone (see the module docs).
fn one_thread() {
    // SAFETY: both functions only read or set OpenBLAS's thread count.
    unsafe {
        if openblas_get_num_threads() != 1 {
            openblas_set_num_threads(1);
        }
    }
}

fn trans(t: Trans) -> CBLAS_TRANSPOSE {
    match t {
        Trans::N => CblasNoTrans,
        Trans::T => CblasTrans,
    }
}

fn uplo(u: Uplo) -> CBLAS_UPLO {
    match u {
        Uplo::Upper => CblasUpper,
        Uplo::Lower => CblasLower,
    }
}

fn side(s: Side) -> CBLAS_SIDE {
    match s {
        Side::Left => CblasLeft,
        Side::Right => CblasRight,
    }
}

fn diag(d: library::Diag) -> CBLAS_DIAG {
    match d {
        library::Diag::NonUnit => CblasNonUnit,
        library::Diag::Unit => CblasUnit,
    }
}

/// Runs library kernel `k` on element type `ty` with `args` (signature order, checked
/// against the signature by the caller).
///
/// Errors (the message after "kernel `name` failed: "): arguments that break the
/// kernel's shape rules ([`library::decode`], [`library::check_shapes`]; the lowering
/// refuses those first), a written tile overlapping another, and a `potrf` whose matrix
/// is not positive definite ([`library::potrf_failure`], LAPACK's `info`) or whose factor
/// has a NaN on its diagonal ([`library::potrf_nan_failure`]), and a `getrf` (no
/// pivoting, `getrf.rs`) with a zero or non-finite pivot ([`library::getrf_failure`],
/// [`library::getrf_nonfinite_failure`]).
///
/// # Safety
/// As [`super::ffi::HostKernel::call`]: every tile pointer valid for reads and writes of
/// its `len` elements of `ty` for the whole call, the written tile used by no one else.
pub unsafe fn call(k: LibraryKernel, ty: ElemType, args: &[RawArg]) -> Result<(), String> {
    let mut scalars = Vec::with_capacity(args.len());
    let mut tiles = Vec::with_capacity(3);
    for a in args {
        match *a {
            RawArg::Scalar(s) => scalars.push(s.as_f64()),
            RawArg::Buffer { ptr, len, .. } => tiles.push((ptr, len)),
        }
    }
    let t = library::decode(k, &scalars)?;
    let lens: Vec<u64> = tiles.iter().map(|&(_, l)| l).collect();
    library::check_shapes(&t, ty, &lens)?;
    let starts: Vec<(u64, u64)> = tiles.iter().map(|&(p, _)| (0, p as u64)).collect();
    if let Some(i) = library::aliased_tile(&t, &starts, ty.size_bytes()) {
        return Err(format!(
            "the written tile overlaps tile {} of the call (BLAS leaves aliased arguments undefined)",
            i + 1
        ));
    }
    one_thread();
    let ptr = |i: usize| tiles[i].0;
    // SAFETY (all calls below): the shapes and leading dimensions were checked against
    // the tiles' lengths (`check_shapes`), every dimension fits `c_int`, and the pointers
    // are valid for those lengths (this function's contract).
    match ty {
        ElemType::F32 => unsafe { run_f32(&t, ptr) },
        _ => unsafe { run_f64(&t, ptr) },
    }
}

macro_rules! run_typed {
    ($name:ident, $t:ty, $gemm:ident, $syrk:ident, $trsm:ident, $potrf:ident, $ty:expr) => {
        /// # Safety
        /// See [`call`].
        unsafe fn $name(t: &TileArgs, ptr: impl Fn(usize) -> *mut u8) -> Result<(), String> {
            let i = |v: i64| v as c_int;
            let (m, n, kk) = (i(t.m), i(t.n), i(t.k));
            let (alpha, beta) = (t.alpha as $t, t.beta as $t);
            let [l0, l1, l2] = t.ld.map(i);
            let p = |j: usize| ptr(j) as *mut $t;
            match t.kernel {
                LibraryKernel::Gemm => unsafe {
                    cblas_sys::$gemm(
                        CblasColMajor,
                        trans(t.trans_a),
                        trans(t.trans_b),
                        m,
                        n,
                        kk,
                        alpha,
                        p(0),
                        l0,
                        p(1),
                        l1,
                        beta,
                        p(2),
                        l2,
                    )
                },
                LibraryKernel::Syrk => unsafe {
                    cblas_sys::$syrk(
                        CblasColMajor,
                        uplo(t.uplo),
                        trans(t.trans_a),
                        n,
                        kk,
                        alpha,
                        p(0),
                        l0,
                        beta,
                        p(1),
                        l1,
                    )
                },
                LibraryKernel::Trsm => unsafe {
                    cblas_sys::$trsm(
                        CblasColMajor,
                        side(t.side),
                        uplo(t.uplo),
                        trans(t.trans_a),
                        diag(t.diag),
                        m,
                        n,
                        alpha,
                        p(0),
                        l0,
                        p(1),
                        l1,
                    )
                },
                LibraryKernel::Potrf => {
                    let u: c_char = match t.uplo {
                        Uplo::Upper => b'U' as c_char,
                        Uplo::Lower => b'L' as c_char,
                    };
                    let mut info: c_int = 0;
                    if n > 0 {
                        unsafe { lapack_sys::$potrf(&u, &n, p(0), &l0, &mut info) };
                    }
                    if info > 0 {
                        return Err(library::potrf_failure($ty, info));
                    }
                    if info < 0 {
                        return Err(format!(
                            "potrf: LAPACK info = {info} (argument {} had an illegal value)",
                            -info
                        ));
                    }
                    // OpenBLAS does not test for NaN (reference LAPACK does): a NaN in
                    // the triangle reaches the factor's diagonal, n reads.
                    let a = p(0);
                    for j in 0..n.max(0) as usize {
                        // SAFETY: j < n ≤ lda and the tile holds lda·(n − 1) + n elements.
                        let v = unsafe { *a.add(j + j * l0 as usize) };
                        if v.is_nan() {
                            return Err(library::potrf_nan_failure($ty, j as u64));
                        }
                    }
                }
                LibraryKernel::Getrf => unsafe {
                    super::getrf::getrf($ty, m as usize, n as usize, ptr(0), l0 as usize)?
                },
            }
            Ok(())
        }
    };
}

run_typed!(
    run_f32,
    f32,
    cblas_sgemm,
    cblas_ssyrk,
    cblas_strsm,
    spotrf_,
    ElemType::F32
);
run_typed!(
    run_f64,
    f64,
    cblas_dgemm,
    cblas_dsyrk,
    cblas_dtrsm,
    dpotrf_,
    ElemType::F64
);
