//! The pipeline object: a [`Plan`] is a program lowered, scheduled and verified, ready to
//! run any number of times on a plugin.
//!
//! ```text
//! Program ──lower──▶ OpGraph ──schedule──▶ Schedule ──verify──▶ VerifyReport
//!   ▲ graph file (file::parse)                                 (the proof)
//!   ▲ WfCommons JSON (import::import_wfcommons)
//! ```
//!
//! Every caller (the command line, the bench, the tests, an application) goes through
//! `Plan`: the stages are run in one place, and errors come back as one [`Error`] rendered
//! with `file:line:column` where the input was a file. A `Plan` is immutable once built
//! (apart from [`Plan::scale_spins`]), `Send + Sync`, and cheap to re-schedule: the
//! program and the op graph are shared (`Arc`) between a plan and its
//! [`Plan::reschedule`]d copies.
//!
//! ```
//! use offload_sched::model::{ElemType, Init, MapType, ProgramBuilder};
//! use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
//! use offload_sched::schedule::ScheduleOptions;
//! use offload_sched::Plan;
//!
//! let mut b = ProgramBuilder::new("doc");
//! let x = b.buffer("x", ElemType::F32, 1024, Init::Fill(1.0));
//! let y = b.buffer("y", ElemType::F32, 1024, Init::Fill(2.0));
//! b.target("r0", "saxpy") // y = 2·x + y
//!     .num(2.0)
//!     .arg(x)
//!     .arg(y)
//!     .map(MapType::To, x)
//!     .map(MapType::ToFrom, y);
//! let plan = Plan::new(b.build(), &ScheduleOptions::default())?;
//! let report = plan.run(&HostPlugin::new(HostPluginOptions::default()))?;
//! assert_eq!(report.buffers.as_f32("y").unwrap()[0], 4.0);
//! // The same buffers from the sequential reference interpreter.
//! offload_sched::reference::check(&report.buffers, &plan.reference()?).unwrap();
//! # Ok::<(), offload_sched::Error>(())
//! ```

use crate::error::Error;
use crate::estimate as memory;
use crate::estimate::{MemoryLimit, MemoryNeed};
use crate::exec::{self, Buffers, ExecOptions, IssueMode, Report};
use crate::file::{self, SourceFile};
use crate::import::{self, WfOptions};
use crate::lower::{self, OpGraph};
use crate::model::Program;
use crate::plugin::Plugin;
use crate::reference;
use crate::schedule::{self, Schedule, ScheduleOptions};
use crate::verify::{self, VerifyReport};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// A verified schedule of a program: program, op graph, schedule and the verifier's proof.
/// See the module docs.
#[derive(Clone, Debug)]
pub struct Plan {
    name: String,
    source: Option<Arc<SourceFile>>,
    program: Arc<Program>,
    graph: Arc<OpGraph>,
    schedule: Schedule,
    proof: VerifyReport,
    options: ScheduleOptions,
    /// How the program was lowered (transfer elision on or off).
    lower_options: lower::LowerOptions,
    kernel_dir: Option<PathBuf>,
    /// What [`Plan::run`] and [`Plan::reference`] check their memory need against.
    memory_limit: MemoryLimit,
    /// [`memory::device_bytes`] of the schedule, computed on first use.
    device_bytes: OnceLock<(u64, u64)>,
}

impl Plan {
    /// Lowers, schedules and verifies a program built in memory (the
    /// [`ProgramBuilder`](crate::model::ProgramBuilder)'s). Relative user-kernel library
    /// paths go to the plugin as written (see [`Plan::with_kernel_dir`]).
    ///
    /// Errors: [`Error::Invalid`] (`options.streams_per_device` outside 1 to
    /// [`schedule::MAX_STREAMS_PER_DEVICE`]), [`Error::Lower`] (named by the program),
    /// [`Error::Verify`] (a scheduler bug: the schedule is never run unproven).
    ///
    /// Complexity: the lowering's, the scheduler's and the verifier's (near-linear in ops
    /// and edges for the `minimal` policy's proof; see [`verify::verify`]).
    pub fn new(program: Program, options: &ScheduleOptions) -> Result<Plan, Error> {
        Plan::new_lowered(program, options, &lower::LowerOptions::default())
    }

