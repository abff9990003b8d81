//! Which elements of each device allocation the program has written so far, in program
//! order (H2D copies, kernel writes as far as a kernel is sure to write): a read outside
//! them marks the allocation [`super::DeviceAlloc::zero`].

use std::collections::BTreeMap;

/// Disjoint element ranges `[lo, hi)` by `lo`, merged when they touch.
#[derive(Clone, Debug, Default)]
pub(super) struct Written(BTreeMap<u64, u64>);

impl Written {
    /// Adds `[lo, hi)`. `O(log n + k)` for `k` ranges merged.
    pub(super) fn add(&mut self, mut lo: u64, mut hi: u64) {
        // Already inside one range (a kernel or copy rewriting what was written): the
        // merge below would put the same range back.
        if self.covers(lo, hi) {
            return;
        }
        if let Some((&l, &h)) = self.0.range(..=lo).next_back() {
            if h >= lo {
                lo = l;
                hi = hi.max(h);
            }
        }
        let inside: Vec<u64> = self.0.range(lo..=hi).map(|(&l, _)| l).collect();
        for l in inside {
            if let Some(h) = self.0.remove(&l) {
                hi = hi.max(h);
            }
        }
        self.0.insert(lo, hi);
    }

    /// True if `[lo, hi)` lies inside one range (ranges are merged, so one suffices).
    pub(super) fn covers(&self, lo: u64, hi: u64) -> bool {
        lo >= hi
            || self
                .0
                .range(..=lo)
                .next_back()
                .is_some_and(|(_, &h)| h >= hi)
    }
}
