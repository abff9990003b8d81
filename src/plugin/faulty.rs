//! Fault injection: [`FaultyPlugin`] wraps a plugin, fails the k-th call of one kind with
//! [`PluginError::Injected`] (without forwarding it, so nothing is enqueued, as the
//! contract requires of a failed call), and counts allocations and frees so tests can
//! check that an executor cleans up after an error.
//!
//! It is the forwarding layer ([`Layered`]) with the [`Faults`] hooks: any
//! [`PluginCall`] can be faulted, and a call added to the trait can be faulted without a
//! change here. Calls are counted by fault point ([`counted_as`]): a zero fill counts as
//! the allocation it completes, a query as a synchronize.

use super::layer::{Hooks, Layered};
use super::{Plugin, PluginCall, PluginError, PluginInfo};
use std::sync::atomic::{AtomicU64, Ordering};

/// The kind of call a fault is injected into: any plugin call (see [`counted_as`]).
pub type FaultKind = PluginCall;

/// The fault point `call` counts as: itself, except [`PluginCall::FillZero`], the second
/// half of the allocation before it (the executor zero-fills right after the `Alloc` of
/// storage the program reads before writing), which counts and fails as
/// [`PluginCall::Alloc`], and [`PluginCall::Query`], a synchronize that does not block,
/// which counts and fails as [`PluginCall::Synchronize`]. So the k-th allocation point is
/// the same call whether or not the lowering zero-fills, and a fault of `Synchronize`
/// covers a session polling its run.
pub fn counted_as(call: PluginCall) -> FaultKind {
    match call {
        PluginCall::FillZero => PluginCall::Alloc,
        PluginCall::Query => PluginCall::Synchronize,
        c => c,
    }
}

/// The fault points the fault tests fail (`tests/fault_every_graph.rs`,
/// `tests/exec_run.rs`, the bench's CUDA check): the calls a run makes while it issues,
/// after its streams, kernels and host memory are set up and before teardown releases
/// them (zero fills and queries counted with allocs and synchronizes: [`counted_as`]).
/// Each failure must end the run with an error naming the op or step and leave nothing
/// allocated. Not in it: the release calls (a failed `free`, `free host`,
/// `destroy event`, `unregister host` or `graph destroy` leaks by definition) and the
/// setup calls before any op (`create streams`, `load kernel`, `create event`,
/// `alloc host`, `register host`, `graph edges`), whose errors name no region.
pub const RUN_CALLS: [FaultKind; 12] = [
    PluginCall::Alloc,
    PluginCall::Submit,
    PluginCall::Launch,
    PluginCall::Retrieve,
    PluginCall::RecordEvent,
    PluginCall::WaitEvent,
    PluginCall::Synchronize,
    PluginCall::SynchronizeEvent,
    PluginCall::GraphInstantiate,
    PluginCall::GraphLaunch,
    PluginCall::GraphUpdate,
    PluginCall::CopyPeer,
];

/// A plugin that fails the `k`-th call (1-based) of one kind; every other call is
/// forwarded to the inner plugin `P`. Its name is `faulty(NAME)`.
pub type FaultyPlugin<P> = Layered<Box<P>, Faults>;

/// The hooks of [`FaultyPlugin`]: which call fails, and the counters.
#[derive(Debug)]
pub struct Faults {
    kind: FaultKind,
    k: u64,
    calls: [AtomicU64; PluginCall::COUNT],
    allocs: AtomicU64,
    frees: AtomicU64,
    host_allocs: AtomicU64,
    host_frees: AtomicU64,
    injected: AtomicU64,
    /// Panic instead of returning an error (a misbehaving third-party plugin).
    panic: bool,
}

impl Faults {
    /// Fails call number `k` (1-based; 0 never fails) of fault point `kind` (as
    /// [`counted_as`] counts); with `panic`, panics in it instead.
    pub fn new(kind: FaultKind, k: u64, panic: bool) -> Faults {
        Faults {
            kind: counted_as(kind),
            k,
            calls: std::array::from_fn(|_| AtomicU64::new(0)),
            allocs: AtomicU64::new(0),
            frees: AtomicU64::new(0),
            host_allocs: AtomicU64::new(0),
            host_frees: AtomicU64::new(0),
            injected: AtomicU64::new(0),
            panic,
        }
    }
}

impl Hooks for Faults {
    fn info(&self, inner: PluginInfo) -> PluginInfo {
        inner.wrapped("faulty")
    }

