//! One MPI rank of `bench linalg --ranks` (the hidden `linalg-rank` command that
//! `ranks.rs` starts under `mpirun`): the tiled Cholesky split over the job's ranks
//! (2-D block-cyclic over `Distribution::grid`, `ranks::rank_distribution`), run `warmup + reps` times; rank 0 prints the
//! timed spans and the residual of the last run on one line for the parent to read
//! ([`RESULT_PREFIX`], parsed by `ranks::parse_result`).
//!
//! **What is timed.** Per run, every rank's pipeline span (its first op issued → its
//! final host wait, [`offload_sched::exec::Report::pipeline_us`]'s ends) placed on the
//! host's wall clock (`SystemTime`, one clock for every process of this host); the run's
//! span is the latest end minus the earliest start over all ranks, so it covers the
//! factorization, every send and receive, and the final gather of the factor on rank 0
//! (which StarPU-MPI's `mpi_cholesky` does not time). Each rank's set-up (host buffers
//! of the full matrix, filled from the program's initial contents) is left out, as in
//! the one-process rows.
//!
//! **One session per rank** ([`DistPlan::rank_session`]), as the one-process rows and
//! `taskbench-rank` run: the runs reuse the plugin's streams, events and host memory,
//! and no rank copies its buffers out at the end of a run (a one-shot run's `End`
//! snapshot: the whole of `A`, 100 MiB at n 5120 in f32, on every rank and run, while
//! only rank 0's is read, after the last run; rank 0 now reads `A` in place for the
//! residual).
//!
//! **Between runs** the ranks meet: each sends rank 0 its span ends, rank 0 answers every
//! rank once it has them all, so no message of one run is still unread when the next
//! starts (the runs reuse the plan's envelopes). These messages use envelopes past the
//! plan's largest `seq` ([`offload_sched::distribute::transfer`]).

use super::peers::blas_threads;
use super::ranks::{rank_distribution, rank_program, RESULT_PREFIX};
use super::Precision;
use offload_sched::distribute::mpi::MpiTransport;
use offload_sched::distribute::{DistPlan, Envelope, Transport};
use offload_sched::exec::BufferData;
use offload_sched::model::residual::{cholesky_residual, shifted_matrix};
use offload_sched::model::ElemType;
use offload_sched::plugin::{open, OpenOptions};
use offload_sched::schedule::{ScheduleOptions, SyncPolicy};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Arguments of one rank (set by `ranks.rs`, not meant to be typed).
#[derive(clap::Args, Clone, Debug)]
pub struct RankArgs {
    /// Matrix order.
    #[arg(long)]
    pub n: u64,
    /// Tile size.
    #[arg(long)]
    pub tile: u64,
    #[arg(long, value_enum, default_value = "f32")]
    pub precision: Precision,
    /// Look-ahead depth of the tiled Cholesky.
    #[arg(long, default_value_t = 0)]
    pub lookahead: u64,
    /// Timed runs.
    #[arg(long, default_value_t = 5)]
    pub reps: u32,
    /// Untimed runs first.
    #[arg(long, default_value_t = 1)]
    pub warmup: u32,
    /// Compute the scaled residual of the last run on rank 0 (OpenBLAS on this many
    /// threads; 0: not checked).
    #[arg(long, default_value_t = 0)]
    pub residual_threads: usize,
    /// Write each rank's op times of the last run to `DIR/rank{R}.tsv` (one line per op:
    /// op id, kind, region, stream or `h<lane>`, issue, start and end µs; then the host
    /// waits' steps and times), to see where a rank waits.
    #[arg(long)]
    pub dump: Option<std::path::PathBuf>,
    /// Keep each rank's body in program order, not readiness order
    /// (`Distribution::set_program_order`), to compare the two.
    #[arg(long)]
    pub program_order: bool,
    /// Run each rank's plan one-shot (`DistPlan::run_rank`: fresh resources per run and
    /// the `End` snapshot of every buffer on every rank) instead of in a session, to
    /// compare the two.
    #[arg(long)]
    pub one_shot: bool,
    /// The rank grid `PxQ` instead of `Distribution::grid`'s (tile `(i, j)` on rank
    /// `(i mod P)·Q + j mod Q`), to compare grids.
    #[arg(long, value_parser = parse_grid)]
    pub grid: Option<(u32, u32)>,
}

/// `PxQ` (`2x1`) as `(P, Q)`.
fn parse_grid(s: &str) -> Result<(u32, u32), String> {
    let (p, q) = s
        .split_once('x')
        .ok_or_else(|| format!("--grid {s:?}: expected PxQ, as 1x2"))?;
    let num = |v: &str| {
        v.parse::<u32>()
            .map_err(|e| format!("--grid {s:?}: {v:?}: {e}"))
    };
    Ok((num(p)?, num(q)?))
}

