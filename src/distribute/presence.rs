//! The split's copy of device 0's present table: which sections are mapped, with
//! OpenMP's reference counts, and which host ↔ device copies each data construct makes.
//!
//! Every rank runs every data construct (`target data`, `enter data`, `exit data`,
//! `update`) on its own device, and a target region's own maps add and remove a
//! reference each (balanced), so the table is the same on every rank at every point of
//! the program: the split keeps one. The rules are the lowering's (`lower/rules.rs`,
//! OpenMP 5.2 §5.8.3 and §13.6-§13.9, libomptarget's): map items merge per section,
//! containing sections first; on entry an absent item makes an entry (an H2D if `to`,
//! else uninitialized storage), one inside an entry takes a reference and copies only
//! with `always` (or when the entry is new in this construct); on exit the count falls
//! (`delete`: 0), a D2H happens iff `from` and (the count reached 0 or `always`), and an
//! item not wholly inside one entry is skipped; `update` copies items wholly inside one
//! entry and ignores the others. Errors (extension, `present` on absent data) are the
//! lowering's: every rank program is lowered, and reports them.

use crate::lower::rules::{merge, Item};
use crate::lower::{AllocId, MappingTable};
use crate::model::{MapItem, MapType, Section};

/// A copy every rank makes for a data construct (or, for [`Copy::Alloc`], storage it
/// makes without one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Copy {
    /// Host → device of the section.
    H2d(Section),
    /// Device → host of the section.
    D2h(Section),
    /// New device storage without a copy: its contents are undefined (OpenMP), the
    /// same bytes on every rank's plugin.
    Alloc(Section),
}

/// Device 0's present table (module docs).
#[derive(Default)]
pub(super) struct Presence {
    table: MappingTable,
    /// Entries made so far (their ids, unused but unique).
    made: u32,
}

impl Presence {
    /// True if no section is mapped.
    pub(super) fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// True if `s` lies wholly inside one live entry (a region's map of it copies
    /// nothing unless `always`).
    pub(super) fn present(&self, s: &Section) -> bool {
        matches!(self.table.lookup(s), crate::lower::Lookup::Inside(_)) && s.len > 0
    }

    /// The entry half of `enter data` or `target data`: the copies it makes.
    pub(super) fn enter(&mut self, maps: &[MapItem]) -> Vec<Copy> {
        use crate::lower::Lookup;
        let mut items = merge(maps);
        items.sort_by_key(|i| {
            (
                i.section.buf,
                i.section.lo,
                std::cmp::Reverse(i.section.len),
            )
        });
        let mut new: Vec<Section> = Vec::new();
        let mut copies = Vec::new();
        for it in &items {
            match self.table.lookup(&it.section) {
                Lookup::Absent => {
                    if it.section.len == 0 {
                        continue;
                    }
                    self.table.insert(it.section, AllocId(self.made));
                    self.made += 1;
                    new.push(it.section);
                    copies.push(match it.to {
                        true => Copy::H2d(it.section),
                        false => Copy::Alloc(it.section),
                    });
                }
                Lookup::Inside(e) => {
                    self.table.add_ref(&e.section, 1);
                    if it.section.len > 0 && it.to && (it.always_to || new.contains(&e.section)) {
                        copies.push(Copy::H2d(it.section));
                    }
                }
                // The lowering's error (explicit extension, spanning entries).
                Lookup::Extends(_) | Lookup::Spans(_) => {}
            }
        }
        copies
    }

    /// The exit half of `exit data` or `target data`: the copies it makes.
    pub(super) fn exit(&mut self, maps: &[MapItem]) -> Vec<Copy> {
        use crate::lower::Lookup;
        let items = merge(maps);
        // Per entry, in order of first appearance: (entry, decrements, delete, items).
        let mut groups: Vec<(Section, u32, bool, Vec<&Item>)> = Vec::new();
        for it in &items {
            if let Lookup::Inside(e) = self.table.lookup(&it.section) {
                match groups.iter_mut().find(|g| g.0 == e.section) {
                    Some(g) => {
                        g.1 += 1;
                        g.2 |= it.delete;
                        g.3.push(it);
                    }
                    None => groups.push((e.section, 1, it.delete, vec![it])),
                }
            }
        }
        let mut copies = Vec::new();
        for (entry, decs, delete, its) in groups {
            let left = self.table.release(&entry, decs, delete);
            for i in its {
                if i.from && i.section.len > 0 && (left == 0 || i.always_from) {
                    copies.push(Copy::D2h(i.section));
                }
            }
        }
        copies
    }

    /// `target update`: the copies of its items wholly inside one entry.
    pub(super) fn update(&self, maps: &[MapItem]) -> Vec<Copy> {
        maps.iter()
            .filter(|m| self.present(&m.section))
            .filter_map(|m| match m.map_type {
                MapType::To => Some(Copy::H2d(m.section)),
                MapType::From => Some(Copy::D2h(m.section)),
                _ => None,
            })
            .collect()
    }
}

/// The `exit data` items that end a `target data` region mapped with `maps` (OpenMP 5.2
/// §13.6.1: the region's end is the exit half of its maps): `to` and `alloc` release,
/// `from` and `tofrom` copy back (`from`), `always` kept, `present` dropped (at the end
/// of a `target data` an absent item is ignored, as `exit data` ignores one without
/// `present`).
pub(super) fn target_data_exit(maps: &[MapItem]) -> Vec<MapItem> {
    maps.iter()
        .map(|m| {
            let map_type = match m.map_type {
                MapType::From | MapType::ToFrom => MapType::From,
                _ => MapType::Release,
            };
            MapItem {
                map_type,
                present: false,
                ..m.clone()
            }
        })
        .collect()
}

/// The `enter data` items that begin a `target data` region mapped with `maps`: as
/// written, with `from` as `alloc` (`enter data` takes no `from`; it copies nothing in).
pub(super) fn target_data_enter(maps: &[MapItem]) -> Vec<MapItem> {
    maps.iter()
        .map(|m| MapItem {
            map_type: match m.map_type {
                MapType::From => MapType::Alloc,
                t => t,
            },
            ..m.clone()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::BufferId;

    fn sec(lo: u64, len: u64) -> Section {
        Section::new(BufferId(0), lo, len)
    }

    #[test]
    fn counts_decide_the_copies() {
        let mut p = Presence::default();
        let to = |s| MapItem::new(MapType::To, s);
        let from = |s| MapItem::new(MapType::From, s);
        assert_eq!(p.enter(&[to(sec(0, 8))]), [Copy::H2d(sec(0, 8))]);
        assert!(p.present(&sec(2, 4)));
        // Present: a second enter copies nothing, unless `always`.
        assert!(p.enter(&[to(sec(0, 8))]).is_empty());
        assert_eq!(p.enter(&[to(sec(0, 4)).always()]), [Copy::H2d(sec(0, 4))]);
        assert_eq!(p.update(&[from(sec(4, 4))]), [Copy::D2h(sec(4, 4))]);
        // Count 3 → 2 → 1: no copy back until 0.
        assert!(p.exit(&[from(sec(0, 8))]).is_empty());
        assert!(p.exit(&[from(sec(0, 8))]).is_empty());
        assert_eq!(p.exit(&[from(sec(0, 8))]), [Copy::D2h(sec(0, 8))]);
        assert!(!p.present(&sec(0, 8)) && p.is_empty());
        assert!(p.update(&[from(sec(0, 8))]).is_empty());
        assert_eq!(
            p.enter(&[MapItem::new(MapType::Alloc, sec(0, 8))]),
            [Copy::Alloc(sec(0, 8))]
        );
    }
}
