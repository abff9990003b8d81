//! The proof of transfer elision ([`crate::lower::LowerOptions`], module docs of
//! `lower::elide`): every copy in [`OpGraph::elided`] is one no op can observe.
//!
//! Method: the graph is replayed in program order (op id order) in two worlds.
//! - The *reference* world runs every op, the elided copies where the reference makes
//!   them (before op `at`: an elided H2D copies the host bytes into the storage, a
//!   deferred D2H copies the storage into the host), and skips the write-backs (the
//!   D2H ops that carry a deferred copy out later).
//! - The *lowered* world runs the ops as they are: no elided copy, each write-back
//!   where it is.
//!
//! Each world tracks, per host buffer and per device allocation, which write each
//! element holds: an op id (the kernel or host task that wrote it), the program's
//! initial contents, or fresh zero storage; copies move these tags. An op that reads
//! (an H2D its host section, a kernel its device arguments, a D2H its storage, a host
//! task its sections, the end every buffer) must read the same tags in both worlds;
//! writes count as reads too (a kernel or closure may leave some elements as they
//! were). Since the reference world is the program without elision (in program order,
//! as the reference interpreter runs it), equal reads give equal results by induction
//! over the ops. The schedule's part, that any order it allows reads what program order
//! reads, is the edge proof of [`super::verify`]: the lowering's edges order every
//! conflicting pair of the lowered ops.
//!
//! A read that differs is a [`Violation::Elision`] naming the reading op's region, the
//! buffer, and the elided copy responsible (the last one of that storage or those host
//! bytes before the read) and, for a host write the elision missed, its op. One
//! violation per reading op; the lowered world then takes the reference's tags for
//! that range, so one fault is reported once.
//!
//! Complexity: `O((V + R + A) log P)` for `V` ops, `R` elided copies, `A` accesses and
//! `P` tagged pieces; nothing when the graph has no elided copy.

use super::Violation;
use crate::lower::{AllocId, ElidedCopy, KernelArg, OpGraph, OpId, OpKind};
use crate::model::Section;
use std::collections::{BTreeMap, BTreeSet};

/// Tag of the program's initial host contents.
const INITIAL: u64 = u64::MAX;
/// Tag of fresh (zero) device storage.
const ZERO: u64 = u64::MAX - 1;

/// Tags over element ranges: disjoint pieces `lo → (hi, tag)`, `default` elsewhere.
#[derive(Clone, Debug)]
struct Tags {
    map: BTreeMap<u64, (u64, u64)>,
    default: u64,
}

impl Tags {
    fn new(default: u64) -> Tags {
        Tags {
            map: BTreeMap::new(),
            default,
        }
    }

    /// The pieces of `[lo, hi)`, gaps filled with the default, neighbours of one tag
    /// merged.
    fn get(&self, lo: u64, hi: u64) -> Vec<(u64, u64, u64)> {
        let mut out: Vec<(u64, u64, u64)> = Vec::new();
        let push = |l: u64, h: u64, t: u64, out: &mut Vec<(u64, u64, u64)>| {
            if l >= h {
                return;
            }
            match out.last_mut() {
                Some(last) if last.1 == l && last.2 == t => last.1 = h,
                _ => out.push((l, h, t)),
            }
        };
        let mut at = lo;
        let start = self.map.range(..=lo).next_back().map_or(lo, |(&l, _)| l);
        for (&l, &(h, t)) in self.map.range(start..hi) {
            if h <= at {
                continue;
            }
            push(at, l.max(at), self.default, &mut out);
            push(l.max(at), h.min(hi), t, &mut out);
            at = h.min(hi);
        }
        push(at, hi, self.default, &mut out);
        out
    }

