//! `bench dag`: task DAGs through the real pipeline (lower → schedule → verify →
//! execute) under each sync policy, in one process, against LLVM 19's `blocked_matmul`.
//!
//! DAGs: the blocked matmul of LLVM's bug49334 ([`offload_sched::model::blocked_matmul`]), a
//! fan-out over one shared input ([`offload_sched::model::fanout_shared`]), a 2-D wavefront
//! ([`offload_sched::model::wavefront`]) and the Montage workflow (`graphs/montage-2mass-005d.toml`,
//! its `spin` kernels scaled by `--spin-scale`). Each figure is µs per device region,
//! timed as the saxpy bench and LLVM's program time theirs: from the first op's issue to
//! the final host wait ([`super::pipeline_us`]), median over `--reps` runs after
//! `--warmup` untimed ones; every timed run's buffers are checked (the matmul against
//! [`MatmulReference`], the others against the sequential reference interpreter) on a
//! plugin that computes. Every DAG runs lowered with transfer elision (the default) under
//! each policy, and once more under `minimal` lowered with `--no-elide` (every copy the
//! mapping rules name), in the same call: the report gives each row's H2D and D2H, a
//! table of every [`BytesMoved`] figure with and without elision, the ratio, and issue
//! 28's targets for the matmul (H2D ≤ 1 MiB, D2H ≤ 256 KiB; ≥ 1.3× faster than
//! `--no-elide`, judged on a GPU only). Plans are bound to the plugin
//! (`Plan::for_plugin`: on CUDA the device memory cap defaults to the free memory, and
//! shared kept copies are prefetched on a copy stream); where a DAG prefetches, one more
//! row runs `minimal` with prefetch off (`minimal, no prefetch`).

mod table;

use super::matmul_ref::MatmulReference;
use super::{llvm_matmul, make_plugin, median, timed_runs, PLUGINS};
use offload_sched::estimate;
use offload_sched::estimate::MemoryNeed;
use offload_sched::exec::{Buffers, IssueMode};
use offload_sched::lower::{BytesMoved, LowerOptions};
use offload_sched::model::{human_bytes, Program};
use offload_sched::plugin::{DeviceMemory, Opened, Plugin};
use offload_sched::reference;
use offload_sched::schedule::{ScheduleOptions, SyncPolicy};
use offload_sched::Plan;
use std::path::PathBuf;
use table::render;

/// The DAGs `bench dag` can run.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DagKind {
    Matmul,
    Fanout,
    Wavefront,
    Montage,
}

/// Arguments of `bench dag`.
#[derive(clap::Args, Clone, Debug)]
pub struct DagArgs {
    /// Plugin: `host`, `cuda`, `auto` (cuda if a device answers, else host) or `null`
    /// (no device work, no checks: the executor's own cost per region).
    #[arg(long, default_value = "auto", value_parser = PLUGINS)]
    pub plugin: String,
    /// DAGs to run, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "matmul,fanout,wavefront,montage"
    )]
    pub dags: Vec<DagKind>,
    /// Blocked matmul: matrix order n (elements; n × n f32).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..))]
    pub n: u64,
    /// Blocked matmul: block order bs (must divide n): (n/bs)³ regions of 3 · bs² · 4 bytes.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..))]
    pub bs: u64,
    /// Fan-out: regions sharing the table.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..))]
    pub width: u32,
    /// Fan-out: bytes of the shared read-only table.
    #[arg(long, default_value_t = 256 << 10)]
    pub table_bytes: u64,
    /// Fan-out: bytes of each region's output.
    #[arg(long, default_value_t = 4096)]
    pub out_bytes: u64,
    /// Wavefront: blocks per side (wave × wave regions).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..))]
    pub wave: u32,
    /// Wavefront: bytes per block.
    #[arg(long, default_value_t = 4096)]
    pub block_bytes: u64,
    /// The Montage graph file.
    #[arg(long, default_value = "graphs/montage-2mass-005d.toml")]
    pub montage: PathBuf,
    /// Further graph files to run as DAGs, comma-separated (each named by its file
    /// stem; e.g. every file of graphs/).
    #[arg(long, value_delimiter = ',')]
    pub graphs: Vec<PathBuf>,
    /// Multiply the `spin` durations of the Montage graph and of `--graphs` by this
    /// factor (as `run --spin-scale` does).
    #[arg(long, default_value_t = 0.01)]
    pub spin_scale: f64,
    /// Streams per device.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub streams: u32,
    /// How the executor issues each schedule (`exec::IssueMode`): `auto` (the default
    /// rule), `serial`, `per-stream` or `per-group`.
    #[arg(long, default_value = "auto", value_parser = ["auto", "serial", "per-stream", "per-group"])]
    pub issue: String,
    /// Timed runs per DAG and variant (the median is reported; at least 1).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub reps: u32,
    /// Untimed runs first.
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    /// Folder holding LLVM 19's `run_matmul.sh` (the libomptarget-19 baseline): its
    /// `blocked_matmul` with the same n and bs, nowait and sync, `--reps` repetitions.
    #[arg(long)]
    pub baselines: Option<PathBuf>,
    /// Write the markdown report here too.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Device counts, comma-separated (e.g. `1,2,4`): instead of the DAGs, the blocked
    /// matmul placed over each count of devices (`device = "auto"`), with its scaling
    /// efficiency (`scaling.rs`).
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub devices: Vec<u32>,
}

