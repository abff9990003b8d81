//! No undefined behaviour from safe code: `exec::execute` takes any graph and schedule
//! (their fields are public), so before it issues anything it proves every graph edge and
//! every pair of ops touching the same bytes ordered (`verify::check_order`). A schedule
//! edited by hand, or a graph stripped of its edges, is refused with the violation named,
//! and nothing is allocated.

mod common;

use offload_sched::exec::{execute, ExecError, ExecOptions};
use offload_sched::lower::{lower, OpGraph};
use offload_sched::model::{ElemType, Init, MapType, Program, ProgramBuilder};
use offload_sched::schedule::{schedule, ScheduleOptions, Step, SyncPolicy};
use offload_sched::verify::{check_order, verify, Violation};

/// `x` (1024 i32) entered once, then two nowait regions incrementing it in place
/// (`map(present, alloc)`-style reuse of one device allocation), then exit with `from`.
fn two_writers() -> Program {
    let mut p = ProgramBuilder::new("two_writers");
    let x = p.buffer("x", ElemType::I32, 1024, Init::Iota);
    let enter = vec![p.map(MapType::To, x)];
    p.enter_data("enter", enter);
    for name in ["k1", "k2"] {
        p.target(name, "increment")
            .arg(x)
            .map(MapType::ToFrom, x)
            .nowait();
    }
    let exit = vec![p.map(MapType::From, x)];
    p.exit_data("exit", exit);
    p.build()
}

fn options() -> ScheduleOptions {
    ScheduleOptions {
        policy: SyncPolicy::Minimal,
        streams_per_device: 4,
        random_streams: None,
        host_lanes: 1,
    }
}

/// The same ops with every edge dropped: a graph the lowering would never make.
fn without_edges(g: &OpGraph) -> OpGraph {
    let mut bare = OpGraph::new(&g.name, g.buffers.clone(), g.kernels.clone(), g.devices);
    bare.regions = g.regions.clone();
    bare.allocs = g.allocs.clone();
    for id in g.op_ids() {
        bare.push_op(g.op(id).clone(), Vec::new());
    }
    bare
}

#[test]
fn a_lowered_schedule_passes_the_safety_check_and_runs() {
    let g = lower(&two_writers()).unwrap();
    let s = schedule(&g, &options());
    check_order(&g, &s).unwrap();
    let p = common::host(1, None);
    let r = execute(&g, &s, &p, &ExecOptions::default()).unwrap();
    let x = r.buffers.get("x").unwrap();
    assert_eq!(x.get_f64(0).unwrap(), 2.0, "x[0] = 0 + 2");
    assert_eq!(x.get_f64(1023).unwrap(), 1025.0);
}

#[test]
fn a_graph_without_edges_is_refused_naming_the_race() {
    let g = without_edges(&lower(&two_writers()).unwrap());
    // Nothing orders anything: each region may go on its own stream with no sync.
    let s = schedule(&g, &options());
    assert!(
        verify(&g, &s).is_ok(),
        "the graph's own (empty) edges are all ordered"
    );
    let e = check_order(&g, &s).unwrap_err();
    let races: Vec<String> = e
        .violations
        .iter()
        .filter(|v| matches!(v, Violation::Race { .. }))
        .map(|v| v.to_string())
        .collect();
    assert!(
        races
            .iter()
            .any(|r| r.contains("kernel increment") && r.contains("\"x\"")),
        "{races:#?}"
    );
    let p = common::host(1, None);
    let err = execute(&g, &s, &p, &ExecOptions::default()).unwrap_err();
    let ExecError::Schedule { name, message } = &err else {
        panic!("{err}")
    };
    assert_eq!(name, "two_writers");
    assert!(message.contains("race"), "{message}");
    assert_eq!(p.live_device_allocs(), 0);
    assert_eq!(p.live_host_allocs(), 0);
}

#[test]
fn a_schedule_with_a_wait_removed_is_refused_before_anything_runs() {
    let g = lower(&two_writers()).unwrap();
    let mut s = schedule(
        &g,
        &ScheduleOptions {
            random_streams: Some(7),
            ..options()
        },
    );
    let waits = s
        .steps
        .iter()
        .filter(|st| matches!(st, Step::Wait { .. }))
        .count();
    assert!(waits > 0, "random streams put the regions apart:\n{s}");
    s.steps.retain(|st| !matches!(st, Step::Wait { .. }));
    let p = common::host(1, None);
    let err = execute(&g, &s, &p, &ExecOptions::default()).unwrap_err();
    assert!(err.to_string().contains("is not ordered"), "{err}");
    assert_eq!(p.live_device_allocs(), 0);
}

#[test]
fn waiting_more_than_needed_is_safe_and_runs() {
    // A host wait after every step: not minimal (verify says so), but safe to run.
    let g = lower(&two_writers()).unwrap();
    let mut s = schedule(&g, &options());
    let mut steps = Vec::new();
    for st in &s.steps {
        steps.push(*st);
        if let Step::Op(op) = st {
            if let Some(stream) = s.op_stream[op.index()] {
                steps.push(Step::HostWait { stream });
            }
        }
    }
    s.steps = steps;
    assert!(verify(&g, &s).is_err(), "not minimal");
    check_order(&g, &s).unwrap();
    let p = common::host(1, None);
    let r = execute(&g, &s, &p, &ExecOptions::default()).unwrap();
    assert_eq!(r.buffers.get("x").unwrap().get_f64(5).unwrap(), 7.0);
}

/// Every graph file's schedule, under every policy and with random streams, passes the
/// safety check: the lowering's edges cover every conflicting access.
#[test]
fn every_graph_file_is_race_free_under_every_policy() {
    let mut checked = 0;
    for path in common::graph_files() {
        for policy in [
            SyncPolicy::PerOp,
            SyncPolicy::PerRegion,
            SyncPolicy::Minimal,
        ] {
            for random_streams in [None, Some(3)] {
                let opts = ScheduleOptions {
                    policy,
                    random_streams,
                    ..options()
                };
                let plan = match offload_sched::Plan::from_file(&path, &opts) {
                    Ok(p) => p,
                    // Files that are meant to fail (error cases) have nothing to run.
                    Err(_) => continue,
                };
                if let Err(e) = check_order(plan.graph(), plan.schedule()) {
                    panic!(
                        "{} under {policy:?} {random_streams:?}: {e}",
                        path.display()
                    );
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 150, "only {checked} schedules checked");
}
