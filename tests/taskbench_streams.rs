//! Task Bench's stencil spreads over every stream of the pool.
//!
//! `IDLE_WEIGHT`'s gap capped at the region's cost (src/schedule/assign.rs): at 100 and
//! 1000 steps, widths 4, 8 and 16 on as many streams, with and without `--entered`,
//! kernels of 4 096 and 32 768 iterations, every stream carries at least half its share
//! of the kernels. Uncapped, 1000 steps × width 8 `--entered` used 3 of 8 streams at
//! 4 096 iterations (6 at 32 768), width 4 used 3 of 4, width 16 used 3 (10).

use offload_sched::lower::OpKind;
use offload_sched::model::{
    taskbench_program, TaskBenchKernel, TaskBenchParams, TaskBenchPattern, TaskBenchSpec,
};
use offload_sched::schedule::ScheduleOptions;
use offload_sched::Plan;

#[test]
fn taskbench_stencil_spreads_over_every_stream_at_100_and_1000_steps() {
    for entered in [false, true] {
        for steps in [100, 1000] {
            for width in [4usize, 8, 16] {
                for iterations in [4096u64, 32768] {
                    let spec = TaskBenchSpec::new(TaskBenchParams {
                        pattern: TaskBenchPattern::Stencil1d,
                        width,
                        steps,
                        kernel: TaskBenchKernel::ComputeBound { iterations },
                        entered,
                        ..TaskBenchParams::default()
                    })
                    .unwrap();
                    let program = taskbench_program(&spec).unwrap();
                    let opts = ScheduleOptions {
                        streams_per_device: width as u32,
                        ..ScheduleOptions::default()
                    };
                    let plan = Plan::new(program, &opts).unwrap();
                    let (g, s) = (plan.graph(), plan.schedule());
                    let mut kernels = vec![0usize; width];
                    for (op, st) in s.op_stream.iter().enumerate() {
                        if let (Some(st), OpKind::Kernel(_)) = (st, &g.ops[op].kind) {
                            kernels[st.index()] += 1;
                        }
                    }
                    // width · steps kernels over `width` streams: `steps` each.
                    assert!(
                        kernels.iter().all(|&k| k >= steps / 2),
                        "entered {entered}, {steps} steps, width {width}, {iterations} \
                         iterations: kernels per stream {kernels:?}"
                    );
                }
            }
        }
    }
}
