//! The `offload-sched` command line: `schedule`, `verify`, `dot`, `run`, `import`,
//! `bench`.
//!
//! Every command loads a graph file, lowers, schedules and verifies it before doing its
//! job; any error is printed as `file:line:column` with a caret and the command exits
//! non-zero without writing anything.

mod distributed;
mod paths;
mod progress;
mod summary;

use offload_sched::estimate;
use offload_sched::reference;
use offload_sched::timeline;
use summary::summary;

use clap::{Args, Parser, Subcommand, ValueEnum};
use offload_sched::dot::DotView;
use offload_sched::exec;
use offload_sched::file;
use offload_sched::plugin::Plugin;
use offload_sched::schedule::{ScheduleOptions, SyncPolicy};
use offload_sched::{Error, Plan};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// Offload scheduler: OpenMP-style target regions → streams, events and host waits.
#[derive(Parser, Debug)]
#[command(name = "offload-sched", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Print the schedule of a graph file: ops per stream, events, host waits.
    Schedule {
        /// The graph file (TOML: buffers, kernels and target regions; see graphs/).
        file: PathBuf,
        #[command(flatten)]
        sched: SchedArgs,
        /// Make the schedule for this plugin's devices, as `run` does: without
        /// `--device-memory`, `cuda` caps device memory at the device's free memory
        /// (`cuMemGetInfo`; src/plan_cap.rs). Without it the schedule is made for no
        /// device: unlimited unless `--device-memory` is given.
        #[arg(long, value_parser = offload_sched::plugin::NAMES)]
        plugin: Option<String>,
    },
    /// Verify the schedule (happens-before, and minimality under `minimal`).
    Verify {
        /// The graph file (TOML: buffers, kernels and target regions; see graphs/).
        file: PathBuf,
        #[command(flatten)]
        sched: SchedArgs,
    },
    /// Write the schedule as Graphviz DOT (stdout, or -o PATH).
    Dot {
        /// The graph file (TOML: buffers, kernels and target regions; see graphs/).
        file: PathBuf,
        #[command(flatten)]
        sched: SchedArgs,
        /// What one node is: `ops` (one per op, a cluster per stream), `regions` (one per
        /// region, filled by stream; edges: dependencies between regions, labelled with
        /// their events, host waits and bytes through host memory), `streams` (a lane
        /// per stream, regions in issue order, events across lanes), or `auto` (regions
        /// above 300 ops, else ops).
        #[arg(long, value_enum, default_value_t = ViewArg::Auto)]
        view: ViewArg,
        /// Output path (written only if everything succeeded).
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Execute a graph file on a plugin and print a summary.
    Run(RunArgs),
    /// The saxpy-regions benchmark (sync policies against hand-written CUDA, PyTorch and
    /// libomptarget), or with `--check` the CUDA correctness and fault checks; `bench
    /// dag`: task DAGs (blocked matmul, fan-out, wavefront, Montage) against LLVM 19.
    /// The same as the `offload-bench` binary.
    Bench(Box<offload_sched_bench::BenchCommand>),
    /// Import a workflow into a graph file.
    Import {
        #[command(subcommand)]
        format: ImportFormat,
    },
}

#[derive(Subcommand, Debug)]
pub enum ImportFormat {
    /// WfCommons WfFormat JSON (schema 1.4 / 1.5).
    Wfcommons {
        /// The workflow: a WfCommons WfFormat JSON file (a WfInstances trace).
        input: PathBuf,
        /// Output graph file (TOML).
        #[arg(short, long)]
        output: PathBuf,
        /// Seconds of spin per second of recorded task runtime.
        #[arg(long, default_value_t = 1e-3, allow_negative_numbers = true)]
        time_scale: f64,
        /// Buffer bytes per byte of recorded file size.
        #[arg(long, default_value_t = 1e-2, allow_negative_numbers = true)]
        size_scale: f64,
    },
}

