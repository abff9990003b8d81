//! `bench dag`'s report: the table of rows, the bytes each DAG moves with and without
//! transfer elision, the ratios against `minimal`, and the targets judged on them.

use super::{DagFigures, NO_ELIDE};
use crate::moved::{bytes_cells, BYTES_COLUMNS, BYTES_RULE};
use crate::report::{shown, verdict};
use offload_sched::lower::BytesMoved;
use offload_sched::model::human_bytes;
use std::fmt::Write as _;

pub(super) fn render(f: &DagFigures, (warmup, reps): (usize, usize), streams: u32) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "plugin: {}", f.plugin);
    for n in &f.notes {
        let _ = writeln!(out, "{n}");
    }
    for h in &f.header {
        let _ = writeln!(out, "- {h}");
    }
    let _ = writeln!(
        out,
        "\nµs per region: median (and best) of {reps} runs after {warmup} warm-up, first op issued → final host wait; {streams} streams per device; streams, events and host waits from the schedule\n"
    );
    let _ = writeln!(
        out,
        "| DAG | variant | regions | ops | streams | events | host waits | H2D | D2H | µs/region | best |\n|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for r in &f.rows {
        let facts = r.facts.map_or(
            "| – | – | – | – | – | – | – |".to_string(),
            |x| {
                format!(
                    "| {} | {} | {} | {} | {} | {} | {} |",
                    x.regions,
                    x.ops,
                    x.streams,
                    x.events,
                    x.host_waits,
                    human_bytes(x.moved.h2d),
                    human_bytes(x.moved.d2h)
                )
            },
        );
        let _ = writeln!(
            out,
            "| {} | {}{} {facts} {:.2} | {:.2} |",
            r.dag, r.variant, r.label, r.median, r.best
        );
    }
    bytes(&mut out, f);
    ratios(&mut out, f);
    targets(&mut out, f);
    out
}

/// Every figure of [`BytesMoved`] per DAG, with elision (the `minimal` row's graph; the
/// same under every policy) and without (`minimal, no-elide`).
fn bytes(out: &mut String, f: &DagFigures) {
    let _ = writeln!(
        out,
        "\nBytes moved per run (the lowered graph's copies; the same under every policy):\n\n\
         | DAG | lowering | {BYTES_COLUMNS} |\n|---|---|{BYTES_RULE}|"
    );
    for r in &f.rows {
        let Some(m) = r.facts.map(|x| x.moved) else {
            continue;
        };
        let lowering = match r.variant.as_str() {
            "minimal" => "elide",
            NO_ELIDE => "no-elide",
            _ => continue,
        };
        let _ = writeln!(out, "| {} | {lowering} | {} |", r.dag, bytes_cells(&m));
    }
}

/// Issue 28's targets for the matmul: bytes moved with elision, and minimal with
/// elision against minimal without (a GPU target).
fn elision_targets(out: &mut String, f: &DagFigures) {
    let moved = |v: &str| -> Option<BytesMoved> {
        let r = f
            .rows
            .iter()
            .find(|r| r.dag == "matmul" && r.variant == v)?;
        r.facts.map(|x| x.moved)
    };
    if let Some(m) = moved("minimal") {
        let ok = m.h2d <= 1 << 20 && m.d2h <= 256 << 10;
        let _ = writeln!(
            out,
            "- matmul bytes moved with elision (issue 28): H2D {} ≤ 1 MiB and D2H {} ≤ 256 KiB (every timed run's values checked) — {}",
            human_bytes(m.h2d),
            human_bytes(m.d2h),
            verdict(ok)
        );
    }
    if let (Some(m), Some(off)) = (f.us("matmul", "minimal"), f.us("matmul", NO_ELIDE)) {
        let x = off / m;
        let what = "matmul minimal ≥ 1.3× faster than with --no-elide (issue 28)";
        let _ = match f.gpu {
            true => writeln!(
                out,
                "- {what}: {off:.2} / {m:.2} = {}× — {}",
                shown(x, 2, 1.3, true),
                verdict(x >= 1.3)
            ),
            false => writeln!(
                out,
                "- {what}: {off:.2} / {m:.2} = {x:.2}×, not judged (a GPU target; the pipeline ran on the {} plugin)",
                f.plugin
            ),
        };
    }
}

/// Other variants' µs over minimal's, per DAG (> 1: minimal is faster).
fn ratios(out: &mut String, f: &DagFigures) {
    let others = [
        "per-op",
        "per-region",
        NO_ELIDE,
        "LLVM 19 nowait",
        "LLVM 19 sync",
    ];
    let _ = writeln!(
        out,
        "\nRatios: variant µs / minimal µs (> 1: minimal is faster)\n\n| DAG | {} |\n|---|---|---|---|---|---|",
        others.join(" | ")
    );
    let mut dags: Vec<&str> = f.rows.iter().map(|r| r.dag.as_str()).collect();
    dags.dedup();
    for d in dags {
        let Some(m) = f.us(d, "minimal") else {
            continue;
        };
        let _ = write!(out, "| {d} |");
        for o in others {
            match f.us(d, o) {
                Some(x) => {
                    let _ = write!(out, " {:.2} |", x / m);
                }
                None => out.push_str(" – |"),
            }
        }
        out.push('\n');
    }
}

