//! `bench session`: what running a compiled plan again costs, one process, medians.
//!
//! The program: `regions` nowait saxpy regions over halves... of one `x` and one `y`
//! of `n` f32 (`y = 2·x + y`, region `r` on elements `[r·n/R, (r+1)·n/R)`), then a
//! taskwait. Rows, each timed around the call (wall µs per run):
//! - `one-shot`: [`Plan::run`] — streams, kernels, host buffers made, initialised,
//!   snapshotted and freed every run (what a graph file run does);
//! - `session`: [`Session::run`] with nothing bound (buffers start from their declared
//!   contents, results read in place);
//! - `session bound`: `x` as `&[f32]`, `y` as `&mut [f32]` (used in place where the
//!   plugin takes application memory, else staged through pinned memory);
//! - `session pinned`: `x`, `y` as [`offload_sched::PinnedBuf`]s (in place everywhere);
//! - `submit + wait`: [`Session::submit`] then wait (staged);
//! - `plain Rust`: the same arithmetic in a loop on the host (the floor for host-plugin
//!   rows).
//!
//! Also per row: the issue path (first op issued → `End` started, from the run's report)
//! and the rest of the run's wall time (setup + teardown), as µs and as a share of the
//! run. Only the run call is timed: refilling `y` before it and checking `y` after it
//! (every run's, on a plugin that computes) are not.

use crate::{make_plugin, median, PLUGINS};
use offload_sched::exec::Report;
use offload_sched::model::{Buf, MapType, ProgramBuilder};
use offload_sched::plugin::Plugin;
use offload_sched::schedule::ScheduleOptions;
use offload_sched::{Bindings, Plan, Session};
use std::fmt::Write as _;
use std::time::Instant;

/// Arguments of `bench session`.
#[derive(clap::Args, Clone, Debug)]
pub struct SessionArgs {
    /// Plugin: `host`, `cuda`, `auto` (cuda if a device answers) or `null`.
    #[arg(long, default_value = "auto", value_parser = PLUGINS)]
    pub plugin: String,
    /// Elements of `x` and `y` (f32), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1024,1048576,4194304")]
    pub sizes: Vec<u64>,
    /// Regions (each on its slice of x and y).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub regions: u64,
    /// Timed runs per row (median).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..))]
    pub reps: u32,
    /// Untimed runs before each row.
    #[arg(long, default_value_t = 3)]
    pub warmup: u32,
}

struct Program {
    plan: Plan,
    x: Buf<f32>,
    y: Buf<f32>,
}

fn program(n: u64, regions: u64) -> Result<Program, String> {
    let mut p = ProgramBuilder::new(&format!("session_saxpy_n{n}"));
    let x = p.buf::<f32>("x", n);
    let y = p.buf::<f32>("y", n);
    let per = n.div_ceil(regions);
    let mut lo = 0;
    let mut r = 0;
    while lo < n {
        let len = per.min(n - lo);
        p.target(&format!("r{r}"), "saxpy")
            .num(2.0)
            .arg(x.part(lo, len))
            .arg(y.part(lo, len))
            .map(MapType::To, x.part(lo, len))
            .map(MapType::ToFrom, y.part(lo, len))
            .nowait();
        lo += len;
        r += 1;
    }
    p.taskwait();
    let plan = Plan::new(p.build(), &ScheduleOptions::default()).map_err(|e| e.to_string())?;
    Ok(Program { plan, x, y })
}

/// One row's figures: wall, issue path, setup + teardown (µs, medians).
struct Row {
    name: &'static str,
    wall: f64,
    issue: f64,
}

/// Times `run` alone: `before` (refilling inputs) and `after` (checking outputs) run
/// around it, untimed.
fn timed(
    name: &'static str,
    plan: &Plan,
    a: &SessionArgs,
    mut before: impl FnMut(),
    mut run: impl FnMut() -> Result<Report, String>,
    mut after: impl FnMut() -> Result<(), String>,
) -> Result<Row, String> {
    let (mut wall, mut issue) = (Vec::new(), Vec::new());
    for i in 0..a.warmup + a.reps {
        before();
        let t = Instant::now();
        let r = run()?;
        let us = t.elapsed().as_secs_f64() * 1e6;
        after()?;
        if i >= a.warmup {
            wall.push(us);
            issue.push(r.pipeline_us(plan.graph()));
        }
    }
    Ok(Row {
        name,
        wall: median(wall),
        issue: median(issue),
    })
}

/// `y` after a run from `y = 1`, `x = 0.5`: every element 2.0 (on a plugin that
/// computes).
fn check(y: &[f32], plugin: &dyn Plugin, what: &str) -> Result<(), String> {
    if !plugin.info().computes {
        return Ok(());
    }
    match y.iter().position(|&v| v != 2.0) {
        None => Ok(()),
        Some(i) => Err(format!("{what}: y[{i}] = {}, expected 2", y[i])),
    }
}

