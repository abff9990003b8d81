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
//! The small plan re-run is the documented way. Why, measured at 100 batches of 4 MiB
//! (2026-12-02, this branch after host lanes, `pipeline 100 1048576 report` and
//! `/usr/bin/time -v pipeline 100 1048576 FORM`):
//! - **Memory.** The one plan holds every batch at once: 100 plan-owned host copies of
//!   the intermediate `y` (400 MiB) and up to every batch's device blocks (the plan's
//!   estimate: 1200 MiB of device memory live at once, against 12 MiB for the small
//!   plan). Host plugin, peak RSS: plain Rust 813 MiB (input and output), small plan
//!   823 MiB (+10 MiB: one batch's `y` and device blocks), one plan 1626 MiB (+813 MiB).
//! - **Time, host plugin (this 2-core machine shared with other builds, load 8-12).**
//!   Neither form wins reliably: in 7 paired `compare` runs the one plan took 855-1604 ms
//!   and the small plan 978-1535 ms, the one plan faster in 5. The one plan does
//!   overlap (average busy lanes 3.2-4.1, two or more busy 90-97% of its span), but its
//!   "device" is the same two cores: its 1300 device ops kept the 4 stream workers busy
//!   2761-4416 ms in all, against 852-1069 ms for the same ops on the small plan's one
//!   stream, so each memory-bound pass over 4 MiB ran 3-5x longer and the overlap bought
//!   little. Device blocks came from the cache in both (298-299 of 300 in the one plan's
//!   warm run, 300 of 300 in the small plan's): allocation is not the difference.
//! - **Time, CUDA plugin (H200, benches/README-gpu.md run 20, 7aedad2):** the small plan
//!   was faster, 290 ms against 377 ms (plain Rust 192 ms); in run 21 (58f45d7) 242.5 ms
//!   against 342.5 ms (plain Rust 186.9 ms, 1.30×); the reason there has not been
//!   measured (this `report` mode was not run on the GPU).
//!
//! `cargo run --release --example pipeline -- [BATCHES] [ELEMENTS] [FORM]` (default 100
//! batches of 1 048 576 f32, 4 MiB): FORM `compare` (the default) times both against the
//! same loop in plain Rust (median of 5, one process) and checks that all three give the
//! same bits; `plain`, `one-plan` or `small-plan` runs that form alone 5 times (its peak
//! RSS: `/usr/bin/time -v`); `report` prints one warm run of each form's report figures
//! (span, busy time per lane, overlap, counts, the plan's memory, the host plugin's
//! device-block cache). `cargo test --example pipeline` checks the bits at small sizes
//! (CI runs it).
use offload_sched::model::{Buf, MapType, ProgramBuilder};
use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
use offload_sched::plugin::{self, OpenOptions};
use offload_sched::schedule::ScheduleOptions;
use offload_sched::{timeline, Bindings, Plan, Session};
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

/// [`cache`] before and after some runs.
type Caches = (Option<(u64, u64)>, Option<(u64, u64)>);

/// What one run of a form did: the report's figures summed over its `Session::run`s
/// (one for the one-plan form, one per batch for the small plan).
#[derive(Default)]
struct Figures {
    runs: usize,
    wall_ms: f64,
    /// Work span and busy times ([`timeline::overlap`]), summed over the runs.
    span_ms: f64,
    stream_busy_ms: f64,
    host_busy_ms: f64,
    concurrent_ms: f64,
    streams: usize,
    device_ops: usize,
    host_waits: usize,
    events: usize,
}

impl Figures {
    fn add(&mut self, plan: &Plan, r: &offload_sched::exec::Report) {
        self.runs += 1;
        self.wall_ms += r.wall_us / 1e3;
        if let Some(o) = timeline::overlap(plan.graph(), r) {
            self.span_ms += o.span_us / 1e3;
            self.stream_busy_ms += o.busy_us.values().sum::<f64>() / 1e3;
            self.host_busy_ms += o.host_busy_us / 1e3;
            self.concurrent_ms += o.concurrent_us / 1e3;
            self.streams = self.streams.max(o.busy_us.len());
        }
        self.device_ops += r.counts.device_ops;
        self.host_waits += r.counts.host_waits;
        self.events += r.counts.events_recorded;
    }

    /// Prints the figures; `caches`: [`cache`] before and after the runs.
    fn print(&self, what: &str, plan: &Plan, plugin: &dyn plugin::Plugin, caches: Caches) {
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        let need = plan.memory_need(plugin);
        let allocs = match caches {
            (Some((m0, h0)), Some((m, h))) => {
                format!(
                    "; device blocks: {} fresh, {} from the cache",
                    m - m0,
                    h - h0
                )
            }
            _ => String::new(),
        };
        println!(
            "{what}: {} run(s), wall {:.1} ms, span {:.1} ms, stream busy {:.1} ms on {} \
             stream(s), host busy {:.1} ms, overlap {:.2}, 2+ lanes busy {:.0}% of the span; \
             {} device ops, {} events, {} host waits; plan's device memory live at once \
             {:.0} MiB, host buffers {:.0} MiB{allocs}",
            self.runs,
            self.wall_ms,
            self.span_ms,
            self.stream_busy_ms,
            self.streams,
            self.host_busy_ms,
            (self.stream_busy_ms + self.host_busy_ms) / self.span_ms,
            100.0 * self.concurrent_ms / self.span_ms,
            self.device_ops,
            self.events,
            self.host_waits,
            mib(need.device),
            mib(need.buffers),
        );
    }
}

