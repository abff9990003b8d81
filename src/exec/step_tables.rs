//! What each issuing thread of threaded issue ([`super::threads`]) knows about the
//! steps, computed once per run before any thread starts: each group's and each
//! stream's steps, where each step waits for another group's, and which steps publish
//! their stream's progress.

use super::run_state::Core;
use crate::lower::{AllocId, KernelArg, OpKind};
use crate::schedule::{Schedule, Step};

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
    /// Per step, the earlier steps of other groups it must wait to be issued:
    /// `deps[dep_off[k]..dep_off[k + 1]]`.
    pub(super) dep_off: Vec<u32>,
    pub(super) deps: Vec<u32>,
    /// Per step: for a `Wait`, whether an earlier record exists.
    pub(super) recorded_before: Vec<bool>,
    /// Per step: whether another thread may wait for it to be issued (a dependency of
    /// another group's step, or the last step of its stream before a host wait on it).
    /// Only these publish their stream's progress: the rest cost no shared write.
    pub(super) publish: Vec<bool>,
}

impl StepTables {
    /// `group_of`: the issue group of each stream (groups numbered `0..`).
    pub(super) fn new(core: &Core, group_of: &[u32]) -> StepTables {
        let (graph, sched): (_, &Schedule) = (core.graph, core.sched);
        let n = sched.steps.len();
        let groups = group_of.iter().map(|&g| g as usize + 1).max().unwrap_or(0);
        let mut group_steps = vec![Vec::new(); groups];
        let mut slot = vec![0u32; group_of.len()];
        let mut in_group = vec![0u32; groups];
        for (s, &g) in group_of.iter().enumerate() {
            slot[s] = in_group[g as usize];
            in_group[g as usize] += 1;
        }
        let other_group = |a: u32, b: u32| group_of[a as usize] != group_of[b as usize];
        let mut lane_steps = vec![Vec::new(); sched.streams.len()];
        let mut lane_of = vec![HOST; n];
        let mut pos = vec![0u32; n];
        let mut host_before = vec![0u32; n];
        let mut host_steps = Vec::new();
        let mut dep_off = Vec::with_capacity(n + 1);
        let mut deps = Vec::new();
        let mut recorded_before = vec![false; n];
        // The step of each alloc's Alloc op, and of each event's latest record so far.
        let mut alloc_step: Vec<Option<usize>> = vec![None; graph.allocs.len()];
        let mut last_record: Vec<Option<usize>> = vec![None; sched.events as usize];
        // Per alloc, since its Alloc: the last step using it on each stream.
        let mut alloc_users: Vec<Vec<(u32, u32)>> = vec![Vec::new(); graph.allocs.len()];
        for (k, step) in sched.steps.iter().enumerate() {
            host_before[k] = host_steps.len() as u32;
            dep_off.push(deps.len() as u32);
            let lane = match *step {
                Step::Op(op) => match sched.op_stream[op.index()] {
                    Some(s) if !graph.op(op).kind.is_host() => Some(s),
                    _ => None,
                },
                Step::Record { stream, .. } | Step::Wait { stream, .. } => Some(stream),
                Step::HostWait { .. } | Step::HostWaitDevice { .. } => None,
            };
            let Some(s) = lane else {
                host_steps.push(k);
                continue;
            };
            lane_of[k] = s.0;
            pos[k] = lane_steps[s.index()].len() as u32;
            lane_steps[s.index()].push(k);
            group_steps[group_of[s.index()] as usize].push(k);
            // A use waits for its alloc's issue; a free also for the last earlier use on
            // every other stream (an op on an empty section has no data dependency, so
            // nothing else orders it before the free, and its address must still be live).
            let mut use_alloc = |a: AllocId, free: bool, deps: &mut Vec<u32>| {
                if let Some(j) = alloc_step.get(a.index()).copied().flatten() {
                    if other_group(lane_of[j], s.0) {
                        deps.push(j as u32);
                    }
                }
                let Some(users) = alloc_users.get_mut(a.index()) else {
                    return; // not an alloc of this graph: the issue reports it
                };
                if free {
                    deps.extend(users.iter().filter(|u| other_group(u.0, s.0)).map(|u| u.1));
                    users.clear();
                } else {
                    match users.iter_mut().find(|u| u.0 == s.0) {
                        Some(u) => u.1 = k as u32,
                        None => users.push((s.0, k as u32)),
                    }
                }
            };
            match *step {
                Step::Op(op) => match &graph.op(op).kind {
                    OpKind::Alloc { alloc } => {
                        if let Some(a) = alloc_step.get_mut(alloc.index()) {
                            *a = Some(k);
                            alloc_users[alloc.index()].clear();
                        }
                    }
                    OpKind::H2D { alloc, .. } | OpKind::D2H { alloc, .. } => {
                        use_alloc(*alloc, false, &mut deps)
                    }
                    OpKind::Free { alloc } => use_alloc(*alloc, true, &mut deps),
                    OpKind::Kernel(call) => {
                        for a in &call.args {
                            if let KernelArg::Device { alloc, .. } = a {
                                use_alloc(*alloc, false, &mut deps);
                            }
                        }
                    }
                    _ => {}
                },
                Step::Record { event, .. } => last_record[event.index()] = Some(k),
                Step::Wait { event, .. } => {
                    if let Some(j) = last_record[event.index()] {
                        recorded_before[k] = true;
                        if other_group(lane_of[j], s.0) {
                            deps.push(j as u32);
                        }
                    }
                }
                _ => {}
            }
        }
        dep_off.push(deps.len() as u32);
        let mut publish = vec![false; n];
        for &j in &deps {
            publish[j as usize] = true;
        }
        for &i in &host_steps {
            let waited: Vec<usize> = match sched.steps[i] {
                Step::HostWait { stream } => vec![stream.index()],
                Step::HostWaitDevice { device } => (0..sched.streams.len())
                    .filter(|&t| sched.streams[t].device == device)
                    .collect(),
                _ => Vec::new(),
            };
            for t in waited {
                let before = lane_steps[t].partition_point(|&k| k < i);
                if before > 0 {
                    publish[lane_steps[t][before - 1]] = true;
                }
            }
        }
        StepTables {
            lane_steps,
            group_steps,
            group_of: group_of.to_vec(),
            slot,
            lane_of,
            pos,
            host_before,
            host_steps,
            dep_off,
            deps,
            recorded_before,
            publish,
        }
    }

    pub(super) fn deps(&self, k: usize) -> &[u32] {
        &self.deps[self.dep_off[k] as usize..self.dep_off[k + 1] as usize]
    }

    /// How many of stream `s`'s steps come before step `i`.
    pub(super) fn before(&self, s: usize, i: usize) -> u32 {
        self.lane_steps[s].partition_point(|&k| k < i) as u32
    }
}