/// How a DAG's results are checked.
enum Expected {
    Matmul(MatmulReference),
    Buffers(Buffers),
}

impl Expected {
    fn check(&self, b: &Buffers) -> Result<(), String> {
        match self {
            Expected::Matmul(r) => r.check(b),
            Expected::Buffers(e) => reference::check(b, e).map_err(|e| e.to_string()),
        }
    }
}

/// One DAG, lowered, with its description and how its results are checked.
struct Dag {
    name: String,
    what: String,
    /// Planned under `minimal`; each policy is a [`Plan::reschedule`] of it.
    plan: Plan,
    expect: Expect,
    /// The factor its `spin`s were scaled by (`--spin-scale` for graph files, else 1):
    /// a re-lowered plan (`--no-elide`) starts from the program and is scaled again.
    spin_scale: f64,
}

/// How a DAG's expected results are made (once its memory is known to fit).
#[derive(Clone, Copy)]
enum Expect {
    /// [`MatmulReference`] of the blocked matmul `(n, bs)`.
    Matmul(u64, u64),
    /// The sequential reference interpreter.
    Reference,
}

impl Dag {
    /// The expected results (the reference's work).
    fn expected(&self) -> Result<Expected, String> {
        match self.expect {
            Expect::Matmul(n, bs) => Ok(Expected::Matmul(MatmulReference::new(
                self.plan.program(),
                n,
                bs,
            )?)),
            Expect::Reference => reference_of(&self.plan),
        }
    }

    /// What making the expected results needs at its peak and what they hold:
    /// `(peak, result)`. The matmul reference holds the initial buffers and dense copies
    /// of A, B and C while it computes (twice the buffers), then C alone (a third).
    fn expected_memory(&self) -> (u64, u64) {
        match self.expect {
            Expect::Matmul(..) => {
                let b = estimate::buffer_bytes(self.plan.graph());
                (b.saturating_mul(2), b / 3)
            }
            Expect::Reference => self.plan.reference_memory(),
        }
    }
}

/// The [`IssueMode`] named by `--issue` (clap admits only these names).
pub(crate) fn issue_mode(name: &str) -> IssueMode {
    match name {
        "serial" => IssueMode::Serial,
        "per-stream" => IssueMode::PerStream,
        "per-group" => IssueMode::PerGroup,
        _ => IssueMode::Auto,
    }
}

fn planned(p: Program, streams: u32) -> Result<Plan, String> {
    Plan::new(p, &options(SyncPolicy::Minimal, streams)).map_err(|e| e.to_string())
}

fn options(policy: SyncPolicy, streams: u32) -> ScheduleOptions {
    ScheduleOptions {
        policy,
        streams_per_device: streams,
        random_streams: None,
        host_lanes: 1,
    }
}

