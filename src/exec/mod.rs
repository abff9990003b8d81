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
//! ([`check::check`]), the Chrome trace writer ([`trace::write_chrome_trace`]), the
//! overlap figures of a run ([`overlap::overlap`]: span, busy time per stream, critical
//! path) and the host memory a run needs against what the machine has
//! ([`memory::check`]: a run that cannot fit is refused before anything is allocated).
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
pub mod memory;
pub mod overlap;
pub mod reference;
mod report;
mod resources;
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
pub use memory::{MemoryLimit, MemoryNeed};
pub use overlap::{overlap, Overlap};
pub use reference::reference;
pub use report::{Counts, OpTime, Report};
pub(crate) use resources::{HostBinding, Resources};

use crate::lower::{AllocId, OpGraph, OpId, OpKind};
use crate::model::{ElemType, KernelSig};
use crate::plugin::{EventHandle, HostPtr, Plugin, PluginError};
use crate::runtime::ffi::{HostKernel, KernelError};
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
    /// The host memory a run (or the reference) may use: checked before anything is
    /// allocated ([`memory::check`]).
    pub memory: MemoryLimit,
    /// Told of every device op as it is issued (a progress display); `None`: nothing.
    pub on_issue: Option<OnIssue>,
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
    /// [`memory::ENV`] is set to something that is not a size.
    #[error(
        "{}={value:?} is not a size in bytes (e.g. 8589934592, 512MiB, 8GiB) or `none`",
        memory::ENV
    )]
    MemoryLimit { value: String },
}

/// Runs `sched` on `plugin`. See the module docs for what each step does.
///
/// Errors: [`ExecError::Schedule`] before anything is issued if the schedule does not
/// fit the plugin (a device it lacks: checked first) or is malformed for the graph
/// ([`crate::verify::check_structure`]: the first violation, and how many more);
/// [`ExecError::OutOfMemory`] before anything is allocated if the run needs more host
/// memory than `opts.memory` allows ([`memory::run_need`], [`memory::check`]);
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
    let on_host = memory::device_is_host(&plugin.name());
    memory::check(&memory::run_need(graph, sched, on_host), &opts.memory)?;
    execute_checked(graph, sched, plugin, opts)
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
    let mut res = Resources::new(
        graph.ops.len(),
        graph.buffers.len(),
        opts.kernel_dir.clone(),
    );
    execute_in(graph, sched, plugin, opts, &mut res, Vec::new(), false)
}

/// One run of a schedule already checked to be well-formed and to fit `plugin`, with
/// `res` (fresh, or a session's from earlier runs of this schedule on this plugin) and
/// the application memory in `binds` (one entry per buffer, or none). With `keep`, the
/// resources stay for the next run and no snapshot of the buffers is taken (the session
/// reads results in place); otherwise they are released at the end.
pub(crate) fn execute_in(
    graph: &OpGraph,
    sched: &Schedule,
    plugin: &dyn Plugin,
    opts: &ExecOptions,
    res: &mut Resources,
    binds: Vec<HostBinding>,
    keep: bool,
) -> Result<Report, ExecError> {
    res.settle(plugin);
    let mut ex = Exec::new(graph, sched, plugin, opts, res, binds, keep);
    let run = ex.setup().and_then(|()| ex.run_steps());
    if let Err(e) = &run {
        tracing::debug!(target: LOG, error = %e, "stopping after error; cleaning up");
    }
    let down = ex.teardown(run.is_err());
    run?;
    down?;
    Ok(ex.report())
}

/// A run started by [`start`]: set up, and issued up to the first step that blocks the
/// host. [`Started::finish`] issues the rest and tears down.
pub(crate) struct Started<'a> {
    ex: Exec<'a>,
    /// The next step to issue.
    next: usize,
    /// The error [`Started::advance`] met.
    failed: Option<ExecError>,
}

