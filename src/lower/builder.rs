//! The lowering pass: walks the program in order, keeps the mapping tables, and emits
//! ops with their dependency edges.

use super::deps::{referenced_names, DepTracker, Space};
use super::latest::Latest;
use super::mapping::{Lookup, MappingTable};
use super::rules::merge;
use super::warning;
use super::written::Written;
use super::{AllocId, LowerError, Op, OpGraph, OpId, OpKind, Region, RegionId, RegionKind};
use crate::model::{
    Access, Arg, Construct, DataConstruct, Depend, DependType, HostTask, MapItem, MapType, Program,
    Section, Span, TargetData, TargetRegion, DEVICE_AUTO,
};
use std::collections::BTreeMap;

/// A kernel's access of a section of one device allocation.
/// The last fields: whether the kernel really touches the section (a real argument; an
/// access a map item implies, a section mapped but not passed, [design notes](crate::design) "Dependencies",
/// only orders ops), and how many elements from the section's start the kernel is sure
/// to write (0 unless a real argument of a built-in that writes it).
pub(super) type DeviceAccess = (AllocId, Section, Access, bool, u64);

/// Ops planned for one construct, emitted in the order allocs, H2D, kernel, D2H, frees.
#[derive(Default)]
pub(super) struct ConstructOps {
    pub(super) allocs: Vec<AllocId>,
    pub(super) h2d: Vec<(AllocId, Section)>,
    pub(super) d2h: Vec<(AllocId, Section)>,
    pub(super) frees: Vec<AllocId>,
    /// Kept storage this construct took instead of allocating (`elide`).
    pub(super) reused: Vec<AllocId>,
    /// H2D copies left out because the storage was kept (`elide`).
    pub(super) elided_h2d: Vec<(AllocId, Section)>,
}

pub(super) struct Lowerer<'a> {
    pub(super) p: &'a Program,
    pub(super) g: OpGraph,
    pub(super) tables: Vec<MappingTable>,
    pub(super) deps: DepTracker,
    /// Ops that stand for a construct's completion, by construct name, for the names
    /// some `after` refers to.
    pub(super) names: BTreeMap<String, Vec<OpId>>,
    /// Names referred to by an `after` somewhere in the program.
    pub(super) referenced: std::collections::BTreeSet<String>,
    /// Ops since the last taskwait.
    pub(super) since_barrier: Vec<OpId>,
    pub(super) last_taskwait: Option<OpId>,
    pub(super) devices: u32,
    /// Per allocation, the element ranges written so far in program order (H2D, kernel
    /// writes): a read outside them marks the allocation `zero`.
    pub(super) written: Vec<Written>,
    /// Per allocation, whether a kernel declared a write to it since it was made (any
    /// part): the undefined-read warning is given only where none did, since a user
    /// kernel's `out` parameter may write what `written` cannot know it writes.
    pub(super) kernel_wrote: Vec<bool>,
    /// The execution of the enclosing `taskgraph` being lowered (0 outside one): regions
    /// opened in execution `k` ≥ 1 are named `name@k` (see `taskgraph`).
    pub(super) iteration: u32,
    /// Which device allocations hold contents newer than the host copy (programs of
    /// several devices; see `latest`).
    pub(super) latest: Latest,
    /// Per device: estimated µs of the device ops lowered onto it (`placement`).
    pub(super) load_us: Vec<f64>,
    /// Transfer elision's state (`elide`).
    pub(super) elide: super::elide::Elide,
    /// The device memory cap's accounting (`cap`).
    pub(super) cap: super::cap::Cap,
}

/// The most ops (and regions) [`estimate`] reserves room for.
const MAX_RESERVED_OPS: usize = 1 << 22;

