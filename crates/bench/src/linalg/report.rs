//! The `bench linalg` report: the table of every row, the bytes each tiled row moves, the
//! notes (peers missing), and the issue-27 and issue-28 targets judged on this call's
//! medians (MET / MISSED, or why not judged).

use crate::moved::{bytes_cells, BYTES_COLUMNS, BYTES_RULE};
use crate::report::shown;
use offload_sched::lower::BytesMoved;
use std::fmt::Write as _;

/// One measured row.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// `cholesky`, `lu` or `gemm`.
    pub alg: &'static str,
    /// `s` or `d`.
    pub prec: char,
    pub n: u64,
    /// The tile size of a tiled row; `None` for peers that have none of ours.
    pub tile: Option<u64>,
    /// What ran: `offload-sched minimal`, `offload-sched minimal, replayed`,
    /// `StarPU lws`, `LAPACK spotrf (OpenBLAS, 2 threads)`, `cuSOLVER dpotrf`, ...
    pub variant: String,
    /// The kind of row, for the targets.
    pub kind: Kind,
    /// Median GFLOP/s (copies subtracted where the module docs say) and the runs it is
    /// the median of.
    pub gflops: f64,
    /// Median GFLOP/s of the whole run, copies included (rows timed through the plugin).
    pub whole: Option<f64>,
    pub runs: usize,
    /// Scaled residual of one run (`None`: not checked).
    pub residual: Option<f64>,
    /// Wall seconds of the row: every run, warm-up and set-up included (`None`: not
    /// measured).
    pub wall_s: Option<f64>,
    /// Bytes one run's graph moves, and what transfer elision saved (`None`: not a
    /// program of ours).
    pub moved: Option<BytesMoved>,
}

/// What a row is, for the targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// offload-sched under a policy (`minimal` is what the targets judge), live.
    Ours { minimal: bool },
    /// offload-sched replayed as plugin graphs.
    OursReplayed { minimal: bool },
    /// StarPU under one scheduler; `best` marks the better of lws and dmda.
    StarPU { best: bool },
    /// The library's monolithic routine.
    Monolithic,
    /// offload-sched in the `mapped` data style (per-task `map` clauses, lowered with
    /// transfer elision), live or replayed.
    Mapped { minimal: bool, replayed: bool },
    /// The host work bound of the tiled program (`bound.rs`): its tile kernels timed
    /// alone on one thread, spread perfectly over the cores. Not a run.
    Bound,
}

/// Everything one call measured.
#[derive(Clone, Debug, Default)]
pub struct Figures {
    pub plugin: String,
    pub gpu: bool,
    pub cores: usize,
    pub header: Vec<String>,
    pub rows: Vec<Row>,
    pub notes: Vec<String>,
}

impl Figures {
    fn find(
        &self,
        alg: &str,
        prec: char,
        n: u64,
        tile: Option<u64>,
        f: impl Fn(Kind) -> bool,
    ) -> Option<&Row> {
        self.rows.iter().find(|r| {
            r.alg == alg
                && r.prec == prec
                && r.n == n
                && f(r.kind)
                && (tile.is_none() || r.tile == tile)
        })
    }
}

pub(super) fn verdict(ok: bool) -> &'static str {
    if ok {
        "MET"
    } else {
        "MISSED"
    }
}

