//! The offload benchmark: R independent saxpy regions (`map(to: x) map(tofrom: y)`, f32)
//! through the real pipeline (builder → lower → schedule → execute) under each sync
//! policy, against hand-written driver-API programs, PyTorch and libomptarget.
//!
//! Timing of pipeline variants: from the first op's issue to the start of the `End` op
//! (after the final host wait), per region, from the executor's report — so the
//! executor's per-run setup (host buffers: pinned allocation or cache reuse, zeroing,
//! initial values) and teardown (snapshot) are excluded and reported separately as
//! "setup+teardown ms/run". Median over `reps` runs after `warmup` runs.
//!
//! Modules: `check` (`--check`: plugin against the reference, CUDA fault injection),
//! `external` (PyTorch and libomptarget as other processes), `report` (tables, ratios
//! and the targets judged from the same run's figures), `dag` (`bench dag`: task DAGs
//! under each policy), `llvm_matmul` (LLVM 19's blocked_matmul run beside it),
//! `matmul_ref` (the matmul's host reference).

mod check;
mod dag;
mod external;
mod linalg;
mod llvm_matmul;
mod matmul_ref;
mod moved;
#[cfg(feature = "cuda")]
pub mod raw;
mod replay;
mod report;
mod scaling;
mod session;
pub mod taskbench;

pub use check::check_programs;
#[cfg(feature = "cuda")]
pub use check::cuda_fault_check;
pub use dag::{DagArgs, DagKind};
pub use linalg::{Algorithm, LinalgArgs, Precision};
pub use matmul_ref::{MatmulReference, MATMUL_REL_TOL};
pub use session::SessionArgs;

use offload_sched::estimate::MemoryNeed;
use offload_sched::exec::{IssueMode, Report};
use offload_sched::model::saxpy_regions;
use offload_sched::plugin::{open, OpenOptions, Opened, Plugin};
use offload_sched::schedule::{ScheduleOptions, SyncPolicy};
use offload_sched::Plan;
use report::Figures;
use std::fmt::Write as _;
use std::path::PathBuf;

/// `bench [OPTIONS]` (saxpy regions) or `bench dag [OPTIONS]`.
#[derive(clap::Args, Clone, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchCommand {
    #[command(subcommand)]
    pub sub: Option<BenchSub>,
    #[command(flatten)]
    pub saxpy: BenchArgs,
}

/// Benchmarks other than saxpy regions.
#[derive(clap::Subcommand, Clone, Debug)]
pub enum BenchSub {
    /// Task DAGs (blocked matmul as LLVM's bug49334, shared-input fan-out, wavefront,
    /// Montage) under each sync policy, against LLVM 19's blocked_matmul.
    Dag(DagArgs),
    /// Running a compiled plan again: one-shot runs against a Session (nothing bound,
    /// application memory bound, pinned buffers, submit + wait) and plain Rust.
    Session(SessionArgs),
    /// Replay: a session's runs with stream issue against the same runs replayed as
    /// plugin graphs (saxpy regions, a device-resident Jacobi, the blocked-matmul DAG),
    /// and PyTorch's CUDAGraph of the saxpy regions with `--python`.
    Replay(replay::ReplayArgs),
    /// Tiled dense linear algebra (Cholesky, GEMM of library tile kernels) under each
    /// policy, live and replayed on CUDA, against StarPU's examples and the library's
    /// monolithic routine (LAPACK / BLAS, cuSOLVER / cuBLAS), with issue 27's targets.
    Linalg(LinalgArgs),
    /// Task Bench: efficiency per task granularity and METG(50%) of its dependency
    /// patterns, live and replayed on CUDA, beside Task Bench's own MPI, OpenMP and StarPU
    /// implementations (built by scripts/taskbench-peers.sh), with issue 30's targets.
    Taskbench(taskbench::TaskbenchArgs),
    /// One MPI rank of `linalg --ranks` (started by it under mpirun).
    #[cfg(feature = "mpi")]
    #[command(hide = true)]
    LinalgRank(linalg::RankArgs),
    /// One MPI rank of `taskbench --ranks` (started by it under mpirun).
    #[cfg(feature = "mpi")]
    #[command(hide = true)]
    TaskbenchRank(taskbench::TaskbenchRankArgs),
}