/// About how many ops and regions `body` lowers to, `times` over (a taskgraph's
/// repeats), for reserving room: per map item an alloc, a copy each way and a free, plus
/// a kernel; data constructs a copy per item. An estimate, never a limit. `O(constructs)`.
fn estimate(body: &[Construct], times: usize) -> (usize, usize) {
    let (mut ops, mut regions) = (0usize, 0usize);
    for c in body {
        let (o, r) = match c {
            Construct::Target(t) => (4 * t.maps.len() + 1, 1),
            Construct::TargetData(d) => {
                let (o, r) = estimate(&d.body, 1);
                (o.saturating_add(4 * d.maps.len()), r.saturating_add(2))
            }
            Construct::Taskgraph(t) => estimate(&t.body, t.repeat as usize),
            Construct::EnterData(d) | Construct::ExitData(d) | Construct::Update(d) => {
                (2 * d.maps.len(), 1)
            }
            Construct::Taskwait { .. } | Construct::HostTask(_) => (1, 1),
        };
        ops = ops.saturating_add(o);
        regions = regions.saturating_add(r);
    }
    (ops.saturating_mul(times), regions.saturating_mul(times))
}

impl<'a> Lowerer<'a> {
    pub(super) fn new(p: &'a Program, opts: &super::LowerOptions) -> Self {
        let devices = p.devices.max(1);
        Lowerer {
            p,
            g: OpGraph::new(&p.name, p.buffers.clone(), p.kernels.clone(), devices),
            tables: vec![MappingTable::default(); devices as usize],
            deps: DepTracker::new(p.buffers.len()),
            names: BTreeMap::new(),
            referenced: referenced_names(&p.body),
            since_barrier: Vec::new(),
            last_taskwait: None,
            devices,
            written: Vec::new(),
            kernel_wrote: Vec::new(),
            iteration: 0,
            latest: Latest::new(p.buffers.len()),
            load_us: vec![0.0; devices as usize],
            elide: super::elide::Elide::new(opts, p, devices),
            cap: super::cap::Cap::new(opts.device_memory, devices),
        }
    }

    pub(super) fn run(mut self) -> Result<OpGraph, LowerError> {
        warning::shadowed_builtins(&self.p.kernels, &mut self.g.warnings);
        self.g.device_memory = self.cap.limit();
        let body = &self.p.body;
        let (ops, regions) = estimate(body, 1);
        // Room for the estimate (capped: a reservation is only a hint), about two
        // edges an op.
        let ops = ops.saturating_add(1).min(MAX_RESERVED_OPS);
        let regions = regions.saturating_add(1).min(MAX_RESERVED_OPS);
        self.g.reserve(ops, regions, ops.saturating_mul(2));
        self.body(body)?;
        self.end();
        self.g.shrink_to_fit();
        Ok(self.g)
    }

    pub(super) fn body(&mut self, body: &[Construct]) -> Result<(), LowerError> {
        for c in body {
            self.elide.advance();
            // `device = "auto"`: placed now, just before its maps are looked up.
            let device = match c {
                Construct::Target(t) if t.device == DEVICE_AUTO => Some(self.place_target(t)),
                Construct::EnterData(d) | Construct::ExitData(d) | Construct::Update(d)
                    if d.device == DEVICE_AUTO =>
                {
                    Some(self.place_data(d))
                }
                _ => None,
            };
            let placed = device.and_then(|d| Self::placed(c, d));
            match placed.as_ref().unwrap_or(c) {
                Construct::Target(t) => self.target(t)?,
                Construct::TargetData(d) => self.target_data(d)?,
                Construct::Taskgraph(t) => self.taskgraph(t)?,
                Construct::EnterData(d) => self.enter_data(d)?,
                Construct::ExitData(d) => self.exit_data(d)?,
                Construct::Update(d) => self.update(d)?,
                Construct::Taskwait { name, span } => self.taskwait(name, *span),
                Construct::HostTask(h) => self.host_task(h)?,
            }
        }
        Ok(())
    }

    // ----- checks -------------------------------------------------------------------

    fn check_device(
        &self,
        region: &str,
        device: u32,
        span: Option<Span>,
    ) -> Result<(), LowerError> {
        if device >= self.devices {
            return Err(LowerError::BadDevice {
                region: region.to_string(),
                device,
                devices: self.devices,
                span,
            });
        }
        Ok(())
    }

