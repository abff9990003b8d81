//! RAII handles over the driver: a handle owns one driver object and releases it on
//! `Drop`, with its context made current first. Each handle holds an `Arc<Context>`, so
//! the context (a retained primary context) is released after the last object made in
//! it. Errors of releases in `Drop` are recorded in the context and reported later
//! ([`Context::take_errors`]; what is left is logged when the context goes), never
//! panicked on, as cudarc's `safe` layer does (`CudaContext::record_err`).
//!
//! Releasing a handle does not wait for work: the owner synchronizes the streams that may
//! still use an object before dropping it (a stream or event may go while pending, the
//! driver finishes it; memory and modules must not).

use super::{result, sys, DriverError};
use std::cell::Cell;
use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

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
///
/// # Safety
/// `ctx` is a retained context, alive for the call.
#[inline]
unsafe fn bind(ctx: sys::CUcontext) -> Result<(), DriverError> {
    let epoch = BIND_EPOCH.load(Ordering::Acquire);
    if BOUND.with(|b| b.get()) == (ctx as usize, epoch) {
        return Ok(());
    }
    if result::ctx_get_current()? != ctx {
        result::ctx_set_current(ctx)?;
    }
    BOUND.with(|b| b.set((ctx as usize, epoch)));
    Ok(())
}

/// Invalidates every thread's [`bind`] cache (call before releasing a context).
fn unbind_all() {
    BIND_EPOCH.fetch_add(1, Ordering::AcqRel);
}

/// Errors kept per context at most; later ones are counted, not kept.
const MAX_RECORDED: usize = 64;

/// A retained primary context of one device (`cuDevicePrimaryCtxRetain`), released
/// (`cuDevicePrimaryCtxRelease`) when the last `Arc` goes. Also the place where errors of
/// releases that cannot return them (`Drop` of this context's handles) are recorded.
#[derive(Debug)]
pub struct Context {
    dev: sys::CUdevice,
    raw: sys::CUcontext,
    /// Recorded errors, oldest first, and how many more were not kept.
    errors: Mutex<(Vec<String>, u64)>,
}

// SAFETY: a context handle is usable from any thread (the driver's contexts are
// thread-safe; every use makes it current on the calling thread first); the error list
// is behind a lock.
unsafe impl Send for Context {}
// SAFETY: as above.
unsafe impl Sync for Context {}

impl Context {
    /// Retains the primary context of device `ordinal` (`cuDeviceGet`,
    /// `cuDevicePrimaryCtxRetain`). Does not make it current.
    pub fn retain_primary(ordinal: i32) -> Result<Arc<Context>, DriverError> {
        let dev = result::device_get(ordinal)?;
        let raw = result::primary_ctx_retain(dev)?;
        Ok(Arc::new(Context {
            dev,
            raw,
            errors: Mutex::new((Vec::new(), 0)),
        }))
    }

    /// The device.
    pub fn device(&self) -> sys::CUdevice {
        self.dev
    }

    /// The raw context handle (alive while `self` is).
    pub fn raw(&self) -> sys::CUcontext {
        self.raw
    }

    /// Makes the context current on the calling thread unless it already is; cached per
    /// thread, so a repeated call costs a thread-local read and no driver call.
    #[inline]
    pub fn bind(&self) -> Result<(), DriverError> {
        // SAFETY: `raw` is retained while `self` lives.
        unsafe { bind(self.raw) }
    }

    /// Keeps the error of `r`, if any, to be reported later ([`Context::take_errors`]).
    /// For releases that cannot return their error (`Drop`).
    pub fn record<E: Into<String>>(&self, r: Result<(), E>) {
        if let Err(e) = r {
            let mut g = self.errors.lock().unwrap_or_else(|p| p.into_inner());
            if g.0.len() < MAX_RECORDED {
                g.0.push(e.into());
            } else {
                g.1 += 1;
            }
        }
    }

    /// The errors recorded since the last call, oldest first (at most 64, then a line
    /// saying how many more there were).
    pub fn take_errors(&self) -> Vec<String> {
        let mut g = self.errors.lock().unwrap_or_else(|p| p.into_inner());
        let (mut v, more) = std::mem::take(&mut *g);
        if more > 0 {
            v.push(format!("and {more} more errors"));
        }
        v
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        unbind_all();
        // SAFETY: releases the retain of `retain_primary`, once; every handle of the
        // context held an `Arc` of it, so none is left.
        self.record(unsafe { result::primary_ctx_release(self.dev) });
        for e in self.take_errors() {
            tracing::debug!(target: "offload_sched::plugin", error = %e, "cuda teardown");
        }
    }
}

