//! Serial issue with host lanes: the calling thread issues every device step (ops,
//! records, event waits) in schedule order and hands each host op, with the host waits
//! that lead it ([`Schedule::wait_owners`]), to the worker thread of its host lane
//! ([`Schedule::op_lane`]); it blocks only at the host waits it owns itself (before a
//! device op: [`Step::HostAwait`] of a host op a device op depends on, and the per-op /
//! per-region policies' waits). Host tasks are deferred tasks, as in OpenMP: a lane runs
//! its items in order, and lanes order each other only through `HostAwait`.
//!
//! This is the schedule model the verifier proves ([`crate::verify`]: one clock per host
//! lane): a host op starts after what its lane knows (its earlier ops, the waits it ran)
//! and what the issuing thread knew when it handed the op over; a device op starts after
//! what its stream and the issuing thread know.
//!
//! A lane runs a host wait later than the issuing thread reaches it in the schedule: a
//! wait on a stream (`cuStreamSynchronize`) or a device then also waits for device work
//! issued after it (a conservative wait, never a missing one); a wait on an event waits
//! for exactly what the event's record captured, as every event is recorded once per run
//! with lanes (no pooled event is recorded again before the run ends).
//!
//! The issuing thread runs some host ops itself instead of handing them to their lane
//! (at its own await of the op, and in the schedule's tail), where it would otherwise
//! only wait for the lane; a lane is started when it is first handed an item. Which
//! ops, and why that keeps this model: `inline_plan.rs`.
//!
//! With [`HostOps::Inline`] no lane thread is started: every item is run by the issuing
//! thread right after the step that hands it, in schedule order, except the items of the
//! deferred lane, which queue in lane order and run when an await (the issuing thread's,
//! or another lane's item's) names one of their ops, or at the end (`Deferred`).
//!
//! Errors: the first failing step (by step index) among those attempted is returned; a
//! lane that fails skips the rest of its items but marks its host ops done, so that no
//! await hangs, and the issuing thread stops before its next step. A lane that panics
//! stops the others the same way and the panic propagates out of the run.

use super::inline_plan::{self, Inline};
use super::run_state::{Core, Lane};
use super::steps::{
    event_step, host_wait, host_wait_before_record, host_wait_event, run_host, timed_wait,
    wait_before_record, EventStep,
};
use super::{Buffers, ExecError, HostKernels, HostOps, HostWaitKind};
use crate::lower::OpId;
use crate::plugin::EventHandle;
use crate::schedule::{EventId, LaneId, Step, StreamId};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Condvar, Mutex};

/// What a lane is handed, in its order.
enum Item {
    /// Host wait step `step` (on a stream, a device, or an event with its plugin event).
    Wait {
        step: usize,
        event: Option<EventHandle>,
    },
    /// Host op `op`, step `step`.
    Run { op: OpId, step: usize },
}

/// State the issuing thread and the lanes share: which host ops are done, how many items
/// each lane has been handed and not finished, and failure. An await spins up to
/// the host plugin's default wait spin (zero on an oversubscribed machine:
/// `plugin::host::lane_spin`) on the op's flag before it sleeps on the condvar (`mark_done` takes the
/// lock and notifies only when someone sleeps): a lane's host op handed to another lane
/// is often done within microseconds, and waking a sleeping thread costs 5-50 µs on a
/// shared 2-core VM (`plugin::host::flag`).
struct Shared<'a> {
    done: Vec<AtomicBool>,
    /// Threads sleeping (or about to) on `cv`.
    sleepers: AtomicUsize,
    lock: Mutex<()>,
    cv: Condvar,
    queued: Vec<AtomicUsize>,
    failed: AtomicBool,
    /// The run's flag ([`Core::failed`]), set with `failed`.
    run_failed: &'a AtomicBool,
    errors: Mutex<Vec<(usize, ExecError)>>,
}

