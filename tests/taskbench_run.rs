//! Task Bench programs ([`offload_sched::model::taskbench`]) run on the host plugin:
//! every pattern, as target regions and as host tasks, under delay jitter and random
//! streams; each task checks its inputs (a wrong or missing input fails the run), and
//! the run's outputs are checked against Task Bench's definition afterwards.

use offload_sched::exec::{BufferData, Buffers, IssueMode};
use offload_sched::model::taskbench::{check_outputs, field_name};
use offload_sched::model::{
    taskbench_program, Arg, Construct, TaskBenchKernel, TaskBenchParams, TaskBenchPattern,
    TaskBenchSpec,
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

#[test]
fn memory_bound_and_empty_kernels_with_reused_fields_validate() {
    let memory = TaskBenchKernel::MemoryBound {
        iterations: 40,
        scratch_bytes: 1024,
    };
    for pattern in [
        TaskBenchPattern::Stencil1d,
        TaskBenchPattern::Trivial,
        TaskBenchPattern::Tree,
        TaskBenchPattern::Dom,
    ] {
        for host_tasks in [false, true] {
            for (kernel, fields, output_bytes) in [
                (memory, None, 16),
                (TaskBenchKernel::Empty, Some(2), 48),
                (TaskBenchKernel::Empty, Some(3), 16),
            ] {
                let s = TaskBenchSpec::new(TaskBenchParams {
                    pattern,
                    width: 4,
                    steps: 6,
                    kernel,
                    fields,
                    output_bytes,
                    host_tasks,
                    ..TaskBenchParams::default()
                })
                .unwrap();
                for seed in 1..=2 {
                    run(&s, seed, IssueMode::PerStream);
                }
            }
        }
    }
}

/// Runs `spec`'s program with task `target`'s input 0 said to start one point later:
/// the task's own check must fail the run, naming the task and the pair.
fn run_with_wrong_first(spec: &TaskBenchSpec, target: &str) -> String {
    let mut prog = taskbench_program(spec).unwrap();
    let mut found = false;
    for c in &mut prog.body {
        let (name, args) = match c {
            Construct::Target(r) => (&r.name, &mut r.args),
            Construct::HostTask(h) => (&h.name, &mut h.args),
            _ => continue,
        };
        if name == target {
            // Arguments: t, p, out, in0, first0, …
            let Arg::Number(first) = &mut args[4] else {
                panic!("{target}: argument 4 is not first0")
            };
            *first += 1.0;
            found = true;
        }
    }
    assert!(found, "{target}");
    let plan = Plan::new(prog, &ScheduleOptions::default()).unwrap();
    let plugin = HostPlugin::new(HostPluginOptions::default());
    plan.run_with(&plugin, IssueMode::PerStream)
        .unwrap_err()
        .render()
}

#[test]
fn a_task_given_the_wrong_inputs_fails_the_run_naming_it() {
    for host_tasks in [false, true] {
        let s = TaskBenchSpec::new(TaskBenchParams {
            pattern: TaskBenchPattern::Stencil1d,
            width: 4,
            steps: 3,
            host_tasks,
            ..TaskBenchParams::default()
        })
        .unwrap();
        // t2_p2 reads points 1..=3 of timestep 1; told they start at 2, pair 0 (point 1)
        // is not the expected point 2.
        let e = run_with_wrong_first(&s, "t2_p2");
        assert!(
            e.contains(
                "task (timestep 2, point 2): input 0 pair 0 is (timestep 1, point 1), \
                 expected (timestep 1, point 2)"
            ),
            "{e}"
        );
        assert!(e.contains("t2_p2"), "{e}");
    }
}

#[test]
fn check_outputs_names_a_wrong_pair() {
    let s = spec(TaskBenchPattern::Dom, TaskBenchKernel::Empty, false);
    let plan = Plan::new(taskbench_program(&s).unwrap(), &ScheduleOptions::default()).unwrap();
    let report = plan
        .run(&HostPlugin::new(HostPluginOptions::default()))
        .unwrap();
    check_outputs(&s, &report.buffers).unwrap();
    // The reference interpreter agrees.
    check_outputs(&s, &plan.reference().unwrap()).unwrap();
    let corrupt = |field: usize, at: usize| {
        let entries = report
            .buffers
            .iter()
            .map(|(n, d)| {
                let mut d = d.clone();
                if n == field_name(field) {
                    if let BufferData::I64(v) = &mut d {
                        v[at] += 7;
                    }
                }
                (n.to_string(), d)
            })
            .collect();
        check_outputs(&s, &Buffers::new(entries))
            .unwrap_err()
            .to_string()
    };
    // dom width 6, 5 steps: timestep 4 has point 5 only (offset 4 + 6 − 5, width
    // min(6, 5, 1)); 32 bytes = 2 pairs a point.
    assert_eq!(
        corrupt(4, 4 * 5 + 2),
        "Task Bench output: `field4` point 5 pair 1 is (11, 5), expected (4, 5): \
         task (timestep 4, point 5) writes it last"
    );
    assert_eq!(
        corrupt(4, 1),
        "Task Bench output: `field4` point 0 pair 0 is (0, 7), expected (0, 0): \
         no task writes it"
    );
}

/// The entered style (`TaskBenchParams::entered`): every pattern validates under jitter
/// and random streams (with the memory-bound kernel's entered scratch too), and the only
/// copies are the fields' one entry and one exit: each field once in, once out.
#[test]
fn entered_fields_validate_and_move_each_field_once_each_way() {
    let memory = TaskBenchKernel::MemoryBound {
        iterations: 10,
        scratch_bytes: 1024,
    };
    for pattern in TaskBenchPattern::ALL {
        for kernel in [TaskBenchKernel::ComputeBound { iterations: 20 }, memory] {
            let s = TaskBenchSpec::new(TaskBenchParams {
                pattern,
                width: 6,
                steps: 5,
                period: (pattern == TaskBenchPattern::Spread).then_some(2),
                output_bytes: 32,
                kernel,
                entered: true,
                ..TaskBenchParams::default()
            })
            .unwrap();
            for seed in 1..=2 {
                run(&s, seed, IssueMode::PerStream);
            }
            run(&s, 3, IssueMode::Serial);
            let plan =
                Plan::new(taskbench_program(&s).unwrap(), &ScheduleOptions::default()).unwrap();
            let report = plan
                .run(&HostPlugin::new(HostPluginOptions::default()))
                .unwrap();
            // 5 fields (one per timestep) × width 6 × 32 B; the scratch is entered `to`
            // (6 × 1024 B in) and released, never copied back.
            let fields = 5 * 6 * 32;
            let scratch = if kernel == memory { 6 * 1024 } else { 0 };
            assert_eq!(report.bytes_h2d, fields + scratch, "{}", s.name());
            assert_eq!(report.bytes_d2h, fields, "{}", s.name());
        }
    }
}

/// Every pattern replayed on the host plugin (`Session::with_replay`: the schedule as
/// one plugin graph whose nodes the plugin runs on all its threads), as target regions
/// and entered, under delay jitter and random streams: every run is replayed, and after
/// each the fields hold Task Bench's outputs (each task also checks its inputs).
#[test]
fn every_pattern_replayed_on_the_host_validates_under_jitter() {
    use offload_sched::{Bindings, Session};
    let compute = TaskBenchKernel::ComputeBound { iterations: 20 };
    for pattern in TaskBenchPattern::ALL {
        for entered in [false, true] {
            let s = TaskBenchSpec::new(TaskBenchParams {
                entered,
                ..*spec(pattern, compute, false).params()
            })
            .unwrap();
            for seed in [1u64, 2] {
                let opts = ScheduleOptions {
                    random_streams: (seed == 2).then_some(seed),
                    streams_per_device: 3,
                    ..ScheduleOptions::default()
                };
                let plan = Plan::new(taskbench_program(&s).unwrap(), &opts).unwrap();
                let plugin = HostPlugin::new(HostPluginOptions {
                    delay_jitter: Some(seed),
                    ..HostPluginOptions::default()
                });
                let mut session = Session::new(&plan, &plugin).unwrap().with_replay(true);
                for run in 0..3 {
                    let at = format!("{} entered {entered} seed {seed} run {run}", s.name());
                    let r = session
                        .run(Bindings::new())
                        .unwrap_or_else(|e| panic!("{at}: {}", e.render()));
                    assert!(r.replay.is_some(), "{at}: not replayed");
                    let fields = (0..s.fields())
                        .map(|f| {
                            let h = plan.buffer::<i64>(&field_name(f)).unwrap();
                            (
                                field_name(f),
                                BufferData::I64(session.read(h).unwrap().to_vec()),
                            )
                        })
                        .collect();
                    check_outputs(&s, &Buffers::new(fields))
                        .unwrap_or_else(|e| panic!("{at}: {e}"));
                }
            }
        }
    }
}

/// The entered stencil at width 2 on 2 streams puts its two columns of tasks on both
/// streams, so that they can run on two cores (issue 30's `--entered` finding: every
/// task sat on one stream, the colouring estimating each at a launch's 3 µs whatever its
/// iterations; the kernel now declares its cost per iteration). At 4096 iterations
/// (about 12 µs of work per task) and beyond the columns are split evenly; at 1024 the
/// colouring's estimate still keeps them on one stream (its event cost, 2 µs, against
/// 6 µs tasks).
#[test]
fn the_entered_stencil_spreads_its_tasks_over_the_streams() {
    for iterations in [1u64 << 12, 1 << 18] {
        let s = TaskBenchSpec::new(TaskBenchParams {
            pattern: TaskBenchPattern::Stencil1d,
            width: 2,
            steps: 20,
            kernel: TaskBenchKernel::ComputeBound { iterations },
            entered: true,
            ..TaskBenchParams::default()
        })
        .unwrap();
        let opts = ScheduleOptions {
            streams_per_device: 2,
            ..ScheduleOptions::default()
        };
        let plan = Plan::new(taskbench_program(&s).unwrap(), &opts).unwrap();
        let g = plan.graph();
        let mut per_stream = std::collections::BTreeMap::<String, usize>::new();
        for (i, op) in g.ops.iter().enumerate() {
            if matches!(op.kind, offload_sched::lower::OpKind::Kernel(_)) {
                let st = plan.schedule().op_stream[i].expect("a kernel has a stream");
                *per_stream.entry(st.to_string()).or_default() += 1;
            }
        }
        assert_eq!(
            per_stream.values().copied().collect::<Vec<_>>(),
            vec![20, 20],
            "{iterations} iterations: kernels per stream {per_stream:?}"
        );
    }
}
