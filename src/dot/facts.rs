//! One walk over a schedule's steps, shared by the three views: which ops each stream
//! runs in issue order, what the host does in order, and the links that order them
//! (stream order, events, host waits, host issue order), at op granularity. The op view
//! prints the links as they are; the region and streams views collapse them onto
//! regions.
//!
//! Every `Step` variant has one arm in [`Facts::of`]; a host wait of any kind goes
//! through [`Facts::host_wait`] with the ops it covers and its label.

use crate::lower::OpId;
use crate::schedule::{Schedule, Step};
use std::collections::BTreeMap;

/// A node of the host sequence.
pub(super) enum HostItem {
    Op(OpId),
    /// Host wait number `K` (issue order; `hwK` in the DOT).
    Wait(usize),
}

impl HostItem {
    /// The op view's node id.
    pub(super) fn id(&self) -> String {
        match self {
            HostItem::Op(op) => format!("op{}", op.0),
            HostItem::Wait(k) => format!("hw{k}"),
        }
    }
}

/// An ordering the schedule establishes between two op-level nodes.
pub(super) enum Link {
    /// `to` is the next op after `from` on their stream (stream order).
    Stream { from: OpId, to: OpId },
    /// `event` recorded after `from`, waited by `to`'s stream before `to` (the first op
    /// issued to that stream after the wait).
    Event { event: u32, from: OpId, to: OpId },
    /// Host op `from` issued before `to`, the next op issued on some stream after it.
    Issue { from: OpId, to: OpId },
    /// Host wait `wait` covers `from`, the last op issued to a waited stream (or the op
    /// after which a waited event was recorded).
    HostWait { from: OpId, wait: usize },
    /// `host[to]` follows `host[from]` in host order (indices into [`Facts::host`]).
    Host { from: usize, to: usize },
}

/// A host wait: its label and the first op issued after it (what it orders first).
pub(super) struct Wait {
    pub(super) label: String,
    pub(super) next: Option<OpId>,
}

/// Everything the views need, gathered in one pass over the steps.
pub(super) struct Facts {
    /// Device ops per stream index, in issue order.
    pub(super) stream_ops: Vec<Vec<OpId>>,
    /// Host ops and host waits, in host order.
    pub(super) host: Vec<HostItem>,
    /// Host waits by number.
    pub(super) waits: Vec<Wait>,
    /// Links, in the order found (the op view prints them in this order).
    pub(super) links: Vec<Link>,
    /// Remarks about steps that could not be drawn (written as DOT comments).
    pub(super) notes: Vec<String>,
    /// Per stream: the last op issued to it so far (during the walk).
    last_on: Vec<Option<OpId>>,
    /// Host waits not yet followed by an op.
    waits_before_next: Vec<usize>,
}

impl Facts {
    /// Walks `sched.steps` once. Never panics on a schedule that does not match its
    /// graph: unknown streams and events become notes.
    ///
    /// Complexity: `O(S · T)` for `S` steps and `T` streams (a host op links to the next
    /// op of every stream).
    pub(super) fn of(sched: &Schedule) -> Facts {
        let max_stream = sched
            .op_stream
            .iter()
            .flatten()
            .map(|s| s.index() + 1)
            .chain(sched.steps.iter().map(|st| match st {
                Step::Record { stream, .. }
                | Step::Wait { stream, .. }
                | Step::HostWait { stream } => stream.index() + 1,
                _ => 0,
            }))
            .max()
            .unwrap_or(0);
        let ns = max_stream.max(sched.streams.len());
        let mut f = Facts {
            stream_ops: vec![Vec::new(); ns],
            host: Vec::new(),
            waits: Vec::new(),
            links: Vec::new(),
            notes: Vec::new(),
            last_on: vec![None; ns],
            waits_before_next: Vec::new(),
        };
        let mut pending_waits: Vec<Vec<u32>> = vec![Vec::new(); ns];
        let mut pending_issue: Vec<Option<OpId>> = vec![None; ns];
        let mut recorded: BTreeMap<u32, Option<OpId>> = BTreeMap::new();

        for step in &sched.steps {
            match *step {
                Step::Op(op) => {
                    for k in std::mem::take(&mut f.waits_before_next) {
                        f.waits[k].next = Some(op);
                    }
                    match sched.op_stream.get(op.index()).copied().flatten() {
                        Some(s) => {
                            let si = s.index();
                            f.stream_ops[si].push(op);
                            if let Some(prev) = f.last_on[si] {
                                f.links.push(Link::Stream { from: prev, to: op });
                            }
                            f.last_on[si] = Some(op);
                            for e in std::mem::take(&mut pending_waits[si]) {
                                match recorded.get(&e).copied().flatten() {
                                    Some(src) => f.links.push(Link::Event {
                                        event: e,
                                        from: src,
                                        to: op,
                                    }),
                                    None => f.notes.push(format!(
                                        "e{e} waited on {s} before op{} but recorded after no op",
                                        op.0
                                    )),
                                }
                            }
                            if let Some(h) = pending_issue[si].take() {
                                f.links.push(Link::Issue { from: h, to: op });
                            }
                        }
                        None => {
                            f.push_host(HostItem::Op(op));
                            for p in pending_issue.iter_mut() {
                                *p = Some(op);
                            }
                        }
                    }
                }
                Step::Record { event, stream } => {
                    recorded.insert(event.0, f.last_on.get(stream.index()).copied().flatten());
                }
                Step::Wait { event, stream } => {
                    if let Some(w) = pending_waits.get_mut(stream.index()) {
                        w.push(event.0);
                    }
                }
                Step::HostWait { stream } => {
                    let covered = f.last_on.get(stream.index()).copied().flatten();
                    f.host_wait(covered, format!("host wait {stream}"));
                }
                Step::HostWaitEvent { event } => {
                    let covered = recorded.get(&event.0).copied().flatten();
                    if covered.is_none() {
                        f.notes.push(format!(
                            "host wait hw{} on {event}, which is recorded after no op",
                            f.waits.len()
                        ));
                    }
                    f.host_wait(covered, format!("host wait {event}"));
                }
                Step::HostWaitDevice { device } => {
                    let covered: Vec<OpId> = (f.last_on.iter().enumerate())
                        .filter(|(si, _)| sched.streams.get(*si).map(|i| i.device) == Some(device))
                        .filter_map(|(_, last)| *last)
                        .collect();
                    f.host_wait(covered, format!("host wait device {device}"));
                }
                Step::HostAwait { op } => f.host_wait([op], format!("host await {op}")),
            }
        }
        for (si, waits) in pending_waits.iter().enumerate() {
            for e in waits {
                f.notes.push(format!(
                    "e{e} waited on s{si} with no later op on that stream"
                ));
            }
        }
        f
    }

    /// A host wait that covers `covered` (the ops whose completion it waits for, each
    /// the last of its stream so far), labelled `label`.
    fn host_wait(&mut self, covered: impl IntoIterator<Item = OpId>, label: String) {
        let k = self.waits.len();
        for from in covered {
            self.links.push(Link::HostWait { from, wait: k });
        }
        self.waits.push(Wait { label, next: None });
        self.waits_before_next.push(k);
        self.push_host(HostItem::Wait(k));
    }

    fn push_host(&mut self, item: HostItem) {
        let to = self.host.len();
        if to > 0 {
            self.links.push(Link::Host { from: to - 1, to });
        }
        self.host.push(item);
    }
}
