//! Transfer elision (issue 28 point 1; `lower::elide`): which copies the lowering leaves
//! out, which it must keep, that the values stay the reference's, and that the verifier
//! refuses an elision a mutated graph no longer justifies.

mod common;

use offload_sched::exec::IssueMode;
use offload_sched::lower::{lower_with, ElidedCopy, LowerOptions, OpGraph, OpKind};
use offload_sched::model::{
    Arg, BufferId, ElemType, Init, MapType, Program, ProgramBuilder, Section,
};
use offload_sched::schedule::{schedule, ScheduleOptions, SyncPolicy};
use offload_sched::verify::{verify, Violation};
use offload_sched::Plan;

/// A plan of `p` with elision on (the default, said explicitly).
fn elided(p: Program) -> Plan {
    Plan::new(p, &ScheduleOptions::default())
        .and_then(|plan| plan.relower(&LowerOptions::elided()))
        .unwrap_or_else(|e| panic!("{}", e.render()))
}

fn off() -> LowerOptions {
    LowerOptions {
        elide: false,
        ..LowerOptions::default()
    }
}

/// How many ops of `g` of kind `kind` (`h2d`, `d2h`, `alloc`, `free`) touch buffer `b`.
fn count(g: &OpGraph, kind: &str, b: BufferId) -> usize {
    g.op_ids()
        .filter(|&id| {
            let op = g.op(id);
            let buf = match &op.kind {
                OpKind::H2D { section, .. } | OpKind::D2H { section, .. } => section.buf,
                OpKind::Alloc { alloc } | OpKind::Free { alloc } => {
                    g.allocs[alloc.index()].section.buf
                }
                _ => return false,
            };
            op.kind.name() == kind && buf == b
        })
        .collect::<Vec<_>>()
        .len()
}

/// Runs the plan (elision on) and its `--no-elide` twin on the host plugin with jitter,
/// each checked against the reference; returns both plans.
fn checked(p: Program) -> (Plan, Plan) {
    let on = elided(p);
    let off = on.relower(&off()).unwrap();
    let want = on.reference().unwrap();
    for (what, plan) in [("elide", &on), ("no-elide", &off)] {
        for seed in [1, 2] {
            let plugin = common::host(1, Some(seed));
            common::run_checked(what, plan, &plugin, IssueMode::Serial, &want);
        }
    }
    (on, off)
}

/// `x` read by two regions (`copy` into `y`, then into `z`), with `between` run between
/// them.
fn two_readers(between: impl FnOnce(&mut ProgramBuilder, BufferId)) -> (Program, BufferId) {
    let mut p = ProgramBuilder::new("two_readers");
    let x = p.buffer("x", ElemType::I32, 64, Init::Iota);
    let y = p.buffer("y", ElemType::I32, 64, Init::Zeros);
    let z = p.buffer("z", ElemType::I32, 64, Init::Zeros);
    p.target("r1", "copy")
        .arg(x)
        .arg(y)
        .map(MapType::To, x)
        .map(MapType::From, y);
    between(&mut p, x);
    p.target("r2", "copy")
        .arg(x)
        .arg(z)
        .map(MapType::To, x)
        .map(MapType::From, z);
    (p.build(), x)
}

#[test]
fn a_kept_copy_is_reused_and_its_h2d_elided() {
    let (prog, x) = two_readers(|p, x| {
        p.host_task("look", &[x.into()], &[]);
    });
    let (on, off) = checked(prog);
    assert_eq!(count(off.graph(), "h2d", x), 2);
    assert_eq!(count(on.graph(), "h2d", x), 1);
    assert_eq!(count(on.graph(), "alloc", x), 1);
    assert_eq!(
        count(on.graph(), "free", x),
        1,
        "freed once, before the end"
    );
    assert_eq!(on.graph().elided_bytes().h2d, 64 * 4);
    assert_eq!(on.proof().elisions_proven, on.graph().elided.len());
}

#[test]
fn a_host_write_between_evicts_the_kept_copy() {
    let (prog, x) = two_readers(|p, x| {
        p.host_kernel(
            "bump",
            "increment",
            vec![Arg::Buffer(Section::new(x, 0, 64))],
        );
    });
    let (on, _) = checked(prog);
    assert_eq!(count(on.graph(), "h2d", x), 2, "{}", on.schedule());
    assert_eq!(count(on.graph(), "alloc", x), 2);
    // z = x + 1 after the host's increment.
    let z = on.reference().unwrap();
    assert_eq!(z.as_i32("z").unwrap()[5], 6);
}

#[test]
fn a_partial_host_write_evicts_too() {
    let (prog, x) = two_readers(|p, x| {
        p.host_kernel(
            "bump",
            "increment",
            vec![Arg::Buffer(Section::new(x, 60, 4))],
        );
    });
    let (on, _) = checked(prog);
    assert_eq!(count(on.graph(), "h2d", x), 2);
}