    pub(super) fn check_section(
        &self,
        region: &str,
        s: &Section,
        span: Option<Span>,
    ) -> Result<(), LowerError> {
        let Some(b) = self.p.buffers.get(s.buf.index()) else {
            return Err(LowerError::OutOfBounds {
                region: region.to_string(),
                section: format!("buffer #{}[{}:{}]", s.buf.0, s.lo, s.len),
                buffer: format!("#{}", s.buf.0),
                len: 0,
                span,
            });
        };
        if s.lo.checked_add(s.len).is_none_or(|e| e > b.len) {
            return Err(LowerError::OutOfBounds {
                region: region.to_string(),
                section: format!("{}[{}:{}]", b.name, s.lo, s.len),
                buffer: b.name.clone(),
                len: b.len,
                span,
            });
        }
        Ok(())
    }

    fn check_maps(&self, region: &str, maps: &[MapItem]) -> Result<(), LowerError> {
        for m in maps {
            self.check_section(region, &m.section, m.span)?;
        }
        Ok(())
    }

    fn check_depends(&self, region: &str, deps: &[Depend]) -> Result<(), LowerError> {
        for d in deps {
            self.check_section(region, &d.section, d.span)?;
        }
        Ok(())
    }

    pub(super) fn name(&self, s: &Section) -> String {
        self.g.section_name(s)
    }

    // ----- op emission --------------------------------------------------------------

    /// Ops that must precede a construct's first op: `depend` and `after`.
    fn construct_preds(
        &mut self,
        region: &str,
        depends: &[Depend],
        after: &[String],
        span: Option<Span>,
    ) -> Result<Vec<OpId>, LowerError> {
        let mut preds = Vec::new();
        for d in depends {
            let s = d.section;
            let write = d.kind != DependType::In;
            self.deps
                .query(Space::Depend, s.buf.index(), s.lo, s.len, write, &mut preds);
        }
        for name in after {
            match self.names.get(name) {
                Some(ops) => preds.extend(ops.iter().copied()),
                None => {
                    return Err(LowerError::UnknownAfter {
                        region: region.to_string(),
                        name: name.clone(),
                        span,
                    })
                }
            }
        }
        Ok(preds)
    }

    /// Records a construct's `depend` accesses with the ops that stand for it, and its
    /// name for `after`.
    fn finish_construct(&mut self, name: &str, depends: &[Depend], reps: Vec<OpId>) {
        for d in depends {
            let (b, lo, len) = (d.section.buf.index(), d.section.lo, d.section.len);
            match d.kind {
                DependType::In => {
                    for &op in &reps {
                        self.deps
                            .read(Space::Depend, b, lo, len, op, &mut Vec::new());
                    }
                }
                _ => self.deps.record_writes(Space::Depend, b, lo, len, &reps),
            }
        }
        self.remember(name, reps);
    }

    fn remember(&mut self, name: &str, reps: Vec<OpId>) {
        if self.referenced.contains(name) {
            self.names.insert(name.to_string(), reps);
        }
    }

    pub(super) fn push(
        &mut self,
        kind: OpKind,
        region: RegionId,
        device: u32,
        preds: Vec<OpId>,
    ) -> OpId {
        let id = self.g.push_op(
            Op {
                kind,
                region,
                device,
            },
            preds,
        );
        // A taskwait waits for every task before it, including a nowait exit data that
        // only frees (OpenMP 5.2 §15.5).
        self.since_barrier.push(id);
        self.account(id);
        id
    }

