//! The verifier: proves a schedule orders every OpGraph edge under stream semantics and,
//! under `minimal`, that every event wait and host wait is necessary and no host wait
//! blocks for device work the host op after it does not need.
//!
//! Model (CUDA stream semantics, CUDA Runtime API §6.4 "Stream Management" and §6.5
//! "Event Management"): ops on one stream run in issue order; `cuEventRecord` captures
//! everything issued to its stream so far; `cuStreamWaitEvent` makes later work on the
//! waiting stream start after that; `cuStreamSynchronize` blocks the host until its
//! stream's issued work completes, `cuEventSynchronize` until what the event captured
//! does, `cuCtxSynchronize` until a device's streams' work does; an op issued by the
//! host starts after everything the host already knows complete. The verifier tracks
//! this as vector clocks (per stream: how many ops of each stream are complete before its
//! next op may start) and checks each edge `a → b` as "at `b`'s start, `a`'s stream
//! prefix including `a` is complete".
//!
//! Necessity (minimal policy): a wait is necessary when some edge into the first op
//! issued after it on its stream (for a host wait: the next host op) is ordered with the
//! wait and not without it, the other waits at the same point kept. The scheduler places
//! every wait just before the op that needs it, so this local test is exact for its
//! output; for hand-edited schedules it may report a wait that only later ops need.
//! Host waits are also checked at op granularity: together, the host waits before a host
//! op may teach the host only what the completion of the op's preds implies, plus ops
//! that do no device work (frees, plain allocs); a wait on a whole stream where one on
//! an event after the needed op would do is reported ([`Violation::CoarseHostWait`]).
//!
//! Every violation is reported, not only the first, in issue order: misplaced ops, split
//! regions, then step by step, then ops never issued, then syncs nothing after them needs.
//!
//! Complexity: `O((V + E + K)·S)` for `V` ops, `E` edges, `K` sync steps, `S` streams
//! under the other policies; under `minimal`, `O(w·(w·S + d))` more for a run of `w` waits
//! before an op with `d` preds (the scheduler emits at most one wait per source stream
//! there, so `w ≤ S`), and `O(d·S + w·S·log V)` more before a host op (the
//! op-granularity check), with `O(V + P·S)` more memory for the `P` device preds of host
//! ops (their end clocks) and each stream's ops.
//!
//! Layout, one invariant per method of [`Verifier`] (after Cranelift's verifier):
//! - `structure.rs`: the schedule is well-formed for the graph (sizes, op placement, ids
//!   in range, every op issued exactly once); also [`check_structure`] on its own, which
//!   the executor runs on any schedule it is handed.
//! - `clocks.rs`: the stream model as vector clocks (in-order streams, events, host waits).
//! - `order.rs`: regions on one stream, events recorded once and before their waits,
//!   happens-before covers every edge (host waits before host reads included).
//! - `minimal.rs`: under `minimal`, every wait necessary, host waits no coarser than the
//!   ops after them need, and every event waited on.
//! - `elision.rs`: every copy transfer elision left out ([`crate::lower::OpGraph::elided`])
//!   is unobservable: replayed in program order with and without it, every op reads the
//!   same bytes ([`Violation::Elision`] names the region and buffer where not).
//! - `peak.rs`: under a device memory cap ([`crate::lower::OpGraph::device_memory`]),
//!   no state any execution can reach holds more live device bytes than the cap
//!   ([`Violation::DeviceMemory`] names the allocs live at the peak where one does).

mod clocks;
mod elision;
mod minimal;
mod order;
mod peak;
mod races;
mod structure;

use crate::lower::{OpGraph, OpId, RegionId};
use crate::schedule::columns::Columns;
use crate::schedule::{EventId, Schedule, Step, StreamId, SyncPolicy};
use clocks::Clocks;
use minimal::{HostNeeds, Pending};
pub use peak::{peak_live_bytes, PeakBytes};
use structure::Structure;
use thiserror::Error;

