//! Transfer elision: device copies as a cache the lowering reasons about statically
//! ([design notes](crate::design) "Data movement"; issue 28).
//!
//! # Why it is possible
//!
//! Every host access of a program is known when it is lowered: host tasks (their
//! declared sections, a host kernel's arguments, a Rust closure's views), the H2D and
//! D2H copies the mapping rules decide, and the end of the program, which reads every
//! buffer. Nothing else touches host memory while a run is in flight (bound buffers are
//! borrowed for the run). So the lowering can tell, in program order, which copies no
//! one can observe, and leave them out. Results stay exactly those of the reference
//! interpreter ([`crate::reference`]), which never elides; the mapping rules (reference
//! counts, `present`, `always`, `delete`, target data / enter / exit / update) are
//! decided exactly as without elision, on the same mapping table. Only the *storage* and
//! the *copies* change.
//!
//! # The two elisions
//!
//! (a) **Kept copies, elided H2D.** When an entry's count reaches 0 and its storage
//! would be freed, the storage is *kept* instead (its `Free` deferred) if a later
//! construct names the same section with a `to` motion (the whole program is known: a
//! count made before lowering) and it is *clean*:
//! its whole contents equal the host section as the reference has it at that point. A
//! later entry of exactly the same section on the same device with a `to` motion (`to`,
//! `tofrom`) that finds the section absent from the mapping table (so a new entry,
//! count 1, as without elision) takes the kept storage instead of a new `Alloc`, and
//! its H2D copies are left out: the device already holds those bytes. An `always` `to`
//! still copies ("always forces the copy"). An entry without `to` (`alloc`, `from`)
//! never takes a kept copy: fresh storage reads as zero bytes in this project (see
//! [`super::DeviceAlloc::zero`]), and the reference's values must not change.
//!
//! Clean is tracked per allocation in program order: a full-section H2D or D2H makes
//! it clean (device and host bytes are then equal); a kernel write, or a host write of
//! any of its host bytes (a host task, a closure, a D2H of another allocation), makes it
//! dirty. A kept copy whose host bytes are written (by a host task, a closure that
//! declared them, any D2H into them) is *evicted*: freed, never reused. A Rust
//! closure's read sections count as written too (conservative: the closure is code the
//! lowering cannot see).
//!
//! (b) **Deferred D2H.** The D2H copies of a construct whose storage is kept are not
//! issued where the mapping rules put them: they are *pending*, and written back (the
//! D2H op emitted) just before the first later access that could observe them: a host
//! read or write of those host bytes (host task, closure, an H2D of any allocation from
//! them, a D2H into overlapping bytes that does not cover them), a device write of the
//! kept storage's bytes (a kernel writing it, unless the same construct copies those
//! bytes back again, see below), the storage's eviction, and the end of the program. A
//! pending D2H that a later D2H of a section containing it replaces before anything
//! observed it is dropped: the host bytes it would have written are overwritten first.
//! So the tiles of a blocked matmul with per-region `map(tofrom: C(i,j))` are copied
//! back once, at the end.
//!
//! Where the write-backs go: in the region of the device construct that needs them (at
//! its start, before its first op, so the region stays on one stream), or, before a host
//! task, a `taskwait` (which writes back every pending D2H, so its host wait covers
//! them) and the program's end, in regions of their own named `writeback`, one per
//! allocation ([`super::RegionKind::Writeback`], `nowait`, device 0), so that each can
//! continue on the stream of the storage's last writer without an event. Evictions
//! (`Free`) go the same way.
//!
//! # Invariants the pass keeps
//!
//! - Pending D2H sections are pairwise disjoint in host bytes (a new one flushes or
//!   drops every pending one it overlaps), so the order in which they are written back
//!   does not matter.
//! - A pending D2H's storage bytes are unchanged since the point the reference copies
//!   them (device writes flush first), and nothing read its host bytes since.
//! - A kept copy is clean, and no host write has touched its section since it was kept.
//!
//! # Scope and limits
//!
//! Single-device programs only (with several devices the lowering tracks which device
//! holds the latest bytes, `latest.rs`; elision is off there). Elision works within one
//! run: every kept copy is freed and every pending D2H written back before the program's
//! `End`, so nothing carries over between runs of a plan. Kept copies are bounded by
//! [`LowerOptions::keep_limit_bytes`] per program or, with a device memory cap
//! ([`LowerOptions::device_memory`], `lower/cap.rs`), by the cap: evicted when an
//! `Alloc` needs their room; either way the victim is chosen by
//! [`LowerOptions::eviction`] (`lower/evict.rs`: furthest next use by default).
//!
//! # Proof
//!
//! Every elision is recorded in [`super::OpGraph::elided`] ([`ElidedCopy`], where the
//! reference would have copied). The verifier (`verify/elision.rs`) replays the graph in
//! program order twice, as the reference (with the recorded copies) and as lowered
//! (without them, write-backs where they are), tracking which write each byte holds, and
//! proves that every op reads the same bytes in both; with every edge ordered by the
//! schedule, any order the schedule allows reads them too.
//!
//! Complexity: the pending and kept sets are ordered maps over host element ranges, so
//! each access costs `O(log n + k)` for `n` kept or pending entries and `k` it overlaps.

