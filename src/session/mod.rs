//! Compile once, run many: a [`Session`] runs one [`Plan`] on one plugin any number of
//! times, with the application's memory bound per run ([`Bindings`]).
//!
//! What a session keeps between runs: the plugin streams (created by the first run),
//! the loaded kernels, a per-device pool of plugin events, and per buffer one block of
//! plugin host memory (page-locked on CUDA): the contents of an unbound buffer, or the
//! staging copy of a bound one. Nothing is lowered, scheduled or verified again: the
//! plan carries the verifier's proof. Device memory is allocated and freed by the
//! schedule's own ops (the plugins keep freed blocks in stream-ordered caches, so a
//! repeated run reuses them).
//!
//! Per run, each buffer:
//! - **unbound**: starts from its declared initial contents (written into the kept host
//!   memory: `O(bytes)` per run) and is read afterwards with [`Session::read`], in place;
//! - **bound to application memory** (`&[T]`, `&mut [T]`): used in place when the
//!   plugin takes application memory ([`PluginInfo::app_memory`], through
//!   [`Plugin::register_host`]: the host and null plugins do, `O(1)` per buffer); otherwise (CUDA: copies need page-locked memory)
//!   staged: copied into the kept pinned block before the run and, for outputs, back
//!   after it — one host `memcpy` of the buffer each way, at host memory bandwidth
//!   (measured about 8 GB/s, ~2 ms per 16 MiB, on the H200 machine: benches/README-gpu.md
//!   run 17). [`Session::submit`] always stages;
//! - **bound to a [`PinnedBuf`]**: used in place on every plugin, `O(1)` per buffer.
//!
//! Errors of a run ([`Error::Exec`]) free every device allocation it made, as a one-shot
//! run does; the session stays usable.

mod bindings;
mod hold;
mod pinned;

pub use bindings::Bindings;
pub use pinned::PinnedBuf;

use crate::estimate;
use crate::exec::{self, HostBinding, IssueMode, Report, Resources};
use crate::lower::OpKind;
use crate::model::{Buf, Elem};
use crate::plugin::{Plugin, PluginInfo};
use crate::{Error, Plan};
use bindings::Memory;
use hold::Hold;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// Runs one plan on one plugin many times, keeping streams, kernels, events and host
/// memory between runs (see the module docs). One run at a time, enforced by `&mut self`
/// ([`Session::run`], [`Session::submit`]); `Send` and `Sync` (a `&Session` only reads
/// results and makes pinned buffers), so it can move to another thread or sit in a
/// struct shared between threads.
///
/// `'p` is how long the plan and the plugin are borrowed ([`Session::new`]); a session
/// that shares them through [`Arc`]s ([`Session::shared`]) is a `Session<'static>`, which
/// an application keeps in its own struct beside (or instead of) the plan and plugin:
///
/// ```
/// use offload_sched::model::{MapType, ProgramBuilder};
/// use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
/// use offload_sched::plugin::Plugin;
/// use offload_sched::schedule::ScheduleOptions;
/// use offload_sched::{Bindings, Buf, Plan, Session};
/// use std::sync::Arc;
///
/// struct Scaler {
///     session: Session<'static>,
///     x: Buf<f32>,
///     y: Buf<f32>,
/// }
///
/// impl Scaler {
///     fn new(n: u64) -> Result<Scaler, offload_sched::Error> {
///         let mut p = ProgramBuilder::new("scale");
///         let x = p.buf::<f32>("x", n);
///         let y = p.buf::<f32>("y", n);
///         p.target("saxpy", "saxpy").num(2.0).arg(x).arg(y)
///             .map(MapType::To, x).map(MapType::ToFrom, y);
///         let plan = Arc::new(Plan::new(p.build(), &ScheduleOptions::default())?);
///         let plugin: Arc<dyn Plugin> = Arc::new(HostPlugin::new(HostPluginOptions::default()));
///         Ok(Scaler { session: Session::shared(plan, plugin)?, x, y })
///     }
///
///     fn run(&mut self, xs: &[f32], ys: &mut [f32]) -> Result<(), offload_sched::Error> {
///         self.session.run(Bindings::new().input(self.x, xs).output(self.y, ys))?;
///         Ok(())
///     }
/// }
///
/// let mut s = Scaler::new(4)?;
/// let mut ys = vec![1.0; 4];
/// s.run(&[1.0, 2.0, 3.0, 4.0], &mut ys)?;
/// assert_eq!(ys, [3.0, 5.0, 7.0, 9.0]);
/// // It moves to another thread with everything it needs.
/// std::thread::spawn(move || s.run(&[0.0; 4], &mut ys)).join().unwrap()?;
/// # Ok::<(), offload_sched::Error>(())
/// ```
pub struct Session<'p> {
    plan: Hold<'p, Plan>,
    plugin: Hold<'p, dyn Plugin + 'p>,
    /// What the plugin can do, asked once ([`Plugin::info`]).
    info: PluginInfo,
    res: Resources,
    /// Per buffer: the program writes it on the host (a D2H lands in it, or a host
    /// task writes it), so it cannot be bound as an input.
    written: Vec<bool>,
    /// Per buffer, whether the last run bound it; `None` before a run has succeeded or
    /// after one failed.
    last: Option<Vec<bool>>,
    /// How runs issue (see [`IssueMode`]); `submit` always issues serially.
    issue: IssueMode,
    /// Whether `run` replays plugin graphs ([`Session::with_replay`]).
    replay: bool,
    /// Who runs the host ops ([`Session::with_host_ops`]).
    host_ops: exec::HostOps,
}

