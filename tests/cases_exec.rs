//! The cases of ../shared/cases/README.md that produce values, run on the host plugin
//! (with delay jitter and random streams where the case asks for repetitions), asserting
//! the case's expected values and the sequential reference.

mod common;

use common::plan;
use offload_sched::exec::{IssueMode, Report};
use offload_sched::lower::OpId;
use offload_sched::schedule::{ScheduleOptions, Step, SyncPolicy};
use offload_sched::Plan;

/// Runs `plan` on the host plugin (delay jitter `jitter`) and checks it against the
/// reference.
fn run(plan: &Plan, jitter: Option<u64>) -> Report {
    let plugin = common::host(plan.graph().devices, jitter);
    let want = plan.reference().unwrap();
    common::run_checked(plan.name(), plan, &plugin, IssueMode::Auto, &want)
}

/// `x999` of the E03 program: every element doubled from its index.
fn assert_x999_doubled(r: &Report) {
    assert!(r
        .as_f32("x999")
        .unwrap()
        .iter()
        .enumerate()
        .all(|(i, v)| *v == 2.0 * i as f32));
}

fn all_policies(name: &str, f: impl Fn(&Report)) {
    let plan = plan(name);
    for policy in SyncPolicy::ALL {
        let plan = plan
            .reschedule(&ScheduleOptions {
                policy,
                ..ScheduleOptions::default()
            })
            .unwrap();
        f(&run(&plan, None));
    }
}

#[test]
fn d01_depend_chain_sum_and_one_host_wait() {
    all_policies("case_d01.toml", |r| {
        let a = r.as_i32("A").unwrap();
        let b = r.as_i32("B").unwrap();
        let sum: i64 = a.iter().zip(b).map(|(x, y)| (*x + *y) as i64).sum();
        assert_eq!(sum, 1051648);
    });
    let plan = plan("case_d01.toml");
    let (g, s) = (plan.graph(), plan.schedule());
    assert_eq!(s.host_waits().count(), 1);
    // No copies for the two regions: their ops are kernels only.
    for r in g.regions.iter().filter(|r| r.name.starts_with("inc")) {
        for o in r.ops.clone() {
            assert_eq!(g.ops[o as usize].kind.name(), "kernel");
        }
    }
}

#[test]
fn d02_dependent_synchronous_region_sums() {
    all_policies("case_d02.toml", |r| {
        assert_eq!(r.as_i64("sum").unwrap()[0], 523776)
    });
}

#[test]
fn d03_host_read_after_nowait_sees_all_fives() {
    all_policies("case_d03.toml", |r| {
        assert!(r.as_i32("A").unwrap().iter().all(|v| *v == 5));
        assert_eq!(r.as_i32("sum").unwrap()[0], 5 * 1024);
    });
}

#[test]
fn d04_device_receives_the_old_contents_of_a_rewritten_host_buffer() {
    all_policies("case_d04.toml", |r| {
        let out = r.as_f32("out").unwrap();
        assert!(out.iter().enumerate().all(|(i, v)| *v == i as f32));
        assert!(r.as_f32("H").unwrap().iter().all(|v| *v == -1.0));
    });
}

#[test]
fn e01_consumer_on_another_stream_100_runs_with_jitter() {
    let plan = plan("case_e01.toml");
    let s = plan.schedule();
    assert_eq!(s.events, 1);
    assert_eq!(s.used_streams(), 2);
    for seed in 0..100 {
        let r = run(&plan, Some(seed));
        let out = r.as_f32("out2").unwrap();
        assert!(
            out.iter().enumerate().all(|(i, v)| *v == i as f32),
            "run {seed}"
        );
    }
}