    /// [`Plan::new`] lowered with `lower_options` (transfer elision off with
    /// [`lower::LowerOptions::no_elide`]: every copy OpenMP's mapping rules name, as
    /// libomptarget issues them), in one lowering (not [`Plan::new`] then
    /// [`Plan::relower`], which lowers twice).
    ///
    /// Errors: as [`Plan::new`].
    pub fn new_lowered(
        program: Program,
        options: &ScheduleOptions,
        lower_options: &lower::LowerOptions,
    ) -> Result<Plan, Error> {
        let name = program.name.clone();
        Plan::build_with(program, (name, None), options, None, lower_options)
    }

    /// Reads, parses, lowers, schedules and verifies a graph file. User-kernel libraries
    /// given by relative paths resolve against the file's real folder.
    ///
    /// Errors: [`Error::File`] (cannot read, not UTF-8, a syntax or semantic error, all
    /// located), [`Error::Lower`] (located at the construct), [`Error::Invalid`] and
    /// [`Error::Verify`] as for [`Plan::new`].
    pub fn from_file(path: impl AsRef<Path>, options: &ScheduleOptions) -> Result<Plan, Error> {
        Plan::from_file_with(path.as_ref(), options, |_| {})
    }

    /// [`Plan::from_file`] with every construct placed by the lowering
    /// ([`Program::place_all_auto`]: `device = "auto"` everywhere, explicit devices of
    /// the file overridden) over `devices` devices (`None`: the file's `devices`). The
    /// CLI's `--device auto [--devices N]`.
    ///
    /// Errors: as [`Plan::from_file`].
    pub fn from_file_auto(
        path: impl AsRef<Path>,
        options: &ScheduleOptions,
        devices: Option<u32>,
    ) -> Result<Plan, Error> {
        Plan::from_file_with(path.as_ref(), options, |p| {
            p.place_all_auto(devices.unwrap_or(p.devices))
        })
    }

    /// [`Plan::from_file`], with `edit` applied to the parsed program before lowering.
    fn from_file_with(
        path: &Path,
        options: &ScheduleOptions,
        edit: impl FnOnce(&mut Program),
    ) -> Result<Plan, Error> {
        let src = SourceFile::read(path)?;
        let mut program = file::parse(&src)?;
        edit(&mut program);
        let name = src.path.clone();
        Plan::build(
            program,
            name,
            Some(Arc::new(src)),
            options,
            Some(file::graph_dir(path)),
        )
    }

    /// Parses a graph file's text held in memory (`src.path` names it in errors).
    ///
    /// Errors: as [`Plan::from_file`], less the read errors.
    pub fn from_source(src: SourceFile, options: &ScheduleOptions) -> Result<Plan, Error> {
        let program = file::parse(&src)?;
        let name = src.path.clone();
        Plan::build(program, name, Some(Arc::new(src)), options, None)
    }

    /// Imports a WfCommons WfFormat workflow (JSON text; `source_name` names it in
    /// errors), then lowers, schedules and verifies it.
    ///
    /// Errors: [`Error::Import`] (a JSON syntax error is located), [`Error::Lower`],
    /// [`Error::Invalid`] and [`Error::Verify`] as for [`Plan::new`].
    pub fn from_wfcommons(
        json_text: &str,
        source_name: &str,
        import: &WfOptions,
        options: &ScheduleOptions,
    ) -> Result<Plan, Error> {
        let program = import_wfcommons(json_text, source_name, import)?;
        Plan::build(program, source_name.to_string(), None, options, None)
    }

    fn build(
        program: Program,
        name: String,
        source: Option<Arc<SourceFile>>,
        options: &ScheduleOptions,
        kernel_dir: Option<PathBuf>,
    ) -> Result<Plan, Error> {
        let lower_options = lower::LowerOptions::default();
        Plan::build_with(program, (name, source), options, kernel_dir, &lower_options)
    }

    fn build_with(
        program: Program,
        (name, source): (String, Option<Arc<SourceFile>>),
        options: &ScheduleOptions,
        kernel_dir: Option<PathBuf>,
        lower_options: &lower::LowerOptions,
    ) -> Result<Plan, Error> {
        let graph = lower::lower_with(&program, lower_options).map_err(|error| Error::Lower {
            name: name.clone(),
            source_file: source.clone(),
            error: Box::new(error),
        })?;
        let limit = MemoryLimit::default();
        let (schedule, proof) = schedule_and_verify(&name, &graph, options, &limit)?;
        Ok(Plan {
            name,
            source,
            program: Arc::new(program),
            graph: Arc::new(graph),
            schedule,
            proof,
            options: options.clone(),
            lower_options: lower_options.clone(),
            kernel_dir,
            memory_limit: MemoryLimit::default(),
            device_bytes: OnceLock::new(),
        })
    }