/// One thing wrong with a schedule.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum Violation {
    /// An OpGraph edge the schedule does not order.
    #[error("edge {from} -> {to} is not ordered: {detail}")]
    Unordered {
        from: OpId,
        to: OpId,
        detail: String,
    },
    /// An op missing from the issue sequence, issued twice, before a predecessor, or on a
    /// stream of the wrong device.
    #[error("op {op}: {detail}")]
    BadIssue { op: OpId, detail: String },
    /// A stream waits on an event not yet recorded, or an event is recorded twice.
    #[error("event {event}: {detail}")]
    BadEvent { event: EventId, detail: String },
    /// A region whose ops are on more than one stream.
    #[error("region \"{name}\" is split over streams {}", streams.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", "))]
    RegionSplit {
        region: RegionId,
        name: String,
        streams: Vec<StreamId>,
    },
    /// Two ops that touch the same bytes, one writing, with no edge between them in the
    /// graph and no order in the schedule (found by [`check_order`] from the ops'
    /// accesses, for graphs not made by the lowering).
    #[error("ops {first} and {second} race: {detail}")]
    Race {
        first: OpId,
        second: OpId,
        detail: String,
    },
    /// A copy transfer elision left out that an op can observe: op `op` (of region
    /// `region`) reads bytes of buffer `buffer` that differ from what the reference (no
    /// elision) has there; `detail` names the elided copy and the write it missed
    /// (`verify/elision.rs`).
    #[error("region \"{region}\", buffer `{buffer}`: elision not justified: {detail}")]
    Elision {
        op: OpId,
        region: String,
        buffer: String,
        detail: String,
    },
    /// Live device bytes on `device` can exceed the graph's device memory cap: some
    /// state an execution can reach (a down-set of the op graph, `verify/peak.rs`)
    /// holds `peak` bytes; `live` are the allocs live in such a state.
    #[error("device {device}: live device bytes can reach {peak} bytes, over the device memory cap of {cap} bytes: {detail}")]
    DeviceMemory {
        device: u32,
        peak: u64,
        cap: u64,
        live: Vec<OpId>,
        detail: String,
    },
    /// Under `minimal`: a sync step that no edge needs.
    #[error("unnecessary {what} at step {step}: removing it breaks no edge")]
    Unnecessary { step: usize, what: String },
    /// Under `minimal`: a host wait that blocks the host for device work no edge into the
    /// next host op needs (a wait on a whole stream where one on an event after the needed
    /// op would do); host waits are checked at op granularity.
    #[error("{what} at step {step} waits for more than the host needs: {detail}")]
    CoarseHostWait {
        step: usize,
        what: String,
        detail: String,
    },
}

/// All violations found.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("schedule \"{name}\" is wrong: {} violation(s):\n{}", violations.len(), violations.iter().map(|v| format!("  - {v}")).collect::<Vec<_>>().join("\n"))]
pub struct VerifyError {
    pub name: String,
    pub violations: Vec<Violation>,
}

/// What the verifier established.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct VerifyReport {
    /// Edges proven ordered.
    pub edges_checked: usize,
    /// Event waits and host waits proven necessary (minimal policy only).
    pub syncs_proven_necessary: usize,
    /// Elided copies ([`crate::lower::OpGraph::elided`]) proven unobservable.
    pub elisions_proven: usize,
    /// Devices whose live bytes the claims did not prove within the cap, so the exact
    /// peak was computed ([`peak_live_bytes`]; 0 for every graph the lowering makes).
    pub exact_peaks: usize,
}

/// "No op" / "not issued" in the `u32` tables (and the op of a host wait's violation).
const NONE: u32 = u32::MAX;

