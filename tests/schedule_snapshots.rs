//! Snapshots of the schedule text of every graph in graphs/ under each policy, and of
//! the error text of every graph in graphs/errors/. Review changes with
//! `cargo insta review`.

use offload_sched::schedule::{ScheduleOptions, Step, SyncPolicy};
use offload_sched::Plan;

fn options(policy: SyncPolicy) -> ScheduleOptions {
    ScheduleOptions {
        policy,
        streams_per_device: 4,
        random_streams: None,
        host_lanes: 1,
    }
}

#[test]
fn schedule_text_of_every_graph() {
    insta::glob!("../graphs", "*.toml", |path| {
        for (policy, name) in [
            (SyncPolicy::PerOp, "per-op"),
            (SyncPolicy::PerRegion, "per-region"),
            (SyncPolicy::Minimal, "minimal"),
        ] {
            let s = Plan::from_file(path, &options(policy))
                .unwrap_or_else(|e| panic!("{}: {}", path.display(), e.render()));
            let stem = path.file_stem().unwrap_or_default().to_string_lossy();
            insta::with_settings!({ snapshot_suffix => format!("{stem}-{name}") }, {
                insta::assert_snapshot!(s.to_string());
            });
        }
    });
}

/// Host waits on whole streams or devices: minimal ≤ per-region ≤ per-op; and all host
/// waits, those on events included, minimal ≤ per-op. Minimal's host waits on events are
/// counted apart: one replaces the first part of a stream wait (the host blocks for a
/// prefix of the stream, then for the rest only if a later host op needs it), so D04's
/// host task waits on the H2D and its taskwait on the rest where per-region waits once
/// for everything. Only minimal waits on events.
#[test]
fn host_waits_minimal_le_per_region_le_per_op_and_random_streams_verify() {
    insta::glob!("../graphs", "*.toml", |path| {
        let plan = Plan::from_file(path, &ScheduleOptions::default()).unwrap();
        let waits: Vec<(usize, usize)> = [
            SyncPolicy::Minimal,
            SyncPolicy::PerRegion,
            SyncPolicy::PerOp,
        ]
        .into_iter()
        .map(|policy| {
            for seed in 0..5 {
                // Verified by the plan.
                plan.reschedule(&ScheduleOptions {
                    policy,
                    streams_per_device: 4,
                    random_streams: Some(seed),
                    host_lanes: 1,
                })
                .unwrap_or_else(|e| panic!("{}: {}", path.display(), e.render()));
            }
            let s = plan.reschedule(&options(policy)).unwrap();
            let all = s.schedule().host_waits().count();
            let on_events = s
                .schedule()
                .host_waits()
                .filter(|w| matches!(w, Step::HostWaitEvent { .. }))
                .count();
            assert!(
                on_events == 0 || policy == SyncPolicy::Minimal,
                "{}: {policy} waits on events",
                path.display()
            );
            (all - on_events, all)
        })
        .collect();
        assert!(
            waits[0].0 <= waits[1].0 && waits[1].0 <= waits[2].0 && waits[0].1 <= waits[2].1,
            "{}: host waits (on streams or devices, all) minimal/per-region/per-op = {waits:?}",
            path.display()
        );
    });
}

#[test]
fn error_text_of_every_bad_graph() {
    insta::glob!("../graphs/errors", "*.toml", |path| {
        let e = Plan::from_file(path, &options(SyncPolicy::Minimal))
            .err()
            .unwrap_or_else(|| panic!("{} must fail", path.display()))
            .render();
        // Paths are relative to the crate so the text is the same on every machine.
        insta::assert_snapshot!(e.replace(env!("CARGO_MANIFEST_DIR"), "."));
    });
}
