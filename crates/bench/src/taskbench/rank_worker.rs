//! One MPI rank of `bench taskbench --ranks` (the hidden `taskbench-rank` command that
//! `ranks.rs` starts under `mpirun`): the Task Bench graph at every count of the sweep,
//! its points owned in blocks by the job's ranks ([`super::ranks::distribution`]), each
//! count compiled once and run `warmup + reps` times in one session
//! ([`offload_sched::distribute::DistPlan::rank_session`]); rank 0 validates the last
//! run's fields (gathered to it by the distributed plan's end) and prints one line per count
//! ([`super::ranks::RESULT_PREFIX`]).
//!
//! **What is timed**, as `linalg-rank` (`crate::linalg`'s rank worker): per run, every
//! rank's pipeline span (first op issued → final host wait) on the host's wall clock;
//! the run's span is the latest end minus the earliest start over all ranks, so it covers
//! every task, send and receive, and the gather of the fields on rank 0 (which Task
//! Bench's MPI implementation does not do).

use super::ours::{validate, with_iterations};
use super::ranks::{distribution, RESULT_PREFIX};
use super::{params_of, KernelKind};
use crate::linalg::rank_worker::{dump, meet, now_us, with_mpi};
use offload_sched::distribute::mpi::MpiTransport;
use offload_sched::distribute::{DistPlan, Transport};
use offload_sched::model::{taskbench_program, TaskBenchPattern, TaskBenchSpec};
use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
use offload_sched::plugin::{open, OpenOptions};
use offload_sched::schedule::{ScheduleOptions, SyncPolicy};
use std::fmt::Write as _;
use std::sync::Arc;

/// Arguments of one rank (set by `ranks.rs`, not meant to be typed).
#[derive(clap::Args, Clone, Debug)]
pub struct TaskbenchRankArgs {
    /// Task Bench pattern (`stencil_1d`, …).
    #[arg(long)]
    pub pattern: String,
    #[arg(long)]
    pub width: usize,
    #[arg(long)]
    pub steps: u32,
    #[arg(long)]
    pub radix: usize,
    #[arg(long)]
    pub output_bytes: u64,
    #[arg(long, value_enum)]
    pub kernel: KernelKind,
    #[arg(long)]
    pub scratch_bytes: u64,
    /// Streams of this rank's device.
    #[arg(long)]
    pub streams: u32,
    /// The sweep: `iterations:reps` pairs, comma-separated, largest first.
    #[arg(long, value_delimiter = ',')]
    pub counts: Vec<String>,
    /// Untimed runs per count first.
    #[arg(long, default_value_t = 1)]
    pub warmup: u32,
    /// Write each rank's op times of the last run of the last count to
    /// `DIR/rank{R}.tsv`, as `linalg-rank --dump`, to see where a rank waits.
    #[arg(long)]
    pub dump: Option<std::path::PathBuf>,
}

/// The `(iterations, reps)` pairs of `--counts`.
///
/// Errors: a pair that is not `u64:u32`.
fn counts(a: &TaskbenchRankArgs) -> Result<Vec<(u64, u32)>, String> {
    a.counts
        .iter()
        .map(|c| {
            let (i, r) = c
                .split_once(':')
                .ok_or_else(|| format!("--counts {c:?}: expected iterations:reps"))?;
            Ok((
                i.parse().map_err(|e| format!("--counts {c:?}: {e}"))?,
                r.parse().map_err(|e| format!("--counts {c:?}: {e}"))?,
            ))
        })
        .collect()
}

/// Runs this process's rank; rank 0 returns the result lines, the others an empty
/// string.
///
/// Errors: MPI failing to start, a graph Task Bench refuses, a plan that does not
/// compile or verify, a failed run (this rank's or, through the abort, another's), wrong
/// outputs on rank 0; the message names the rank and the count.
pub fn run(a: &TaskbenchRankArgs) -> Result<String, String> {
    with_mpi("taskbench-rank", |t| run_rank(a, t))
}

