//! The markdown report of `bench linalg --ranks` (`ranks.rs`): the side-by-side table of
//! ours and StarPU-MPI per rank count, weak scaling with its efficiencies, and issue 29's
//! targets (MET / MISSED).

use super::ranks::{Point, RankFigures};
use super::report::verdict;
use crate::report::shown;
use offload_sched::model::residual::RESIDUAL_BOUND;
use std::fmt::Write as _;

fn cell(x: Option<f64>, d: usize) -> String {
    x.map_or("–".to_string(), |v| format!("{v:.d$}"))
}

/// `85%` for 0.85, `–` for none.
fn percent(x: Option<f64>) -> String {
    x.map_or("–".to_string(), |v| format!("{:.0}%", v * 100.0))
}

/// The markdown report of a `--ranks` call: the side-by-side table, weak scaling with
/// efficiencies, and issue 29's targets.
pub fn render(f: &RankFigures, reps: usize) -> String {
    let mut out = String::new();
    for h in &f.header {
        let _ = writeln!(out, "- {h}");
    }
    for n in &f.notes {
        let _ = writeln!(out, "- note: {n}");
    }
    let _ = writeln!(
        out,
        "\nTiled Cholesky over MPI ranks (separate processes under mpirun); GFLOP/s: median of {reps} runs (n³/3 flops); residual: scaled residual of our last run on rank 0, bound {RESIDUAL_BOUND}\n"
    );
    let _ = writeln!(
        out,
        "| ranks | n | tile | series | offload-sched GFLOP/s | StarPU-MPI GFLOP/s | ours / StarPU-MPI | transfers | MiB between ranks | residual | wall s (ours, StarPU) |\n|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for p in &f.points {
        let sp = p.starpu.as_ref().map(|s| s.gflops);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {:.1} | {} | {} | {} | {:.1} | {} | {}, {} |",
            p.ranks,
            p.n,
            p.tile,
            match (p.ranks, p.weak) {
                (1, _) => "fixed n, weak",
                (_, true) => "weak",
                _ => "fixed n",
            },
            p.ours.gflops,
            cell(sp, 1),
            cell(sp.map(|s| p.ours.gflops / s), 2),
            p.transfers,
            p.bytes as f64 / (1u64 << 20) as f64,
            cell(p.ours.residual, 3),
            cell(p.ours.wall_s, 1),
            cell(p.starpu.as_ref().and_then(|s| s.wall_s), 1),
        );
    }
    let weak: Vec<&Point> = f.points.iter().filter(|p| p.weak).collect();
    let base = weak.iter().find(|p| p.ranks == 1);
    if let Some(b) = base {
        let _ = writeln!(
            out,
            "\nWeak scaling (n = {}·∛ranks rounded to the tile; efficiency = (GFLOP/s / ranks) / GFLOP/s on 1 rank; the same resources per rank at every rank count: one BLAS worker, so the 1-rank row uses one core, not all):\n\n| ranks | n | offload-sched GFLOP/s per rank | efficiency | StarPU-MPI GFLOP/s per rank | efficiency |\n|---|---|---|---|---|---|",
            b.n
        );
        for p in &weak {
            let eff = |x: Option<f64>, one: Option<f64>| Some(x? / p.ranks as f64 / one?);
            let sp = p.starpu.as_ref().map(|s| s.gflops);
            let sp1 = b.starpu.as_ref().map(|s| s.gflops);
            let _ = writeln!(
                out,
                "| {} | {} | {:.1} | {} | {} | {} |",
                p.ranks,
                p.n,
                p.ours.gflops / p.ranks as f64,
                percent(eff(Some(p.ours.gflops), Some(b.ours.gflops))),
                cell(sp.map(|s| s / p.ranks as f64), 1),
                percent(eff(sp, sp1)),
            );
        }
    }
    targets(&mut out, f);
    out
}

/// Issue 29's targets, judged on this call's medians.
fn targets(out: &mut String, f: &RankFigures) {
    let _ = writeln!(out, "\nTargets (issue 29; this call's medians):");
    let what = "-np 2, N 4096, tile 512: offload-sched ≥ 1.2× StarPU-MPI mpi_cholesky";
    let p = f
        .points
        .iter()
        .find(|p| p.ranks == 2 && p.n == 4096 && p.tile == 512 && p.ours.prec == 's');
    match p.map(|p| (p, p.starpu.as_ref())) {
        Some((p, Some(s))) => {
            let x = p.ours.gflops / s.gflops;
            let _ = writeln!(
                out,
                "- {what}: {:.1} / {:.1} = {}× (≥ 1.2) — {}",
                p.ours.gflops,
                s.gflops,
                shown(x, 2, 1.2, true),
                verdict(x >= 1.2)
            );
        }
        Some((_, None)) => {
            let _ = writeln!(
                out,
                "- {what}: not judged (no StarPU-MPI figure: see the notes)"
            );
        }
        None => {
            let _ = writeln!(
                out,
                "- {what}: not judged (needs --ranks with 2, --n 4096 --tiles 512, f32)"
            );
        }
    }
    let what = "weak scaling 1 → 2 ranks ≥ 85%";
    let one = f.points.iter().find(|p| p.weak && p.ranks == 1);
    let two = f.points.iter().find(|p| p.weak && p.ranks == 2);
    match (one, two) {
        (Some(o), Some(t)) => {
            let e = t.ours.gflops / 2.0 / o.ours.gflops * 100.0;
            let _ = writeln!(
                out,
                "- {what}: ({:.1} / 2) / {:.1} = {}% (n {} → {}) — {}",
                t.ours.gflops,
                o.ours.gflops,
                shown(e, 0, 85.0, true),
                o.n,
                t.n,
                verdict(e >= 85.0)
            );
        }
        _ => {
            let _ = writeln!(out, "- {what}: not judged (needs --ranks with 1 and 2)");
        }
    }
}
