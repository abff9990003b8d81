//! Prefetch (issue 28 point 2; src/lower/prefetch.rs, src/schedule/prefetch.rs): which
//! H2D copies are prefetched and their bytes on programs where both are known, where the
//! schedule puts them (a copy stream per device, issued first), and, over random
//! programs, that prefetched schedules under a cap give the reference's values under
//! jitter and random streams on the host plugin held to the cap, with the peak of live
//! device bytes within the cap (from the graph's exact peak, from the schedule's issue
//! order, and as the plugin measured it); the matmul replayed as plugin graphs gives
//! the same bytes as stream issue.
//!
//! Cases: 64 by default, `PROPTEST_CASES=N` to change.

mod common;
#[path = "common/programs.rs"]
mod programs;

use offload_sched::exec::IssueMode;
use offload_sched::lower::{LowerError, LowerOptions, OpGraph, OpKind, Prefetch};
use offload_sched::model::{
    blocked_matmul, tiled_cholesky, DataStyle, ElemType, Init, MapType, MatrixInit, ProgramBuilder,
    Tiling,
};
use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
use offload_sched::schedule::{Schedule, ScheduleOptions, Step, StreamId};
use offload_sched::verify::peak_live_bytes;
use offload_sched::{Bindings, Error, Plan, Session};
use programs::{build, gen, Gen};
use proptest::prelude::*;

fn capped(cap: u64, prefetch: Prefetch) -> LowerOptions {
    LowerOptions {
        device_memory: Some(cap),
        prefetch,
        ..LowerOptions::elided()
    }
}

/// The most live device bytes of device 0 along the schedule's issue order (one
/// execution it allows: every op in step order).
fn issue_order_peak(g: &OpGraph, s: &Schedule) -> u64 {
    let (mut live, mut peak) = (0u64, 0u64);
    for step in &s.steps {
        let Step::Op(o) = step else { continue };
        match g.op(*o).kind {
            OpKind::Alloc { alloc } => live += g.allocs[alloc.index()].bytes,
            OpKind::Free { alloc } => live -= g.allocs[alloc.index()].bytes,
            _ => {}
        }
        peak = peak.max(live);
    }
    peak
}

/// Two regions read `a` (4 KiB, kept between them: its first H2D is prefetched), one
/// region reads `b` (1 KiB, used once: not prefetched); each writes its own output.
fn shared_and_single() -> offload_sched::Program {
    let mut p = ProgramBuilder::new("shared");
    let a = p.buffer("a", ElemType::F32, 1024, Init::Fill(1.0));
    let b = p.buffer("b", ElemType::F32, 256, Init::Fill(2.0));
    let y = p.buffer("y", ElemType::F32, 1024, Init::Zeros);
    let z = p.buffer("z", ElemType::F32, 256, Init::Zeros);
    let w = p.buffer("w", ElemType::F32, 1024, Init::Zeros);
    p.target("r0", "saxpy")
        .num(2.0)
        .arg(a)
        .arg(y)
        .map(MapType::To, a)
        .map(MapType::ToFrom, y)
        .nowait();
    p.target("r1", "saxpy")
        .num(3.0)
        .arg(b)
        .arg(z)
        .map(MapType::To, b)
        .map(MapType::ToFrom, z)
        .nowait();
    p.target("r2", "saxpy")
        .num(4.0)
        .arg(a)
        .arg(w)
        .map(MapType::To, a)
        .map(MapType::ToFrom, w)
        .nowait();
    p.build()
}

#[test]
fn only_the_first_fill_of_a_shared_copy_is_prefetched() {
    let opts = ScheduleOptions::default();
    let plan = Plan::new_lowered(
        shared_and_single(),
        &opts,
        &capped(1 << 20, Prefetch::UnderCap),
    )
    .unwrap();
    let g = plan.graph();
    let m = g.bytes_moved();
    // a once (the second use takes the kept copy), b, y, z, w.
    assert_eq!(m.h2d, 4096 + 1024 + 4096 + 1024 + 4096);
    assert_eq!(m.elided_h2d, 4096);
    assert_eq!(m.prefetched, 4096);
    assert_eq!(g.prefetches.len(), 1);
    let h = g.prefetches[0];
    assert_eq!(g.describe(h), "h2d a[0:1024] 4 KiB");
    assert_eq!(g.region_of(h).name, "r0");
    // The H2D and its Alloc on the copy stream: the last of a pool of 4 + 1.
    let s = plan.schedule();
    assert_eq!(s.streams.len(), 5);
    let ops = g.prefetch_ops();
    assert_eq!(ops.len(), 2);
    assert!(matches!(g.op(ops[0]).kind, OpKind::Alloc { .. }));
    for o in &ops {
        assert_eq!(
            s.op_stream[o.index()],
            Some(StreamId(4)),
            "{}",
            g.describe(*o)
        );
    }
    // Issued first, before any op of another stream.
    let first: Vec<_> = s
        .steps
        .iter()
        .filter_map(|st| match st {
            Step::Op(o) => Some(*o),
            _ => None,
        })
        .take(2)
        .collect();
    assert_eq!(first, ops);
    assert_eq!(plan.proof().exact_peaks, 0);

    // Off, or without a cap by default: nothing prefetched, the pool as asked.
    for lower in [capped(1 << 20, Prefetch::Off), LowerOptions::elided()] {
        let p = Plan::new_lowered(shared_and_single(), &opts, &lower).unwrap();
        assert_eq!(p.graph().bytes_moved().prefetched, 0);
        assert!(p.graph().prefetches.is_empty());
        assert_eq!(p.schedule().streams.len(), 4);
    }
    // Forced on without a cap.
    let on = LowerOptions {
        prefetch: Prefetch::On,
        ..LowerOptions::elided()
    };
    let p = Plan::new_lowered(shared_and_single(), &opts, &on).unwrap();
    assert_eq!(p.graph().bytes_moved().prefetched, 4096);
    // Without elision nothing is shared between regions: nothing to prefetch.
    let p = Plan::new_lowered(
        shared_and_single(),
        &opts,
        &LowerOptions {
            elide: false,
            ..capped(1 << 20, Prefetch::UnderCap)
        },
    )
    .unwrap();
    assert_eq!(p.graph().bytes_moved().prefetched, 0);
}

