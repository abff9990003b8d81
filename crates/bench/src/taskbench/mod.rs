//! `bench taskbench`: Task Bench (Slaughter et al., SC20; StanfordLegion/task-bench) —
//! efficiency per task granularity and METG(50%) of Task Bench's dependency patterns
//! through offload-sched, beside Task Bench's own MPI, OpenMP and StarPU implementations
//! in the same call (issue 30).
//!
//! **Sweep.** As Task Bench's METG scripts (`experiments/*/metg_*.sh`): the kernel's
//! iterations go down by powers of two from `2^--top-log2`, `--points` counts, the
//! count of step s run `min(s + 1, --max-reps)` times ([`metg::sweep_plan`]); every
//! system runs the same graph (`--pattern`, `--width` (default: the cores), `--steps`,
//! `--radix`, `--output-bytes`, `--kernel`) at the same counts. Granularity counts
//! `--cores` cores: the CPUs on the host, one per GPU on CUDA (as Task Bench's GPU figures).
//!
//! **Figures.** Per system and count: the mean wall time, task granularity = wall ×
//! cores / tasks (µs), the rate (FLOP/s or B/s) and the efficiency; METG(50%) as Task
//! Bench's `chart_metg.py` computes it ([`metg`]). Efficiency is against one peak per
//! pattern, the best rate any system reached in the call (`--peak common`, default:
//! Task Bench divides by one machine peak for every system), or each system's own best
//! (`--peak own`), or a given rate (`--peak <FLOP/s or B/s>`).
//!
//! **Systems.** offload-sched (`ours.rs`): each `--policies` × `--streams`, live, and
//! replayed (unless `--no-replay`) on every plugin: the same graph run thousands of
//! times is what replay is for ([`offload_sched::Session::with_replay`]; the host
//! plugin runs a launched graph's nodes on all its cores), and its sweep costs seconds
//! beside the peers' minutes. The peers
//! (`peers.rs`): `--peers` (default `mpi,openmp,starpu`) from `--peers-dir` (default
//! `target/task-bench`, built by `scripts/taskbench-peers.sh`); a missing binary or a
//! failing run is reported in the METG table, not faked. With `--ranks 1,2`, the graph
//! also runs distributed over MPI ranks (`ranks.rs`: Task Bench MPI's block of points per
//! rank, each rank a process under `mpirun`), one row per rank count.
//!
//! **Targets** (issue 30): on the host plugin, stencil_1d at width = cores: offload-sched's
//! best row (the smallest METG of its live and replayed rows, `report::best_row`,
//! named in the verdict) METG ≤ 0.5× Task Bench StarPU's and ≤ 2× Task Bench MPI's, both
//! from this call. On a GPU (width 4-16): the best live row's METG ≤ 5 µs, the best
//! replayed row's ≤ 2 µs. With `--ranks` including 1 and 2: METG on 2 ranks ≤ 1.5× that
//! on 1 rank (the `--ranks` rows, not counted as the best row). Figures that cannot
//! decide a target say so.

pub mod metg;
mod ours;
pub mod peers;
#[cfg(feature = "mpi")]
mod rank_worker;
pub mod ranks;
mod report;

#[cfg(feature = "mpi")]
pub use rank_worker::{run as run_rank, TaskbenchRankArgs};

use crate::{make_plugin, PLUGINS};
use metg::{analyze, sweep_plan, Metg, Peak, SweepRun};
use offload_sched::model::{TaskBenchKernel, TaskBenchParams, TaskBenchPattern, TaskBenchSpec};
use offload_sched::plugin::DeviceMemory;
use offload_sched::schedule::SyncPolicy;
pub use ours::validate;
use ours::Variant;
use peers::PeerKind;
use report::{at_most, best_row, Figures, PatternFigures, SystemRow};
use std::path::PathBuf;
use std::time::Instant;

/// The kernel of the sweep.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelKind {
    /// Task Bench's `compute_bound` (FLOPs).
    Compute,
    /// Task Bench's `memory_bound` (bytes), over `--scratch-bytes` per task.
    Memory,
}

