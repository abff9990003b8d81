//! Replay under a binding device memory cap (issue 28; `src/replay/memory.rs`): the
//! replay arena reuses a block freed on one stream for an alloc on another when the free
//! happens before the alloc, so its bytes stay within the cap the verifier proved for the
//! schedule. Computed on the host side (`ReplayPlan::new`, plain data) for tiled
//! Cholesky in the per-task-map form under a quarter of the matrix and for random
//! programs; the capped Cholesky replayed on the host plugin held to the cap, under
//! jitter, equals stream issue bit for bit; an arena the cap cannot hold is refused
//! before anything runs, naming the cap and the bytes.
//!
//! Cases of the property: 64 by default, `PROPTEST_CASES=N` to change.

mod common;
#[path = "common/programs.rs"]
mod programs;

use offload_sched::lower::{LowerError, LowerOptions};
use offload_sched::model::{
    tiled_cholesky, DataStyle, ElemType, Init, MapType, MatrixInit, ProgramBuilder, Tiling,
};
use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
use offload_sched::replay::ReplayPlan;
use offload_sched::schedule::ScheduleOptions;
use offload_sched::verify::peak_live_bytes;
use offload_sched::{Bindings, Error, Plan, Session};
use programs::{build, gen, Gen};
use proptest::prelude::*;

fn capped(cap: u64) -> LowerOptions {
    LowerOptions {
        device_memory: Some(cap),
        ..LowerOptions::elided()
    }
}

/// The arena bytes of `plan` replayed (`ReplayPlan::new`, no plugin).
fn arena(plan: &Plan) -> u64 {
    ReplayPlan::new(plan.graph(), plan.schedule())
        .expect("one device")
        .arena
        .bytes()
}

/// Tiled Cholesky, per-task maps, f64, `n` by `tile`: (plan, matrix bytes).
fn cholesky(n: u64, tile: u64, opts: &ScheduleOptions) -> (Plan, u64) {
    let t = Tiling {
        n,
        tile,
        ty: ElemType::F64,
        style: DataStyle::Mapped,
        init: MatrixInit::Random(3),
    };
    let plan = Plan::new(tiled_cholesky(&t), opts).expect("plan");
    (plan, n * n * 8)
}

/// Runs `plan` in a session on a host plugin held to `cap` with delay jitter `seed`,
/// replayed or not: every buffer's bytes, and the arena bytes of a replayed run.
fn session_bytes(
    plan: &Plan,
    cap: u64,
    seed: u64,
    replay: bool,
) -> (Vec<(String, Vec<u8>)>, Option<u64>) {
    let plugin = HostPlugin::new(HostPluginOptions {
        delay_jitter: Some(seed),
        device_memory: Some(cap),
        ..HostPluginOptions::default()
    });
    let mut s = Session::new(plan, &plugin).unwrap().with_replay(replay);
    let r = s
        .run(Bindings::new())
        .unwrap_or_else(|e| panic!("replay {replay}: {}", e.render()));
    assert_eq!(r.replay.is_some(), replay);
    assert!(plugin.peak_device_bytes(0) <= cap, "replay {replay}");
    (
        common::library::read_all(plan, &s),
        r.replay.map(|x| x.arena_bytes),
    )
}

#[test]
fn a_capped_mapped_cholesky_replays_within_the_cap_bit_identical_to_stream_issue() {
    // n 256, tile 32: 8 KiB tiles, a 512 KiB matrix, the cap a quarter of it.
    for (k, opts) in [
        ScheduleOptions::default(),
        ScheduleOptions {
            streams_per_device: 1,
            ..ScheduleOptions::default()
        },
        ScheduleOptions {
            random_streams: Some(7),
            ..ScheduleOptions::default()
        },
    ]
    .into_iter()
    .enumerate()
    {
        let (free, matrix) = cholesky(256, 32, &opts);
        let cap = matrix / 4;
        assert!(
            peak_live_bytes(free.graph(), 0).bytes > cap,
            "the cap binds"
        );
        let plan = free
            .relower(&capped(cap))
            .unwrap_or_else(|e| panic!("{}", e.render()));
        let peak = peak_live_bytes(plan.graph(), 0).bytes;
        let bytes = arena(&plan);
        eprintln!("cholesky 256/32 options {k}: cap {cap}, proven peak {peak}, arena {bytes}");
        assert!(
            bytes <= cap,
            "options {k}: arena {bytes} over the cap {cap}"
        );
        assert!(bytes >= 3 * 8192, "options {k}: a gemm holds three tiles");
        let want = plan.reference().unwrap();
        let (live, none) = session_bytes(&plan, cap, 11 + k as u64, false);
        assert_eq!(none, None);
        let (replayed, held) = session_bytes(&plan, cap, 12 + k as u64, true);
        assert_eq!(
            held,
            Some(bytes),
            "options {k}: the run holds the planned arena"
        );
        assert!(
            live == replayed,
            "options {k}: replay differs from stream issue"
        );
        let got = plan.run(&common::host(1, None)).unwrap();
        offload_sched::reference::check_tol(&got.buffers, &want, 1e-9)
            .unwrap_or_else(|e| panic!("options {k}: {e}"));
    }
}

