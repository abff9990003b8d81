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
//!   `writes` and its kernel's written arguments.
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
//!   which wait for receives, never wait for one ahead of an earlier send (see `chain`).
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
//! present data copies nothing). The split keeps these semantics over ranks:
//!
//! - Every data construct (`enter data`, `exit data`, `update`; `target data` as an
//!   `enter data` of its maps named `{name} begin`, its body, and an `exit data` of its
//!   maps under its own name: `to` / `alloc` release, `from` / `tofrom` copy back) runs
//!   on every rank, on its own device 0, so every rank's present table is the same at
//!   every point: the split keeps one copy of it ([`super::presence`], the lowering's
//!   reference-count rules), and a region's maps of present data copy nothing, as in one
//!   process. A target region's own maps add and remove a reference each, on its rank
//!   alone, and leave the table as they found it.
//! - Per element the split tracks, besides the ranks whose host holds the current host
//!   value (`valid`), the ranks whose device holds the current device value (`device`)
//!   and whether the two values are equal (`same`). A host write on `r`: host on `r`
//!   only, not `same`. A region on `r` writing present data (a written kernel argument
//!   overlapping a present map, or a present `from` / `tofrom` / `alloc` map): device on
//!   `r` only, not `same`. A copy every rank makes: host → device (`enter data` /
//!   `update to`): `device := valid`, `same` (a rank whose host is stale gets a stale
//!   device copy; no transfer); device → host (`exit data` / `update from`):
//!   `valid := device`, `same`; storage without a copy (`alloc`): every device, not
//!   `same` (its contents are undefined in OpenMP: a conforming program writes them
//!   before it reads them). A region's `always, to` of
//!   present data (after its host read): its device holds the value; `always, from`:
//!   its host holds it, `same`.
//! - A region on `r` reads every present section it maps on the device (staging). For
//!   each piece whose current device value is not on `r`'s device: if `same` and `r`'s
//!   host holds the value, a rank-local `update to` on `r`; if `same` and another host
//!   holds it, the host value as any host read, then `update to`; else from a rank `q`
//!   whose device holds it (one whose host holds nothing current first, then the
//!   owner, then the lowest): on `q` a rank-local `update from` (right after the device
//!   value's last update when `q`'s host held nothing current that a later construct
//!   may read, else at the consumer), a send `q → r`, on `r` the receive and an
//!   `update to`. The copies pass the device value through the host copies of `q` and
//!   `r`: one that holds the current host value loses it (it leaves `valid`) while
//!   another rank's host holds it too, and otherwise is kept: a save host task copies
//!   it aside before and a restore task puts it back after (so no host value is ever
//!   lost and nothing is refused for it).
//! - Order within a rank: [`super::reorder`] treats `enter data` and `exit data` as
//!   barriers (they act on whole entries: a zero-length item acts on the entry holding
//!   it) and an `update` as reading and writing every section it maps.
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

