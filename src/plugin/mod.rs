//! Plugins: backends with the libomptarget RTL shape (`__tgt_rtl_*` in
//! `openmp/libomptarget/include/omptargetplugin.h`): device count, a per-device stream
//! pool, stream-ordered allocation, H2D (`data_submit_async`), D2H (`data_retrieve_async`),
//! kernel launch (`run_target_region_async`), events (`record_event`, `wait_event`,
//! `synchronize_event`) and `synchronize`.
//!
//! Only the executor ([`crate::exec`]) calls a plugin; every earlier stage is plain data.
//!
//! Backends (each implements every call of [`Plugin`]; no call has a default body):
//! - [`host`]: "device" memory separate from host memory, one worker thread per stream,
//!   kernels called through libffi. Always built.
//! - `cuda` (feature `cuda`): the CUDA driver API through cudarc, loaded at run time; the
//!   same plugin times its work with option `timing` (`cuda-timing` in [`open`]).
//! - [`null::NullPlugin`]: does no work (fake device addresses, real host memory), for
//!   measuring the executor's own cost per op.
//!
//! What a backend can do is data: [`Plugin::info`] returns a [`PluginInfo`] (devices,
//! [`DeviceMemory`], parallel issue, whether it computes, takes application memory,
//! replays graphs, times its work, copies between devices, its library kernels, send /
//! receive). The executor asks once per run and decides from it; it never reads a name
//! or tries a call to see whether it is supported.
//!
//! Wrappers are hooks on the one forwarding layer, [`layer::Layered`], which forwards
//! every call of the one list of calls (`plugin_calls!` below, from which [`Plugin`]'s
//! calls and [`PluginCall`] are generated too): [`faulty::FaultyPlugin`] fails the k-th
//! call of one kind (fault injection for the executor's cleanup paths); the CLI's
//! progress bar and test wrappers are hooks as well.
//!
//! [`open`] makes a backend by name ([`NAMES`]: `host`, `cuda`, `cuda-timing`, `auto`,
//! `null`), the one lookup of the CLI and the benches (`lookup`).
//!
//! # The contract (every plugin keeps it; the executor relies on nothing more)
//!
//! 1. **Streams are in-order queues.** Work issued to one stream (alloc, free, submit,
//!    retrieve, launch, record, wait) runs in issue order: an op starts only after every
//!    op issued to that stream before it has completed, including its memory effects.
//!    Nothing orders two streams except events.
//! 2. **Events order work across streams.** [`Plugin::record_event`] captures the work
//!    issued to its stream so far; [`Plugin::wait_event`] makes a stream hold every op
//!    issued to it later until that captured work has completed. A wait refers to the
//!    most recent record issued *before the wait call* (CUDA `cuStreamWaitEvent`
//!    semantics); waiting on an event never recorded is a no-op. Re-recording an event
//!    after its waits were issued does not affect those waits, so events may be pooled.
//! 3. **The host sees results only after a host wait.** Memory written by a retrieve
//!    (D2H) or read by a submit (H2D) may be touched by the host only after a
//!    [`Plugin::synchronize`] on that stream returned `Ok` after the op was issued, or a
//!    [`Plugin::synchronize_event`] on an event recorded on that stream after the op.
//!    Until then the host must neither read the destination nor rewrite the source.
//! 4. **Which calls block.** `synchronize` blocks the calling thread until the stream's
//!    issued work has completed; `synchronize_event` until the work its event's latest
//!    record captured has completed (not what the stream received after the record).
//!    The setup calls ([`CallKind::Setup`]: `create_streams`, `alloc_host`, `free_host`,
//!    `register_host`, `load_kernel`, `create_event`, `destroy_event`, the graph calls
//!    but `graph_launch`) may block. All stream calls ([`CallKind::Stream`]: `alloc`,
//!    `free`, `fill_zero`, `submit`, `retrieve`, `copy_peer`, `launch`, `record_event`,
//!    `wait_event`, `graph_launch`) are asynchronous: they return once the op is
//!    enqueued and never wait for device work. A stream-ordered `alloc` returns the address at once; the memory
//!    may be used by ops issued to that stream afterwards (and by other streams only
//!    after an event orders them behind the alloc). A stream-ordered `free` releases
//!    memory after the stream's earlier work; ops issued to any stream after the free
//!    call must not use the address.
//!
//!    **Reuse of freed device memory is the allocator's job.** The lowering does not
//!    order the `free` of one allocation before the `alloc` of another (two allocations
//!    of the same host section are independent, see [design notes](crate::design) "Dependencies"); the
//!    caller only guarantees that every use of an allocation, on any stream, is ordered
//!    before its `free` by stream order or by events. So a plugin may hand a block freed
//!    on stream `s` to an `alloc` on `s` at once (stream order runs the new allocation's
//!    ops after the free, hence after every old use), but to an `alloc` on another
//!    stream only once an event or a host wait orders that stream's later work behind
//!    the free. This is the rule of CUDA's stream-ordered memory allocator
//!    (`cuMemFreeAsync` / `cuMemAllocAsync`, CUDA Programming Guide, "Stream Ordered
//!    Memory Allocator": memory freed in a stream may be reused by an allocation in the
//!    same stream at once, and by another stream after an event dependency, pool
//!    attribute `CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES`). The CUDA
//!    plugin keeps it with a per-stream block cache in front of the driver's pool; the
//!    host plugin with per-stream free lists ([`host`]); both by [`size_class`]. A new
//!    allocation reads as fresh memory only to ops ordered after its `alloc`; an op of
//!    the old allocation that was not ordered before the free (a missing edge) may read
//!    the new allocation's data or clobber it.
//! 5. **Errors.** A call returning `Err` enqueued nothing. Errors of asynchronous work
//!    that only show while it runs are *sticky* until reported: the next `synchronize`
//!    on that stream returns them (or a `synchronize_event` on an event recorded on it
//!    after them). Whether later calls report them again is the backend's: the host
//!    plugin reports each failure once (a later run starts clean); on CUDA, errors that
//!    corrupt the context (an illegal address) stay for the context's life.
//! 6. **Threads.** Plugins are `Send + Sync`; calls on one stream must come from one
//!    thread at a time; different streams may be called from different threads at
//!    once (the executor issues from one thread, or one per stream with
//!    [`crate::exec::IssueMode::PerStream`]); `synchronize_event` may be called from any
//!    thread, also while another thread issues to the stream that recorded the event
//!    (the executor's host thread does, with threaded issue). Dropping a plugin waits for
//!    all issued work and joins its threads; device memory still allocated is released.
//! 7. **Capabilities are data.** [`Plugin::info`] is constant for the plugin's life. The
//!    executor makes a call a capability stands for only where [`PluginInfo`] says the
//!    plugin has it: [`Plugin::register_host`] with [`PluginInfo::app_memory`], the graph
//!    calls with [`PluginInfo::graphs`], [`Plugin::copy_peer`] with
//!    [`PluginInfo::peer_copies`] (a schedule with a peer copy is refused before anything
//!    runs otherwise), and it reads [`Plugin::drain_timings`] and [`Plugin::next_seq`]
//!    with [`PluginInfo::timing`]. A backend still implements every call: one it lacks
//!    returns an error naming the call ([`PluginError::Backend`]).
//! 8. **Library kernels are kernels.** The library tile kernels (`gemm`, `syrk`, `trsm`,
//!    `potrf`, `getrf` on column-major f32/f64 tiles: [`crate::model::library`]) go through
//!    [`Plugin::load_kernel`] and [`Plugin::launch`] (and graph kernel nodes) like every
//!    kernel: no call of their own. A plugin lists the ones it runs in
//!    [`PluginInfo::library_kernels`]; the executor refuses a schedule that calls one the
//!    plugin does not list before anything runs ([`crate::exec::ExecError::Schedule`]
//!    naming the op, its region and the kernel), so `load_kernel` of an unlisted one is
//!    never made (a backend still refuses it with [`PluginError::KernelLoad`]).
//!    `load_kernel` gets the built-in signature ([`crate::model::LibraryKernel::of`] tells
//!    it) and `T` = f32 or f64; `launch` gets the arguments in signature order: flags as
//!    `i32` LAPACK characters ([`crate::model::Flag::code`]), dimensions and leading
//!    dimensions as `i64` elements, `alpha`/`beta` as `T`, tiles as buffers. The lowering
//!    has checked shapes against the tiles' lengths ([`crate::model::library::check_call`]);
//!    a plugin checks them again at issue ([`PluginError::Signature`]) and ignores the
//!    launch shape. The call runs on the stream in order, one vendor-library call per
//!    launch (host: OpenBLAS on the stream's worker, one thread; CUDA: cuBLAS/cuSOLVER on
//!    the stream's handle). A `potrf` whose matrix is not positive definite is a failure
//!    of the launched work, sticky as in rule 5, whose message is
//!    [`crate::model::library::potrf_failure`] (LAPACK's `info`); so is a `getrf` (no
//!    pivoting) with a zero or non-finite pivot ([`crate::model::library::getrf_failure`],
//!    [`crate::model::library::getrf_nonfinite_failure`]).
//!
//! Pointers are opaque: a [`DevicePtr`] is a device address the host must not
//! dereference; a [`HostPtr`] is a host address of plugin-allocated memory (so a CUDA
//! plugin can pin it) that the host may read and write under rule 3.