/// Arguments of `bench taskbench`.
#[derive(clap::Args, Clone, Debug)]
pub struct TaskbenchArgs {
    /// Plugin: `host`, `cuda`, `auto` (cuda if a device answers, else host).
    #[arg(long, default_value = "auto", value_parser = PLUGINS)]
    pub plugin: String,
    /// Task Bench patterns, comma-separated (`stencil_1d`, `no_comm`, `fft`, …).
    #[arg(long, value_delimiter = ',', default_value = "stencil_1d")]
    pub patterns: Vec<String>,
    /// Points per timestep (default: the cores on the host, 4 on a GPU).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub width: Option<u64>,
    /// Timesteps (default 1000, as Task Bench's own METG scripts run every system:
    /// `experiments/*/metg_*.sh`, `-steps ${STEPS:-1000}`).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub steps: u64,
    /// Dependencies per task of nearest, spread, random_nearest (Task Bench's `-radix`).
    #[arg(long, default_value_t = 3)]
    pub radix: usize,
    /// Bytes of each task's output (a multiple of 16).
    #[arg(long, default_value_t = 16)]
    pub output_bytes: u64,
    /// Kernel.
    #[arg(long, value_enum, default_value = "compute")]
    pub kernel: KernelKind,
    /// Scratch bytes per task of the memory-bound kernel (a multiple of 256).
    #[arg(long, default_value_t = 65536)]
    pub scratch_bytes: u64,
    /// The sweep's largest iteration count is 2^top-log2.
    #[arg(long, default_value_t = 18, value_parser = clap::value_parser!(u32).range(0..=40))]
    pub top_log2: u32,
    /// Iteration counts in the sweep (halving each time, stopping at 1).
    #[arg(long, default_value_t = 19, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub points: u32,
    /// Runs of one count at most (step s runs min(s + 1, this) times).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub max_reps: u32,
    /// Untimed runs of each count before its timed ones (offload-sched; each peer run is a
    /// process of its own, as in Task Bench's scripts).
    #[arg(long, default_value_t = 1)]
    pub warmup: u32,
    /// Policies, comma-separated (`per-op`, `per-region`, `minimal`).
    #[arg(long, value_delimiter = ',', default_value = "minimal")]
    pub policies: Vec<String>,
    /// Streams per device, comma-separated (default: the width, at most the cores on the
    /// host).
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=64))]
    pub streams: Vec<u32>,
    /// Run each task as a host task (host plugin lanes, no copies) instead of a target
    /// region.
    #[arg(long)]
    pub host_tasks: bool,
    /// Target regions with every field entered once on the device (`target enter data`
    /// before the first task, `exit data` after the last): the tasks copy nothing.
    #[arg(long, conflicts_with = "host_tasks")]
    pub entered: bool,
    /// Cores (granularity = wall × cores / tasks; the peers' ranks and threads). Default:
    /// the machine's CPUs on the host, 1 on a GPU (Task Bench counts one core per GPU).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub cores: Option<u32>,
    /// Efficiency threshold of METG.
    #[arg(long, default_value_t = 0.5)]
    pub threshold: f64,
    /// Peak the efficiencies divide by: `common` (the best rate of any system in the
    /// call, per pattern), `own` (each system's best), or a rate (FLOP/s or B/s).
    #[arg(long, default_value = "common")]
    pub peak: String,
    /// Task Bench implementations to run beside offload-sched, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "mpi,openmp,starpu"
    )]
    pub peers: Vec<PeerKind>,
    /// Run no peer.
    #[arg(long)]
    pub no_peers: bool,
    /// Folder of the peers' binaries (scripts/taskbench-peers.sh's build folder).
    #[arg(long, default_value = peers::DEFAULT_BUILD_DIR)]
    pub peers_dir: PathBuf,
    /// How live runs are issued (`exec::IssueMode`): `auto` (the default rule),
    /// `serial`, `per-stream` or `per-group`; rows other than `auto` say it.
    #[arg(long, default_value = "auto", value_parser = ["auto", "serial", "per-stream", "per-group"])]
    pub issue: String,
    /// Do not replay (replayed rows run by default, on every plugin).
    #[arg(long)]
    pub no_replay: bool,
    /// Also run the graph distributed over MPI ranks, one sweep per rank count
    /// (comma-separated, e.g. `1,2`): each rank a process under `mpirun` on the host
    /// plugin with cores / ranks streams (`ranks.rs`); needs the `mpi` feature.
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=64))]
    pub ranks: Vec<u32>,
    /// Write the markdown report here too.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// The peak of `--peak`.
enum PeakChoice {
    Common,
    Own,
    Given(f64),
}