#[test]
fn a_larger_capped_cholesky_fits_its_arena_in_the_cap() {
    // n 1024, tile 128 (8 × 8 tiles of 128 KiB) on 4 and 8 streams: plan only.
    for streams in [4, 8] {
        let opts = ScheduleOptions {
            streams_per_device: streams,
            ..ScheduleOptions::default()
        };
        let (free, matrix) = cholesky(1024, 128, &opts);
        let cap = matrix / 4;
        let plan = free.relower(&capped(cap)).unwrap();
        let (peak, bytes) = (peak_live_bytes(plan.graph(), 0).bytes, arena(&plan));
        eprintln!(
            "cholesky 1024/128 on {streams} streams: cap {cap}, proven peak {peak}, arena {bytes}"
        );
        assert!(bytes <= cap, "{streams} streams: arena {bytes} over {cap}");
    }
}

/// `add` of three 1 KiB buffers, then `increment` of one 3 KiB buffer: under a 3 KiB cap
/// the first region's three blocks are freed before the second's alloc, which no one of
/// them holds (blocks are not joined): the arena is 1 + 1 + 3 KiB.
fn unjoinable() -> Plan {
    let mut p = ProgramBuilder::new("unjoinable");
    let x = p.buffer("x", ElemType::F32, 256, Init::Fill(1.0));
    let y = p.buffer("y", ElemType::F32, 256, Init::Fill(2.0));
    let z = p.buffer("z", ElemType::F32, 256, Init::Zeros);
    let w = p.buffer("w", ElemType::F32, 768, Init::Fill(5.0));
    p.target("sum", "add")
        .arg(x)
        .arg(y)
        .arg(z)
        .map(MapType::To, x)
        .map(MapType::To, y)
        .map(MapType::From, z);
    p.target("bump", "increment").arg(w).map(MapType::ToFrom, w);
    Plan::new(p.build(), &ScheduleOptions::default())
        .unwrap()
        .relower(&capped(3072))
        .unwrap()
}