    /// Opens a region for construct `name`, shown as `name@k` in taskgraph execution
    /// `k` ≥ 1 and, for the exit half of a `target data`, with ` end` after that.
    pub(super) fn open_region(
        &mut self,
        name: &str,
        kind: RegionKind,
        nowait: bool,
        device: u32,
        span: Option<Span>,
    ) -> RegionId {
        let start = self.g.ops.len() as u32;
        // The shown name: control characters escaped (`crate::model::escape_controls`),
        // so schedule text, DOT, errors and summaries cannot drive a terminal.
        let name = crate::model::escape_controls(name);
        let mut name = match self.iteration {
            0 => name.into_owned(),
            k => format!("{name}@{k}"),
        };
        if kind == RegionKind::DataEnd {
            name.push_str(" end");
        }
        self.g.regions.push(Region {
            name,
            kind,
            nowait,
            device,
            priority: 0,
            lane: None,
            ops: start..start,
            span,
        });
        RegionId(self.g.regions.len() as u32 - 1)
    }

    pub(super) fn close_region(&mut self, r: RegionId) -> std::ops::Range<u32> {
        let end = self.g.ops.len() as u32;
        let reg = &mut self.g.regions[r.index()];
        reg.ops.end = end;
        reg.ops.clone()
    }

    /// A read of `s` in allocation `a`: elements never written before mark it `zero`.
    /// Returns whether the read touched such elements.
    pub(super) fn read_storage(&mut self, a: AllocId, s: &Section) -> bool {
        let unwritten = !self.written[a.index()].covers(s.lo, s.end());
        if unwritten {
            self.g.allocs[a.index()].zero = true;
        }
        unwritten
    }

    /// The host section an allocation holds.
    pub(super) fn storage(&self, a: AllocId) -> Section {
        self.g.allocs[a.index()].section
    }

    /// The allocation each kernel access touches on `device` (looked up after the
    /// construct's entry, before its exit). Zero-length accesses of unmapped data touch
    /// none and are dropped.
    ///
    /// The first `real` accesses are the kernel's arguments, the rest implied by maps;
    /// `extent` is what the kernel writes of each written argument
    /// ([`crate::model::builtin_write_extent`]).
    fn on_device(
        &self,
        device: u32,
        accesses: Vec<(Section, Access)>,
        real: usize,
        extent: u64,
    ) -> Vec<DeviceAccess> {
        let table = &self.tables[device as usize];
        accesses
            .into_iter()
            .enumerate()
            .filter_map(|(i, (s, acc))| match table.lookup(&s) {
                Lookup::Inside(e) if s.len > 0 => {
                    let written = if i < real && acc.writes() {
                        extent.min(s.len)
                    } else {
                        0
                    };
                    Some((e.alloc, s, acc, i < real, written))
                }
                _ => None,
            })
            .collect()
    }

    /// The ops that stand for a construct's completion: its last op, or, for a construct
    /// with no ops, what it followed (so `depend` chains pass through empty constructs).
    fn reps(ids: &[OpId], first: Vec<OpId>) -> Vec<OpId> {
        match ids.last() {
            Some(&last) => vec![last],
            None => {
                let mut f = first;
                f.sort_unstable();
                f.dedup();
                f
            }
        }
    }

    // ----- constructs ---------------------------------------------------------------

