//! Fault injection: [`FaultyPlugin`] wraps a plugin, fails the k-th call of one kind with
//! [`PluginError::Injected`] (without forwarding it, so nothing is enqueued, as the
//! contract requires of a failed call), and counts allocations and frees so tests can
//! check that an executor cleans up after an error.

use crate::model::{ElemType, KernelSig, LaunchShape};
use crate::plugin::{
    DevicePtr, EventHandle, GraphDesc, GraphHandle, HostPtr, KernelHandle, LaunchArg, Plugin,
    PluginCall, PluginError, StreamHandle, Timing,
};
use std::sync::atomic::{AtomicU64, Ordering};

/// The kinds of call a fault can be injected into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultKind {
    Alloc,
    H2D,
    Launch,
    D2H,
    Record,
    Wait,
    Synchronize,
    /// A host wait on one event ([`Plugin::synchronize_event`]).
    SyncEvent,
    /// Instantiating a replay graph ([`Plugin::graph_instantiate`]).
    GraphInstantiate,
    /// Launching a replay graph ([`Plugin::graph_launch`]).
    GraphLaunch,
    /// Pointing a replay graph's copy node at other host memory
    /// ([`Plugin::graph_set_host`]).
    GraphUpdate,
    /// A device-to-device copy between devices ([`Plugin::copy_peer`]).
    Peer,
}

impl FaultKind {
    pub const ALL: [FaultKind; 12] = [
        FaultKind::Alloc,
        FaultKind::H2D,
        FaultKind::Launch,
        FaultKind::D2H,
        FaultKind::Record,
        FaultKind::Wait,
        FaultKind::Synchronize,
        FaultKind::SyncEvent,
        FaultKind::GraphInstantiate,
        FaultKind::GraphLaunch,
        FaultKind::GraphUpdate,
        FaultKind::Peer,
    ];

    /// The plugin call this kind fails.
    pub fn call(self) -> PluginCall {
        match self {
            FaultKind::Alloc => PluginCall::Alloc,
            FaultKind::H2D => PluginCall::Submit,
            FaultKind::Launch => PluginCall::Launch,
            FaultKind::D2H => PluginCall::Retrieve,
            FaultKind::Record => PluginCall::RecordEvent,
            FaultKind::Wait => PluginCall::WaitEvent,
            FaultKind::Synchronize => PluginCall::Synchronize,
            FaultKind::SyncEvent => PluginCall::SynchronizeEvent,
            FaultKind::GraphInstantiate => PluginCall::GraphInstantiate,
            FaultKind::GraphLaunch => PluginCall::GraphLaunch,
            FaultKind::GraphUpdate => PluginCall::GraphUpdate,
            FaultKind::Peer => PluginCall::CopyPeer,
        }
    }
}

/// A plugin that fails the `k`-th call (1-based) of `kind`; every other call is
/// forwarded to `inner`.
#[derive(Debug)]
pub struct FaultyPlugin<P> {
    inner: P,
    kind: FaultKind,
    k: u64,
    calls: [AtomicU64; FaultKind::ALL.len()],
    allocs: AtomicU64,
    frees: AtomicU64,
    host_allocs: AtomicU64,
    host_frees: AtomicU64,
    injected: AtomicU64,
    /// Panic instead of returning an error (a misbehaving third-party plugin).
    panic: bool,
}

impl<P: Plugin> FaultyPlugin<P> {
    /// Fails call number `k` (1-based; 0 never fails) of `kind`.
    pub fn new(inner: P, kind: FaultKind, k: u64) -> FaultyPlugin<P> {
        FaultyPlugin {
            inner,
            kind,
            k,
            calls: Default::default(),
            allocs: AtomicU64::new(0),
            frees: AtomicU64::new(0),
            host_allocs: AtomicU64::new(0),
            host_frees: AtomicU64::new(0),
            injected: AtomicU64::new(0),
            panic: false,
        }
    }

