//! One test per mapping rule of DESIGN.md ("Semantics the lowering must implement") and
//! per mapping case of ../shared/cases (M01–M12), asserting the ops lowering emits or the
//! error it gives. Values after execution are checked in tests/cases_exec.rs.
//! The lowering is the stage under test, so `lower` is called alone (a plan runs the one
//! program executed here).

use offload_sched::lower::{lower_with, LowerError, LowerOptions, OpGraph, OpKind};

/// Lowered with transfer elision off: these tests count the copies OpenMP's mapping rules
/// name, as libomptarget makes them (tests/elision.rs covers what elision leaves out).
/// (The library's own `lower` returns the same `Result`.)
#[allow(clippy::result_large_err)]
fn lower(p: &Program) -> Result<OpGraph, LowerError> {
    lower_with(p, &LowerOptions::no_elide())
}
use offload_sched::model::{
    BufferId, ElemType, Init, MapItem, MapType, Program, ProgramBuilder, Section,
};

fn count(g: &OpGraph, kind: &str) -> usize {
    g.ops.iter().filter(|o| o.kind.name() == kind).count()
}

fn sec(b: BufferId, lo: u64, len: u64) -> Section {
    Section::new(b, lo, len)
}

fn m(t: MapType, s: Section) -> MapItem {
    MapItem::new(t, s)
}

fn ints(name: &str, len: u64) -> (ProgramBuilder, BufferId) {
    let mut p = ProgramBuilder::new(name);
    let b = p.buffer("arr", ElemType::I32, len, Init::Zeros);
    (p, b)
}

fn err(p: Program) -> LowerError {
    lower(&p).expect_err("lowering must fail")
}

// ----- rule 1: entry lookup -----------------------------------------------------------

#[test]
fn rule1_inside_a_live_entry_reuses_it() {
    let (mut p, a) = ints("r1", 20);
    p.target_data("d", vec![m(MapType::ToFrom, sec(a, 0, 10))], |p| {
        p.target("k", "increment")
            .arg(sec(a, 2, 4))
            .map(MapType::To, sec(a, 2, 4));
    });
    let g = lower(&p.build()).unwrap();
    assert_eq!(
        count(&g, "alloc"),
        1,
        "the region reuses the target data entry"
    );
    assert_eq!(count(&g, "h2d"), 1, "only the entry's own copy");
    assert_eq!(count(&g, "d2h"), 1);
    assert_eq!(count(&g, "free"), 1);
}

#[test]
fn rule1_partial_overlap_is_explicit_extension_naming_both_ranges() {
    // M02 and M03.
    let (mut p, a) = ints("m02", 20);
    p.target_data("d", vec![m(MapType::ToFrom, sec(a, 0, 10))], |p| {
        p.target("k", "increment")
            .arg(sec(a, 0, 12))
            .map_item(m(MapType::To, sec(a, 0, 12)).present());
    });
    let e = err(p.build());
    let msg = e.to_string();
    assert!(msg.contains("explicit extension not allowed"), "{msg}");
    assert!(
        msg.contains("arr[0:12]") && msg.contains("arr[0:10]"),
        "{msg}"
    );

    let (mut p, a) = ints("m03", 20);
    p.target_data("d", vec![m(MapType::ToFrom, sec(a, 0, 2))], |p| {
        p.target("k", "increment")
            .arg(sec(a, 1, 2))
            .map(MapType::Alloc, sec(a, 1, 2));
    });
    let msg = err(p.build()).to_string();
    assert!(msg.contains("explicit extension not allowed"), "{msg}");
    assert!(
        msg.contains("arr[1:2]") && msg.contains("arr[0:2]"),
        "{msg}"
    );
}

#[test]
fn rule1_present_on_absent_section_names_it() {
    // M01: with an enclosing target data it runs; without, it fails.
    let (mut p, i) = ints("m01", 4);
    p.target_data("d", vec![m(MapType::Alloc, sec(i, 0, 4))], |p| {
        p.target("k", "fill")
            .arg(i)
            .num(1.0)
            .map_item(m(MapType::Alloc, sec(i, 0, 4)).present());
    });
    let g = lower(&p.build()).unwrap();
    assert_eq!(count(&g, "kernel"), 1);

    let (mut p, i) = ints("m01", 4);
    p.target("k", "fill")
        .arg(i)
        .num(1.0)
        .map_item(m(MapType::Alloc, sec(i, 0, 4)).present());
    let e = err(p.build());
    assert!(matches!(e, LowerError::NotPresent { ref section, .. } if section == "arr[0:4]"));
    assert!(e.to_string().contains("present"), "{e}");
}

