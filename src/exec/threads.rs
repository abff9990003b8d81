//! Threaded issue: [`super::IssueMode::PerGroup`] (one host thread per *issue group*
//! of streams, see [`issue_groups`]) and [`super::IssueMode::PerStream`] (one per
//! stream: every stream its own group). Each thread issues its group's steps (device
//! ops, records and waits of the group's streams) in schedule order, while the calling
//! thread runs the host steps (host ops, host waits).
//!
//! Driver calls on different streams then overlap on the host, which matters when the
//! per-call cost (a few µs for a CUDA copy or launch) is what limits small regions.
//!
//! Issue order is kept where it carries meaning — CUDA's `cuStreamWaitEvent` waits for
//! the most recent record *issued before it*, and an op can only use an address once
//! its alloc has returned it — by these waits between threads, all on issue progress
//! (nothing here waits for device work):
//! - a `Wait` step waits until the step that last recorded its event (before it in the
//!   schedule) has been issued — a hand-off between threads unless the record's stream
//!   is in the wait's group, which is what issue groups are for: a record and its waits
//!   issued by one thread need nothing but schedule order;
//! - an op that uses device memory allocated by an earlier step of another stream waits
//!   until that alloc has been issued, and a free waits until the earlier uses of its
//!   memory on other streams have been issued (a schedule from [`crate::schedule`]
//!   already orders these through events, so the wait is then immediate — except for
//!   ops on empty sections, which touch no memory and so have no dependencies, but are
//!   still passed the address);
//! - every device step waits until every host step before it has completed (so an H2D
//!   after a host task reads what the task wrote, and a stream is idle on the host side
//!   while its host wait runs);
//! - a host wait on stream `s` waits until `s`'s thread has issued every step of `s`
//!   before it, then synchronizes `s` from the calling thread; a host wait on an event
//!   waits until the latest record of the event before it has been issued, then
//!   synchronizes the event from the calling thread (an event not yet recorded would
//!   complete at once).
//!
//! Host ops run on the calling thread, in schedule order, not on host lanes
//! (`host_lanes.rs`): a valid execution of the lanes' model, since it merges every lane
//! into one thread in schedule order (each host op then starts after everything before
//! it: more order, never less), but without concurrent host tasks, and a host wait a
//! lane would own blocks the host steps after it. Kept because lanes do not fit this
//! path's gate in a contained change: a device step waits for `host_before` — the count
//! of host steps before it, completed in schedule order by this one thread
//! (`step_tables.rs`); with lanes, host steps complete out of order on several threads,
//! so the gate would become per-step done flags of the calling thread's own waits
//! (those [`Schedule::wait_owners`] gives no lane), and a lane's wait on an event or a
//! stream would first need the issue progress of other threads (the record, the
//! stream's steps before it issued), which lanes, outside this module, cannot see.
//! Threaded issue keeps what issue 26 is mostly about: the schedule issues device steps
//! by readiness ahead of host waits they do not depend on, and a group's thread issues
//! them without waiting for those later host steps. [`super::IssueMode::Auto`] takes
//! this path only on a plugin with parallel issue (CUDA) and only for schedules with many
//! device steps per host step ([`super::AUTO_DEVICE_STEPS_PER_HOST_STEP`]).
//!
//! Steps of one group are issued in schedule order by its thread, so none of these waits
//! is needed between two steps of one group. Each wait is only on an earlier step, so
//! every step is eventually issued (no deadlock). On the first error every thread stops issuing before its next step (and
//! the calling thread runs no further host step); the error of the earliest failing step
//! among those attempted is returned. A thread that panics (a plugin call that panics)
//! stops the others the same way, and the panic then propagates out of `execute`, as
//! with serial issue.

