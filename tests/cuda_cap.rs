//! The default device memory cap on the CUDA plugin (issue 28 point 2: "default the
//! device's free memory on CUDA"; `Plan::for_plugin`, `Plugin::memory_info` =
//! `cuMemGetInfo`): it resolves to at most the device's total memory, and a tiled
//! Cholesky in the per-task-map form bound to it copies each tile in once, as the
//! entered form does (without a cap the 256 MiB keep limit makes it copy tiles again),
//! with no prefetch (that cap does not bind: `Prefetch::CapBinds`); a small one bound
//! the same way matches the reference. Under a binding cap (a quarter of the matrix) a
//! mapped dpotrf prefetches, and replayed as CUDA graphs its arena fits the cap
//! (`src/replay/memory.rs`) and its results equal stream issue bit for bit. Run on the
//! GPU machine by `benches/gpu/run.sh gputest` (prepare.sh with `TESTS="cuda_cap"`);
//! skips, saying so, without a CUDA driver.

#![cfg(feature = "cuda")]

mod common;

use offload_sched::lower::LowerOptions;
use offload_sched::model::{tiled_cholesky, DataStyle, ElemType, MatrixInit, Tiling};
use offload_sched::plugin::cuda::{probe, CudaPlugin, CudaPluginOptions};
use offload_sched::plugin::Plugin;
use offload_sched::replay::ReplayPlan;
use offload_sched::schedule::ScheduleOptions;
use offload_sched::verify::peak_live_bytes;
use offload_sched::{Bindings, Plan, Session};

fn cuda() -> Option<CudaPlugin> {
    if let Err(why) = probe() {
        eprintln!("skipping the CUDA default-cap tests: no CUDA driver or device ({why})");
        return None;
    }
    Some(CudaPlugin::new(CudaPluginOptions::default()).expect("CUDA plugin"))
}

fn cholesky(n: u64, tile: u64, style: DataStyle) -> Plan {
    let t = Tiling {
        n,
        tile,
        ty: ElemType::F64,
        style,
        init: MatrixInit::Random(1),
    };
    Plan::new(tiled_cholesky(&t), &ScheduleOptions::default()).expect("plan")
}

#[test]
fn the_default_cap_is_at_most_the_device_memory_and_each_tile_moves_once() {
    let Some(p) = cuda() else { return };
    let m = p.memory_info(0).unwrap().expect("CUDA reports its memory");
    assert!(m.free <= m.total && m.total > 0, "{m:?}");
    // n 8192 f64: the lower triangle's 36 tiles of 1024² are 288 MiB, over the keep limit.
    let mapped = cholesky(8192, 1024, DataStyle::Mapped);
    assert_eq!(mapped.graph().device_memory, None);
    let bound = mapped
        .for_plugin(&p)
        .unwrap_or_else(|e| panic!("{}", e.render()));
    let cap = bound.graph().device_memory.expect("a cap from the device");
    assert!(
        cap <= m.total,
        "cap {cap} over the device's {} bytes",
        m.total
    );
    let entered = cholesky(8192, 1024, DataStyle::Entered);
    let (b, e, u) = (
        bound.graph().bytes_moved(),
        entered.graph().bytes_moved(),
        mapped.graph().bytes_moved(),
    );
    // Each lower-triangle tile moves to the device once (the entered form enters the
    // whole matrix, 512 MiB: the mapped form never maps the upper tiles); what the
    // program moves beside the matrix (its 8 KiB of other buffers) moves in both alike.
    let others = e.h2d - 8192 * 8192 * 8;
    let lower: u64 = 36 * 1024 * 1024 * 8 + others;
    assert_eq!(b.h2d, lower, "bound {b} / entered {e}");
    assert!(b.h2d <= e.h2d, "bound {b} / entered {e}");
    assert_eq!(b.evicted, 0, "{b}");
    // Unbound, the 256 MiB keep limit never moves less (at this size it happens not to
    // bind: the H200 run 23 moved 288 MiB both ways; at N=32768, tile 2048 it moved
    // 30.3 GiB against 8 GiB in run 22).
    assert!(u.h2d >= b.h2d, "unbound {u} / bound {b}");
    // The device's free memory does not bind (nothing evicted): no prefetch by default.
    assert_eq!(b.prefetched, 0, "{b}");
    // A cap given is kept; the default turned off leaves the plan unlimited.
    let given = mapped
        .relower(&LowerOptions {
            device_memory: Some(1 << 30),
            ..LowerOptions::default()
        })
        .unwrap();
    assert_eq!(
        given.for_plugin(&p).unwrap().graph().device_memory,
        Some(1 << 30)
    );
    let off = mapped
        .relower(&LowerOptions {
            default_cap: offload_sched::lower::DefaultCap::Unlimited,
            ..LowerOptions::default()
        })
        .unwrap();
    assert_eq!(off.for_plugin(&p).unwrap().graph().device_memory, None);
    // The bound plan runs.
    bound.run(&p).unwrap_or_else(|e| panic!("{}", e.render()));
}

#[test]
fn a_bound_mapped_cholesky_matches_the_reference() {
    let Some(p) = cuda() else { return };
    let plan = cholesky(1024, 128, DataStyle::Mapped)
        .for_plugin(&p)
        .unwrap_or_else(|e| panic!("{}", e.render()));
    assert!(plan.graph().device_memory.is_some());
    assert_eq!(plan.graph().bytes_moved().prefetched, 0, "an unbinding cap");
    let want = plan.reference().unwrap();
    let got = plan.run(&p).unwrap_or_else(|e| panic!("{}", e.render()));
    offload_sched::reference::check_tol(&got.buffers, &want, 1e-9)
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn a_mapped_dpotrf_under_a_quarter_cap_replays_within_it_bit_identical_to_stream_issue() {
    let Some(p) = cuda() else { return };
    // n 2048, tile 256: 64 tiles of 512 KiB, a 32 MiB matrix; the cap 8 MiB.
    let cap = 2048 * 2048 * 8 / 4;
    let plan = cholesky(2048, 256, DataStyle::Mapped)
        .relower(&LowerOptions {
            device_memory: Some(cap),
            ..LowerOptions::default()
        })
        .unwrap_or_else(|e| panic!("{}", e.render()));
    let g = plan.graph();
    assert!(!g.evictions.is_empty(), "the cap binds");
    assert!(g.bytes_moved().prefetched > 0, "a binding cap prefetches");
    let arena = ReplayPlan::new(g, plan.schedule()).unwrap().arena.bytes();
    let peak = peak_live_bytes(g, 0).bytes;
    eprintln!("dpotrf 2048/256 under {cap}: proven peak {peak}, replay arena {arena}");
    assert!(arena <= cap, "arena {arena} over the cap {cap}");
    let mut live = Session::new(&plan, &p).unwrap();
    live.run(Bindings::new())
        .unwrap_or_else(|e| panic!("{}", e.render()));
    let mut replayed = Session::new(&plan, &p).unwrap().with_replay(true);
    for run in 0..2 {
        let r = replayed
            .run(Bindings::new())
            .unwrap_or_else(|e| panic!("run {run}: {}", e.render()));
        let stats = r.replay.expect("replayed");
        assert_eq!(stats.arena_bytes, arena);
        assert!(
            common::library::read_all(&plan, &live) == common::library::read_all(&plan, &replayed),
            "run {run}: replay differs from stream issue"
        );
    }
    let want = plan.reference().unwrap();
    let got = plan.run(&p).unwrap_or_else(|e| panic!("{}", e.render()));
    offload_sched::reference::check_tol(&got.buffers, &want, 1e-9)
        .unwrap_or_else(|e| panic!("{e}"));
}