fn reference_of(plan: &Plan) -> Result<Expected, String> {
    plan.reference()
        .map(Expected::Buffers)
        .map_err(|e| format!("{}: reference: {}", plan.graph().name, e))
}

/// Host bytes a generated DAG may hold (its buffers; the host plugin's emulated device
/// memory is of the same order): past this `bench dag` refuses the sizes up front.
const MAX_DAG_BYTES: u64 = 8 << 30;
/// Regions a generated DAG may have.
const MAX_DAG_REGIONS: u64 = 1 << 20;

fn build(kind: DagKind, a: &DagArgs) -> Result<Dag, String> {
    let too_big = |what: &str, bytes: Option<u64>| match bytes {
        Some(b) if b <= MAX_DAG_BYTES => Ok(()),
        _ => Err(format!(
            "{what} would hold more than {} of buffers; choose smaller sizes",
            human_bytes(MAX_DAG_BYTES)
        )),
    };
    // At most a million regions: the op graph of each is held in memory.
    let regions = match kind {
        DagKind::Matmul => (a.n / a.bs.max(1)).checked_pow(3),
        DagKind::Fanout => Some(a.width as u64),
        DagKind::Wavefront => (a.wave as u64).checked_mul(a.wave as u64),
        DagKind::Montage => Some(0),
    };
    if regions.is_none_or(|r| r > MAX_DAG_REGIONS) {
        return Err(format!(
            "{kind:?}: the sizes give more than {MAX_DAG_REGIONS} regions; choose smaller ones"
        ));
    }
    match kind {
        DagKind::Matmul => too_big("--n", a.n.checked_mul(a.n).and_then(|x| x.checked_mul(12)))?,
        DagKind::Fanout => too_big(
            "--width with --table-bytes and --out-bytes",
            (a.width as u64)
                .checked_mul(a.out_bytes)
                .and_then(|x| x.checked_add(a.table_bytes))
                .and_then(|x| x.checked_add(a.table_bytes.checked_mul(a.width as u64)?)),
        )?,
        DagKind::Wavefront => too_big(
            "--wave with --block-bytes",
            (a.wave as u64)
                .checked_mul(a.wave as u64)
                .and_then(|x| x.checked_mul(a.block_bytes)),
        )?,
        DagKind::Montage => {}
    }
    Ok(match kind {
        DagKind::Matmul => {
            if !a.n.is_multiple_of(a.bs) {
                return Err(format!("--bs {} must divide --n {}", a.bs, a.n));
            }
            let p = offload_sched::model::blocked_matmul(a.n, a.bs);
            let nb = a.n / a.bs;
            Dag {
                name: "matmul".into(),
                what: format!(
                    "n={}, bs={}: {nb}×{nb} blocks of {} per matrix, {} regions",
                    a.n,
                    a.bs,
                    human_bytes(a.bs * a.bs * 4),
                    nb * nb * nb
                ),
                expect: Expect::Matmul(a.n, a.bs),
                plan: planned(p, a.streams)?,
                spin_scale: 1.0,
            }
        }
        DagKind::Fanout => {
            let p =
                offload_sched::model::fanout_shared(a.width as usize, a.table_bytes, a.out_bytes);
            let plan = planned(p, a.streams)?;
            Dag {
                name: "fanout".into(),
                what: format!(
                    "{} regions mapping one {} table to:, each its own {} from:",
                    a.width,
                    human_bytes(a.table_bytes),
                    human_bytes(a.out_bytes)
                ),
                expect: Expect::Reference,
                plan,
                spin_scale: 1.0,
            }
        }
        DagKind::Wavefront => {
            let p = offload_sched::model::wavefront(a.wave as usize, a.block_bytes);
            let plan = planned(p, a.streams)?;
            Dag {
                name: "wavefront".into(),
                what: format!(
                    "{w}×{w} blocks of {}, {} regions",
                    human_bytes(a.block_bytes),
                    a.wave * a.wave,
                    w = a.wave
                ),
                expect: Expect::Reference,
                plan,
                spin_scale: 1.0,
            }
        }
        DagKind::Montage => from_file(&a.montage, "montage", a)?,
    })
}