#[test]
fn rule1_section_spanning_two_mappings_is_an_error_naming_them() {
    // M12: two slabs entered separately, one region maps both as one section.
    let mut p = ProgramBuilder::new("m12");
    let u = p.buffer("u", ElemType::I32, 1960, Init::Iota);
    p.enter_data(
        "slabs",
        vec![
            m(MapType::To, sec(u, 0, 196)),
            m(MapType::To, sec(u, 196, 196)),
        ],
    );
    p.target("k", "increment")
        .arg(sec(u, 0, 392))
        .map(MapType::ToFrom, sec(u, 0, 392));
    let e = err(p.build());
    match &e {
        LowerError::SpansMappings { mappings, .. } => {
            assert_eq!(
                mappings,
                &["u[0:196]".to_string(), "u[196:196]".to_string()]
            )
        }
        other => panic!("wrong error {other}"),
    }
    assert!(e.to_string().contains("spans several mappings"));

    // One enter of both slabs: the region sees them.
    let mut p = ProgramBuilder::new("m12ok");
    let u = p.buffer("u", ElemType::I32, 1960, Init::Iota);
    p.enter_data("slabs", vec![m(MapType::To, sec(u, 0, 392))]);
    p.target("k", "increment")
        .arg(sec(u, 0, 392))
        .map(MapType::ToFrom, sec(u, 0, 392));
    let g = lower(&p.build()).unwrap();
    assert_eq!(count(&g, "alloc"), 1);
}

// ----- rule 2: H2D iff to and (new or always) ---------------------------------------

#[test]
fn rule2_to_on_present_entry_copies_nothing_unless_always() {
    let (mut p, a) = ints("r2", 8);
    p.target_data("d", vec![m(MapType::To, sec(a, 0, 8))], |p| {
        p.target("plain", "increment").arg(a).map(MapType::To, a);
        p.target("always", "increment")
            .arg(a)
            .map_item(m(MapType::To, sec(a, 0, 8)).always());
    });
    let g = lower(&p.build()).unwrap();
    assert_eq!(
        count(&g, "h2d"),
        2,
        "target data's copy plus the always copy"
    );
    let always = g.regions.iter().position(|r| r.name == "always").unwrap();
    assert!(g
        .ops
        .iter()
        .any(|o| o.region.0 as usize == always && matches!(o.kind, OpKind::H2D { .. })));
}

// ----- rule 3: exit ----------------------------------------------------------------

#[test]
fn rule3_d2h_only_when_count_reaches_zero_or_always() {
    let (mut p, a) = ints("r3", 8);
    p.target_data("d", vec![m(MapType::ToFrom, sec(a, 0, 8))], |p| {
        p.target("inner", "increment")
            .arg(a)
            .map(MapType::ToFrom, a);
        p.exit_data("always", vec![m(MapType::From, sec(a, 0, 8)).always()]);
    });
    let g = lower(&p.build()).unwrap();
    // inner: count 2 -> 1, no copy; always-from exit: copy, count 1 -> 0 ... then the
    // target data end finds nothing.
    let d2h_regions: Vec<&str> = g
        .ops
        .iter()
        .filter(|o| matches!(o.kind, OpKind::D2H { .. }))
        .map(|o| g.regions[o.region.index()].name.as_str())
        .collect();
    assert_eq!(d2h_regions, ["always"]);
}