    fn cut(&mut self, lo: u64, hi: u64) {
        let start = self.map.range(..=lo).next_back().map_or(lo, |(&l, _)| l);
        let hit: Vec<(u64, u64, u64)> = self
            .map
            .range(start..hi)
            .filter(|(_, &(h, _))| h > lo)
            .map(|(&l, &(h, t))| (l, h, t))
            .collect();
        for (l, h, t) in hit {
            self.map.remove(&l);
            if l < lo {
                self.map.insert(l, (lo, t));
            }
            if hi < h {
                self.map.insert(hi, (h, t));
            }
        }
    }

    fn set(&mut self, lo: u64, hi: u64, tag: u64) {
        if lo < hi {
            self.cut(lo, hi);
            self.map.insert(lo, (hi, tag));
        }
    }

    fn put(&mut self, pieces: &[(u64, u64, u64)]) {
        for &(l, h, t) in pieces {
            self.set(l, h, t);
        }
    }
}

/// One world's memory: host buffers and device allocations.
#[derive(Clone)]
struct World {
    host: Vec<Tags>,
    dev: Vec<Tags>,
}

impl World {
    fn new(g: &OpGraph) -> World {
        World {
            host: vec![Tags::new(INITIAL); g.buffers.len()],
            dev: vec![Tags::new(ZERO); g.allocs.len()],
        }
    }
}

/// Where a read looks.
#[derive(Clone, Copy)]
enum Place {
    Host,
    Dev(AllocId),
}

struct Proof<'a> {
    g: &'a OpGraph,
    reference: World,
    lowered: World,
    violations: Vec<Violation>,
}

/// Proves every elided copy of `g` unobservable (module docs); pushes a
/// [`Violation::Elision`] per op that reads differently. Returns the number of elided
/// copies proven (0 when there is a violation). Out-of-range ids in records or ops are
/// skipped (the structural check reports ops; records come from the lowering).
pub(super) fn prove(g: &OpGraph, violations: &mut Vec<Violation>) -> usize {
    if g.elided.is_empty() {
        return 0;
    }
    let valid_alloc = |a: &AllocId| a.index() < g.allocs.len();
    let valid_sec = |s: &Section| s.buf.index() < g.buffers.len();
    let written_back: BTreeSet<OpId> = g
        .elided
        .iter()
        .filter_map(|e| match e {
            ElidedCopy::D2H { written_back, .. } => *written_back,
            _ => None,
        })
        .collect();
    let mut at: Vec<&ElidedCopy> = g.elided.iter().collect();
    at.sort_by_key(|e| e.at());
    let mut next = 0;
    let mut p = Proof {
        g,
        reference: World::new(g),
        lowered: World::new(g),
        violations: Vec::new(),
    };
    for i in 0..=g.ops.len() {
        while next < at.len() && at[next].at() as usize <= i {
            let e = at[next];
            next += 1;
            let (alloc, s) = match e {
                ElidedCopy::H2D { alloc, section, .. } | ElidedCopy::D2H { alloc, section, .. } => {
                    (*alloc, *section)
                }
            };
            if !valid_alloc(&alloc) || !valid_sec(&s) {
                continue;
            }
            let w = &mut p.reference;
            match e {
                ElidedCopy::H2D { .. } => {
                    let v = w.host[s.buf.index()].get(s.lo, s.end());
                    w.dev[alloc.index()].put(&v);
                }
                ElidedCopy::D2H { .. } => {
                    let v = w.dev[alloc.index()].get(s.lo, s.end());
                    w.host[s.buf.index()].put(&v);
                }
            }
        }
        if i < g.ops.len() {
            p.op(OpId(i as u32), &written_back);
        }
    }
    let proven = match p.violations.is_empty() {
        true => g.elided.len(),
        false => 0,
    };
    violations.append(&mut p.violations);
    proven
}

