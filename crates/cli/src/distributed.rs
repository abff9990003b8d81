//! `run FILE --ranks N` (every rank a thread of this process) and, in a build with the
//! `mpi` feature, `mpirun -np N offload-sched run FILE` (ranks from the MPI environment):
//! the program split over ranks (`offload_sched::distribute`), verified over all ranks,
//! run, and summed up per rank and for the whole run.

use super::{fail, make_plugin, prepare, Failure, RunArgs};
use offload_sched::distribute::{
    file::distribution_from_source, run_in_process, DistPlan, Distribution, RankRun,
};
use offload_sched::exec::Report;
use offload_sched::lower::BytesMoved;
use offload_sched::model::human_bytes;
use offload_sched::{reference, timeline, Plan};
use serde_json::Value;
use std::time::Duration;

/// The rank count of the MPI job this process is part of, if it was started by mpirun
/// (OpenMPI's `OMPI_COMM_WORLD_SIZE`, or PMI's `PMI_SIZE`), with the variable it came
/// from.
pub fn mpi_job_size() -> Option<(u32, &'static str)> {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"]
        .iter()
        .find_map(|k| Some((std::env::var(k).ok()?.parse().ok()?, *k)))
}

/// How `run` runs a program, from `--ranks` and the MPI job it may be part of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunRanks {
    /// One process, not distributed.
    One,
    /// `--ranks N` outside mpirun: every rank a thread of this process.
    Threads(u32),
    /// Under mpirun: this process runs its rank of the job.
    Mpi,
}

/// Decides [`RunRanks`] from `--ranks` (`asked`), the job size mpirun gave and the
/// variable it was read from (`job`, [`mpi_job_size`]) and whether this build has the
/// `mpi` feature.
///
/// Under mpirun the ranks are the job's: `--ranks` may be left out or repeat the job's
/// count; another count is refused naming both (each of the job's processes would
/// otherwise run its own split, and the run would not be over the ranks asked for).
///
/// Errors: `--ranks N` under a job of another size; a job of several ranks in a build
/// without the `mpi` feature.
pub fn run_ranks(
    asked: Option<u32>,
    job: Option<(u32, &str)>,
    mpi_built: bool,
) -> Result<RunRanks, String> {
    match (asked, job) {
        (None, None) => Ok(RunRanks::One),
        (Some(n), None) => Ok(RunRanks::Threads(n)),
        (Some(n), Some((j, var))) if n != j => Err(format!(
            "error: --ranks {n} asks for {n} rank{}, but mpirun started this job with {j} \
             ({var}={j}); under mpirun the ranks are the job's: leave out --ranks, or start \
             the job with mpirun -np {n}",
            if n == 1 { "" } else { "s" }
        )),
        (_, Some(_)) if mpi_built => Ok(RunRanks::Mpi),
        (_, Some((j, _))) if j > 1 => Err(
            "error: started by mpirun with several ranks, but this offload-sched is \
             built without the `mpi` feature (cargo build --features mpi)"
                .into(),
        ),
        // One MPI process without the feature: the one-process run it always was.
        (None, Some(_)) => Ok(RunRanks::One),
        (Some(n), Some(_)) => Ok(RunRanks::Threads(n)),
    }
}

/// The distributed plan of `args.file` over `ranks` ranks: the file's `rank = N` keys,
/// defaults elsewhere.
fn dist_plan(args: &RunArgs, ranks: u32) -> Result<(Plan, DistPlan), Failure> {
    let plan = prepare(&args.file, &args.sched)?;
    let dist = match plan.source() {
        Some(src) => {
            distribution_from_source(src, plan.program(), ranks).map_err(|e| fail(e.render()))?
        }
        None => Distribution::new(ranks).map_err(|e| fail(format!("error: {e}")))?,
    };
    let name = plan.name().to_string();
    // Every rank lowered as the one-process run would be: --no-elide, --device-memory,
    // --eviction and --prefetch hold per rank (the host plugin enforces the cap on each).
    let d = DistPlan::new_lowered(
        plan.program(),
        &dist,
        &args.sched.options(),
        plan.lower_options(),
    )
    .map_err(|e| {
        // A construct the split refuses is located in the file it was read from.
        use offload_sched::distribute::DistError;
        let span = match &e {
            DistError::Unsupported { span, .. } | DistError::DataDevice { span, .. } => *span,
            _ => None,
        };
        match (span, plan.source()) {
            (Some(span), Some(src)) => fail(
                offload_sched::file::FileError::at(
                    offload_sched::file::ErrorKind::Lower,
                    &src.path,
                    &src.text,
                    Some(span),
                    e.to_string(),
                )
                .render(),
            ),
            _ => fail(format!("{name}: error: {e}")),
        }
    })?;
    Ok((plan, d))
}

