//! Scheduling: stream assignment (`assign`) and sync insertion (`sync`) turn an
//! [`OpGraph`] into a [`Schedule`] — a host issue sequence of ops, event records and
//! waits, and host waits. Sync is data here; only the executor talks to a plugin.
//!
//! A schedule prints as text (`Display`: one block per stream, the host, a summary; what
//! the snapshots in tests/snapshots hold) and [`parse()`] reads that text back, given the
//! op graph, into the same schedule: schedules can be kept as files, edited by hand and
//! verified (tests/verifier/). The grammar is in [`parse()`]'s module, `parse.rs`.

pub(crate) mod assign;
pub(crate) mod columns;
mod display;
mod lanes;
mod order;
mod parse;
mod prefetch;
mod priority;
mod region_dag;
#[cfg(test)]
mod span_model;
pub(crate) mod sync;

use crate::lower::{OpGraph, OpId};
use std::fmt;

pub use assign::{assign_streams, StreamAssignment};
pub use parse::{parse, ParseError};
pub use sync::insert_sync;

/// A logical stream `sN` (an in-order device queue; libomptarget's AsyncInfo).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId(pub u32);

impl StreamId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "s{}", self.0)
    }
}

/// An event `eN`: recorded once on one stream, waited on by other streams (or the host).
/// Ids are never reused within a schedule; a plugin may pool the underlying objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventId(pub u32);

impl EventId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "e{}", self.0)
    }
}

/// A host lane `hN`: one of the host worker threads that run host ops (host tasks,
/// closures, `taskwait`, `end`) and the host waits before them, in their issue order, as
/// OpenMP's deferred tasks run on the team's threads. The issuing thread hands each host
/// op to its lane and goes on issuing; lanes order each other only through
/// [`Step::HostAwait`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LaneId(pub u32);

impl LaneId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for LaneId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "h{}", self.0)
    }
}

/// The most host lanes a [`ScheduleOptions`] may ask for.
pub const MAX_HOST_LANES: u32 = 256;

/// Host lanes by default where the machine decides ([`crate::Plan`]'s callers, the CLI's
/// `--host-lanes`): the machine's available parallelism
/// ([`std::thread::available_parallelism`]), at most 8, at least 1.
pub fn default_host_lanes() -> u32 {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get() as u32)
        .clamp(1, 8)
}

/// Which synchronization the scheduler emits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum SyncPolicy {
    /// A host wait after every copy and kernel launch, and at the end of a synchronous
    /// region that has neither (libomptarget before D77005).
    PerOp,
    /// One host wait at the end of every region without `nowait` (D77005).
    PerRegion,
    /// Events only on cross-stream edges not already implied, host waits only where the
    /// host touches data device work uses (this project's default).
    #[default]
    Minimal,
}

impl SyncPolicy {
    pub const ALL: [SyncPolicy; 3] = [
        SyncPolicy::PerOp,
        SyncPolicy::PerRegion,
        SyncPolicy::Minimal,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SyncPolicy::PerOp => "per-op",
            SyncPolicy::PerRegion => "per-region",
            SyncPolicy::Minimal => "minimal",
        }
    }

    pub fn parse(s: &str) -> Option<SyncPolicy> {
        SyncPolicy::ALL.into_iter().find(|p| p.name() == s)
    }
}

impl fmt::Display for SyncPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The most streams per device a [`ScheduleOptions`] may ask for (what `--streams`
/// accepts). The pools' streams cost `O(1)` each; the sync pass's and the verifier's
/// clocks grow only with the streams that carry work (`sync::clock_bytes`).
pub const MAX_STREAMS_PER_DEVICE: u32 = 1024;

/// Options for [`schedule`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleOptions {
    pub policy: SyncPolicy,
    /// Streams per device (the pool size), 1 to [`MAX_STREAMS_PER_DEVICE`]. Default 4.
    /// [`schedule`] clamps 0 to 1; [`crate::Plan`] refuses a value out of range.
    pub streams_per_device: u32,
    /// `Some(seed)`: assign each region a random stream of its device's pool.
    pub random_streams: Option<u64>,
    /// Host lanes ([`LaneId`]), 1 to [`MAX_HOST_LANES`]. Default 1 (so a schedule's text
    /// does not depend on the machine; [`default_host_lanes`] is the machine's figure).
    /// [`schedule`] clamps 0 to 1.
    pub host_lanes: u32,
}

impl Default for ScheduleOptions {
    fn default() -> Self {
        ScheduleOptions {
            policy: SyncPolicy::Minimal,
            streams_per_device: 4,
            random_streams: None,
            host_lanes: 1,
        }
    }
}

