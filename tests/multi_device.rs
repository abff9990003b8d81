//! Several devices on the host plugin (separate memories per device): data written on
//! one device and read on another moves by peer copy; checked against values computed
//! by hand and against the reference interpreter, with delay jitter.

mod common;

use offload_sched::exec::IssueMode;
use offload_sched::model::{ElemType, Init, MapType, Program, ProgramBuilder};
use offload_sched::schedule::ScheduleOptions;
use offload_sched::Plan;

const N: u64 = 256;

/// `x` entered on device 1 and doubled there (not copied back); a region on device 0
/// then copies `x` into `y`. The latest `x` is on device 1, so device 0 must see `2·i`,
/// not the host's stale `i`.
fn written_on_one_read_on_other() -> Program {
    let mut p = ProgramBuilder::new("peer");
    p.devices(2);
    let x = p.buffer("x", ElemType::F32, N, Init::Iota);
    let y = p.buffer("y", ElemType::F32, N, Init::Zeros);
    let to_x = vec![p.map(MapType::To, x)];
    p.enter_data("in1", to_x).device(1);
    p.target("double1", "scale").num(2.0).arg(x).device(1);
    p.target("copy0", "copy")
        .arg(x)
        .arg(y)
        .map(MapType::To, x)
        .map(MapType::From, y)
        .device(0);
    let from_x = vec![p.map(MapType::From, x)];
    p.exit_data("out1", from_x).device(1);
    p.build()
}

#[test]
fn a_read_on_device_0_sees_the_write_on_device_1() {
    let plan = Plan::new(written_on_one_read_on_other(), &ScheduleOptions::default()).unwrap();
    let want = plan.reference().unwrap();
    for jitter in [None, Some(1), Some(2), Some(3)] {
        let plugin = common::host(2, jitter);
        let r = common::run_checked("peer", &plan, &plugin, IssueMode::Auto, &want);
        let y = r.as_f32("y").unwrap();
        let x = r.as_f32("x").unwrap();
        for i in 0..N as usize {
            assert_eq!(x[i], 2.0 * i as f32, "x[{i}]");
            assert_eq!(y[i], 2.0 * i as f32, "y[{i}]: device 0 read a stale x");
        }
    }
}
