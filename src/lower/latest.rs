//! Where the latest contents of each buffer element are, across devices, so that a read
//! on device d of data a region on device e ≠ d wrote becomes a peer copy instead of a
//! read of a stale copy.
//!
//! Model: per buffer element the lowering knows, in program order, the device
//! allocations whose contents are newer than the host copy ("holders"): a kernel wrote
//! them and no D2H has copied them back. No entry means the host copy is the latest
//! (OpenMP's own model: every device has its own data environment, and a `to` copies the
//! host's contents). The first holder is the writer; a peer copy adds its destination.
//!
//! - kernel write of `s` in allocation `a`: the holders of `s` become `[a]`;
//! - D2H of `s`, host task write of `s`: the host is the latest again (entries cut);
//! - H2D of `s` into `a` where `a` already held the latest: the host's contents
//!   overwrite them (an OpenMP `update to` or `always to` does exactly that), so the host
//!   is the latest again for those elements;
//! - `Free` of `a`: `a` leaves every holder list; elements without holders left lost
//!   their newer contents (nothing copied them back), so the host copy counts again.
//!
//! With one device the holders of an element are only ever allocations that overlap the
//! reading one on the same device, which the mapping table forbids: one-device programs
//! get no peer copies (the lowering does not ask [`Latest::stale`]); the tracking still
//! runs, since a host task reading a section newer on a device is warned about
//! ([`Latest::newer_on_device`], [`super::WarningKind::StaleHostRead`]).
//!
//! Pieces are disjoint ranges in an ordered map per buffer: every call costs
//! `O(log n + k)` for `n` pieces of the buffer and `k` pieces in the range.

use super::AllocId;
use crate::model::Section;
use std::collections::BTreeMap;

/// Per buffer: piece start → (end, holders), disjoint `[start, end)` element ranges.
#[derive(Clone, Debug, Default)]
pub(super) struct Latest {
    bufs: Vec<BTreeMap<u64, (u64, Vec<AllocId>)>>,
}

impl Latest {
    pub(super) fn new(buffers: usize) -> Latest {
        Latest {
            bufs: vec![BTreeMap::new(); buffers],
        }
    }

    /// Makes `at` a piece boundary of buffer `buf`.
    fn split(&mut self, buf: usize, at: u64) {
        let m = &mut self.bufs[buf];
        let Some((&lo, (hi, holders))) = m.range_mut(..at).next_back() else {
            return;
        };
        if *hi > at {
            let tail = (*hi, holders.clone());
            *hi = at;
            let _ = lo;
            m.insert(at, tail);
        }
    }

    /// Piece starts inside `s`, after splitting at its ends.
    fn inside(&mut self, s: &Section) -> Vec<u64> {
        let b = s.buf.index();
        self.split(b, s.lo);
        self.split(b, s.end());
        self.bufs[b].range(s.lo..s.end()).map(|(&l, _)| l).collect()
    }

    /// A kernel wrote `s` in `a`: `a` alone holds the latest contents.
    pub(super) fn device_wrote(&mut self, s: &Section, a: AllocId) {
        if s.len == 0 {
            return;
        }
        self.host_latest(s);
        self.bufs[s.buf.index()].insert(s.lo, (s.end(), vec![a]));
    }

    /// The host holds the latest contents of `s` (a D2H, a host write).
    pub(super) fn host_latest(&mut self, s: &Section) {
        if s.len == 0 {
            return;
        }
        for l in self.inside(s) {
            self.bufs[s.buf.index()].remove(&l);
        }
    }

    /// The host's contents of `s` were copied into `a`: where `a` held the latest, the
    /// host's (older) contents replaced them, so the host is the latest there.
    pub(super) fn host_copied_into(&mut self, s: &Section, a: AllocId) {
        if s.len == 0 {
            return;
        }
        let b = s.buf.index();
        for l in self.inside(s) {
            if self.bufs[b][&l].1.contains(&a) {
                self.bufs[b].remove(&l);
            }
        }
    }

