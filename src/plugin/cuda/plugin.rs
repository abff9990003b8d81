//! [`CudaPlugin`]: the [`Plugin`] contract on the CUDA driver API (see the module docs of
//! [`crate::plugin::cuda`]). This file composes the parts: the devices (`device.rs`),
//! stream and event tables (`streams.rs`), device memory and its block cache
//! (`devmem.rs`), pinned host memory (`hostmem.rs`), copies and their batches
//! (`copy.rs`), kernels (`modules.rs`, `launch.rs`) and timing (`timing.rs`).

use super::backend;
use super::batch::HeldCopy;
use super::capture::Capture;
use super::chain::Seqs;
use super::device::Device;
use super::devmem::DeviceMemory;
use super::driver::{self, result, sys};
use super::graph::Graphs;
use super::hostmem::HostMemory;
use super::launch::{self, INLINE_SLOTS};
use super::modules::Kernels;
use super::streams::{Events, Stream, Streams};
use super::timing::Timer;
use crate::model::{ElemType, KernelSig, LaunchShape};
use crate::plugin::{
    DevicePtr, EventHandle, GraphDesc, GraphHandle, HostPtr, KernelHandle, LaunchArg, MemoryInfo,
    Plugin, PluginCall, PluginError, PluginInfo, StreamHandle, Timing,
};
use std::ffi::c_void;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

/// How [`CudaPlugin::stream_call`] times a call (with option `timing`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Timed {
    /// Not timed (allocs, frees, fills, event records and waits).
    No,
    /// Timed on its own between two marks (kernel launches).
    Op,
    /// A copy, which times itself: alone on the copy engines, or with its batch.
    Copy,
    /// A built-in kernel that times itself in a timing slot (`timing.rs`).
    Stamped,
}

/// Options of the CUDA plugin.
///
/// The number of hardware queues per device is not one of them: it comes from the
/// environment when the driver makes the context (`CUDA_DEVICE_MAX_CONNECTIONS`, 8 when
/// unset). A schedule of more than 8 streams wants more: call
/// [`super::driver::raise_device_connections`] at the start of `main`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CudaPluginOptions {
    /// Folder relative `.cu` / `.ptx` paths of user kernels are resolved against (the
    /// graph file's folder); the current directory when `None`.
    pub kernel_dir: Option<PathBuf>,
    /// Bytes of freed pinned host memory kept for reuse by later `alloc_host` calls
    /// (pinning is slow: about 1 ms per 10 MiB). Default 4 GiB.
    pub host_cache_bytes: u64,
    /// Bytes of freed device blocks kept per device in the per-stream block cache (see
    /// [`CudaPlugin`]); 0 turns the cache off (every `alloc`/`free` is then a
    /// `cuMemAllocAsync`/`cuMemFreeAsync`). Default 1 GiB; `OFFLOAD_CUDA_DEV_CACHE=0` in
    /// the environment also turns it off.
    pub device_cache_bytes: u64,
    /// Time every kernel, copy on the copy engines and batch of small copies (as one
    /// unit: each copy of the batch gets the batch's times), for traces
    /// ([`Plugin::drain_timings`]; `timing.rs`): batches and built-in kernels stamp
    /// themselves (`%globaltimer`, no driver call), user kernels, graph launches and
    /// engine copies run between timing events (one `cuEventRecord`, plus one query and at
    /// times a second record unless the unit follows the batch its own call issued). Off
    /// by default. Copy batching stays on.
    pub timing: bool,
    /// Copies (H2D or D2H) of at most this many bytes are batched: consecutive ones on a
    /// stream are issued as one launch of a copy kernel on the SMs instead of one
    /// copy-engine transfer each (see `batch.rs` for the measurements and the ordering
    /// rules). 0 turns batching off (every copy a `cuMemcpyHtoDAsync` /
    /// `cuMemcpyDtoHAsync`), as does `OFFLOAD_CUDA_BATCH_COPIES=0` in the environment.
    /// Needs unified addressing (every 64-bit platform); without it, or if the built-in
    /// kernels cannot be compiled, copies go to the copy engines. Default 64 KiB.
    pub batch_copy_max_bytes: u64,
    /// In graphs ([`Plugin::graph_instantiate`]): copies of at most
    /// `batch_copy_max_bytes` become kernel nodes of the copy kernel (on the SMs) instead
    /// of memcpy nodes (on the copy engines); see `graph.rs`. Default on.
    pub graph_copy_kernels: bool,
}

