//! Which host ops the issuing thread of serial issue with host lanes (`host_lanes.rs`)
//! runs itself instead of handing them to their lane, and why that keeps the lanes'
//! model (the one the verifier proves, one clock per host lane).
//!
//! A lane is a worker thread: handing it an item and being told it finished costs two
//! thread wake-ups (tens of µs each on a loaded 2-core machine), and a lane that is
//! never handed anything need not be started. Two cases where the issuing thread would
//! only sit and wait for the lane:
//!
//! - **At its own await** ([`Inline`]): a host op `x` the issuing thread awaits itself
//!   (a [`Step::HostAwait`] of `x` it owns, before a device op) runs there, with the host
//!   waits that lead it, when no step between its first item and that await hands
//!   anything else to `x`'s lane or blocks the issuing thread, and (checked when the
//!   first item is reached) the lane has nothing queued or running. jacobi's chain
//!   `update from` → host read → next `update from`: one hand-off and one wake-up back
//!   saved per read.
//! - **In the tail** ([`Plan::tail_start`]): from the step after the issuing thread's
//!   last own step, every step is a lane item and the issuing thread would only join the
//!   lanes. It hands the other lanes their items, then runs the items of the tail lanes
//!   ([`Plan::tail_lanes`]: the lane of the last op, normally `End`, and every lane whose
//!   tail ops do no work of their own, a `taskwait`) that have nothing queued or running
//!   when the tail is reached, in schedule order. A graph whose only host ops are a
//!   `taskwait` and `End` then starts no lane at all, as before lanes.
//!
//! Why this is allowed: running an item inline only adds order. An inline op still
//! starts after everything its lane knows — the lane's earlier items have finished (its
//! count of items handed and not finished is 0, read with `SeqCst` after the lane's
//! decrement, so their writes are visible) and the lane is handed nothing else until
//! the inline items have run — and after what the issuing thread knew at the hand-off
//! (it knows more when it runs the op). What the op must precede is ordered after it as
//! before: device ops after the await are issued after it ran; the lane's later items
//! are handed after it ran; any other lane's await of it sees it done. Every await
//! names an earlier step and every thread runs its items in step order, so the earliest
//! unfinished item can always run: no deadlock. The cost is concurrency only: an op at
//! its await starts later than on its lane by the non-blocking issue steps in between
//! (the issuing thread was to block at the await until the op finished in any case); in
//! the tail, one lane doing real work runs on the issuing thread instead of a worker.
//! An inline op keeps its schedule lane in every view (the schedule text, DOT, the
//! trace's flows name `op_lane`); the report does not say which thread ran it, and its
//! host waits count as the host's, as a lane's do.

use crate::lower::{OpGraph, OpId, OpKind};
use crate::schedule::{LaneId, Schedule, Step};

/// A host op the issuing thread may run itself, at its own await of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Inline {
    /// The op's lane (index).
    pub(super) lane: usize,
    /// The op's step.
    pub(super) op_step: usize,
    /// The issuing thread's [`Step::HostAwait`] of the op.
    pub(super) await_step: usize,
}

/// What the issuing thread may run itself (see the module docs); the lane conditions
/// (nothing queued or running) are checked during the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Plan {
    /// Per step, the [`Inline`] whose items start at that step (the first host wait that
    /// leads the op on its lane, or the op's step when none does).
    pub(super) candidates: Vec<Option<Inline>>,
    /// The first step of the tail: every step from here on is a lane item (the step
    /// count when the last step is not).
    pub(super) tail_start: usize,
    /// Per lane, whether the issuing thread may run its tail items.
    pub(super) tail_lanes: Vec<bool>,
}

