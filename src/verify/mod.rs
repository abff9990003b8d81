//! The verifier: proves a schedule orders every OpGraph edge under stream semantics and,
//! under `minimal`, that every event wait and host wait is necessary.
//!
//! Model (CUDA stream semantics, CUDA Runtime API §6.4 "Stream Management" and §6.5
//! "Event Management"): ops on one stream run in issue order; `cuEventRecord` captures
//! everything issued to its stream so far; `cuStreamWaitEvent` makes later work on the
//! waiting stream start after that; `cuStreamSynchronize` blocks the host until its
//! stream's issued work completes; an op issued by the host starts after everything the
//! host already knows complete. The verifier tracks this as vector clocks (per stream:
//! how many ops of each stream are complete before its next op may start) and checks
//! each edge `a → b` as "at `b`'s start, `a`'s stream prefix including `a` is complete".
//!
//! Necessity (minimal policy): a wait is necessary when some edge into the first op
//! issued after it on its stream (for a host wait: the next host op) is ordered with the
//! wait and not without it, the other waits at the same point kept. The scheduler places
//! every wait just before the op that needs it, so this local test is exact for its
//! output; for hand-edited schedules it may report a wait that only later ops need.
//!
//! Every violation is reported, not only the first.
//!
//! Complexity: `O((V + E + K)·S)` for `V` ops, `E` edges, `K` sync steps, `S` streams.

use crate::lower::{OpGraph, OpId, RegionId};
use crate::schedule::{EventId, Schedule, Step, StreamId, SyncPolicy};
use thiserror::Error;

/// One thing wrong with a schedule.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum Violation {
    /// An OpGraph edge the schedule does not order.
    #[error("edge {from} -> {to} is not ordered: {detail}")]
    Unordered {
        from: OpId,
        to: OpId,
        detail: String,
    },
    /// An op missing from the issue sequence, issued twice, before a predecessor, or on a
    /// stream of the wrong device.
    #[error("op {op}: {detail}")]
    BadIssue { op: OpId, detail: String },
    /// A stream waits on an event not yet recorded, or an event is recorded twice.
    #[error("event {event}: {detail}")]
    BadEvent { event: EventId, detail: String },
    /// A region whose ops are on more than one stream.
    #[error("region \"{name}\" is split over streams {}", streams.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", "))]
    RegionSplit {
        region: RegionId,
        name: String,
        streams: Vec<StreamId>,
    },
    /// Under `minimal`: a sync step that no edge needs.
    #[error("unnecessary {what} at step {step}: removing it breaks no edge")]
    Unnecessary { step: usize, what: String },
}

/// All violations found.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("schedule \"{name}\" is wrong: {} violation(s):\n{}", violations.len(), violations.iter().map(|v| format!("  - {v}")).collect::<Vec<_>>().join("\n"))]
pub struct VerifyError {
    pub name: String,
    pub violations: Vec<Violation>,
}

/// What the verifier established.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct VerifyReport {
    /// Edges proven ordered.
    pub edges_checked: usize,
    /// Event waits and host waits proven necessary (minimal policy only).
    pub syncs_proven_necessary: usize,
}

const NONE: u32 = u32::MAX;

/// Knowledge before a run of waits, and the waits (step index, clock they add).
type Pending = (Vec<u32>, Vec<(usize, Vec<u32>)>);

struct Sim {
    known: Vec<u32>,
    host: Vec<u32>,
    count: Vec<u32>,
    /// Position on its stream of each device op; NONE until issued.
    pos: Vec<u32>,
    issued: Vec<bool>,
    ev: Vec<Option<Vec<u32>>>,
    ev_waited: Vec<bool>,
    /// Per stream: known before the pending waits, and the pending waits (step, clock).
    pending: Vec<Pending>,
    /// Host waits since the last host op: host before them, and (step, clock).
    host_pending: Pending,
}

fn join(a: &mut [u32], b: &[u32]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x = (*x).max(*y);
    }
}