impl Default for CudaPluginOptions {
    fn default() -> Self {
        CudaPluginOptions {
            kernel_dir: None,
            host_cache_bytes: 4 << 30,
            device_cache_bytes: 1 << 30,
            timing: false,
            batch_copy_max_bytes: 64 << 10,
            graph_copy_kernels: true,
        }
    }
}

/// The CUDA plugin: one primary context per device, a stream pool per device, pooled
/// events without timing, stream-ordered device memory from each device's default pool
/// behind a per-stream block cache (`devmem.rs`), pinned host memory, kernels from NVRTC.
///
/// Dropping it issues the held copies and synchronizes every stream; then its parts
/// release what they own in field order (graphs, device memory, streams, timing events,
/// events, pinned memory, user modules, and last the devices: built-in modules and
/// contexts), recording driver errors in the device's context (logged at `debug` level),
/// never panicking.
pub struct CudaPlugin {
    pub(super) opts: CudaPluginOptions,
    /// Largest copy that is batched, in bytes (0: batching off), fixed at `new`.
    pub(super) batch_limit: u64,
    /// Instantiated graphs (`graph.rs`); destroyed first, after `Drop` synchronized every
    /// stream.
    pub(super) graphs: Graphs,
    /// Per device, the stream and handles library calls are captured with (`capture.rs`).
    pub(super) capture: Capture,
    /// Live device allocations and the block cache's counters.
    pub(super) dev_mem: DeviceMemory,
    pub(super) streams: Streams,
    /// With `timing`: the timed units, their marks and clock origins.
    pub(super) timer: Timer,
    events: Events,
    pub(super) host: HostMemory,
    pub(super) kernels: Kernels,
    /// `peer[i][j]`: device i may access device j's memory directly (`peer.rs`).
    pub(super) peer: Vec<Vec<bool>>,
    /// Last: every other part holds references to the devices' contexts.
    pub(super) devices: Vec<Device>,
}

impl CudaPlugin {
    /// Opens every CUDA device: retains its primary context and sets its default memory
    /// pool's release threshold to `u64::MAX`, so freed device memory stays in the pool
    /// and is reused without syncs; enables peer access between every pair of devices
    /// that allows it (`peer.rs`).
    ///
    /// Errors: no driver or no device (the one-line reason of
    /// [`super::probe`]), or a failing driver call (named).
    pub fn new(opts: CudaPluginOptions) -> Result<CudaPlugin, String> {
        let count = driver::init()?;
        let devices = (0..count)
            .map(Device::open)
            .collect::<Result<Vec<_>, _>>()?;
        let dev_cache_limit = if std::env::var("OFFLOAD_CUDA_DEV_CACHE").is_ok_and(|v| v == "0") {
            0
        } else {
            opts.device_cache_bytes
        };
        let batch_limit = if std::env::var("OFFLOAD_CUDA_BATCH_COPIES").is_ok_and(|v| v == "0") {
            0
        } else {
            opts.batch_copy_max_bytes
        };
        let peer = super::peer::enable_peer_access(&devices);
        let ctxs = devices.iter().map(|d| d.ctx.clone()).collect();
        Ok(CudaPlugin {
            batch_limit,
            graphs: Graphs::default(),
            capture: Capture::default(),
            dev_mem: DeviceMemory::new(ctxs, dev_cache_limit),
            streams: Streams::default(),
            timer: Timer::default(),
            events: Events::default(),
            host: HostMemory::new(devices[0].ctx.clone(), opts.host_cache_bytes),
            kernels: Kernels::default(),
            peer,
            devices,
            opts,
        })
    }

