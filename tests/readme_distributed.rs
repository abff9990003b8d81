//! The README's embedded distributed example ("Beyond one host: MPI ranks"), kept
//! compiling and checked: a tiled Cholesky in the entered style over 2 in-process ranks,
//! block-cyclic, gives rank 0 the same factor as one process.

use offload_sched::distribute::{run_in_process, DistPlan, Distribution};
use offload_sched::model::{try_tiled_cholesky, DataStyle, ElemType, MatrixInit, Tiling};
use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
use offload_sched::plugin::Plugin;
use offload_sched::schedule::ScheduleOptions;
use offload_sched::Plan;
use std::time::Duration;

#[test]
fn the_readme_distributed_example_matches_one_process() {
    // README: begin
    let t = Tiling::new(
        256,
        64,
        ElemType::F64,
        DataStyle::Entered,
        MatrixInit::Random(7),
    )
    .unwrap();
    let program = try_tiled_cholesky(&t).unwrap();
    let a = program.buffer_id("A").unwrap();
    let mut dist = Distribution::new(2).unwrap();
    let (p, q) = Distribution::grid(2); // 1 × 2, as StarPU-MPI's mpi_cholesky
    dist.block_cyclic(&t, a, p, q).unwrap();
    let plan = DistPlan::new(&program, &dist, &ScheduleOptions::default()).unwrap();
    let plugin =
        |_rank: u32| -> Box<dyn Plugin> { Box::new(HostPlugin::new(HostPluginOptions::default())) };
    let run = run_in_process(&plan, &plugin, Duration::from_secs(60), None).unwrap();
    let factor = run.ranks[0].report.read::<f64>("A").unwrap(); // rank 0 gathers the result
                                                                // README: end
    let host = HostPlugin::new(HostPluginOptions::default());
    let one = Plan::new(program.clone(), &ScheduleOptions::default())
        .unwrap()
        .run(&host)
        .unwrap();
    assert_eq!(factor, one.read::<f64>("A").unwrap());
    assert!(
        run.ranks.iter().all(|r| r.report.counts.ops > 0),
        "both ranks work"
    );
}
