//! `bench linalg --ranks 1,2,4` (issue 29 point 7): the tiled Cholesky distributed 2-D
//! block-cyclic over MPI ranks, side by side in one call with StarPU-MPI's
//! `mpi_cholesky`, at a fixed order (the first `--n`) and in weak scaling (the order
//! grows as `∛ranks`, rounded to the tile, so the work per rank stays constant).
//!
//! **How the ranks run.** Both are separate processes under `mpirun --oversubscribe
//! --bind-to none -np R` (Debian's OpenMPI, shared-memory transport `self,vader` with its
//! default single-copy mechanism, CMA), as
//! StarPU-MPI runs: ours is this binary's hidden `linalg-rank` command
//! (`rank_worker.rs`: `MpiTransport`, one progress thread per process, the host plugin
//! with one stream, so one BLAS worker per rank), StarPU's `mpi_cholesky` from Debian's
//! `starpu-examples` (`--starpu DIR`'s sibling folder `mpi/`, by default
//! `/usr/lib/x86_64-linux-gnu/starpu/mpi`) with `STARPU_NCPU=1` (one CPU worker per
//! rank), `STARPU_SCHED=lws`, no CUDA or OpenCL workers. Both use OpenBLAS on one
//! thread (`OPENBLAS_NUM_THREADS=1`), the same order and tile (`-size N -nblocks
//! N/tile`), and the same distribution: tile `(i, j)` (row `i`, column `j`) on rank
//! `(i mod p)·q + (j mod q)` over the `p × q` grid [`Distribution::grid`] (1 × 1, 1 × 2,
//! 2 × 2, …: StarPU-MPI `mpi_cholesky`'s own default), given to `mpi_cholesky` as
//! `-dblockx q -dblocky p` (its `my_distrib`, StarPU 1.3
//! `mpi/examples/matrix_decomposition/mpi_decomposition_matrix.c`: rank
//! `(col mod dblockx) + (row mod dblocky)·dblockx`); the grid it prints (`dblocksx`,
//! `dblocksy`) is checked against ours. On 2 ranks the grid is 1 × 2 (columns cyclic),
//! which splits the factorization's work 50% / 50%; rows cyclic (2 × 1, this bench's
//! grid before 2026-12-07, while `mpi_cholesky` already ran 1 × 2) give rank 1 57.5% at
//! n 5120 (59.4% at 4096), at most 87% weak scaling before any communication (the header
//! prints each rank count's split, [`work_shares`]). Single
//! precision (`mpi_cholesky` is `spotrf` only; `--precision f64` runs ours alone).
//!
//! **Figures.** GFLOP/s = `n³/3` over the time: ours the span of a run over all ranks
//! (`rank_worker.rs`: first op issued on any rank → last rank's final host wait,
//! including the gather of the factor on rank 0), StarPU the `Computation time (in ms)`
//! it prints (its factorization between two MPI barriers, no gather); median of `--reps`
//! runs after `--warmup`, each StarPU run its own `mpirun`. Our last run's factor is
//! checked on rank 0 by the scaled residual (`n ≤ --residual-max-n`), a higher one is
//! an error. Weak-scaling efficiency: `(GFLOP/s at R ranks / R) / GFLOP/s at 1 rank`,
//! each rank with the same resources at every rank count (one BLAS worker, one host
//! lane, one progress thread), so the 1-rank run uses one core's BLAS, not the
//! machine's: on 2 cores, 2 ranks have the 1-rank run's resources twice over, and the
//! ratio measures the cost of distribution, not of sharing a worker.

pub use super::ranks_report::render;
use super::report::Row;
use super::{LinalgArgs, Precision};
use crate::median;
use offload_sched::distribute::{split, Distribution};
use offload_sched::model::residual::RESIDUAL_BOUND;
use offload_sched::model::{
    tiled_cholesky_lookahead, DataStyle, ElemType, MatrixInit, Program, Tiling,
};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// What rank 0 of a `linalg-rank` job prints before its figures.
pub const RESULT_PREFIX: &str = "linalg-rank result:";

