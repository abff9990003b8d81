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
//! The executor only executes. What reads a run or stands beside it has a room of its
//! own: the reference interpreter and the result check ([`crate::reference`]), the
//! overlap figures and the Chrome trace of a run ([`crate::timeline`]), and the host
//! memory a run needs against what the machine has ([`crate::estimate`]: a run that
//! cannot fit is refused before anything is allocated).
//!
//! Entry points: [`execute`] (any graph and schedule: proven safe first, see there); a
//! plan's run (`execute_verified`, the plan holds the proof); a session's run
//! (`execute_kept`: resources kept for the next run, results read in place) and its
//! `submit` (`start`, in `started.rs`).
//!
//! What the plugin can do is read once per run from [`Plugin::info`] (a session asks
//! once), never by trying a call or reading the plugin's name ([`PluginInfo`]): its
//! devices and peer copies decide whether the schedule fits (`validate.rs`), parallel
//! issue whether [`IssueMode::Auto`] issues from several threads, the kind of device
//! memory whether device allocations count in the host memory estimate
//! ([`crate::estimate::run_need`]), application memory whether a bound buffer is registered
//! ([`Plugin::register_host`]) or staged, graphs whether a replayed run builds graphs or
//! falls back to stream issue, timing whether the report's op times are the plugin's
//! ([`Plugin::drain_timings`]) or issue times.
//!
//! Layout: this file holds the entry points and the serial issue loop; `resources.rs`
//! what runs keep between runs (a session's) and the application memory bound to a run;
//! `setup.rs` and `teardown.rs` a run's setup and teardown (and its report);
//! `started.rs` a run started but not finished (a session's `submit`); `steps.rs` the
//! step actions both issue paths share (events, host waits, host tasks, the final
//! snapshot); `host_lanes.rs` serial issue with host ops on host lane threads (when the
//! schedule has host tasks or a taskwait), `inline_plan.rs` the host ops its issuing
//! thread runs itself; threaded issue and a session's `submit` run host ops on the
//! calling thread, in schedule order, which the lanes' model allows (why lanes are not
//! used there: `threads.rs`, `started.rs`); `threads.rs` threaded issue (with `step_tables.rs`, what each issuing
//! thread knows about the steps); `validate.rs` what is checked before anything is
//! issued (the safety check of [`execute`] and the fit of a schedule to the plugin);
//! `run_state.rs` the state one run shares between threads; `replay.rs` replayed runs;
//! `hostmem.rs` host memory; `report.rs` what a run reports; `locate.rs` moves an
//! asynchronous failure to the op that failed.

pub(crate) mod buffers;
mod host_lanes;
mod hostmem;
pub(crate) mod inline_plan;
mod issue;
mod locate;
mod replay;
mod report;
mod resources;
mod run_state;
mod setup;
mod started;
mod step_tables;
mod steps;
mod teardown;
mod threads;
mod validate;

pub use buffers::{init_bytes, BufferData, Buffers, ReadError};
use issue::{auto_per_group, groups_with_steps};
pub use issue::{HostOps, IssueMode, AUTO_DEVICE_STEPS_PER_HOST_STEP, GROUP_STEPS_PER_EVENT};
pub use replay::ReplayStats;
pub(crate) use replay::Replayed;
pub use report::{Counts, HostWaitTime, OpTime, Report};
pub(crate) use resources::{HostBinding, Resources};
use started::blocks_host;
pub(crate) use started::{start, Started};

use crate::estimate::{self as memory, MemoryLimit, MemoryNeed};
use crate::lower::{OpGraph, OpId};
use crate::model::{ElemType, KernelSig};
use crate::plugin::{EventHandle, HostPtr, Plugin, PluginError, PluginInfo};
use crate::runtime::ffi::{HostKernel, KernelError};
use crate::schedule::{EventId, Schedule, Step, StreamId};
use run_state::{Core, Lane, Live, LOG};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;
use steps::{
    event_step, host_wait, host_wait_before_record, host_wait_event, run_host, take_event,
    timed_wait, wait_before_record, EventStep,
};
use thiserror::Error;