/// The blocked matmul of n 64 in 16-tiles (16 tiles of 1 KiB each of A, B and C): with
/// elision each tile is copied in once and used by 4 regions, so every H2D is a first
/// fill of a shared copy; those whose `Alloc` waits for no `Free` are prefetched (all 48
/// KiB under a cap above them, `schedule graphs/matmul_small.toml --device-memory
/// 64KiB`: no region's `depend` predecessor stands for it by the `Free` of a kept copy,
/// which held 6 KiB back before), at most the cap under a cap of half; the runs match the
/// reference on the host plugin held to the cap, on 1, 2 and 4 streams.
#[test]
fn every_tile_of_the_blocked_matmul_is_prefetched_and_the_values_hold() {
    for (cap, streams) in [(64 << 10, 2), (24 << 10, 1), (24 << 10, 2), (24 << 10, 4)] {
        let opts = ScheduleOptions {
            streams_per_device: streams,
            ..ScheduleOptions::default()
        };
        let plan = Plan::new_lowered(
            blocked_matmul(64, 16),
            &opts,
            &capped(cap, Prefetch::UnderCap),
        )
        .unwrap();
        let g = plan.graph();
        let m = g.bytes_moved();
        assert_eq!(m.h2d, 48 << 10, "{streams} streams: {m}");
        assert!(m.prefetched > 0 && m.prefetched <= cap.min(m.h2d), "{m}");
        if cap > m.h2d {
            assert_eq!(m.prefetched, 48 << 10, "{m}");
        }
        for o in g.prefetch_ops() {
            let from_free = g
                .preds(o)
                .iter()
                .any(|&p| matches!(g.op(p).kind, OpKind::Free { .. }));
            assert!(!from_free, "{} waits for room", g.describe(o));
        }
        assert!(peak_live_bytes(g, 0).bytes <= cap);
        assert!(issue_order_peak(g, plan.schedule()) <= cap);
        let want = plan.reference().unwrap();
        let plugin = HostPlugin::new(HostPluginOptions {
            delay_jitter: Some(u64::from(streams) + cap),
            device_memory: Some(cap),
            ..HostPluginOptions::default()
        });
        common::run_checked("matmul", &plan, &plugin, IssueMode::Serial, &want);
        assert!(plugin.peak_device_bytes(0) <= cap);
        // Replayed as plugin graphs (the copy stream a segment's stream like any other):
        // the same bytes as stream issue, on the plugin held to the cap (the arena
        // reuses a block across streams where the free happens before the alloc).
        let plugin = HostPlugin::new(HostPluginOptions {
            device_memory: Some(cap),
            ..HostPluginOptions::default()
        });
        let mut live = Session::new(&plan, &plugin).unwrap();
        live.run(Bindings::new()).unwrap();
        let mut replayed = Session::new(&plan, &plugin).unwrap().with_replay(true);
        let r = replayed.run(Bindings::new()).unwrap();
        assert!(r.replay.is_some(), "{streams} streams: not replayed");
        let (a, b) = (
            common::library::read_all(&plan, &live),
            common::library::read_all(&plan, &replayed),
        );
        assert!(a == b, "{streams} streams: replay differs");
    }
}

