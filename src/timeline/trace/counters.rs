//! Bytes in flight per copy direction over a run, from the measured start and end of its
//! copies.

use crate::exec::Report;
use crate::lower::{OpGraph, OpKind};

/// One sample: from `ts_us` on, `h2d` bytes of host → device copies and `d2h` bytes of
/// device → host copies were in flight.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Sample {
    pub ts_us: f64,
    pub h2d: u64,
    pub d2h: u64,
}

/// The samples of `report` (a run of `graph`) in time order, one per instant at which a
/// timed copy started or ended: each copy adds its bytes at its `start_us` and removes
/// them at its `end_us`. All changes at one instant make one sample, so a value is never
/// negative and the last one is 0 in both directions. Empty when no copy was timed.
///
/// Complexity: `O(n log n)` for `n` timed copies.
pub(super) fn bytes_in_flight(graph: &OpGraph, report: &Report) -> Vec<Sample> {
    // (instant, change of H2D bytes, change of D2H bytes)
    let mut edges: Vec<(f64, i128, i128)> = Vec::new();
    for t in report.ops.iter().filter(|t| t.timed) {
        let Some(op) = graph.ops.get(t.op.index()) else {
            continue;
        };
        let bytes = i128::from(graph.op_bytes(t.op));
        let (start, end) = (t.start_us, t.end_us.max(t.start_us));
        match op.kind {
            OpKind::H2D { .. } => edges.extend([(start, bytes, 0), (end, -bytes, 0)]),
            OpKind::D2H { .. } => edges.extend([(start, 0, bytes), (end, 0, -bytes)]),
            _ => {}
        }
    }
    edges.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<Sample> = Vec::new();
    let (mut h2d, mut d2h) = (0i128, 0i128);
    for (k, &(ts, dh, dd)) in edges.iter().enumerate() {
        h2d += dh;
        d2h += dd;
        if edges.get(k + 1).is_some_and(|next| next.0 == ts) {
            continue;
        }
        out.push(Sample {
            ts_us: ts,
            h2d: h2d as u64,
            d2h: d2h as u64,
        });
    }
    out
}

/// One sample of the `bytes moved` track: from `ts_us` on, the timed copies that had
/// ended had moved `h2d`, `d2h` and `peer` bytes in all.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Moved {
    pub ts_us: f64,
    pub h2d: u64,
    pub d2h: u64,
    pub peer: u64,
}

/// The running totals of the timed copies of `report` (a run of `graph`), one sample per
/// instant at which one ended (all ends at one instant make one sample), in time order;
/// the last sample is the run's copy bytes (the graph's [`crate::lower::BytesMoved`]
/// `h2d`, `d2h`, `peer` when every copy was timed). Empty when no copy was timed.
///
/// Complexity: `O(n log n)` for `n` timed copies.
pub(super) fn bytes_moved(graph: &OpGraph, report: &Report) -> Vec<Moved> {
    let mut ends: Vec<(f64, usize, u64)> = Vec::new();
    for t in report.ops.iter().filter(|t| t.timed) {
        let Some(op) = graph.ops.get(t.op.index()) else {
            continue;
        };
        let dir = match op.kind {
            OpKind::H2D { .. } => 0,
            OpKind::D2H { .. } => 1,
            OpKind::PeerCopy { .. } => 2,
            _ => continue,
        };
        ends.push((t.end_us.max(t.start_us), dir, graph.op_bytes(t.op)));
    }
    ends.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<Moved> = Vec::new();
    let mut sum = [0u64; 3];
    for (k, &(ts, dir, bytes)) in ends.iter().enumerate() {
        sum[dir] += bytes;
        if ends.get(k + 1).is_some_and(|next| next.0 == ts) {
            continue;
        }
        out.push(Moved {
            ts_us: ts,
            h2d: sum[0],
            d2h: sum[1],
            peer: sum[2],
        });
    }
    out
}
