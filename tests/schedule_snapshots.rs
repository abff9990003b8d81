//! Snapshots of the schedule text of every graph in graphs/ under each policy, and of
//! the error text of every graph in graphs/errors/. Review changes with
//! `cargo insta review`.

use offload_sched::cli::{prepare, PolicyArg, SchedArgs};
use offload_sched::lower::lower;
use offload_sched::schedule::{schedule, ScheduleOptions, SyncPolicy};
use offload_sched::verify::verify;

fn args(policy: PolicyArg) -> SchedArgs {
    SchedArgs {
        policy,
        streams: 4,
        random_streams: None,
    }
}

#[test]
fn schedule_text_of_every_graph() {
    insta::glob!("../graphs", "*.toml", |path| {
        for (policy, name) in [
            (PolicyArg::PerOp, "per-op"),
            (PolicyArg::PerRegion, "per-region"),
            (PolicyArg::Minimal, "minimal"),
        ] {
            let (_, _, s) = prepare(path, &args(policy))
                .unwrap_or_else(|e| panic!("{}: {}", path.display(), e.0));
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
        let (_, program) = offload_sched::file::load(path).unwrap();
        let g = lower(&program).unwrap();
        let waits: Vec<usize> = [
            SyncPolicy::Minimal,
            SyncPolicy::PerRegion,
            SyncPolicy::PerOp,
        ]
        .into_iter()
        .map(|policy| {
            for seed in 0..5 {
                let s = schedule(
                    &g,
                    &ScheduleOptions {
                        policy,
                        streams_per_device: 4,
                        random_streams: Some(seed),
                    },
                );
                verify(&g, &s).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            }
            let s = schedule(
                &g,
                &ScheduleOptions {
                    policy,
                    ..ScheduleOptions::default()
                },
            );
            s.host_waits().count()
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
        let e = prepare(path, &args(PolicyArg::Minimal))
            .err()
            .unwrap_or_else(|| panic!("{} must fail", path.display()));
        // Paths are relative to the crate so the text is the same on every machine.
        insta::assert_snapshot!(e.0.replace(env!("CARGO_MANIFEST_DIR"), "."));
    });
}