    fn target(&mut self, t: &TargetRegion) -> Result<(), LowerError> {
        let name = t.name.as_str();
        self.check_device(name, t.device, t.span)?;
        // OpenMP 5.2 §13.8: a target construct's map types are to, from, tofrom and
        // alloc; release and delete belong to exit data (as graph files refuse them).
        for m in &t.maps {
            if matches!(m.map_type, MapType::Release | MapType::Delete) {
                return Err(self.invalid(name, m, "target"));
            }
        }
        self.check_maps(name, &t.maps)?;
        self.check_depends(name, &t.depends)?;
        let first = self.construct_preds(name, &t.depends, &t.after, t.span)?;
        let mut items = merge(&t.maps);
        // Implicit maps (OpenMP 5.2 §5.8.9: arrays referenced in a target region are
        // mapped tofrom): a buffer argument covered by no map item and not present.
        let mut implicit = Vec::new();
        for a in &t.args {
            if let Arg::Buffer(s) = a {
                self.check_section(name, s, t.span)?;
                let mapped = items.iter().any(|i| i.section.contains(s));
                let present = matches!(self.tables[t.device as usize].lookup(s), Lookup::Inside(_));
                if !mapped && !present {
                    let mut m = MapItem::new(MapType::ToFrom, *s);
                    m.span = t.span;
                    items.extend(merge(&[m]));
                    implicit.push(*s);
                } else if !mapped {
                    // Counted as a future use of `s` by elision (it cannot tell before
                    // lowering that `s` is present here): this use is now past.
                    self.elide.entered(s);
                }
            }
        }
        let mut plan = ConstructOps::default();
        self.enter(name, t.device, &mut items, &mut plan)?;
        let sections = items.iter().map(|i| i.section);
        self.check_cap(name, t.device, sections, &plan, t.span)?;
        let (call, mut accesses) =
            self.kernel_call(name, &t.kernel, &t.args, t.launch, Some(t.device), t.span)?;
        let real = accesses.len();
        // A map item allocates when its section lies in storage this region allocated
        // (or, with elision, took from the kept copies: the same entry without it).
        let allocated = |s: &Section| {
            plan.allocs
                .iter()
                .chain(&plan.reused)
                .any(|a| self.g.allocs[a.index()].section.contains(s))
        };
        let used = warning::TargetUse {
            region: name,
            span: t.span,
            kernel: &t.kernel,
            implicit: &implicit,
            args: &accesses,
            maps: &t.maps,
            allocated: &allocated,
        };
        warning::target_warnings(&self.p.buffers, &used, &mut self.g.warnings);
        for it in &items {
            if !t.args.contains(&Arg::Buffer(it.section)) {
                let acc = match (it.reads, it.writes) {
                    (true, true) => Some(Access::InOut),
                    (true, false) => Some(Access::In),
                    (false, true) => Some(Access::Out),
                    _ => None,
                };
                if let Some(acc) = acc {
                    accesses.push((it.section, acc));
                }
            }
        }
        let extent = self.write_extent(&t.kernel, &t.args);
        let accesses = self.on_device(t.device, accesses, real, extent);
        self.exit(name, t.device, &items, false, &mut plan)?;
        let r = self.open_region(name, RegionKind::Target, t.nowait, t.device, t.span);
        self.g.regions[r.index()].priority = t.priority;
        let ids = self.emit(r, t.device, &plan, Some((call, accesses)), first.clone());
        self.close_region(r);
        // A region that took a kept copy (elision) frees it after every reader's kernel,
        // other regions' too: its `depend` successors follow its own work, not that Free.
        let own = |op: &OpId| match self.g.ops[op.index()].kind {
            OpKind::Free { alloc } => plan.allocs.contains(&alloc),
            _ => true,
        };
        let last_own = ids.iter().rposition(own).map_or(ids.len(), |i| i + 1);
        let reps = Self::reps(&ids[..last_own], first);
        self.finish_construct(name, &t.depends, reps);
        Ok(())
    }

    fn target_data(&mut self, d: &TargetData) -> Result<(), LowerError> {
        let name = d.name.as_str();
        let device = match d.device {
            DEVICE_AUTO => self.place(&d.maps, d.maps.iter().map(|m| m.section), false),
            n => n,
        };
        self.check_device(name, device, d.span)?;
        self.check_maps(name, &d.maps)?;
        for m in &d.maps {
            if matches!(m.map_type, MapType::Release | MapType::Delete) {
                return Err(self.invalid(name, m, "target data"));
            }
        }
        let mut items = merge(&d.maps);
        let mut plan = ConstructOps::default();
        self.enter(name, device, &mut items, &mut plan)?;
        let sections = items.iter().map(|i| i.section);
        self.check_cap(name, device, sections, &plan, d.span)?;
        let r = self.open_region(name, RegionKind::DataBegin, false, device, d.span);
        let ids = self.emit(r, device, &plan, None, Vec::new());
        self.close_region(r);
        self.names
            .insert(name.to_string(), Self::reps(&ids, Vec::new()));
        self.body(&d.body)?;
        let mut plan = ConstructOps::default();
        self.exit(name, device, &items, false, &mut plan)?;
        let r = self.open_region(name, RegionKind::DataEnd, false, device, d.span);
        let ids = self.emit(r, device, &plan, None, Vec::new());
        self.close_region(r);
        self.names
            .insert(name.to_string(), Self::reps(&ids, Vec::new()));
        Ok(())
    }

