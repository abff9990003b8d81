//! The per-rank split of a program (owner computes): every rank gets the constructs it
//! runs, plus a send task after the data it must give away and a receive task before each
//! construct that reads data valid only on another rank.
//!
//! Every rank calls [`split`] on the same program and distribution and gets the same
//! result (the split is a deterministic function of them: program order, `BTreeMap`s), so
//! the ranks agree on every transfer and its envelope without talking.
//!
//! # Rules
//!
//! - Placement: [`Distribution`]'s owner-computes rule (see its docs).
//! - What a construct reads on the host: a target region the sections of its `to` /
//!   `tofrom` maps whose data is not present (the H2D copies of OpenMP 5.2 §5.8.3; an
//!   `alloc` or `from` map copies nothing in), and of its `always, to` maps; a host task
//!   its `reads`, its `writes` (a host task may write part of a declared section, so the
//!   rest must be current) and its kernel's buffer arguments. What it writes on the
//!   host: a target region its `from` / `tofrom` maps of data not present (the D2H
//!   copies the whole section back) and its `always, from` maps, a host task its
//!   `writes` and its kernel's written arguments. A region's maps include the implicit
//!   ones the lowering adds (OpenMP 5.2 §5.8.9): a buffer argument no map item contains
//!   is mapped `tofrom` when it is not present, and used in place when it is.
//! - Before a construct runs on rank `r`, every element it reads that is not valid on `r`
//!   is received from a rank where it is valid (its owner if the owner holds it, else the
//!   lowest such rank); contiguous elements from one rank go in one message. After it,
//!   what it wrote is valid on `r` only. Received elements stay valid on `r` until written
//!   (no second transfer). Initially every element is valid on every rank (every rank
//!   builds the same initial contents). At the end, rank 0 receives every element it does
//!   not hold: rank 0's buffers are the run's result.
//! - A receive task goes right before its consumer; its send task goes on the sender
//!   right after the last update of the bytes it carries (the construct that wrote them
//!   or the receive that brought them there: they keep that value on the sender until
//!   the consumer), not at the consumer, so it never waits behind the sender's receives
//!   placed between. Each rank's body is then put in readiness order
//!   ([`super::reorder`]: local work ahead of work waiting for a receive, as far as the
//!   data allows), and its send tasks chained in that order on one host lane, its
//!   receive tasks on another (the program's own host tasks go on the send lane), so a
//!   receive that waits for its message holds back no send; each receive also follows
//!   the last send before it in that order, so the rank's issuing thread and work lane,
//!   which wait for receives, never wait for one ahead of an earlier send (see [`chain`]).
//! - `taskwait` goes to every rank. An `after` naming a construct of the same rank is
//!   kept; one naming a construct of another rank becomes a zero-byte transfer (a send
//!   `after` that construct, its receive in the consumer's `after`). `depend` clauses are
//!   kept and order constructs within a rank; across ranks, order comes from the data.
//!
//! # Device data environments
//!
//! OpenMP keeps a present section's host and device copies apart: a region reads and
//! writes the device copy, a host task the host copy, and only `enter data` (`to`, when
//! the data becomes present), `exit data` (`from`, when its count reaches 0), `update`
//! and `always` maps copy one over the other (OpenMP 5.2 §5.8.3, §13.6-§13.9; a map of
//! present data copies nothing). The split keeps these semantics over ranks
//! ([`device`]): every data construct runs on every rank, so every rank's present table
//! is the same; per element the split tracks which devices hold the current device
//! value beside which hosts hold the current host value; and a region reads present
//! data only after its device value is staged to the region's rank.
//!
//! # Refused
//!
//! - [`DistError::Unsupported`]: `taskgraph` (it records its regions once and replays
//!   them as one graph, which the split would cut between ranks).
//! - [`DistError::DataDevice`]: a data construct on a device other than 0 (or `auto`),
//!   or a region with `device = auto` while data is present (presence is tracked on
//!   device 0; regions on other devices map their data as if nothing were present,
//!   which is what their own device's table says).
//!
//! Tiled programs in both [`crate::model::DataStyle`]s split (`Mapped`: per-region
//! maps; `Entered`: `enter data` once, `present` maps, `exit data` at the end).
//!
//! Complexity: `O(C · S)` for `C` constructs and `S` validity segments of the sections
//! they touch (segments merge when ranks agree again), plus `O(M log E)` for `M` map
//! items and `E` live present-table entries.

