//! What each issuing thread of threaded issue ([`super::threads`]) knows about the
//! steps, computed once per run before any thread starts: each group's and each
//! stream's steps, where each step waits for another group's, and which steps publish
//! their stream's progress.

use crate::lower::{AllocId, KernelArg, OpGraph, OpKind};
use crate::schedule::{Schedule, Step, StreamId};

/// `lane_of` of a host step.
const HOST: u32 = u32::MAX;

/// What each thread needs to know about the steps, computed once per run.
pub(super) struct StepTables {
    /// Per stream, its steps' indices in schedule order.
    pub(super) lane_steps: Vec<Vec<usize>>,
    /// Per issue group, its streams' steps in schedule order (what its thread issues).
    pub(super) group_steps: Vec<Vec<usize>>,
    /// Per stream, its issue group and its index among the group's streams.
    pub(super) group_of: Vec<u32>,
    pub(super) slot: Vec<u32>,
    /// Per step, its stream (or [`HOST`]) and its position in that stream's list.
    pub(super) lane_of: Vec<u32>,
    pub(super) pos: Vec<u32>,
    /// Per step, how many host steps come before it.
    pub(super) host_before: Vec<u32>,
    /// Host steps in order.
    pub(super) host_steps: Vec<usize>,
    /// Per step, the earlier steps of other groups it must wait to be issued (for a
    /// `HostWaitEvent`, the latest record of its event):
    /// `deps[dep_off[k]..dep_off[k + 1]]`.
    pub(super) dep_off: Vec<u32>,
    pub(super) deps: Vec<u32>,
    /// Per step: for a `Wait` or a `HostWaitEvent`, whether an earlier record exists.
    pub(super) recorded_before: Vec<bool>,
    /// Per step: whether another thread may wait for it to be issued (a dependency of
    /// another group's step or of a host step, or the last step of its stream before a
    /// host wait on it). Only these publish their stream's progress: the rest cost no
    /// shared write.
    pub(super) publish: Vec<bool>,
}

impl StepTables {
    /// The tables of `sched`'s steps, for issue groups `group_of` (the group of each
    /// stream, numbered `0..`).
    ///
    /// Complexity: `O((K + A)·S + W log K)` for `K` steps, `A` device arguments of kernel
    /// ops, `S` streams and `W` (host wait, stream it waits for) pairs.
    pub(super) fn new(graph: &OpGraph, sched: &Schedule, group_of: &[u32]) -> StepTables {
        let n = sched.steps.len();
        let (groups, slot) = group_slots(group_of);
        let mut t = StepTables {
            lane_steps: vec![Vec::new(); sched.streams.len()],
            group_steps: vec![Vec::new(); groups],
            group_of: group_of.to_vec(),
            slot,
            lane_of: vec![HOST; n],
            pos: vec![0u32; n],
            host_before: vec![0u32; n],
            host_steps: Vec::new(),
            dep_off: Vec::with_capacity(n + 1),
            deps: Vec::new(),
            recorded_before: vec![false; n],
            publish: Vec::new(),
        };
        let mut scan = DepScan::new(graph, sched);
        for (k, step) in sched.steps.iter().enumerate() {
            t.host_before[k] = t.host_steps.len() as u32;
            t.dep_off.push(t.deps.len() as u32);
            match step_stream(graph, sched, step) {
                Some(s) => {
                    t.place(k, s);
                    scan.step(graph, &mut t, k, *step, s);
                }
                None => {
                    scan.host_step(&mut t, k, *step);
                    t.host_steps.push(k);
                }
            }
        }
        t.dep_off.push(t.deps.len() as u32);
        t.publish = t.publishing(sched);
        t
    }

    /// Puts step `k` last on stream `s`'s list and its group's. `O(1)` amortized.
    fn place(&mut self, k: usize, s: StreamId) {
        self.lane_of[k] = s.0;
        self.pos[k] = self.lane_steps[s.index()].len() as u32;
        self.lane_steps[s.index()].push(k);
        self.group_steps[self.group_of[s.index()] as usize].push(k);
    }

    /// [`StepTables::publish`], once `deps` and the step lists are complete: every
    /// dependency, and the last step of a stream before a host wait on it.
    /// `O(K + W log K)`.
    fn publishing(&self, sched: &Schedule) -> Vec<bool> {
        let mut publish = vec![false; sched.steps.len()];
        for &j in &self.deps {
            publish[j as usize] = true;
        }
        for &i in &self.host_steps {
            let waited: Vec<usize> = match sched.steps[i] {
                Step::HostWait { stream } => vec![stream.index()],
                Step::HostWaitDevice { device } => (0..sched.streams.len())
                    .filter(|&t| sched.streams[t].device == device)
                    .collect(),
                _ => Vec::new(),
            };
            for t in waited {
                let before = self.lane_steps[t].partition_point(|&k| k < i);
                if before > 0 {
                    publish[self.lane_steps[t][before - 1]] = true;
                }
            }
        }
        publish
    }