use super::run_state::{Core, Lane};
use super::step_tables::StepTables;
use super::{
    event_step, host_wait, host_wait_before_record, host_wait_event, run_host, timed_wait,
    wait_before_record, Buffers, EventStep, ExecError, HostKernels, HostWaitKind,
};
use crate::plugin::EventHandle;
use crate::schedule::{Schedule, Step, StreamId};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// Two streams go into one issue group when the events between them (records on one
/// waited on by the other, either way) number at least one per this many device steps
/// of the less busy of the two. Sparser links stay cross-thread hand-offs: a fan-in at
/// the end of long independent chains should not serialize their issue.
///
/// Why 8: [`super::IssueMode::Auto`] groups only on plugins with parallel issue (CUDA),
/// so the figure that counts is the GPU host's. On the H200's 16-core host (benches/
/// README-gpu.md, run 24) the blocked matmul with transfer elision on 4 streams — 1023
/// events, about one per 11 device steps of each stream pair — ran in 20.5-23.7 ms issued
/// per stream against 26.4-42.9 ms issued by one thread (its streams were one group at
/// the earlier 64, which came from the 2-core VM's null-plugin hand-offs of 12-74 µs,
/// benches/README.md "Issue groups"): a hand-off that spins briefly on a host with
/// cores to spare costs far less than the 2-4 µs of driver call each issued step
/// carries. At one event per 8 steps or denser, nearly every step waits on another
/// thread, and one thread is kept.
pub const GROUP_STEPS_PER_EVENT: u32 = 8;

/// Partitions the streams of `sched` into issue groups: one thread per group issues the
/// group's steps ([`super::IssueMode::PerGroup`]).
///
/// Streams `a` and `b` are joined (union-find, so transitively) when the schedule has at
/// least one event from `a` to `b` or from `b` to `a` (a `Record` on one whose
/// latest record before a `Wait` on the other it is) per [`GROUP_STEPS_PER_EVENT`]
/// device steps (ops, records, waits) of the less busy of the two. A stream with no
/// steps is a group of its own.
///
/// Returns the group of each stream (index = stream index); groups are numbered
/// `0..` in the order of their lowest stream, so the ids depend only on the schedule.
///
/// Complexity: O(|steps| + |events| + P log P) for P linked stream pairs.
pub(super) fn issue_groups(sched: &Schedule) -> Vec<u32> {
    let n = sched.streams.len();
    let mut steps = vec![0u32; n];
    let mut last_record: Vec<Option<u32>> = vec![None; sched.events as usize];
    // Per unordered stream pair, the events between them (BTreeMap: deterministic).
    let mut links: std::collections::BTreeMap<(u32, u32), u32> = Default::default();
    for step in &sched.steps {
        let s = match *step {
            Step::Op(op) => match sched.op_stream.get(op.index()).copied().flatten() {
                Some(s) => s,
                None => continue,
            },
            Step::Record { event, stream } => {
                if let Some(r) = last_record.get_mut(event.index()) {
                    *r = Some(stream.0);
                }
                stream
            }
            Step::Wait { event, stream } => {
                if let Some(r) = last_record.get(event.index()).copied().flatten() {
                    if r != stream.0 {
                        *links.entry((r.min(stream.0), r.max(stream.0))).or_default() += 1;
                    }
                }
                stream
            }
            Step::HostWait { .. }
            | Step::HostWaitEvent { .. }
            | Step::HostWaitDevice { .. }
            | Step::HostAwait { .. } => continue,
        };
        if let Some(c) = steps.get_mut(s.index()) {
            *c += 1;
        }
    }
    let mut parent: Vec<u32> = (0..n as u32).collect();
    fn root(parent: &mut [u32], mut x: u32) -> u32 {
        while parent[x as usize] != x {
            let up = parent[parent[x as usize] as usize];
            parent[x as usize] = up;
            x = up;
        }
        x
    }
    for (&(a, b), &events) in &links {
        if (a as usize) >= n || (b as usize) >= n {
            continue; // out of range: `validate` reports it
        }
        let busy = steps[a as usize].min(steps[b as usize]);
        if u64::from(events) * u64::from(GROUP_STEPS_PER_EVENT) >= u64::from(busy) {
            let (ra, rb) = (root(&mut parent, a), root(&mut parent, b));
            // The lower root stays root, so a group's root is its lowest stream.
            parent[ra.max(rb) as usize] = ra.min(rb);
        }
    }
    let mut id = vec![u32::MAX; n];
    let mut next = 0;
    (0..n as u32)
        .map(|s| {
            let r = root(&mut parent, s) as usize;
            if id[r] == u32::MAX {
                id[r] = next;
                next += 1;
            }
            id[r]
        })
        .collect()
}

