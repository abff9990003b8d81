//! Module loading and the kernel table of the CUDA plugin.
//!
//! - The built-ins (`builtins.cu`, one `extern "C"` entry per kernel and element type,
//!   e.g. `saxpy_f32`) are compiled once per process and architecture with NVRTC to a
//!   CUBIN ([`builtins_cubin`]) and loaded once per device (`Device::builtins`).
//! - User kernels come from the `.cu` (compiled by NVRTC) or `.ptx` file of
//!   `KernelSource::User { cuda, .. }`, relative to the plugin's kernel folder, loaded
//!   once per device and path; the symbol `NAME_T` (e.g. `foo_f32`) is tried before
//!   `NAME`.
//! - Kernels registered from Rust with CUDA code as text
//!   (`KernelSource::Embedded { cuda, .. }`: [`crate::model::KernelSig::cuda_source`],
//!   [`crate::model::KernelSig::ptx`]): CUDA C compiled by NVRTC once per process, source
//!   and architecture ([`embedded_cubin`], so a session, or a second plugin, compiles it
//!   once), loaded once per device and text; symbols as for user files. A registered
//!   kernel with only a Rust body is refused, naming it.
//! - The library tile kernels (`gemm`, `syrk`, `trsm`, `potrf`, `getrf`: built-ins that
//!   [`crate::model::LibraryKernel::of`] names) load no module: their entry records the
//!   kernel and element type (f32 or f64) for `library.rs`, once cuBLAS and cuSOLVER load
//!   (`blas.rs`; the reason why not otherwise).
//! - [`Kernels`] is the table of loaded kernels that launches look up and check.

use super::device::Device;
use super::driver::{sys, Module};
use super::launch::check_signature;
use super::nvrtc;
use crate::model::{builtin_kernel, CudaCode, ElemType, KernelSig, KernelSource, LibraryKernel};
use crate::plugin::{KernelHandle, LaunchArg, PluginCall, PluginError};
use std::collections::{BTreeMap, HashMap};
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

/// The built-in kernels' CUDA C source.
pub const BUILTINS_CU: &str = include_str!("builtins.cu");

/// NVRTC options used for every module (built-ins and user `.cu` files).
pub const NVRTC_OPTIONS: &[&str] = &["--fmad=false", "--std=c++17", "-default-device"];

/// The built-ins compiled for `sm_{major}{minor}`: compiled once per process and
/// architecture, then shared by every device of that architecture.
///
/// Errors: NVRTC missing, or the compile failed (with the compiler's log); the same error
/// on every later call for that architecture.
pub fn builtins_cubin(major: i32, minor: i32) -> Result<Arc<Vec<u8>>, String> {
    type Cache = Mutex<BTreeMap<(i32, i32), Result<Arc<Vec<u8>>, String>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let mut c = CACHE
        .get_or_init(|| Mutex::new(BTreeMap::new()))
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    c.entry((major, minor))
        .or_insert_with(|| {
            nvrtc::compile_cubin(BUILTINS_CU, "builtins.cu", major, minor, NVRTC_OPTIONS)
                .map(Arc::new)
        })
        .clone()
}

/// CUDA C registered from Rust, compiled for `sm_{major}{minor}`: compiled once per
/// process, source text and architecture (the text is the key: equal sources share one
/// CUBIN whatever kernel registered them).
///
/// Errors: NVRTC missing, or the compile failed (with the compiler's log); the same error
/// on every later call for that source and architecture.
pub fn embedded_cubin(src: &Arc<str>, major: i32, minor: i32) -> Result<Arc<Vec<u8>>, String> {
    type Cache = Mutex<HashMap<(Arc<str>, i32, i32), Result<Arc<Vec<u8>>, String>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let mut c = CACHE
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    c.entry((src.clone(), major, minor))
        .or_insert_with(|| {
            nvrtc::compile_cubin(src, "embedded.cu", major, minor, NVRTC_OPTIONS).map(Arc::new)
        })
        .clone()
}

/// The kernel `name` of `m`; errors name the symbol.
pub(super) fn function(m: &Module, name: &str) -> Result<sys::CUfunction, String> {
    let c = CString::new(name).map_err(|_| format!("bad symbol name {name:?}"))?;
    m.function(&c).map_err(String::from)
}