/// Options of [`execute`] and `reference()`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExecOptions {
    /// Folder relative user-library paths of host-task kernels are resolved against
    /// (the graph file's folder); the current directory when `None`.
    pub kernel_dir: Option<PathBuf>,
    /// How steps are issued (ignored by `reference()`).
    pub issue: IssueMode,
    /// The host memory a run (or the reference) may use: checked before anything is
    /// allocated ([`memory::check`]).
    pub memory: MemoryLimit,
    /// Told of every device op as it is issued (a progress display); `None`: nothing.
    pub on_issue: Option<OnIssue>,
    /// Replay the schedule as plugin graphs ([`crate::replay`]) when the run's resources
    /// are kept (a session's): built by the first such run, launched by every run.
    /// Ignored by `reference()`. A one-shot run of a graph with taskgraphs
    /// ([`crate::lower::TaskgraphInfo`]) replays whatever this says: each taskgraph's
    /// first execution is recorded as a graph and its later executions launch it again
    /// (OpenMP 6.0 §14.3 record and replay), the rest of the plan as graphs too.
    pub replay: bool,
    /// Who runs the host ops of serial issue (ignored by threaded issue, replay and
    /// `reference()`): host-lane threads (the default) or the issuing thread itself.
    pub host_ops: HostOps,
}

/// A callback the executor calls on the issuing thread right after it issues a device
/// op, with the op, the plugin stream and the `seq` the plugin gave the call: a
/// [`crate::plugin::Timing`] with that stream and `seq` (from
/// [`Plugin::drain_timings`]) says when the op ran. With threaded issue it is called
/// from several threads at once; it must be cheap and must not block.
#[derive(Clone)]
pub struct OnIssue(
    pub std::sync::Arc<dyn Fn(OpId, crate::plugin::StreamHandle, u64) + Send + Sync>,
);

impl std::fmt::Debug for OnIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnIssue")
    }
}

/// Two callbacks are equal when they are the same one.
impl PartialEq for OnIssue {
    fn eq(&self, other: &OnIssue) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for OnIssue {}

/// What went wrong running a schedule.
#[derive(Debug, Error)]
#[non_exhaustive]
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
    /// A host task's Rust closure ([`crate::model::ProgramBuilder::host_fn`]) returned an
    /// error, panicked, or was refused a view; `task` is the host task's name.
    #[error("op {op} (host) in host task \"{task}\": {source}")]
    HostFn {
        op: OpId,
        task: String,
        #[source]
        source: crate::model::HostFnError,
    },
    /// A sync step, setup or teardown call failed (`what` says which:
    /// `record e3 on s1`, `host wait s0`, `final synchronize s2`, `alloc host x`).
    #[error("{what}: {source}")]
    Step {
        what: String,
        #[source]
        source: PluginError,
    },
    /// The run (or the reference interpreter) needs more host memory than is available:
    /// refused before anything was allocated or issued (see [`memory`]).
    #[error("not enough host memory: needed {need}; {available}; nothing was run")]
    OutOfMemory {
        need: MemoryNeed,
        available: memory::Available,
    },
    /// Host memory of buffer size could not be allocated (`what` names it: `the result
    /// snapshot of buffer "x"`, `host buffer "x" of the reference interpreter`).
    #[error("cannot allocate {} of host memory for {what}", crate::model::human_bytes(*bytes))]
    Alloc { what: String, bytes: u64 },
    /// A replay graph the plugin built does not order what the schedule orders
    /// ([`crate::replay::prove`]); nothing of it was launched.
    #[error(transparent)]
    ReplayProof(crate::replay::ProofError),
    /// [`memory::ENV`] is set to something that is not a size.
    #[error(
        "{}={value:?} is not a size in bytes (e.g. 8589934592, 512MiB, 8GiB) or `none`",
        memory::ENV
    )]
    MemoryLimit { value: String },
}

impl From<memory::MemoryError> for ExecError {
    fn from(e: memory::MemoryError) -> ExecError {
        match e {
            memory::MemoryError::OutOfMemory { need, available } => {
                ExecError::OutOfMemory { need, available }
            }
            memory::MemoryError::BadLimit { value } => ExecError::MemoryLimit { value },
        }
    }
}

