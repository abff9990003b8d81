//! Per-stream issue ([`super::IssueMode::PerStream`]): one host thread per logical
//! stream issues that stream's steps (its device ops, records and waits) in schedule
//! order, while the calling thread runs the host steps (host ops, host waits).
//!
//! Driver calls on different streams then overlap on the host, which matters when the
//! per-call cost (a few µs for a CUDA copy or launch) is what limits small regions.
//!
//! Issue order is kept where it carries meaning — CUDA's `cuStreamWaitEvent` waits for
//! the most recent record *issued before it*, and an op can only use an address once
//! its alloc has returned it — by these waits between threads, all on issue progress
//! (nothing here waits for device work):
//! - a `Wait` step waits until the step that last recorded its event (before it in the
//!   schedule) has been issued;
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
//!   before it, then synchronizes `s` from the calling thread.
//!
//! Each of these waits only on an earlier step, so every step is eventually issued (no
//! deadlock). On the first error every thread stops issuing before its next step (and
//! the calling thread runs no further host step); the error of the earliest failing step
//! among those attempted is returned. A thread that panics (a plugin call that panics)
//! stops the others the same way, and the panic then propagates out of `execute`, as
//! with serial issue.

use super::core::{Core, Lane};
use super::{
    event_step, host_wait, run_host, wait_before_record, Buffers, EventStep, ExecError,
    HostKernels, HostWaitKind,
};
use crate::lower::{AllocId, KernelArg, OpKind};
use crate::plugin::EventHandle;
use crate::schedule::{Schedule, Step, StreamId};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering::SeqCst};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// `lane_of` of a host step.
const HOST: u32 = u32::MAX;

/// What each thread needs to know about the steps, computed once per run.
struct Plan {
    /// Per stream, its steps' indices in schedule order.
    lane_steps: Vec<Vec<usize>>,
    /// Per step, its stream (or [`HOST`]) and its position in that stream's list.
    lane_of: Vec<u32>,
    pos: Vec<u32>,
    /// Per step, how many host steps come before it.
    host_before: Vec<u32>,
    /// Host steps in order.
    host_steps: Vec<usize>,
    /// Per step, the earlier steps of other streams it must wait to be issued:
    /// `deps[dep_off[k]..dep_off[k + 1]]`.
    dep_off: Vec<u32>,
    deps: Vec<u32>,
    /// Per step: for a `Wait`, whether an earlier record exists.
    recorded_before: Vec<bool>,
    /// Per step: whether another thread may wait for it to be issued (a dependency of
    /// another stream's step, or the last step of its stream before a host wait on it).
    /// Only these publish their stream's progress: the rest cost no shared write.
    publish: Vec<bool>,
}