/// A loaded kernel: one signature instantiated for one element type on one device.
pub(super) struct Kernel {
    pub(super) device: u32,
    pub(super) sig: KernelSig,
    pub(super) ty: ElemType,
    func: sys::CUfunction,
    /// A built-in's entry that times itself in a timing slot (`NAME_timed`, one more
    /// `u64` parameter: `builtins.cu`, `timing.rs`); `None` for other kernels.
    timed: Option<sys::CUfunction>,
    /// A library tile kernel (`library.rs`: cuBLAS / cuSOLVER, no function: `func` null).
    library: Option<LibraryKernel>,
}

// SAFETY: `func` is a driver function handle, immutable and usable from any thread once
// its context is current (every launch binds it); its module lives as long as the table.
unsafe impl Send for Kernel {}
// SAFETY: as above.
unsafe impl Sync for Kernel {}

/// The loaded kernels (a [`KernelHandle`] indexes them) and the user modules they come
/// from. Dropping it unloads the user modules; the owner synchronizes the streams first.
#[derive(Default)]
pub(super) struct Kernels {
    kernels: RwLock<Vec<Kernel>>,
    user_modules: Mutex<BTreeMap<(u32, PathBuf), Module>>,
    /// Modules of CUDA code registered from Rust, per device and code (its text).
    embedded_modules: Mutex<HashMap<(u32, CudaCode), Module>>,
}

impl Kernels {
    /// The handle of `sig` for `ty` on device `device` (`dev`), loading it on first use:
    /// a built-in from the device's built-in module, a user kernel from its file
    /// (relative paths against `kernel_dir`, else the current folder).
    ///
    /// Errors: [`PluginError::KernelLoad`] naming the kernel (unknown built-in, no CUDA
    /// source declared, a registered kernel with only a Rust body, unreadable or
    /// non-UTF-8 file, NVRTC or driver failure, missing symbol).
    pub(super) fn load(
        &self,
        (device, dev): (u32, &Device),
        sig: &KernelSig,
        ty: ElemType,
        kernel_dir: Option<&Path>,
    ) -> Result<KernelHandle, PluginError> {
        let call = PluginCall::LoadKernel;
        let mut kernels = self.kernels.write().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = kernels
            .iter()
            .position(|k| k.device == device && k.ty == ty && k.sig == *sig)
        {
            return Ok(KernelHandle(i as u32));
        }
        let kerr = |message: String| PluginError::KernelLoad {
            call,
            kernel: sig.name.clone(),
            message,
        };
        let mut timed = None;
        let library = LibraryKernel::of(sig);
        let func = match &sig.source {
            KernelSource::Builtin if library.is_some() => {
                if !matches!(ty, ElemType::F32 | ElemType::F64) {
                    return Err(kerr(format!("takes f32 or f64 tiles, got {ty}")));
                }
                super::blas::load().map_err(&kerr)?;
                std::ptr::null_mut()
            }
            KernelSource::Builtin => {
                if builtin_kernel(&sig.name).is_none() {
                    return Err(kerr("no such built-in kernel".into()));
                }
                let m = dev.builtins().map_err(&kerr)?;
                let name = format!("{}_{}", sig.name, ty.name());
                timed = function(m, &format!("{name}_timed")).ok();
                function(m, &name).map_err(&kerr)?
            }
            KernelSource::User { cuda, symbol, .. } => {
                let file = cuda
                    .as_ref()
                    .ok_or_else(|| kerr("declares no CUDA source (`cuda = \"file.cu\"`)".into()))?;
                let path = match kernel_dir {
                    Some(d) if Path::new(file).is_relative() => d.join(file),
                    _ => PathBuf::from(file),
                };
                self.user_function((device, dev), &path, symbol, ty)
                    .map_err(&kerr)?
            }
            KernelSource::Embedded {
                host, cuda, symbol, ..
            } => {
                let code = cuda.as_ref().ok_or_else(|| {
                    kerr(match host {
                        Some(_) => "is a Rust function only, which the CUDA plugin cannot run: register CUDA C or PTX for it too (KernelBuilder::cuda_source, KernelBuilder::ptx)".into(),
                        None => "has no code".into(),
                    })
                })?;
                self.embedded_function((device, dev), code, symbol, ty)
                    .map_err(&kerr)?
            }
        };
        kernels.push(Kernel {
            device,
            sig: sig.clone(),
            ty,
            func,
            timed,
            library,
        });
        Ok(KernelHandle(kernels.len() as u32 - 1))
    }

