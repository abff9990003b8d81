//! The executor: runs a [`Schedule`] of an [`OpGraph`] on a [`Plugin`].
//!
//! [`execute`] issues `sched.steps` in order (from one host thread, or with
//! [`IssueMode::PerGroup`] / [`IssueMode::PerStream`] from one thread per group of
//! streams joined by events / per stream: see `exec/threads.rs`):
//! - `Step::Op` of a device op → the plugin call on the op's stream (`alloc`, `submit`,
//!   `launch`, `retrieve`, `free`); of a host op → run on the host: a `HostTask` with a
//!   kernel runs it on the host buffers, `Taskwait` does nothing by itself (the
//!   schedule's host waits before it do the waiting), `End` takes the final snapshot of
//!   the host buffers — so a missing host wait before `End` shows as a wrong answer.
//! - `Step::Record` / `Step::Wait` → `record_event` / `wait_event`; schedule events map
//!   to plugin events taken from a per-device pool and returned after their last use.
//! - `Step::HostWait` → `synchronize` on that stream; `Step::HostWaitEvent` →
//!   `synchronize_event` on the event's plugin event (which goes back to the pool only
//!   after this, its last use, so no later record can replace the one waited for);
//!   `Step::HostWaitDevice` → `synchronize` on every stream of the device.
//!
//! At the end every stream is synchronized, leftover device memory freed, events and host
//! memory released. On any error, issuing stops, what is in flight is synchronized, every
//! device allocation is freed, and the error names the op and region; nothing leaks.
//!
//! Also here: the reference interpreter ([`reference::reference`]), the result check
//! ([`check::check`]), the Chrome trace writer ([`trace::write_chrome_trace`]) and the
//! overlap figures of a run ([`overlap::overlap`]: span, busy time per stream, critical
//! path).
//!
//! Layout: this file holds the entry points and the serial issue loop with setup and
//! teardown; `steps.rs` the step actions both issue paths share (events, host waits,
//! host tasks, the final snapshot); `threads.rs` threaded issue (with `step_tables.rs`,
//! what each issuing thread knows about the steps); `validate.rs` the fit of
//! a schedule to the plugin (the schedule's structure is the verifier's:
//! [`crate::verify::check_structure`]); `run_state.rs` the state one run shares between
//! threads.

pub mod buffers;
pub mod check;
mod hostmem;
mod issue;
pub mod overlap;
pub mod reference;
mod report;
mod run_state;
mod step_tables;
mod steps;
mod threads;
pub mod trace;
mod validate;

pub use buffers::{BufferData, Buffers};
pub use check::{check, check_tol, CheckError};
use issue::{auto_per_group, groups_with_steps};
pub use issue::{IssueMode, AUTO_DEVICE_STEPS_PER_HOST_STEP, GROUP_STEPS_PER_EVENT};
pub use overlap::{overlap, Overlap};
pub use reference::reference;
pub use report::{Counts, OpTime, Report};

use crate::lower::{AllocId, OpGraph, OpId, OpKind};
use crate::model::{ElemType, KernelSig};
use crate::plugin::{EventHandle, KernelHandle, Plugin, PluginError};
use crate::runtime::ffi::{HostKernel, KernelError, KernelLibrary};
use crate::schedule::{EventId, Schedule, Step, StreamId};
use run_state::{us_since, Core, Lane, Live, LOG};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;
use steps::{
    event_step, host_wait, host_wait_before_record, host_wait_event, read_buffers, run_host,
    take_event, wait_before_record, EventStep,
};
use thiserror::Error;

/// Options of [`execute`] and [`reference()`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExecOptions {
    /// Folder relative user-library paths of host-task kernels are resolved against
    /// (the graph file's folder); the current directory when `None`.
    pub kernel_dir: Option<PathBuf>,
    /// How steps are issued (ignored by [`reference()`]).
    pub issue: IssueMode,
}