/// Starts a run for a session's `submit`: like [`execute_in`] with `keep`, issued from
/// this thread (serial issue), stopping before the first host wait or host op. On an
/// error everything is torn down and the error returned.
pub(crate) fn start<'a>(
    graph: &'a OpGraph,
    sched: &'a Schedule,
    plugin: &'a dyn Plugin,
    opts: &ExecOptions,
    res: &'a mut Resources,
    binds: Vec<HostBinding>,
) -> Result<Started<'a>, ExecError> {
    let opts = ExecOptions {
        issue: IssueMode::Serial,
        ..opts.clone()
    };
    res.settle(plugin);
    res.in_flight = true;
    let mut ex = Exec::new(graph, sched, plugin, &opts, res, binds, true);
    match ex.setup().and_then(|()| ex.issue_serial(0, true)) {
        Ok(next) => Ok(Started {
            ex,
            next,
            failed: None,
        }),
        Err(e) => {
            let _ = ex.teardown(true);
            ex.res.in_flight = false;
            Err(e)
        }
    }
}

impl Started<'_> {
    /// Whether the next step can be issued without blocking for long: it is not a host
    /// wait, or every stream it waits for (for a wait on an event: the stream it was
    /// recorded on) is done ([`Plugin::query`]; a query error
    /// counts as ready, so that issuing the wait reports it).
    pub(crate) fn ready(&self) -> bool {
        let core = &self.ex.core;
        let streams: Vec<usize> = match core.sched.steps.get(self.next) {
            Some(Step::HostWait { stream }) => vec![stream.index()],
            Some(Step::HostWaitDevice { device }) => (0..core.sched.streams.len())
                .filter(|&t| core.sched.streams[t].device == *device)
                .collect(),
            // Its recording stream done implies the event done (conservative: the stream
            // may have received more work after the record).
            Some(Step::HostWaitEvent { event }) => (core.sched.steps[..self.next].iter())
                .rev()
                .find_map(|s| match *s {
                    Step::Record { event: e, stream } if e == *event => Some(stream.index()),
                    _ => None,
                })
                .into_iter()
                .collect(),
            _ => return true,
        };
        streams
            .into_iter()
            .filter_map(|t| core.streams[t])
            .all(|h| core.plugin.query(h).unwrap_or(true))
    }

    /// Issues the next step (blocking if it is a host wait or host op) and the steps
    /// after it up to the next one that blocks the host. Returns whether every step is
    /// issued. After an error, [`Started::finish`] tears down and returns it.
    pub(crate) fn advance(&mut self) -> bool {
        let len = self.ex.core.sched.steps.len();
        if self.failed.is_none() && self.next < len {
            match self.ex.issue_serial(self.next, true) {
                Ok(next) => self.next = next,
                Err(e) => self.failed = Some(e),
            }
        }
        self.failed.is_some() || self.next >= len
    }

    /// Issues the remaining steps, tears down and reports.
    pub(crate) fn finish(mut self) -> Result<Report, ExecError> {
        let run = match self.failed.take() {
            Some(e) => Err(e),
            None => self.ex.issue_serial(self.next, false),
        };
        if let Err(e) = &run {
            tracing::debug!(target: LOG, error = %e, "stopping after error; cleaning up");
        }
        let down = self.ex.teardown(run.is_err());
        self.ex.res.in_flight = false;
        run?;
        down?;
        Ok(self.ex.report())
    }
}

/// Whether `sched` fits `plugin` (the devices it uses exist); see [`execute`].
pub(crate) fn fits_plugin(sched: &Schedule, plugin: &dyn Plugin) -> Result<(), ExecError> {
    validate::fits_plugin(sched, plugin)
}

