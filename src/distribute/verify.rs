//! The verifier over all ranks, run before anything is issued ([`verify_ranks`]).
//!
//! # What it proves
//!
//! 1. **Matching**: every envelope is sent exactly once, on its `from` rank, and received
//!    exactly once, on its `to` rank, with the same byte count and the same section
//!    (the split names the section each message carries; a receive that would take
//!    another section's bytes is a wrong answer even when the sizes agree).
//! 2. **Acyclic global graph**: every rank's op graph plus one edge from each send to its
//!    receive has no cycle.
//! 3. **No deadlock** under the executor's model with one progress thread: the *wait
//!    graph* has no cycle. Its nodes are every rank's ops and issue steps; its edges are
//!    what can make a node wait: the op graph's edges; stream order (each op after the
//!    op before it on its stream); host-lane order (each host op after the one before it
//!    on its lane); the issuing thread's order (step `k` after step `k − 1`; an op after
//!    the step that issues it; a host wait the issuing thread owns after what it waits
//!    for); a host wait a lane owns before that lane's next op; an event wait (the op
//!    before the record, before the waiting stream's next op); and send → receive. Sends
//!    never block ([`super::Transport`]'s contract); a receive completes once its send
//!    has run (its message is taken by the rank's progress thread, or by the receive
//!    itself where MPI gives `MPI_THREAD_MULTIPLE`: `distribute::mpi`; either way no
//!    receive depends on another op's thread to move its bytes). By induction over a topological order of an acyclic wait graph, every node
//!    completes: each node waits only for its predecessors. The model is the executor's
//!    serial issue with host lanes, which [`super::DistPlan`] uses (two lanes: sends and
//!    receives apart), including where the issuing thread runs lane items itself
//!    (`exec::inline_plan`): a host op it awaits may run at the await (an edge from the
//!    step before the await to the op, when the issuing thread blocked nowhere since the
//!    op's step), and in the schedule's tail it runs the tail lanes' items one after
//!    another in step order (an edge from each such op, and from what the waits among
//!    them wait for, to the next such op), so a receive and a send of two lanes the
//!    issuing thread runs in the wrong order are a deadlock here too.
//!
//! Violations name the rank, the op and its region; all are reported, not just the first
//! (a cycle is reported once, as one of its cycles).
//!
//! Complexity: `O(V + E + K)` over all ranks for `V` ops, `E` edges and `K` steps.

use super::transfer::Envelope;
use crate::lower::{OpGraph, OpId};
use crate::model::Section;
use crate::schedule::{Schedule, Step};
use std::collections::BTreeMap;
use std::fmt;

/// A send or receive op of one rank's op graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransferOp {
    pub op: OpId,
    /// `true` for a send, `false` for a receive.
    pub send: bool,
    pub envelope: Envelope,
    pub bytes: u64,
    pub section: Section,
}

/// One rank as the verifier sees it: its op graph, its verified schedule, and its sends
/// and receives.
#[derive(Clone, Copy, Debug)]
pub struct RankView<'a> {
    pub graph: &'a OpGraph,
    pub schedule: &'a Schedule,
    pub transfers: &'a [TransferOp],
}

/// An op of a rank, for messages: `rank 1 op #7 (region "recv r0→r1 #3")`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankOp {
    pub rank: u32,
    pub op: OpId,
    pub region: String,
}

impl fmt::Display for RankOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rank {} op {} (region \"{}\")",
            self.rank, self.op, self.region
        )
    }
}

/// What the cross-rank check found wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// A send no receive matches.
    UnmatchedSend { at: RankOp, envelope: Envelope },
    /// A receive no send matches.
    UnmatchedRecv { at: RankOp, envelope: Envelope },
    /// An envelope sent (or received) more than once.
    Duplicate {
        at: RankOp,
        first: RankOp,
        envelope: Envelope,
    },
    /// A send not on its envelope's `from` rank, or a receive not on its `to` rank.
    WrongRank { at: RankOp, envelope: Envelope },
    /// The matched send and receive disagree on bytes or section.
    Mismatch {
        send: RankOp,
        recv: RankOp,
        envelope: Envelope,
        what: String,
    },
    /// A cycle of the global graph (op graphs plus send → receive).
    Cycle { ops: Vec<RankOp> },
    /// A cycle of the wait graph only: the ranks would block each other forever.
    Deadlock { ops: Vec<RankOp> },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = |ops: &[RankOp]| {
            ops.iter()
                .map(|o| o.to_string())
                .collect::<Vec<_>>()
                .join(" → ")
        };
        match self {
            Violation::UnmatchedSend { at, envelope } => {
                write!(f, "{at}: send {envelope} has no matching receive")
            }
            Violation::UnmatchedRecv { at, envelope } => {
                write!(f, "{at}: receive {envelope} has no matching send")
            }
            Violation::Duplicate {
                at,
                first,
                envelope,
            } => {
                write!(
                    f,
                    "{at}: envelope {envelope} is used again (first by {first})"
                )
            }
            Violation::WrongRank { at, envelope } => {
                write!(f, "{at}: envelope {envelope} does not belong to this rank")
            }
            Violation::Mismatch {
                send,
                recv,
                envelope,
                what,
            } => write!(
                f,
                "{recv}: receive {envelope} does not match {send}: {what}"
            ),
            Violation::Cycle { ops } => write!(f, "cycle across ranks: {}", path(ops)),
            Violation::Deadlock { ops } => {
                write!(f, "deadlock: the ranks wait on each other: {}", path(ops))
            }
        }
    }
}

