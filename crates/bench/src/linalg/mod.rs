//! `bench linalg`: tiled dense linear algebra (issue 27 point 3) through the real pipeline
//! — the tiled Cholesky and GEMM programs of [`offload_sched::model::tiled`] and the tiled
//! LU without pivoting of [`offload_sched::model::tiled_lu`] (library tile
//! kernels: OpenBLAS on the host plugin, cuBLAS/cuSOLVER on CUDA) — under each policy,
//! live and (on a GPU) replayed as plugin graphs, side by side in one call with StarPU's
//! Debian examples and the library's monolithic routine (`peers.rs`).
//!
//! **What is timed.** offload-sched rows: a [`Session`] run, first op issued → final host
//! wait ([`offload_sched::exec::Report::pipeline_us`]), minus the median of the same
//! matrix's copies alone (a program of only its `enter data` / `exit data`, same plugin,
//! live or replayed like the row) in the `entered` data style, so every row times the
//! factorization or product, not the transfers (with `--style mapped`, or `entered,mapped`
//! for both, the copies of the mapped rows are the
//! program's own and stay in). The monolithic routine on the host: the LAPACK / BLAS call
//! alone (`peers::host_monolithic`); on CUDA: the tiled program with one tile of order
//! `n` (one cuSOLVER `?potrf`, `?getrf` without pivoting, or cuBLAS `?gemm` call, through
//! the plugin), timed as our rows; LU's host routine is LAPACK `?getrf`, which pivots
//! (LAPACK has no other; no row is interchanged on this matrix). StarPU: the
//! milliseconds it prints. GFLOP/s use `n³/3` (Cholesky), `2n³/3` (LU) and `2n³`
//! (GEMM) for every row; the median of `--reps` (at least 5) runs after `--warmup`.
//!
//! **Memory.** The matrices of one (algorithm, n, precision) are made once, in plugin host
//! memory (page-locked on CUDA), and bound to every run of every row (`inputs.rs`): read
//! buffers in place, the written one (`A` or `C`) as a work copy restored from the
//! initial contents before each run by a host copy on every core, outside the timed
//! span. So a row costs its runs' copies and kernels, not a generation or staging of the
//! matrix per run; each row's wall time (and the restores' share) is printed on stderr
//! and is the report's last column.
//!
//! **Order.** Per algorithm and n: the copies alone, the monolithic routine, then the
//! tiled rows; `--out` is rewritten after every row (marked incomplete until the end),
//! so a call stopped by a timeout still leaves the baseline and the rows before it.
//!
//! **Checked.** The last run of every offload-sched row and of the monolithic routine: the
//! scaled residual of [`offload_sched::model::residual`] below its bound (a higher one is
//! an error naming the row), where `n ≤ --residual-max-n` (default 8192). The check is one
//! host BLAS call of order n on every core (`dsyrk`, `n³` flops, or `dgemm`, `2n³`), about
//! 1-2 s at n = 8192 on 16 cores and 64× that at n = 32768, so the large GPU rows are
//! not checked (the report says so) and the GPU script checks n = 8192 in a call of its
//! own.

mod bound;
mod capped;
mod inputs;
mod peers;
#[cfg(feature = "mpi")]
pub(crate) mod rank_worker;
pub(crate) mod ranks;
mod ranks_report;
mod report;

#[cfg(feature = "mpi")]
pub use rank_worker::{run as run_rank, RankArgs};

use crate::{make_plugin, median, PLUGINS};
use inputs::Inputs;
use offload_sched::model::residual::{
    cholesky_residual, gemm_residual, lu_residual, shifted_matrix, RESIDUAL_BOUND,
};
use offload_sched::model::{
    tiled_cholesky_priority, tiled_gemm, tiled_lu_lookahead, DataStyle, ElemType, MapItem, MapType,
    MatrixInit, Program, ProgramBuilder, Section, Tiling,
};
use offload_sched::plugin::{DeviceMemory, Plugin};
use offload_sched::schedule::{ScheduleOptions, SyncPolicy};
use offload_sched::{Plan, Session};
use report::{Figures, Kind, Row};
use std::path::PathBuf;
use std::time::Instant;