impl<'a> Shared<'a> {
    fn new(ops: usize, lanes: usize, run_failed: &'a AtomicBool) -> Shared<'a> {
        Shared {
            done: (0..ops).map(|_| AtomicBool::new(false)).collect(),
            sleepers: AtomicUsize::new(0),
            lock: Mutex::new(()),
            cv: Condvar::new(),
            queued: (0..lanes).map(|_| AtomicUsize::new(0)).collect(),
            failed: AtomicBool::new(false),
            run_failed,
            errors: Mutex::new(Vec::new()),
        }
    }

    /// Wakes every sleeper (always: a failure must reach every waiter).
    fn wake_all(&self) {
        let _g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        self.cv.notify_all();
    }

    fn fail(&self, step: usize, e: ExecError) {
        self.errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((step, e));
        self.failed.store(true, SeqCst);
        self.run_failed.store(true, SeqCst);
        self.wake_all();
    }

    fn mark_done(&self, op: OpId) {
        if let Some(x) = self.done.get(op.index()) {
            x.store(true, SeqCst);
        }
        // A sleeper increments `sleepers` before its last check under the lock (both
        // SeqCst), so either it sees the store above or this load sees it.
        if self.sleepers.load(SeqCst) > 0 {
            self.wake_all();
        }
    }

    /// `Some(true)` once host op `op` is done, `Some(false)` once any thread failed.
    fn check(&self, op: OpId) -> Option<bool> {
        if self.done.get(op.index()).is_none_or(|x| x.load(SeqCst)) {
            return Some(true);
        }
        self.failed.load(SeqCst).then_some(false)
    }

    /// Blocks until host op `op` is done; `false` once any thread failed.
    fn await_op(&self, op: OpId) -> bool {
        let got = std::cell::Cell::new(None);
        crate::plugin::host::flag::spin_then_block(
            crate::plugin::host::lane_spin(),
            || {
                got.set(self.check(op));
                got.get().is_some()
            },
            || {
                let mut g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
                self.sleepers.fetch_add(1, SeqCst);
                got.set(loop {
                    if let Some(r) = self.check(op) {
                        break Some(r);
                    }
                    g = self.cv.wait(g).unwrap_or_else(|p| p.into_inner());
                });
                self.sleepers.fetch_sub(1, SeqCst);
            },
        );
        got.get() == Some(true)
    }
}

/// Marks the run failed if the lane holding it unwinds, so nothing waits forever.
struct StopOnPanic<'a>(&'a Shared<'a>);

impl Drop for StopOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.failed.store(true, SeqCst);
            self.0.wake_all();
        }
    }
}

