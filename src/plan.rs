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
//! offload_sched::exec::check(&report.buffers, &plan.reference()?).unwrap();
//! # Ok::<(), offload_sched::Error>(())
//! ```

use crate::error::Error;
use crate::exec::{self, Buffers, ExecOptions, IssueMode, Report};
use crate::file::{self, SourceFile};
use crate::import::{self, WfOptions};
use crate::lower::{self, OpGraph};
use crate::model::Program;
use crate::plugin::Plugin;
use crate::schedule::{self, Schedule, ScheduleOptions};
use crate::verify::{self, VerifyReport};
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
    kernel_dir: Option<PathBuf>,
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
        let name = program.name.clone();
        Plan::build(program, name, None, options, None)
    }

    /// Reads, parses, lowers, schedules and verifies a graph file. User-kernel libraries
    /// given by relative paths resolve against the file's real folder.
    ///
    /// Errors: [`Error::File`] (cannot read, not UTF-8, a syntax or semantic error, all
    /// located), [`Error::Lower`] (located at the construct), [`Error::Invalid`] and
    /// [`Error::Verify`] as for [`Plan::new`].
    pub fn from_file(path: impl AsRef<Path>, options: &ScheduleOptions) -> Result<Plan, Error> {
        let path = path.as_ref();
        let src = SourceFile::read(path)?;
        let program = file::parse(&src)?;
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
        let graph = lower::lower(&program).map_err(|error| Error::Lower {
            name: name.clone(),
            source_file: source.clone(),
            error: Box::new(error),
        })?;
        let (schedule, proof) = schedule_and_verify(&name, &graph, options)?;
        Ok(Plan {
            name,
            source,
            program: Arc::new(program),
            graph: Arc::new(graph),
            schedule,
            proof,
            options: options.clone(),
            kernel_dir,
        })
    }

    /// The same program and op graph scheduled again with other options (another
    /// policy, pool size or random-stream seed), verified. The program and graph are
    /// shared, not copied.
    ///
    /// Errors: [`Error::Invalid`] (streams per device out of range, as for
    /// [`Plan::new`]), [`Error::Verify`].
    pub fn reschedule(&self, options: &ScheduleOptions) -> Result<Plan, Error> {
        let (schedule, proof) = schedule_and_verify(&self.name, &self.graph, options)?;
        Ok(Plan {
            name: self.name.clone(),
            source: self.source.clone(),
            program: Arc::clone(&self.program),
            graph: Arc::clone(&self.graph),
            schedule,
            proof,
            options: options.clone(),
            kernel_dir: self.kernel_dir.clone(),
        })
    }

    /// Resolve relative user-kernel library paths against `dir` (a plan from a graph file
    /// already uses the file's folder).
    pub fn with_kernel_dir(mut self, dir: impl Into<PathBuf>) -> Plan {
        self.kernel_dir = Some(dir.into());
        self
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
    /// correct run must produce; see [`exec::reference()`]).
    ///
    /// Errors: [`Error::Exec`] (a host kernel cannot be loaded, memory cannot be had).
    pub fn reference(&self) -> Result<Buffers, Error> {
        exec::reference(&self.graph, &self.exec_options(IssueMode::Serial))
            .map_err(|error| self.exec_error(error))
    }

    /// Runs the plan on `plugin`, issuing as [`IssueMode::Auto`] decides. The schedule is
    /// trusted (it carries the verifier's proof); only its fit to the plugin (devices) is
    /// checked before anything is issued.
    ///
    /// Errors: [`Error::Exec`]; every device allocation, event and host allocation made is
    /// released before returning.
    pub fn run(&self, plugin: &dyn Plugin) -> Result<Report, Error> {
        self.run_with(plugin, IssueMode::Auto)
    }

    /// [`Plan::run`] with the issue mode given.
    pub fn run_with(&self, plugin: &dyn Plugin, issue: IssueMode) -> Result<Report, Error> {
        exec::execute_verified(
            &self.graph,
            &self.schedule,
            plugin,
            &self.exec_options(issue),
        )
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
        Ok(crate::model::Buf::new(id, b.len, self.program.tag))
    }

    pub(crate) fn exec_options(&self, issue: IssueMode) -> ExecOptions {
        ExecOptions {
            kernel_dir: self.kernel_dir.clone(),
            issue,
        }
    }

    pub(crate) fn exec_error(&self, error: exec::ExecError) -> Error {
        Error::Exec {
            name: self.name.clone(),
            error: Box::new(error),
        }
    }
}

/// Colours and synchronizes `graph` under `options`, then proves the schedule.
fn schedule_and_verify(
    name: &str,
    graph: &OpGraph,
    options: &ScheduleOptions,
) -> Result<(Schedule, VerifyReport), Error> {
    let max = schedule::MAX_STREAMS_PER_DEVICE;
    if !(1..=max).contains(&options.streams_per_device) {
        return Err(Error::Invalid(format!(
            "{name}: {} streams per device; a schedule takes 1 to {max}",
            options.streams_per_device
        )));
    }
    let s = schedule::schedule(graph, options);
    let proof = verify::verify(graph, &s).map_err(|error| Error::Verify {
        name: name.to_string(),
        error,
    })?;
    Ok((s, proof))
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