/// A graph file as a DAG named `name`, its `spin`s scaled by `--spin-scale`.
fn from_file(path: &std::path::Path, name: &str, a: &DagArgs) -> Result<Dag, String> {
    let mut plan = Plan::from_file(path, &options(SyncPolicy::Minimal, a.streams))
        .map_err(|e| e.to_string())?;
    plan.scale_spins(a.spin_scale).map_err(|e| e.to_string())?;
    Ok(Dag {
        name: name.to_string(),
        what: format!(
            "{}, spins × {}, {}",
            path.display(),
            a.spin_scale,
            match plan.graph().device_regions() {
                1 => "1 region".to_string(),
                r => format!("{r} regions"),
            }
        ),
        expect: Expect::Reference,
        plan,
        spin_scale: a.spin_scale,
    })
}

/// Schedule facts of one variant.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Facts {
    regions: usize,
    ops: usize,
    streams: usize,
    events: u32,
    host_waits: usize,
    /// Hash of the schedule's issue sequence: equal for identical schedules (a DAG of
    /// `nowait` regions gets the same steps under `per-region` and `minimal`).
    steps: u64,
    /// Bytes the graph moves, and what elision saved.
    moved: BytesMoved,
}

/// The variant of `minimal` lowered with transfer elision off (`--no-elide`: every copy
/// OpenMP's mapping rules name), beside the policies' rows lowered with it.
const NO_ELIDE: &str = "minimal, no-elide";

/// The variant of `minimal` lowered with prefetch off (`--no-prefetch`), where the DAG's
/// plan prefetches (`offload_sched::lower::Prefetch`: under the CUDA default cap).
const NO_PREFETCH: &str = "minimal, no prefetch";

/// How a variant is lowered against the DAG's plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lowered {
    /// As planned (elision on; prefetch under a cap).
    Default,
    /// [`NO_ELIDE`].
    NoElide,
    /// [`NO_PREFETCH`].
    NoPrefetch,
}

/// One measured row.
#[derive(Clone, Debug, Default)]
struct Row {
    dag: String,
    /// `per-op`, `per-region`, `minimal`, `… , no copy batching`, [`NO_ELIDE`],
    /// `LLVM 19 nowait`, `LLVM 19 sync`.
    variant: String,
    /// Appended to the variant in the table (`(host fallback)`).
    label: String,
    /// `None` for LLVM 19 (another program).
    facts: Option<Facts>,
    median: f64,
    best: f64,
}

/// Everything one `bench dag` run measured.
#[derive(Debug, Default)]
struct DagFigures {
    plugin: String,
    /// The pipeline ran on a GPU ([`DeviceMemory::Gpu`]): the GPU targets are judged.
    gpu: bool,
    header: Vec<String>,
    rows: Vec<Row>,
    notes: Vec<String>,
}

impl DagFigures {
    fn us(&self, dag: &str, variant: &str) -> Option<f64> {
        self.rows
            .iter()
            .find(|r| r.dag == dag && r.variant == variant)
            .map(|r| r.median)
    }

    /// True when two variants of one DAG ran the same issue sequence.
    fn same_schedule(&self, dag: &str, a: &str, b: &str) -> bool {
        let facts = |v: &str| {
            self.rows
                .iter()
                .find(|r| r.dag == dag && r.variant == v)
                .and_then(|r| r.facts)
        };
        matches!((facts(a), facts(b)), (Some(x), Some(y)) if x.steps == y.steps)
    }

    fn llvm_fallback(&self) -> bool {
        self.rows
            .iter()
            .any(|r| r.variant.starts_with("LLVM") && !r.label.is_empty())
    }
}

const POLICIES: [SyncPolicy; 3] = [
    SyncPolicy::PerOp,
    SyncPolicy::PerRegion,
    SyncPolicy::Minimal,
];

