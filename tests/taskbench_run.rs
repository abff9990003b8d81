//! Task Bench programs ([`offload_sched::model::taskbench`]) run on the host plugin:
//! every pattern, as target regions and as host tasks, under delay jitter and random
//! streams; each task checks its inputs (a wrong or missing input fails the run), and
//! the run's outputs are checked against Task Bench's definition afterwards.

use offload_sched::exec::IssueMode;
use offload_sched::model::taskbench::{check_outputs, field_name};
use offload_sched::model::{
    taskbench_program, TaskBenchKernel, TaskBenchParams, TaskBenchPattern, TaskBenchSpec,
};
use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
use offload_sched::schedule::ScheduleOptions;
use offload_sched::Plan;

fn spec(pattern: TaskBenchPattern, kernel: TaskBenchKernel, host_tasks: bool) -> TaskBenchSpec {
    TaskBenchSpec::new(TaskBenchParams {
        pattern,
        width: 6,
        steps: 5,
        radix: 3,
        // spread's period is at most ⌈width / radix⌉ = 2 (Task Bench's default 3 is refused).
        period: (pattern == TaskBenchPattern::Spread).then_some(2),
        output_bytes: 32,
        kernel,
        host_tasks,
        ..TaskBenchParams::default()
    })
    .unwrap()
}

fn run(spec: &TaskBenchSpec, seed: u64, issue: IssueMode) {
    let opts = ScheduleOptions {
        random_streams: Some(seed),
        ..ScheduleOptions::default()
    };
    let plan = Plan::new(taskbench_program(spec).unwrap(), &opts)
        .unwrap_or_else(|e| panic!("{}: {}", spec.name(), e.render()));
    let plugin = HostPlugin::new(HostPluginOptions {
        delay_jitter: Some(seed),
        ..HostPluginOptions::default()
    });
    let report = plan
        .run_with(&plugin, issue)
        .unwrap_or_else(|e| panic!("{} seed {seed}: {}", spec.name(), e.render()));
    check_outputs(spec, &report.buffers)
        .unwrap_or_else(|e| panic!("{} seed {seed}: {e}", spec.name()));
}

#[test]
fn every_pattern_runs_and_validates_under_jitter_and_random_streams() {
    let compute = TaskBenchKernel::ComputeBound { iterations: 20 };
    for pattern in TaskBenchPattern::ALL {
        for host_tasks in [false, true] {
            let s = spec(pattern, compute, host_tasks);
            for seed in 1..=3 {
                run(&s, seed, IssueMode::PerStream);
            }
            run(&s, 4, IssueMode::Serial);
        }
    }
}
