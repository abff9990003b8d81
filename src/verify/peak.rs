//! The device memory cap, proven ([`crate::lower::OpGraph::device_memory`]; issue 28
//! point 2): no state any execution can reach holds more live device bytes on a device
//! than the cap.
//!
//! # What is reasoned over
//!
//! The op graph, not the schedule's own happens-before: the edge check (`order.rs`)
//! proves the schedule orders every graph edge, so every state an execution of the
//! schedule reaches (the set of ops complete, or issued: a stream op is issued after
//! what it waits on is recorded) is closed under graph predecessors, a *down-set* of the
//! graph. The schedule's events, stream order and host waits only order more, so they
//! remove states and can never add one; the peak over the graph's down-sets bounds every
//! schedule of it. A state's live bytes on device `d` are `Σ bytes` of its `Alloc`s on
//! `d` minus `Σ bytes` of its `Free`s on `d`.
//!
//! # The cheap proof: claims
//!
//! Each `Alloc` of `b` bytes is paid, in op order, from a pool of `cap` bytes first, then
//! from the `Free`s among its *direct* predecessors (ascending), each free's bytes paid
//! out at most once. If every alloc is paid, then in every down-set the allocs' bytes are
//! at most `cap` plus the bytes of frees in it (each free that paid is a predecessor of
//! what it paid for), so the live bytes are ≤ cap. This is the claim structure the
//! lowering builds (`lower/cap.rs`), checked from the graph alone, `O(V + E)`.
//!
//! # The exact peak
//!
//! Where the claims do not prove it (a hand-made or mutated graph), the peak is computed
//! exactly ([`peak_live_bytes`]): the heaviest down-set is a maximum-weight closure
//! (weight `+b` for an alloc, `−b` for a free; closed under predecessors), which is
//! `Σ alloc bytes − max flow` in the network source → alloc (capacity `b`), op →
//! predecessor (unbounded), free → sink (`b`), its down-set the ops the source reaches in
//! the residual network (Picard 1976, "Maximal closure of a graph and applications to
//! combinatorial problems"). Max flow by Dinic's algorithm (Dinic 1970), `O(V²E)` in the
//! worst case, far less on these unit-depth-from-source networks.

use super::Violation;
use crate::lower::{OpGraph, OpId, OpKind};

/// The heaviest state of one device ([`peak_live_bytes`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeakBytes {
    /// The most live device bytes any down-set of the graph holds.
    pub bytes: u64,
    /// The `Alloc` ops live in a heaviest down-set (in it, their `Free` not), ascending.
    pub live: Vec<OpId>,
}

/// The most live device bytes on `device` over every state an execution of `graph` can
/// reach (every down-set of the op graph; module docs), exactly, with the allocs live in
/// such a state. `O(V²E)` worst case for `V` ops and `E` edges (Dinic); cheap checks
/// first are the caller's ([`crate::verify::verify`] does them).
pub fn peak_live_bytes(graph: &OpGraph, device: u32) -> PeakBytes {
    let n = graph.ops.len();
    let (s, t) = (n, n + 1);
    let mut net = Net::new(n + 2);
    let mut total = 0u64;
    for id in graph.op_ids() {
        let i = id.index();
        match weight(graph, id, device) {
            w if w > 0 => {
                net.edge(s, i, w as u64);
                total += w as u64;
            }
            w if w < 0 => net.edge(i, t, w.unsigned_abs() as u64),
            _ => {}
        }
        for p in graph.preds(id) {
            net.edge(i, p.index(), INF);
        }
    }
    let flow = net.max_flow(s, t);
    let side = net.reachable(s);
    let freed: std::collections::BTreeSet<u32> = graph
        .op_ids()
        .filter(|o| side[o.index()])
        .filter_map(|o| match graph.op(o).kind {
            OpKind::Free { alloc } => Some(alloc.0),
            _ => None,
        })
        .collect();
    let live = graph
        .op_ids()
        .filter(|o| side[o.index()])
        .filter(|&o| match graph.op(o).kind {
            OpKind::Alloc { alloc } => {
                graph.allocs[alloc.index()].device == device && !freed.contains(&alloc.0)
            }
            _ => false,
        })
        .collect();
    PeakBytes {
        bytes: total - flow,
        live,
    }
}

/// `+bytes` for an alloc on `device`, `−bytes` for a free there, else 0.
fn weight(graph: &OpGraph, id: OpId, device: u32) -> i128 {
    match graph.op(id).kind {
        OpKind::Alloc { alloc } | OpKind::Free { alloc }
            if graph.allocs[alloc.index()].device == device =>
        {
            let b = i128::from(graph.allocs[alloc.index()].bytes);
            match graph.op(id).kind {
                OpKind::Alloc { .. } => b,
                _ => -b,
            }
        }
        _ => 0,
    }
}