/// The algorithms `bench linalg` runs.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    Cholesky,
    Gemm,
    /// LU without pivoting (StarPU's `lu_implicit`).
    Lu,
}

/// Element precision.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    F32,
    F64,
}

/// The data style of the tiled programs.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    Entered,
    Mapped,
}

/// Arguments of `bench linalg`.
#[derive(clap::Args, Clone, Debug)]
pub struct LinalgArgs {
    /// Plugin: `host`, `cuda`, `auto` (cuda if a device answers, else host).
    #[arg(long, default_value = "auto", value_parser = PLUGINS)]
    pub plugin: String,
    /// Algorithms, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "cholesky,gemm"
    )]
    pub algorithms: Vec<Algorithm>,
    /// Matrix orders n, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "4096", value_parser = clap::value_parser!(u64).range(1..=65536))]
    pub n: Vec<u64>,
    /// Tile sizes, comma-separated (each must divide every n).
    #[arg(long, value_delimiter = ',', default_value = "512", value_parser = clap::value_parser!(u64).range(1..=65536))]
    pub tiles: Vec<u64>,
    /// Precision.
    #[arg(long, value_enum, default_value = "f32")]
    pub precision: Precision,
    /// Policies, comma-separated (`per-op`, `per-region`, `minimal`).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "per-op,per-region,minimal"
    )]
    pub policies: Vec<String>,
    /// How the tiled programs move the matrix, comma-separated (`entered,mapped` runs
    /// both, judging issue 28's per-task-map target; `mapped` rows are lowered with
    /// transfer elision, the default).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "entered")]
    pub style: Vec<Style>,
    /// Streams per device, comma-separated: each tiled row is run with each (the first
    /// is the one the targets judge; the copies alone and the one-tile routine use it).
    #[arg(long, value_delimiter = ',', default_value = "4", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub streams: Vec<u32>,
    /// Look-ahead depths of the tiled Cholesky and LU, comma-separated: 0 the written
    /// order, d > 0 the updates feeding the next d panels first and the next panel ahead
    /// of the other updates (`model::tiled::tiled_cholesky_lookahead`; GEMM has none and
    /// runs once). The first is the one the targets judge.
    #[arg(long, value_delimiter = ',', default_value = "0", value_parser = clap::value_parser!(u64).range(0..=64))]
    pub lookahead: Vec<u64>,
    /// Panel priorities of the tiled Cholesky, comma-separated (`0,1` runs both): 0 no
    /// `priority` clause, n > 0 `priority(n)` on potrf, the panel's trsm and, with
    /// look-ahead, the updates feeding the next panel, which the schedule puts on each
    /// device's high-priority stream (`model::tiled_cholesky_priority`; CUDA: the
    /// greatest stream priority). LU and GEMM run once, at 0.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pub priority_panel: Vec<u32>,
    /// Timed runs per row (the median is reported; at least 5).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(5..))]
    pub reps: u32,
    /// Untimed runs before each row.
    #[arg(long, default_value_t = 1)]
    pub warmup: u32,
    /// Folder of StarPU's examples (Debian `starpu-examples`).
    #[arg(long, default_value = peers::STARPU_EXAMPLES)]
    pub starpu: PathBuf,
    /// Do not run StarPU.
    #[arg(long)]
    pub no_starpu: bool,
    /// Do not replay (replayed rows run by default where the plugin's memory is a GPU's).
    #[arg(long)]
    pub no_replay: bool,
    /// Largest n whose results are checked by the scaled residual.
    #[arg(long, default_value_t = 8192)]
    pub residual_max_n: u64,
    /// Write the markdown report here too.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Device memory cap (`128MiB`, `16GiB`, `1.5GB`: units as `run --device-memory`): each tiled row again under it, once per
    /// eviction policy, all lowered with elision, with the bytes moved, the exact peak
    /// of live device bytes and the ≥ 0.8× target (`capped.rs`).
    #[arg(long, value_name = "BYTES", value_parser = offload_sched::estimate::parse_bytes)]
    pub device_memory: Option<u64>,
    /// Distributed (issue 29): the tiled Cholesky over each of these rank counts as MPI
    /// processes under mpirun, beside StarPU-MPI's `mpi_cholesky`, at the first `--n`
    /// and in weak scaling (`ranks.rs`); needs a build with the `mpi` feature.
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=64))]
    pub ranks: Vec<u32>,
}