    /// Runs one stream call `f` with the stream's device and raw handle (its context made
    /// current): one lookup of the stream per call, which advances the stream's `seq` for
    /// an `Ok` call ([`Plugin::next_seq`]; a `potrf` failure names its call by it,
    /// `library.rs`). Without `timing` the `seq` is taken with the lookup and given back
    /// if `f` fails (so inside `f` the counter is one past the call's own: [`Self::call_seq`]).
    /// With `timing` it advances after `f`; a [`Timed::Op`] call (a kernel) issues the stream's held copies
    /// and then runs between a start mark (the end mark of the batch just issued, if any:
    /// `timing.rs`) and an end mark; a [`Timed::Copy`]
    /// times itself (`copy.rs`: alone, or with its batch); after a [`Timed::No`] call the
    /// stream's next unit starts on a fresh mark. If `f` fails, its start mark goes
    /// back to the stream's pool at once (nothing else of the call was enqueued).
    pub(super) fn stream_call<R>(
        &self,
        call: PluginCall,
        stream: StreamHandle,
        timed: Timed,
        f: impl FnOnce(u32, sys::CUstream) -> Result<R, PluginError>,
    ) -> Result<R, PluginError> {
        if !self.opts.timing {
            let (device, raw) = self.stream_counted(call, stream)?;
            let r = f(device, raw);
            if r.is_err() {
                self.streams.uncount(stream);
            }
            return r;
        }
        let (device, raw) = self.stream(call, stream)?;
        let ctx = &self.devices[device as usize].ctx;
        // A kernel's start mark and its call's `seq` (the other calls time themselves).
        let (mark, seq) = if timed == Timed::Op {
            // A batch this flush issues is the unit right before this one (`adjacent`).
            let adjacent = self.flush_issued(call, stream)?;
            let streams = self.streams.read();
            let st = streams
                .get(stream.0 as usize)
                .ok_or_else(|| PluginError::InvalidHandle {
                    call,
                    what: format!("{stream}"),
                })?;
            let m = self.timer.start(&st.timing, (device, ctx, raw), adjacent);
            (
                Some(m.map_err(backend(call))?),
                st.seq.load(Ordering::Relaxed),
            )
        } else {
            (None, 0)
        };
        let r = f(device, raw);
        if let Some(st) = self.streams.read().get(stream.0 as usize) {
            match mark {
                Some(m) if r.is_ok() => {
                    let unit = (Seqs::one(seq), false);
                    self.timer.finish(&st.timing, (ctx, raw), unit, m)
                }
                // Nothing of the call was enqueued after the start mark: it is only returned.
                Some(m) => self.timer.discard(&st.timing, m),
                None if timed == Timed::No => self.timer.interrupt(&st.timing),
                None => {}
            }
            if r.is_ok() {
                st.seq.fetch_add(1, Ordering::Relaxed);
            }
        }
        r
    }

    /// Whether the plugin times its work (option `timing`).
    pub(super) fn timing(&self) -> bool {
        self.opts.timing
    }

    /// The `seq` of the call [`Self::stream_call`] is running on `st` (read inside its
    /// `f`): the counter, which advances after the call with `timing` and before it
    /// without.
    pub(super) fn call_seq(&self, st: &Stream) -> u64 {
        let next = st.seq.load(Ordering::Relaxed);
        if self.timing() {
            next
        } else {
            next.wrapping_sub(1)
        }
    }

    /// Name and compute capability of each device, e.g. `NVIDIA H200 (sm_90)`.
    pub fn device_names(&self) -> Vec<String> {
        self.devices
            .iter()
            .map(|d| format!("{} (sm_{}{})", d.name, d.cc.0, d.cc.1))
            .collect()
    }