    fn invalid(&self, region: &str, m: &MapItem, construct: &str) -> LowerError {
        LowerError::InvalidMapType {
            region: region.to_string(),
            map_type: m.map_type.name().to_string(),
            construct: construct.to_string(),
            span: m.span,
        }
    }

    fn data_common(&mut self, d: &DataConstruct) -> Result<Vec<OpId>, LowerError> {
        let name = d.name.as_str();
        self.check_device(name, d.device, d.span)?;
        self.check_maps(name, &d.maps)?;
        self.check_depends(name, &d.depends)?;
        self.construct_preds(name, &d.depends, &d.after, d.span)
    }

    fn finish_data(
        &mut self,
        d: &DataConstruct,
        kind: RegionKind,
        plan: &ConstructOps,
        first: Vec<OpId>,
    ) {
        let r = self.open_region(&d.name, kind, d.nowait, d.device, d.span);
        let ids = self.emit(r, d.device, plan, None, first.clone());
        self.close_region(r);
        let reps = Self::reps(&ids, first);
        self.finish_construct(&d.name, &d.depends, reps);
    }

    fn enter_data(&mut self, d: &DataConstruct) -> Result<(), LowerError> {
        let first = self.data_common(d)?;
        for m in &d.maps {
            if !matches!(m.map_type, MapType::To | MapType::Alloc | MapType::ToFrom) {
                return Err(self.invalid(&d.name, m, "target enter data"));
            }
        }
        let mut items = merge(&d.maps);
        let mut plan = ConstructOps::default();
        self.enter(&d.name, d.device, &mut items, &mut plan)?;
        let sections = items.iter().map(|i| i.section);
        self.check_cap(&d.name, d.device, sections, &plan, d.span)?;
        self.finish_data(d, RegionKind::EnterData, &plan, first);
        Ok(())
    }

    fn exit_data(&mut self, d: &DataConstruct) -> Result<(), LowerError> {
        let first = self.data_common(d)?;
        for m in &d.maps {
            if !matches!(
                m.map_type,
                MapType::From | MapType::ToFrom | MapType::Release | MapType::Delete
            ) {
                return Err(self.invalid(&d.name, m, "target exit data"));
            }
        }
        let items = merge(&d.maps);
        let mut plan = ConstructOps::default();
        self.exit(&d.name, d.device, &items, true, &mut plan)?;
        self.finish_data(d, RegionKind::ExitData, &plan, first);
        Ok(())
    }

    /// `target update` (rule 5): copies without touching counts. A motion item is
    /// present only if it lies wholly inside one live entry: partly mapped (extending
    /// beyond one entry, or spanning several) counts as absent, as libomptarget looks
    /// motion items up with "must contain" (OpenMP 5.2 §13.9; the explicit-extension
    /// error belongs to map clauses). Absent is a no-op; with `present`, the
    /// [`LowerError::MotionNotPresent`] error.
    fn update(&mut self, d: &DataConstruct) -> Result<(), LowerError> {
        let first = self.data_common(d)?;
        let mut plan = ConstructOps::default();
        for m in &d.maps {
            if !matches!(m.map_type, MapType::To | MapType::From) {
                return Err(self.invalid(&d.name, m, "target update"));
            }
            let touched = match self.tables[d.device as usize].lookup(&m.section) {
                Lookup::Inside(e) => {
                    if m.section.len == 0 {
                        continue;
                    }
                    let list = if m.map_type == MapType::To {
                        &mut plan.h2d
                    } else {
                        &mut plan.d2h
                    };
                    if !list
                        .iter()
                        .any(|(a, s)| *a == e.alloc && s.contains(&m.section))
                    {
                        list.push((e.alloc, m.section));
                    }
                    continue;
                }
                Lookup::Absent => Vec::new(),
                Lookup::Extends(e) => vec![e],
                Lookup::Spans(v) => v,
            };
            if m.present {
                return Err(LowerError::MotionNotPresent {
                    region: d.name.clone(),
                    motion: m.map_type.name().to_string(),
                    section: self.name(&m.section),
                    mapped: touched.iter().map(|e| self.name(&e.section)).collect(),
                    device: d.device,
                    span: m.span,
                });
            }
        }
        self.finish_data(d, RegionKind::Update, &plan, first);
        Ok(())
    }

