//! Replay: a verified schedule as plugin graphs (`crate::plugin::graph`), built once
//! and launched per run, so a run costs one graph launch per segment instead of one
//! driver call per copy, launch and event (issue 14; [design notes](crate::design) "The embedded API").
//!
//! The pipeline stage after `verify`, used by the executor when a session replays
//! ([`crate::Session::with_replay`]):
//! 1. [`ReplayPlan::new`] (plain data, no plugin): the schedule's steps split into
//!    **parts**: *device segments* (maximal runs of device ops, event records and
//!    waits) and *host parts* (host ops and host waits between them). Each segment
//!    becomes one graph: a node per copy, kernel and zero-filled alloc; edges from
//!    stream order and from event record → wait (`build`). Allocs without a zero
//!    fill and frees become no node: their ordering is kept by contracting them
//!    (every predecessor of a contracted op is joined to every successor).
//! 2. Device memory is the plan's (`memory`): each allocation gets a block of a
//!    session-owned arena, a block freed by one allocation reused by a later one on any
//!    stream when the free happens before the alloc (an earlier part, or ordered by
//!    stream order and events within a segment: the graph's edges keep that order, step
//!    3). Allocated once per session; graphs allocate nothing. An arena over the plan's
//!    device memory cap is refused before anything is allocated ([`Arena`] says when
//!    it can exceed the verifier's peak).
//! 3. Before the first launch the plugin's graph is read back
//!    ([`crate::plugin::Plugin::graph_edges`]) and proved ([`prove`]): every pair of
//!    nodes the schedule orders (stream order, events, through contracted allocs and
//!    frees) is ordered by a path of the graph's edges — graph happens-before ⊇ schedule
//!    happens-before, computed independently of how the edges were built (vector clocks
//!    over the steps against reachability in the read-back edges).
//! 4. A run launches the segments in order on one stream of their device (so segment
//!    `k + 1` runs after all of segment `k`), and at each host part synchronizes that
//!    stream once and runs the host ops. Host waits inside the plan thus become
//!    *segment boundaries*: the host waits for the whole segment, not only the op it
//!    needs (coarser than the eager `minimal` schedule, which may wait on one event).
//!
//! **Taskgraphs** ([`crate::lower::TaskgraphInfo`], OpenMP 6.0 §14.3): segments are also
//! cut where the ops of one taskgraph execution end and another's begin, so each
//! execution is its own segment(s); the executor instantiates the first execution's
//! graph and launches it again for every later execution whose graph (nodes with their
//! addresses, edges) is the same — record once, replay after — else instantiates that
//! execution's own. A one-shot run of a plan with a taskgraph replays this way; a
//! session replays every run.
//!
//! Falls back to stream issue (each named in [`Unsupported`]): a schedule whose ops use
//! more than one device; a plugin without graphs ([`crate::plugin::PluginInfo::graphs`]
//! false; the host and CUDA plugins have them; the null plugin keeps them and launches
//! nothing; a layered plugin such as the faulty one says what its inner plugin says). A replayed run that fails leaves its graphs marked broken: the next
//! run releases them and builds them anew. Rebinding: a copy node's host address is the
//! run's host memory of its buffer (kept plugin memory, or the bound memory); when it
//! changes between runs, the node is updated in place
//! ([`crate::plugin::Plugin::graph_set_host`]), or the segment is instantiated again
//! when the plugin cannot apply it (a debug log says so).

pub(crate) mod build;
pub(crate) mod memory;
pub(crate) mod proof;

pub use build::{NodeSource, Segment};
pub use memory::{Arena, OverCap};
pub use proof::{prove, ProofError};

use crate::lower::{OpGraph, OpKind};
use crate::schedule::{Schedule, Step};
use std::fmt;
use std::ops::Range;

/// One part of a replayed run, in step order.
#[derive(Clone, Debug, PartialEq)]
pub enum Part {
    /// Device work: one graph (none when it has no node: only allocs without a fill and
    /// frees, which the arena replaces).
    Device(Segment),
    /// Host steps `steps` (host ops and host waits): the host synchronizes the launch
    /// stream once, then runs the host ops in order.
    Host(Range<usize>),
}

/// Why a schedule is issued to streams instead of replayed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unsupported {
    /// Streams of several devices (one graph is one device's; cross-device replay is not
    /// built).
    Devices(Vec<u32>),
    /// The plugin (named) has no graphs ([`crate::plugin::PluginInfo::graphs`] is false).
    Plugin(String),
    /// The replay arena is over the plan's device memory cap ([`ReplayPlan::check_cap`]:
    /// arena blocks are neither split nor joined), while stream issue keeps the cap (the
    /// verifier proved its peak).
    OverCap(OverCap),
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unsupported::Devices(d) => write!(
                f,
                "the schedule uses {} devices ({d:?}); replay takes one",
                d.len()
            ),
            Unsupported::Plugin(p) => write!(f, "the {p} plugin has no graphs"),
            Unsupported::OverCap(o) => write!(
                f,
                "the replay arena of {} ({} bytes) on device {} is over the device memory \
                 cap of {} ({} bytes; the schedule's proven peak is {} bytes): arena blocks \
                 are neither split nor joined",
                crate::model::human_bytes(o.arena),
                o.arena,
                o.device,
                crate::model::human_bytes(o.cap),
                o.cap,
                o.peak
            ),
        }
    }
}

/// A schedule cut into parts, with the arena plan for its device memory. Plain data:
/// addresses are resolved per session by the executor.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayPlan {
    /// The one device every stream with ops is on.
    pub device: u32,
    /// The stream graphs launch on (the first stream with ops).
    pub stream: crate::schedule::StreamId,
    pub parts: Vec<Part>,
    pub arena: Arena,
}