    pub(super) fn dev(&self, call: PluginCall, device: u32) -> Result<&Device, PluginError> {
        self.devices
            .get(device as usize)
            .ok_or(PluginError::NoDevice {
                call,
                device,
                count: self.devices.len() as u32,
            })
    }

    /// The stream's device index and raw handle, with its context made current.
    fn stream(
        &self,
        call: PluginCall,
        s: StreamHandle,
    ) -> Result<(u32, sys::CUstream), PluginError> {
        let (device, raw) = self.streams.lookup(call, s, false)?;
        self.devices[device as usize]
            .ctx
            .bind()
            .map_err(backend(call))?;
        Ok((device, raw))
    }

    /// [`Self::stream`] taking the stream's next `seq` for the call (given back with
    /// [`Streams::uncount`] if the call fails, here too).
    fn stream_counted(
        &self,
        call: PluginCall,
        s: StreamHandle,
    ) -> Result<(u32, sys::CUstream), PluginError> {
        let (device, raw) = self.streams.lookup(call, s, true)?;
        if let Err(e) = self.devices[device as usize].ctx.bind() {
            self.streams.uncount(s);
            return Err(backend(call)(e));
        }
        Ok((device, raw))
    }
}

impl Plugin for CudaPlugin {
    /// Every CUDA device, GPU memory; parallel issue (copies and launches cost µs of host
    /// time each in the driver, and calls on different streams from different threads
    /// overlap), graphs, peer copies, timing with option `timing`, and every library tile
    /// kernel where cuBLAS and cuSOLVER load (`blas.rs`; none otherwise). Application
    /// memory is not taken (copies need memory pinned by the plugin: bound buffers are
    /// staged).
    fn info(&self) -> PluginInfo {
        PluginInfo {
            parallel_issue: true,
            graphs: true,
            timing: self.timing(),
            peer_copies: true,
            library_kernels: match super::blas::load() {
                Ok(()) => crate::model::LibraryKernel::all_names(),
                Err(_) => Default::default(),
            },
            ..PluginInfo::new(
                "cuda",
                self.devices.len() as u32,
                crate::plugin::DeviceMemory::Gpu,
            )
        }
    }

    fn create_streams(&self, device: u32, count: u32) -> Result<Vec<StreamHandle>, PluginError> {
        let d = self.dev(PluginCall::CreateStreams, device)?;
        self.streams.create(device, &d.ctx, count, false)
    }

    /// Streams at the greatest priority of `cuCtxGetStreamPriorityRange`
    /// (`cuStreamCreateWithPriority`), a pool of their own (`streams.rs`).
    fn create_priority_streams(
        &self,
        device: u32,
        count: u32,
    ) -> Result<Vec<StreamHandle>, PluginError> {
        let d = self.dev(PluginCall::CreatePriorityStreams, device)?;
        self.streams.create(device, &d.ctx, count, true)
    }

    fn alloc_host(&self, bytes: u64) -> Result<HostPtr, PluginError> {
        self.host.alloc(bytes)
    }

    /// Not taken ([`PluginInfo::app_memory`] is false): copies need memory the plugin
    /// pinned, so the executor stages bound buffers instead of calling this.
    fn register_host(&self, _ptr: HostPtr, _bytes: u64) -> Result<bool, PluginError> {
        Err(PluginError::Backend {
            call: PluginCall::RegisterHost,
            message: "the cuda plugin does not take application memory".into(),
        })
    }

    fn unregister_host(&self, ptr: HostPtr) -> Result<(), PluginError> {
        Err(PluginError::InvalidPointer {
            call: PluginCall::UnregisterHost,
            space: "host",
            ptr: ptr.0,
            bytes: 0,
        })
    }

