//! `bench linalg` end to end on the host plugin at small sizes: a row per policy and tile
//! with a checked residual, the host routine's row, missing StarPU reported as notes (never
//! a row), the targets section saying what was not judged; bad options refused before
//! anything runs.

use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: offload_sched_bench::BenchCommand,
}

/// `offload-bench linalg` on the host plugin at n = 64, f64, 5 runs per row (the
/// default), with `more` options.
fn linalg(more: &[&str]) -> Result<String, String> {
    let mut argv = vec![
        "offload-bench",
        "linalg",
        "--plugin",
        "host",
        "--n",
        "64",
        "--tiles",
        "16,32",
        "--precision",
        "f64",
        "--streams",
        "3",
        "--warmup",
        "0",
        "--starpu",
        "/nonexistent-starpu",
        "--residual-max-n",
        "64",
    ];
    argv.extend_from_slice(more);
    let cli = Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
    offload_sched_bench::run_command(&cli.args)
}

#[test]
fn every_policy_and_tile_has_a_checked_row_and_missing_peers_are_notes() {
    let out = linalg(&[]).unwrap();
    for alg in ["dpotrf", "dgemm"] {
        for tile in [16, 32] {
            for p in ["per-op", "per-region", "minimal"] {
                let head = format!("| {alg} | 64 | {tile} | offload-sched {p} |");
                let row = out
                    .lines()
                    .find(|l| l.starts_with(&head))
                    .unwrap_or_else(|| panic!("no row {head}\n{out}"));
                // | alg | n | tile | variant | GFLOP/s | copies in | runs | residual | wall s |
                let cols: Vec<&str> = row.split('|').map(str::trim).collect();
                let num = |i: usize| -> f64 {
                    cols[i]
                        .parse()
                        .unwrap_or_else(|e| panic!("{row}: column {i}: {e}"))
                };
                assert!(num(8) < 30.0, "{row}");
                // A row of n = 64 can take under 0.5 ms, shown as 0.000.
                assert!(num(9) >= 0.0, "{row}");
            }
        }
        let host = if alg == "dpotrf" {
            "LAPACK dpotrf"
        } else {
            "BLAS dgemm"
        };
        assert!(
            out.contains(&format!("| {alg} | 64 | – | {host} (OpenBLAS, ")),
            "{out}"
        );
    }
    for note in [
        "note: StarPU for dcholesky: StarPU's cholesky_implicit is single precision only",
        "note: StarPU dgemm lws: /nonexistent-starpu/dgemm not found",
        "note: StarPU dgemm dmda: /nonexistent-starpu/dgemm not found",
    ] {
        assert!(out.contains(note), "{note}\n{out}");
    }
    assert!(!out.contains("| StarPU"), "{out}");
    assert!(
        out.contains("tiled spotrf N=4096, tile 512 ≥ 1.2× StarPU cholesky_implicit: not judged (not run in this call)"),
        "{out}"
    );
    assert!(
        out.contains("GPU targets: not judged (the host plugin ran)"),
        "{out}"
    );
}