/// A stream (`cuStreamCreate`), destroyed on drop (`cuStreamDestroy`; pending work still
/// completes).
#[derive(Debug)]
pub struct Stream {
    raw: sys::CUstream,
    ctx: Arc<Context>,
}

// SAFETY: a stream handle is usable from any thread once its context is current (every
// use binds it); the handle itself is immutable.
unsafe impl Send for Stream {}
// SAFETY: as above.
unsafe impl Sync for Stream {}

impl Stream {
    /// `cuStreamCreate` flag: no implicit synchronization with the legacy default stream.
    pub const NON_BLOCKING: u32 = 1;

    /// A new stream of `ctx` (made current first) with `flags`.
    pub fn create(ctx: &Arc<Context>, flags: u32) -> Result<Stream, DriverError> {
        ctx.bind()?;
        let raw = result::stream_create(flags)?;
        Ok(Stream {
            raw,
            ctx: ctx.clone(),
        })
    }

    /// A new stream of `ctx` (made current first) with `flags`, at the greatest priority
    /// of `cuCtxGetStreamPriorityRange` (`cuStreamCreateWithPriority`): the device's
    /// block scheduler runs its work first where other streams' work is also ready.
    pub fn create_high_priority(ctx: &Arc<Context>, flags: u32) -> Result<Stream, DriverError> {
        ctx.bind()?;
        let (_, greatest) = result::stream_priority_range()?;
        let raw = result::stream_create_with_priority(flags, greatest)?;
        Ok(Stream {
            raw,
            ctx: ctx.clone(),
        })
    }

    /// The raw handle (alive while `self` is).
    pub fn raw(&self) -> sys::CUstream {
        self.raw
    }

    /// The stream's context.
    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// `cuStreamSynchronize`: waits for the stream's issued work; its sticky errors.
    pub fn synchronize(&self) -> Result<(), DriverError> {
        // SAFETY: a live stream.
        unsafe { result::stream_synchronize(self.raw) }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.ctx.record(self.ctx.bind());
        // SAFETY: a stream of ours, destroyed once.
        self.ctx.record(unsafe { result::stream_destroy(self.raw) });
    }
}

/// An event (`cuEventCreate`), destroyed on drop (`cuEventDestroy`; a pending record
/// still completes).
#[derive(Debug)]
pub struct Event {
    raw: sys::CUevent,
    ctx: Arc<Context>,
}

// SAFETY: as for `Stream`.
unsafe impl Send for Event {}
// SAFETY: as above.
unsafe impl Sync for Event {}

impl Event {
    /// `cuEventCreate` flag: no timing (cheaper record and wait).
    pub const DISABLE_TIMING: u32 = 2;

    /// A new event of `ctx` (made current first) with `flags` (0: with timing).
    pub fn create(ctx: &Arc<Context>, flags: u32) -> Result<Event, DriverError> {
        ctx.bind()?;
        let raw = result::event_create(flags)?;
        Ok(Event {
            raw,
            ctx: ctx.clone(),
        })
    }

    /// The raw handle (alive while `self` is).
    pub fn raw(&self) -> sys::CUevent {
        self.raw
    }

    /// `cuEventSynchronize`: waits for the work the event captured.
    pub fn synchronize(&self) -> Result<(), DriverError> {
        // SAFETY: a live event.
        unsafe { result::event_synchronize(self.raw) }
    }

    /// `cuEventElapsedTime(self, end)`: milliseconds from `self` to `end` (both with
    /// timing and completed).
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32, DriverError> {
        // SAFETY: two live events; the driver checks timing and completion.
        unsafe { result::event_elapsed_time(self.raw, end.raw) }
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        self.ctx.record(self.ctx.bind());
        // SAFETY: an event of ours, destroyed once.
        self.ctx.record(unsafe { result::event_destroy(self.raw) });
    }
}