    /// Counts the call at its fault point; fails (or panics in) the `k`-th of the
    /// faulted one, naming the fault point.
    fn before(&self, call: PluginCall) -> Result<(), PluginError> {
        let point = counted_as(call);
        let n = self.calls[point as usize].fetch_add(1, Ordering::SeqCst) + 1;
        if point == self.kind && n == self.k {
            self.injected.fetch_add(1, Ordering::SeqCst);
            tracing::debug!(target: "offload_sched::plugin", call = point.name(), nth = n, "injected fault");
            if self.panic {
                panic!("injected panic in {} #{n}", point.name());
            }
            return Err(PluginError::Injected {
                call: point,
                nth: n,
            });
        }
        Ok(())
    }

    /// Counts successful device and host allocations and frees.
    fn after(&self, call: PluginCall, result: Result<(), &PluginError>) {
        let counter = match call {
            PluginCall::Alloc => &self.allocs,
            PluginCall::Free => &self.frees,
            PluginCall::AllocHost => &self.host_allocs,
            PluginCall::FreeHost => &self.host_frees,
            _ => return,
        };
        if result.is_ok() {
            counter.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl<P: Plugin> Layered<Box<P>, Faults> {
    /// Fails call number `k` (1-based; 0 never fails) of fault point `kind`.
    pub fn new(inner: P, kind: FaultKind, k: u64) -> FaultyPlugin<P> {
        Layered::wrap(Box::new(inner), Faults::new(kind, k, false))
    }

    /// Panics in call number `k` of `kind` instead of failing it (for checking that a
    /// caller does not hang or leak threads when a plugin panics).
    pub fn panicking(inner: P, kind: FaultKind, k: u64) -> FaultyPlugin<P> {
        Layered::wrap(Box::new(inner), Faults::new(kind, k, true))
    }

    /// Successful device allocations so far.
    pub fn allocs(&self) -> u64 {
        self.hooks().allocs.load(Ordering::SeqCst)
    }

    /// Successful device frees so far.
    pub fn frees(&self) -> u64 {
        self.hooks().frees.load(Ordering::SeqCst)
    }

    /// Successful host allocations so far.
    pub fn host_allocs(&self) -> u64 {
        self.hooks().host_allocs.load(Ordering::SeqCst)
    }

    /// Successful host frees so far.
    pub fn host_frees(&self) -> u64 {
        self.hooks().host_frees.load(Ordering::SeqCst)
    }

    /// Calls of fault point `kind` made so far (failed or not; as [`counted_as`]
    /// counts).
    pub fn calls(&self, kind: FaultKind) -> u64 {
        self.hooks().calls[counted_as(kind) as usize].load(Ordering::SeqCst)
    }

    /// True once the fault has been injected.
    pub fn injected(&self) -> bool {
        self.hooks().injected.load(Ordering::SeqCst) > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::null::NullPlugin;
    use crate::plugin::DevicePtr;

    #[test]
    fn the_kth_call_of_a_fault_point_fails_unforwarded_and_is_counted() {
        let p = FaultyPlugin::new(NullPlugin::new(), FaultKind::Alloc, 2);
        assert_eq!(p.info().name, "faulty(null)");
        let s = p.create_streams(0, 1).unwrap()[0];
        let a = p.alloc(s, 64).unwrap();
        // A zero fill is the second half of its alloc: the 2nd alloc point.
        let e = p.fill_zero(s, a, 64).unwrap_err();
        assert_eq!(
            e,
            PluginError::Injected {
                call: PluginCall::Alloc,
                nth: 2
            }
        );
        assert!(p.injected());
        assert_eq!(
            (p.calls(FaultKind::Alloc), p.calls(FaultKind::FillZero)),
            (2, 2)
        );
        assert!(p.alloc(s, 64).is_ok());
        assert!(p.free(s, a).is_ok());
        assert!(p.free(s, DevicePtr(1)).is_ok());
        assert_eq!((p.allocs(), p.frees()), (2, 2));
        assert_eq!(p.inner().live_device_allocs(), 0);
    }

    #[test]
    #[should_panic(expected = "injected panic in launch #1")]
    fn a_panicking_fault_panics_in_the_call() {
        let p = FaultyPlugin::panicking(NullPlugin::new(), FaultKind::Launch, 1);
        let s = p.create_streams(0, 1).unwrap()[0];
        let shape = crate::model::LaunchShape {
            teams: 1,
            threads: 1,
        };
        let _ = p.launch(s, crate::plugin::KernelHandle(0), &[], shape);
    }
}