pub mod cuda;
pub mod faulty;
pub(crate) mod graph;
pub mod host;
mod info;
pub(crate) mod lookup;
pub mod null;

pub use graph::{GraphDesc, GraphHandle, GraphNode};
pub use info::{DeviceMemory, MemoryInfo, PluginInfo};
pub use lookup::{open, Backend, LookupError, OpenOptions, Opened, NAMES};

use crate::model::{Access, ElemType, KernelSig, LaunchShape, Scalar};
use std::fmt;
use std::time::Instant;
use thiserror::Error;

/// A device address. Opaque to the host; arithmetic with [`DevicePtr::offset`] gives an
/// address inside the same allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DevicePtr(pub u64);

impl DevicePtr {
    /// The address `bytes` bytes further on.
    pub fn offset(self, bytes: u64) -> DevicePtr {
        DevicePtr(self.0.wrapping_add(bytes))
    }
}

impl fmt::Display for DevicePtr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "dev:{:#x}", self.0)
    }
}

/// A host address of memory from [`Plugin::alloc_host`], valid for the bytes asked for
/// until [`Plugin::free_host`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostPtr(pub u64);

impl HostPtr {
    /// The address `bytes` bytes further on.
    pub fn offset(self, bytes: u64) -> HostPtr {
        HostPtr(self.0.wrapping_add(bytes))
    }