/// The default (`Prefetch::CapBinds`) prefetches where the cap binds and nowhere else: a
/// tiled Cholesky (per-task maps, n 256 in 32-tiles of 8 KiB, 512 KiB matrix) under a
/// quarter of its matrix evicts and prefetches, as does graphs/cholesky_mapped.toml under
/// 640 bytes, where the cap binds by memory edges alone (nothing evicted: the keep limit
/// is the cap; its allocations add up to more than 640 bytes); the blocked matmul of `bench dag` (n 256,
/// bs 16, 768 KiB) under a 1 GiB cap evicts nothing and prefetches nothing, as without a
/// cap, while `UnderCap` and `--prefetch` (`On`) still prefetch it.
#[test]
fn the_default_prefetches_only_where_the_cap_binds() {
    let opts = ScheduleOptions::default();
    let t = Tiling {
        n: 256,
        tile: 32,
        ty: ElemType::F64,
        style: DataStyle::Mapped,
        init: MatrixInit::Random(5),
    };
    let quarter = 256 * 256 * 8 / 4;
    let chol = Plan::new_lowered(
        tiled_cholesky(&t),
        &opts,
        &capped(quarter, Prefetch::default()),
    )
    .unwrap();
    let g = chol.graph();
    assert!(!g.evictions.is_empty(), "the quarter cap binds");
    assert!(!g.prefetches.is_empty(), "binding cap: prefetched");
    assert!(g.bytes_moved().prefetched > 0);
    let small = common::plan("cholesky_mapped.toml")
        .relower(&capped(640, Prefetch::default()))
        .unwrap();
    let m = small.graph().bytes_moved();
    assert_eq!((m.evicted, m.prefetched), (0, 544), "{m}");
    let matmul = |lower: &LowerOptions| {
        let p = Plan::new_lowered(blocked_matmul(256, 16), &opts, lower).unwrap();
        (
            p.graph().evictions.len(),
            p.graph().bytes_moved().prefetched,
            p.schedule().streams.len(),
        )
    };
    let (evicted, prefetched, streams) = matmul(&capped(1 << 30, Prefetch::default()));
    assert_eq!(
        (evicted, prefetched, streams),
        (0, 0, 4),
        "unbinding cap: off"
    );
    let (_, under, streams) = matmul(&capped(1 << 30, Prefetch::UnderCap));
    assert_eq!(
        (under, streams),
        (768 << 10, 5),
        "UnderCap: on under any cap"
    );
    let forced = LowerOptions {
        prefetch: Prefetch::On,
        ..LowerOptions::elided()
    };
    assert_eq!(matmul(&forced).1, 768 << 10, "--prefetch forces it");
}

fn properties(mut g: Gen, seed: u64) {
    g.two_devices = false;
    let opts = ScheduleOptions {
        random_streams: Some(seed),
        ..ScheduleOptions::default()
    };
    let Ok(free) = Plan::new(build(&g), &opts).and_then(|p| p.relower(&LowerOptions::elided()))
    else {
        return;
    };
    let peak = peak_live_bytes(free.graph(), 0).bytes;
    if peak == 0 {
        return;
    }
    let want = free.reference().expect("reference runs");
    for cap in [peak, peak * 3 / 4] {
        let cap = cap.max(1);
        let plan = match free.relower(&capped(cap, Prefetch::On)) {
            Ok(p) => p,
            Err(Error::Lower { error, .. })
                if matches!(*error, LowerError::DeviceMemory { .. }) =>
            {
                assert!(cap < peak, "refused at the uncapped peak {peak}: {error}");
                continue;
            }
            Err(e) => panic!("cap {cap}: {}", e.render()),
        };
        let (gr, s) = (plan.graph(), plan.schedule());
        assert!(peak_live_bytes(gr, 0).bytes <= cap);
        assert!(issue_order_peak(gr, s) <= cap);
        // Every prefetched op on the copy stream.
        let copy = StreamId(s.streams.len() as u32 - 1);
        for o in gr.prefetch_ops() {
            assert_eq!(s.op_stream[o.index()], Some(copy));
        }
        for (k, issue) in [IssueMode::Serial, IssueMode::PerStream]
            .into_iter()
            .enumerate()
        {
            let plugin = HostPlugin::new(HostPluginOptions {
                delay_jitter: Some(seed.wrapping_add(k as u64)),
                device_memory: Some(cap),
                ..HostPluginOptions::default()
            });
            common::run_checked("prefetched", &plan, &plugin, issue, &want);
            assert!(plugin.peak_device_bytes(0) <= cap);
        }
    }
}

proptest! {
    #![proptest_config(programs::config())]

    #[test]
    fn prefetched_random_programs_match_the_reference_within_the_cap(
        g in gen(), seed in any::<u64>()
    ) {
        properties(g, seed);
    }
}

/// The property is not vacuous: over a fixed sample of generated programs, some
/// prefetch copies.
#[test]
fn generated_programs_prefetch() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = gen();
    let (mut lowered, mut prefetched) = (0, 0);
    for _ in 0..100 {
        let mut g = strategy.new_tree(&mut runner).unwrap().current();
        g.two_devices = false;
        let lower = LowerOptions {
            prefetch: Prefetch::On,
            ..LowerOptions::elided()
        };
        let Ok(gr) = offload_sched::lower::lower_with(&build(&g), &lower) else {
            continue;
        };
        lowered += 1;
        prefetched += usize::from(!gr.prefetches.is_empty());
    }
    assert!(lowered >= 50, "{lowered} of 100 lowered");
    assert!(prefetched >= 10, "{prefetched} of {lowered} prefetch");
}