    /// The same program and op graph scheduled again with other options (another
    /// policy, pool size or random-stream seed), verified. The program and graph are
    /// shared, not copied.
    ///
    /// Errors: [`Error::Invalid`] (streams per device out of range, as for
    /// [`Plan::new`]), [`Error::Verify`].
    pub fn reschedule(&self, options: &ScheduleOptions) -> Result<Plan, Error> {
        let (schedule, proof) =
            schedule_and_verify(&self.name, &self.graph, options, &self.memory_limit)?;
        Ok(Plan {
            name: self.name.clone(),
            source: self.source.clone(),
            program: Arc::clone(&self.program),
            graph: Arc::clone(&self.graph),
            schedule,
            proof,
            options: options.clone(),
            lower_options: self.lower_options.clone(),
            kernel_dir: self.kernel_dir.clone(),
            memory_limit: self.memory_limit.clone(),
            device_bytes: OnceLock::new(),
        })
    }

    /// The same program lowered again with `options` (transfer elision on,
    /// [`lower::LowerOptions::elided`], the default and the CLI's `--elide`, or off,
    /// [`lower::LowerOptions::no_elide`], `--no-elide`), then scheduled with this plan's
    /// options and verified (the elisions proven with it). Plans are built with
    /// [`lower::LowerOptions::default`] (or [`Plan::new_lowered`]'s). Returns a copy of `self` when the
    /// options are the ones it was lowered with. Spins scaled by [`Plan::scale_spins`]
    /// are not carried over (the program is lowered as written).
    ///
    /// Errors: as [`Plan::new`]; [`Error::Lower`] differs between the options only by
    /// [`lower::LowerError::DeviceMemory`] (a construct over
    /// [`lower::LowerOptions::device_memory`]).
    pub fn relower(&self, options: &lower::LowerOptions) -> Result<Plan, Error> {
        if *options == self.lower_options {
            return Ok(self.clone());
        }
        let graph = lower::lower_with(&self.program, options).map_err(|error| Error::Lower {
            name: self.name.clone(),
            source_file: self.source.clone(),
            error: Box::new(error),
        })?;
        let (schedule, proof) =
            schedule_and_verify(&self.name, &graph, &self.options, &self.memory_limit)?;
        Ok(Plan {
            graph: Arc::new(graph),
            schedule,
            proof,
            lower_options: options.clone(),
            device_bytes: OnceLock::new(),
            ..self.clone()
        })
    }

    /// The lowering options the plan's graph was made with.
    pub fn lower_options(&self) -> &lower::LowerOptions {
        &self.lower_options
    }

    /// Resolve relative user-kernel library paths against `dir` (a plan from a graph file
    /// already uses the file's folder).
    pub fn with_kernel_dir(mut self, dir: impl Into<PathBuf>) -> Plan {
        self.kernel_dir = Some(dir.into());
        self
    }

    /// Check the host memory of runs and of the reference against `limit` instead of what
    /// the machine has (see `estimate`): a budget of one's own, a test's figure, or
    /// [`MemoryLimit::Unchecked`].
    pub fn with_memory_limit(mut self, limit: MemoryLimit) -> Plan {
        self.memory_limit = limit;
        self
    }

    /// The limit runs and the reference are checked against.
    pub fn memory_limit(&self) -> &MemoryLimit {
        &self.memory_limit
    }

    /// The host memory a run on `plugin` needs, by part ([`memory::run_need`]): its
    /// buffers, its result snapshot and, where the plugin keeps device memory in host RAM
    /// ([`PluginInfo::device_memory`](crate::plugin::PluginInfo::device_memory)), an
    /// upper bound on the device memory live at once and the plugin's device cache
    /// ([`PluginInfo::device_cache_bytes`](crate::plugin::PluginInfo::device_cache_bytes)).
    ///
    /// Complexity: `O(steps + streams)` the first time, `O(buffers + allocations)` after.
    pub fn memory_need(&self, plugin: &dyn Plugin) -> MemoryNeed {
        self.memory_need_on(&plugin.info())
    }