/// Scheduling options shared by every command.
#[derive(Args, Debug, Clone)]
pub struct SchedArgs {
    /// Sync policy.
    #[arg(long, value_enum, default_value_t = PolicyArg::Minimal)]
    pub policy: PolicyArg,
    /// Streams per device (the pool size).
    #[arg(long, default_value_t = 4, allow_negative_numbers = true, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub streams: u32,
    /// Assign regions to random streams, from this seed.
    #[arg(long, value_name = "SEED")]
    pub random_streams: Option<u64>,
    /// Host lanes: host worker threads that run host tasks, closures and the host waits
    /// before them, ordered only by their dependencies (default: the machine's available
    /// parallelism, at most 8).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub host_lanes: Option<u32>,
    /// Fail (exit 1, nothing printed or run) when the graph file has warnings (an input
    /// mapped `tofrom` implicitly, a region with no `map`, a map no argument uses).
    #[arg(long)]
    pub deny_warnings: bool,
    /// `auto`: every construct of the file is placed on a device by the lowering (data
    /// locality, then load; see src/lower/placement.rs), overriding its `device`
    /// clauses, as if each said `device = "auto"`.
    #[arg(long, value_enum, value_name = "auto")]
    pub device: Option<DeviceArg>,
    /// With `--device auto`: the number of devices to place over (default: the file's
    /// `devices`).
    #[arg(long, requires = "device", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub devices: Option<u32>,
    /// Transfer elision (the default): keep device copies whose host section is
    /// unchanged and reuse them (H2D elided), defer each D2H to the last one needed,
    /// every elision proven by the verifier (see src/lower/elide.rs).
    #[arg(long, conflicts_with = "no_elide")]
    pub elide: bool,
    /// Issue every copy OpenMP's mapping rules name, as libomptarget does: no kept
    /// device copies, no deferred D2H (to compare with the default `--elide`).
    #[arg(long)]
    pub no_elide: bool,
    /// Device memory cap, bytes per device (`123`, `512KiB`, `256MiB`, `16GiB`; binary
    /// `KiB`/`K` = 1024 … `TiB`, `PiB`, `EiB`, decimal `KB`/`kB` = 1000, `MB`, `GB`, `TB`,
    /// `PB`, `EB`, any case; at most 2^64 − 1 bytes;
    /// `1.5MiB`: a fraction with a unit, if it gives whole bytes): the
    /// schedule keeps live device bytes within it at every point any execution can
    /// reach, evicting kept copies and ordering allocs after frees (src/lower/cap.rs);
    /// a region whose own working set is larger is refused. The host plugin then holds
    /// each device to it. Default: on CUDA the device's free memory when the plan is
    /// made for it (`cuMemGetInfo`, less the plugin's block cache; StarPU's
    /// STARPU_LIMIT_CUDA_MEM analogue); elsewhere unlimited.
    #[arg(long, value_name = "BYTES", value_parser = offload_sched::estimate::parse_bytes)]
    pub device_memory: Option<u64>,
    /// Which kept device copy to evict first: `belady` (furthest next use, the
    /// default) or `lru` (least recently used, StarPU's default).
    #[arg(long, value_name = "POLICY", default_value = "belady", value_parser = clap::builder::ValueParser::new(|s: &str| s.parse::<offload_sched::lower::EvictionPolicy>()))]
    pub eviction: offload_sched::lower::EvictionPolicy,
    /// Prefetch H2D copies of device copies that several regions share ahead of need,
    /// on a copy stream, under any cap or none (default: only under a device memory cap
    /// that binds: the lowering evicts, or allocs wait for frees; src/lower/prefetch.rs).
    #[arg(long, conflicts_with = "no_prefetch")]
    pub prefetch: bool,
    /// Never prefetch: every H2D stays in its region, on the region's stream.
    #[arg(long)]
    pub no_prefetch: bool,
}

impl SchedArgs {
    /// `--prefetch` / `--no-prefetch` ([`offload_sched::lower::Prefetch`]; default only
    /// under a cap that binds).
    pub fn prefetch_option(&self) -> offload_sched::lower::Prefetch {
        use offload_sched::lower::Prefetch;
        match (self.prefetch, self.no_prefetch) {
            (true, _) => Prefetch::On,
            (_, true) => Prefetch::Off,
            _ => Prefetch::CapBinds,
        }
    }
}

