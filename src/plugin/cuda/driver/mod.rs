//! The CUDA driver API in three layers, after cudarc's `sys → result → safe`:
//!
//! - [`sys`]: cudarc's raw bindings, re-exported so that code outside this crate (the
//!   bench's hand-written baselines) reaches them without a cudarc dependency of its own.
//! - Loading and errors (this module): [`init`] loads the driver without aborting;
//!   [`DriverError`] names a failed call and CUDA's status; [`check`] turns a status into
//!   a `Result`.
//! - `result`: thin wrappers, each one driver call with the same arguments turned into a
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
//! cudarc 0.19 (dynamic-loading, bindings of the CUDA 13.0 API: feature `cuda-13000`)
//! opens `libcuda` on first use and panics if it is absent; each entry point is resolved
//! on its first call, and a missing one panics there. [`init`] first checks with
//! libloading that a driver library opens, then touches cudarc's loader inside
//! `catch_unwind` (with the panic message silenced), then resolves every entry point this
//! crate calls ([`ENTRY_POINTS`]), then calls `cuInit(0)` and counts devices, so a machine
//! without a driver, with an older driver (CUDA 13 keeps only the `_v2` forms of
//! `cuEventElapsedTime`, `cuGraphAddDependencies`, `cuGraphGetEdges`; a CUDA 12.2 driver
//! lacks them) or without a GPU gets a one-line reason instead of a panic. Every other
//! function of this module expects [`init`] to have succeeded.

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

/// Every driver entry point the plugin's driver layer calls (`driver::result`,
/// `driver::peer`), by its exported name; [`init`] resolves each before the first call,
/// so a driver without one fails with its name instead of a panic inside cudarc.
pub const ENTRY_POINTS: &[&str] = &[
    "cuCtxEnablePeerAccess",
    "cuCtxGetCurrent",
    "cuCtxGetStreamPriorityRange",
    "cuCtxSetCurrent",
    "cuDeviceCanAccessPeer",
    "cuDeviceGet",
    "cuDeviceGetAttribute",
    "cuDeviceGetCount",
    "cuDeviceGetDefaultMemPool",
    "cuDeviceGetName",
    "cuDevicePrimaryCtxRelease_v2",
    "cuDevicePrimaryCtxRetain",
    "cuDriverGetVersion",
    "cuEventCreate",
    "cuEventDestroy_v2",
    "cuEventElapsedTime_v2",
    "cuEventQuery",
    "cuEventRecord",
    "cuEventSynchronize",
    "cuGetErrorName",
    "cuGetErrorString",
    "cuGraphAddChildGraphNode",
    "cuGraphAddDependencies_v2",
    "cuGraphAddEmptyNode",
    "cuGraphAddKernelNode_v2",
    "cuGraphAddMemcpyNode",
    "cuGraphAddMemsetNode",
    "cuGraphCreate",
    "cuGraphDestroy",
    "cuGraphExecDestroy",
    "cuGraphExecKernelNodeSetParams_v2",
    "cuGraphExecMemcpyNodeSetParams",
    "cuGraphGetEdges_v2",
    "cuGraphInstantiateWithFlags",
    "cuGraphLaunch",
    "cuGraphUpload",
    "cuInit",
    "cuLaunchKernel",
    "cuMemAllocAsync",
    "cuMemAlloc_v2",
    "cuMemFreeAsync",
    "cuMemFreeHost",
    "cuMemFree_v2",
    "cuMemHostAlloc",
    "cuMemPoolSetAccess",
    "cuMemPoolSetAttribute",
    "cuMemcpyDtoHAsync_v2",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyPeerAsync",
    "cuMemsetD8Async",
    "cuModuleGetFunction",
    "cuModuleLoadData",
    "cuModuleUnload",
    "cuStreamBeginCapture_v2",
    "cuStreamCreate",
    "cuStreamCreateWithPriority",
    "cuStreamDestroy_v2",
    "cuStreamEndCapture",
    "cuStreamQuery",
    "cuStreamSynchronize",
    "cuStreamWaitEvent",
];

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
        return Err("the CUDA driver library cannot be opened by cudarc".into());
    }
    // SAFETY: the library is open (above); `get` only looks the names up.
    let lib = unsafe { sys::culib() };
    let missing: Vec<&str> = ENTRY_POINTS
        .iter()
        .copied()
        // SAFETY: a lookup by name; the pointer is not called.
        .filter(|n| unsafe { lib.get::<*const std::ffi::c_void>(n.as_bytes()) }.is_err())
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "the CUDA driver library lacks {} (bindings of the CUDA 13.0 API; driver 580 or newer)",
            missing.join(", ")
        ));
    }
    result::init()?;
    let count = result::device_count()?;
    if count < 1 {
        return Err("the CUDA driver reports no device".into());
    }
    Ok(count)
}

