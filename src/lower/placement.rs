//! Placement: which device a construct with `device = "auto"` ([`DEVICE_AUTO`]) runs on.
//!
//! # Algorithm
//!
//! Constructs are placed one at a time in program order (taskgraph executions one after
//! the other, as they are lowered), each just before its maps are looked up in the
//! mapping table, so that every decision sees the data where earlier decisions put it:
//!
//! 0. **`present`.** Only devices where every `present` map item of the construct is
//!    mapped are candidates (OpenMP makes a missing one an error); if none is, all
//!    devices are (and the lowering reports the missing item).
//! 1. **Locality.** For each device `d`, the bytes of the sections the construct names
//!    (its map items and buffer arguments, each once) whose current contents are
//!    already on `d`: present in `d`'s mapping table, minus the parts whose latest copy
//!    is on another device (see `latest`). The construct goes to the device with the
//!    most such bytes.
//! 2. **Load**, on ties of a target region (in particular when no device holds any of
//!    its data): the device with the least estimated work so far, the sum of
//!    [`op_cost_us`] over the ops already lowered onto it (copies at the cost model's
//!    bandwidth and latency, kernels by their estimate, allocs and frees by a constant;
//!    µs). Data constructs (`target data`, enter / exit data, update) do no work of their
//!    own, so their ties skip this step: data entered for later regions stays in one
//!    place (the lowest device, OpenMP's default device 0, when it is nowhere yet), and
//!    the regions that use it follow it there. (Spreading them by load puts the inputs
//!    of one region on different devices, which a `present` map cannot satisfy.)
//! 3. The lowest device id on the remaining ties.
//!
//! A `target data` is placed once for both of its halves. Explicit `device = N` is never
//! changed; a one-device program places everything on device 0.
//!
//! # Complexity
//!
//! `O(S · D · (log n + k))` per construct for `S` sections named, `D` devices, `n` live
//! mapping entries and `k` entries and latest-copy pieces a section overlaps: over a
//! program `O(regions · maps · devices)` lookups. The load is kept per device, `O(1)` per
//! op lowered.
//!
//! [`DEVICE_AUTO`]: crate::model::DEVICE_AUTO
//! [`op_cost_us`]: crate::lower::cost::op_cost_us

use super::builder::Lowerer;
use super::mapping::Lookup;
use super::OpId;
use crate::model::{Arg, Construct, DataConstruct, MapItem, Section, TargetRegion};

/// What placement knows of one device when a construct is placed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DeviceScore {
    /// Bytes of the construct's sections whose current contents are on the device.
    pub bytes_here: u64,
    /// Estimated work already lowered onto the device, µs.
    pub load_us: f64,
}

/// The device a construct goes to, given each device's score (index = device): most
/// `bytes_here`, then least `load_us`, then lowest id. `O(D)`. Panics if `scores` is
/// empty.
pub fn choose(scores: &[DeviceScore]) -> u32 {
    let mut best = 0usize;
    for (d, s) in scores.iter().enumerate().skip(1) {
        let b = &scores[best];
        if s.bytes_here > b.bytes_here || (s.bytes_here == b.bytes_here && s.load_us < b.load_us) {
            best = d;
        }
    }
    best as u32
}

