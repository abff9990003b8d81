//! DOT of real schedules: a snapshot of a small program, and Graphviz accepts the output.
//! The snapshot examines the DOT stage (`dot::to_dot`, `Dot`) on a lowered and scheduled
//! graph; Graphviz is given plans' `to_dot`.

mod common;

use offload_sched::dot::{to_dot, Dot};
use offload_sched::lower::lower;
use offload_sched::model::{DependType, ElemType, Init, MapType, Program, ProgramBuilder};
use offload_sched::schedule::{schedule, ScheduleOptions, Step};
use offload_sched::Plan;

/// Two independent producers (two streams), a consumer of both (an event), then a host
/// task reading the result (a host wait).
fn fan_in() -> Program {
    let mut p = ProgramBuilder::new("fan-in");
    let a = p.buffer("a", ElemType::F32, 1024, Init::Zeros);
    let b = p.buffer("b", ElemType::F32, 1024, Init::Zeros);
    let c = p.buffer("c", ElemType::F32, 1024, Init::Zeros);
    let maps = vec![p.map(MapType::Alloc, a), p.map(MapType::Alloc, b)];
    p.target_data("ab", maps, |p| {
        p.target("fill a", "fill")
            .arg(a)
            .num(1.0)
            .map(MapType::From, a)
            .nowait()
            .depend(DependType::Out, a);
        p.target("fill b", "fill")
            .arg(b)
            .num(2.0)
            .map(MapType::From, b)
            .nowait()
            .depend(DependType::Out, b);
        p.target("add", "add")
            .arg(a)
            .arg(b)
            .arg(c)
            .map(MapType::To, a)
            .map(MapType::To, b)
            .map(MapType::From, c)
            .nowait()
            .depend(DependType::In, a)
            .depend(DependType::In, b)
            .depend(DependType::Out, c);
        p.taskwait();
    });
    p.host_task("check", &[c.into()], &[]);
    p.build()
}

#[test]
fn fan_in_dot_snapshot() {
    let g = lower(&fan_in()).unwrap();
    let s = schedule(&g, &ScheduleOptions::default());
    offload_sched::verify::verify(&g, &s).unwrap();
    let dot = to_dot(&g, &s);
    assert_eq!(dot, Dot::new(&g, &s).to_string());
    // Structure, independent of the exact layout the scheduler picks.
    let clusters = dot.matches("subgraph cluster_s").count();
    assert_eq!(clusters, s.used_streams());
    let dashed = dot.matches("style=dashed").count();
    assert_eq!(dashed, s.event_waits().count());
    let host_waits = s.host_waits().count();
    assert_eq!(dot.matches("shape=doublecircle").count(), host_waits);
    for k in 0..host_waits {
        assert!(dot.contains(&format!("  hw{k} [label=\"host wait")));
    }
    let ops_drawn = dot.matches("    op").count();
    assert_eq!(ops_drawn, g.ops.len());
    assert!(!dot.contains("0x"), "no addresses");
    insta::assert_snapshot!("fan_in", dot);
}

#[test]
fn graphviz_accepts_the_dot() {
    let plan = Plan::new(fan_in(), &ScheduleOptions::default()).unwrap();
    if common::graphviz_accepts("fan-in", &plan.to_dot()).is_none() {
        return;
    }
    // Also the per-op policy (a host wait after every copy and launch) and the smaller
    // WfInstances samples when present.
    let per_op = ScheduleOptions {
        policy: offload_sched::schedule::SyncPolicy::PerOp,
        ..ScheduleOptions::default()
    };
    let plan = plan.reschedule(&per_op).unwrap();
    assert!(plan
        .schedule()
        .steps
        .iter()
        .any(|st| matches!(st, Step::HostWait { .. })));
    common::graphviz_accepts("fan-in per-op", &plan.to_dot());
    for name in [
        "helloworld-chain-5-chameleon.json",
        "helloworld-forkjoin-10-chameleon.json",
        "srasearch-chameleon-10a-001.json",
    ] {
        let text = common::wf_sample(name);
        let opts = offload_sched::import::WfOptions::default();
        let plan = Plan::from_wfcommons(&text, name, &opts, &ScheduleOptions::default())
            .unwrap_or_else(|e| panic!("{}", e.render()));
        common::graphviz_accepts(name, &plan.to_dot());
    }
}
