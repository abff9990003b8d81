//! Host kernels called through libffi: built-ins from [`super::kernels`] and `extern "C"`
//! symbols from user shared libraries (libloading), the shape of libomptarget's
//! generic-elf host plugin; and kernels written in Rust
//! ([`crate::model::KernelSig::rust`]), called directly with typed views
//! ([`super::views::KernelArgs`]); and the library tile kernels (`gemm`, `syrk`, `trsm`,
//! `potrf`), run with the system BLAS/LAPACK ([`super::blas`]).
//!
//! A [`HostKernel`] is a signature fixed to one element type plus its code (an address,
//! or a Rust function). Before any call, [`HostKernel::check`] compares the argument
//! types with the declared signature: a shared library carries no type information, so
//! the declaration is the only guard, and a mismatch is rejected instead of called.
//!
//! Used by the host plugin's stream workers (kernel launches on "device" memory), the
//! executor (host tasks' kernels on host memory) and the reference interpreter.

use super::kernels::builtin_symbol;
use super::views::KernelArgs;
use crate::model::{ElemType, KernelSig, KernelSource, ParamKind, Scalar};
use crate::model::{RustKernel, RustKernelError};
use libffi::middle::{Arg, Cif, CodePtr, Type};
use libloading::Library;
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use thiserror::Error;

/// Why a kernel could not be loaded or called.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum KernelError {
    #[error("no built-in kernel \"{0}\"")]
    UnknownBuiltin(String),
    #[error("kernel \"{kernel}\" names no host library (only a CUDA source)")]
    NoHostLibrary { kernel: String },
    #[error("cannot load library {path}: {message}")]
    Library { path: String, message: String },
    #[error("symbol \"{symbol}\" not found in {path}: {message}")]
    Symbol {
        symbol: String,
        path: String,
        message: String,
    },
    /// The symbol names no function (a data object, thread-local data, or an address in
    /// no executable code): calling it would jump into data, so it is refused when the
    /// kernel is loaded (`src/runtime/symbol.rs` says how it is told).
    #[error("symbol \"{symbol}\" in {path} is {what}, not a function: a kernel's `symbol` must name an extern \"C\" function")]
    NotAFunction {
        symbol: String,
        path: String,
        what: &'static str,
    },
    #[error("kernel \"{kernel}\": {message}")]
    Signature { kernel: String, message: String },
    /// A kernel registered from Rust with CUDA code only.
    #[error("kernel \"{kernel}\" has no host code (only CUDA code): give it a Rust body (KernelBuilder::body) to run it on the host")]
    NoHostCode { kernel: String },
    /// A Rust kernel's body returned an error.
    #[error("kernel \"{kernel}\" failed: {message}")]
    Failed { kernel: String, message: String },
    /// A Rust kernel's body panicked (caught).
    #[error("kernel \"{kernel}\" panicked: {message}")]
    Panicked { kernel: String, message: String },
}

/// The type of one argument as passed: a buffer of `ty` (length in elements) or a scalar.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RawArg {
    /// `len` elements of `ty` at `ptr`.
    Buffer {
        ptr: *mut u8,
        len: u64,
        ty: ElemType,
    },
    Scalar(Scalar),
}

/// A kernel ready to call: its signature, element type and code.
#[derive(Debug)]
pub struct HostKernel {
    pub sig: KernelSig,
    pub ty: ElemType,
    code: Code,
    /// Keeps a user library loaded while the kernel exists.
    _lib: Option<Arc<Library>>,
}

/// A host kernel's code.
#[derive(Debug)]
enum Code {
    /// An `extern "C"` function with the host ABI, called through libffi.
    Ffi(*const c_void),
    /// A Rust function, called with [`KernelArgs`].
    Rust(RustKernel),
    /// A library tile kernel, run with the system BLAS/LAPACK ([`super::blas`]).
    Library(crate::model::LibraryKernel),
}

// SAFETY: `Code::Ffi` is the address of an immutable function in a loaded image; the
// image stays loaded while `_lib` (or the binary itself, for built-ins) lives.
// `Code::Rust` is `Send + Sync` by its type.
unsafe impl Send for HostKernel {}
// SAFETY: as above; a function address has no interior state.
unsafe impl Sync for HostKernel {}

