//! The send and receive tasks of a split program: a receive of every host value a
//! construct reads that its rank does not hold, zero-byte transfers for an `after`
//! across ranks, where each send and receive goes in its ranks' bodies, and the lanes
//! and chains that order them (module docs of [`super`], "Rules").

use super::{Item, Splitter};
use crate::distribute::link::{recv_body, send_body};
use crate::distribute::transfer::{Envelope, Transfer};
use crate::distribute::DistError;
use crate::model::{Construct, HostTask, Section};

impl Splitter<'_> {
    /// Receives on `rank` every element of `reads` not valid there.
    pub(super) fn fetch(
        &mut self,
        rank: u32,
        reads: &[Section],
        consumer: &str,
    ) -> Result<(), DistError> {
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
                push_piece(&mut pieces, (lo, hi, from, stamp));
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
    pub(super) fn token(&mut self, from: u32, to: u32, after: &str, consumer: &str) -> String {
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

    pub(super) fn transfer(
        &mut self,
        from: u32,
        to: u32,
        section: Section,
        consumer: &str,
    ) -> Transfer {
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
    pub(super) fn push_pair(
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
/// ranks would wait on each other ([`crate::distribute::verify`] finds such orders).
/// With the chains, each rank's sends (on [`WORK_LANE`]) and its receives (on
/// [`RECV_LANE`]) run in the order of one global sequence (the items by key over all
/// ranks) in which every send comes before its receive and after the writes of its
/// bytes: an order in which every rank progresses.
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
pub(super) fn chain(mut body: Vec<Item>) -> Vec<Construct> {
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

/// Appends `(lo, hi, key, stamp)` to `pieces`, merged into the last piece when it ends at
/// `lo` with the same key (contiguous elements from one source go in one message; the
/// merged piece keeps the later stamp).
pub(super) fn push_piece<K: PartialEq>(
    pieces: &mut Vec<(u64, u64, K, u64)>,
    (lo, hi, key, stamp): (u64, u64, K, u64),
) {
    match pieces.last_mut() {
        Some(p) if p.1 == lo && p.2 == key => {
            p.1 = hi;
            p.3 = p.3.max(stamp);
        }
        _ => pieces.push((lo, hi, key, stamp)),
    }
}