/// Checks all ranks together (see the module docs).
///
/// Returns every violation found, empty when the ranks are proven right.
pub fn verify_ranks(ranks: &[RankView<'_>]) -> Vec<Violation> {
    let at = |r: usize, op: OpId| RankOp {
        rank: r as u32,
        op,
        region: ranks[r].graph.region_of(op).name.clone(),
    };
    let mut out = Vec::new();
    let mut sends: BTreeMap<Envelope, (usize, TransferOp)> = BTreeMap::new();
    let mut recvs: BTreeMap<Envelope, (usize, TransferOp)> = BTreeMap::new();
    for (r, v) in ranks.iter().enumerate() {
        for t in v.transfers {
            let owner = if t.send {
                t.envelope.from
            } else {
                t.envelope.to
            };
            if owner as usize != r {
                out.push(Violation::WrongRank {
                    at: at(r, t.op),
                    envelope: t.envelope,
                });
                continue;
            }
            let map = if t.send { &mut sends } else { &mut recvs };
            if let Some((r0, first)) = map.get(&t.envelope) {
                out.push(Violation::Duplicate {
                    at: at(r, t.op),
                    first: at(*r0, first.op),
                    envelope: t.envelope,
                });
            } else {
                map.insert(t.envelope, (r, *t));
            }
        }
    }
    let mut pairs = Vec::new();
    for (env, (rs, s)) in &sends {
        match recvs.get(env) {
            None => out.push(Violation::UnmatchedSend {
                at: at(*rs, s.op),
                envelope: *env,
            }),
            Some((rr, r)) => {
                let what = if s.bytes != r.bytes {
                    Some(format!("{} bytes sent, {} expected", s.bytes, r.bytes))
                } else if s.section != r.section {
                    let g = ranks[*rr].graph;
                    Some(format!(
                        "it sends {} and the receive expects {}",
                        g.section_name(&s.section),
                        g.section_name(&r.section)
                    ))
                } else {
                    None
                };
                match what {
                    Some(what) => out.push(Violation::Mismatch {
                        send: at(*rs, s.op),
                        recv: at(*rr, r.op),
                        envelope: *env,
                        what,
                    }),
                    None => pairs.push(((*rs, s.op), (*rr, r.op))),
                }
            }
        }
    }
    for (env, (rr, r)) in &recvs {
        if !sends.contains_key(env) {
            out.push(Violation::UnmatchedRecv {
                at: at(*rr, r.op),
                envelope: *env,
            });
        }
    }
    // The wait graph holds every edge of the data graph (and the issue steps' edges), so
    // when it is acyclic so is the data graph: one graph to check when the ranks pass.
    let wait = Global::new(ranks, &pairs, true);
    if let Some(cycle) = wait.find_cycle() {
        let data = Global::new(ranks, &pairs, false);
        out.push(match data.find_cycle() {
            Some(cycle) => Violation::Cycle {
                ops: data.name(&cycle, &at),
            },
            None => Violation::Deadlock {
                ops: wait.name(&cycle, &at),
            },
        });
    }
    out
}

/// `(rank, op)`.
type RankOpIdx = (usize, OpId);

/// The schedule's tail as serial issue with host lanes runs it (`exec::inline_plan`,
/// whose rule this is): from the step after the issuing thread's last own step,
/// the issuing thread runs the items of the *tail lanes* itself, one after another in
/// step order: the lane of the last host op, and every lane whose tail ops do no work
/// of their own (a `taskwait`).
struct Tail {
    start: usize,
    /// Per step from `start` on: whether its item is a tail lane's.
    items: Vec<bool>,
}

impl Tail {
    /// The executor's own rule (`exec::inline_plan::tail_items`).
    fn of(graph: &OpGraph, s: &Schedule, owners: &[Option<crate::schedule::LaneId>]) -> Tail {
        let (start, items) = crate::exec::inline_plan::tail_items(graph, s, owners);
        Tail { start, items }
    }

    /// Whether step `k` is an item the issuing thread runs in the tail.
    fn holds(&self, k: usize) -> bool {
        k >= self.start && self.items[k - self.start]
    }
}

/// A graph over every rank's ops (and, for the wait graph, issue steps): node
/// `base[r] + op` for op `op` of rank `r`, `base[r] + ops(r) + k` for step `k`. Edges are
/// gathered as pairs, then kept in compressed rows (`adj[off[a]..off[a + 1]]`: the
/// successors of `a`, in the order they were added): two flat arrays, not one vector
/// per node (millions of nodes for a 1M-op program).
struct Global {
    base: Vec<usize>,
    ops: Vec<usize>,
    n: usize,
    edges: Vec<(u32, u32)>,
    off: Vec<usize>,
    adj: Vec<u32>,
}

impl Global {
    fn new(ranks: &[RankView<'_>], pairs: &[(RankOpIdx, RankOpIdx)], wait: bool) -> Self {
        let mut base = Vec::new();
        let mut ops = Vec::new();
        let mut n = 0usize;
        for v in ranks {
            base.push(n);
            ops.push(v.graph.ops.len());
            n += v.graph.ops.len() + if wait { v.schedule.steps.len() } else { 0 };
        }
        let mut g = Global {
            base,
            ops,
            n,
            edges: Vec::new(),
            off: Vec::new(),
            adj: Vec::new(),
        };
        for (r, v) in ranks.iter().enumerate() {
            for (a, b) in v.graph.edges() {
                g.edge(r, a.index(), r, b.index());
            }
            if wait {
                g.wait_edges(r, v);
            }
        }
        for ((rs, s), (rr, q)) in pairs {
            g.edge(*rs, s.index(), *rr, q.index());
        }
        g.compress();
        g
    }

    fn edge(&mut self, ra: usize, a: usize, rb: usize, b: usize) {
        let (a, b) = (self.base[ra] + a, self.base[rb] + b);
        self.edges.push((a as u32, b as u32));
    }

    /// The gathered edges into compressed rows (a counting sort by source, stable).
    fn compress(&mut self) {
        let mut off = vec![0usize; self.n + 1];
        for &(a, _) in &self.edges {
            off[a as usize + 1] += 1;
        }
        for i in 0..self.n {
            off[i + 1] += off[i];
        }
        let mut at = off.clone();
        let mut adj = vec![0u32; self.edges.len()];
        for &(a, b) in &self.edges {
            adj[at[a as usize]] = b;
            at[a as usize] += 1;
        }
        self.edges = Vec::new();
        self.off = off;
        self.adj = adj;
    }

    /// The successors of node `a`.
    fn succ(&self, a: usize) -> &[u32] {
        &self.adj[self.off[a]..self.off[a + 1]]
    }

    /// Node of step `k` of rank `r`, as an op-like index of that rank.
    fn step(&self, r: usize, k: usize) -> usize {
        self.ops[r] + k
    }

    fn wait_edges(&mut self, r: usize, v: &RankView<'_>) {
        let s = v.schedule;
        let owners = s.wait_owners();
        let tail = Tail::of(v.graph, s, &owners);
        // The tail lanes' items the issuing thread runs one after another: the last op
        // among them, and the ops the waits among them since then wait for.
        let mut tail_op: Option<usize> = None;
        let mut tail_waits: Vec<usize> = Vec::new();
        // The last step the issuing thread blocks at (a host wait it owns).
        let mut blocked_at: Option<usize> = None;
        let mut op_step: Vec<Option<usize>> = vec![None; v.graph.ops.len()];
        // Last op issued so far per stream, op recorded by each event, last host op per lane.
        let mut last_on: Vec<Option<usize>> = vec![None; s.streams.len()];
        let mut recorded: Vec<Option<usize>> = vec![None; s.events as usize];
        let mut last_lane: Vec<Option<usize>> = vec![None; s.host_lanes.max(1) as usize];
        // Lane-owned waits not yet attached to their lane's next op.
        let mut pending: Vec<Vec<usize>> = vec![Vec::new(); last_lane.len()];
        // Device ops a stream's next op must follow (event waits).
        let mut stream_pending: Vec<Vec<usize>> = vec![Vec::new(); s.streams.len()];
        for (k, step) in s.steps.iter().enumerate() {
            let node = self.step(r, k);
            if k > 0 {
                let prev = self.step(r, k - 1);
                self.edge(r, prev, r, node);
            }
            let in_tail = tail.holds(k);
            let awaited: Vec<usize> = match *step {
                Step::Op(op) => {
                    let o = op.index();
                    op_step[o] = Some(k);
                    self.edge(r, node, r, o);
                    match s.op_stream[o] {
                        Some(st) => {
                            if let Some(p) = last_on[st.index()] {
                                self.edge(r, p, r, o);
                            }
                            for p in std::mem::take(&mut stream_pending[st.index()]) {
                                self.edge(r, p, r, o);
                            }
                            last_on[st.index()] = Some(o);
                        }
                        None => {
                            let lane = s.op_lane[o] as usize;
                            if let Some(p) = last_lane[lane] {
                                self.edge(r, p, r, o);
                            }
                            for p in std::mem::take(&mut pending[lane]) {
                                self.edge(r, p, r, o);
                            }
                            last_lane[lane] = Some(o);
                            if in_tail {
                                if let Some(p) = tail_op.replace(o) {
                                    self.edge(r, p, r, o);
                                }
                                for p in std::mem::take(&mut tail_waits) {
                                    self.edge(r, p, r, o);
                                }
                            }
                        }
                    }
                    Vec::new()
                }
                Step::Record { event, stream } => {
                    recorded[event.index()] = last_on[stream.index()];
                    Vec::new()
                }
                Step::Wait { event, stream } => {
                    if let Some(p) = recorded[event.index()] {
                        stream_pending[stream.index()].push(p);
                    }
                    Vec::new()
                }
                Step::HostWait { stream } => last_on[stream.index()].into_iter().collect(),
                Step::HostWaitEvent { event } => recorded[event.index()].into_iter().collect(),
                Step::HostWaitDevice { device } => s
                    .streams
                    .iter()
                    .enumerate()
                    .filter(|(_, i)| i.device == device)
                    .filter_map(|(i, _)| last_on[i])
                    .collect(),
                Step::HostAwait { op } => vec![op.index()],
            };
            match owners[k] {
                None if step.is_host_wait() => {
                    // A host op the issuing thread awaits may run on the issuing thread
                    // itself, at the await (`exec::inline_plan`), when the issuing
                    // thread blocked nowhere since the op's step: after the step before.
                    if let (Step::HostAwait { op }, Some(prev)) = (*step, k.checked_sub(1)) {
                        let at = op_step.get(op.index()).copied().flatten();
                        if at.is_some_and(|p| blocked_at.is_none_or(|b| b < p)) {
                            let prev = self.step(r, prev);
                            self.edge(r, prev, r, op.index());
                        }
                    }
                    blocked_at = Some(k);
                    for a in awaited {
                        self.edge(r, a, r, node);
                    }
                }
                None => {}
                Some(lane) => {
                    if in_tail {
                        tail_waits.extend(awaited.iter().copied());
                    }
                    pending[lane.index()].extend(awaited);
                }
            }
        }
    }

    /// One cycle (as node ids), if any: Kahn's algorithm, then a walk among the nodes it
    /// could not order (each has a predecessor among them).
    fn find_cycle(&self) -> Option<Vec<usize>> {
        let n = self.n;
        let mut indeg = vec![0u32; n];
        for &b in &self.adj {
            indeg[b as usize] += 1;
        }
        let mut stack: Vec<usize> = (0..n).filter(|&i| indeg[i] == 0).collect();
        let mut done = 0;
        while let Some(a) = stack.pop() {
            done += 1;
            for &b in self.succ(a) {
                indeg[b as usize] -= 1;
                if indeg[b as usize] == 0 {
                    stack.push(b as usize);
                }
            }
        }
        if done == n {
            return None;
        }
        // Every leftover node has a leftover predecessor; walk predecessors until one
        // repeats.
        let mut pred = vec![usize::MAX; n];
        for a in 0..n {
            for &b in self.succ(a) {
                if indeg[a] > 0 && indeg[b as usize] > 0 {
                    pred[b as usize] = a;
                }
            }
        }
        let start = (0..n).find(|&i| indeg[i] > 0)?;
        let mut seen = vec![usize::MAX; n];
        let mut path = Vec::new();
        let mut x = start;
        while seen[x] == usize::MAX {
            seen[x] = path.len();
            path.push(x);
            x = pred[x];
        }
        let mut cycle = path.split_off(seen[x]);
        cycle.reverse();
        Some(cycle)
    }

    /// The ops of a cycle (issue steps left out) as rank ops.
    fn name(&self, cycle: &[usize], at: &impl Fn(usize, OpId) -> RankOp) -> Vec<RankOp> {
        cycle
            .iter()
            .filter_map(|&x| {
                let r = self.base.partition_point(|&b| b <= x) - 1;
                let i = x - self.base[r];
                (i < self.ops[r]).then(|| at(r, OpId(i as u32)))
            })
            .collect()
    }
}
