//! Heat diffusion on the application's own grid: `steps` Jacobi sweeps (the built-in
//! `jacobi5`: interior points become the mean of themselves and their four neighbours,
//! the boundary stays) run as device kernels, a host closure every `every` steps reading
//! the grid (a checkpoint: its mean), and the final grid back in the application's `Vec`.
//! The plan is built once; a `Session` runs it on the application's memory.
//!
//! `cargo run --release --example heat -- [N] [STEPS] [EVERY]` (default 512 1000 100)
//! times it against the same loop in plain Rust (median of 5 runs each, one process)
//! and checks that both give the same bits. `cargo test --example heat` checks that at
//! small sizes (CI runs it).
use offload_sched::model::{Buf, MapType, ProgramBuilder};
use offload_sched::plugin::{self, OpenOptions};
use offload_sched::schedule::ScheduleOptions;
use offload_sched::{Bindings, Plan, Session};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The plan of `steps` sweeps (even) of an `n`×`n` grid with a checkpoint every `every`
/// steps (a multiple of 2 dividing `steps`), pushing the grid's mean into `log`.
fn heat_plan(n: usize, steps: usize, every: usize, log: Arc<Mutex<Vec<f64>>>) -> (Plan, Buf<f32>) {
    let mut p = ProgramBuilder::new("heat");
    let grid = p.buf::<f32>("grid", (n * n) as u64);
    let next = p.buf::<f32>("next", (n * n) as u64);
    let maps = vec![p.map(MapType::ToFrom, grid), p.map(MapType::Alloc, next)];
    p.target_data("sim", maps, |p| {
        for c in 0..steps / every {
            // Two sweeps per execution (grid -> next -> grid), `every / 2` executions.
            p.taskgraph(&format!("sweeps{c}"), (every / 2) as u32, |p| {
                let (n, n2) = (n as f64, n as f64);
                p.target(&format!("a{c}"), "jacobi5")
                    .num(n)
                    .num(n2)
                    .arg(grid)
                    .arg(next);
                p.target(&format!("b{c}"), "jacobi5")
                    .num(n)
                    .num(n2)
                    .arg(next)
                    .arg(grid);
            });
            let back = vec![p.map(MapType::From, grid)];
            p.update(&format!("get{c}"), back);
            let log = log.clone();
            p.host_fn(&format!("checkpoint{c}"), &[grid.into()], &[], move |ctx| {
                let g = ctx.read(grid)?;
                log.lock().unwrap().push(mean(g));
                Ok(())
            });
        }
    });
    let plan = Plan::new(p.build(), &ScheduleOptions::default());
    (plan.unwrap_or_else(|e| panic!("{}", e.render())), grid)
}

/// One run of the plan on the application's grid, in place.
fn heat_run(session: &mut Session<'_>, g: Buf<f32>, grid: &mut [f32]) {
    session.run(Bindings::new().output(g, grid)).unwrap();
}

fn mean(g: &[f32]) -> f64 {
    g.iter().map(|&v| f64::from(v)).sum::<f64>() / g.len() as f64
}

/// The same in plain Rust: the sweep `jacobi5` does, in the same order of operations.
fn heat_plain(n: usize, steps: usize, every: usize, grid: &mut [f32], log: &mut Vec<f64>) {
    let (mut cur, mut next) = (grid.to_vec(), vec![0.0f32; n * n]);
    for step in 0..steps {
        for r in 0..n {
            for c in 0..n {
                let i = r * n + c;
                next[i] = if r == 0 || c == 0 || r == n - 1 || c == n - 1 {
                    cur[i]
                } else {
                    (cur[i] + cur[i - n] + cur[i + n] + cur[i - 1] + cur[i + 1]) / 5.0
                };
            }
        }
        std::mem::swap(&mut cur, &mut next);
        if (step + 1) % every == 0 {
            log.push(mean(&cur));
        }
    }
    grid.copy_from_slice(&cur);
}

/// A hot stripe across the middle of a cold plate.
fn initial(n: usize) -> Vec<f32> {
    (0..n * n)
        .map(|i| {
            if (i / n) * 2 / n == 1 && i % n < n / 2 {
                100.0
            } else {
                0.0
            }
        })
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let arg = |i: usize, d: usize| {
        std::env::args()
            .nth(i)
            .and_then(|a| a.parse().ok())
            .unwrap_or(d)
    };
    let (n, steps, every) = (arg(1, 512), arg(2, 1000), arg(3, 100));
    let log = Arc::new(Mutex::new(Vec::new()));
    let (plan, g) = heat_plan(n, steps, every, log.clone());
    // The plugin: `OFFLOAD_PLUGIN` (host, cuda, auto), the host plugin by default.
    let name = std::env::var("OFFLOAD_PLUGIN").unwrap_or_else(|_| "host".into());
    let opened = plugin::open(&name, &OpenOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let plugin = &*opened.plugin;
    let mut session = Session::new(&plan, plugin).unwrap();
    let (mut ours, mut plain) = (Vec::new(), Vec::new());
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        a = initial(n);
        log.lock().unwrap().clear();
        let t = Instant::now();
        heat_run(&mut session, g, &mut a);
        ours.push(t.elapsed().as_secs_f64() * 1e3);
        b = initial(n);
        let mut plain_log = Vec::new();
        let t = Instant::now();
        heat_plain(n, steps, every, &mut b, &mut plain_log);
        plain.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(*log.lock().unwrap(), plain_log, "checkpoints differ");
    }
    assert!(a == b, "final grids differ");
    let (o, p) = (median(ours), median(plain));
    println!(
        "heat {n}x{n}, {steps} steps, checkpoint every {every}: offload-sched ({name} plugin) \
         {o:.1} ms, plain Rust {p:.1} ms, ratio {:.2} (median of 5; same bits)",
        o / p
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};

    #[test]
    fn the_plan_gives_the_bits_and_checkpoints_of_plain_rust() {
        for (n, steps, every) in [(16, 20, 10), (64, 40, 4)] {
            let log = Arc::new(Mutex::new(Vec::new()));
            let (plan, g) = heat_plan(n, steps, every, log.clone());
            let plugin = HostPlugin::new(HostPluginOptions::default());
            let mut session = Session::new(&plan, &plugin).unwrap();
            let mut want = initial(n);
            let mut want_log = Vec::new();
            heat_plain(n, steps, every, &mut want, &mut want_log);
            assert_eq!(want_log.len(), steps / every);
            assert!(want != initial(n), "the plain loop changed nothing");
            // Twice on the same session: the second run starts from fresh memory again.
            for run in 0..2 {
                let mut grid = initial(n);
                log.lock().unwrap().clear();
                heat_run(&mut session, g, &mut grid);
                assert!(grid == want, "{n}: run {run}: grids differ");
                assert_eq!(*log.lock().unwrap(), want_log, "{n}: run {run}");
            }
        }
    }
}