impl HostKernel {
    /// Checks `args` against the declared signature: count, buffer vs scalar, and element
    /// types (a generic `T` parameter takes the kernel's type).
    ///
    /// Errors: [`KernelError::Signature`] naming the first mismatching parameter.
    pub fn check(&self, args: &[RawArg]) -> Result<(), KernelError> {
        let err = |message: String| KernelError::Signature {
            kernel: self.sig.name.clone(),
            message,
        };
        if args.len() != self.sig.params.len() {
            return Err(err(format!(
                "{} arguments given, the signature declares {}",
                args.len(),
                self.sig.params.len()
            )));
        }
        for (p, a) in self.sig.params.iter().zip(args) {
            match (&p.kind, a) {
                (ParamKind::Buffer { ty, .. }, RawArg::Buffer { ty: got, .. }) => {
                    let want = ty.unwrap_or(self.ty);
                    if want != *got {
                        return Err(err(format!(
                            "parameter \"{}\" is declared {}, given a {got} buffer",
                            p.name, p.kind
                        )));
                    }
                }
                (ParamKind::Scalar { ty }, RawArg::Scalar(s)) => {
                    let want = ty.unwrap_or(self.ty);
                    if want != s.ty() {
                        return Err(err(format!(
                            "parameter \"{}\" is declared {want}, given a {} scalar",
                            p.name,
                            s.ty()
                        )));
                    }
                }
                (ParamKind::Buffer { .. }, RawArg::Scalar(s)) => {
                    return Err(err(format!(
                        "parameter \"{}\" is declared {}, given a {} scalar",
                        p.name,
                        p.kind,
                        s.ty()
                    )))
                }
                (ParamKind::Scalar { .. }, RawArg::Buffer { ty, .. }) => {
                    return Err(err(format!(
                        "parameter \"{}\" is declared {}, given a {ty} buffer",
                        p.name, p.kind
                    )))
                }
            }
        }
        Ok(())
    }

    /// Checks and calls the kernel through libffi with the host ABI (`(T*, int64_t)`
    /// per buffer, scalars by value).
    ///
    /// A Rust kernel is called directly, its panic caught: an `Err` or a panic is
    /// [`KernelError::Failed`] / [`KernelError::Panicked`].
    ///
    /// # Safety
    /// Every buffer pointer must be valid for reads and writes of `len` elements of its
    /// type for the whole call, no one else may write that memory during the call nor
    /// read memory of an `out`/`inout` argument, and the code must really have the
    /// declared signature (true for built-ins and Rust kernels; for user libraries the
    /// declaration is trusted).
    pub unsafe fn call(&self, args: &[RawArg]) -> Result<(), KernelError> {
        self.check(args)?;
        // SAFETY: checked just now; the rest is this function's own contract.
        unsafe { self.call_checked(args) }
    }

    /// [`HostKernel::call`] without its check of `args` against the signature, for a
    /// caller that checked these very arguments with [`HostKernel::check`] before and
    /// has not changed them since: the host plugin checks a launch's arguments when the
    /// launch is issued or a graph node resolved, and runs the item later (a graph's
    /// items at every launch), so the check per call was the same work again (~150
    /// instructions of a Task Bench task's ~1 200 on the host, issue 30).
    ///
    /// # Safety
    /// As [`HostKernel::call`], and `args` passed [`HostKernel::check`] of this kernel:
    /// the argument count, kinds and types are what the code is called with.
    pub unsafe fn call_checked(&self, args: &[RawArg]) -> Result<(), KernelError> {
        let code = match &self.code {
            Code::Ffi(code) => *code,
            Code::Library(k) => {
                // SAFETY: the arguments were just checked against the signature; pointer
                // validity and exclusive use are this function's own contract.
                return unsafe { super::blas::call(*k, self.ty, args) }.map_err(|message| {
                    KernelError::Failed {
                        kernel: self.sig.name.clone(),
                        message,
                    }
                });
            }
            Code::Rust(f) => {
                // SAFETY: the arguments were just checked against the signature; pointer
                // validity and exclusive use are this function's own contract.
                let mut ka = unsafe { KernelArgs::new(&self.sig, self.ty, args) };
                let kernel = || self.sig.name.clone();
                return f.call(&mut ka).map_err(|e| match e {
                    RustKernelError::Failed(message) => KernelError::Failed {
                        kernel: kernel(),
                        message,
                    },
                    RustKernelError::Panicked(message) => KernelError::Panicked {
                        kernel: kernel(),
                        message,
                    },
                });
            }
        };
        /// Argument storage that outlives the `Arg` pointers to it.
        enum Slot {
            Ptr(*mut c_void),
            I64(i64),
            F32(f32),
            F64(f64),
            I32(i32),
            U8(u8),
        }
        let mut slots = Vec::with_capacity(args.len() * 2);
        let mut types = Vec::with_capacity(args.len() * 2);
        for a in args {
            match *a {
                RawArg::Buffer { ptr, len, .. } => {
                    slots.push(Slot::Ptr(ptr as *mut c_void));
                    types.push(Type::pointer());
                    slots.push(Slot::I64(i64::try_from(len).unwrap_or(i64::MAX)));
                    types.push(Type::i64());
                }
                RawArg::Scalar(s) => {
                    let (slot, t) = match s {
                        Scalar::F32(v) => (Slot::F32(v), Type::f32()),
                        Scalar::F64(v) => (Slot::F64(v), Type::f64()),
                        Scalar::I32(v) => (Slot::I32(v), Type::i32()),
                        Scalar::I64(v) => (Slot::I64(v), Type::i64()),
                        Scalar::U8(v) => (Slot::U8(v), Type::u8()),
                    };
                    slots.push(slot);
                    types.push(t);
                }
            }
        }
        let ffi_args: Vec<Arg> = slots
            .iter()
            .map(|s| match s {
                Slot::Ptr(p) => Arg::new(p),
                Slot::I64(v) => Arg::new(v),
                Slot::F32(v) => Arg::new(v),
                Slot::F64(v) => Arg::new(v),
                Slot::I32(v) => Arg::new(v),
                Slot::U8(v) => Arg::new(v),
            })
            .collect();
        let cif = Cif::new(types, Type::void());
        // SAFETY: the argument types match the checked signature under the host ABI;
        // `slots` outlives the call; pointer validity is the caller's obligation.
        unsafe { cif.call::<()>(CodePtr::from_ptr(code), &ffi_args) };
        Ok(())
    }
}