    /// [`Plan::memory_need`] for a plugin that says `info`.
    pub fn memory_need_on(&self, info: &crate::plugin::PluginInfo) -> MemoryNeed {
        let on_host = info.device_memory.is_host_ram();
        let mut need = self.memory_need_for(on_host);
        if on_host {
            need.device_cache = memory::device_cache_bytes(&self.graph, info.device_cache_bytes);
        }
        need
    }

    /// [`Plan::memory_need`] for a plugin whose device memory is host RAM
    /// (`device_on_host`: the host plugin) or not (CUDA, null), without a device cache.
    pub fn memory_need_for(&self, device_on_host: bool) -> MemoryNeed {
        let buffers = memory::buffer_bytes(&self.graph);
        let device = match device_on_host {
            true => *self
                .device_bytes
                .get_or_init(|| memory::device_bytes(&self.graph, &self.schedule)),
            false => (0, 0),
        };
        memory::need_of_run(buffers, device)
    }

    /// What [`Plan::reference`] needs at its peak and what its result holds:
    /// `(peak, result)` ([`memory::reference_bytes`]). `O(ops)`.
    pub fn reference_memory(&self) -> (u64, u64) {
        memory::reference_bytes(&self.graph)
    }

    /// Refuses `need` (a caller's combination: a run and the reference, results held)
    /// if it is more than the plan's memory limit allows, as [`Plan::run`] does before
    /// anything is allocated.
    ///
    /// Errors: [`Error::Exec`] with [`exec::ExecError::OutOfMemory`] (both figures) or
    /// [`exec::ExecError::MemoryLimit`].
    pub fn check_memory(&self, need: &MemoryNeed) -> Result<(), Error> {
        memory::check(need, &self.memory_limit).map_err(|error| self.exec_error(error.into()))
    }

    /// Multiplies the duration (`us`, µs) of every built-in `spin` call (a target
    /// region's or a host task's) by `factor` (`run --spin-scale`): the dependency
    /// structure and the schedule are unchanged, the waiting shrinks. The op graph is
    /// copied only if another plan shares it. See [`lower::scale_spins`].
    ///
    /// Errors: [`Error::Invalid`] when `factor` is not finite and ≥ 0 or a scaled spin
    /// would exceed the one-hour limit; nothing is changed then.
    pub fn scale_spins(&mut self, factor: f64) -> Result<(), Error> {
        // `lower::scale_spins` checks every spin before changing any.
        lower::scale_spins(Arc::make_mut(&mut self.graph), factor).map_err(Error::Invalid)
    }

    /// The input's name: the graph file's path as given, the WfCommons file's name, or the
    /// program's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The graph file the plan was parsed from, if any (for diagnostics).
    pub fn source(&self) -> Option<&SourceFile> {
        self.source.as_deref()
    }

    /// The program (the constructs as written).
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// The op graph (H2D, kernel, D2H, alloc and free ops with their dependencies).
    pub fn graph(&self) -> &OpGraph {
        &self.graph
    }

    /// What the lowering found legal but probably not meant, in program order (see
    /// [`lower::Warning`]; [`crate::error::render_warning`] shows one as the command line
    /// does).
    pub fn warnings(&self) -> &[lower::Warning] {
        &self.graph.warnings
    }

    /// The verified schedule.
    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    /// What the verifier proved about [`Plan::schedule`].
    pub fn proof(&self) -> &VerifyReport {
        &self.proof
    }

    /// The options the schedule was made with.
    pub fn options(&self) -> &ScheduleOptions {
        &self.options
    }

    /// The folder relative user-kernel paths (host libraries, CUDA files) resolve against,
    /// for host tasks, the reference and, before they reach the plugin, device kernels.
    /// `None`: paths go to the plugin as written (a bare `libk.so` is then searched on
    /// the dynamic loader's path, as `dlopen` does).
    pub fn kernel_dir(&self) -> Option<&Path> {
        self.kernel_dir.as_deref()
    }

    /// The schedule as Graphviz DOT (one cluster per stream; see [`crate::dot`]).
    pub fn to_dot(&self) -> String {
        crate::dot::to_dot(&self.graph, &self.schedule)
    }

