//! Which ranks hold valid host bytes of each buffer element: the split's cache state
//! (StarPU-MPI's per-node data cache). Data received stays valid on its receiver until a
//! construct writes it, so a second reader on that rank needs no second transfer.
//!
//! Each segment also keeps a *stamp*: the split's sequence number of the last update
//! that touched it (a write or a receive). Bytes valid on a rank at stamp `t` keep their
//! value there until the next update, so a send of them may be placed right after item
//! `t` instead of at its consumer (see `split/messages.rs`). Neighbours merge only when
//! both their ranks and their stamps agree: keeping the later stamp would be correct too
//! (a later placement), but adjacent tiles written at different times would then each
//! take the other's, and a tile's send would wait for its neighbour's last writer.

/// Per buffer, a partition of `[0, len)` into segments, each with the set of ranks (bit
/// `r` = rank `r`) holding its current value.
#[derive(Clone, Debug)]
pub(crate) struct Validity {
    bufs: Vec<Segs>,
}

#[derive(Clone, Debug)]
struct Segs {
    /// Segment `i` is `[starts[i], starts[i + 1])`, the last up to `len`.
    starts: Vec<u64>,
    masks: Vec<u64>,
    stamps: Vec<u64>,
    len: u64,
}

impl Segs {
    /// Index of the segment starting at `x`, splitting one if needed (`x < len`).
    fn split_at(&mut self, x: u64) -> usize {
        let i = self.starts.partition_point(|&s| s <= x) - 1;
        if self.starts[i] == x {
            return i;
        }
        self.starts.insert(i + 1, x);
        self.masks.insert(i + 1, self.masks[i]);
        self.stamps.insert(i + 1, self.stamps[i]);
        i + 1
    }

    fn end(&self, i: usize) -> u64 {
        self.starts.get(i + 1).copied().unwrap_or(self.len)
    }
}

impl Validity {
    /// Every element of buffers of these lengths (elements) valid on every rank of `all`.
    pub(crate) fn new(lens: impl Iterator<Item = u64>, all: u64) -> Validity {
        Validity {
            bufs: lens
                .map(|len| Segs {
                    starts: vec![0],
                    masks: vec![all],
                    stamps: vec![0],
                    len,
                })
                .collect(),
        }
    }

    /// Segments `(lo, hi, ranks, stamp)` covering `[lo, lo + len)` of buffer `buf`, in
    /// order.
    pub(crate) fn query(&self, buf: usize, lo: u64, len: u64) -> Vec<(u64, u64, u64, u64)> {
        let s = &self.bufs[buf];
        let hi = lo + len;
        if len == 0 {
            return Vec::new();
        }
        let mut i = s.starts.partition_point(|&x| x <= lo) - 1;
        let mut out = Vec::new();
        while i < s.starts.len() && s.starts[i] < hi {
            out.push((
                s.starts[i].max(lo),
                s.end(i).min(hi),
                s.masks[i],
                s.stamps[i],
            ));
            i += 1;
        }
        out
    }

    /// Applies `f` to the rank set of every element of `[lo, lo + len)` of `buf`, and
    /// stamps those elements with `stamp`.
    pub(crate) fn update(
        &mut self,
        buf: usize,
        lo: u64,
        len: u64,
        stamp: u64,
        f: impl Fn(u64) -> u64,
    ) {
        if len == 0 {
            return;
        }
        let s = &mut self.bufs[buf];
        let hi = lo + len;
        let first = s.split_at(lo);
        let last = if hi < s.len {
            s.split_at(hi)
        } else {
            s.starts.len()
        };
        for m in &mut s.masks[first..last] {
            *m = f(*m);
        }
        for t in &mut s.stamps[first..last] {
            *t = stamp;
        }
        // Merge equal neighbours around the range so segments do not pile up.
        let (a, b) = (first.saturating_sub(1), (last + 1).min(s.starts.len()));
        let mut keep_starts = Vec::with_capacity(b - a);
        let mut keep_masks = Vec::with_capacity(b - a);
        let mut keep_stamps: Vec<u64> = Vec::with_capacity(b - a);
        for i in a..b {
            let same =
                keep_masks.last() == Some(&s.masks[i]) && keep_stamps.last() == Some(&s.stamps[i]);
            if !same || i == a {
                keep_starts.push(s.starts[i]);
                keep_masks.push(s.masks[i]);
                keep_stamps.push(s.stamps[i]);
            }
        }
        s.starts.splice(a..b, keep_starts);
        s.masks.splice(a..b, keep_masks);
        s.stamps.splice(a..b, keep_stamps);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_and_reads_split_and_merge_segments() {
        let mut v = Validity::new([100u64].into_iter(), 0b11);
        v.update(0, 10, 20, 4, |_| 0b01);
        assert_eq!(
            v.query(0, 0, 100),
            [(0, 10, 3, 0), (10, 30, 1, 4), (30, 100, 3, 0)]
        );
        assert_eq!(v.query(0, 20, 20), [(20, 30, 1, 4), (30, 40, 3, 0)]);
        // Same ranks, other stamps: not merged (each keeps when it became valid).
        v.update(0, 10, 20, 7, |m| m | 0b10);
        assert_eq!(
            v.query(0, 0, 100),
            [(0, 10, 3, 0), (10, 30, 3, 7), (30, 100, 3, 0)]
        );
        // Same ranks and stamp: merged.
        v.update(0, 0, 10, 7, |m| m);
        assert_eq!(v.query(0, 0, 40), [(0, 30, 3, 7), (30, 40, 3, 0)]);
        v.update(0, 90, 10, 9, |_| 0b10);
        assert_eq!(v.query(0, 85, 15), [(85, 90, 3, 0), (90, 100, 2, 9)]);
        assert!(v.query(0, 5, 0).is_empty());
    }
}