/// Runs every step of the schedule with host lanes (see the module docs). `events`:
/// the plugin event of every recorded schedule event, for the whole run. `lanes`: the
/// streams' bookkeeping; `host_lane`: where the host ops' times, counts and host waits
/// are gathered.
pub(super) fn run(
    core: &Core,
    lanes: &mut [Lane],
    host_lane: &mut Lane,
    (host_kernels, host_ops): (&HostKernels, HostOps),
    snapshot: &mut Option<Buffers>,
    events: &[Option<EventHandle>],
) -> Result<(), ExecError> {
    let sched = core.sched;
    let n_lanes = sched.host_lanes.max(1) as usize;
    let owners = sched.wait_owners();
    let plan = inline_plan::plan(core.graph, sched, &owners);
    // `HostOps::Inline`: every item is held, then run here at once or, for the deferred
    // lane, queued until needed (`Deferred`).
    let (all_inline, mut deferred) = match host_ops {
        HostOps::Lanes => (false, Deferred::new(None)),
        HostOps::Inline { deferred_lane } => (
            true,
            Deferred::new(deferred_lane.map(|l| (l as usize).min(n_lanes - 1))),
        ),
    };
    let shared = Shared::new(core.graph.ops.len(), n_lanes, &core.failed);
    let mut recorded = vec![false; sched.events as usize];
    std::thread::scope(|sc| {
        // A panic of this thread (an inline host op's) stops the lanes too.
        let _stop = StopOnPanic(&shared);
        // Each lane's channel and thread, started when first handed an item.
        let mut senders: Vec<Option<crossbeam_channel::Sender<Item>>> = vec![None; n_lanes];
        let mut handles = Vec::with_capacity(n_lanes);
        let mut send = |lane: usize, item: Item| {
            let lane = lane.min(n_lanes - 1);
            if senders[lane].is_none() {
                let (tx, rx) = crossbeam_channel::unbounded::<Item>();
                let shared = &shared;
                let spawned = std::thread::Builder::new()
                    .name(format!("offload-host-{}", LaneId(lane as u32)))
                    .spawn_scoped(sc, move || {
                        lane_worker(core, host_kernels, shared, lane, rx)
                    });
                match spawned {
                    Ok(h) => {
                        handles.push(h);
                        senders[lane] = Some(tx);
                    }
                    Err(e) => {
                        let (step, op) = match item {
                            Item::Run { op, step } => (step, Some(op)),
                            Item::Wait { step, .. } => (step, None),
                        };
                        shared.fail(
                            step,
                            ExecError::Schedule {
                                name: sched.name.clone(),
                                message: format!("cannot start host lane h{lane}: {e}"),
                            },
                        );
                        if let Some(op) = op {
                            shared.mark_done(op);
                        }
                        return;
                    }
                }
            }
            if let Some(tx) = &senders[lane] {
                shared.queued[lane].fetch_add(1, SeqCst);
                // A lane that stopped (it failed) has marked the run failed.
                let _ = tx.send(item);
            }
        };
        // The op run at its await (if any), the lanes whose tail items this thread runs,
        // and the items held back for either.
        let mut inline: Option<Inline> = None;
        let mut tail_lanes = vec![false; n_lanes];
        let mut held: Vec<Item> = Vec::new();
        let mut hand = |held: &mut Vec<Item>, hold: bool, lane: usize, item: Item| match hold {
            true => held.push(item),
            false => send(lane, item),
        };
        let mut no_logs = Vec::new();
        for (i, step) in sched.steps.iter().enumerate() {
            if shared.failed.load(SeqCst) {
                break;
            }
            // Nothing handed to the lane is queued or running (see inline_plan.rs).
            let idle = |l: usize| shared.queued[l].load(SeqCst) == 0;
            if let Some(c) = plan.candidates[i].filter(|c| idle(c.lane)) {
                inline = Some(c);
            }
            if i == plan.tail_start {
                for (l, t) in tail_lanes.iter_mut().enumerate() {
                    *t = plan.tail_lanes[l] && idle(l);
                }
            }
            let held_on = |l: usize| {
                let l = l.min(n_lanes - 1);
                all_inline
                    || inline.is_some_and(|c| i <= c.op_step && c.lane == l)
                    || (i >= plan.tail_start && tail_lanes[l])
            };
            let owner = owners[i].map(|l| l.index());
            let r = match (*step, owner) {
                (Step::Op(op), _) => match sched.op_stream[op.index()] {
                    Some(s) if !core.graph.op(op).kind.is_host() => {
                        core.issue_device(&mut lanes[s.index()], op, s, i)
                    }
                    _ => {
                        let lane = sched.op_lane[op.index()] as usize;
                        hand(&mut held, held_on(lane), lane, Item::Run { op, step: i });
                        Ok(())
                    }
                },
                (Step::Record { event, stream }, _) => match events[event.index()] {
                    Some(ev) => {
                        recorded[event.index()] = true;
                        let lane = &mut lanes[stream.index()];
                        event_step(core, lane, EventStep::Record, ev, event, stream, i)
                    }
                    None => Err(no_event(core, event)),
                },
                (Step::Wait { event, stream }, _) => match events[event.index()] {
                    Some(ev) if recorded[event.index()] => {
                        let lane = &mut lanes[stream.index()];
                        event_step(core, lane, EventStep::Wait, ev, event, stream, i)
                    }
                    _ => Err(wait_before_record(sched, event, stream)),
                },
                (Step::HostWaitEvent { event }, _) if !recorded[event.index()] => {
                    Err(host_wait_before_record(sched, event))
                }
                (Step::HostWaitEvent { event }, Some(l)) => {
                    let event = events[event.index()];
                    hand(&mut held, held_on(l), l, Item::Wait { step: i, event });
                    Ok(())
                }
                (Step::HostWait { .. } | Step::HostWaitDevice { .. }, Some(l))
                | (Step::HostAwait { .. }, Some(l)) => {
                    let item = Item::Wait {
                        step: i,
                        event: None,
                    };
                    hand(&mut held, held_on(l), l, item);
                    Ok(())
                }
                (Step::HostAwait { op }, None) => {
                    if all_inline {
                        let ctx = (core, host_kernels, &shared);
                        deferred.run_until(ctx, host_lane, snapshot, &mut no_logs, op);
                    }
                    if inline.is_some_and(|c| c.await_step == i) {
                        inline = None;
                        run_held(
                            (core, host_kernels, &shared),
                            host_lane,
                            snapshot,
                            &mut no_logs,
                            &mut held,
                        );
                    }
                    let mut ok = true;
                    let _ = timed_wait(core, host_lane, i, || {
                        ok = shared.await_op(op);
                        Ok(())
                    });
                    if !ok {
                        break;
                    }
                    Ok(())
                }
                (Step::HostWaitEvent { event }, None) => match events[event.index()] {
                    Some(ev) => {
                        timed_wait(core, host_lane, i, || host_wait_event(core, ev, event, i))
                    }
                    None => Err(no_event(core, event)),
                },
                (Step::HostWait { .. } | Step::HostWaitDevice { .. }, None) => {
                    timed_wait(core, host_lane, i, || {
                        stream_waits(core, &mut no_logs, *step, i)
                    })
                }
            };
            if all_inline {
                let ctx = (core, host_kernels, &shared);
                for item in held.drain(..) {
                    deferred.take(ctx, (host_lane, snapshot, &mut no_logs), &owners, item);
                }
            }
            if let Err(e) = r {
                shared.fail(i, e);
                break;
            }
        }
        if all_inline {
            let ctx = (core, host_kernels, &shared);
            deferred.run_all(ctx, host_lane, snapshot, &mut no_logs);
        }
        // The tail lanes' items; after a failure, items held for an await or the tail
        // are only marked done, so that no lane waits for them.
        run_held(
            (core, host_kernels, &shared),
            host_lane,
            snapshot,
            &mut no_logs,
            &mut held,
        );
        drop(senders);
        let mut panicked = None;
        for h in handles {
            match h.join() {
                Ok(mut done) => {
                    host_lane.counts.add(&done.lane.counts);
                    host_lane.waits.append(&mut done.lane.waits);
                    for (t, step) in done.lane.times.into_iter().zip(done.lane.steps) {
                        host_lane.push_time(step, t);
                    }
                    if done.snapshot.is_some() {
                        *snapshot = done.snapshot;
                    }
                }
                Err(p) => {
                    panicked.get_or_insert(p);
                }
            }
        }
        if let Some(p) = panicked {
            std::panic::resume_unwind(p);
        }
    });
    host_lane.waits.sort_by_key(|w| w.step);
    let errors = shared
        .errors
        .into_inner()
        .unwrap_or_else(|p| p.into_inner());
    match errors.into_iter().min_by_key(|(k, _)| *k) {
        Some((_, e)) => Err(e),
        None => Ok(()),
    }
}