    /// The schedule as Graphviz DOT in one view: ops, regions, streams, or `Auto` (the
    /// region view above [`crate::dot::AUTO_REGION_VIEW_OPS`] ops); see [`crate::dot`].
    pub fn to_dot_view(&self, view: crate::dot::DotView) -> String {
        crate::dot::to_dot_view(&self.graph, &self.schedule, view)
    }

    /// Every buffer's final contents from the sequential reference interpreter (what any
    /// correct run must produce; see [`reference::reference()`]).
    ///
    /// Errors: [`Error::Exec`]: more host memory needed than the plan's limit allows
    /// (refused before anything is allocated; [`Plan::reference_memory`]), a host kernel
    /// cannot be loaded, memory cannot be had.
    pub fn reference(&self) -> Result<Buffers, Error> {
        reference::reference(&self.graph, &self.exec_options(IssueMode::Serial))
            .map_err(|error| self.exec_error(error))
    }

    /// Runs the plan on `plugin`, issuing as [`IssueMode::Auto`] decides. The schedule is
    /// trusted (it carries the verifier's proof); only its fit to the plugin (devices) and
    /// its host memory ([`Plan::memory_need`] against [`Plan::memory_limit`]) are checked
    /// before anything is allocated or issued.
    ///
    /// Errors: [`Error::Exec`] ([`exec::ExecError::OutOfMemory`] for a run that does not
    /// fit, with the figures); every device allocation, event and host allocation made is
    /// released before returning.
    pub fn run(&self, plugin: &dyn Plugin) -> Result<Report, Error> {
        self.run_with(plugin, IssueMode::Auto)
    }

    /// [`Plan::run`] with the issue mode given.
    pub fn run_with(&self, plugin: &dyn Plugin, issue: IssueMode) -> Result<Report, Error> {
        self.run_observed(plugin, issue, None)
    }

    /// [`Plan::run_with`], telling `on_issue` of every device op as it is issued (a
    /// progress display: see [`exec::OnIssue`]).
    pub fn run_observed(
        &self,
        plugin: &dyn Plugin,
        issue: IssueMode,
        on_issue: Option<exec::OnIssue>,
    ) -> Result<Report, Error> {
        self.run_opts(
            plugin,
            &ExecOptions {
                on_issue,
                ..self.exec_options(issue)
            },
        )
    }

    /// A one-shot run with `opts` (made from [`Plan::exec_options`]): the memory check,
    /// then the verified schedule's execution; errors located in the plan.
    pub(crate) fn run_opts(
        &self,
        plugin: &dyn Plugin,
        opts: &ExecOptions,
    ) -> Result<Report, Error> {
        self.check_memory(&self.memory_need(plugin))?;
        exec::execute_verified(&self.graph, &self.schedule, plugin, opts)
            .map_err(|error| self.exec_error(error))
    }

    /// The typed handle of the buffer named `name` (for programs loaded from files;
    /// the builder returns handles as it declares buffers).
    ///
    /// Errors: [`Error::Bind`] when no buffer has that name or its element type is not
    /// `T`.
    pub fn buffer<T: crate::model::Elem>(&self, name: &str) -> Result<crate::model::Buf<T>, Error> {
        let bad = |detail: String| Error::Bind {
            name: self.name.clone(),
            buffer: name.to_string(),
            detail,
        };
        let id = self.program.buffer_id(name).ok_or_else(|| {
            let names: Vec<&str> = self
                .program
                .buffers
                .iter()
                .map(|b| b.name.as_str())
                .collect();
            bad(format!("no such buffer (declared: {})", names.join(", ")))
        })?;
        let b = self.program.buffer(id);
        if b.ty != T::TYPE {
            return Err(bad(format!("holds {}, not {}", b.ty, T::TYPE)));
        }
        self.program.tag.remember(&self.name, id, name);
        Ok(crate::model::Buf::new(id, b.len, self.program.tag))
    }

    pub(crate) fn exec_options(&self, issue: IssueMode) -> ExecOptions {
        ExecOptions {
            kernel_dir: self.kernel_dir.clone(),
            issue,
            memory: self.memory_limit.clone(),
            on_issue: None,
            replay: false,
            host_ops: crate::exec::HostOps::Lanes,
        }
    }

    /// `error` as the plan's [`Error::Exec`], located in the graph file where the
    /// program came from one ([`crate::error::exec_location`]).
    pub(crate) fn exec_error(&self, error: exec::ExecError) -> Error {
        let at = (self.source.as_deref())
            .and_then(|src| crate::error::exec_location(src, &self.graph, &error));
        Error::Exec {
            name: self.name.clone(),
            error: Box::new(error),
            at,
        }
    }
}

