//! The schedule text: deterministic, one block per stream, then the host, then a summary.
//! [`super::parse()`] reads it back (with the op graph), giving the same [`Schedule`].
//!
//! ```text
//! schedule "saxpy" policy=per-op streams=2 (pool 4 per device)
//! s0 (device 0):
//!   #0     alloc    x[0:1024] 4 KiB          region "saxpy"
//!   ...
//!   record e0
//!   wait e1
//!   host wait               (the host blocks on s0 right here, after the op above)
//! s4 (device 1):
//!   #12    peer     x[0:256] 1 KiB from d0   (a peer copy from device 0, on device 1's stream)
//! host:
//!   wait s0 (after #5)      (the host blocks on s0, whose last op then is #5)
//!   wait e2 (after #9)      (a host wait on an event: recorded after #9)
//!   await #11               (a host lane awaits host op #11, of another lane)
//!   #13    end                               region "end" on h1   (its host lane)
//! issue order: s0 3, ...    (only for a hand-made order, see below)
//! summary: 14 ops, 2 streams, 3 events, 3 host waits
//! ```
//!
//! Each block lists its lane's steps in issue order; how the lanes interleave follows
//! from the rule of [`super::lanes`] (ops in id order, each with the syncs beside it),
//! which every schedule the scheduler makes follows. A host wait issued right after an op
//! of the stream it waits on (and not right before a host op) is printed in that stream's
//! block as `host wait`; every other host wait is printed in the host block, before the
//! host op it precedes. A schedule whose steps do not follow the rule (edited by hand)
//! gets one more line before the summary, `issue order: s0 3, host 1, s1 2, ...`: runs of
//! lanes, each with how many of its lines are issued in a row, so the text is exact for
//! every schedule.
//!
//! A host wait's `(after #k)` names the last op issued to its stream before it (on a
//! stream), or the op its event was last recorded after (on an event); it is left out
//! when there is none.
//!
//! Host lanes: with more than one, the header ends with ` host lanes=N` and each host
//! op line with ` on hN`, its lane. An `await #k` ([`super::Step::HostAwait`]) is
//! printed in the host block before the host op it leads, or, when the issuing thread
//! awaits a host op before a device op, in that op's stream block, leading it. The
//! scheduler issues device work ahead of host ops it does not depend on
//! ([`super::sync::issue_order`]), so a schedule with host work usually has an `issue
//! order:` line.

use super::lanes::{canonical_order, Item};
use super::{Schedule, Step, StreamId};
use crate::lower::{OpGraph, OpId, OpKind};
use crate::model::{escape_controls, escape_quoted};
use crate::model::{human_bytes, Section};
use std::collections::BTreeMap;
use std::fmt::{self, Write};

#[derive(Clone, Debug, PartialEq)]
enum Detail {
    None,
    Section(Section),
    /// A peer copy: the section and the device it is copied from.
    Peer(Section, u32),
    Kernel(u32),
}

#[derive(Clone, Debug, PartialEq)]
struct OpLine {
    kind: &'static str,
    detail: Detail,
    bytes: u64,
    region: u32,
}

/// What `Display` needs of the graph, copied compactly (about 48 bytes per op).
#[derive(Clone, Debug, PartialEq, Default)]
pub(crate) struct OpText {
    lines: Vec<OpLine>,
    buffer_names: Vec<String>,
    region_names: Vec<String>,
    kernel_names: Vec<String>,
    pub(super) pool: u32,
}

impl OpText {
    /// Copies the descriptions of every op. `O(V log K)` for `K` distinct kernel names.
    pub(crate) fn new(graph: &OpGraph, pool: u32) -> OpText {
        let mut kernels: BTreeMap<&str, u32> = BTreeMap::new();
        let mut kernel_names = Vec::new();
        let mut last: Option<(&str, u32)> = None;
        let lines = graph
            .op_ids()
            .map(|id| {
                let op = graph.op(id);
                let detail = match &op.kind {
                    OpKind::Alloc { alloc } | OpKind::Free { alloc } => {
                        Detail::Section(graph.allocs[alloc.index()].section)
                    }
                    OpKind::H2D { section, .. } | OpKind::D2H { section, .. } => {
                        Detail::Section(*section)
                    }
                    OpKind::PeerCopy { src, section, .. } => {
                        Detail::Peer(*section, graph.allocs[src.index()].device)
                    }
                    OpKind::Kernel(k) | OpKind::HostTask { call: Some(k), .. } => {
                        // Runs of one kernel are common: the last name is looked up once.
                        let i = match last {
                            Some((name, i)) if name == k.kernel.as_str() => i,
                            _ => {
                                let next = kernels.len() as u32;
                                let i = *kernels.entry(k.kernel.as_str()).or_insert_with(|| {
                                    kernel_names.push(escape_controls(&k.kernel).into_owned());
                                    next
                                });
                                last = Some((k.kernel.as_str(), i));
                                i
                            }
                        };
                        Detail::Kernel(i)
                    }
                    _ => Detail::None,
                };
                OpLine {
                    kind: op.kind.name(),
                    detail,
                    bytes: graph.op_bytes(id),
                    region: op.region.0,
                }
            })
            .collect();
        OpText {
            lines,
            buffer_names: graph
                .buffers
                .iter()
                .map(|b| escape_controls(&b.name).into_owned())
                .collect(),
            region_names: graph
                .regions
                .iter()
                // Already the shown name (control characters escaped by the lowering):
                // only its quotes are escaped, so `\u{1b}` reads as everywhere else.
                .map(|r| r.name.replace('"', "\\\""))
                .collect(),
            kernel_names,
            pool,
        }
    }