    /// The address as a raw pointer (dereference it only under the trait contract).
    pub fn as_ptr(self) -> *mut u8 {
        self.0 as usize as *mut u8
    }
}

impl fmt::Display for HostPtr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "host:{:#x}", self.0)
    }
}

/// A stream of the plugin's pool (an `AsyncInfo` queue).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamHandle(pub u32);

impl fmt::Display for StreamHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "stream {}", self.0)
    }
}

/// A plugin event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventHandle(pub u32);

impl fmt::Display for EventHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "event {}", self.0)
    }
}

/// A loaded kernel: one signature instantiated for one element type on one device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KernelHandle(pub u32);

/// One kernel argument resolved to device memory, in signature order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LaunchArg {
    /// `len` elements of `ty` starting `offset` bytes into the allocation at `ptr`.
    Buffer {
        ptr: DevicePtr,
        /// Offset in bytes from `ptr`.
        offset: u64,
        /// Length in elements.
        len: u64,
        ty: ElemType,
        access: Access,
    },
    /// A scalar passed by value.
    Scalar(Scalar),
}

/// When a piece of stream work ran, for traces. `seq` numbers the stream calls that
/// returned `Ok` on that stream (alloc, free, submit, retrieve, launch, record_event,
/// wait_event), from 0, in issue order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    pub stream: StreamHandle,
    pub seq: u64,
    pub start: Instant,
    pub end: Instant,
    /// 0 for work timed on its own. `n > 0`: this call was one of `n` copies timed as
    /// one unit (the CUDA plugin's small-copy batch, one copy-kernel launch): every copy
    /// of the unit gets the unit's `start` and `end`.
    pub batch: u32,
}

