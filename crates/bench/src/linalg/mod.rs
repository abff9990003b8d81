//! `bench linalg`: tiled dense linear algebra (issue 27 point 3) through the real pipeline
//! — the tiled Cholesky and GEMM programs of [`offload_sched::model::tiled`] (library tile
//! kernels: OpenBLAS on the host plugin, cuBLAS/cuSOLVER on CUDA) — under each policy,
//! live and (on a GPU) replayed as plugin graphs, side by side in one call with StarPU's
//! Debian examples and the library's monolithic routine (`peers.rs`).
//!
//! **What is timed.** offload-sched rows: a [`Session`] run, first op issued → final host
//! wait ([`offload_sched::exec::Report::pipeline_us`]), minus the median of the same
//! matrix's copies alone (a program of only its `enter data` / `exit data`, same plugin,
//! live or replayed like the row) in the `entered` data style, so every row times the
//! factorization or product, not the transfers (with `--style mapped` the copies are the
//! program's own and stay in). The monolithic routine on the host: the LAPACK / BLAS call
//! alone (`peers::host_monolithic`); on CUDA: the tiled program with one tile of order
//! `n` (one cuSOLVER `?potrf` or cuBLAS `?gemm` call, through the plugin), timed as our
//! rows. StarPU: the milliseconds it prints. GFLOP/s use `n³/3` (Cholesky) and `2n³`
//! (GEMM) for every row; the median of `--reps` (at least 5) runs after `--warmup`.
//!
//! **Checked.** The last run of every offload-sched row and of the host routine: the scaled
//! residual of [`offload_sched::model::residual`] below its bound (a higher one is an
//! error naming the row), where `n ≤ --residual-max-n` (the check costs one host BLAS
//! call of order n, `n³` flops: 70 s at n = 32768 on 16 cores); above it the report says
//! the residual was not checked.

mod peers;
mod report;

use crate::{make_plugin, median, PLUGINS};
use offload_sched::exec::BufferData;
use offload_sched::model::residual::{
    cholesky_residual, gemm_residual, shifted_matrix, RESIDUAL_BOUND,
};
use offload_sched::model::tiled::{cholesky_flops, gemm_flops};
use offload_sched::model::{
    tiled_cholesky, tiled_gemm, DataStyle, ElemType, MapItem, MapType, MatrixInit, Program,
    ProgramBuilder, Section, Tiling,
};
use offload_sched::plugin::{DeviceMemory, Plugin};
use offload_sched::schedule::{ScheduleOptions, SyncPolicy};
use offload_sched::{Bindings, Plan, Session};
use report::{Figures, Kind, Row};
use std::path::PathBuf;

/// The algorithms `bench linalg` runs.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    Cholesky,
    Gemm,
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
    /// How the tiled programs move the matrix.
    #[arg(long, value_enum, default_value = "entered")]
    pub style: Style,
    /// Streams per device.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub streams: u32,
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
}

fn policy(name: &str) -> Result<SyncPolicy, String> {
    SyncPolicy::ALL
        .into_iter()
        .find(|p| p.to_string() == name)
        .ok_or_else(|| format!("--policies: unknown policy {name:?} (per-op, per-region, minimal)"))
}

/// The program of `alg` on `t`.
fn program(alg: Algorithm, t: &Tiling) -> Program {
    match alg {
        Algorithm::Cholesky => tiled_cholesky(t),
        Algorithm::Gemm => tiled_gemm(t),
    }
}

