//! Unit tests of the executor's entry points (`exec/mod.rs`).
use super::*;
use crate::schedule::{schedule, ScheduleOptions, SyncPolicy};

#[test]
fn on_issue_sees_every_device_op_once_with_its_stream_and_seq() {
    use crate::plugin::host::{HostPlugin, HostPluginOptions};
    use std::sync::{Arc, Mutex};
    let g = crate::lower::lower(&crate::model::saxpy_regions(8, 256)).unwrap();
    let s = schedule(&g, &ScheduleOptions::default());
    let want: Vec<OpId> = g.op_ids().filter(|&o| !g.op(o).kind.is_host()).collect();
    for issue in [IssueMode::Serial, IssueMode::PerStream, IssueMode::PerGroup] {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let on_issue = OnIssue(Arc::new(move |op, h, seq| {
            log.lock().unwrap().push((op, h, seq))
        }));
        let opts = ExecOptions {
            issue,
            on_issue: Some(on_issue),
            ..ExecOptions::default()
        };
        let p = HostPlugin::new(HostPluginOptions::default());
        execute(&g, &s, &p, &opts).unwrap();
        let mut seen = seen.lock().unwrap().clone();
        seen.sort();
        let ops: Vec<OpId> = seen.iter().map(|x| x.0).collect();
        assert_eq!(ops, want, "{issue:?}");
        // Each (stream, seq) names one call.
        let mut keys: Vec<_> = seen.iter().map(|x| (x.1, x.2)).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), want.len(), "{issue:?}");
    }
}

#[test]
fn auto_issues_per_group_only_with_many_device_steps_per_host_step() {
    let g = crate::lower::lower(&crate::model::saxpy_regions(64, 4096)).unwrap();
    let sched = |policy, streams_per_device| {
        schedule(
            &g,
            &ScheduleOptions {
                policy,
                streams_per_device,
                random_streams: None,
                host_lanes: 1,
            },
        )
    };
    let auto = |s: &Schedule| auto_per_group(s, &threads::issue_groups(s));
    // Independent regions: 4 streams, no events, 4 groups.
    assert_eq!(
        threads::issue_groups(&sched(SyncPolicy::Minimal, 4)),
        [0, 1, 2, 3]
    );
    assert!(auto(&sched(SyncPolicy::Minimal, 4)));
    assert!(!auto(&sched(SyncPolicy::Minimal, 1)));
    assert!(!auto(&sched(SyncPolicy::PerRegion, 4)));
    assert!(!auto(&sched(SyncPolicy::PerOp, 4)));
}
