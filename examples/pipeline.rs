//! A batch pipeline on the application's own data: every batch goes through two device
//! kernels (`y = x + x`, `y += 1`), a host closure (`z = sqrt(y)`), and a third device
//! kernel (`z *= 0.5`), written two ways:
//!
//! - **one plan over all batches** (`all_batches`): every step `nowait`, ordered only by
//!   its data, so batch i+1's copies and kernels may run while batch i's host closure
//!   does; one `Session::run` binds every batch's input and output slice;
//! - **one small plan re-run** (`one_batch`): the plan of a single batch, run from a
//!   session once per batch (streams, kernels and host memory kept between runs); batches
//!   cannot overlap, since each run ends with its batch done.
//!
//! `cargo run --release --example pipeline -- [BATCHES] [ELEMENTS]` (default 100 batches of
//! 1 048 576 f32, 4 MiB) times both against the same loop in plain Rust (median of 5, one
//! process) and checks that all three give the same bits; `cargo test --example
//! pipeline` checks that at small sizes (CI runs it).
use offload_sched::model::{Buf, MapType, ProgramBuilder};
use offload_sched::plugin::{self, OpenOptions};
use offload_sched::schedule::ScheduleOptions;
use offload_sched::{Bindings, Plan, Session};
use std::time::Instant;

/// A batch's input and output buffers.
type Io = (Buf<f32>, Buf<f32>);

/// The steps of batch `i` (buffers `x` in, `z` out, `y` in between) added to `p`.
fn batch(p: &mut ProgramBuilder, i: usize, len: u64) -> Io {
    let x = p.buf::<f32>(&format!("x{i}"), len);
    let y = p.buf::<f32>(&format!("y{i}"), len);
    let z = p.buf::<f32>(&format!("z{i}"), len);
    let enter = vec![p.map(MapType::To, x), p.map(MapType::Alloc, y)];
    p.enter_data(&format!("in{i}"), enter).nowait();
    p.target(&format!("double{i}"), "add")
        .arg(x)
        .arg(x)
        .arg(y)
        .nowait();
    p.target(&format!("plus1_{i}"), "add_scalar")
        .arg(y)
        .num(1.0)
        .nowait();
    let exit = vec![p.map(MapType::From, y), p.map(MapType::Release, x)];
    p.exit_data(&format!("out{i}"), exit).nowait();
    p.host_fn(&format!("sqrt{i}"), &[y.into()], &[z.into()], move |ctx| {
        let (y, z) = (ctx.read(y)?, ctx.write(z)?);
        z.iter_mut().zip(y).for_each(|(z, y)| *z = y.sqrt());
        Ok(())
    });
    p.target(&format!("half{i}"), "scale")
        .num(0.5)
        .arg(z)
        .map(MapType::ToFrom, z)
        .nowait();
    (x, z)
}

/// A plan of `batches` batches of `len` elements, with each batch's input and output.
fn all_batches(batches: usize, len: u64) -> (Plan, Vec<Io>) {
    let mut p = ProgramBuilder::new("pipeline");
    let io = (0..batches).map(|i| batch(&mut p, i, len)).collect();
    p.taskwait();
    let plan = Plan::new(p.build(), &ScheduleOptions::default());
    (plan.unwrap_or_else(|e| panic!("{}", e.render())), io)
}

/// Every batch through the one-plan form: one run binding every slice.
fn run_all(s: &mut Session<'_>, io: &[Io], xs: &[f32], zs: &mut [f32]) {
    let len = xs.len() / io.len();
    let mut b = Bindings::new();
    for ((&(x, z), xc), zc) in io.iter().zip(xs.chunks(len)).zip(zs.chunks_mut(len)) {
        b = b.input(x, xc).output(z, zc);
    }
    s.run(b).unwrap();
}

/// Every batch through the small plan: one run per batch of `len` elements.
fn run_each(s: &mut Session<'_>, (x, z): Io, xs: &[f32], zs: &mut [f32], len: usize) {
    for (xc, zc) in xs.chunks(len).zip(zs.chunks_mut(len)) {
        s.run(Bindings::new().input(x, xc).output(z, zc)).unwrap();
    }
}