impl Verifier<'_> {
    /// The clock column of op `op`: its stream's for a device op on an existing stream,
    /// else its host lane's (a device op without a stream is simulated there, after being
    /// reported). `O(1)`.
    pub(super) fn col_of(&self, op: OpId) -> usize {
        match self.lane[op.index()].and_then(|t| self.cols.col(t)) {
            Some(c) => c,
            None => self.lane_col(self.sched.op_lane.get(op.index()).copied().unwrap_or(0)),
        }
    }

    /// The clock column of host lane `h` (out-of-range lanes, reported by the structural
    /// check, are simulated on the last lane).
    pub(super) fn lane_col(&self, h: u32) -> usize {
        self.cols.width() + (h as usize).min(self.lanes - 1)
    }

    /// The row of the waiter of step `k`: its host lane's column, or `None` for the
    /// issuing thread.
    pub(super) fn owner_row(&self, k: usize) -> Option<usize> {
        self.owners
            .get(k)
            .copied()
            .flatten()
            .map(|h| self.lane_col(h.0))
    }

    /// The name of clock column `c` in messages: a stream `sN` or a host lane `hN`.
    pub(super) fn col_name(&self, c: usize) -> String {
        match c < self.cols.width() {
            true => self.cols.stream(c).to_string(),
            false => format!("h{}", c - self.cols.width()),
        }
    }
}

/// Verifies `sched` against `graph`: [`check_structure`]'s invariants, then each region on
/// one stream, events recorded once and before their waits, every OpGraph edge ordered
/// under stream semantics (see the module docs), and under [`SyncPolicy::Minimal`] every
/// wait necessary and every host wait no coarser than the host op after it needs.
///
/// Returns what was proven, or every [`Violation`] found (in issue order). Never panics on
/// a malformed schedule (out-of-range ids are reported).
///
/// Complexity: `O((V + E + K)·S)` for `V` ops, `E` edges, `K` sync steps, `S` streams
/// that carry ops or sync steps (plus the cost of runs of waits under `minimal`: see the
/// module docs); `O(S² + V + P' + events·S)` memory for the `P'` streams of the
/// schedule (`O(P·S)` more under `minimal`). Clocks have one entry per stream that
/// carries ops or sync steps, not per stream of the pools
/// (`crate::schedule::sync::clock_bytes` bounds them).
pub fn verify(graph: &OpGraph, sched: &Schedule) -> Result<VerifyReport, VerifyError> {
    Verifier::new(graph, sched).run()
}

/// Checks that running `sched` is safe whatever `graph`'s edges say: [`check_structure`]'s
/// invariants, events recorded once and before their waits, every OpGraph edge ordered,
/// and every pair of ops that touch the same bytes (one writing) ordered, with what each
/// op touches recomputed from its kind (see `races.rs`: allocs and frees write their
/// whole allocation, copies and kernels read and write their sections). Minimality is not
/// checked, nor are regions required to sit on one stream: a correct schedule that waits
/// more than it must still runs. This is what [`crate::exec::execute`] runs before it
/// issues a schedule it did not make.
///
/// Errors: every [`Violation`] found, in issue order ([`Violation::Race`] for a conflict
/// the graph has no edge for). Never panics.
///
/// Complexity: `O((V + E + K)·S + (V + C)·log V)` for `V` ops, `E` edges, `K` sync
/// steps, `S` streams and `C` conflicting pairs found.
pub fn check_order(graph: &OpGraph, sched: &Schedule) -> Result<VerifyReport, VerifyError> {
    Verifier::with_mode(graph, sched, Mode::Safety).run()
}

/// Checks only that `sched` is well-formed for `graph`, so it can be read (and issued)
/// without an index going out of range: `op_stream` has one entry per op; every device op
/// is on a stream of its device that exists, every host op on none; every step names an
/// op, stream and event that exist; every op is issued exactly once. It does not check
/// ordering ([`verify`] does, after this).
///
/// Errors: every violation found ([`Violation::BadIssue`] or [`Violation::BadEvent`]),
/// with the same text as [`verify`] gives; when `op_stream` has the wrong length, only
/// that one. Never panics.
///
/// Complexity: `O(V + K)` for `V` ops and `K` steps.
pub fn check_structure(graph: &OpGraph, sched: &Schedule) -> Result<(), VerifyError> {
    let mut violations = Vec::new();
    Structure::new(graph, sched).check_all(&mut violations);
    outcome(sched, violations, ())
}

