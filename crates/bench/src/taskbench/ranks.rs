//! `bench taskbench --ranks 1,2` (issue 30's MPI target: METG on 2 ranks ≤ 1.5× that on
//! one): the same Task Bench graph distributed over MPI ranks, one sweep per rank count.
//!
//! **Distribution.** Task Bench's MPI implementation gives each rank a block of points
//! (`mpi/main.cc`: point `p` on rank `p · ranks / width`); here every field's section of
//! point `p` (its output) and its scratch buffer are owned the same way
//! ([`distribution`]), so task `(t, p)` runs on point `p`'s rank (owner computes, the
//! output it writes) and each input from a point of another rank becomes a send on that
//! rank and a receive on this one ([`offload_sched::distribute`]).
//!
//! **How the ranks run.** As `bench linalg --ranks` (`crate::linalg`'s `ranks.rs`): every
//! rank is a process of this binary's hidden `taskbench-rank` command under `mpirun
//! --oversubscribe --bind-to none -np R` (OpenMPI, `self,vader`), the host plugin with
//! `cores / R` streams (at least 1) and two host lanes per rank (sends; receives), one
//! MPI progress thread per process. A rank with one stream (a core of its own: 2 ranks
//! on the 2-core machine) runs on one thread, as Task Bench's MPI ranks do: the plugin's
//! streams inline, its sends and receives on the issuing thread, each receive when first
//! needed (`RankSession::with_inline`); the 1-rank row keeps its 2 streams and lanes. Each count of the sweep is compiled once per rank and
//! run `--warmup` times, then its reps, in one session; a run's time is its span over all
//! ranks (`rank_worker.rs`),
//! rank 0 validates the last run's fields. Granularity counts the machine's cores at
//! every rank count, so the rows compare the same machine split into ranks.

use super::metg::SweepRun;
use super::ours::{with_iterations, work};
use super::report::{at_most, PatternFigures};
use super::{Sweep, TaskbenchArgs};
use crate::linalg::ranks::{output, rank_job};
use offload_sched::distribute::Distribution;
use offload_sched::model::taskbench::field_name;
use offload_sched::model::{Program, Section, TaskBenchParams, TaskBenchSpec};

/// What rank 0 of a `taskbench-rank` job prints before each count's figures.
pub const RESULT_PREFIX: &str = "taskbench-rank result:";

/// The rank of point `p` of a graph `width` wide over `ranks` ranks: `p · ranks /
/// width` (Task Bench MPI's blocks: consecutive points on one rank).
pub fn owner(p: usize, width: usize, ranks: u32) -> u32 {
    (p as u64 * u64::from(ranks) / width.max(1) as u64) as u32
}

