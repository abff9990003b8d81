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
//! Complexity: pieces live in ordered maps (in a short sorted vector while a set holds
//! at most 16, as most allocations' do), so an access costs `O(log n + k)` for `n`
//! live pieces of its buffer and `k` pieces it overlaps (each of which becomes an edge or
//! is cut away), plus, for writes, readers that start within the longest reader's length
//! before it. Readers are dropped when a later write covers them. With every access
//! producing its edges, lowering is `O((V + E) log V)`.

use super::{AllocId, OpId};
use crate::model::Construct;
use std::collections::{BTreeMap, BTreeSet};

/// Pieces a [`Pieces`] set holds in a sorted vector before it moves them into an
/// ordered map: most tracks (one device allocation, touched by a few ops of a few
/// regions) never get there, and a short vector costs no allocation per piece.
const SMALL: usize = 16;

/// Ranges `[lo, hi)` with the op that touched them, ordered by `(lo, op)`.
///
/// `disjoint` sets keep pieces that never overlap except pieces of one range recorded
/// together (a construct's several ops); overlap queries then start at the last piece
/// beginning at or before `lo`. Other sets start at `lo - longest piece ever stored`.
///
/// Up to [`SMALL`] pieces live in `small` (sorted by `(lo, op)`), more in `map`; both
/// answer every query alike (the same key range, in the same order).
#[derive(Clone, Debug, Default)]
struct Pieces {
    /// `(lo, op, hi)`, sorted by `(lo, op)`; empty once `big`.
    small: Vec<(u64, u32, u64)>,
    map: BTreeMap<(u64, u32), u64>,
    big: bool,
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

    /// Forgets every piece, keeping the vector's room.
    fn clear(&mut self) {
        self.small.clear();
        self.map.clear();
        self.big = false;
        self.longest = 0;
    }

    /// First key an overlap query for `[lo, hi)` must look at.
    fn start(&self, lo: u64) -> (u64, u32) {
        if self.disjoint {
            let last = match self.big {
                true => self
                    .map
                    .range(..=(lo, u32::MAX))
                    .next_back()
                    .map(|(k, _)| k.0),
                false => {
                    let i = self.small.partition_point(|&(l, _, _)| l <= lo);
                    i.checked_sub(1).map(|i| self.small[i].0)
                }
            };
            (last.unwrap_or(0), 0)
        } else {
            (lo.saturating_sub(self.longest), 0)
        }
    }

    /// Calls `f(lo, hi, op)` for the pieces overlapping `[lo, hi)`, in key order.
    /// `O(log n + k)` for `k` pieces in the scanned key range.
    fn each_overlapping(&self, lo: u64, hi: u64, mut f: impl FnMut(u64, u64, OpId)) {
        let from = self.start(lo);
        if self.big {
            for (&(l, op), &h) in self.map.range(from..(hi, 0)) {
                if h > lo {
                    f(l, h, OpId(op));
                }
            }
            return;
        }
        let i = self.small.partition_point(|&(l, op, _)| (l, op) < from);
        for &(l, op, h) in &self.small[i..] {
            if (l, op) >= (hi, 0) {
                break;
            }
            if h > lo {
                f(l, h, OpId(op));
            }
        }
    }

    /// Sets piece `(lo, op)` to end at `hi` (inserted, or its end replaced).
    fn set(&mut self, lo: u64, op: u32, hi: u64) {
        if self.big {
            self.map.insert((lo, op), hi);
            return;
        }
        match self
            .small
            .binary_search_by(|&(l, o, _)| (l, o).cmp(&(lo, op)))
        {
            Ok(i) => self.small[i].2 = hi,
            Err(i) => self.small.insert(i, (lo, op, hi)),
        }
        if self.small.len() > SMALL {
            self.map = self.small.drain(..).map(|(l, o, h)| ((l, o), h)).collect();
            self.big = true;
        }
    }