impl<'p> Session<'p> {
    /// A session for `plan` on `plugin`. Nothing is created until the first run.
    ///
    /// Errors: [`Error::Exec`] when the plan does not fit the plugin (a device it lacks, a
    /// peer copy on a plugin without them),
    /// or when its runs need more host memory than the machine has
    /// ([`Plan::memory_need`] without the result snapshot, which a session does not take:
    /// every buffer unbound, the device memory a host plugin keeps in RAM), with the
    /// figures.
    pub fn new(plan: &'p Plan, plugin: &'p dyn Plugin) -> Result<Session<'p>, Error> {
        Session::holding(Hold::Borrowed(plan), Hold::Borrowed(plugin))
    }

    fn holding(
        plan: Hold<'p, Plan>,
        plugin: Hold<'p, dyn Plugin + 'p>,
    ) -> Result<Session<'p>, Error> {
        let info = plugin.info();
        exec::fits_plugin(plan.graph(), plan.schedule(), &info).map_err(|e| plan.exec_error(e))?;
        let need = estimate::MemoryNeed {
            snapshot: 0,
            ..plan.memory_need_on(&info)
        };
        plan.check_memory(&need)?;
        let graph = plan.graph();
        let mut written = vec![false; graph.buffers.len()];
        for op in &graph.ops {
            match &op.kind {
                OpKind::D2H { section, .. } => written[section.buf.index()] = true,
                OpKind::HostTask { writes, .. } => {
                    for s in writes {
                        written[s.buf.index()] = true;
                    }
                }
                _ => {}
            }
        }
        let res = Resources::new(
            graph.ops.len(),
            graph.buffers.len(),
            plan.kernel_dir().map(|p| p.to_path_buf()),
        );
        Ok(Session {
            plan,
            plugin,
            info,
            res,
            written,
            last: None,
            issue: IssueMode::Auto,
            replay: false,
            host_ops: exec::HostOps::Lanes,
        })
    }

    /// A session that shares `plan` and `plugin` with the application instead of
    /// borrowing them: a `Session<'static>`, which can be kept in a struct, moved to
    /// another thread, or outlive the caller's handles (each `Arc` keeps its value alive
    /// until the session and its [`PinnedBuf`]s are gone). See [`Session`] for an example;
    /// a plugin opened by name ([`crate::plugin::open`], a `Box<dyn Plugin>`) becomes the
    /// `Arc` with `Arc::from(opened.plugin)`.
    ///
    /// Errors: as [`Session::new`].
    pub fn shared(plan: Arc<Plan>, plugin: Arc<dyn Plugin>) -> Result<Session<'static>, Error> {
        Session::holding(Hold::Shared(plan), Hold::Shared(plugin))
    }

    /// Sets how [`Session::run`] issues steps (default [`IssueMode::Auto`]).
    pub fn with_issue(mut self, issue: IssueMode) -> Session<'p> {
        self.issue = issue;
        self
    }

    /// Sets who runs the host ops of serial issue in [`Session::run`] ([`exec::HostOps`];
    /// default [`exec::HostOps::Lanes`], host-lane threads). [`Session::submit`] always
    /// uses host lanes, as it always issues serially.
    pub fn with_host_ops(mut self, host_ops: exec::HostOps) -> Session<'p> {
        self.host_ops = host_ops;
        self
    }

    /// Replays runs as plugin graphs ([`crate::replay`]): the first [`Session::run`]
    /// builds one graph per device segment of the schedule (CUDA: a CUDA graph built
    /// node by node; host: a checked node list run as one worker item), gives the plan's
    /// device memory a session-owned arena, and proves each graph's read-back edges
    /// against the schedule before launching it; every run then launches the graphs, after
    /// pointing copy nodes at the run's host memory where a binding moved it (or
    /// instantiating a graph again where the plugin cannot apply that). Results are the
    /// same as stream issue. Host waits inside the plan become segment boundaries: the
    /// host waits for a whole segment there.
    ///
    /// Falls back to stream issue, saying why in a debug log, for a schedule of several
    /// devices, a plugin without graphs, and a replay arena over the plan's device memory
    /// cap ([`crate::replay::Unsupported`]; stream issue keeps the cap). A plan with
    /// a `taskgraph` ([`crate::model::ProgramBuilder::taskgraph`]) is replayed whatever
    /// this says (its later executions launch the graph recorded from the first). A
    /// replayed run is not timed per op: the report's ops carry their graph's launch
    /// time, so [`crate::timeline::overlap()`] of it is `None`.
    /// [`Session::submit`] never replays. The report's [`Report::replay`] says what a
    /// run did (`None`: issued to streams), with the instantiation time of the first.
    pub fn with_replay(mut self, on: bool) -> Session<'p> {
        self.replay = on;
        self
    }

    /// The plan this session runs.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Runs the plan once with `bindings`, blocking until it completes. Bound outputs
    /// hold their results when it returns; unbound buffers are read with
    /// [`Session::read`]. The report's `buffers` is empty (nothing is copied out).
    ///
    /// Errors: [`Error::Bind`] before anything is issued (see [`Bindings`]);
    /// [`Error::Exec`] from the run (bound outputs are then left as they were when the
    /// plugin takes application memory in place, or untouched when staged).
    pub fn run(&mut self, bindings: Bindings<'_>) -> Result<Report, Error> {
        let (binds, bound) = self.bind(&bindings, false)?;
        self.last = None;
        let plan = &*self.plan;
        let opts = exec::ExecOptions {
            replay: self.replay,
            host_ops: self.host_ops,
            ..plan.exec_options(self.issue)
        };
        let job = exec::Job {
            graph: plan.graph(),
            sched: plan.schedule(),
            plugin: &*self.plugin,
            info: &self.info,
        };
        let report =
            exec::execute_kept(job, &opts, &mut self.res, binds).map_err(|e| plan.exec_error(e))?;
        self.last = Some(bound);
        Ok(report)
    }

    /// Starts a run with `bindings` and returns at the first point where the host would
    /// have to wait for the device (for most plans: with every copy and kernel issued).
    /// The handle holds the bindings' borrows until [`Submitted::wait`] (or its
    /// `Future`) completes it; dropping it waits. Bound memory, [`PinnedBuf`]s included,
    /// is staged (copied in here, copied out when the run completes), so the run never
    /// touches it after the handle is gone, even if the handle is leaked.
    ///
    /// Never replayed: a submitted run is issued to streams even on a session
    /// [`Session::with_replay`] (its report's [`Report::replay`] is `None`); use
    /// [`Session::run`] for replayed runs.
    ///
    /// Errors: as [`Session::run`]; an error starting the run tears it down here.
    pub fn submit<'s>(&'s mut self, bindings: Bindings<'s>) -> Result<Submitted<'s>, Error> {
        let (binds, bound) = self.bind(&bindings, true)?;
        let Session {
            plan,
            plugin,
            info,
            res,
            last,
            ..
        } = self;
        *last = None;
        let plan: &'s Plan = plan;
        let opts = plan.exec_options(IssueMode::Serial);
        let job = exec::Job {
            graph: plan.graph(),
            sched: plan.schedule(),
            plugin: &**plugin,
            info: &*info,
        };
        let started = exec::start(job, &opts, res, binds).map_err(|e| plan.exec_error(e))?;
        Ok(Submitted {
            started: Some(started),
            plan,
            last,
            bound: Some(bound),
            _bindings: bindings,
        })
    }

    /// The contents of unbound buffer `buf` after the last run, in place (no copy).
    ///
    /// Errors: [`Error::Bind`] when `buf` is another program's, when the last run bound
    /// it (its results are in the bound memory), or when no run has completed since the
    /// session was made or the last run failed.
    pub fn read<T: Elem>(&self, buf: Buf<T>) -> Result<&[T], Error> {
        let b = self.check_handle(buf)?;
        let bad = |detail: &str| self.bind_error(&b.name, detail.to_string());
        let Some(last) = &self.last else {
            return Err(bad("no run has completed (or the last one failed)"));
        };
        if last[buf.id().index()] {
            return Err(bad(
                "was bound in the last run: its results are in the bound memory",
            ));
        }
        let Some((ptr, bytes)) = self.res.host_of(buf.id().index()) else {
            return Err(bad("has no host memory in this session"));
        };
        // The plan's buffer gives the length, never the handle (a handle of a clone of
        // the program that was edited afterwards would say more).
        let len = usize::try_from(b.len).unwrap_or(usize::MAX);
        if Some(bytes) != len.checked_mul(std::mem::size_of::<T>()).map(|n| n as u64) {
            return Err(bad("has host memory of another size in this session"));
        }
        // SAFETY: plugin host memory of `bytes` = `len × size_of::<T>()` bytes (checked
        // just above; the buffer's type is `T`: checked), aligned to 64; every stream was
        // synchronized at the end of the last run and no run is in flight (`run` and
        // `submit` take `&mut self`).
        Ok(unsafe { std::slice::from_raw_parts(ptr.as_ptr() as *const T, len) })
    }

    /// `len` zeroed elements of page-locked host memory from this session's plugin, to
    /// bind without staging ([`Bindings::pinned_input`], [`Bindings::pinned_output`]).
    ///
    /// Errors: [`Error::Invalid`] naming the size when the plugin cannot allocate it.
    pub fn pinned<T: Elem>(&self, len: usize) -> Result<PinnedBuf<'p, T>, Error> {
        PinnedBuf::new(self.plugin.clone(), len).map_err(|e| {
            Error::Invalid(format!("pinned buffer of {len} {} elements: {e}", T::TYPE))
        })
    }

    fn bind_error(&self, buffer: &str, detail: String) -> Error {
        Error::Bind {
            name: self.plan.name().to_string(),
            buffer: buffer.to_string(),
            detail,
        }
    }

    /// The buffer of `buf`, checked to be of this session's program with type `T`.
    fn check_handle<T: Elem>(&self, buf: Buf<T>) -> Result<&crate::model::Buffer, Error> {
        let program = self.plan.program();
        let b = program
            .buffers
            .get(buf.id().index())
            .filter(|_| buf.tag().same(program.tag));
        match b {
            Some(b) if b.ty == T::TYPE => Ok(b),
            Some(b) => Err(self.bind_error(&b.name, format!("holds {}, not {}", b.ty, T::TYPE))),
            None => {
                let (buffer, why) =
                    crate::model::foreign_handle(buf.tag(), buf.id(), &program.name);
                Err(self.bind_error(&buffer, why))
            }
        }
    }

    /// The per-buffer bindings of a run, checked (see [`Bindings`]), and which buffers
    /// are bound. `stage`: copy application memory through plugin memory.
    fn bind(
        &self,
        bindings: &Bindings<'_>,
        stage: bool,
    ) -> Result<(Vec<HostBinding>, Vec<bool>), Error> {
        let program = self.plan.program();
        let n = program.buffers.len();
        let mut binds = vec![HostBinding::Unbound; n];
        let mut bound = vec![false; n];
        for e in &bindings.entries {
            let b = program
                .buffers
                .get(e.id.index())
                .filter(|_| e.tag.same(program.tag))
                .ok_or_else(|| {
                    let (buffer, why) = crate::model::foreign_handle(e.tag, e.id, &program.name);
                    self.bind_error(&buffer, why)
                })?;
            let bad = |detail: String| self.bind_error(&b.name, detail);
            if b.ty != e.ty {
                return Err(bad(format!("holds {}, bound to {} memory", b.ty, e.ty)));
            }
            if b.len != e.len {
                return Err(bad(format!(
                    "has {} elements, the bound memory {}",
                    b.len, e.len
                )));
            }
            let i = e.id.index();
            if std::mem::replace(&mut bound[i], true) {
                return Err(bad("is bound twice".into()));
            }
            if !e.writable && self.written[i] {
                return Err(bad(
                    "is written by the program on the host (a copy back or a host task): \
                     bind it with `output`, not `input`"
                        .into(),
                ));
            }
            binds[i] = match e.memory {
                Memory::App(ptr) => HostBinding::App {
                    ptr,
                    bytes: b.bytes(),
                    writable: e.writable,
                    stage,
                },
                Memory::Plugin(ptr, plugin) => {
                    if plugin != pinned::plugin_id(&*self.plugin) {
                        return Err(bad(format!(
                            "is bound to a PinnedBuf of another plugin, not of this session's \"{}\"",
                            self.info.name
                        )));
                    }
                    if stage {
                        // `submit`: copied like application memory, so that a leaked
                        // handle's run never touches memory the caller can reach again.
                        HostBinding::App {
                            ptr: ptr.as_ptr(),
                            bytes: b.bytes(),
                            writable: e.writable,
                            stage,
                        }
                    } else {
                        HostBinding::Plugin { ptr }
                    }
                }
            };
        }
        Ok((binds, bound))
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        self.res.settle(&*self.plugin);
        let names: Vec<String> = self
            .plan
            .graph()
            .buffers
            .iter()
            .map(|b| b.name.clone())
            .collect();
        if let Err((what, e)) = self.res.release(&*self.plugin, &names) {
            tracing::warn!(target: "offload_sched::session", error = %e, "{what}");
        }
    }
}

