//! The device data environments of a split program: data constructs on every rank,
//! the per-element device state, and device values staged between ranks.
//!
//! The split keeps OpenMP's host and device copies apart over ranks (see [`super`],
//! "Device data environments"):
//!
//! - Every data construct (`enter data`, `exit data`, `update`; `target data` as an
//!   `enter data` of its maps named `{name} begin`, its body, and an `exit data` of its
//!   maps under its own name: `to` / `alloc` release, `from` / `tofrom` copy back) runs
//!   on every rank, on its own device 0, so every rank's present table is the same at
//!   every point: the split keeps one copy of it ([`crate::distribute::presence`], the
//!   lowering's reference-count rules), and a region's maps of present data copy
//!   nothing, as in one process. A target region's own maps add and remove a reference
//!   each, on its rank alone, and leave the table as they found it.
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
//! - Order within a rank: [`crate::distribute::reorder`] treats `enter data` and
//!   `exit data` as barriers (they act on whole entries: a zero-length item acts on the
//!   entry holding it) and an `update` as reading and writing every section it maps.

use super::messages::WORK_LANE;
use super::{Item, Splitter};
use crate::distribute::link::{restore_body, save_body, Stash};
use crate::distribute::presence::Copy;
use crate::distribute::validity::Validity;
use crate::distribute::DistError;
use crate::model::{Construct, DataConstruct, HostTask, MapItem, MapType, Section};
use std::sync::Arc;

impl Splitter<'_> {
    /// A data construct: on every rank, with the copies it makes there (module docs).
    pub(super) fn data(&mut self, c: &Construct, d: &DataConstruct) -> Result<(), DistError> {
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
    pub(super) fn same_parts(&self, s: Section) -> Vec<(u64, u64, bool)> {
        self.same
            .query(s.buf.index(), s.lo, s.len)
            .into_iter()
            .map(|(lo, hi, m, _)| (lo, hi, m != 0))
            .collect()
    }

    /// Makes the device copy of every element of `reads` (present data) current on
    /// `rank` before a region there reads it (module docs, "Staging").
    pub(super) fn stage(
        &mut self,
        rank: u32,
        reads: &[Section],
        consumer: &str,
    ) -> Result<(), DistError> {
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
                super::messages::push_piece(&mut steps, (lo, hi, step, stamp));
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