#[test]
fn rule3_absent_items_on_exit_are_ignored_unless_present() {
    // M07: nothing mapped; a lone exit data gives no error and no copies.
    let mut p = ProgramBuilder::new("m07");
    let f = p.buffer("f", ElemType::I32, 1, Init::Fill(5.0));
    let r = p.buffer("r", ElemType::I32, 1, Init::Fill(6.0));
    let d = p.buffer("d", ElemType::I32, 1, Init::Fill(7.0));
    let af = p.buffer("af", ElemType::I32, 1, Init::Fill(8.0));
    p.target_data(
        "td",
        vec![
            m(MapType::From, sec(f, 0, 1)),
            m(MapType::From, sec(af, 0, 1)).always(),
        ],
        |p| {
            p.exit_data(
                "del",
                vec![
                    m(MapType::Delete, sec(f, 0, 1)),
                    m(MapType::Delete, sec(af, 0, 1)),
                ],
            );
        },
    );
    p.exit_data(
        "lone",
        vec![
            m(MapType::From, sec(f, 0, 1)),
            m(MapType::Release, sec(r, 0, 1)),
            m(MapType::Delete, sec(d, 0, 1)),
            m(MapType::From, sec(af, 0, 1)).always(),
        ],
    );
    let g = lower(&p.build()).unwrap();
    assert_eq!(count(&g, "d2h"), 0);
    assert_eq!(count(&g, "h2d"), 0);
    assert_eq!(count(&g, "alloc"), 2);
    assert_eq!(count(&g, "free"), 2);

    // M05: delete twice with present: the second fails.
    let mut p = ProgramBuilder::new("m05");
    let x = p.buffer("x", ElemType::I32, 4, Init::Zeros);
    p.enter_data("e", vec![m(MapType::Alloc, sec(x, 0, 4))]);
    p.exit_data("x1", vec![m(MapType::Delete, sec(x, 0, 4)).present()]);
    p.exit_data("x2", vec![m(MapType::Delete, sec(x, 0, 4)).present()]);
    let e = err(p.build());
    assert!(
        matches!(e, LowerError::NotPresent { ref region, .. } if region == "x2"),
        "{e}"
    );
}

// ----- rule 4: duplicates merge -------------------------------------------------------

#[test]
fn rule4_duplicates_merge_in_any_order() {
    // M10: map(to: A) map(tofrom: A) map(tofrom: B) in every order: one H2D and one D2H
    // per buffer.
    let orders = [
        [0, 1, 2],
        [0, 2, 1],
        [1, 0, 2],
        [1, 2, 0],
        [2, 0, 1],
        [2, 1, 0],
    ];
    for order in orders {
        let mut p = ProgramBuilder::new("m10");
        let a = p.buffer("A", ElemType::I32, 3, Init::Zeros);
        let b = p.buffer("B", ElemType::I32, 3, Init::Zeros);
        let items = [
            m(MapType::To, sec(a, 0, 3)),
            m(MapType::ToFrom, sec(a, 0, 3)),
            m(MapType::ToFrom, sec(b, 0, 3)),
        ];
        let mut r = p.target("k", "add_scalar");
        for i in order {
            r = r.map_item(items[i].clone());
        }
        drop(r.arg(a).num(5.0));
        let g = lower(&p.build()).unwrap();
        assert_eq!(count(&g, "h2d"), 2, "order {order:?}");
        assert_eq!(count(&g, "d2h"), 2, "order {order:?}");
    }
}

#[test]
fn rule4_delete_and_from_in_one_exit_still_copy_back() {
    // M08.
    let mut p = ProgramBuilder::new("m08");
    let x = p.buffer("x", ElemType::I32, 1, Init::Fill(111.0));
    p.target_data("td", vec![m(MapType::Alloc, sec(x, 0, 1))], |p| {
        p.enter_data(
            "e",
            vec![
                m(MapType::Alloc, sec(x, 0, 1)),
                m(MapType::To, sec(x, 0, 1)),
            ],
        );
        p.target("set", "fill")
            .arg(x)
            .num(222.0)
            .map_item(m(MapType::Alloc, sec(x, 0, 1)).present());
        p.exit_data(
            "x",
            vec![
                m(MapType::Delete, sec(x, 0, 1)),
                m(MapType::From, sec(x, 0, 1)),
                m(MapType::Delete, sec(x, 0, 1)),
            ],
        );
    });
    let g = lower(&p.build()).unwrap();
    assert_eq!(count(&g, "d2h"), 1);
    assert_eq!(
        count(&g, "h2d"),
        0,
        "the entry was present: `to` copies nothing"
    );
}

#[test]
fn rule4_always_from_twice_is_one_copy() {
    // M09.
    let mut p = ProgramBuilder::new("m09");
    let x = p.buffer("x", ElemType::I32, 4, Init::Zeros);
    p.enter_data("e", vec![m(MapType::To, sec(x, 0, 4))]);
    p.exit_data(
        "x",
        vec![
            m(MapType::From, sec(x, 0, 4)).always(),
            m(MapType::From, sec(x, 0, 4)).always(),
        ],
    );
    let g = lower(&p.build()).unwrap();
    assert_eq!(count(&g, "d2h"), 1);
}