/// The markdown report.
pub fn render(f: &Figures, reps: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "plugin: {}; {} cores", f.plugin, f.cores);
    for h in &f.header {
        let _ = writeln!(out, "- {h}");
    }
    for n in &f.notes {
        let _ = writeln!(out, "- note: {n}");
    }
    let _ = writeln!(
        out,
        "\nGFLOP/s: median of {reps} runs (Cholesky n³/3 flops, GEMM 2n³); residual: scaled residual of one run (‖A − L·Lᵀ‖₁ / (‖A‖₁·n·ε), ‖C − A·B‖₁ / (‖A‖₁·‖B‖₁·n·ε)), bound {}; – not checked\n",
        offload_sched::model::residual::RESIDUAL_BOUND
    );
    let _ = writeln!(
        out,
        "| algorithm | n | tile | variant | GFLOP/s | GFLOP/s, copies in | runs | residual | wall s |\n|---|---|---|---|---|---|---|---|---|"
    );
    for r in &f.rows {
        let _ = writeln!(
            out,
            "| {}{} | {} | {} | {} | {:.1} | {} | {} | {} | {} |",
            r.prec,
            routine(r.alg),
            r.n,
            r.tile.map_or("–".to_string(), |t| t.to_string()),
            r.variant,
            r.gflops,
            r.whole.map_or("–".to_string(), |x| format!("{x:.1}")),
            r.runs,
            r.residual.map_or("–".to_string(), |x| format!("{x:.3}")),
            r.wall_s.map_or("–".to_string(), |x| format!("{x:.3}"))
        );
    }
    let moved: Vec<&Row> = f.rows.iter().filter(|r| r.moved.is_some()).collect();
    if !moved.is_empty() {
        let _ = writeln!(
            out,
            "\nBytes moved per run (the lowered graph's copies):\n\n\
             | algorithm | n | tile | variant | {BYTES_COLUMNS} |\n|---|---|---|---|{BYTES_RULE}|"
        );
        for r in moved {
            let m = r.moved.unwrap_or_default();
            let _ = writeln!(
                out,
                "| {}{} | {} | {} | {} | {} |",
                r.prec,
                routine(r.alg),
                r.n,
                r.tile.map_or("–".to_string(), |t| t.to_string()),
                r.variant,
                bytes_cells(&m)
            );
        }
    }
    targets(&mut out, f);
    super::capped::targets(&mut out, f);
    styles_target(&mut out, f);
    out
}

/// Issue 28's target: the tiled Cholesky in the per-task-map form (`mapped`, elision
/// on) within 1.1× of the entered form, both timed with their copies in (the `GFLOP/s,
/// copies in` column: the mapped form's copies are its own): host N = 4096, GPU N =
/// 32768, under minimal, live; the first tile that has both rows.
fn styles_target(out: &mut String, f: &Figures) {
    let (prec, n) = if f.gpu { ('d', 32768) } else { ('s', 4096) };
    let entered = |tile| {
        f.find("cholesky", prec, n, Some(tile), |k| {
            k == Kind::Ours { minimal: true }
        })
    };
    let mapped = |tile| {
        f.find("cholesky", prec, n, Some(tile), |k| {
            k == Kind::Mapped {
                minimal: true,
                replayed: false,
            }
        })
    };
    let what = format!(
        "tiled {prec}potrf N={n}, per-task maps (mapped style, elision on) within 1.1× of the entered style"
    );
    let pair = f
        .rows
        .iter()
        .filter_map(|r| r.tile)
        .find_map(|t| Some((t, entered(t)?.whole?, mapped(t)?.whole?)));
    match pair {
        Some((tile, e, m)) => {
            // Time ratio: GFLOP/s are flops over time, so time_mapped / time_entered.
            let x = e / m;
            let _ = writeln!(
                out,
                "- {what} (issue 28), tile {tile}: time mapped / entered = {e:.1} / {m:.1} GFLOP/s, copies in = {}× (≤ 1.1) — {}",
                shown(x, 2, 1.1, false),
                verdict(x <= 1.1)
            );
        }
        None => {
            let _ = writeln!(
                out,
                "- {what} (issue 28): not judged (needs minimal rows of both styles at N={n} in this call: --n {n} --style entered,mapped)"
            );
        }
    }
}

/// One target line: `what: a / b = x× (≥ t) — MET`, or not judged with the reason.
fn ratio_line(
    out: &mut String,
    what: &str,
    ours: Option<&Row>,
    peer: Option<&Row>,
    t: f64,
    missing: &str,
) {
    match (ours, peer) {
        (Some(o), Some(p)) => {
            let x = o.gflops / p.gflops;
            let _ = writeln!(
                out,
                "- {what}: {:.1} / {:.1} = {}× (≥ {t}) — {}",
                o.gflops,
                p.gflops,
                shown(x, 2, t, true),
                verdict(x >= t)
            );
        }
        (None, _) => {
            let _ = writeln!(out, "- {what}: not judged (not run in this call)");
        }
        (_, None) => {
            let _ = writeln!(out, "- {what}: not judged ({missing})");
        }
    }
}

