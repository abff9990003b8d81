//! Property test of transfer elision (issue 28 point 1) over random programs: the
//! generator of `prop_programs.rs` (`tests/common/programs.rs`: regions, data
//! constructs, updates, taskwaits and host tasks that read or read and write buffers,
//! interleaved), on one device, with more host tasks mixed in between the constructs.
//!
//! For each program that lowers:
//! - with elision on and off (`Plan::relower`), every policy verifies (the elision
//!   proof included);
//! - bytes moved with elision plus bytes elided equal bytes moved without;
//! - on the host plugin with delay jitter, runs under every policy (minimal, per-op,
//!   per-region; random streams for some) with elision and without give the reference's
//!   buffers.
//!
//! Cases: 64 by default, `PROPTEST_CASES=N` to change.

mod common;
#[path = "common/programs.rs"]
mod programs;

use offload_sched::exec::IssueMode;
use offload_sched::lower::LowerOptions;
use offload_sched::schedule::{ScheduleOptions, SyncPolicy};
use offload_sched::{Error, Plan};
use programs::{build, gen, Desc, Gen};
use proptest::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering};

static ELIDING: AtomicUsize = AtomicUsize::new(0);
static LOWERED: AtomicUsize = AtomicUsize::new(0);

fn opts(policy: SyncPolicy, random_streams: Option<u64>) -> ScheduleOptions {
    ScheduleOptions {
        policy,
        random_streams,
        ..ScheduleOptions::default()
    }
}

/// One device, and a host task (kind 9: `increment` on the host, `add_scalar`, or a
/// read) after every third construct, on a buffer chosen by the construct's own bytes.
fn one_device_more_host(mut g: Gen) -> Gen {
    g.two_devices = false;
    let mut body = Vec::with_capacity(g.body.len() * 4 / 3 + 1);
    for (i, d) in g.body.iter().enumerate() {
        body.push(*d);
        if i % 3 == 2 {
            body.push(Desc {
                kind: 9,
                a: d.b,
                b: d.flags,
                sec: d.map,
                ..*d
            });
        }
    }
    g.body = body;
    g
}

fn properties(g: &Gen, seed: u64) {
    let program = build(g);
    let built = Plan::new(program, &opts(SyncPolicy::Minimal, None))
        .and_then(|p| p.relower(&LowerOptions::elided()));
    let on = match built {
        Ok(plan) => plan,
        Err(Error::Lower { .. }) => return,
        Err(e) => panic!("does not verify: {}", e.render()),
    };
    LOWERED.fetch_add(1, Ordering::Relaxed);
    let off = on
        .relower(&LowerOptions {
            elide: false,
            ..LowerOptions::default()
        })
        .unwrap_or_else(|e| panic!("no-elide does not verify: {}", e.render()));
    let (g_on, g_off) = (on.graph(), off.graph());
    if !g_on.elided.is_empty() {
        ELIDING.fetch_add(1, Ordering::Relaxed);
    }
    assert_eq!(on.proof().elisions_proven, g_on.elided.len());
    let ((h_on, d_on), (h_off, d_off)) = (common::moved(g_on), common::moved(g_off));
    let e = g_on.elided_bytes();
    assert_eq!(h_on + e.h2d, h_off);
    assert_eq!(d_on + e.d2h, d_off);

    let want = on.reference().expect("reference runs");
    let mut plans = vec![("elide minimal", on.clone())];
    for (what, policy, random) in [
        ("elide random streams", SyncPolicy::Minimal, Some(seed)),
        ("elide per-op", SyncPolicy::PerOp, None),
        ("elide per-region", SyncPolicy::PerRegion, Some(seed ^ 1)),
    ] {
        let p = on
            .reschedule(&opts(policy, random))
            .unwrap_or_else(|e| panic!("{what} does not verify: {}", e.render()));
        plans.push((what, p));
    }
    plans.push(("no-elide minimal", off.clone()));
    for (what, policy, random) in [
        ("no-elide per-op", SyncPolicy::PerOp, Some(seed ^ 2)),
        ("no-elide per-region", SyncPolicy::PerRegion, None),
    ] {
        let p = off
            .reschedule(&opts(policy, random))
            .unwrap_or_else(|e| panic!("{what} does not verify: {}", e.render()));
        plans.push((what, p));
    }
    for (k, (what, plan)) in plans.iter().enumerate() {
        let plugin = common::host(1, Some(seed.wrapping_add(k as u64)));
        common::run_checked(what, plan, &plugin, IssueMode::Serial, &want);
    }
}

proptest! {
    #![proptest_config(programs::config())]

    #[test]
    fn random_programs_with_host_accesses_elide_and_match_the_reference(
        g in gen(), seed in any::<u64>()
    ) {
        properties(&one_device_more_host(g), seed);
    }
}

/// The property is not vacuous: over a fixed sample of generated programs, most lower
/// and a good share of those elide copies.
#[test]
fn generated_programs_elide() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = gen();
    let (mut lowered, mut eliding, n) = (0, 0, 100);
    for _ in 0..n {
        let g = one_device_more_host(strategy.new_tree(&mut runner).unwrap().current());
        if let Ok(graph) = offload_sched::lower::lower_with(&build(&g), &LowerOptions::elided()) {
            lowered += 1;
            eliding += usize::from(!graph.elided.is_empty());
        }
    }
    eprintln!("{lowered} of {n} lower, {eliding} of them elide copies");
    assert!(lowered * 2 >= n, "{lowered}");
    assert!(eliding * 4 >= lowered, "only {eliding} of {lowered} elide");
}