/// The distribution of the tiled Cholesky `program` (buffer `A`, laid out as `tiling`)
/// over `ranks` ranks: 2-D block-cyclic over [`Distribution::grid`]`(ranks)`.
///
/// Errors: no buffer `A`, a bad rank count.
pub fn rank_distribution(
    program: &Program,
    tiling: &Tiling,
    ranks: u32,
) -> Result<Distribution, String> {
    let mut dist = Distribution::new(ranks).map_err(|e| e.to_string())?;
    let (p, q) = Distribution::grid(ranks);
    let a = program
        .buffer_id("A")
        .ok_or("the tiled Cholesky has no buffer A")?;
    dist.block_cyclic(tiling, a, p, q)
        .map_err(|e| e.to_string())?;
    Ok(dist)
}

/// Each rank's share of the tiled Cholesky's flops at order `n`, tile `tile` on `ranks`
/// ranks ([`rank_distribution`], owner computes as [`split`] places the regions), in
/// units of `potrf` b³/3, `trsm` b³, `syrk` b³, `gemm` 2b³ per tile (the leading terms;
/// the `shift_k` regions that add `n` to the diagonal, `O(b)` each, count 0).
///
/// Errors: a tile not dividing `n`, a split that fails, a region of another kind.
pub fn work_shares(n: u64, tile: u64, ranks: u32) -> Result<Vec<f64>, String> {
    let (program, tiling) = rank_program(n, tile, ElemType::F32, 0)?;
    let dist = rank_distribution(&program, &tiling, ranks)?;
    let s = split(&program, &dist).map_err(|e| e.to_string())?;
    let mut work = vec![0.0; ranks as usize];
    for (name, rank) in &s.placement {
        let w = match name.split('_').next() {
            Some("potrf") => 1.0 / 3.0,
            Some("trsm" | "syrk") => 1.0,
            Some("gemm") => 2.0,
            Some("shift") => 0.0,
            _ => return Err(format!("region {name:?} is not a tiled Cholesky kernel")),
        };
        work[*rank as usize] += w;
    }
    let total: f64 = work.iter().sum();
    Ok(work.into_iter().map(|w| w / total).collect())
}

/// The order of the weak-scaling run on `ranks` ranks: `n1 · ∛ranks` rounded to a
/// multiple of `tile` (at least one tile), so `n³/3` per rank stays about constant.
pub fn weak_n(n1: u64, tile: u64, ranks: u32) -> u64 {
    let tiles = (n1 as f64 / tile as f64 * (ranks as f64).cbrt()).round() as u64;
    tiles.max(1) * tile
}

/// The tiled Cholesky every rank runs (per-task maps, the data style the split takes;
/// random matrix plus n on the diagonal) and its tiling.
///
/// Errors: a tile that does not divide `n`.
pub fn rank_program(
    n: u64,
    tile: u64,
    ty: ElemType,
    lookahead: u64,
) -> Result<(Program, Tiling), String> {
    let t = Tiling {
        n,
        tile,
        ty,
        style: DataStyle::Mapped,
        init: MatrixInit::Random(1),
    };
    t.validate()
        .map_err(|e| format!("--n {n} --tiles {tile}: {e}"))?;
    Ok((tiled_cholesky_lookahead(&t, lookahead), t))
}

/// What a `linalg-rank` job measured (rank 0's line).
#[derive(Clone, Debug, PartialEq)]
pub struct RankResult {
    pub transfers: u64,
    /// Bytes sent between ranks per run.
    pub bytes: u64,
    /// µs of each timed run.
    pub us: Vec<f64>,
    pub residual: Option<f64>,
}