use super::builder::{ConstructOps, DeviceAccess, Lowerer};
use super::deps::Space;
use super::written::Written;
use super::{AllocId, LowerOptions, OpId, OpKind, RegionId, RegionKind};
use crate::model::Section;
use std::collections::{BTreeMap, BTreeSet};

/// A copy the mapping rules name that the lowering left out or moved
/// ([`super::OpGraph::elided`]); `at` is where the reference makes it: just before op
/// `OpId(at)` (after every op of lower id), in region `region`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ElidedCopy {
    /// An H2D of `section` into `alloc` not issued: the storage, kept from an earlier
    /// construct, already holds those host bytes. `reuse`: this construct took the kept
    /// storage (instead of an `Alloc`); false for a further section of it.
    H2D {
        region: RegionId,
        alloc: AllocId,
        section: Section,
        at: u32,
        reuse: bool,
    },
    /// A D2H of `section` from `alloc` deferred: `written_back` is the D2H op that
    /// copies it later, `None` when a later D2H of a section containing it replaced it
    /// (the copy is dropped).
    D2H {
        region: RegionId,
        alloc: AllocId,
        section: Section,
        at: u32,
        written_back: Option<OpId>,
    },
}

impl ElidedCopy {
    /// The construct whose copy this is.
    pub fn region(&self) -> RegionId {
        match self {
            ElidedCopy::H2D { region, .. } | ElidedCopy::D2H { region, .. } => *region,
        }
    }

    /// The host section copied.
    pub fn section(&self) -> Section {
        match self {
            ElidedCopy::H2D { section, .. } | ElidedCopy::D2H { section, .. } => *section,
        }
    }

    /// Where the reference makes the copy (before op `OpId(at)`).
    pub fn at(&self) -> u32 {
        match self {
            ElidedCopy::H2D { at, .. } | ElidedCopy::D2H { at, .. } => *at,
        }
    }
}

/// Bytes of copies the lowering left out ([`super::OpGraph::elided_bytes`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ElidedBytes {
    /// H2D bytes not copied (kept copies reused).
    pub h2d: u64,
    /// D2H bytes never copied (pending copies a later one replaced).
    pub d2h: u64,
    /// D2H bytes copied later than the mapping rules put them (written back).
    pub d2h_deferred: u64,
    /// Bytes of kept copies freed before their next use to make room
    /// ([`super::OpGraph::evictions`]): by the keep limit, or by the device memory cap.
    /// A kept copy freed because its host bytes were written, or at the program's end,
    /// is not counted (it had no next use to lose).
    pub evicted: u64,
    /// H2D bytes issued ahead of need on a copy stream ([`super::OpGraph::prefetches`],
    /// `lower/prefetch.rs`; [`LowerOptions::prefetch`]).
    pub prefetched: u64,
}