/// Every fallible plugin call, written once: `plugin_calls!(m)` hands `m!` the list, one
/// entry per call: its docs, its [`PluginCall`] variant, its name in messages, its
/// [`CallKind`], and its signature as [`Plugin`] declares it. From it come the trait's
/// calls and [`PluginCall`] (here, [`define_plugin!`]) and the one forwarding layer
/// ([`layer::Layered`]). A call added here must be implemented by every backend; the
/// layer forwards it through its hooks without a change.
macro_rules! plugin_calls {
    ($then:ident) => {
        $then! {
            /// The stream pool of `device`: at least `count` streams. The first call
            /// creates them; later calls return the same streams (growing the pool if more
            /// are asked for). Streams live until the plugin is dropped. Blocking.
            ///
            /// Errors: [`PluginError::NoDevice`]; backend failures creating streams.
            CreateStreams "create streams" Setup
            fn create_streams(
                &self,
                device: u32,
                count: u32,
            ) -> Result<Vec<StreamHandle>, PluginError>;

            /// The high-priority stream pool of `device`: at least `count` streams whose
            /// work the device runs first where other streams' work is also ready, for the
            /// schedule's high-priority streams ([`crate::schedule::StreamInfo::high_priority`],
            /// OpenMP `priority(n)`). A pool of its own: never a stream of
            /// [`Plugin::create_streams`]; the same streams on later calls, as there.
            /// CUDA: `cuStreamCreateWithPriority` at the greatest priority of
            /// `cuCtxGetStreamPriorityRange` (CUDA Driver API §6.18 "Stream
            /// Management"). The host and null plugins run them as any other stream (the
            /// priority is a hint: results never depend on it). Blocking.
            ///
            /// Errors: as [`Plugin::create_streams`].
            CreatePriorityStreams "create priority streams" Setup
            fn create_priority_streams(
                &self,
                device: u32,
                count: u32,
            ) -> Result<Vec<StreamHandle>, PluginError>;

            /// Stream-ordered allocation of `bytes` bytes of device memory on the stream's
            /// device (`cuMemAllocAsync`). Returns the address at once (contract rule 4).
            ///
            /// Errors: [`PluginError::InvalidHandle`] for a stream not live;
            /// [`PluginError::OutOfMemory`].
            Alloc "alloc" Stream
            fn alloc(&self, stream: StreamHandle, bytes: u64) -> Result<DevicePtr, PluginError>;

            /// Stream-ordered release of an allocation made by [`Plugin::alloc`]
            /// (`cuMemFreeAsync`; contract rule 4 on reuse).
            ///
            /// Errors: [`PluginError::InvalidPointer`] for an address that is not a live
            /// allocation's start; [`PluginError::InvalidHandle`] for a stream not live.
            Free "free" Stream
            fn free(&self, stream: StreamHandle, ptr: DevicePtr) -> Result<(), PluginError>;

            /// Stream-ordered fill of `bytes` bytes at `ptr` (inside one live allocation of
            /// the stream's device) with zero bytes (`cuMemsetD8Async`): ops issued to the
            /// stream afterwards see zeros (rule 1). The executor calls it right after the
            /// `Alloc` of storage the program reads before writing
            /// ([`crate::lower::DeviceAlloc::zero`]).
            ///
            /// Errors: [`PluginError::InvalidPointer`] for a range outside a live
            /// allocation; backend failures.
            FillZero "fill zero" Stream
            fn fill_zero(
                &self,
                stream: StreamHandle,
                ptr: DevicePtr,
                bytes: u64,
            ) -> Result<(), PluginError>;

            /// Host memory for a program buffer: `bytes` bytes, zeroed, aligned to at least
            /// 64 bytes (page-locked where the backend can: CUDA `cuMemHostAlloc`).
            /// Blocking.
            ///
            /// Errors: [`PluginError::OutOfMemory`].
            AllocHost "alloc host" Setup
            fn alloc_host(&self, bytes: u64) -> Result<HostPtr, PluginError>;

            /// Releases memory from [`Plugin::alloc_host`]. The caller must have
            /// synchronized every stream that used it (contract rule 3). Blocking.
            ///
            /// Errors: [`PluginError::InvalidPointer`] for memory not from `alloc_host`.
            FreeHost "free host" Setup
            fn free_host(&self, ptr: HostPtr) -> Result<(), PluginError>;

            /// Lets application memory (`bytes` bytes at `ptr`, allocated by the
            /// application, not by [`Plugin::alloc_host`]) be used as host memory by copies
            /// and host work until [`Plugin::unregister_host`], like `cuMemHostRegister`.
            /// Called only where [`PluginInfo::app_memory`] is true. Returns `Ok(true)` when
            /// registered, `Ok(false)` when this range is not taken (a zero address, or one
            /// overlapping memory the plugin already holds): the executor then stages it
            /// through [`Plugin::alloc_host`] memory. The caller keeps the memory alive and
            /// unregisters it after synchronizing every stream that used it. Blocking.
            ///
            /// Errors: backend failures; a plugin without application memory returns
            /// [`PluginError::Backend`].
            RegisterHost "register host" Setup
            fn register_host(&self, ptr: HostPtr, bytes: u64) -> Result<bool, PluginError>;

            /// Ends a [`Plugin::register_host`] registration. Blocking.
            ///
            /// Errors: [`PluginError::InvalidPointer`] for memory not registered.
            UnregisterHost "unregister host" Setup
            fn unregister_host(&self, ptr: HostPtr) -> Result<(), PluginError>;

            /// H2D: copies `bytes` bytes from host `src` to device `dst`, asynchronously on
            /// `stream` (`__tgt_rtl_data_submit_async`; CUDA `cuMemcpyHtoDAsync`).
            ///
            /// Errors: [`PluginError::InvalidPointer`] for a range outside a live
            /// allocation of its space; [`PluginError::InvalidHandle`].
            Submit "h2d" Stream
            fn submit(
                &self,
                stream: StreamHandle,
                dst: DevicePtr,
                src: HostPtr,
                bytes: u64,
            ) -> Result<(), PluginError>;

            /// D2H: copies `bytes` bytes from device `src` to host `dst`, asynchronously on
            /// `stream` (`__tgt_rtl_data_retrieve_async`; CUDA `cuMemcpyDtoHAsync`).
            ///
            /// Errors: as [`Plugin::submit`].
            Retrieve "d2h" Stream
            fn retrieve(
                &self,
                stream: StreamHandle,
                dst: HostPtr,
                src: DevicePtr,
                bytes: u64,
            ) -> Result<(), PluginError>;

            /// Peer copy: copies `bytes` bytes from `src` in device `src_device`'s memory
            /// to `dst` in device `dst_device`'s memory, asynchronously on `stream`, a
            /// stream of `dst_device` (CUDA `cuMemcpyPeerAsync`, or D2H + H2D through
            /// pinned staging where `cuDeviceCanAccessPeer` says no). Ordered after earlier
            /// work on `stream` only: the caller orders it after the writer of `src` (on
            /// `src_device`'s stream) with an event, and the free of `src` after it the
            /// same way. `src_device == dst_device` is allowed (a device-to-device copy).
            /// Called only where [`PluginInfo::peer_copies`] is true (the executor refuses
            /// a schedule with a peer copy before anything runs otherwise).
            ///
            /// Errors: as [`Plugin::submit`], and [`PluginError::NoDevice`].
            CopyPeer "peer copy" Stream
            fn copy_peer(
                &self,
                stream: StreamHandle,
                dst: DevicePtr,
                dst_device: u32,
                src: DevicePtr,
                src_device: u32,
                bytes: u64,
            ) -> Result<(), PluginError>;

            /// Loads `sig` instantiated for element type `ty` on `device` (built-in or
            /// user kernel, see [`crate::model::KernelSource`]). Loading the same kernel
            /// twice returns the same handle. Blocking.
            ///
            /// Errors: [`PluginError::KernelLoad`]; [`PluginError::NoDevice`].
            LoadKernel "load kernel" Setup
            fn load_kernel(
                &self,
                device: u32,
                sig: &KernelSig,
                ty: ElemType,
            ) -> Result<KernelHandle, PluginError>;

            /// Launches a loaded kernel on `stream` (`__tgt_rtl_run_target_region_async`;
            /// CUDA `cuLaunchKernel`). `args` are in signature order and are checked
            /// against the declared signature before anything is enqueued.
            ///
            /// Errors: [`PluginError::Signature`]; [`PluginError::InvalidPointer`] for a
            /// buffer outside a live allocation; [`PluginError::InvalidHandle`].
            Launch "launch" Stream
            fn launch(
                &self,
                stream: StreamHandle,
                kernel: KernelHandle,
                args: &[LaunchArg],
                shape: LaunchShape,
            ) -> Result<(), PluginError>;

            /// A new (or pooled) event usable by streams of `device`. Blocking.
            ///
            /// Errors: [`PluginError::NoDevice`]; backend failures.
            CreateEvent "create event" Setup
            fn create_event(&self, device: u32) -> Result<EventHandle, PluginError>;

            /// Destroys an event. Waits already issued on it are unaffected. Blocking.
            ///
            /// Errors: [`PluginError::InvalidHandle`] for an event not live.
            DestroyEvent "destroy event" Setup
            fn destroy_event(&self, event: EventHandle) -> Result<(), PluginError>;

            /// Records `event` on `stream` after the work issued to it so far
            /// (`cuEventRecord`; contract rule 2).
            ///
            /// Errors: [`PluginError::InvalidHandle`] for a stream or event not live, or an
            /// event of another device.
            RecordEvent "record event" Stream
            fn record_event(
                &self,
                stream: StreamHandle,
                event: EventHandle,
            ) -> Result<(), PluginError>;

            /// Makes `stream` wait for the event's most recent record before any work
            /// issued to it later (`cuStreamWaitEvent`). The host does not block. The
            /// event may belong to another device than the stream (a cross-device edge); a
            /// record may not.
            ///
            /// Errors: [`PluginError::InvalidHandle`] for a stream or event not live.
            WaitEvent "wait event" Stream
            fn wait_event(
                &self,
                stream: StreamHandle,
                event: EventHandle,
            ) -> Result<(), PluginError>;

            /// Blocks the host until all work issued to `stream` has completed
            /// (`cuStreamSynchronize`).
            ///
            /// Errors: sticky asynchronous errors ([`PluginError::Async`], contract rule
            /// 5); [`PluginError::InvalidHandle`].
            Synchronize "synchronize" HostWait
            fn synchronize(&self, stream: StreamHandle) -> Result<(), PluginError>;

            /// Whether all work issued to `stream` has completed, without blocking where
            /// the backend can tell (`cuStreamQuery`); a backend that cannot tell blocks as
            /// [`Plugin::synchronize`] does and returns `Ok(true)` (the host plugin).
            ///
            /// Errors: as [`Plugin::synchronize`].
            Query "query" HostWait
            fn query(&self, stream: StreamHandle) -> Result<bool, PluginError>;

            /// Blocks the host until the work captured by the event's most recent record
            /// (issued before this call) has completed (`cuEventSynchronize`, CUDA Driver
            /// API §6.19 "Event Management"): work the recording stream received after the
            /// record is not waited for. An event never recorded completes at once (as in
            /// CUDA). The caller must not re-record the event before this call returns.
            /// Afterwards the host may touch the memory of every op the record captured
            /// (contract rule 3).
            ///
            /// Errors: [`PluginError::InvalidHandle`] for an event not live; a failure of
            /// the captured work (sticky, as for [`Plugin::synchronize`]):
            /// [`PluginError::Async`] naming the recording stream.
            SynchronizeEvent "synchronize event" HostWait
            fn synchronize_event(&self, event: EventHandle) -> Result<(), PluginError>;

            /// Instantiates `desc` for replay (`graph` has the semantics): the CUDA
            /// plugin builds a CUDA graph node by node and instantiates it
            /// (`cuGraphCreate`, `cuGraphAdd*Node`, `cuGraphAddDependencies`,
            /// `cuGraphInstantiate`; CUDA Driver API §6.24 "Graph Management"). Blocking (a
            /// setup call). Every address must lie in live memory for as long as the graph
            /// is launched. Called only where [`PluginInfo::graphs`] is true.
            ///
            /// Errors: as the stream calls the nodes stand for
            /// ([`PluginError::InvalidPointer`], [`PluginError::Signature`], ...) with
            /// [`PluginCall::GraphInstantiate`]; backend failures building the graph.
            GraphInstantiate "graph instantiate" Setup
            fn graph_instantiate(&self, desc: &GraphDesc) -> Result<GraphHandle, PluginError>;

            /// The edges of an instantiated graph as the backend holds them, in the node
            /// indices of its [`GraphDesc`] (CUDA: read back with `cuGraphGetEdges`), for
            /// the replay proof ([`crate::replay::prove`]). Blocking.
            ///
            /// Errors: [`PluginError::InvalidHandle`] for a graph not live.
            GraphEdges "graph edges" Setup
            fn graph_edges(&self, graph: GraphHandle) -> Result<Vec<(u32, u32)>, PluginError>;

            /// Points copy node `node` at host memory `host` (same byte count) for later
            /// launches (CUDA: `cuGraphExecMemcpyNodeSetParams`, or the copy kernel node's
            /// parameters). The caller has synchronized every earlier launch of the graph.
            /// On `Err` the graph is unchanged and the caller instantiates it again.
            ///
            /// Errors: [`PluginError::InvalidHandle`] for a graph not live or a node that
            /// is not a copy; [`PluginError::InvalidPointer`] for memory the plugin cannot
            /// copy from or to; backend refusals.
            GraphUpdate "graph update" Setup
            fn graph_set_host(
                &self,
                graph: GraphHandle,
                node: u32,
                host: HostPtr,
            ) -> Result<(), PluginError>;

            /// Launches an instantiated graph on `stream` as one stream op
            /// (`cuGraphLaunch`). Asynchronous, like every stream call.
            ///
            /// Errors: [`PluginError::InvalidHandle`] for a graph or stream not live, or a
            /// stream of another device.
            GraphLaunch "graph launch" Stream
            fn graph_launch(
                &self,
                graph: GraphHandle,
                stream: StreamHandle,
            ) -> Result<(), PluginError>;

            /// Destroys an instantiated graph (`cuGraphExecDestroy`); launches already
            /// issued still run. Blocking.
            ///
            /// Errors: [`PluginError::InvalidHandle`] for a graph not live.
            GraphDestroy "graph destroy" Setup
            fn graph_destroy(&self, graph: GraphHandle) -> Result<(), PluginError>;

            /// The memory of `device` now, free and total bytes ([`MemoryInfo`]: CUDA
            /// `cuMemGetInfo` with the device's context current, CUDA Driver API
            /// "Memory Management"; the host plugin with a cap: the cap less its live
            /// bytes), or `None` where the plugin sets no limit of its own (the null
            /// plugin, the host plugin without a cap). A plan's default device memory
            /// cap is resolved from it ([`crate::Plan::for_plugin`]). Blocking.
            ///
            /// Errors: [`PluginError::NoDevice`]; backend failures.
            MemoryInfo "memory info" Setup
            fn memory_info(&self, device: u32) -> Result<Option<MemoryInfo>, PluginError>;
        }
    };
}

