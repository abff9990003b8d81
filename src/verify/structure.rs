//! The structural invariants: the schedule is well-formed for its graph, so every later
//! check (and the executor) may index by its ids. One method per invariant; each reports
//! every violation it finds, in op or step order.
//!
//! Used twice: by [`super::check_structure`] on its own (what `exec::execute` runs on a
//! schedule it is handed), and by [`super::Verifier`], which interleaves the per-step
//! check with its clock simulation so violations stay in issue order.

use super::{Violation, NONE};
use crate::lower::{OpGraph, OpId, OpKind};
use crate::schedule::{Schedule, Step, StreamId};

/// Checks the structure of one schedule; also the table of issued ops the verifier reads.
pub(super) struct Structure<'a> {
    graph: &'a OpGraph,
    sched: &'a Schedule,
    /// Per op (index = op index): issued by a step checked so far.
    pub(super) issued: Vec<bool>,
}

impl<'a> Structure<'a> {
    /// A checker with no step seen yet. `O(V)`.
    pub(super) fn new(graph: &'a OpGraph, sched: &'a Schedule) -> Structure<'a> {
        Structure {
            graph,
            sched,
            issued: vec![false; graph.ops.len()],
        }
    }

    fn stream_ok(&self, st: StreamId) -> bool {
        st.index() < self.sched.streams.len()
    }

    /// `sched.op_stream` has one entry per op of the graph. Without it nothing else can be
    /// read (every other check indexes `op_stream` by op), so callers stop on `Err`.
    /// `O(1)`.
    pub(super) fn check_sizes(&self) -> Result<(), Violation> {
        let n = self.graph.ops.len();
        if self.sched.op_lane.len() != n || self.sched.host_lanes == 0 {
            return Err(Violation::BadIssue {
                op: OpId(n as u32),
                detail: format!(
                    "schedule has host lanes for {} ops ({} lanes), graph has {n} ops",
                    self.sched.op_lane.len(),
                    self.sched.host_lanes
                ),
            });
        }
        if self.sched.op_stream.len() == n {
            return Ok(());
        }
        Err(Violation::BadIssue {
            op: OpId(n as u32),
            detail: format!(
                "schedule has streams for {} ops, graph has {n}",
                self.sched.op_stream.len()
            ),
        })
    }

    /// Every device op is on a stream that exists and belongs to the op's device; every
    /// host op is on none; a peer copy copies between two allocations of different
    /// devices, into one of its own device, a section both hold. Requires
    /// [`Self::check_sizes`]. `O(V)`.
    pub(super) fn check_placement(&self, out: &mut Vec<Violation>) {
        let (graph, sched) = (self.graph, self.sched);
        for id in graph.op_ids() {
            let op = graph.op(id);
            if let Some(detail) = peer_copy_problem(graph, id) {
                out.push(Violation::BadIssue { op: id, detail });
            }
            let detail = match (op.kind.is_host(), sched.op_stream[id.index()]) {
                (true, Some(st)) => format!("host op {} placed on stream {st}", graph.describe(id)),
                (false, None) => format!("device op {} has no stream", graph.describe(id)),
                (false, Some(st)) => match sched.streams.get(st.index()) {
                    None => format!("stream {st} does not exist"),
                    Some(info) if info.device != op.device => format!(
                        "runs on device {} but stream {st} is of device {}",
                        op.device, info.device
                    ),
                    Some(_) => continue,
                },
                (true, None) if sched.op_lane[id.index()] >= sched.host_lanes => format!(
                    "host op {} on lane h{}, of {} host lanes",
                    graph.describe(id),
                    sched.op_lane[id.index()],
                    sched.host_lanes
                ),
                (true, None) => continue,
            };
            out.push(Violation::BadIssue { op: id, detail });
        }
    }

    /// One step of the issue sequence, in order: the op, stream and event it names exist,
    /// and an op is issued at most once (marked in [`Self::issued`]). Returns whether the
    /// step is well-formed; a caller simulating the schedule skips one that is not.
    /// `HostWaitDevice` is always well-formed here (a device the plugin lacks is the
    /// executor's to refuse). Requires [`Self::check_sizes`]. `O(1)`.
    pub(super) fn check_step(&mut self, step: &Step, out: &mut Vec<Violation>) -> bool {
        let bad = match *step {
            Step::Op(id) => match self.issued.get_mut(id.index()) {
                None => Some(Violation::BadIssue {
                    op: id,
                    detail: "no such op".into(),
                }),
                Some(true) => Some(Violation::BadIssue {
                    op: id,
                    detail: "issued twice".into(),
                }),
                Some(seen) => {
                    *seen = true;
                    None
                }
            },
            Step::Record { event, stream } | Step::Wait { event, stream } => (!self
                .stream_ok(stream)
                || event.0 >= self.sched.events)
                .then(|| Violation::BadEvent {
                    event,
                    detail: format!("bad event or stream {stream}"),
                }),
            Step::HostWaitEvent { event } => {
                (event.0 >= self.sched.events).then(|| Violation::BadEvent {
                    event,
                    detail: "host wait on an event that does not exist".into(),
                })
            }
            Step::HostWait { stream } => (!self.stream_ok(stream)).then(|| Violation::BadIssue {
                op: OpId(NONE),
                detail: format!("host wait on missing stream {stream}"),
            }),
            Step::HostWaitDevice { .. } => None,
            Step::HostAwait { op } => match self.issued.get(op.index()) {
                None => Some(Violation::BadIssue {
                    op,
                    detail: "awaited, but there is no such op".into(),
                }),
                Some(_) if !self.graph.op(op).kind.is_host() => Some(Violation::BadIssue {
                    op,
                    detail: format!("awaited, but {} is a device op", self.graph.describe(op)),
                }),
                Some(false) => Some(Violation::BadIssue {
                    op,
                    detail: format!("awaited before {} is issued", self.graph.describe(op)),
                }),
                Some(true) => None,
            },
        };
        let ok = bad.is_none();
        out.extend(bad);
        ok
    }

    /// After every step went through [`Self::check_step`]: every op was issued. `O(V)`.
    pub(super) fn check_all_issued(&self, out: &mut Vec<Violation>) {
        for id in self.graph.op_ids() {
            if !self.issued[id.index()] {
                out.push(Violation::BadIssue {
                    op: id,
                    detail: format!("{} is never issued", self.graph.describe(id)),
                });
            }
        }
    }

    /// All of the above in order: sizes (stopping there if wrong), placement, each step,
    /// every op issued. `O(V + K)` for `V` ops and `K` steps.
    pub(super) fn check_all(&mut self, out: &mut Vec<Violation>) {
        if let Err(v) = self.check_sizes() {
            out.push(v);
            return;
        }
        self.check_placement(out);
        for step in &self.sched.steps {
            self.check_step(step, out);
        }
        self.check_all_issued(out);
    }
}