fn no_event(core: &Core, event: EventId) -> ExecError {
    ExecError::Schedule {
        name: core.sched.name.clone(),
        message: format!("{event} has no plugin event"),
    }
}

/// A host wait on a stream, or on every stream of a device that has a plugin stream
/// (`step` is one of those), from the calling thread; `i` is its index.
fn stream_waits(
    core: &Core,
    no_logs: &mut Vec<OpId>,
    step: Step,
    i: usize,
) -> Result<(), ExecError> {
    match step {
        Step::HostWait { stream } => {
            host_wait(core, no_logs, stream, HostWaitKind::Stream, Some(i))
        }
        Step::HostWaitDevice { device } => {
            for (t, info) in core.sched.streams.iter().enumerate() {
                if info.device == device && core.streams[t].is_some() {
                    let kind = HostWaitKind::Device(device);
                    host_wait(core, no_logs, StreamId(t as u32), kind, Some(i))?;
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// What a lane gives back: its bookkeeping, and the snapshot if it ran `End`.
struct Done {
    lane: Lane,
    snapshot: Option<Buffers>,
}

/// One host lane (index `l`): runs its items in order until the issuing thread drops
/// the channel.
fn lane_worker(
    core: &Core,
    host_kernels: &HostKernels,
    shared: &Shared,
    l: usize,
    rx: crossbeam_channel::Receiver<Item>,
) -> Done {
    let _stop = StopOnPanic(shared);
    let mut done = Done {
        lane: Lane::default(),
        snapshot: None,
    };
    let mut no_logs = Vec::new();
    for item in rx {
        let (lane, snapshot) = (&mut done.lane, &mut done.snapshot);
        run_item(
            core,
            host_kernels,
            shared,
            lane,
            snapshot,
            &mut no_logs,
            item,
        );
        shared.queued[l].fetch_sub(1, SeqCst);
    }
    done
}

/// [`HostOps::Inline`]'s items of the deferred lane, queued in lane order until a step
/// needs one of its ops.
struct Deferred {
    lane: Option<usize>,
    queue: VecDeque<Item>,
}

/// What running an item on the issuing thread reads.
type Ctx<'c, 'a> = (&'c Core<'a>, &'c HostKernels, &'c Shared<'c>);

impl Deferred {
    fn new(lane: Option<usize>) -> Deferred {
        Deferred {
            lane,
            queue: VecDeque::new(),
        }
    }

    /// The item handed at its step: queued if it is the deferred lane's, else run now,
    /// after the deferred ops it awaits.
    fn take(
        &mut self,
        ctx: Ctx<'_, '_>,
        (lane, snapshot, no_logs): (&mut Lane, &mut Option<Buffers>, &mut Vec<OpId>),
        owners: &[Option<LaneId>],
        item: Item,
    ) {
        let sched = ctx.0.sched;
        let n_lanes = sched.host_lanes.max(1) as usize;
        let item_lane = match item {
            Item::Run { op, .. } => sched.op_lane.get(op.index()).copied().unwrap_or(0) as usize,
            Item::Wait { step, .. } => owners[step].map_or(0, |l| l.index()),
        }
        .min(n_lanes - 1);
        if Some(item_lane) == self.lane {
            self.queue.push_back(item);
            return;
        }
        if let Item::Wait { step, .. } = item {
            if let Step::HostAwait { op } = sched.steps[step] {
                self.run_until(ctx, lane, snapshot, no_logs, op);
            }
        }
        let (core, host_kernels, shared) = ctx;
        run_item(core, host_kernels, shared, lane, snapshot, no_logs, item);
    }

    /// Runs the queued items up to and including host op `op`'s, if `op` is the
    /// deferred lane's and not done (it is then queued: every await names an earlier
    /// step).
    fn run_until(
        &mut self,
        ctx: Ctx<'_, '_>,
        lane: &mut Lane,
        snapshot: &mut Option<Buffers>,
        no_logs: &mut Vec<OpId>,
        op: OpId,
    ) {
        let (core, host_kernels, shared) = ctx;
        let sched = core.sched;
        let n_lanes = sched.host_lanes.max(1) as usize;
        let op_lane = sched.op_lane.get(op.index()).copied().unwrap_or(0) as usize;
        if self.lane != Some(op_lane.min(n_lanes - 1)) || shared.check(op) == Some(true) {
            return;
        }
        while let Some(item) = self.queue.pop_front() {
            let hit = matches!(item, Item::Run { op: o, .. } if o == op);
            run_item(core, host_kernels, shared, lane, snapshot, no_logs, item);
            if hit {
                return;
            }
        }
    }

    /// Runs every queued item (the end of the run; after a failure they are only
    /// marked done).
    fn run_all(
        &mut self,
        (core, host_kernels, shared): Ctx<'_, '_>,
        lane: &mut Lane,
        snapshot: &mut Option<Buffers>,
        no_logs: &mut Vec<OpId>,
    ) {
        for item in self.queue.drain(..) {
            run_item(core, host_kernels, shared, lane, snapshot, no_logs, item);
        }
    }
}

/// Runs the items `held` for the issuing thread (an await's inline op, the tail lanes'
/// items) in order, emptying it ([`run_item`] each).
fn run_held(
    (core, host_kernels, shared): (&Core, &HostKernels, &Shared),
    lane: &mut Lane,
    snapshot: &mut Option<Buffers>,
    no_logs: &mut Vec<OpId>,
    held: &mut Vec<Item>,
) {
    for item in held.drain(..) {
        run_item(core, host_kernels, shared, lane, snapshot, no_logs, item);
    }
}

/// Runs one item on this thread (a lane's, or the issuing thread's for an inline host
/// op), counting its host op time or host wait in `lane`. Nothing runs once the run has
/// failed, but a host op is marked done either way, so that no await hangs; a failure is
/// recorded in `shared`.
fn run_item(
    core: &Core,
    host_kernels: &HostKernels,
    shared: &Shared,
    lane: &mut Lane,
    snapshot: &mut Option<Buffers>,
    no_logs: &mut Vec<OpId>,
    item: Item,
) {
    let failed = shared.failed.load(SeqCst);
    match item {
        Item::Run { op, step } => {
            if !failed {
                if let Err(e) = run_host(core, host_kernels, lane, snapshot, op, step) {
                    shared.fail(step, e);
                }
            }
            shared.mark_done(op);
        }
        Item::Wait { .. } if failed => {}
        Item::Wait { step, event } => {
            let r = match core.sched.steps[step] {
                Step::HostAwait { op } => {
                    // Counted as a host wait (timed) whether or not the run failed
                    // meanwhile: a failed run's report is not read.
                    timed_wait(core, lane, step, || {
                        shared.await_op(op);
                        Ok(())
                    })
                }
                Step::HostWaitEvent { event: id } => match event {
                    Some(ev) => {
                        timed_wait(core, lane, step, || host_wait_event(core, ev, id, step))
                    }
                    None => Err(no_event(core, id)),
                },
                s => timed_wait(core, lane, step, || stream_waits(core, no_logs, s, step)),
            };
            if let Err(e) = r {
                shared.fail(step, e);
            }
        }
    }
}
