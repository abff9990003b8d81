//! Compiling a split program over all ranks ([`DistPlan`]) and running it with every
//! rank a thread of this process ([`run_in_process`]).

use super::split::{split, DistProgram, RankProgram};
use super::transport::{ChannelTransport, Transport};
use super::verify::{verify_ranks, RankView, TransferOp};
use super::{DistError, Distribution};
use crate::exec::{IssueMode, Report};
use crate::lower::{LowerOptions, OpKind};
use crate::plugin::Plugin;
use crate::schedule::ScheduleOptions;
use crate::{Plan, Program, Session};
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A program compiled for every rank and verified over all of them.
///
/// Every rank's program is compiled as any plan ([`Plan::new`]: lowered, scheduled,
/// verified) with two host lanes, one for the receives (the model the cross-rank check
/// proves; see [`super::verify`]); then [`verify_ranks`] checks them together. A process of an MPI
/// run builds the whole `DistPlan` (every rank's, cheap next to the run) and runs its own
/// rank's plan.
#[derive(Debug)]
pub struct DistPlan {
    pub split: DistProgram,
    /// Index = rank.
    pub plans: Vec<Plan>,
    /// Each rank's sends and receives as ops of its plan.
    pub transfer_ops: Vec<Vec<TransferOp>>,
}

impl DistPlan {
    /// Splits `program` over `dist` ([`split`]), compiles each rank and verifies all.
    ///
    /// Errors: those of [`split`]; [`DistError::Plan`] naming the first rank (in rank
    /// order) whose program does not compile; [`DistError::Verify`] with every cross-rank
    /// violation.
    pub fn new(
        program: &Program,
        dist: &Distribution,
        options: &ScheduleOptions,
    ) -> Result<DistPlan, DistError> {
        Self::new_lowered(program, dist, options, &LowerOptions::default())
    }

    /// [`DistPlan::new`] with every rank lowered with `lower` ([`Plan::new_lowered`]:
    /// transfer elision off with [`LowerOptions::no_elide`]). The ranks are compiled in
    /// parallel on rayon's pool.
    ///
    /// Errors: as [`DistPlan::new`].
    pub fn new_lowered(
        program: &Program,
        dist: &Distribution,
        options: &ScheduleOptions,
        lower: &LowerOptions,
    ) -> Result<DistPlan, DistError> {
        let split = split(program, dist)?;
        // The ranks' plans are independent: compiled in parallel (rayon); the first
        // failing rank in rank order is the error, whichever finished first.
        let plans: Vec<Result<Plan, DistError>> = split
            .ranks
            .par_iter()
            .map(|r| Self::compile_rank(r, options, lower))
            .collect();
        let plans = plans.into_iter().collect::<Result<Vec<_>, _>>()?;
        Self::from_parts(split, plans)
    }

    /// Rank `r`'s plan as [`DistPlan::new_lowered`] compiles it: [`Plan::new_lowered`]
    /// with `options` on two host lanes (the sends and the program's host tasks on one,
    /// the receives on the other: see [`split`]).
    ///
    /// Errors: [`DistError::Plan`] naming the rank.
    pub fn compile_rank(
        r: &RankProgram,
        options: &ScheduleOptions,
        lower: &LowerOptions,
    ) -> Result<Plan, DistError> {
        let options = ScheduleOptions {
            host_lanes: super::split::RANK_LANES,
            ..*options
        };
        Plan::new_lowered(r.program.clone(), &options, lower).map_err(|e| DistError::Plan {
            rank: r.rank,
            source: Box::new(e),
        })
    }

    /// The plan of `split` whose rank `r` runs `plans[r]` ([`DistPlan::compile_rank`] of
    /// `split.ranks[r]`), once [`verify_ranks`] passes over all of them. The last phase
    /// of [`DistPlan::new_lowered`], public so a caller can time each phase.
    ///
    /// Errors: [`DistError::Verify`] with every cross-rank violation (plans not compiled
    /// from `split` miss its sends and receives).
    ///
    /// Panics: if `plans` has not one plan per rank of `split`.
    pub fn from_parts(split: DistProgram, plans: Vec<Plan>) -> Result<DistPlan, DistError> {
        assert_eq!(plans.len(), split.ranks.len(), "one plan per rank");
        let transfer_ops = transfer_ops(&split, &plans);
        let plan = DistPlan {
            split,
            plans,
            transfer_ops,
        };
        let violations = verify_ranks(&plan.views());
        if !violations.is_empty() {
            return Err(DistError::Verify(violations));
        }
        Ok(plan)
    }