/// A counter on its own cache line (two, for adjacent-line prefetch), so that one
/// stream's thread publishing progress does not slow the others down.
#[repr(align(128))]
struct Padded(AtomicU32);

/// Progress shared between the threads, and the way to wait for it.
struct Progress {
    /// Per stream, how many of its steps have been issued (updated at publishing steps
    /// only: a lower bound in between).
    issued: Vec<Padded>,
    /// How many host steps have completed.
    host_done: AtomicU32,
    /// Set once every issuing thread has been started (thread start-up is setup: no
    /// step is issued before it is over).
    go: AtomicBool,
    failed: AtomicBool,
    errors: Mutex<Vec<(usize, ExecError)>>,
    /// How many waits found their condition not yet met (see [`IssueStats::waits`]).
    waits: AtomicU64,
    wait_ns: AtomicU64,
    sleepers: AtomicUsize,
    lock: Mutex<()>,
    cv: Condvar,
}

/// Another thread failed; stop.
struct Stopped;

/// Marks the run failed if the thread holding it unwinds (so the other threads stop
/// waiting instead of hanging on progress that will never come).
struct StopOnPanic<'a>(&'a Progress);

impl Drop for StopOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.failed.store(true, SeqCst);
            let _g = self.0.lock.lock().unwrap_or_else(|p| p.into_inner());
            self.0.cv.notify_all();
        }
    }
}

impl Progress {
    fn new(streams: usize) -> Progress {
        Progress {
            issued: (0..streams).map(|_| Padded(AtomicU32::new(0))).collect(),
            host_done: AtomicU32::new(0),
            go: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            errors: Mutex::new(Vec::new()),
            waits: AtomicU64::new(0),
            wait_ns: AtomicU64::new(0),
            sleepers: AtomicUsize::new(0),
            lock: Mutex::new(()),
            cv: Condvar::new(),
        }
    }

    fn wake(&self) {
        if self.sleepers.load(SeqCst) > 0 {
            let _g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
            self.cv.notify_all();
        }
    }

    fn fail(&self, step: usize, e: ExecError) {
        self.errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((step, e));
        self.failed.store(true, SeqCst);
        let _g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        self.cv.notify_all();
    }

    /// Returns once `ready()` holds, or `Err(Stopped)` once any thread failed. Spins
    /// briefly, then yields for up to 1 ms (issue progress usually arrives within µs, and
    /// a sleeping thread takes tens of µs to wake), then sleeps on the condition variable (woken by [`Progress::wake`]; a
    /// 1 ms timeout guards against a missed wake-up).
    /// A wait whose condition is not met at once is counted in `waits` and timed in
    /// `wait_ns`.
    fn wait_until(&self, ready: impl Fn() -> bool) -> Result<(), Stopped> {
        if ready() {
            return Ok(());
        }
        self.waits.fetch_add(1, SeqCst);
        let t = Instant::now();
        let r = self.wait_uncounted(ready);
        let ns = t.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64;
        self.wait_ns.fetch_add(ns, SeqCst);
        r
    }

    /// [`Progress::wait_until`] without counting (for the start signal: setup).
    fn wait_uncounted(&self, ready: impl Fn() -> bool) -> Result<(), Stopped> {
        for _ in 0..64 {
            if ready() {
                return Ok(());
            }
            if self.failed.load(SeqCst) {
                return Err(Stopped);
            }
            std::hint::spin_loop();
        }
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(1) {
            if ready() {
                return Ok(());
            }
            if self.failed.load(SeqCst) {
                return Err(Stopped);
            }
            std::thread::yield_now();
        }
        self.sleepers.fetch_add(1, SeqCst);
        let mut g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let r = loop {
            if ready() {
                break Ok(());
            }
            if self.failed.load(SeqCst) {
                break Err(Stopped);
            }
            g = self
                .cv
                .wait_timeout(g, Duration::from_millis(1))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        };
        drop(g);
        self.sleepers.fetch_sub(1, SeqCst);
        r
    }