    /// Panics in call number `k` of `kind` instead of failing it (for checking that a
    /// caller does not hang or leak threads when a plugin panics).
    pub fn panicking(inner: P, kind: FaultKind, k: u64) -> FaultyPlugin<P> {
        FaultyPlugin {
            panic: true,
            ..FaultyPlugin::new(inner, kind, k)
        }
    }

    /// The wrapped plugin.
    pub fn inner(&self) -> &P {
        &self.inner
    }

    /// Successful device allocations so far.
    pub fn allocs(&self) -> u64 {
        self.allocs.load(Ordering::SeqCst)
    }

    /// Successful device frees so far.
    pub fn frees(&self) -> u64 {
        self.frees.load(Ordering::SeqCst)
    }

    /// Successful host allocations so far.
    pub fn host_allocs(&self) -> u64 {
        self.host_allocs.load(Ordering::SeqCst)
    }

    /// Successful host frees so far.
    pub fn host_frees(&self) -> u64 {
        self.host_frees.load(Ordering::SeqCst)
    }

    /// Calls of `kind` made so far (failed or not).
    pub fn calls(&self, kind: FaultKind) -> u64 {
        self.calls[kind as usize].load(Ordering::SeqCst)
    }

    /// True once the fault has been injected.
    pub fn injected(&self) -> bool {
        self.injected.load(Ordering::SeqCst) > 0
    }

    fn gate(&self, kind: FaultKind) -> Result<(), PluginError> {
        let n = self.calls[kind as usize].fetch_add(1, Ordering::SeqCst) + 1;
        if kind == self.kind && n == self.k {
            self.injected.fetch_add(1, Ordering::SeqCst);
            tracing::debug!(target: "offload_sched::plugin", call = kind.call().name(), nth = n, "injected fault");
            if self.panic {
                panic!("injected panic in {} #{n}", kind.call().name());
            }
            return Err(PluginError::Injected {
                call: kind.call(),
                nth: n,
            });
        }
        Ok(())
    }
}

fn counted<T>(c: &AtomicU64, r: Result<T, PluginError>) -> Result<T, PluginError> {
    if r.is_ok() {
        c.fetch_add(1, Ordering::SeqCst);
    }
    r
}