/// Per stream of `sched`: whether any step issues to it (`used`), and whether any does
/// after the last host wait that covers the whole stream (`pending`: what a final
/// synchronize must wait for after a complete run). `O(steps + streams)`.
fn final_sync(sched: &Schedule) -> (Vec<bool>, Vec<bool>) {
    let n = sched.streams.len();
    let (mut used, mut pending) = (vec![false; n], vec![false; n]);
    for step in &sched.steps {
        match *step {
            Step::Op(op) => {
                if let Some(s) = sched.op_stream[op.index()] {
                    used[s.index()] = true;
                    pending[s.index()] = true;
                }
            }
            Step::Record { stream, .. } | Step::Wait { stream, .. } => {
                used[stream.index()] = true;
                pending[stream.index()] = true;
            }
            Step::HostWait { stream } => pending[stream.index()] = false,
            Step::HostWaitDevice { device } => {
                for (t, info) in sched.streams.iter().enumerate() {
                    if info.device == device {
                        pending[t] = false;
                    }
                }
            }
            // Covers its stream only up to the record.
            Step::HostWaitEvent { .. } => {}
        }
    }
    (used, pending)
}

/// Whether `step` blocks the host: a host wait, or a host op (it runs on this thread).
fn blocks_host(graph: &OpGraph, sched: &Schedule, step: &Step) -> bool {
    match *step {
        Step::Op(op) => sched.op_stream[op.index()].is_none() || graph.op(op).kind.is_host(),
        Step::HostWait { .. } | Step::HostWaitDevice { .. } | Step::HostWaitEvent { .. } => true,
        Step::Record { .. } | Step::Wait { .. } => false,
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
    /// `ExecOptions::kernel_dir`: user-kernel paths of device kernels are resolved
    /// against it before they reach the plugin.
    kernel_dir: Option<PathBuf>,
    snapshot: Option<Buffers>,
    wall_us: f64,
}

impl<'a> Exec<'a> {
    fn new(
        graph: &'a OpGraph,
        sched: &'a Schedule,
        plugin: &'a dyn Plugin,
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
                op_kernel: Vec::new(),
                host: vec![None; graph.buffers.len()],
                log_debug: tracing::enabled!(target: LOG, tracing::Level::DEBUG),
                live: Live::new(graph.allocs.len()),
                snapshot_at_end: !keep,
                on_issue: opts.on_issue.clone(),
            },
            res,
            binds,
            keep,
            registered: Vec::new(),
            lanes: (0..sched.streams.len()).map(|_| Lane::default()).collect(),
            host_lane: Lane::default(),
            issue,
            groups,
            stream_groups,
            stats: threads::IssueStats::default(),
            events: vec![None; sched.events as usize],
            last_use,
            kernel_dir: opts.kernel_dir.clone(),
            snapshot: None,
            wall_us: 0.0,
        }
    }

    /// Streams and kernels (the first run of a session or a one-shot run), then the host
    /// buffers: unbound ones initialised, bound ones registered or staged.
    fn setup(&mut self) -> Result<(), ExecError> {
        let _ = self.core.plugin.drain_timings();
        if !self.res.ready {
            self.make_streams()?;
            self.load_kernels()?;
            self.res.ready = true;
        }
        self.core.streams.clone_from(&self.res.streams);
        self.core.op_kernel.clone_from(&self.res.op_kernel);
        for (l, h) in self.core.streams.iter().enumerate() {
            if let Some(h) = h {
                self.lanes[l].seq = self.core.plugin.next_seq(*h);
            }
        }
        for i in 0..self.core.graph.buffers.len() {
            self.host_buffer(i)?;
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

    fn make_streams(&mut self) -> Result<(), ExecError> {
        let core = &self.core;
        let mut by_device: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, s) in core.sched.streams.iter().enumerate() {
            by_device.entry(s.device).or_default().push(i);
        }
        self.res.streams = vec![None; core.sched.streams.len()];
        for (device, logical) in &by_device {
            let handles = core
                .plugin
                .create_streams(*device, logical.len() as u32)
                .map_err(|source| ExecError::Step {
                    what: format!("create {} streams on device {device}", logical.len()),
                    source,
                })?;
            for (l, h) in logical.iter().zip(handles) {
                self.res.streams[*l] = Some(h);
            }
        }
        Ok(())
    }

    fn load_kernels(&mut self) -> Result<(), ExecError> {
        let core = &self.core;
        let res = &mut *self.res;
        res.op_kernel = vec![None; core.graph.ops.len()];
        for id in core.graph.op_ids() {
            let op = core.graph.op(id);
            match &op.kind {
                OpKind::Kernel(call) => {
                    let key = (op.device, call.kernel.clone(), call.ty);
                    if let Some(&h) = res.kernels.get(&key) {
                        res.op_kernel[id.index()] = Some(h);
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
                    res.kernels.insert(key, h);
                    res.op_kernel[id.index()] = Some(h);
                }
                OpKind::HostTask {
                    call: Some(call), ..
                } => {
                    let key = (call.kernel.clone(), call.ty);
                    if res.host_kernels.contains_key(&key) {
                        continue;
                    }
                    let sig = kernel_sig(core.graph, &call.kernel).ok_or_else(|| {
                        core.invalid(id, format!("unknown kernel \"{}\"", call.kernel))
                    })?;
                    let k = res.host_lib.resolve(&sig, call.ty).map_err(|source| {
                        ExecError::HostKernel {
                            op: id,
                            what: core.graph.describe(id),
                            region: core.region(id),
                            source,
                        }
                    })?;
                    res.host_kernels.insert(key, k);
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The host memory of buffer `i` for this run: application memory used in place,
    /// or plugin host memory (kept in the resources) filled with the buffer's initial
    /// contents or a copy of the bound memory.
    fn host_buffer(&mut self, i: usize) -> Result<(), ExecError> {
        let core = &mut self.core;
        let b = &core.graph.buffers[i];
        let bind = self.binds.get(i).copied().unwrap_or_default();
        let step_err = |what: String| move |source| ExecError::Step { what, source };
        match bind {
            HostBinding::Plugin { ptr } => {
                core.host[i] = Some(ptr);
                return Ok(());
            }
            HostBinding::App {
                ptr, bytes, stage, ..
            } if !stage => {
                let at = HostPtr(ptr as usize as u64);
                let direct = core
                    .plugin
                    .register_host(at, bytes)
                    .map_err(step_err(format!("register host buffer \"{}\"", b.name)))?;
                if direct {
                    self.registered.push(at);
                    core.host[i] = Some(at);
                    return Ok(());
                }
            }
            _ => {}
        }
        let ptr = match self.res.host[i] {
            Some((ptr, bytes)) if bytes == b.bytes() => ptr,
            old => {
                if let Some((ptr, _)) = old {
                    self.res.host[i] = None;
                    core.plugin
                        .free_host(ptr)
                        .map_err(step_err(format!("free host buffer \"{}\"", b.name)))?;
                }
                let ptr = core
                    .plugin
                    .alloc_host(b.bytes())
                    .map_err(step_err(format!("alloc host buffer \"{}\"", b.name)))?;
                self.res.host[i] = Some((ptr, b.bytes()));
                ptr
            }
        };
        core.host[i] = Some(ptr);
        match bind {
            HostBinding::App { ptr: app, .. } => {
                // SAFETY: `app` is valid for `b.bytes()` bytes (the binding was checked
                // against the buffer's type and length) and borrowed for the run; `ptr`
                // is plugin host memory of that size no stream is using (every stream
                // was synchronized at the end of the previous run).
                unsafe { std::ptr::copy_nonoverlapping(app, ptr.as_ptr(), b.bytes() as usize) };
            }
            _ => {
                let mut at = 0u64;
                buffers::init_bytes(b, |chunk| {
                    // SAFETY: `ptr` holds `b.bytes()` bytes and no stream uses it yet;
                    // the chunks are consecutive and add up to `b.bytes()` (`init_bytes`
                    // yields exactly the buffer's native-endian bytes).
                    unsafe { hostmem::write(ptr.offset(at), chunk) };
                    at += chunk.len() as u64;
                });
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
        // A stream the schedule issues nothing to has nothing to wait for; after a
        // complete run, neither has one whose last work a host wait already covered
        // (that wait returned its errors too).
        let (used, pending) = final_sync(self.core.sched);
        let must = if failed { used } else { pending };
        let sync_all =
            |core: &Core,
             first: &mut Option<ExecError>,
             note: &mut dyn FnMut(String, PluginError, &mut Option<ExecError>)| {
                for (i, h) in core.streams.iter().enumerate() {
                    if let (Some(h), true) = (h, must[i]) {
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
        // Events still held (threaded issue holds one per schedule event) go back to
        // the pool; a one-shot run then destroys every event it made.
        for (ev, device) in self.events.iter_mut().filter_map(Option::take) {
            let d = device as usize;
            if self.res.event_pool.len() <= d {
                self.res.event_pool.resize_with(d + 1, Vec::new);
            }
            self.res.event_pool[d].push(ev);
        }
        if !failed && self.snapshot.is_none() && core.snapshot_at_end {
            match read_buffers(core) {
                Ok(b) => self.snapshot = Some(b),
                Err(e) => {
                    tracing::debug!(target: LOG, error = %e, "teardown error");
                    first.get_or_insert(e);
                }
            }
        }
        for (i, bind) in self.binds.iter().enumerate() {
            let HostBinding::App {
                ptr: app,
                bytes,
                writable: true,
                ..
            } = *bind
            else {
                continue;
            };
            match core.host[i] {
                Some(h) if !failed && h.0 != app as usize as u64 => {
                    // SAFETY: staged: `h` is this buffer's plugin host memory of `bytes`
                    // bytes and every stream is synchronized; `app` is the application's
                    // memory of the same size, borrowed mutably for the run.
                    unsafe { std::ptr::copy_nonoverlapping(h.as_ptr(), app, bytes as usize) };
                }
                _ => {}
            }
        }
        for ptr in std::mem::take(&mut self.registered) {
            if let Err(e) = core.plugin.unregister_host(ptr) {
                note(format!("unregister host memory {ptr}"), e, &mut first);
            }
        }
        if !self.keep {
            let names: Vec<String> = core.graph.buffers.iter().map(|b| b.name.clone()).collect();
            if let Err((what, e)) = self.res.release(core.plugin, &names) {
                note(what, e, &mut first);
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
    fn on_issue_sees_every_device_op_once_with_its_stream_and_seq() {
        use crate::plugin::host::{HostPlugin, HostPluginOptions};
        use std::sync::{Arc, Mutex};
        let g = crate::lower::lower(&crate::model::saxpy_regions(8, 256)).unwrap();
        let s = schedule(&g, &ScheduleOptions::default());
        let want: Vec<OpId> = g.op_ids().filter(|&o| !g.op(o).kind.is_host()).collect();
        for issue in [IssueMode::Serial, IssueMode::PerStream, IssueMode::PerGroup] {
            let seen = Arc::new(Mutex::new(Vec::new()));
            let log = Arc::clone(&seen);
            let on_issue = OnIssue(Arc::new(move |op, h, seq| {
                log.lock().unwrap().push((op, h, seq))
            }));
            let opts = ExecOptions {
                issue,
                on_issue: Some(on_issue),
                ..ExecOptions::default()
            };
            let p = HostPlugin::new(HostPluginOptions::default());
            execute(&g, &s, &p, &opts).unwrap();
            let mut seen = seen.lock().unwrap().clone();
            seen.sort();
            let ops: Vec<OpId> = seen.iter().map(|x| x.0).collect();
            assert_eq!(ops, want, "{issue:?}");
            // Each (stream, seq) names one call.
            let mut keys: Vec<_> = seen.iter().map(|x| (x.1, x.2)).collect();
            keys.sort();
            keys.dedup();
            assert_eq!(keys.len(), want.len(), "{issue:?}");
        }
    }

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