fn policy(name: &str) -> Result<SyncPolicy, String> {
    SyncPolicy::ALL
        .into_iter()
        .find(|p| p.to_string() == name)
        .ok_or_else(|| format!("--policies: unknown policy {name:?} (per-op, per-region, minimal)"))
}

/// The program of `alg` on `t` in look-ahead order of depth `lookahead` (GEMM: none),
/// the Cholesky's panel at `priority(panel)` when `panel > 0`.
fn program(alg: Algorithm, t: &Tiling, lookahead: u64, panel: u32) -> Program {
    match alg {
        Algorithm::Cholesky => tiled_cholesky_priority(t, lookahead, panel),
        Algorithm::Gemm => tiled_gemm(t),
        Algorithm::Lu => tiled_lu_lookahead(t, lookahead),
    }
}

/// The buffer a run of `alg` leaves its result in: `A` (the factors) or `C` (the product).
fn output(alg: Algorithm) -> &'static str {
    match alg {
        Algorithm::Cholesky | Algorithm::Lu => "A",
        Algorithm::Gemm => "C",
    }
}

/// The copies of `whole` (a program of `alg`) alone in the entered style: `enter data` of
/// its buffers (same names, types, lengths and initial contents, so its runs bind the
/// same memory), `taskwait`, `exit data` copying back the output and releasing the rest.
fn copies_only(alg: Algorithm, whole: &Program) -> Program {
    let mut p = ProgramBuilder::new("copies");
    let bufs: Vec<_> = whole
        .buffers
        .iter()
        .map(|b| {
            let exit = if b.name == output(alg) {
                MapType::From
            } else {
                MapType::Release
            };
            (p.buffer(&b.name, b.ty, b.len, b.init.clone()), b.len, exit)
        })
        .collect();
    let item = |m, b, len| MapItem::new(m, Section::new(b, 0, len));
    drop(
        p.enter_data(
            "enter",
            bufs.iter()
                .map(|&(b, l, _)| item(MapType::To, b, l))
                .collect(),
        ),
    );
    p.taskwait();
    drop(p.exit_data(
        "exit",
        bufs.iter().map(|&(b, l, m)| item(m, b, l)).collect(),
    ));
    p.build()
}

/// What the runs of one row measured.
struct Runs {
    /// µs of each timed run ([`offload_sched::exec::Report::pipeline_us`]).
    us: Vec<f64>,
    /// Wall seconds of the whole row: session, warm-up and timed runs, restores.
    wall_s: f64,
    /// Of which restoring the written buffers before each run.
    restore_s: f64,
}

/// GFLOP/s of runs of `flops` that took `us` µs each, `copies` µs of copies left out
/// (at least 1 µs remains).
fn gflops(flops: f64, us: &[f64], copies: f64) -> Vec<f64> {
    us.iter()
        .map(|u| flops / ((u - copies).max(1.0) * 1e3))
        .collect()
}

impl Runs {
    /// GFLOP/s of each timed run of `flops` (`copy_us`, the copies alone, subtracted) of row `row`,
    /// after its scaled residual `res` (when checked) is below [`RESIDUAL_BOUND`]; prints
    /// the row's progress line (`runs` runs, stamped `stamp`) to stderr.
    ///
    /// Errors: a residual that is NaN or not below the bound, naming the row.
    fn figures(
        &self,
        row: &str,
        res: Option<f64>,
        (flops, copy_us): (f64, f64),
        (runs, stamp): (u32, String),
    ) -> Result<Vec<f64>, String> {
        if let Some(x) = res.filter(|x| x.is_nan() || *x >= RESIDUAL_BOUND) {
            return Err(format!(
                "{row}: scaled residual {x} is not below {RESIDUAL_BOUND}: wrong result"
            ));
        }
        let g = gflops(flops, &self.us, copy_us);
        eprintln!(
            "{stamp} {row}: {:.1} GFLOP/s; {runs} runs in {:.1} s ({:.1} s restoring the input)",
            median(g.clone()),
            self.wall_s,
            self.restore_s
        );
        Ok(g)
    }
}