    fn free_host(&self, ptr: HostPtr) -> Result<(), PluginError> {
        // Copies held for a batch that use this block are issued before it can be reused
        // or unpinned (normally none: the executor frees host memory after its waits).
        if let Some(cap) = self.host.capacity(ptr) {
            self.flush_touching(ptr.0, cap)
                .map_err(backend(PluginCall::FreeHost))?;
        }
        self.host.free(ptr)
    }

    fn load_kernel(
        &self,
        device: u32,
        sig: &KernelSig,
        ty: ElemType,
    ) -> Result<KernelHandle, PluginError> {
        let d = self.dev(PluginCall::LoadKernel, device)?;
        let dir = self.opts.kernel_dir.as_deref();
        self.kernels.load((device, d), sig, ty, dir)
    }

    fn create_event(&self, device: u32) -> Result<EventHandle, PluginError> {
        let d = self.dev(PluginCall::CreateEvent, device)?;
        self.events.create(device, &d.ctx)
    }

    fn destroy_event(&self, event: EventHandle) -> Result<(), PluginError> {
        self.events.destroy(event)
    }

    fn synchronize(&self, stream: StreamHandle) -> Result<(), PluginError> {
        let call = PluginCall::Synchronize;
        let (_, raw) = self.stream(call, stream)?;
        // Held copies first; the stream is drained even if issuing them failed.
        let flushed = self.flush(call, stream);
        // SAFETY: a live stream; its context is current.
        unsafe { result::stream_synchronize(raw) }.map_err(|e| PluginError::Async {
            call,
            stream,
            message: e.into(),
            seq: None,
        })?;
        // The stream is idle now: its next unit starts on a fresh mark, without a query.
        if self.timing() {
            if let Some(st) = self.streams.read().get(stream.0 as usize) {
                self.timer.interrupt(&st.timing);
            }
        }
        // A `potrf` that failed in the completed work (`library.rs`).
        self.library_failures(call, stream, true)?;
        flushed
    }

    fn query(&self, stream: StreamHandle) -> Result<bool, PluginError> {
        let call = PluginCall::Query;
        let (_, raw) = self.stream(call, stream)?;
        // Held copies first, so that "done" covers them.
        self.flush(call, stream)?;
        // SAFETY: a live stream; its context is current.
        unsafe { result::stream_query(raw) }.map_err(|e| PluginError::Async {
            call,
            stream,
            message: e.into(),
            seq: None,
        })
    }

    /// `cuEventSynchronize` in the event's context. Held copies need no flush: the
    /// record flushed every copy issued before it, and copies held since are not
    /// captured.
    fn synchronize_event(&self, event: EventHandle) -> Result<(), PluginError> {
        let call = PluginCall::SynchronizeEvent;
        let (device, ev, recorded_on) = self.events.for_sync(call, event)?;
        self.devices[device as usize]
            .ctx
            .bind()
            .map_err(backend(call))?;
        // SAFETY: a live event (the executor does not destroy or re-record it before this
        // returns); its context is current.
        unsafe { result::event_synchronize(ev) }.map_err(|e| match recorded_on {
            Some(stream) => PluginError::Async {
                call,
                stream,
                message: e.into(),
                seq: None,
            },
            None => backend(call)(e),
        })?;
        // A `potrf` that failed in the captured work (or after it: reported early).
        match recorded_on {
            Some(stream) => self.library_failures(call, stream, false),
            None => Ok(()),
        }
    }

    fn alloc(&self, stream: StreamHandle, bytes: u64) -> Result<DevicePtr, PluginError> {
        self.stream_call(PluginCall::Alloc, stream, Timed::No, |d, raw| {
            self.alloc_raw(stream, d, raw, bytes)
        })
    }

