//! Minimality under [`SyncPolicy::Minimal`](crate::schedule::SyncPolicy::Minimal): every
//! event wait and host wait is necessary, and every recorded event is waited on.
//!
//! A wait is necessary when some edge into the first op issued after it on its stream
//! (for a host wait: the next op the host issues, device ops included) is ordered with
//! the wait and not without it, the other waits at the same point kept. The scheduler
//! places every wait just before the op that needs it, so this local test is exact for its
//! output; for hand-edited schedules it may report a wait that only later ops need.

use super::clocks::join;
use super::{describe_step, Verifier, Violation};
use crate::lower::OpId;

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
    /// Under `minimal`: each wait pending before op `id` (on stream `stream`, or the host
    /// when `None`) is needed by some edge into `id`; counts it in
    /// [`super::VerifyReport::syncs_proven_necessary`] or reports it
    /// [`Violation::Unnecessary`]. The pending waits are cleared under every policy.
    /// Reads the op's start clock ([`Verifier::start`]); call before the op is issued.
    ///
    /// Complexity: `O(w·(w·S + d))` for the `w` waits pending and the `d` preds of `id`.
    pub(super) fn check_waits_needed(&mut self, id: OpId, stream: Option<usize>) {
        let pend = match stream {
            Some(t) => std::mem::take(&mut self.pending[t]),
            None => std::mem::take(&mut self.host_pending),
        };
        if !self.minimal {
            return;
        }
        for (i, (wstep, _)) in pend.waits.iter().enumerate() {
            let mut without = pend.before.clone();
            for (j, (_, c)) in pend.waits.iter().enumerate() {
                if j != i {
                    join(&mut without, c);
                }
            }
            if stream.is_some() {
                join(&mut without, &self.clocks.host);
            }
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

    /// Under `minimal`, after the last step: every recorded event is waited on, and no
    /// wait is left with no later op on its stream (or no later host op) to need it.
    /// `O(events + K)` for `K` steps.
    pub(super) fn check_unused_syncs(&mut self) {
        for (i, w) in self.clocks.waited.iter().enumerate() {
            if !w && self.clocks.recorded(i) {
                self.violations.push(Violation::Unnecessary {
                    step: 0,
                    what: format!("event e{i} (recorded, never waited on)"),
                });
            }
        }
        let steps = &self.sched.steps;
        for (t, p) in self.pending.iter().enumerate() {
            for (k, _) in &p.waits {
                self.violations.push(Violation::Unnecessary {
                    step: *k,
                    what: format!("{} (no later op on s{t})", describe_step(&steps[*k])),
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
    use crate::schedule::{EventId, Step, StreamId, SyncPolicy};

    fn run(g: &crate::lower::OpGraph, s: &crate::schedule::Schedule) -> Vec<Violation> {
        match Verifier::new(g, s).run() {
            Ok(_) => Vec::new(),
            Err(e) => e.violations,
        }
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
                format!("unnecessary event {event} (recorded, never waited on) at step 0: removing it breaks no edge"),
                format!("unnecessary host wait on s0 (no later host op) at step {k}: removing it breaks no edge"),
            ]
        );
    }
}