/// Defines [`PluginCall`] and the [`Plugin`] trait from the list of [`plugin_calls!`].
macro_rules! define_plugin {
    ($(
        $(#[$attr:meta])*
        $variant:ident $label:literal $kind:ident
        fn $name:ident(&self $(, $arg:ident: $ty:ty)* $(,)?) -> Result<$ok:ty, PluginError>;
    )*) => {
        /// A plugin entry point, named in errors: one per fallible [`Plugin`] call, in
        /// the trait's order (the layer's hooks see every call by it:
        /// [`layer::Hooks`]).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum PluginCall {
            $(
                #[doc = concat!("[`Plugin::", stringify!($name), "`] (`", $label, "` in messages).")]
                $variant,
            )*
        }

        impl PluginCall {
            /// Every call, in the trait's order (`ALL[c as usize] == c`).
            pub const ALL: [PluginCall; [$(PluginCall::$variant),*].len()] =
                [$(PluginCall::$variant),*];

            /// How many calls there are.
            pub const COUNT: usize = PluginCall::ALL.len();

            /// The name used in messages: `alloc`, `h2d`, `d2h`, `launch`, `record event`,
            /// ...
            pub fn name(self) -> &'static str {
                match self {
                    $(PluginCall::$variant => $label,)*
                }
            }

            /// What kind of call it is (contract rule 4).
            pub fn kind(self) -> CallKind {
                match self {
                    $(PluginCall::$variant => CallKind::$kind,)*
                }
            }
        }

        /// A backend with the libomptarget RTL shape. See the module docs for the
        /// contract all implementations keep. Object-safe: the executor takes
        /// `&dyn Plugin`.
        ///
        /// No call has a default body: a backend states every answer, so a call added to
        /// the trait fails to compile exactly in the backends (and, for the three calls
        /// outside [`PluginCall`], in the one forwarding layer, [`layer::Layered`]).
        /// What a backend can do is [`Plugin::info`], never a default answer probed.
        pub trait Plugin: Send + Sync {
            /// What the plugin is and can do ([`PluginInfo`]). Constant for the plugin's
            /// life: callers ask once (the executor once per run, a session once) and
            /// keep it, never per op.
            fn info(&self) -> PluginInfo;

            /// Takes the timings of completed stream work recorded since the last call
            /// (for traces and the progress bar), in no particular order. A plugin
            /// without timing ([`PluginInfo::timing`] false) returns nothing; the
            /// executor then reports issue times.
            fn drain_timings(&self) -> Vec<Timing>;

            /// The `seq` the next successful call on `stream` will get (the number of
            /// stream calls on it that returned `Ok` so far), so a caller can match
            /// [`Timing`]s and [`PluginError::Async`] failures to its own ops. A plugin
            /// that neither times nor names failing calls may return 0.
            fn next_seq(&self, stream: StreamHandle) -> u64;

            $(
                $(#[$attr])*
                fn $name(&self $(, $arg: $ty)*) -> Result<$ok, PluginError>;
            )*
        }
    };
}