/// Issue 27's targets (module docs).
fn targets(out: &mut String, f: &Figures) {
    let _ = writeln!(
        out,
        "\nTargets (issue 27; judged on this call's medians, offload-sched under minimal):"
    );
    let ours = |alg, prec, n, tile| {
        f.find(alg, prec, n, Some(tile), |k| {
            k == Kind::Ours { minimal: true }
        })
    };
    if !f.gpu {
        for n in [4096u64, 8192] {
            let o = ours("cholesky", 's', n, 512);
            let sp = f.find("cholesky", 's', n, Some(512), |k| {
                k == Kind::StarPU { best: true }
            });
            let la = f.find("cholesky", 's', n, None, |k| k == Kind::Monolithic);
            ratio_line(
                out,
                &format!("host: tiled spotrf N={n}, tile 512 ≥ 1.2× StarPU cholesky_implicit"),
                o,
                sp,
                1.2,
                "no StarPU figure: see the notes",
            );
            let wb = f.find("cholesky", 's', n, Some(512), |k| k == Kind::Bound);
            bound_line(out, (n, f.cores), o, sp.map(|s| 1.2 * s.gflops), wb);
            ratio_line(
                out,
                &format!(
                    "host: tiled spotrf N={n}, tile 512 ≥ 0.95× LAPACK spotrf ({} threads)",
                    f.cores
                ),
                o,
                la,
                0.95,
                "no LAPACK figure",
            );
        }
        let o = ours("gemm", 's', 4096, 512);
        let bl = f.find("gemm", 's', 4096, None, |k| k == Kind::Monolithic);
        ratio_line(
            out,
            "host: tiled sgemm N=4096 ≥ 0.95× OpenBLAS sgemm",
            o,
            bl,
            0.95,
            "no OpenBLAS figure",
        );
        let _ = writeln!(
            out,
            "- GPU targets: not judged (the {} plugin ran)",
            f.plugin
        );
    } else {
        let _ = writeln!(
            out,
            "- host targets: not judged (the {} plugin ran)",
            f.plugin
        );
        for tile in [1024u64, 2048] {
            let o = ours("cholesky", 'd', 32768, tile);
            let cs = f.find("cholesky", 'd', 32768, None, |k| k == Kind::Monolithic);
            ratio_line(
                out,
                &format!("GPU: dpotrf N=32768, tile {tile} ≥ 0.90× cuSOLVER dpotrf"),
                o,
                cs,
                0.90,
                "no cuSOLVER figure",
            );
            let rp = f.find("cholesky", 'd', 32768, Some(tile), |k| {
                k == Kind::OursReplayed { minimal: true }
            });
            ratio_line(
                out,
                &format!("GPU: dpotrf N=32768, tile {tile}: replayed ≥ live"),
                rp,
                o,
                1.0,
                "no live figure",
            );
        }
        // Issue 27: the panel on the high-priority stream (`--priority-panel`), judged
        // by its best row (live or replayed), only where such rows ran.
        let cs = f.find("cholesky", 'd', 32768, None, |k| k == Kind::Monolithic);
        let best = f
            .rows
            .iter()
            .filter(|r| {
                r.alg == "cholesky"
                    && r.prec == 'd'
                    && r.n == 32768
                    && r.tile == Some(1024)
                    && r.variant.contains("priority panel")
                    && matches!(
                        r.kind,
                        Kind::Ours { minimal: true } | Kind::OursReplayed { minimal: true }
                    )
            })
            .max_by(|a, b| a.gflops.total_cmp(&b.gflops));
        if let Some(b) = best {
            let what = format!(
                "GPU: dpotrf N=32768, tile 1024, priority panel (best: {}) ≥ 0.90× cuSOLVER dpotrf",
                b.variant
            );
            ratio_line(out, &what, Some(b), cs, 0.90, "no cuSOLVER figure");
        }
        let o = f
            .rows
            .iter()
            .filter(|r| {
                r.alg == "gemm"
                    && r.prec == 's'
                    && r.n == 16384
                    && r.kind == Kind::Ours { minimal: true }
            })
            .max_by(|a, b| a.gflops.total_cmp(&b.gflops));
        let cb = f.find("gemm", 's', 16384, None, |k| k == Kind::Monolithic);
        let what = match o.and_then(|r| r.tile) {
            Some(t) => format!("GPU: tiled sgemm N=16384 (best tile, {t}) ≥ 0.90× cuBLAS sgemm"),
            None => "GPU: tiled sgemm N=16384 ≥ 0.90× cuBLAS sgemm".to_string(),
        };
        ratio_line(out, &what, o, cb, 0.90, "no cuBLAS figure");
    }
}