/// LU: a checked row per stream count and look-ahead depth, the host routine (LAPACK
/// getrf, which pivots, said so) and StarPU's lu_implicit missing as notes.
#[test]
fn lu_rows_per_stream_count_and_lookahead_are_checked() {
    let out = linalg(&[
        "--algorithms",
        "lu",
        "--policies",
        "minimal",
        "--streams",
        "2,3",
        "--lookahead",
        "0,1",
    ])
    .unwrap();
    for tile in [16, 32] {
        for streams in [2, 3] {
            for la in [0, 1] {
                let head = format!(
                    "| dgetrf | 64 | {tile} | offload-sched minimal ({streams} streams, look-ahead {la}) |"
                );
                let row = out
                    .lines()
                    .find(|l| l.starts_with(&head))
                    .unwrap_or_else(|| panic!("no row {head}\n{out}"));
                let cols: Vec<&str> = row.split('|').map(str::trim).collect();
                let res: f64 = cols[8].parse().unwrap_or_else(|e| panic!("{row}: {e}"));
                assert!(res < 30.0, "{row}");
            }
        }
    }
    let host = out
        .lines()
        .find(|l| {
            l.starts_with("| dgetrf | 64 | – | LAPACK dgetrf with partial pivoting (OpenBLAS, ")
        })
        .unwrap_or_else(|| panic!("no LAPACK row\n{out}"));
    let res: f64 = host
        .split('|')
        .map(str::trim)
        .nth(8)
        .unwrap()
        .parse()
        .unwrap();
    assert!(res < 30.0, "{host}");
    assert!(
        out.contains("note: StarPU lu_implicit_example_double lws: /nonexistent-starpu/lu_implicit_example_double not found"),
        "{out}"
    );
    assert!(out.contains("2n³/3 flops"), "{out}");
}

#[test]
fn a_tile_that_does_not_divide_n_an_unknown_policy_or_too_few_reps_are_refused() {
    assert_eq!(
        linalg(&["--tiles", "24"]).unwrap_err(),
        "--n 64 --tiles 24: tiling n 64 tile 24: n must be a multiple of tile (whole tiles \
         only: 64 = 2 × 24 + 16)"
    );
    let e = linalg(&["--policies", "fastest"]).unwrap_err();
    assert!(e.contains("unknown policy \"fastest\""), "{e}");
    let e = linalg(&["--reps", "3"]).unwrap_err();
    assert!(e.contains("3 is not in 5.."), "{e}");
}

/// Under `--device-memory`, every capped row is set against its uncapped elided twin
/// in the same call (the per-task-map rows, `, mapped`, were not found as twins): judged
/// where the cap changes the bytes moved (tile 32: it evicts), "not judged" with the
/// reason where it moves the same bytes; and the bytes-moved table names each row's
/// routine (LU rows were labelled `gemm`).
#[test]
fn capped_mapped_rows_are_judged_against_their_uncapped_twin() {
    let out = linalg(&[
        "--algorithms",
        "lu,cholesky",
        "--policies",
        "minimal",
        "--style",
        "mapped",
        "--device-memory",
        "24KiB",
    ])
    .unwrap();
    for routine in ["dpotrf", "dgetrf"] {
        for policy in ["belady", "lru"] {
            for tile in [16, 32] {
                let head = format!(
                    "- d{} n=64 tile {tile} offload-sched minimal, mapped, elided, cap 24 KiB {policy} ≥ 0.8× uncapped: ",
                    if routine == "dpotrf" { "cholesky" } else { "lu" }
                );
                let same = format!(
                    "- d{} n=64 tile {tile} offload-sched minimal, mapped, elided, cap 24 KiB {policy}: not judged: the cap moves the same bytes (nothing evicted,",
                    if routine == "dpotrf" { "cholesky" } else { "lu" }
                );
                let judged = out
                    .lines()
                    .any(|l| l.starts_with(&head) && (l.ends_with("MET") || l.ends_with("MISSED")));
                let unjudged = out.lines().any(|l| l.starts_with(&same));
                // At tile 32 the 24 KiB cap is under one region's tiles' worth of kept
                // copies: it evicts (8 KiB in both routines), so it is judged.
                assert!(
                    judged != unjudged && (tile == 16 || judged),
                    "{head} judged {judged}, not judged {unjudged}\n{out}"
                );
            }
        }
        let moved = out
            .split("Bytes moved per run")
            .nth(1)
            .unwrap_or_else(|| panic!("no bytes table\n{out}"));
        assert!(
            moved.contains(&format!(
                "| {routine} | 64 | 16 | offload-sched minimal, mapped, elided, cap 24 KiB lru |"
            )),
            "{routine}\n{moved}"
        );
    }
    assert!(!out.contains("not judged (no uncapped row"), "{out}");
}