/// Runs `sched` on `plugin`. See the module docs for what each step does.
///
/// Safe for any `graph` and `sched`, however built or edited: before anything is issued
/// the schedule is checked with [`crate::verify::check_order`], which proves every graph
/// edge *and* every pair of ops touching the same bytes (one writing, recomputed from the
/// ops themselves) ordered by happens-before, so no two ops can hold one device block or
/// host section at once (on the host plugin that would be two threads with `&mut` of the
/// same memory). A schedule a [`crate::Plan`] made skips that check (the plan carries the
/// verifier's proof): run it with [`crate::Plan::run`].
///
/// Errors: [`ExecError::Schedule`] before anything is issued if the schedule does not
/// fit the plugin (a device it lacks: checked first), is malformed for the graph, or
/// leaves an edge or a conflicting access unordered ([`crate::verify::check_order`]: the
/// first violation, and how many more);
/// [`ExecError::OutOfMemory`] before anything is allocated if the run needs more host
/// memory than `opts.memory` allows ([`memory::run_need`], [`memory::check`]);
/// otherwise the first failing op or step. Either way every device allocation, event and
/// host allocation made is released before returning.
///
/// Complexity: `O(V + S)` plugin calls for `V` ops and `S` steps, plus the work itself
/// and the check ([`crate::verify::check_order`]).
pub fn execute(
    graph: &OpGraph,
    sched: &Schedule,
    plugin: &dyn Plugin,
    opts: &ExecOptions,
) -> Result<Report, ExecError> {
    let info = plugin.info();
    validate::fits_plugin(graph, sched, &info)?;
    validate::order(graph, sched)?;
    memory::check(&memory::run_need(graph, sched, &info), &opts.memory)?;
    execute_checked(graph, sched, plugin, &info, opts)
}

/// [`execute`] for a schedule the verifier has proven (a [`crate::Plan`]'s): without the
/// structural check ([`crate::verify::check_structure`], which [`crate::verify::verify`]
/// ran against this `graph`) and without the memory check (the plan makes it, with its
/// figures computed once); only the fit to `plugin` is checked. Given a malformed
/// schedule it may panic on an index out of range.
pub(crate) fn execute_verified(
    graph: &OpGraph,
    sched: &Schedule,
    plugin: &dyn Plugin,
    opts: &ExecOptions,
) -> Result<Report, ExecError> {
    let info = plugin.info();
    validate::fits_plugin(graph, sched, &info)?;
    execute_checked(graph, sched, plugin, &info, opts)
}

/// The verified work a run is handed: the graph, its schedule (checked to be well-formed
/// and to fit `plugin`), the plugin and what it can do (its [`PluginInfo`], asked once
/// by the caller).
#[derive(Clone, Copy)]
pub(crate) struct Job<'a> {
    pub(crate) graph: &'a OpGraph,
    pub(crate) sched: &'a Schedule,
    pub(crate) plugin: &'a dyn Plugin,
    pub(crate) info: &'a PluginInfo,
}

/// What becomes of a run's resources at its end.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Keep {
    /// A one-shot run: events and host memory released, the buffers copied into the
    /// report.
    Nothing,
    /// A session's run: resources stay for the next run; results are read in place.
    Resources,
}

/// Issues a schedule already checked to be well-formed and to fit `plugin`, once, with
/// fresh resources released at the end.
fn execute_checked(
    graph: &OpGraph,
    sched: &Schedule,
    plugin: &dyn Plugin,
    info: &PluginInfo,
    opts: &ExecOptions,
) -> Result<Report, ExecError> {
    let mut res = Resources::new(
        graph.ops.len(),
        graph.buffers.len(),
        opts.kernel_dir.clone(),
    );
    let job = Job {
        graph,
        sched,
        plugin,
        info,
    };
    run_job(job, opts, &mut res, Vec::new(), Keep::Nothing)
}

/// A session's run: `job` under `opts` with `res` (a session's, from earlier runs of this schedule on
/// this plugin) and the application memory in `binds` (one entry per buffer, or none).
/// The resources stay for the next run and no snapshot of the buffers is taken (the
/// session reads results in place).
pub(crate) fn execute_kept(
    job: Job<'_>,
    opts: &ExecOptions,
    res: &mut Resources,
    binds: Vec<HostBinding>,
) -> Result<Report, ExecError> {
    run_job(job, opts, res, binds, Keep::Resources)
}

fn run_job(
    job: Job<'_>,
    opts: &ExecOptions,
    res: &mut Resources,
    binds: Vec<HostBinding>,
    keep: Keep,
) -> Result<Report, ExecError> {
    let Job {
        graph,
        sched,
        plugin,
        info,
    } = job;
    let keep = keep == Keep::Resources;
    res.settle(plugin);
    let mut ex = Exec::new(graph, sched, (plugin, info), opts, res, binds, keep);
    let replay = (opts.replay && keep) || !graph.taskgraphs.is_empty();
    let run = ex.setup().and_then(|()| match replay {
        true => ex.run_replay(),
        false => ex.run_steps(),
    });
    if let Err(e) = &run {
        tracing::debug!(target: LOG, error = %e, "stopping after error; cleaning up");
    }
    let down = ex.teardown(run.is_err());
    run.map_err(|e| ex.locate(e))?;
    down.map_err(|e| ex.locate(e))?;
    Ok(ex.report())
}

