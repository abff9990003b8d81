//! cuBLAS and cuSOLVER for the library tile kernels ([`crate::model::library`]): loading,
//! handles, status codes as errors, and one call per kernel, through cudarc's raw `sys`
//! layers (`cudarc::cublas::sys`, `cudarc::cusolver::sys`; CUDA 13.0 bindings).
//!
//! # Loading
//!
//! cudarc opens `libcublas` / `libcusolver` on first use under the names of
//! `cudarc::get_lib_name_candidates` (`libcublas.so`, `libcublas.so.13`, ... `.12`, `.11`)
//! and panics when none opens or a symbol is missing. [`load`] (once per process) first
//! asks cudarc whether each library opens; where not, it opens the same names from the
//! CUDA toolkit's folders (`$CUDA_HOME/lib64`, `$CUDA_PATH/lib64`, `/usr/local/cuda/lib64`,
//! `/usr/local/cuda/targets/x86_64-linux/lib`) and keeps them open, so that the dynamic
//! loader finds them already loaded by their `SONAME` when cudarc asks (glibc `dlopen`
//! returns a loaded object whose `SONAME` matches); then it resolves every entry point
//! used here ([`ENTRY_POINTS`]) inside `catch_unwind`. Failures are one-line reasons.
//!
//! # Calls
//!
//! Column-major tiles and flags as BLAS (`cublas<t>gemm`, `cublas<t>syrk`, `cublas<t>trsm`
//! of the cuBLAS API; `cusolverDn<t>potrf` and `cusolverDn<t>getrf` of cuSOLVER's dense
//! LAPACK API, `getrf` with `devIpiv = NULL`: "no pivoting is performed", cuSOLVER API
//! reference, `cusolverDn<t>getrf`), `alpha` and
//! `beta` by host pointer (`CUBLAS_POINTER_MODE_HOST`, the default: captured by value in a
//! graph), default math mode (no TF32: `CUBLAS_DEFAULT_MATH`), the handle's workspace set
//! by the caller (`cublasSetWorkspace`: the same size on streams and in graphs, so both pick
//! the same kernels and give the same bits). A status other than success is an error
//! naming the routine, the kernel and CUDA's status name, e.g.
//! `cublasSgemm_v2 (gemm, f32): CUBLAS_STATUS_INVALID_VALUE`.

use super::driver::Context;
use crate::model::library::{Diag, LibraryKernel, Side, TileArgs, Trans, Uplo};
use crate::model::ElemType;
use cudarc::cublas::sys as cb;
use cudarc::cusolver::sys as cs;
use std::ffi::{c_int, c_void, CStr};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

/// Every cuBLAS and cuSOLVER entry point this module calls, resolved by [`load`].
pub(super) const ENTRY_POINTS: [(&str, &[&str]); 2] = [
    (
        "cuBLAS",
        &[
            "cublasCreate_v2",
            "cublasDestroy_v2",
            "cublasSetStream_v2",
            "cublasSetWorkspace_v2",
            "cublasGetStatusName",
            "cublasSgemm_v2",
            "cublasDgemm_v2",
            "cublasSsyrk_v2",
            "cublasDsyrk_v2",
            "cublasStrsm_v2",
            "cublasDtrsm_v2",
        ],
    ),
    (
        "cuSOLVER",
        &[
            "cusolverDnCreate",
            "cusolverDnDestroy",
            "cusolverDnSetStream",
            "cusolverDnSpotrf_bufferSize",
            "cusolverDnDpotrf_bufferSize",
            "cusolverDnSpotrf",
            "cusolverDnDpotrf",
            "cusolverDnSgetrf_bufferSize",
            "cusolverDnDgetrf_bufferSize",
            "cusolverDnSgetrf",
            "cusolverDnDgetrf",
        ],
    ),
];

/// cuBLAS workspace per handle, in bytes: cuBLAS's recommendation (cuBLAS API reference,
/// `cublasSetWorkspace`: 32 MiB on Hopper and later, 4 MiB before).
pub(super) fn blas_workspace_bytes(cc_major: i32) -> usize {
    if cc_major >= 9 {
        32 << 20
    } else {
        4 << 20
    }
}

/// Libraries opened from the toolkit folders, kept open for the process.
static PRELOADED: OnceLock<Vec<libloading::Library>> = OnceLock::new();

fn toolkit_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(|k| std::env::var_os(k).map(|d| PathBuf::from(d).join("lib64")))
        .collect();
    dirs.push(PathBuf::from("/usr/local/cuda/lib64"));
    dirs.push(PathBuf::from("/usr/local/cuda/targets/x86_64-linux/lib"));
    dirs
}

