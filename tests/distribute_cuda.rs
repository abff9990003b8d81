//! Distributed runs on the CUDA plugin (issue 29 point 5): ranks as threads of this
//! process (`run_in_process`, the in-process transport with delay jitter), each rank its
//! own CUDA plugin. Sends read and receives write the plugin's host buffers, which are
//! page-locked (`plugin/cuda/hostmem.rs`, `cuMemHostAlloc`), so data leaving or reaching
//! a GPU is staged through pinned host memory: a D2H into the pinned buffer, the send
//! from it; the receive into it, the H2D from it. Rank 0's buffers (the run's result)
//! are checked as `run --check` checks them: against the one-process reference within
//! `reference::check::REL_TOL`.
//!
//! Run on the GPU machine by `benches/gpu/run.sh gputest` (prepare.sh with
//! `TESTS="distribute_cuda"`); skips, saying so, without a CUDA driver or device.

#![cfg(feature = "cuda")]

use offload_sched::distribute::{run_in_process, DistPlan, Distribution};
use offload_sched::model::{tiled_cholesky, DataStyle, ElemType, MatrixInit, Program, Tiling};
use offload_sched::plugin::cuda::{probe, CudaPlugin, CudaPluginOptions};
use offload_sched::plugin::Plugin;
use offload_sched::reference::{check::REL_TOL, check_tol};
use offload_sched::schedule::ScheduleOptions;
use offload_sched::Plan;
use std::time::Duration;

fn cuda_answers() -> bool {
    match probe() {
        Ok(_) => true,
        Err(why) => {
            eprintln!("skipping the distributed CUDA tests: no CUDA driver or device ({why})");
            false
        }
    }
}

/// Runs `program` over `dist` on CUDA plugins with jitter `seed`; checks rank 0's buffers
/// against the one-process reference and returns the number of transfers.
fn check_on_cuda(program: &Program, dist: &Distribution, seed: u64) -> usize {
    let plan = DistPlan::new(program, dist, &ScheduleOptions::default())
        .unwrap_or_else(|e| panic!("{}: {e}", program.name));
    let plugin = |_r: u32| -> Box<dyn Plugin> {
        Box::new(CudaPlugin::new(CudaPluginOptions::default()).expect("CUDA plugin"))
    };
    let out = run_in_process(&plan, &plugin, Duration::from_secs(60), Some((seed, 300)))
        .unwrap_or_else(|e| panic!("{}: {e}", program.name));
    assert_eq!(out.ranks.len() as u32, dist.ranks());
    let want = Plan::new(program.clone(), &ScheduleOptions::default())
        .unwrap()
        .reference()
        .unwrap();
    check_tol(&out.ranks[0].report.buffers, &want, REL_TOL)
        .unwrap_or_else(|e| panic!("{} on {} ranks: {e}", program.name, dist.ranks()));
    plan.split.transfers.len()
}

/// The tiled Cholesky, f64, 4 × 4 tiles of 128, per-task maps.
fn cholesky() -> (Program, Tiling) {
    let t = Tiling {
        n: 512,
        tile: 128,
        ty: ElemType::F64,
        style: DataStyle::Mapped,
        init: MatrixInit::Random(3),
    };
    (tiled_cholesky(&t), t)
}

#[test]
fn a_tiled_cholesky_on_2_and_4_cuda_ranks_matches_the_reference() {
    if !cuda_answers() {
        return;
    }
    let (program, t) = cholesky();
    let a = program.buffer_id("A").unwrap();
    for (ranks, (p, q)) in [(2, (2, 1)), (4, (2, 2))] {
        let mut dist = Distribution::new(ranks).unwrap();
        dist.block_cyclic(&t, a, p, q).unwrap();
        // Panels and updates cross ranks at every step of the 4 × 4 tiles.
        let transfers = check_on_cuda(&program, &dist, 7 + ranks as u64);
        assert!(transfers > 4, "{transfers} transfers on {ranks} ranks");
    }
}