/// Runs `bench session` and returns its report (markdown).
///
/// Errors: an unknown plugin, a failed run or a wrong result.
pub fn run(a: &SessionArgs) -> Result<String, String> {
    let plugin = make_plugin(&a.plugin)?.plugin;
    let plugin: &dyn Plugin = plugin.as_ref();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# bench session — plugin {}, {} regions, medians of {} runs\n",
        plugin.info().name,
        a.regions,
        a.reps
    );
    let _ = writeln!(
        out,
        "| n (f32) | row | µs/run | issue path µs | setup+teardown µs | share of run | vs one-shot |"
    );
    let _ = writeln!(out, "|---:|---|---:|---:|---:|---:|---:|");
    let mut moved = Vec::new();
    for &n in &a.sizes {
        let prog = program(n, a.regions)?;
        moved.push((n, prog.plan.graph().bytes_moved()));
        let rows = rows(&prog, plugin, n as usize, a)?;
        let base = rows[0].wall;
        for r in &rows {
            let rest = (r.wall - r.issue).max(0.0);
            let share = if r.issue.is_nan() {
                f64::NAN
            } else {
                rest / r.wall * 100.0
            };
            let _ = writeln!(
                out,
                "| {n} | {} | {:.1} | {:.1} | {:.1} | {:.1}% | {:.2}× |",
                r.name,
                r.wall,
                r.issue,
                rest,
                share,
                base / r.wall
            );
        }
    }
    {
        use crate::moved::{bytes_cells, BYTES_COLUMNS, BYTES_RULE};
        let _ = writeln!(
            out,
            "\nBytes moved per run (every row of one n: one plan)\n\n| n (f32) | {BYTES_COLUMNS} |\n|---:|{BYTES_RULE}|"
        );
        for (n, m) in &moved {
            let _ = writeln!(out, "| {n} | {} |", bytes_cells(m));
        }
    }
    let _ = writeln!(
        out,
        "\nissue path: first op issued → End started (the run's report); setup+teardown: the rest of the \
         call's wall time. plain Rust: the arithmetic alone on this host thread (no issue path)."
    );
    Ok(out)
}

fn rows(p: &Program, plugin: &dyn Plugin, n: usize, a: &SessionArgs) -> Result<Vec<Row>, String> {
    let plan = &p.plan;
    let err = |e: offload_sched::Error| e.to_string();
    let x0 = vec![0.5f32; n];
    let mut rows = Vec::new();
    // One-shot: x, y start from their declared zeros; the figures are what a graph-file
    // run pays (its result is checked by the `check` step's graph runs, not here).
    let ok = || Ok(());
    rows.push(timed(
        "one-shot (Plan::run)",
        plan,
        a,
        || {},
        || plan.run(plugin).map_err(err),
        ok,
    )?);
    let session = std::cell::RefCell::new(Session::new(plan, plugin).map_err(err)?);
    rows.push(timed(
        "session, nothing bound",
        plan,
        a,
        || {},
        || session.borrow_mut().run(Bindings::new()).map_err(err),
        ok,
    )?);
    let y = std::cell::RefCell::new(vec![1.0f32; n]);
    rows.push(timed(
        "session, &[T] / &mut [T] bound",
        plan,
        a,
        || y.borrow_mut().fill(1.0),
        || {
            let mut y = y.borrow_mut();
            let b = Bindings::new().input(p.x, &x0).output(p.y, &mut y);
            session.borrow_mut().run(b).map_err(err)
        },
        || check(&y.borrow(), plugin, "bound"),
    )?);
    let px = {
        let mut px = session.borrow().pinned::<f32>(n).map_err(err)?;
        px.fill(0.5);
        px
    };
    let py = std::cell::RefCell::new(session.borrow().pinned::<f32>(n).map_err(err)?);
    rows.push(timed(
        "session, PinnedBuf bound",
        plan,
        a,
        || py.borrow_mut().fill(1.0),
        || {
            let mut py = py.borrow_mut();
            let b = Bindings::new()
                .pinned_input(p.x, &px)
                .pinned_output(p.y, &mut py);
            session.borrow_mut().run(b).map_err(err)
        },
        || check(&py.borrow(), plugin, "pinned"),
    )?);
    rows.push(timed(
        "session, submit + wait (staged)",
        plan,
        a,
        || y.borrow_mut().fill(1.0),
        || {
            let mut y = y.borrow_mut();
            let mut s = session.borrow_mut();
            let b = Bindings::new().input(p.x, &x0).output(p.y, &mut y);
            s.submit(b).and_then(|h| h.wait()).map_err(err)
        },
        || check(&y.borrow(), plugin, "submit"),
    )?);
    drop((px, py));
    // The same arithmetic in plain Rust (y = 2·x + y), timed the same way.
    let mut y = y.into_inner();
    let mut times = Vec::new();
    for i in 0..a.warmup + a.reps {
        y.fill(1.0);
        let t = Instant::now();
        for (yv, xv) in y.iter_mut().zip(&x0) {
            *yv += 2.0 * xv;
        }
        std::hint::black_box(&y);
        if i >= a.warmup {
            times.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    check(&y, plugin, "plain Rust")?;
    let wall = median(times);
    rows.push(Row {
        name: "plain Rust loop",
        wall,
        issue: wall,
    });
    Ok(rows)
}