fn peak_choice(s: &str) -> Result<PeakChoice, String> {
    match s {
        "common" => Ok(PeakChoice::Common),
        "own" => Ok(PeakChoice::Own),
        v => match v.parse::<f64>() {
            Ok(x) if x.is_finite() && x > 0.0 => Ok(PeakChoice::Given(x)),
            _ => Err(format!(
                "--peak {v:?}: expected `common`, `own` or a positive rate (FLOP/s or B/s)"
            )),
        },
    }
}

fn policy(name: &str) -> Result<SyncPolicy, String> {
    SyncPolicy::ALL
        .into_iter()
        .find(|p| p.to_string() == name)
        .ok_or_else(|| format!("--policies: unknown policy {name:?} (per-op, per-region, minimal)"))
}

/// The graph parameters of `pattern` from the arguments (iterations set per sweep point).
fn params(a: &TaskbenchArgs, pattern: TaskBenchPattern, width: usize) -> TaskBenchParams {
    TaskBenchParams {
        host_tasks: a.host_tasks,
        entered: a.entered,
        ..params_of(
            pattern,
            width,
            a.steps as u32,
            a.radix,
            a.output_bytes,
            (a.kernel, a.scratch_bytes),
        )
    }
}

/// Target regions with per-task maps of `pattern` (iterations 1: set per sweep point),
/// `kernel` with its scratch bytes.
fn params_of(
    pattern: TaskBenchPattern,
    width: usize,
    steps: u32,
    radix: usize,
    output_bytes: u64,
    (kernel, scratch_bytes): (KernelKind, u64),
) -> TaskBenchParams {
    let kernel = match kernel {
        KernelKind::Compute => TaskBenchKernel::ComputeBound { iterations: 1 },
        KernelKind::Memory => TaskBenchKernel::MemoryBound {
            iterations: 1,
            scratch_bytes,
        },
    };
    TaskBenchParams {
        pattern,
        width,
        steps: steps as usize,
        radix,
        output_bytes,
        kernel,
        ..TaskBenchParams::default()
    }
}

/// Task Bench's flags for the graph of `spec` (all but `-iter`, which each run appends).
pub fn graph_flags(spec: &TaskBenchSpec) -> Vec<String> {
    let mut f: Vec<String> = [
        ("-steps", spec.steps().to_string()),
        ("-width", spec.width().to_string()),
        ("-type", spec.pattern().name().to_string()),
        ("-radix", spec.radix().to_string()),
        ("-kernel", spec.kernel().name().to_string()),
        ("-output", spec.output_bytes().to_string()),
    ]
    .into_iter()
    .flat_map(|(k, v)| [k.to_string(), v])
    .collect();
    if spec.pattern().needs_period() {
        f.extend(["-period".into(), spec.period().to_string()]);
    }
    if spec.pattern() == TaskBenchPattern::RandomNearest {
        f.extend(["-fraction".into(), spec.fraction_connected().to_string()]);
    }
    if let TaskBenchKernel::MemoryBound { scratch_bytes, .. } = spec.kernel() {
        f.extend(["-scratch".into(), scratch_bytes.to_string()]);
    }
    f
}