    /// The op line of `op` (without indentation): id, kind, detail, region.
    pub(super) fn describe(&self, op: OpId) -> String {
        let l = &self.lines[op.index()];
        let mut s = format!("{:<6} {:<8}", op.to_string(), l.kind);
        match &l.detail {
            Detail::Section(sec) => {
                let _ = write!(
                    s,
                    " {}[{}:{}] {}",
                    self.buffer_names[sec.buf.index()],
                    sec.lo,
                    sec.len,
                    human_bytes(l.bytes)
                );
            }
            Detail::Peer(sec, from) => {
                let _ = write!(
                    s,
                    " {}[{}:{}] {} from d{from}",
                    self.buffer_names[sec.buf.index()],
                    sec.lo,
                    sec.len,
                    human_bytes(l.bytes)
                );
            }
            Detail::Kernel(k) => {
                let _ = write!(s, " {}", self.kernel_names[*k as usize]);
            }
            Detail::None => {}
        }
        format!(
            "{s:<40} region \"{}\"",
            self.region_names[l.region as usize]
        )
    }
}

/// Which lane prints each step: a stream's index, or `streams.len()` for the host.
///
/// An op goes to its stream's lane (the host's for a host op); records and event waits
/// to their stream's; a host wait on a stream to that stream's lane when it comes right
/// after an op of the stream (with only that op's trailing lines between) and the next op
/// is not a host op, else to the host's; host waits on events and devices to the host's;
/// an await of a host op to the lane of the next op (leading it).
/// `O(K)` for `K` steps.
pub(super) fn step_lanes(sched: &Schedule) -> Vec<u32> {
    let host = sched.streams.len() as u32;
    let lane_of_op = |op: crate::lower::OpId| {
        sched
            .op_stream
            .get(op.index())
            .copied()
            .flatten()
            .map_or(host, |s| s.0)
    };
    // Whether the next op step after each step is a host op, and its lane (scanned
    // backwards).
    let mut next_is_host = vec![false; sched.steps.len()];
    let mut next_lane = vec![host; sched.steps.len()];
    let (mut after, mut lane_after) = (false, host);
    for (k, step) in sched.steps.iter().enumerate().rev() {
        next_is_host[k] = after;
        next_lane[k] = lane_after;
        if let Step::Op(op) = step {
            lane_after = lane_of_op(*op);
            after = lane_after == host;
        }
    }
    // The stream whose op's trailing lines are being issued, if any.
    let mut trail: Option<u32> = None;
    let mut lanes = Vec::with_capacity(sched.steps.len());
    for (k, step) in sched.steps.iter().enumerate() {
        let lane = match *step {
            Step::Op(op) => lane_of_op(op),
            Step::Record { stream, .. } | Step::Wait { stream, .. } => stream.0,
            Step::HostWait { stream } if trail == Some(stream.0) && !next_is_host[k] => stream.0,
            // The issuing thread awaits a host op before a device op: printed in that
            // op's stream block, leading it.
            Step::HostAwait { .. } => next_lane[k],
            Step::HostWait { .. } | Step::HostWaitEvent { .. } | Step::HostWaitDevice { .. } => {
                host
            }
        };
        trail = match *step {
            Step::Op(_) => Some(lane).filter(|&l| l != host),
            Step::Record { stream, .. } if trail == Some(stream.0) => trail,
            Step::HostWait { .. } if lane != host => trail,
            _ => None,
        };
        lanes.push(lane);
    }
    lanes
}

/// The line of `step` for [`canonical_order`], printed in lane `lane` (`host`: the
/// host's).
pub(super) fn item(step: &Step, lane: u32, host: u32) -> Item {
    match *step {
        Step::Op(op) => Item {
            op: Some(op),
            leads: false,
        },
        Step::Wait { .. } | Step::HostAwait { .. } => Item {
            op: None,
            leads: true,
        },
        _ => Item {
            op: None,
            leads: lane == host,
        },
    }
}

/// What a host wait's `(after #k)` says, step by step: the last op issued to each stream
/// and the op each event was last recorded after.
pub(super) struct Afters {
    last_on: Vec<Option<crate::lower::OpId>>,
    recorded_after: Vec<Option<crate::lower::OpId>>,
}

impl Afters {
    pub(super) fn new(sched: &Schedule) -> Afters {
        Afters {
            last_on: vec![None; sched.streams.len()],
            recorded_after: vec![None; sched.events as usize],
        }
    }