/// Colours and synchronizes `graph` under `options`, then proves the schedule. Between
/// the colouring and the sync pass, the host memory their clock tables need is checked
/// against `limit` ([`check_clock_memory`]).
fn schedule_and_verify(
    name: &str,
    graph: &OpGraph,
    options: &ScheduleOptions,
    limit: &MemoryLimit,
) -> Result<(Schedule, VerifyReport), Error> {
    let max = schedule::MAX_STREAMS_PER_DEVICE;
    if !(1..=max).contains(&options.streams_per_device) {
        return Err(Error::Invalid(format!(
            "{name}: {} streams per device; a schedule takes 1 to {max}",
            options.streams_per_device
        )));
    }
    let assignment = schedule::assign_streams(graph, options);
    check_clock_memory(name, graph, &assignment, limit)?;
    let s = schedule::insert_sync(graph, &assignment, options.policy, options.host_lanes);
    let proof = verify::verify(graph, &s).map_err(|error| Error::Verify {
        name: name.to_string(),
        error,
    })?;
    Ok((s, proof))
}

/// Refuses a schedule whose sync pass and proof would need more host memory for their
/// vector clocks ([`schedule::sync::clock_bytes`], an upper bound) than `limit` allows
/// ([`memory::available`]), before they allocate it: one entry per stream that carries
/// work, so only programs that spread over thousands of streams get near a limit.
/// Needs under [`memory::PROBE_BYTES`] are checked only against a limit given (the
/// machine is not probed for them), as for runs.
///
/// Errors: [`Error::Invalid`] naming the program, the figures and what to lower
/// (`--streams`, devices); [`Error::Exec`] with [`exec::ExecError::MemoryLimit`] when
/// [`memory::ENV`] is not a size.
fn check_clock_memory(
    name: &str,
    graph: &OpGraph,
    a: &schedule::StreamAssignment,
    limit: &MemoryLimit,
) -> Result<(), Error> {
    let need = schedule::sync::clock_bytes(graph, a);
    let given = match limit {
        MemoryLimit::Unchecked => return Ok(()),
        MemoryLimit::Bytes(_) => true,
        MemoryLimit::Machine => std::env::var_os(memory::ENV).is_some_and(|v| !v.is_empty()),
    };
    if need < memory::PROBE_BYTES && !given {
        return Ok(());
    }
    let available = memory::available(limit).map_err(|error| Error::Exec {
        name: name.to_string(),
        error: Box::new(error.into()),
        at: None,
    })?;
    match available {
        Some(available) if need > available.bytes => {
            let used = a
                .op_stream
                .iter()
                .flatten()
                .collect::<std::collections::BTreeSet<_>>();
            Err(Error::Invalid(format!(
                "{name}: not enough host memory to schedule: the sync pass and its proof need up \
                 to {} for the vector clocks of {} streams that carry work ({} devices, {} \
                 streams each); {available}; use fewer streams per device (--streams) or \
                 fewer devices",
                crate::model::human_bytes(need),
                used.len(),
                graph.devices,
                a.pool,
            )))
        }
        _ => Ok(()),
    }
}

/// The schedule's text (streams, ops, events, host waits), as `offload-sched schedule`
/// prints it.
impl std::fmt::Display for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.schedule.fmt(f)
    }
}