#[test]
fn a_closure_reading_the_section_counts_as_a_write() {
    let (prog, x) = two_readers(|p, x| {
        p.host_fn("peek", &[x.into()], &[], |_| Ok(()));
    });
    let on = elided(prog);
    assert_eq!(count(on.graph(), "h2d", x), 2);
}

#[test]
fn always_forces_the_copy() {
    let mut p = ProgramBuilder::new("always");
    let x = p.buffer("x", ElemType::I32, 64, Init::Iota);
    let y = p.buffer("y", ElemType::I32, 64, Init::Zeros);
    for r in ["r1", "r2"] {
        let always = p.map(MapType::To, x).always();
        p.target(r, "copy")
            .arg(x)
            .arg(y)
            .map_item(always)
            .map(MapType::ToFrom, y);
    }
    let (on, _) = checked(p.build());
    assert_eq!(count(on.graph(), "h2d", x), 2);
    // y's H2D in r2 is elided (kept, clean after its D2H), its D2H deferred and r1's dropped.
    assert_eq!(count(on.graph(), "h2d", y), 1);
    assert_eq!(count(on.graph(), "d2h", y), 1);
}

#[test]
fn a_map_without_to_takes_no_kept_copy() {
    let mut p = ProgramBuilder::new("from_fresh");
    let y = p.buffer("y", ElemType::I32, 64, Init::Iota);
    p.target("r1", "increment").arg(y).map(MapType::ToFrom, y);
    // `alloc` storage reads as zero in the reference: a kept copy holding y would not.
    p.target("r2", "increment").arg(y).map(MapType::Alloc, y);
    p.target("r3", "increment").arg(y).map(MapType::From, y);
    let (on, _) = checked(p.build());
    assert_eq!(count(on.graph(), "alloc", y), 3);
    assert_eq!(on.reference().unwrap().as_i32("y").unwrap()[7], 1);
}

