//! The per-step floor of a replayed Task Bench run on the host plugin: stencil_1d of
//! width 2 (default), `STEPS` timesteps (default 1000), compute_bound at `ITER` iterations (default 1), one
//! [`Session`] replaying the plan as a host graph, `RUNS` timed runs (default 20) after
//! `WARMUP` untimed ones (default 3). Prints each run's pipeline time (µs, as `bench
//! taskbench` times a run) and µs per step, then the median and the minimum, and the
//! replay's node count. Every run is validated as `bench taskbench` does.
//!
//! `cargo run --release -p offload-sched-bench --example taskbench_floor` (settings from the
//! environment: `STEPS`, `WIDTH`, `ITER`, `RUNS`, `WARMUP`). Used for the profiles of issue 30
//! (`valgrind --tool=callgrind`, `perf record`).

use offload_sched::model::{
    taskbench_program, TaskBenchKernel, TaskBenchParams, TaskBenchPattern, TaskBenchSpec,
};
use offload_sched::plugin::{open, OpenOptions};
use offload_sched::schedule::{ScheduleOptions, SyncPolicy};
use offload_sched::{Bindings, Plan, Session};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() -> Result<(), String> {
    let (steps, width) = (env("STEPS", 1000), env("WIDTH", 2));
    let (runs, warmup) = (env("RUNS", 20), env("WARMUP", 3));
    let spec = TaskBenchSpec::new(TaskBenchParams {
        pattern: TaskBenchPattern::Stencil1d,
        width,
        steps,
        kernel: TaskBenchKernel::ComputeBound {
            iterations: env("ITER", 1) as u64,
        },
        ..TaskBenchParams::default()
    })
    .map_err(|e| e.to_string())?;
    let opened = open("host", &OpenOptions::default()).map_err(|e| e.to_string())?;
    let plugin = opened.plugin.as_ref();
    let program = taskbench_program(&spec).map_err(|e| e.to_string())?;
    let opts = ScheduleOptions {
        policy: SyncPolicy::Minimal,
        streams_per_device: width as u32,
        host_lanes: width as u32,
        ..ScheduleOptions::default()
    };
    let plan = Plan::new(program, &opts).map_err(|e| e.render())?;
    let mut session = Session::new(&plan, plugin)
        .map_err(|e| e.render())?
        .with_replay(true);
    let mut times = Vec::new();
    let mut nodes = 0;
    for i in 0..warmup + runs {
        let r = session.run(Bindings::new()).map_err(|e| e.render())?;
        let stats = r.replay.as_ref().ok_or("the run was not replayed")?;
        nodes = stats.nodes;
        offload_sched_bench::taskbench::validate(&spec, &plan, &session)?;
        if i >= warmup {
            let us = r.pipeline_us(plan.graph());
            println!("run {i}: {us:.1} µs, {:.3} µs per step", us / steps as f64);
            times.push(us);
        }
    }
    times.sort_by(f64::total_cmp);
    if let (Some(min), Some(med)) = (times.first(), times.get(times.len() / 2)) {
        println!(
            "stencil_1d width {width}, {steps} steps, {} iterations, {nodes} nodes per run: median {med:.1} µs ({:.3} µs per step), min {min:.1} µs ({:.3} µs per step)",
            env("ITER", 1),
            med / steps as f64,
            min / steps as f64
        );
    }
    Ok(())
}