/// Issue 11's targets, judged on this run's medians.
fn targets(out: &mut String, f: &DagFigures) {
    let _ = writeln!(
        out,
        "\nTargets (issues 11 and 28; judged on this run's medians, pipeline on the {} plugin):",
        f.plugin
    );
    if let Some(m) = f.us("matmul", "minimal") {
        let why_not = if !f.gpu {
            Some(format!("the pipeline ran on the {} plugin", f.plugin))
        } else if f.llvm_fallback() {
            Some("LLVM 19 ran in host fallback".to_string())
        } else {
            None
        };
        match (f.us("matmul", "LLVM 19 nowait"), &why_not) {
            (Some(l), None) => {
                let x = l / m;
                let _ = writeln!(
                    out,
                    "- matmul minimal ≥ 8× faster than LLVM 19 nowait: {l:.2} / {m:.2} = {}× — {}",
                    shown(x, 2, 8.0, true),
                    verdict(x >= 8.0)
                );
            }
            (None, None) => {
                let _ = writeln!(
                    out,
                    "- matmul minimal ≥ 8× faster than LLVM 19 nowait: not judged (no LLVM 19 figure: --baselines)"
                );
            }
            (_, Some(why)) => {
                let _ = writeln!(
                    out,
                    "- matmul minimal ≥ 8× faster than LLVM 19 nowait: not judged (a GPU target; {why})"
                );
            }
        }
        match &why_not {
            Some(why) if !f.gpu => {
                let _ = writeln!(
                    out,
                    "- matmul minimal ≤ 10.5 µs/region: not judged (a GPU target; {why})"
                );
            }
            _ => {
                let _ = writeln!(
                    out,
                    "- matmul minimal ≤ 10.5 µs/region: {} — {}",
                    shown(m, 2, 10.5, false),
                    verdict(m <= 10.5)
                );
            }
        }
    }
    elision_targets(out, f);
    let mut dags: Vec<&str> = f.rows.iter().map(|r| r.dag.as_str()).collect();
    dags.dedup();
    for d in dags {
        let (Some(m), Some(op), Some(reg)) =
            (f.us(d, "minimal"), f.us(d, "per-op"), f.us(d, "per-region"))
        else {
            continue;
        };
        let line = if f.same_schedule(d, "minimal", "per-region") {
            format!(
                "{m:.2} ≤ {op:.2} (per-op; per-region ran the same schedule step for step, {reg:.2}: equal by construction) — {}",
                verdict(m <= op)
            )
        } else {
            format!(
                "{m:.2} ≤ min({op:.2}, {reg:.2}) — {}",
                verdict(m <= op.min(reg))
            )
        };
        let _ = writeln!(
            out,
            "- {d}: minimal not slower than per-op and per-region: {line}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Facts, Row};
    use super::*;

    fn row(dag: &'static str, variant: &str, median: f64) -> Row {
        Row {
            dag: dag.to_string(),
            variant: variant.to_string(),
            // Distinct schedules per variant unless a test says otherwise.
            facts: (!variant.starts_with("LLVM")).then(|| Facts {
                steps: variant.len() as u64,
                ..Facts::default()
            }),
            median,
            best: median,
            ..Row::default()
        }
    }

    fn figures(plugin: &str) -> DagFigures {
        DagFigures {
            plugin: plugin.to_string(),
            gpu: plugin == "cuda",
            rows: vec![
                row("matmul", "per-op", 30.0),
                row("matmul", "per-region", 12.0),
                row("matmul", "minimal", 9.0),
                row("matmul", "LLVM 19 nowait", 84.7),
                row("matmul", "LLVM 19 sync", 98.1),
                row("fanout", "per-op", 20.0),
                row("fanout", "per-region", 10.0),
                row("fanout", "minimal", 11.0),
            ],
            ..DagFigures::default()
        }
    }

    #[test]
    fn targets_are_judged_from_the_figures() {
        let t = render(&figures("cuda"), (1, 5), 4);
        for want in [
            "| matmul | LLVM 19 nowait | – | – | – | – | – | – | – | 84.70 | 84.70 |",
            "| matmul | 3.33 | 1.33 | – | 9.41 | 10.90 |",
            "| fanout | 1.82 | 0.91 | – | – | – |",
            "matmul minimal ≥ 8× faster than LLVM 19 nowait: 84.70 / 9.00 = 9.41× — met",
            "matmul minimal ≤ 10.5 µs/region: 9.00 — met",
            "- matmul: minimal not slower than per-op and per-region: 9.00 ≤ min(30.00, 12.00) — met",
            "- fanout: minimal not slower than per-op and per-region: 11.00 ≤ min(20.00, 10.00) — MISSED",
        ] {
            assert!(t.contains(want), "{want}\n{t}");
        }
        let mut f = figures("cuda");
        f.rows[2].median = 11.0;
        let t = render(&f, (1, 5), 4);
        assert!(t.contains("84.70 / 11.00 = 7.70× — MISSED"), "{t}");
        assert!(t.contains("≤ 10.5 µs/region: 11.00 — MISSED"), "{t}");
        // The same schedule under per-region and minimal: only per-op is compared.
        let mut f = figures("cuda");
        for r in f.rows.iter_mut().filter(|r| r.dag == "fanout") {
            if let Some(facts) = r.facts.as_mut() {
                facts.steps = 7;
            }
        }
        let t = render(&f, (1, 5), 4);
        assert!(
            t.contains("- fanout: minimal not slower than per-op and per-region: 11.00 ≤ 20.00 (per-op; per-region ran the same schedule step for step, 10.00: equal by construction) — met"),
            "{t}"
        );
    }

    #[test]
    fn gpu_targets_are_not_judged_on_host_figures() {
        let t = render(&figures("host"), (1, 5), 4);
        assert!(
            t.contains("8× faster than LLVM 19 nowait: not judged (a GPU target; the pipeline ran on the host plugin)"),
            "{t}"
        );
        assert!(t.contains("10.5 µs/region: not judged"), "{t}");
        let mut f = figures("cuda");
        f.rows[3].label = " (host fallback, not the GPU path)".into();
        let t = render(&f, (1, 5), 4);
        assert!(
            t.contains("not judged (a GPU target; LLVM 19 ran in host fallback)"),
            "{t}"
        );
        assert!(t.contains("| matmul | LLVM 19 nowait (host fallback, not the GPU path) |"));
        // The absolute target is still judged on the GPU.
        assert!(t.contains("≤ 10.5 µs/region: 9.00 — met"), "{t}");
        f.rows.retain(|r| !r.variant.starts_with("LLVM"));
        let t = render(&f, (1, 5), 4);
        assert!(
            t.contains("not judged (no LLVM 19 figure: --baselines)"),
            "{t}"
        );
    }

    #[test]
    fn elision_targets_are_judged_from_the_figures() {
        let moved = |h2d: u64, d2h: u64| BytesMoved {
            h2d,
            d2h,
            elided_h2d: (12 << 20) - h2d,
            d2h_dropped: (4 << 20) - d2h,
            ..BytesMoved::default()
        };
        let mut f = figures("cuda");
        f.rows[2].facts.as_mut().unwrap().moved = moved(768 << 10, 256 << 10);
        let mut off = row("matmul", NO_ELIDE, 12.6);
        off.facts.as_mut().unwrap().moved = moved(12 << 20, 4 << 20);
        f.rows.insert(3, off);
        let t = render(&f, (1, 5), 4);
        for want in [
            "| matmul | minimal | 0 | 0 | 0 | 0 | 0 | 768 KiB | 256 KiB | 9.00 | 9.00 |",
            "| matmul | elide | 768 KiB | 256 KiB | 0 B | 11.2 MiB | 3.8 MiB | 0 B | 0 B | 0 B |",
            "| matmul | no-elide | 12 MiB | 4 MiB | 0 B | 0 B | 0 B | 0 B | 0 B | 0 B |",
            "| matmul | 3.33 | 1.33 | 1.40 | 9.41 | 10.90 |",
            "H2D 768 KiB ≤ 1 MiB and D2H 256 KiB ≤ 256 KiB (every timed run's values checked) — met",
            "- matmul minimal ≥ 1.3× faster than with --no-elide (issue 28): 12.60 / 9.00 = 1.40× — met",
        ] {
            assert!(t.contains(want), "{want}\n{t}");
        }
        f.rows[3].median = 11.0;
        f.rows[2].facts.as_mut().unwrap().moved = moved(2 << 20, 256 << 10);
        let t = render(&f, (1, 5), 4);
        assert!(t.contains("= 1.22× — MISSED"), "{t}");
        assert!(t.contains("H2D 2 MiB ≤ 1 MiB and D2H 256 KiB ≤ 256 KiB (every timed run's values checked) — MISSED"), "{t}");
        f.plugin = "host".into();
        f.gpu = false;
        let t = render(&f, (1, 5), 4);
        assert!(
            t.contains("11.00 / 9.00 = 1.22×, not judged (a GPU target; the pipeline ran on the host plugin)"),
            "{t}"
        );
    }
}