mod device;
mod messages;

use messages::chain;
pub(crate) use messages::{RANK_LANES, RECV_LANE, WORK_LANE};

use super::link::Link;
use super::owner::Distribution;
use super::presence::Presence;
use super::transfer::Transfer;
use super::validity::Validity;
use super::DistError;
use crate::model::{
    Arg, Construct, DataConstruct, MapItem, MapType, Program, Section, TargetRegion, DEVICE_AUTO,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// One rank's program: the constructs it runs and its send and receive tasks, in
/// program order, and the link its send and receive tasks talk through.
#[derive(Clone, Debug)]
pub struct RankProgram {
    pub rank: u32,
    pub program: Program,
    pub link: Arc<Link>,
}

/// A program split over ranks.
#[derive(Clone, Debug)]
pub struct DistProgram {
    /// Index = rank.
    pub ranks: Vec<RankProgram>,
    /// Every transfer, in program order.
    pub transfers: Vec<Transfer>,
    /// `(construct name, rank)` of every target region and host task of the program, in
    /// program order.
    pub placement: Vec<(String, u32)>,
}

impl DistProgram {
    /// The first envelope sequence number no transfer of this split uses (0 without
    /// transfers): messages a caller adds between runs (a benchmark's meetings of the
    /// ranks) take numbers from here, so they never match a transfer's envelope.
    pub fn envelopes_end(&self) -> u64 {
        self.transfers
            .iter()
            .map(|x| x.envelope.seq + 1)
            .max()
            .unwrap_or(0)
    }
}

/// Splits `program` over the ranks of `dist` (see the module docs).
///
/// Errors: [`DistError::Unsupported`] for a `taskgraph`; [`DistError::DataDevice`] for
/// a device data environment off device 0;
/// [`DistError::Name`] when a construct's name is a send or receive task's name;
/// [`DistError::Placed`] when a placed name is no construct of the program.
pub fn split(program: &Program, dist: &Distribution) -> Result<DistProgram, DistError> {
    let n = dist.ranks();
    let all = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
    let lens = || program.buffers.iter().map(|b| b.len);
    let mut s = Splitter {
        program,
        dist,
        valid: Validity::new(lens(), all),
        device: Validity::new(lens(), all),
        same: Validity::new(lens(), 1),
        presence: Presence::default(),
        all,
        seq: BTreeMap::new(),
        bodies: (0..n).map(|_| Vec::new()).collect(),
        links: (0..n).map(|_| Arc::new(Link::default())).collect(),
        transfers: Vec::new(),
        rank_of: BTreeMap::new(),
        names: BTreeSet::new(),
        extra_names: Vec::new(),
        placement: Vec::new(),
        local: 0,
        clock: 1,
    };
    for c in &program.body {
        s.construct(c)?;
    }
    for (i, b) in program.buffers.iter().enumerate() {
        s.fetch(
            0,
            &[Section::new(crate::model::BufferId(i as u32), 0, b.len)],
            "end",
        )?;
    }
    for name in dist.placed_names() {
        if !s.rank_of.contains_key(name) {
            return Err(DistError::Placed {
                name: name.to_string(),
            });
        }
    }
    let made = s
        .transfers
        .iter()
        .flat_map(|t| [&t.send, &t.recv])
        .chain(&s.extra_names);
    for name in made {
        if s.rank_of.contains_key(name.as_str()) || s.names.contains(name.as_str()) {
            return Err(DistError::Name { name: name.clone() });
        }
    }
    let placement = std::mem::take(&mut s.placement);
    let lens: Vec<u64> = program.buffers.iter().map(|b| b.len).collect();
    // A split without transfers (one rank, or one rank doing all) waits for nothing:
    // its ranks keep the order one process runs.
    if !dist.program_order() && !s.transfers.is_empty() {
        super::reorder::by_readiness(&mut s.bodies, &s.transfers, &lens, program);
    }
    let ranks = s
        .bodies
        .into_iter()
        .zip(s.links)
        .enumerate()
        .map(|(r, (body, link))| (r, (chain(body), link)))
        .map(|(r, (body, link))| RankProgram {
            rank: r as u32,
            // Field by field: `..program.clone()` would copy the whole body per rank.
            program: Program {
                name: program.name.clone(),
                buffers: program.buffers.clone(),
                kernels: program.kernels.clone(),
                body,
                devices: program.devices,
                tag: program.tag,
                builder_errors: program.builder_errors.clone(),
            },
            link,
        })
        .collect();
    Ok(DistProgram {
        ranks,
        transfers: s.transfers,
        placement,
    })
}

struct Splitter<'a> {
    program: &'a Program,
    dist: &'a Distribution,
    /// Which ranks' host copies hold each element's current host value.
    valid: Validity,
    /// Which ranks' device copies hold each element's current device value (meaningful
    /// where the element is present).
    device: Validity,
    /// 1 where the current host and device values are equal, else 0.
    same: Validity,
    /// Device 0's present table, the same on every rank.
    presence: Presence,
    /// Every rank.
    all: u64,
    /// Next sequence number per (from, to).
    seq: BTreeMap<(u32, u32), u64>,
    bodies: Vec<Vec<Item>>,
    links: Vec<Arc<Link>>,
    transfers: Vec<Transfer>,
    /// Rank of every target region and host task placed so far, by name.
    rank_of: BTreeMap<String, u32>,
    /// Names of the data constructs (on every rank).
    names: BTreeSet<String>,
    /// Names of the rank-local constructs the split makes (staging copies, saves and
    /// restores).
    extra_names: Vec<String>,
    /// `(name, rank)` of every target region and host task, in program order.
    placement: Vec<(String, u32)>,
    /// Rank-local `update to`s made so far (for their names).
    local: u64,
    /// Items placed so far, over all ranks: the stamp of the next one.
    clock: u64,
}

