//! The CUDA driver API in three layers, after cudarc's `sys → result → safe`:
//!
//! - [`sys`]: cudarc's raw bindings, re-exported so that code outside this crate (the
//!   bench's hand-written baselines) reaches them without a cudarc dependency of its own.
//! - Loading and errors (this module): [`init`] loads the driver without aborting;
//!   [`DriverError`] names a failed call and CUDA's status; [`check`] turns a status into
//!   a `Result`.
//! - [`result`]: thin wrappers, each one driver call with the same arguments turned into a
//!   `Result` (no binding, no other call, no allocation unless it fails).
//! - RAII handles: [`Context`] (a retained primary context), [`Stream`], [`Event`],
//!   [`DeviceBlock`], [`PinnedHost`], [`Module`], [`Graph`] (a graph template and its
//!   executable graph). Each handle keeps its context alive
//!   (`Arc<Context>`), so a context is released only after everything made in it. A
//!   release that fails in `Drop` is recorded in the context ([`Context::record`]) and
//!   reported later ([`Context::take_errors`], or logged at `debug` level, target
//!   `offload_sched::plugin`, when the context itself goes); nothing here panics on a
//!   driver error.
//!
//! # Loading
//!
//! cudarc (dynamic-loading) opens `libcuda` on first use and panics if it is absent or
//! lacks a symbol. [`init`] first checks with libloading that a driver library opens,
//! then touches cudarc's loader inside `catch_unwind` (with the panic message silenced),
//! then calls `cuInit(0)` and counts devices, so a machine without a driver, or without
//! a GPU, gets a one-line reason instead of a panic. Every other function of this module
//! expects [`init`] to have succeeded.

pub(crate) mod peer;
pub(crate) mod result;
mod safe;

pub use cudarc::driver::sys;
pub use safe::{Context, DeviceBlock, Event, Graph, Module, PinnedHost, Stream};

use std::borrow::Cow;
use std::ffi::{c_char, CStr};
use std::fmt;
use std::sync::OnceLock;

/// A failed driver call: the call's name (e.g. `cuMemAllocAsync`, or
/// `cuModuleGetFunction("saxpy_f32")`) and CUDA's status.
///
/// Displays as `cuName: CUDA_ERROR_X (the driver's description)`; converts into that
/// `String` for the layers that report text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriverError {
    call: Cow<'static, str>,
    status: sys::CUresult,
}

impl DriverError {
    /// The error of `call` returning `status` (which should not be `CUDA_SUCCESS`).
    pub fn new(call: impl Into<Cow<'static, str>>, status: sys::CUresult) -> DriverError {
        DriverError {
            call: call.into(),
            status,
        }
    }

    /// The call's name, as in the message.
    pub fn call(&self) -> &str {
        &self.call
    }

    /// CUDA's status.
    pub fn status(&self) -> sys::CUresult {
        self.status
    }

    /// Whether the status is `CUDA_ERROR_OUT_OF_MEMORY`.
    pub fn is_out_of_memory(&self) -> bool {
        self.status == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY
    }

    /// The same status under another call name (one naming a kernel, say).
    pub fn named(self, call: impl Into<Cow<'static, str>>) -> DriverError {
        DriverError::new(call, self.status)
    }
}

impl fmt::Display for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.call, describe(self.status))
    }
}

impl std::error::Error for DriverError {}

impl From<DriverError> for String {
    fn from(e: DriverError) -> String {
        e.to_string()
    }
}

/// `Ok` for `CUDA_SUCCESS`, else the [`DriverError`] of `call`. Costs a comparison when
/// the call succeeded.
#[inline]
pub fn check(call: &'static str, r: sys::CUresult) -> Result<(), DriverError> {
    if r == sys::CUresult::CUDA_SUCCESS {
        return Ok(());
    }
    Err(DriverError::new(call, r))
}

/// The driver's name and description of a status, e.g.
/// `CUDA_ERROR_OUT_OF_MEMORY (out of memory)`.
pub fn describe(r: sys::CUresult) -> String {
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
    result::init()?;
    let count = result::device_count()?;
    if count < 1 {
        return Err("the CUDA driver reports no device".into());
    }
    Ok(count)
}

/// Loads and initialises the driver once per process; the device count, or a one-line
/// reason why not (no library, a library without an entry point cudarc needs, a failing
/// `cuInit`, no device). Never panics.
pub fn init() -> Result<i32, String> {
    static INIT: OnceLock<Result<i32, String>> = OnceLock::new();
    INIT.get_or_init(load).clone()
}