/// Verifies `sched` against `graph`.
///
/// Returns what was proven, or every [`Violation`] found. Never panics on a
/// malformed schedule (out-of-range ids are reported).
pub fn verify(graph: &OpGraph, sched: &Schedule) -> Result<VerifyReport, VerifyError> {
    let n = graph.ops.len();
    let s = sched.streams.len().max(1);
    let mut v: Vec<Violation> = Vec::new();
    let mut report = VerifyReport::default();
    let minimal = sched.policy == SyncPolicy::Minimal;

    if sched.op_stream.len() != n {
        v.push(Violation::BadIssue {
            op: OpId(n as u32),
            detail: format!(
                "schedule has streams for {} ops, graph has {n}",
                sched.op_stream.len()
            ),
        });
        return Err(VerifyError {
            name: sched.name.clone(),
            violations: v,
        });
    }
    // Streams: device ops on a stream of their device, host ops on none, regions whole.
    for id in graph.op_ids() {
        let op = graph.op(id);
        match (op.kind.is_host(), sched.op_stream[id.index()]) {
            (true, Some(st)) => v.push(Violation::BadIssue {
                op: id,
                detail: format!("host op {} placed on stream {st}", graph.describe(id)),
            }),
            (false, None) => v.push(Violation::BadIssue {
                op: id,
                detail: format!("device op {} has no stream", graph.describe(id)),
            }),
            (false, Some(st)) => match sched.streams.get(st.index()) {
                None => v.push(Violation::BadIssue {
                    op: id,
                    detail: format!("stream {st} does not exist"),
                }),
                Some(info) if info.device != op.device => v.push(Violation::BadIssue {
                    op: id,
                    detail: format!(
                        "runs on device {} but stream {st} is of device {}",
                        op.device, info.device
                    ),
                }),
                _ => {}
            },
            (true, None) => {}
        }
    }
    for (ri, r) in graph.regions.iter().enumerate() {
        let mut streams: Vec<StreamId> = r
            .ops
            .clone()
            .filter_map(|o| sched.op_stream[o as usize])
            .collect();
        streams.sort_unstable();
        streams.dedup();
        if streams.len() > 1 {
            v.push(Violation::RegionSplit {
                region: RegionId(ri as u32),
                name: r.name.clone(),
                streams,
            });
        }
    }

    let mut sim = Sim {
        known: vec![0; s * s],
        host: vec![0; s],
        count: vec![0; s],
        pos: vec![NONE; n],
        issued: vec![false; n],
        ev: vec![None; sched.events as usize],
        ev_waited: vec![false; sched.events as usize],
        pending: (0..s).map(|_| (vec![0; s], Vec::new())).collect(),
        host_pending: (vec![0; s], Vec::new()),
    };
    let stream_ok = |st: StreamId| st.index() < sched.streams.len();
    let mut start = vec![0u32; s];

    for (k, step) in sched.steps.iter().enumerate() {
        match *step {
            Step::Op(id) => {
                if id.index() >= n {
                    v.push(Violation::BadIssue {
                        op: id,
                        detail: "no such op".into(),
                    });
                    continue;
                }
                if sim.issued[id.index()] {
                    v.push(Violation::BadIssue {
                        op: id,
                        detail: "issued twice".into(),
                    });
                    continue;
                }
                sim.issued[id.index()] = true;
                let stream = sched.op_stream[id.index()].filter(|st| stream_ok(*st));
                match stream {
                    Some(t) => {
                        let t = t.index();
                        start.copy_from_slice(&sim.known[t * s..(t + 1) * s]);
                        join(&mut start, &sim.host);
                    }
                    None => start.copy_from_slice(&sim.host),
                }
                let covered = |c: &[u32], p: OpId, sim: &Sim| -> bool {
                    match sched.op_stream[p.index()].filter(|st| stream_ok(*st)) {
                        Some(ps) => {
                            sim.pos[p.index()] != NONE && c[ps.index()] > sim.pos[p.index()]
                        }
                        None => sim.issued[p.index()],
                    }
                };
                for &p in graph.preds(id) {
                    report.edges_checked += 1;
                    if !sim.issued[p.index()] {
                        v.push(Violation::Unordered {
                            from: p,
                            to: id,
                            detail: format!(
                                "{} is issued after {}",
                                graph.describe(p),
                                graph.describe(id)
                            ),
                        });
                    } else if !covered(&start, p, &sim) {
                        let ps = sched.op_stream[p.index()];
                        v.push(Violation::Unordered {
                            from: p,
                            to: id,
                            detail: format!(
                                "{} ({}, region \"{}\") may still run when {} ({}, region \"{}\") starts",
                                graph.describe(p),
                                ps.map(|x| x.to_string()).unwrap_or("host".into()),
                                graph.region_of(p).name,
                                graph.describe(id),
                                stream.map(|x| x.to_string()).unwrap_or("host".into()),
                                graph.region_of(id).name
                            ),
                        });
                    }
                }
                // Necessity of the waits just before this op.
                let has_pending = match stream {
                    Some(t) => !sim.pending[t.index()].1.is_empty(),
                    None => !sim.host_pending.1.is_empty(),
                };
                let pend = match stream {
                    Some(t) if has_pending => std::mem::take(&mut sim.pending[t.index()]),
                    None if has_pending => std::mem::take(&mut sim.host_pending),
                    _ => (Vec::new(), Vec::new()),
                };
                if minimal {
                    for (i, (wstep, _)) in pend.1.iter().enumerate() {
                        let mut without = pend.0.clone();
                        for (j, (_, c)) in pend.1.iter().enumerate() {
                            if j != i {
                                join(&mut without, c);
                            }
                        }
                        if stream.is_some() {
                            join(&mut without, &sim.host);
                        }
                        let needed = graph
                            .preds(id)
                            .iter()
                            .any(|&p| covered(&start, p, &sim) && !covered(&without, p, &sim));
                        if needed {
                            report.syncs_proven_necessary += 1;
                        } else {
                            v.push(Violation::Unnecessary {
                                step: *wstep,
                                what: describe_step(&sched.steps[*wstep]),
                            });
                        }
                    }
                }
                if let Some(t) = stream {
                    {
                        let t = t.index();
                        let row = &mut sim.known[t * s..(t + 1) * s];
                        row.copy_from_slice(&start);
                        sim.pos[id.index()] = sim.count[t];
                        sim.count[t] += 1;
                        row[t] = sim.count[t];
                    }
                }
            }
            Step::Record { event, stream } => {
                if !stream_ok(stream) || event.index() >= sim.ev.len() {
                    v.push(Violation::BadEvent {
                        event,
                        detail: format!("bad event or stream {stream}"),
                    });
                    continue;
                }
                if sim.ev[event.index()].is_some() {
                    v.push(Violation::BadEvent {
                        event,
                        detail: "recorded twice".into(),
                    });
                }
                let t = stream.index();
                sim.ev[event.index()] = Some(sim.known[t * s..(t + 1) * s].to_vec());
            }
            Step::Wait { event, stream } => {
                if !stream_ok(stream) || event.index() >= sim.ev.len() {
                    v.push(Violation::BadEvent {
                        event,
                        detail: format!("bad event or stream {stream}"),
                    });
                    continue;
                }
                let Some(c) = sim.ev[event.index()].clone() else {
                    v.push(Violation::BadEvent {
                        event,
                        detail: format!("waited on by {stream} before it is recorded"),
                    });
                    continue;
                };
                sim.ev_waited[event.index()] = true;
                let t = stream.index();
                if sim.pending[t].1.is_empty() {
                    sim.pending[t].0 = sim.known[t * s..(t + 1) * s].to_vec();
                }
                join(&mut sim.known[t * s..(t + 1) * s], &c);
                sim.pending[t].1.push((k, c));
            }
            Step::HostWaitDevice { device } => {
                let mut c = vec![0; s];
                for (t, info) in sched.streams.iter().enumerate() {
                    if info.device == device {
                        join(&mut c, &sim.known[t * s..(t + 1) * s]);
                    }
                }
                if sim.host_pending.1.is_empty() {
                    sim.host_pending.0 = sim.host.clone();
                }
                join(&mut sim.host, &c);
                if minimal {
                    sim.host_pending.1.push((k, c));
                }
            }
            Step::HostWait { stream } => {
                if !stream_ok(stream) {
                    v.push(Violation::BadIssue {
                        op: OpId(NONE),
                        detail: format!("host wait on missing stream {stream}"),
                    });
                    continue;
                }
                let t = stream.index();
                let c = sim.known[t * s..(t + 1) * s].to_vec();
                if sim.host_pending.1.is_empty() {
                    sim.host_pending.0 = sim.host.clone();
                }
                join(&mut sim.host, &c);
                if minimal {
                    sim.host_pending.1.push((k, c));
                }
            }
        }
    }
    for id in graph.op_ids() {
        if !sim.issued[id.index()] {
            v.push(Violation::BadIssue {
                op: id,
                detail: format!("{} is never issued", graph.describe(id)),
            });
        }
    }
    if minimal {
        for (i, w) in sim.ev_waited.iter().enumerate() {
            if !w && sim.ev[i].is_some() {
                v.push(Violation::Unnecessary {
                    step: 0,
                    what: format!("event e{i} (recorded, never waited on)"),
                });
            }
        }
        // Waits after the last op of their stream (or host waits after the end).
        for (t, (_, p)) in sim.pending.iter().enumerate() {
            for (k, _) in p {
                v.push(Violation::Unnecessary {
                    step: *k,
                    what: format!("{} (no later op on s{t})", describe_step(&sched.steps[*k])),
                });
            }
        }
        for (k, _) in &sim.host_pending.1 {
            v.push(Violation::Unnecessary {
                step: *k,
                what: format!("{} (no later host op)", describe_step(&sched.steps[*k])),
            });
        }
    }
    if v.is_empty() {
        Ok(report)
    } else {
        Err(VerifyError {
            name: sched.name.clone(),
            violations: v,
        })
    }
}

fn describe_step(step: &Step) -> String {
    match step {
        Step::Op(op) => format!("op {op}"),
        Step::Record { event, stream } => format!("record {event} on {stream}"),
        Step::Wait { event, stream } => format!("wait {event} on {stream}"),
        Step::HostWait { stream } => format!("host wait on {stream}"),
        Step::HostWaitDevice { device } => format!("host wait on device {device}"),
    }
}