/// The plan of `sched` (of `graph`); `owners`: [`Schedule::wait_owners`]. Lanes out of
/// range count as the last lane, as the executor sends them. `O(K + V)` for `K` steps
/// and `V` ops.
pub(super) fn plan(graph: &OpGraph, sched: &Schedule, owners: &[Option<LaneId>]) -> Plan {
    let n = sched.steps.len();
    let n_lanes = sched.host_lanes.max(1) as usize;
    let lane_of = |op: OpId| lane_of(sched, op);
    let is_host_op = |op: OpId| sched.op_stream.get(op.index()).is_some_and(|s| s.is_none());
    let item_lane = |j: usize| item_lane(sched, owners, j);
    // Per step, the next step handing an item to the same lane (n: none).
    let mut next_item = vec![n; n];
    let mut last = vec![n; n_lanes];
    for j in (0..n).rev() {
        if let Some(l) = item_lane(j) {
            next_item[j] = last[l];
            last[l] = j;
        }
    }
    // blocked[j]: how many of the steps before j the issuing thread blocks at.
    let mut blocked = vec![0u32; n + 1];
    let mut op_step = vec![None; sched.op_stream.len()];
    for (j, step) in sched.steps.iter().enumerate() {
        let blocks = step.is_host_wait() && owners[j].is_none();
        blocked[j + 1] = blocked[j] + u32::from(blocks);
        if let Step::Op(op) = *step {
            if let Some(x) = op_step.get_mut(op.index()) {
                *x = Some(j);
            }
        }
    }
    let mut candidates = vec![None; n];
    let mut seen = vec![false; op_step.len()];
    for (k, step) in sched.steps.iter().enumerate() {
        let Step::HostAwait { op } = *step else {
            continue;
        };
        if owners[k].is_some() || !is_host_op(op) || seen[op.index()] {
            continue;
        }
        seen[op.index()] = true;
        let Some(p) = op_step[op.index()].filter(|&p| p < k) else {
            continue;
        };
        let lane = lane_of(op);
        // The host waits that lead the op: its lane's, back to the op step before it.
        let mut first = p;
        for j in (0..p).rev() {
            match sched.steps[j] {
                Step::Op(_) => break,
                _ if item_lane(j) == Some(lane) => first = j,
                _ => {}
            }
        }
        if next_item[p] > k && blocked[k] == blocked[first] {
            candidates[first] = Some(Inline {
                lane,
                op_step: p,
                await_step: k,
            });
        }
    }
    let tail_start = (0..n)
        .rev()
        .find(|&j| item_lane(j).is_none())
        .map_or(0, |j| j + 1);
    let mut tail_lanes = vec![true; n_lanes];
    let mut last_lane = None;
    for step in &sched.steps[tail_start..] {
        if let Step::Op(op) = *step {
            let l = lane_of(op);
            last_lane = Some(l);
            if does_work(graph, op) {
                tail_lanes[l] = false;
            }
        }
    }
    if let Some(l) = last_lane {
        tail_lanes[l] = true;
    }
    Plan {
        candidates,
        tail_start,
        tail_lanes,
    }
}

/// The lane of host op `op` (lanes out of range count as the last, as the executor sends
/// them).
fn lane_of(sched: &Schedule, op: OpId) -> usize {
    let n_lanes = sched.host_lanes.max(1) as usize;
    (sched.op_lane.get(op.index()).copied().unwrap_or(0) as usize).min(n_lanes - 1)
}

/// The lane the item at step `j` goes to, if one does: a host op's, or a host wait's
/// owner's (`owners`: [`Schedule::wait_owners`]).
fn item_lane(sched: &Schedule, owners: &[Option<LaneId>], j: usize) -> Option<usize> {
    let n_lanes = sched.host_lanes.max(1) as usize;
    match sched.steps[j] {
        Step::Op(op) if sched.op_stream.get(op.index()).is_some_and(|s| s.is_none()) => {
            Some(lane_of(sched, op))
        }
        Step::Op(_) => None,
        _ => owners[j].map(|l| l.index().min(n_lanes - 1)),
    }
}