/// Whether `sched` of `graph` fits the plugin whose [`PluginInfo`] is `info` (the
/// devices it uses exist; a peer copy has a plugin that copies between devices); see
/// [`execute`].
pub(crate) fn fits_plugin(
    graph: &OpGraph,
    sched: &Schedule,
    info: &PluginInfo,
) -> Result<(), ExecError> {
    validate::fits_plugin(graph, sched, info)
}

impl Drop for Exec<'_> {
    fn drop(&mut self) {
        if self.torn_down {
            return;
        }
        // Unwinding (teardown never ran): wait for what was issued, then stop the plugin
        // from using application memory. Errors (and the plugin's state) are the
        // panic's problem; this only makes sure nothing runs on after it.
        let core = &self.core;
        for h in core.streams.iter().flatten() {
            let _ = core.plugin.synchronize(*h);
        }
        for ptr in std::mem::take(&mut self.registered) {
            let _ = core.plugin.unregister_host(ptr);
        }
        self.res.in_flight = true;
    }
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
    /// Streams, kernels, event pool and host memory: fresh for a one-shot run, kept by a
    /// session between runs.
    res: &'a mut Resources,
    /// Application memory bound per buffer (empty: none bound).
    binds: Vec<HostBinding>,
    /// Keep `res` for the next run (a session) instead of giving its events and host
    /// memory back at teardown.
    keep: bool,
    /// Application memory registered with the plugin by this run (unregistered at
    /// teardown).
    registered: Vec<HostPtr>,
    /// Teardown ran. If not when the run is dropped (a panic unwinding through it, from
    /// a plugin or a host kernel), the drop synchronizes every stream and unregisters
    /// application memory, so no queued copy writes into memory the caller frees next.
    torn_down: bool,
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
    /// Serial issue hands host ops to host lane threads (`host_lanes.rs`).
    host_lanes: bool,
    /// [`ExecOptions::host_ops`].
    host_ops: HostOps,
    stats: threads::IssueStats,
    /// Plugin event of each schedule event, with the device it was created for.
    events: Vec<Option<(EventHandle, u32)>>,
    last_use: Vec<Option<usize>>,
    /// `ExecOptions::kernel_dir`: user-kernel paths of device kernels are resolved
    /// against it before they reach the plugin.
    kernel_dir: Option<PathBuf>,
    snapshot: Option<Buffers>,
    wall_us: f64,
    /// What replay did in this run (`None`: issued to streams).
    replay_stats: Option<ReplayStats>,
    /// When setup ended and teardown started, in µs since `core.t0`.
    setup_us: f64,
    teardown_start_us: f64,
}