fn outcome<T>(sched: &Schedule, violations: Vec<Violation>, ok: T) -> Result<T, VerifyError> {
    if violations.is_empty() {
        Ok(ok)
    } else {
        Err(VerifyError {
            name: sched.name.clone(),
            violations,
        })
    }
}

/// What a [`Verifier`] proves.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// [`verify`]: the schedule is right for the graph (and minimal under `minimal`).
    Proof,
    /// [`check_order`]: running it is safe whatever the graph's edges say.
    Safety,
}

/// The checker behind [`verify`]: one schedule, its derived tables (the structural
/// checker's issued ops, the clocks, the waits pending per stream) and the violations
/// found so far. One method per invariant; [`Verifier::run`] walks the steps once,
/// calling each where it applies.
pub struct Verifier<'a> {
    graph: &'a OpGraph,
    sched: &'a Schedule,
    /// The policy is `minimal`: also prove every wait necessary.
    minimal: bool,
    /// Do not report regions split over streams ([`check_order`]: safety only).
    split_regions_allowed: bool,
    /// The race check from the ops' own accesses ([`check_order`]), when on.
    races: Option<races::Races>,
    /// The structural checks, and the table of ops issued so far.
    structure: Structure<'a>,
    /// The stream of each op when it exists (`op_stream` with out-of-range ids dropped;
    /// a device op without one is simulated on the host, after being reported).
    lane: Vec<Option<StreamId>>,
    /// The clock column of each stream that carries ops or sync steps; host lanes
    /// follow them (lane `h` is column `cols.width() + h`).
    cols: Columns,
    /// Host lanes of the schedule (at least 1).
    lanes: usize,
    /// Per step, who runs it if it blocks the host ([`Schedule::wait_owners`]).
    owners: Vec<Option<crate::schedule::LaneId>>,
    /// Per host op once issued: the clock right after it (what awaiting it teaches).
    host_end: Vec<Option<Vec<u32>>>,
    clocks: Clocks,
    /// The start clock of the op being issued.
    start: Vec<u32>,
    /// Per stream: the event waits since its last op.
    pending: Vec<Pending>,
    /// Host waits since the host's last op (kept under `minimal` only).
    host_pending: Pending,
    /// What host ops need, for the op-granularity check of host waits (filled under
    /// `minimal` only).
    needs: HostNeeds,
    violations: Vec<Violation>,
    report: VerifyReport,
}

impl<'a> Verifier<'a> {
    /// A verifier of `sched` against `graph`, nothing checked yet.
    /// `O(S² + V + P' + events·S)` time and memory (see [`verify`]).
    pub fn new(graph: &'a OpGraph, sched: &'a Schedule) -> Verifier<'a> {
        Verifier::with_mode(graph, sched, Mode::Proof)
    }

    fn with_mode(graph: &'a OpGraph, sched: &'a Schedule, mode: Mode) -> Verifier<'a> {
        let streams = sched.streams.len();
        let cols = Columns::new(streams, used_streams(sched));
        let lanes = sched.host_lanes.max(1) as usize;
        let width = cols.width() + lanes;
        let clocks = Clocks::new(width, graph.ops.len(), sched.events as usize);
        let s = clocks.width();
        let mut v = Verifier {
            graph,
            sched,
            minimal: mode == Mode::Proof && sched.policy == SyncPolicy::Minimal,
            split_regions_allowed: mode == Mode::Safety,
            races: (mode == Mode::Safety).then(|| races::Races::new(graph)),
            structure: Structure::new(graph, sched),
            lane: sched
                .op_stream
                .iter()
                .map(|st| st.filter(|st| st.index() < streams))
                .collect(),
            cols,
            lanes,
            owners: sched.wait_owners(),
            host_end: vec![None; graph.ops.len()],
            clocks,
            start: vec![0; s],
            pending: (0..s).map(|_| Pending::default()).collect(),
            host_pending: Pending::default(),
            needs: HostNeeds::default(),
            violations: Vec::new(),
            report: VerifyReport::default(),
        };
        if v.minimal {
            let on_host = graph
                .op_ids()
                .filter(|o| v.lane.get(o.index()) == Some(&None));
            v.needs = HostNeeds::new(graph, on_host, s);
        }
        v
    }

    /// Runs every check; see [`verify`] (results, errors, complexity).
    pub fn run(mut self) -> Result<VerifyReport, VerifyError> {
        if let Err(v) = self.structure.check_sizes() {
            self.violations.push(v);
            return outcome(self.sched, self.violations, self.report);
        }
        self.structure.check_placement(&mut self.violations);
        if !self.split_regions_allowed {
            self.check_regions();
        }
        let sched = self.sched;
        for (k, step) in sched.steps.iter().enumerate() {
            if self.structure.check_step(step, &mut self.violations) {
                self.step(k, *step);
            }
        }
        self.structure.check_all_issued(&mut self.violations);
        if self.minimal {
            self.check_unused_syncs();
        }
        self.report.elisions_proven = elision::prove(self.graph, &mut self.violations);
        self.report.exact_peaks = peak::prove(self.graph, &mut self.violations);
        outcome(self.sched, self.violations, self.report)
    }
}