/// Reads rank 0's line (`linalg-rank result: transfers=T bytes=B us=a,b,.. residual=x|-`)
/// from a job's output.
///
/// Errors: no such line, or a field missing or not a number.
pub fn parse_result(out: &str) -> Result<RankResult, String> {
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix(RESULT_PREFIX))
        .ok_or_else(|| format!("no {RESULT_PREFIX:?} line in the job's output"))?;
    let field = |k: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(k)?.strip_prefix('='))
            .ok_or_else(|| format!("no {k}= in {line:?}"))
    };
    let num = |k: &str| {
        field(k)?
            .parse::<u64>()
            .map_err(|e| format!("{k} in {line:?}: {e}"))
    };
    let us = field("us")?
        .split(',')
        .map(|v| v.parse::<f64>().map_err(|e| format!("us in {line:?}: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    let residual = match field("residual")? {
        "-" => None,
        v => Some(
            v.parse::<f64>()
                .map_err(|e| format!("residual in {line:?}: {e}"))?,
        ),
    };
    Ok(RankResult {
        transfers: num("transfers")?,
        bytes: num("bytes")?,
        us,
        residual,
    })
}

/// The milliseconds StarPU-MPI's `mpi_cholesky` prints (`Computation time (in ms): X`).
///
/// Errors: no such line, or not a positive number.
pub fn parse_starpu_mpi_ms(out: &str) -> Result<f64, String> {
    let v = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("Computation time (in ms):"))
        .ok_or("no 'Computation time (in ms):' line in mpi_cholesky's output")?;
    match v.trim().parse::<f64>() {
        Ok(ms) if ms.is_finite() && ms > 0.0 => Ok(ms),
        _ => Err(format!("mpi_cholesky printed {v:?} ms")),
    }
}

/// `mpirun` for `np` processes on this host (module docs), OpenBLAS on one thread.
pub(crate) fn mpirun(np: u32) -> Command {
    let mut c = Command::new("mpirun");
    c.args([
        "--oversubscribe",
        "--bind-to",
        "none",
        "-np",
        &np.to_string(),
    ]);
    for v in [
        "OPENBLAS_NUM_THREADS",
        "STARPU_NCPU",
        "STARPU_NCUDA",
        "STARPU_NOPENCL",
    ] {
        c.args(["-x", v]);
    }
    c.args([
        "-x",
        "STARPU_SCHED",
        "-x",
        "STARPU_SILENT",
        "-x",
        "STARPU_HOME",
    ]);
    c.env("OPENBLAS_NUM_THREADS", "1")
        .env("STARPU_NCPU", "1")
        .env("STARPU_NCUDA", "0")
        .env("STARPU_NOPENCL", "0")
        .env("STARPU_SCHED", "lws")
        .env("STARPU_SILENT", "1")
        .env(
            "STARPU_HOME",
            std::env::temp_dir().join("offload-bench-starpu"),
        )
        // Allowed as root (CI containers); a no-op otherwise.
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        // vader's default single-copy mechanism (CMA): a message above the eager limit
        // is read by the receiver in one `process_vm_readv`. With `none` a 1 MiB tile
        // moves in 32 fragments of 32 KiB, each needing a progress call on both sides,
        // which a loaded host pays in scheduling rounds (our 2-rank n 4096 run: 1.77 s
        // with `none`, 0.71-0.82 s with CMA, load 12). Both peers run with the same.
        .env("OMPI_MCA_btl", "self,vader");
    c
}

