//! Loading the CUDA driver without aborting, and naming its errors.
//!
//! cudarc (dynamic-loading) opens `libcuda` on first use and panics if it is absent or
//! lacks a symbol. [`init`] first checks with libloading that a driver library opens,
//! then touches cudarc's loader inside `catch_unwind` (with the panic message silenced),
//! then calls `cuInit(0)` and counts devices, so a machine without a driver, or without
//! a GPU, gets a one-line reason instead of a panic.

use cudarc::driver::sys;
use std::cell::Cell;
use std::ffi::{c_char, CStr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// `"cuName: CUDA_ERROR_X (the driver's description)"` for a failed status, `Ok` for
/// `CUDA_SUCCESS`.
pub(crate) fn check(call: &str, r: sys::CUresult) -> Result<(), String> {
    if r == sys::CUresult::CUDA_SUCCESS {
        return Ok(());
    }
    Err(format!("{call}: {}", describe(r)))
}

/// The driver's name and description of a status, e.g.
/// `CUDA_ERROR_OUT_OF_MEMORY (out of memory)`.
pub(crate) fn describe(r: sys::CUresult) -> String {
    let mut name: *const c_char = std::ptr::null();
    let mut text: *const c_char = std::ptr::null();
    // SAFETY: only called after `init` loaded the driver; both out-pointers are valid and
    // the driver returns static strings (or leaves them null for unknown codes).
    let (rn, rs) = unsafe {
        (
            sys::cuGetErrorName(r, &mut name),
            sys::cuGetErrorString(r, &mut text),
        )
    };
    let s = |ok: sys::CUresult, p: *const c_char| {
        if ok == sys::CUresult::CUDA_SUCCESS && !p.is_null() {
            // SAFETY: non-null static NUL-terminated string from the driver.
            Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
        } else {
            None
        }
    };
    match (s(rn, name), s(rs, text)) {
        (Some(n), Some(t)) => format!("{n} ({t})"),
        (Some(n), None) => n,
        _ => format!("CUDA error {r:?}"),
    }
}

fn load() -> Result<i32, String> {
    let names = ["libcuda.so", "libcuda.so.1"];
    let found = names.iter().any(|n| {
        // SAFETY: opening the CUDA driver library runs its initialisers; it is the
        // library cudarc would open next. The handle is dropped at once (cudarc keeps
        // its own).
        unsafe { libloading::Library::new(n) }.is_ok()
    });
    if !found {
        return Err("no CUDA driver: libcuda.so / libcuda.so.1 cannot be opened".into());
    }
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    // SAFETY: `culib` only opens the library and resolves symbols.
    let loaded = std::panic::catch_unwind(|| unsafe {
        let _ = sys::culib();
    });
    std::panic::set_hook(hook);
    if loaded.is_err() {
        return Err(
            "the CUDA driver library lacks an entry point cudarc (CUDA 12.8 API) needs".into(),
        );
    }
    // SAFETY: the driver is loaded; cuInit may be called any number of times.
    check("cuInit", unsafe { sys::cuInit(0) })?;
    let mut count = 0;
    // SAFETY: valid out-pointer, after cuInit.
    check("cuDeviceGetCount", unsafe {
        sys::cuDeviceGetCount(&mut count)
    })?;
    if count < 1 {
        return Err("the CUDA driver reports no device".into());
    }
    Ok(count)
}

/// Loads and initialises the driver once per process; the device count, or why not.
pub(crate) fn init() -> Result<i32, String> {
    static INIT: OnceLock<Result<i32, String>> = OnceLock::new();
    INIT.get_or_init(load).clone()
}

/// The name of device `ordinal` (after [`init`]).
pub(crate) fn device_name(dev: sys::CUdevice) -> Result<String, String> {
    let mut buf = [0 as c_char; 256];
    // SAFETY: `buf` holds 256 bytes; the driver writes a NUL-terminated name.
    check("cuDeviceGetName", unsafe {
        sys::cuDeviceGetName(buf.as_mut_ptr(), buf.len() as i32, dev)
    })?;
    // SAFETY: NUL-terminated within `buf` (above).
    Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned())
}