/// The streams a schedule's ops and sync steps name (a device-wide host wait names
/// none: the streams of its device that carry nothing have nothing to wait for).
fn used_streams(sched: &Schedule) -> impl Iterator<Item = StreamId> + '_ {
    let on_steps = sched.steps.iter().filter_map(|st| match *st {
        Step::Record { stream, .. } | Step::Wait { stream, .. } | Step::HostWait { stream } => {
            Some(stream)
        }
        _ => None,
    });
    sched.op_stream.iter().flatten().copied().chain(on_steps)
}

fn describe_step(step: &Step) -> String {
    match step {
        Step::Op(op) => format!("op {op}"),
        Step::Record { event, stream } => format!("record {event} on {stream}"),
        Step::Wait { event, stream } => format!("wait {event} on {stream}"),
        Step::HostWait { stream } => format!("host wait on {stream}"),
        Step::HostWaitEvent { event } => format!("host wait on {event}"),
        Step::HostWaitDevice { device } => format!("host wait on device {device}"),
        Step::HostAwait { op } => format!("host await {op}"),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::model::{ElemType, Init, MapType, ProgramBuilder};
    use crate::schedule::{schedule, ScheduleOptions};

    /// saxpy on 1024 floats, scheduled with the defaults (`minimal`, 4 streams): one
    /// region on s0, one host wait before the end.
    pub(crate) fn saxpy() -> (OpGraph, Schedule) {
        let mut p = ProgramBuilder::new("saxpy");
        let x = p.buffer("x", ElemType::F32, 1024, Init::Iota);
        let y = p.buffer("y", ElemType::F32, 1024, Init::Fill(1.0));
        p.target("saxpy", "saxpy")
            .num(2.0)
            .arg(x)
            .arg(y)
            .map(MapType::To, x)
            .map(MapType::ToFrom, y);
        let g = crate::lower::lower(&p.build()).unwrap();
        let s = schedule(&g, &ScheduleOptions::default());
        (g, s)
    }

    #[test]
    fn verify_and_check_structure_agree_on_structure() {
        let (g, mut s) = saxpy();
        assert_eq!(check_structure(&g, &s), Ok(()));
        let r = verify(&g, &s).unwrap();
        let edges: usize = g.op_ids().map(|o| g.preds(o).len()).sum();
        assert_eq!(r.edges_checked, edges);
        s.steps.pop();
        let e = check_structure(&g, &s).unwrap_err();
        let all = verify(&g, &s).unwrap_err();
        assert!(
            e.violations.iter().all(|v| all.violations.contains(v)),
            "{e}\n{all}"
        );
    }
}