    /// Number of ranks.
    pub fn ranks(&self) -> u32 {
        self.plans.len() as u32
    }

    /// What [`verify_ranks`] takes, one view per rank.
    pub fn views(&self) -> Vec<RankView<'_>> {
        self.plans
            .iter()
            .zip(&self.transfer_ops)
            .map(|(p, t)| RankView {
                graph: p.graph(),
                schedule: p.schedule(),
                transfers: t,
            })
            .collect()
    }

    /// Runs rank `transport.rank()`'s plan on `plugin` with serial issue, its sends and
    /// receives going through `transport`. On an error it aborts the transport (every
    /// other rank's receives fail at once, naming this rank) and returns it.
    ///
    /// Errors: [`DistError::Run`] naming the rank and the op (a receive that timed out or
    /// was aborted by another rank names the other rank's failure).
    pub fn run_rank(
        &self,
        transport: Arc<dyn Transport>,
        plugin: &dyn Plugin,
    ) -> Result<Report, DistError> {
        self.run_rank_with(transport, plugin, false)
    }

    /// [`DistPlan::run_rank`], with `inline` the rank run on the calling thread alone as
    /// [`RankSession::with_inline`] says.
    ///
    /// Errors: as [`DistPlan::run_rank`].
    pub fn run_rank_with(
        &self,
        transport: Arc<dyn Transport>,
        plugin: &dyn Plugin,
        inline: bool,
    ) -> Result<Report, DistError> {
        let rank = transport.rank();
        let r = &self.split.ranks[rank as usize];
        r.link.attach(transport.clone());
        let plan = &self.plans[rank as usize];
        let opts = crate::exec::ExecOptions {
            host_ops: host_ops(inline),
            ..plan.exec_options(IssueMode::Serial)
        };
        plan.run_opts(plugin, &opts).map_err(|e| {
            let message = e.to_string();
            transport.abort(&message);
            DistError::Run { rank, message }
        })
    }

    /// A [`Session`] of rank `transport.rank()`'s plan on `plugin` (serial issue), its
    /// sends and receives going through `transport`: the rank's runs reuse the plugin's
    /// streams, events and host memory as any session's ([`crate::session`]) instead of
    /// creating them per run as [`DistPlan::run_rank`] does.
    ///
    /// Errors: [`DistError::Run`] naming the rank when the plan does not fit the plugin
    /// ([`Session::new`]); nothing is aborted then (no rank has run).
    pub fn rank_session<'p>(
        &'p self,
        transport: Arc<dyn Transport>,
        plugin: &'p dyn Plugin,
    ) -> Result<RankSession<'p>, DistError> {
        let rank = transport.rank();
        self.split.ranks[rank as usize]
            .link
            .attach(transport.clone());
        let session = Session::new(&self.plans[rank as usize], plugin)
            .map_err(|e| DistError::Run {
                rank,
                message: e.to_string(),
            })?
            .with_issue(IssueMode::Serial);
        Ok(RankSession {
            rank,
            transport,
            session,
        })
    }
}

/// One rank's plan in a [`Session`], run many times ([`DistPlan::rank_session`]).
pub struct RankSession<'p> {
    rank: u32,
    transport: Arc<dyn Transport>,
    session: Session<'p>,
}

impl std::fmt::Debug for RankSession<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RankSession {{ rank: {} }}", self.rank)
    }
}

impl<'p> RankSession<'p> {
    /// Runs the rank's plan once (every buffer unbound: each run starts from the
    /// program's initial contents); read the results with [`RankSession::session`]'s
    /// [`Session::read`]. On an error it aborts the transport, as [`DistPlan::run_rank`].
    ///
    /// Errors: [`DistError::Run`] naming the rank and the op.
    pub fn run(&mut self) -> Result<Report, DistError> {
        self.session.run(crate::Bindings::new()).map_err(|e| {
            let message = e.to_string();
            self.transport.abort(&message);
            DistError::Run {
                rank: self.rank,
                message,
            }
        })
    }

    /// Runs the rank on its calling thread alone, or back on host lanes (`false`, the
    /// default): its host ops, sends and receives included, on the issuing thread
    /// ([`crate::exec::HostOps::Inline`]), each receive when its data is first needed
    /// (see there why that cannot hang a run that completes with lanes). With the host
    /// plugin's [`inline_streams`](crate::plugin::host::HostPluginOptions::inline_streams)
    /// the rank is then one thread (and MPI's progress thread), as an MPI program's rank
    /// is: for a rank with one core, where lanes and stream workers only hand work to
    /// each other.
    pub fn with_inline(mut self, on: bool) -> RankSession<'p> {
        self.session = self.session.with_host_ops(host_ops(on));
        self
    }

    /// The session (its plan, and the buffers of the last run).
    pub fn session(&self) -> &Session<'p> {
        &self.session
    }
}