#[test]
fn e02_fan_in_one_event_per_producer_stream() {
    let plan = plan("case_e02.toml");
    let (g, s) = (plan.graph(), plan.schedule());
    // K1..K3 on three streams, K4 (K4a then K4b) on a fourth: one event per producer,
    // each recorded once and waited on once.
    assert_eq!(s.used_streams(), 4);
    assert_eq!(s.events, 3);
    assert_eq!(s.event_waits().count(), 3);
    for seed in 0..20 {
        let r = run(&plan, Some(seed));
        assert!(r.as_f32("sum").unwrap().iter().all(|v| *v == 6.0));
    }
    // With random streams K4 may land on a fourth stream: then one event per producer.
    let mut seen_three = false;
    for seed in 0..64 {
        let opts = ScheduleOptions {
            random_streams: Some(seed),
            ..ScheduleOptions::default()
        };
        let plan = plan.reschedule(&opts).unwrap();
        let s = plan.schedule();
        let k: Vec<_> = ["K1", "K2", "K3", "K4a"]
            .iter()
            .map(|n| {
                let r = g.regions.iter().find(|r| r.name == *n).unwrap();
                s.op_stream[r.ops.start as usize].unwrap()
            })
            .collect();
        let mut distinct = k.clone();
        distinct.sort();
        distinct.dedup();
        if distinct.len() == 4 {
            // The waits issued just before K4's first op.
            let k4 = g
                .regions
                .iter()
                .find(|r| r.name == "K4a")
                .unwrap()
                .ops
                .start;
            let at = s
                .steps
                .iter()
                .position(|st| *st == Step::Op(OpId(k4)))
                .unwrap();
            let waits = s.steps[..at]
                .iter()
                .rev()
                .take_while(|st| matches!(st, Step::Wait { .. } | Step::Record { .. }))
                .filter(|st| matches!(st, Step::Wait { stream, .. } if *stream == k[3]))
                .count();
            assert_eq!(waits, 3, "seed {seed}");
            seen_three = true;
        }
    }
    assert!(seen_three, "no seed put K4 on a fourth stream");
}

#[test]
fn m07_m08_m10_m11_values() {
    all_policies("case_m07.toml", |r| {
        let v: Vec<i32> = ["f", "r", "d", "af"]
            .iter()
            .map(|n| r.as_i32(n).unwrap()[0])
            .collect();
        assert_eq!(v, [5, 6, 7, 8]);
    });
    all_policies("case_m08.toml", |r| {
        assert_eq!(r.as_i32("x").unwrap(), [222])
    });
    all_policies("case_m10.toml", |r| {
        assert_eq!(r.as_i32("A").unwrap(), [5, 5, 5]);
        assert_eq!(r.as_i32("B").unwrap(), [5, 5, 5]);
    });
    all_policies("case_m11.toml", |r| {
        let t = r.as_i32("t1").unwrap();
        let want: Vec<i32> = (0..30).map(|i| i + if i < 15 { 2 } else { 1 }).collect();
        assert_eq!(t, want.as_slice());
    });
}

/// M10's host waits per policy, with elision (region "b" reuses "a"'s kept copy of `B`,
/// no H2D, and its D2H replaces "a"'s; "a"'s D2H of `A` is deferred to a `writeback`
/// region after "b") and without. Per-op waits after every copy and launch: 6 elided (2 H2D, 2 kernels, 2
/// D2H), 8 not (3 H2D, 2 kernels, 3 D2H). Per-region once per region: 2 without elision
/// ("a", "b"); 3 with it, "a", "b" and the write-back, which needs only "a" and so runs on
/// a stream of its own beside "b" rather than queued behind it (the colouring delays a
/// region by at most half its own cost to keep a stream busy: `schedule/assign.rs`).
/// Minimal once, at the end.
#[test]
fn m10_host_waits_per_policy_with_and_without_elision() {
    use offload_sched::lower::LowerOptions;
    for (lowering, want) in [
        (LowerOptions::elided(), [6, 3, 1]),
        (LowerOptions::no_elide(), [8, 2, 1]),
    ] {
        let got = SyncPolicy::ALL.map(|policy| {
            let opts = ScheduleOptions {
                policy,
                ..ScheduleOptions::default()
            };
            let plan = common::plan_with("case_m10.toml", &opts)
                .relower(&lowering)
                .unwrap_or_else(|e| panic!("{}", e.render()));
            plan.schedule().host_waits().count()
        });
        assert_eq!(
            got, want,
            "per-op, per-region, minimal; elide {}",
            lowering.elide
        );
    }
    // The program's regions are "a" and "b"; the write-back is counted apart.
    let plan = common::plan("case_m10.toml");
    let g = plan.graph();
    assert_eq!((g.device_regions(), g.writeback_regions()), (2, 1));
    let plain = plan
        .relower(&offload_sched::lower::LowerOptions::no_elide())
        .unwrap();
    let g = plain.graph();
    assert_eq!((g.device_regions(), g.writeback_regions()), (2, 0));
}

#[test]
fn e03_thousand_small_regions_stay_on_a_bounded_pool() {
    let mut p = offload_sched::model::ProgramBuilder::new("e03");
    for i in 0..1000 {
        let x = p.buffer(
            &format!("x{i}"),
            offload_sched::model::ElemType::F32,
            1024,
            offload_sched::model::Init::Iota,
        );
        p.target(&format!("r{i}"), "scale")
            .num(2.0)
            .arg(x)
            .map(offload_sched::model::MapType::ToFrom, x)
            .nowait();
    }
    let plan = Plan::new(p.build(), &ScheduleOptions::default()).unwrap();
    let s = plan.schedule();
    assert_eq!(s.streams.len(), 4);
    assert_eq!(s.used_streams(), 4);
    assert_x999_doubled(&run(&plan, None));
}