/// A kept copy freed before its next use to make room ([`super::OpGraph::evictions`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Eviction {
    /// The kept storage freed.
    pub alloc: AllocId,
    /// Its `Free` op.
    pub free: OpId,
}

/// Host element ranges with a key each, by buffer: `(buf, lo, key) → hi`, with overlap
/// queries in `O(log n + k)` (a query starts the longest range stored before its `lo`).
#[derive(Clone, Debug, Default)]
struct Ranges {
    map: BTreeMap<(u32, u64, u32), u64>,
    longest: u64,
}

impl Ranges {
    fn insert(&mut self, s: &Section, key: u32) {
        self.longest = self.longest.max(s.len);
        self.map.insert((s.buf.0, s.lo, key), s.end());
    }

    fn remove(&mut self, s: &Section, key: u32) {
        self.map.remove(&(s.buf.0, s.lo, key));
    }

    /// Keys of the ranges overlapping `s`, ascending.
    fn overlapping(&self, s: &Section) -> Vec<u32> {
        if s.len == 0 {
            return Vec::new();
        }
        let from = (s.buf.0, s.lo.saturating_sub(self.longest), 0);
        let mut keys: Vec<u32> = self
            .map
            .range(from..(s.buf.0, s.end(), 0))
            .filter(|(_, &hi)| hi > s.lo)
            .map(|(&(_, _, k), _)| k)
            .collect();
        keys.sort_unstable();
        keys
    }

    fn keys(&self) -> Vec<u32> {
        let mut keys: Vec<u32> = self.map.keys().map(|k| k.2).collect();
        keys.sort_unstable();
        keys
    }
}

/// The pass's state during one lowering (see the module docs).
#[derive(Clone, Debug, Default)]
pub(super) struct Elide {
    on: bool,
    keep_limit: u64,
    /// Per allocation: device bytes equal the reference's host bytes (whole section).
    clean: Vec<bool>,
    /// Kept storage by host section (key: allocation id).
    kept: Ranges,
    /// Kept allocation → when it was kept (the latest is taken first).
    kept_at: BTreeMap<AllocId, u64>,
    /// The kept copies in eviction order (`lower/evict.rs`).
    pub(super) victims: super::evict::Victims,
    pub(super) kept_bytes: u64,
    stamp: u64,
    /// Pending D2H by host section (key: index into `OpGraph::elided`).
    pending: Ranges,
    /// Per host section: how many map items (or implicitly mapped arguments) of
    /// constructs not yet entered name it with a `to` motion (`future_uses`). Storage is
    /// kept only while some later construct may take it.
    future: BTreeMap<Section, u64>,
}

/// Counts, per host section, the map items with a `to` motion and the buffer arguments
/// of target regions no map item covers (mapped implicitly `tofrom` unless present) in
/// `body`, a taskgraph's
/// body `repeat` times. An over-count keeps a copy longer, an under-count loses an
/// elision: neither changes a result. `O(items)`.
fn future_uses(body: &[crate::model::Construct], times: u64, out: &mut BTreeMap<Section, u64>) {
    use crate::model::Construct;
    let add = |s: &Section, out: &mut BTreeMap<Section, u64>| {
        *out.entry(*s).or_default() += times;
    };
    for c in body {
        match c {
            Construct::Target(t) => {
                for m in t.maps.iter().filter(|m| m.map_type.has_to()) {
                    add(&m.section, out);
                }
                for s in t.unmapped_args() {
                    add(&s, out);
                }
            }
            Construct::EnterData(d) => {
                for m in d.maps.iter().filter(|m| m.map_type.has_to()) {
                    add(&m.section, out);
                }
            }
            Construct::TargetData(d) => {
                for m in d.maps.iter().filter(|m| m.map_type.has_to()) {
                    add(&m.section, out);
                }
                future_uses(&d.body, times, out);
            }
            Construct::Taskgraph(t) => future_uses(&t.body, times * u64::from(t.repeat), out),
            _ => {}
        }
    }
}