/// The LAPACK/BLAS routine of a row's algorithm (`potrf`, `getrf`, `gemm`).
/// Where ours and the 1.2×-StarPU target stand against the work bound (`bound.rs`), when
/// the call measured it: a target above the bound cannot be met by any schedule of these
/// kernels on these cores.
fn bound_line(
    out: &mut String,
    (n, cores): (u64, usize),
    ours: Option<&Row>,
    need: Option<f64>,
    wb: Option<&Row>,
) {
    let Some(wb) = wb else { return };
    let pct = |g: f64| 100.0 * g / wb.gflops;
    let mut line = format!(
        "  - spotrf N={n}: the work bound of its tile kernels on {cores} cores is {:.1} GFLOP/s",
        wb.gflops
    );
    if let Some(o) = ours {
        let _ = write!(
            line,
            "; offload-sched {:.1} = {:.0}% of it",
            o.gflops,
            pct(o.gflops)
        );
    }
    if let Some(need) = need {
        let _ = write!(
            line,
            "; the 1.2× StarPU target needs {need:.1} = {:.0}% of it",
            pct(need)
        );
    }
    let _ = writeln!(out, "{line}");
}

fn routine(alg: &str) -> &'static str {
    match alg {
        "cholesky" => "potrf",
        "lu" => "getrf",
        _ => "gemm",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(alg: &'static str, n: u64, tile: Option<u64>, kind: Kind, g: f64) -> Row {
        Row {
            alg,
            prec: 's',
            n,
            tile,
            variant: format!("{kind:?}"),
            kind,
            gflops: g,
            whole: None,
            runs: 5,
            residual: Some(0.5),
            wall_s: Some(2.0),
            moved: None,
        }
    }

    #[test]
    fn the_bound_line_places_ours_and_the_target_against_the_bound() {
        let mut f = Figures {
            plugin: "host".into(),
            cores: 2,
            rows: vec![
                row(
                    "cholesky",
                    8192,
                    Some(512),
                    Kind::Ours { minimal: true },
                    160.0,
                ),
                row(
                    "cholesky",
                    8192,
                    Some(512),
                    Kind::StarPU { best: true },
                    150.0,
                ),
                row("cholesky", 8192, Some(512), Kind::Bound, 170.0),
            ],
            ..Figures::default()
        };
        let out = render(&f, 5);
        assert!(
            out.contains("  - spotrf N=8192: the work bound of its tile kernels on 2 cores is 170.0 GFLOP/s; offload-sched 160.0 = 94% of it; the 1.2× StarPU target needs 180.0 = 106% of it\n"),
            "{out}"
        );
        f.rows.pop();
        assert!(!render(&f, 5).contains("work bound"));
    }

    #[test]
    fn host_targets_are_judged_from_the_rows_and_missing_peers_say_so() {
        let f = Figures {
            plugin: "host".into(),
            cores: 2,
            rows: vec![
                row(
                    "cholesky",
                    4096,
                    Some(512),
                    Kind::Ours { minimal: true },
                    130.0,
                ),
                row(
                    "cholesky",
                    4096,
                    Some(512),
                    Kind::StarPU { best: true },
                    100.0,
                ),
                row(
                    "cholesky",
                    4096,
                    Some(512),
                    Kind::StarPU { best: false },
                    90.0,
                ),
                row("cholesky", 4096, None, Kind::Monolithic, 140.0),
                row("gemm", 4096, Some(512), Kind::Ours { minimal: true }, 90.0),
                row("gemm", 4096, None, Kind::Monolithic, 100.0),
            ],
            ..Figures::default()
        };
        let t = render(&f, 5);
        for want in [
            "| spotrf | 4096 | 512 | Ours { minimal: true } | 130.0 | – | 5 | 0.500 | 2.000 |",
            "N=4096, tile 512 ≥ 1.2× StarPU cholesky_implicit: 130.0 / 100.0 = 1.30× (≥ 1.2) — MET",
            "N=4096, tile 512 ≥ 0.95× LAPACK spotrf (2 threads): 130.0 / 140.0 = 0.93× (≥ 0.95) — MISSED",
            "N=8192, tile 512 ≥ 1.2× StarPU cholesky_implicit: not judged (not run in this call)",
            "tiled sgemm N=4096 ≥ 0.95× OpenBLAS sgemm: 90.0 / 100.0 = 0.90× (≥ 0.95) — MISSED",
            "GPU targets: not judged (the host plugin ran)",
        ] {
            assert!(t.contains(want), "{want}\n{t}");
        }
        let mut g = f.clone();
        g.rows.retain(|r| !matches!(r.kind, Kind::StarPU { .. }));
        let t = render(&g, 5);
        assert!(
            t.contains(
                "≥ 1.2× StarPU cholesky_implicit: not judged (no StarPU figure: see the notes)"
            ),
            "{t}"
        );
    }

    #[test]
    fn gpu_targets_compare_live_replayed_and_the_vendor_routine() {
        let d = |tile, kind, g| Row {
            prec: 'd',
            ..row("cholesky", 32768, tile, kind, g)
        };
        let f = Figures {
            plugin: "cuda".into(),
            gpu: true,
            cores: 16,
            rows: vec![
                d(Some(1024), Kind::Ours { minimal: true }, 40_000.0),
                d(Some(1024), Kind::OursReplayed { minimal: true }, 41_000.0),
                d(None, Kind::Monolithic, 42_000.0),
                row(
                    "gemm",
                    16384,
                    Some(2048),
                    Kind::Ours { minimal: true },
                    45_000.0,
                ),
                row(
                    "gemm",
                    16384,
                    Some(4096),
                    Kind::Ours { minimal: true },
                    48_000.0,
                ),
                row("gemm", 16384, None, Kind::Monolithic, 50_000.0),
            ],
            ..Figures::default()
        };
        let t = render(&f, 5);
        for want in [
            "dpotrf N=32768, tile 1024 ≥ 0.90× cuSOLVER dpotrf: 40000.0 / 42000.0 = 0.95× (≥ 0.9) — MET",
            "dpotrf N=32768, tile 1024: replayed ≥ live: 41000.0 / 40000.0 = 1.02× (≥ 1) — MET",
            "dpotrf N=32768, tile 2048 ≥ 0.90× cuSOLVER dpotrf: not judged (not run in this call)",
            "tiled sgemm N=16384 (best tile, 4096) ≥ 0.90× cuBLAS sgemm: 48000.0 / 50000.0 = 0.96× (≥ 0.9) — MET",
            "host targets: not judged (the cuda plugin ran)",
        ] {
            assert!(t.contains(want), "{want}\n{t}");
        }
    }

    #[test]
    fn the_mapped_style_is_judged_against_the_entered_style_with_its_bytes() {
        let moved = BytesMoved {
            h2d: 32 << 20,
            elided_h2d: 96 << 20,
            ..BytesMoved::default()
        };
        let with = |kind, whole: f64| Row {
            whole: Some(whole),
            moved: Some(moved),
            ..row("cholesky", 4096, Some(512), kind, whole)
        };
        let mut f = Figures {
            plugin: "host".into(),
            cores: 2,
            rows: vec![
                with(Kind::Ours { minimal: true }, 100.0),
                with(
                    Kind::Mapped {
                        minimal: true,
                        replayed: false,
                    },
                    95.0,
                ),
            ],
            ..Figures::default()
        };
        let t = render(&f, 5);
        for want in [
            "| spotrf | 4096 | 512 | Ours { minimal: true } | 32 MiB | 0 B | 0 B | 96 MiB | 0 B | 0 B | 0 B | 0 B |",
            "within 1.1× of the entered style (issue 28), tile 512: time mapped / entered = 100.0 / 95.0 GFLOP/s, copies in = 1.05× (≤ 1.1) — MET",
        ] {
            assert!(t.contains(want), "{want}\n{t}");
        }
        f.rows[1].whole = Some(80.0);
        assert!(render(&f, 5).contains("= 1.25× (≤ 1.1) — MISSED"));
        f.rows.pop();
        assert!(render(&f, 5)
            .contains("not judged (needs minimal rows of both styles at N=4096 in this call"));
    }
}
