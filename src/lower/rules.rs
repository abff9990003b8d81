//! The mapping-table rules of a construct's entry and exit ([design notes](crate::design) "Semantics the
//! lowering must implement", rules 1-4): map items merged per section, looked up in the
//! device's mapping table, reference counts, which copies happen, and the errors
//! (`present`, explicit extension, a section spanning several mappings).
//!
//! Rule 3 as implemented: on exit an item is processed after the kernel; its entry's
//! count falls by one (`delete` forces 0); a D2H happens iff `from` and (the count reached
//! 0, or `always`); the entry is freed at 0 after its D2H. An item that is absent, or not
//! wholly inside one live entry (extending beyond one, or spanning several, because its
//! entry was deleted and a different one entered meanwhile), is skipped silently: no
//! error, no D2H, no count change. `present` is checked only when a construct's entry is
//! processed: a `target exit data` item with `present` that is absent is the `present`
//! error, but at the end of a `target` or `target data` region an absent item is ignored
//! whatever its modifiers (OpenMP 5.2 §5.8.3). This is libomptarget's behaviour (LLVM
//! test `offload/test/mapping/target_data_array_extension_at_exit.c`, `targetDataEnd`).
//! Extension and spanning stay errors on entry.
//!
//! Rule 5 as implemented for zero-length sections: they create no entry; inside a live
//! entry one takes a reference on entry and gives it back on exit (`delete`: the count
//! becomes 0, the entry is freed), and copies nothing; outside every entry it is absent.
//! `target update` is in `builder.rs`.

use super::builder::{ConstructOps, Lowerer};
use super::mapping::{Lookup, MapEntry};
use super::written::Written;
use super::{AllocId, DeviceAlloc, LowerError};
use crate::model::{MapItem, MapType, Section, Span};
use std::collections::BTreeMap;

/// One section's merged map items of one construct ([design notes](crate::design) rule 4: duplicates merge,
/// motions are the union, independent of clause order).
#[derive(Clone, Debug)]
pub(crate) struct Item {
    pub(crate) section: Section,
    pub(crate) to: bool,
    pub(crate) from: bool,
    pub(crate) always_to: bool,
    pub(crate) always_from: bool,
    pub(crate) present: bool,
    pub(crate) delete: bool,
    /// Kernel access implied by the map type (for sections the kernel is not passed).
    pub(super) reads: bool,
    pub(super) writes: bool,
    pub(super) span: Option<Span>,
}

pub(crate) fn merge(items: &[MapItem]) -> Vec<Item> {
    let mut out: Vec<Item> = Vec::new();
    let mut index: BTreeMap<Section, usize> = BTreeMap::new();
    for m in items {
        let t = m.map_type;
        let i = *index.entry(m.section).or_insert_with(|| {
            out.push(Item {
                section: m.section,
                to: false,
                from: false,
                always_to: false,
                always_from: false,
                present: false,
                delete: false,
                reads: false,
                writes: false,
                span: m.span,
            });
            out.len() - 1
        });
        let it = &mut out[i];
        it.to |= t.has_to();
        it.from |= t.has_from();
        it.always_to |= m.always && t.has_to();
        it.always_from |= m.always && t.has_from();
        it.present |= m.present;
        it.delete |= t == MapType::Delete;
        it.reads |= t.has_to();
        it.writes |= matches!(t, MapType::From | MapType::ToFrom | MapType::Alloc);
    }
    out
}