/// The owners of `program` (the graph of `spec`) over `ranks` ranks: point `p`'s
/// section of every field and its scratch buffer on [`owner`]`(p)`.
///
/// Errors: a field or scratch buffer missing from `program`, or `ranks` out of range
/// (`Distribution::new`).
pub fn distribution(
    spec: &TaskBenchSpec,
    program: &Program,
    ranks: u32,
) -> Result<Distribution, String> {
    let mut d = Distribution::new(ranks).map_err(|e| e.to_string())?;
    let words = spec.output_bytes() / 8;
    let find = |name: &str| {
        program
            .buffer_id(name)
            .ok_or_else(|| format!("the graph has no buffer {name}"))
    };
    for f in 0..spec.fields() {
        let buf = find(&field_name(f))?;
        for p in 0..spec.width() {
            let s = Section::new(buf, p as u64 * words, words);
            d.own(s, owner(p, spec.width(), ranks))
                .map_err(|e| e.to_string())?;
        }
    }
    for p in 0..spec.width() {
        if let Some(buf) = program.buffer_id(&format!("scratch{p}")) {
            d.own_buffer(program, buf, owner(p, spec.width(), ranks))
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(d)
}

/// Streams per rank on `cores` cores: `cores / ranks`, at least 1.
pub fn streams_per_rank(cores: u32, ranks: u32) -> u32 {
    (cores / ranks.max(1)).max(1)
}

/// One count's line of rank 0: `(iterations, µs of each timed run)`.
///
/// Errors: a line without `iterations=` or `us=`, or a field that is not a number.
pub fn parse_results(out: &str) -> Result<Vec<(u64, Vec<f64>)>, String> {
    out.lines()
        .filter_map(|l| l.strip_prefix(RESULT_PREFIX))
        .map(|line| {
            let field = |k: &str| {
                line.split_whitespace()
                    .find_map(|w| w.strip_prefix(k)?.strip_prefix('='))
                    .ok_or_else(|| format!("no {k}= in {line:?}"))
            };
            let it = field("iterations")?
                .parse::<u64>()
                .map_err(|e| format!("iterations in {line:?}: {e}"))?;
            let us = field("us")?
                .split(',')
                .map(|v| v.parse::<f64>().map_err(|e| format!("us in {line:?}: {e}")))
                .collect::<Result<Vec<_>, _>>()?;
            Ok((it, us))
        })
        .collect()
}

/// The row name of the sweep on `ranks` ranks of `streams` streams each.
pub fn label(ranks: u32, streams: u32) -> String {
    let s = |n: u32, w: &str| format!("{n} {w}{}", if n == 1 { "" } else { "s" });
    format!(
        "offload-sched minimal, {} × {} (mpirun)",
        s(ranks, "rank"),
        s(streams, "stream")
    )
}

/// Refuses `--ranks` where it cannot run, before anything runs: with `--host-tasks` or
/// `--entered` (a distributed program has neither host tasks of its own nor data
/// constructs yet), or on a plugin other than the host's (`plugin`: the open plugin's
/// name).
pub(super) fn check(a: &TaskbenchArgs, plugin: &str) -> Result<(), String> {
    if a.host_tasks || a.entered {
        return Err("--ranks runs the graph's target regions with per-task maps: drop --host-tasks and --entered".into());
    }
    let mut seen = std::collections::BTreeSet::new();
    if let Some(r) = a.ranks.iter().find(|&&r| !seen.insert(r)) {
        return Err(format!("--ranks names {r} ranks twice"));
    }
    if plugin != "host" {
        return Err(format!(
            "--ranks runs every rank on the host plugin (the {plugin} plugin is open): pass --plugin host"
        ));
    }
    Ok(())
}

/// The sweeps of `--ranks` (module docs) of the graph `base` at the counts `plan`, one per
/// rank count, after [`check`]; a job that fails is its row's error, as a failing peer's.
pub(super) fn sweeps(
    a: &TaskbenchArgs,
    base: &TaskBenchParams,
    plan: &[(u64, u32)],
    cores: u32,
) -> Vec<Sweep> {
    a.ranks
        .iter()
        .map(|&r| {
            let streams = streams_per_rank(cores, r);
            let t0 = std::time::Instant::now();
            let rows = job(a, base, plan, r, streams);
            eprintln!(
                "taskbench {}: {} in {:.1} s",
                label(r, streams),
                if rows.is_ok() { "sweep" } else { "failed" },
                t0.elapsed().as_secs_f64()
            );
            Sweep {
                name: label(r, streams),
                ours: false,
                replayed: false,
                rows,
            }
        })
        .collect()
}

/// One `mpirun` job of `np` ranks over the whole sweep; its rows.
fn job(
    a: &TaskbenchArgs,
    base: &TaskBenchParams,
    plan: &[(u64, u32)],
    np: u32,
    streams: u32,
) -> Result<Vec<SweepRun>, String> {
    if !cfg!(feature = "mpi") {
        return Err(
            "not built with the `mpi` feature (offload-sched's CLI has it by default)".into(),
        );
    }
    let mut c = rank_job(np, "taskbench-rank")?;
    let counts: Vec<String> = plan.iter().map(|(i, r)| format!("{i}:{r}")).collect();
    c.args([
        "--pattern",
        base.pattern.name(),
        "--kernel",
        match a.kernel {
            super::KernelKind::Compute => "compute",
            super::KernelKind::Memory => "memory",
        },
        "--counts",
        &counts.join(","),
    ]);
    for (k, v) in [
        ("--width", base.width as u64),
        ("--steps", base.steps as u64),
        ("--radix", base.radix as u64),
        ("--output-bytes", base.output_bytes),
        ("--scratch-bytes", a.scratch_bytes),
        ("--streams", u64::from(streams)),
        ("--warmup", u64::from(a.warmup)),
    ] {
        c.args([k, &v.to_string()]);
    }
    let text = output(&mut c, &format!("offload-sched on {np} ranks"))?;
    let mut rows = Vec::new();
    for (iterations, us) in parse_results(&text)? {
        let spec =
            TaskBenchSpec::new(with_iterations(base, iterations)).map_err(|e| e.to_string())?;
        rows.extend(us.into_iter().map(|us| SweepRun {
            iterations,
            elapsed_s: us * 1e-6,
            tasks: spec.tasks(),
            work: work(&spec),
        }));
    }
    if rows.is_empty() {
        return Err(format!(
            "the {np}-rank job printed no {RESULT_PREFIX:?} line"
        ));
    }
    Ok(rows)
}

/// The MPI target on `p` (stencil_1d): METG on 2 ranks ≤ 1.5× METG on 1 rank, both from
/// the `--ranks` rows of this call.
pub(super) fn target(p: &PatternFigures, cores: u32) -> String {
    let what = "MPI, stencil_1d: METG on 2 ranks ≤ 1.5× METG on 1 rank";
    let metg = |r: u32| {
        let name = label(r, streams_per_rank(cores, r));
        p.systems
            .iter()
            .find(|s| s.name == name)
            .map(|s| (name, s.result.as_ref().map(|a| a.metg)))
    };
    match (metg(1), metg(2)) {
        (Some((n1, Ok(one))), Some((n2, Ok(two)))) => format!(
            "{what}: {n2} {two} against {n1} {one}: {}",
            match at_most(&two, 1.5, &one) {
                Some(true) => "met",
                Some(false) => "NOT met",
                None => "not decided by these figures",
            }
        ),
        (Some((_, Err(e))), _) | (_, Some((_, Err(e)))) => {
            format!("{what}: not judged (a sweep failed: {e})")
        }
        _ => format!("{what}: not judged (run with --ranks 1,2)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use offload_sched::model::{taskbench_program, TaskBenchKernel, TaskBenchPattern};

    #[test]
    fn points_are_owned_in_blocks_as_task_bench_mpi() {
        assert_eq!(
            (0..4).map(|p| owner(p, 4, 2)).collect::<Vec<_>>(),
            [0, 0, 1, 1]
        );
        assert_eq!(
            (0..5).map(|p| owner(p, 5, 2)).collect::<Vec<_>>(),
            [0, 0, 0, 1, 1]
        );
        assert_eq!(owner(3, 4, 1), 0);
        assert_eq!((streams_per_rank(2, 1), streams_per_rank(2, 2)), (2, 1));
        assert_eq!(streams_per_rank(2, 4), 1);
    }

    #[test]
    fn each_point_s_sections_belong_to_its_rank() {
        let spec = TaskBenchSpec::new(TaskBenchParams {
            pattern: TaskBenchPattern::Stencil1d,
            width: 4,
            steps: 3,
            output_bytes: 32,
            kernel: TaskBenchKernel::ComputeBound { iterations: 1 },
            ..TaskBenchParams::default()
        })
        .unwrap();
        let program = taskbench_program(&spec).unwrap();
        let d = distribution(&spec, &program, 2).unwrap();
        for f in 0..spec.fields() {
            let buf = program.buffer_id(&field_name(f)).unwrap();
            // 32 B = 4 i64 words per point.
            let owners: Vec<u32> = (0..16).map(|w| d.owner_at(buf, w)).collect();
            assert_eq!(owners, [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1]);
        }
    }

    /// The graphs of `--ranks` run distributed (ranks as threads, messages delayed at
    /// random, the host plugin's ops jittered) with the fields Task Bench expects on rank
    /// 0, and with transfers exactly where a point reads a point of another rank.
    #[test]
    fn distributed_task_bench_graphs_give_task_bench_s_outputs() {
        use offload_sched::distribute::{run_in_process, DistPlan};
        use offload_sched::model::taskbench::check_outputs;
        use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
        use offload_sched::plugin::Plugin;
        use offload_sched::schedule::ScheduleOptions;
        for (pattern, ranks, seed) in [
            (TaskBenchPattern::Stencil1d, 2, 1),
            (TaskBenchPattern::Stencil1d, 4, 2),
            (TaskBenchPattern::Fft, 2, 3),
            (TaskBenchPattern::NoComm, 2, 4),
        ] {
            let spec = TaskBenchSpec::new(TaskBenchParams {
                pattern,
                width: 4,
                steps: 4,
                kernel: TaskBenchKernel::ComputeBound { iterations: 2 },
                ..TaskBenchParams::default()
            })
            .unwrap();
            let program = taskbench_program(&spec).unwrap();
            let d = distribution(&spec, &program, ranks).unwrap();
            let opts = ScheduleOptions {
                streams_per_device: 1,
                host_lanes: 1,
                ..ScheduleOptions::default()
            };
            let plan = DistPlan::new(&program, &d, &opts).unwrap();
            // Inputs read from another rank's points, over every task of steps 1..
            let remote: usize = (1..spec.steps())
                .flat_map(|t| (0..spec.width()).map(move |p| (t, p)))
                .map(|(t, p)| {
                    offload_sched::model::taskbench::dependency_intervals(&spec, t, p)
                        .iter()
                        .filter(|&&(a, z)| {
                            (a..=z).any(|q| owner(q, 4, ranks) != owner(p, 4, ranks))
                        })
                        .count()
                })
                .sum();
            let between_tasks = plan
                .split
                .transfers
                .iter()
                .filter(|x| x.consumer != "end")
                .count();
            assert_eq!(
                remote > 0,
                between_tasks > 0,
                "{pattern:?}: {between_tasks}"
            );
            if pattern == TaskBenchPattern::NoComm {
                // No task reads another point: only the final gather to rank 0 moves data.
                assert_eq!(remote, 0);
            } else {
                assert!(remote > 0, "{pattern:?} over {ranks} ranks");
            }
            let plugin = move |r: u32| -> Box<dyn Plugin> {
                Box::new(HostPlugin::new(HostPluginOptions {
                    delay_jitter: Some(seed * 10 + u64::from(r)),
                    ..HostPluginOptions::default()
                }))
            };
            let out = run_in_process(
                &plan,
                &plugin,
                std::time::Duration::from_secs(60),
                Some((seed, 200)),
            )
            .unwrap_or_else(|e| panic!("{pattern:?} over {ranks} ranks: {e}"));
            check_outputs(&spec, &out.ranks[0].report.buffers)
                .unwrap_or_else(|e| panic!("{pattern:?} over {ranks} ranks: {e}"));
            if pattern == TaskBenchPattern::NoComm {
                // Rank 1 never gets points 0 and 1: its fields fail the same check, so
                // rank 0's pass because the plan gathered the other ranks' points.
                assert!(check_outputs(&spec, &out.ranks[1].report.buffers).is_err());
            }
        }
    }

    #[test]
    fn rank_zero_s_lines_are_read_back() {
        let out = "noise\ntaskbench-rank result: iterations=64 transfers=396 us=10.5,11.0\n\
                   taskbench-rank result: iterations=32 transfers=396 us=7\n";
        assert_eq!(
            parse_results(out).unwrap(),
            [(64, vec![10.5, 11.0]), (32, vec![7.0])]
        );
        assert!(parse_results("taskbench-rank result: iterations=x us=1")
            .unwrap_err()
            .contains("iterations"));
        assert!(parse_results("taskbench-rank result: iterations=1")
            .unwrap_err()
            .contains("no us="));
        assert_eq!(
            label(2, 1),
            "offload-sched minimal, 2 ranks × 1 stream (mpirun)"
        );
    }
}
