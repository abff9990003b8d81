//! Data that flows between regions through host memory, for the region view's edge
//! labels: the bytes a region reads from host memory whose last writer, in program
//! order, is another region.
//!
//! Host memory is written by D2H copies and by host tasks' written sections, and read by
//! H2D copies, host tasks' read sections and the end of the program (which reads every
//! buffer). Op ids are program order (see [`crate::lower::OpGraph`]), so one pass in id
//! order with the last writer of each element range gives, for every read, who wrote
//! what it reads. Elements that no op wrote (the program's initial contents) flow from
//! no region.

use crate::lower::{OpGraph, OpKind, RegionId};
use crate::model::Section;
use std::collections::BTreeMap;

/// Bytes flowing through host memory: `(writer region, reader region) → bytes`, for
/// distinct regions.
///
/// Complexity: `O((V + P) log P)` for `V` ops and `P` live written pieces, plus the
/// pieces each read overlaps.
pub(super) fn host_flow(graph: &OpGraph) -> BTreeMap<(RegionId, RegionId), u64> {
    // Per buffer: disjoint written pieces `lo → (hi, writer region)`.
    let mut last: Vec<BTreeMap<u64, (u64, RegionId)>> = vec![BTreeMap::new(); graph.buffers.len()];
    let mut flow: BTreeMap<(RegionId, RegionId), u64> = BTreeMap::new();
    let whole: Vec<Section> = (graph.buffers.iter().enumerate())
        .map(|(i, b)| Section::new(crate::model::BufferId(i as u32), 0, b.len))
        .collect();
    for op in &graph.ops {
        let (reads, writes): (&[Section], &[Section]) = match &op.kind {
            OpKind::H2D { section, .. } => (std::slice::from_ref(section), &[]),
            OpKind::D2H { section, .. } => (&[], std::slice::from_ref(section)),
            OpKind::HostTask { reads, writes, .. } => (reads, writes),
            OpKind::End => (&whole, &[]),
            _ => continue,
        };
        for s in reads {
            let (Some(pieces), Some(b)) =
                (last.get(s.buf.index()), graph.buffers.get(s.buf.index()))
            else {
                continue;
            };
            for (lo, hi, writer) in overlapping(pieces, s.lo, s.end()) {
                if writer != op.region {
                    *flow.entry((writer, op.region)).or_default() += (hi - lo) * b.ty.size_bytes();
                }
            }
        }
        for s in writes {
            if let Some(pieces) = last.get_mut(s.buf.index()) {
                write(pieces, s.lo, s.end(), op.region);
            }
        }
    }
    flow
}

/// The parts of pieces inside `[lo, hi)`, as `(lo, hi, writer)`.
fn overlapping(
    pieces: &BTreeMap<u64, (u64, RegionId)>,
    lo: u64,
    hi: u64,
) -> impl Iterator<Item = (u64, u64, RegionId)> + '_ {
    // Pieces are disjoint: the one starting at or before `lo`, then those inside.
    let first = pieces
        .range(..=lo)
        .next_back()
        .map(|(&l, _)| l)
        .unwrap_or(lo);
    pieces
        .range(first..hi)
        .map(move |(&l, &(h, w))| (l.max(lo), h.min(hi), w))
        .filter(|(l, h, _)| l < h)
}

/// Records `writer` as the last writer of `[lo, hi)`.
fn write(pieces: &mut BTreeMap<u64, (u64, RegionId)>, lo: u64, hi: u64, writer: RegionId) {
    if lo >= hi {
        return;
    }
    let hit: Vec<(u64, u64, RegionId)> = {
        let first = pieces
            .range(..=lo)
            .next_back()
            .map(|(&l, _)| l)
            .unwrap_or(lo);
        (pieces.range(first..hi))
            .map(|(&l, &(h, w))| (l, h, w))
            .filter(|&(_, h, _)| h > lo)
            .collect()
    };
    for (l, h, w) in hit {
        pieces.remove(&l);
        if l < lo {
            pieces.insert(l, (lo, w));
        }
        if hi < h {
            pieces.insert(hi, (h, w));
        }
    }
    pieces.insert(lo, (hi, writer));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_writes_cut_earlier_pieces() {
        let mut p = BTreeMap::new();
        write(&mut p, 0, 100, RegionId(0));
        write(&mut p, 20, 40, RegionId(1));
        write(&mut p, 90, 120, RegionId(2));
        let got: Vec<_> = overlapping(&p, 10, 95).collect();
        assert_eq!(
            got,
            [
                (10, 20, RegionId(0)),
                (20, 40, RegionId(1)),
                (40, 90, RegionId(0)),
                (90, 95, RegionId(2)),
            ]
        );
        write(&mut p, 0, 200, RegionId(3));
        assert_eq!(p.len(), 1);
        assert_eq!(overlapping(&p, 150, 150).count(), 0);
    }
}