use super::link::{recv_body, send_body, Link};
use super::link::{restore_body, save_body, Stash};
use super::owner::Distribution;
use super::presence::{Copy, Presence};
use super::transfer::{Envelope, Transfer};
use super::validity::Validity;
use super::DistError;
use crate::model::{
    Arg, Construct, DataConstruct, HostTask, MapItem, MapType, Program, Section, TargetRegion,
    DEVICE_AUTO,
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
                // `exit data` of its maps (module docs).
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
        // Which maps find their data present on device 0 (copy nothing unless
        // `always`): decided before the region's own entries.
        let present: Vec<bool> = t
            .maps
            .iter()
            .map(|m| t.device == 0 && self.presence.present(&m.section))
            .collect();
        let secs = |f: &dyn Fn(&MapItem, bool) -> bool| -> Vec<Section> {
            t.maps
                .iter()
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
        let written_args: Option<Vec<Section>> = self
            .program
            .kernel_ref(&t.kernel)
            .map(|_| kernel_accesses(self.program, &t.kernel, &t.args).1);
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

    /// A data construct: on every rank, with the copies it makes there (module docs).
    fn data(&mut self, c: &Construct, d: &DataConstruct) -> Result<(), DistError> {
        if d.device != 0 {
            return Err(DistError::DataDevice {
                name: d.name.clone(),
                span: d.span,
            });
        }
        let copies = match c {
            Construct::EnterData(_) => self.presence.enter(&d.maps),
            Construct::ExitData(_) => self.presence.exit(&d.maps),
            _ => self.presence.update(&d.maps),
        };
        let mut per_rank = Vec::new();
        for r in 0..self.bodies.len() as u32 {
            let mut c = c.clone();
            if let Construct::EnterData(x) | Construct::ExitData(x) | Construct::Update(x) = &mut c
            {
                x.after = self.after(&d.after, r, &d.name);
            }
            per_rank.push(c);
        }
        let stamp = self.tick();
        for (body, c) in self.bodies.iter_mut().zip(per_rank) {
            body.push(Item {
                key: (stamp, 0),
                transfer: false,
                c,
            });
        }
        self.names.insert(d.name.clone());
        for copy in copies {
            match copy {
                Copy::H2d(s) => {
                    // Every rank's device gets its host's value: the current one where
                    // the host holds it.
                    for (lo, hi, h, _) in self.valid.query(s.buf.index(), s.lo, s.len) {
                        self.device.update(s.buf.index(), lo, hi - lo, stamp, |_| h);
                    }
                    self.same.update(s.buf.index(), s.lo, s.len, stamp, |_| 1);
                }
                Copy::D2h(s) => {
                    for (lo, hi, d, _) in self.device.query(s.buf.index(), s.lo, s.len) {
                        self.valid.update(s.buf.index(), lo, hi - lo, stamp, |_| d);
                    }
                    self.same.update(s.buf.index(), s.lo, s.len, stamp, |_| 1);
                }
                Copy::Alloc(s) => {
                    let all = self.all;
                    self.device
                        .update(s.buf.index(), s.lo, s.len, stamp, |_| all);
                    self.same.update(s.buf.index(), s.lo, s.len, stamp, |_| 0);
                }
            }
        }
        Ok(())
    }

    /// `(lo, hi, same)` over `s`.
    fn same_parts(&self, s: Section) -> Vec<(u64, u64, bool)> {
        self.same
            .query(s.buf.index(), s.lo, s.len)
            .into_iter()
            .map(|(lo, hi, m, _)| (lo, hi, m != 0))
            .collect()
    }

    /// Makes the device copy of every element of `reads` (present data) current on
    /// `rank` before a region there reads it (module docs, "Staging").
    fn stage(&mut self, rank: u32, reads: &[Section], consumer: &str) -> Result<(), DistError> {
        let bit = 1u64 << rank;
        for s in reads {
            let b = s.buf.index();
            // Breakpoints of the three states over `s`.
            let mut cuts: Vec<u64> = vec![s.lo, s.lo + s.len];
            for v in [&self.valid, &self.device, &self.same] {
                cuts.extend(v.query(b, s.lo, s.len).into_iter().map(|x| x.0));
            }
            cuts.sort_unstable();
            cuts.dedup();
            let mut steps: Vec<(u64, u64, Step, u64)> = Vec::new();
            for w in cuts.windows(2) {
                let (lo, hi) = (w[0], w[1]);
                let at = |v: &Validity| v.query(b, lo, 1)[0];
                let (h, d, same) = (at(&self.valid), at(&self.device), at(&self.same).2 != 0);
                let step = if d.2 & bit != 0 {
                    continue;
                } else if same && h.2 & bit != 0 {
                    Step::Local
                } else if same && h.2 != 0 {
                    Step::Fetch
                } else {
                    let owner = self.dist.owner_at(s.buf, lo);
                    let pick = |m: u64| match m {
                        0 => None,
                        m if m & (1u64 << owner) != 0 => Some(owner),
                        m => Some(m.trailing_zeros()),
                    };
                    let from = pick(d.2 & !h.2)
                        .or(pick(d.2))
                        .ok_or_else(|| DistError::Lost {
                            section: self.program.section_name(&Section::new(s.buf, lo, hi - lo)),
                            construct: consumer.to_string(),
                        })?;
                    let fb = 1u64 << from;
                    // Host copies the device value passes through: kept where they
                    // hold the current host value and no other rank's host does (a
                    // second holder makes keeping them unnecessary: they leave `valid`).
                    let others = h.2 & !(fb | bit) != 0;
                    let (save_from, save_to) = match (same || others, h.2 & bit != 0) {
                        (true, _) => (false, false),
                        (false, true) => (false, true),
                        (false, false) => (h.2 & fb != 0, false),
                    };
                    let mut destroy = 0;
                    if !same && h.2 & fb != 0 && !save_from {
                        destroy |= fb;
                    }
                    if !same && h.2 & bit != 0 && !save_to {
                        destroy |= bit;
                    }
                    Step::Stage {
                        from,
                        same,
                        save_from,
                        save_to,
                        destroy,
                        // Back at the device value's last update only where `from`'s
                        // host holds nothing current that a construct since may read.
                        anchored: same || h.2 & fb == 0,
                    }
                };
                let stamp = h.3.max(d.3);
                match steps.last_mut() {
                    Some(p) if p.1 == lo && p.2 == step => {
                        p.1 = hi;
                        p.3 = p.3.max(stamp);
                    }
                    _ => steps.push((lo, hi, step, stamp)),
                }
            }
            for (lo, hi, step, anchor) in steps {
                let piece = Section::new(s.buf, lo, hi - lo);
                match step {
                    Step::Local => self.h2d_on(rank, piece, None),
                    Step::Fetch => {
                        self.fetch(rank, &[piece], consumer)?;
                        self.h2d_on(rank, piece, None);
                    }
                    Step::Stage {
                        from,
                        same,
                        save_from,
                        save_to,
                        destroy,
                        anchored,
                    } => {
                        let anchor = anchored.then_some(anchor);
                        let saves = (save_from, save_to);
                        self.stage_piece(rank, from, piece, anchor, saves, consumer);
                        let b = piece.buf.index();
                        let both = (1u64 << from) | bit;
                        let stamp = self.clock - 1;
                        self.valid
                            .update(b, piece.lo, piece.len, stamp, |h| match same {
                                // Both hosts now hold the host value too (it equals the
                                // device's).
                                true => h | both,
                                false => h & !destroy,
                            });
                    }
                }
            }
        }
        Ok(())
    }

    /// A rank-local `target update to(piece)` on `rank` (after `after`, if any): its
    /// device then holds the host's value of `piece`, the current device value.
    fn h2d_on(&mut self, rank: u32, piece: Section, after: Option<String>) {
        self.local += 1;
        let name = format!("h2d r{rank} #{}", self.local);
        let stamp = self.tick();
        self.push_local(rank, stamp, update(&name, MapType::To, piece, after));
        let bit = 1u64 << rank;
        self.device
            .update(piece.buf.index(), piece.lo, piece.len, stamp, |d| d | bit);
    }

    /// Places a construct the split makes (a staging `update`, a save or restore task)
    /// on `rank` at `stamp`, keeping its name for the name check.
    fn push_local(&mut self, rank: u32, stamp: u64, c: Construct) {
        let name = match &c {
            Construct::Update(d) => d.name.clone(),
            Construct::HostTask(h) => h.name.clone(),
            _ => String::new(),
        };
        self.extra_names.push(name);
        self.bodies[rank as usize].push(Item {
            key: (stamp, 0),
            transfer: false,
            c,
        });
    }

    /// The device value of `piece` from `from`'s device to `to`'s: `update from` on
    /// `from` (right after `anchor` if given, else here), the transfer, `update to` on
    /// `to`; the host value the copies pass through kept aside and put back on `from`
    /// or `to` (`saves`).
    fn stage_piece(
        &mut self,
        to: u32,
        from: u32,
        piece: Section,
        anchor: Option<u64>,
        (save_from, save_to): (bool, bool),
        consumer: &str,
    ) {
        let t = self.transfer(from, to, piece, consumer);
        let ty = self.program.buffers[piece.buf.index()].ty;
        let tag = self.program.tag;
        let id = t.send.trim_start_matches("send ").to_string();
        let d2h = format!("d2h {id}");
        let stash_from: Stash = Arc::default();
        if let Some(anchor) = anchor {
            // Right after the device value's last update: the host bytes of `piece`
            // on `from` hold nothing current since then (module docs).
            let up = update(&d2h, MapType::From, piece, None);
            self.extra_names.push(d2h.clone());
            self.bodies[from as usize].push(Item {
                key: (anchor, 1),
                transfer: false,
                c: up,
            });
        } else {
            let stamp = self.tick();
            let mut after = None;
            if save_from {
                let name = format!("save {id}");
                let save = stash_task(&name, tag, &stash_from, piece, ty, None, true);
                self.push_local(from, stamp, save);
                after = Some(name);
            }
            let stamp = self.tick();
            let up = update(&d2h, MapType::From, piece, after);
            self.push_local(from, stamp, up);
        }
        let stash_to: Stash = Arc::default();
        let mut recv_after = Vec::new();
        if save_to {
            let stamp = self.tick();
            let name = format!("keep {id}");
            self.push_local(
                to,
                stamp,
                stash_task(&name, tag, &stash_to, piece, ty, None, true),
            );
            recv_after.push(name);
        }
        self.push_pair(&t, ty, vec![d2h], recv_after, anchor);
        if save_from {
            let stamp = self.tick();
            let restore = stash_task(
                &format!("restore {id}"),
                tag,
                &stash_from,
                piece,
                ty,
                Some(t.send.clone()),
                false,
            );
            self.push_local(from, stamp, restore);
        }
        let h2d = format!("h2d {id}");
        let up_stamp = self.tick();
        self.push_local(
            to,
            up_stamp,
            update(&h2d, MapType::To, piece, Some(t.recv.clone())),
        );
        if save_to {
            let stamp = self.tick();
            let restore = stash_task(
                &format!("put back {id}"),
                tag,
                &stash_to,
                piece,
                ty,
                Some(h2d),
                false,
            );
            self.push_local(to, stamp, restore);
        }
        let tb = 1u64 << to;
        self.device
            .update(piece.buf.index(), piece.lo, piece.len, up_stamp, |d| d | tb);
    }

    /// The stamp of the next item placed.
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock - 1
    }

    /// Receives on `rank` every element of `reads` not valid there.
    fn fetch(&mut self, rank: u32, reads: &[Section], consumer: &str) -> Result<(), DistError> {
        let bit = 1u64 << rank;
        for s in reads {
            // (lo, hi, from, the latest stamp of the piece's segments)
            let mut pieces: Vec<(u64, u64, u32, u64)> = Vec::new();
            for (lo, hi, mask, stamp) in self.valid.query(s.buf.index(), s.lo, s.len) {
                if mask & bit != 0 {
                    continue;
                }
                if mask == 0 {
                    return Err(DistError::Lost {
                        section: self.program.section_name(&Section::new(s.buf, lo, hi - lo)),
                        construct: consumer.to_string(),
                    });
                }
                let owner = self.dist.owner_at(s.buf, lo);
                let from = if mask & (1u64 << owner) != 0 {
                    owner
                } else {
                    mask.trailing_zeros()
                };
                match pieces.last_mut() {
                    Some(p) if p.1 == lo && p.2 == from => {
                        p.1 = hi;
                        p.3 = p.3.max(stamp);
                    }
                    _ => pieces.push((lo, hi, from, stamp)),
                }
            }
            for (lo, hi, from, anchor) in pieces {
                let section = Section::new(s.buf, lo, hi - lo);
                let t = self.transfer(from, rank, section, consumer);
                let ty = self.program.buffers[s.buf.index()].ty;
                let stamp = self.push_pair(&t, ty, Vec::new(), Vec::new(), Some(anchor));
                self.valid
                    .update(s.buf.index(), lo, hi - lo, stamp, |m| m | bit);
            }
        }
        Ok(())
    }

    /// A zero-byte transfer ordering `consumer` on `to` after construct `after` on
    /// `from`; returns the receive task's name (for the consumer's `after`).
    fn token(&mut self, from: u32, to: u32, after: &str, consumer: &str) -> String {
        let section = Section::new(crate::model::BufferId(0), 0, 0);
        let t = self.transfer(from, to, section, consumer);
        let ty = self
            .program
            .buffers
            .first()
            .map_or(crate::model::ElemType::U8, |b| b.ty);
        self.push_pair(&t, ty, vec![after.to_string()], Vec::new(), None);
        t.recv.clone()
    }

    fn transfer(&mut self, from: u32, to: u32, section: Section, consumer: &str) -> Transfer {
        let seq = self.seq.entry((from, to)).or_insert(0);
        let envelope = Envelope {
            from,
            to,
            seq: *seq,
        };
        *seq += 1;
        let t = Transfer::new(envelope, section, &self.program.buffers, consumer);
        self.transfers.push(t.clone());
        t
    }

    /// Appends `t`'s receive task to its receiver's body (at a new stamp, returned) and
    /// its send task to its sender's: right after the item stamped `anchor` when given
    /// (the last update of the bytes it sends: they hold the same value on the sender
    /// from then to now), else here. So a send goes as soon as its data is ready, not
    /// at its consumer, and does not queue behind the sender's receives placed between
    /// (StarPU-MPI posts a send when its data's last writer ends). The send and receive
    /// tasks of each rank are chained in body order afterwards ([`chain`]).
    fn push_pair(
        &mut self,
        t: &Transfer,
        ty: crate::model::ElemType,
        send_after: Vec<String>,
        recv_after: Vec<String>,
        anchor: Option<u64>,
    ) -> u64 {
        let (from, to) = (t.envelope.from as usize, t.envelope.to as usize);
        let stamp = self.tick();
        let data: Vec<Section> = (t.section.len > 0)
            .then_some(t.section)
            .into_iter()
            .collect();
        let tag = self.program.tag;
        let send = HostTask {
            name: t.send.clone(),
            reads: data.clone(),
            writes: Vec::new(),
            kernel: None,
            args: Vec::new(),
            body: Some(send_body(tag, self.links[from].clone(), t, ty)),
            depends: Vec::new(),
            after: send_after,
            lane: Some(WORK_LANE),
            span: None,
        };
        let recv = HostTask {
            name: t.recv.clone(),
            reads: Vec::new(),
            writes: data,
            body: Some(recv_body(tag, self.links[to].clone(), t, ty)),
            after: recv_after,
            lane: Some(RECV_LANE),
            ..send.clone()
        };
        let send_key = anchor.map_or((stamp, 0), |a| (a, 1));
        self.bodies[from].push(Item {
            key: send_key,
            transfer: true,
            c: Construct::HostTask(send),
        });
        self.bodies[to].push(Item {
            key: (stamp, 0),
            transfer: true,
            c: Construct::HostTask(recv),
        });
        stamp
    }
}