    fn wait_issued(&self, plan: &StepTables, step: usize) -> Result<(), Stopped> {
        let (s, p) = (plan.lane_of[step] as usize, plan.pos[step]);
        self.wait_until(|| self.issued[s].0.load(SeqCst) > p)
    }
}

/// What a threaded run measured about itself.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct IssueStats {
    /// Issuing threads started (groups with steps).
    pub(super) threads: usize,
    /// Waits that found what they wait for not yet there — a record, alloc or use not
    /// yet issued by another thread, a host step not yet done, a stream not yet issued
    /// up to a host wait on it: the cross-thread hand-offs of the run. (Waits satisfied
    /// at the first look cost one atomic load and are not counted.)
    pub(super) waits: u64,
    /// Time spent in those waits, summed over the threads, in ns.
    pub(super) wait_ns: u64,
}

/// Runs the schedule's steps with one issuing thread per issue group (see the module
/// docs); `group_of` is the group of each stream, numbered `0..` ([`issue_groups`], or
/// each stream its own group for per-stream issue). `events` holds the plugin event of
/// each schedule event that is recorded (one per schedule event, never re-used within
/// the run).
#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    core: &Core,
    lanes: &mut [Lane],
    host_lane: &mut Lane,
    host_kernels: &HostKernels,
    snapshot: &mut Option<Buffers>,
    events: &[Option<EventHandle>],
    group_of: &[u32],
    stats: &mut IssueStats,
) -> Result<(), ExecError> {
    let plan = StepTables::new(core.graph, core.sched, group_of);
    let progress = Progress::new(lanes.len());
    let per_stream = plan.group_steps.len() == lanes.len();
    // Each group's lanes, in stream order (`plan.slot` indexes them).
    let mut group_lanes: Vec<Vec<&mut Lane>> =
        (0..plan.group_steps.len()).map(|_| Vec::new()).collect();
    for (s, lane) in lanes.iter_mut().enumerate() {
        group_lanes[plan.group_of[s] as usize].push(lane);
    }
    std::thread::scope(|sc| {
        // Joined by handle below: the scope alone waits for the closures, not for the
        // threads' exit (thread-local destructors), so `execute` could return while they
        // still run (found by fuzz/build_run under LeakSanitizer).
        let mut handles = Vec::new();
        for (g, mut glanes) in group_lanes.into_iter().enumerate() {
            if plan.group_steps[g].is_empty() {
                continue;
            }
            let (plan, progress) = (&plan, &progress);
            stats.threads += 1;
            // Per-stream issue names the stream (the group is that stream).
            let name = if per_stream { "s" } else { "g" };
            let spawned = std::thread::Builder::new()
                .name(format!("offload-issue-{name}{g}"))
                .spawn_scoped(sc, move || {
                    issue_group(core, plan, progress, g, &mut glanes, events)
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => progress.fail(
                    0,
                    ExecError::Schedule {
                        name: core.sched.name.clone(),
                        message: format!("cannot start the issuing thread of group {g}: {e}"),
                    },
                ),
            }
        }
        progress.go.store(true, SeqCst);
        progress.wake();
        run_host_steps(
            core,
            &plan,
            &progress,
            host_lane,
            host_kernels,
            snapshot,
            events,
        );
        let mut panicked = None;
        for h in handles {
            if let Err(p) = h.join() {
                panicked.get_or_insert(p);
            }
        }
        if let Some(p) = panicked {
            std::panic::resume_unwind(p);
        }
    });
    stats.waits = progress.waits.load(SeqCst);
    stats.wait_ns = progress.wait_ns.load(SeqCst);
    let errors = progress
        .errors
        .into_inner()
        .unwrap_or_else(|p| p.into_inner());
    match errors.into_iter().min_by_key(|(k, _)| *k) {
        Some((_, e)) => Err(e),
        None => Ok(()),
    }
}

/// The calling thread's part: host ops and host waits, in order.
fn run_host_steps(
    core: &Core,
    plan: &StepTables,
    progress: &Progress,
    host_lane: &mut Lane,
    host_kernels: &HostKernels,
    snapshot: &mut Option<Buffers>,
    events: &[Option<EventHandle>],
) {
    let _stop = StopOnPanic(progress);
    let sched = core.sched;
    let mut no_logs = Vec::new();
    for (done, &i) in plan.host_steps.iter().enumerate() {
        if progress.failed.load(SeqCst) {
            return;
        }
        let r = match sched.steps[i] {
            Step::Op(op) => run_host(core, host_kernels, host_lane, snapshot, op, i),
            Step::HostWait { stream } => {
                let s = stream.index();
                let need = plan.before(s, i);
                if progress
                    .wait_until(|| progress.issued[s].0.load(SeqCst) >= need)
                    .is_err()
                {
                    return;
                }
                timed_wait(core, host_lane, i, || {
                    host_wait(core, &mut no_logs, stream, HostWaitKind::Stream, Some(i))
                })
            }
            Step::HostWaitEvent { event } => match events[event.index()] {
                Some(ev) if plan.recorded_before[i] => {
                    for &j in plan.deps(i) {
                        if progress.wait_issued(plan, j as usize).is_err() {
                            return;
                        }
                    }
                    timed_wait(core, host_lane, i, || host_wait_event(core, ev, event, i))
                }
                _ => Err(host_wait_before_record(sched, event)),
            },
            Step::HostWaitDevice { device } => {
                let streams: Vec<usize> = (sched.streams.iter().enumerate())
                    .filter(|&(t, info)| info.device == device && core.streams[t].is_some())
                    .map(|(t, _)| t)
                    .collect();
                for &t in &streams {
                    let need = plan.before(t, i);
                    if progress
                        .wait_until(|| progress.issued[t].0.load(SeqCst) >= need)
                        .is_err()
                    {
                        return;
                    }
                }
                timed_wait(core, host_lane, i, || {
                    for &t in &streams {
                        let kind = HostWaitKind::Device(device);
                        host_wait(core, &mut no_logs, StreamId(t as u32), kind, Some(i))?;
                    }
                    Ok(())
                })
            }
            // Host steps run in schedule order on this thread, so the awaited host op
            // (issued before) has completed: counted as a host wait that took no time.
            Step::HostAwait { .. } => timed_wait(core, host_lane, i, || Ok(())),
            Step::Record { .. } | Step::Wait { .. } => Ok(()),
        };
        if let Err(e) = r {
            progress.fail(i, e);
            return;
        }
        progress.host_done.store(done as u32 + 1, SeqCst);
        progress.wake();
    }
}

/// The issuing thread of group `g`; `lanes` are the bookkeeping of the group's streams
/// in stream order.
fn issue_group(
    core: &Core,
    plan: &StepTables,
    progress: &Progress,
    g: usize,
    lanes: &mut [&mut Lane],
    events: &[Option<EventHandle>],
) {
    let _stop = StopOnPanic(progress);
    let sched = core.sched;
    if progress
        .wait_uncounted(|| progress.go.load(SeqCst))
        .is_err()
    {
        return;
    }
    // Host steps known done: skips the shared load while no host step came between.
    let mut host_seen = 0;
    for &k in &plan.group_steps[g] {
        if progress.failed.load(SeqCst) {
            return;
        }
        let hb = plan.host_before[k];
        if hb > host_seen {
            if progress
                .wait_until(|| progress.host_done.load(SeqCst) >= hb)
                .is_err()
            {
                return;
            }
            host_seen = hb;
        }
        for &j in plan.deps(k) {
            if progress.wait_issued(plan, j as usize).is_err() {
                return;
            }
        }
        let s = plan.lane_of[k] as usize;
        let lane = &mut *lanes[plan.slot[s] as usize];
        let r = match sched.steps[k] {
            Step::Op(op) => core.issue_device(lane, op, StreamId(s as u32), k),
            Step::Record { event, stream } => match events[event.index()] {
                Some(ev) => event_step(core, lane, EventStep::Record, ev, event, stream, k),
                None => Err(ExecError::Schedule {
                    name: sched.name.clone(),
                    message: format!("{event} has no plugin event"),
                }),
            },
            Step::Wait { event, stream } => match events[event.index()] {
                Some(ev) if plan.recorded_before[k] => {
                    event_step(core, lane, EventStep::Wait, ev, event, stream, k)
                }
                _ => Err(wait_before_record(sched, event, stream)),
            },
            Step::HostWait { .. }
            | Step::HostWaitEvent { .. }
            | Step::HostWaitDevice { .. }
            | Step::HostAwait { .. } => Ok(()),
        };
        if let Err(e) = r {
            progress.fail(k, e);
            return;
        }
        // Completions are not logged per op with threaded issue: keep no list.
        lane.in_flight.clear();
        if plan.publish[k] {
            progress.issued[s].0.store(plan.pos[k] + 1, SeqCst);
            progress.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::{schedule, EventId, ScheduleOptions};

    /// 64 independent saxpy regions on 4 streams (128 device steps each, no events),
    /// plus `links`: per `(from, to, n)`, `n` events recorded on `from` and waited on by
    /// `to` (appended after the ops: only counts matter to the grouping).
    fn sched_with(links: &[(u32, u32, u32)]) -> Schedule {
        let g = crate::lower::lower(&crate::model::saxpy_regions(64, 256)).unwrap();
        let mut s = schedule(&g, &ScheduleOptions::default());
        assert_eq!(s.events, 0);
        for &(from, to, n) in links {
            for _ in 0..n {
                let event = EventId(s.events);
                s.events += 1;
                s.steps.push(Step::Record {
                    event,
                    stream: StreamId(from),
                });
                s.steps.push(Step::Wait {
                    event,
                    stream: StreamId(to),
                });
            }
        }
        s
    }

    #[test]
    fn independent_streams_are_separate_groups() {
        assert_eq!(issue_groups(&sched_with(&[])), [0, 1, 2, 3]);
    }

    #[test]
    fn streams_linked_by_dense_events_share_a_group() {
        // s0 - s1 - s2 - s3 with 24 events per pair, either way (24 × 8 = 192 ≥ the 128
        // ops + 24 to 48 event steps of each stream).
        let s = sched_with(&[(0, 1, 24), (1, 2, 10), (2, 1, 14), (3, 2, 24)]);
        assert_eq!(issue_groups(&s), [0, 0, 0, 0]);
    }

    #[test]
    fn group_ids_follow_the_lowest_stream() {
        // s3 and s1 joined (events both ways add up); s0 and s2 alone.
        let s = sched_with(&[(3, 1, 12), (1, 3, 8)]);
        assert_eq!(issue_groups(&s), [0, 1, 2, 1]);
        // The same link one way only: the same ids.
        let s = sched_with(&[(1, 3, 20)]);
        assert_eq!(issue_groups(&s), [0, 1, 2, 1]);
    }

    #[test]
    fn a_sparse_link_stays_a_hand_off() {
        // Two events per ~130 steps: below one per GROUP_STEPS_PER_EVENT.
        let s = sched_with(&[(0, 2, 2)]);
        let busy = s.steps.len() / 4; // about the steps of s0 or s2
        assert!(busy > 2 * GROUP_STEPS_PER_EVENT as usize, "{busy}");
        assert_eq!(issue_groups(&s), [0, 1, 2, 3]);
    }

    #[test]
    fn a_wait_without_a_record_and_a_same_stream_wait_link_nothing() {
        let mut s = sched_with(&[(1, 1, 8)]);
        s.events += 4;
        for e in s.events - 4..s.events {
            s.steps.push(Step::Wait {
                event: EventId(e),
                stream: StreamId(0),
            });
        }
        assert_eq!(issue_groups(&s), [0, 1, 2, 3]);
    }
}
