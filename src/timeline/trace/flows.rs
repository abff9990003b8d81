//! What waited for what, read from a [`Schedule`]'s steps alone (nothing of it is
//! recorded while the run issues): each cross-stream event wait and each host wait
//! becomes a [`Link`] from the op whose completion it waited for to what it held back,
//! and each host wait gets the name its slice carries.

use crate::lower::{OpGraph, OpId};
use crate::schedule::{Schedule, Step};
use std::collections::BTreeMap;

/// What a wait held back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Target {
    /// The first copy or launch issued to the waiting stream after a `Step::Wait`.
    Op(OpId),
    /// A host-wait step (its index in `Schedule::steps`).
    HostWait(usize),
}

/// One wait: `to` could not start before `from` completed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Link {
    /// What carried the wait: the event (`e0`), the stream (`s1`, a host wait on a whole
    /// stream) or the device (`device 0`).
    pub via: String,
    /// The last op issued to the recording (or waited-for) stream before the record (or
    /// the host wait).
    pub from: OpId,
    pub to: Target,
}

/// The links of a schedule, in step order of their waits, and the name of every host
/// wait step.
#[derive(Debug, Default)]
pub(super) struct Waits {
    pub links: Vec<Link>,
    /// Per host-wait step: `wait s1 (after #6)`, `wait e0 (after #2)`, `wait device 0`
    /// (`(after …)` left out when the stream had no op before the wait).
    pub names: BTreeMap<usize, String>,
}

/// The [`Waits`] of `sched`, a schedule of `graph`.
///
/// A `Step::Wait` with no copy or launch issued to its stream after it, or on an event
/// recorded after no op, links nothing; a `Step::Record` of an event that is recorded again later
/// serves the waits between the two records (the scheduler never re-records an event
/// before all its waits are issued).
///
/// Complexity: `O(S + streams + events)` for `S` steps.
pub(super) fn waits(graph: &OpGraph, sched: &Schedule) -> Waits {
    let mut last_op: Vec<Option<OpId>> = vec![None; sched.streams.len()];
    let mut recorded: Vec<Option<OpId>> = vec![None; sched.events as usize];
    // Per stream: (via, from) of waits whose target is the stream's next op.
    let mut pending: Vec<Vec<(String, OpId)>> = vec![Vec::new(); sched.streams.len()];
    let mut out = Waits::default();
    let after = |op: Option<OpId>| op.map_or(String::new(), |op| format!(" (after {op})"));
    for (i, step) in sched.steps.iter().enumerate() {
        match *step {
            Step::Op(op) => {
                let on_stream = sched.op_stream.get(op.index()).copied().flatten();
                let kind = &graph.op(op).kind;
                if let (Some(s), false) = (on_stream, kind.is_host()) {
                    // A wait holds back the next copy or launch: an alloc or free after
                    // it is not drawn in stream order (the host plugin times it at issue,
                    // before the wait is met), so a flow ending there would go back in
                    // time.
                    if kind.is_copy_or_launch() {
                        for (via, from) in pending[s.index()].drain(..) {
                            out.links.push(Link {
                                via,
                                from,
                                to: Target::Op(op),
                            });
                        }
                    }
                    last_op[s.index()] = Some(op);
                }
            }
            Step::Record { event, stream } => recorded[event.index()] = last_op[stream.index()],
            Step::Wait { event, stream } => {
                if let Some(from) = recorded[event.index()] {
                    pending[stream.index()].push((event.to_string(), from));
                }
            }
            Step::HostWait { stream } => {
                let from = last_op[stream.index()];
                out.names.insert(i, format!("wait {stream}{}", after(from)));
                if let Some(from) = from {
                    out.links.push(Link {
                        via: stream.to_string(),
                        from,
                        to: Target::HostWait(i),
                    });
                }
            }
            Step::HostWaitEvent { event } => {
                let from = recorded[event.index()];
                out.names.insert(i, format!("wait {event}{}", after(from)));
                if let Some(from) = from {
                    out.links.push(Link {
                        via: event.to_string(),
                        from,
                        to: Target::HostWait(i),
                    });
                }
            }
            Step::HostAwait { op } => {
                out.names.insert(i, format!("await {op}"));
                out.links.push(Link {
                    via: format!("h{}", sched.op_lane.get(op.index()).copied().unwrap_or(0)),
                    from: op,
                    to: Target::HostWait(i),
                });
            }
            Step::HostWaitDevice { device } => {
                out.names.insert(i, format!("wait device {device}"));
                for (t, info) in sched.streams.iter().enumerate() {
                    if let (true, Some(from)) = (info.device == device, last_op[t]) {
                        out.links.push(Link {
                            via: format!("device {device}"),
                            from,
                            to: Target::HostWait(i),
                        });
                    }
                }
            }
        }
    }
    out
}