/// Opens from the toolkit folders the first of each library stem in `stems` that opens
/// there (`libNAME.so.13`, `.12`, `.11`, `libNAME.so`), in order (dependencies first).
fn preload(stems: &[&str]) -> Vec<libloading::Library> {
    let mut kept = Vec::new();
    for stem in stems {
        'dirs: for d in toolkit_dirs() {
            for suffix in [".so.13", ".so.12", ".so.11", ".so"] {
                let path = d.join(format!("lib{stem}{suffix}"));
                // SAFETY: opening an NVIDIA library runs its initialisers; it is the
                // library cudarc opens next.
                if let Ok(l) = unsafe { libloading::Library::new(&path) } {
                    kept.push(l);
                    break 'dirs;
                }
            }
        }
    }
    kept
}

/// Runs `f` with panics silenced and caught (cudarc's loaders panic).
fn quietly<R>(f: impl FnOnce() -> R + std::panic::UnwindSafe) -> Option<R> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = std::panic::catch_unwind(f).ok();
    std::panic::set_hook(hook);
    r
}

fn load_once() -> Result<(), String> {
    // SAFETY: both only try to open the libraries.
    let present = || unsafe { (cb::is_culib_present(), cs::is_culib_present()) };
    if present() != (true, true) {
        let _ = PRELOADED.set(preload(&[
            "nvJitLink",
            "cublasLt",
            "cublas",
            "cusparse",
            "cusolver",
        ]));
    }
    match present() {
        (true, true) => {}
        (b, _) => {
            let which = if b {
                "cuSOLVER (libcusolver.so.12)"
            } else {
                "cuBLAS (libcublas.so.13)"
            };
            return Err(format!(
                "{which} cannot be opened: not on the loader's path nor in the CUDA toolkit's lib64 folders"
            ));
        }
    }
    // SAFETY: the libraries open (above); `culib` opens them once more and keeps them.
    let libs = quietly(|| unsafe { [cb::culib(), cs::culib()] })
        .ok_or("cuBLAS or cuSOLVER cannot be opened by cudarc")?;
    for (lib, (name, symbols)) in libs.iter().zip(ENTRY_POINTS) {
        let missing: Vec<&str> = symbols
            .iter()
            .copied()
            // SAFETY: a lookup by name; the pointer is not called.
            .filter(|s| unsafe { lib.get::<*const c_void>(s.as_bytes()) }.is_err())
            .collect();
        if !missing.is_empty() {
            return Err(format!("{name} lacks {}", missing.join(", ")));
        }
    }
    Ok(())
}

/// Loads cuBLAS and cuSOLVER once per process (module docs); the one-line reason why
/// not, every time. Never panics.
pub(super) fn load() -> Result<(), String> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    LOADED.get_or_init(load_once).clone()
}

/// `Ok` for `CUBLAS_STATUS_SUCCESS`, else the error of `routine` for `what`.
fn blas_check(routine: &str, what: &str, s: cb::cublasStatus_t) -> Result<(), String> {
    if s == cb::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        return Ok(());
    }
    // SAFETY: cuBLAS is loaded; the name is a static string (or null).
    let p = unsafe { cb::cublasGetStatusName(s) };
    let name = if p.is_null() {
        format!("{s:?}")
    } else {
        // SAFETY: a non-null static NUL-terminated string from cuBLAS.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    };
    Err(format!("{routine} ({what}): {name}"))
}

/// `Ok` for `CUSOLVER_STATUS_SUCCESS`, else the error of `routine` for `what`.
fn solver_check(routine: &str, what: &str, s: cs::cusolverStatus_t) -> Result<(), String> {
    if s == cs::cusolverStatus_t::CUSOLVER_STATUS_SUCCESS {
        return Ok(());
    }
    Err(format!("{routine} ({what}): {s:?}"))
}

/// A cuBLAS handle and a cuSOLVER dense handle of one context, both bound to one stream
/// at a time. Dropping it destroys both (context made current; errors recorded there).
pub(super) struct Handles {
    blas: cb::cublasHandle_t,
    solver: cs::cusolverDnHandle_t,
    ctx: Arc<Context>,
}

// SAFETY: the handles are used by one thread at a time (each owner locks it or owns
// the stream it is bound to); cuBLAS and cuSOLVER handles may move between threads.
unsafe impl Send for Handles {}
// SAFETY: as above.
unsafe impl Sync for Handles {}

