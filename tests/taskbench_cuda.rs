//! Task Bench programs ([`offload_sched::model::taskbench`]) on the CUDA plugin: every
//! pattern with the compute-bound, memory-bound and empty kernels (NVRTC-compiled
//! `taskbench.cu`, one block of 64 threads a task), on 4 streams and under random
//! streams, live and replayed as CUDA graphs, outputs checked against Task Bench's
//! definition; then a task given a wrong input traps and fails the run. Run on the GPU
//! machine by `TESTS=taskbench_cuda bash benches/gpu/prepare.sh` and
//! `benches/gpu/run.sh gputest`; skips, saying so, without a CUDA driver.

#![cfg(feature = "cuda")]

use offload_sched::exec::{BufferData, Buffers, IssueMode};
use offload_sched::model::taskbench::check_outputs;
use offload_sched::model::{
    taskbench_program, Arg, Construct, TaskBenchKernel, TaskBenchParams, TaskBenchPattern,
    TaskBenchSpec,
};
use offload_sched::plugin::cuda::{probe, CudaPlugin, CudaPluginOptions};
use offload_sched::schedule::ScheduleOptions;
use offload_sched::{Bindings, Plan, Session};

fn cuda() -> Option<CudaPlugin> {
    if let Err(why) = probe() {
        eprintln!("skipping the CUDA Task Bench tests: no CUDA driver or device ({why})");
        return None;
    }
    Some(CudaPlugin::new(CudaPluginOptions::default()).expect("CUDA plugin"))
}

fn spec(pattern: TaskBenchPattern, kernel: TaskBenchKernel) -> TaskBenchSpec {
    TaskBenchSpec::new(TaskBenchParams {
        pattern,
        width: 8,
        steps: 6,
        radix: 3,
        period: (pattern == TaskBenchPattern::Spread).then_some(2),
        output_bytes: 32,
        kernel,
        ..TaskBenchParams::default()
    })
    .unwrap()
}

/// The field buffers after a session's last run.
fn session_buffers(plan: &Plan, s: &Session<'_>) -> Buffers {
    Buffers::new(
        plan.program()
            .buffers
            .iter()
            .filter(|b| b.name.starts_with("field"))
            .map(|b| {
                let v = s.read(plan.buffer::<i64>(&b.name).unwrap()).unwrap();
                (b.name.clone(), BufferData::I64(v.to_vec()))
            })
            .collect(),
    )
}

#[test]
fn every_pattern_and_kernel_validates_live_and_replayed() {
    let Some(gpu) = cuda() else { return };
    let kernels = [
        TaskBenchKernel::Empty,
        TaskBenchKernel::ComputeBound { iterations: 1000 },
        TaskBenchKernel::MemoryBound {
            iterations: 40,
            scratch_bytes: 4096,
        },
    ];
    for pattern in TaskBenchPattern::ALL {
        for kernel in kernels {
            let s = spec(pattern, kernel);
            for random in [None, Some(3)] {
                let opts = ScheduleOptions {
                    random_streams: random,
                    ..ScheduleOptions::default()
                };
                let what = format!("{} random {random:?}", s.name());
                let plan = Plan::new(taskbench_program(&s).unwrap(), &opts).unwrap();
                for issue in [IssueMode::Serial, IssueMode::PerStream] {
                    let r = plan
                        .run_with(&gpu, issue)
                        .unwrap_or_else(|e| panic!("{what}: {}", e.render()));
                    check_outputs(&s, &r.buffers).unwrap_or_else(|e| panic!("{what}: {e}"));
                }
                let mut session = Session::new(&plan, &gpu).unwrap().with_replay(true);
                for run in 0..2 {
                    let r = session
                        .run(Bindings::new())
                        .unwrap_or_else(|e| panic!("{what}: replayed run {run}: {}", e.render()));
                    assert!(r.replay.is_some(), "{what}: run {run} was not replayed");
                    check_outputs(&s, &session_buffers(&plan, &session))
                        .unwrap_or_else(|e| panic!("{what}: replayed run {run}: {e}"));
                }
            }
        }
    }
}

/// Named to run last (`--test-threads 1` runs tests in name order): a trap may leave the
/// CUDA context unusable for later launches in this process.
#[test]
fn z_a_task_given_a_wrong_input_traps_and_fails_the_run() {
    let Some(gpu) = cuda() else { return };
    let s = spec(TaskBenchPattern::Stencil1d, TaskBenchKernel::Empty);
    let mut prog = taskbench_program(&s).unwrap();
    for c in &mut prog.body {
        if let Construct::Target(r) = c {
            if r.name == "t2_p2" {
                // first0: points 1..=3 said to start at 2.
                r.args[4] = Arg::Number(2.0);
            }
        }
    }
    let plan = Plan::new(prog, &ScheduleOptions::default()).unwrap();
    let e = plan.run(&gpu).unwrap_err().render();
    eprintln!("the wrong input's failure: {e}");
}