/// Which forms `main` runs (the third argument): all three, timed against each other
/// (`compare`, the default); one alone, 5 times (`plain`, `one-plan`, `small-plan`: for
/// a peak-RSS reading of that form with `/usr/bin/time -v`); or `report`: one warm run
/// of each form with its report's figures.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    Compare,
    Plain,
    OnePlan,
    SmallPlan,
    Report,
}

fn main() {
    let arg = |i: usize, d: usize| {
        std::env::args()
            .nth(i)
            .and_then(|a| a.parse().ok())
            .unwrap_or(d)
    };
    let (batches, len) = (arg(1, 100), arg(2, 1 << 20));
    let form = match std::env::args().nth(3).as_deref() {
        None | Some("compare") => Form::Compare,
        Some("plain") => Form::Plain,
        Some("one-plan") => Form::OnePlan,
        Some("small-plan") => Form::SmallPlan,
        Some("report") => Form::Report,
        Some(x) => panic!("form {x:?}: compare, plain, one-plan, small-plan or report"),
    };
    let xs = input(batches * len);
    // The plugin: `OFFLOAD_PLUGIN` (host, cuda, auto), the host plugin by default.
    let name = std::env::var("OFFLOAD_PLUGIN").unwrap_or_else(|_| "host".into());
    let opened = plugin::open(&name, &OpenOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let plugin = &*opened.plugin;
    if form != Form::Compare {
        // The host plugin as `plugin::open` makes it (default options), kept typed for
        // its cache counters.
        let host = (name == "host").then(|| HostPlugin::new(HostPluginOptions::default()));
        let plugin = host.as_ref().map_or(plugin, |h| h as &dyn plugin::Plugin);
        return one_form(form, (plugin, host.as_ref()), &xs, (batches, len));
    }
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

/// Whether `zs` holds plain Rust's bits for `xs`, checked batch by batch (so that a
/// single form's process holds no third copy of the data: its peak RSS is the form's).
fn same_as_plain(xs: &[f32], zs: &[f32], len: usize) -> bool {
    let mut want = vec![0.0; len];
    (xs.chunks(len).zip(zs.chunks(len))).all(|(xc, zc)| {
        plain(xc, &mut want[..xc.len()], len);
        want[..xc.len()] == *zc
    })
}

/// The host plugin's device-block cache counters: (fresh blocks, blocks reused).
fn cache(host: Option<&HostPlugin>) -> Option<(u64, u64)> {
    let c = host?.device_cache_stats();
    Some((c.misses, c.hits))
}

/// [`Form`]s other than `compare`.
/// `host`: the plugin, when it is the host plugin (for its cache counters).
fn one_form(
    form: Form,
    (plugin, host): (&dyn plugin::Plugin, Option<&HostPlugin>),
    xs: &[f32],
    (batches, len): (usize, usize),
) {
    let mut zs = vec![0.0; xs.len()];
    let mut t = Vec::new();
    match form {
        Form::Plain => {
            for _ in 0..5 {
                let c = Instant::now();
                plain(xs, &mut zs, len);
                t.push(c.elapsed().as_secs_f64() * 1e3);
            }
        }
        Form::OnePlan => {
            let (big, io) = all_batches(batches, len as u64);
            let mut s = Session::new(&big, plugin).unwrap();
            for _ in 0..5 {
                let c = Instant::now();
                run_all(&mut s, &io, xs, &mut zs);
                t.push(c.elapsed().as_secs_f64() * 1e3);
            }
        }
        Form::SmallPlan => {
            let (small, one) = all_batches(1, len as u64);
            let mut s = Session::new(&small, plugin).unwrap();
            for _ in 0..5 {
                let c = Instant::now();
                run_each(&mut s, one[0], xs, &mut zs, len);
                t.push(c.elapsed().as_secs_f64() * 1e3);
            }
        }
        Form::Report => {
            let (big, io) = all_batches(batches, len as u64);
            let (small, one) = all_batches(1, len as u64);
            let mut s_all = Session::new(&big, plugin).unwrap();
            let mut s_one = Session::new(&small, plugin).unwrap();
            // A warm-up run of each, then the reported one.
            run_all(&mut s_all, &io, xs, &mut zs);
            run_each(&mut s_one, one[0], xs, &mut zs, len);
            let mut b = Bindings::new();
            for ((&(x, z), xc), zc) in io.iter().zip(xs.chunks(len)).zip(zs.chunks_mut(len)) {
                b = b.input(x, xc).output(z, zc);
            }
            let mut f = Figures::default();
            let c0 = cache(host);
            f.add(&big, &s_all.run(b).unwrap());
            f.print("one plan over all batches", &big, plugin, (c0, cache(host)));
            assert!(same_as_plain(xs, &zs, len), "one plan: results differ");
            let mut f = Figures::default();
            let c0 = cache(host);
            for (xc, zc) in xs.chunks(len).zip(zs.chunks_mut(len)) {
                let r = s_one.run(Bindings::new().input(one[0].0, xc).output(one[0].1, zc));
                f.add(&small, &r.unwrap());
            }
            f.print(
                "one small plan re-run per batch",
                &small,
                plugin,
                (c0, cache(host)),
            );
        }
        Form::Compare => unreachable!("main runs it"),
    }
    assert!(
        same_as_plain(xs, &zs, len),
        "results differ from plain Rust"
    );
    if form != Form::Report {
        println!(
            "{batches} batches of {len} f32: {:.1} ms (median of 5)",
            median(t)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