/// The host lane of a rank's send tasks and of the program's own host tasks.
pub(crate) const WORK_LANE: u32 = 0;
/// The host lane of a rank's receive tasks, theirs alone: a receive waits for its
/// message there and holds back only the receives after it, never a send or a host task
/// (whose data may be ready meanwhile).
pub(crate) const RECV_LANE: u32 = 1;
/// Host lanes of a rank's schedule: [`WORK_LANE`] and [`RECV_LANE`].
pub(crate) const RANK_LANES: u32 = 2;

/// A rank's body in key order, each send task `after` the rank's previous send and each
/// receive task `after` its previous receive and the rank's last send before it: the
/// scheduler's issue order may otherwise put a send ahead of an earlier one whose data
/// comes later on the same lane, or receives in another order than their sends, and the
/// ranks would wait on each other ([`super::verify`] finds such orders). With the
/// chains, each rank's sends (on [`WORK_LANE`]) and its receives (on [`RECV_LANE`]) run
/// in the order of one global sequence (the items by key over all ranks) in which every
/// send comes before its receive and after the writes of its bytes: an order in which
/// every rank progresses.
///
/// Why a receive follows the sends before it: the two lanes are apart, but a rank has
/// one issuing thread, which blocks on a receive before it issues the device work that
/// reads the received bytes, and one work lane, where a host task that reads them waits
/// for the receive. The issue order is only a topological order of the rank's op graph
/// (`schedule::order`: device work after a host op by the region's critical-path rank,
/// host ops as soon as they are ready), so without an edge from a send to a later
/// receive it may issue the receive's consumer, and block there, before the device work
/// the send carries (or put the consumer ahead of the send on the work lane), while the
/// message the receive waits for is sent by a rank that first needs this send: the
/// ranks deadlock. With the edge every op that waits for a receive is issued after every
/// earlier send and everything those sends read. A send never waits for a receive it
/// does not need (no edge from a receive to a later send), and a receive waits for an
/// earlier send only until that send's bytes are written (sends never block).
fn chain(mut body: Vec<Item>) -> Vec<Construct> {
    body.sort_by_key(|i| i.key);
    let (mut last_send, mut last_recv): (Option<String>, Option<String>) = (None, None);
    body.into_iter()
        .map(|mut i| {
            if let (true, Construct::HostTask(h)) = (i.transfer, &mut i.c) {
                if h.lane == Some(RECV_LANE) {
                    h.after.extend(last_recv.replace(h.name.clone()));
                    // After every send before it (the send chain's last one): see the
                    // docs above.
                    h.after.extend(last_send.clone());
                } else {
                    h.after.extend(last_send.replace(h.name.clone()));
                }
            }
            i.c
        })
        .collect()
}

