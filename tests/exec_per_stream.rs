//! Threaded issue — [`IssueMode::PerStream`] (one issuing thread per stream) and
//! [`IssueMode::PerGroup`] (one per group of streams joined by events) — gives the same
//! results as serial issue: every graph of `graphs/` under every policy and random
//! stream assignments, on the host plugin with random delays in its stream workers.

mod common;

use common::host;
use offload_sched::exec::{execute, ExecError, ExecOptions, IssueMode};
use offload_sched::schedule::{Schedule, ScheduleOptions, Step, SyncPolicy};
use offload_sched::Plan;

/// Per stream, the device ops of `s` in schedule order.
fn per_stream_order(s: &Schedule) -> Vec<Vec<u32>> {
    let mut v = vec![Vec::new(); s.streams.len()];
    for step in &s.steps {
        if let Step::Op(op) = step {
            if let Some(st) = s.op_stream[op.index()] {
                v[st.index()].push(op.0);
            }
        }
    }
    v
}

#[test]
fn every_graph_per_stream_equals_the_reference_and_serial_issue() {
    every_graph_equals_the_reference_and_serial_issue(IssueMode::PerStream);
}

#[test]
fn every_graph_per_group_equals_the_reference_and_serial_issue() {
    let threaded = every_graph_equals_the_reference_and_serial_issue(IssueMode::PerGroup);
    // Runs whose streams form several groups (the others are issued serially); counted
    // on this tree's graphs and schedules.
    assert!(threaded >= 10, "{threaded} threaded runs");
    eprintln!("per-group: {threaded} of 180 runs threaded");
}

/// Runs every graph under every policy and two random stream assignments with `issue`;
/// returns how many runs were issued by more than one thread.
fn every_graph_equals_the_reference_and_serial_issue(issue: IssueMode) -> usize {
    let (mut runs, mut threaded) = (0, 0);
    for (name, plan) in common::plans_without_spin() {
        let g = plan.graph();
        let want = plan
            .reference()
            .unwrap_or_else(|e| panic!("{name}: reference: {}", e.render()));
        let mut options: Vec<ScheduleOptions> = SyncPolicy::ALL
            .iter()
            .map(|&policy| ScheduleOptions {
                policy,
                ..ScheduleOptions::default()
            })
            .collect();
        for seed in [1, 2] {
            options.push(ScheduleOptions {
                random_streams: Some(seed),
                ..ScheduleOptions::default()
            });
        }
        for (i, o) in options.iter().enumerate() {
            let plan = plan.reschedule(o).unwrap();
            let s = plan.schedule();
            let what = format!("{name} {} #{i}", s.policy);
            let p = host(g.devices, Some(7 + i as u64));
            let r = common::run_checked(&what, &plan, &p, issue, &want);
            match issue {
                // A plan with a taskgraph is replayed: graphs launched from one thread.
                _ if r.replay.is_some() => {
                    assert!(!g.taskgraphs.is_empty(), "{what}");
                    assert_eq!((r.issue, r.issue_threads), (IssueMode::Serial, 1), "{what}");
                }
                IssueMode::PerStream => {
                    assert_eq!(r.issue, IssueMode::PerStream, "{what}");
                    assert_eq!(r.issue_threads, s.used_streams(), "{what}");
                }
                _ if r.issue == IssueMode::PerGroup => {
                    assert!(r.stream_groups >= 2, "{what}");
                    assert_eq!(r.issue_threads, r.stream_groups, "{what}");
                }
                _ => {
                    // One group: issued serially.
                    assert_eq!(r.issue, IssueMode::Serial, "{what}");
                    assert_eq!((r.issue_threads, r.issue_waits), (1, 0), "{what}");
                }
            }
            if r.issue_threads > 1 {
                threaded += 1;
            }
            let serial = plan
                .run_with(&host(g.devices, None), IssueMode::Serial)
                .unwrap_or_else(|e| panic!("{what} serial: {}", e.render()));
            assert_eq!(serial.issue, IssueMode::Serial);
            assert_eq!(r.counts, serial.counts, "{what}: counts differ");
            assert_eq!(
                (r.bytes_h2d, r.bytes_d2h),
                (serial.bytes_h2d, serial.bytes_d2h),
                "{what}"
            );
            // Every op once; on each stream in schedule order.
            let mut seen = vec![false; g.ops.len()];
            for t in &r.ops {
                assert!(!std::mem::replace(&mut seen[t.op.index()], true), "{what}");
            }
            assert!(seen.iter().all(|&x| x), "{what}: an op is missing");
            let mut order = vec![Vec::new(); s.streams.len()];
            for t in &r.ops {
                if let Some(st) = t.stream {
                    order[st.index()].push(t.op.0);
                }
            }
            assert_eq!(order, per_stream_order(s), "{what}: issue order per stream");
            runs += 1;
        }
    }
    assert_eq!(runs, 42 * 5);
    threaded
}

