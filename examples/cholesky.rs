//! An application's matrix in, its Cholesky factor back: the application owns an n×n
//! symmetric positive definite matrix as a column-major `Vec<f64>`; offload-sched factors
//! it with the tiled right-looking Cholesky (model::tiled, OpenBLAS tile kernels on the
//! host plugin's streams) and hands back `L` (`A = L·Lᵀ`).
//!
//! `cargo run --release --example cholesky -- [n] [tile]` (default 256 64).
use offload_sched::model::residual::{cholesky_residual, RESIDUAL_BOUND};
use offload_sched::model::tiled::{from_tile_layout, to_tile_layout};
use offload_sched::model::{try_tiled_cholesky, DataStyle, ElemType, MatrixInit, Tiling};
use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
use offload_sched::schedule::ScheduleOptions;
use offload_sched::{Bindings, Plan, Session};

/// `A = L·Lᵀ` of the application's column-major `a` (`n × n`, SPD), in `tile × tile` tiles.
///
/// Errors: a tiling the tiled programs refuse (`tile` not dividing `n`, zero, a matrix over
/// 64 GiB: [`Tiling::new`]'s message), `a` not of `n²` elements, or a run that fails.
pub fn factor(a: &[f64], n: usize, tile: usize) -> Result<Vec<f64>, String> {
    let tiling = Tiling::new(
        n as u64,
        tile as u64,
        ElemType::F64,
        DataStyle::Entered,
        MatrixInit::Given, // the application binds its own matrix
    )
    .map_err(|e| e.to_string())?;
    if a.len() != n * n {
        return Err(format!(
            "the matrix has {} elements, not n² = {}",
            a.len(),
            n * n
        ));
    }
    let program = try_tiled_cholesky(&tiling).map_err(|e| e.to_string())?;
    let plan = Plan::new(program, &ScheduleOptions::default()).map_err(|e| e.render())?;
    let plugin = HostPlugin::new(HostPluginOptions::default());
    let mut session = Session::new(&plan, &plugin).map_err(|e| e.render())?;
    let handle = plan.buffer::<f64>("A").map_err(|e| e.render())?;
    let mut tiles = to_tile_layout(a, n, tile); // the programs keep tiles contiguous
    session
        .run(Bindings::new().output(handle, &mut tiles))
        .map_err(|e| e.render())?;
    let mut l = from_tile_layout(&tiles, n, tile);
    for j in 0..n {
        for i in 0..j {
            l[i + j * n] = 0.0; // the upper triangle still holds A's
        }
    }
    Ok(l)
}

pub fn main() -> Result<(), String> {
    let arg = |i: usize, d: usize| {
        std::env::args()
            .nth(i)
            .and_then(|a| a.parse().ok())
            .unwrap_or(d)
    };
    let (n, tile) = (arg(1, 256), arg(2, 64));
    // The application's matrix: a(i, j) = 1/(1 + i + j) + n·[i = j] (StarPU's example).
    let a: Vec<f64> = (0..n * n)
        .map(|k| (k % n, k / n))
        .map(|(i, j)| 1.0 / (1 + i + j) as f64 + if i == j { n as f64 } else { 0.0 })
        .collect();
    let l = factor(&a, n, tile)?;
    let r = cholesky_residual(
        &to_tile_layout(&a, n, tile),
        &to_tile_layout(&l, n, tile),
        n,
        tile,
        ElemType::F64,
    );
    println!(
        "n={n} tile={tile}: L(0,0)={:.6}, residual ‖A − L·Lᵀ‖₁/(‖A‖₁·n·ε) = {r:.3}",
        l[0]
    );
    if r < RESIDUAL_BOUND {
        Ok(())
    } else {
        Err(format!("residual {r} is not below {RESIDUAL_BOUND}"))
    }
}