/// A construct of a rank's body and where it goes: bodies are sorted by `key` once the
/// split is done (stable), so a send can be placed back in time, right after the item
/// whose stamp made its bytes valid (see `push_pair`).
pub(super) struct Item {
    /// `(stamp, 0)` for an item placed at its stamp; `(anchor, 1)` for a send placed
    /// right after the item stamped `anchor` (sends after one anchor keep the order they
    /// were made in: the sort is stable).
    pub(super) key: (u64, u8),
    /// A send or receive task (chained in body order, see [`chain`]).
    pub(super) transfer: bool,
    pub(super) c: Construct,
}

impl Splitter<'_> {
    fn construct(&mut self, c: &Construct) -> Result<(), DistError> {
        match c {
            Construct::Target(t) => self.region(t),
            Construct::HostTask(h) => {
                // A kernel's buffer arguments count as declared (the lowering's rule).
                let (args_read, args_written) = match &h.kernel {
                    Some(k) => kernel_accesses(self.program, k, &h.args),
                    None => (Vec::new(), Vec::new()),
                };
                let mut writes = h.writes.clone();
                writes.extend(args_written);
                let mut reads = h.reads.clone();
                reads.extend(args_read);
                reads.extend(writes.iter().copied());
                let rank = self.rank_for(&h.name, &writes, &reads);
                self.fetch(rank, &reads, &h.name)?;
                let mut h = h.clone();
                h.after = self.after(&h.after, rank, &h.name);
                // Off the receive lane, so no receive that waits holds it back.
                h.lane = h.lane.or(Some(WORK_LANE));
                let stamp = self.place(rank, Construct::HostTask(h.clone()), &h.name);
                for w in writes {
                    self.host_written(w, rank, stamp);
                }
                Ok(())
            }
            Construct::Taskwait { .. } => {
                let key = (self.tick(), 0);
                for b in &mut self.bodies {
                    b.push(Item {
                        key,
                        transfer: false,
                        c: c.clone(),
                    });
                }
                Ok(())
            }
            Construct::EnterData(d) | Construct::ExitData(d) | Construct::Update(d) => {
                self.data(c, d)
            }
            Construct::TargetData(td) => {
                // Flattened on every rank: an `enter data` of its maps, its body, an
                // `exit data` of its maps ([`device`] docs).
                // The end keeps the name (what a later `after` of it waits for), the
                // begin is `{name} begin`.
                let end = DataConstruct {
                    name: td.name.clone(),
                    maps: super::presence::target_data_exit(&td.maps),
                    nowait: false,
                    depends: Vec::new(),
                    device: td.device,
                    after: Vec::new(),
                    span: td.span,
                };
                let begin = DataConstruct {
                    name: format!("{} begin", td.name),
                    maps: super::presence::target_data_enter(&td.maps),
                    ..end.clone()
                };
                self.construct(&Construct::EnterData(begin))?;
                for b in &td.body {
                    self.construct(b)?;
                }
                self.construct(&Construct::ExitData(end))
            }
            Construct::Taskgraph(_) => Err(DistError::Unsupported {
                kind: c.kind_name(),
                name: construct_name(c),
                span: construct_span(c),
            }),
        }
    }

    /// The rank of a target region or host task: its placement, else the owner of the
    /// first section it writes, else of the first it reads, else 0.
    fn rank_for(&self, name: &str, writes: &[Section], reads: &[Section]) -> u32 {
        self.dist
            .placed(name)
            .or_else(|| writes.first().map(|s| self.dist.owner(s)))
            .or_else(|| reads.first().map(|s| self.dist.owner(s)))
            .unwrap_or(0)
    }

    /// `after` of a construct on `rank`: a name of a construct on another rank becomes
    /// the receive of a zero-byte transfer from there.
    fn after(&mut self, after: &[String], rank: u32, name: &str) -> Vec<String> {
        let mut kept = Vec::new();
        for a in after {
            match self.rank_of.get(a) {
                Some(&ra) if ra != rank => kept.push(self.token(ra, rank, a, name)),
                _ => kept.push(a.clone()),
            }
        }
        kept
    }

    /// Places target region or host task `c` on `rank` at a new stamp (returned).
    fn place(&mut self, rank: u32, c: Construct, name: &str) -> u64 {
        let stamp = self.tick();
        self.bodies[rank as usize].push(Item {
            key: (stamp, 0),
            transfer: false,
            c,
        });
        self.rank_of.insert(name.to_string(), rank);
        self.placement.push((name.to_string(), rank));
        stamp
    }

    /// `s` written on `rank`'s host at `stamp`: valid there only, and no longer the
    /// device's value.
    fn host_written(&mut self, s: Section, rank: u32, stamp: u64) {
        let b = s.buf.index();
        self.valid.update(b, s.lo, s.len, stamp, |_| 1u64 << rank);
        self.same.update(b, s.lo, s.len, stamp, |_| 0);
    }

    fn region(&mut self, t: &TargetRegion) -> Result<(), DistError> {
        let name = &t.name;
        if t.device == DEVICE_AUTO && !self.presence.is_empty() {
            return Err(DistError::DataDevice {
                name: name.clone(),
                span: t.span,
            });
        }
        // Its maps, with the implicit ones the lowering adds (OpenMP 5.2 §5.8.9): a
        // buffer argument no map item contains is mapped `tofrom` when not present; a
        // present one copies nothing but the kernel uses its device copy (`to` when the
        // kernel only reads it, so it is not counted as a device write).
        let written_args: Option<Vec<Section>> = self
            .program
            .kernel_ref(&t.kernel)
            .map(|_| kernel_accesses(self.program, &t.kernel, &t.args).1);
        let mut maps = t.maps.clone();
        for s in t.unmapped_args() {
            let s = &s;
            let present = t.device == 0 && self.presence.present(s);
            let written = written_args
                .as_ref()
                .is_none_or(|w| w.iter().any(|x| x.overlaps(s)));
            let ty = if present && !written {
                MapType::To
            } else {
                MapType::ToFrom
            };
            maps.push(MapItem::new(ty, *s));
        }
        // Which maps find their data present on device 0 (copy nothing unless
        // `always`): decided before the region's own entries.
        let present: Vec<bool> = maps
            .iter()
            .map(|m| t.device == 0 && self.presence.present(&m.section))
            .collect();
        let secs = |f: &dyn Fn(&MapItem, bool) -> bool| -> Vec<Section> {
            maps.iter()
                .zip(&present)
                .filter(|(m, p)| f(m, **p))
                .map(|(m, _)| m.section)
                .collect()
        };
        // Placement as without a data environment: the owner of the first `from`
        // section, else of the first `to` one.
        let rank = self.rank_for(
            name,
            &secs(&|m, _| m.map_type.has_from()),
            &secs(&|m, _| m.map_type.has_to()),
        );
        // Host reads: the H2D copies (absent `to` data, or `always, to`).
        let host_reads = secs(&|m, p| m.map_type.has_to() && (!p || m.always));
        let always_to = secs(&|m, p| p && m.always && m.map_type.has_to());
        // Device reads: every present map (the kernel may read any, and writes only
        // part of an `out` argument); `always, to` data comes from the host instead.
        let dev_reads = secs(&|m, p| p && !(m.always && m.map_type.has_to()));
        // Device writes: present maps the kernel may write (a written argument
        // overlapping them, or a `from` / `tofrom` / `alloc` map).
        let dev_writes = secs(&|m, p| {
            p && (!m.map_type.has_to()
                || m.map_type.has_from()
                || written_args
                    .as_ref()
                    .is_none_or(|w| w.iter().any(|s| s.overlaps(&m.section))))
        });
        let always_from = secs(&|m, p| p && m.always && m.map_type.has_from());
        let host_writes = secs(&|m, p| !p && m.map_type.has_from());
        self.fetch(rank, &host_reads, name)?;
        self.stage(rank, &dev_reads, name)?;
        let mut c = t.clone();
        c.after = self.after(&t.after, rank, name);
        let stamp = self.place(rank, Construct::Target(c), name);
        let bit = 1u64 << rank;
        for s in always_to {
            // H2D of this rank's (current) host value: its device holds the current
            // device value, and so does every other device that held the host's.
            for (lo, hi, same) in self.same_parts(s) {
                let b = s.buf.index();
                self.device
                    .update(b, lo, hi - lo, stamp, |d| if same { d | bit } else { bit });
                self.same.update(b, lo, hi - lo, stamp, |_| 1);
            }
        }
        for s in dev_writes {
            let b = s.buf.index();
            self.device.update(b, s.lo, s.len, stamp, |_| bit);
            self.same.update(b, s.lo, s.len, stamp, |_| 0);
        }
        for s in always_from {
            let b = s.buf.index();
            self.valid.update(b, s.lo, s.len, stamp, |_| bit);
            self.same.update(b, s.lo, s.len, stamp, |_| 1);
        }
        for s in host_writes {
            self.host_written(s, rank, stamp);
        }
        Ok(())
    }

    /// The stamp of the next item placed.
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock - 1
    }
}