/// Whether step `st` is a host step (a host op or a host wait).
pub(crate) fn is_host_step(graph: &OpGraph, st: &Step) -> bool {
    match st {
        Step::Op(op) => graph.op(*op).kind.is_host(),
        Step::Record { .. } | Step::Wait { .. } => false,
        Step::HostWait { .. }
        | Step::HostWaitEvent { .. }
        | Step::HostWaitDevice { .. }
        | Step::HostAwait { .. } => true,
    }
}

impl ReplayPlan {
    /// The parts and arena of `sched` (a schedule of `graph` the verifier accepted).
    ///
    /// Errors: [`Unsupported::Devices`] when its streams are on more than one device.
    ///
    /// Complexity: `O(steps · S)` for `S` streams, plus the edges' sort.
    pub fn new(graph: &OpGraph, sched: &Schedule) -> Result<ReplayPlan, Unsupported> {
        // The devices of the streams that carry ops (a device's pool may be idle).
        let mut devices: Vec<u32> = sched
            .op_stream
            .iter()
            .flatten()
            .map(|s| sched.streams[s.index()].device)
            .collect();
        devices.sort_unstable();
        devices.dedup();
        if devices.len() > 1 {
            return Err(Unsupported::Devices(devices));
        }
        let device = devices.first().copied().unwrap_or(0);
        let stream = sched
            .op_stream
            .iter()
            .flatten()
            .copied()
            .min()
            .unwrap_or(crate::schedule::StreamId(0));
        let tags = execution_tags(graph);
        let mut parts = Vec::new();
        let steps = &sched.steps;
        let mut i = 0;
        while i < steps.len() {
            let host = is_host_step(graph, &steps[i]);
            let mut j = i + 1;
            while j < steps.len() && is_host_step(graph, &steps[j]) == host {
                j += 1;
            }
            match host {
                true => parts.push(Part::Host(i..j)),
                false => {
                    for (r, execution) in split_by_execution(sched, &tags, i..j) {
                        let mut seg = build::segment(graph, sched, r);
                        seg.execution = execution;
                        parts.push(Part::Device(seg));
                    }
                }
            }
            i = j;
        }
        let arena = Arena::plan(graph, sched, &parts);
        Ok(ReplayPlan {
            device,
            stream,
            parts,
            arena,
        })
    }

    /// Checks that the arena fits the device memory cap of `graph` (the graph this plan
    /// was made from), if it has one.
    ///
    /// Errors: [`OverCap`] with the cap, the arena's bytes and the verifier's exact peak
    /// (computed only then, `O(V²E)` at worst: [`crate::verify::peak_live_bytes`]).
    pub fn check_cap(&self, graph: &OpGraph) -> Result<(), OverCap> {
        let (Some(cap), arena) = (graph.device_memory, self.arena.bytes()) else {
            return Ok(());
        };
        if arena <= cap {
            return Ok(());
        }
        Err(OverCap {
            device: self.device,
            cap,
            arena,
            peak: crate::verify::peak_live_bytes(graph, self.device).bytes,
        })
    }

    /// The device segments, in order.
    pub fn segments(&self) -> impl Iterator<Item = &Segment> {
        self.parts.iter().filter_map(|p| match p {
            Part::Device(s) => Some(s),
            Part::Host(_) => None,
        })
    }

    /// Number of graph nodes over all segments.
    pub fn node_count(&self) -> usize {
        self.segments().map(|s| s.nodes.len()).sum()
    }
}

/// One execution of a `taskgraph` ([`crate::lower::TaskgraphInfo`]): taskgraph index in
/// [`OpGraph::taskgraphs`] and execution number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Execution {
    pub taskgraph: u32,
    pub index: u32,
}

/// The taskgraph execution of each op (by op index), if any.
fn execution_tags(graph: &OpGraph) -> Vec<Option<Execution>> {
    let mut tags = vec![None; graph.ops.len()];
    for (t, tg) in graph.taskgraphs.iter().enumerate() {
        for (k, r) in tg.iterations.iter().enumerate() {
            for i in r.clone() {
                if let Some(slot) = tags.get_mut(i as usize) {
                    *slot = Some(Execution {
                        taskgraph: t as u32,
                        index: k as u32,
                    });
                }
            }
        }
    }
    tags
}

/// Device steps `steps` cut where an op of another taskgraph execution (or of none)
/// follows: each piece with the execution of its ops. Records and waits stay with the
/// piece they are in. Cutting adds order (pieces run one after another), never removes
/// it.
fn split_by_execution(
    sched: &Schedule,
    tags: &[Option<Execution>],
    steps: Range<usize>,
) -> Vec<(Range<usize>, Option<Execution>)> {
    let mut out = Vec::new();
    let mut start = steps.start;
    let mut cur: Option<Option<Execution>> = None;
    for i in steps.clone() {
        if let Step::Op(op) = sched.steps[i] {
            let t = tags[op.index()];
            match cur {
                None => cur = Some(t),
                Some(c) if c != t => {
                    out.push((start..i, c));
                    start = i;
                    cur = Some(t);
                }
                Some(_) => {}
            }
        }
    }
    out.push((start..steps.end, cur.flatten()));
    out
}

/// Whether op kind `k` becomes a graph node (a copy, a kernel, or an alloc with a zero
/// fill); allocs without one and frees are contracted.
pub(crate) fn is_node(k: &OpKind, graph: &OpGraph) -> bool {
    match k {
        OpKind::H2D { .. } | OpKind::D2H { .. } | OpKind::Kernel(_) => true,
        OpKind::Alloc { alloc } => graph.allocs[alloc.index()].zero,
        _ => false,
    }
}