/// The system load now (`/proc/loadavg`'s three averages), for the report header.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Runs `bench taskbench` and returns the report (markdown).
///
/// Errors: an unknown plugin, pattern or policy, a graph Task Bench refuses, a bad
/// `--peak`, an unwritable `--out`, a failed or wrong offload-sched run (naming the graph
/// and the iteration count). A missing or failing peer is a row of the METG table.
pub fn run(a: &TaskbenchArgs) -> Result<String, String> {
    super::check_out(a.out.as_deref())?;
    let start = Instant::now();
    let peak = peak_choice(&a.peak)?;
    if !(a.threshold > 0.0 && a.threshold <= 1.0) {
        return Err(format!("--threshold {}: must be in (0, 1]", a.threshold));
    }
    let policies: Vec<SyncPolicy> = a
        .policies
        .iter()
        .map(|p| policy(p))
        .collect::<Result<_, _>>()?;
    let patterns: Vec<TaskBenchPattern> = a
        .patterns
        .iter()
        .map(|p| p.parse().map_err(|e| format!("--patterns: {e}")))
        .collect::<Result<_, String>>()?;
    let opened = make_plugin(&a.plugin)?;
    let plugin = opened.plugin.as_ref();
    let info = plugin.info();
    let gpu = info.device_memory == DeviceMemory::Gpu;
    // One core per GPU, as Task Bench's GPU machine parameters (scripts/chart_util.py,
    // daint 'gpu': cores 1); the CPUs of the machine otherwise.
    let cores = a.cores.unwrap_or_else(|| {
        if gpu {
            1
        } else {
            std::thread::available_parallelism().map_or(1, |c| c.get() as u32)
        }
    });
    let width = a
        .width
        .map_or(if gpu { 4 } else { cores as usize }, |w| w as usize);
    let plan = sweep_plan(a.top_log2, a.points, a.max_reps);
    if !a.ranks.is_empty() {
        ranks::check(a, &info.name)?;
    }
    // Every graph checked before anything runs.
    for &p in &patterns {
        TaskBenchSpec::new(params(a, p, width)).map_err(|e| format!("--patterns {p}: {e}"))?;
    }
    let streams = if !a.streams.is_empty() {
        a.streams.clone()
    } else if gpu {
        vec![width.min(64) as u32]
    } else {
        vec![(width as u32).min(cores).min(64)]
    };
    let replays: Vec<bool> = if !a.no_replay {
        vec![false, true]
    } else {
        vec![false]
    };
    let bytes = a.kernel == KernelKind::Memory;
    let mut f = Figures {
        unit: if bytes { "GB/s" } else { "GFLOP/s" },
        ..Figures::default()
    };
    f.header.push(format!(
        "plugin {}, {cores} cores, load average {} at the start",
        info.name,
        load()
    ));
    f.header.push(format!(
        "graph: width {width}, {} steps, radix {}, {} B output per task, kernel {}{}, {}",
        a.steps,
        a.radix,
        a.output_bytes,
        match a.kernel {
            KernelKind::Compute => "compute_bound",
            KernelKind::Memory => "memory_bound",
        },
        if bytes {
            format!(" over {} B scratch", a.scratch_bytes)
        } else {
            String::new()
        },
        if a.host_tasks {
            "host tasks"
        } else if a.entered {
            "target regions, fields entered once (no copies per task)"
        } else {
            "target regions"
        }
    ));
    f.header.push(format!(
        "sweep: iterations 2^{} down to {} ({} counts), runs per count min(step + 1, {}); offload-sched {} untimed run(s) per count first",
        a.top_log2,
        plan.last().map_or(0, |p| p.0),
        plan.len(),
        a.max_reps,
        a.warmup
    ));
    f.header.push(format!(
        "efficiency against {}; METG = smallest granularity with efficiency ≥ {:.0}%, interpolated with the next point as Task Bench's chart_metg.py",
        match peak {
            PeakChoice::Common => "the best rate of any system in this call, per pattern".to_string(),
            PeakChoice::Own => "each system's own best rate".to_string(),
            PeakChoice::Given(p) => format!("{p:e} per second"),
        },
        a.threshold * 100.0
    ));
    f.header.push("offload-sched time: first op issued → final host wait (Report::pipeline_us); Task Bench's: its `Elapsed Time` (graph execution); every run validated (offload-sched: each task checks its inputs, the fields are checked after the run; Task Bench checks its own inputs and aborts); the tables' wall µs is the mean of each count's runs (the progress lines on stderr print the median)".into());
    for &pattern in &patterns {
        let base = params(a, pattern, width);
        let spec0 = TaskBenchSpec::new(base).map_err(|e| e.to_string())?;
        let mut raw: Vec<Sweep> = Vec::new();
        for &policy in &policies {
            for &s in &streams {
                for &replay in &replays {
                    let v = Variant {
                        policy,
                        streams: s,
                        replay,
                        issue: crate::dag::issue_mode(&a.issue),
                    };
                    let label = v.label();
                    let t0 = Instant::now();
                    let rows = ours::sweep(plugin, &base, v, &plan, a.warmup, |it, us| {
                        eprintln!(
                            "taskbench {pattern} {label}: {it} iterations, {us:.1} µs median"
                        );
                    })?;
                    eprintln!(
                        "taskbench {pattern} {label}: sweep in {:.1} s",
                        t0.elapsed().as_secs_f64()
                    );
                    raw.push(Sweep {
                        name: label,
                        ours: true,
                        replayed: replay,
                        rows: Ok(rows),
                    });
                    checkpoint(a, &f, (pattern, &raw), cores, &peak)?;
                }
            }
        }
        if !a.ranks.is_empty() {
            raw.extend(ranks::sweeps(a, &base, &plan, cores));
            checkpoint(a, &f, (pattern, &raw), cores, &peak)?;
        }
        if !a.no_peers {
            let flags = graph_flags(&spec0);
            for &k in &a.peers {
                let t0 = Instant::now();
                let rows = peers::find_binary(k, &a.peers_dir).and_then(|bin| {
                    let mut rows = Vec::new();
                    for &(it, reps) in &plan {
                        for _ in 0..reps {
                            rows.push(peers::run_once(k, &bin, cores, &flags, it, bytes)?);
                        }
                    }
                    Ok(rows)
                });
                eprintln!(
                    "taskbench {pattern} {}: {} in {:.1} s",
                    k.label(),
                    if rows.is_ok() { "sweep" } else { "failed" },
                    t0.elapsed().as_secs_f64()
                );
                raw.push(Sweep {
                    name: k.label().to_string(),
                    ours: false,
                    replayed: false,
                    rows,
                });
                checkpoint(a, &f, (pattern, &raw), cores, &peak)?;
            }
        }
        f.patterns.push(analyse_pattern(
            pattern.name(),
            raw,
            cores,
            a.threshold,
            &peak,
        ));
    }
    targets(&mut f, gpu, width as u32 == cores);
    if !a.ranks.is_empty() {
        let line = f
            .patterns
            .iter()
            .find(|p| p.pattern == "stencil_1d")
            .map(|p| ranks::target(p, cores));
        f.targets.extend(line);
    }
    f.notes.push(format!(
        "wall time of the call: {:.1} s; load average {} at the end",
        start.elapsed().as_secs_f64(),
        load()
    ));
    let out = report::render(&f);
    if let Some(path) = &a.out {
        offload_sched::file::write_atomic(path, out.as_bytes())
            .map_err(|e| format!("write {}: {e}", path.display()))?;
    }
    Ok(out)
}