/// `warmup + reps` runs of `plan` by one session on `plugin` (replayed or not), every
/// buffer bound to `inputs` (with `restore`, the written ones copied from their initial
/// contents before each run: a factorization overwrites its input).
fn session_runs(
    plan: &Plan,
    plugin: &dyn Plugin,
    replay: bool,
    (warmup, reps): (u32, u32),
    inputs: &mut Inputs<'_>,
    restore: bool,
) -> Result<Runs, String> {
    let t0 = Instant::now();
    let e = |e: offload_sched::Error| e.render();
    let mut s = Session::new(plan, plugin).map_err(e)?.with_replay(replay);
    let mut us = Vec::new();
    let mut restore_s = 0.0;
    for i in 0..warmup + reps {
        restore_s += inputs.prepare(plan, restore)?;
        let r = s.run(inputs.bindings(plan)?).map_err(e)?;
        if replay && r.replay.is_none() {
            return Err(format!("{}: the run was not replayed", plan.graph().name));
        }
        if i >= warmup {
            us.push(r.pipeline_us(plan.graph()));
        }
    }
    Ok(Runs {
        us,
        wall_s: t0.elapsed().as_secs_f64(),
        restore_s,
    })
}

/// The scaled residual of the last run of `alg` on `t` whose buffers are `inputs`
/// (computed with OpenBLAS on `cores` threads).
fn residual(alg: Algorithm, t: &Tiling, inputs: &Inputs<'_>, cores: usize) -> Result<f64, String> {
    let (n, tile) = (t.n as usize, t.tile as usize);
    let get = |v: Option<Vec<f64>>, name: &str| v.ok_or_else(|| format!("no buffer {name}"));
    let initial = |name: &str| get(inputs.initial(name), name);
    let got = get(inputs.result(output(alg)), output(alg))?;
    Ok(match alg {
        Algorithm::Cholesky => {
            let a = shifted_matrix(&initial("A")?, n, tile);
            peers::blas_threads(cores, || cholesky_residual(&a, &got, n, tile, t.ty))
        }
        Algorithm::Lu => {
            let a = shifted_matrix(&initial("A")?, n, tile);
            peers::blas_threads(cores, || lu_residual(&a, &got, n, tile, t.ty))
        }
        Algorithm::Gemm => {
            let (a, b) = (initial("A")?, initial("B")?);
            peers::blas_threads(cores, || gemm_residual(&a, &b, &got, n, tile, t.ty))
        }
    })
}

/// `--out` rewritten with the rows so far (a call stopped by a timeout leaves them);
/// `done` false adds a note saying the call had not finished.
fn checkpoint(a: &LinalgArgs, f: &Figures, done: bool) -> Result<String, String> {
    let mut f = f.clone();
    if !done {
        f.notes.push(format!(
            "incomplete: written after {} rows, while the call was still running",
            f.rows.len()
        ));
    }
    let out = report::render(&f, a.reps as usize);
    if let Some(path) = &a.out {
        offload_sched::file::write_atomic(path, out.as_bytes())
            .map_err(|e| format!("write {}: {e}", path.display()))?;
    }
    Ok(out)
}