impl Elide {
    pub(super) fn new(opts: &LowerOptions, p: &crate::model::Program, devices: u32) -> Elide {
        let on = opts.elide && devices == 1;
        let mut future = BTreeMap::new();
        if on {
            future_uses(&p.body, 1, &mut future);
        }
        let victims = match on {
            true => super::evict::Victims::new(opts.eviction, &p.body),
            false => Default::default(),
        };
        Elide {
            on,
            keep_limit: match opts.device_memory {
                Some(_) => u64::MAX,
                None => opts.keep_limit_bytes,
            },
            victims,
            future,
            ..Elide::default()
        }
    }

    /// A construct entered a map item (or implicit map) of `s`: one future use fewer.
    pub(super) fn entered(&mut self, s: &Section) {
        if let Some(n) = self.future.get_mut(s) {
            *n = n.saturating_sub(1);
        }
    }

    /// Whether a later construct may take kept storage of `s`.
    fn used_later(&self, s: &Section) -> bool {
        self.future.get(s).is_some_and(|&n| n > 0)
    }

    pub(super) fn on(&self) -> bool {
        self.on
    }

    /// The lowering moved on to its next construct (for next-use positions).
    pub(super) fn advance(&mut self) {
        if self.on {
            self.victims.advance();
        }
    }

    fn set_clean(&mut self, a: AllocId, v: bool) {
        if self.clean.len() <= a.index() {
            self.clean.resize(a.index() + 1, false);
        }
        self.clean[a.index()] = v;
    }

    fn is_clean(&self, a: AllocId) -> bool {
        self.clean.get(a.index()).copied().unwrap_or(false)
    }
}