    pub(super) fn deps(&self, k: usize) -> &[u32] {
        &self.deps[self.dep_off[k] as usize..self.dep_off[k + 1] as usize]
    }

    /// How many of stream `s`'s steps come before step `i`.
    pub(super) fn before(&self, s: usize, i: usize) -> u32 {
        self.lane_steps[s].partition_point(|&k| k < i) as u32
    }
}

/// The number of issue groups in `group_of` (the group of each stream, numbered `0..`)
/// and each stream's index among its group's streams. `O(S)`.
fn group_slots(group_of: &[u32]) -> (usize, Vec<u32>) {
    let groups = group_of.iter().map(|&g| g as usize + 1).max().unwrap_or(0);
    let mut slot = vec![0u32; group_of.len()];
    let mut in_group = vec![0u32; groups];
    for (s, &g) in group_of.iter().enumerate() {
        slot[s] = in_group[g as usize];
        in_group[g as usize] += 1;
    }
    (groups, slot)
}

/// The stream whose thread issues `step` (a device op's, a record's or a wait's), or
/// `None` for a host step (a host op or host wait), which the calling thread runs.
fn step_stream(graph: &OpGraph, sched: &Schedule, step: &Step) -> Option<StreamId> {
    match *step {
        Step::Op(op) => match sched.op_stream[op.index()] {
            Some(s) if !graph.op(op).kind.is_host() => Some(s),
            _ => None,
        },
        Step::Record { stream, .. } | Step::Wait { stream, .. } => Some(stream),
        Step::HostWait { .. }
        | Step::HostWaitEvent { .. }
        | Step::HostWaitDevice { .. }
        | Step::HostAwait { .. } => None,
    }
}

/// Whether streams `a` and `b` are in different issue groups (so ordering a step of
/// one after a step of the other takes a wait between threads).
fn other_group(group_of: &[u32], a: u32, b: u32) -> bool {
    group_of[a as usize] != group_of[b as usize]
}

/// What the dependency scan of [`StepTables::new`] remembers of the steps so far.
struct DepScan {
    /// The step of each alloc's Alloc op, and of each event's latest record so far.
    alloc_step: Vec<Option<usize>>,
    last_record: Vec<Option<usize>>,
    /// Per alloc, since its Alloc: the last step using it on each stream.
    alloc_users: Vec<Vec<(u32, u32)>>,
}

impl DepScan {
    fn new(graph: &OpGraph, sched: &Schedule) -> DepScan {
        DepScan {
            alloc_step: vec![None; graph.allocs.len()],
            last_record: vec![None; sched.events as usize],
            alloc_users: vec![Vec::new(); graph.allocs.len()],
        }
    }

    /// Step `k` (`step`, on stream `s`): appends to `t.deps` the earlier steps of other
    /// groups it must wait to be issued (see [`DepScan::use_alloc`]; for a `Wait`, the
    /// latest record of its event) and sets `t.recorded_before[k]`. `O(S)` per device
    /// memory use.
    fn step(&mut self, graph: &OpGraph, t: &mut StepTables, k: usize, step: Step, s: StreamId) {
        match step {
            Step::Op(op) => match &graph.op(op).kind {
                OpKind::Alloc { alloc } => {
                    if let Some(a) = self.alloc_step.get_mut(alloc.index()) {
                        *a = Some(k);
                        self.alloc_users[alloc.index()].clear();
                    }
                }
                OpKind::H2D { alloc, .. } | OpKind::D2H { alloc, .. } => {
                    self.use_alloc(t, *alloc, false, k, s)
                }
                OpKind::PeerCopy { src, dst, .. } => {
                    self.use_alloc(t, *src, false, k, s);
                    self.use_alloc(t, *dst, false, k, s);
                }
                OpKind::Free { alloc } => self.use_alloc(t, *alloc, true, k, s),
                OpKind::Kernel(call) => {
                    for a in &call.args {
                        if let KernelArg::Device { alloc, .. } = a {
                            self.use_alloc(t, *alloc, false, k, s);
                        }
                    }
                }
                _ => {}
            },
            Step::Record { event, .. } => self.last_record[event.index()] = Some(k),
            Step::Wait { event, .. } => {
                if let Some(j) = self.last_record[event.index()] {
                    t.recorded_before[k] = true;
                    if other_group(&t.group_of, t.lane_of[j], s.0) {
                        t.deps.push(j as u32);
                    }
                }
            }
            _ => {}
        }
    }