    fn remove(&mut self, lo: u64, op: u32) {
        if self.big {
            self.map.remove(&(lo, op));
        } else if let Ok(i) = self
            .small
            .binary_search_by(|&(l, o, _)| (l, o).cmp(&(lo, op)))
        {
            self.small.remove(i);
        }
    }

    fn insert(&mut self, lo: u64, hi: u64, op: OpId) {
        self.longest = self.longest.max(hi - lo);
        // One op touching two ranges from the same start: keep their union.
        let old = match self.big {
            true => self.map.get(&(lo, op.0)).copied(),
            false => (self
                .small
                .binary_search_by(|&(l, o, _)| (l, o).cmp(&(lo, op.0)))
                .ok())
            .map(|i| self.small[i].2),
        };
        self.set(lo, op.0, old.map_or(hi, |h| h.max(hi)));
    }

    /// Removes `[lo, hi)` from every piece, keeping the parts outside it.
    fn cut(&mut self, lo: u64, hi: u64) {
        let mut hit: Vec<(u64, u64, OpId)> = Vec::new();
        self.each_overlapping(lo, hi, |l, h, op| hit.push((l, h, op)));
        for (l, h, op) in hit {
            self.remove(l, op.0);
            if l < lo {
                self.set(l, op.0, lo);
            }
            if hi < h {
                self.set(hi, op.0, h);
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

/// No track (in [`DepTracker::slot`]).
const NO_TRACK: u32 = u32::MAX;

/// Range-based RAW / WAR / WAW tracker for all resources of a program.
#[derive(Debug)]
pub(crate) struct DepTracker {
    buffers: usize,
    /// Host and depend tracks of every buffer, then the tracks of live allocations (a
    /// retired allocation's track is emptied and reused by a later one).
    tracks: Vec<Track>,
    /// Per allocation id: its track's index, or [`NO_TRACK`].
    slot: Vec<u32>,
    /// Emptied tracks to reuse.
    free: Vec<u32>,
}

impl DepTracker {
    pub(crate) fn new(buffers: usize) -> DepTracker {
        DepTracker {
            buffers,
            tracks: vec![Track::default(); buffers * 2],
            slot: Vec::new(),
            free: Vec::new(),
        }
    }

    /// Index of a resource's track; an allocation's `buf` is ignored (one allocation
    /// holds one buffer's section). An allocation met for the first time (or again
    /// after [`DepTracker::retire`]) gets an empty track.
    fn key(&mut self, space: Space, buf: usize) -> usize {
        match space {
            Space::Host => buf,
            Space::Depend => self.buffers + buf,
            Space::Alloc(a) => {
                let i = a.index();
                if i >= self.slot.len() {
                    self.slot.resize(i + 1, NO_TRACK);
                }
                if self.slot[i] == NO_TRACK {
                    self.slot[i] = match self.free.pop() {
                        Some(k) => k,
                        None => {
                            self.tracks.push(Track::default());
                            self.tracks.len() as u32 - 1
                        }
                    };
                }
                self.slot[i] as usize
            }
        }
    }

    /// Forgets an allocation once its `Free` is recorded: nothing touches it afterwards
    /// (a later mapping of the same section is a new allocation), so its pieces only
    /// cost memory; its emptied track serves the next allocation.
    pub(crate) fn retire(&mut self, a: AllocId) {
        let Some(&k) = self.slot.get(a.index()) else {
            return;
        };
        if k != NO_TRACK {
            let t = &mut self.tracks[k as usize];
            t.writers.clear();
            t.readers.clear();
            self.free.push(k);
            self.slot[a.index()] = NO_TRACK;
        }
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
        t.writers.each_overlapping(lo, hi, |_, _, w| {
            if w != op {
                preds.push(w)
            }
        });
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
        t.writers.each_overlapping(lo, hi, |_, _, w| preds.push(w));
        if write {
            t.readers.each_overlapping(lo, hi, |_, _, r| preds.push(r));
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
        let mut add = |_, _, w: OpId| {
            if w != op {
                preds.push(w)
            }
        };
        t.writers.each_overlapping(lo, hi, &mut add);
        t.readers.each_overlapping(lo, hi, &mut add);
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
