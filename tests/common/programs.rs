//! Random programs for property tests (issue 4, "Reliability"): a program is generated
//! as a list of small descriptors, so proptest shrinks it by dropping constructs, and
//! interpreted into a [`Program`] of up to 200 constructs (see tests/prop_programs.rs for
//! what they hold). Used by tests/prop_programs.rs and tests/schedule_text.rs, each with
//! `#[path = "common/programs.rs"] mod programs;` (not part of `common`, so the test
//! crates that do not generate programs do not compile it).

// Each test crate uses only some of it.
#![allow(dead_code)]

use offload_sched::model::{
    Arg, BufferId, DependType, ElemType, Init, MapItem, MapType, Program, ProgramBuilder, Section,
};
use proptest::prelude::*;

/// One buffer: element type index, length selector, init selector, section mode.
#[derive(Clone, Copy, Debug)]
pub struct BufDesc {
    pub ty: u8,
    pub len: u8,
    pub init: u8,
    pub halves: bool,
}

/// One construct; each field is interpreted modulo what it selects.
#[derive(Clone, Copy, Debug)]
pub struct Desc {
    pub kind: u8,
    pub a: u8,
    pub b: u8,
    pub sec: u8,
    pub map: u8,
    pub flags: u8,
}

#[derive(Clone, Debug)]
pub struct Gen {
    pub two_devices: bool,
    /// Allow constructs that may fail to lower (arbitrary ranges, `present`, unmapped
    /// arguments, `delete`); without it every program lowers.
    pub errors: bool,
    pub bufs: Vec<BufDesc>,
    pub body: Vec<Desc>,
}

pub fn buf_desc() -> impl Strategy<Value = BufDesc> {
    (0u8..5, any::<u8>(), 0u8..4, any::<bool>()).prop_map(|(ty, len, init, halves)| BufDesc {
        ty,
        len,
        init,
        halves,
    })
}

pub fn desc() -> impl Strategy<Value = Desc> {
    (
        0u8..13,
        any::<u8>(),
        any::<u8>(),
        any::<u8>(),
        any::<u8>(),
        any::<u8>(),
    )
        .prop_map(|(kind, a, b, sec, map, flags)| Desc {
            kind,
            a,
            b,
            sec,
            map,
            flags,
        })
}

pub fn gen() -> impl Strategy<Value = Gen> {
    (
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.25),
        prop::collection::vec(buf_desc(), 1..=8),
        prop::collection::vec(desc(), 1..=200),
    )
        .prop_map(|(two_devices, errors, bufs, body)| Gen {
            two_devices,
            errors,
            bufs,
            body,
        })
}

/// Interprets a [`Gen`] into a program.
struct Interp<'g> {
    g: &'g Gen,
    ids: Vec<BufferId>,
    lens: Vec<u64>,
    tys: Vec<ElemType>,
    next: usize,
    /// Sections mapped by the enclosing `target data` constructs, with their device.
    held: Vec<(u32, Section)>,
}