/// Device memory from `cuMemAlloc`, freed on drop (`cuMemFree`). The owner makes sure no
/// pending work uses it by then.
#[derive(Debug)]
pub struct DeviceBlock {
    ptr: sys::CUdeviceptr,
    bytes: usize,
    ctx: Arc<Context>,
}

impl DeviceBlock {
    /// `bytes` bytes of device memory in `ctx` (made current first).
    pub fn alloc(ctx: &Arc<Context>, bytes: usize) -> Result<DeviceBlock, DriverError> {
        ctx.bind()?;
        let ptr = result::mem_alloc(bytes)?;
        Ok(DeviceBlock {
            ptr,
            bytes,
            ctx: ctx.clone(),
        })
    }

    /// The device address.
    pub fn ptr(&self) -> sys::CUdeviceptr {
        self.ptr
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.bytes
    }

    /// Whether the block has no bytes.
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }
}

impl Drop for DeviceBlock {
    fn drop(&mut self) {
        self.ctx.record(self.ctx.bind());
        // SAFETY: a block of ours, freed once; the owner synchronized its users.
        self.ctx.record(unsafe { result::mem_free(self.ptr) });
    }
}

/// Page-locked host memory from `cuMemHostAlloc`, freed on drop or by
/// [`PinnedHost::free`] (`cuMemFreeHost`). The owner makes sure no pending work uses it
/// by then.
#[derive(Debug)]
pub struct PinnedHost {
    /// Null once freed by [`PinnedHost::free`].
    ptr: *mut c_void,
    bytes: usize,
    ctx: Arc<Context>,
}

// SAFETY: plain memory; the handle is usable from any thread, and what the memory holds
// is the owner's to synchronize.
unsafe impl Send for PinnedHost {}
// SAFETY: as above.
unsafe impl Sync for PinnedHost {}

impl PinnedHost {
    /// `bytes` bytes of page-locked host memory with `flags` (e.g.
    /// `sys::CU_MEMHOSTALLOC_PORTABLE`), allocated in `ctx` (made current first).
    /// The contents are not initialised.
    pub fn alloc(ctx: &Arc<Context>, bytes: usize, flags: u32) -> Result<PinnedHost, DriverError> {
        ctx.bind()?;
        let ptr = result::mem_host_alloc(bytes, flags)?;
        Ok(PinnedHost {
            ptr,
            bytes,
            ctx: ctx.clone(),
        })
    }

    /// The host address.
    pub fn as_ptr(&self) -> *mut c_void {
        self.ptr
    }

    /// The host address as an integer.
    pub fn addr(&self) -> u64 {
        self.ptr as usize as u64
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.bytes
    }

    /// Whether the block has no bytes.
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// Frees the block now and returns the driver's error, if any (no context is made
    /// current: `cuMemFreeHost` takes the calling thread's).
    pub fn free(mut self) -> Result<(), DriverError> {
        let p = std::mem::replace(&mut self.ptr, std::ptr::null_mut());
        // SAFETY: a block of ours, freed once (`Drop` skips the null left behind); the
        // owner synchronized its users.
        unsafe { result::mem_free_host(p) }
    }
}

impl Drop for PinnedHost {
    fn drop(&mut self) {
        if self.ptr.is_null() {
            return;
        }
        self.ctx.record(self.ctx.bind());
        // SAFETY: a block of ours, freed once; the owner synchronized its users.
        self.ctx.record(unsafe { result::mem_free_host(self.ptr) });
    }
}

/// A loaded module (`cuModuleLoadData`), unloaded on drop (`cuModuleUnload`). Function
/// handles taken from it are valid while it lives.
#[derive(Debug)]
pub struct Module {
    raw: sys::CUmodule,
    ctx: Arc<Context>,
}

// SAFETY: as for `Stream`.
unsafe impl Send for Module {}
// SAFETY: as above.
unsafe impl Sync for Module {}

impl Module {
    /// Loads `image` into `ctx` (made current first).
    ///
    /// # Safety
    /// `image` is a CUBIN, a fatbin or NUL-terminated PTX (the driver reads a PTX image
    /// up to its NUL).
    pub unsafe fn load(ctx: &Arc<Context>, image: &[u8]) -> Result<Module, DriverError> {
        ctx.bind()?;
        let raw = result::module_load_data(image.as_ptr() as *const c_void)?;
        Ok(Module {
            raw,
            ctx: ctx.clone(),
        })
    }

