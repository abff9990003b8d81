//! `offload-sched bench` and `run --compare-host` through the binary (host plugin, so it
//! runs anywhere).
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_offload-sched"))
}

#[test]
fn bench_subcommand_runs_on_the_host_plugin() {
    let o = bin()
        .args([
            "bench",
            "--plugin",
            "host",
            "--regions",
            "2",
            "--sizes",
            "4096",
            "--reps",
            "1",
            "--warmup",
            "0",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.starts_with("plugin: host"), "{text}");
    assert!(text.contains("| (c4) minimal, 4 streams |"), "{text}");
    assert!(text.contains("| (c8) minimal, 8 streams |"), "{text}");
}

#[test]
fn bench_check_and_bad_plugin() {
    let o = bin()
        .args(["bench", "--plugin", "host", "--check"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    // saxpy_regions, kernels_{f32,f64,i32,i64,u8}, batch_edges
    assert_eq!(text.matches(": OK").count(), 7, "{text}");
    assert!(text.contains("check batch_edges: 37 ops"), "{text}");
    let o = bin().args(["bench", "--plugin", "tpu"]).output().unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown plugin \"tpu\""));
}

#[test]
fn run_compare_host() {
    let g = concat!(env!("CARGO_MANIFEST_DIR"), "/graphs/pipeline.toml");
    let o = bin()
        .args([
            "run",
            g,
            "--plugin",
            "host",
            "--compare-host",
            "--check",
            "--rel-tol",
            "1e-5",
            "--random-streams",
            "3",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("compare-host: ok (1 run(s)"), "{text}");
    assert!(text.contains("check: ok"), "{text}");
}

#[test]
fn bench_rejects_empty_sizes_and_zero_repetitions_and_names_the_auto_fallback() {
    for (flag, value, why) in [
        ("--sizes", "0", "0 is not in 4.."),
        ("--reps", "0", "0 is not in 1.."),
        ("--reps-large", "0", "0 is not in 1.."),
    ] {
        let o = bin().args(["bench", flag, value]).output().unwrap();
        assert!(!o.status.success(), "{flag} {value}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("invalid value '0' for '{flag}")),
            "{err}"
        );
        assert!(err.contains(why), "{err}");
    }
    // `--plugin auto` where no CUDA device answers: a note on stderr, as `run` gives.
    if offload_sched::plugin::cuda::probe().is_err() {
        let o = bin()
            .args([
                "bench",
                "--plugin",
                "auto",
                "--regions",
                "1",
                "--sizes",
                "4",
            ])
            .args(["--reps", "1", "--warmup", "0"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.lines()
                .next()
                .is_some_and(|l| l.starts_with("note: ") && l.ends_with("; using the host plugin")),
            "{err}"
        );
    } else {
        eprintln!("skipped the fallback half: a CUDA device answers here");
    }
}

#[test]
fn bench_on_the_null_plugin_times_without_checking_results() {
    // The null plugin computes nothing, so the bench must not check its results (it
    // would fail: y stays 1.0); every plugin that computes is checked.
    let o = bin()
        .args([
            "bench",
            "--plugin",
            "null",
            "--regions",
            "2",
            "--sizes",
            "4096",
        ])
        .args(["--reps", "1", "--warmup", "0"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("plugin: null"));
}
