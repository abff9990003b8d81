//! Dependency tracking over element ranges: read-after-write, write-after-read and
//! write-after-write edges in program order.
//!
//! A *resource* is one address space: a buffer's host copy, a buffer's `depend` name, or
//! one device allocation ([design notes](crate::design) "Dependencies": per device *allocation*, not per
//! buffer — two allocations of the same host section, one freed before the other is
//! made, are independent; reusing the freed memory safely is the allocator's job, see the
//! plugin contract). Ranges are in the buffer's element indices for all three. Per
//! resource the tracker keeps the latest writer of each element range (disjoint pieces)
//! and the readers since those writes.
//!
//! Complexity: pieces live in ordered maps, so an access costs `O(log n + k)` for `n`
//! live pieces of its buffer and `k` pieces it overlaps (each of which becomes an edge or
//! is cut away), plus, for writes, readers that start within the longest reader's length
//! before it. Readers are dropped when a later write covers them. With every access
//! producing its edges, lowering is `O((V + E) log V)`.

use super::{AllocId, OpId};
use crate::model::Construct;
use std::collections::{BTreeMap, BTreeSet};

/// Ranges `[lo, hi)` with the op that touched them, ordered by `(lo, op)`.
///
/// `disjoint` sets keep pieces that never overlap except pieces of one range recorded
/// together (a construct's several ops); overlap queries then start at the last piece
/// beginning at or before `lo`. Other sets start at `lo - longest piece ever stored`.
#[derive(Clone, Debug, Default)]
struct Pieces {
    map: BTreeMap<(u64, u32), u64>,
    disjoint: bool,
    longest: u64,
}

impl Pieces {
    fn disjoint() -> Pieces {
        Pieces {
            disjoint: true,
            ..Pieces::default()
        }
    }

    /// First key an overlap query for `[lo, hi)` must look at.
    fn start(&self, lo: u64) -> (u64, u32) {
        if self.disjoint {
            match self.map.range(..=(lo, u32::MAX)).next_back() {
                Some((&(l, _), _)) => (l, 0),
                None => (0, 0),
            }
        } else {
            (lo.saturating_sub(self.longest), 0)
        }
    }

    /// Pieces overlapping `[lo, hi)` as `(lo, hi, op)`. `O(log n + k)` for `k` pieces
    /// in the scanned key range.
    fn overlapping(&self, lo: u64, hi: u64) -> impl Iterator<Item = (u64, u64, OpId)> + '_ {
        let from = self.start(lo);
        self.map
            .range(from..(hi, 0))
            .filter(move |(_, &h)| h > lo)
            .map(|(&(l, op), &h)| (l, h, OpId(op)))
    }

    fn insert(&mut self, lo: u64, hi: u64, op: OpId) {
        self.longest = self.longest.max(hi - lo);
        // One op touching two ranges from the same start: keep their union.
        let h = self.map.entry((lo, op.0)).or_insert(hi);
        *h = (*h).max(hi);
    }

    /// Removes `[lo, hi)` from every piece, keeping the parts outside it.
    fn cut(&mut self, lo: u64, hi: u64) {
        let hit: Vec<(u64, u64, OpId)> = self.overlapping(lo, hi).collect();
        for (l, h, op) in hit {
            self.map.remove(&(l, op.0));
            if l < lo {
                self.map.insert((l, op.0), lo);
            }
            if hi < h {
                self.map.insert((hi, op.0), h);
            }
        }
    }
}

#[derive(Clone, Debug)]
struct Track {
    writers: Pieces,
    readers: Pieces,
}

impl Default for Track {
    fn default() -> Track {
        Track {
            writers: Pieces::disjoint(),
            readers: Pieces::default(),
        }
    }
}

/// Which address space an access touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Space {
    /// The buffer's host copy.
    Host,
    /// One device allocation (its storage on one device, from its `Alloc` to its `Free`).
    Alloc(AllocId),
    /// The `depend` clause namespace (OpenMP 5.2 §15.9.5: dependences between tasks by
    /// storage location, independent of data motion).
    Depend,
}

/// Range-based RAW / WAR / WAW tracker for all resources of a program.
#[derive(Debug)]
pub(crate) struct DepTracker {
    buffers: usize,
    /// Host and depend tracks of every buffer, then one track per allocation (grown as
    /// allocations appear).
    tracks: Vec<Track>,
}

