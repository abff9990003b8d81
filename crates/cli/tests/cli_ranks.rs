//! Distributed `run`: `--ranks N` (every rank a thread of one process) always, and under
//! `mpirun -np 2` / `-np 4 --oversubscribe` when the CLI is built with the `mpi` feature
//! (the CLI's default) and mpirun is installed (scripts/setup.sh; skipped with a message
//! otherwise).

use std::process::{Command, Output};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
const BIN: &str = env!("CARGO_BIN_EXE_offload-sched");

fn graph(name: &str) -> String {
    format!("{ROOT}/graphs/{name}")
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The per-rank lines and the total line of `chain_ranks` on 4 ranks (threads or MPI).
fn assert_chain_summary(out: &str) {
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 10, "{out}");
    // Every rank's graph copies its region's two inputs in and its output back.
    let moved = "moved: H2D 32 KiB, D2H 16 KiB, peer 0 B; elided H2D 0 B, D2H 0 B dropped, 0 B deferred; evicted 0 B, prefetched 0 B";
    for (r, want) in [
        "rank 0: 1 region, 12 ops, 0 sends (0 B), 3 receives (48 KiB), wall ",
        "rank 1: 1 region, 11 ops, 2 sends (32 KiB), 0 receives (0 B), wall ",
        "rank 2: 1 region, 12 ops, 2 sends (32 KiB), 1 receive (16 KiB), wall ",
        "rank 3: 1 region, 11 ops, 1 send (16 KiB), 1 receive (16 KiB), wall ",
    ]
    .iter()
    .enumerate()
    {
        assert!(lines[2 * r].starts_with(want), "{out}");
        assert_eq!(lines[2 * r + 1], format!("rank {r} {moved}"), "{out}");
    }
    assert!(
        lines[8].contains(": 4 ranks, 5 transfers, 80 KiB between ranks, wall "),
        "{out}"
    );
    assert!(
        lines[8].ends_with(", check ok (rank 0 = reference)"),
        "{out}"
    );
    assert_eq!(
        lines[9],
        "moved: H2D 128 KiB, D2H 64 KiB, peer 0 B; elided H2D 0 B, D2H 0 B dropped, 0 B deferred; evicted 0 B, prefetched 0 B (all ranks)",
        "{out}"
    );
}

#[test]
fn ranks_as_threads_check_and_trace_a_track_group_per_rank() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.json");
    let out = Command::new(BIN)
        .args([
            "run",
            &graph("distributed/chain_ranks.toml"),
            "--plugin",
            "host",
        ])
        .args(["--ranks", "4", "--check", "--delay-jitter", "5", "--trace"])
        .arg(&trace)
        .output()
        .unwrap();
    assert_chain_summary(&ok(&out));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    let names: Vec<String> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "process_name")
        .map(|e| format!("{} {}", e["pid"], e["args"]["name"].as_str().unwrap()))
        .collect();
    assert_eq!(
        names,
        (0..4)
            .map(|r| format!("{} rank {r}: offload-sched chain_ranks (host)", r + 1))
            .collect::<Vec<_>>()
    );
}