    /// The parts of `s` whose latest contents are in allocations other than `a` (and not
    /// on the host), each with the allocation to copy it from (the first holder: the
    /// writer). In element order.
    pub(super) fn stale(&self, s: &Section, a: AllocId) -> Vec<(Section, AllocId)> {
        if s.len == 0 {
            return Vec::new();
        }
        let m = &self.bufs[s.buf.index()];
        let from = match m.range(..=s.lo).next_back() {
            Some((&l, &(h, _))) if h > s.lo => l,
            _ => s.lo,
        };
        m.range(from..s.end())
            .filter(|(_, (_, holders))| !holders.contains(&a))
            .filter_map(|(&l, (h, holders))| {
                let lo = l.max(s.lo);
                let hi = (*h).min(s.end());
                (hi > lo).then(|| (Section::new(s.buf, lo, hi - lo), holders[0]))
            })
            .collect()
    }

    /// The parts of `s` whose latest contents are on a device, not on the host, each
    /// with the allocation that wrote them. In element order.
    pub(super) fn newer_on_device(&self, s: &Section) -> Vec<(Section, AllocId)> {
        self.stale(s, AllocId(u32::MAX))
    }

    /// `a` holds the latest contents of `s` too (a peer copy into it).
    pub(super) fn also_in(&mut self, s: &Section, a: AllocId) {
        if s.len == 0 {
            return;
        }
        let b = s.buf.index();
        for l in self.inside(s) {
            let holders = &mut self.bufs[b].get_mut(&l).expect("piece").1;
            if !holders.contains(&a) {
                holders.push(a);
            }
        }
    }

    /// `a` (storage of `s`) is freed: it leaves every holder list; pieces left without a
    /// holder are dropped (the host copy counts again).
    pub(super) fn forget(&mut self, s: &Section, a: AllocId) {
        if s.len == 0 {
            return;
        }
        let b = s.buf.index();
        for l in self.inside(s) {
            let e = self.bufs[b].get_mut(&l).expect("piece");
            e.1.retain(|h| *h != a);
            if e.1.is_empty() {
                self.bufs[b].remove(&l);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::BufferId;

    fn sec(lo: u64, len: u64) -> Section {
        Section::new(BufferId(0), lo, len)
    }

    #[test]
    fn writes_copies_and_frees_move_the_latest_contents() {
        let (a, b) = (AllocId(0), AllocId(1));
        let mut l = Latest::new(1);
        assert!(l.stale(&sec(0, 10), a).is_empty());
        l.device_wrote(&sec(2, 4), b);
        assert_eq!(l.stale(&sec(0, 10), a), vec![(sec(2, 4), b)]);
        assert_eq!(l.stale(&sec(3, 1), a), vec![(sec(3, 1), b)]);
        assert!(l.stale(&sec(0, 10), b).is_empty());
        l.also_in(&sec(2, 2), a);
        assert_eq!(l.stale(&sec(0, 10), a), vec![(sec(4, 2), b)]);
        l.host_latest(&sec(5, 1));
        assert_eq!(l.stale(&sec(0, 10), a), vec![(sec(4, 1), b)]);
        l.forget(&sec(0, 10), b);
        // a still holds [2, 4); nothing else is newer than the host.
        assert!(l.stale(&sec(0, 10), a).is_empty());
        assert_eq!(l.stale(&sec(0, 10), b), vec![(sec(2, 2), a)]);
        l.host_copied_into(&sec(0, 3), a);
        assert_eq!(l.stale(&sec(0, 10), b), vec![(sec(3, 1), a)]);
        assert_eq!(l.newer_on_device(&sec(0, 10)), vec![(sec(3, 1), a)]);
        l.host_latest(&sec(3, 1));
        assert!(l.newer_on_device(&sec(0, 10)).is_empty());
    }
}