/// One step of the host's issue sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// Issue a device op to its stream, or run a host op on the host.
    Op(OpId),
    /// Record `event` on `stream` after everything issued to it so far
    /// (`cuEventRecord`).
    Record { event: EventId, stream: StreamId },
    /// Make `stream` wait for `event` before anything issued to it later
    /// (`cuStreamWaitEvent`); the host does not block.
    Wait { event: EventId, stream: StreamId },
    /// The host blocks until everything issued to `stream` so far has completed
    /// (`cuStreamSynchronize`).
    HostWait { stream: StreamId },
    /// The host blocks until `event`, recorded earlier on some stream, has completed: the
    /// work issued to that stream up to its `Record`, not what came after
    /// (`cuEventSynchronize`, CUDA Driver API §6.19 "Event Management"). Used before a
    /// host op that needs an op followed on its stream by device work it does not need.
    HostWaitEvent { event: EventId },
    /// The host blocks until everything issued to every stream of `device` so far has
    /// completed (`cuCtxSynchronize`); used when a host op needs several streams.
    HostWaitDevice { device: u32 },
    /// The host blocks until host op `op` (issued before, on its lane) has completed
    /// (OpenMP's task dependences between a deferred task and what depends on it).
    HostAwait { op: OpId },
}

impl Step {
    /// Whether the host blocks at this step (`HostWait`, `HostWaitEvent`,
    /// `HostWaitDevice`, `HostAwait`). Who blocks: see [`Schedule::wait_owners`].
    pub fn is_host_wait(&self) -> bool {
        matches!(
            self,
            Step::HostWait { .. }
                | Step::HostWaitEvent { .. }
                | Step::HostWaitDevice { .. }
                | Step::HostAwait { .. }
        )
    }
}

/// Per-stream facts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamInfo {
    pub device: u32,
    /// The device's high-priority stream: the one extra stream that carries the regions
    /// with OpenMP `priority(n)`, `n > 0` (`priority.rs`). A plugin creates it at the
    /// device's greatest stream priority (CUDA: `cuStreamCreateWithPriority`); the host
    /// plugin ignores it. Shown as `s5 (device 0, high priority):`.
    pub high_priority: bool,
}

/// A schedule: streams, the stream of each device op, and the host issue sequence.
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    pub name: String,
    pub policy: SyncPolicy,
    pub streams: Vec<StreamInfo>,
    /// Stream of each op by op index; `None` for host ops.
    pub op_stream: Vec<Option<StreamId>>,
    /// The issue sequence. Every op appears exactly once, in an order consistent with
    /// the OpGraph's edges.
    pub steps: Vec<Step>,
    /// Number of events (ids `e0..eN`).
    pub events: u32,
    /// Number of host lanes (ids `h0..hN`), at least 1.
    pub host_lanes: u32,
    /// Host lane of each op by op index (the lane a host op runs on; 0 for device ops).
    pub op_lane: Vec<u32>,
    /// Descriptions used by `Display` (kept so the text needs only the schedule).
    pub(crate) text: display::OpText,
}

impl Schedule {
    /// Host waits (on one stream, one event or a whole device), in issue order.
    pub fn host_waits(&self) -> impl Iterator<Item = &Step> + '_ {
        self.steps.iter().filter(|s| s.is_host_wait())
    }

    /// Event waits `(event, waiting stream)`, in issue order.
    pub fn event_waits(&self) -> impl Iterator<Item = (EventId, StreamId)> + '_ {
        self.steps.iter().filter_map(|s| match s {
            Step::Wait { event, stream } => Some((*event, *stream)),
            _ => None,
        })
    }

    /// Number of streams that carry at least one op.
    pub fn used_streams(&self) -> usize {
        let mut used = vec![false; self.streams.len()];
        for s in self.op_stream.iter().flatten() {
            used[s.index()] = true;
        }
        used.into_iter().filter(|u| *u).count()
    }

    /// Number of device and host ops.
    pub fn op_count(&self) -> usize {
        self.op_stream.len()
    }

    /// Who runs each step that blocks the host ([`Step::is_host_wait`]): the lane of the
    /// host op it leads — the next op step after it is a host op — or, when the next op
    /// is a device op or there is none, the issuing thread (`None`). `None` for every
    /// other step. A lane's waits block only that lane; the issuing thread's block every
    /// step after it. Out-of-range ops count as device ops. `O(K)` for `K` steps.
    pub fn wait_owners(&self) -> Vec<Option<LaneId>> {
        let mut out = vec![None; self.steps.len()];
        let mut next: Option<LaneId> = None;
        for (k, step) in self.steps.iter().enumerate().rev() {
            match *step {
                Step::Op(op) => {
                    let host = self.op_stream.get(op.index()).is_some_and(|s| s.is_none());
                    next = host.then(|| LaneId(self.op_lane.get(op.index()).copied().unwrap_or(0)));
                }
                ref s if s.is_host_wait() => out[k] = next,
                _ => {}
            }
        }
        out
    }
}

/// Lowered graph → schedule: [`assign_streams`] then [`insert_sync`].
///
/// Complexity: `O((V + E) · S)` for `S` streams in all (`S` is the pool size times the
/// device count, a small constant), see the two passes.
pub fn schedule(graph: &OpGraph, opts: &ScheduleOptions) -> Schedule {
    let assignment = assign_streams(graph, opts);
    insert_sync(graph, &assignment, opts.policy, opts.host_lanes)
}