    /// Goes past `step` (of `sched`); for a host wait on a stream or an event, returns
    /// the op its `(after #k)` names (`None`: none, or another step). `O(1)`.
    pub(super) fn step(&mut self, sched: &Schedule, step: &Step) -> Option<crate::lower::OpId> {
        match *step {
            Step::Op(op) => {
                if let Some(Some(s)) = sched.op_stream.get(op.index()) {
                    if let Some(l) = self.last_on.get_mut(s.index()) {
                        *l = Some(op);
                    }
                }
                None
            }
            Step::Record { event, stream } => {
                let last = self.last_on.get(stream.index()).copied().flatten();
                if let Some(r) = self.recorded_after.get_mut(event.index()) {
                    *r = last;
                }
                None
            }
            Step::HostWait { stream } => self.last_on.get(stream.index()).copied().flatten(),
            Step::HostWaitEvent { event } => {
                self.recorded_after.get(event.index()).copied().flatten()
            }
            Step::Wait { .. } | Step::HostWaitDevice { .. } | Step::HostAwait { .. } => None,
        }
    }
}

/// The name of lane `lane` in the text (`sN`, or `host`).
pub(super) fn lane_name(lane: u32, host: u32) -> String {
    if lane == host {
        "host".to_string()
    } else {
        StreamId(lane).to_string()
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = &self.text;
        let ns = self.streams.len();
        let host = ns as u32;
        let lanes = step_lanes(self);
        let mut blocks: Vec<Vec<String>> = vec![Vec::new(); ns + 1];
        let mut items: Vec<Vec<Item>> = vec![Vec::new(); ns + 1];
        let mut afters = Afters::new(self);
        for (step, &lane) in self.steps.iter().zip(&lanes) {
            let after = afters.step(self, step);
            let after = || after.map_or(String::new(), |op| format!(" (after {op})"));
            let line = match *step {
                Step::Op(op) if lane == host && self.host_lanes > 1 => {
                    let on = self.op_lane.get(op.index()).copied().unwrap_or(0);
                    format!("{} on {}", t.describe(op), super::LaneId(on))
                }
                Step::Op(op) => t.describe(op),
                Step::HostAwait { op } => format!("await {op}"),
                Step::Record { event, .. } => format!("record {event}"),
                Step::Wait { event, .. } => format!("wait {event}"),
                Step::HostWait { .. } if lane != host => "host wait".to_string(),
                Step::HostWait { stream } => format!("wait {stream}{}", after()),
                Step::HostWaitEvent { event } => format!("wait {event}{}", after()),
                Step::HostWaitDevice { device } => format!("wait device {device} (all streams)"),
            };
            blocks[lane as usize].push(line);
            items[lane as usize].push(item(step, lane, host));
        }
        let used = self.used_streams();
        write!(
            f,
            "schedule \"{}\" policy={} streams={} (pool {} per device)",
            t_name(self),
            self.policy,
            used,
            t.pool
        )?;
        match self.host_lanes > 1 {
            true => writeln!(f, " host lanes={}", self.host_lanes)?,
            false => writeln!(f)?,
        }
        for (i, lines) in blocks[..ns].iter().enumerate() {
            if lines.is_empty() {
                continue;
            }
            writeln!(
                f,
                "{} (device {}{}):",
                StreamId(i as u32),
                self.streams[i].device,
                if self.streams[i].high_priority {
                    ", high priority"
                } else {
                    ""
                }
            )?;
            for l in lines {
                writeln!(f, "  {l}")?;
            }
        }
        if !blocks[ns].is_empty() {
            writeln!(f, "host:")?;
            for l in &blocks[ns] {
                writeln!(f, "  {l}")?;
            }
        }
        // The lanes interleave by the rule, or the text says how.
        let mut seen = vec![0u32; ns + 1];
        let canonical = canonical_order(&items)
            .iter()
            .zip(&lanes)
            .all(|(&(l, j), &lane)| {
                let ok = l == lane && j == seen[l as usize];
                seen[lane as usize] += 1;
                ok
            });
        if !canonical {
            let mut runs: Vec<(u32, usize)> = Vec::new();
            for &lane in &lanes {
                match runs.last_mut() {
                    Some((l, n)) if *l == lane => *n += 1,
                    _ => runs.push((lane, 1)),
                }
            }
            let runs: Vec<String> = runs
                .iter()
                .map(|(l, n)| format!("{} {n}", lane_name(*l, host)))
                .collect();
            writeln!(f, "issue order: {}", runs.join(", "))?;
        }
        let hw = self.host_waits().count();
        writeln!(
            f,
            "summary: {} ops, {} stream{}, {} event{}, {} host wait{}",
            self.op_count(),
            used,
            plural(used),
            self.events,
            plural(self.events as usize),
            hw,
            plural(hw)
        )
    }
}

fn t_name(s: &Schedule) -> std::borrow::Cow<'_, str> {
    escape_quoted(&s.name)
}

pub(super) fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