/// `--out` rewritten with the figures so far (`f`, and the sweeps `raw` of `pattern`),
/// marked incomplete, so a call stopped by a timeout leaves the sweeps before it.
///
/// Errors: an unwritable `--out`.
fn checkpoint(
    a: &TaskbenchArgs,
    f: &Figures,
    (pattern, raw): (TaskBenchPattern, &[Sweep]),
    cores: u32,
    peak: &PeakChoice,
) -> Result<(), String> {
    let Some(path) = &a.out else { return Ok(()) };
    let mut f = f.clone();
    let p = analyse_pattern(pattern.name(), raw.to_vec(), cores, a.threshold, peak);
    f.patterns.push(p);
    f.notes.push(format!(
        "incomplete: written after {} sweep(s) of {pattern}, while the call was still running",
        raw.len()
    ));
    offload_sched::file::write_atomic(path, report::render(&f).as_bytes())
        .map_err(|e| format!("write {}: {e}", path.display()))
}

/// One system's recorded sweep on one pattern, or why it has none.
#[derive(Clone)]
struct Sweep {
    name: String,
    /// offload-sched's (not a peer's).
    ours: bool,
    replayed: bool,
    rows: Result<Vec<SweepRun>, String>,
}

/// The analyses of one pattern's sweeps against the peak `peak` chooses.
fn analyse_pattern(
    pattern: &str,
    raw: Vec<Sweep>,
    cores: u32,
    threshold: f64,
    peak: &PeakChoice,
) -> PatternFigures {
    let own = |rows: &[SweepRun]| analyze(rows, cores, threshold, Peak::BestOfSweep);
    let common = raw
        .iter()
        .filter_map(|s| s.rows.as_ref().ok())
        .filter_map(|rows| own(rows).ok())
        .map(|a| a.peak)
        .fold(0.0, f64::max);
    let systems = raw
        .into_iter()
        .map(|sw| {
            let Sweep {
                name,
                ours,
                replayed,
                rows,
            } = sw;
            let own_metg = rows
                .as_ref()
                .ok()
                .and_then(|r| own(r).ok())
                .map(|a| (a.metg, a.peak));
            let result = rows.and_then(|rows| {
                let p = match *peak {
                    PeakChoice::Own => Peak::BestOfSweep,
                    PeakChoice::Common => Peak::Given(common),
                    PeakChoice::Given(x) => Peak::Given(x),
                };
                analyze(&rows, cores, threshold, p).map_err(|e| e.to_string())
            });
            SystemRow {
                name,
                result,
                own: own_metg,
                ours,
                replayed,
            }
        })
        .collect();
    PatternFigures {
        pattern: pattern.to_string(),
        systems,
    }
}

