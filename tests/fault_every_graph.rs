//! Fault injection over every graph of `graphs/` (issue 4): for every fault point a run
//! makes while it issues (`faulty::RUN_CALLS`: alloc with its zero fill, h2d, launch,
//! d2h, record, wait, synchronize, synchronize event, graph instantiate, graph launch,
//! graph update, peer copy) and every `k` from 1
//! to the number of calls of that kind in a clean run, the `k`-th call fails
//! ([`FaultyPlugin`] over the host plugin). Each run must return an error that names
//! the op and region (`region "`), free every device and host allocation it made,
//! leave no worker thread running once the plugin is dropped, and not panic.
//!
//! `montage-2mass-05d` (about 10 000 ops) is capped at the first and last
//! [`HUGE_CAP`] calls of each kind. Fault points exercised: 3 280 over 42 graphs with elision (3 992 with `--no-elide`)
//! (printed by the test and asserted exactly, so a change in any schedule shows here);
//! 512 of them are `jacobi_taskgraph`'s, which a one-shot run replays (a plan with a
//! taskgraph: 2 arena allocs, 3 graph instantiations, 502 graph launches of which 500
//! are the taskgraph's executions, 5 synchronizes).
//!
//! The same with one issuing thread per stream (`IssueMode::PerStream`), over the graphs
//! of up to 2 000 ops, at the first and last calls of each kind.

mod common;

use common::host;
use offload_sched::exec::IssueMode;
use offload_sched::plugin::faulty::{FaultKind, FaultyPlugin, RUN_CALLS};
use offload_sched::schedule::ScheduleOptions;
use offload_sched::Plan;

/// Calls per kind exercised at each end for the huge graph.
const HUGE_CAP: u64 = 5;

/// Total fault points this test exercises (see the module docs), with transfer elision
/// (the default): 3 992 with `--no-elide`, fewer with it since kept copies make no
/// Alloc, Submit or Free calls and dropped D2H no Retrieve.
const FAULT_POINTS: u64 = 3_280;

/// The tests here count the process's threads, so they must not run at the same time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| d.count())
        .unwrap_or(0)
}

fn plans() -> Vec<(String, Plan)> {
    common::plans_without_spin()
        .into_iter()
        .map(|(name, plan)| {
            // Random streams so that events (record / wait faults) occur in every graph
            // that has more than one region.
            let plan = plan
                .reschedule(&ScheduleOptions {
                    random_streams: Some(1),
                    ..ScheduleOptions::default()
                })
                .unwrap();
            (name, plan)
        })
        .collect()
}

/// One faulty run: the fault must be injected and handled as the module docs require.
fn one(name: &str, plan: &Plan, kind: FaultKind, k: u64, issue: IssueMode) {
    let before = threads();
    {
        let p = FaultyPlugin::new(host(plan.graph().devices, None), kind, k);
        let r = plan.run_with(&p, issue);
        assert!(p.injected(), "{name} {kind:?} k={k}: no fault injected");
        let msg = match r {
            Ok(_) => panic!("{name} {kind:?} k={k}: the run succeeded"),
            Err(e) => common::exec_error(e).to_string(),
        };
        assert!(
            msg.contains("injected fault"),
            "{name} {kind:?} k={k}: {msg}"
        );
        assert!(msg.contains("region \""), "{name} {kind:?} k={k}: {msg}");
        assert_eq!(p.allocs(), p.frees(), "{name} {kind:?} k={k}: {msg}");
        assert_eq!(p.host_allocs(), p.host_frees(), "{name} {kind:?} k={k}");
        assert_eq!(p.inner().live_device_allocs(), 0, "{name} {kind:?} k={k}");
        assert_eq!(p.inner().live_host_allocs(), 0, "{name} {kind:?} k={k}");
    }
    // A joined thread's /proc entry can outlive pthread_join by a moment: allow 2 s.
    // Fewer threads than before is fine: a thread of the test harness that was ending
    // when `before` was counted (the other test's, say) may be gone by now.
    let t0 = std::time::Instant::now();
    while threads() > before && t0.elapsed().as_secs() < 2 {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let after = threads();
    assert!(
        after <= before,
        "{name} {kind:?} k={k}: worker threads left ({after} threads, {before} before)"
    );
}

#[test]
fn every_fault_point_of_every_graph_fails_cleanly() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    // Start rayon's global pool (large host kernels use it; its threads live for the
    // whole process) so that the thread count before and after each run is comparable.
    rayon::join(|| (), || ());
    let mut total = 0u64;
    for (name, plan) in plans() {
        let clean = FaultyPlugin::new(host(plan.graph().devices, None), FaultKind::Alloc, 0);
        plan.run(&clean)
            .unwrap_or_else(|e| panic!("{name}: clean run failed: {}", e.render()));
        let huge = plan.graph().ops.len() > 5000;
        let mut line = format!("{name}:");
        for kind in RUN_CALLS {
            let n = clean.calls(kind);
            let ks: Vec<u64> = if huge && n > 2 * HUGE_CAP {
                (1..=HUGE_CAP).chain(n - HUGE_CAP + 1..=n).collect()
            } else {
                (1..=n).collect()
            };
            for &k in &ks {
                one(&name, &plan, kind, k, IssueMode::Serial);
            }
            total += ks.len() as u64;
            line += &format!(" {kind:?}={}/{n}", ks.len());
        }
        eprintln!("{line}");
    }
    eprintln!("fault points exercised: {total}");
    assert_eq!(total, FAULT_POINTS);
}

/// The same with one issuing thread per stream ([`IssueMode::PerStream`]), over every
/// graph of up to 2 000 ops, at the first and last [`PER_STREAM_CAP`] calls of each kind.
/// Which stream's call is the k-th now depends on thread timing, so this also covers
/// faults while other streams' threads are mid-issue. A clean per-stream run must make
/// exactly the calls of a clean serial run, kind by kind.
#[test]
fn per_stream_fault_points_fail_cleanly() {
    const PER_STREAM_CAP: u64 = 4;
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    rayon::join(|| (), || ());
    let mut total = 0u64;
    for (name, plan) in plans() {
        let devices = plan.graph().devices;
        if plan.graph().ops.len() > 2000 {
            continue;
        }
        let serial = FaultyPlugin::new(host(devices, None), FaultKind::Alloc, 0);
        plan.run_with(&serial, IssueMode::Serial).unwrap();
        let clean = FaultyPlugin::new(host(devices, None), FaultKind::Alloc, 0);
        let r = plan
            .run_with(&clean, IssueMode::PerStream)
            .unwrap_or_else(|e| panic!("{name}: clean per-stream run failed: {}", e.render()));
        // A plan with a taskgraph is replayed: graphs launched from one thread.
        if r.replay.is_none() {
            assert_eq!(r.issue, IssueMode::PerStream, "{name}");
        }
        for kind in RUN_CALLS {
            let n = clean.calls(kind);
            assert_eq!(n, serial.calls(kind), "{name} {kind:?}: calls differ");
            let ks: Vec<u64> = if n > 2 * PER_STREAM_CAP {
                (1..=PER_STREAM_CAP)
                    .chain(n - PER_STREAM_CAP + 1..=n)
                    .collect()
            } else {
                (1..=n).collect()
            };
            for &k in &ks {
                one(&name, &plan, kind, k, IssueMode::PerStream);
            }
            total += ks.len() as u64;
        }
    }
    eprintln!("per-stream fault points exercised: {total}");
    assert!(total > 500, "only {total} fault points");
}
