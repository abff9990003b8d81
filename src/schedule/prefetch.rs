//! Copy streams for prefetched copies ([`crate::lower::OpGraph::prefetches`];
//! `lower/prefetch.rs` says which): after the colouring, every device that has
//! prefetched ops gets one more stream, its *copy stream*, the last of its pool, and
//! those ops ([`crate::lower::OpGraph::prefetch_ops`]: each prefetched H2D and the
//! `Alloc` of its storage) move there. The other ops of their regions stay where the
//! colouring put them; the sync pass joins the two with events where an edge needs one,
//! and issues the prefetched ops as soon as they are ready (`sync::issue_order`). So a
//! pool of `--streams 4` has `s0`-`s3` for regions and `s4` for prefetched copies
//! (device `d`: `d·5 + 4`), and the schedule's header says `pool 5`.
//!
//! At [`super::MAX_STREAMS_PER_DEVICE`] streams the pool cannot grow: the last stream of
//! each pool is the copy stream then, shared with the regions coloured onto it.
//!
//! Complexity: `O(V + S)` for `V` ops and `S` streams, `O(1)` without prefetches.

use super::{StreamAssignment, StreamId, StreamInfo, MAX_STREAMS_PER_DEVICE};
use crate::lower::OpGraph;

/// Moves the prefetched ops of `graph` to their devices' copy streams (module docs).
pub(super) fn place(graph: &OpGraph, a: &mut StreamAssignment) {
    let ops = graph.prefetch_ops();
    if ops.is_empty() {
        return;
    }
    let pool = grow_pools(a);
    for o in ops {
        let device = graph.op(o).device;
        a.op_stream[o.index()] = Some(StreamId(device * pool + pool - 1));
    }
}

/// Adds one stream at the end of every device's pool (up to
/// [`MAX_STREAMS_PER_DEVICE`]), renumbering the assigned streams so each keeps its
/// device and index in the pool, and returns the new pool size: the copy stream here,
/// the high-priority stream in `priority.rs`. Every stream's [`StreamInfo`] is rebuilt
/// with `high_priority: false`.
pub(super) fn grow_pools(a: &mut StreamAssignment) -> u32 {
    let old = a.pool;
    let pool = (old + 1).min(MAX_STREAMS_PER_DEVICE);
    if pool != old {
        let devices = a.streams.len() as u32 / old;
        let renumber = |s: StreamId| StreamId(s.0 / old * pool + s.0 % old);
        for s in a.op_stream.iter_mut().flatten() {
            *s = renumber(*s);
        }
        a.streams = (0..devices)
            .flat_map(|d| {
                (0..pool).map(move |_| StreamInfo {
                    device: d,
                    high_priority: false,
                })
            })
            .collect();
        a.pool = pool;
    }
    pool
}