    /// `name`: the user's (`taskwait = "tw"`), `taskwait` when empty.
    fn taskwait(&mut self, name: &str, span: Option<Span>) {
        let name = if name.is_empty() { "taskwait" } else { name };
        self.elide_before_taskwait();
        let r = self.open_region(name, RegionKind::Taskwait, true, 0, span);
        let mut preds = std::mem::take(&mut self.since_barrier);
        preds.extend(self.last_taskwait);
        let id = self.push(OpKind::Taskwait, r, 0, preds);
        self.since_barrier.clear();
        self.last_taskwait = Some(id);
        self.close_region(r);
    }

    fn host_task(&mut self, h: &HostTask) -> Result<(), LowerError> {
        let name = h.name.as_str();
        for s in h.reads.iter().chain(&h.writes) {
            self.check_section(name, s, h.span)?;
        }
        self.check_depends(name, &h.depends)?;
        let mut preds = self.construct_preds(name, &h.depends, &h.after, h.span)?;
        let mut reads = h.reads.clone();
        let mut writes = h.writes.clone();
        let call = match &h.kernel {
            Some(k) => {
                let (call, accesses) = self.kernel_call(name, k, &h.args, None, None, h.span)?;
                for (s, a) in accesses {
                    if a.reads() {
                        reads.push(s);
                    }
                    if a.writes() {
                        writes.push(s);
                    }
                }
                Some(call)
            }
            None => None,
        };
        let newer: Vec<(crate::model::Section, u32)> = reads
            .iter()
            .flat_map(|s| self.latest.newer_on_device(s))
            .map(|(part, a)| (part, self.g.allocs[a.index()].device))
            .collect();
        warning::stale_host_read(&self.p.buffers, name, h.span, &newer, &mut self.g.warnings);
        self.elide_before_host(&reads, &writes, h.body.is_some());
        let r = self.open_region(name, RegionKind::HostTask, true, 0, h.span);
        self.g.regions[r.index()].lane = h.lane;
        let id = OpId(self.g.ops.len() as u32);
        for s in &reads {
            self.deps
                .read(Space::Host, s.buf.index(), s.lo, s.len, id, &mut preds);
        }
        for s in &writes {
            self.deps
                .write(Space::Host, s.buf.index(), s.lo, s.len, id, &mut preds);
            self.latest.host_latest(s);
        }
        let op = self.push(
            OpKind::HostTask {
                reads,
                writes,
                call,
                body: h.body.clone(),
            },
            r,
            0,
            preds,
        );
        self.close_region(r);
        self.finish_construct(name, &h.depends, vec![op]);
        Ok(())
    }

    /// End of program: the host reads every buffer and may free it, so it follows every
    /// op that reads or writes host memory.
    fn end(&mut self) {
        self.elide_before_end();
        let r = self.open_region("end", RegionKind::End, true, 0, None);
        let id = OpId(self.g.ops.len() as u32);
        let mut preds = Vec::new();
        for (i, b) in self.p.buffers.iter().enumerate() {
            self.deps.write(Space::Host, i, 0, b.len, id, &mut preds);
        }
        self.push(OpKind::End, r, 0, preds);
        self.close_region(r);
    }
}
