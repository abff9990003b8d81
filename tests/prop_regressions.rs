//! Named regression tests for the failures `tests/prop_programs.rs` found (each is the
//! shrunk program of `tests/prop_programs.proptest-regressions`, rebuilt by hand).

mod common;

use offload_sched::exec::IssueMode;
use offload_sched::model::{DependType, ElemType, Init, MapType, Program, ProgramBuilder};
use offload_sched::plugin::Plugin;
use offload_sched::schedule::{ScheduleOptions, SyncPolicy};
use offload_sched::Plan;

/// Runs `plan` under every policy, with the default pool and random streams, and checks
/// the result against the reference; returns the number of cross-device event waits
/// seen over all runs.
fn run_everywhere(plan: &Plan) -> usize {
    let want = plan.reference().unwrap();
    let mut cross = 0;
    for policy in SyncPolicy::ALL {
        for random in [None, Some(0), Some(1), Some(2), Some(3)] {
            let plan = plan
                .reschedule(&ScheduleOptions {
                    policy,
                    streams_per_device: 4,
                    random_streams: random,
                    host_lanes: 1,
                })
                .unwrap();
            let s = plan.schedule();
            cross += s
                .event_waits()
                .filter(|(e, w)| {
                    let rec = s.steps.iter().find_map(|st| match st {
                        offload_sched::schedule::Step::Record { event, stream } if event == e => {
                            Some(*stream)
                        }
                        _ => None,
                    });
                    rec.is_some_and(|r| s.streams[r.index()].device != s.streams[w.index()].device)
                })
                .count();
            let plugin = common::host(plan.graph().devices, Some(7));
            let what = format!("{policy} random={random:?}");
            common::run_checked(&what, &plan, &plugin, IssueMode::Auto, &want);
        }
    }
    cross
}

/// Shrunk case `43effbef`: region r1 on device 1 then r2 on device 0 both increment
/// `b0`. The D2H of r1 (device 1) must precede the H2D of r2 (device 0): an event
/// recorded on a device-1 stream and waited on by a device-0 stream. The host plugin
/// refused the wait ("invalid event 0 (of device 1, used on device 0)"), although
/// cuStreamWaitEvent allows an event of another device, and the schedule verifies.
fn two_device_chain() -> Program {
    let mut p = ProgramBuilder::new("two_device_chain");
    p.devices(2);
    let b = p.buffer("b0", ElemType::F32, 6, Init::Zeros);
    p.target("r1", "increment")
        .device(1)
        .arg(b)
        .map(MapType::ToFrom, b);
    p.target("r2", "increment")
        .device(0)
        .arg(b)
        .map(MapType::ToFrom, b)
        .nowait();
    p.build()
}

#[test]
fn regression_wait_on_an_event_of_another_device() {
    let plan = Plan::new(two_device_chain(), &ScheduleOptions::default()).unwrap();
    assert!(
        run_everywhere(&plan) > 0,
        "no cross-device event wait exercised"
    );
    let want = plan.reference().unwrap();
    assert_eq!(want.as_f32("b0").unwrap(), [2.0; 6]);
}

#[test]
fn host_plugin_accepts_a_cross_device_wait_but_not_a_cross_device_record() {
    let p = common::host(2, None);
    let s0 = p.create_streams(0, 1).unwrap()[0];
    let s1 = p.create_streams(1, 1).unwrap()[0];
    let e1 = p.create_event(1).unwrap();
    p.record_event(s1, e1).unwrap();
    p.wait_event(s0, e1).unwrap();
    p.synchronize(s0).unwrap();
    let err = p.record_event(s0, e1).unwrap_err().to_string();
    assert!(err.contains("of device 1, used on device 0"), "{err}");
}

/// Shrunk case `cfa4382f`: inside `target data map(tofrom: b0)` (device 0), r1 on
/// device 1 (`depend(inout: b0)`) then r2 on device 0 (nowait). An event recorded on
/// device 0 had its last use in a wait on device 1; the executor returned the plugin
/// event to device 1's pool, and a later record on device 1 took it: "record event:
/// invalid event 0 (of device 0, used on device 1)". Pooled events now go back to the
/// pool of the device they were created for.
#[test]
fn regression_pooled_event_returns_to_its_own_device() {
    let mut p = ProgramBuilder::new("pool_device");
    p.devices(2);
    let b = p.buffer("b0", ElemType::F32, 2, Init::Zeros);
    let m = p.map(MapType::ToFrom, b);
    p.target_data("data1", vec![m], |p| {
        p.target("r1", "increment")
            .device(1)
            .arg(b)
            .map(MapType::ToFrom, b)
            .depend(DependType::InOut, b);
        p.target("r2", "increment")
            .device(0)
            .arg(b)
            .map(MapType::ToFrom, b)
            .nowait();
    });
    let plan = Plan::new(p.build(), &ScheduleOptions::default()).unwrap();
    assert!(
        run_everywhere(&plan) > 0,
        "no cross-device event wait exercised"
    );
}