/// Runs `bench` or `bench dag` and returns the report (markdown).
///
/// Errors: as [`run`] and `dag::run`.
pub fn run_command(c: &BenchCommand) -> Result<String, String> {
    match &c.sub {
        Some(BenchSub::Dag(a)) => dag::run(a),
        Some(BenchSub::Session(a)) => session::run(a),
        Some(BenchSub::Replay(a)) => replay::run(a),
        Some(BenchSub::Linalg(a)) => linalg::run(a),
        Some(BenchSub::Taskbench(a)) => taskbench::run(a),
        #[cfg(feature = "mpi")]
        Some(BenchSub::LinalgRank(a)) => linalg::run_rank(a),
        #[cfg(feature = "mpi")]
        Some(BenchSub::TaskbenchRank(a)) => taskbench::run_rank(a),
        None => run(&c.saxpy),
    }
}

/// Arguments of the benchmark.
#[derive(clap::Args, Clone, Debug)]
pub struct BenchArgs {
    /// Plugin: `host`, `cuda`, `auto` (cuda if a device answers, else host) or `null`
    /// (no device work: the executor's own cost per region).
    #[arg(long, default_value = "auto", value_parser = PLUGINS)]
    pub plugin: String,
    /// Regions per run.
    #[arg(long, default_value_t = 64)]
    pub regions: usize,
    /// Bytes per array (x and y each, at least 4: one f32), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "4096,1048576,16777216",
          value_parser = clap::value_parser!(u64).range(4..))]
    pub sizes: Vec<u64>,
    /// Timed runs per variant and size (the median is reported; at least 1).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    pub reps: u32,
    /// Timed runs for sizes of 8 MiB and more (pipeline runs re-initialise R·2 buffers,
    /// about 2 s per run at 16 MiB on the H200 machine, not timed; at least 1).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub reps_large: u32,
    /// Untimed runs first.
    #[arg(long, default_value_t = 2)]
    pub warmup: usize,
    /// Write the markdown tables here too.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Folder holding libomptarget's `run.sh` (the libomptarget-16 baseline).
    #[arg(long)]
    pub baselines: Option<PathBuf>,
    /// libomptarget processes to run. Without `--wtime-shim` each gives one timed
    /// repetition after the program's own warm-up sweep; the median over all repetitions
    /// is reported (and the best, as an extra row).
    #[arg(long, default_value_t = 11)]
    pub baseline_runs: usize,
    /// Timed repetitions per libomptarget process (`SAXPY_REPS`), with `--wtime-shim`.
    #[arg(long, default_value_t = 10, requires = "wtime_shim")]
    pub baseline_reps: usize,
    /// `wtime_shim.so` (built from benches/gpu/wtime_shim.c) to preload into the
    /// libomptarget program, so that every repetition is timed, not only its best.
    #[arg(long, requires = "baselines")]
    pub wtime_shim: Option<PathBuf>,
    /// Python script to run for the PyTorch baseline (benches/gpu/torch_regions.py).
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// Run correctness checks (cuda vs reference) instead of timing.
    #[arg(long)]
    pub check: bool,
}

/// Checks the buffers after one run of [`saxpy_program`]: every `x{r}` still 0.5 and
/// every `y{r}` 2.0 × 0.5 + 1.0 = 2.0, exactly (cheap enough for 64 × 16 MiB, where the
/// reference interpreter takes seconds).
fn check_saxpy_result(b: &offload_sched::exec::Buffers, regions: usize) -> Result<(), String> {
    for r in 0..regions {
        for (name, want) in [(format!("x{r}"), 0.5f32), (format!("y{r}"), 2.0)] {
            let v = b
                .as_f32(&name)
                .ok_or_else(|| format!("no f32 buffer {name}"))?;
            if let Some(i) = v.iter().position(|&e| e != want) {
                return Err(format!("{name}[{i}] = {}, expected {want}", v[i]));
            }
        }
    }
    Ok(())
}