/// Who runs a rank's host ops: its lanes, or with `inline` the issuing thread, each
/// receive when first needed.
fn host_ops(inline: bool) -> crate::exec::HostOps {
    match inline {
        true => crate::exec::HostOps::Inline {
            deferred_lane: Some(super::split::RECV_LANE),
        },
        false => crate::exec::HostOps::Lanes,
    }
}

/// Each rank's send and receive tasks found as host ops of its plan, by region name.
fn transfer_ops(split: &DistProgram, plans: &[Plan]) -> Vec<Vec<TransferOp>> {
    let mut out: Vec<Vec<TransferOp>> = vec![Vec::new(); plans.len()];
    let mut by_rank: Vec<BTreeMap<&str, (bool, &super::Transfer)>> =
        vec![BTreeMap::new(); plans.len()];
    for t in &split.transfers {
        by_rank[t.envelope.from as usize].insert(t.send.as_str(), (true, t));
        by_rank[t.envelope.to as usize].insert(t.recv.as_str(), (false, t));
    }
    for (r, plan) in plans.iter().enumerate() {
        let g = plan.graph();
        for region in &g.regions {
            let Some((send, t)) = by_rank[r].get(region.name.as_str()) else {
                continue;
            };
            for i in region.ops.clone() {
                if matches!(g.ops[i as usize].kind, OpKind::HostTask { .. }) {
                    out[r].push(TransferOp {
                        op: crate::lower::OpId(i),
                        send: *send,
                        envelope: t.envelope,
                        bytes: t.bytes,
                        section: t.section,
                    });
                }
            }
        }
    }
    out
}

/// One rank's part of a run.
#[derive(Debug)]
pub struct RankRun {
    pub rank: u32,
    pub report: Report,
}

/// A run over all ranks: each rank's report (rank 0's buffers are the result) and the
/// wall time of the whole run in µs (from starting the first rank to the last one
/// finishing).
#[derive(Debug)]
pub struct DistRun {
    pub ranks: Vec<RankRun>,
    pub wall_us: f64,
}

/// Runs every rank of `plan` as a thread of this process over a [`ChannelTransport`]
/// (receives failing after `timeout`; `jitter` = `Some((seed, max_us))` delays every
/// message by up to `max_us` µs), rank `r` on the plugin `plugin(r)`.
///
/// Errors: when ranks fail, the first failure ([`DistError::Run`], naming the rank and
/// its op); the other ranks end at once (their receives are aborted), none hangs.
pub fn run_in_process(
    plan: &DistPlan,
    plugin: &(dyn Fn(u32) -> Box<dyn Plugin> + Sync),
    timeout: Duration,
    jitter: Option<(u64, u64)>,
) -> Result<DistRun, DistError> {
    run_in_process_with(plan, plugin, timeout, jitter, false)
}

/// [`run_in_process`], with `inline` every rank run on its own thread alone
/// ([`DistPlan::run_rank_with`]).
///
/// Errors: as [`run_in_process`].
pub fn run_in_process_with(
    plan: &DistPlan,
    plugin: &(dyn Fn(u32) -> Box<dyn Plugin> + Sync),
    timeout: Duration,
    jitter: Option<(u64, u64)>,
    inline: bool,
) -> Result<DistRun, DistError> {
    let transports = ChannelTransport::connected(plan.ranks(), timeout, jitter);
    let hub = transports[0].clone();
    let start = Instant::now();
    let results: Vec<Result<Report, DistError>> = std::thread::scope(|s| {
        let handles: Vec<_> = transports
            .into_iter()
            .map(|t| {
                s.spawn(move || {
                    let plugin = plugin(t.rank());
                    plan.run_rank_with(Arc::new(t), &*plugin, inline)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let wall_us = start.elapsed().as_secs_f64() * 1e6;
    if results.iter().any(Result::is_err) {
        // The first rank to abort is the cause; the others failed because of it.
        let (rank, message) = hub.first_abort().expect("a failed rank aborts the hub");
        return Err(DistError::Run { rank, message });
    }
    let ranks = results
        .into_iter()
        .enumerate()
        .map(|(r, rep)| RankRun {
            rank: r as u32,
            report: rep.expect("checked above"),
        })
        .collect();
    Ok(DistRun { ranks, wall_us })
}
