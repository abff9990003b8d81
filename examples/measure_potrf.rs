// Temporary measurement (not committed): tiled spotrf on the host plugin vs LAPACK spotrf.
use offload_sched::model::residual::cholesky_residual;
use offload_sched::model::tiled::to_tile_layout;
use offload_sched::model::{tiled_cholesky, DataStyle, ElemType, MatrixInit, Tiling};
use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
use offload_sched::schedule::ScheduleOptions;
use offload_sched::{Bindings, Plan, Session};
use std::time::Instant;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(4096);
    let tile: usize = std::env::args()
        .nth(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(512);
    let streams: u32 = std::env::args()
        .nth(3)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2);
    let a: Vec<f32> = (0..n * n)
        .map(|k| (k % n, k / n))
        .map(|(i, j)| 1.0 / (1 + i + j) as f32 + if i == j { n as f32 } else { 0.0 })
        .collect();
    let flops = (n as f64).powi(3) / 3.0;
    let at = to_tile_layout(&a, n, tile);
    for style in [DataStyle::Entered, DataStyle::Mapped] {
        let program = tiled_cholesky(&Tiling {
            n: n as u64,
            tile: tile as u64,
            ty: ElemType::F32,
            style,
            init: MatrixInit::Given,
        });
        let opts = ScheduleOptions {
            streams_per_device: streams,
            ..ScheduleOptions::default()
        };
        let plan = Plan::new(program, &opts).unwrap();
        let plugin = HostPlugin::new(HostPluginOptions::default());
        let mut session = Session::new(&plan, &plugin).unwrap();
        let h = plan.buffer::<f32>("A").unwrap();
        let mut rates = vec![];
        let mut last = vec![];
        for _ in 0..4 {
            let mut t = at.clone();
            let t0 = Instant::now();
            session.run(Bindings::new().output(h, &mut t)).unwrap();
            rates.push(flops / t0.elapsed().as_secs_f64() / 1e9);
            last = t;
        }
        let af: Vec<f64> = at.iter().map(|&v| v as f64).collect();
        let lf: Vec<f64> = last.iter().map(|&v| v as f64).collect();
        let r = cholesky_residual(&af, &lf, n, tile, ElemType::F32);
        println!(
            "tiled spotrf n={n} tile={tile} {} streams={streams}: GFLOP/s {:?} residual {r:.3}",
            style.name(),
            rates.iter().map(|r| format!("{r:.1}")).collect::<Vec<_>>()
        );
    }
    for _ in 0..3 {
        let mut m = a.clone();
        let (ni, mut info) = (n as i32, 0i32);
        let t0 = Instant::now();
        unsafe { lapack_sys::spotrf_(&(b'L' as _), &ni, m.as_mut_ptr(), &ni, &mut info) };
        let s = t0.elapsed().as_secs_f64();
        println!(
            "LAPACK spotrf 1 thread n={n}: {:.1} GFLOP/s (info {info})",
            flops / s / 1e9
        );
    }
}
