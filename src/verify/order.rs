//! The ordering invariants, checked while the schedule's steps are simulated on
//! [`Clocks`](super::clocks::Clocks): each region on one stream, events recorded once and
//! before they are waited on, and every OpGraph edge ordered by happens-before (which
//! covers "the host waits before it reads": an edge into a host op is ordered only by the
//! host waits before it).

use super::{Verifier, Violation};
use crate::lower::{OpId, RegionId};
use crate::schedule::{EventId, Step, StreamId};

impl Verifier<'_> {
    /// Each region's ops are on one stream (host ops, on none, are not counted, nor
    /// are prefetched ops, [`crate::lower::OpGraph::prefetch_ops`], which run on a
    /// copy stream). `O(V)`, `O(r log r)` more for a region of `r` ops that is split.
    pub(super) fn check_regions(&mut self) {
        let op_stream = &self.sched.op_stream;
        let moved = self.graph.prefetch_mask();
        let stream = |o: u32| match moved.get(o as usize) {
            Some(true) => None,
            _ => op_stream[o as usize],
        };
        for (ri, r) in self.graph.regions.iter().enumerate() {
            let mut on = r.ops.clone().filter_map(stream);
            let Some(first) = on.next() else { continue };
            if on.all(|s| s == first) {
                continue;
            }
            let mut streams: Vec<StreamId> = r.ops.clone().filter_map(stream).collect();
            streams.sort_unstable();
            streams.dedup();
            self.violations.push(Violation::RegionSplit {
                region: RegionId(ri as u32),
                name: r.name.clone(),
                streams,
            });
        }
    }

    /// Simulates step `k`, which [`Structure::check_step`](super::structure::Structure)
    /// found well-formed, and checks what it must satisfy. `O(S)` for a sync step; an op:
    /// see [`Self::issue_op`].
    pub(super) fn step(&mut self, k: usize, step: Step) {
        match step {
            Step::Op(id) => self.issue_op(id),
            Step::Record { event, stream } => self.record(event, stream),
            Step::Wait { event, stream } => self.wait(k, event, stream),
            Step::HostWait { stream } => {
                let col = self.cols.col(stream);
                self.host_wait(k, col)
            }
            Step::HostWaitEvent { event } => self.host_wait_event(k, event),
            Step::HostAwait { op } => self.host_await(k, op),
            Step::HostWaitDevice { device } => {
                // The device's streams that carry ops or syncs (the others know nothing).
                let info = &self.sched.streams;
                let cols: Vec<usize> = (0..self.cols.width())
                    .filter(|&c| {
                        let t = self.cols.stream(c).index();
                        info.get(t).is_some_and(|i| i.device == device)
                    })
                    .collect();
                self.host_wait(k, cols)
            }
        }
    }

    /// Issues op `id` on its stream (a device op on a stream that exists) or the host:
    /// computes its start clock, checks every edge into it
    /// ([`Self::check_edges_into`]) and the waits just before it
    /// ([`Self::check_waits_needed`]), then advances its stream.
    ///
    /// Complexity: `O(S + d)` for its `d` preds, plus [`Self::check_waits_needed`].
    fn issue_op(&mut self, id: OpId) {
        let t = self.col_of(id);
        let on_stream = t < self.cols.width();
        self.clocks.start(Some(t), &mut self.start);
        self.check_edges_into(id);
        self.check_races(id);
        self.check_waits_needed(id, t, on_stream);
        self.clocks.issue(id.index(), t, &self.start);
        if !on_stream {
            self.host_end[id.index()] = Some(self.clocks.known(t).to_vec());
        }
        if self.minimal {
            let works = !on_stream || self.graph.does_device_work(id);
            self.needs.issued(id, t, self.clocks.known(t), works);
        }
    }

    /// Happens-before covers every OpGraph edge `p → id`: `p` was issued before `id`
    /// and, at `id`'s start ([`Verifier::start`]), is complete (a device op: its stream's
    /// prefix up to it; a host op: it ran, on the issuing thread). Each edge is counted
    /// in [`super::VerifyReport::edges_checked`]. `O(d)` for `d` preds.
    fn check_edges_into(&mut self, id: OpId) {
        let graph = self.graph;
        for &p in graph.preds(id) {
            self.report.edges_checked += 1;
            let detail = if !self.structure.issued[p.index()] {
                format!(
                    "{} is issued after {}",
                    graph.describe(p),
                    graph.describe(id)
                )
            } else if !self.covers(&self.start, p) {
                let on = |s: Option<StreamId>| s.map(|x| x.to_string()).unwrap_or("host".into());
                format!(
                    "{} ({}, region \"{}\") may still run when {} ({}, region \"{}\") starts",
                    graph.describe(p),
                    on(self.sched.op_stream[p.index()]),
                    graph.region_of(p).name,
                    graph.describe(id),
                    on(self.lane[id.index()]),
                    graph.region_of(id).name
                )
            } else {
                continue;
            };
            self.violations.push(Violation::Unordered {
                from: p,
                to: id,
                detail,
            });
        }
    }

    /// Whether clock `c` covers op `p`: its stream's (a device op) or its host lane's (a
    /// host op) prefix up to and including it is complete in `c`. `O(1)`.
    pub(super) fn covers(&self, c: &[u32], p: OpId) -> bool {
        self.clocks.covers(c, p.index(), self.col_of(p))
    }

    /// `cuEventRecord`: each event is recorded once (a second record is reported and
    /// replaces the first). `O(S)`.
    fn record(&mut self, event: EventId, stream: StreamId) {
        let Some(t) = self.cols.col(stream) else {
            return; // out of range: reported by the structural check
        };
        if self.clocks.record(event.index(), t) {
            self.violations.push(Violation::BadEvent {
                event,
                detail: "recorded twice".into(),
            });
        }
    }

    /// `cuStreamWaitEvent` at step `k`: the event was recorded before (otherwise reported,
    /// and the stream learns nothing). The wait is pending until the stream's next op.
    /// `O(S)`.
    fn wait(&mut self, k: usize, event: EventId, stream: StreamId) {
        let Some(t) = self.cols.col(stream) else {
            return; // out of range: reported by the structural check
        };
        if !self.clocks.recorded(event.index()) {
            self.violations.push(Violation::BadEvent {
                event,
                detail: format!("waited on by {stream} before it is recorded"),
            });
            return;
        }
        let before = self.clocks.known(t).to_vec();
        let c = self.clocks.wait(event.index(), t).expect("recorded");
        self.pending[t].push(&before, k, c);
    }

    /// A host wait at step `k` on `event` (`cuEventSynchronize`): the event was recorded
    /// before (otherwise reported, and the waiter learns nothing); the waiter learns what
    /// it captured. Under `minimal` the wait is pending until the waiter's next op. `O(S)`.
    fn host_wait_event(&mut self, k: usize, event: EventId) {
        let row = self.owner_row(k);
        let before = self.waiter_row(row);
        let Some(c) = self.clocks.host_wait_event(event.index(), row) else {
            self.violations.push(Violation::BadEvent {
                event,
                detail: "waited on by the host before it is recorded".into(),
            });
            return;
        };
        self.pend_host_wait(row, &before, k, c);
    }

    /// A host wait at step `k` on the streams of clock columns `streams`: its waiter (a
    /// host lane, or the issuing thread: [`Verifier::owner_row`]) learns what they know.
    /// Under `minimal` the wait is pending until the waiter's next op. `O(S·|streams|)`.
    fn host_wait(&mut self, k: usize, streams: impl IntoIterator<Item = usize>) {
        let row = self.owner_row(k);
        let before = self.waiter_row(row);
        let c = self.clocks.host_wait(streams, row);
        self.pend_host_wait(row, &before, k, c);
    }

    /// A host await at step `k` of host op `op` (issued before: the structural check
    /// made sure): its waiter learns the clock right after `op`. `O(S)`.
    fn host_await(&mut self, k: usize, op: OpId) {
        let Some(c) = self.host_end.get(op.index()).cloned().flatten() else {
            return;
        };
        let row = self.owner_row(k);
        let before = self.waiter_row(row);
        self.clocks.learn(row, &c);
        self.pend_host_wait(row, &before, k, c);
    }

    /// What the waiter of row `row` (a lane's column, or the issuing thread) knows now.
    fn waiter_row(&self, row: Option<usize>) -> Vec<u32> {
        match row {
            Some(t) => self.clocks.known(t).to_vec(),
            None => self.clocks.host.clone(),
        }
    }

    /// Under `minimal`, the host wait at step `k` (clock `c`, its waiter knowing `before`)
    /// is pending until its waiter's next op: the lane's (row `row`), or the issuing
    /// thread's (`None`: the next device op).
    fn pend_host_wait(&mut self, row: Option<usize>, before: &[u32], k: usize, c: Vec<u32>) {
        if !self.minimal {
            return;
        }
        match row {
            Some(t) => self.pending[t].push(before, k, c),
            None => self.host_pending.push(before, k, c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::saxpy;
    use super::super::{Verifier, Violation};
    use crate::schedule::{EventId, Step, StreamId};

    fn run(g: &crate::lower::OpGraph, s: &crate::schedule::Schedule) -> Vec<String> {
        match Verifier::new(g, s).run() {
            Ok(_) => Vec::new(),
            Err(e) => e.violations.iter().map(|v| v.to_string()).collect(),
        }
    }

    #[test]
    fn a_split_region_names_its_streams() {
        let (g, mut s) = saxpy();
        let on_s0: Vec<usize> = (0..g.ops.len())
            .filter(|&o| s.op_stream[o].is_some())
            .collect();
        s.op_stream[*on_s0.last().unwrap()] = Some(StreamId(1));
        let mut v = Verifier::new(&g, &s);
        v.check_regions();
        assert_eq!(
            v.violations
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>(),
            ["region \"saxpy\" is split over streams s0, s1"]
        );
    }

    #[test]
    fn an_event_recorded_twice_or_waited_on_too_early_is_reported() {
        let (g, mut s) = saxpy();
        let (event, stream) = (EventId(s.events), StreamId(0));
        s.events += 1;
        s.policy = crate::schedule::SyncPolicy::PerRegion;
        let at = s.steps.len() - 1;
        s.steps.insert(
            at,
            Step::Wait {
                event,
                stream: StreamId(1),
            },
        );
        s.steps.insert(at + 1, Step::HostWaitEvent { event });
        s.steps.insert(at + 2, Step::Record { event, stream });
        s.steps.insert(at + 3, Step::Record { event, stream });
        assert_eq!(
            run(&g, &s),
            [
                format!("event {event}: waited on by s1 before it is recorded"),
                format!("event {event}: waited on by the host before it is recorded"),
                format!("event {event}: recorded twice"),
            ]
        );
    }

    #[test]
    fn an_edge_into_the_host_needs_a_host_wait() {
        let (g, mut s) = saxpy();
        s.steps.retain(|t| !matches!(t, Step::HostWait { .. }));
        let v = Verifier::new(&g, &s).run().unwrap_err().violations;
        assert!(!v.is_empty());
        for x in &v {
            let Violation::Unordered { to, detail, .. } = x else {
                panic!("{x}")
            };
            assert!(g.op(*to).kind.is_host(), "{x}");
            assert!(detail.contains("may still run when"), "{x}");
        }
    }

    #[test]
    fn an_op_issued_before_its_pred_is_reported() {
        let (g, mut s) = saxpy();
        let first = s
            .steps
            .iter()
            .position(|t| matches!(t, Step::Op(_)))
            .unwrap();
        let second = first
            + 1
            + s.steps[first + 1..]
                .iter()
                .position(|t| matches!(t, Step::Op(o) if g.preds(*o).len() == 1))
                .unwrap();
        let op = s.steps.remove(second);
        s.steps.insert(first, op);
        let text = run(&g, &s);
        assert!(
            text.iter().any(|t| t.contains("is issued after")),
            "{text:?}"
        );
    }
}