/// D05: a host buffer whose last use is an in-flight H2D (a `nowait` region mapping
/// `to: x`, nothing reads x on the host afterwards) is not released before the copy
/// completes: the end of the program (which reads every host buffer, and after which
/// host memory is freed) follows the H2D in the OpGraph, the minimal schedule puts a
/// host wait on an event after the H2D before it, and in 20 runs with jitter the end op
/// starts after the H2D has finished.
#[test]
fn d05_host_source_of_an_in_flight_h2d_is_not_freed_early() {
    use offload_sched::lower::OpKind;
    use offload_sched::model::{ElemType, Init, MapType, ProgramBuilder};
    let mut p = ProgramBuilder::new("d05");
    let x = p.buffer("x", ElemType::F32, 1 << 20, Init::Iota);
    let y = p.buffer("y", ElemType::F32, 1 << 20, Init::Zeros);
    p.target("r", "copy")
        .arg(x)
        .arg(y)
        .map(MapType::To, x)
        .map(MapType::Alloc, y)
        .nowait();
    let plan = Plan::new(p.build(), &ScheduleOptions::default()).unwrap();
    let g = plan.graph();
    let h2d = g
        .op_ids()
        .find(|&o| matches!(g.op(o).kind, OpKind::H2D { .. }))
        .unwrap();
    let end = g
        .op_ids()
        .find(|&o| matches!(g.op(o).kind, OpKind::End))
        .unwrap();
    assert!(
        g.edges().any(|(a, b)| a == h2d && b == end),
        "no H2D -> end edge"
    );
    let s = plan.schedule();
    let stream = s.op_stream[h2d.index()].unwrap();
    let at = |step: Step| s.steps.iter().position(|st| *st == step).unwrap();
    // The end needs only the H2D (y is never copied back): the host waits on an event
    // recorded right after it, not for the kernel and frees behind it on the stream.
    let rec = at(Step::Op(h2d)) + 1;
    let Step::Record { event, stream: on } = s.steps[rec] else {
        panic!("no record after the H2D:\n{s}")
    };
    assert_eq!(on, stream);
    assert!(at(Step::HostWaitEvent { event }) < at(Step::Op(end)));
    assert_eq!(s.host_waits().count(), 1);
    for seed in 0..20 {
        let r = run(&plan, Some(seed));
        let t = |op: OpId| r.ops.iter().find(|t| t.op == op).unwrap().clone();
        assert!(t(end).start_us >= t(h2d).end_us, "seed {seed}");
        assert_eq!(r.as_f32("x").unwrap()[7], 7.0);
    }
}

#[test]
fn m01_m04_m09_m12_passing_halves_and_e03_graph() {
    all_policies("case_m01_m04_ok.toml", |r| {
        assert_eq!(r.as_i32("i").unwrap(), [1, 1, 1, 1])
    });
    all_policies("case_m09.toml", |r| {
        assert_eq!(r.as_i32("x").unwrap(), [7, 7, 7, 7])
    });
    let m09 = plan("case_m09.toml");
    assert_eq!(
        m09.graph()
            .ops
            .iter()
            .filter(|o| o.kind.name() == "d2h")
            .count(),
        1
    );
    all_policies("case_m12_ok.toml", |r| {
        let u = r.as_i32("u").unwrap();
        for (i, v) in u.iter().enumerate() {
            let want = i as i32 + i32::from((196..588).contains(&i));
            assert_eq!(*v, want, "u[{i}]");
        }
    });
    let plan = plan("case_e03.toml");
    let s = plan.schedule();
    assert_eq!((s.streams.len(), s.used_streams(), s.events), (4, 4, 0));
    assert_eq!(s.host_waits().count(), 1);
    assert_x999_doubled(&run(&plan, None));
}

/// `(0..n) + k` as i32 (the iota buffers of M13-M15, incremented `k` times).
fn iota_plus(n: i32, k: i32) -> Vec<i32> {
    (0..n).map(|i| i + k).collect()
}