impl Proof<'_> {
    fn op(&mut self, id: OpId, written_back: &BTreeSet<OpId>) {
        let g = self.g;
        let ok_a = |a: &AllocId| a.index() < g.allocs.len();
        let ok_s = |s: &Section| s.buf.index() < g.buffers.len() && s.len > 0;
        let tag = id.0 as u64;
        match &g.op(id).kind {
            OpKind::Alloc { alloc } if ok_a(alloc) => {
                for w in [&mut self.reference, &mut self.lowered] {
                    w.dev[alloc.index()] = Tags::new(ZERO);
                }
            }
            OpKind::H2D { alloc, section } if ok_a(alloc) && ok_s(section) => {
                self.read(id, Place::Host, section);
                for w in [&mut self.reference, &mut self.lowered] {
                    let v = w.host[section.buf.index()].get(section.lo, section.end());
                    w.dev[alloc.index()].put(&v);
                }
            }
            OpKind::D2H { alloc, section } if ok_a(alloc) && ok_s(section) => {
                let back = written_back.contains(&id);
                if !back {
                    self.read(id, Place::Dev(*alloc), section);
                }
                let worlds: Vec<&mut World> = match back {
                    true => vec![&mut self.lowered],
                    false => vec![&mut self.reference, &mut self.lowered],
                };
                for w in worlds {
                    let v = w.dev[alloc.index()].get(section.lo, section.end());
                    w.host[section.buf.index()].put(&v);
                }
            }
            OpKind::PeerCopy { src, dst, section } if ok_a(src) && ok_a(dst) && ok_s(section) => {
                self.read(id, Place::Dev(*src), section);
                self.read(id, Place::Dev(*dst), section);
                for w in [&mut self.reference, &mut self.lowered] {
                    let v = w.dev[src.index()].get(section.lo, section.end());
                    w.dev[dst.index()].put(&v);
                }
            }
            OpKind::Kernel(call) => {
                let mut writes = Vec::new();
                for arg in &call.args {
                    if let KernelArg::Device {
                        alloc,
                        offset,
                        len,
                        access,
                    } = arg
                    {
                        if !ok_a(alloc) || *len == 0 {
                            continue;
                        }
                        let base = g.allocs[alloc.index()].section;
                        let s = Section::new(base.buf, base.lo + offset, *len);
                        self.read(id, Place::Dev(*alloc), &s);
                        if access.writes() {
                            writes.push((*alloc, s));
                        }
                    }
                }
                for (a, s) in writes {
                    for w in [&mut self.reference, &mut self.lowered] {
                        w.dev[a.index()].set(s.lo, s.end(), tag);
                    }
                }
            }
            OpKind::HostTask {
                reads,
                writes,
                call,
                ..
            } => {
                let mut host_args: Vec<(Section, bool)> = Vec::new();
                if let Some(c) = call {
                    for arg in &c.args {
                        if let KernelArg::Host { section, access } = arg {
                            host_args.push((*section, access.writes()));
                        }
                    }
                }
                let touched = reads
                    .iter()
                    .map(|s| (*s, false))
                    .chain(writes.iter().map(|s| (*s, true)))
                    .chain(host_args);
                let mut written = Vec::new();
                for (s, w) in touched.filter(|(s, _)| ok_s(s)) {
                    self.read(id, Place::Host, &s);
                    if w {
                        written.push(s);
                    }
                }
                for s in written {
                    for w in [&mut self.reference, &mut self.lowered] {
                        w.host[s.buf.index()].set(s.lo, s.end(), tag);
                    }
                }
            }
            OpKind::End => {
                for (b, buf) in g.buffers.iter().enumerate() {
                    let s = Section::new(crate::model::BufferId(b as u32), 0, buf.len);
                    if s.len > 0 {
                        self.read(id, Place::Host, &s);
                    }
                }
            }
            _ => {}
        }
    }

    /// Op `id` reads `s` at `place`: both worlds must hold the same tags there.
    fn read(&mut self, id: OpId, place: Place, s: &Section) {
        let (r, l) = match place {
            Place::Host => (
                self.reference.host[s.buf.index()].get(s.lo, s.end()),
                self.lowered.host[s.buf.index()].get(s.lo, s.end()),
            ),
            Place::Dev(a) => (
                self.reference.dev[a.index()].get(s.lo, s.end()),
                self.lowered.dev[a.index()].get(s.lo, s.end()),
            ),
        };
        if r == l {
            return;
        }
        if self
            .violations
            .iter()
            .any(|v| matches!(v, Violation::Elision { op, .. } if *op == id))
        {
            self.fix(place, s, &r);
            return;
        }
        let g = self.g;
        let region = g.region_of(id).name.clone();
        let buffer = g.buffers[s.buf.index()].name.clone();
        // The first element that differs, and who wrote it in the reference.
        let (lo, want) = first_difference(&r, &l);
        let by = match want {
            INITIAL => "the program's initial contents".to_string(),
            ZERO => "fresh device storage".to_string(),
            t => format!(
                "{} {} in region \"{}\"",
                OpId(t as u32),
                g.describe(OpId(t as u32)),
                g.region_of(OpId(t as u32)).name
            ),
        };
        let elided = self.blame(id, place, s);
        let (what, wher) = match place {
            Place::Host => ("host bytes", "the host".to_string()),
            Place::Dev(a) => (
                "device copy",
                format!(
                    "device storage of {}",
                    g.section_name(&g.allocs[a.index()].section)
                ),
            ),
        };
        let detail = format!(
            "{id} {} reads {} in {wher}, whose {what} at element {lo} differ from the \
             reference's (which hold the write of {by}){elided}",
            g.describe(id),
            g.section_name(s),
        );
        self.violations.push(Violation::Elision {
            op: id,
            region,
            buffer,
            detail,
        });
        self.fix(place, s, &r);
    }

    /// The lowered world takes the reference's tags `r` of `s` at `place` (a range
    /// already reported, so one fault is reported once).
    fn fix(&mut self, place: Place, s: &Section, r: &[(u64, u64, u64)]) {
        match place {
            Place::Host => self.lowered.host[s.buf.index()].put(r),
            Place::Dev(a) => self.lowered.dev[a.index()].put(r),
        }
    }

    /// The last elided copy before `id` that concerns the bytes read: of this storage
    /// for a device read, of these host bytes for a host read.
    fn blame(&self, id: OpId, place: Place, s: &Section) -> String {
        let g = self.g;
        let found = g.elided.iter().rev().find(|e| {
            let hit = match (place, e) {
                (Place::Dev(a), ElidedCopy::H2D { alloc, .. }) => *alloc == a,
                (Place::Dev(a), ElidedCopy::D2H { alloc, .. }) => *alloc == a,
                (Place::Host, e) => e.section().overlaps(s),
            };
            hit && e.at() <= id.0
        });
        match found {
            Some(ElidedCopy::H2D {
                region, section, ..
            }) => format!(
                "; the H2D of {} in region \"{}\" was elided, but the kept copy no longer \
                 equals the host bytes",
                g.section_name(section),
                g.regions[region.index()].name
            ),
            Some(ElidedCopy::D2H {
                region,
                section,
                written_back,
                ..
            }) => format!(
                "; the D2H of {} in region \"{}\" was {}",
                g.section_name(section),
                g.regions[region.index()].name,
                match written_back {
                    Some(op) => format!("deferred to {op}"),
                    None => "dropped".to_string(),
                }
            ),
            None => String::new(),
        }
    }
}

/// The first element where two tag lists differ, and the reference's tag there.
fn first_difference(r: &[(u64, u64, u64)], l: &[(u64, u64, u64)]) -> (u64, u64) {
    let tag_at =
        |v: &[(u64, u64, u64)], x: u64| v.iter().find(|p| p.0 <= x && x < p.1).map(|p| p.2);
    let mut points: Vec<u64> = r.iter().chain(l).map(|p| p.0).collect();
    points.sort_unstable();
    for x in points {
        if tag_at(r, x) != tag_at(l, x) {
            return (x, tag_at(r, x).unwrap_or(INITIAL));
        }
    }
    (
        r.first().map_or(0, |p| p.0),
        r.first().map_or(INITIAL, |p| p.2),
    )
}