impl DepTracker {
    pub(crate) fn new(buffers: usize) -> DepTracker {
        DepTracker {
            buffers,
            tracks: vec![Track::default(); buffers * 2],
        }
    }

    /// Index of a resource's track; an allocation's `buf` is ignored (one allocation
    /// holds one buffer's section).
    fn key(&mut self, space: Space, buf: usize) -> usize {
        match space {
            Space::Host => buf,
            Space::Depend => self.buffers + buf,
            Space::Alloc(a) => {
                let k = self.buffers * 2 + a.index();
                if k >= self.tracks.len() {
                    self.tracks.resize_with(k + 1, Track::default);
                }
                k
            }
        }
    }

    /// Forgets an allocation once its `Free` is recorded: nothing touches it afterwards
    /// (a later mapping of the same section is a new allocation), so its pieces only
    /// cost memory.
    pub(crate) fn retire(&mut self, a: AllocId) {
        let k = self.key(Space::Alloc(a), 0);
        self.tracks[k] = Track::default();
    }

    /// Records a read of elements `[lo, lo+len)` by `op`; pushes the ops it must follow
    /// (the writers of those elements) onto `preds`.
    pub(crate) fn read(
        &mut self,
        space: Space,
        buf: usize,
        lo: u64,
        len: u64,
        op: OpId,
        preds: &mut Vec<OpId>,
    ) {
        if len == 0 {
            return;
        }
        let hi = lo + len;
        let k = self.key(space, buf);
        let t = &mut self.tracks[k];
        preds.extend(
            t.writers
                .overlapping(lo, hi)
                .map(|p| p.2)
                .filter(|w| *w != op),
        );
        t.readers.insert(lo, hi, op);
    }

    /// Pushes the ops an access of `[lo, lo+len)` would have to follow, without recording
    /// it (for `depend`, whose access is recorded once the construct's ops exist).
    pub(crate) fn query(
        &mut self,
        space: Space,
        buf: usize,
        lo: u64,
        len: u64,
        write: bool,
        preds: &mut Vec<OpId>,
    ) {
        if len == 0 {
            return;
        }
        let hi = lo + len;
        let k = self.key(space, buf);
        let t = &self.tracks[k];
        preds.extend(t.writers.overlapping(lo, hi).map(|p| p.2));
        if write {
            preds.extend(t.readers.overlapping(lo, hi).map(|p| p.2));
        }
    }

    /// Records a write of `[lo, lo+len)` by all of `ops` together (the ops that stand
    /// for one construct), without collecting predecessors.
    pub(crate) fn record_writes(
        &mut self,
        space: Space,
        buf: usize,
        lo: u64,
        len: u64,
        ops: &[OpId],
    ) {
        if len == 0 {
            return;
        }
        let hi = lo + len;
        let k = self.key(space, buf);
        let t = &mut self.tracks[k];
        t.writers.cut(lo, hi);
        t.readers.cut(lo, hi);
        for &op in ops {
            t.writers.insert(lo, hi, op);
        }
    }

    /// Records a write of `[lo, lo+len)` by `op`; pushes the writers and readers it must
    /// follow onto `preds`.
    pub(crate) fn write(
        &mut self,
        space: Space,
        buf: usize,
        lo: u64,
        len: u64,
        op: OpId,
        preds: &mut Vec<OpId>,
    ) {
        if len == 0 {
            return;
        }
        let hi = lo + len;
        let k = self.key(space, buf);
        let t = &mut self.tracks[k];
        preds.extend(
            t.writers
                .overlapping(lo, hi)
                .chain(t.readers.overlapping(lo, hi))
                .map(|p| p.2)
                .filter(|w| *w != op),
        );
        t.writers.cut(lo, hi);
        t.readers.cut(lo, hi);
        t.writers.insert(lo, hi, op);
    }
}