/// Where `c` is written, for programs read from a file.
fn construct_span(c: &Construct) -> Option<crate::model::Span> {
    match c {
        Construct::Target(t) => t.span,
        Construct::TargetData(d) => d.span,
        Construct::Taskgraph(t) => t.span,
        Construct::EnterData(d) | Construct::ExitData(d) | Construct::Update(d) => d.span,
        Construct::Taskwait { span, .. } => *span,
        Construct::HostTask(h) => h.span,
    }
}

/// The name a construct is shown by in messages.
fn construct_name(c: &Construct) -> String {
    match c {
        Construct::Target(t) => t.name.clone(),
        Construct::TargetData(d) => d.name.clone(),
        Construct::Taskgraph(t) => t.name.clone(),
        Construct::EnterData(d) | Construct::ExitData(d) | Construct::Update(d) => d.name.clone(),
        Construct::Taskwait { name, .. } => name.clone(),
        Construct::HostTask(h) => h.name.clone(),
    }
}

/// The buffer arguments kernel `kernel` reads and those it writes, by its signature
/// (none for a kernel the program does not know: the lowering refuses it).
pub(super) fn kernel_accesses(
    program: &Program,
    kernel: &str,
    args: &[Arg],
) -> (Vec<Section>, Vec<Section>) {
    let (mut reads, mut writes) = (Vec::new(), Vec::new());
    if let Some(k) = program.kernel_ref(kernel) {
        for (p, a) in k.params.iter().zip(args) {
            if let (crate::model::ParamKind::Buffer { access, .. }, Arg::Buffer(s)) = (&p.kind, a) {
                if access.reads() {
                    reads.push(*s);
                }
                if access.writes() {
                    writes.push(*s);
                }
            }
        }
    }
    (reads, writes)
}