    /// The raw handle (alive while `self` is).
    pub fn raw(&self) -> sys::CUmodule {
        self.raw
    }

    /// The kernel `name` (`cuModuleGetFunction`), valid while `self` lives.
    pub fn function(&self, name: &CStr) -> Result<sys::CUfunction, DriverError> {
        // SAFETY: a live module.
        unsafe { result::module_get_function(self.raw, name) }
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        self.ctx.record(self.ctx.bind());
        // SAFETY: a module of ours, unloaded once; the owner synchronized the streams
        // that ran its kernels.
        self.ctx.record(unsafe { result::module_unload(self.raw) });
    }
}

/// A graph template (`cuGraphCreate`) and, once [`Graph::instantiate`]d, its executable
/// graph (`cuGraphInstantiateWithFlags`); both destroyed on drop (`cuGraphExecDestroy`,
/// an executable graph in flight is freed when it completes; then `cuGraphDestroy`).
/// The template is kept after instantiation, so its edges can be read back
/// ([`Graph::edges`]).
#[derive(Debug)]
pub struct Graph {
    raw: sys::CUgraph,
    /// Null until instantiated.
    exec: sys::CUgraphExec,
    ctx: Arc<Context>,
}

// SAFETY: graph and executable-graph handles are usable from any thread once their
// context is current (every use binds it); the owner serializes changes (`&mut self` or
// its own lock).
unsafe impl Send for Graph {}
// SAFETY: as above.
unsafe impl Sync for Graph {}

impl Graph {
    /// An empty graph template, its nodes to be made in `ctx` (made current first).
    pub fn create(ctx: &Arc<Context>) -> Result<Graph, DriverError> {
        ctx.bind()?;
        let raw = result::graph_create()?;
        Ok(Graph {
            raw,
            exec: std::ptr::null_mut(),
            ctx: ctx.clone(),
        })
    }

    /// The template's raw handle (alive while `self` is).
    pub fn raw(&self) -> sys::CUgraph {
        self.raw
    }

    /// The executable graph's raw handle (null before [`Graph::instantiate`]).
    pub fn exec(&self) -> sys::CUgraphExec {
        self.exec
    }

    /// The graph's context.
    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// Instantiates the template (flags 0) in its context (made current first); an
    /// earlier executable graph is destroyed first.
    pub fn instantiate(&mut self) -> Result<(), DriverError> {
        self.ctx.bind()?;
        self.destroy_exec()?;
        // SAFETY: a live template of this context, current.
        self.exec = unsafe { result::graph_instantiate(self.raw, 0) }?;
        Ok(())
    }

    fn destroy_exec(&mut self) -> Result<(), DriverError> {
        let e = std::mem::replace(&mut self.exec, std::ptr::null_mut());
        if e.is_null() {
            return Ok(());
        }
        // SAFETY: an executable graph of ours, destroyed once (the field is null now).
        unsafe { result::graph_exec_destroy(e) }
    }

    /// The template's edges as the driver holds them (`cuGraphGetEdges` twice: the
    /// count, then the arrays).
    pub fn edges(&self) -> Result<Vec<(sys::CUgraphNode, sys::CUgraphNode)>, DriverError> {
        let mut n = 0usize;
        // SAFETY: a live template; null arrays ask for the count.
        unsafe {
            result::graph_get_edges(self.raw, std::ptr::null_mut(), std::ptr::null_mut(), &mut n)
        }?;
        if n == 0 {
            // The second call with empty arrays is CUDA_ERROR_INVALID_VALUE.
            return Ok(Vec::new());
        }
        let mut from = vec![std::ptr::null_mut(); n];
        let mut to = vec![std::ptr::null_mut(); n];
        let mut got = n;
        // SAFETY: both arrays hold `got` handles.
        unsafe { result::graph_get_edges(self.raw, from.as_mut_ptr(), to.as_mut_ptr(), &mut got) }?;
        let got = got.min(n);
        Ok(from.into_iter().zip(to).take(got).collect())
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        self.ctx.record(self.ctx.bind());
        let e = self.destroy_exec();
        self.ctx.record(e);
        // SAFETY: a template of ours, destroyed once; no node handle of it is used after.
        self.ctx.record(unsafe { result::graph_destroy(self.raw) });
    }
}
