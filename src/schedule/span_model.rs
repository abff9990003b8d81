//! Tests' model of a schedule's span: the schedule's steps replayed with every op taking
//! its estimated cost ([`crate::lower::cost::op_cost_us`], µs, a `spin` its stated
//! duration), so the colourings of two schedules compare without a timed run (no
//! machine load in the figure).
//!
//! The model: each stream runs its ops in issue order, an op starting when the stream
//! and the host have reached it; an event completes when the op before its record does;
//! a stream's wait holds its later ops until the event completes; a host wait blocks the
//! host (and so all later issue) until what it waits for completes; host ops run on the
//! host in issue order. Issue itself costs nothing.

use super::{Schedule, Step};
use crate::lower::cost::op_cost_us;
use crate::lower::OpGraph;

/// The modelled span of `sched` over `graph`, µs: when the last op completes.
pub(crate) fn modelled_span_us(graph: &OpGraph, sched: &Schedule) -> f64 {
    let mut stream = vec![0.0f64; sched.streams.len()];
    let mut event = vec![0.0f64; sched.events as usize];
    let mut host = 0.0f64;
    let mut end = 0.0f64;
    for step in &sched.steps {
        match *step {
            Step::Op(op) => {
                let cost = op_cost_us(graph, op);
                match sched.op_stream[op.index()] {
                    Some(s) => {
                        let t = stream[s.index()].max(host) + cost;
                        stream[s.index()] = t;
                        end = end.max(t);
                    }
                    None => {
                        host += cost;
                        end = end.max(host);
                    }
                }
            }
            Step::Record {
                event: e,
                stream: s,
            } => event[e.index()] = stream[s.index()],
            Step::Wait {
                event: e,
                stream: s,
            } => {
                stream[s.index()] = stream[s.index()].max(event[e.index()]);
            }
            Step::HostWait { stream: s } => host = host.max(stream[s.index()]),
            Step::HostWaitEvent { event: e } => host = host.max(event[e.index()]),
            Step::HostWaitDevice { device } => {
                for (s, info) in sched.streams.iter().enumerate() {
                    if info.device == device {
                        host = host.max(stream[s]);
                    }
                }
            }
            // Host ops already run in issue order on the one host clock.
            Step::HostAwait { .. } => {}
        }
    }
    end
}