plugin_calls!(define_plugin);

// After the list: the layer expands it too.
pub mod layer;

/// What kind of call a [`PluginCall`] is (contract rule 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallKind {
    /// A setup or release call: may block, is ordered on no stream (streams, host
    /// memory, kernels, events, graph instantiation and destruction).
    Setup,
    /// A stream call: asynchronous, enqueued on its stream and run in issue order
    /// (alloc, free, fill zero, copies, launch, event record and wait, graph launch).
    Stream,
    /// A host wait: the host learns whether (and waits until) stream work completed
    /// (synchronize, query, synchronize event).
    HostWait,
}

impl fmt::Display for PluginCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An error from a plugin call; every variant names the call.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum PluginError {
    /// A handle not made by this plugin, or already destroyed.
    #[error("{call}: invalid {what}")]
    InvalidHandle { call: PluginCall, what: String },
    /// An address range not inside one live allocation.
    #[error("{call}: {ptr:#x}..+{bytes} bytes is not inside a live {space} allocation")]
    InvalidPointer {
        call: PluginCall,
        /// "device" or "host".
        space: &'static str,
        ptr: u64,
        bytes: u64,
    },
    /// The allocation could not be made.
    #[error("{call}: out of memory allocating {bytes} bytes")]
    OutOfMemory { call: PluginCall, bytes: u64 },
    /// The allocation would take the device over the device memory cap it was given
    /// (the host plugin's [`host::HostPluginOptions::device_memory`]).
    #[error("{call}: {bytes} bytes more would take device {device} to {} live bytes, over its device memory cap of {cap} bytes", live + bytes)]
    OverDeviceMemory {
        call: PluginCall,
        device: u32,
        bytes: u64,
        live: u64,
        cap: u64,
    },
    /// A device index `>= device_count()`.
    #[error("{call}: no device {device} (the plugin has {count})")]
    NoDevice {
        call: PluginCall,
        device: u32,
        count: u32,
    },
    /// A kernel could not be found or loaded.
    #[error("{call}: kernel \"{kernel}\": {message}")]
    KernelLoad {
        call: PluginCall,
        kernel: String,
        message: String,
    },
    /// Launch arguments that do not match the kernel's declared signature.
    #[error("{call}: kernel \"{kernel}\": {message}")]
    Signature {
        call: PluginCall,
        kernel: String,
        message: String,
    },
    /// A failure of earlier asynchronous work, reported by `synchronize` (sticky).
    /// `seq` is the failing stream call's sequence number ([`Plugin::next_seq`]) where
    /// the plugin knows it (the host plugin does; the CUDA plugin does for a failed
    /// `potrf` issued to a stream, not for one inside a graph nor for CUDA's sticky
    /// errors, which carry no position): the executor then reports the error at the op it
    /// issued as that call, with its region, not at the host wait that found it.
    #[error("{call}: asynchronous failure on {stream}: {message}")]
    Async {
        call: PluginCall,
        stream: StreamHandle,
        message: String,
        seq: Option<u64>,
    },
    /// A failure injected by [`faulty::FaultyPlugin`].
    #[error("{call}: injected fault (call #{nth} of its kind)")]
    Injected { call: PluginCall, nth: u64 },
    /// Anything else the backend reports (its own message).
    #[error("{call}: {message}")]
    Backend { call: PluginCall, message: String },
}