/// The driver's CUDA version as `major.minor`.
pub(crate) fn driver_version() -> Result<String, String> {
    let mut v = 0;
    // SAFETY: valid out-pointer, after `init`.
    check("cuDriverGetVersion", unsafe {
        sys::cuDriverGetVersion(&mut v)
    })?;
    Ok(format!("{}.{}", v / 1000, (v % 1000) / 10))
}

/// Bumped whenever a context may stop being current somewhere (a primary context
/// released), so every thread's cached binding is re-checked with the driver.
static BIND_EPOCH: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The context this thread last made current through [`bind`], and the
    /// [`BIND_EPOCH`] it was bound in.
    static BOUND: Cell<(usize, u64)> = const { Cell::new((0, u64::MAX)) };
}

/// Makes `ctx` current on the calling thread unless it already is.
///
/// Cached per thread: after the first call for `ctx` on a thread, later calls cost a
/// thread-local read and no driver call (it was `cuCtxGetCurrent` per plugin call, on the
/// issue path of every op). Sound because every context change in this crate goes
/// through `bind` (nothing pushes, pops or sets contexts behind it), and a release of a
/// primary context calls [`unbind_all`] first, which invalidates every thread's cache.
pub(crate) fn bind(ctx: sys::CUcontext) -> Result<(), String> {
    let epoch = BIND_EPOCH.load(Ordering::Acquire);
    if BOUND.with(|b| b.get()) == (ctx as usize, epoch) {
        return Ok(());
    }
    let mut cur: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: valid out-pointer; reads the calling thread's current context.
    check("cuCtxGetCurrent", unsafe { sys::cuCtxGetCurrent(&mut cur) })?;
    if cur != ctx {
        // SAFETY: `ctx` is a retained primary context, alive while its owner lives.
        check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(ctx) })?;
    }
    BOUND.with(|b| b.set((ctx as usize, epoch)));
    Ok(())
}

/// Invalidates every thread's [`bind`] cache (call before releasing a context).
pub(crate) fn unbind_all() {
    BIND_EPOCH.fetch_add(1, Ordering::AcqRel);
}

/// Compute capability `(major, minor)` of `dev`.
pub(crate) fn compute_capability(dev: sys::CUdevice) -> Result<(i32, i32), String> {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: valid out-pointers and attribute ids.
    unsafe {
        check(
            "cuDeviceGetAttribute",
            sys::cuDeviceGetAttribute(
                &mut major,
                sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                dev,
            ),
        )?;
        check(
            "cuDeviceGetAttribute",
            sys::cuDeviceGetAttribute(
                &mut minor,
                sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                dev,
            ),
        )?;
    }
    Ok((major, minor))
}

/// Whether `dev` has unified addressing (`CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING`): host
/// memory from `cuMemHostAlloc` is then addressable by kernels at its host address.
pub(crate) fn unified_addressing(dev: sys::CUdevice) -> Result<bool, String> {
    let mut v = 0;
    // SAFETY: valid out-pointer and attribute id.
    check("cuDeviceGetAttribute(UNIFIED_ADDRESSING)", unsafe {
        sys::cuDeviceGetAttribute(
            &mut v,
            sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING,
            dev,
        )
    })?;
    Ok(v == 1)
}

/// The built-in kernels' CUDA C source.
pub(crate) const BUILTINS_CU: &str = include_str!("builtins.cu");

/// NVRTC options used for every module (built-ins and user `.cu` files).
pub(crate) const NVRTC_OPTIONS: &[&str] = &["--fmad=false", "--std=c++17", "-default-device"];

/// The built-ins compiled for `sm_{major}{minor}`: compiled once per process and
/// architecture, then shared by every device of that architecture.
pub(crate) fn builtins_cubin(major: i32, minor: i32) -> Result<std::sync::Arc<Vec<u8>>, String> {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};
    type Cache = Mutex<BTreeMap<(i32, i32), Result<Arc<Vec<u8>>, String>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let mut c = CACHE
        .get_or_init(|| Mutex::new(BTreeMap::new()))
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    c.entry((major, minor))
        .or_insert_with(|| {
            super::nvrtc::compile_cubin(BUILTINS_CU, "builtins.cu", major, minor, NVRTC_OPTIONS)
                .map(Arc::new)
        })
        .clone()
}
