//! The verifier catches schedules broken on purpose: a dropped event, an op moved to
//! another stream, a dropped host wait; and it reports every violation. The verifier is
//! the stage under test: `verify` is called on a plan's schedule broken by hand.

mod common;

use offload_sched::lower::OpGraph;
use offload_sched::schedule::{Schedule, Step, StreamId};
use offload_sched::verify::{verify, Violation};

/// The `(from, to)` op indices of every unordered edge reported.
fn unordered(err: &offload_sched::verify::VerifyError) -> Vec<(u32, u32)> {
    err.violations
        .iter()
        .filter_map(|v| match v {
            Violation::Unordered { from, to, .. } => Some((from.0, to.0)),
            _ => None,
        })
        .collect()
}

/// The op graph and the verified (default) schedule of `graphs/<name>`, to break.
fn load(name: &str) -> (OpGraph, Schedule) {
    let plan = common::plan(name);
    (plan.graph().clone(), plan.schedule().clone())
}

#[test]
fn dropping_an_event_wait_breaks_the_cross_stream_edge() {
    let (g, mut s) = load("case_e01.toml");
    let i = s
        .steps
        .iter()
        .position(|st| matches!(st, Step::Wait { .. }))
        .expect("E01 has one event wait");
    s.steps.remove(i);
    let err = verify(&g, &s).unwrap_err();
    let unordered = unordered(&err);
    // The H2D of Y (#1, region P) no longer precedes C's first op (#6, its depend edge)
    // nor C's kernel (#7, which reads Y); and the recorded event is waited on by nobody.
    assert_eq!(unordered, [(1, 6), (1, 7)]);
    assert!(err.violations.iter().any(
        |v| matches!(v, Violation::Unnecessary { what, .. } if what.contains("never waited"))
    ));
    assert!(err.to_string().contains("region \"C\""), "{err}");
}

#[test]
fn dropping_the_host_wait_breaks_every_edge_into_the_host() {
    let (g, mut s) = load("saxpy.toml");
    s.steps
        .retain(|st| !matches!(st, Step::HostWait { .. } | Step::HostWaitDevice { .. }));
    let err = verify(&g, &s).unwrap_err();
    let into_end = unordered(&err);
    // End (#8) reads x and y: it must follow the H2D of x (#2) and the D2H of y (#5)
    // (the H2D of y precedes that D2H). Both are reported, not only the first.
    assert_eq!(into_end, [(2, 8), (5, 8)]);
}

#[test]
fn moving_an_op_to_another_stream_splits_the_region_and_breaks_edges() {
    let (g, mut s) = load("saxpy.toml");
    // The kernel (#4) onto s1: its region is split, and its H2D predecessors on s0 are
    // no longer ordered before it.
    s.op_stream[4] = Some(StreamId(1));
    let err = verify(&g, &s).unwrap_err();
    assert!(err
        .violations
        .iter()
        .any(|v| matches!(v, Violation::RegionSplit { name, .. } if name == "saxpy")));
    let unordered = unordered(&err);
    // Into the kernel from both H2D, and out of it to the D2H and both frees.
    assert_eq!(unordered, [(2, 4), (3, 4), (4, 5), (4, 6), (4, 7)]);
}

#[test]
fn an_extra_host_wait_under_minimal_is_reported_unnecessary() {
    let (g, mut s) = load("pipeline.toml");
    // A host wait right before the end, duplicated: the second adds nothing.
    let i = s
        .steps
        .iter()
        .position(|st| matches!(st, Step::HostWait { .. }))
        .unwrap();
    let w = s.steps[i];
    s.steps.insert(i, w);
    let err = verify(&g, &s).unwrap_err();
    assert_eq!(err.violations.len(), 2, "{err}");
    assert!(err
        .violations
        .iter()
        .all(|v| matches!(v, Violation::Unnecessary { .. })));
}

#[test]
fn removing_any_one_sync_of_a_minimal_schedule_is_caught() {
    for name in [
        "fanout.toml",
        "case_e01.toml",
        "case_e02.toml",
        "jacobi.toml",
        "regions64.toml",
    ] {
        let (g, s) = load(name);
        for (i, st) in s.steps.iter().enumerate() {
            if matches!(st, Step::Op(_) | Step::Record { .. }) {
                continue;
            }
            let mut broken = s.clone();
            broken.steps.remove(i);
            let err = verify(&g, &broken).expect_err(&format!(
                "{name}: removing step {i} ({st:?}) went unnoticed"
            ));
            assert!(err
                .violations
                .iter()
                .any(|v| matches!(v, Violation::Unordered { .. })));
        }
    }
}
