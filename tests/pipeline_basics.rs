//! Whole-pipeline checks on builder programs: the counts the issues name. The lowering's
//! and the scheduler's facts are the subject, so the stage functions are called one by one.

mod common;

use offload_sched::lower::lower;
use offload_sched::model::{ElemType, Init, MapType, ProgramBuilder};
use offload_sched::schedule::{schedule, ScheduleOptions, SyncPolicy};
use offload_sched::verify::verify;

fn opts(policy: SyncPolicy) -> ScheduleOptions {
    ScheduleOptions {
        policy,
        ..ScheduleOptions::default()
    }
}

#[test]
fn saxpy_counts_per_policy() {
    let g = lower(&common::saxpy(1024)).unwrap();
    let m = schedule(&g, &opts(SyncPolicy::Minimal));
    println!("{m}");
    verify(&g, &m).unwrap();
    assert_eq!(m.used_streams(), 1);
    assert_eq!(m.events, 0);
    assert_eq!(m.host_waits().count(), 1);
    let r = schedule(&g, &opts(SyncPolicy::PerRegion));
    verify(&g, &r).unwrap();
    assert_eq!(r.host_waits().count(), 1);
    let o = schedule(&g, &opts(SyncPolicy::PerOp));
    println!("{o}");
    verify(&g, &o).unwrap();
    assert_eq!(o.host_waits().count(), 4);
}

fn independent(regions: usize, bytes: u64, nowait: bool) -> offload_sched::model::Program {
    let n = bytes / 4;
    let mut p = ProgramBuilder::new("independent");
    for i in 0..regions {
        let x = p.buffer(&format!("x{i}"), ElemType::F32, n, Init::Iota);
        let y = p.buffer(&format!("y{i}"), ElemType::F32, n, Init::Fill(1.0));
        let r = p
            .target(&format!("r{i}"), "saxpy")
            .num(2.0)
            .arg(x)
            .arg(y)
            .map(MapType::To, x)
            .map(MapType::ToFrom, y);
        if nowait {
            r.nowait();
        }
    }
    p.build()
}

#[test]
fn sixty_four_independent_regions() {
    let g = lower(&independent(64, 4096, false)).unwrap();
    let counts: Vec<usize> = [
        SyncPolicy::PerOp,
        SyncPolicy::PerRegion,
        SyncPolicy::Minimal,
    ]
    .into_iter()
    .map(|pol| {
        let mut o = opts(pol);
        let s = schedule(&g, &o);
        verify(&g, &s).unwrap();
        o.random_streams = Some(7);
        let r = schedule(&g, &o);
        verify(&g, &r).unwrap();
        s.host_waits().count()
    })
    .collect();
    assert_eq!(counts, [256, 64, 1]);
    let s = schedule(&g, &opts(SyncPolicy::Minimal));
    assert_eq!(s.used_streams(), 4);
    assert_eq!(s.events, 0);
}

#[test]
fn nowait_regions_skip_region_end_waits() {
    let g = lower(&independent(8, 4096, true)).unwrap();
    let s = schedule(&g, &opts(SyncPolicy::PerRegion));
    verify(&g, &s).unwrap();
    // Only the end of the program waits: one device-wide wait.
    assert_eq!(s.host_waits().count(), 1);
}

#[test]
fn taskwait_waits_for_a_nowait_exit_data_that_only_frees() {
    // OpenMP 5.2 §15.5: taskwait waits for every earlier task, also an exit data whose
    // only op is a free (found by review: the free was left running past the taskwait).
    use offload_sched::lower::OpKind;
    use offload_sched::model::{MapItem, Section};
    let mut p = ProgramBuilder::new("tw_delete");
    let x = p.buffer("x", ElemType::F32, 1024, Init::Iota);
    let y = p.buffer("y", ElemType::F32, 1 << 20, Init::Iota);
    p.enter_data(
        "ey",
        vec![MapItem::new(MapType::Alloc, Section::new(y, 0, 1 << 20))],
    );
    p.target("k", "scale")
        .num(2.0)
        .arg(x)
        .map(MapType::ToFrom, x)
        .nowait();
    p.exit_data(
        "kill",
        vec![MapItem::new(MapType::Delete, Section::new(y, 0, 1 << 20))],
    )
    .nowait();
    p.taskwait();
    let g = lower(&p.build()).unwrap();
    let tw = g
        .op_ids()
        .find(|o| g.op(*o).kind == OpKind::Taskwait)
        .unwrap();
    let free = g
        .op_ids()
        .find(|o| matches!(g.op(*o).kind, OpKind::Free { alloc } if g.allocs[alloc.index()].section.buf == y))
        .unwrap();
    assert!(g.preds(tw).contains(&free));
    let s = schedule(&g, &opts(SyncPolicy::Minimal));
    verify(&g, &s).unwrap();
}