/// Every name an `after` clause mentions, at any depth (the names whose constructs'
/// ops the lowering must remember).
pub(super) fn referenced_names(body: &[Construct]) -> BTreeSet<String> {
    fn walk(body: &[Construct], out: &mut BTreeSet<String>) {
        for c in body {
            let after: &[String] = match c {
                Construct::Target(t) => &t.after,
                Construct::EnterData(d) | Construct::ExitData(d) | Construct::Update(d) => &d.after,
                Construct::HostTask(h) => &h.after,
                Construct::TargetData(d) => {
                    walk(&d.body, out);
                    &[]
                }
                Construct::Taskgraph(t) => {
                    walk(&t.body, out);
                    &[]
                }
                Construct::Taskwait { .. } => &[],
            };
            out.extend(after.iter().cloned());
        }
    }
    let mut out = BTreeSet::new();
    walk(body, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(i: u32) -> OpId {
        OpId(i)
    }

    #[test]
    fn raw_war_waw_on_overlapping_ranges() {
        let mut t = DepTracker::new(1);
        let mut p = Vec::new();
        t.write(Space::Host, 0, 0, 10, op(0), &mut p);
        assert!(p.is_empty());
        t.read(Space::Host, 0, 5, 5, op(1), &mut p);
        assert_eq!(p, [op(0)]); // RAW
        p.clear();
        t.read(Space::Host, 0, 0, 2, op(2), &mut p);
        assert_eq!(p, [op(0)]);
        p.clear();
        t.write(Space::Host, 0, 4, 2, op(3), &mut p);
        p.sort();
        p.dedup();
        assert_eq!(p, [op(0), op(1)]); // WAW + WAR, not the reader of [0,2)
        p.clear();
        t.read(Space::Host, 0, 0, 10, op(4), &mut p);
        p.sort();
        p.dedup();
        assert_eq!(p, [op(0), op(3)]);
    }

    #[test]
    fn spaces_are_independent() {
        let mut t = DepTracker::new(2);
        let mut p = Vec::new();
        let (a0, a1) = (Space::Alloc(AllocId(0)), Space::Alloc(AllocId(1)));
        t.write(a0, 0, 0, 4, op(0), &mut p);
        // A second allocation of the same host section is another resource.
        t.read(a1, 0, 0, 4, op(1), &mut p);
        t.read(Space::Host, 0, 0, 4, op(2), &mut p);
        t.read(Space::Depend, 0, 0, 4, op(3), &mut p);
        t.read(Space::Host, 1, 0, 4, op(4), &mut p);
        assert!(p.is_empty());
        t.read(a0, 0, 3, 1, op(5), &mut p);
        assert_eq!(p, [op(0)]);
        // Allocations far apart in id grow the tracks.
        t.write(Space::Alloc(AllocId(1000)), 0, 0, 4, op(6), &mut p);
        assert_eq!(p, [op(0)]);
    }

    #[test]
    fn one_op_reading_two_ranges_from_one_start_keeps_both() {
        let mut t = DepTracker::new(1);
        let mut p = Vec::new();
        t.read(Space::Host, 0, 0, 10, op(0), &mut p);
        t.read(Space::Host, 0, 0, 5, op(0), &mut p);
        t.write(Space::Host, 0, 7, 1, op(1), &mut p);
        assert_eq!(p, [op(0)]);
    }

    #[test]
    fn many_disjoint_pieces_only_overlaps_become_edges() {
        let mut t = DepTracker::new(1);
        let mut p = Vec::new();
        for i in 0..1000u32 {
            t.write(Space::Host, 0, 2 * i as u64, 1, op(i), &mut p);
            t.read(Space::Host, 0, 2 * i as u64 + 1, 1, op(i), &mut p);
        }
        assert!(p.is_empty());
        t.write(Space::Host, 0, 999, 3, op(5000), &mut p);
        p.sort();
        p.dedup();
        // [999, 1002): reader of 999 (op 499); writer of 1000 and reader of 1001 (op 500).
        assert_eq!(p, [op(499), op(500)]);
        p.clear();
        t.read(Space::Host, 0, 998, 5, op(5001), &mut p);
        p.sort();
        // Writers of 998 (op 499), [999, 1002) (op 5000) and 1002 (op 501).
        assert_eq!(p, [op(499), op(501), op(5000)]);
    }

    #[test]
    fn zero_length_accesses_add_nothing() {
        let mut t = DepTracker::new(1);
        let mut p = Vec::new();
        t.write(Space::Host, 0, 0, 4, op(0), &mut p);
        t.read(Space::Host, 0, 2, 0, op(1), &mut p);
        t.write(Space::Host, 0, 2, 0, op(2), &mut p);
        assert!(p.is_empty());
    }
}