/// The same in plain Rust.
fn plain(xs: &[f32], zs: &mut [f32], len: usize) {
    let mut y = vec![0.0f32; len];
    for (xc, zc) in xs.chunks(len).zip(zs.chunks_mut(len)) {
        y.iter_mut().zip(xc).for_each(|(y, x)| *y = x + x);
        y.iter_mut().for_each(|y| *y += 1.0);
        zc.iter_mut().zip(&y).for_each(|(z, y)| *z = y.sqrt());
        zc.iter_mut().for_each(|z| *z *= 0.5);
    }
}

fn input(n: usize) -> Vec<f32> {
    (0..n).map(|i| (i % 1000) as f32 * 0.25).collect()
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
    let (batches, len) = (arg(1, 100), arg(2, 1 << 20));
    let xs = input(batches * len);
    // The plugin: `OFFLOAD_PLUGIN` (host, cuda, auto), the host plugin by default.
    let name = std::env::var("OFFLOAD_PLUGIN").unwrap_or_else(|_| "host".into());
    let opened = plugin::open(&name, &OpenOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let plugin = &*opened.plugin;
    let (big, io) = all_batches(batches, len as u64);
    let (small, one) = all_batches(1, len as u64);
    let mut s_all = Session::new(&big, plugin).unwrap();
    let mut s_one = Session::new(&small, plugin).unwrap();
    let mut t: [Vec<f64>; 3] = Default::default();
    let (mut want, mut z1, mut z2) = (
        vec![0.0; xs.len()],
        vec![0.0; xs.len()],
        vec![0.0; xs.len()],
    );
    for _ in 0..5 {
        let c = Instant::now();
        plain(&xs, &mut want, len);
        t[0].push(c.elapsed().as_secs_f64() * 1e3);
        let c = Instant::now();
        run_all(&mut s_all, &io, &xs, &mut z1);
        t[1].push(c.elapsed().as_secs_f64() * 1e3);
        let c = Instant::now();
        run_each(&mut s_one, one[0], &xs, &mut z2, len);
        t[2].push(c.elapsed().as_secs_f64() * 1e3);
    }
    assert!(z1 == want && z2 == want, "results differ from plain Rust");
    let [p, a, e] = t.map(median);
    println!(
        "pipeline, {batches} batches of {len} f32 ({name} plugin, median of 5, same bits): \
         plain Rust {p:.1} ms; one plan over all batches {a:.1} ms ({:.2}x); one small plan \
         re-run per batch {e:.1} ms ({:.2}x)",
        a / p,
        e / p
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};

    #[test]
    fn both_forms_give_the_bits_of_plain_rust() {
        let (batches, len) = (6, 1000);
        let xs = input(batches * len);
        let mut want = vec![0.0; xs.len()];
        plain(&xs, &mut want, len);
        assert!(
            want.iter().all(|z| *z >= 0.5),
            "plain Rust computed nothing"
        );
        for jitter in [None, Some(7)] {
            let plugin = HostPlugin::new(HostPluginOptions {
                delay_jitter: jitter,
                ..HostPluginOptions::default()
            });
            let (big, io) = all_batches(batches, len as u64);
            let (small, one) = all_batches(1, len as u64);
            let mut s_all = Session::new(&big, &plugin).unwrap();
            let mut s_one = Session::new(&small, &plugin).unwrap();
            for run in 0..2 {
                let (mut z1, mut z2) = (vec![0.0; xs.len()], vec![0.0; xs.len()]);
                run_all(&mut s_all, &io, &xs, &mut z1);
                run_each(&mut s_one, one[0], &xs, &mut z2, len);
                assert!(z1 == want, "one plan, jitter {jitter:?}, run {run}");
                assert!(z2 == want, "small plan, jitter {jitter:?}, run {run}");
            }
        }
    }
}