impl Lowerer<'_> {
    /// Entry half of a construct ([design notes](crate::design) rules 1-2, 4).
    pub(super) fn enter(
        &mut self,
        region: &str,
        device: u32,
        items: &mut [Item],
        plan: &mut ConstructOps,
    ) -> Result<(), LowerError> {
        // Containing sections first, so a sub-section finds its parent regardless of
        // clause order.
        items.sort_by(|a, b| {
            (
                a.section.buf,
                a.section.lo,
                std::cmp::Reverse(a.section.len),
            )
                .cmp(&(
                    b.section.buf,
                    b.section.lo,
                    std::cmp::Reverse(b.section.len),
                ))
        });
        for it in items.iter() {
            if it.to {
                self.elide.entered(&it.section);
            }
            let table = &self.tables[device as usize];
            match table.lookup(&it.section) {
                Lookup::Absent => {
                    if it.present {
                        return Err(self.not_present(region, device, it));
                    }
                    if it.section.len == 0 {
                        continue; // rule 5: zero-length sections create no entry
                    }
                    // A new entry (count 1, as without elision) on kept storage holding
                    // exactly these host bytes: no Alloc, no H2D unless `always`
                    // (module docs of `elide`).
                    if it.to {
                        if let Some(alloc) = self.take_kept(device, &it.section) {
                            self.tables[device as usize].insert(it.section, alloc);
                            plan.reused.push(alloc);
                            match it.always_to {
                                true => plan.h2d.push((alloc, it.section)),
                                false => plan.elided_h2d.push((alloc, it.section)),
                            }
                            continue;
                        }
                    }
                    let alloc = AllocId(self.g.allocs.len() as u32);
                    let bytes = it.section.len * self.p.buffer(it.section.buf).ty.size_bytes();
                    self.g.allocs.push(DeviceAlloc {
                        section: it.section,
                        device,
                        bytes,
                        zero: false,
                    });
                    self.written.push(Written::default());
                    self.kernel_wrote.push(false);
                    self.tables[device as usize].insert(it.section, alloc);
                    plan.allocs.push(alloc);
                    if it.to {
                        plan.h2d.push((alloc, it.section));
                    }
                }
                Lookup::Inside(e) => {
                    // A zero-length section inside a live entry takes a reference on it
                    // (and gives it back on exit, rule 5), as libomptarget resolves it to
                    // the enclosing mapping; it copies nothing.
                    self.tables[device as usize].add_ref(&e.section, 1);
                    if it.section.len == 0 {
                        continue;
                    }
                    let new = plan.allocs.contains(&e.alloc);
                    let reused = plan.reused.contains(&e.alloc);
                    if it.to && (new || reused || it.always_to) {
                        let within = |l: &[(AllocId, Section)]| {
                            l.iter()
                                .any(|(a, s)| *a == e.alloc && s.contains(&it.section))
                        };
                        // `always` copies even where the kept storage holds the bytes.
                        let covered =
                            within(&plan.h2d) || (!it.always_to && within(&plan.elided_h2d));
                        if !covered {
                            match reused && !it.always_to {
                                true => plan.elided_h2d.push((e.alloc, it.section)),
                                false => plan.h2d.push((e.alloc, it.section)),
                            }
                        }
                    }
                }
                Lookup::Extends(e) => return Err(self.extension(region, it, &e)),
                Lookup::Spans(v) => return Err(self.spans(region, &it.section, it.span, &v)),
            }
        }
        Ok(())
    }

    /// Exit half of a construct (rules 3-5): counts fall per item, `delete` forces 0,
    /// D2H iff `from` and (count reached 0 or `always`), the entry is freed at 0 after
    /// its D2H.
    ///
    /// An item that is not wholly inside one live entry (it extends beyond one, or spans
    /// several) counts as absent, as in libomptarget, whose exit looks the section up
    /// with "must contain" and skips it when not contained (LLVM test
    /// `offload/test/mapping/target_data_array_extension_at_exit.c`: a `target data`
    /// whose own entry was deleted inside it and a smaller one entered meanwhile): no
    /// error, no D2H, no count change. Extension stays an error on entry
    /// ([`Self::enter`]).
    ///
    /// `present` is checked only where the exit is the construct's entry, i.e. for
    /// `target exit data` (`check_present`): there an absent item with `present` is the
    /// `present` error. At the end of a `target` or `target data` region an absent item
    /// is ignored whatever its modifiers (OpenMP 5.1 §2.21.7.1, 5.2 §5.8.3;
    /// libomptarget's `targetDataEnd`).
    ///
    /// A zero-length item inside a live entry acts on that entry (count − 1, `delete`
    /// 0) and copies nothing, as libomptarget resolves it to the enclosing mapping
    /// (rule 5); outside every entry it is absent.
    pub(super) fn exit(
        &mut self,
        region: &str,
        device: u32,
        items: &[Item],
        check_present: bool,
        plan: &mut ConstructOps,
    ) -> Result<(), LowerError> {
        // Per entry, in order of first appearance: (entry, decrements, delete, items).
        let mut groups: Vec<(MapEntry, u32, bool, Vec<&Item>)> = Vec::new();
        for it in items {
            let table = &self.tables[device as usize];
            match table.lookup(&it.section) {
                Lookup::Absent | Lookup::Extends(_) | Lookup::Spans(_) => {
                    if it.present && check_present {
                        return Err(self.not_present(region, device, it));
                    }
                }
                Lookup::Inside(e) => match groups.iter_mut().find(|g| g.0.alloc == e.alloc) {
                    Some(g) => {
                        g.1 += 1;
                        g.2 |= it.delete;
                        g.3.push(it);
                    }
                    None => groups.push((e, 1, it.delete, vec![it])),
                },
            }
        }
        for (entry, decs, delete, its) in groups {
            let left = self.tables[device as usize].release(&entry.section, decs, delete);
            let mut copies: Vec<Section> = its
                .iter()
                .filter(|i| i.from && i.section.len > 0 && (left == 0 || i.always_from))
                .map(|i| i.section)
                .collect();
            // One D2H at most per storage range: drop sections inside another copied one.
            copies.sort_by_key(|s| (s.lo, std::cmp::Reverse(s.len)));
            let mut kept: Vec<Section> = Vec::new();
            for s in copies {
                if !kept.iter().any(|k| k.contains(&s)) {
                    kept.push(s);
                }
            }
            for s in kept {
                plan.d2h.push((entry.alloc, s));
            }
            if left == 0 {
                plan.frees.push(entry.alloc);
            }
        }
        Ok(())
    }

    pub(super) fn not_present(&self, region: &str, device: u32, it: &Item) -> LowerError {
        LowerError::NotPresent {
            region: region.to_string(),
            section: self.name(&it.section),
            device,
            span: it.span,
        }
    }

    pub(super) fn extension(&self, region: &str, it: &Item, e: &MapEntry) -> LowerError {
        LowerError::ExplicitExtension {
            region: region.to_string(),
            section: self.name(&it.section),
            mapped: self.name(&e.section),
            span: it.span,
        }
    }

    pub(super) fn spans(
        &self,
        region: &str,
        s: &Section,
        span: Option<Span>,
        v: &[MapEntry],
    ) -> LowerError {
        LowerError::SpansMappings {
            region: region.to_string(),
            section: self.name(s),
            mappings: v.iter().map(|e| self.name(&e.section)).collect(),
            span,
        }
    }
}