impl<'a> Exec<'a> {
    fn new(
        graph: &'a OpGraph,
        sched: &'a Schedule,
        (plugin, info): (&'a dyn Plugin, &'a PluginInfo),
        opts: &ExecOptions,
        res: &'a mut Resources,
        binds: Vec<HostBinding>,
        keep: bool,
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
            IssueMode::Auto if !info.parallel_issue => (IssueMode::Serial, None, used),
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
                info,
                t0: Instant::now(),
                streams: vec![None; sched.streams.len()],
                op_kernel: Vec::new(),
                host: vec![None; graph.buffers.len()],
                log_debug: tracing::enabled!(target: LOG, tracing::Level::DEBUG),
                live: Live::new(graph.allocs.len()),
                snapshot_at_end: !keep,
                on_issue: opts.on_issue.clone(),
                failed: std::sync::atomic::AtomicBool::new(false),
            },
            res,
            binds,
            keep,
            registered: Vec::new(),
            torn_down: false,
            lanes: (0..sched.streams.len()).map(|_| Lane::default()).collect(),
            host_lane: Lane::default(),
            issue,
            host_lanes: issue == IssueMode::Serial
                && !graph.ops.iter().all(|op| {
                    !matches!(
                        op.kind,
                        crate::lower::OpKind::HostTask { .. } | crate::lower::OpKind::Taskwait
                    )
                }),
            host_ops: opts.host_ops,
            groups,
            stream_groups,
            stats: threads::IssueStats::default(),
            events: vec![None; sched.events as usize],
            last_use,
            kernel_dir: opts.kernel_dir.clone(),
            snapshot: None,
            wall_us: 0.0,
            replay_stats: None,
            setup_us: 0.0,
            teardown_start_us: 0.0,
        }
    }

    fn run_steps(&mut self) -> Result<(), ExecError> {
        if let Some(groups) = &self.groups {
            let events: Vec<Option<EventHandle>> =
                self.events.iter().map(|e| e.map(|(h, _)| h)).collect();
            let Exec {
                core,
                lanes,
                host_lane,
                res,
                snapshot,
                stats,
                ..
            } = self;
            return threads::run(
                core,
                lanes,
                host_lane,
                &res.host_kernels,
                snapshot,
                &events,
                groups,
                stats,
            );
        }
        if self.host_lanes {
            let events: Vec<Option<EventHandle>> =
                self.events.iter().map(|e| e.map(|(h, _)| h)).collect();
            let Exec {
                core,
                lanes,
                host_lane,
                res,
                snapshot,
                ..
            } = self;
            let host_ops = self.host_ops;
            return host_lanes::run(
                core,
                lanes,
                host_lane,
                (&res.host_kernels, host_ops),
                snapshot,
                &events,
            );
        }
        self.issue_serial(0, false).map(|_| ())
    }

    /// Issues steps from `from` on, from this thread; with `stop_at_host`, stops before
    /// the first step after `from` that blocks the host (a host wait or a host op) and
    /// returns its index; else returns the step count.
    fn issue_serial(&mut self, from: usize, stop_at_host: bool) -> Result<usize, ExecError> {
        let sched = self.core.sched;
        for (i, step) in sched.steps.iter().enumerate().skip(from) {
            if stop_at_host && i > from && blocks_host(self.core.graph, sched, step) {
                return Ok(i);
            }
            match *step {
                // Host ops run on this thread in schedule order: the awaited one (issued
                // before) has completed.
                Step::HostAwait { .. } => {
                    timed_wait(&self.core, &mut self.host_lane, i, || Ok(()))?
                }
                Step::Op(op) => match sched.op_stream[op.index()] {
                    Some(s) if !self.core.graph.op(op).kind.is_host() => {
                        self.core
                            .issue_device(&mut self.lanes[s.index()], op, s, i)?
                    }
                    _ => run_host(
                        &self.core,
                        &self.res.host_kernels,
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
                    let (core, lane) = (&self.core, &mut self.lanes[stream.index()]);
                    timed_wait(core, &mut self.host_lane, i, || {
                        host_wait(
                            core,
                            &mut lane.in_flight,
                            stream,
                            HostWaitKind::Stream,
                            Some(i),
                        )
                    })?;
                }
                Step::HostWaitEvent { event } => {
                    let Some((ev, _)) = self.events[event.index()] else {
                        return Err(host_wait_before_record(sched, event));
                    };
                    let core = &self.core;
                    timed_wait(core, &mut self.host_lane, i, || {
                        host_wait_event(core, ev, event, i)
                    })?;
                    self.release_event(i, event);
                }
                Step::HostWaitDevice { device } => {
                    // Every schedule stream of the device (`cuCtxSynchronize` restricted
                    // to the streams this run uses, which is all the work it issued).
                    let (core, lanes) = (&self.core, &mut self.lanes);
                    timed_wait(core, &mut self.host_lane, i, || {
                        for (t, info) in sched.streams.iter().enumerate() {
                            // A stream nothing names has no plugin stream and no work.
                            if info.device == device && core.streams[t].is_some() {
                                host_wait(
                                    core,
                                    &mut lanes[t].in_flight,
                                    StreamId(t as u32),
                                    HostWaitKind::Device(device),
                                    Some(i),
                                )?;
                            }
                        }
                        Ok(())
                    })?;
                }
            }
        }
        Ok(sched.steps.len())
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
            &mut self.res.event_pool,
            &mut self.res.created_events,
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
                if self.res.event_pool.len() <= d {
                    self.res.event_pool.resize_with(d + 1, Vec::new);
                }
                self.res.event_pool[d].push(ev);
            }
        }
    }
}

#[cfg(test)]
mod tests;