#[test]
fn an_arena_over_the_cap_falls_back_to_stream_issue_within_the_cap() {
    let plan = unjoinable();
    let rp = ReplayPlan::new(plan.graph(), plan.schedule()).unwrap();
    assert_eq!(rp.arena.bytes(), 5 << 10, "{:?}", rp.arena);
    let over = rp.check_cap(plan.graph()).unwrap_err();
    assert_eq!((over.cap, over.arena, over.peak), (3072, 5120, 3072));
    let plugin = HostPlugin::new(HostPluginOptions {
        device_memory: Some(3072),
        ..HostPluginOptions::default()
    });
    assert_eq!(
        over.to_string(),
        "replay needs an arena of 5 KiB (5120 bytes) on device 0, over its device memory \
         cap of 3 KiB (3072 bytes; the schedule's proven peak is 3072 bytes: arena blocks \
         are neither split nor joined); stream issue keeps the cap"
    );
    // A session asked to replay issues it to streams instead: no arena, the bytes of a
    // session that streams it, the plugin (held to the cap) never over it.
    let (live, _) = session_bytes(&plan, 3072, 5, false);
    let mut s = Session::new(&plan, &plugin).unwrap().with_replay(true);
    for _ in 0..3 {
        let r = s.run(Bindings::new()).unwrap();
        assert!(r.replay.is_none(), "not replayed");
        assert!(
            common::library::read_all(&plan, &s) == live,
            "stream issue's bytes"
        );
    }
    drop(s);
    let want = plan.reference().unwrap();
    let got = plan.run(&common::host(1, None)).unwrap();
    offload_sched::reference::check_tol(&got.buffers, &want, 0.0).unwrap();
    assert!(plugin.peak_device_bytes(0) <= 3072);
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
    for cap in [peak, peak * 2 / 3] {
        let cap = cap.max(1);
        let plan = match free.relower(&capped(cap)) {
            Ok(p) => p,
            Err(Error::Lower { error, .. })
                if matches!(*error, LowerError::DeviceMemory { .. }) =>
            {
                continue;
            }
            Err(e) => panic!("cap {cap}: {}", e.render()),
        };
        let rp = ReplayPlan::new(plan.graph(), plan.schedule()).unwrap();
        match rp.check_cap(plan.graph()) {
            Ok(()) => {
                assert!(rp.arena.bytes() <= cap);
                let (live, _) = session_bytes(&plan, cap, seed, false);
                let (replayed, held) = session_bytes(&plan, cap, seed ^ 1, true);
                assert_eq!(held, Some(rp.arena.bytes()));
                assert!(
                    live == replayed,
                    "cap {cap}: replay differs from stream issue"
                );
            }
            Err(over) => {
                // Blocks of mixed sizes that the greedy placement cannot fit (module docs
                // of src/replay/memory.rs): a replayed session falls back to stream issue.
                assert_eq!((over.cap, over.arena), (cap, rp.arena.bytes()));
                assert!(over.arena > cap && over.peak <= cap, "{over}");
                let plugin = HostPlugin::new(HostPluginOptions {
                    device_memory: Some(cap),
                    ..HostPluginOptions::default()
                });
                // A session asked to replay issues it to streams, within the cap.
                let mut s = Session::new(&plan, &plugin).unwrap().with_replay(true);
                let r = s.run(Bindings::new()).unwrap();
                assert!(r.replay.is_none(), "cap {cap}: fell back to stream issue");
                drop(s);
                assert!(plugin.peak_device_bytes(0) <= cap, "cap {cap}");
            }
        }
    }
}

/// Over a fixed sample of generated programs lowered under two thirds of their uncapped
/// peak: how many arenas fit the cap (printed; 112 of 142 when written, the rest mixed
/// sizes that blocks cannot split or join), asserted to be at least three quarters, and
/// every one whose allocations are all of one size.
#[test]
fn most_generated_programs_replay_within_two_thirds_of_their_peak() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = gen();
    let (mut capped_n, mut fit, mut excess, mut uniform) = (0, 0, 0u64, 0);
    for _ in 0..200 {
        let mut g = strategy.new_tree(&mut runner).unwrap().current();
        g.two_devices = false;
        let Ok(free) = Plan::new(build(&g), &ScheduleOptions::default())
            .and_then(|p| p.relower(&LowerOptions::elided()))
        else {
            continue;
        };
        let peak = peak_live_bytes(free.graph(), 0).bytes;
        let Ok(plan) = free.relower(&capped((peak * 2 / 3).max(1))) else {
            continue;
        };
        let cap = plan.graph().device_memory.unwrap();
        capped_n += 1;
        let bytes = arena(&plan);
        let mut sizes: Vec<u64> = plan.graph().allocs.iter().map(|a| a.bytes).collect();
        sizes.sort_unstable();
        sizes.dedup();
        if sizes.len() <= 1 {
            uniform += 1;
            assert!(bytes <= cap, "one size: arena {bytes} over the cap {cap}");
        }
        match bytes <= cap {
            true => fit += 1,
            false => excess = excess.max((bytes - cap) * 100 / cap),
        }
    }
    eprintln!(
        "{fit} of {capped_n} capped programs replay within the cap ({uniform} of one alloc \
         size); the worst arena over it by {excess}%"
    );
    assert!(
        capped_n >= 50,
        "only {capped_n} programs lowered under the cap"
    );
    assert!(fit * 4 >= capped_n * 3, "{fit} of {capped_n} fit");
}

proptest! {
    #![proptest_config(programs::config())]

    #[test]
    fn random_programs_replay_within_the_cap(g in gen(), seed in any::<u64>()) {
        properties(g, seed);
    }
}