impl Handles {
    /// New handles in `ctx` (made current), after [`load`] succeeded.
    pub(super) fn create(ctx: &Arc<Context>) -> Result<Handles, String> {
        ctx.bind().map_err(String::from)?;
        let mut blas: cb::cublasHandle_t = std::ptr::null_mut();
        // SAFETY: valid out-pointer; cuBLAS is loaded; the context is current.
        blas_check("cublasCreate_v2", "handle", unsafe {
            cb::cublasCreate_v2(&mut blas)
        })?;
        let mut solver: cs::cusolverDnHandle_t = std::ptr::null_mut();
        // SAFETY: as above, for cuSOLVER.
        let r = solver_check("cusolverDnCreate", "handle", unsafe {
            cs::cusolverDnCreate(&mut solver)
        });
        if let Err(e) = r {
            // SAFETY: the handle just made, destroyed once.
            unsafe { cb::cublasDestroy_v2(blas) };
            return Err(e);
        }
        Ok(Handles {
            blas,
            solver,
            ctx: ctx.clone(),
        })
    }

    /// Binds both handles to `stream` and the cuBLAS handle to the workspace
    /// `workspace..workspace + bytes` (device memory of the context, used by nothing
    /// else while calls on this binding may run).
    ///
    /// # Safety
    /// A live stream of the handles' context; live device memory; the context current.
    pub(super) unsafe fn bind(
        &self,
        stream: *mut c_void,
        workspace: u64,
        bytes: usize,
    ) -> Result<(), String> {
        blas_check("cublasSetStream_v2", "handle", unsafe {
            cb::cublasSetStream_v2(self.blas, stream as cb::cudaStream_t)
        })?;
        blas_check("cublasSetWorkspace_v2", "handle", unsafe {
            cb::cublasSetWorkspace_v2(self.blas, workspace as usize as *mut c_void, bytes)
        })?;
        solver_check("cusolverDnSetStream", "handle", unsafe {
            cs::cusolverDnSetStream(self.solver, stream as cs::cudaStream_t)
        })
    }

    /// The cuSOLVER workspace of `t` (a `potrf` or `getrf`) on a tile at `a`, in bytes
    /// (`cusolverDn<t>potrf_bufferSize`, `cusolverDn<t>getrf_bufferSize`).
    ///
    /// # Safety
    /// `a` a device tile holding `t`'s matrix; the context current.
    pub(super) unsafe fn solver_bytes(
        &self,
        t: &TileArgs,
        ty: ElemType,
        a: u64,
    ) -> Result<usize, String> {
        let (m, n, lda) = (t.m as c_int, t.n as c_int, t.ld[0] as c_int);
        let mut lwork: c_int = 0;
        let what = format!("{}, {ty}", t.kernel.name());
        match (t.kernel, ty) {
            (LibraryKernel::Getrf, ElemType::F32) => {
                solver_check("cusolverDnSgetrf_bufferSize", &what, unsafe {
                    cs::cusolverDnSgetrf_bufferSize(
                        self.solver,
                        m,
                        n,
                        a as *mut f32,
                        lda,
                        &mut lwork,
                    )
                })?
            }
            (LibraryKernel::Getrf, _) => {
                solver_check("cusolverDnDgetrf_bufferSize", &what, unsafe {
                    cs::cusolverDnDgetrf_bufferSize(
                        self.solver,
                        m,
                        n,
                        a as *mut f64,
                        lda,
                        &mut lwork,
                    )
                })?
            }
            (_, ElemType::F32) => solver_check("cusolverDnSpotrf_bufferSize", &what, unsafe {
                cs::cusolverDnSpotrf_bufferSize(
                    self.solver,
                    fill_s(t.uplo),
                    n,
                    a as *mut f32,
                    lda,
                    &mut lwork,
                )
            })?,
            _ => solver_check("cusolverDnDpotrf_bufferSize", &what, unsafe {
                cs::cusolverDnDpotrf_bufferSize(
                    self.solver,
                    fill_s(t.uplo),
                    n,
                    a as *mut f64,
                    lda,
                    &mut lwork,
                )
            })?,
        }
        Ok(lwork.max(1) as usize * ty.size_bytes() as usize)
    }

