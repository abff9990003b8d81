//! How the executor issues a schedule's steps: [`IssueMode`] and the rule
//! [`IssueMode::Auto`] applies.

use crate::schedule::{Schedule, Step};

/// How [`execute`](super::execute) issues a schedule's steps to the plugin.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IssueMode {
    /// [`IssueMode::PerGroup`] when the plugin asks for it
    /// ([`PluginInfo::parallel_issue`](crate::plugin::PluginInfo::parallel_issue): the
    /// CUDA plugin does) and at least two issue groups
    /// each issue at least [`AUTO_DEVICE_STEPS_PER_HOST_STEP`] device steps per host
    /// step of the schedule, else [`IssueMode::Serial`].
    #[default]
    Auto,
    /// Every step from the calling thread, in schedule order.
    Serial,
    /// One issuing thread per stream, started for the run (setup, not timed); the
    /// calling thread runs host ops and host waits. Same results as `Serial` for every
    /// schedule whose cross-stream order goes through events or host waits (every
    /// schedule [`crate::verify::verify`] accepts); see `exec/threads.rs` for the rules. Debug
    /// logs show issues and host waits, but not the per-op "completed" lines of serial
    /// issue (each stream's op list stays with its thread). Every event between two
    /// streams is a hand-off between their threads; [`IssueMode::PerGroup`] avoids that.
    PerStream,
    /// One issuing thread per *issue group*: streams joined by events (at least one per
    /// [`GROUP_STEPS_PER_EVENT`] device steps of the less busy stream) form a group, and
    /// one thread issues all of a group's steps in schedule order, so a record and its
    /// waits in one group need no hand-off between threads. Otherwise as `PerStream`
    /// (which is this with every stream its own group). A schedule whose streams with
    /// steps form one group is issued serially (the report then says `Serial`).
    PerGroup,
}

pub use super::threads::GROUP_STEPS_PER_EVENT;

/// How many device steps (ops, records, waits) per host step (host op or host wait)
/// each of at least two issue groups needs for [`IssueMode::Auto`] to issue per group
/// (measured with one thread per stream, when each stream was a group). Between host steps the
/// issuing threads hand over to the calling thread and back; on the H200 (benches/
/// README-gpu.md, runs 7-10) that made per-op (about 1 device step per host wait) 30%
/// and per-region (8 per host wait) 25% slower than serial issue, while minimal (512
/// per host wait) was 25-50% faster.
pub const AUTO_DEVICE_STEPS_PER_HOST_STEP: usize = 16;

/// Whether [`IssueMode::Auto`] issues `sched` per group on a plugin that asks for it,
/// given its issue groups `group_of` (per stream): at least two groups with at least
/// [`AUTO_DEVICE_STEPS_PER_HOST_STEP`] device steps per host step each.
pub(super) fn auto_per_group(sched: &Schedule, group_of: &[u32]) -> bool {
    let mut host = 0;
    let mut device = vec![0usize; group_of.len()];
    for st in &sched.steps {
        let s = match st {
            Step::Op(op) => sched.op_stream[op.index()],
            Step::HostWait { .. }
            | Step::HostWaitEvent { .. }
            | Step::HostWaitDevice { .. }
            | Step::HostAwait { .. } => None,
            Step::Record { stream, .. } | Step::Wait { stream, .. } => Some(*stream),
        };
        match s.and_then(|s| group_of.get(s.index())) {
            Some(&g) => device[g as usize] += 1,
            None => host += 1,
        }
    }
    let need = AUTO_DEVICE_STEPS_PER_HOST_STEP * host.max(1);
    device.iter().filter(|&&d| d >= need).count() >= 2
}

/// Number of issue groups (of `group_of`) that have steps in `sched`.
pub(super) fn groups_with_steps(sched: &Schedule, group_of: &[u32]) -> usize {
    let mut used = vec![false; group_of.len()];
    for s in sched.op_stream.iter().flatten() {
        if let Some(&g) = group_of.get(s.index()) {
            used[g as usize] = true;
        }
    }
    used.into_iter().filter(|&u| u).count()
}

/// Who runs the host ops (host tasks, `taskwait`, `end`, and the host waits their lanes
/// own) of serial issue ([`super::ExecOptions::host_ops`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HostOps {
    /// Each host lane's thread, started when first handed an op (`exec/host_lanes.rs`);
    /// the issuing thread runs an op itself only where it would wait for the lane anyway.
    #[default]
    Lanes,
    /// The issuing thread, with no lane thread: each host op at its step, in schedule
    /// order, except those of `deferred_lane`, which wait in their lane's order and run
    /// at the first step that needs one (an await of the op, by the issuing thread or by
    /// another lane's item) or at the end. For a process whose host ops include
    /// receives from other processes, which block until a message comes: run at their
    /// step, a receive issued ahead of a send the other process waits for would block
    /// both. Run when awaited, a receive blocks the thread only where the lane model
    /// blocked the issuing thread or the send lane too, with every send before that
    /// point made (a distributed rank's sends are on one lane, its receives on another:
    /// `distribute::split`), so no run that completes with lanes hangs this way. The
    /// host ops and the device issue share one thread, so with a plugin whose streams
    /// run on their own workers this only saves the lane hand-offs; with the host
    /// plugin's `inline_streams` the whole run is one thread.
    Inline {
        /// The lane whose ops wait for their first await (a rank's receive lane).
        deferred_lane: Option<u32>,
    },
}