/// The devices on which the claims (module docs) do not prove live bytes ≤ `cap`.
fn unproven(graph: &OpGraph, cap: u64) -> Vec<u32> {
    let devices = graph.devices.max(1) as usize;
    let mut pool = vec![cap; devices];
    let mut failed = vec![false; devices];
    let mut left = vec![0u64; graph.ops.len()];
    for id in graph.op_ids() {
        match graph.op(id).kind {
            OpKind::Free { alloc } => left[id.index()] = graph.allocs[alloc.index()].bytes,
            OpKind::Alloc { alloc } => {
                let a = &graph.allocs[alloc.index()];
                let d = (a.device as usize).min(devices - 1);
                if failed[d] {
                    continue;
                }
                let from_pool = pool[d].min(a.bytes);
                pool[d] -= from_pool;
                let mut need = a.bytes - from_pool;
                for p in graph.preds(id) {
                    if need == 0 {
                        break;
                    }
                    let same = matches!(graph.op(*p).kind, OpKind::Free { alloc: f }
                        if graph.allocs[f.index()].device == a.device);
                    if same {
                        let t = left[p.index()].min(need);
                        left[p.index()] -= t;
                        need -= t;
                    }
                }
                failed[d] = need > 0;
            }
            _ => {}
        }
    }
    (0..devices as u32)
        .filter(|&d| failed[d as usize])
        .collect()
}

/// Proves the graph's cap ([`OpGraph::device_memory`]) on every device, pushing a
/// [`Violation::DeviceMemory`] per device whose exact peak is over it. Returns how many
/// devices needed the exact peak. `O(V + E)` when the claims prove it.
pub(super) fn prove(graph: &OpGraph, violations: &mut Vec<Violation>) -> usize {
    let Some(cap) = graph.device_memory else {
        return 0;
    };
    let todo = unproven(graph, cap);
    for &device in &todo {
        let peak = peak_live_bytes(graph, device);
        if peak.bytes > cap {
            let mut names: Vec<String> = peak
                .live
                .iter()
                .take(6)
                .map(|&o| format!("{o} ({})", graph.describe(o)))
                .collect();
            if peak.live.len() > 6 {
                names.push(format!("{} more", peak.live.len() - 6));
            }
            violations.push(Violation::DeviceMemory {
                device,
                peak: peak.bytes,
                cap,
                live: peak.live.clone(),
                detail: format!("allocs {} live at once", names.join(", ")),
            });
        }
    }
    todo.len()
}

const INF: u64 = u64::MAX / 4;

/// A flow network (Dinic's algorithm), edges in pairs (`e`, `e ^ 1` its reverse).
struct Net {
    to: Vec<usize>,
    cap: Vec<u64>,
    next: Vec<usize>,
    head: Vec<usize>,
    level: Vec<u32>,
    it: Vec<usize>,
}

const NIL: usize = usize::MAX;

impl Net {
    fn new(n: usize) -> Net {
        Net {
            to: Vec::new(),
            cap: Vec::new(),
            next: Vec::new(),
            head: vec![NIL; n],
            level: vec![0; n],
            it: vec![NIL; n],
        }
    }

    fn edge(&mut self, u: usize, v: usize, c: u64) {
        for (a, b, c) in [(u, v, c), (v, u, 0)] {
            self.to.push(b);
            self.cap.push(c);
            self.next.push(self.head[a]);
            self.head[a] = self.to.len() - 1;
        }
    }

    /// BFS levels from `s`; whether `t` is reached.
    fn levels(&mut self, s: usize, t: usize) -> bool {
        self.level.iter_mut().for_each(|l| *l = u32::MAX);
        self.level[s] = 0;
        let mut q = std::collections::VecDeque::from([s]);
        while let Some(u) = q.pop_front() {
            let mut e = self.head[u];
            while e != NIL {
                let v = self.to[e];
                if self.cap[e] > 0 && self.level[v] == u32::MAX {
                    self.level[v] = self.level[u] + 1;
                    q.push_back(v);
                }
                e = self.next[e];
            }
        }
        self.level[t] != u32::MAX
    }

    /// One augmenting path in the level graph (iterative DFS), its bottleneck pushed.
    fn augment(&mut self, s: usize, t: usize) -> u64 {
        let mut path: Vec<usize> = Vec::new();
        let mut u = s;
        loop {
            if u == t {
                let f = path.iter().map(|&e| self.cap[e]).min().unwrap_or(0);
                for &e in &path {
                    self.cap[e] -= f;
                    self.cap[e ^ 1] += f;
                }
                return f;
            }
            let mut e = self.it[u];
            while e != NIL {
                let v = self.to[e];
                if self.cap[e] > 0 && self.level[v] == self.level[u].wrapping_add(1) {
                    break;
                }
                e = self.next[e];
            }
            self.it[u] = e;
            if e != NIL {
                path.push(e);
                u = self.to[e];
                continue;
            }
            // A dead end: never enter it again in this phase.
            self.level[u] = u32::MAX;
            let Some(back) = path.pop() else {
                return 0;
            };
            u = self.to[back ^ 1];
        }
    }

    fn max_flow(&mut self, s: usize, t: usize) -> u64 {
        let mut flow = 0;
        while self.levels(s, t) {
            self.it.clone_from(&self.head);
            loop {
                let f = self.augment(s, t);
                if f == 0 {
                    break;
                }
                flow += f;
            }
        }
        flow
    }

    /// Nodes reachable from `s` in the residual network.
    fn reachable(&self, s: usize) -> Vec<bool> {
        let mut seen = vec![false; self.head.len()];
        seen[s] = true;
        let mut stack = vec![s];
        while let Some(u) = stack.pop() {
            let mut e = self.head[u];
            while e != NIL {
                let v = self.to[e];
                if self.cap[e] > 0 && !seen[v] {
                    seen[v] = true;
                    stack.push(v);
                }
                e = self.next[e];
            }
        }
        seen
    }
}