/// Runs this process's rank; rank 0 returns the result line, the others an empty string.
///
/// Errors: MPI failing to start, a plan that does not compile or verify, a failed run
/// (this rank's or, through the abort, another's); the message names the rank.
pub fn run(a: &RankArgs) -> Result<String, String> {
    with_mpi("linalg-rank", |t| run_rank(a, t))
}

/// Runs `body` on this process's rank of an MPI job (`what`: the command, for the
/// message): starts MPI with its progress thread, finishes it after a body that
/// succeeded; after a failure aborts every rank with `rank R: message` and ends this
/// process with status 1 (MPI cannot finalize with messages no one will receive, see
/// `MpiTransport::finish`).
///
/// Errors: MPI failing to start; a failing body never returns.
pub(crate) fn with_mpi(
    what: &str,
    body: impl FnOnce(&Arc<MpiTransport>) -> Result<String, String>,
) -> Result<String, String> {
    let t =
        Arc::new(MpiTransport::start(Duration::from_secs(600)).map_err(|e| format!("MPI: {e}"))?);
    let rank = t.rank();
    match body(&t) {
        Ok(out) => {
            t.finish();
            Ok(out)
        }
        Err(e) => {
            let e = format!("rank {rank}: {e}");
            t.abort(&e);
            eprintln!("offload-bench {what}: {e}");
            std::process::exit(1);
        }
    }
}

fn run_rank(a: &RankArgs, t: &Arc<MpiTransport>) -> Result<String, String> {
    let (rank, ranks) = (t.rank(), t.ranks());
    let ty = match a.precision {
        Precision::F32 => ElemType::F32,
        Precision::F64 => ElemType::F64,
    };
    let (program, tiling) = rank_program(a.n, a.tile, ty, a.lookahead)?;
    let mut dist = rank_distribution(&program, &tiling, ranks)?;
    let a_id = program
        .buffer_id("A")
        .ok_or("the tiled Cholesky has no buffer A")?;
    if let Some((p, q)) = a.grid {
        dist.block_cyclic(&tiling, a_id, p, q)
            .map_err(|e| format!("--grid {p}x{q}: {e}"))?;
    }
    dist.set_program_order(a.program_order);
    // One stream (one BLAS worker per rank, as STARPU_NCPU=1); the host lanes are the
    // distributed plan's (sends and receives apart: `DistPlan::compile_rank`).
    let options = ScheduleOptions {
        policy: SyncPolicy::Minimal,
        streams_per_device: 1,
        random_streams: None,
        host_lanes: 1,
    };
    let plan = DistPlan::new(&program, &dist, &options).map_err(|e| e.to_string())?;
    let mine = &plan.plans[rank as usize];
    let base = plan.split.envelopes_end();
    let runs = a.warmup + a.reps;
    t.reserve(base + runs as u64 + 1);
    let opened = open("host", &OpenOptions::default()).map_err(|e| e.to_string())?;
    let dyn_t: Arc<dyn Transport> = t.clone();
    let mut session = plan
        .rank_session(dyn_t.clone(), opened.plugin.as_ref())
        .map_err(|e| e.to_string())?;
    let mut spans = Vec::new();
    let mut last = None;
    for k in 0..runs {
        let at = now_us();
        let report = match a.one_shot {
            true => plan.run_rank(dyn_t.clone(), opened.plugin.as_ref()),
            false => session.run(),
        }
        .map_err(|e| format!("run {k}: {e}"))?;
        let g = mine.graph();
        let first = report
            .ops
            .iter()
            .map(|o| o.issue_us)
            .fold(f64::INFINITY, f64::min);
        let ends = (at + first, at + first + report.pipeline_us(g));
        let span = meet(t.as_ref(), base + k as u64, ends)?;
        if k >= a.warmup {
            spans.push(span);
        }
        last = Some(report);
    }
    if let (Some(dir), Some(report)) = (&a.dump, &last) {
        dump(dir, rank, mine, report)?;
    }
    if rank != 0 {
        return Ok(String::new());
    }
    let residual = match (a.residual_threads, last) {
        (0, _) | (_, None) => None,
        (threads, Some(report)) => {
            let init = BufferData::init(&program.buffers[a_id.index()]);
            let values = |b: &BufferData| {
                (0..b.len())
                    .map(|i| b.get_f64(i).unwrap_or(f64::NAN))
                    .collect::<Vec<f64>>()
            };
            // Rank 0's `A` after the last run, in place (the session's host memory).
            let e = |e: offload_sched::Error| format!("rank 0's buffer A: {e}");
            let s = session.session();
            let got: Vec<f64> = match ty {
                _ if a.one_shot => values(report.buffers.get("A").ok_or("rank 0 has no buffer A")?),
                ElemType::F32 => s
                    .read(mine.buffer::<f32>("A").map_err(e)?)
                    .map_err(e)?
                    .iter()
                    .map(|&x| f64::from(x))
                    .collect(),
                _ => s
                    .read(mine.buffer::<f64>("A").map_err(e)?)
                    .map_err(e)?
                    .to_vec(),
            };
            let (n, tile) = (a.n as usize, a.tile as usize);
            let shifted = shifted_matrix(&values(&init), n, tile);
            Some(blas_threads(threads, || {
                cholesky_residual(&shifted, &got, n, tile, ty)
            }))
        }
    };
    let bytes: u64 = plan.split.transfers.iter().map(|x| x.bytes).sum();
    Ok(format!(
        "{RESULT_PREFIX} transfers={} bytes={bytes} us={} residual={}\n",
        plan.split.transfers.len(),
        spans
            .iter()
            .map(|s| format!("{s:.1}"))
            .collect::<Vec<_>>()
            .join(","),
        residual.map_or("-".to_string(), |r| format!("{r:e}"))
    ))
}