/// The median of `v` (for an even count the upper of the two middle values, as in every
/// recorded run); NaN for an empty `v`.
fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// What [`timed_runs`] measured.
pub(crate) struct Timed {
    /// µs per region of each timed run.
    pub per_region: Vec<f64>,
    /// Executor setup + teardown of each timed run, ms.
    pub overhead: Vec<f64>,
    /// The last run's report (`None` without runs).
    pub last: Option<Report>,
}

/// Runs `sched` `warmup + reps` times and returns, for the `reps` timed runs, µs per
/// region ([`pipeline_us`] / `regions`) and the executor's setup + teardown in ms (wall
/// minus the pipeline time), and the last run's report. `each` sees every timed run's
/// report (a check: its error ends the series); warm-up runs are not checked.
///
/// Errors: a failed run, or `each`'s error.
pub(crate) fn timed_runs(
    plugin: &dyn Plugin,
    plan: &Plan,
    issue: IssueMode,
    regions: usize,
    (warmup, reps): (usize, usize),
    mut each: impl FnMut(&Report) -> Result<(), String>,
) -> Result<Timed, String> {
    let mut per_region = Vec::with_capacity(reps);
    let mut overhead = Vec::with_capacity(reps);
    let mut last = None;
    for i in 0..warmup + reps {
        let rep = plan
            .run_with(plugin, issue)
            .map_err(|e| format!("execute: {e}"))?;
        if i >= warmup {
            let p = rep.pipeline_us(plan.graph());
            per_region.push(p / regions.max(1) as f64);
            overhead.push((rep.wall_us - p) / 1e3);
            each(&rep)?;
        }
        last = Some(rep);
    }
    Ok(Timed {
        per_region,
        overhead,
        last,
    })
}

/// One pipeline variant at one size: (µs/region median, setup+teardown ms/run median).
#[allow(clippy::too_many_arguments)]
fn run_pipeline(
    plugin: &dyn Plugin,
    regions: usize,
    bytes: u64,
    policy: SyncPolicy,
    streams: u32,
    issue: IssueMode,
    warmup: usize,
    reps: usize,
) -> Result<(f64, f64), String> {
    let plan = Plan::new(
        saxpy_regions(regions, bytes),
        &ScheduleOptions {
            policy,
            streams_per_device: streams,
            random_streams: None,
            host_lanes: 1,
        },
    )
    .map_err(|e| e.to_string())?;
    let Timed {
        per_region,
        overhead,
        last,
    } = timed_runs(plugin, &plan, issue, regions, (warmup, reps), |_| Ok(()))?;
    // A timed figure counts only with right results: the last run's buffers (on a
    // plugin that computes: not the null plugin).
    if let Some(rep) = last.filter(|_| plugin.info().computes) {
        check_saxpy_result(&rep.buffers, regions)
            .map_err(|e| format!("{policy}, {streams} streams, {bytes} B: wrong result: {e}"))?;
    }
    Ok((median(per_region), median(overhead)))
}

/// Refuses, before anything runs, sizes whose pipeline runs cannot fit in host memory
/// ([`offload_sched::estimate`]): a run under each policy on 1 and 4 streams, while
/// the previous run's report is held ([`timed_runs`] keeps it).
///
/// Errors: the first size that does not fit, with the figures.
fn sizes_fit(plugin: &dyn Plugin, regions: usize, sizes: &[u64]) -> Result<(), String> {
    for &bytes in sizes {
        let plan = Plan::new(saxpy_regions(regions, bytes), &ScheduleOptions::default())
            .map_err(|e| e.to_string())?;
        for policy in SyncPolicy::ALL {
            for streams_per_device in [1, 4] {
                let p = plan
                    .reschedule(&ScheduleOptions {
                        policy,
                        streams_per_device,
                        random_streams: None,
                        host_lanes: 1,
                    })
                    .map_err(|e| e.to_string())?;
                let run = p.memory_need(plugin);
                p.check_memory(&MemoryNeed {
                    held: run.snapshot,
                    ..run
                })
                .map_err(|e| format!("{} per array: {e}", size_name(bytes)))?;
            }
        }
    }
    Ok(())
}