/// Issue 30's targets, judged from `f`'s figures.
fn targets(f: &mut Figures, gpu: bool, width_is_cores: bool) {
    let mut lines = Vec::new();
    let metg_of = |p: &PatternFigures, name: &str| -> Option<Metg> {
        p.systems
            .iter()
            .find(|s| s.name == name)
            .and_then(|s| s.result.as_ref().ok())
            .map(|a| a.metg)
    };
    let Some(p) = f.patterns.iter().find(|p| p.pattern == "stencil_1d") else {
        f.targets
            .push("not judged: no stencil_1d in this call (every target is on stencil_1d)".into());
        return;
    };
    let ours_live = best_row(&p.systems, |s| s.ours && !s.replayed);
    let ours_replayed = best_row(&p.systems, |s| s.ours && s.replayed);
    let ours_best = best_row(&p.systems, |s| s.ours);
    for (what, row) in [("live", ours_live), ("replayed", ours_replayed)] {
        if let Some((s, m)) = row {
            lines.push(format!(
                "offload-sched's best {what} row: {} (METG {m})",
                s.name
            ));
        }
    }
    let judge = |ok: Option<bool>| match ok {
        Some(true) => "met",
        Some(false) => "NOT met",
        None => "not decided by these figures",
    };
    if !gpu {
        if !width_is_cores {
            lines.push("host targets not judged: width is not the cores".to_string());
        } else if let Some(o) = ours_best {
            lines.push(format!(
                "the host targets are judged on offload-sched's best row: {}",
                o.0.name
            ));
            for (peer, factor) in [(PeerKind::Starpu, 0.5), (PeerKind::Mpi, 2.0)] {
                match metg_of(p, peer.label()) {
                    Some(t) => lines.push(format!(
                        "host, stencil_1d, width = cores: {} METG {} ≤ {factor}× {} METG {}: {}",
                        o.0.name,
                        o.1,
                        peer.label(),
                        t,
                        judge(at_most(&o.1, factor, &t))
                    )),
                    None => lines.push(format!(
                        "host, stencil_1d: METG ≤ {factor}× {}'s not judged: no figure for it in this call",
                        peer.label()
                    )),
                }
            }
        }
        lines.push("GPU targets (METG ≤ 5 µs live, ≤ 2 µs replayed) not judged on the host".into());
    } else {
        for (row, bound) in [(ours_live, 5.0), (ours_replayed, 2.0)] {
            if let Some((s, metg)) = row {
                let bound_metg = Metg::Value {
                    us: bound,
                    interpolated: false,
                };
                lines.push(format!(
                    "GPU, stencil_1d: {} METG {} ≤ {bound} µs: {}",
                    s.name,
                    metg,
                    judge(at_most(&metg, 1.0, &bound_metg))
                ));
            }
        }
        lines.push("host targets (against Task Bench StarPU and MPI) not judged on a GPU".into());
    }
    f.targets.extend(lines);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(pattern: TaskBenchPattern, kernel: TaskBenchKernel, radix: usize) -> TaskBenchSpec {
        TaskBenchSpec::new(TaskBenchParams {
            pattern,
            width: 4,
            steps: 3,
            radix,
            kernel,
            ..TaskBenchParams::default()
        })
        .unwrap()
    }

    #[test]
    fn the_peers_get_task_bench_s_flags_for_the_same_graph() {
        let s = spec(
            TaskBenchPattern::Stencil1d,
            TaskBenchKernel::ComputeBound { iterations: 8 },
            2,
        );
        assert_eq!(
            graph_flags(&s).join(" "),
            "-steps 3 -width 4 -type stencil_1d -radix 2 -kernel compute_bound -output 16"
        );
        let s = spec(
            TaskBenchPattern::Spread,
            TaskBenchKernel::MemoryBound {
                iterations: 8,
                scratch_bytes: 4096,
            },
            1,
        );
        assert_eq!(
            graph_flags(&s).join(" "),
            "-steps 3 -width 4 -type spread -radix 1 -kernel memory_bound -output 16 \
             -period 3 -scratch 4096"
        );
    }

    #[test]
    fn peak_choices() {
        assert!(matches!(peak_choice("common"), Ok(PeakChoice::Common)));
        assert!(matches!(peak_choice("own"), Ok(PeakChoice::Own)));
        assert!(matches!(peak_choice("1e9"), Ok(PeakChoice::Given(x)) if x == 1e9));
        assert!(peak_choice("0").is_err() && peak_choice("fast").is_err());
    }
}