#[test]
fn rule4_pieces_of_one_storage_all_return_to_zero() {
    // M11: tofrom t1[0:30] with to t1[3:3] and from t1[9:3] in one region.
    let mut p = ProgramBuilder::new("m11");
    let t1 = p.buffer("t1", ElemType::I32, 30, Init::Iota);
    p.target("r1", "increment")
        .arg(sec(t1, 0, 30))
        .map(MapType::ToFrom, sec(t1, 0, 30))
        .map(MapType::To, sec(t1, 3, 3))
        .map(MapType::From, sec(t1, 9, 3));
    p.target("r2", "increment")
        .arg(sec(t1, 0, 15))
        .map(MapType::ToFrom, sec(t1, 0, 15));
    let g = lower(&p.build()).unwrap();
    assert_eq!(count(&g, "alloc"), 2, "r2 allocates afresh");
    assert_eq!(count(&g, "free"), 2, "every piece's count returned to zero");
    assert_eq!(count(&g, "d2h"), 2, "one copy back per region");
}

// ----- rule 5: update and zero-length --------------------------------------------------

#[test]
fn rule5_update_copies_without_counts_and_present_checks() {
    // M06.
    let mut p = ProgramBuilder::new("m06");
    let x = p.buffer("x", ElemType::I32, 4, Init::Zeros);
    p.enter_data("e", vec![m(MapType::Alloc, sec(x, 0, 4))]);
    p.update(
        "u",
        vec![
            m(MapType::To, sec(x, 0, 4)).present(),
            m(MapType::From, sec(x, 0, 4)).present(),
        ],
    );
    p.update("absent-ok", vec![m(MapType::To, sec(x, 0, 0))]);
    p.exit_data("d", vec![m(MapType::Delete, sec(x, 0, 4))]);
    p.update("noop", vec![m(MapType::To, sec(x, 0, 4))]);
    let ok = p.build();
    let g = lower(&ok).unwrap();
    assert_eq!(count(&g, "h2d"), 1);
    assert_eq!(count(&g, "d2h"), 1);
    assert_eq!(count(&g, "free"), 1);

    let mut p = ProgramBuilder::new("m06b");
    let x = p.buffer("x", ElemType::I32, 4, Init::Zeros);
    p.enter_data("e", vec![m(MapType::Alloc, sec(x, 0, 4))]);
    p.exit_data("d", vec![m(MapType::Delete, sec(x, 0, 4))]);
    p.update("u", vec![m(MapType::From, sec(x, 0, 4)).present()]);
    let e = err(p.build());
    assert!(
        matches!(e, LowerError::MotionNotPresent { ref mapped, .. } if mapped.is_empty()),
        "{e}"
    );
    assert!(e.to_string().contains("from(present: x[0:4])"), "{e}");
}

#[test]
fn rule5_zero_length_sections_create_no_entry() {
    // M04.
    let (mut p, a) = ints("m04", 5);
    p.target_data("d", vec![m(MapType::ToFrom, sec(a, 0, 5))], |p| {
        p.target("k", "increment")
            .arg(sec(a, 0, 0))
            .map_item(m(MapType::To, sec(a, 0, 0)).present());
    });
    lower(&p.build()).unwrap();

    let (mut p, a) = ints("m04b", 5);
    p.target_data("d", vec![m(MapType::ToFrom, sec(a, 0, 0))], |p| {
        p.target("k", "increment")
            .arg(sec(a, 0, 0))
            .map_item(m(MapType::To, sec(a, 0, 0)).present());
    });
    assert!(matches!(err(p.build()), LowerError::NotPresent { .. }));
}

// ----- rule 6: determinism ------------------------------------------------------------

#[test]
fn rule6_lowering_is_deterministic_in_program_order() {
    let p = offload_sched::model::synthetic(2000);
    let a = lower(&p).unwrap();
    let b = lower(&p).unwrap();
    assert_eq!(a.ops, b.ops);
    assert_eq!(a.edges().collect::<Vec<_>>(), b.edges().collect::<Vec<_>>());
}

#[test]
fn a_target_region_refuses_exit_map_types_as_graph_files_do() {
    for mt in [MapType::Release, MapType::Delete] {
        let (mut p, a) = ints("bad", 4);
        p.target("k", "increment")
            .arg(sec(a, 0, 4))
            .map(mt, sec(a, 0, 4));
        let e = err(p.build());
        assert_eq!(
            e.to_string(),
            format!(
                "region \"k\": map type `{}` is not allowed on target",
                mt.name()
            ),
            "{e}"
        );
    }
}

#[test]
fn exit_data_rejects_entry_map_types() {
    let (mut p, a) = ints("bad", 4);
    p.exit_data("x", vec![m(MapType::To, sec(a, 0, 4))]);
    let e = err(p.build());
    assert!(
        e.to_string()
            .contains("`to` is not allowed on target exit data"),
        "{e}"
    );
}

