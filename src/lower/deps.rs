//! Dependency tracking over element ranges: read-after-write, write-after-read and
//! write-after-write edges in program order.
//!
//! A *resource* is one address space of one buffer: its host copy, its storage on one
//! device, or its `depend` name. Per resource the tracker keeps the latest writer of each
//! element range (disjoint pieces) and the readers since those writes.
//!
//! Complexity: an access costs `O(w + r)` for the `w` writer pieces it scans and, for a
//! write, the `r` readers it scans; a read scans only writers. Whole-buffer access
//! patterns keep `w = 1`. Readers are dropped when a later write covers them, so each
//! reader is scanned at most once per covering write.

use super::OpId;

#[derive(Clone, Copy, Debug)]
struct Piece {
    lo: u64,
    hi: u64,
    op: OpId,
}

#[derive(Clone, Debug, Default)]
struct Track {
    writers: Vec<Piece>,
    readers: Vec<Piece>,
}

/// Which address space of a buffer an access touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Space {
    /// The host copy.
    Host,
    /// The storage on a device.
    Device(u32),
    /// The `depend` clause namespace (OpenMP 5.2 §15.9.5: dependences between tasks by
    /// storage location, independent of data motion).
    Depend,
}

/// Range-based RAW / WAR / WAW tracker for all resources of a program.
#[derive(Debug)]
pub(super) struct DepTracker {
    buffers: usize,
    devices: usize,
    tracks: Vec<Track>,
}

impl DepTracker {
    pub(super) fn new(buffers: usize, devices: usize) -> DepTracker {
        DepTracker {
            buffers,
            devices,
            tracks: vec![Track::default(); buffers * (devices + 2)],
        }
    }

    fn key(&self, space: Space, buf: usize) -> usize {
        match space {
            Space::Host => buf,
            Space::Depend => self.buffers + buf,
            Space::Device(d) => {
                debug_assert!((d as usize) < self.devices);
                self.buffers * (2 + d as usize) + buf
            }
        }
    }

    /// Records a read of elements `[lo, lo+len)` by `op`; pushes the ops it must follow
    /// (the writers of those elements) onto `preds`.
    pub(super) fn read(
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
        for w in &t.writers {
            if w.lo < hi && lo < w.hi && w.op != op {
                preds.push(w.op);
            }
        }
        // Consecutive reads of the same range by one op are one read.
        if let Some(last) = t.readers.last() {
            if last.op == op && last.lo == lo && last.hi == hi {
                return;
            }
        }
        t.readers.push(Piece { lo, hi, op });
    }

    /// Pushes the ops an access of `[lo, lo+len)` would have to follow, without recording
    /// it (for `depend`, whose access is recorded once the construct's ops exist).
    pub(super) fn query(
        &self,
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
        let t = &self.tracks[self.key(space, buf)];
        let readers: &[Piece] = if write { &t.readers } else { &[] };
        for p in t.writers.iter().chain(readers) {
            if p.lo < hi && lo < p.hi {
                preds.push(p.op);
            }
        }
    }

    /// Records a write of `[lo, lo+len)` by all of `ops` together (the ops that stand
    /// for one construct), without collecting predecessors.
    pub(super) fn record_writes(
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
        cut(&mut t.writers, lo, hi);
        cut(&mut t.readers, lo, hi);
        t.writers.extend(ops.iter().map(|&op| Piece { lo, hi, op }));
    }

    /// Records a write of `[lo, lo+len)` by `op`; pushes the writers and readers it must
    /// follow onto `preds`.
    pub(super) fn write(
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
        for p in t.writers.iter().chain(t.readers.iter()) {
            if p.lo < hi && lo < p.hi && p.op != op {
                preds.push(p.op);
            }
        }
        cut(&mut t.writers, lo, hi);
        cut(&mut t.readers, lo, hi);
        t.writers.push(Piece { lo, hi, op });
    }
}

/// Removes `[lo, hi)` from every piece, keeping the parts outside it.
fn cut(pieces: &mut Vec<Piece>, lo: u64, hi: u64) {
    if !pieces.iter().any(|p| p.lo < hi && lo < p.hi) {
        return;
    }
    let mut out = Vec::with_capacity(pieces.len() + 1);
    for p in pieces.drain(..) {
        if p.hi <= lo || hi <= p.lo {
            out.push(p);
            continue;
        }
        if p.lo < lo {
            out.push(Piece {
                lo: p.lo,
                hi: lo,
                op: p.op,
            });
        }
        if hi < p.hi {
            out.push(Piece {
                lo: hi,
                hi: p.hi,
                op: p.op,
            });
        }
    }
    *pieces = out;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(i: u32) -> OpId {
        OpId(i)
    }

    #[test]
    fn raw_war_waw_on_overlapping_ranges() {
        let mut t = DepTracker::new(1, 1);
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
        let mut t = DepTracker::new(2, 2);
        let mut p = Vec::new();
        t.write(Space::Device(0), 0, 0, 4, op(0), &mut p);
        t.read(Space::Device(1), 0, 0, 4, op(1), &mut p);
        t.read(Space::Host, 0, 0, 4, op(2), &mut p);
        t.read(Space::Depend, 0, 0, 4, op(3), &mut p);
        t.read(Space::Device(0), 1, 0, 4, op(4), &mut p);
        assert!(p.is_empty());
        t.read(Space::Device(0), 0, 3, 1, op(5), &mut p);
        assert_eq!(p, [op(0)]);
    }

    #[test]
    fn zero_length_accesses_add_nothing() {
        let mut t = DepTracker::new(1, 1);
        let mut p = Vec::new();
        t.write(Space::Host, 0, 0, 4, op(0), &mut p);
        t.read(Space::Host, 0, 2, 0, op(1), &mut p);
        t.write(Space::Host, 0, 2, 0, op(2), &mut p);
        assert!(p.is_empty());
    }
}