    fn fill_zero(
        &self,
        stream: StreamHandle,
        ptr: DevicePtr,
        bytes: u64,
    ) -> Result<(), PluginError> {
        let call = PluginCall::FillZero;
        self.stream_call(call, stream, Timed::No, |d, raw| {
            self.dev_mem.check(call, d, ptr.0, bytes)?;
            // Copies held for batching go first: one may still read a block the cache
            // handed out again (stream order, rule 1).
            self.flush(call, stream)?;
            // SAFETY: the range lies inside a live allocation of this stream's device
            // (checked); the stream's context is current.
            unsafe { result::memset_d8_async(ptr.0, 0, bytes as usize, raw) }.map_err(backend(call))
        })
    }

    fn free(&self, stream: StreamHandle, ptr: DevicePtr) -> Result<(), PluginError> {
        self.stream_call(PluginCall::Free, stream, Timed::No, |d, raw| {
            self.free_raw(stream, d, raw, ptr)
        })
    }

    fn submit(
        &self,
        stream: StreamHandle,
        dst: DevicePtr,
        src: HostPtr,
        bytes: u64,
    ) -> Result<(), PluginError> {
        let call = PluginCall::Submit;
        self.stream_call(call, stream, Timed::Copy, |device, raw| {
            self.dev_mem.check(call, device, dst.0, bytes)?;
            self.host.check(call, src.0, bytes)?;
            let c = HeldCopy {
                dst: dst.0,
                src: src.0,
                bytes,
                to_device: true,
                seq: self.streams.next_seq(stream),
            };
            // SAFETY: both ranges lie inside live allocations (checked); the host keeps
            // the source unchanged until a synchronize (rule 3).
            unsafe { self.copy(call, stream, (device, raw), c) }
        })
    }

    fn retrieve(
        &self,
        stream: StreamHandle,
        dst: HostPtr,
        src: DevicePtr,
        bytes: u64,
    ) -> Result<(), PluginError> {
        let call = PluginCall::Retrieve;
        self.stream_call(call, stream, Timed::Copy, |device, raw| {
            self.dev_mem.check(call, device, src.0, bytes)?;
            self.host.check(call, dst.0, bytes)?;
            let c = HeldCopy {
                dst: dst.0,
                src: src.0,
                bytes,
                to_device: false,
                seq: self.streams.next_seq(stream),
            };
            // SAFETY: both ranges lie inside live allocations (checked); the host does not
            // touch the destination until a synchronize (rule 3).
            unsafe { self.copy(call, stream, (device, raw), c) }
        })
    }

    fn copy_peer(
        &self,
        stream: StreamHandle,
        dst: DevicePtr,
        dst_device: u32,
        src: DevicePtr,
        src_device: u32,
        bytes: u64,
    ) -> Result<(), PluginError> {
        self.copy_peer_async(stream, (dst, dst_device), (src, src_device), bytes)
    }

    fn launch(
        &self,
        stream: StreamHandle,
        kernel: KernelHandle,
        args: &[LaunchArg],
        shape: LaunchShape,
    ) -> Result<(), PluginError> {
        let call = PluginCall::Launch;
        if let Some(lib) = self.kernels.library_of(kernel) {
            return self.stream_call(call, stream, Timed::Op, |d, raw| {
                self.launch_library(stream, (d, raw), kernel, lib, args)
            });
        }
        // With timing, a built-in stamps itself (no driver call); any other kernel runs
        // between marks.
        if self.timing() && self.timer.stamps() && self.kernels.has_timed(kernel) {
            return self.stream_call(call, stream, Timed::Stamped, |d, raw| {
                self.launch_stamped(stream, (d, raw), kernel, (args, shape))
            });
        }
        self.stream_call(call, stream, Timed::Op, |d, raw| {
            self.launch_raw(stream, (d, raw), kernel, (args, shape), 0)
        })
    }

    fn record_event(&self, stream: StreamHandle, event: EventHandle) -> Result<(), PluginError> {
        let call = PluginCall::RecordEvent;
        self.stream_call(call, stream, Timed::No, |d, raw| {
            // Held copies first, so the record captures them (a host wait on the event,
            // `synchronize_event`, relies on it).
            self.flush(call, stream)?;
            let ev = self.events.raw_for_record(call, d, stream, event)?;
            // SAFETY: a live event and stream of the same context, current.
            unsafe { result::event_record(ev, raw) }.map_err(backend(call))
        })
    }

