//! `offload-sched bench taskbench --ranks`: Task Bench's graph distributed over MPI ranks
//! (each rank a process under `mpirun`, `taskbench-rank`), one sweep per rank count, and
//! the MPI target's line. Skipped with a message where the CLI lacks the `mpi` feature or
//! there is no `mpirun` (scripts/setup.sh installs it).
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_offload-sched"))
}

/// Why the MPI test cannot run here, if it cannot.
fn no_mpi() -> Option<String> {
    if !cfg!(feature = "mpi") {
        return Some("offload-sched built without the `mpi` feature".into());
    }
    if Command::new("mpirun").arg("--version").output().is_err() {
        return Some("no mpirun (scripts/setup.sh installs Debian's openmpi-bin)".into());
    }
    None
}

const SMALL: [&str; 14] = [
    "bench",
    "taskbench",
    "--plugin",
    "host",
    "--no-peers",
    "--steps",
    "6",
    "--width",
    "4",
    "--top-log2",
    "2",
    "--points",
    "3",
    "--max-reps=1",
];

#[test]
fn taskbench_ranks_sweeps_the_graph_on_one_and_two_ranks() {
    if let Some(why) = no_mpi() {
        return eprintln!("skipped: {why}");
    }
    let o = bin().args(SMALL).args(["--ranks", "1,2"]).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for ranks in ["1 rank ×", "2 ranks ×"] {
        // One row per count of the sweep (4, 2, 1 iterations), each with its figures.
        let rows: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with(&format!("| offload-sched minimal, {ranks}")))
            .filter(|l| l.split('|').nth(2).is_some_and(|c| !c.trim().is_empty()))
            .collect();
        let counts: Vec<&str> = rows
            .iter()
            .filter_map(|l| l.split('|').nth(2).map(str::trim))
            .filter(|c| c.parse::<u64>().is_ok())
            .collect();
        assert_eq!(counts, ["4", "2", "1"], "{ranks}: {text}");
    }
    assert!(
        text.contains("- MPI, stencil_1d: METG on 2 ranks ≤ 1.5× METG on 1 rank: "),
        "{text}"
    );
}

#[test]
fn taskbench_ranks_refuses_what_a_distributed_graph_cannot_hold() {
    for (extra, want) in [
        (
            "--entered",
            "--ranks runs the graph's target regions with per-task maps",
        ),
        (
            "--host-tasks",
            "--ranks runs the graph's target regions with per-task maps",
        ),
    ] {
        let o = bin()
            .args(SMALL)
            .args(["--ranks", "2", extra])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{extra}: {err}");
        assert!(err.contains(want), "{extra}: {err}");
    }
    let o = bin()
        .args(SMALL)
        .args(["--ranks", "1,2,1"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--ranks names 1 ranks twice"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = bin().args(SMALL).args(["--ranks", "0"]).output().unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--ranks"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