#[test]
fn auto_issues_serially_on_the_host_plugin() {
    let plan = common::plan_without_spin("regions64.toml");
    assert!(plan.schedule().used_streams() > 1);
    let r = plan.run(&host(1, None)).unwrap();
    assert_eq!(r.issue, IssueMode::Serial);
}

/// A schedule broken by hand, so `exec::execute` (which checks the schedule's fit) rather
/// than a plan.
#[test]
fn a_wait_before_its_record_is_the_same_error_in_both_modes() {
    let plan = common::plan_without_spin("case_e02.toml");
    let g = plan.graph();
    let mut s = plan.schedule().clone();
    let rec = s
        .steps
        .iter()
        .position(|st| matches!(st, Step::Record { .. }))
        .expect("case_e02 records events");
    let Step::Record { event, .. } = s.steps[rec] else {
        unreachable!()
    };
    let w = s
        .steps
        .iter()
        .position(|st| matches!(st, Step::Wait { event: e, .. } if *e == event))
        .unwrap();
    let wait = s.steps.remove(w);
    s.steps.insert(rec, wait);
    for issue in [IssueMode::Serial, IssueMode::PerStream, IssueMode::PerGroup] {
        let p = host(g.devices, None);
        let opts = ExecOptions {
            kernel_dir: Some(common::graphs_dir()),
            issue,
            ..ExecOptions::default()
        };
        let e = execute(g, &s, &p, &opts).unwrap_err();
        assert!(matches!(e, ExecError::Schedule { .. }), "{issue:?}: {e}");
        assert!(
            e.to_string().contains("before it is recorded"),
            "{issue:?}: {e}"
        );
        assert_eq!(p.live_device_allocs(), 0, "{issue:?}");
        assert_eq!(p.live_host_allocs(), 0, "{issue:?}");
    }
}

/// The first error stops every issuing thread before its next step: with the first alloc
/// failing in a 400-region run, only the few steps already under way on other streams
/// are issued (serial issue issues nothing more; before this rule, per-stream issue went
/// on with hundreds of copies and launches).
#[test]
fn issuing_stops_soon_after_the_first_error() {
    use offload_sched::plugin::faulty::{FaultKind, FaultyPlugin};
    let plan = Plan::new(
        offload_sched::model::saxpy_regions(400, 256),
        &ScheduleOptions::default(),
    )
    .unwrap();
    assert_eq!(plan.schedule().used_streams(), 4);
    let r = plan.run_with(&host(1, None), IssueMode::PerGroup).unwrap();
    assert_eq!((r.issue, r.issue_threads), (IssueMode::PerGroup, 4));
    for issue in [IssueMode::Serial, IssueMode::PerStream, IssueMode::PerGroup] {
        // A thread preempted between its failing call and recording the failure lets the
        // others go on meanwhile (seen on 2 loaded cores): the rule is judged on the best
        // of 5 runs for threaded issue; serial issue is exact on every run.
        let tries = if issue == IssueMode::Serial { 1 } else { 5 };
        let mut fewest = u64::MAX;
        for _ in 0..tries {
            let p = FaultyPlugin::new(host(1, None), FaultKind::Alloc, 1);
            let e = plan.run_with(&p, issue).unwrap_err();
            assert!(e.to_string().contains("injected fault"), "{issue:?}: {e}");
            let after: u64 = [FaultKind::Submit, FaultKind::Launch, FaultKind::Retrieve]
                .into_iter()
                .map(|k| p.calls(k))
                .sum();
            fewest = fewest.min(after);
            // Nothing leaks, whatever the timing.
            assert_eq!(p.allocs(), p.frees(), "{issue:?}");
            assert_eq!(p.inner().live_device_allocs(), 0, "{issue:?}");
        }
        // Each of the other 3 threads may finish the region it is in (4 ops) and start
        // one more step before it sees the failure.
        assert!(
            fewest <= 3 * 5,
            "{issue:?}: {fewest} copies and launches issued (fewest of {tries} runs)"
        );
    }
}

/// A plugin call that panics on an issuing thread stops the other threads and the
/// panic reaches the caller (no hang), as with serial issue.
#[test]
fn a_panicking_plugin_call_propagates_instead_of_hanging() {
    use offload_sched::plugin::faulty::{FaultKind, FaultyPlugin};
    use std::sync::mpsc;
    let plan = Plan::new(
        offload_sched::model::saxpy_regions(64, 256),
        &ScheduleOptions::default(),
    )
    .unwrap();
    for issue in [IssueMode::Serial, IssueMode::PerStream, IssueMode::PerGroup] {
        let (tx, rx) = mpsc::channel();
        let plan = plan.clone();
        std::thread::spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let p = FaultyPlugin::panicking(host(1, None), FaultKind::Launch, 3);
                plan.run_with(&p, issue).is_ok()
            }));
            let _ = tx.send(r.is_err());
        });
        let panicked = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("{issue:?}: execute hung after a plugin panic"));
        assert!(panicked, "{issue:?}: the panic did not reach the caller");
    }
}