impl PluginError {
    /// The call that failed.
    pub fn call(&self) -> PluginCall {
        match self {
            PluginError::InvalidHandle { call, .. }
            | PluginError::InvalidPointer { call, .. }
            | PluginError::OutOfMemory { call, .. }
            | PluginError::OverDeviceMemory { call, .. }
            | PluginError::NoDevice { call, .. }
            | PluginError::KernelLoad { call, .. }
            | PluginError::Signature { call, .. }
            | PluginError::Async { call, .. }
            | PluginError::Injected { call, .. }
            | PluginError::Backend { call, .. } => *call,
        }
    }
}

/// The capacity a device block of `bytes` bytes is allocated with by a plugin that caches
/// freed blocks for reuse (the CUDA plugin's per-stream block cache, the host plugin's
/// free lists): at least 512 bytes, then rounded up to a quarter of its power of two (at
/// most 25% more than asked for; e.g. 4096 → 4096, 5000 → 5120, 16 MiB → 16 MiB). Every
/// block of a class fits every request of that class, so a cache keeps one list per
/// class. Complexity: O(1).
pub fn size_class(bytes: u64) -> u64 {
    let b = bytes.max(512);
    let step = (1u64 << (63 - b.leading_zeros())) / 4;
    b.div_ceil(step).saturating_mul(step)
}

#[cfg(test)]
mod tests {
    use super::size_class;

    #[test]
    fn size_classes_fit_and_waste_at_most_a_quarter() {
        assert_eq!(size_class(0), 512);
        assert_eq!(size_class(1), 512);
        assert_eq!(size_class(512), 512);
        assert_eq!(size_class(513), 640);
        assert_eq!(size_class(4096), 4096);
        assert_eq!(size_class(5000), 5120);
        assert_eq!(size_class(16 << 20), 16 << 20);
        assert_eq!(size_class((16 << 20) + 1), 20 << 20);
        for b in (1..200_000u64)
            .step_by(97)
            .chain([u32::MAX as u64, 1 << 40])
        {
            let c = size_class(b);
            assert!(c >= b, "{b} -> {c}");
            assert!(c <= b.max(512) + b.max(512) / 4, "{b} -> {c}");
            assert_eq!(size_class(c), c, "a class is its own class");
        }
    }
}