/// `--device`: only `auto` (explicit devices are written in the graph file).
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceArg {
    Auto,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyArg {
    PerOp,
    PerRegion,
    Minimal,
}

impl From<PolicyArg> for SyncPolicy {
    fn from(p: PolicyArg) -> SyncPolicy {
        match p {
            PolicyArg::PerOp => SyncPolicy::PerOp,
            PolicyArg::PerRegion => SyncPolicy::PerRegion,
            PolicyArg::Minimal => SyncPolicy::Minimal,
        }
    }
}

/// `dot --view`.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViewArg {
    Ops,
    Regions,
    Streams,
    Auto,
}

impl From<ViewArg> for DotView {
    fn from(v: ViewArg) -> DotView {
        match v {
            ViewArg::Ops => DotView::Ops,
            ViewArg::Regions => DotView::Regions,
            ViewArg::Streams => DotView::Streams,
            ViewArg::Auto => DotView::Auto,
        }
    }
}

impl SchedArgs {
    pub fn options(&self) -> ScheduleOptions {
        ScheduleOptions {
            policy: self.policy.into(),
            streams_per_device: self.streams,
            random_streams: self.random_streams,
            host_lanes: self
                .host_lanes
                .unwrap_or_else(offload_sched::schedule::default_host_lanes),
        }
    }
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum IssueArg {
    /// One thread per issue group (streams joined by events) where the plugin gains from
    /// it (CUDA) and the schedule has several groups and few host steps (minimal sync),
    /// else serial.
    Auto,
    /// Every step from one host thread.
    Serial,
    /// One issuing thread per stream (every cross-stream event a hand-off between
    /// threads).
    PerStream,
    /// One issuing thread per issue group: streams joined by events share a thread;
    /// serial when there is one group.
    PerGroup,
}

impl From<IssueArg> for exec::IssueMode {
    fn from(i: IssueArg) -> exec::IssueMode {
        match i {
            IssueArg::Auto => exec::IssueMode::Auto,
            IssueArg::Serial => exec::IssueMode::Serial,
            IssueArg::PerStream => exec::IssueMode::PerStream,
            IssueArg::PerGroup => exec::IssueMode::PerGroup,
        }
    }
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The graph file (TOML: buffers, kernels and target regions; see graphs/).
    pub file: PathBuf,
    #[command(flatten)]
    pub sched: SchedArgs,
    /// Which plugin executes the schedule (`auto`: CUDA if a driver is found, else host;
    /// `cuda-timing`: CUDA timing every op; `null`: no device work, nothing to check).
    #[arg(long, default_value = "auto", value_parser = offload_sched::plugin::NAMES)]
    pub plugin: String,
    /// Compare every buffer with the sequential reference interpreter.
    #[arg(long)]
    pub check: bool,
    /// Also run the same schedule on the host plugin and compare every buffer with its
    /// result (integers bit-exact, floats within `--rel-tol`).
    #[arg(long)]
    pub compare_host: bool,
    /// Relative float tolerance of `--check` and `--compare-host` (default: 1e-6, the
    /// reference::check rule).
    #[arg(long, value_name = "TOL", allow_negative_numbers = true)]
    pub rel_tol: Option<f64>,
    /// Write a Chrome/Perfetto trace-event JSON of what ran.
    #[arg(long, value_name = "OUT.json")]
    pub trace: Option<PathBuf>,
    /// Host plugin: random delays in the stream workers, from this seed (refused with
    /// another plugin, which has no workers to delay).
    #[arg(long, value_name = "SEED")]
    pub delay_jitter: Option<u64>,
    /// Run this many times (run i uses jitter seed + i and random-streams seed + i); the
    /// summary and `--trace` are of the last run, `--check` checks every run.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,
    /// Multiply every built-in `spin` kernel's duration by this factor (stress runs of
    /// workflows: the dependency structure is unchanged, the waiting shrinks).
    #[arg(long, value_name = "FACTOR", allow_negative_numbers = true)]
    pub spin_scale: Option<f64>,
    /// How the executor issues the schedule's steps to the plugin.
    #[arg(long, value_enum, default_value_t = IssueArg::Auto)]
    pub issue: IssueArg,
    /// Run the program split over this many ranks, each a thread of this process (the
    /// owners: `rank = N` in the file, else buffer i on rank i mod N). Under mpirun (a
    /// build with the `mpi` feature) the ranks are the MPI job's: leave it out or give
    /// the job's count; another count is an error naming both.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub ranks: Option<u32>,
}

/// A failure already rendered for the user.
#[derive(Debug)]
pub struct Failure(pub String);

fn fail(msg: impl Into<String>) -> Failure {
    Failure(msg.into())
}

/// Loads, lowers, schedules and verifies a graph file (a [`Plan`]); errors rendered.
/// The lowering's warnings go to stderr (`path:line:column: warning: …`); they do not
/// fail the command.
pub fn prepare(path: &Path, sched: &SchedArgs) -> Result<Plan, Failure> {
    let plan = plan_file(path, sched)?;
    let text = warnings_text(&plan);
    if sched.deny_warnings && !text.is_empty() {
        let n = plan.warnings().len();
        return Err(fail(format!(
            "{text}error: {n} warning{} denied (--deny-warnings)",
            if n == 1 { "" } else { "s" }
        )));
    }
    if !text.is_empty() {
        use std::io::Write;
        let _ = std::io::stderr().write_all(shown(&text).as_bytes());
    }
    Ok(plan)
}

/// The plan's warnings as the command line prints them, one diagnostic after another
/// (empty when there are none).
pub fn warnings_text(plan: &Plan) -> String {
    plan.warnings()
        .iter()
        .map(|w| offload_sched::error::render_warning(plan.name(), plan.source(), w))
        .collect()
}

fn plan_file(path: &Path, sched: &SchedArgs) -> Result<Plan, Failure> {
    let plan = match sched.device {
        Some(DeviceArg::Auto) => Plan::from_file_auto(path, &sched.options(), sched.devices),
        None => Plan::from_file(path, &sched.options()),
    };
    use offload_sched::lower::LowerOptions;
    let lower = match sched.no_elide {
        true => LowerOptions::no_elide(),
        false => LowerOptions::elided(),
    };
    let lower = LowerOptions {
        device_memory: sched.device_memory,
        eviction: sched.eviction,
        prefetch: sched.prefetch_option(),
        ..lower
    };
    let plan = plan.and_then(|p| p.relower(&lower));
    plan.map_err(|e| match e {
        // A WfCommons workflow given where a graph file belongs.
        Error::File(fe) if path.extension().is_some_and(|x| x == "json") => fail(
            fe.with_help(
                "graph files are TOML; a WfCommons workflow (JSON) is converted first: \
                 `offload-sched import wfcommons FILE.json -o FILE.toml`",
            )
            .render(),
        ),
        e => fail(e.render()),
    })
}

/// Runs a parsed command line. Returns the text for stdout, or a failure for stderr.
pub fn run(cli: Cli) -> Result<String, Failure> {
    match cli.command {
        Command::Schedule {
            file,
            sched,
            plugin,
        } => {
            let mut plan = prepare(&file, &sched)?;
            if let Some(name) = plugin {
                let dir = plan.kernel_dir().map(Path::to_path_buf);
                let devices = plan.graph().devices;
                let p = make_plugin(&name, devices, None, dir, false, sched.device_memory)?;
                plan = plan.for_plugin(p.as_ref()).map_err(|e| fail(e.render()))?;
            }
            let text = plan.to_string();
            // The header line, then the bytes the schedule copies (and the cap, if any).
            let (head, rest) = text.split_once('\n').unwrap_or((&text, ""));
            let cap = summary::cap_line(plan.graph()).map_or(String::new(), |c| c + "\n");
            Ok(format!(
                "{head}\n{}\n{cap}{rest}",
                summary::moved_line(plan.graph())
            ))
        }
        Command::Verify { file, sched } => {
            let plan = prepare(&file, &sched)?;
            let (g, s, r) = (plan.graph(), plan.schedule(), plan.proof());
            Ok(format!(
                "{}: ok: policy {}, {} ops, {} edges ordered, {} event(s), {} host wait(s){}{}\n",
                plan.name(),
                s.policy,
                g.ops.len(),
                r.edges_checked,
                s.events,
                s.host_waits().count(),
                if s.policy == SyncPolicy::Minimal {
                    format!(", {} sync(s) proven necessary", r.syncs_proven_necessary)
                } else {
                    String::new()
                },
                match r.elisions_proven {
                    0 => String::new(),
                    n => format!(", {n} elided copies proven unobservable"),
                }
            ))
        }
        Command::Dot {
            file,
            sched,
            view,
            output,
        } => {
            if let Some(path) = &output {
                paths::refuse_input(&file, path, "-o").map_err(fail)?;
            }
            let text = prepare(&file, &sched)?.to_dot_view(view.into());
            match output {
                Some(path) => {
                    file::write_atomic(&path, text.as_bytes()).map_err(|e| {
                        fail(format!("{}: error: cannot write: {e}", path.display()))
                    })?;
                    Ok(String::new())
                }
                None => Ok(text),
            }
        }
        Command::Run(args) => {
            let job = distributed::mpi_job_size();
            match distributed::run_ranks(args.ranks, job, cfg!(feature = "mpi")).map_err(fail)? {
                #[cfg(feature = "mpi")]
                distributed::RunRanks::Mpi => distributed::run_mpi(&args),
                #[cfg(not(feature = "mpi"))]
                distributed::RunRanks::Mpi => {
                    unreachable!("run_ranks gives Mpi only with the mpi feature")
                }
                distributed::RunRanks::Threads(n) => distributed::run_threads(&args, n),
                distributed::RunRanks::One => run_file(&args),
            }
        }
        Command::Bench(args) => {
            offload_sched_bench::run_command(&args).map_err(|e| fail(format!("error: {e}")))
        }
        Command::Import { format } => match format {
            ImportFormat::Wfcommons {
                input,
                output,
                time_scale,
                size_scale,
            } => {
                paths::refuse_input(&input, &output, "-o").map_err(fail)?;
                let name = input.display().to_string();
                let bytes = file::read_capped(&input, offload_sched::import::MAX_WORKFLOW_BYTES)
                    .map_err(|e| fail(format!("{name}: error: cannot read: {e}")))?;
                let text = String::from_utf8(bytes).map_err(|e| {
                    let at = e.utf8_error().valid_up_to();
                    let lossy = String::from_utf8_lossy(e.as_bytes()).into_owned();
                    let msg = format!("`{name}` is not valid UTF-8 (byte {at})");
                    let span = Some(offload_sched::model::Span::new(at, at + 1));
                    fail(
                        file::FileError::at(file::ErrorKind::Io, &name, &lossy, span, msg).render(),
                    )
                })?;
                let opts = offload_sched::import::WfOptions {
                    time_scale,
                    size_scale,
                };
                // Planned once, so a program that cannot run is never written.
                let plan = Plan::from_wfcommons(&text, &name, &opts, &ScheduleOptions::default())
                    .map_err(|e| fail(e.render()))?;
                let program = plan.program();
                file::write_atomic(&output, file::to_toml(program).as_bytes())
                    .map_err(|e| fail(format!("{}: error: cannot write: {e}", output.display())))?;
                Ok(format!(
                    "wrote {} ({} regions, {} buffers)\n",
                    output.display(),
                    program.construct_count(),
                    program.buffers.len()
                ))
            }
        },
    }
}

/// The plugin for `--plugin` ([`offload_sched::plugin::open`]): `devices` emulated
/// devices, `jitter` and the device memory cap `device_memory` on the host plugin, user kernels from `dir`; `timing`: ask the
/// CUDA plugin to time copies and kernels (for `--trace`; the host plugin always times).
/// `auto` uses CUDA when a driver is present, else the host plugin (saying so on stderr
/// in one line, in a build with the `cuda` feature: a host-only build has no choice to
/// report).
///
/// Errors: the lookup's ([`offload_sched::plugin::LookupError`]), as `error: …`.
pub fn make_plugin(
    name: &str,
    devices: u32,
    jitter: Option<u64>,
    dir: Option<PathBuf>,
    timing: bool,
    device_memory: Option<u64>,
) -> Result<Box<dyn Plugin>, Failure> {
    use offload_sched::plugin::{open, LookupError, OpenOptions};
    let opts = OpenOptions {
        devices,
        delay_jitter: jitter,
        kernel_dir: dir,
        timing,
        device_memory,
    };
    let opened = open(name, &opts).map_err(|why| fail(format!("error: {why}")))?;
    match &opened.fallback {
        Some(LookupError::NoCudaFeature) | None => {}
        Some(why) => {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "note: {why}; using the host plugin");
        }
    }
    Ok(opened.plugin)
}