#[test]
fn rule5_a_zero_length_argument_of_unmapped_data_runs_as_an_empty_argument() {
    use offload_sched::lower::KernelArg;
    use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
    use offload_sched::reference::check;
    use offload_sched::schedule::ScheduleOptions;
    use offload_sched::Plan;
    // increment(arr[3:0]) with map(tofrom: arr[3:0]) (maps nothing), and
    // saxpy(2, e, b) with e a buffer of 0 elements: both kernels do nothing.
    let mut p = ProgramBuilder::new("zero_args");
    let a = p.buffer("arr", ElemType::I32, 8, Init::Iota);
    let e = p.buffer("e", ElemType::F32, 0, Init::Zeros);
    let b = p.buffer("b", ElemType::F32, 4, Init::Iota);
    p.target("k", "increment")
        .arg(sec(a, 3, 0))
        .map(MapType::ToFrom, sec(a, 3, 0));
    p.target("s", "saxpy")
        .num(2.0)
        .arg(e)
        .arg(b)
        .map(MapType::To, e)
        .map(MapType::ToFrom, b);
    let plan = Plan::new(p.build(), &ScheduleOptions::default()).unwrap();
    let g = plan.graph();
    let empty: Vec<&KernelArg> = g
        .ops
        .iter()
        .filter_map(|o| match &o.kind {
            OpKind::Kernel(c) => Some(
                c.args
                    .iter()
                    .filter(|a| matches!(a, KernelArg::Empty { .. })),
            ),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(empty.len(), 2, "arr[3:0] and e[0:0] are empty arguments");
    assert_eq!(count(g, "alloc"), 1, "only b is allocated");
    let plugin = HostPlugin::new(HostPluginOptions::default());
    let r = plan.run(&plugin).unwrap();
    assert_eq!(r.buffers.as_i32("arr").unwrap(), &[0, 1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(r.buffers.as_f32("b").unwrap(), &[0.0, 1.0, 2.0, 3.0]);
    check(&r.buffers, &plan.reference().unwrap()).unwrap();
    assert_eq!(plugin.live_device_allocs(), 0);
}

// ----- storage read before it is written: zero-filled ---------------------------------

/// `DeviceAlloc::zero` marks exactly the allocations whose storage some D2H or kernel
/// read touches before an H2D or kernel write of those elements (program order).
#[test]
fn storage_read_before_written_is_zero_filled() {
    let zero_flags =
        |p: Program| -> Vec<bool> { lower(&p).unwrap().allocs.iter().map(|a| a.zero).collect() };
    // `from:` copied back, written by no one (a WfCommons task's output): zero.
    let (mut p, a) = ints("from-unwritten", 8);
    p.target("s", "spin").num(1.0).map(MapType::From, a);
    assert_eq!(zero_flags(p.build()), [true]);
    // `from:` written by the kernel first: not zero.
    let (mut p, a) = ints("from-written", 8);
    p.target("f", "fill").arg(a).num(3.0).map(MapType::From, a);
    assert_eq!(zero_flags(p.build()), [false]);
    // `to:` then read: not zero; `alloc:` then `inout`: zero (read first).
    let (mut p, a) = ints("to-alloc", 8);
    let b = p.buffer("b", ElemType::I32, 8, Init::Zeros);
    p.target("t", "increment").arg(a).map(MapType::ToFrom, a);
    p.target("u", "increment").arg(b).map(MapType::Alloc, b);
    assert_eq!(zero_flags(p.build()), [false, true]);
    // Half copied in, the whole read: zero.
    let (mut p, a) = ints("half", 8);
    p.target_data("d", vec![m(MapType::Alloc, sec(a, 0, 8))], |p| {
        p.update("up", vec![m(MapType::To, sec(a, 0, 4))]);
        p.target("k", "increment").arg(a).map(MapType::Alloc, a);
    });
    assert_eq!(zero_flags(p.build()), [true]);
}

// ----- rule 3: exit-time extension counts as absent ------------------------------------

/// Lowers, schedules under every policy, verifies, runs on the host plugin and checks
/// against the reference interpreter; returns the host plugin's buffers.
fn run_host(p: &Program) -> offload_sched::exec::Buffers {
    use offload_sched::exec::{execute, ExecOptions};
    use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
    use offload_sched::reference::{check, reference};
    use offload_sched::schedule::{schedule, ScheduleOptions, SyncPolicy};
    let g = lower(p).unwrap();
    let want = reference(&g, &ExecOptions::default()).unwrap();
    let mut last = None;
    for policy in SyncPolicy::ALL {
        let s = schedule(
            &g,
            &ScheduleOptions {
                policy,
                ..ScheduleOptions::default()
            },
        );
        offload_sched::verify::verify(&g, &s).unwrap();
        let plugin = HostPlugin::new(HostPluginOptions::default());
        let r = execute(&g, &s, &plugin, &ExecOptions::default()).unwrap();
        assert_eq!(plugin.live_device_allocs(), 0, "device memory leaked");
        check(&r.buffers, &want).unwrap();
        last = Some(r.buffers);
    }
    last.unwrap()
}

#[test]
fn rule3_exit_not_inside_one_entry_after_delete_and_reenter_is_absent() {
    // libomptarget's target_data_array_extension_at_exit.c, restated: the target data's
    // own entry b[0:40] is deleted inside it and b[10:5] entered; at the end of the
    // target data b[0:40] extends beyond the live b[10:5]: absent, no D2H, no count change.
    let mut p = ProgramBuilder::new("ext_at_exit");
    let b = p.buffer("b", ElemType::I32, 40, Init::Fill(5.0));
    p.target_data("td", vec![m(MapType::ToFrom, sec(b, 0, 40))], |p| {
        p.exit_data("del", vec![m(MapType::Delete, sec(b, 0, 40))]);
        p.enter_data("ent", vec![m(MapType::Alloc, sec(b, 10, 5))]);
        p.target("k", "fill")
            .arg(sec(b, 10, 5))
            .num(7.0)
            .map(MapType::Alloc, sec(b, 10, 5));
    });
    let prog = p.build();
    let g = lower(&prog).unwrap();
    assert_eq!(
        count(&g, "d2h"),
        0,
        "the target data end copies nothing back"
    );
    assert_eq!(count(&g, "h2d"), 1, "the target data entry's copy only");
    // b[10:5] is still live after the program (count 1): the end of the target data
    // did not release it; only b[0:40] is freed (by the delete).
    assert_eq!(count(&g, "alloc"), 2);
    assert_eq!(count(&g, "free"), 1);
    let td_end = g
        .regions
        .iter()
        .rposition(|r| r.name == "td")
        .expect("the target data end region");
    assert!(g.regions[td_end]
        .ops
        .clone()
        .all(|o| !matches!(g.ops[o as usize].kind, OpKind::Free { .. })));
    let out = run_host(&prog);
    assert_eq!(out.as_i32("b").unwrap(), &[5; 40]);

    // A later exit of the live b[10:5] still finds it with count 1: from copies back 7s.
    let mut p = ProgramBuilder::new("ext_at_exit_then_from");
    let b = p.buffer("b", ElemType::I32, 40, Init::Fill(5.0));
    p.target_data("td", vec![m(MapType::ToFrom, sec(b, 0, 40))], |p| {
        p.exit_data("del", vec![m(MapType::Delete, sec(b, 0, 40))]);
        p.enter_data("ent", vec![m(MapType::Alloc, sec(b, 10, 5))]);
        p.target("k", "fill")
            .arg(sec(b, 10, 5))
            .num(7.0)
            .map(MapType::Alloc, sec(b, 10, 5));
    });
    p.exit_data("out", vec![m(MapType::From, sec(b, 10, 5))]);
    let out = run_host(&p.build());
    let mut want = [5; 40];
    want[10..15].fill(7);
    assert_eq!(out.as_i32("b").unwrap(), &want);
}

#[test]
fn rule3_exit_spanning_or_extending_is_absent_but_present_still_errors() {
    // Two live slabs; an exit of both as one section is absent (no copies, counts kept).
    let mut p = ProgramBuilder::new("spans_at_exit");
    let u = p.buffer("u", ElemType::I32, 8, Init::Fill(1.0));
    p.enter_data(
        "slabs",
        vec![m(MapType::To, sec(u, 0, 4)), m(MapType::To, sec(u, 4, 4))],
    );
    p.exit_data("both", vec![m(MapType::From, sec(u, 0, 8))]);
    p.exit_data("wider", vec![m(MapType::Delete, sec(u, 2, 6))]);
    let g = lower(&p.build()).unwrap();
    assert_eq!(count(&g, "d2h"), 0);
    assert_eq!(count(&g, "free"), 0, "counts unchanged");

    // With `present` the absent item is the present error, naming the section.
    let mut p = ProgramBuilder::new("present_at_exit");
    let u = p.buffer("u", ElemType::I32, 8, Init::Fill(1.0));
    p.enter_data("half", vec![m(MapType::To, sec(u, 0, 4))]);
    p.exit_data("x", vec![m(MapType::From, sec(u, 0, 8)).present()]);
    let e = err(p.build());
    assert!(
        matches!(e, LowerError::NotPresent { ref region, ref section, .. }
            if region == "x" && section == "u[0:8]"),
        "{e}"
    );
}

#[test]
fn rule1_extension_on_entry_stays_an_error_after_delete_and_reenter() {
    // The same history, then an entry (not an exit) of b[0:40]: explicit extension.
    let mut p = ProgramBuilder::new("ext_at_entry");
    let b = p.buffer("b", ElemType::I32, 40, Init::Fill(5.0));
    p.enter_data("e0", vec![m(MapType::To, sec(b, 0, 40))]);
    p.exit_data("del", vec![m(MapType::Delete, sec(b, 0, 40))]);
    p.enter_data("ent", vec![m(MapType::Alloc, sec(b, 10, 5))]);
    p.enter_data("again", vec![m(MapType::To, sec(b, 0, 40))]);
    let msg = err(p.build()).to_string();
    assert!(msg.contains("explicit extension not allowed"), "{msg}");
    assert!(msg.contains("b[0:40]") && msg.contains("b[10:5]"), "{msg}");
}

// ----- rule 5: motion clauses on partly mapped sections (M13) ---------------------------

#[test]
fn rule5_update_of_a_partly_mapped_section_is_absent() {
    // Before the entry, after it, spanning two: to and from copy nothing, no error.
    for (lo, len) in [(0, 5), (2, 5), (4, 2), (0, 8), (1, 7)] {
        for t in [MapType::To, MapType::From] {
            let (mut p, a) = ints("m13", 8);
            p.enter_data(
                "e",
                vec![
                    m(MapType::Alloc, sec(a, 2, 3)),
                    m(MapType::Alloc, sec(a, 5, 3)),
                ],
            );
            p.update("u", vec![m(t, sec(a, lo, len))]);
            let g = lower(&p.build()).unwrap_or_else(|e| panic!("{t:?} a[{lo}:{len}]: {e}"));
            let u = g.regions.iter().find(|r| r.name == "u").unwrap();
            assert!(u.ops.is_empty(), "{t:?} a[{lo}:{len}] copies");
        }
    }
}

#[test]
fn rule5_update_present_of_a_partly_mapped_section_names_the_present_modifier() {
    for (t, lo, len, word) in [
        (MapType::To, 0, 5, "to(present: arr[0:5])"),
        (MapType::From, 2, 5, "from(present: arr[2:5])"),
        (MapType::From, 0, 8, "from(present: arr[0:8])"),
    ] {
        let (mut p, a) = ints("m13", 8);
        p.enter_data(
            "e",
            vec![
                m(MapType::Alloc, sec(a, 2, 3)),
                m(MapType::Alloc, sec(a, 5, 3)),
            ],
        );
        p.update("u", vec![m(t, sec(a, lo, len)).present()]);
        let e = err(p.build());
        let msg = e.to_string();
        assert!(
            matches!(e, LowerError::MotionNotPresent { ref region, .. } if region == "u"),
            "{msg}"
        );
        assert!(msg.contains(word), "{msg}");
        assert!(!msg.contains("explicit extension"), "{msg}");
        assert!(
            msg.contains("arr[2:3]"),
            "names the mapping it touches: {msg}"
        );
    }
}

// ----- rule 3: present is checked on entry only (M14) ----------------------------------

#[test]
fn rule3_present_at_the_end_of_a_region_is_not_checked() {
    // enter data map(alloc: v); target data map(present, alloc: v) { exit data
    // map(delete: v) }: runs; the end finds v absent and ignores it.
    for (td_map, exit) in [
        (MapType::Alloc, MapType::Delete),
        (MapType::ToFrom, MapType::Release),
        (MapType::From, MapType::Delete),
    ] {
        let mut p = ProgramBuilder::new("m14");
        let v = p.buffer("v", ElemType::I32, 4, Init::Zeros);
        p.enter_data("e", vec![m(MapType::Alloc, sec(v, 0, 4))]);
        p.target_data("d", vec![m(td_map, sec(v, 0, 4)).present().always()], |p| {
            p.exit_data("x", vec![m(exit, sec(v, 0, 4))]);
            p.exit_data("x2", vec![m(exit, sec(v, 0, 4))]);
        });
        let g = lower(&p.build()).unwrap_or_else(|e| panic!("{td_map:?}/{exit:?}: {e}"));
        assert_eq!(count(&g, "d2h"), 0);
        assert_eq!(count(&g, "free"), 1);
    }
    // A `target exit data` item with present that is absent is still an error (M05).
    let mut p = ProgramBuilder::new("m14b");
    let v = p.buffer("v", ElemType::I32, 4, Init::Zeros);
    p.enter_data("e", vec![m(MapType::Alloc, sec(v, 0, 4))]);
    p.target_data("d", vec![m(MapType::Alloc, sec(v, 0, 4)).present()], |p| {
        p.exit_data("x", vec![m(MapType::Delete, sec(v, 0, 4))]);
        p.exit_data("x2", vec![m(MapType::Delete, sec(v, 0, 4)).present()]);
    });
    assert!(matches!(err(p.build()), LowerError::NotPresent { ref region, .. } if region == "x2"));
}

// ----- rule 5: zero-length exit items act on the enclosing entry (M15) ------------------

#[test]
fn rule5_zero_length_exit_item_acts_on_the_entry_containing_it() {
    // release: count 1 -> 0, the entry is freed (no D2H); a later present fails.
    let (mut p, a) = ints("m15", 5);
    p.enter_data("e", vec![m(MapType::To, sec(a, 0, 5))]);
    p.exit_data("r", vec![m(MapType::Release, sec(a, 0, 0))]);
    p.target("k", "increment")
        .arg(a)
        .map_item(m(MapType::To, sec(a, 0, 5)).present());
    assert!(matches!(err(p.build()), LowerError::NotPresent { ref region, .. } if region == "k"));

    // delete forces 0 from count 2; from copies nothing for a zero-length item; a later
    // region allocates afresh.
    for (t, lo) in [
        (MapType::Delete, 2),
        (MapType::From, 0),
        (MapType::ToFrom, 5),
    ] {
        let (mut p, a) = ints("m15b", 5);
        p.enter_data("e", vec![m(MapType::To, sec(a, 0, 5))]);
        if t == MapType::Delete {
            p.enter_data("e2", vec![m(MapType::To, sec(a, 0, 5))]);
        }
        p.exit_data("x", vec![m(t, sec(a, lo, 0))]);
        p.target("k", "increment").arg(a).map(MapType::ToFrom, a);
        let g = lower(&p.build()).unwrap();
        assert_eq!(count(&g, "alloc"), 2, "{t:?}: k allocates afresh");
        assert_eq!(count(&g, "h2d"), 2, "{t:?}");
        assert_eq!(count(&g, "d2h"), 1, "{t:?}: only k's copy back");
        assert_eq!(count(&g, "free"), 2, "{t:?}");
    }

    // Outside every entry a zero-length exit item is absent; with present, an error.
    let (mut p, a) = ints("m15c", 8);
    p.enter_data("e", vec![m(MapType::To, sec(a, 0, 2))]);
    p.exit_data("x", vec![m(MapType::Delete, sec(a, 4, 0))]);
    let g = lower(&p.build()).unwrap();
    assert_eq!(count(&g, "free"), 0);
    let (mut p, a) = ints("m15d", 8);
    p.enter_data("e", vec![m(MapType::To, sec(a, 0, 2))]);
    p.exit_data("x", vec![m(MapType::Delete, sec(a, 4, 0)).present()]);
    assert!(matches!(err(p.build()), LowerError::NotPresent { .. }));
}

#[test]
fn rule5_zero_length_map_of_a_region_keeps_the_enclosing_count() {
    // A region's zero-length item inside a live entry takes a reference on entry and
    // gives it back on exit: the target data's own exit still copies back.
    let (mut p, a) = ints("m04z", 5);
    p.target_data("d", vec![m(MapType::ToFrom, sec(a, 0, 5))], |p| {
        p.target("k", "increment")
            .arg(sec(a, 0, 5))
            .map_item(m(MapType::From, sec(a, 1, 0)).present());
        p.target("k2", "increment")
            .arg(sec(a, 0, 5))
            .map(MapType::Alloc, sec(a, 0, 0));
    });
    let g = lower(&p.build()).unwrap();
    let d2h: Vec<&str> = g
        .ops
        .iter()
        .filter(|o| matches!(o.kind, OpKind::D2H { .. }))
        .map(|o| g.regions[o.region.index()].name.as_str())
        .collect();
    assert_eq!(d2h, ["d end"]);
}