/// Writes `report`'s op and host-wait times to `dir/rank{rank}.tsv` (see `--dump`).
pub(crate) fn dump(
    dir: &std::path::Path,
    rank: u32,
    plan: &offload_sched::Plan,
    report: &offload_sched::exec::Report,
) -> Result<(), String> {
    use std::fmt::Write as _;
    let (g, s) = (plan.graph(), plan.schedule());
    let mut out = String::new();
    for o in &report.ops {
        let kind = format!("{:?}", g.op(o.op).kind);
        let kind = kind.split([' ', '(', '{']).next().unwrap_or("?");
        let on = match o.stream {
            Some(st) => format!("s{}", st.index()),
            None => format!("h{}", s.op_lane.get(o.op.index()).copied().unwrap_or(0)),
        };
        let _ = writeln!(
            out,
            "op\t{}\t{kind}\t{}\t{on}\t{:.1}\t{:.1}\t{:.1}",
            o.op.index(),
            g.region_of(o.op).name,
            o.issue_us,
            o.start_us,
            o.end_us
        );
    }
    for w in &report.host_waits {
        let _ = writeln!(
            out,
            "wait\t{}\t{:?}\t{:.1}\t{:.1}",
            w.step, s.steps[w.step], w.start_us, w.end_us
        );
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join(format!("rank{rank}.tsv"));
    std::fs::write(&path, out).map_err(|e| format!("{}: {e}", path.display()))
}

/// µs since the Unix epoch (the host's wall clock, shared by its processes).
pub(crate) fn now_us() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1e6)
}

/// The ranks meet after a run: every rank sends rank 0 its `(start, end)` µs, rank 0
/// answers each once it has all; returns the run's span (latest end − earliest start,
/// µs) on rank 0 and 0 elsewhere.
pub(crate) fn meet(t: &MpiTransport, seq: u64, (start, end): (f64, f64)) -> Result<f64, String> {
    let (rank, ranks) = (t.rank(), t.ranks());
    let e = |e: offload_sched::distribute::TransportError| e.to_string();
    if rank != 0 {
        let mut msg = start.to_ne_bytes().to_vec();
        msg.extend(end.to_ne_bytes());
        t.send(
            Envelope {
                from: rank,
                to: 0,
                seq,
            },
            msg,
        )
        .map_err(e)?;
        t.recv(
            Envelope {
                from: 0,
                to: rank,
                seq,
            },
            0,
            &|| false,
        )
        .map_err(e)?;
        return Ok(0.0);
    }
    let (mut lo, mut hi) = (start, end);
    for r in 1..ranks {
        let m = t
            .recv(
                Envelope {
                    from: r,
                    to: 0,
                    seq,
                },
                16,
                &|| false,
            )
            .map_err(e)?;
        let f = |i: usize| f64::from_ne_bytes(m[i..i + 8].try_into().expect("16 bytes"));
        lo = lo.min(f(0));
        hi = hi.max(f(8));
    }
    for r in 1..ranks {
        t.send(
            Envelope {
                from: 0,
                to: r,
                seq,
            },
            Vec::new(),
        )
        .map_err(e)?;
    }
    Ok(hi - lo)
}