impl Lowerer<'_> {
    fn pending_copy(&self, r: u32) -> (AllocId, Section) {
        match &self.g.elided[r as usize] {
            ElidedCopy::D2H { alloc, section, .. } => (*alloc, *section),
            ElidedCopy::H2D { .. } => unreachable!("pending entries are D2H records"),
        }
    }

    /// Entry of `s` (absent from the table) with a `to` motion: the kept storage of
    /// exactly `s` on `device`, taken out of the kept set, or `None`.
    pub(super) fn take_kept(&mut self, device: u32, s: &Section) -> Option<AllocId> {
        if !self.elide.on || s.len == 0 {
            return None;
        }
        let a = self
            .elide
            .kept
            .overlapping(s)
            .into_iter()
            .map(AllocId)
            .filter(|a| {
                let d = &self.g.allocs[a.index()];
                d.section == *s && d.device == device
            })
            .max_by_key(|a| self.elide.kept_at.get(a).copied())?;
        self.unkeep(a);
        // Equivalent to a full H2D of the section (the bytes are there).
        self.written[a.index()].add(s.lo, s.end());
        Some(a)
    }

    fn unkeep(&mut self, a: AllocId) {
        let s = self.storage(a);
        self.elide.kept.remove(&s, a.0);
        self.elide.kept_at.remove(&a);
        self.elide.victims.unkept(a);
        self.elide.kept_bytes -= self.g.allocs[a.index()].bytes;
    }

    /// Emits the write-back of pending D2H `r` (taking `first` as extra predecessors).
    fn flush(&mut self, r: u32, region: RegionId, device: u32, first: &mut Vec<OpId>) -> OpId {
        let (a, s) = self.pending_copy(r);
        self.elide.pending.remove(&s, r);
        let mut p = std::mem::take(first);
        let id = OpId(self.g.ops.len() as u32);
        let (b, lo, len) = (s.buf.index(), s.lo, s.len);
        self.deps.read(Space::Alloc(a), b, lo, len, id, &mut p);
        self.deps.write(Space::Host, b, lo, len, id, &mut p);
        let op = self.push(
            OpKind::D2H {
                alloc: a,
                section: s,
            },
            region,
            device,
            p,
        );
        if let ElidedCopy::D2H { written_back, .. } = &mut self.g.elided[r as usize] {
            *written_back = Some(op);
        }
        op
    }

    /// Writes back the pending D2H of storage `a` (those still pending from when it was
    /// kept), each as an op of `region` on `device`, its id pushed to `ids`.
    fn write_back_storage(
        &mut self,
        a: AllocId,
        region: RegionId,
        device: u32,
        first: &mut Vec<OpId>,
        ids: &mut Vec<OpId>,
    ) {
        let s = self.storage(a);
        for r in self.elide.pending.overlapping(&s) {
            if self.pending_copy(r).0 == a {
                ids.push(self.flush(r, region, device, first));
            }
        }
    }

    /// Frees live storage `a` at the end of its last entry, its pending D2H (from when
    /// it was kept, before this construct took it) written back first.
    pub(super) fn release(
        &mut self,
        a: AllocId,
        region: RegionId,
        device: u32,
        first: &mut Vec<OpId>,
        ids: &mut Vec<OpId>,
    ) {
        self.write_back_storage(a, region, device, first, ids);
        ids.push(self.free_storage(a, region, device, first));
    }

    /// Frees kept storage `a` (its pending D2H written back first).
    pub(super) fn evict(
        &mut self,
        a: AllocId,
        region: RegionId,
        device: u32,
        first: &mut Vec<OpId>,
        ids: &mut Vec<OpId>,
    ) {
        // Untracking the kept copy touches no pending D2H: release writes them back.
        self.unkeep(a);
        self.release(a, region, device, first, ids);
    }

    /// Emits the `Free` of `a` and forgets its tracking.
    pub(super) fn free_storage(
        &mut self,
        a: AllocId,
        region: RegionId,
        device: u32,
        first: &mut Vec<OpId>,
    ) -> OpId {
        let s = self.storage(a);
        let mut p = std::mem::take(first);
        let id = OpId(self.g.ops.len() as u32);
        // The free follows every use of this allocation (and only of this one).
        self.deps
            .write(Space::Alloc(a), s.buf.index(), s.lo, s.len, id, &mut p);
        self.deps.retire(a);
        self.written[a.index()] = Written::default();
        self.kernel_wrote[a.index()] = false;
        self.latest.forget(&s, a);
        self.elide.set_clean(a, false);
        let free = self.push(OpKind::Free { alloc: a }, region, device, p);
        self.cap_freed(a, free);
        free
    }

    /// Write-backs and evictions a device construct needs before its ops (module docs
    /// (b)), emitted at its region's start. `accesses`: its kernel's.
    pub(super) fn elide_prepass(
        &mut self,
        region: RegionId,
        device: u32,
        plan: &ConstructOps,
        accesses: Option<&[DeviceAccess]>,
        first: &mut Vec<OpId>,
        ids: &mut Vec<OpId>,
    ) {
        // The construct's `depend` and `after` predecessors order its own ops, not these
        // write-backs and evictions of earlier constructs' storage: their data edges (the
        // storage's last writer, the host bytes' earlier readers and writers) are all
        // they need. Handing them the predecessors would order every later reader of the
        // written-back bytes after this construct's predecessors too (Task Bench
        // stencil_1d_periodic: task (1, 1) after (0, 5), through the write-back that
        // task (1, 0) makes of (0, 0)'s output). So they take none when an op of the
        // construct's own follows (an Alloc, an H2D or the kernel takes them then);
        // otherwise the predecessors stay on the first op, so a construct's `depend`
        // chain still passes through it.
        let own_op_follows = !plan.allocs.is_empty() || !plan.h2d.is_empty() || accesses.is_some();
        let mut none = Vec::new();
        let first = if own_op_follows { &mut none } else { first };
        let mut flush = BTreeSet::new();
        let mut drop = BTreeSet::new();
        let mut evict = BTreeSet::new();
        // Host reads: an H2D from host bytes a pending D2H has not written yet.
        for (_, s) in &plan.h2d {
            flush.extend(self.elide.pending.overlapping(s));
        }
        // Device writes of storage whose bytes a pending D2H still has to copy.
        for &(a, s, acc, _, _) in accesses.unwrap_or(&[]) {
            if !acc.writes() {
                continue;
            }
            for r in self.elide.pending.overlapping(&s) {
                let (pa, ps) = self.pending_copy(r);
                if pa != a {
                    continue;
                }
                let again = plan.d2h.iter().any(|(b, t)| *b == a && t.contains(&ps));
                match again {
                    true => drop.insert(r),
                    false => flush.insert(r),
                };
            }
        }
        // Host writes by this construct's D2H copies.
        for (_, s) in &plan.d2h {
            for r in self.elide.pending.overlapping(s) {
                match s.contains(&self.pending_copy(r).1) {
                    true => drop.insert(r),
                    false => flush.insert(r),
                };
            }
            evict.extend(self.elide.kept.overlapping(s).into_iter().map(AllocId));
        }
        for r in flush.iter().copied() {
            ids.push(self.flush(r, region, device, first));
        }
        for r in drop.difference(&flush).copied() {
            let s = self.pending_copy(r).1;
            self.elide.pending.remove(&s, r);
        }
        for a in evict {
            self.evict(a, region, device, first, ids);
        }
    }

    /// Records an H2D left out (the construct took kept storage), where it would be.
    pub(super) fn record_elided_h2d(&mut self, region: RegionId, a: AllocId, s: Section) {
        let reuse = self.storage(a) == s;
        self.g.elided.push(ElidedCopy::H2D {
            region,
            alloc: a,
            section: s,
            at: self.g.ops.len() as u32,
            reuse,
        });
        self.elide.set_clean(a, true);
    }

    /// After an H2D of `s` into `a`: a full-section copy makes it clean.
    pub(super) fn copied_in(&mut self, a: AllocId, s: &Section) {
        if self.storage(a) == *s {
            self.elide.set_clean(a, true);
        }
    }

    /// After a D2H of `s` from `a`: a full-section copy makes it clean.
    pub(super) fn copied_out(&mut self, a: AllocId, s: &Section) {
        self.copied_in(a, s);
    }

    /// A kernel wrote `a`.
    pub(super) fn device_wrote(&mut self, a: AllocId) {
        self.elide.set_clean(a, false);
    }

    /// The allocations among a construct's frees to keep instead (clean once the
    /// construct's D2H copies are done, within the keep limit).
    pub(super) fn to_keep(&self, plan: &ConstructOps) -> Vec<AllocId> {
        if !self.elide.on {
            return Vec::new();
        }
        plan.frees
            .iter()
            .copied()
            .filter(|&a| {
                let full = self.storage(a);
                let bytes = self.g.allocs[a.index()].bytes;
                bytes <= self.elide.keep_limit
                    && self.elide.used_later(&full)
                    && (self.elide.is_clean(a)
                        || plan.d2h.iter().any(|(b, s)| *b == a && *s == full))
            })
            .collect()
    }

    /// Defers the D2H of `s` from kept storage `a` (module docs (b)).
    pub(super) fn defer_d2h(&mut self, region: RegionId, a: AllocId, s: Section) {
        let r = self.g.elided.len() as u32;
        self.g.elided.push(ElidedCopy::D2H {
            region,
            alloc: a,
            section: s,
            at: self.g.ops.len() as u32,
            written_back: None,
        });
        self.elide.pending.insert(&s, r);
        self.read_storage(a, &s);
        self.latest.host_latest(&s);
        self.copied_out(a, &s);
    }

    /// Keeps storage `a` instead of freeing it, evicting kept copies
    /// ([`LowerOptions::eviction`]'s order) while the kept bytes would exceed the limit.
    pub(super) fn keep(
        &mut self,
        a: AllocId,
        region: RegionId,
        device: u32,
        first: &mut Vec<OpId>,
        ids: &mut Vec<OpId>,
    ) {
        let bytes = self.g.allocs[a.index()].bytes;
        while self.elide.kept_bytes + bytes > self.elide.keep_limit {
            let Some(old) = self.kept_victim(device) else {
                break;
            };
            self.evict_for_room(old, region, device, first, ids);
        }
        let s = self.storage(a);
        self.elide.kept.insert(&s, a.0);
        self.elide.stamp += 1;
        self.elide.kept_at.insert(a, self.elide.stamp);
        self.elide.victims.kept(a, &s);
        self.elide.kept_bytes += bytes;
    }

    /// Before a host task reading `reads` and writing `writes` (`closure`: it runs Rust
    /// code, whose read sections count as written): write back the pending D2H it could
    /// observe, evict the kept copies it could change, and mark live storage it changes
    /// dirty. The ops go in a `writeback` region of their own.
    pub(super) fn elide_before_host(
        &mut self,
        reads: &[Section],
        writes: &[Section],
        closure: bool,
    ) {
        if !self.elide.on {
            return;
        }
        let written: Vec<Section> = match closure {
            true => writes.iter().chain(reads).copied().collect(),
            false => writes.to_vec(),
        };
        let mut flush = BTreeSet::new();
        let mut evict = BTreeSet::new();
        for s in reads.iter().chain(&written) {
            flush.extend(self.elide.pending.overlapping(s));
        }
        for s in &written {
            evict.extend(self.elide.kept.overlapping(s).into_iter().map(AllocId));
            for d in 0..self.tables.len() {
                let live = match self.tables[d].lookup(s) {
                    super::mapping::Lookup::Inside(e) | super::mapping::Lookup::Extends(e) => {
                        vec![e]
                    }
                    super::mapping::Lookup::Spans(v) => v,
                    super::mapping::Lookup::Absent => Vec::new(),
                };
                for e in live {
                    self.elide.set_clean(e.alloc, false);
                }
            }
        }
        self.write_back(flush, evict);
    }

    /// Writes back pending D2H `flush` and evicts kept copies `evict`, one `writeback`
    /// region per allocation (so each can run on the stream of the storage's last
    /// writer, with no event), in allocation order.
    fn write_back(&mut self, flush: BTreeSet<u32>, evict: BTreeSet<AllocId>) {
        let mut per: BTreeMap<AllocId, (Vec<u32>, bool)> = BTreeMap::new();
        for r in flush {
            per.entry(self.pending_copy(r).0).or_default().0.push(r);
        }
        for a in evict {
            per.entry(a).or_default().1 = true;
        }
        for (a, (rs, free)) in per {
            self.writeback_region(|l, r, ids| {
                let mut first = Vec::new();
                for k in rs {
                    ids.push(l.flush(k, r, 0, &mut first));
                }
                if free {
                    l.evict(a, r, 0, &mut first, ids);
                }
            });
        }
    }

    /// Before a `taskwait`: every pending D2H written back, so the host wait the
    /// taskwait makes anyway covers the write-backs (deferring them past it would cost
    /// the end of the program a host wait of its own). Kept copies stay kept.
    pub(super) fn elide_before_taskwait(&mut self) {
        if !self.elide.on {
            return;
        }
        let flush = self.elide.pending.keys().into_iter().collect();
        self.write_back(flush, BTreeSet::new());
    }

    /// Before the program's end: every pending D2H written back, every kept copy freed.
    pub(super) fn elide_before_end(&mut self) {
        if !self.elide.on {
            return;
        }
        let flush = self.elide.pending.keys().into_iter().collect();
        let kept = self.elide.kept.keys().into_iter().map(AllocId).collect();
        self.write_back(flush, kept);
    }

    fn writeback_region(&mut self, f: impl FnOnce(&mut Self, RegionId, &mut Vec<OpId>)) {
        let r = self.open_region("writeback", RegionKind::Writeback, true, 0, None);
        let mut ids = Vec::new();
        f(self, r, &mut ids);
        self.close_region(r);
    }
}