    /// The user kernel `symbol` for `ty` from the module of `path` on `device`, loading
    /// the module on first use. A generic user kernel may export one symbol per type
    /// (`name_f32`), tried before `symbol`.
    fn user_function(
        &self,
        (device, dev): (u32, &Device),
        path: &Path,
        symbol: &str,
        ty: ElemType,
    ) -> Result<sys::CUfunction, String> {
        let mut mods = self.user_modules.lock().unwrap_or_else(|p| p.into_inner());
        let key = (device, path.to_path_buf());
        if !mods.contains_key(&key) {
            let m = load_user_module(dev, path)?;
            mods.insert(key.clone(), m);
        }
        let m = &mods[&key];
        function(m, &format!("{symbol}_{}", ty.name())).or_else(|_| function(m, symbol))
    }

    /// The kernel `symbol` for `ty` from the module of registered CUDA code `code` on
    /// `device`, loading (and for CUDA C compiling, once per process) it on first use.
    fn embedded_function(
        &self,
        (device, dev): (u32, &Device),
        code: &CudaCode,
        symbol: &str,
        ty: ElemType,
    ) -> Result<sys::CUfunction, String> {
        let mut mods = self
            .embedded_modules
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let key = (device, code.clone());
        if !mods.contains_key(&key) {
            let image = match code {
                CudaCode::Ptx(text) => {
                    let mut v = text.as_bytes().to_vec();
                    v.push(0);
                    Arc::new(v)
                }
                CudaCode::Source(src) => embedded_cubin(src, dev.cc.0, dev.cc.1)?,
            };
            // SAFETY: NUL-terminated PTX or a CUBIN from NVRTC.
            let m = unsafe { Module::load(&dev.ctx, &image) }.map_err(String::from)?;
            mods.insert(key.clone(), m);
        }
        let m = &mods[&key];
        function(m, &format!("{symbol}_{}", ty.name())).or_else(|_| function(m, symbol))
    }

    /// The library kernel `kernel` runs and its element type; `None` for other kernels
    /// (and unknown handles, which the launch's check reports).
    pub(super) fn library_of(&self, kernel: KernelHandle) -> Option<(LibraryKernel, ElemType)> {
        let kernels = self.kernels.read().unwrap_or_else(|p| p.into_inner());
        let k = kernels.get(kernel.0 as usize)?;
        k.library.map(|l| (l, k.ty))
    }

    /// Whether `kernel` has an entry that times itself (a built-in's `NAME_timed`).
    pub(super) fn has_timed(&self, kernel: KernelHandle) -> bool {
        let kernels = self.kernels.read().unwrap_or_else(|p| p.into_inner());
        kernels
            .get(kernel.0 as usize)
            .is_some_and(|k| k.timed.is_some())
    }

    /// The function of `kernel` for a launch on `device` with `args` (with `timed`, its
    /// entry that times itself, which takes one more parameter: a timing slot's address;
    /// the plain one if it has none), checked under the table lock (the handle, the
    /// device, the arguments against the signature); only the function handle leaves it.
    pub(super) fn checked(
        &self,
        call: PluginCall,
        kernel: KernelHandle,
        device: u32,
        args: &[LaunchArg],
        timed: bool,
    ) -> Result<sys::CUfunction, PluginError> {
        let kernels = self.kernels.read().unwrap_or_else(|p| p.into_inner());
        let k = kernels
            .get(kernel.0 as usize)
            .ok_or_else(|| PluginError::InvalidHandle {
                call,
                what: format!("kernel {}", kernel.0),
            })?;
        if k.device != device {
            return Err(PluginError::InvalidHandle {
                call,
                what: format!(
                    "kernel \"{}\" (loaded on device {}, launched on device {device})",
                    k.sig.name, k.device
                ),
            });
        }
        check_signature(&k.sig, k.ty, args).map_err(|message| PluginError::Signature {
            call,
            kernel: k.sig.name.clone(),
            message,
        })?;
        Ok(match (timed, k.timed) {
            (true, Some(f)) => f,
            _ => k.func,
        })
    }
}

/// Loads the user module of `path` on `dev`: PTX as it is (NUL-terminated), CUDA C
/// compiled by NVRTC for the device's architecture.
fn load_user_module(dev: &Device, path: &Path) -> Result<Module, String> {
    let data = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let image = if path.extension().is_some_and(|e| e == "ptx") {
        let mut v = data;
        v.push(0);
        v
    } else {
        let src =
            String::from_utf8(data).map_err(|_| format!("{} is not UTF-8 text", path.display()))?;
        let name = path.display().to_string();
        nvrtc::compile_cubin(&src, &name, dev.cc.0, dev.cc.1, NVRTC_OPTIONS)?
    };
    // SAFETY: NUL-terminated PTX or a CUBIN from NVRTC.
    unsafe { Module::load(&dev.ctx, &image) }.map_err(String::from)
}