/// Runs `c`, returning stdout and stderr together, or its failure with the output's end.
pub(crate) fn output(c: &mut Command, what: &str) -> Result<String, String> {
    let out = c.output().map_err(|e| format!("{what}: mpirun: {e}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        let tail: Vec<&str> = text.lines().rev().take(4).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(format!("{what}: {}: {}", out.status, tail.join(" / ")));
    }
    Ok(text)
}

/// `mpirun` of this binary's hidden rank command `sub` (`linalg-rank`, `taskbench-rank`)
/// on `np` ranks: `offload-bench SUB` or `offload-sched bench SUB`, by the binary's name
/// (a copy must keep `offload-bench` in its name).
///
/// Errors: this binary's path cannot be read.
pub(crate) fn rank_job(np: u32, sub: &str) -> Result<Command, String> {
    let exe = std::env::current_exe().map_err(|e| format!("this binary's path: {e}"))?;
    let mut c = mpirun(np);
    c.arg(&exe);
    if !exe
        .file_name()
        .is_some_and(|f| f.to_string_lossy().contains("offload-bench"))
    {
        c.arg("bench");
    }
    c.arg(sub);
    Ok(c)
}

/// Our job: this binary's `linalg-rank` on `np` ranks.
fn ours(a: &LinalgArgs, np: u32, n: u64, tile: u64, lookahead: u64) -> Result<RankResult, String> {
    let mut c = rank_job(np, "linalg-rank")?;
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let residual_threads = if n <= a.residual_max_n { cores } else { 0 };
    let prec = match a.precision {
        Precision::F32 => "f32",
        Precision::F64 => "f64",
    };
    c.args(["--precision", prec]);
    for (k, v) in [
        ("--n", n),
        ("--tile", tile),
        ("--lookahead", lookahead),
        ("--reps", a.reps as u64),
        ("--warmup", a.warmup as u64),
        ("--residual-threads", residual_threads as u64),
    ] {
        c.args([k, &v.to_string()]);
    }
    parse_result(&output(
        &mut c,
        &format!("offload-sched on {np} ranks, n={n}"),
    )?)
}

/// The grid `mpi_cholesky` prints (`dblocksx: X - dblocksy: Y`) as our `(p, q)` =
/// `(dblocksy, dblocksx)` (module docs).
///
/// Errors: no such line or not numbers.
pub fn parse_starpu_grid(out: &str) -> Result<(u32, u32), String> {
    let num = |k: &str| {
        out.lines()
            .find_map(|l| l.split(k).nth(1))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u32>().ok())
            .ok_or_else(|| format!("no '{k} N' in mpi_cholesky's output"))
    };
    Ok((num("dblocksy:")?, num("dblocksx:")?))
}

/// StarPU-MPI's `mpi_cholesky` on `np` ranks over our grid ([`Distribution::grid`], as
/// `-dblockx q -dblocky p`): `warmup` runs, then `reps` measured, each its own `mpirun`.
/// Returns GFLOP/s per measured run.
///
/// Errors: the binary missing or failing, or printing another grid than ours.
fn starpu_mpi(
    bin: &Path,
    np: u32,
    n: u64,
    tile: u64,
    (warmup, reps): (u32, u32),
) -> Result<Vec<f64>, String> {
    if !bin.is_file() {
        return Err(format!(
            "{} not found (Debian package starpu-examples)",
            bin.display()
        ));
    }
    let flops = super::peers::flops(super::Algorithm::Cholesky, n);
    let (p, q) = Distribution::grid(np);
    let mut g = Vec::new();
    for k in 0..warmup + reps {
        let mut c = mpirun(np);
        c.arg(bin).args([
            "-size",
            &n.to_string(),
            "-nblocks",
            &(n / tile).to_string(),
            "-dblockx",
            &q.to_string(),
            "-dblocky",
            &p.to_string(),
        ]);
        let out = output(&mut c, &format!("mpi_cholesky -np {np} n={n}"))?;
        let printed = parse_starpu_grid(&out)?;
        if printed != (p, q) {
            return Err(format!(
                "mpi_cholesky ran a {} × {} grid (dblocksy × dblocksx), ours is {p} × {q}",
                printed.0, printed.1
            ));
        }
        let ms = parse_starpu_mpi_ms(&out)?;
        if k >= warmup {
            g.push(flops / (ms * 1e6));
        }
    }
    Ok(g)
}

/// One (ranks, n) point: ours and StarPU-MPI's medians.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub ranks: u32,
    pub n: u64,
    pub tile: u64,
    /// `true`: the weak-scaling order of this rank count (also true at 1 rank).
    pub weak: bool,
    pub ours: Row,
    pub transfers: u64,
    pub bytes: u64,
    /// StarPU-MPI's row, `None` when it did not run (see the notes).
    pub starpu: Option<Row>,
}

/// Everything one `--ranks` call measured.
#[derive(Clone, Debug, Default)]
pub struct RankFigures {
    pub header: Vec<String>,
    pub points: Vec<Point>,
    pub notes: Vec<String>,
}