/// The plugins `--plugin` names (clap checks the value and suggests the closest): the
/// library's list ([`offload_sched::plugin::NAMES`]). `cuda-timing` is the CUDA plugin
/// with option `timing` (what `run --trace` uses: every kernel, engine copy and copy
/// batch timed with events), to measure what tracing costs.
pub(crate) const PLUGINS: [&str; 5] = offload_sched::plugin::NAMES;

/// The plugin named `name` ([`offload_sched::plugin::open`], default options). `auto`
/// that falls back to the host plugin says so on stderr, as `run --plugin auto` does, so
/// that nobody takes host figures for CUDA ones.
///
/// Errors: the lookup's, in its words.
fn make_plugin(name: &str) -> Result<Opened, String> {
    let opened = open(name, &OpenOptions::default()).map_err(|e| e.to_string())?;
    if let Some(why) = &opened.fallback {
        eprintln!("note: {why}; using the host plugin");
    }
    Ok(opened)
}

/// The pipeline rows of the saxpy bench: the four variants of the ratio table ((a),
/// (b), (c1), (c4)) with their setup + teardown, then the extra rows (more streams; with
/// a plugin that issues in parallel, the issue mode `Auto` did not choose).
///
/// Errors: a failed run or a wrong result.
fn pipeline_rows(
    plugin: &dyn Plugin,
    args: &BenchArgs,
    f: &mut Figures,
    warm_for: &dyn Fn(u64) -> usize,
    reps_for: &dyn Fn(u64) -> usize,
) -> Result<(), String> {
    let r = args.regions.max(1);
    let variants = [
        ("(a) per-op, 4 streams", SyncPolicy::PerOp, 4),
        ("(b) per-region, 4 streams", SyncPolicy::PerRegion, 4),
        ("(c1) minimal, 1 stream", SyncPolicy::Minimal, 1),
        ("(c4) minimal, 4 streams", SyncPolicy::Minimal, 4),
    ];
    let auto = IssueMode::Auto;
    // The bytes one run moves, per size: one graph for every variant.
    for &b in &args.sizes {
        let g = offload_sched::lower::lower(&saxpy_regions(r, b)).map_err(|e| e.to_string())?;
        f.moved.push(g.bytes_moved());
    }
    for (name, policy, streams) in variants {
        let mut v = Vec::new();
        let mut o = Vec::new();
        for &b in &args.sizes {
            let (us, ms) = run_pipeline(
                plugin,
                r,
                b,
                policy,
                streams,
                auto,
                warm_for(b),
                reps_for(b),
            )?;
            eprintln!("{name} {}: {us:.2} µs/region", size_name(b));
            v.push(us);
            o.push(ms);
        }
        f.rows.push((name.to_string(), v));
        f.overhead.push((name.to_string(), o));
    }
    // Extra pipeline rows (not in the ratio table): more streams; with a plugin that
    // issues per stream by default, the same variants issued the other way (A/B of the
    // issue mode in the same process). The CUDA plugin without its device-block cache
    // (A/B of the cache) is in `cuda_rows`.
    let mut more = vec![
        (
            "(b1) per-region, 1 stream (the configuration of (d))".to_string(),
            SyncPolicy::PerRegion,
            1,
            auto,
        ),
        (
            "(c8) minimal, 8 streams".to_string(),
            SyncPolicy::Minimal,
            8,
            auto,
        ),
    ];
    if plugin.info().parallel_issue {
        // The issue mode `Auto` did not choose (per-op and per-region issue serially,
        // minimal with several streams per stream).
        let (serial, per_stream) = (IssueMode::Serial, IssueMode::PerStream);
        for (name, policy, streams, issue) in [
            (
                "(a t) per-op, 4 streams, per-stream issue",
                SyncPolicy::PerOp,
                4,
                per_stream,
            ),
            (
                "(b t) per-region, 4 streams, per-stream issue",
                SyncPolicy::PerRegion,
                4,
                per_stream,
            ),
            (
                "(c4 s) minimal, 4 streams, serial issue",
                SyncPolicy::Minimal,
                4,
                serial,
            ),
            (
                "(c8 s) minimal, 8 streams, serial issue",
                SyncPolicy::Minimal,
                8,
                serial,
            ),
        ] {
            more.push((name.to_string(), policy, streams, issue));
        }
    }
    for (name, policy, streams, issue) in more {
        let mut v = Vec::new();
        for &b in &args.sizes {
            let (us, _) = run_pipeline(
                plugin,
                r,
                b,
                policy,
                streams,
                issue,
                warm_for(b),
                reps_for(b),
            )?;
            eprintln!("{name} {}: {us:.2} µs/region", size_name(b));
            v.push(us);
        }
        f.extra.push((name, v));
    }
    Ok(())
}

