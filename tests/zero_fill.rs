//! Fresh device storage reads as zeros on every plugin (`DeviceAlloc::zero`,
//! `Plugin::fill_zero`). The host plugin with `poison` starts every allocation filled
//! with 0xA5 instead, as a GPU's recycled memory holds garbage, so a run equals the
//! reference interpreter (fresh storage = zeros) only if the lowering zero-fills every
//! allocation the program reads before writing.

mod common;

use offload_sched::exec::{execute, ExecOptions};
use offload_sched::model::{ElemType, Init, MapType, ProgramBuilder};
use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
use offload_sched::reference;
use offload_sched::schedule::{ScheduleOptions, SyncPolicy};
use offload_sched::Plan;

fn poisoned(devices: u32) -> HostPlugin {
    HostPlugin::new(HostPluginOptions {
        devices,
        poison: Some(0xA5),
        ..HostPluginOptions::default()
    })
}

/// Every graph of graphs/, under every policy and random streams, on poisoned memory.
#[test]
fn every_graph_equals_the_reference_on_poisoned_memory() {
    for (name, plan) in common::plans_without_spin() {
        let want = plan.reference().unwrap();
        for (policy, random) in [
            (SyncPolicy::PerOp, None),
            (SyncPolicy::Minimal, None),
            (SyncPolicy::Minimal, Some(3)),
        ] {
            let plan = plan
                .reschedule(&ScheduleOptions {
                    policy,
                    random_streams: random,
                    ..ScheduleOptions::default()
                })
                .unwrap();
            let got = plan.run(&poisoned(plan.graph().devices)).unwrap();
            reference::check(&got.buffers, &want)
                .unwrap_or_else(|e| panic!("{name} {policy} {random:?}: {e}"));
        }
    }
}

/// Kernels that write only part of an `out` section (the shortest buffer argument's
/// length, `out[0]` of `reduce_sum`): the rest is read back by the D2H, so the storage
/// is zero-filled; poison would show through otherwise.
#[test]
fn partly_written_outputs_are_zero_filled() {
    let mut p = ProgramBuilder::new("partial");
    let x = p.buffer("x", ElemType::I32, 64, Init::Iota);
    let y = p.buffer("y", ElemType::I32, 64, Init::Fill(3.0));
    let r = p.buffer("r", ElemType::I32, 8, Init::Fill(3.0));
    let full = p.buffer("full", ElemType::I32, 64, Init::Fill(3.0));
    let xs = offload_sched::model::Section::new(x, 0, 4);
    p.target("copy 4", "copy")
        .arg(xs)
        .arg(y)
        .map(MapType::To, xs)
        .map(MapType::From, y);
    p.target("sum", "reduce_sum")
        .arg(x)
        .arg(r)
        .map(MapType::To, x)
        .map(MapType::From, r);
    p.target("fill all", "fill")
        .arg(full)
        .num(7.0)
        .map(MapType::From, full);
    let plan = Plan::new(p.build(), &ScheduleOptions::default()).unwrap();
    let g = plan.graph();
    let zero: Vec<(String, bool)> = g
        .allocs
        .iter()
        .map(|a| (g.section_name(&a.section), a.zero))
        .collect();
    let flag = |s: &str| zero.iter().find(|(n, _)| n == s).unwrap().1;
    assert!(flag("y[0:64]"), "{zero:?}");
    assert!(flag("r[0:8]"), "{zero:?}");
    assert!(!flag("full[0:64]"), "{zero:?}");
    assert!(!flag("x[0:4]"), "{zero:?}");
    let got = plan.run(&poisoned(1)).unwrap();
    let y = got.as_i32("y").unwrap();
    assert_eq!(y[..4], [0, 1, 2, 3]);
    assert!(y[4..].iter().all(|&v| v == 0), "{y:?}");
    let r = got.as_i32("r").unwrap();
    assert_eq!(r[0], (0..64).sum::<i32>());
    assert!(r[1..].iter().all(|&v| v == 0), "{r:?}");
    assert!(got.as_i32("full").unwrap().iter().all(|&v| v == 7));
    // The same program without the zero fill: the poison shows (the test can fail). A
    // graph changed by hand, so `exec::execute` with the plan's schedule.
    let mut g2 = g.clone();
    for a in &mut g2.allocs {
        a.zero = false;
    }
    let bad = execute(&g2, plan.schedule(), &poisoned(1), &ExecOptions::default()).unwrap();
    assert_eq!(bad.as_i32("y").unwrap()[4], i32::from_ne_bytes([0xA5; 4]));
}