    /// Issues library kernel call `t` on element type `ty` to the bound stream: `tiles`
    /// the device addresses of the call's tiles in signature order; for `potrf` and
    /// `getrf`, `work` its workspace (`(address, bytes)`, at least
    /// [`Handles::solver_bytes`]) and
    /// `info` a device `int` that gets LAPACK's `info`.
    ///
    /// # Safety
    /// Shapes and leading dimensions checked against the tiles (`library::check_shapes`),
    /// every tile live device memory of the context, the written tile overlapping no
    /// other; the handles bound ([`Handles::bind`]); the context current.
    pub(super) unsafe fn issue(
        &self,
        t: &TileArgs,
        ty: ElemType,
        tiles: &[u64],
        work: (u64, usize),
        info: u64,
    ) -> Result<(), String> {
        let i = |v: i64| v as c_int;
        let (m, n, k) = (i(t.m), i(t.n), i(t.k));
        let [l0, l1, l2] = t.ld.map(i);
        let what = format!("{}, {ty}", t.kernel.name());
        let tile = |j: usize| tiles.get(j).copied().unwrap_or(0);
        let h = self.blas;
        macro_rules! typed {
            ($t:ty, $gemm:ident, $syrk:ident, $trsm:ident, $potrf:ident, $getrf:ident) => {{
                let (alpha, beta) = (t.alpha as $t, t.beta as $t);
                let p = |j: usize| tile(j) as *mut $t;
                match t.kernel {
                    LibraryKernel::Gemm => blas_check(stringify!($gemm), &what, unsafe {
                        cb::$gemm(
                            h,
                            op(t.trans_a),
                            op(t.trans_b),
                            m,
                            n,
                            k,
                            &alpha,
                            p(0),
                            l0,
                            p(1),
                            l1,
                            &beta,
                            p(2),
                            l2,
                        )
                    }),
                    LibraryKernel::Syrk => blas_check(stringify!($syrk), &what, unsafe {
                        cb::$syrk(
                            h,
                            fill(t.uplo),
                            op(t.trans_a),
                            n,
                            k,
                            &alpha,
                            p(0),
                            l0,
                            &beta,
                            p(1),
                            l1,
                        )
                    }),
                    LibraryKernel::Trsm => blas_check(stringify!($trsm), &what, unsafe {
                        cb::$trsm(
                            h,
                            side(t.side),
                            fill(t.uplo),
                            op(t.trans_a),
                            diag(t.diag),
                            m,
                            n,
                            &alpha,
                            p(0),
                            l0,
                            p(1),
                            l1,
                        )
                    }),
                    LibraryKernel::Potrf => {
                        let lwork = (work.1 / std::mem::size_of::<$t>()) as c_int;
                        solver_check(stringify!($potrf), &what, unsafe {
                            cs::$potrf(
                                self.solver,
                                fill_s(t.uplo),
                                n,
                                p(0),
                                l0,
                                work.0 as *mut $t,
                                lwork,
                                info as *mut c_int,
                            )
                        })
                    }
                    LibraryKernel::Getrf => solver_check(stringify!($getrf), &what, unsafe {
                        cs::$getrf(
                            self.solver,
                            m,
                            n,
                            p(0),
                            l0,
                            work.0 as *mut $t,
                            // No pivoting (cuSOLVER: `devIpiv = NULL`).
                            std::ptr::null_mut(),
                            info as *mut c_int,
                        )
                    }),
                }
            }};
        }
        match ty {
            ElemType::F32 => typed!(
                f32,
                cublasSgemm_v2,
                cublasSsyrk_v2,
                cublasStrsm_v2,
                cusolverDnSpotrf,
                cusolverDnSgetrf
            ),
            _ => typed!(
                f64,
                cublasDgemm_v2,
                cublasDsyrk_v2,
                cublasDtrsm_v2,
                cusolverDnDpotrf,
                cusolverDnDgetrf
            ),
        }
    }
}

impl Drop for Handles {
    fn drop(&mut self) {
        self.ctx.record(self.ctx.bind());
        // SAFETY: handles of ours, destroyed once; the owner synchronized their streams.
        let (b, s) = unsafe {
            (
                cb::cublasDestroy_v2(self.blas),
                cs::cusolverDnDestroy(self.solver),
            )
        };
        self.ctx.record(blas_check("cublasDestroy_v2", "handle", b));
        self.ctx
            .record(solver_check("cusolverDnDestroy", "handle", s));
    }
}

fn op(t: Trans) -> cb::cublasOperation_t {
    match t {
        Trans::N => cb::cublasOperation_t::CUBLAS_OP_N,
        Trans::T => cb::cublasOperation_t::CUBLAS_OP_T,
    }
}

fn fill(u: Uplo) -> cb::cublasFillMode_t {
    match u {
        Uplo::Lower => cb::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER,
        Uplo::Upper => cb::cublasFillMode_t::CUBLAS_FILL_MODE_UPPER,
    }
}

/// cuSOLVER's own binding of `cublasFillMode_t`.
fn fill_s(u: Uplo) -> cs::cublasFillMode_t {
    match u {
        Uplo::Lower => cs::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER,
        Uplo::Upper => cs::cublasFillMode_t::CUBLAS_FILL_MODE_UPPER,
    }
}

fn side(s: Side) -> cb::cublasSideMode_t {
    match s {
        Side::Left => cb::cublasSideMode_t::CUBLAS_SIDE_LEFT,
        Side::Right => cb::cublasSideMode_t::CUBLAS_SIDE_RIGHT,
    }
}

fn diag(d: Diag) -> cb::cublasDiagType_t {
    match d {
        Diag::NonUnit => cb::cublasDiagType_t::CUBLAS_DIAG_NON_UNIT,
        Diag::Unit => cb::cublasDiagType_t::CUBLAS_DIAG_UNIT,
    }
}