/// What went wrong running a schedule.
#[derive(Debug, Error)]
pub enum ExecError {
    /// The schedule does not fit the graph or the plugin (op missing or repeated, stream
    /// or event out of range, a device op without a stream, a device the plugin lacks).
    #[error("schedule \"{name}\" cannot run: {message}")]
    Schedule { name: String, message: String },
    /// An op the graph describes inconsistently (section outside its allocation, unknown
    /// kernel, device memory used before its alloc).
    #[error("op {op} ({what}) in region \"{region}\": {message}")]
    Invalid {
        op: OpId,
        what: String,
        region: String,
        message: String,
    },
    /// A plugin call for an op failed.
    #[error("op {op} ({what}) in region \"{region}\": {source}")]
    Op {
        op: OpId,
        what: String,
        region: String,
        #[source]
        source: PluginError,
    },
    /// A host task's kernel could not be loaded or called.
    #[error("op {op} ({what}) in region \"{region}\": {source}")]
    HostKernel {
        op: OpId,
        what: String,
        region: String,
        #[source]
        source: KernelError,
    },
    /// A sync step, setup or teardown call failed (`what` says which:
    /// `record e3 on s1`, `host wait s0`, `final synchronize s2`, `alloc host x`).
    #[error("{what}: {source}")]
    Step {
        what: String,
        #[source]
        source: PluginError,
    },
}

/// Runs `sched` on `plugin`. See the module docs for what each step does.
///
/// Errors: [`ExecError::Schedule`] before anything is issued if the schedule does not
/// fit the plugin (a device it lacks: checked first) or is malformed for the graph
/// ([`crate::verify::check_structure`]: the first violation, and how many more);
/// otherwise the first failing op or step. Either way every device allocation, event and
/// host allocation made is released before returning.
///
/// Complexity: `O(V + S)` plugin calls for `V` ops and `S` steps, plus the work itself.
pub fn execute(
    graph: &OpGraph,
    sched: &Schedule,
    plugin: &dyn Plugin,
    opts: &ExecOptions,
) -> Result<Report, ExecError> {
    validate::fits_plugin(sched, plugin)?;
    validate::structure(graph, sched)?;
    execute_checked(graph, sched, plugin, opts)
}

/// [`execute`] for a schedule the verifier has proven (a [`crate::Plan`]'s): without the
/// structural check ([`crate::verify::check_structure`], which [`crate::verify::verify`]
/// ran against this `graph`); only the fit to `plugin` is checked. Given a malformed
/// schedule it may panic on an index out of range.
pub(crate) fn execute_verified(
    graph: &OpGraph,
    sched: &Schedule,
    plugin: &dyn Plugin,
    opts: &ExecOptions,
) -> Result<Report, ExecError> {
    validate::fits_plugin(sched, plugin)?;
    execute_checked(graph, sched, plugin, opts)
}

/// Issues a schedule already checked to be well-formed and to fit `plugin`.
fn execute_checked(
    graph: &OpGraph,
    sched: &Schedule,
    plugin: &dyn Plugin,
    opts: &ExecOptions,
) -> Result<Report, ExecError> {
    let mut ex = Exec::new(graph, sched, plugin, opts);
    let run = ex.setup().and_then(|()| ex.run_steps());
    if let Err(e) = &run {
        tracing::debug!(target: LOG, error = %e, "stopping after error; cleaning up");
    }
    let down = ex.teardown(run.is_err());
    run?;
    down?;
    Ok(ex.report())
}

/// The signature of kernel `name`: the graph's user declarations first, then built-ins.
pub(crate) fn kernel_sig(graph: &OpGraph, name: &str) -> Option<KernelSig> {
    crate::model::find_kernel(&graph.kernels, name).cloned()
}

/// `sig` with its relative user-kernel paths (`library`, `cuda`) joined to `dir`, so a
/// plugin loads them from the graph file's folder whatever its own options say; absolute
/// paths, the empty library (the main program) and `dir == None` leave them as written.
fn resolve_kernel_paths(mut sig: KernelSig, dir: Option<&std::path::Path>) -> KernelSig {
    let Some(dir) = dir else { return sig };
    if let crate::model::KernelSource::User { library, cuda, .. } = &mut sig.source {
        for path in [library, cuda].into_iter().flatten() {
            if !path.is_empty() && std::path::Path::new(path.as_str()).is_relative() {
                *path = dir.join(path.as_str()).to_string_lossy().into_owned();
            }
        }
    }
    sig
}

/// Which host-wait step a `synchronize` serves (named in its error).
#[derive(Clone, Copy)]
enum HostWaitKind {
    Stream,
    Device(u32),
}

type HostKernels = BTreeMap<(String, ElemType), HostKernel>;

