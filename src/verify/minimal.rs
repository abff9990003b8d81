//! Minimality under [`SyncPolicy::Minimal`](crate::schedule::SyncPolicy::Minimal): every
//! event wait and host wait is necessary, host waits are no coarser than the ops they
//! guard need, and every recorded event is waited on.
//!
//! A wait is necessary when some edge into the first op issued after it on its stream
//! (for a host wait: the next host op) is ordered with the wait and not without it, the
//! other waits at the same point kept. The scheduler places every wait just before the
//! op that needs it, so this local test is exact for its output; for hand-edited
//! schedules it may report a wait that only later ops need.
//!
//! Host waits are checked at op granularity ([design notes](crate::design): "the host waits only for the
//! ops it needs"): the waits before a host op may teach the host only what it knew
//! before them joined with, for every device pred of the op, what that pred's stream
//! knew right after it ([`HostNeeds`]) — plus ops that do no device work
//! ([`OpGraph::does_device_work`]: frees, plain allocs), which complete as soon as the
//! work before them has, so waiting for them costs nothing. A wait on a whole stream
//! whose tail holds a kernel or copy the host op does not need is reported
//! ([`Violation::CoarseHostWait`]): a wait on an event after the needed op would do.

use super::clocks::join;
use super::{describe_step, Verifier, Violation, NONE};
use crate::lower::{OpGraph, OpId};
use crate::schedule::Step;

/// What the op-granularity check of host waits needs (kept under `minimal` only): the
/// clock right after each device op that a host op depends on, and per stream its ops
/// and how many of them do device work.
///
/// Memory: `O(V + P·S)` for `V` ops, `P` device preds of host ops and `S` streams (two
/// `u32` per device op, one clock per such pred).
#[derive(Default)]
pub(super) struct HostNeeds {
    /// Per op: some host op depends on it (so its end clock is kept).
    keep: Vec<bool>,
    /// Per op: the offset of its end clock in `ends`, or [`NONE`].
    end_at: Vec<u32>,
    ends: Vec<u32>,
    /// Per stream: its ops in position order.
    ops_on: Vec<Vec<OpId>>,
    /// Per stream: `work[t][k]` = how many of its first `k` ops do device work.
    work: Vec<Vec<u32>>,
}

impl HostNeeds {
    /// Marks the preds of every op in `host` (the ops simulated on the host) for `s`
    /// streams. `O(V + P)`.
    pub(super) fn new(graph: &OpGraph, host: impl Iterator<Item = OpId>, s: usize) -> HostNeeds {
        let mut keep = vec![false; graph.ops.len()];
        for h in host {
            for &p in graph.preds(h) {
                keep[p.index()] = true;
            }
        }
        HostNeeds {
            keep,
            end_at: vec![NONE; graph.ops.len()],
            ends: Vec::new(),
            ops_on: vec![Vec::new(); s],
            work: vec![vec![0]; s],
        }
    }

    /// Device op `op` was issued on stream `t`; `end` is what `t` knows right after it,
    /// `works` whether it does device work. `O(1)`, `O(S)` for a kept op.
    pub(super) fn issued(&mut self, op: OpId, t: usize, end: &[u32], works: bool) {
        self.ops_on[t].push(op);
        let w = self.work[t].last().copied().unwrap_or(0) + u32::from(works);
        self.work[t].push(w);
        if self.keep[op.index()] {
            self.end_at[op.index()] = self.ends.len() as u32;
            self.ends.extend_from_slice(end);
        }
    }

    /// The clock right after `op`, if it was issued on a stream and a host op needs it.
    fn end_clock(&self, op: OpId, s: usize) -> Option<&[u32]> {
        match self.end_at[op.index()] {
            NONE => None,
            at => Some(&self.ends[at as usize..at as usize + s]),
        }
    }

    /// The first op of stream `t` at positions `from..to` that does device work, if any.
    /// `O(log V)`.
    fn first_working(&self, t: usize, from: u32, to: u32) -> Option<OpId> {
        let w = &self.work[t];
        let (from, to) = (from as usize, (to as usize).min(w.len() - 1));
        if from >= to || w[to] == w[from] {
            return None;
        }
        // The first k with w[k + 1] > w[from].
        let k = from + w[from + 1..=to].partition_point(|&x| x == w[from]);
        self.ops_on[t].get(k).copied()
    }