/// The environment variable the driver reads for the number of hardware work queues
/// (connections) of a device's context: 1 to 32, 8 when unset (CUDA C++ Programming
/// Guide, "CUDA Environment Variables").
pub const DEVICE_MAX_CONNECTIONS_VAR: &str = "CUDA_DEVICE_MAX_CONNECTIONS";

/// The connection count [`raise_device_connections`] asks for when the user has not set
/// [`DEVICE_MAX_CONNECTIONS_VAR`]: 32, the driver's maximum.
///
/// Why: streams beyond the connection count share hardware queues, and work on streams
/// that share one is serialized in issue order (a false dependency the schedule did not
/// ask for). A schedule of more than 8 streams (Task Bench at width 16, dpotrf on 8
/// streams plus the high-priority stream and copy streams) is otherwise partly
/// serialized. Measured on the H200 (benches/README-gpu.md, runs 25-26): replayed dpotrf
/// (N 32768, tile 1024, 8 streams) 4% faster with 32 than with 8 in the same process
/// order; Task Bench `--entered` at width 16 peaks at 247.5 GFLOP/s, 4× width 4 (its 16
/// streams' kernels overlap).
pub const DEVICE_MAX_CONNECTIONS: u32 = 32;

static RAISED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Sets [`DEVICE_MAX_CONNECTIONS_VAR`] to [`DEVICE_MAX_CONNECTIONS`] unless it is set
/// already (a user's value, valid or not, is left for the driver to read); returns
/// whether it set it.
///
/// The library does not call it: it changes the process's environment, which an
/// embedding application owns. Call it at the start of `main`, before any other thread
/// starts (setting the environment races with C code reading it on another thread) and
/// before the first CUDA call of the process (the driver reads the variable when it
/// creates a context; after that it does nothing). offload-sched's `offload-sched` and
/// `offload-bench` binaries call it first thing. Child processes inherit the value:
/// [`device_connections_raised`] tells a caller that spawns baselines to remove it for
/// them.
pub fn raise_device_connections() -> bool {
    if std::env::var_os(DEVICE_MAX_CONNECTIONS_VAR).is_some() {
        return false;
    }
    std::env::set_var(
        DEVICE_MAX_CONNECTIONS_VAR,
        DEVICE_MAX_CONNECTIONS.to_string(),
    );
    RAISED.store(true, std::sync::atomic::Ordering::SeqCst);
    true
}

/// Whether [`raise_device_connections`] set [`DEVICE_MAX_CONNECTIONS_VAR`] in this process
/// (so it is not the user's value, and a child process run as a baseline should not get
/// it).
pub fn device_connections_raised() -> bool {
    RAISED.load(std::sync::atomic::Ordering::SeqCst)
}

/// Loads and initialises the driver once per process; the device count, or a one-line
/// reason why not (no library, a library without an entry point cudarc needs, a failing
/// `cuInit`, no device). Never panics.
pub fn init() -> Result<i32, String> {
    static INIT: OnceLock<Result<i32, String>> = OnceLock::new();
    INIT.get_or_init(load).clone()
}

#[cfg(test)]
mod tests {
    /// Every call of a driver entry point in the driver layer is in [`super::ENTRY_POINTS`], and every
    /// listed name is called: the list `init` checks is the one the code uses.
    #[test]
    fn entry_points_are_the_calls_of_the_driver_layer() {
        let sources = [
            include_str!("result.rs"),
            include_str!("peer.rs"),
            include_str!("safe.rs"),
            include_str!("mod.rs"),
        ];
        let mut called = std::collections::BTreeSet::new();
        for src in sources {
            for (i, _) in src.match_indices("sys::cu") {
                let rest = &src[i + "sys::".len()..];
                let end = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                if rest[end..].starts_with('(') && &rest[..end] != "culib" {
                    called.insert(rest[..end].to_string());
                }
            }
        }
        let listed: std::collections::BTreeSet<String> =
            super::ENTRY_POINTS.iter().map(|s| s.to_string()).collect();
        assert_eq!(called, listed);
    }
}