/// Runs `bench linalg` and returns the report (markdown).
///
/// Per algorithm and n, in this order (so a call stopped early keeps the baselines): the
/// buffers made once (`inputs.rs`), the copies alone (entered style), the library's
/// monolithic routine, then the tiled rows of each tile and policy (live, then
/// replayed), then StarPU (host plugin). Each row's wall time goes to stderr and into
/// the report; `--out` is rewritten after every row.
///
/// Errors: an unknown plugin or policy, a tile not dividing n, a failed run, a residual
/// over the bound (naming the row), an unwritable `--out`. A missing or failing peer is a
/// note in the report.
pub fn run(a: &LinalgArgs) -> Result<String, String> {
    if !a.ranks.is_empty() {
        if !cfg!(feature = "mpi") {
            return Err("--ranks needs a build with the `mpi` feature (the CLI's default)".into());
        }
        return ranks::run(a);
    }
    super::check_out(a.out.as_deref())?;
    let start = Instant::now();
    let policies: Vec<SyncPolicy> = a
        .policies
        .iter()
        .map(|p| policy(p))
        .collect::<Result<_, _>>()?;
    let ty = match a.precision {
        Precision::F32 => ElemType::F32,
        Precision::F64 => ElemType::F64,
    };
    // Every tiling checked before anything runs (the builders panic on a bad one).
    for &n in &a.n {
        for &tile in &a.tiles {
            Tiling {
                n,
                tile,
                ty,
                style: DataStyle::Entered,
                init: MatrixInit::Random(1),
            }
            .validate()
            .map_err(|e| format!("--n {n} --tiles {tile}: {e}"))?;
        }
    }
    let opened = make_plugin(&a.plugin)?;
    let plugin = opened.plugin.as_ref();
    let info = plugin.info();
    let gpu = info.device_memory == DeviceMemory::Gpu;
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let prec = if ty == ElemType::F32 { 's' } else { 'd' };
    let mut styles: Vec<DataStyle> = (a.style.iter())
        .map(|s| match s {
            Style::Entered => DataStyle::Entered,
            Style::Mapped => DataStyle::Mapped,
        })
        .collect();
    styles.dedup();
    let entered = styles.contains(&DataStyle::Entered);
    let replays: Vec<bool> = if gpu && !a.no_replay {
        vec![false, true]
    } else {
        vec![false]
    };
    let mut f = Figures {
        plugin: info.name.clone(),
        gpu,
        cores,
        ..Figures::default()
    };
    let variants = a.streams.len() > 1 || a.lookahead != [0] || a.priority_panel != [0];
    let streams0 = a.streams.first().copied().unwrap_or(4);
    f.header.push(format!(
        "tiled programs: {} data style, {} streams per device{}, matrices random (Cholesky: plus n on the diagonal), made once per n in plugin host memory ({}) and bound to every run",
        styles.iter().map(|s| s.name()).collect::<Vec<_>>().join(" and "),
        a.streams.iter().map(u32::to_string).collect::<Vec<_>>().join(", "),
        match a.lookahead.as_slice() {
            [0] => String::new(),
            l => format!(
                ", look-ahead {}",
                l.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
            ),
        },
        if gpu { "page-locked" } else { "the host plugin's" }
    ));
    if styles.contains(&DataStyle::Mapped) {
        f.header.push("mapped rows (`, mapped`): per-task map clauses, lowered with transfer elision (kept tiles, deferred D2H), timed with their own copies in".into());
    }
    if entered {
        f.header.push("offload-sched and on-plugin routine rows: pipeline time minus the median time of the matrix's copies alone (enter/exit data, same plugin)".into());
    }
    let reps = (a.warmup, a.reps);
    let opts_on = |p: SyncPolicy, streams: u32| ScheduleOptions {
        policy: p,
        streams_per_device: streams,
        random_streams: None,
        host_lanes: 1,
    };
    let opts = |p: SyncPolicy| opts_on(p, streams0);
    let render = |e: offload_sched::Error| e.render();
    let at = |start: &Instant| format!("[{:.0} s]", start.elapsed().as_secs_f64());
    for &alg in &a.algorithms {
        let name = match alg {
            Algorithm::Cholesky => "cholesky",
            Algorithm::Gemm => "gemm",
            Algorithm::Lu => "lu",
        };
        if alg == Algorithm::Lu {
            f.header.push("LU: without pivoting (tiled and StarPU's lu_implicit), matrix random plus n on the diagonal (diagonally dominant), 2n³/3 flops, residual ‖A − L·U‖₁ / (‖A‖₁·n·ε) (LAPACK dget01)".into());
        }
        for &n in &a.n {
            let flops = peers::flops(alg, n);
            let checked = n <= a.residual_max_n;
            let styled = |tile, style| Tiling {
                n,
                tile,
                ty,
                style,
                init: MatrixInit::Random(1),
            };
            let tiling = |tile| styled(tile, styles[0]);
            // The one-tile program: the monolithic routine's on a GPU, and the model of
            // the buffers every row of this n binds.
            let whole = Plan::new(program(alg, &tiling(n), 0, 0), &opts(SyncPolicy::Minimal))
                .map_err(render)?;
            let mut inputs = Inputs::new(&whole, plugin, cores)?;
            let t0 = Instant::now();
            inputs.prepare(&whole, false)?;
            let made = format!(
                "{prec}{name} n={n}: buffers made once in {:.1} s ({:.1} s generating; {:.2} GB of plugin host memory held)",
                t0.elapsed().as_secs_f64(),
                inputs.made_s,
                inputs.held_bytes as f64 / 1e9
            );
            eprintln!("{} {made}", at(&start));
            f.header.push(made);
            // The copies alone, per replay mode (entered style only).
            let mut copy_us = vec![0.0; replays.len()];
            if entered {
                let copies = Plan::new(
                    copies_only(alg, whole.program()),
                    &opts(SyncPolicy::Minimal),
                )
                .map_err(render)?;
                for (k, &replay) in replays.iter().enumerate() {
                    let r = session_runs(&copies, plugin, replay, reps, &mut inputs, false)?;
                    copy_us[k] = median(r.us);
                    let line = format!(
                        "{prec}{name} n={n}: copies alone{} {:.1} ms ({:.1} s for the row)",
                        if replay { ", replayed" } else { "" },
                        copy_us[k] / 1e3,
                        r.wall_s
                    );
                    eprintln!("{} {line}", at(&start));
                    f.header.push(line);
                }
            }
            // The library's monolithic routine first: the baseline every target needs.
            if gpu {
                let vendor = match alg {
                    Algorithm::Cholesky => {
                        format!("cuSOLVER {prec}potrf (one call of order n, through the plugin)")
                    }
                    Algorithm::Gemm => {
                        format!("cuBLAS {prec}gemm (one call of order n, through the plugin)")
                    }
                    Algorithm::Lu => format!(
                        "cuSOLVER {prec}getrf without pivoting (one call of order n, through the plugin)"
                    ),
                };
                let r = session_runs(&whole, plugin, false, reps, &mut inputs, true)
                    .map_err(|e| format!("{vendor}: {e}"))?;
                let res = match checked {
                    true => Some(residual(alg, &tiling(n), &inputs, cores)?),
                    false => None,
                };
                let g = r.figures(
                    &format!("{prec}{name} n={n} {vendor}"),
                    res,
                    (flops, copy_us[0]),
                    (reps.0 + reps.1, at(&start)),
                )?;
                f.rows.push(Row {
                    alg: name,
                    prec,
                    n,
                    tile: None,
                    variant: vendor,
                    kind: Kind::Monolithic,
                    runs: g.len(),
                    gflops: median(g),
                    whole: Some(median(gflops(flops, &r.us, 0.0))),
                    residual: res,
                    wall_s: Some(r.wall_s),
                    moved: Some(whole.graph().bytes_moved()),
                });
            } else {
                let what = match alg {
                    Algorithm::Cholesky => {
                        format!("LAPACK {prec}potrf (OpenBLAS, {cores} threads)")
                    }
                    Algorithm::Gemm => format!("BLAS {prec}gemm (OpenBLAS, {cores} threads)"),
                    Algorithm::Lu => format!(
                        "LAPACK {prec}getrf with partial pivoting (OpenBLAS, {cores} threads; no row interchanged)"
                    ),
                };
                let t0 = Instant::now();
                match peers::host_monolithic(
                    (alg, ty),
                    n,
                    (cores, a.reps as usize),
                    a.residual_max_n,
                ) {
                    Ok(r) => f.rows.push(Row {
                        alg: name,
                        prec,
                        n,
                        tile: None,
                        variant: what,
                        kind: Kind::Monolithic,
                        runs: r.gflops.len(),
                        gflops: median(r.gflops),
                        whole: None,
                        residual: r.residual,
                        wall_s: Some(t0.elapsed().as_secs_f64()),
                        moved: None,
                    }),
                    Err(e) => f.notes.push(format!("{what}: {e}")),
                }
            }
            checkpoint(a, &f, false)?;
            // GEMM has no look-ahead: its programs once per stream count.
            let lookaheads = match alg {
                Algorithm::Gemm => &a.lookahead[..1],
                _ => &a.lookahead[..],
            };
            // The panel priority: the Cholesky's alone.
            let panels = match alg {
                Algorithm::Cholesky => &a.priority_panel[..],
                _ => &[0][..],
            };
            let shapes: Vec<(u32, u64, u32)> = a
                .streams
                .iter()
                .flat_map(|&s| lookaheads.iter().map(move |&l| (s, l)))
                .flat_map(|(s, l)| panels.iter().map(move |&q| (s, l, q)))
                .collect();
            if !gpu {
                for &tile in &a.tiles {
                    let reps = a.reps as usize;
                    if let Some(wb) = bound::host_work_bound((alg, ty), (n, tile), cores, reps) {
                        eprintln!(
                            "{} {name} n={n} tile {tile}: work bound {}",
                            at(&start),
                            wb.describe()
                        );
                        f.rows.push(wb.row((name, prec), (n, tile), flops, reps));
                    }
                }
            }
            for (&tile, &style) in (a.tiles.iter()).flat_map(|t| styles.iter().map(move |s| (t, s)))
            {
                let t = styled(tile, style);
                let mapped = style == DataStyle::Mapped;
                for &(streams, la, panel) in &shapes {
                    // Bound to the plugin: on CUDA the default cap is the device's free
                    // memory (Plan::for_plugin), so kept tiles are not bounded by the
                    // 256 MiB keep limit.
                    let lowered = |p| {
                        Plan::new(program(alg, &t, la, panel), &opts_on(p, streams))
                            .and_then(|plan| plan.for_plugin(plugin))
                            .map_err(render)
                    };
                    let plans = policies.iter().map(|&p| {
                        let v = capped::variants(lowered(p)?, a.device_memory)?;
                        Ok(v.into_iter().map(move |(s, plan)| (p, s, plan)))
                    });
                    let plans: Vec<_> = match plans.collect::<Result<Vec<_>, String>>() {
                        Ok(plans) => plans,
                        // The entered style's `enter data` of the whole matrix is over any
                        // cap below its size (refused by design): the mapped rows still run.
                        Err(e) if a.device_memory.is_some() && !mapped => {
                            let note = format!(
                                "{name} n={n} tile {tile}, entered style: not run under --device-memory ({})",
                                e.lines().next().unwrap_or_default()
                            );
                            if !f.notes.contains(&note) {
                                f.notes.push(note);
                            }
                            continue;
                        }
                        Err(e) => return Err(e),
                    };
                    for (p, suffix, plan) in plans.into_iter().flatten() {
                        let shape = match (variants, alg) {
                            (false, _) => String::new(),
                            (true, Algorithm::Gemm) => format!(" ({streams} streams)"),
                            (true, _) => format!(
                                " ({streams} streams, look-ahead {la}{})",
                                match panel {
                                    0 => String::new(),
                                    q => format!(", priority panel {q}"),
                                }
                            ),
                        };
                        if a.device_memory.is_some() {
                            let line = format!(
                                "{prec}{name} n={n} tile {tile} {p}{shape}{suffix}: {}",
                                capped::moved(&plan)
                            );
                            eprintln!("{} {line}", at(&start));
                            f.header.push(line);
                        }
                        for (k, &replay) in replays.iter().enumerate() {
                            let variant = format!(
                                "offload-sched {p}{}{}{shape}{suffix}",
                                if replay { ", replayed" } else { "" },
                                if mapped { ", mapped" } else { "" }
                            );
                            let row = format!("{prec}{name} n={n} tile {tile} {variant}");
                            let r = session_runs(&plan, plugin, replay, reps, &mut inputs, true)
                                .map_err(|e| format!("{row}: {e}"))?;
                            let res = match checked {
                                true => Some(residual(alg, &t, &inputs, cores)?),
                                false => None,
                            };
                            // The mapped form's copies are its own: they stay in.
                            let copies = if mapped { 0.0 } else { copy_us[k] };
                            let g = r.figures(
                                &row,
                                res,
                                (flops, copies),
                                (reps.0 + reps.1, at(&start)),
                            )?;
                            let minimal = p == SyncPolicy::Minimal;
                            f.rows.push(Row {
                                alg: name,
                                prec,
                                n,
                                tile: Some(tile),
                                variant,
                                kind: match (mapped, replay) {
                                    (true, replayed) => Kind::Mapped { minimal, replayed },
                                    (false, true) => Kind::OursReplayed { minimal },
                                    (false, false) => Kind::Ours { minimal },
                                },
                                runs: g.len(),
                                gflops: median(g),
                                whole: Some(median(gflops(flops, &r.us, 0.0))),
                                residual: res,
                                wall_s: Some(r.wall_s),
                                moved: Some(plan.graph().bytes_moved()),
                            });
                            checkpoint(a, &f, false)?;
                        }
                    }
                }
                // StarPU once per tile size (its rows do not depend on our data style).
                if !gpu && !a.no_starpu && style == styles[0] {
                    starpu_rows(&mut f, a, (alg, ty), (n, tile), cores);
                    checkpoint(a, &f, false)?;
                }
            }
        }
    }
    if gpu && !a.no_starpu {
        f.notes.push("StarPU: not run beside the CUDA plugin (the Debian starpu-examples are built for CPUs; the GPU targets compare with cuSOLVER / cuBLAS)".into());
    }
    f.header.push(format!(
        "wall time of the call: {:.1} s",
        start.elapsed().as_secs_f64()
    ));
    checkpoint(a, &f, true)
}