    /// The op at position `p` of stream `t`.
    fn at(&self, t: usize, p: u32) -> Option<OpId> {
        self.ops_on[t].get(p as usize).copied()
    }
}

/// The waits since the last op of one stream (or of the host), not yet judged.
#[derive(Default)]
pub(super) struct Pending {
    /// The clock before the first of them.
    before: Vec<u32>,
    /// Each wait: its step index and the clock it adds.
    waits: Vec<(usize, Vec<u32>)>,
}

impl Pending {
    /// Notes the wait at step `k` adding clock `c`; `now` is the clock it joins into (what
    /// is known before it), kept if it is the first wait since the last op. `O(S)`.
    pub(super) fn push(&mut self, now: &[u32], k: usize, c: Vec<u32>) {
        if self.waits.is_empty() {
            self.before = now.to_vec();
        }
        self.waits.push((k, c));
    }
}

impl Verifier<'_> {
    /// Under `minimal`: each wait pending before op `id` (on clock column `t`: a stream,
    /// or a host lane when `!on_stream`) is needed by some edge into `id`; counts it in
    /// [`super::VerifyReport::syncs_proven_necessary`] or reports it
    /// [`Violation::Unnecessary`]. The waits pending are the column's (event waits of a
    /// stream, host waits a lane ran) and, before a device op, the issuing thread's host
    /// waits. Before a host op, also [`Self::check_host_waits_fine`]. The pending waits
    /// are cleared under every policy. Reads the op's start clock ([`Verifier::start`]);
    /// call before the op is issued.
    ///
    /// Complexity: `O(w·(w·S + d))` for the `w` waits pending and the `d` preds of `id`.
    pub(super) fn check_waits_needed(&mut self, id: OpId, t: usize, on_stream: bool) {
        let pend = std::mem::take(&mut self.pending[t]);
        let issuer = match on_stream {
            true => std::mem::take(&mut self.host_pending),
            false => Pending::default(),
        };
        if !self.minimal {
            return;
        }
        // A column's waits: without one, the column knows the rest and the issuing
        // thread's knowledge.
        let host = self.clocks.host.clone();
        self.judge(id, &pend, &host);
        // The issuing thread's: without one, it knows the rest, and the stream its row.
        let row = self.clocks.known(t).to_vec();
        self.judge(id, &issuer, &row);
        if !on_stream {
            self.check_host_waits_fine(id, &pend);
        }
    }

    /// Each wait of `pend` (joined, with the others and `also`, into what `id` starts
    /// with) is needed by some edge into `id`. `O(w·(w·S + d))`.
    fn judge(&mut self, id: OpId, pend: &Pending, also: &[u32]) {
        for (i, (wstep, _)) in pend.waits.iter().enumerate() {
            let mut without = pend.before.clone();
            for (j, (_, c)) in pend.waits.iter().enumerate() {
                if j != i {
                    join(&mut without, c);
                }
            }
            join(&mut without, also);
            let needed = self
                .graph
                .preds(id)
                .iter()
                .any(|&p| self.covers(&self.start, p) && !self.covers(&without, p));
            if needed {
                self.report.syncs_proven_necessary += 1;
            } else {
                self.violations.push(Violation::Unnecessary {
                    step: *wstep,
                    what: describe_step(&self.sched.steps[*wstep]),
                });
            }
        }
    }

    /// Under `minimal`, the host waits `pend` before host op `id` teach the host nothing
    /// beyond `needed` — what it knew before them, joined with the clock right after each
    /// device pred of `id` — except ops that do no device work; each wait that does is
    /// reported [`Violation::CoarseHostWait`], naming the first working op beyond
    /// `needed` (on the lowest stream that has one) and the op an event should follow.
    ///
    /// Complexity: `O(d·S + w·S·log V)` for the `d` preds of `id` and `w` waits.
    fn check_host_waits_fine(&mut self, id: OpId, pend: &Pending) {
        if pend.waits.is_empty() {
            return;
        }
        let s = self.clocks.width();
        let mut needed = pend.before.clone();
        join(&mut needed, &self.clocks.host);
        for &p in self.graph.preds(id) {
            if let Some(c) = self.needs.end_clock(p, s) {
                join(&mut needed, c);
            }
        }
        for (wstep, c) in &pend.waits {
            let Some((t, extra)) = (0..s).find_map(|t| {
                let extra = self.needs.first_working(t, needed[t], c[t])?;
                Some((t, extra))
            }) else {
                continue;
            };
            let graph = self.graph;
            let hint = match needed[t] > pend.before[t] {
                true => match self.needs.at(t, needed[t] - 1) {
                    Some(op) => format!("; wait on an event recorded after {op} instead"),
                    None => String::new(),
                },
                false => format!("; {id} needs nothing more of {}", self.col_name(t)),
            };
            self.violations.push(Violation::CoarseHostWait {
                step: *wstep,
                what: describe_step(&self.sched.steps[*wstep]),
                detail: format!(
                    "it waits for {extra} ({}) on {}, which no edge into {id} ({}) needs{hint}",
                    graph.describe(extra),
                    self.col_name(t),
                    graph.describe(id),
                ),
            });
        }
    }

    /// Under `minimal`, after the last step: every recorded event is waited on, and no
    /// wait is left with no later op on its stream (or no later host op) to need it.
    /// `O(events + K)` for `K` steps.
    pub(super) fn check_unused_syncs(&mut self) {
        let steps = &self.sched.steps;
        let unused: Vec<usize> = (0..self.clocks.waited.len())
            .filter(|&i| !self.clocks.waited[i] && self.clocks.recorded(i))
            .collect();
        if !unused.is_empty() {
            // The step of each event's (first) record, the one to remove.
            let mut at = vec![usize::MAX; self.clocks.waited.len()];
            for (k, step) in steps.iter().enumerate() {
                if let Step::Record { event, .. } = step {
                    if let Some(a) = at.get_mut(event.index()) {
                        *a = (*a).min(k);
                    }
                }
            }
            for i in unused {
                self.violations.push(Violation::Unnecessary {
                    step: at[i],
                    what: format!("event e{i} (recorded, never waited on)"),
                });
            }
        }
        for (t, p) in self.pending.iter().enumerate() {
            for (k, _) in &p.waits {
                self.violations.push(Violation::Unnecessary {
                    step: *k,
                    what: format!(
                        "{} (no later op on {})",
                        describe_step(&steps[*k]),
                        self.col_name(t)
                    ),
                });
            }
        }
        for (k, _) in &self.host_pending.waits {
            self.violations.push(Violation::Unnecessary {
                step: *k,
                what: format!("{} (no later host op)", describe_step(&steps[*k])),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::saxpy;
    use super::super::{Verifier, Violation};
    use crate::lower::OpId;
    use crate::schedule::{EventId, Step, StreamId, SyncPolicy};

    fn run(g: &crate::lower::OpGraph, s: &crate::schedule::Schedule) -> Vec<Violation> {
        match Verifier::new(g, s).run() {
            Ok(_) => Vec::new(),
            Err(e) => e.violations,
        }
    }

    /// Case D04's shape: a nowait region copies `H` in (H2D #2), copies it to `out`
    /// (kernel #3) and back (D2H #4); the next host task (#7) overwrites `H`, so it needs
    /// only the H2D; then a taskwait and the end. Minimal schedule.
    fn d04() -> (crate::lower::OpGraph, crate::schedule::Schedule) {
        use crate::model::{Arg, ElemType, Init, MapType, ProgramBuilder};
        let mut p = ProgramBuilder::new("d04");
        let h = p.buffer("H", ElemType::F32, 1024, Init::Iota);
        let out = p.buffer("out", ElemType::F32, 1024, Init::Zeros);
        p.target("copy", "copy")
            .arg(h)
            .arg(out)
            .map(MapType::To, h)
            .map(MapType::From, out)
            .nowait();
        let whole = p.sec(h);
        p.host_kernel(
            "overwrite",
            "fill",
            vec![Arg::Buffer(whole), Arg::Number(-1.0)],
        );
        p.taskwait();
        let g = crate::lower::lower(&p.build()).unwrap();
        let s = crate::schedule::schedule(&g, &Default::default());
        (g, s)
    }

    #[test]
    fn a_host_wait_on_a_whole_stream_for_one_h2d_is_coarse_only_under_minimal() {
        let (g, mut s) = d04();
        // The scheduler's: record e0 after the H2D, the host task waits on it.
        let (h2d, task) = (OpId(2), OpId(7));
        assert_eq!(g.op(h2d).kind.name(), "h2d");
        assert_eq!(g.op(task).kind.name(), "host");
        let at = |s: &crate::schedule::Schedule, step: Step| {
            s.steps.iter().position(|x| *x == step).unwrap()
        };
        let e0 = EventId(0);
        assert_eq!(
            at(&s, Step::Op(h2d)) + 1,
            at(
                &s,
                Step::Record {
                    event: e0,
                    stream: StreamId(0)
                }
            )
        );
        let wait = at(&s, Step::HostWaitEvent { event: e0 });
        assert_eq!(wait + 1, at(&s, Step::Op(task)));
        let r = Verifier::new(&g, &s).run().unwrap();
        assert_eq!(r.syncs_proven_necessary, s.host_waits().count());
        // The form before host waits on events: the host task waits for the whole
        // stream, kernel and D2H included (and the taskwait then needs no wait).
        let s0 = StreamId(0);
        assert_eq!(s.steps[wait + 2], Step::HostWait { stream: s0 }, "{s}");
        s.steps[wait] = Step::HostWait { stream: s0 };
        s.steps.remove(wait + 2);
        s.steps.retain(|x| !matches!(x, Step::Record { .. }));
        let wait = wait - 1;
        let text: Vec<String> = run(&g, &s).iter().map(|v| v.to_string()).collect();
        assert_eq!(
            text,
            [format!(
                "host wait on s0 at step {wait} waits for more than the host needs: it waits \
                 for #3 (kernel copy) on s0, which no edge into #7 (host fill) needs; wait on \
                 an event recorded after #2 instead"
            )]
        );
        s.policy = SyncPolicy::PerRegion;
        assert_eq!(run(&g, &s), []);
    }

    #[test]
    fn a_host_wait_past_trailing_frees_is_not_coarse() {
        // saxpy's end needs the D2H; the stream's frees after it do no device work.
        let (g, s) = saxpy();
        let wait = s.steps.iter().position(|x| x.is_host_wait()).unwrap();
        assert!(matches!(s.steps[wait], Step::HostWait { .. }), "{s}");
        let Step::Op(last) = s.steps[wait - 1] else {
            panic!("{s}")
        };
        assert_eq!(g.op(last).kind.name(), "free");
        assert_eq!(run(&g, &s), []);
    }

    #[test]
    fn the_one_host_wait_of_saxpy_is_necessary() {
        let (g, s) = saxpy();
        let r = Verifier::new(&g, &s).run().unwrap();
        assert_eq!(r.syncs_proven_necessary, s.host_waits().count());
    }

    #[test]
    fn a_wait_no_edge_needs_is_unnecessary_only_under_minimal() {
        let (g, mut s) = saxpy();
        // A host wait on an idle stream just before the end: the end gains nothing.
        let end = s.steps.len() - 1;
        s.steps.insert(
            end,
            Step::HostWait {
                stream: StreamId(1),
            },
        );
        let v = run(&g, &s);
        assert_eq!(
            v,
            [Violation::Unnecessary {
                step: end,
                what: "host wait on s1".into()
            }]
        );
        s.policy = SyncPolicy::PerRegion;
        assert_eq!(run(&g, &s), []);
    }

    #[test]
    fn waits_after_the_last_op_and_events_never_waited_on_are_unnecessary() {
        let (g, mut s) = saxpy();
        let (event, stream) = (EventId(s.events), StreamId(0));
        s.events += 1;
        s.steps.push(Step::Record { event, stream });
        s.steps.push(Step::HostWait { stream });
        let text: Vec<String> = run(&g, &s).iter().map(|v| v.to_string()).collect();
        let k = s.steps.len() - 1;
        assert_eq!(
            text,
            [
                format!("unnecessary event {event} (recorded, never waited on) at step {}: removing it breaks no edge", k - 1),
                format!("unnecessary host wait on s0 (no later host op) at step {k}: removing it breaks no edge"),
            ]
        );
    }
}
