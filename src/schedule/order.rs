//! When and where the sync pass ([`super::sync`]) issues each op: the issue order (a
//! topological order that puts device work first) and the host lane of each host op.

use super::StreamAssignment;
use crate::lower::{OpGraph, OpId};

/// The order ops are issued in: a topological order of `graph` that issues each device
/// op as early as its dependencies allow, ahead of host ops it does not depend on. Ready
/// ops are taken in three classes, the first non-empty first: device ops with no host
/// op among their preds (the issuing thread never blocks for them), then host ops
/// (handed to a lane: the issuing thread does not block either), then device ops that
/// depend on a host op (the issuing thread may wait for it, so only when nothing else
/// is ready); within a class prefetched ops first ([`OpGraph::prefetch_ops`], as soon as
/// they are ready), then by the placement rank of the op's region
/// ([`StreamAssignment::region_rank`]: program order, or the critical-path priority
/// order where the colouring estimated it shorter), then op id. Ranking regions, not
/// ops, keeps each region's ops together in its stream's queue: a priority by each op's
/// own longest remaining path would put a later region's 20 ms kernel ahead of an
/// earlier region's D2H on their shared in-order stream and delay the earlier region's
/// consumer by it. A graph with no host op before independent device work, placed in
/// program order, keeps its id order.
///
/// Complexity: `O((V + E) log V)`.
pub(crate) fn issue_order(graph: &OpGraph, a: &StreamAssignment) -> Vec<OpId> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let n = graph.ops.len();
    let host = |o: OpId| a.op_stream[o.index()].is_none();
    // Successors in compressed-sparse-row form (one vector, no allocation per op):
    // those of op `p` are `succ_list[succ_start[p]..succ_start[p + 1]]`, ascending.
    let mut succ_start = vec![0u32; n + 1];
    for id in graph.op_ids() {
        for &p in graph.preds(id) {
            succ_start[p.index() + 1] += 1;
        }
    }
    for i in 0..n {
        succ_start[i + 1] += succ_start[i];
    }
    let mut fill: Vec<u32> = succ_start[..n].to_vec();
    let mut succ_list = vec![OpId(0); succ_start[n] as usize];
    for id in graph.op_ids() {
        for &p in graph.preds(id) {
            succ_list[fill[p.index()] as usize] = id;
            fill[p.index()] += 1;
        }
    }
    drop(fill);
    let succs =
        |o: OpId| &succ_list[succ_start[o.index()] as usize..succ_start[o.index() + 1] as usize];
    let class = |o: OpId| match host(o) {
        true => 1usize,
        false if graph.preds(o).iter().any(|&p| host(p)) => 2,
        false => 0,
    };
    let mut missing: Vec<u32> = graph
        .op_ids()
        .map(|o| graph.preds(o).len() as u32)
        .collect();
    // Within a class: prefetched ops first (schedule/prefetch.rs), then the op's
    // region's placement rank, then the op id.
    let early = graph.prefetch_mask();
    let key = |o: OpId| {
        let r = graph.op(o).region.0 as usize;
        let rank = a.region_rank.get(r).copied().unwrap_or(r as u32);
        match early.get(o.index()) {
            Some(true) => Reverse((0, o.0)),
            _ => Reverse((rank.saturating_add(1), o.0)),
        }
    };
    let mut ready: [BinaryHeap<Reverse<(u32, u32)>>; 3] = Default::default();
    for id in graph.op_ids() {
        if missing[id.index()] == 0 {
            ready[class(id)].push(key(id));
        }
    }
    let mut out = Vec::with_capacity(n);
    while let Some(Reverse((_, i))) = ready.iter_mut().find_map(|h| h.pop()) {
        let id = OpId(i);
        out.push(id);
        for &s in succs(id) {
            missing[s.index()] -= 1;
            if missing[s.index()] == 0 {
                ready[class(s)].push(key(s));
            }
        }
    }
    out
}

/// How host ops are spread over lanes: a list schedule by the op cost model. Each host
/// op goes to the lane where it can start first, estimated as the later of the lane's
/// free time and its host preds' estimated finish (device work is not estimated here:
/// every lane waits for it alike); among equal starts, the lane of one of its host preds
/// (no [`Step::HostAwait`] needed), else the lowest. So a chain of dependent host ops
/// (a `taskwait` and the `end` after it, a host task reading another's output) stays on
/// one lane, and independent host tasks spread over the lanes. A host task that names
/// its lane ([`crate::model::HostTask::lane`]) goes there (the last lane when there are
/// fewer).
pub(super) struct LaneChoice {
    /// Estimated time each lane is free, µs.
    free: Vec<f64>,
    /// Estimated finish of each host op placed so far, µs (by op index).
    finish: Vec<f64>,
}

impl LaneChoice {
    pub(super) fn new(lanes: usize, ops: usize) -> LaneChoice {
        LaneChoice {
            free: vec![0.0; lanes],
            finish: vec![0.0; ops],
        }
    }

    /// The lane of host op `id` (`op_lane`: the lanes chosen so far). `O(L + d)`.
    pub(super) fn pick(&mut self, graph: &OpGraph, op_lane: &[u32], id: OpId) -> usize {
        let host_preds = || {
            graph
                .preds(id)
                .iter()
                .filter(|p| graph.op(**p).kind.is_host())
        };
        let ready = host_preds()
            .map(|p| self.finish[p.index()])
            .fold(0.0, f64::max);
        let start = |l: usize| self.free[l].max(ready);
        let first = (0..self.free.len())
            .map(start)
            .fold(f64::INFINITY, f64::min);
        let pinned = graph.region_of(id).lane;
        let l = match pinned {
            Some(l) => (l as usize).min(self.free.len() - 1),
            None => host_preds()
                .map(|p| op_lane[p.index()] as usize)
                .filter(|&l| l < self.free.len() && start(l) <= first)
                .min()
                .or_else(|| (0..self.free.len()).find(|&l| start(l) <= first))
                .unwrap_or(0),
        };
        let end = start(l) + crate::lower::cost::op_cost_us(graph, id);
        self.finish[id.index()] = end;
        self.free[l] = end;
        l
    }
}