/// The name a construct is shown by in messages.
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

/// What a region's rank needs for one piece of present data it reads (see `stage`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Its host holds the current host value, equal to the device's: `update to`.
    Local,
    /// Host and device values are equal, another rank's host holds them: the host
    /// value (as any host read), then `update to`.
    Fetch,
    /// The device value from `from`'s device (see `stage_piece`).
    Stage {
        from: u32,
        same: bool,
        save_from: bool,
        save_to: bool,
        /// Ranks whose current host value the copies overwrite (they leave `valid`).
        destroy: u64,
        /// The `update from` and send may go right after the device value's last
        /// update.
        anchored: bool,
    },
}

/// A rank-local `target update` of `piece` (`dir`: `To` or `From`), after `after`.
fn update(name: &str, dir: MapType, piece: Section, after: Option<String>) -> Construct {
    Construct::Update(DataConstruct {
        name: name.to_string(),
        maps: vec![MapItem::new(dir, piece)],
        nowait: true,
        depends: Vec::new(),
        device: 0,
        after: after.into_iter().collect(),
        span: None,
    })
}

/// A host task keeping `piece`'s host bytes in `stash` (`save`) or writing them back.
fn stash_task(
    name: &str,
    tag: crate::model::ProgramTag,
    stash: &Stash,
    piece: Section,
    ty: crate::model::ElemType,
    after: Option<String>,
    save: bool,
) -> Construct {
    let (reads, writes, body) = match save {
        true => (
            vec![piece],
            Vec::new(),
            save_body(tag, stash.clone(), piece, ty),
        ),
        false => (
            Vec::new(),
            vec![piece],
            restore_body(tag, stash.clone(), piece, ty),
        ),
    };
    Construct::HostTask(HostTask {
        name: name.to_string(),
        reads,
        writes,
        kernel: None,
        args: Vec::new(),
        body: Some(body),
        depends: Vec::new(),
        after: after.into_iter().collect(),
        lane: Some(WORK_LANE),
        span: None,
    })
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
