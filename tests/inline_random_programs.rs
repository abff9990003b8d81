//! The one-thread mode on random programs (`tests/common/programs.rs`): host
//! tasks, taskwaits, `target update` on 1-3 host lanes, run with the host plugin's
//! `inline_streams` and `HostOps::Inline` (every deferred lane), serial / per-stream /
//! per-group issue, under jitter, against the reference; each run under a timeout.

mod common;
#[path = "common/programs.rs"]
mod programs;

use offload_sched::exec::{execute, Buffers, ExecOptions, HostOps, IssueMode};
use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
use offload_sched::schedule::{ScheduleOptions, SyncPolicy};
use offload_sched::Plan;
use programs::{build, gen, Gen};
use proptest::prelude::*;
use std::time::Duration;

/// Runs `f` on a thread; panics naming `what` if it takes more than 60 s (a hang).
fn within<T: Send + 'static>(what: String, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let _ = tx.send(r);
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(Ok(v)) => v,
        Ok(Err(p)) => std::panic::resume_unwind(p),
        Err(_) => panic!("{what}: hangs (no result in 60 s)"),
    }
}

fn check(plan: std::sync::Arc<Plan>, want: std::sync::Arc<Buffers>, lanes: u32, seed: u64) {
    let devices = plan.graph().devices.max(1);
    let hosts = plan.graph().ops.iter().filter(|o| o.kind.is_host()).count();
    let mut deferred: Vec<Option<u32>> = vec![None];
    deferred.extend((0..lanes).map(Some));
    for d in deferred {
        for issue in [IssueMode::Serial, IssueMode::PerStream, IssueMode::PerGroup] {
            for inline_streams in [true, false] {
                let what = format!(
                    "{} lanes {lanes} deferred {d:?} {issue:?} inline_streams {inline_streams} seed {seed}\n{}",
                    plan.graph().name,
                    plan.schedule()
                );
                let (plan, want) = (plan.clone(), want.clone());
                let w = what.clone();
                within(what, move || {
                    let p = HostPlugin::new(HostPluginOptions {
                        devices,
                        delay_jitter: Some(seed),
                        inline_streams,
                        ..HostPluginOptions::default()
                    });
                    let opts = ExecOptions {
                        kernel_dir: plan.kernel_dir().map(Into::into),
                        issue,
                        host_ops: HostOps::Inline { deferred_lane: d },
                        ..ExecOptions::default()
                    };
                    for _ in 0..2 {
                        let r = execute(plan.graph(), plan.schedule(), &p, &opts)
                            .unwrap_or_else(|e| panic!("{w}: {e}"));
                        offload_sched::reference::check(&r.buffers, &want)
                            .unwrap_or_else(|e| panic!("{w}: {e}"));
                        assert_eq!(r.counts.host_ops, hosts, "{w}");
                    }
                    assert_eq!(p.live_device_allocs(), 0, "{w}: device memory leaked");
                    assert_eq!(p.live_host_allocs(), 0, "{w}: host memory leaked");
                });
            }
        }
    }
}

fn properties(g: &Gen, seed: u64) {
    let program = build(g);
    for lanes in [1u32, 2, 3] {
        let opts = ScheduleOptions {
            policy: SyncPolicy::Minimal,
            streams_per_device: 4,
            random_streams: seed.is_multiple_of(2).then_some(seed),
            host_lanes: lanes,
        };
        let Ok(plan) = Plan::new(program.clone(), &opts) else {
            return;
        };
        let want = plan.reference().expect("reference runs");
        check(plan.into(), want.into(), lanes, seed);
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn random_programs_inline_match_the_reference(g in gen(), seed in any::<u64>()) {
        properties(&g, seed);
    }
}

/// A host task that fails, with nothing after it awaiting it (so on a deferred lane it
/// runs only at the end), beside another host task and a kernel; and a kernel that
/// fails with a host task reading its result: each run fails naming the failing op,
/// never hangs, never succeeds, under every deferred lane and issue mode, inline streams
/// on and off.
#[test]
fn failures_inline_are_reported_under_every_deferred_lane() {
    use offload_sched::model::{Init, KernelArgs, KernelSig, MapType, ProgramBuilder};
    let mut p = ProgramBuilder::new("host_fails");
    let x = p.buf_init::<f32>("x", 64, Init::Iota);
    let y = p.buf_init::<f32>("y", 64, Init::Iota);
    let z = p.buf_init::<f32>("z", 64, Init::Iota);
    drop(
        p.target("k", "increment")
            .arg(x)
            .map(MapType::ToFrom, x)
            .nowait(),
    );
    p.host_fn("ok_task", &[], &[y.into()], |_| Ok(()));
    p.host_fn("boom", &[], &[z.into()], |_| {
        Err("injected host failure".into())
    });
    let host_fails = p.build();

    let mut p = ProgramBuilder::new("kernel_fails");
    p.kernel(
        KernelSig::rust("bad")
            .reads_writes::<f32>()
            .body(|_: &mut KernelArgs| Err("injected kernel failure".into())),
    );
    let x = p.buf_init::<f32>("x", 64, Init::Iota);
    let y = p.buf_init::<f32>("y", 64, Init::Iota);
    drop(p.target("kbad", "bad").arg(x).map(MapType::ToFrom, x));
    p.host_fn("reads_x", &[x.into()], &[y.into()], |_| Ok(()));
    drop(
        p.target("after", "increment")
            .arg(y)
            .map(MapType::ToFrom, y),
    );
    let kernel_fails = p.build();

    for (program, needle) in [
        (host_fails, "injected host failure"),
        (kernel_fails, "injected kernel failure"),
    ] {
        let opts = ScheduleOptions {
            host_lanes: 2,
            ..ScheduleOptions::default()
        };
        let plan = std::sync::Arc::new(Plan::new(program, &opts).unwrap());
        for d in [None, Some(0), Some(1)] {
            for issue in [IssueMode::Serial, IssueMode::PerStream, IssueMode::PerGroup] {
                for inline_streams in [true, false] {
                    let what = format!(
                        "{} deferred {d:?} {issue:?} inline_streams {inline_streams}\n{}",
                        plan.graph().name,
                        plan.schedule()
                    );
                    let w = what.clone();
                    let plan = plan.clone();
                    within(what, move || {
                        let p = HostPlugin::new(HostPluginOptions {
                            inline_streams,
                            ..HostPluginOptions::default()
                        });
                        let opts = ExecOptions {
                            issue,
                            host_ops: HostOps::Inline { deferred_lane: d },
                            ..ExecOptions::default()
                        };
                        let e = execute(plan.graph(), plan.schedule(), &p, &opts)
                            .err()
                            .unwrap_or_else(|| panic!("{w}: the run succeeded"));
                        assert!(e.to_string().contains(needle), "{w}: {e}");
                        assert_eq!(p.live_device_allocs(), 0, "{w}: device memory leaked");
                    });
                }
            }
        }
    }
}

/// `PROPTEST_CASES` cases, 16 when unset (each program runs 2 × 3 × 3 × 2 × lanes ways).
fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}
