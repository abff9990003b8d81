//! Snapshots of the schedule text of every graph in graphs/ under each policy, and of
//! the error text of every graph in graphs/errors/. Review changes with
//! `cargo insta review`.

use offload_sched::schedule::{ScheduleOptions, SyncPolicy};
use offload_sched::Plan;

fn options(policy: SyncPolicy) -> ScheduleOptions {
    ScheduleOptions {
        policy,
        streams_per_device: 4,
        random_streams: None,
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

#[test]
fn host_waits_minimal_le_per_region_le_per_op_and_random_streams_verify() {
    insta::glob!("../graphs", "*.toml", |path| {
        let plan = Plan::from_file(path, &ScheduleOptions::default()).unwrap();
        let waits: Vec<usize> = [
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
                })
                .unwrap_or_else(|e| panic!("{}: {}", path.display(), e.render()));
            }
            let s = plan.reschedule(&options(policy)).unwrap();
            s.schedule().host_waits().count()
        })
        .collect();
        assert!(
            waits[0] <= waits[1] && waits[1] <= waits[2],
            "{}: host waits minimal/per-region/per-op = {waits:?}",
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
