//! `bench taskbench` end to end on the host plugin with a tiny sweep: the point table has
//! one row per (system, iteration count) with the sweep's counts and runs, the METG row
//! is what Task Bench's rule gives over the printed rows, missing peers are reported as
//! missing (never a row of figures), and bad options are refused before anything runs.
//! No timing is asserted.

use clap::Parser;
use offload_sched_bench::taskbench::metg::{metg_of, Metg, SweepPoint};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: offload_sched_bench::BenchCommand,
}

/// `offload-bench taskbench` on the host plugin, stencil_1d width 2, 6 steps, iterations
/// 2^8 down to 2^4, runs min(step + 1, 2), peers looked up in a folder that does not
/// exist, with `more` options.
fn taskbench(more: &[&str]) -> Result<String, String> {
    let mut argv = vec![
        "offload-bench",
        "taskbench",
        "--plugin",
        "host",
        "--patterns",
        "stencil_1d",
        "--width",
        "2",
        "--cores",
        "2",
        "--steps",
        "6",
        "--top-log2",
        "8",
        "--points",
        "5",
        "--max-reps",
        "2",
        "--warmup",
        "0",
        "--peers-dir",
        "/nonexistent-task-bench",
    ];
    argv.extend_from_slice(more);
    let cli = Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
    offload_sched_bench::run_command(&cli.args)
}

/// The printed point rows of `system`: `| system | iterations | runs | wall µs |
/// granularity µs | GFLOP/s | efficiency % |`.
fn points(out: &str, system: &str) -> Vec<(u64, usize, SweepPoint)> {
    let head = format!("| {system} | ");
    out.lines()
        .filter(|l| l.starts_with(&head))
        .filter_map(|l| {
            let c: Vec<&str> = l.split('|').map(str::trim).collect();
            // The METG table's rows have 3 columns, the point table's 7.
            (c.len() == 9).then(|| {
                let num = |i: usize| -> f64 { c[i].parse().unwrap_or_else(|e| panic!("{l}: {e}")) };
                let p = SweepPoint {
                    iterations: c[2].parse().unwrap(),
                    reps: c[3].parse().unwrap(),
                    elapsed_s: num(4) * 1e-6,
                    granularity_us: num(5),
                    rate: num(6) * 1e9,
                    efficiency: num(7) / 100.0,
                };
                (p.iterations, p.reps, p)
            })
        })
        .collect()
}

/// The METG cell of `system`.
fn metg_cell(out: &str, system: &str) -> String {
    let head = format!("| {system} | ");
    let row = out
        .lines()
        .filter(|l| l.starts_with(&head))
        .find(|l| l.split('|').count() == 7)
        .unwrap_or_else(|| panic!("no METG row for {system}\n{out}"));
    row.split('|').nth(2).unwrap().trim().to_string()
}

#[test]
fn the_table_has_the_sweep_and_metg_is_computed_from_its_rows() {
    // Live rows only: one system, so its best point is the common peak.
    let out = taskbench(&["--no-replay"]).unwrap();
    let ours = "offload-sched minimal, 2 streams";
    let rows = points(&out, ours);
    let counts: Vec<(u64, usize)> = rows.iter().map(|r| (r.0, r.1)).collect();
    assert_eq!(
        counts,
        [(256, 1), (128, 2), (64, 2), (32, 2), (16, 2)],
        "{out}"
    );
    for (_, _, p) in &rows {
        assert!(p.granularity_us > 0.0 && p.efficiency > 0.0, "{out}");
        // granularity = wall × 2 cores / 12 tasks, in µs (printed to 3 decimals).
        let want = p.elapsed_s * 2.0 / 12.0 * 1e6;
        assert!(
            (p.granularity_us - want).abs() <= 1e-3 + want * 1e-3,
            "{p:?}\n{out}"
        );
    }
    // One system in the call: the common peak is its best rate, so its best point is 100%.
    let best = rows.iter().map(|r| r.2.efficiency).fold(0.0, f64::max);
    assert!((best - 1.0).abs() < 1e-4, "{best}\n{out}");
    // METG over the printed rows, by Task Bench's rule, is the printed METG.
    let pts: Vec<SweepPoint> = rows.iter().map(|r| r.2).collect();
    let want = match metg_of(&pts, 0.5) {
        Metg::Value { us, interpolated } => {
            format!(
                "{us:.2} µs{}",
                if interpolated { " (interpolated)" } else { "" }
            )
        }
        m => m.to_string(),
    };
    let got = metg_cell(&out, ours);
    // Printed rows carry 3 decimals, so the recomputed value may differ in the last digit.
    let num = |s: &str| -> f64 {
        s.trim_start_matches(['≤', '>', ' '])
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(
        (num(&got) - num(&want)).abs() <= 0.02,
        "{got} vs {want}\n{out}"
    );
    assert_eq!(
        got.split_whitespace().skip(1).collect::<Vec<_>>(),
        want.split_whitespace().skip(1).collect::<Vec<_>>(),
        "{out}"
    );
}

#[test]
fn missing_peers_are_reported_missing_and_the_targets_say_so() {
    let out = taskbench(&[]).unwrap();
    for peer in [
        "Task Bench MPI (nonblock)",
        "Task Bench OpenMP",
        "Task Bench StarPU",
    ] {
        let cell = metg_cell(&out, peer);
        assert!(
            cell.starts_with("missing: no /nonexistent-task-bench/"),
            "{cell}\n{out}"
        );
        assert!(points(&out, peer).is_empty(), "{out}");
    }
    let targets = out.split("### Targets").nth(1).expect("a Targets section");
    assert!(
        targets.contains("METG ≤ 0.5× Task Bench StarPU's not judged: no figure"),
        "{targets}"
    );
    assert!(targets.contains("GPU targets"), "{targets}");
}

#[test]
fn bad_options_are_refused_before_anything_runs() {
    let e = taskbench(&["--patterns", "stencil_2d"]).unwrap_err();
    assert!(e.contains("stencil_2d"), "{e}");
    let e = taskbench(&["--peak", "fast"]).unwrap_err();
    assert!(e.contains("--peak \"fast\""), "{e}");
    let e = taskbench(&["--policies", "eager"]).unwrap_err();
    assert!(e.contains("eager"), "{e}");
    // Task Bench's own rule: spread's radix at most the width (2 here), so no task
    // depends on a point twice.
    let e = taskbench(&["--patterns", "spread", "--radix", "5"]).unwrap_err();
    assert!(e.starts_with("--patterns spread: Task Bench spec:"), "{e}");
}