/// The libomptarget 16 rows (g) and their spread, from the bundle in `dir`, in the same
/// call (see [`external::libomptarget`]).
///
/// Errors: the baseline process cannot be started or its output not read.
fn libomptarget_rows(
    dir: &std::path::Path,
    args: &BenchArgs,
    f: &mut Figures,
) -> Result<(), String> {
    let r = args.regions.max(1);
    let timing = match &args.wtime_shim {
        Some(so) => external::OmpTiming::Shim {
            so,
            reps: args.baseline_reps,
        },
        None => external::OmpTiming::OnePerRun,
    };
    let s = external::libomptarget(dir, r, &args.sizes, args.baseline_runs, timing)?;
    let how = s.how.clone();
    let of_runs = s.nowait_median_of_runs();
    let spread: Vec<String> = args
        .sizes
        .iter()
        .zip(&s.nowait_by_run)
        .zip(&of_runs)
        .map(|((&b, v), m)| {
            let v: Vec<String> = v.iter().map(|x| format!("{x:.2}")).collect();
            format!("{}: {} (median {m:.2})", size_name(b), v.join(", "))
        })
        .collect();
    f.details.push(format!(
        "libomptarget nowait, median of each run's repetitions (µs/region): {}",
        spread.join("; ")
    ));
    let ((sync, sync_best), (nowait, nowait_best)) = (s.sync_stats(), s.nowait_stats());
    f.notes.extend(s.note);
    f.rows.push((
        format!("(g) libomptarget 16 sync (pageable, median of {how})"),
        sync,
    ));
    f.rows.push((
        format!("(g) libomptarget 16 nowait (pageable, median of {how})"),
        nowait,
    ));
    f.extra.push((
        format!("(g best) libomptarget 16 sync, best of {how}"),
        sync_best,
    ));
    f.extra.push((
        format!("(g best) libomptarget 16 nowait, best of {how}"),
        nowait_best,
    ));
    Ok(())
}

/// `--out` is checked before anything runs, so an unwritable path fails at once, not
/// after the whole benchmark.
pub(crate) fn check_out(out: Option<&std::path::Path>) -> Result<(), String> {
    match out {
        Some(path) => offload_sched::file::check_writable(path)
            .map_err(|e| format!("--out {}: cannot write: {e}", path.display())),
        None => Ok(()),
    }
}

fn size_name(b: u64) -> String {
    if b >= 1 << 20 && b.is_multiple_of(1 << 20) {
        format!("{} MiB", b >> 20)
    } else if b >= 1 << 10 && b.is_multiple_of(1 << 10) {
        format!("{} KiB", b >> 10)
    } else {
        format!("{b} B")
    }
}