struct Exec<'a> {
    core: Core<'a>,
    /// Per logical stream, its issue bookkeeping.
    lanes: Vec<Lane>,
    /// Host ops and host-wait counts.
    host_lane: Lane,
    /// How this run issues ([`IssueMode::Auto`] resolved).
    issue: IssueMode,
    /// With threaded issue, the issue group of each stream.
    groups: Option<Vec<u32>>,
    /// What [`Report::stream_groups`] says.
    stream_groups: usize,
    stats: threads::IssueStats,
    /// Plugin event of each schedule event, with the device it was created for.
    events: Vec<Option<(EventHandle, u32)>>,
    last_use: Vec<Option<usize>>,
    /// Free plugin events per device (index = device).
    event_pool: Vec<Vec<EventHandle>>,
    created_events: Vec<EventHandle>,
    kernels: BTreeMap<(u32, String, ElemType), KernelHandle>,
    /// `ExecOptions::kernel_dir`: user-kernel paths of device kernels are resolved
    /// against it before they reach the plugin.
    kernel_dir: Option<PathBuf>,
    host_lib: KernelLibrary,
    host_kernels: HostKernels,
    snapshot: Option<Buffers>,
    wall_us: f64,
}

impl<'a> Exec<'a> {
    fn new(
        graph: &'a OpGraph,
        sched: &'a Schedule,
        plugin: &'a dyn Plugin,
        opts: &ExecOptions,
    ) -> Exec<'a> {
        let mut last_use = vec![None; sched.events as usize];
        for (i, s) in sched.steps.iter().enumerate() {
            if let Step::Record { event, .. }
            | Step::Wait { event, .. }
            | Step::HostWaitEvent { event } = s
            {
                last_use[event.index()] = Some(i);
            }
        }
        let used = sched.used_streams();
        let (issue, groups, stream_groups) = match opts.issue {
            IssueMode::Serial => (IssueMode::Serial, None, used),
            IssueMode::PerStream => (
                IssueMode::PerStream,
                Some((0..sched.streams.len() as u32).collect()),
                used,
            ),
            IssueMode::Auto if !plugin.parallel_issue() => (IssueMode::Serial, None, used),
            IssueMode::PerGroup | IssueMode::Auto => {
                let g = threads::issue_groups(sched);
                let n = groups_with_steps(sched, &g);
                let threaded = match opts.issue {
                    IssueMode::Auto => auto_per_group(sched, &g),
                    _ => n > 1,
                };
                match threaded {
                    true => (IssueMode::PerGroup, Some(g), n),
                    false => (IssueMode::Serial, None, n),
                }
            }
        };
        Exec {
            core: Core {
                graph,
                sched,
                plugin,
                t0: Instant::now(),
                streams: vec![None; sched.streams.len()],
                op_kernel: vec![None; graph.ops.len()],
                host: vec![None; graph.buffers.len()],
                log_debug: tracing::enabled!(target: LOG, tracing::Level::DEBUG),
                live: Live::new(graph.allocs.len()),
            },
            lanes: (0..sched.streams.len()).map(|_| Lane::default()).collect(),
            host_lane: Lane::default(),
            issue,
            groups,
            stream_groups,
            stats: threads::IssueStats::default(),
            events: vec![None; sched.events as usize],
            last_use,
            event_pool: Vec::new(),
            created_events: Vec::new(),
            kernels: BTreeMap::new(),
            kernel_dir: opts.kernel_dir.clone(),
            host_lib: KernelLibrary::new(opts.kernel_dir.clone()),
            host_kernels: BTreeMap::new(),
            snapshot: None,
            wall_us: 0.0,
        }
    }

    /// Streams, host buffers (initialised) and kernels.
    fn setup(&mut self) -> Result<(), ExecError> {
        let core = &mut self.core;
        let _ = core.plugin.drain_timings();
        let mut by_device: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, s) in core.sched.streams.iter().enumerate() {
            by_device.entry(s.device).or_default().push(i);
        }
        for (device, logical) in &by_device {
            let handles = core
                .plugin
                .create_streams(*device, logical.len() as u32)
                .map_err(|source| ExecError::Step {
                    what: format!("create {} streams on device {device}", logical.len()),
                    source,
                })?;
            for (l, h) in logical.iter().zip(handles) {
                core.streams[*l] = Some(h);
                self.lanes[*l].seq = core.plugin.next_seq(h);
            }
        }
        for (i, b) in core.graph.buffers.iter().enumerate() {
            let ptr = core
                .plugin
                .alloc_host(b.bytes())
                .map_err(|source| ExecError::Step {
                    what: format!("alloc host buffer \"{}\"", b.name),
                    source,
                })?;
            core.host[i] = Some(ptr);
            let mut at = 0u64;
            buffers::init_bytes(b, |chunk| {
                // SAFETY: `ptr` was just allocated with `b.bytes()` bytes and no stream
                // has used it yet; the chunks are consecutive and add up to `b.bytes()`
                // (`init_bytes` yields exactly the buffer's native-endian bytes).
                unsafe { hostmem::write(ptr.offset(at), chunk) };
                at += chunk.len() as u64;
            });
        }
        for id in core.graph.op_ids() {
            let op = core.graph.op(id);
            match &op.kind {
                OpKind::Kernel(call) => {
                    let key = (op.device, call.kernel.clone(), call.ty);
                    if let Some(&h) = self.kernels.get(&key) {
                        core.op_kernel[id.index()] = Some(h);
                        continue;
                    }
                    let sig = kernel_sig(core.graph, &call.kernel).ok_or_else(|| {
                        core.invalid(id, format!("unknown kernel \"{}\"", call.kernel))
                    })?;
                    let sig = resolve_kernel_paths(sig, self.kernel_dir.as_deref());
                    let h = core
                        .plugin
                        .load_kernel(op.device, &sig, call.ty)
                        .map_err(|e| core.op_err(id, e))?;
                    self.kernels.insert(key, h);
                    core.op_kernel[id.index()] = Some(h);
                }
                OpKind::HostTask {
                    call: Some(call), ..
                } => {
                    let key = (call.kernel.clone(), call.ty);
                    if self.host_kernels.contains_key(&key) {
                        continue;
                    }
                    let sig = kernel_sig(core.graph, &call.kernel).ok_or_else(|| {
                        core.invalid(id, format!("unknown kernel \"{}\"", call.kernel))
                    })?;
                    let k = self.host_lib.resolve(&sig, call.ty).map_err(|source| {
                        ExecError::HostKernel {
                            op: id,
                            what: core.graph.describe(id),
                            region: core.region(id),
                            source,
                        }
                    })?;
                    self.host_kernels.insert(key, k);
                }
                _ => {}
            }
        }
        if self.groups.is_some() {
            // One plugin event per schedule event, for the whole run: a pooled event
            // could be re-recorded by one stream's thread before another stream's thread
            // has issued its wait on the earlier record.
            for step in &self.core.sched.steps {
                if let Step::Record { event, stream } = *step {
                    self.event_for(event, stream)?;
                }
            }
        }
        Ok(())
    }

    fn run_steps(&mut self) -> Result<(), ExecError> {
        if let Some(groups) = &self.groups {
            let events: Vec<Option<EventHandle>> =
                self.events.iter().map(|e| e.map(|(h, _)| h)).collect();
            let Exec {
                core,
                lanes,
                host_lane,
                host_kernels,
                snapshot,
                stats,
                ..
            } = self;
            return threads::run(
                core,
                lanes,
                host_lane,
                host_kernels,
                snapshot,
                &events,
                groups,
                stats,
            );
        }
        let sched = self.core.sched;
        for (i, step) in sched.steps.iter().enumerate() {
            match *step {
                Step::Op(op) => match sched.op_stream[op.index()] {
                    Some(s) if !self.core.graph.op(op).kind.is_host() => {
                        self.core
                            .issue_device(&mut self.lanes[s.index()], op, s, i)?
                    }
                    _ => run_host(
                        &self.core,
                        &self.host_kernels,
                        &mut self.host_lane,
                        &mut self.snapshot,
                        op,
                        i,
                    )?,
                },
                Step::Record { event, stream } => {
                    let ev = self.event_for(event, stream)?;
                    let core = &self.core;
                    let lane = &mut self.lanes[stream.index()];
                    event_step(core, lane, EventStep::Record, ev, event, stream, i)?;
                    self.release_event(i, event);
                }
                Step::Wait { event, stream } => {
                    let core = &self.core;
                    let Some((ev, _)) = self.events[event.index()] else {
                        return Err(wait_before_record(sched, event, stream));
                    };
                    let lane = &mut self.lanes[stream.index()];
                    event_step(core, lane, EventStep::Wait, ev, event, stream, i)?;
                    self.release_event(i, event);
                }
                Step::HostWait { stream } => {
                    let in_flight = &mut self.lanes[stream.index()].in_flight;
                    host_wait(&self.core, in_flight, stream, HostWaitKind::Stream, Some(i))?;
                    self.host_lane.counts.host_waits += 1;
                }
                Step::HostWaitEvent { event } => {
                    let Some((ev, _)) = self.events[event.index()] else {
                        return Err(host_wait_before_record(sched, event));
                    };
                    host_wait_event(&self.core, ev, event, i)?;
                    self.host_lane.counts.host_waits += 1;
                    self.release_event(i, event);
                }
                Step::HostWaitDevice { device } => {
                    // Every schedule stream of the device (`cuCtxSynchronize` restricted
                    // to the streams this run uses, which is all the work it issued).
                    for (t, info) in sched.streams.iter().enumerate() {
                        if info.device == device {
                            host_wait(
                                &self.core,
                                &mut self.lanes[t].in_flight,
                                StreamId(t as u32),
                                HostWaitKind::Device(device),
                                Some(i),
                            )?;
                        }
                    }
                    self.host_lane.counts.host_waits += 1;
                }
            }
        }
        Ok(())
    }

    /// The plugin event of schedule event `event` (recorded on `stream`): the one it has,
    /// else one from the pool of the stream's device (or a new one).
    fn event_for(&mut self, event: EventId, stream: StreamId) -> Result<EventHandle, ExecError> {
        if let Some((ev, _)) = self.events[event.index()] {
            return Ok(ev);
        }
        let device = self.core.sched.streams[stream.index()].device;
        let ev = take_event(
            self.core.plugin,
            &mut self.event_pool,
            &mut self.created_events,
            device,
            event,
            stream,
        )?;
        self.events[event.index()] = Some((ev, device));
        Ok(ev)
    }

    /// Returns the plugin event of `event` to the pool of the device it was created for
    /// (its record's device, not the device of a cross-device waiter) after its last
    /// record, wait or host wait.
    fn release_event(&mut self, step: usize, event: EventId) {
        if self.last_use[event.index()] == Some(step) {
            if let Some((ev, device)) = self.events[event.index()].take() {
                let d = device as usize;
                if self.event_pool.len() <= d {
                    self.event_pool.resize_with(d + 1, Vec::new);
                }
                self.event_pool[d].push(ev);
            }
        }
    }

    /// Synchronizes every stream, frees leftover device memory, destroys events, takes
    /// the final snapshot (if `End` did not) and frees host memory. After a failed run
    /// (`failed`), teardown errors are logged and dropped (the run's error wins).
    fn teardown(&mut self, failed: bool) -> Result<(), ExecError> {
        let mut first: Option<ExecError> = None;
        let mut note = |what: String, e: PluginError, first: &mut Option<ExecError>| {
            tracing::debug!(target: LOG, %what, error = %e, "teardown error");
            if first.is_none() {
                *first = Some(ExecError::Step { what, source: e });
            }
        };
        let sync_all =
            |core: &Core,
             first: &mut Option<ExecError>,
             note: &mut dyn FnMut(String, PluginError, &mut Option<ExecError>)| {
                for (i, h) in core.streams.iter().enumerate() {
                    // A stream the schedule issues nothing to has nothing to wait for.
                    let st = Some(StreamId(i as u32));
                    let used = core.sched.steps.iter().any(|step| match step {
                        Step::Op(op) => core.sched.op_stream[op.index()] == st,
                        Step::Record { stream, .. } | Step::Wait { stream, .. } => {
                            Some(*stream) == st
                        }
                        _ => false,
                    });
                    if let (Some(h), true) = (h, used) {
                        if let Err(e) = core.plugin.synchronize(*h) {
                            let last = core.step_context(
                                core.sched.steps.len(),
                                Some(StreamId(i as u32)),
                                false,
                            );
                            note(format!("final synchronize s{i}{last}"), e, first);
                        }
                    }
                }
            };
        let core = &self.core;
        sync_all(core, &mut first, &mut note);
        let mut freed_any = false;
        for a in 0..core.live.len() {
            let id = AllocId(a as u32);
            if let Some((ptr, s)) = core.live.get(id) {
                match core.plugin.free(core.stream(s), ptr) {
                    Ok(()) => {
                        core.live.clear(id);
                        freed_any = true;
                    }
                    Err(e) => note(
                        format!("free leftover device allocation {a}"),
                        e,
                        &mut first,
                    ),
                }
            }
        }
        if freed_any {
            sync_all(core, &mut first, &mut note);
        }
        for ev in std::mem::take(&mut self.created_events) {
            if let Err(e) = core.plugin.destroy_event(ev) {
                note(format!("destroy {ev}"), e, &mut first);
            }
        }
        self.event_pool.clear();
        if !failed && self.snapshot.is_none() {
            self.snapshot = Some(read_buffers(core));
        }
        for (i, p) in self.core.host.iter_mut().enumerate() {
            if let Some(ptr) = p.take() {
                if let Err(e) = self.core.plugin.free_host(ptr) {
                    note(
                        format!("free host buffer \"{}\"", self.core.graph.buffers[i].name),
                        e,
                        &mut first,
                    );
                }
            }
        }
        // Match the plugin's timings to ops.
        for t in self.core.plugin.drain_timings() {
            let Some(l) = self.core.streams.iter().position(|h| *h == Some(t.stream)) else {
                continue;
            };
            let lane = &mut self.lanes[l];
            if let Ok(k) = lane
                .timing_keys
                .binary_search_by_key(&t.seq, |&(seq, _)| seq)
            {
                let i = lane.timing_keys[k].1;
                lane.times[i].start_us = us_since(self.core.t0, t.start);
                lane.times[i].end_us = us_since(self.core.t0, t.end);
                lane.times[i].timed = true;
            }
        }
        self.wall_us = self.core.now_us();
        match first {
            Some(e) if !failed => Err(e),
            _ => Ok(()),
        }
    }

    fn report(&mut self) -> Report {
        let mut counts = Counts::default();
        let mut by_step: Vec<Option<OpTime>> = vec![None; self.core.sched.steps.len()];
        let (mut bytes_h2d, mut bytes_d2h) = (0, 0);
        for lane in self
            .lanes
            .iter_mut()
            .chain(std::iter::once(&mut self.host_lane))
        {
            counts.add(&lane.counts);
            bytes_h2d += lane.bytes_h2d;
            bytes_d2h += lane.bytes_d2h;
            for (t, &step) in std::mem::take(&mut lane.times).into_iter().zip(&lane.steps) {
                if let Some(slot) = by_step.get_mut(step) {
                    *slot = Some(t);
                }
            }
        }
        // Step order is issue order with one issuing thread; with several, order by
        // issue time (ties in step order).
        let mut ops: Vec<OpTime> = by_step.into_iter().flatten().collect();
        if self.groups.is_some() {
            ops.sort_by(|a, b| a.issue_us.total_cmp(&b.issue_us));
        }
        Report {
            plugin: self.core.plugin.name(),
            buffers: self.snapshot.take().unwrap_or_default(),
            ops,
            counts,
            bytes_h2d,
            bytes_d2h,
            wall_us: self.wall_us,
            issue: self.issue,
            issue_threads: self.stats.threads.max(1),
            stream_groups: self.stream_groups,
            issue_waits: self.stats.waits,
            issue_wait_us: self.stats.wait_ns as f64 / 1e3,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::{schedule, ScheduleOptions, SyncPolicy};

    #[test]
    fn auto_issues_per_group_only_with_many_device_steps_per_host_step() {
        let g = crate::lower::lower(&crate::model::saxpy_regions(64, 4096)).unwrap();
        let sched = |policy, streams_per_device| {
            schedule(
                &g,
                &ScheduleOptions {
                    policy,
                    streams_per_device,
                    random_streams: None,
                },
            )
        };
        let auto = |s: &Schedule| auto_per_group(s, &threads::issue_groups(s));
        // Independent regions: 4 streams, no events, 4 groups.
        assert_eq!(
            threads::issue_groups(&sched(SyncPolicy::Minimal, 4)),
            [0, 1, 2, 3]
        );
        assert!(auto(&sched(SyncPolicy::Minimal, 4)));
        assert!(!auto(&sched(SyncPolicy::Minimal, 1)));
        assert!(!auto(&sched(SyncPolicy::PerRegion, 4)));
        assert!(!auto(&sched(SyncPolicy::PerOp, 4)));
    }
}