#[test]
fn deferred_d2h_is_written_back_before_a_host_read_and_at_the_end() {
    let mut p = ProgramBuilder::new("deferred");
    let y = p.buffer("y", ElemType::I32, 64, Init::Iota);
    p.target("r1", "increment")
        .arg(y)
        .map(MapType::ToFrom, y)
        .nowait();
    p.target("r2", "increment")
        .arg(y)
        .map(MapType::ToFrom, y)
        .nowait();
    p.host_task("look", &[y.into()], &[]);
    p.target("r3", "increment")
        .arg(y)
        .map(MapType::ToFrom, y)
        .nowait();
    let (on, off) = checked(p.build());
    assert_eq!(count(off.graph(), "d2h", y), 3);
    assert_eq!(count(on.graph(), "d2h", y), 2, "{}", on.schedule());
    assert_eq!(count(on.graph(), "h2d", y), 1);
    let g = on.graph();
    let dropped: Vec<&str> = g
        .elided
        .iter()
        .filter_map(|e| match e {
            ElidedCopy::D2H {
                region,
                written_back: None,
                ..
            } => Some(g.regions[region.index()].name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(dropped, ["r1"]);
    // r2's write-back sits in a `writeback` region before the host task; r3's copy is
    // not kept (nothing maps y later), so its D2H stays in r3.
    let wb: Vec<&str> = g
        .op_ids()
        .filter(|&id| matches!(g.op(id).kind, OpKind::D2H { .. }))
        .map(|id| g.region_of(id).name.as_str())
        .collect();
    assert_eq!(wb, ["writeback", "r3"]);
    assert_eq!(on.reference().unwrap().as_i32("y").unwrap()[0], 3);
}

/// A region's buffer argument that is present (inside a `target data`) is a use of the
/// section the pass counted before lowering: once it is past, nothing later maps the
/// section, so the target data's exit copies back and frees in place. (Was: the use was
/// never counted off, so the exit kept the storage, deferred its D2H to a `writeback`
/// region before the host task and freed it at the end.)
#[test]
fn a_present_argument_is_a_use_counted_off_when_past() {
    let mut p = ProgramBuilder::new("present_arg");
    let x = p.buffer("x", ElemType::F32, 8, Init::Iota);
    let maps = vec![p.map(MapType::ToFrom, x)];
    p.target_data("d", maps, |p| {
        p.target("k", "scale").num(2.0).arg(x);
        p.target("k2", "scale").num(2.0).arg(x);
    });
    p.host_task("post", &[x.into()], &[]);
    let (on, _) = checked(p.build());
    let g = on.graph();
    assert!(g.elided.is_empty(), "{:?}", g.elided);
    let regions: Vec<&str> = g
        .op_ids()
        .filter(|&id| matches!(g.op(id).kind, OpKind::D2H { .. } | OpKind::Free { .. }))
        .map(|id| g.region_of(id).name.as_str())
        .collect();
    assert_eq!(regions, ["d end", "d end"], "{}", on.schedule());
    assert_eq!(on.reference().unwrap().as_f32("x").unwrap()[3], 12.0);
}

/// The bytes left out plus the bytes moved are what the mapping rules name, for every
/// graph file; never more moved with elision than without.
#[test]
fn elided_and_moved_bytes_add_up_over_every_graph() {
    let mut elided_somewhere = 0;
    for path in common::graph_files() {
        let on = Plan::from_file(&path, &ScheduleOptions::default())
            .and_then(|plan| plan.relower(&LowerOptions::elided()))
            .unwrap_or_else(|e| panic!("{}", e.render()));
        let off = on.relower(&off()).unwrap();
        let (h_on, d_on) = common::moved(on.graph());
        let (h_off, d_off) = common::moved(off.graph());
        let e = on.graph().elided_bytes();
        let name = path.display();
        assert_eq!(h_on + e.h2d, h_off, "{name}");
        assert_eq!(d_on + e.d2h, d_off, "{name}");
        assert!(off.graph().elided.is_empty(), "{name}");
        // The default lowers with elision.
        let default = Plan::from_file(&path, &ScheduleOptions::default()).unwrap();
        assert_eq!(common::moved(default.graph()), (h_on, d_on), "{name}");
        assert_eq!(
            default.graph().bytes_moved(),
            on.graph().bytes_moved(),
            "{name}"
        );
        assert_eq!(
            on.graph().bytes_moved().unelided(),
            (h_off, d_off),
            "{name}"
        );
        assert_eq!(
            on.proof().elisions_proven,
            on.graph().elided.len(),
            "{name}"
        );
        if !on.graph().elided.is_empty() {
            elided_somewhere += 1;
        }
    }
    assert!(
        elided_somewhere >= 5,
        "only {elided_somewhere} graphs elide"
    );
}

/// LLVM bug49334's blocked matmul (bench dag, n 256, bs 16): 4096 regions each mapping
/// `to: A(i,k), B(k,j)` and `tofrom: C(i,j)`.
#[test]
fn bench_dag_matmul_moves_each_tile_once() {
    let p = offload_sched::model::blocked_matmul(256, 16);
    let g_on = lower_with(&p, &LowerOptions::elided()).unwrap();
    let g_off = lower_with(&p, &off()).unwrap();
    let (h_on, d_on) = common::moved(&g_on);
    let (h_off, d_off) = common::moved(&g_off);
    println!("matmul n256 bs16: H2D {h_off} -> {h_on} bytes, D2H {d_off} -> {d_on} bytes");
    assert_eq!((h_off, d_off), (12 << 20, 4 << 20));
    // Every tile of A, B and C once to the device, every C tile once back.
    assert_eq!((h_on, d_on), (768 << 10, 256 << 10));
    let on = elided(p);
    let off = on.relower(&off()).unwrap();
    let want = on.reference().unwrap();
    for plan in [&on, &off] {
        common::run_checked(
            "matmul",
            plan,
            &common::host(1, None),
            IssueMode::Serial,
            &want,
        );
    }
}

// ----- verifier mutations -------------------------------------------------------------

fn proven(p: Program) -> (OpGraph, offload_sched::schedule::Schedule) {
    let g = lower_with(&p, &LowerOptions::elided()).unwrap();
    let s = schedule(
        &g,
        &ScheduleOptions {
            policy: SyncPolicy::PerOp,
            ..ScheduleOptions::default()
        },
    );
    let r = verify(&g, &s).unwrap();
    assert_eq!(r.elisions_proven, g.elided.len());
    assert!(r.elisions_proven > 0);
    (g, s)
}

fn elision_violations(
    g: &OpGraph,
    s: &offload_sched::schedule::Schedule,
) -> Vec<(String, String, String)> {
    let e = verify(g, s).expect_err("the mutated graph must not verify");
    e.violations
        .iter()
        .filter_map(|v| match v {
            Violation::Elision {
                region,
                buffer,
                detail,
                ..
            } => Some((region.clone(), buffer.clone(), detail.clone())),
            _ => None,
        })
        .collect()
}

/// A host task that only read `x` now writes it: the elided H2D of `x` in `r2` reuses a
/// copy that no longer equals the host bytes.
#[test]
fn verifier_refuses_an_elided_h2d_after_a_host_write_it_ignores() {
    let (prog, x) = two_readers(|p, x| {
        p.host_task("look", &[x.into()], &[]);
    });
    let (mut g, s) = proven(prog);
    let look = g
        .op_ids()
        .find(|&id| g.region_of(id).name == "look")
        .unwrap();
    if let OpKind::HostTask { reads, writes, .. } = &mut g.ops[look.index()].kind {
        writes.append(reads);
    }
    let v = elision_violations(&g, &s);
    assert_eq!(v.len(), 1, "{v:?}");
    let (region, buffer, detail) = &v[0];
    assert_eq!((region.as_str(), buffer.as_str()), ("r2", "x"));
    assert!(
        detail.contains("H2D of x[0:64] in region \"r2\" was elided"),
        "{detail}"
    );
    assert!(
        detail.contains(&format!("{look} host in region \"look\"")),
        "{detail}"
    );
    let _ = x;
}

/// The write-back of a deferred D2H copies nothing: the host task that reads `y` sees
/// the bytes from before `r1`.
#[test]
fn verifier_refuses_a_deferred_d2h_a_host_task_reads_first() {
    let mut p = ProgramBuilder::new("dropped");
    let y = p.buffer("y", ElemType::I32, 64, Init::Iota);
    p.target("r1", "increment").arg(y).map(MapType::ToFrom, y);
    p.host_task("look", &[y.into()], &[]);
    // A later use of y, so r1's storage is kept and its D2H deferred.
    p.target("r2", "increment").arg(y).map(MapType::ToFrom, y);
    let (mut g, s) = proven(p.build());
    let back = g
        .elided
        .iter()
        .find_map(|e| match e {
            ElidedCopy::D2H { written_back, .. } => *written_back,
            _ => None,
        })
        .expect("r1's D2H is deferred");
    if let OpKind::D2H { section, .. } = &mut g.ops[back.index()].kind {
        section.len = 0;
    }
    let v = elision_violations(&g, &s);
    assert_eq!(v.len(), 1, "{v:?}");
    let (region, buffer, detail) = &v[0];
    assert_eq!((region.as_str(), buffer.as_str()), ("look", "y"));
    assert!(
        detail.contains(&format!(
            "the D2H of y[0:64] in region \"r1\" was deferred to {back}"
        )),
        "{detail}"
    );
}

/// An elided H2D recorded where the kept copy was never made clean (its kernel wrote
/// it, nothing copied back): the reading kernel sees other bytes.
#[test]
fn verifier_refuses_an_elided_h2d_of_a_dirty_copy() {
    let (prog, _) = two_readers(|_, _| {});
    let (mut g, s) = proven(prog);
    // Make r1's kernel write x (its `copy` writes y): the kept copy of x is then dirty.
    let k = g
        .op_ids()
        .find(|&id| matches!(g.op(id).kind, OpKind::Kernel(_)) && g.region_of(id).name == "r1")
        .unwrap();
    if let OpKind::Kernel(call) = &mut g.ops[k.index()].kind {
        if let offload_sched::lower::KernelArg::Device { access, .. } = &mut call.args[0] {
            *access = offload_sched::model::Access::InOut;
        }
    }
    let v = elision_violations(&g, &s);
    assert!(v.iter().any(|(r, b, _)| r == "r2" && b == "x"), "{v:?}");
}

/// A D2H recorded as dropped (no write-back) whose host bytes a host task reads before
/// any later D2H of them: the host task reads the bytes from before `r1`. The violation
/// names the reading host task and the dropped copy.
#[test]
fn verifier_refuses_a_dropped_d2h_a_host_task_reads() {
    let mut p = ProgramBuilder::new("dropped_read");
    let y = p.buffer("y", ElemType::I32, 64, Init::Iota);
    p.target("r1", "increment").arg(y).map(MapType::ToFrom, y);
    p.host_task("look", &[y.into()], &[]);
    p.target("r2", "increment").arg(y).map(MapType::ToFrom, y);
    let (mut g, s) = proven(p.build());
    let look = g
        .op_ids()
        .find(|&id| g.region_of(id).name == "look")
        .unwrap();
    // Claim r1's deferred D2H was dropped, and make its write-back copy nothing.
    let back = g
        .elided
        .iter_mut()
        .find_map(|e| match e {
            ElidedCopy::D2H { written_back, .. } => written_back.take(),
            _ => None,
        })
        .expect("r1's D2H is deferred");
    if let OpKind::D2H { section, .. } = &mut g.ops[back.index()].kind {
        section.len = 0;
    }
    let v = elision_violations(&g, &s);
    assert_eq!(v.len(), 1, "{v:?}");
    let (region, buffer, detail) = &v[0];
    assert_eq!((region.as_str(), buffer.as_str()), ("look", "y"));
    assert!(
        detail.contains("the D2H of y[0:64] in region \"r1\" was dropped"),
        "{detail}"
    );
    assert!(detail.contains(&format!("{look}")), "{detail}");
}