fn run_file(args: &RunArgs) -> Result<String, Failure> {
    if let Some(path) = &args.trace {
        paths::refuse_input(&args.file, path, "--trace").map_err(fail)?;
    }
    let mut plan = prepare(&args.file, &args.sched)?;
    if let Some(t) = args.rel_tol {
        if !(t.is_finite() && t >= 0.0) {
            return Err(fail(format!(
                "error: --rel-tol {} must be finite and >= 0",
                offload_sched::model::Num(t)
            )));
        }
    }
    // A trace that could not be written would be lost after the whole run: check first.
    if let Some(path) = &args.trace {
        file::check_writable(path)
            .map_err(|e| fail(format!("error: cannot write trace {}: {e}", path.display())))?;
    }
    let dir = plan.kernel_dir().map(Path::to_path_buf);
    let devices = plan.graph().devices;
    // The first run's plugin is made before anything runs: which one `auto` picks
    // decides whether device memory is host memory.
    let mut first_plugin = Some(make_plugin(
        &args.plugin,
        devices,
        args.delay_jitter,
        dir.clone(),
        args.trace.is_some(),
        args.sched.device_memory,
    )?);
    if let Some(p) = &first_plugin {
        // The default cap: the device's free memory where the plugin reports it (CUDA).
        // Before --spin-scale: lowering again would undo it.
        plan = plan.for_plugin(p.as_ref()).map_err(|e| fail(e.render()))?;
        if let Some(f) = args.spin_scale {
            plan.scale_spins(f).map_err(|e| fail(e.render()))?;
        }
        let info = p.info();
        let checks = [
            (args.check, "--check"),
            (args.compare_host, "--compare-host"),
        ];
        if args.delay_jitter.is_some() && info.name != "host" {
            return Err(fail(format!(
                "error: --delay-jitter delays the host plugin's stream workers; the {} \
                 plugin has none (run with --plugin host)",
                info.name
            )));
        }
        if let Some((_, flag)) = checks.iter().find(|c| c.0 && !info.computes) {
            return Err(fail(format!(
                "error: {flag} needs a plugin that computes (host or cuda); the {} plugin \
                 does no work",
                info.name
            )));
        }
        plan.check_memory(&run_memory_need(&plan, p.as_ref(), args))
            .map_err(|e| fail(e.render()))?;
    }
    let reference = if args.check {
        Some(plan.reference().map_err(|e| fail(e.render()))?)
    } else {
        None
    };
    let name = plan.name().to_string();
    let mut out = String::new();
    // Cleared when dropped: before the summary or an error is printed.
    let bar = progress::Progress::new(plan.graph(), args.repeat);
    for i in 0..args.repeat {
        let jitter = args.delay_jitter.map(|s| s.wrapping_add(i as u64));
        if let (Some(seed), true) = (args.sched.random_streams, i > 0) {
            let mut o = args.sched.options();
            o.random_streams = Some(seed.wrapping_add(i as u64));
            plan = plan.reschedule(&o).map_err(|e| match e {
                Error::Verify { name, error } => {
                    fail(format!("{name}: error (run {}): {error}", i + 1))
                }
                other => fail(other.render()),
            })?;
        }
        let plugin = match first_plugin.take() {
            Some(p) => p,
            None => make_plugin(
                &args.plugin,
                devices,
                jitter,
                dir.clone(),
                args.trace.is_some(),
                args.sched.device_memory,
            )?,
        };
        // The host plugin always times its stream work, the CUDA plugin with --trace.
        let info = plugin.info();
        let times = info.timing;
        let report = match &bar {
            Some(b) => b.run(i, &plan, plugin.as_ref(), times, args.issue.into()),
            None => plan.run_with(plugin.as_ref(), args.issue.into()),
        };
        let report = report.map_err(|e| fail(e.render()))?;
        let tol = args.rel_tol.unwrap_or(reference::check::REL_TOL);
        if let Some(r) = &reference {
            reference::check_tol(&report.buffers, r, tol)
                .map_err(|e| fail(format!("{name}: check FAILED (run {}): {e}", i + 1)))?;
        }
        if args.compare_host {
            let host = make_plugin(
                "host",
                devices,
                None,
                dir.clone(),
                false,
                args.sched.device_memory,
            )?;
            let h = plan
                .run_with(host.as_ref(), args.issue.into())
                .map_err(|e| match e {
                    Error::Exec { name, error, .. } => {
                        fail(format!("{name}: error on the host plugin: {error}"))
                    }
                    other => fail(other.render()),
                })?;
            reference::check_tol(&report.buffers, &h.buffers, tol).map_err(|e| {
                fail(format!(
                    "{name}: {} differs from the host plugin (run {}): {e}",
                    info.name,
                    i + 1
                ))
            })?;
        }
        if i + 1 == args.repeat {
            if let Some(path) = &args.trace {
                timeline::trace::write_chrome_trace(&report, plan.graph(), plan.schedule(), path)
                    .map_err(|e| fail(format!("error: {e}")))?;
            }
            out = summary(plan.graph(), plan.schedule(), &report, args);
        }
    }
    Ok(out)
}