    fn wait_event(&self, stream: StreamHandle, event: EventHandle) -> Result<(), PluginError> {
        let call = PluginCall::WaitEvent;
        self.stream_call(call, stream, Timed::No, |_, raw| {
            self.flush(call, stream)?;
            // An event of another device is allowed here (cuStreamWaitEvent: "hEvent may be
            // from a different context or device than hStream").
            let ev = self.events.raw(call, None, event)?;
            // SAFETY: a live event and stream; the event may belong to another context.
            unsafe { result::stream_wait_event(raw, ev) }.map_err(backend(call))
        })
    }

    fn drain_timings(&self) -> Vec<Timing> {
        self.timer.drain(&self.streams)
    }

    fn next_seq(&self, stream: StreamHandle) -> u64 {
        self.streams.next_seq(stream)
    }

    /// A CUDA graph built node by node (`graph.rs`).
    fn graph_instantiate(&self, desc: &GraphDesc) -> Result<GraphHandle, PluginError> {
        self.instantiate_graph(desc)
    }

    fn graph_edges(&self, graph: GraphHandle) -> Result<Vec<(u32, u32)>, PluginError> {
        self.graph_edge_list(graph)
    }

    fn graph_set_host(
        &self,
        graph: GraphHandle,
        node: u32,
        host: HostPtr,
    ) -> Result<(), PluginError> {
        self.set_graph_host(graph, node, host)
    }

    fn graph_launch(&self, graph: GraphHandle, stream: StreamHandle) -> Result<(), PluginError> {
        self.launch_graph(graph, stream)
    }

    fn graph_destroy(&self, graph: GraphHandle) -> Result<(), PluginError> {
        self.destroy_graph(graph)
    }

    /// `cuMemGetInfo` with the device's context current: free and total bytes (memory
    /// this plugin's pool and block cache hold already is not free to the driver); the
    /// reserve is the block cache's limit, which freed blocks may come to fill.
    fn memory_info(&self, device: u32) -> Result<Option<MemoryInfo>, PluginError> {
        let call = PluginCall::MemoryInfo;
        let d = self.dev(call, device)?;
        d.ctx.bind().map_err(backend(call))?;
        let (free, total) = result::mem_get_info().map_err(backend(call))?;
        Ok(Some(MemoryInfo {
            free,
            total,
            reserve: self.dev_mem.cache_limit(),
        }))
    }
}

impl CudaPlugin {
    /// [`CudaPlugin::launch_raw`] of a kernel with an entry that times itself, in a timing
    /// slot of the stream (`timing.rs`): the stream's next unit may chain on it. Without
    /// a slot (its memory, the clock origin or the calibration failed: later kernels then
    /// run between marks) the kernel runs untimed and the stream's next unit starts fresh.
    fn launch_stamped(
        &self,
        stream: StreamHandle,
        (device, raw): (u32, sys::CUstream),
        kernel: KernelHandle,
        launch: (&[LaunchArg], LaunchShape),
    ) -> Result<(), PluginError> {
        let ctx = &self.devices[device as usize].ctx;
        let copy = self.devices[device as usize].copy_kernel();
        // The slot and the call's `seq`, under one read of the stream table.
        let (slot, seq) = {
            let streams = self.streams.read();
            match (streams.get(stream.0 as usize), copy) {
                (Some(st), Ok(f)) => (
                    self.timer
                        .stamp_slot(&st.timing, (device, ctx, raw), f)
                        .ok(),
                    st.seq.load(Ordering::Relaxed),
                ),
                _ => (None, 0),
            }
        };
        let r = self.launch_raw(
            stream,
            (device, raw),
            kernel,
            launch,
            slot.map_or(0, |s| s.1),
        );
        let streams = self.streams.read();
        if let Some(st) = streams.get(stream.0 as usize) {
            match slot {
                Some((k, _)) if r.is_ok() => {
                    self.timer
                        .finish_stamped(&st.timing, (Seqs::one(seq), false), k)
                }
                Some((k, _)) => self.timer.discard_slot(&st.timing, k),
                None => self.timer.interrupt(&st.timing),
            }
        }
        r
    }