impl Plan {
    fn new(core: &Core) -> Plan {
        let (graph, sched): (_, &Schedule) = (core.graph, core.sched);
        let n = sched.steps.len();
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
            // A use waits for its alloc's issue; a free also for the last earlier use on
            // every other stream (an op on an empty section has no data dependency, so
            // nothing else orders it before the free, and its address must still be live).
            let mut use_alloc = |a: AllocId, free: bool, deps: &mut Vec<u32>| {
                if let Some(j) = alloc_step.get(a.index()).copied().flatten() {
                    if lane_of[j] != s.0 {
                        deps.push(j as u32);
                    }
                }
                let Some(users) = alloc_users.get_mut(a.index()) else {
                    return; // not an alloc of this graph: the issue reports it
                };
                if free {
                    deps.extend(users.iter().filter(|u| u.0 != s.0).map(|u| u.1));
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
                        if lane_of[j] != s.0 {
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
        Plan {
            lane_steps,
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

    fn deps(&self, k: usize) -> &[u32] {
        &self.deps[self.dep_off[k] as usize..self.dep_off[k + 1] as usize]
    }

    /// How many of stream `s`'s steps come before step `i`.
    fn before(&self, s: usize, i: usize) -> u32 {
        self.lane_steps[s].partition_point(|&k| k < i) as u32
    }
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
    fn wait_until(&self, ready: impl Fn() -> bool) -> Result<(), Stopped> {
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

    fn wait_issued(&self, plan: &Plan, step: usize) -> Result<(), Stopped> {
        let (s, p) = (plan.lane_of[step] as usize, plan.pos[step]);
        self.wait_until(|| self.issued[s].0.load(SeqCst) > p)
    }
}

/// Runs the schedule's steps with one issuing thread per stream (see the module docs).
/// `events` holds the plugin event of each schedule event that is recorded (one per
/// schedule event, never re-used within the run).
pub(super) fn run(
    core: &Core,
    lanes: &mut [Lane],
    host_lane: &mut Lane,
    host_kernels: &HostKernels,
    snapshot: &mut Option<Buffers>,
    events: &[Option<EventHandle>],
) -> Result<(), ExecError> {
    let plan = Plan::new(core);
    let progress = Progress::new(lanes.len());
    std::thread::scope(|sc| {
        for (s, lane) in lanes.iter_mut().enumerate() {
            if plan.lane_steps[s].is_empty() {
                continue;
            }
            let (plan, progress) = (&plan, &progress);
            std::thread::Builder::new()
                .name(format!("offload-issue-s{s}"))
                .spawn_scoped(sc, move || {
                    issue_stream(core, plan, progress, s, lane, events)
                })
                .map_err(|e| {
                    progress.fail(
                        0,
                        ExecError::Schedule {
                            name: core.sched.name.clone(),
                            message: format!("cannot start the issuing thread of s{s}: {e}"),
                        },
                    )
                })
                .ok();
        }
        progress.go.store(true, SeqCst);
        progress.wake();
        run_host_steps(core, &plan, &progress, host_lane, host_kernels, snapshot);
    });
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
    plan: &Plan,
    progress: &Progress,
    host_lane: &mut Lane,
    host_kernels: &HostKernels,
    snapshot: &mut Option<Buffers>,
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
                host_lane.counts.host_waits += 1;
                host_wait(core, &mut no_logs, stream, HostWaitKind::Stream, Some(i))
            }
            Step::HostWaitDevice { device } => {
                let mut r = Ok(());
                for (t, info) in sched.streams.iter().enumerate() {
                    if info.device != device {
                        continue;
                    }
                    let need = plan.before(t, i);
                    if progress
                        .wait_until(|| progress.issued[t].0.load(SeqCst) >= need)
                        .is_err()
                    {
                        return;
                    }
                    let kind = HostWaitKind::Device(device);
                    r = host_wait(core, &mut no_logs, StreamId(t as u32), kind, Some(i));
                    if r.is_err() {
                        break;
                    }
                }
                if r.is_ok() {
                    host_lane.counts.host_waits += 1;
                }
                r
            }
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

/// The issuing thread of stream `s`.
fn issue_stream(
    core: &Core,
    plan: &Plan,
    progress: &Progress,
    s: usize,
    lane: &mut Lane,
    events: &[Option<EventHandle>],
) {
    let _stop = StopOnPanic(progress);
    let sched = core.sched;
    if progress.wait_until(|| progress.go.load(SeqCst)).is_err() {
        return;
    }
    for (p, &k) in plan.lane_steps[s].iter().enumerate() {
        if progress.failed.load(SeqCst) {
            return;
        }
        let hb = plan.host_before[k];
        if progress
            .wait_until(|| progress.host_done.load(SeqCst) >= hb)
            .is_err()
        {
            return;
        }
        for &j in plan.deps(k) {
            if progress.wait_issued(plan, j as usize).is_err() {
                return;
            }
        }
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
            Step::HostWait { .. } | Step::HostWaitDevice { .. } => Ok(()),
        };
        if let Err(e) = r {
            progress.fail(k, e);
            return;
        }
        // Completions are not logged per op with per-stream issue: keep no list.
        lane.in_flight.clear();
        if plan.publish[k] {
            progress.issued[s].0.store(p as u32 + 1, SeqCst);
            progress.wake();
        }
    }
}