/// What `run` holds in host memory at its peak ([`offload_sched::estimate`]): one run
/// on `plugin`; with `--compare-host` the host plugin's run while the first run's report
/// is held (the larger of the two); with `--check` the reference interpreter first, its
/// result held meanwhile.
fn run_memory_need(plan: &Plan, plugin: &dyn Plugin, args: &RunArgs) -> estimate::MemoryNeed {
    let mut need = plan.memory_need(plugin);
    if args.compare_host {
        let held = need.snapshot;
        need = estimate::MemoryNeed {
            held,
            device_cache: estimate::device_cache_bytes(
                plan.graph(),
                offload_sched::plugin::host::HostPluginOptions::default().device_cache_bytes,
            ),
            ..plan.memory_need_for(true)
        };
    }
    if args.check {
        let (peak, result) = plan.reference_memory();
        need = need.with_reference(peak, result);
    }
    need
}

/// Text as the command line writes it to stdout or stderr: names may hold any character,
/// so control characters other than newlines and tabs are shown escaped
/// ([`offload_sched::model::escape_controls_but_lines`]) and cannot drive the terminal.
fn shown(text: &str) -> std::borrow::Cow<'_, str> {
    offload_sched::model::escape_controls_but_lines(text)
}

/// The binary's `main`: parses, runs, prints, and returns the exit code.
pub fn main() -> std::process::ExitCode {
    // A closed stderr (`2>&1 | head`) must not turn log writes into panics: the
    // subscriber would report its own write errors with `eprintln!`, which panics.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .log_internal_errors(false)
        .try_init();
    let cli = Cli::parse();
    // Output goes through `write!` so a closed pipe (`| head`) ends the program quietly
    // instead of panicking in `print!`.
    use std::io::Write;
    match run(cli) {
        Ok(text) => {
            let mut out = std::io::stdout().lock();
            match out
                .write_all(shown(&text).as_bytes())
                .and_then(|()| out.flush())
            {
                Ok(()) => std::process::ExitCode::SUCCESS,
                // A reader that stopped early (`| head`) is not an error of ours.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                    std::process::ExitCode::SUCCESS
                }
                Err(e) => {
                    let _ = writeln!(std::io::stderr(), "error: cannot write the output: {e}");
                    std::process::ExitCode::FAILURE
                }
            }
        }
        Err(Failure(msg)) => {
            let _ = writeln!(std::io::stderr(), "{}", shown(msg.trim_end()));
            std::process::ExitCode::FAILURE
        }
    }
}
