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
//!   `tofrom` maps (the H2D copies of OpenMP 5.2 §5.8.3; an `alloc` or `from` map copies
//!   nothing in); a host task its `reads` and its `writes` (a host task may write part of
//!   a declared section, so the rest must be current). What it writes: a target region
//!   its `from` / `tofrom` maps (the D2H copies the whole section back), a host task its
//!   `writes`.
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
//! - Refused ([`DistError::Unsupported`]): `target data`, `enter data`, `exit data`,
//!   `update` and `taskgraph` (device data environments that outlive a region would need
//!   a device-side owner model); tiled programs in [`crate::model::DataStyle::Mapped`]
//!   style, the graphs of per-region maps, split.
//!
//! Complexity: `O(C · S)` for `C` constructs and `S` validity segments of the sections
//! they touch (segments merge when ranks agree again).

use super::link::{recv_body, send_body, Link};
use super::owner::Distribution;
use super::transfer::{Envelope, Transfer};
use super::validity::Validity;
use super::DistError;
use crate::model::{Construct, HostTask, Program, Section};
use std::collections::BTreeMap;
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
/// Errors: [`DistError::Unsupported`] for a construct the split does not take;
/// [`DistError::Name`] when a construct's name is a send or receive task's name;
/// [`DistError::Placed`] when a placed name is no construct of the program.
pub fn split(program: &Program, dist: &Distribution) -> Result<DistProgram, DistError> {
    let n = dist.ranks();
    let all = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
    let mut s = Splitter {
        program,
        dist,
        valid: Validity::new(program.buffers.iter().map(|b| b.len), all),
        seq: BTreeMap::new(),
        bodies: (0..n).map(|_| Vec::new()).collect(),
        links: (0..n).map(|_| Arc::new(Link::default())).collect(),
        transfers: Vec::new(),
        rank_of: BTreeMap::new(),
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
        );
    }
    for name in dist.placed_names() {
        if !s.rank_of.contains_key(name) {
            return Err(DistError::Placed {
                name: name.to_string(),
            });
        }
    }
    for t in &s.transfers {
        for name in [&t.send, &t.recv] {
            if s.rank_of.contains_key(name.as_str()) {
                return Err(DistError::Name { name: name.clone() });
            }
        }
    }
    let placement = program
        .body
        .iter()
        .filter_map(|c| match c {
            Construct::Target(t) => Some(t.name.clone()),
            Construct::HostTask(h) => Some(h.name.clone()),
            _ => None,
        })
        .map(|name| {
            let r = s.rank_of[&name];
            (name, r)
        })
        .collect();
    let lens: Vec<u64> = program.buffers.iter().map(|b| b.len).collect();
    // A split without transfers (one rank, or one rank doing all) waits for nothing:
    // its ranks keep the order one process runs.
    if !dist.program_order() && !s.transfers.is_empty() {
        super::reorder::by_readiness(&mut s.bodies, &s.transfers, &lens);
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
    valid: Validity,
    /// Next sequence number per (from, to).
    seq: BTreeMap<(u32, u32), u64>,
    bodies: Vec<Vec<Item>>,
    links: Vec<Arc<Link>>,
    transfers: Vec<Transfer>,
    /// Rank of every target region and host task placed so far, by name.
    rank_of: BTreeMap<String, u32>,
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
        let (name, reads, writes, after) = match c {
            Construct::Target(t) => {
                let secs = |f: fn(&crate::model::MapType) -> bool| {
                    t.maps
                        .iter()
                        .filter(|m| f(&m.map_type))
                        .map(|m| m.section)
                        .collect::<Vec<_>>()
                };
                (
                    &t.name,
                    secs(|m| m.has_to()),
                    secs(|m| m.has_from()),
                    &t.after,
                )
            }
            Construct::HostTask(h) => {
                let mut reads = h.reads.clone();
                reads.extend(h.writes.iter().copied());
                (&h.name, reads, h.writes.clone(), &h.after)
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
                return Ok(());
            }
            other => {
                return Err(DistError::Unsupported {
                    kind: other.kind_name(),
                    name: construct_name(other),
                    span: construct_span(other),
                })
            }
        };
        let rank = self
            .dist
            .placed(name)
            .or_else(|| writes.first().map(|s| self.dist.owner(s)))
            .or_else(|| reads.first().map(|s| self.dist.owner(s)))
            .unwrap_or(0);
        self.fetch(rank, &reads, name);
        let mut kept = Vec::new();
        for a in after {
            match self.rank_of.get(a) {
                Some(&ra) if ra != rank => kept.push(self.token(ra, rank, a, name)),
                _ => kept.push(a.clone()),
            }
        }
        let mut c = c.clone();
        match &mut c {
            Construct::Target(t) => t.after = kept,
            Construct::HostTask(h) => {
                h.after = kept;
                // Off the receive lane, so no receive that waits holds it back.
                h.lane = h.lane.or(Some(WORK_LANE));
            }
            _ => unreachable!("only target regions and host tasks get here"),
        }
        let stamp = self.tick();
        self.bodies[rank as usize].push(Item {
            key: (stamp, 0),
            transfer: false,
            c,
        });
        self.rank_of.insert(name.clone(), rank);
        for w in &writes {
            self.valid
                .update(w.buf.index(), w.lo, w.len, stamp, |_| 1u64 << rank);
        }
        Ok(())
    }

    /// The stamp of the next item placed.
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock - 1
    }

    /// Receives on `rank` every element of `reads` not valid there.
    fn fetch(&mut self, rank: u32, reads: &[Section], consumer: &str) {
        let bit = 1u64 << rank;
        for s in reads {
            // (lo, hi, from, the latest stamp of the piece's segments)
            let mut pieces: Vec<(u64, u64, u32, u64)> = Vec::new();
            for (lo, hi, mask, stamp) in self.valid.query(s.buf.index(), s.lo, s.len) {
                if mask & bit != 0 {
                    continue;
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
                let stamp = self.push_pair(&t, ty, Vec::new(), Some(anchor));
                self.valid
                    .update(s.buf.index(), lo, hi - lo, stamp, |m| m | bit);
            }
        }
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
        self.push_pair(&t, ty, vec![after.to_string()], None);
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
            after: Vec::new(),
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