impl<P: Plugin> Plugin for FaultyPlugin<P> {
    fn name(&self) -> String {
        format!("faulty({})", self.inner.name())
    }
    fn device_count(&self) -> u32 {
        self.inner.device_count()
    }
    fn create_streams(&self, device: u32, count: u32) -> Result<Vec<StreamHandle>, PluginError> {
        self.inner.create_streams(device, count)
    }
    fn alloc(&self, stream: StreamHandle, bytes: u64) -> Result<DevicePtr, PluginError> {
        self.gate(FaultKind::Alloc)?;
        counted(&self.allocs, self.inner.alloc(stream, bytes))
    }
    /// Counted and failed as an [`FaultKind::Alloc`]: it is the second half of an alloc.
    fn fill_zero(
        &self,
        stream: StreamHandle,
        ptr: DevicePtr,
        bytes: u64,
    ) -> Result<(), PluginError> {
        self.gate(FaultKind::Alloc)?;
        self.inner.fill_zero(stream, ptr, bytes)
    }
    fn free(&self, stream: StreamHandle, ptr: DevicePtr) -> Result<(), PluginError> {
        counted(&self.frees, self.inner.free(stream, ptr))
    }
    fn alloc_host(&self, bytes: u64) -> Result<HostPtr, PluginError> {
        counted(&self.host_allocs, self.inner.alloc_host(bytes))
    }
    fn free_host(&self, ptr: HostPtr) -> Result<(), PluginError> {
        counted(&self.host_frees, self.inner.free_host(ptr))
    }
    fn submit(
        &self,
        stream: StreamHandle,
        dst: DevicePtr,
        src: HostPtr,
        bytes: u64,
    ) -> Result<(), PluginError> {
        self.gate(FaultKind::H2D)?;
        self.inner.submit(stream, dst, src, bytes)
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
        self.gate(FaultKind::Peer)?;
        self.inner
            .copy_peer(stream, dst, dst_device, src, src_device, bytes)
    }
    fn retrieve(
        &self,
        stream: StreamHandle,
        dst: HostPtr,
        src: DevicePtr,
        bytes: u64,
    ) -> Result<(), PluginError> {
        self.gate(FaultKind::D2H)?;
        self.inner.retrieve(stream, dst, src, bytes)
    }
    fn load_kernel(
        &self,
        device: u32,
        sig: &KernelSig,
        ty: ElemType,
    ) -> Result<KernelHandle, PluginError> {
        self.inner.load_kernel(device, sig, ty)
    }
    fn launch(
        &self,
        stream: StreamHandle,
        kernel: KernelHandle,
        args: &[LaunchArg],
        shape: LaunchShape,
    ) -> Result<(), PluginError> {
        self.gate(FaultKind::Launch)?;
        self.inner.launch(stream, kernel, args, shape)
    }
    fn create_event(&self, device: u32) -> Result<EventHandle, PluginError> {
        self.inner.create_event(device)
    }
    fn destroy_event(&self, event: EventHandle) -> Result<(), PluginError> {
        self.inner.destroy_event(event)
    }
    fn record_event(&self, stream: StreamHandle, event: EventHandle) -> Result<(), PluginError> {
        self.gate(FaultKind::Record)?;
        self.inner.record_event(stream, event)
    }
    fn wait_event(&self, stream: StreamHandle, event: EventHandle) -> Result<(), PluginError> {
        self.gate(FaultKind::Wait)?;
        self.inner.wait_event(stream, event)
    }
    fn synchronize(&self, stream: StreamHandle) -> Result<(), PluginError> {
        self.gate(FaultKind::Synchronize)?;
        self.inner.synchronize(stream)
    }
    fn register_host(&self, ptr: HostPtr, bytes: u64) -> Result<bool, PluginError> {
        self.inner.register_host(ptr, bytes)
    }
    fn query(&self, stream: StreamHandle) -> Result<bool, PluginError> {
        self.gate(FaultKind::Synchronize)?;
        self.inner.query(stream)
    }
    fn unregister_host(&self, ptr: HostPtr) -> Result<(), PluginError> {
        self.inner.unregister_host(ptr)
    }
    fn synchronize_event(&self, event: EventHandle) -> Result<(), PluginError> {
        self.gate(FaultKind::SyncEvent)?;
        self.inner.synchronize_event(event)
    }
    fn drain_timings(&self) -> Vec<Timing> {
        self.inner.drain_timings()
    }
    fn graph_instantiate(&self, desc: &GraphDesc) -> Result<Option<GraphHandle>, PluginError> {
        self.gate(FaultKind::GraphInstantiate)?;
        self.inner.graph_instantiate(desc)
    }
    fn graph_edges(&self, graph: GraphHandle) -> Result<Vec<(u32, u32)>, PluginError> {
        self.inner.graph_edges(graph)
    }
    fn graph_set_host(
        &self,
        graph: GraphHandle,
        node: u32,
        host: HostPtr,
    ) -> Result<(), PluginError> {
        self.gate(FaultKind::GraphUpdate)?;
        self.inner.graph_set_host(graph, node, host)
    }
    fn graph_launch(&self, graph: GraphHandle, stream: StreamHandle) -> Result<(), PluginError> {
        self.gate(FaultKind::GraphLaunch)?;
        self.inner.graph_launch(graph, stream)
    }
    fn graph_destroy(&self, graph: GraphHandle) -> Result<(), PluginError> {
        self.inner.graph_destroy(graph)
    }
    fn parallel_issue(&self) -> bool {
        self.inner.parallel_issue()
    }
    fn computes(&self) -> bool {
        self.inner.computes()
    }
    fn next_seq(&self, stream: StreamHandle) -> u64 {
        self.inner.next_seq(stream)
    }
}