/// Runs the benchmark (or the check with `--check`) and returns the report (markdown).
///
/// Errors: an unknown plugin, a failed pipeline run or hand-written CUDA program, a
/// baseline process that cannot be started, an unwritable `--out`.
pub fn run(args: &BenchArgs) -> Result<String, String> {
    check_out(args.out.as_deref())?;
    let opened = make_plugin(&args.plugin)?;
    // The CUDA plugin's own rows (device, fault check, hand-written CUDA) need it.
    #[cfg(feature = "cuda")]
    let cuda = opened.backend.is_cuda();
    let plugin = opened.plugin;
    let info = plugin.info();
    if args.check && !info.computes {
        return Err(format!(
            "--check needs a plugin that computes (host or cuda); the {} plugin does no work",
            info.name
        ));
    }
    let mut out = String::new();
    let _ = writeln!(out, "plugin: {}", info.name);
    #[cfg(feature = "cuda")]
    if cuda {
        let _ = writeln!(
            out,
            "device: {}; {}",
            offload_sched::plugin::cuda::probe().unwrap_or_default(),
            offload_sched::plugin::cuda::versions().unwrap_or_default()
        );
    }
    if args.check {
        out.push_str(&check_programs(plugin.as_ref())?);
        #[cfg(feature = "cuda")]
        if cuda {
            out.push_str(&cuda_fault_check()?);
        }
        return Ok(out);
    }
    if let Some(so) = args.wtime_shim.as_ref().filter(|p| !p.is_file()) {
        return Err(format!("--wtime-shim {}: not a file", so.display()));
    }
    let r = args.regions.max(1);
    sizes_fit(plugin.as_ref(), r, &args.sizes)?;
    // At least 1 each (clap checks).
    let (reps, reps_large) = (args.reps as usize, args.reps_large as usize);
    let reps_for = |b: u64| if b >= 8 << 20 { reps_large } else { reps };
    let warm_for = |b: u64| {
        if b >= 8 << 20 {
            args.warmup.min(1)
        } else {
            args.warmup
        }
    };
    let mut f = Figures {
        plugin: info.name.clone(),
        sizes: args.sizes.clone(),
        regions: r,
        reps: (reps, reps_large),
        ..Figures::default()
    };
    pipeline_rows(plugin.as_ref(), args, &mut f, &warm_for, &reps_for)?;
    #[cfg(feature = "cuda")]
    if cuda {
        cuda_rows(&mut f, &warm_for, &reps_for)?;
    }
    if let Some(py) = &args.python {
        let (v, note) = external::torch(py, r, &args.sizes, (args.warmup, reps, reps_large))?;
        f.notes.extend(note);
        f.rows
            .push(("(f) PyTorch, 1 stream, sync at end".to_string(), v));
    }
    if let Some(dir) = &args.baselines {
        libomptarget_rows(dir, args, &mut f)?;
    }
    out.push_str(&report::render(&f));
    if let Some(path) = &args.out {
        offload_sched::file::write_atomic(path, out.as_bytes())
            .map_err(|e| format!("write {}: {e}", path.display()))?;
    }
    Ok(out)
}