#[test]
fn m13_update_of_a_partly_mapped_section_copies_nothing() {
    all_policies("case_m13.toml", |r| {
        assert_eq!(r.as_i32("a").unwrap(), [0, 1, 7, 7, 7]);
        assert_eq!(r.as_i32("b").unwrap(), [1, 2, 3, 3, 4, 5, 6, 7]);
        assert_eq!(r.as_i32("c").unwrap(), iota_plus(8, 1).as_slice());
    });
    // The partly mapped motion items emit no copy at all.
    let plan = plan("case_m13.toml");
    let g = plan.graph();
    for r in g.regions.iter().filter(|r| {
        [
            "to_before",
            "from_before",
            "to_after",
            "from_after",
            "to_spans",
            "from_spans",
        ]
        .contains(&r.name.as_str())
    }) {
        assert!(r.ops.is_empty(), "{} emits ops", r.name);
    }
}

#[test]
fn m14_present_is_checked_on_entry_only() {
    all_policies("case_m14.toml", |r| {
        assert_eq!(r.as_i32("v").unwrap(), [3; 4]);
        assert_eq!(r.as_i32("w").unwrap(), [4; 4]);
        assert_eq!(r.as_i32("x").unwrap(), [3; 4]);
        assert_eq!(r.as_i32("y").unwrap(), [3; 4]);
        assert_eq!(r.as_i32("z").unwrap(), [0, 1, 3, 4, 4, 5, 6, 7]);
    });
    // Every `target data` end found its items absent: it emits nothing.
    let plan = plan("case_m14.toml");
    let g = plan.graph();
    for r in g.regions.iter().filter(|r| r.name.ends_with(" end")) {
        assert!(r.ops.is_empty(), "{} emits ops", r.name);
    }
}

#[test]
fn m15_zero_length_exit_items_act_on_the_enclosing_entry() {
    all_policies("case_m15.toml", |r| {
        for b in ["a", "b", "c", "e"] {
            assert_eq!(r.as_i32(b).unwrap(), iota_plus(5, 1).as_slice(), "{b}");
        }
        assert_eq!(r.as_i32("f").unwrap(), iota_plus(5, 0).as_slice());
    });
    let plan = plan("case_m15.toml");
    let g = plan.graph();
    let ops = |name: &str| -> Vec<&str> {
        let r = g.regions.iter().find(|r| r.name == name).unwrap();
        r.ops
            .clone()
            .map(|o| g.ops[o as usize].kind.name())
            .collect()
    };
    // release/delete to 0 free the entry; `from: c[0:0]` copies nothing; the later
    // regions allocate afresh and copy in from the host.
    assert_eq!(ops("ra"), ["free"]);
    assert_eq!(ops("db"), ["free"]);
    assert_eq!(ops("fc"), ["free"]);
    assert_eq!(ops("re"), Vec::<&str>::new());
    assert_eq!(ops("fe"), ["d2h", "free"]);
    assert_eq!(ops("xf"), Vec::<&str>::new());
    for r in ["ja", "jb", "jc"] {
        assert_eq!(ops(r), ["alloc", "h2d", "kernel", "d2h", "free"], "{r}");
    }
    // Under minimal, each buffer's constructs (3-10 µs each) stay on one stream: four
    // groups on four streams, no event, and one host wait for the device at the end.
    // Spreading a group's later region to an idle stream gained a few µs of overlap and
    // cost 4 events and 4 host waits (the colouring's kept placement, schedule/assign.rs).
    let s = plan.schedule();
    let used: std::collections::BTreeSet<_> = s.op_stream.iter().flatten().collect();
    assert_eq!(
        (used.len(), s.events, s.host_waits().count()),
        (4, 0, 1),
        "streams, events, host waits:\n{s}"
    );
    let stream = |name: &str| {
        let r = g.regions.iter().find(|r| r.name == name).unwrap();
        s.op_stream[r.ops.start as usize]
    };
    for group in [
        ["ea", "ia", "ra", "ja"],
        ["eb", "ib", "db", "jb"],
        ["ec", "ic", "fc", "jc"],
    ] {
        for r in &group[1..] {
            assert_eq!(stream(r), stream(group[0]), "{r} beside {}:\n{s}", group[0]);
        }
    }
}

#[test]
fn d01_keeps_one_host_wait_with_several_host_lanes() {
    // The taskwait and the end after it stay on one lane: one host wait, no await.
    for lanes in [2, 3, 8] {
        let plan = plan("case_d01.toml")
            .reschedule(&ScheduleOptions {
                host_lanes: lanes,
                ..ScheduleOptions::default()
            })
            .unwrap();
        let s = plan.schedule();
        assert_eq!(s.host_waits().count(), 1, "{lanes} lanes:\n{s}");
        assert!(
            !s.steps.iter().any(|x| matches!(x, Step::HostAwait { .. })),
            "{lanes} lanes:\n{s}"
        );
        run(&plan, Some(3));
    }
}
