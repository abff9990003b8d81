//! The mapping table: per device, host section → device allocation with a reference
//! count (OpenMP's present table; libomptarget's `HostDataToTargetMap`).
//!
//! Live entries of one buffer never overlap: an item entering that partly overlaps an
//! entry is an "explicit extension" error (OpenMP 5.2 §5.8.3; on exit such an item counts
//! as absent, see `rules.rs`), so lookups are ordered-map range
//! queries, `O(log n + k)` for `n` live entries and `k` overlapping ones.

use super::AllocId;
use crate::model::{BufferId, Section};
use std::collections::BTreeMap;

/// A live mapping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapEntry {
    /// The host section the entry mirrors (never zero-length).
    pub section: Section,
    pub alloc: AllocId,
    /// OpenMP's dynamic reference count.
    pub refcount: u32,
}

/// Result of looking up a section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// No live entry overlaps (for a zero-length section: none contains its position).
    Absent,
    /// One live entry contains the section wholly.
    Inside(MapEntry),
    /// One live entry overlaps the section partly.
    Extends(MapEntry),
    /// Several live entries overlap the section.
    Spans(Vec<MapEntry>),
}

/// One device's live mappings.
#[derive(Clone, Debug, Default)]
pub struct MappingTable {
    entries: BTreeMap<(BufferId, u64), MapEntry>,
}

impl MappingTable {
    /// Number of live entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Live entries in (buffer, start) order.
    pub fn entries(&self) -> impl Iterator<Item = &MapEntry> {
        self.entries.values()
    }

    /// Finds how `s` relates to the live entries.
    ///
    /// A zero-length section is `Inside` an entry whose range `[lo, end]` holds `s.lo`
    /// (OpenMP: a zero-length array section is present if its base address is).
    pub fn lookup(&self, s: &Section) -> Lookup {
        // The first hit is held apart: a vector only when there are several.
        let mut first: Option<&MapEntry> = None;
        let mut more: Vec<MapEntry> = Vec::new();
        // The last entry starting at or before s.lo, then every entry starting inside s.
        if let Some((_, e)) = self.entries.range(..=(s.buf, s.lo)).next_back() {
            if e.section.buf == s.buf {
                let hit = if s.len == 0 {
                    e.section.lo <= s.lo && s.lo <= e.section.end()
                } else {
                    e.section.overlaps(s)
                };
                if hit {
                    first = Some(e);
                }
            }
        }
        if s.len > 0 {
            for (_, e) in self.entries.range((s.buf, s.lo + 1)..(s.buf, s.end())) {
                match first {
                    None => first = Some(e),
                    Some(f) => {
                        if more.is_empty() {
                            more.push(f.clone());
                        }
                        more.push(e.clone());
                    }
                }
            }
        }
        match (first, more.is_empty()) {
            (None, _) => Lookup::Absent,
            (Some(e), true) => {
                if e.section.contains(s) || s.len == 0 {
                    Lookup::Inside(e.clone())
                } else {
                    Lookup::Extends(e.clone())
                }
            }
            (Some(_), false) => Lookup::Spans(more),
        }
    }

    pub fn insert(&mut self, section: Section, alloc: AllocId) {
        debug_assert!(section.len > 0);
        self.entries.insert(
            (section.buf, section.lo),
            MapEntry {
                section,
                alloc,
                refcount: 1,
            },
        );
    }

    /// Adds `delta` to the count of the entry starting at `section`.
    pub fn add_ref(&mut self, section: &Section, delta: u32) {
        if let Some(e) = self.entries.get_mut(&(section.buf, section.lo)) {
            e.refcount += delta;
        }
    }

    /// Sets the count of the entry (saturating subtraction, or 0 for `delete`); removes
    /// it when the count reaches 0. Returns the new count.
    pub fn release(&mut self, section: &Section, by: u32, delete: bool) -> u32 {
        let key = (section.buf, section.lo);
        let Some(e) = self.entries.get_mut(&key) else {
            return 0;
        };
        e.refcount = if delete {
            0
        } else {
            e.refcount.saturating_sub(by)
        };
        let left = e.refcount;
        if left == 0 {
            self.entries.remove(&key);
        }
        left
    }

    /// The count of the entry starting at `section`, if live.
    pub fn refcount(&self, section: &Section) -> Option<u32> {
        self.entries
            .get(&(section.buf, section.lo))
            .map(|e| e.refcount)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sec(lo: u64, len: u64) -> Section {
        Section::new(BufferId(0), lo, len)
    }

    #[test]
    fn lookup_classifies_inside_extends_spans_absent() {
        let mut t = MappingTable::default();
        t.insert(sec(0, 10), AllocId(0));
        t.insert(sec(20, 10), AllocId(1));
        assert!(matches!(t.lookup(&sec(2, 4)), Lookup::Inside(e) if e.alloc == AllocId(0)));
        assert!(matches!(t.lookup(&sec(0, 12)), Lookup::Extends(_)));
        assert!(matches!(t.lookup(&sec(5, 20)), Lookup::Spans(v) if v.len() == 2));
        assert_eq!(t.lookup(&sec(10, 10)), Lookup::Absent);
        assert_eq!(t.lookup(&Section::new(BufferId(1), 0, 4)), Lookup::Absent);
        // zero-length: present iff its position lies in [lo, end]
        assert!(matches!(t.lookup(&sec(10, 0)), Lookup::Inside(_)));
        assert_eq!(t.lookup(&sec(15, 0)), Lookup::Absent);
    }

    #[test]
    fn counts_rise_and_fall_and_delete_forces_zero() {
        let mut t = MappingTable::default();
        t.insert(sec(0, 4), AllocId(0));
        t.add_ref(&sec(0, 4), 2);
        assert_eq!(t.refcount(&sec(0, 4)), Some(3));
        assert_eq!(t.release(&sec(0, 4), 1, false), 2);
        assert_eq!(t.release(&sec(0, 4), 1, true), 0);
        assert!(t.is_empty());
    }
}