/// CUDA only: the pipeline on a CUDA plugin without its device-block cache (A/B of the
/// cache: every Alloc and Free a `cuMemAllocAsync` / `cuMemFreeAsync`) and without copy
/// batching (every copy a copy-engine transfer), the hand-written
/// CUDA programs (d), (e) and their variants, the pinned copy bandwidth and the regions'
/// copies alone, each at every size.
#[cfg(feature = "cuda")]
fn cuda_rows(
    f: &mut Figures,
    warm_for: &dyn Fn(u64) -> usize,
    reps_for: &dyn Fn(u64) -> usize,
) -> Result<(), String> {
    use crate::raw;
    let (r, sizes) = (f.regions, f.sizes.clone());
    use offload_sched::plugin::cuda::{CudaPlugin, CudaPluginOptions};
    // A/B rows: the pipeline on a plugin with one of its two issue-cost measures off.
    let nocache = CudaPlugin::new(CudaPluginOptions {
        device_cache_bytes: 0,
        ..Default::default()
    })?;
    let nobatch = CudaPlugin::new(CudaPluginOptions {
        batch_copy_max_bytes: 0,
        ..Default::default()
    })?;
    for (plugin, name, policy, streams) in [
        (
            &nocache,
            "(a-) per-op, 4 streams, no device-block cache",
            SyncPolicy::PerOp,
            4,
        ),
        (
            &nocache,
            "(c1-) minimal, 1 stream, no device-block cache",
            SyncPolicy::Minimal,
            1,
        ),
        (
            &nocache,
            "(c4-) minimal, 4 streams, no device-block cache",
            SyncPolicy::Minimal,
            4,
        ),
        (
            &nobatch,
            "(c1 ce) minimal, 1 stream, every copy on the copy engines (no copy batching)",
            SyncPolicy::Minimal,
            1,
        ),
        (
            &nobatch,
            "(c4 ce) minimal, 4 streams, every copy on the copy engines (no copy batching)",
            SyncPolicy::Minimal,
            4,
        ),
    ] {
        let mut v = Vec::new();
        for &b in &sizes {
            let (w, n) = (warm_for(b), reps_for(b));
            let (us, _) = run_pipeline(plugin, r, b, policy, streams, IssueMode::Auto, w, n)?;
            eprintln!("{name} {}: {us:.2} µs/region", size_name(b));
            v.push(us);
        }
        f.extra.push((name.to_string(), v));
    }
    // Warm-up and repetitions for size `b` (at least one warm-up: first-use costs).
    let wn = |b: u64| (warm_for(b).max(1), reps_for(b));
    for (name, streams, sync_each, prealloc) in [
        ("(d) hand-written, 1 stream, sync/region", 1, true, false),
        ("(e) hand-written, 4 streams, sync at end", 4, false, false),
        (
            "(d0) hand-written, 1 stream, sync/region, no per-region alloc",
            1,
            true,
            true,
        ),
        ("(e1) hand-written, 1 stream, sync at end", 1, false, false),
        (
            "(e0) hand-written, 4 streams, sync at end, no per-region alloc",
            4,
            false,
            true,
        ),
    ] {
        let mut v = Vec::new();
        for &b in &sizes {
            let (w, n) = wn(b);
            v.push(median(raw::saxpy_regions(
                r, b, streams, sync_each, prealloc, w, n,
            )?));
        }
        f.rows.push((name.to_string(), v));
    }
    for (name, how, prealloc) in [
        (
            "(e t) hand-written, 4 streams, one issuing thread each, sync at end",
            raw::Issue::Threads,
            false,
        ),
        (
            "(e0 t) hand-written, 4 streams, one issuing thread each, sync at end, no per-region alloc",
            raw::Issue::Threads,
            true,
        ),
        (
            "(e0 g) hand-written, 4 streams, no per-region alloc, captured once as a CUDA graph and replayed (no issue cost)",
            raw::Issue::Graph,
            true,
        ),
    ] {
        let mut v = Vec::new();
        for &b in &sizes {
            let (w, n) = wn(b);
            let (t, _) = raw::saxpy_regions_by(how, r, b, 4, prealloc, w, n)?;
            v.push(median(t));
        }
        f.rows.push((name.to_string(), v));
    }
    let b = raw::bandwidth(256 << 20, 5)?;
    f.bandwidth = Some((b.h2d, b.d2h, b.bidir));
    for &b in &sizes {
        let (w, n) = wn(b);
        f.copies_alone.push(median(raw::copy_mix(r, b, w, n)?));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};

    #[test]
    fn the_saxpy_check_accepts_a_real_run_and_names_a_wrong_element() {
        let plugin = HostPlugin::new(HostPluginOptions::default());
        let (us, _) = run_pipeline(
            &plugin,
            3,
            4096,
            SyncPolicy::Minimal,
            2,
            IssueMode::Auto,
            0,
            1,
        )
        .unwrap();
        assert!(us > 0.0);
        let plan = Plan::new(saxpy_regions(3, 4096), &ScheduleOptions::default()).unwrap();
        let good = plan.reference().unwrap();
        check_saxpy_result(&good, 3).unwrap();
        // the initial buffers: y still 1.0
        let initial = offload_sched::exec::Buffers::initial(&plan.program().buffers);
        assert_eq!(
            check_saxpy_result(&initial, 3).unwrap_err(),
            "y0[0] = 1, expected 2"
        );
        assert_eq!(
            check_saxpy_result(&good, 4).unwrap_err(),
            "no f32 buffer x3"
        );
    }
}
