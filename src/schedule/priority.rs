//! High-priority streams for regions with OpenMP's `priority(n)` clause (OpenMP 5.2
//! §12.4 "priority Clause": a non-negative hint, higher runs first, default 0;
//! [`crate::model::TargetRegion::priority`]).
//!
//! After the colouring and the copy streams (`prefetch.rs`), every device that has a
//! device region with `priority > 0` gets one more stream, its *high-priority stream*,
//! the last of its pool ([`super::StreamInfo::high_priority`]), and every op of those
//! regions moves there, except their prefetched copies, which stay on the copy stream.
//! The sync pass then orders the moved regions against the others with events, as for
//! any cross-stream edge, and the verifier proves the result like any other schedule.
//! So `--streams 4` with priority regions has `s0`-`s3` for the other regions and `s4`
//! (device `d`: `d·5 + 4`) for the priority ones, or `s5` after a copy stream `s4`; the
//! header says `pool 5` (or 6). A program without priorities gets exactly the schedule
//! it got before: this pass changes nothing then.
//!
//! A device runs its high-priority stream's work first where both are ready (CUDA's
//! block scheduler prefers the stream made with the greatest priority of
//! `cuCtxGetStreamPriorityRange`: MAGMA, SLATE and PaRSEC put a factorization's panel
//! there), so a chain of panel regions is not starved by a GPU full of updates. All
//! priority levels above 0 share the one stream (it is in-order: two priority regions
//! never overlap each other), and results never depend on it, as for a hint.
//!
//! At [`super::MAX_STREAMS_PER_DEVICE`] streams the pool cannot grow: the last stream of
//! each pool (shared with the regions coloured onto it, and with prefetched copies where
//! there are any) is the high-priority stream then.
//!
//! Complexity: `O(V + S)` for `V` ops and `S` streams; `O(R)` for `R` regions when no
//! region has a priority.

use super::{StreamAssignment, StreamId};
use crate::lower::{OpGraph, OpId};

/// True for a region this pass moves: a device region with ops and `priority > 0`.
fn prioritized(graph: &OpGraph, r: usize) -> bool {
    let region = &graph.regions[r];
    region.priority > 0 && !region.kind.is_host() && !region.ops.is_empty()
}

/// Moves the ops of `graph`'s priority regions to their devices' high-priority streams
/// (module docs).
pub(super) fn place(graph: &OpGraph, a: &mut StreamAssignment) {
    if !(0..graph.regions.len()).any(|r| prioritized(graph, r)) {
        return;
    }
    let devices = a.streams.len() as u32 / a.pool;
    let pool = super::prefetch::grow_pools(a);
    let prefetched = graph.prefetch_ops(); // ascending
    let mut used = vec![false; devices as usize];
    for r in (0..graph.regions.len()).filter(|&r| prioritized(graph, r)) {
        for o in graph.regions[r].ops.clone() {
            if prefetched.binary_search(&OpId(o)).is_ok() {
                continue;
            }
            let Some(s) = a.op_stream[o as usize] else {
                continue;
            };
            let device = s.0 / pool;
            used[device as usize] = true;
            a.op_stream[o as usize] = Some(StreamId(device * pool + pool - 1));
        }
    }
    for (d, _) in used.iter().enumerate().filter(|(_, u)| **u) {
        a.streams[d * pool as usize + pool as usize - 1].high_priority = true;
    }
}