/// The copies of `alg`'s program alone in the entered style: `enter data` of its buffers,
/// `taskwait`, `exit data` as the program exits them.
fn copies_only(alg: Algorithm, t: &Tiling) -> Program {
    let mut p = ProgramBuilder::new("copies");
    let nn = t.n * t.n;
    let init = offload_sched::model::Init::Random(1);
    let bufs: Vec<_> = match alg {
        Algorithm::Cholesky => vec![
            (p.buffer("A", t.ty, nn, init.clone()), nn, MapType::From),
            (
                p.buffer("ones", t.ty, t.tile, offload_sched::model::Init::Fill(1.0)),
                t.tile,
                MapType::Release,
            ),
        ],
        Algorithm::Gemm => vec![
            (p.buffer("A", t.ty, nn, init.clone()), nn, MapType::Release),
            (p.buffer("B", t.ty, nn, init), nn, MapType::Release),
            (
                p.buffer("C", t.ty, nn, offload_sched::model::Init::Zeros),
                nn,
                MapType::From,
            ),
        ],
    };
    let item = |m, (b, len): (_, u64)| MapItem::new(m, Section::new(b, 0, len));
    drop(
        p.enter_data(
            "enter",
            bufs.iter()
                .map(|&(b, l, _)| item(MapType::To, (b, l)))
                .collect(),
        ),
    );
    p.taskwait();
    drop(p.exit_data(
        "exit",
        bufs.iter().map(|&(b, l, m)| item(m, (b, l))).collect(),
    ));
    p.build()
}

/// µs of each timed run of `plan` by a session on `plugin` (replayed or not), and the
/// session's last buffers of `names` as f64 (when `keep`).
fn session_runs(
    plan: &Plan,
    plugin: &dyn Plugin,
    replay: bool,
    (warmup, reps): (u32, u32),
    keep: &[&str],
) -> Result<(Vec<f64>, Vec<Vec<f64>>), String> {
    let e = |e: offload_sched::Error| e.render();
    let mut s = Session::new(plan, plugin).map_err(e)?.with_replay(replay);
    // Every run starts from the program's initial matrices, made once here and copied
    // into the bound memory before each run: an unbound buffer is generated from its
    // seed again by every run (at N = 32768 that is 8.6 GB of random numbers per run,
    // tens of seconds of host time, outside the time measured but inside the call's).
    let init: Vec<(String, BufferData)> = plan
        .program()
        .buffers
        .iter()
        .map(|b| (b.name.clone(), BufferData::init(b)))
        .collect();
    let mut work = init.clone();
    let mut us = Vec::new();
    for i in 0..warmup + reps {
        let mut b = Bindings::new();
        for ((name, w), (_, d)) in work.iter_mut().zip(&init) {
            w.clone_from(d);
            b = match w {
                BufferData::F32(v) => b.output(plan.buffer::<f32>(name).map_err(e)?, v),
                BufferData::F64(v) => b.output(plan.buffer::<f64>(name).map_err(e)?, v),
                _ => b,
            };
        }
        let r = s.run(b).map_err(e)?;
        if replay && r.replay.is_none() {
            return Err(format!("{}: the run was not replayed", plan.graph().name));
        }
        if i >= warmup {
            us.push(r.pipeline_us(plan.graph()));
        }
    }
    let out = keep
        .iter()
        .map(|name| {
            let (_, d) = work.iter().find(|(n, _)| n == name).expect("a kept buffer");
            (0..d.len())
                .map(|i| d.get_f64(i).unwrap_or(f64::NAN))
                .collect()
        })
        .collect();
    Ok((us, out))
}

/// The initial contents of buffer `name` of `plan`, as f64.
fn initial(plan: &Plan, name: &str) -> Vec<f64> {
    let b = plan
        .program()
        .buffers
        .iter()
        .find(|b| b.name == name)
        .expect("buffer of the program");
    let d = BufferData::init(b);
    (0..d.len())
        .map(|i| d.get_f64(i).unwrap_or(f64::NAN))
        .collect()
}

/// The scaled residual of a run of `plan` (`alg` on `t`) whose last buffers are `got`
/// (`A` for Cholesky, `C` for GEMM).
fn residual(alg: Algorithm, plan: &Plan, t: &Tiling, got: &[f64]) -> f64 {
    let (n, tile) = (t.n as usize, t.tile as usize);
    match alg {
        Algorithm::Cholesky => cholesky_residual(
            &shifted_matrix(&initial(plan, "A"), n, tile),
            got,
            n,
            tile,
            t.ty,
        ),
        Algorithm::Gemm => {
            gemm_residual(&initial(plan, "A"), &initial(plan, "B"), got, n, tile, t.ty)
        }
    }
}