impl std::fmt::Debug for Session<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("plan", &self.plan.name())
            .field("plugin", &self.info.name)
            .finish_non_exhaustive()
    }
}

/// A run started by [`Session::submit`]: holds the session and the bindings' borrows
/// until it completes. [`Submitted::wait`] blocks; as a [`Future`] (no async runtime
/// needed) each poll issues what it can without blocking where the plugin can tell a
/// stream is done ([`Plugin::query`]: CUDA `cuStreamQuery`; plugins without it block in
/// the poll) and otherwise asks to be polled again. Dropping it waits for the run.
pub struct Submitted<'s> {
    started: Option<exec::Started<'s>>,
    plan: &'s Plan,
    last: &'s mut Option<Vec<bool>>,
    bound: Option<Vec<bool>>,
    _bindings: Bindings<'s>,
}

impl Submitted<'_> {
    /// Blocks until the run completes; bound outputs then hold their results.
    ///
    /// Errors: [`Error::Exec`] from the run (every device allocation freed).
    pub fn wait(mut self) -> Result<Report, Error> {
        self.complete()
    }

    fn complete(&mut self) -> Result<Report, Error> {
        let Some(started) = self.started.take() else {
            return Err(Error::Invalid(format!(
                "run of \"{}\" already completed",
                self.plan.name()
            )));
        };
        let r = started.finish().map_err(|e| self.plan.exec_error(e));
        if r.is_ok() {
            *self.last = self.bound.take();
        }
        r
    }
}

impl Future for Submitted<'_> {
    type Output = Result<Report, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        loop {
            let Some(started) = this.started.as_mut() else {
                return Poll::Ready(this.complete());
            };
            if !started.ready() {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            if started.advance() {
                return Poll::Ready(this.complete());
            }
        }
    }
}

impl Drop for Submitted<'_> {
    fn drop(&mut self) {
        if self.started.is_some() {
            if let Err(e) = self.complete() {
                tracing::warn!(target: "offload_sched::session", error = %e, "a dropped run failed");
            }
        }
    }
}

impl std::fmt::Debug for Submitted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Submitted")
            .field("plan", &self.plan.name())
            .field("done", &self.started.is_none())
            .finish()
    }
}
