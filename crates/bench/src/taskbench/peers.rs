//! The peers `bench taskbench` runs beside offload-sched: Task Bench's own MPI, OpenMP and
//! StarPU implementations, built from `third_party/task-bench` by
//! `scripts/taskbench-peers.sh` into `target/task-bench/` (other processes).
//!
//! How each is started (after Task Bench's `experiments/cori_metg_compute/metg_*.sh`, on
//! one node of `cores` cores):
//! - **MPI** (`mpi/nonblock`, `mpi/bulk_synchronous`): `mpirun -np <cores>` (with
//!   `--oversubscribe --allow-run-as-root`, `--bind-to none`: the machine is shared), one
//!   rank per core, the graph's width split over the ranks by Task Bench itself;
//! - **OpenMP** (`openmp/main`): `OMP_NUM_THREADS=<cores>` and `-worker <cores>`;
//! - **StarPU** (`starpu/main`): one process under `mpirun -np 1`, `STARPU_NCPU=<cores>`,
//!   `STARPU_NCUDA=0`, `STARPU_NOPENCL=0`, and upstream's flags `-core <cores> -p 1 -S`
//!   (its `lws` scheduler, set in `main.cc`). Upstream reserves one more core for
//!   StarPU-MPI's thread (`STARPU_RESERVE_NCPU=1`); here all `cores` compute, as every
//!   other system.
//!
//! Every peer gets the same graph flags (`-steps -width -type -radix -kernel -iter
//! -output`, `-scratch` for the memory-bound kernel). Figures: Task Bench's own report
//! lines `Elapsed Time <s> seconds`, `Total Tasks`, `Total FLOPs`, `Total Bytes` (its
//! timer spans the graph's execution only, not start-up), parsed by [`parse_report`].
//! Task Bench validates every task's inputs itself (`core.cc` `execute_point`) and aborts
//! on a corrupted value, so a run that exits 0 is a validated run.

use super::metg::SweepRun;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where `scripts/taskbench-peers.sh` builds the peers, relative to the workspace root.
pub const DEFAULT_BUILD_DIR: &str = "target/task-bench";

/// A Task Bench implementation run beside offload-sched.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerKind {
    /// `mpi/nonblock`: MPI point-to-point, non-blocking sends and receives.
    Mpi,
    /// `mpi/bulk_synchronous`: MPI with a barrier-like exchange per timestep.
    MpiBulk,
    /// `openmp/main`: OpenMP tasks with `depend` clauses.
    Openmp,
    /// `starpu/main`: StarPU 1.3 with StarPU-MPI.
    Starpu,
}

impl PeerKind {
    /// The row name in the report (`Task Bench MPI`, …).
    pub fn label(self) -> &'static str {
        match self {
            PeerKind::Mpi => "Task Bench MPI (nonblock)",
            PeerKind::MpiBulk => "Task Bench MPI (bulk_synchronous)",
            PeerKind::Openmp => "Task Bench OpenMP",
            PeerKind::Starpu => "Task Bench StarPU",
        }
    }

    /// The binary, relative to the build folder.
    pub fn binary(self) -> &'static str {
        match self {
            PeerKind::Mpi => "mpi/nonblock",
            PeerKind::MpiBulk => "mpi/bulk_synchronous",
            PeerKind::Openmp => "openmp/main",
            PeerKind::Starpu => "starpu/main",
        }
    }

    /// The command that runs this peer's binary `bin` on `cores` cores with the graph
    /// flags `graph` (module docs).
    pub fn command(self, bin: &Path, cores: u32, graph: &[String]) -> Command {
        let n = cores.to_string();
        let mpirun = |np: &str| {
            let mut c = Command::new("mpirun");
            c.args([
                "--allow-run-as-root",
                "--oversubscribe",
                "--bind-to",
                "none",
            ]);
            c.args(["-np", np]).arg(bin);
            c
        };
        let mut c = match self {
            PeerKind::Mpi | PeerKind::MpiBulk => mpirun(&n),
            PeerKind::Openmp => {
                let mut c = Command::new(bin);
                c.env("OMP_NUM_THREADS", &n).args(["-worker", &n]);
                c
            }
            PeerKind::Starpu => {
                let mut c = mpirun("1");
                c.env("STARPU_NCPU", &n)
                    .env("STARPU_NCUDA", "0")
                    .env("STARPU_NOPENCL", "0")
                    .env("STARPU_SILENT", "1")
                    .args(["-core", &n, "-p", "1", "-S"]);
                c
            }
        };
        c.args(graph);
        c
    }
}

/// Task Bench's report of one run (`core.cc` `App::report_timing`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Report {
    /// `Elapsed Time <s> seconds`.
    pub elapsed_s: f64,
    /// `Total Tasks <n>`.
    pub tasks: u64,
    /// `Total FLOPs <n>`.
    pub flops: u64,
    /// `Total Bytes <n>`.
    pub bytes: u64,
}