/// Imports a WfCommons workflow into a [`Program`] with the import error wrapped for
/// rendering (`offload-sched import` writes the program as a graph file).
///
/// Errors: [`Error::Import`].
pub fn import_wfcommons(
    json_text: &str,
    source_name: &str,
    opts: &WfOptions,
) -> Result<Program, Error> {
    import::import_wfcommons(json_text, source_name, opts).map_err(|error| Error::Import {
        text: Arc::from(json_text),
        error: Box::new(error),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Plan>();
        assert_send_sync::<Error>();
    }

    #[test]
    fn from_source_locates_a_lowering_error() {
        let src = SourceFile::new(
            "t.toml",
            "name = \"t\"\n[[buffer]]\nname = \"x\"\ntype = \"f32\"\nlen = 4\n\n\
             [[body]]\ntarget = \"r\"\nkernel = \"fill\"\nargs = [\"x\", 1.0]\nmap = [\"present: x\"]\n",
        );
        let e = Plan::from_source(src, &ScheduleOptions::default()).unwrap_err();
        let text = e.render();
        // The lowering's error, at the map item of the file.
        assert!(
            text.starts_with("t.toml:11:18: error: region \"r\""),
            "{text}"
        );
        assert!(text.contains("not present"), "{text}");
        assert!(matches!(e, Error::Lower { .. }), "{e:?}");
    }

    #[test]
    fn streams_per_device_out_of_range_is_an_error() {
        for streams in [0, schedule::MAX_STREAMS_PER_DEVICE + 1, u32::MAX] {
            let o = ScheduleOptions {
                streams_per_device: streams,
                ..ScheduleOptions::default()
            };
            let e = Plan::new(crate::model::saxpy_regions(2, 64), &o).unwrap_err();
            assert_eq!(
                e.render(),
                format!(
                    "error: saxpy_regions: {streams} streams per device; a schedule takes 1 to 1024\n"
                )
            );
        }
    }

    #[test]
    fn a_run_that_does_not_fit_is_refused_with_the_figures_before_anything_is_allocated() {
        use crate::plugin::faulty::{FaultKind, FaultyPlugin};
        use crate::plugin::host::{HostPlugin, HostPluginOptions};
        use crate::plugin::null::NullPlugin;
        let plan = Plan::new(
            crate::model::saxpy_regions(2, 1 << 20),
            &ScheduleOptions::default(),
        )
        .unwrap();
        let p = FaultyPlugin::new(
            HostPlugin::new(HostPluginOptions::default()),
            FaultKind::Alloc,
            u64::MAX,
        );
        // 4 buffers of 1 MiB; every device copy live at once (one host wait, at the end);
        // the snapshot after the frees.
        let need = plan.memory_need(&p);
        assert_eq!(
            (
                need.buffers,
                need.device,
                need.device_at_snapshot,
                need.snapshot
            ),
            (4 << 20, 4 << 20, 0, 4 << 20)
        );
        // The host plugin's free lists keep the four freed blocks to the end.
        assert_eq!(need.device_cache, 4 << 20);
        assert_eq!(need.total(), 12 << 20);
        // The null plugin keeps no device memory.
        assert_eq!(plan.memory_need(&NullPlugin::new()).device, 0);
        let tight = plan
            .clone()
            .with_memory_limit(MemoryLimit::Bytes(need.total() - 1));
        let e = tight.run(&p).unwrap_err();
        assert_eq!(
            e.render(),
            "saxpy_regions: error: not enough host memory: needed 12 MiB at its peak (buffers \
             4 MiB, device memory emulated on the host 4 MiB, result snapshot 4 MiB (taken \
             when 0 B of device memory is live), freed device blocks kept for reuse 4 MiB); \
             12.0 MiB available (the limit given); nothing was run\n"
        );
        assert!(matches!(
            &e,
            Error::Exec { error, .. } if matches!(**error, exec::ExecError::OutOfMemory { .. })
        ));
        assert_eq!((p.host_allocs(), p.allocs()), (0, 0), "nothing allocated");
        // The reference holds its buffers and one region's device copies at a time.
        assert_eq!(plan.reference_memory(), (6 << 20, 4 << 20));
        let small = plan
            .clone()
            .with_memory_limit(MemoryLimit::Bytes((6 << 20) - 1));
        assert!(small.reference().unwrap_err().to_string().contains(
            "not enough host memory: needed 6 MiB at its peak (reference interpreter 6 MiB)"
        ));
        // At the limit, both run.
        let fits = plan.with_memory_limit(MemoryLimit::Bytes(12 << 20));
        let r = fits.run(&p).unwrap();
        reference::check(&r.buffers, &fits.reference().unwrap()).unwrap();
    }

    #[test]
    fn reschedule_shares_the_graph() {
        let p = Plan::new(
            crate::model::saxpy_regions(4, 256),
            &ScheduleOptions::default(),
        )
        .unwrap();
        let q = p
            .reschedule(&ScheduleOptions {
                streams_per_device: 1,
                ..ScheduleOptions::default()
            })
            .unwrap();
        assert!(std::ptr::eq(p.graph(), q.graph()));
        assert_eq!(q.schedule().used_streams(), 1);
        assert_eq!(p.schedule().used_streams(), 4);
    }
}