/// Runs `bench linalg` and returns the report (markdown).
///
/// Errors: an unknown plugin or policy, a tile not dividing n, a failed run, a residual
/// over the bound (naming the row), an unwritable `--out`. A missing or failing peer is a
/// note in the report.
pub fn run(a: &LinalgArgs) -> Result<String, String> {
    super::check_out(a.out.as_deref())?;
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
    let style = match a.style {
        Style::Entered => DataStyle::Entered,
        Style::Mapped => DataStyle::Mapped,
    };
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
    f.header.push(format!(
        "tiled programs: {} data style, {} streams per device, matrices random (Cholesky: plus n on the diagonal)",
        style.name(),
        a.streams
    ));
    if style == DataStyle::Entered {
        f.header.push("offload-sched and on-plugin routine rows: pipeline time minus the median time of the matrix's copies alone (enter/exit data, same plugin)".into());
    }
    let reps = (a.warmup, a.reps);
    let opts = |p: SyncPolicy| ScheduleOptions {
        policy: p,
        streams_per_device: a.streams,
        random_streams: None,
        host_lanes: 1,
    };
    for &alg in &a.algorithms {
        let (name, flops_of): (&'static str, fn(u64) -> f64) = match alg {
            Algorithm::Cholesky => ("cholesky", cholesky_flops),
            Algorithm::Gemm => ("gemm", gemm_flops),
        };
        let keep = if alg == Algorithm::Cholesky { "A" } else { "C" };
        // The result is read back only where its residual is checked.
        let keep_if = |n: u64| -> &[&str] {
            if n <= a.residual_max_n {
                std::slice::from_ref(&keep)
            } else {
                &[]
            }
        };
        for &n in &a.n {
            let flops = flops_of(n);
            let tiling = |tile| Tiling {
                n,
                tile,
                ty,
                style,
                init: MatrixInit::Random(1),
            };
            // The copies alone, per replay mode (entered style only).
            let mut copy_us = Vec::new();
            for &replay in &replays {
                let us = match style {
                    DataStyle::Entered => {
                        let plan =
                            Plan::new(copies_only(alg, &tiling(n)), &opts(SyncPolicy::Minimal))
                                .map_err(|e| e.render())?;
                        let (us, _) = session_runs(&plan, plugin, replay, reps, &[])?;
                        let m = median(us);
                        f.header.push(format!(
                            "{prec}{name} n={n}: copies alone{} {:.1} ms",
                            if replay { ", replayed" } else { "" },
                            m / 1e3
                        ));
                        m
                    }
                    DataStyle::Mapped => 0.0,
                };
                copy_us.push(us);
            }
            let gflops = |us: &[f64], copies: f64| -> Vec<f64> {
                us.iter()
                    .map(|u| flops / ((u - copies).max(1.0) * 1e3))
                    .collect()
            };
            for &tile in &a.tiles {
                let t = tiling(tile);
                for &p in &policies {
                    let plan = Plan::new(program(alg, &t), &opts(p)).map_err(|e| e.render())?;
                    for (k, &replay) in replays.iter().enumerate() {
                        let variant = format!(
                            "offload-sched {p}{}",
                            if replay { ", replayed" } else { "" }
                        );
                        let (us, last) = session_runs(&plan, plugin, replay, reps, keep_if(n))
                            .map_err(|e| {
                                format!("{prec}{name} n={n} tile {tile} {variant}: {e}")
                            })?;
                        let res = last.first().map(|l| residual(alg, &plan, &t, l));
                        if let Some(r) = res.filter(|r| r.is_nan() || *r >= RESIDUAL_BOUND) {
                            return Err(format!("{prec}{name} n={n} tile {tile} {variant}: scaled residual {r} is not below {RESIDUAL_BOUND}: wrong result"));
                        }
                        let g = gflops(&us, copy_us[k]);
                        let whole = median(gflops(&us, 0.0));
                        eprintln!(
                            "{prec}{name} n={n} tile {tile} {variant}: {:.1} GFLOP/s",
                            median(g.clone())
                        );
                        let minimal = p == SyncPolicy::Minimal;
                        f.rows.push(Row {
                            alg: name,
                            prec,
                            n,
                            tile: Some(tile),
                            variant,
                            kind: if replay {
                                Kind::OursReplayed { minimal }
                            } else {
                                Kind::Ours { minimal }
                            },
                            runs: g.len(),
                            gflops: median(g),
                            whole: Some(whole),
                            residual: res,
                        });
                    }
                }
                if !gpu && !a.no_starpu {
                    starpu_rows(
                        &mut f,
                        a,
                        (alg == Algorithm::Cholesky, ty),
                        (n, tile),
                        cores,
                    );
                }
            }
            // The library's monolithic routine.
            if gpu {
                let vendor = match alg {
                    Algorithm::Cholesky => {
                        format!("cuSOLVER {prec}potrf (one call of order n, through the plugin)")
                    }
                    Algorithm::Gemm => {
                        format!("cuBLAS {prec}gemm (one call of order n, through the plugin)")
                    }
                };
                let plan = Plan::new(program(alg, &tiling(n)), &opts(SyncPolicy::Minimal))
                    .map_err(|e| e.render())?;
                let (us, last) = session_runs(&plan, plugin, false, reps, keep_if(n))
                    .map_err(|e| format!("{vendor}: {e}"))?;
                let res = last.first().map(|l| residual(alg, &plan, &tiling(n), l));
                let g = gflops(&us, copy_us[0]);
                let whole = Some(median(gflops(&us, 0.0)));
                f.rows.push(Row {
                    alg: name,
                    prec,
                    n,
                    tile: None,
                    variant: vendor,
                    kind: Kind::Monolithic,
                    runs: g.len(),
                    gflops: median(g),
                    whole,
                    residual: res,
                });
            } else {
                let what = match alg {
                    Algorithm::Cholesky => {
                        format!("LAPACK {prec}potrf (OpenBLAS, {cores} threads)")
                    }
                    Algorithm::Gemm => format!("BLAS {prec}gemm (OpenBLAS, {cores} threads)"),
                };
                match peers::host_monolithic(
                    (alg == Algorithm::Cholesky, ty),
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
                    }),
                    Err(e) => f.notes.push(format!("{what}: {e}")),
                }
            }
        }
    }
    if gpu && !a.no_starpu {
        f.notes.push("StarPU: not run beside the CUDA plugin (the Debian starpu-examples are built for CPUs; the GPU targets compare with cuSOLVER / cuBLAS)".into());
    }
    let out = report::render(&f, a.reps as usize);
    if let Some(path) = &a.out {
        offload_sched::file::write_atomic(path, out.as_bytes())
            .map_err(|e| format!("write {}: {e}", path.display()))?;
    }
    Ok(out)
}

/// StarPU's example for (`cholesky`, `ty`) at (`n`, `tile`) under lws and dmda, the
/// better median marked; a missing or failing example becomes a note.
fn starpu_rows(
    f: &mut Figures,
    a: &LinalgArgs,
    (cholesky, ty): (bool, ElemType),
    (n, tile): (u64, u64),
    cores: usize,
) {
    let (name, prec) = (
        if cholesky { "cholesky" } else { "gemm" },
        if ty == ElemType::F32 { 's' } else { 'd' },
    );
    let example = match peers::starpu_example(cholesky, ty) {
        Ok(e) => e,
        Err(e) => return f.notes.push(format!("StarPU for {prec}{name}: {e}")),
    };
    let first = f.rows.len();
    for sched in ["lws", "dmda"] {
        match peers::starpu(
            &a.starpu,
            (cholesky, ty),
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