/// Runs `bench linalg --ranks` (module docs) and returns the report (markdown);
/// `--out` is rewritten after every point.
///
/// Errors: `--algorithms` other than `cholesky`, a tile not dividing n, our job failing,
/// a residual not below the bound (naming the point), an unwritable `--out`. StarPU
/// missing or failing is a note.
pub fn run(a: &LinalgArgs) -> Result<String, String> {
    crate::check_out(a.out.as_deref())?;
    if a.algorithms != [super::Algorithm::Cholesky] {
        return Err("--ranks runs the tiled Cholesky only: pass --algorithms cholesky".into());
    }
    let start = Instant::now();
    let (n1, tile) = (a.n[0], a.tiles[0]);
    let lookahead = a.lookahead[0];
    let ty = match a.precision {
        Precision::F32 => ElemType::F32,
        Precision::F64 => ElemType::F64,
    };
    let prec = if ty == ElemType::F32 { 's' } else { 'd' };
    let bin: PathBuf = a
        .starpu
        .parent()
        .map_or_else(|| PathBuf::from("mpi"), |p| p.join("mpi"))
        .join("mpi_cholesky");
    let mut f = RankFigures::default();
    let mut grids = Vec::new();
    for &r in &a.ranks {
        let (p, q) = Distribution::grid(r);
        let w = weak_n(n1, tile, r);
        let shares = work_shares(w, tile, r)?
            .iter()
            .map(|s| format!("{:.1}%", s * 100.0))
            .collect::<Vec<_>>()
            .join(" / ");
        grids.push(format!("{r}: {p}×{q}, work per rank at n {w}: {shares}"));
    }
    f.header.push(format!(
        "ranks as separate processes under mpirun --oversubscribe --bind-to none (OpenMPI, btl self,vader), on a host of {} cores; ours: the host plugin, 1 stream (one BLAS worker) and 2 host lanes per rank (sends; receives), one MPI progress thread per process, per-task maps, minimal, look-ahead {lookahead}; StarPU-MPI mpi_cholesky: STARPU_NCPU=1, lws; both OpenBLAS on 1 thread, 2-D block-cyclic tiles over the same p×q grid of ranks (tile (i, j) on rank (i mod p)·q + j mod q; mpi_cholesky -dblocky p -dblockx q) ({})",
        std::thread::available_parallelism().map_or(1, |c| c.get()),
        grids.join("; ")
    ));
    f.header.push("ours timed over all ranks (first op issued → last final host wait, the factor's gather on rank 0 included); StarPU-MPI: the 'Computation time' it prints (no gather)".into());
    let mut points = Vec::new();
    for &r in &a.ranks {
        points.push((r, n1, r == 1));
        let w = weak_n(n1, tile, r);
        if r != 1 {
            points.push((r, w, true));
        }
    }
    for (r, n, weak) in points {
        rank_program(n, tile, ty, lookahead)?;
        let t0 = Instant::now();
        let res = ours(a, r, n, tile, lookahead)?;
        let what = format!("{prec}potrf n={n} tile {tile} on {r} rank(s)");
        if let Some(x) = res.residual.filter(|x| x.is_nan() || *x >= RESIDUAL_BOUND) {
            return Err(format!(
                "{what}: scaled residual {x} is not below {RESIDUAL_BOUND}: wrong result"
            ));
        }
        let flops = super::peers::flops(super::Algorithm::Cholesky, n);
        let g: Vec<f64> = res.us.iter().map(|u| flops / (u.max(1.0) * 1e3)).collect();
        let row = |variant: String, g: Vec<f64>, residual, wall_s| Row {
            alg: "cholesky",
            prec,
            n,
            tile: Some(tile),
            variant,
            kind: super::report::Kind::Ours { minimal: true },
            runs: g.len(),
            gflops: median(g),
            whole: None,
            residual,
            wall_s: Some(wall_s),
            moved: None,
        };
        let ours_row = row(
            "offload-sched minimal, MPI ranks".into(),
            g,
            res.residual,
            t0.elapsed().as_secs_f64(),
        );
        eprintln!(
            "[{:.0} s] {what}: offload-sched {:.1} GFLOP/s",
            start.elapsed().as_secs_f64(),
            ours_row.gflops
        );
        let starpu = if a.no_starpu || ty != ElemType::F32 {
            None
        } else {
            let t0 = Instant::now();
            match starpu_mpi(&bin, r, n, tile, (a.warmup, a.reps)) {
                Ok(g) => {
                    let mut s = row(
                        "StarPU-MPI mpi_cholesky (STARPU_NCPU=1 per rank, lws)".into(),
                        g,
                        None,
                        t0.elapsed().as_secs_f64(),
                    );
                    s.kind = super::report::Kind::StarPU { best: true };
                    eprintln!(
                        "[{:.0} s] {what}: StarPU-MPI {:.1} GFLOP/s",
                        start.elapsed().as_secs_f64(),
                        s.gflops
                    );
                    Some(s)
                }
                Err(e) => {
                    f.notes.push(format!("StarPU-MPI {what}: {e}"));
                    None
                }
            }
        };
        f.points.push(Point {
            ranks: r,
            n,
            tile,
            weak,
            ours: ours_row,
            transfers: res.transfers,
            bytes: res.bytes,
            starpu,
        });
        checkpoint(a, &f, false)?;
    }
    if ty != ElemType::F32 && !a.no_starpu {
        f.notes
            .push("StarPU-MPI: not run (mpi_cholesky is single precision only)".into());
    }
    f.header.push(format!(
        "wall time of the call: {:.1} s",
        start.elapsed().as_secs_f64()
    ));
    checkpoint(a, &f, true)
}

