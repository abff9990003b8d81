//! Prefetch (issue 28 point 2: "H2D may be prefetched ahead of need on a copy stream when
//! the cap allows"): which H2D copies the schedule issues ahead of need, on a copy
//! stream of their device ([`super::OpGraph::prefetches`]; the placement is
//! `schedule/prefetch.rs`).
//!
//! # Which copies
//!
//! An H2D is prefetched when (1) it fills storage allocated in its own region (the
//! storage's first fill: its `Alloc` moves to the copy stream with it), (2) kernels of at
//! least two regions use that storage (a kept copy that transfer elision shares between
//! regions, `lower/elide.rs`: the blocked matmul's A and B tiles, a tiled Cholesky's
//! tiles), (3) nothing of its own region comes before it or its `Alloc` (no
//! write-back, eviction or other op of the region is a predecessor), so it can start
//! before its region does, and (4) its `Alloc` waits for no `Free`: no `Free` is among
//! its predecessors (the cap has headroom for it: it is paid from the cap's pool, not by
//! a memory edge from a `Free`, `lower/cap.rs`; nor is it ordered after a free for
//! another reason). A copy that waits for a `Free` on a compute stream would hold back
//! every copy behind it on the in-order copy stream; it stays in its region. Such a copy, left in its region, waits on its region's stream
//! behind whatever that stream ran first, and every other region that reads the storage
//! waits for it there: with kept tiles read from several streams, each consumer waits on
//! a copy queued deep inside another compute stream. On a copy stream the copies run in
//! first-use order (op order), apart from compute.
//!
//! # When it may start
//!
//! The schedule issues a prefetched op as soon as its predecessors allow
//! (`schedule::sync::issue_order`): the H2D's predecessors are the last writers of its
//! host bytes (so it starts once they are final: nothing writes them between its start
//! and its use, which the op graph's edges prove) and its `Alloc`'s are the memory edges
//! of the cap (none, by rule (4)), so it starts only once its bytes are final and never
//! waits for room. Nothing in the graph changes: the verifier's exact peak is over every
//! state any execution of the graph can reach (`verify/peak.rs`), so it bounds the
//! prefetched schedule as any other, and its values are proven the same way.
//!
//! # When
//!
//! [`super::LowerOptions::prefetch`]: by default only under a device memory cap that
//! binds ([`cap_binds`]: the lowering evicted a kept copy for it, or allocs wait for
//! frees to make their room; `Prefetch::CapBinds`, with the H200 figures that set the
//! rule); `Prefetch::UnderCap` under any cap (moving an `Alloc`
//! earlier lets a real device hold more at once and only the cap bounds that);
//! `Prefetch::On` also without a cap, `Prefetch::Off` never.
//!
//! Complexity: `O(V + A)` for `V` ops (kernel arguments included) and `A` allocations.

use super::{AllocId, KernelArg, OpGraph, OpId, OpKind};

/// Whether the cap of `g` binds: the lowering evicted a kept copy
/// ([`OpGraph::evictions`]), or the allocations of one device add up to more than the cap
/// over the program, so the cap's claims (`lower/cap.rs`) have spent its pool and allocs
/// wait for frees (memory edges). `O(A)` for `A` allocations.
pub(super) fn cap_binds(g: &OpGraph) -> bool {
    let Some(cap) = g.device_memory else {
        return false;
    };
    let mut total = vec![0u64; g.devices.max(1) as usize];
    for a in &g.allocs {
        if let Some(t) = total.get_mut(a.device as usize) {
            *t = t.saturating_add(a.bytes);
        }
    }
    !g.evictions.is_empty() || total.iter().any(|&t| t > cap)
}

/// Fills [`OpGraph::prefetches`] with the H2D ops the module docs describe, ascending.
pub(super) fn select(g: &mut OpGraph) {
    const NONE: u32 = u32::MAX;
    let n = g.allocs.len();
    // Per allocation: its Alloc op, the first kernel region using it, whether a second.
    let mut alloc_op = vec![NONE; n];
    let mut first_region = vec![NONE; n];
    let mut shared = vec![false; n];
    for id in g.op_ids() {
        let op = g.op(id);
        match &op.kind {
            OpKind::Alloc { alloc } => alloc_op[alloc.index()] = id.0,
            OpKind::Kernel(k) => {
                for arg in &k.args {
                    if let KernelArg::Device { alloc, .. } = arg {
                        let a = alloc.index();
                        match first_region[a] {
                            NONE => first_region[a] = op.region.0,
                            r if r != op.region.0 => shared[a] = true,
                            _ => {}
                        }
                    }
                }
            }
            _ => {}
        }
    }
    let outside = |g: &OpGraph, id: OpId, alloc_id: Option<OpId>| {
        let region = g.op(id).region;
        g.preds(id)
            .iter()
            .all(|&p| Some(p) == alloc_id || g.op(p).region != region)
    };
    let mut out = Vec::new();
    for id in g.op_ids() {
        let op = g.op(id);
        let OpKind::H2D { alloc, .. } = op.kind else {
            continue;
        };
        let a = alloc.index();
        if !shared[a] || alloc_op[a] == NONE {
            continue;
        }
        let alloc_id = OpId(alloc_op[a]);
        if g.op(alloc_id).region != op.region || g.region_of(id).kind.is_host() {
            continue;
        }
        // Headroom: the Alloc waits for no Free (rule (4) of the module docs).
        let headroom = !g
            .preds(alloc_id)
            .iter()
            .any(|&p| matches!(g.op(p).kind, OpKind::Free { .. }));
        if headroom && outside(g, id, Some(alloc_id)) && outside(g, alloc_id, None) {
            out.push(id);
        }
    }
    g.prefetches = out;
}

impl OpGraph {
    /// The ops a schedule puts on its devices' copy streams: every H2D of
    /// [`OpGraph::prefetches`] and the `Alloc` of its storage, ascending. Empty when
    /// nothing is prefetched. `O(V)` (`O(1)` when nothing is).
    pub fn prefetch_ops(&self) -> Vec<OpId> {
        if self.prefetches.is_empty() {
            return Vec::new();
        }
        let mut allocs: Vec<AllocId> = self
            .prefetches
            .iter()
            .filter_map(|&h| match self.op(h).kind {
                OpKind::H2D { alloc, .. } => Some(alloc),
                _ => None,
            })
            .collect();
        allocs.sort_unstable();
        allocs.dedup();
        let mut out: Vec<OpId> = self
            .op_ids()
            .filter(|&o| {
                matches!(self.op(o).kind, OpKind::Alloc { alloc } if allocs.binary_search(&alloc).is_ok())
            })
            .chain(self.prefetches.iter().copied())
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// [`OpGraph::prefetch_ops`] as a mask by op index (empty when nothing is
    /// prefetched).
    pub(crate) fn prefetch_mask(&self) -> Vec<bool> {
        let ops = self.prefetch_ops();
        if ops.is_empty() {
            return Vec::new();
        }
        let mut mask = vec![false; self.ops.len()];
        for o in ops {
            mask[o.index()] = true;
        }
        mask
    }
}