impl Interp<'_> {
    fn buf(&self, sel: u8) -> usize {
        sel as usize % self.ids.len()
    }

    /// A section of buffer `i`: the whole buffer, or one half for a buffer in halves
    /// mode; selector 7 picks an arbitrary (possibly overlapping) range to exercise the
    /// mapping errors.
    fn section(&self, i: usize, sel: u8) -> Section {
        let n = self.lens[i];
        let id = self.ids[i];
        if self.g.errors && sel % 16 == 7 {
            let lo = (sel as u64 / 16) % n;
            return Section::new(id, lo, (n - lo).min(1 + sel as u64 % 5));
        }
        if self.g.bufs[i].halves {
            let h = n / 2;
            if sel.is_multiple_of(2) {
                Section::new(id, 0, h)
            } else {
                Section::new(id, h, n - h)
            }
        } else {
            Section::new(id, 0, n)
        }
    }

    /// A buffer of the same element type as buffer `i`, other than `i` if one exists.
    fn partner(&self, i: usize, sel: u8) -> Option<usize> {
        let same: Vec<usize> = (0..self.ids.len())
            .filter(|&j| j != i && self.tys[j] == self.tys[i])
            .collect();
        (!same.is_empty()).then(|| same[sel as usize % same.len()])
    }

    fn name(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}{}", self.next)
    }

    fn device(&self, d: &Desc) -> u32 {
        if self.g.two_devices {
            (d.flags >> 6) as u32 % 2
        } else {
            0
        }
    }

    /// `always` on a quarter of the items; `present` on some when errors are allowed, or
    /// when the section is held by an enclosing `target data` of the same device (which
    /// no exit can release then: exits never name held sections without errors).
    fn modifiers(&self, m: MapItem, bits: u8, dev: u32) -> MapItem {
        let m = if bits % 4 == 1 { m.always() } else { m };
        let held = self
            .held
            .iter()
            .any(|(d, s)| *d == dev && s.contains(&m.section));
        if bits % 16 == 3 && (self.g.errors || held) {
            m.present()
        } else {
            m
        }
    }

    fn region(&mut self, p: &mut ProgramBuilder, d: &Desc) {
        let i = self.buf(d.a);
        let s = self.section(i, d.sec);
        let dev = self.device(d);
        // Reborrow-free: `self.name` needs `&mut self` while `p.target` holds `p`.
        let name = self.name("r");
        // (kernel, scalar before buffers, scalar after buffers, second buffer)
        let (kernel, second) = match d.b % 6 {
            0 => ("increment", None),
            1 => ("add_scalar", None),
            2 => ("fill", None),
            3 => ("scale", None),
            4 => match self.partner(i, d.b / 6) {
                Some(j) => ("copy", Some(j)),
                None => ("increment", None),
            },
            _ => match self.partner(i, d.b / 6) {
                Some(j) => ("saxpy", Some(j)),
                None => ("add_scalar", None),
            },
        };
        let small = (d.map / 16 % 4) as f64;
        let s2 = second.map(|j| self.section(j, d.sec / 2));
        // The written section's map: tofrom, to, from or alloc; the read one's: to/tofrom.
        let wmap = match d.map % 4 {
            0 | 1 => MapType::ToFrom,
            2 => MapType::From,
            _ => {
                if d.map % 8 == 3 {
                    MapType::Alloc
                } else {
                    MapType::To
                }
            }
        };
        let mut r = p.target(&name, kernel).device(dev);
        match kernel {
            "increment" => r = r.arg(s),
            "add_scalar" | "fill" => r = r.arg(s).num(small),
            "scale" => r = r.num(small.min(2.0)).arg(s),
            "copy" => r = r.arg(s2.unwrap_or(s)).arg(s),
            _ => r = r.num(small).arg(s2.unwrap_or(s)).arg(s),
        }
        // Rarely leave the written section unmapped.
        if !self.g.errors || d.flags % 32 != 31 {
            r = r.map_item(self.modifiers(MapItem::new(wmap, s), d.flags >> 2, dev));
        }
        if let Some(s2) = s2 {
            let t = if d.flags.is_multiple_of(2) {
                MapType::To
            } else {
                MapType::ToFrom
            };
            r = r.map_item(self.modifiers(MapItem::new(t, s2), d.flags >> 4, dev));
        }
        if d.flags.is_multiple_of(3) {
            r = r.nowait();
        }
        match d.sec / 32 % 4 {
            1 => r = r.depend(DependType::InOut, s),
            2 => r = r.depend(DependType::Out, s),
            3 => {
                if let Some(s2) = s2 {
                    r = r.depend(DependType::In, s2);
                }
            }
            _ => {}
        }
        drop(r);
    }

    /// 1-3 map items of `types`; for an exit without errors allowed, items on sections
    /// held by an enclosing `target data` are left out (they could release its entry
    /// and break a later `present`), so the list may be empty.
    fn data_maps(&self, d: &Desc, types: &[MapType], dev: u32, exit: bool) -> Vec<MapItem> {
        let n = 1 + d.b as usize % 3;
        (0..n)
            .map(|k| {
                let sel = d.a.wrapping_add(k as u8 * 37);
                let i = self.buf(sel);
                let s = self.section(i, d.sec.wrapping_add(k as u8));
                let t = types[(d.map as usize + k) % types.len()];
                self.modifiers(MapItem::new(t, s), d.flags.wrapping_add(k as u8 * 5), dev)
            })
            .filter(|m| {
                self.g.errors
                    || !exit
                    || !self
                        .held
                        .iter()
                        .any(|(hd, h)| *hd == dev && h.overlaps(&m.section))
            })
            .collect()
    }

    fn data_construct(&mut self, p: &mut ProgramBuilder, d: &Desc, which: u8) {
        let dev = self.device(d);
        let exits: &[MapType] = if self.g.errors {
            &[MapType::From, MapType::Release, MapType::Delete]
        } else {
            &[MapType::From, MapType::Release]
        };
        let (prefix, maps) = match which {
            0 => (
                "enter",
                self.data_maps(d, &[MapType::To, MapType::Alloc], dev, false),
            ),
            1 => ("exit", self.data_maps(d, exits, dev, true)),
            _ => (
                "upd",
                self.data_maps(d, &[MapType::To, MapType::From], dev, false),
            ),
        };
        let Some(first) = maps.first().map(|m| m.section) else {
            return;
        };
        let name = self.name(prefix);
        let mut c = match which {
            0 => p.enter_data(&name, maps),
            1 => p.exit_data(&name, maps),
            _ => p.update(&name, maps),
        }
        .device(dev);
        if d.flags.is_multiple_of(3) {
            c = c.nowait();
        }
        if d.sec / 64 == 1 {
            c = c.depend(DependType::InOut, first);
        }
        drop(c);
    }

    fn host(&mut self, p: &mut ProgramBuilder, d: &Desc) {
        let i = self.buf(d.a);
        let s = self.section(i, d.sec);
        let name = self.name("h");
        match d.b % 3 {
            0 => {
                p.host_kernel(&name, "increment", vec![Arg::Buffer(s)]);
            }
            1 => {
                p.host_kernel(
                    &name,
                    "add_scalar",
                    vec![Arg::Buffer(s), Arg::Number((d.map % 4) as f64)],
                );
            }
            _ => {
                p.host_task(&name, &[s.into()], &[]);
            }
        }
    }

    /// Emits `body[*at..]` until a close marker at this depth (or the end).
    fn emit(&mut self, p: &mut ProgramBuilder, at: &mut usize, depth: usize) {
        while *at < self.g.body.len() {
            let d = self.g.body[*at];
            *at += 1;
            match d.kind {
                0..=4 => self.region(p, &d),
                5 => self.data_construct(p, &d, 0),
                6 => self.data_construct(p, &d, 1),
                7 => self.data_construct(p, &d, 2),
                8 => {
                    p.taskwait();
                }
                9 => self.host(p, &d),
                10 if depth < 4 => {
                    // The builder's target data is on device 0.
                    let dev = 0;
                    let maps = self.data_maps(
                        &d,
                        &[MapType::ToFrom, MapType::To, MapType::From, MapType::Alloc],
                        dev,
                        false,
                    );
                    let name = self.name("data");
                    let held = self.held.len();
                    self.held.extend(maps.iter().map(|m| (dev, m.section)));
                    p.target_data(&name, maps, |p| self.emit(p, at, depth + 1));
                    self.held.truncate(held);
                }
                11 | 12 if depth > 0 => return,
                _ => self.region(p, &d),
            }
        }
    }
}

pub fn build(g: &Gen) -> Program {
    let mut p = ProgramBuilder::new("prop");
    if g.two_devices {
        p.devices(2);
    }
    let mut interp = Interp {
        g,
        ids: Vec::new(),
        lens: Vec::new(),
        tys: Vec::new(),
        next: 0,
        held: Vec::new(),
    };
    for (k, b) in g.bufs.iter().enumerate() {
        let ty = ElemType::ALL[b.ty as usize % 5];
        let len = 2 + (b.len as u64 % 63);
        let init = match b.init {
            0 => Init::Zeros,
            1 => Init::Iota,
            2 => Init::Fill((b.len % 7) as f64),
            _ => Init::Random(b.len as u64),
        };
        interp.ids.push(p.buffer(&format!("b{k}"), ty, len, init));
        interp.lens.push(len);
        interp.tys.push(ty);
    }
    let mut at = 0;
    interp.emit(&mut p, &mut at, 0);
    p.build()
}

/// The proptest configuration of the random-program properties: `PROPTEST_CASES`
/// cases (64 when unset).
pub fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}