/// `1 region`, `3 regions`: a count and its noun, as the one-process summary writes them.
fn count(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// The sum of every rank's [`BytesMoved`] (each rank's copies between its host and
/// device; bytes between ranks are the transfers, counted apart).
fn moved_total(d: &DistPlan) -> BytesMoved {
    d.plans
        .iter()
        .map(|p| p.graph().bytes_moved())
        .fold(BytesMoved::default(), |a, m| BytesMoved {
            h2d: a.h2d + m.h2d,
            d2h: a.d2h + m.d2h,
            peer: a.peer + m.peer,
            elided_h2d: a.elided_h2d + m.elided_h2d,
            d2h_dropped: a.d2h_dropped + m.d2h_dropped,
            d2h_deferred: a.d2h_deferred + m.d2h_deferred,
            evicted: a.evicted + m.evicted,
            prefetched: a.prefetched + m.prefetched,
        })
}

/// One rank's summary: `rank 1: 1 region, 11 ops, 2 sends (32 KiB), 0 receives (0 B),
/// wall 1.234 ms`, then `rank 1 moved: H2D …` (its graph's [`BytesMoved`], the line of
/// the one-process summary). Sizes in [`human_bytes`] units.
fn rank_line(d: &DistPlan, rank: u32, report: &Report) -> String {
    let (mut sends, mut recvs, mut sent, mut received) = (0, 0, 0, 0);
    for t in &d.split.transfers {
        if t.envelope.from == rank {
            sends += 1;
            sent += t.bytes;
        }
        if t.envelope.to == rank {
            recvs += 1;
            received += t.bytes;
        }
    }
    let regions = d.split.placement.iter().filter(|p| p.1 == rank).count();
    let g = d.plans[rank as usize].graph();
    format!(
        "rank {rank}: {}, {}, {} ({}), {} ({}), wall {:.3} ms\nrank {rank} moved: {}\n",
        count(regions, "region"),
        count(g.ops.len(), "op"),
        count(sends, "send"),
        human_bytes(sent),
        count(recvs, "receive"),
        human_bytes(received),
        report.wall_us / 1e3,
        g.bytes_moved()
    )
}

/// The whole run's summary: `chain_ranks: 4 ranks, 5 transfers, 80 KiB between ranks,
/// wall 3.210 ms`, then `moved: H2D …` summed over the ranks.
fn total_line(d: &DistPlan, name: &str, wall_us: f64, checked: bool) -> String {
    let bytes: u64 = d.split.transfers.iter().map(|t| t.bytes).sum();
    format!(
        "{name}: {}, {}, {} between ranks, wall {:.3} ms{}\nmoved: {} (all ranks)\n",
        count(d.ranks() as usize, "rank"),
        count(d.split.transfers.len(), "transfer"),
        human_bytes(bytes),
        wall_us / 1e3,
        if checked {
            ", check ok (rank 0 = reference)"
        } else {
            ""
        },
        moved_total(d)
    )
}

/// Rank `rank`'s trace events, in the track group (`pid`) `rank + 1` named `rank R`.
fn rank_trace(d: &DistPlan, rank: u32, report: &Report) -> Vec<Value> {
    let p = &d.plans[rank as usize];
    let trace = timeline::trace::chrome_trace(report, p.graph(), p.schedule());
    let mut events = match trace.get("traceEvents") {
        Some(Value::Array(v)) => v.clone(),
        _ => Vec::new(),
    };
    for e in &mut events {
        if let Some(o) = e.as_object_mut() {
            o.insert("pid".into(), Value::from(rank + 1));
            if o.get("name").and_then(Value::as_str) == Some("process_name") {
                if let Some(Value::Object(a)) = o.get_mut("args") {
                    let was = a
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    a.insert("name".into(), Value::from(format!("rank {rank}: {was}")));
                }
            }
        }
    }
    events
}

fn write_trace(args: &RunArgs, events: Vec<Value>) -> Result<(), Failure> {
    let Some(path) = &args.trace else {
        return Ok(());
    };
    let v = serde_json::json!({"traceEvents": events, "displayTimeUnit": "ns"});
    offload_sched::file::write_atomic(path, v.to_string().as_bytes())
        .map_err(|e| fail(format!("error: cannot write trace {}: {e}", path.display())))
}

/// Checks rank 0's buffers (the run's result) against the one-process reference.
/// `--check` on a plugin that does no work (null) is refused before anything runs, as
/// in one process.
fn refuse_check_without_compute(
    args: &RunArgs,
    plugin: &dyn offload_sched::plugin::Plugin,
) -> Result<(), Failure> {
    let info = plugin.info();
    if args.check && !info.computes {
        return Err(fail(format!(
            "error: --check needs a plugin that computes (host or cuda); the {} plugin \
             does no work",
            info.name
        )));
    }
    Ok(())
}

fn check(args: &RunArgs, plan: &Plan, result: &Report) -> Result<(), Failure> {
    let want = plan.reference().map_err(|e| fail(e.render()))?;
    let tol = args.rel_tol.unwrap_or(reference::check::REL_TOL);
    reference::check_tol(&result.buffers, &want, tol)
        .map_err(|e| fail(format!("{}: check FAILED: {e}", plan.name())))
}

/// `run FILE --ranks N`: every rank a thread of this process.
pub fn run_threads(args: &RunArgs, ranks: u32) -> Result<String, Failure> {
    refuse_one_process_options(args)?;
    let (plan, d) = dist_plan(args, ranks)?;
    let devices = plan.graph().devices;
    let dir = plan.kernel_dir().map(std::path::Path::to_path_buf);
    let make = |r: u32| {
        make_plugin(
            &args.plugin,
            devices,
            args.delay_jitter.map(|s| s + r as u64),
            dir.clone(),
            args.trace.is_some(),
            args.sched.device_memory,
        )
    };
    // Plugins are made before the threads start, so a bad --plugin fails first.
    let plugins: Vec<_> = (0..ranks).map(make).collect::<Result<_, _>>()?;
    if let Some(p) = plugins.first() {
        refuse_check_without_compute(args, p.as_ref())?;
    }
    let plugins: Vec<std::sync::Mutex<Option<Box<dyn offload_sched::plugin::Plugin>>>> = plugins
        .into_iter()
        .map(|p| std::sync::Mutex::new(Some(p)))
        .collect();
    let take = |r: u32| -> Box<dyn offload_sched::plugin::Plugin> {
        plugins[r as usize]
            .lock()
            .unwrap()
            .take()
            .expect("one plugin per rank")
    };
    let jitter = args.delay_jitter.map(|s| (s, 200));
    let run = run_in_process(&d, &take, timeout(), jitter)
        .map_err(|e| fail(format!("{}: error: {e}", plan.name())))?;
    if args.check {
        check(args, &plan, &run.ranks[0].report)?;
    }
    let mut out = String::new();
    let mut events = Vec::new();
    for RankRun { rank, report } in &run.ranks {
        out.push_str(&rank_line(&d, *rank, report));
        events.extend(rank_trace(&d, *rank, report));
    }
    write_trace(args, events)?;
    out.push_str(&total_line(&d, plan.name(), run.wall_us, args.check));
    Ok(out)
}

/// The progress timeout of a receive: `OFFLOAD_SCHED_PROGRESS_TIMEOUT` seconds, default
/// 120.
fn timeout() -> Duration {
    let secs = std::env::var("OFFLOAD_SCHED_PROGRESS_TIMEOUT")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .unwrap_or(120.0);
    Duration::from_secs_f64(secs)
}

/// Refuses the `run` options a distributed run does not take, rather than ignoring them:
/// `--repeat` (a distributed run runs once), `--compare-host`, `--issue` other than
/// `auto` (each rank issues serially with its host lanes) and `--spin-scale`.
fn refuse_one_process_options(args: &RunArgs) -> Result<(), Failure> {
    let given = [
        (args.repeat != 1, "--repeat"),
        (args.compare_host, "--compare-host"),
        (args.issue != crate::IssueArg::Auto, "--issue"),
        (args.spin_scale.is_some(), "--spin-scale"),
    ];
    match given.iter().find(|(on, _)| *on) {
        Some((_, name)) => Err(fail(format!(
            "error: {name} is not supported with --ranks or under mpirun (a distributed run \
             runs once, each rank issuing its own schedule): leave it out, or run the \
             program in one process"
        ))),
        None => Ok(()),
    }
}

/// `mpirun -np N offload-sched run FILE`: this process runs its rank; rank 0 gathers the
/// other ranks' summaries (and traces) and prints the whole run's.
#[cfg(feature = "mpi")]
pub fn run_mpi(args: &RunArgs) -> Result<String, Failure> {
    use offload_sched::distribute::mpi::MpiTransport;
    use offload_sched::distribute::{Envelope, Transport};
    use std::sync::Arc;
    refuse_one_process_options(args)?;
    let t = Arc::new(MpiTransport::start(timeout()).map_err(|e| fail(format!("error: {e}")))?);
    let (rank, ranks) = (t.rank(), t.ranks());
    let bail = |t: &MpiTransport, f: Failure| -> Failure {
        t.abort(&f.0);
        // One write: stderr is unbuffered, and `eprintln!` writes each piece of the
        // format on its own, so two ranks' lines interleaved ("rank rank 0: …").
        use std::io::Write as _;
        let line = format!("rank {rank}: {}\n", f.0.trim_end());
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
        std::process::exit(1);
    };
    let (plan, d) = dist_plan(args, ranks).map_err(|f| bail(&t, f))?;
    // Each rank's summary (and trace) goes to rank 0 after its last transfer to rank 0.
    let next = |from: u32| summary_seq(&d.split.transfers, from);
    t.reserve(tag_space(&d.split.transfers, ranks));
    let plugin = make_plugin(
        &args.plugin,
        plan.graph().devices,
        args.delay_jitter,
        plan.kernel_dir().map(std::path::Path::to_path_buf),
        args.trace.is_some(),
        args.sched.device_memory,
    )
    .map_err(|f| bail(&t, f))?;
    refuse_check_without_compute(args, plugin.as_ref()).map_err(|f| bail(&t, f))?;
    let start = std::time::Instant::now();
    let dyn_t: Arc<dyn Transport> = t.clone();
    let report = d
        .run_rank(dyn_t, plugin.as_ref())
        .map_err(|e| bail(&t, fail(format!("{}: error: {e}", plan.name()))))?;
    let line = rank_line(&d, rank, &report);
    let events = rank_trace(&d, rank, &report);
    let mut out = String::new();
    if rank == 0 {
        out.push_str(&line);
        let mut all = events;
        for r in 1..ranks {
            // The length (8 bytes), then the summary line, NUL, the trace events.
            let env = Envelope {
                from: r,
                to: 0,
                seq: next(r),
            };
            let err = |e| fail(format!("error: {e}"));
            let len = t
                .recv(env, 8, &|| false)
                .map_err(err)
                .map_err(|f| bail(&t, f))?;
            let len = u64::from_ne_bytes(len.try_into().expect("8 bytes checked"));
            let env = Envelope {
                seq: env.seq + 1,
                ..env
            };
            let msg = t
                .recv(env, len, &|| false)
                .map_err(err)
                .map_err(|f| bail(&t, f))?;
            let text = String::from_utf8_lossy(&msg).into_owned();
            let (l, tr) = text.split_once('\u{0}').unwrap_or((&text, "[]"));
            out.push_str(l);
            if let Ok(Value::Array(v)) = serde_json::from_str(tr) {
                all.extend(v);
            }
        }
        if args.check {
            check(args, &plan, &report).map_err(|f| bail(&t, f))?;
        }
        write_trace(args, all).map_err(|f| bail(&t, f))?;
        out.push_str(&total_line(
            &d,
            plan.name(),
            start.elapsed().as_secs_f64() * 1e6,
            args.check,
        ));
    } else {
        let payload = format!("{line}\u{0}{}", Value::Array(events)).into_bytes();
        let env = Envelope {
            from: rank,
            to: 0,
            seq: next(rank),
        };
        let len = (payload.len() as u64).to_ne_bytes().to_vec();
        let sent = t.send(env, len).and_then(|()| {
            t.send(
                Envelope {
                    seq: env.seq + 1,
                    ..env
                },
                payload,
            )
        });
        sent.map_err(|e| bail(&t, fail(format!("error: {e}"))))?;
    }
    t.finish();
    Ok(out)
}

/// The sequence number of rank `from`'s first summary message to rank 0 under mpirun:
/// the number of transfers from `from` to rank 0 (the pair's sequence numbers go on
/// after its transfers, [`offload_sched::distribute::Envelope`]).
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
fn summary_seq(transfers: &[offload_sched::distribute::Transfer], from: u32) -> u64 {
    transfers
        .iter()
        .filter(|x| x.envelope.from == from && x.envelope.to == 0)
        .count() as u64
}

/// The largest sequence number a run under mpirun sends on any pair of ranks: every
/// transfer's (over all pairs, not only those to rank 0), and each rank's two summary
/// messages to rank 0 after its transfers there. The MPI transport makes its tag space
/// (communicators of 32768 tags) from it before the first message.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
fn tag_space(transfers: &[offload_sched::distribute::Transfer], ranks: u32) -> u64 {
    let transfers_end = transfers.iter().map(|x| x.envelope.seq).max().unwrap_or(0);
    let summaries_end = (0..ranks)
        .map(|r| summary_seq(transfers, r) + 1)
        .max()
        .unwrap_or(1);
    transfers_end.max(summaries_end)
}

#[cfg(test)]
mod tests {
    use super::{run_ranks, summary_seq, tag_space, RunRanks};
    use offload_sched::distribute::{Envelope, Transfer};
    use offload_sched::model::{Buffer, BufferId, ElemType, Init, Section};

    fn transfers(pairs: &[(u32, u32, u64)]) -> Vec<Transfer> {
        let buffers = [Buffer {
            name: "x".into(),
            ty: ElemType::F32,
            len: 4,
            init: Init::Zeros,
        }];
        let mut seq = std::collections::BTreeMap::new();
        let mut out = Vec::new();
        for &(from, to, n) in pairs {
            for _ in 0..n {
                let s = seq.entry((from, to)).or_insert(0u64);
                let env = Envelope { from, to, seq: *s };
                *s += 1;
                out.push(Transfer::new(
                    env,
                    Section::new(BufferId(0), 0, 4),
                    &buffers,
                    "r",
                ));
            }
        }
        out
    }

    #[test]
    fn the_tag_space_covers_every_pair_not_only_those_to_rank_0() {
        // 40 000 messages from rank 1 to rank 2 (past one communicator's 32 768 tags),
        // 3 from rank 1 to rank 0: the summaries to rank 0 take seq 3 and 4.
        let t = transfers(&[(1, 2, 40_000), (1, 0, 3), (2, 0, 1)]);
        assert_eq!(summary_seq(&t, 1), 3);
        assert_eq!(summary_seq(&t, 2), 1);
        assert_eq!(summary_seq(&t, 0), 0);
        assert_eq!(tag_space(&t, 3), 39_999);
        // Few transfers: the summaries set it (rank 1's second summary is seq 4).
        let t = transfers(&[(1, 0, 3), (0, 1, 2)]);
        assert_eq!(tag_space(&t, 2), 4);
        assert_eq!(tag_space(&[], 2), 1);
    }

    #[test]
    fn ranks_under_mpirun_are_the_jobs_and_another_count_is_refused() {
        let job = Some((2, "OMPI_COMM_WORLD_SIZE"));
        assert_eq!(run_ranks(None, None, true), Ok(RunRanks::One));
        assert_eq!(run_ranks(Some(4), None, true), Ok(RunRanks::Threads(4)));
        assert_eq!(run_ranks(None, job, true), Ok(RunRanks::Mpi));
        assert_eq!(run_ranks(Some(2), job, true), Ok(RunRanks::Mpi));
        let e = run_ranks(Some(4), job, true).unwrap_err();
        assert_eq!(
            e,
            "error: --ranks 4 asks for 4 ranks, but mpirun started this job with 2 \
             (OMPI_COMM_WORLD_SIZE=2); under mpirun the ranks are the job's: leave out \
             --ranks, or start the job with mpirun -np 4"
        );
        assert!(run_ranks(Some(1), job, true)
            .unwrap_err()
            .contains("--ranks 1 asks for 1 rank, but mpirun started this job with 2"));
        // The count check comes first without the feature too.
        assert!(run_ranks(Some(4), job, false)
            .unwrap_err()
            .contains("--ranks 4 asks for 4 ranks"));
        assert!(run_ranks(None, job, false)
            .unwrap_err()
            .contains("built without the `mpi` feature"));
        let single = Some((1, "PMI_SIZE"));
        assert_eq!(run_ranks(None, single, false), Ok(RunRanks::One));
        assert_eq!(run_ranks(Some(1), single, false), Ok(RunRanks::Threads(1)));
        assert_eq!(run_ranks(Some(1), single, true), Ok(RunRanks::Mpi));
    }
}