/// What is wrong with op `id` if it is a peer copy that does not copy between two
/// allocations of different devices into one of its own device, or copies a section one
/// of them does not hold. `O(1)`.
fn peer_copy_problem(graph: &OpGraph, id: OpId) -> Option<String> {
    let op = graph.op(id);
    let OpKind::PeerCopy { src, dst, section } = &op.kind else {
        return None;
    };
    let (Some(s), Some(d)) = (graph.allocs.get(src.index()), graph.allocs.get(dst.index())) else {
        return Some("peer copy of an allocation that does not exist".into());
    };
    let name = graph.section_name(section);
    if d.device != op.device {
        Some(format!(
            "peer copy of {name} into device {} runs on device {}",
            d.device, op.device
        ))
    } else if s.device == d.device {
        Some(format!(
            "peer copy of {name} from device {} to the same device",
            s.device
        ))
    } else if !s.section.contains(section) || !d.section.contains(section) {
        Some(format!(
            "peer copy of {name} is not inside both allocations ({} on d{}, {} on d{})",
            graph.section_name(&s.section),
            s.device,
            graph.section_name(&d.section),
            d.device
        ))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::saxpy;
    use super::*;
    use crate::schedule::EventId;

    fn all(graph: &OpGraph, sched: &Schedule) -> Vec<String> {
        let mut out = Vec::new();
        Structure::new(graph, sched).check_all(&mut out);
        out.iter().map(|v| v.to_string()).collect()
    }

    #[test]
    fn a_schedule_from_the_scheduler_is_well_formed() {
        let (g, s) = saxpy();
        assert_eq!(all(&g, &s), Vec::<String>::new());
    }

    #[test]
    fn sizes_stop_the_check() {
        let (g, mut s) = saxpy();
        s.op_stream.pop();
        s.steps.clear();
        let n = g.ops.len();
        assert_eq!(
            all(&g, &s),
            [format!(
                "op #{n}: schedule has streams for {} ops, graph has {n}",
                n - 1
            )]
        );
    }

    #[test]
    fn placement_names_each_misplaced_op() {
        let (g, mut s) = saxpy();
        let dev = g.op_ids().find(|&o| !g.op(o).kind.is_host()).unwrap();
        let host = g.op_ids().find(|&o| g.op(o).kind.is_host()).unwrap();
        s.op_stream[host.index()] = Some(StreamId(0));
        s.op_stream[dev.index()] = Some(StreamId(9));
        let mut out = Vec::new();
        Structure::new(&g, &s).check_placement(&mut out);
        let text: Vec<String> = out.iter().map(|v| v.to_string()).collect();
        assert_eq!(
            text,
            [
                format!("op {dev}: stream s9 does not exist"),
                format!(
                    "op {host}: host op {} placed on stream s0",
                    g.describe(host)
                ),
            ]
        );
        s.op_stream[dev.index()] = None;
        s.op_stream[host.index()] = None;
        s.streams[0].device = 1;
        let mut out = Vec::new();
        Structure::new(&g, &s).check_placement(&mut out);
        let text: Vec<String> = out.iter().map(|v| v.to_string()).collect();
        assert_eq!(
            text.len(),
            s.op_stream.iter().filter(|t| t.is_some()).count() + 1
        );
        assert!(text.contains(&format!(
            "op {dev}: device op {} has no stream",
            g.describe(dev)
        )));
        assert!(text
            .iter()
            .filter(|t| !t.ends_with("has no stream"))
            .all(|t| t.ends_with("runs on device 0 but stream s0 is of device 1")));
    }

    /// `x` entered and doubled on device 1, then read on device 0: one peer copy.
    fn peer() -> (OpGraph, Schedule) {
        use crate::model::{ElemType, Init, MapType, ProgramBuilder};
        let mut p = ProgramBuilder::new("peer");
        p.devices(2);
        let x = p.buffer("x", ElemType::F32, 64, Init::Iota);
        let y = p.buffer("y", ElemType::F32, 64, Init::Zeros);
        let to_x = vec![p.map(MapType::To, x)];
        p.enter_data("in1", to_x).device(1);
        p.target("double1", "scale").num(2.0).arg(x).device(1);
        p.target("copy0", "copy").arg(x).arg(y).device(0);
        let g = crate::lower::lower(&p.build()).unwrap();
        let s = crate::schedule::schedule(&g, &crate::schedule::ScheduleOptions::default());
        (g, s)
    }

    #[test]
    fn a_peer_copy_between_devices_is_well_formed_and_a_wrong_one_is_named() {
        let (mut g, s) = peer();
        assert_eq!(all(&g, &s), Vec::<String>::new());
        let id = g
            .op_ids()
            .find(|&o| matches!(g.op(o).kind, OpKind::PeerCopy { .. }))
            .expect("a peer copy");
        let OpKind::PeerCopy { src, dst, section } = g.ops[id.index()].kind.clone() else {
            unreachable!()
        };
        assert_eq!((g.allocs[src.index()].device, g.op(id).device), (1, 0));
        g.ops[id.index()].kind = OpKind::PeerCopy {
            src: dst,
            dst,
            section,
        };
        assert_eq!(
            all(&g, &s),
            [format!(
                "op {id}: peer copy of x[0:64] from device 0 to the same device"
            )]
        );
        g.ops[id.index()].kind = OpKind::PeerCopy {
            src: dst,
            dst: src,
            section,
        };
        assert_eq!(
            all(&g, &s),
            [format!(
                "op {id}: peer copy of x[0:64] into device 1 runs on device 0"
            )]
        );
    }

    #[test]
    fn steps_name_missing_ids_and_repeats() {
        let (g, s) = saxpy();
        let mut st = Structure::new(&g, &s);
        let mut out = Vec::new();
        let n = g.ops.len() as u32;
        assert!(st.check_step(&Step::Op(OpId(0)), &mut out));
        assert!(!st.check_step(&Step::Op(OpId(0)), &mut out));
        assert!(!st.check_step(&Step::Op(OpId(n)), &mut out));
        let stream = StreamId(0);
        assert!(!st.check_step(
            &Step::Wait {
                event: EventId(s.events),
                stream
            },
            &mut out
        ));
        assert!(!st.check_step(
            &Step::HostWait {
                stream: StreamId(99)
            },
            &mut out
        ));
        assert!(st.check_step(&Step::HostWaitDevice { device: 7 }, &mut out));
        assert!(!st.check_step(
            &Step::HostWaitEvent {
                event: EventId(s.events)
            },
            &mut out
        ));
        let text: Vec<String> = out.iter().map(|v| v.to_string()).collect();
        assert_eq!(
            text,
            [
                "op #0: issued twice".to_string(),
                format!("op #{n}: no such op"),
                format!("event e{}: bad event or stream s0", s.events),
                "op #4294967295: host wait on missing stream s99".to_string(),
                format!(
                    "event e{}: host wait on an event that does not exist",
                    s.events
                ),
            ]
        );
    }

    #[test]
    fn an_op_never_issued_is_named() {
        let (g, mut s) = saxpy();
        let last = s
            .steps
            .iter()
            .rposition(|t| matches!(t, Step::Op(_)))
            .unwrap();
        let Step::Op(op) = s.steps.remove(last) else {
            unreachable!()
        };
        assert_eq!(
            all(&g, &s),
            [format!("op {op}: {} is never issued", g.describe(op))]
        );
    }
}