fn run_rank(a: &TaskbenchRankArgs, t: &Arc<MpiTransport>) -> Result<String, String> {
    let (rank, ranks) = (t.rank(), t.ranks());
    let pattern: TaskBenchPattern = a.pattern.parse().map_err(|e| format!("--pattern: {e}"))?;
    let graph = params_of(
        pattern,
        a.width,
        a.steps,
        a.radix,
        a.output_bytes,
        (a.kernel, a.scratch_bytes),
    );
    let plan = counts(a)?;
    // Host tasks run the distribution's send and receive tasks, on the distributed plan's
    // lanes (sends and receives apart: `DistPlan::compile_rank`), as linalg-rank.
    let options = ScheduleOptions {
        policy: SyncPolicy::Minimal,
        streams_per_device: a.streams,
        random_streams: None,
        host_lanes: 1,
    };
    // A rank with one stream (a core of its own) runs on its calling thread alone: its
    // streams inline in the host plugin, its host ops (sends, receives) on the issuing
    // thread (`RankSession::with_inline`), as Task Bench's MPI ranks run.
    let inline = a.streams == 1;
    let plugin: Box<dyn offload_sched::plugin::Plugin> = match inline {
        true => Box::new(HostPlugin::new(HostPluginOptions {
            inline_streams: true,
            ..HostPluginOptions::default()
        })),
        false => {
            open("host", &OpenOptions::default())
                .map_err(|e| e.to_string())?
                .plugin
        }
    };
    let dyn_t: Arc<dyn Transport> = t.clone();
    let mut out = String::new();
    // Every count's plan has the same transfers (only the kernels' iterations differ),
    // so the meetings' envelopes start past the first plan's and go up by one a run.
    let (mut first, mut seq): (Option<u64>, u64) = (None, 0);
    for &(iterations, reps) in &plan {
        let spec =
            TaskBenchSpec::new(with_iterations(&graph, iterations)).map_err(|e| e.to_string())?;
        let at = format!("{} at {iterations} iterations", spec.name());
        let program = taskbench_program(&spec).map_err(|e| format!("{at}: {e}"))?;
        let dist = distribution(&spec, &program, ranks).map_err(|e| format!("{at}: {e}"))?;
        let dp = DistPlan::new(&program, &dist, &options).map_err(|e| format!("{at}: {e}"))?;
        let top = dp.split.envelopes_end();
        match first {
            None => {
                let runs: u64 = plan.iter().map(|&(_, r)| u64::from(a.warmup + r)).sum();
                t.reserve(top + runs + 1);
                (first, seq) = (Some(top), top);
            }
            Some(b) if top > b => {
                return Err(format!(
                    "{at}: {top} envelopes, more than the first count's {b}"
                ))
            }
            Some(_) => {}
        }
        // One session per count: its runs reuse the plugin's streams, events and host
        // memory (as the one-process rows' sessions do).
        let mut session = dp
            .rank_session(dyn_t.clone(), plugin.as_ref())
            .map_err(|e| format!("{at}: {e}"))?
            .with_inline(inline);
        let g = dp.plans[rank as usize].graph();
        let mut us = Vec::new();
        let mut last = None;
        for k in 0..a.warmup + reps {
            let started = now_us();
            let report = session.run().map_err(|e| format!("{at}: run {k}: {e}"))?;
            let first = report
                .ops
                .iter()
                .map(|o| o.issue_us)
                .fold(f64::INFINITY, f64::min);
            let ends = (started + first, started + first + report.pipeline_us(g));
            let span = meet(t.as_ref(), seq, ends)?;
            seq += 1;
            if k >= a.warmup {
                us.push(span);
            }
            last = Some(report);
        }
        if let (Some(dir), Some(report)) = (&a.dump, &last) {
            dump(dir, rank, &dp.plans[rank as usize], report)?;
        }
        if rank == 0 {
            validate(&spec, &dp.plans[0], session.session()).map_err(|e| format!("{at}: {e}"))?;
            let _ = writeln!(
                out,
                "{RESULT_PREFIX} iterations={iterations} transfers={} us={}",
                dp.split.transfers.len(),
                us.iter()
                    .map(|s| format!("{s:.1}"))
                    .collect::<Vec<_>>()
                    .join(",")
            );
        }
    }
    Ok(out)
}