/// Parses Task Bench's report lines from a run's standard output (the first of each; MPI
/// prints them on rank 0 only).
///
/// Errors: a line missing or its number unreadable, naming the line and quoting the end
/// of the output.
pub fn parse_report(out: &str) -> Result<Report, String> {
    let field = |prefix: &str| -> Result<&str, String> {
        out.lines()
            .find_map(|l| l.trim().strip_prefix(prefix))
            .map(|rest| rest.trim())
            .ok_or_else(|| format!("no `{prefix}` line in Task Bench's output: {:?}", tail(out)))
    };
    let int = |prefix: &str| -> Result<u64, String> {
        let v = field(prefix)?;
        v.parse()
            .map_err(|e| format!("`{prefix}{v}` in Task Bench's output: {e}"))
    };
    let elapsed = field("Elapsed Time ")?;
    let secs = elapsed
        .strip_suffix("seconds")
        .map(str::trim)
        .ok_or_else(|| format!("`Elapsed Time {elapsed}`: no `seconds`"))?;
    let elapsed_s: f64 = secs
        .parse()
        .map_err(|e| format!("`Elapsed Time {elapsed}`: {e}"))?;
    Ok(Report {
        elapsed_s,
        tasks: int("Total Tasks ")?,
        flops: int("Total FLOPs ")?,
        bytes: int("Total Bytes ")?,
    })
}

/// The last 400 characters of `s`.
fn tail(s: &str) -> &str {
    let start = s.len().saturating_sub(400);
    let start = (start..=s.len())
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(s.len());
    &s[start..]
}

/// The peer's binary under `build`, or why it cannot run (missing, with the script that
/// builds it).
pub fn find_binary(kind: PeerKind, build: &Path) -> Result<PathBuf, String> {
    let bin = build.join(kind.binary());
    if bin.is_file() {
        Ok(bin)
    } else {
        Err(format!(
            "missing: no {} (build the peers with `bash scripts/taskbench-peers.sh`)",
            bin.display()
        ))
    }
}

/// Runs `kind` once at `iterations` (the graph flags `graph` give `-iter` last, so it is
/// appended here) and returns its sweep row, `work` = FLOPs (`bytes == false`) or bytes.
///
/// Errors: the process cannot start, exits non-zero (Task Bench's validation aborts on a
/// wrong input), or its report cannot be read; the message names the command.
pub fn run_once(
    kind: PeerKind,
    bin: &Path,
    cores: u32,
    graph: &[String],
    iterations: u64,
    bytes: bool,
) -> Result<SweepRun, String> {
    let mut flags = graph.to_vec();
    flags.extend(["-iter".to_string(), iterations.to_string()]);
    let mut cmd = kind.command(bin, cores, &flags);
    let shown = format!("{cmd:?}");
    let out = cmd
        .output()
        .map_err(|e| format!("{}: cannot start {shown}: {e}", kind.label()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "{}: {shown} failed ({}): {:?}",
            kind.label(),
            out.status,
            tail(&format!("{stdout}{stderr}"))
        ));
    }
    let r = parse_report(&stdout).map_err(|e| format!("{}: {e}", kind.label()))?;
    Ok(SweepRun {
        iterations,
        elapsed_s: r.elapsed_s,
        tasks: r.tasks,
        work: if bytes { r.bytes } else { r.flops } as f64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUT: &str = "Running Task Benchmark\n  Configuration:\n    Task Graph 1:\n\
        Total Tasks 400\nTotal Dependencies 1196\n  Unable to estimate local/nonlocal \
        dependencies\nTotal FLOPs 26240000\nTotal Bytes 0\nElapsed Time 1.234500e-02 \
        seconds\nFLOP/s 2.125557e+09\n";

    #[test]
    fn parses_task_bench_s_report() {
        let r = parse_report(OUT).unwrap();
        assert_eq!(
            r,
            Report {
                elapsed_s: 1.2345e-2,
                tasks: 400,
                flops: 26_240_000,
                bytes: 0
            }
        );
    }

    #[test]
    fn a_missing_line_is_an_error_naming_it() {
        let e = parse_report("Total Tasks 4\n").unwrap_err();
        assert!(e.contains("`Elapsed Time `"), "{e}");
        let e = parse_report(&OUT.replace("400", "four")).unwrap_err();
        assert!(e.contains("Total Tasks four"), "{e}");
    }

    #[test]
    fn peers_are_started_as_task_bench_s_scripts_do() {
        let g = vec!["-steps".to_string(), "4".to_string()];
        let c = PeerKind::Mpi.command(Path::new("/b/mpi/nonblock"), 2, &g);
        let args: Vec<_> = c
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(c.get_program(), "mpirun");
        assert_eq!(
            args,
            [
                "--allow-run-as-root",
                "--oversubscribe",
                "--bind-to",
                "none",
                "-np",
                "2",
                "/b/mpi/nonblock",
                "-steps",
                "4"
            ]
        );
        let c = PeerKind::Starpu.command(Path::new("/b/starpu/main"), 2, &g);
        let envs: Vec<_> = c
            .get_envs()
            .map(|(k, v)| format!("{}={}", k.to_string_lossy(), v.unwrap().to_string_lossy()))
            .collect();
        assert!(envs.contains(&"STARPU_NCPU=2".to_string()), "{envs:?}");
        let args: Vec<_> = c
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(args.ends_with(&["-core", "2", "-p", "1", "-S", "-steps", "4"].map(String::from)));
        let c = PeerKind::Openmp.command(Path::new("/b/openmp/main"), 2, &g);
        assert_eq!(c.get_program(), "/b/openmp/main");
        let envs: Vec<_> = c
            .get_envs()
            .map(|(k, v)| format!("{}={}", k.to_string_lossy(), v.unwrap().to_string_lossy()))
            .collect();
        assert_eq!(envs, ["OMP_NUM_THREADS=2"]);
    }

    #[test]
    fn a_missing_binary_says_how_to_build_it() {
        let e = find_binary(PeerKind::Starpu, Path::new("/nonexistent")).unwrap_err();
        assert!(e.starts_with("missing: no /nonexistent/starpu/main"), "{e}");
        assert!(e.contains("scripts/taskbench-peers.sh"), "{e}");
    }
}