    /// A launch on `stream` (`device`, `raw`, its context current): the kernel and its
    /// arguments checked ([`Kernels::checked`]), every buffer checked against the live
    /// device allocations, the arguments marshalled into slots on the stack
    /// ([`launch::fill_slots`]; the heap past [`INLINE_SLOTS`]), the held copies issued,
    /// then one `cuLaunchKernel`; with `stamp` (not 0), of the kernel's entry that times
    /// itself, the timing slot at that device address its last argument.
    fn launch_raw(
        &self,
        stream: StreamHandle,
        (device, raw): (u32, sys::CUstream),
        kernel: KernelHandle,
        (args, shape): (&[LaunchArg], LaunchShape),
        stamp: u64,
    ) -> Result<(), PluginError> {
        let call = PluginCall::Launch;
        let func = self
            .kernels
            .checked(call, kernel, device, args, stamp != 0)?;
        let n = launch::max_slots(args) + 1;
        let mut slots_inline = [0u64; INLINE_SLOTS];
        let mut slots_heap = Vec::new();
        let slots: &mut [u64] = if n <= INLINE_SLOTS {
            &mut slots_inline
        } else {
            slots_heap.resize(n, 0u64);
            &mut slots_heap
        };
        let mut used = {
            let live = self.dev_mem.live();
            launch::fill_slots(args, slots, |addr, bytes| {
                self.dev_mem.check_in(&live, call, device, addr, bytes)
            })?
        };
        if stamp != 0 {
            // The timed entry's last parameter (`u64 stamp_`, builtins.cu).
            slots[used] = stamp;
            used += 1;
        }
        let mut params_inline = [std::ptr::null_mut::<c_void>(); INLINE_SLOTS];
        let mut params_heap = Vec::new();
        let params: &mut [*mut c_void] = if used <= INLINE_SLOTS {
            &mut params_inline[..used]
        } else {
            params_heap.resize(used, std::ptr::null_mut());
            &mut params_heap
        };
        for (p, s) in params.iter_mut().zip(slots.iter_mut()) {
            *p = s as *mut u64 as *mut c_void;
        }
        let (teams, threads) = launch::grid(shape);
        self.flush(call, stream)?;
        // SAFETY: `params` points at one slot per C parameter of the kernel, in order, each
        // holding a value of the parameter's type in its low bytes (the signature was
        // checked, and built-ins have exactly the host ABI); buffer addresses are inside
        // live allocations of this device; the slots outlive the call (the driver copies
        // them before returning).
        unsafe {
            result::launch_kernel(
                func,
                (teams, 1, 1),
                (threads, 1, 1),
                0,
                raw,
                params.as_mut_ptr(),
            )
        }
        .map_err(backend(call))
    }
}

impl Drop for CudaPlugin {
    /// Issues the copies still held and waits for every stream, so that no pending work
    /// uses what the fields release next (in declaration order: see [`CudaPlugin`]).
    /// Errors are recorded in the stream's context.
    fn drop(&mut self) {
        for (i, s) in self.streams.read().iter().enumerate() {
            let ctx = s.context();
            ctx.record(ctx.bind());
            ctx.record(self.issue_held(StreamHandle(i as u32), s));
            ctx.record(s.stream.synchronize());
        }
    }
}

impl std::fmt::Debug for CudaPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaPlugin")
            .field("devices", &self.device_names())
            .finish_non_exhaustive()
    }
}
