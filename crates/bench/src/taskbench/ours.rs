//! offload-sched's side of `bench taskbench`: one sweep of a Task Bench graph through the
//! real pipeline (the graph of [`offload_sched::model::taskbench_program`] → [`Plan`]
//! (lowered, scheduled, verified) → [`Session`] runs on the plugin, live or replayed).
//!
//! Per iteration count of the sweep the program is built and compiled once, run
//! `warmup` times untimed, then `reps` times timed. A run's time is its pipeline time
//! ([`offload_sched::exec::Report::pipeline_us`]: first op issued → the final host wait),
//! the span Task Bench's own timer covers (graph execution, not start-up). Every timed
//! run is validated: each task checks its inputs in its kernel (a wrong input fails the
//! run), and the outputs left in every field are checked against Task Bench's definition
//! ([`offload_sched::model::taskbench::check_outputs`]); a failure is an error naming the
//! run.

use super::metg::SweepRun;
use offload_sched::exec::IssueMode;
use offload_sched::exec::{BufferData, Buffers};
use offload_sched::model::taskbench::{check_outputs, field_name};
use offload_sched::model::{taskbench_program, TaskBenchKernel, TaskBenchParams, TaskBenchSpec};
use offload_sched::plugin::Plugin;
use offload_sched::schedule::ScheduleOptions;
use offload_sched::{Bindings, Plan, Session};

/// One configuration of offload-sched in a sweep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Variant {
    pub policy: offload_sched::schedule::SyncPolicy,
    /// Streams per device.
    pub streams: u32,
    /// Replayed as plugin graphs ([`Session::with_replay`]).
    pub replay: bool,
    /// How live runs are issued ([`Session::with_issue`]; replay issues one graph).
    pub issue: IssueMode,
}

impl Variant {
    /// The row name: `offload-sched minimal, 2 streams` (`, replayed`).
    pub fn label(&self) -> String {
        format!(
            "offload-sched {}, {} stream{}{}{}",
            self.policy,
            self.streams,
            if self.streams == 1 { "" } else { "s" },
            match self.issue {
                _ if self.replay => "",
                IssueMode::Auto => "",
                IssueMode::Serial => ", serial issue",
                IssueMode::PerStream => ", per-stream issue",
                IssueMode::PerGroup => ", per-group issue",
            },
            if self.replay { ", replayed" } else { "" }
        )
    }
}

/// `params` with the kernel's iteration count set to `iterations` (the kernel kind and
/// scratch bytes kept).
pub fn with_iterations(params: &TaskBenchParams, iterations: u64) -> TaskBenchParams {
    let kernel = match params.kernel {
        TaskBenchKernel::Empty => TaskBenchKernel::Empty,
        TaskBenchKernel::ComputeBound { .. } => TaskBenchKernel::ComputeBound { iterations },
        TaskBenchKernel::MemoryBound { scratch_bytes, .. } => TaskBenchKernel::MemoryBound {
            iterations,
            scratch_bytes,
        },
    };
    TaskBenchParams { kernel, ..*params }
}

/// The work Task Bench credits to a run of `spec`: its FLOPs, or its bytes for the
/// memory-bound kernel (`count_flops` / `count_bytes`).
pub fn work(spec: &TaskBenchSpec) -> f64 {
    match spec.kernel() {
        TaskBenchKernel::MemoryBound { .. } => spec.total_bytes(),
        _ => spec.total_flops(),
    }
}

/// Runs the sweep `plan` (`(iterations, reps)` pairs, largest first) of the graph
/// `params` as `v` on `plugin`, `warmup` untimed runs per point, and returns one row per
/// timed run. `progress` is called after each point with its iteration count and the
/// median run time in µs.
///
/// Errors: a spec Task Bench refuses, a plan that does not compile or fit the plugin, a
/// failed run, a run that was not replayed when `v.replay`, or wrong outputs; each names
/// the graph and the iteration count.
pub fn sweep(
    plugin: &dyn Plugin,
    params: &TaskBenchParams,
    v: Variant,
    plan: &[(u64, u32)],
    warmup: u32,
    mut progress: impl FnMut(u64, f64),
) -> Result<Vec<SweepRun>, String> {
    let mut rows = Vec::new();
    for &(iterations, reps) in plan {
        let spec =
            TaskBenchSpec::new(with_iterations(params, iterations)).map_err(|e| format!("{e}"))?;
        let at = || format!("{} at {iterations} iterations, {}", spec.name(), v.label());
        let program = taskbench_program(&spec).map_err(|e| format!("{}: {e}", at()))?;
        let opts = ScheduleOptions {
            policy: v.policy,
            streams_per_device: v.streams,
            // Host tasks (`--host-tasks`) run on host lanes: as many as streams (cores).
            host_lanes: v.streams.max(1),
            ..ScheduleOptions::default()
        };
        let compiled =
            Plan::new(program, &opts).map_err(|e| format!("{}: {}", at(), e.render()))?;
        let mut session = Session::new(&compiled, plugin)
            .map_err(|e| format!("{}: {}", at(), e.render()))?
            .with_replay(v.replay)
            .with_issue(v.issue);
        let mut times = Vec::new();
        for i in 0..warmup + reps {
            let r = session
                .run(Bindings::new())
                .map_err(|e| format!("{}: run {i}: {}", at(), e.render()))?;
            if v.replay && r.replay.is_none() {
                return Err(format!("{}: run {i} was not replayed", at()));
            }
            if i < warmup {
                continue;
            }
            validate(&spec, &compiled, &session).map_err(|e| format!("{}: run {i}: {e}", at()))?;
            let us = r.pipeline_us(compiled.graph());
            times.push(us);
            rows.push(SweepRun {
                iterations,
                elapsed_s: us * 1e-6,
                tasks: spec.tasks(),
                work: work(&spec),
            });
        }
        progress(iterations, crate::median(times));
    }
    Ok(rows)
}

/// Checks the fields the last run of `session` left against Task Bench's definition.
pub fn validate(spec: &TaskBenchSpec, plan: &Plan, session: &Session<'_>) -> Result<(), String> {
    let mut entries = Vec::with_capacity(spec.fields());
    for f in 0..spec.fields() {
        let name = field_name(f);
        let h = plan.buffer::<i64>(&name).map_err(|e| e.render())?;
        let data = session.read(h).map_err(|e| e.render())?;
        entries.push((name, BufferData::I64(data.to_vec())));
    }
    check_outputs(spec, &Buffers::new(entries)).map_err(|e| e.to_string())
}