#[test]
fn host_waits_for_only_the_streams_it_needs_unless_that_covers_the_device() {
    let plan = common::plan("case_e01.toml");
    let g = plan.graph();
    // Random streams put the three regions on s0, s2 and s3; waiting for s2 and s3
    // covers s0 through the event, so one device-wide wait replaces two stream waits.
    let s = schedule(
        g,
        &ScheduleOptions {
            random_streams: Some(1),
            ..opts(SyncPolicy::Minimal)
        },
    );
    verify(g, &s).unwrap();
    assert_eq!(s.host_waits().count(), 1);
    assert!(s
        .host_waits()
        .all(|w| matches!(w, offload_sched::schedule::Step::HostWaitDevice { .. })));
    // Fan-out graph: the taskwait needs one stream only (the gather waited on the
    // others), so it waits on that stream, not on the device: on an event after the
    // gather, as the data region's exit (which does not depend on the taskwait) is
    // issued before it on that stream.
    let plan = common::plan("fanout.toml");
    let s = schedule(plan.graph(), &opts(SyncPolicy::Minimal));
    assert!(matches!(
        s.host_waits().next(),
        Some(offload_sched::schedule::Step::HostWaitEvent { .. })
    ));
}

/// Programs built in Rust meet the graph-file limits: errors, never panics or aborts
/// (a buffer id of another program, 10 000 nested target data, `devices(u32::MAX)`,
/// two buffers of one name).
#[test]
fn library_programs_past_the_limits_are_errors() {
    use offload_sched::lower::{lower, LowerError};
    use offload_sched::model::{
        Arg, Construct, ElemType, Init, MapType, ProgramBuilder, Section, TargetData,
    };
    // A host kernel given a buffer id from nowhere.
    let mut other = ProgramBuilder::new("other");
    for i in 0..5 {
        other.buffer(&format!("b{i}"), ElemType::F32, 8, Init::Zeros);
    }
    let foreign = other.buffer("far", ElemType::F32, 8, Init::Zeros);
    let mut p = ProgramBuilder::new("p");
    p.buffer("x", ElemType::F32, 8, Init::Zeros);
    p.host_kernel(
        "h",
        "increment",
        vec![Arg::Buffer(Section::new(foreign, 0, 8))],
    );
    let e = lower(&p.build()).unwrap_err();
    assert!(matches!(e, LowerError::OutOfBounds { .. }), "{e}");
    // Too many devices.
    let mut p = ProgramBuilder::new("devs");
    p.devices(u32::MAX);
    let e = lower(&p.build()).unwrap_err();
    assert!(
        e.to_string().contains("4294967295 devices, at most 1024"),
        "{e}"
    );
    // Two buffers of one name.
    let mut p = ProgramBuilder::new("dup");
    let x = p.buffer("x", ElemType::F32, 8, Init::Zeros);
    p.buffer("x", ElemType::F32, 8, Init::Zeros);
    p.target("k", "increment").arg(x).map(MapType::ToFrom, x);
    let e = lower(&p.build()).unwrap_err();
    assert!(e.to_string().contains("two buffers are named `x`"), "{e}");
    // `len × element size` past u64 (i32 × (2^62 + 4)), and past the limits.
    for (len, want) in [
        ((1u64 << 62) + 4, "over the 64 GiB limit of one buffer"),
        (1 << 40, "over the 64 GiB"),
    ] {
        let mut p = ProgramBuilder::new("huge");
        p.buffer("x", ElemType::I32, len, Init::Zeros);
        let e = lower(&p.build()).unwrap_err();
        assert!(e.to_string().contains(want), "{e}");
    }
    let mut p = ProgramBuilder::new("total");
    for i in 0..5 {
        p.buffer(&format!("x{i}"), ElemType::U8, 60 << 30, Init::Zeros);
    }
    let e = lower(&p.build()).unwrap_err();
    assert!(e.to_string().contains("256 GiB limit in all"), "{e}");
    // 10 000 nested target data: built iteratively, lowered to an error. (Run on a big
    // stack: dropping the nested value recurses, which is the test's business, not the
    // library's.)
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(|| {
            let mut p = ProgramBuilder::new("deep").build();
            let mut body = Vec::new();
            for i in 0..10_000 {
                body = vec![Construct::TargetData(TargetData {
                    name: format!("d{i}"),
                    maps: Vec::new(),
                    device: 0,
                    body,
                    span: None,
                })];
            }
            p.body = body;
            let e = lower(&p).unwrap_err();
            assert!(e.to_string().contains("nested 65 deep, at most 64"), "{e}");
        })
        .unwrap()
        .join()
        .unwrap();
}