fn checkpoint(a: &LinalgArgs, f: &RankFigures, done: bool) -> Result<String, String> {
    let mut f = f.clone();
    if !done {
        f.notes.push(format!(
            "incomplete: written after {} points, while the call was still running",
            f.points.len()
        ));
    }
    let out = render(&f, a.reps as usize);
    if let Some(path) = &a.out {
        offload_sched::file::write_atomic(path, out.as_bytes())
            .map_err(|e| format!("write {}: {e}", path.display()))?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linalg::report::Kind;

    #[test]
    fn weak_orders_grow_as_the_cube_root_rounded_to_the_tile() {
        assert_eq!(weak_n(4096, 512, 1), 4096);
        // 8 · ∛2 = 10.08 tiles, 8 · ∛4 = 12.70 tiles.
        assert_eq!(weak_n(4096, 512, 2), 5120);
        assert_eq!(weak_n(4096, 512, 4), 6656);
        assert_eq!(weak_n(100, 512, 4), 512);
    }

    #[test]
    fn the_two_rank_grid_splits_the_work_evenly() {
        // Owner computes over 1 × 2 (columns cyclic): half the flops each, at the
        // weak-scaling orders of 1 and 2 ranks.
        for n in [4096, 5120] {
            let s = work_shares(n, 512, 2).unwrap();
            assert!(
                (s[0] - 0.5).abs() < 1e-12 && (s[1] - 0.5).abs() < 1e-12,
                "{n}: {s:?}"
            );
        }
        assert_eq!(work_shares(4096, 512, 1).unwrap(), [1.0]);
        // 2 × 2 at 13 × 13 tiles: all four ranks get work, none more than a third.
        let s = work_shares(6656, 512, 4).unwrap();
        assert!(s.iter().all(|&x| x > 0.15 && x < 1.0 / 3.0), "{s:?}");
        assert!((s.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        // Rows cyclic (2 × 1), the grid before: rank 1 does 57.5% at 10 × 10 tiles.
        let (program, tiling) = rank_program(5120, 512, ElemType::F32, 0).unwrap();
        let mut dist = Distribution::new(2).unwrap();
        dist.block_cyclic(&tiling, program.buffer_id("A").unwrap(), 2, 1)
            .unwrap();
        let placed = split(&program, &dist).unwrap().placement;
        let on_1 = placed.iter().filter(|(_, r)| *r == 1).count();
        // Of the 230 regions (10 shift, 10 potrf, 45 trsm, 45 syrk, 120 gemm), rank 1
        // runs those writing odd tile rows.
        assert_eq!((placed.len(), on_1), (230, 130));
    }

    #[test]
    fn rank_and_starpu_lines_are_read() {
        let r = parse_result(
            "noise\nlinalg-rank result: transfers=12 bytes=4096 us=10.5,20 residual=1.5e-2\n",
        )
        .unwrap();
        assert_eq!(
            r,
            RankResult {
                transfers: 12,
                bytes: 4096,
                us: vec![10.5, 20.0],
                residual: Some(0.015)
            }
        );
        let r = parse_result("linalg-rank result: transfers=0 bytes=0 us=3 residual=-").unwrap();
        assert_eq!(r.residual, None);
        assert!(parse_result("linalg-rank result: bytes=0 us=3 residual=-")
            .unwrap_err()
            .contains("no transfers="));
        assert!(parse_result("nothing")
            .unwrap_err()
            .contains("no \"linalg-rank result:\""));
        let sp = "size: 2048 - nblocks: 4 - dblocksx: 2 - dblocksy: 1\nComputation time (in ms): 644.01\nSynthetic GFlops : 4.45\n";
        assert_eq!(parse_starpu_mpi_ms(sp), Ok(644.01));
        assert_eq!(parse_starpu_grid(sp), Ok((1, 2)));
        assert!(parse_starpu_grid("size: 2048 - dblocksx: 2")
            .unwrap_err()
            .contains("dblocksy:"));
        assert!(parse_starpu_mpi_ms("Computation time (in ms): 0").is_err());
        assert!(parse_starpu_mpi_ms("Synthetic GFlops : 4.45").is_err());
    }

    fn point(ranks: u32, n: u64, weak: bool, ours: f64, starpu: Option<f64>) -> Point {
        let row = |g, kind| Row {
            alg: "cholesky",
            prec: 's',
            n,
            tile: Some(512),
            variant: String::new(),
            kind,
            runs: 5,
            gflops: g,
            whole: None,
            residual: None,
            wall_s: None,
            moved: None,
        };
        Point {
            ranks,
            n,
            tile: 512,
            weak,
            ours: row(ours, Kind::Ours { minimal: true }),
            transfers: 0,
            bytes: 0,
            starpu: starpu.map(|s| row(s, Kind::StarPU { best: true })),
        }
    }

    #[test]
    fn targets_are_judged_from_the_points() {
        let mut f = RankFigures {
            points: vec![
                point(1, 4096, true, 10.0, Some(9.0)),
                point(2, 4096, false, 12.0, Some(10.0)),
                point(2, 5120, true, 17.0, Some(16.0)),
            ],
            ..RankFigures::default()
        };
        let text = render(&f, 5);
        assert!(
            text.contains("-np 2, N 4096, tile 512: offload-sched ≥ 1.2× StarPU-MPI mpi_cholesky: 12.0 / 10.0 = 1.20× (≥ 1.2) — MET"),
            "{text}"
        );
        assert!(
            text.contains(
                "weak scaling 1 → 2 ranks ≥ 85%: (17.0 / 2) / 10.0 = 85% (n 4096 → 5120) — MET"
            ),
            "{text}"
        );
        assert!(
            text.contains("| 2 | 5120 | 8.5 | 85% | 8.0 | 89% |"),
            "{text}"
        );
        f.points[1].ours.gflops = 11.9;
        f.points[2].ours.gflops = 16.9;
        let text = render(&f, 5);
        assert!(text.contains("= 1.19× (≥ 1.2) — MISSED"), "{text}");
        assert!(text.contains("= 84% (n 4096 → 5120) — MISSED"), "{text}");
        f.points[1].starpu = None;
        f.points[2].starpu = None;
        f.points[2].ours.gflops = 16.0;
        let text = render(&f, 5);
        assert!(text.contains("no StarPU-MPI figure"), "{text}");
        assert!(text.contains("| 2 | 5120 | 8.0 | 80% | – | – |"), "{text}");
        f.points.remove(0);
        let text = render(&f, 5);
        assert!(
            text.contains("≥ 85%: not judged (needs --ranks with 1 and 2)"),
            "{text}"
        );
    }
}
