//! The verifier catches schedules broken on purpose: removing any one event wait or host
//! wait of a minimal schedule breaks an edge. The verifier is the stage under test:
//! `verify` is called on a plan's schedule broken by hand. Single hand-broken schedules
//! (a dropped event wait or host wait, an op moved to another stream, an extra host
//! wait, ...) are files with their exact violations in tests/verifier/, run by
//! tests/verifier_cases.rs.

mod common;

use offload_sched::lower::OpGraph;
use offload_sched::schedule::{Schedule, Step};
use offload_sched::verify::{verify, Violation};

/// The op graph and the verified (default) schedule of `graphs/<name>`, to break.
fn load(name: &str) -> (OpGraph, Schedule) {
    let plan = common::plan(name);
    (plan.graph().clone(), plan.schedule().clone())
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