impl Lowerer<'_> {
    /// The device of target region `t` (`auto`).
    pub(super) fn place_target(&self, t: &TargetRegion) -> u32 {
        let args = t.args.iter().filter_map(|a| match a {
            Arg::Buffer(s) => Some(*s),
            _ => None,
        });
        self.place(&t.maps, maps(&t.maps).chain(args), true)
    }

    /// The device of an enter / exit data or update construct (`auto`).
    pub(super) fn place_data(&self, d: &DataConstruct) -> u32 {
        self.place(&d.maps, maps(&d.maps), false)
    }

    /// The device for a construct with map items `items`, naming `sections`, whose ties
    /// go by load when `by_load` (see the module docs).
    pub(super) fn place(
        &self,
        items: &[MapItem],
        sections: impl Iterator<Item = Section>,
        by_load: bool,
    ) -> u32 {
        if self.devices == 1 {
            return 0;
        }
        let present = |d: u32| {
            items.iter().filter(|m| m.present).all(|m| {
                self.in_bounds(&m.section)
                    && matches!(
                        self.tables[d as usize].lookup(&m.section),
                        Lookup::Inside(_)
                    )
            })
        };
        let mut candidates: Vec<u32> = (0..self.devices).filter(|&d| present(d)).collect();
        if candidates.is_empty() {
            candidates = (0..self.devices).collect();
        }
        // Sections outside their buffer are left to the construct's own checks (errors).
        let mut named: Vec<Section> = sections.filter(|s| self.valid(s)).collect();
        named.sort();
        named.dedup();
        let scores: Vec<DeviceScore> = candidates
            .iter()
            .map(|&d| DeviceScore {
                bytes_here: named.iter().map(|s| self.bytes_on(d, s)).sum(),
                load_us: if by_load {
                    self.load_us[d as usize]
                } else {
                    0.0
                },
            })
            .collect();
        candidates[choose(&scores) as usize]
    }

    /// A non-empty section inside its buffer.
    fn valid(&self, s: &Section) -> bool {
        s.len > 0 && self.in_bounds(s)
    }

    /// A section inside its buffer (zero-length ones too: rule 5 looks up their base).
    fn in_bounds(&self, s: &Section) -> bool {
        self.p
            .buffers
            .get(s.buf.index())
            .is_some_and(|b| s.lo.checked_add(s.len).is_some_and(|e| e <= b.len))
    }

    /// Bytes of `s` whose current contents are on device `d`: inside live mapping
    /// entries of `d`, less the parts whose latest copy is on another device.
    fn bytes_on(&self, d: u32, s: &Section) -> u64 {
        let entries = match self.tables[d as usize].lookup(s) {
            Lookup::Absent => return 0,
            Lookup::Inside(e) | Lookup::Extends(e) => vec![e],
            Lookup::Spans(v) => v,
        };
        let mut elems = 0;
        for e in entries {
            let lo = s.lo.max(e.section.lo);
            let hi = s.end().min(e.section.end());
            if hi <= lo {
                continue;
            }
            let here = Section::new(s.buf, lo, hi - lo);
            let stale: u64 = self
                .latest
                .stale(&here, e.alloc)
                .iter()
                .map(|(p, _)| p.len)
                .sum();
            elems += here.len - stale;
        }
        elems * self.p.buffer(s.buf).ty.size_bytes()
    }

    /// Adds op `id`'s estimated cost to its device's load (device ops only).
    pub(super) fn account(&mut self, id: OpId) {
        if self.devices > 1 && !self.g.op(id).kind.is_host() {
            let d = self.g.op(id).device as usize;
            self.load_us[d] += crate::lower::cost::op_cost_us(&self.g, id);
        }
    }

    /// Lowers `c` with its device placed when it says `auto`; `None` when `c` is not a
    /// placed construct of that kind (the caller lowers it as written).
    pub(super) fn placed(c: &Construct, device: u32) -> Option<Construct> {
        Some(match c {
            Construct::Target(t) => Construct::Target(TargetRegion {
                device,
                ..t.clone()
            }),
            Construct::EnterData(d) => Construct::EnterData(DataConstruct {
                device,
                ..d.clone()
            }),
            Construct::ExitData(d) => Construct::ExitData(DataConstruct {
                device,
                ..d.clone()
            }),
            Construct::Update(d) => Construct::Update(DataConstruct {
                device,
                ..d.clone()
            }),
            _ => return None,
        })
    }
}

fn maps(m: &[MapItem]) -> impl Iterator<Item = Section> + '_ {
    m.iter().map(|m| m.section)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(bytes_here: u64, load_us: f64) -> DeviceScore {
        DeviceScore {
            bytes_here,
            load_us,
        }
    }

    #[test]
    fn most_bytes_then_least_load_then_lowest_id() {
        assert_eq!(choose(&[s(0, 0.0)]), 0);
        assert_eq!(choose(&[s(10, 9.0), s(20, 50.0)]), 1);
        assert_eq!(choose(&[s(0, 9.0), s(0, 5.0), s(0, 7.0)]), 1);
        assert_eq!(choose(&[s(4, 1.0), s(4, 1.0)]), 0);
    }
}