/// Resolves kernels and keeps user libraries loaded (one load per path).
#[derive(Debug, Default)]
pub struct KernelLibrary {
    /// Folder relative library paths are resolved against (the graph file's folder).
    base_dir: Option<PathBuf>,
    libs: Mutex<BTreeMap<PathBuf, Arc<Library>>>,
}

impl KernelLibrary {
    /// A library resolving relative paths against `base_dir` (the current directory
    /// when `None`).
    pub fn new(base_dir: Option<PathBuf>) -> KernelLibrary {
        KernelLibrary {
            base_dir,
            libs: Mutex::new(BTreeMap::new()),
        }
    }

    /// The kernel `sig` for element type `ty`: a built-in's code, `symbol` from the user
    /// library (loaded once per path), or a registered Rust function.
    ///
    /// Errors: unknown built-in, no host library declared, library or symbol not found,
    /// a symbol that is no function ([`KernelError::NotAFunction`]), a registered kernel
    /// with CUDA code only.
    pub fn resolve(&self, sig: &KernelSig, ty: ElemType) -> Result<HostKernel, KernelError> {
        match &sig.source {
            KernelSource::Builtin if crate::model::LibraryKernel::of(sig).is_some() => {
                let k = crate::model::LibraryKernel::of(sig).expect("guarded");
                if !matches!(ty, ElemType::F32 | ElemType::F64) {
                    return Err(KernelError::Signature {
                        kernel: sig.name.clone(),
                        message: format!("takes f32 or f64 tiles, got {ty}"),
                    });
                }
                Ok(HostKernel {
                    sig: sig.clone(),
                    ty,
                    code: Code::Library(k),
                    _lib: None,
                })
            }
            KernelSource::Builtin => {
                let code = builtin_symbol(&sig.name, ty)
                    .ok_or_else(|| KernelError::UnknownBuiltin(sig.name.clone()))?;
                Ok(HostKernel {
                    sig: sig.clone(),
                    ty,
                    code: Code::Ffi(code),
                    _lib: None,
                })
            }
            KernelSource::Embedded { host, .. } => {
                let f = host.as_ref().ok_or_else(|| KernelError::NoHostCode {
                    kernel: sig.name.clone(),
                })?;
                Ok(HostKernel {
                    sig: sig.clone(),
                    ty,
                    code: Code::Rust(f.clone()),
                    _lib: None,
                })
            }
            KernelSource::User {
                library, symbol, ..
            } => {
                let library = library.as_ref().ok_or_else(|| KernelError::NoHostLibrary {
                    kernel: sig.name.clone(),
                })?;
                let path = match &self.base_dir {
                    Some(d) if Path::new(library).is_relative() => d.join(library),
                    _ => PathBuf::from(library),
                };
                let lib = self.load(&path)?;
                let mut name = symbol.as_bytes().to_vec();
                name.push(0);
                // SAFETY: we only take the symbol's address; it is called later under
                // `HostKernel::call`'s contract. The library stays loaded via `_lib`.
                let code = unsafe { lib.get::<*const c_void>(&name) }
                    .map(|s| *s)
                    .map_err(|e| KernelError::Symbol {
                        symbol: symbol.clone(),
                        path: path.display().to_string(),
                        message: e.to_string(),
                    })?;
                // A data object's address would be called as code: refused here.
                super::symbol::check_function(code).map_err(|what| KernelError::NotAFunction {
                    symbol: symbol.clone(),
                    path: path.display().to_string(),
                    what,
                })?;
                Ok(HostKernel {
                    sig: sig.clone(),
                    ty,
                    code: Code::Ffi(code),
                    _lib: Some(lib),
                })
            }
        }
    }

