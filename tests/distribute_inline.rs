//! Distributed runs with every rank on one thread (`RankSession::with_inline`,
//! `run_in_process_with(.., inline: true)`: host ops on the issuing thread, receives at
//! their first await) on host plugins whose streams run inline: results identical to one
//! process, nothing hangs.

mod common;
#[path = "common/dist.rs"]
mod dist;

use dist::*;
use offload_sched::distribute::{DistPlan, Distribution};
use offload_sched::exec::Buffers;
use offload_sched::model::{
    tiled_cholesky, tiled_gemm, ElemType, Init, MapType, Program, ProgramBuilder,
};
use offload_sched::schedule::ScheduleOptions;

/// [`run_jittered`] with every rank on its thread alone (`run_in_process_with(..,
/// inline: true)`: host ops on the issuing thread, receives at their first await) on
/// host plugins whose streams run inline too.
fn run_inline(program: &Program, dist: &Distribution, o: &ScheduleOptions, seed: u64) -> Buffers {
    run_jittered(program, dist, o, seed, true)
}

/// Ranks run on one thread each (issue 30's Task Bench ranks): every tiled program, the
/// graph files above and random programs (some with receives their rank's issue order
/// puts ahead of its sends: `send_behind_a_later_receive`, the 4-rank tester graph)
/// give the one-process result on 2 and 4 ranks, none hangs.
#[test]
fn ranks_on_one_thread_each_match_one_process() {
    let t = tiling(256, 64);
    let o = ScheduleOptions::default();
    for program in [tiled_cholesky(&t), tiled_gemm(&t)] {
        let want = one_process(&program);
        for ranks in [2, 4] {
            let mut dist = Distribution::new(ranks).unwrap();
            let (p, q) = grid(ranks);
            for b in ["A", "B", "C"] {
                if let Some(id) = program.buffer_id(b) {
                    dist.block_cyclic(&t, id, p, q).unwrap();
                }
            }
            let got = run_inline(&program, &dist, &o, 90 + ranks as u64);
            assert_eq!(bytes(&got), want, "{} on {ranks} ranks", program.name);
        }
    }
    for name in ["wavefront.toml", "pipeline.toml", "cholesky_mapped.toml"] {
        let program = common::plan(name).program().clone();
        let want = one_process(&program);
        for ranks in [2, 4] {
            let dist = Distribution::new(ranks).unwrap();
            let got = run_inline(&program, &dist, &o, 3 * ranks as u64);
            assert_eq!(bytes(&got), want, "{name} on {ranks} ranks");
        }
    }
    let file = common::plan("distributed/deadlock_split_4ranks.toml");
    let program = file.program().clone();
    let want = one_process(&program);
    let source = file.source().unwrap();
    let dist =
        offload_sched::distribute::file::distribution_from_source(source, &program, 4).unwrap();
    assert_eq!(
        bytes(&run_inline(&program, &dist, &o, 4)),
        want,
        "tester graph"
    );
    let (program, dist) = send_behind_a_later_receive();
    let want = one_process(&program);
    for (o, _) in every_schedule() {
        assert_eq!(bytes(&run_inline(&program, &dist, &o, 5)), want, "{o:?}");
    }
    for seed in 0..12 {
        for ranks in 2..=4 {
            let (program, dist) = random_program(seed * 7919 + ranks as u64, ranks);
            let want = one_process(&program);
            for random_streams in [None, Some(seed)] {
                let o = ScheduleOptions {
                    random_streams,
                    ..ScheduleOptions::default()
                };
                let got = run_inline(&program, &dist, &o, seed);
                assert_eq!(bytes(&got), want, "seed {seed}, {ranks} ranks, {o:?}");
            }
        }
    }
}

/// A rank session run again sends the same envelopes: a rank that gets a run ahead
/// (rank 1 only sends; rank 0 sleeps before each run) must not overwrite or lose the run
/// before's messages. Three runs of a program split over 2 ranks, both on lanes and on one thread, each run
/// giving the one-process result (fresh-user finding: the second run timed out).
#[test]
fn a_rank_a_run_ahead_loses_no_message() {
    use offload_sched::distribute::{ChannelTransport, Transport};
    use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
    use std::sync::Arc;
    // x made on rank 1 and read on rank 0: rank 1 only sends, so nothing holds it back.
    let mut p = ProgramBuilder::new("one_way");
    let x = p.buffer("x", ElemType::F32, 64, Init::Iota);
    let y = p.buffer("y", ElemType::F32, 64, Init::Fill(1.0));
    p.target("make_x", "increment")
        .arg(x)
        .map(MapType::ToFrom, x);
    p.target("use_x", "saxpy")
        .num(2.0)
        .arg(x)
        .arg(y)
        .map(MapType::To, x)
        .map(MapType::ToFrom, y);
    let program = p.build();
    let mut dist = Distribution::new(2).unwrap();
    dist.own_buffer(&program, x, 1).unwrap();
    dist.own_buffer(&program, y, 0).unwrap();
    let want = one_process(&program);
    let plan = DistPlan::new(&program, &dist, &ScheduleOptions::default()).unwrap();
    assert!(!plan.split.transfers.is_empty());
    for inline in [false, true] {
        let transports = ChannelTransport::connected(2, TIMEOUT, Some((3, 300)));
        std::thread::scope(|s| {
            for t in transports {
                let plan = &plan;
                let want = &want;
                s.spawn(move || {
                    let rank = t.rank();
                    let plugin = HostPlugin::new(HostPluginOptions {
                        inline_streams: inline,
                        ..HostPluginOptions::default()
                    });
                    let mut rs = plan
                        .rank_session(Arc::new(t), &plugin)
                        .unwrap()
                        .with_inline(inline);
                    for run in 0..3 {
                        if rank == 0 {
                            std::thread::sleep(std::time::Duration::from_millis(100));
                        }
                        rs.run()
                            .unwrap_or_else(|e| panic!("inline {inline}, run {run}: {e}"));
                        if rank == 0 {
                            let s = rs.session();
                            for (name, bytes_want) in want {
                                let h = s.plan().buffer::<f32>(name).unwrap();
                                let got: Vec<u8> = s
                                    .read(h)
                                    .unwrap()
                                    .iter()
                                    .flat_map(|v| v.to_ne_bytes())
                                    .collect();
                                assert_eq!(&got, bytes_want, "inline {inline}, run {run}: {name}");
                            }
                        }
                    }
                });
            }
        });
    }
}