/// The schedule's tail as the issuing thread runs it: its first step, and per step from
/// there whether the step's item is a tail lane's (one the issuing thread runs itself,
/// in step order). The cross-rank verifier (`distribute::verify`) models the executor
/// with this, so the two cannot disagree. `O(K + V)`.
pub(crate) fn tail_items(
    graph: &OpGraph,
    sched: &Schedule,
    owners: &[Option<LaneId>],
) -> (usize, Vec<bool>) {
    let p = plan(graph, sched, owners);
    let items = (p.tail_start..sched.steps.len())
        .map(|j| item_lane(sched, owners, j).is_some_and(|l| p.tail_lanes[l]))
        .collect();
    (p.tail_start, items)
}

/// Whether host op `op` does work of its own (a host task with a kernel or a closure;
/// `End`, which snapshots the buffers), beyond the host waits that lead it.
fn does_work(graph: &OpGraph, op: OpId) -> bool {
    match graph.ops.get(op.index()).map(|o| &o.kind) {
        Some(OpKind::HostTask { call, body, .. }) => call.is_some() || body.is_some(),
        Some(OpKind::Taskwait) | None => false,
        Some(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::{schedule, ScheduleOptions};

    fn plan_of(file: &str, host_lanes: u32) -> (Schedule, Plan) {
        let path = format!("{}/graphs/{file}", env!("CARGO_MANIFEST_DIR"));
        let (_, program) = crate::file::load(&path).unwrap();
        let g = crate::lower::lower(&program).unwrap();
        let opts = ScheduleOptions {
            host_lanes,
            ..ScheduleOptions::default()
        };
        let s = schedule(&g, &opts);
        let p = plan(&g, &s, &s.wait_owners());
        (s, p)
    }

    #[test]
    fn jacobi_reads_are_inline_at_their_awaits_and_the_tail_is_the_issuers() {
        let (s, p) = plan_of("jacobi.toml", 2);
        let owners = s.wait_owners();
        // Every host read but the last is awaited by the issuing thread before the next
        // `update from`, with nothing else for its lane in between.
        let inline: Vec<_> = p.candidates.iter().flatten().collect();
        assert_eq!(inline.len(), 9);
        for c in &inline {
            let Step::Op(op) = s.steps[c.op_step] else {
                panic!("{c:?} is not an op step")
            };
            assert_eq!(s.steps[c.await_step], Step::HostAwait { op });
            assert_eq!(owners[c.await_step], None);
            assert_eq!(c.lane, s.op_lane[op.index()] as usize);
        }
        // The tail: wait s0, the last read, `End`: all on one lane, the issuer's.
        assert_eq!(s.steps.len() - p.tail_start, 3);
        let tail_lane = s.op_lane[match s.steps[s.steps.len() - 1] {
            Step::Op(op) => op.index(),
            ref x => panic!("last step {x:?}"),
        }] as usize;
        assert!(p.tail_lanes[tail_lane]);
    }

    #[test]
    fn a_taskwait_lane_in_the_tail_is_the_issuers_a_host_task_lane_is_not() {
        // matmul_small: wait device, taskwait (h0), end (h0): the taskwait and the end
        // after it share a lane (the lane choice keeps a chain of host ops on one lane).
        let (s, p) = plan_of("matmul_small.toml", 2);
        assert_eq!(s.steps.len() - p.tail_start, 3);
        assert!(p.tail_lanes[0]);
        assert!(p.candidates.iter().all(Option::is_none));
        // batch_host_consumers: host tasks at the end on both lanes; only `End`'s lane
        // is the issuer's.
        let (s, p) = plan_of("batch_host_consumers.toml", 2);
        let end = s.steps.len() - 1;
        let Step::Op(end_op) = s.steps[end] else {
            panic!("last step is not End")
        };
        let end_lane = s.op_lane[end_op.index()] as usize;
        let tail_ops: Vec<usize> = s.steps[p.tail_start..]
            .iter()
            .filter_map(|st| match *st {
                Step::Op(op) => Some(s.op_lane[op.index()] as usize),
                _ => None,
            })
            .collect();
        assert!(tail_ops.contains(&(1 - end_lane)), "{tail_ops:?}");
        assert!(p.tail_lanes[end_lane]);
        assert!(!p.tail_lanes[1 - end_lane]);
    }
}