    fn load(&self, path: &Path) -> Result<Arc<Library>, KernelError> {
        let mut libs = self.libs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(l) = libs.get(path) {
            return Ok(l.clone());
        }
        // SAFETY: loading a shared library runs its initialisers; the user chose to
        // load this library as kernel code, as libomptarget's host plugin does.
        let lib = unsafe { Library::new(path) }.map_err(|e| KernelError::Library {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        let lib = Arc::new(lib);
        libs.insert(path.to_path_buf(), lib.clone());
        Ok(lib)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::builtin_kernel;

    #[test]
    fn builtin_saxpy_through_libffi() {
        let lib = KernelLibrary::new(None);
        let k = lib
            .resolve(&builtin_kernel("saxpy").unwrap(), ElemType::F64)
            .unwrap();
        let x = [1.0f64, 2.0];
        let mut y = [1.0f64, 1.0];
        let args = [
            RawArg::Scalar(Scalar::F64(3.0)),
            RawArg::Buffer {
                ptr: x.as_ptr() as *mut u8,
                len: 2,
                ty: ElemType::F64,
            },
            RawArg::Buffer {
                ptr: y.as_mut_ptr() as *mut u8,
                len: 2,
                ty: ElemType::F64,
            },
        ];
        // SAFETY: pointers cover 2 elements each.
        unsafe { k.call(&args).unwrap() };
        assert_eq!(y, [4.0, 7.0]);
        // A wrong scalar type is rejected before the call.
        let bad = [RawArg::Scalar(Scalar::F32(3.0)), args[1], args[2]];
        let e = k.check(&bad).unwrap_err();
        assert!(
            e.to_string().contains("parameter \"a\" is declared f64"),
            "{e}"
        );
        assert!(k.check(&args[..2]).is_err());
    }

    #[test]
    fn rust_kernels_resolve_and_run_without_libffi() {
        use crate::model::{KernelArgs, KernelSig};
        let lib = KernelLibrary::new(None);
        let k = KernelSig::rust("square")
            .reads_writes::<i64>()
            .body(|a: &mut KernelArgs| {
                a.output::<i64>(0)?.iter_mut().for_each(|v| *v *= *v);
                Ok(())
            });
        let hk = lib.resolve(&k, ElemType::I64).unwrap();
        let mut b = [3i64, -4];
        let args = [RawArg::Buffer {
            ptr: b.as_mut_ptr() as *mut u8,
            len: 2,
            ty: ElemType::I64,
        }];
        // SAFETY: 2 elements, used by nothing else.
        unsafe { hk.call(&args).unwrap() };
        assert_eq!(b, [9, 16]);
        // Checked against the registration before the body runs.
        let wrong = [RawArg::Scalar(Scalar::I64(1))];
        // SAFETY: no pointers.
        let e = unsafe { hk.call(&wrong) }.unwrap_err();
        assert!(matches!(e, KernelError::Signature { .. }), "{e}");
        let boom = KernelSig::rust("boom").body(|_: &mut KernelArgs| panic!("no"));
        let hk = lib.resolve(&boom, ElemType::F32).unwrap();
        // SAFETY: no arguments.
        let e = unsafe { hk.call(&[]) }.unwrap_err();
        assert_eq!(e.to_string(), "kernel \"boom\" panicked: no");
        let cuda_only = KernelSig::cuda_source("c", "").build();
        assert_eq!(
            lib.resolve(&cuda_only, ElemType::F32).unwrap_err(),
            KernelError::NoHostCode { kernel: "c".into() }
        );
    }

    #[test]
    fn u8_fill_and_spin() {
        let lib = KernelLibrary::new(None);
        let k = lib
            .resolve(&builtin_kernel("fill").unwrap(), ElemType::U8)
            .unwrap();
        let mut b = [0u8; 5];
        let args = [
            RawArg::Buffer {
                ptr: b.as_mut_ptr(),
                len: 5,
                ty: ElemType::U8,
            },
            RawArg::Scalar(Scalar::U8(7)),
        ];
        // SAFETY: 5 elements.
        unsafe { k.call(&args).unwrap() };
        assert_eq!(b, [7; 5]);
        let s = lib
            .resolve(&builtin_kernel("spin").unwrap(), ElemType::I32)
            .unwrap();
        let t = std::time::Instant::now();
        // SAFETY: no pointers.
        unsafe { s.call(&[RawArg::Scalar(Scalar::F64(500.0))]).unwrap() };
        assert!(t.elapsed().as_micros() >= 500);
    }
}