/// StarPU's example for (`cholesky`, `ty`) at (`n`, `tile`) under lws and dmda, the
/// better median marked; a missing or failing example becomes a note.
fn starpu_rows(
    f: &mut Figures,
    a: &LinalgArgs,
    (alg, ty): (Algorithm, ElemType),
    (n, tile): (u64, u64),
    cores: usize,
) {
    let (name, prec) = (
        match alg {
            Algorithm::Cholesky => "cholesky",
            Algorithm::Gemm => "gemm",
            Algorithm::Lu => "lu",
        },
        if ty == ElemType::F32 { 's' } else { 'd' },
    );
    let example = match peers::starpu_example(alg, ty) {
        Ok(e) => e,
        Err(e) => return f.notes.push(format!("StarPU for {prec}{name}: {e}")),
    };
    let first = f.rows.len();
    for sched in ["lws", "dmda"] {
        let t0 = Instant::now();
        match peers::starpu(
            &a.starpu,
            (alg, ty),
            (n, tile),
            sched,
            (cores, a.reps as usize),
        ) {
            Ok(r) => {
                eprintln!(
                    "StarPU {example} {sched} n={n} tile {tile}: {:.1} GFLOP/s",
                    median(r.gflops.clone())
                );
                f.rows.push(Row {
                    alg: name,
                    prec,
                    n,
                    tile: Some(tile),
                    variant: format!(
                        "StarPU {example} {sched} (STARPU_NCPU={cores}, after {} calibration runs)",
                        peers::CALIBRATION_RUNS
                    ),
                    kind: Kind::StarPU { best: false },
                    runs: r.gflops.len(),
                    gflops: median(r.gflops),
                    whole: None,
                    residual: None,
                    wall_s: Some(t0.elapsed().as_secs_f64()),
                    moved: None,
                })
            }
            Err(e) => f.notes.push(format!("StarPU {example} {sched}: {e}")),
        }
    }
    if let Some(best) =
        (first..f.rows.len()).max_by(|&x, &y| f.rows[x].gflops.total_cmp(&f.rows[y].gflops))
    {
        f.rows[best].kind = Kind::StarPU { best: true };
        f.rows[best].variant.push_str(" — the better scheduler");
    }
}