/// The plugins each DAG runs on: the chosen one, and on CUDA the same without copy
/// batching (every copy on the copy engines; as the saxpy bench's `(c1 ce)` rows).
/// Plugins with the suffix of their variant names.
type Plugins = Vec<(Box<dyn Plugin>, &'static str)>;

fn plugins(main: Opened) -> Result<Plugins, String> {
    #[allow(unused_mut)]
    let mut v = vec![(main.plugin, "")];
    #[cfg(feature = "cuda")]
    if main.backend.is_cuda() {
        use offload_sched::plugin::cuda::{CudaPlugin, CudaPluginOptions};
        let nobatch = CudaPlugin::new(CudaPluginOptions {
            batch_copy_max_bytes: 0,
            ..Default::default()
        })?;
        v.push((Box::new(nobatch), ", no copy batching"));
    }
    Ok(v)
}

/// Runs `bench dag` and returns the report (markdown).
///
/// Errors: an unknown plugin, `--bs` not dividing `--n`, a Montage file that does not
/// load, a schedule the verifier rejects, a failed run or a wrong result (naming the
/// DAG, variant and run), an unwritable `--out`. A failing LLVM 19 baseline is a note in
/// the report, not an error.
pub fn run(a: &DagArgs) -> Result<String, String> {
    super::check_out(a.out.as_deref())?;
    if !a.devices.is_empty() {
        return super::scaling::run(a);
    }
    let opened = make_plugin(&a.plugin)?;
    let info = opened.plugin.info();
    let mut f = DagFigures {
        plugin: info.name,
        gpu: info.device_memory == DeviceMemory::Gpu,
        ..DagFigures::default()
    };
    let computes = info.computes;
    f.header.push(format!(
        "issue mode: {} (`--issue`; auto: exec::IssueMode::Auto's rule)",
        a.issue
    ));
    let plugins = plugins(opened)?;
    let (warmup, reps) = (a.warmup, a.reps as usize);
    // Every DAG is built (and every graph file loaded and lowered) before any runs, so a
    // bad `--graphs` file fails at once.
    let files = a.graphs.iter().map(|path| {
        // Named by the stem; a stem that names a built-in DAG gets ` (file)`.
        let mut stem = path
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        if ["matmul", "fanout", "wavefront", "montage"].contains(&stem.as_str()) {
            stem.push_str(" (file)");
        }
        from_file(path, &stem, a)
    });
    let dags: Vec<Dag> = a
        .dags
        .iter()
        .map(|&kind| build(kind, a))
        .chain(files)
        .collect::<Result<_, _>>()?;
    // The default device memory cap: the device's free memory on CUDA (Plan::for_plugin).
    let dags: Vec<Dag> = dags
        .into_iter()
        .map(|mut d| {
            d.plan = d
                .plan
                .for_plugin(plugins[0].0.as_ref())
                .map_err(|e| format!("{}: {e}", d.name))?;
            Ok(d)
        })
        .collect::<Result<_, String>>()?;
    // Then, before any work, the host memory of each DAG's runs: a run (under minimal, the
    // policy with the fewest host waits), the previous run's report, and every DAG's
    // expected results, held from here to the end.
    let results: Vec<(u64, u64)> = dags.iter().map(Dag::expected_memory).collect();
    let all_results = results.iter().fold(0u64, |t, r| t.saturating_add(r.1));
    for (dag, &(peak, result)) in dags.iter().zip(&results) {
        let run = dag.plan.memory_need(plugins[0].0.as_ref());
        let others = all_results - result;
        let need = MemoryNeed {
            held: run.snapshot.saturating_add(others),
            ..run
        }
        .with_reference(peak.saturating_add(others), result);
        dag.plan
            .check_memory(&need)
            .map_err(|e| format!("{}: {e}", dag.name))?;
    }
    let expected: Vec<Expected> = dags.iter().map(Dag::expected).collect::<Result<_, _>>()?;
    for (dag, expected) in dags.into_iter().zip(expected) {
        f.header.push(format!("{}: {}", dag.name, dag.what));
        // Each policy with elision (the default), then minimal without, then minimal
        // without prefetch where the plan prefetches (under the CUDA default cap).
        let variants = POLICIES.iter().map(|&p| (p, Lowered::Default));
        let mut extra = vec![(SyncPolicy::Minimal, Lowered::NoElide)];
        if !dag.plan.graph().prefetches.is_empty() {
            extra.push((SyncPolicy::Minimal, Lowered::NoPrefetch));
        }
        for (policy, lowered) in variants.chain(extra) {
            // The DAG was planned under `minimal` already.
            let opts = options(policy, a.streams);
            let base = dag.plan.lower_options().clone();
            // A re-lowered plan starts from the program: its spins are scaled again.
            let relower = |o: LowerOptions| {
                dag.plan.relower(&o).and_then(|mut p| {
                    p.scale_spins(dag.spin_scale)?;
                    Ok(p)
                })
            };
            let plan = match (lowered, &opts == dag.plan.options()) {
                (Lowered::Default, true) => Ok(dag.plan.clone()),
                (Lowered::Default, false) => dag.plan.reschedule(&opts),
                (Lowered::NoElide, _) => relower(LowerOptions {
                    elide: false,
                    ..base
                }),
                (Lowered::NoPrefetch, _) => relower(LowerOptions {
                    prefetch: offload_sched::lower::Prefetch::Off,
                    ..base
                }),
            }
            .map_err(|e| format!("{} {policy}: {}", dag.name, e))?;
            let name = match lowered {
                Lowered::Default => policy.to_string(),
                Lowered::NoElide => NO_ELIDE.to_string(),
                Lowered::NoPrefetch => NO_PREFETCH.to_string(),
            };
            let sched = plan.schedule();
            let facts = Facts {
                regions: plan.graph().device_regions(),
                ops: plan.graph().ops.len(),
                streams: sched.used_streams(),
                events: sched.events,
                host_waits: sched.host_waits().count(),
                steps: {
                    use std::hash::{Hash, Hasher};
                    let mut h = std::collections::hash_map::DefaultHasher::new();
                    sched.steps.hash(&mut h);
                    h.finish()
                },
                moved: plan.graph().bytes_moved(),
            };
            for (p, suffix) in &plugins {
                let variant = format!("{name}{suffix}");
                let mut run = 0;
                let per_region = timed_runs(
                    p.as_ref(),
                    &plan,
                    issue_mode(&a.issue),
                    facts.regions,
                    (warmup, reps),
                    |rep| {
                        run += 1;
                        match computes {
                            true => expected.check(&rep.buffers).map_err(|e| {
                                format!(
                                    "{} {variant}, timed run {run}: wrong result: {e}",
                                    dag.name
                                )
                            }),
                            false => Ok(()),
                        }
                    },
                )?
                .per_region;
                let best = per_region.iter().copied().fold(f64::NAN, f64::min);
                let median = median(per_region);
                eprintln!("{} {variant}: {median:.2} µs/region", dag.name);
                f.rows.push(Row {
                    dag: dag.name.clone(),
                    variant,
                    facts: Some(facts),
                    median,
                    best,
                    ..Row::default()
                });
            }
        }
        if let ("matmul", Some(dir)) = (dag.name.as_str(), &a.baselines) {
            llvm_rows(&mut f, dir, (a.n, a.bs), reps);
        }
    }
    let out = render(&f, (warmup, reps), a.streams);
    if let Some(path) = &a.out {
        offload_sched::file::write_atomic(path, out.as_bytes())
            .map_err(|e| format!("write {}: {e}", path.display()))?;
    }
    Ok(out)
}

/// LLVM 19's `blocked_matmul`, nowait and sync, in host fallback unless the pipeline runs
/// on CUDA; a failure becomes a note.
fn llvm_rows(f: &mut DagFigures, dir: &std::path::Path, shape: (u64, u64), reps: usize) {
    let host = !f.gpu;
    for mode in ["nowait", "sync"] {
        match llvm_matmul::run(dir, mode, shape, reps, host) {
            Ok(r) => {
                let best = r.per_region.iter().copied().fold(f64::NAN, f64::min);
                f.rows.push(Row {
                    dag: "matmul".into(),
                    variant: format!("LLVM 19 {mode}"),
                    label: if r.host_fallback {
                        " (host fallback, not the GPU path)".to_string()
                    } else {
                        String::new()
                    },
                    facts: None,
                    median: median(r.per_region),
                    best,
                });
            }
            Err(e) => f.notes.push(format!("note: {e}")),
        }
    }
}