/// The stderr of `run FILE ARGS…` on the host plugin, after asserting it failed.
fn refused(file: &str, more: &[&str]) -> String {
    let out = Command::new(BIN)
        .args(["run", &graph(file), "--plugin", "host"])
        .args(more)
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_rank_out_of_range_in_the_file_is_located() {
    let err = refused("distributed/chain_ranks.toml", &["--ranks", "2"]);
    assert!(
        err.contains(
            "chain_ranks.toml:30:8: error: rank 2 is out of range: the run has 2 ranks (ranks 0 to 1)"
        ),
        "{err}"
    );
    // The help names what the whole file needs (its largest rank is 3), not rank 2 + 1.
    assert!(
        err.contains("the file asks for 4 ranks: run it with `--ranks 4`"),
        "{err}"
    );
}

#[test]
fn options_a_distributed_run_does_not_take_are_refused_not_ignored() {
    for (opt, more) in [
        ("--repeat", &["--repeat", "3"][..]),
        ("--compare-host", &["--compare-host"][..]),
        ("--issue", &["--issue", "per-stream"][..]),
        ("--spin-scale", &["--spin-scale", "0.5"][..]),
    ] {
        let mut args = vec!["--ranks", "4"];
        args.extend_from_slice(more);
        let err = refused("distributed/chain_ranks.toml", &args);
        assert!(
            err.contains(&format!(
                "error: {opt} is not supported with --ranks or under mpirun"
            )),
            "{opt}: {err}"
        );
    }
}

#[test]
fn one_rank_is_named_in_the_singular() {
    let err = refused("distributed/chain_ranks.toml", &["--ranks", "1"]);
    assert!(
        err.contains(
            "chain_ranks.toml:23:8: error: rank 1 is out of range: the run has 1 rank (rank 0)"
        ),
        "{err}"
    );
}

#[test]
fn data_constructs_run_over_ranks_and_check() {
    for (file, ranks) in [("case_e02.toml", "2"), ("jacobi.toml", "4")] {
        let out = Command::new(BIN)
            .args(["run", &graph(file), "--plugin", "host"])
            .args(["--ranks", ranks, "--check", "--delay-jitter", "3"])
            .output()
            .unwrap();
        let out = ok(&out);
        assert!(
            out.contains(&format!(": {ranks} ranks, "))
                && out.contains("check ok (rank 0 = reference)"),
            "{file}: {out}"
        );
    }
}

/// A program of one `saxpy` region followed by `construct` (TOML lines of one `[[body]]`
/// entry, at line 23 of the file).
fn with_construct(construct: &str) -> String {
    format!(
        r#"name = "data_constructs"
[[buffer]]
name = "x"
type = "f32"
len = 8
init = "zeros"
rank = 0

[[buffer]]
name = "y"
type = "f32"
len = 8
init = "zeros"
rank = 1

[[body]]
target = "k"
kernel = "saxpy"
args = [2.0, "x", "y"]
map = ["to: x", "tofrom: y"]

[[body]]
{construct}
"#
    )
}

#[test]
fn every_data_construct_runs_and_a_taskgraph_is_refused_at_its_position() {
    let dir = tempfile::tempdir().unwrap();
    // (key, name, the rest of the entry)
    let nested = "\n[[body.body]]\ntarget = \"k2\"\nkernel = \"saxpy\"\nargs = [2.0, \"x\", \"y\"]\nmap = [\"to: x\", \"tofrom: y\"]";
    let cases = [
        ("target_data", "env", format!("map = [\"to: x\"]{nested}")),
        ("enter_data", "in", "map = [\"to: x\"]".to_string()),
        ("exit_data", "out", "map = [\"from: y\"]".to_string()),
        ("update", "show", "map = [\"from: y\"]".to_string()),
        ("taskgraph", "tg", format!("repeat = 2{nested}")),
    ];
    for (i, (key, name, rest)) in cases.iter().enumerate() {
        let file = dir.path().join(format!("c{i}.toml"));
        std::fs::write(
            &file,
            with_construct(&format!("{key} = \"{name}\"\n{rest}")),
        )
        .unwrap();
        for ranks in ["2", "4"] {
            let out = Command::new(BIN)
                .arg("run")
                .arg(&file)
                .args(["--plugin", "host", "--ranks", ranks, "--check"])
                .output()
                .unwrap();
            if *key != "taskgraph" {
                let out = ok(&out);
                assert!(
                    out.contains("check ok (rank 0 = reference)"),
                    "{key}: {out}"
                );
                continue;
            }
            assert!(!out.status.success(), "{out:?}");
            assert!(out.stdout.is_empty(), "{out:?}");
            let err = String::from_utf8_lossy(&out.stderr);
            // Located at the construct's name (line 23, after `key = `).
            let want = format!(
                "c{i}.toml:23:{}: error: {key} \"{name}\": a distributed program takes no taskgraph",
                key.len() + 4
            );
            assert!(err.contains(&want), "{err}\nwanted: {want}");
            assert!(err.contains("not yet distributed"), "{err}");
        }
    }
}

/// `mpirun` with the flags CI needs (root allowed, oversubscription), or `None` with the
/// reason the MPI tests are skipped.
fn mpirun() -> Result<Command, String> {
    if !cfg!(feature = "mpi") {
        return Err("offload-sched built without the `mpi` feature (the CLI's default; --no-default-features leaves it out)".into());
    }
    if Command::new("mpirun").arg("--version").output().is_err() {
        return Err("no mpirun (scripts/setup.sh installs Debian's openmpi-bin)".into());
    }
    let mut c = Command::new("mpirun");
    c.args([
        "--allow-run-as-root",
        "--oversubscribe",
        "--bind-to",
        "none",
    ]);
    c.env("OMPI_MCA_btl", "self,vader")
        .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none");
    Ok(c)
}

#[test]
fn mpirun_np_2_and_4_check_against_the_reference() {
    let mut c = match mpirun() {
        Ok(c) => c,
        Err(why) => return eprintln!("skipped: {why}"),
    };
    let out = c
        .args([
            "-np",
            "4",
            BIN,
            "run",
            &graph("distributed/chain_ranks.toml"),
            "--plugin",
            "host",
            "--check",
        ])
        .output()
        .unwrap();
    assert_chain_summary(&ok(&out));
    let mut c = mpirun().unwrap();
    let out = c
        .args([
            "-np",
            "2",
            BIN,
            "run",
            &graph("cholesky_mapped.toml"),
            "--plugin",
            "host",
            "--check",
        ])
        .output()
        .unwrap();
    let text = ok(&out);
    assert!(
        text.contains(": 2 ranks, ") && text.contains("check ok (rank 0 = reference)"),
        "{text}"
    );
}

#[test]
fn mpirun_with_another_ranks_count_is_refused_naming_both() {
    let mut c = match mpirun() {
        Ok(c) => c,
        Err(why) => return eprintln!("skipped: {why}"),
    };
    let file = graph("distributed/chain_ranks.toml");
    let out = c
        .args([
            "-np", "2", BIN, "run", &file, "--plugin", "host", "--ranks", "4",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "error: --ranks 4 asks for 4 ranks, but mpirun started this job with 2 (OMPI_COMM_WORLD_SIZE=2)"
        ),
        "{err}"
    );
    // Nothing ran: no rank's summary.
    assert!(!String::from_utf8_lossy(&out.stdout).contains("rank 0:"));
    // The job's own count is accepted: the job's two processes run one rank each and
    // rank 0 prints the run's summary once (two processes running threads would print
    // two).
    let mut c = mpirun().unwrap();
    let out = c
        .args(["-np", "2", BIN, "run", &graph("cholesky_mapped.toml")])
        .args(["--plugin", "host", "--ranks", "2", "--check"])
        .output()
        .unwrap();
    let text = ok(&out);
    assert_eq!(text.matches(": 2 ranks, ").count(), 1, "{text}");
    assert!(text.contains("check ok (rank 0 = reference)"), "{text}");
}

#[test]
fn mpirun_a_failing_rank_ends_the_job_naming_rank_and_op() {
    let mut c = match mpirun() {
        Ok(c) => c,
        Err(why) => return eprintln!("skipped: {why}"),
    };
    // potrf of a matrix that is not positive definite fails on rank 1 mid-run; rank 0
    // waits for its data and must end too (the progress timeout is an hour).
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fails.toml");
    std::fs::write(&file, FAILS).unwrap();
    let out = c
        .env("OFFLOAD_SCHED_PROGRESS_TIMEOUT", "3600")
        .args(["-np", "2", BIN, "run"])
        .arg(&file)
        .args(["--plugin", "host"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("rank 1: ") && err.contains("\"boom\""),
        "{err}"
    );
}

const FAILS: &str = r#"name = "fails"
[[buffer]]
name = "x"
type = "f64"
len = 4
rank = 0

[[buffer]]
name = "y"
type = "f64"
len = 4
init = { fill = -1.0 }
rank = 1

[[body]]
target = "boom"
kernel = "potrf"
args = ["L", 2, "y", 2]
map = ["tofrom: y"]

[[body]]
target = "use_y"
kernel = "saxpy"
args = [2.0, "y", "x"]
map = ["to: y", "tofrom: x"]
"#;

#[test]
fn every_rank_is_lowered_with_the_run_options() {
    // Under a 400-byte cap one process evicts and passes its check; every rank must be
    // lowered under the same cap (the host plugin enforces it on each), not uncapped.
    let out = Command::new(BIN)
        .args(["run", &graph("cholesky_mapped.toml"), "--plugin", "host"])
        .args(["--check", "--device-memory", "400", "--ranks", "2"])
        .output()
        .unwrap();
    let text = ok(&out);
    assert!(text.contains("check ok"), "{text}");
    // Rank 0 owns every buffer of this file and evicts what one process evicts.
    assert!(text.contains("evicted 512 B"), "{text}");
}

#[test]
fn check_on_the_null_plugin_is_refused_before_any_rank_runs() {
    let out = Command::new(BIN)
        .args([
            "run",
            &graph("distributed/chain_ranks.toml"),
            "--plugin",
            "null",
        ])
        .args(["--check", "--ranks", "4"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("error: --check needs a plugin that computes (host or cuda); the null plugin does no work"),
        "{err}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).is_empty());
}