    /// Host step `k`: a `HostWaitEvent` depends on the latest record of its event (the
    /// host may synchronize the event only once that record is issued: an event not yet
    /// recorded would complete at once) and sets `t.recorded_before[k]`. `O(1)`.
    fn host_step(&mut self, t: &mut StepTables, k: usize, step: Step) {
        if let Step::HostWaitEvent { event } = step {
            if let Some(j) = self.last_record.get(event.index()).copied().flatten() {
                t.recorded_before[k] = true;
                t.deps.push(j as u32);
            }
        }
    }

    /// Step `k` on stream `s` uses alloc `a` (frees it when `free`). A use waits for its
    /// alloc's issue; a free also for the last earlier use on every other stream (an op
    /// on an empty section has no data dependency, so nothing else orders it before the
    /// free, and its address must still be live). Only waits on other groups' steps go
    /// into `t.deps`. `O(S)`.
    fn use_alloc(&mut self, t: &mut StepTables, a: AllocId, free: bool, k: usize, s: StreamId) {
        if let Some(j) = self.alloc_step.get(a.index()).copied().flatten() {
            if other_group(&t.group_of, t.lane_of[j], s.0) {
                t.deps.push(j as u32);
            }
        }
        let Some(users) = self.alloc_users.get_mut(a.index()) else {
            return; // not an alloc of this graph: the issue reports it
        };
        if free {
            let group_of = &t.group_of;
            t.deps.extend(
                users
                    .iter()
                    .filter(|u| other_group(group_of, u.0, s.0))
                    .map(|u| u.1),
            );
            users.clear();
        } else {
            match users.iter_mut().find(|u| u.0 == s.0) {
                Some(u) => u.1 = k as u32,
                None => users.push((s.0, k as u32)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::{schedule, EventId, ScheduleOptions};

    /// 4 independent saxpy regions on 4 streams (no events), then `e0` recorded on s0
    /// and waited on by s1, then a wait on s2 for `e1`, which is never recorded.
    fn graph_and_sched() -> (OpGraph, Schedule) {
        let g = crate::lower::lower(&crate::model::saxpy_regions(4, 256)).unwrap();
        let mut s = schedule(&g, &ScheduleOptions::default());
        assert_eq!(s.events, 0);
        s.events = 2;
        let (e0, e1) = (EventId(0), EventId(1));
        s.steps.push(Step::Record {
            event: e0,
            stream: StreamId(0),
        });
        s.steps.push(Step::Wait {
            event: e0,
            stream: StreamId(1),
        });
        s.steps.push(Step::Wait {
            event: e1,
            stream: StreamId(2),
        });
        (g, s)
    }

    #[test]
    fn a_wait_on_another_groups_record_depends_on_it_and_the_record_publishes() {
        let (g, s) = graph_and_sched();
        let n = s.steps.len();
        let (record, wait, unrecorded) = (n - 3, n - 2, n - 1);
        let t = StepTables::new(&g, &s, &[0, 1, 2, 3]);
        assert_eq!(t.deps(wait), [record as u32]);
        assert!(t.publish[record]);
        assert!(t.recorded_before[wait]);
        assert!(!t.recorded_before[unrecorded]);
        assert_eq!((t.lane_of[wait], t.pos[wait]), (1, t.before(1, wait)));
        assert_eq!(t.group_steps.len(), 4);
        assert!(t.group_steps[1].ends_with(&[wait]));
    }

    #[test]
    fn a_host_wait_on_an_event_depends_on_its_record_which_publishes() {
        let (g, mut s) = graph_and_sched();
        s.steps.push(Step::HostWaitEvent { event: EventId(0) });
        s.steps.push(Step::HostWaitEvent { event: EventId(1) });
        let n = s.steps.len();
        let (record, on_e0, on_e1) = (n - 5, n - 2, n - 1);
        // In any grouping: the host thread is in none.
        let t = StepTables::new(&g, &s, &[0, 0, 1, 2]);
        assert_eq!(t.deps(on_e0), [record as u32]);
        assert!(t.publish[record]);
        assert!(t.recorded_before[on_e0]);
        assert!(!t.recorded_before[on_e1], "e1 is never recorded");
        assert!(t.deps(on_e1).is_empty());
        assert!(t.host_steps.ends_with(&[on_e0, on_e1]));
    }

    #[test]
    fn a_wait_on_its_own_groups_record_needs_nothing_but_order() {
        let (g, s) = graph_and_sched();
        let n = s.steps.len();
        let (record, wait) = (n - 3, n - 2);
        let t = StepTables::new(&g, &s, &[0, 0, 1, 2]);
        assert!(t.deps(wait).is_empty());
        assert!(!t.publish[record]);
        assert_eq!(&t.slot, &[0, 1, 0, 0]);
        assert!(t.group_steps[0].ends_with(&[record, wait]));
    }
}
