//! The offload benchmark: R independent saxpy regions (`map(to: x) map(tofrom: y)`, f32)
//! through the real pipeline (builder → lower → schedule → execute) under each sync
//! policy, against hand-written driver-API programs, PyTorch and libomptarget.
//!
//! Timing of pipeline variants: from the first op's issue to the start of the `End` op
//! (after the final host wait), per region, from the executor's report — so the
//! executor's per-run setup (host buffers: pinned allocation or cache reuse, zeroing,
//! initial values) and teardown (snapshot) are excluded and reported separately as
//! "setup+teardown ms/run". Median over `reps` runs after `warmup` runs.

use crate::exec::{execute, ExecOptions, IssueMode, Report};
use crate::lower::{lower, OpKind};
use crate::model::{ElemType, Init, MapType, ProgramBuilder};
use crate::plugin::host::{HostPlugin, HostPluginOptions};
use crate::plugin::Plugin;
use crate::schedule::{schedule, ScheduleOptions, SyncPolicy};
use std::fmt::Write as _;
use std::path::PathBuf;

/// Arguments of the benchmark.
#[derive(clap::Args, Clone, Debug)]
pub struct BenchArgs {
    /// Plugin: `host`, `cuda`, `auto` (cuda if a device answers, else host) or `null`
    /// (no device work: the executor's own cost per region).
    #[arg(long, default_value = "auto")]
    pub plugin: String,
    /// Regions per run.
    #[arg(long, default_value_t = 64)]
    pub regions: usize,
    /// Bytes per array (x and y each), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "4096,1048576,16777216")]
    pub sizes: Vec<u64>,
    /// Timed runs per variant and size (the median is reported).
    #[arg(long, default_value_t = 20)]
    pub reps: usize,
    /// Timed runs for sizes of 8 MiB and more (pipeline runs re-initialise R·2 buffers).
    #[arg(long, default_value_t = 5)]
    pub reps_large: usize,
    /// Untimed runs first.
    #[arg(long, default_value_t = 2)]
    pub warmup: usize,
    /// Write the markdown tables here too.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Folder holding libomptarget's `run.sh` (the libomptarget-16 baseline).
    #[arg(long)]
    pub baselines: Option<PathBuf>,
    /// Python script to run for the PyTorch baseline (benches/gpu/torch_regions.py).
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// Run correctness checks (cuda vs reference) instead of timing.
    #[arg(long)]
    pub check: bool,
}

/// The saxpy-regions program: `regions` regions, each with its own `x_r` and `y_r` of
/// `bytes / 4` f32 elements.
pub fn saxpy_program(regions: usize, bytes: u64) -> crate::model::Program {
    let n = (bytes / 4).max(1);
    let mut p = ProgramBuilder::new("saxpy_regions");
    for r in 0..regions {
        let x = p.buffer(&format!("x{r}"), ElemType::F32, n, Init::Fill(0.5));
        let y = p.buffer(&format!("y{r}"), ElemType::F32, n, Init::Fill(1.0));
        p.target(&format!("r{r}"), "saxpy")
            .num(2.0)
            .arg(x)
            .arg(y)
            .map(MapType::To, x)
            .map(MapType::ToFrom, y);
    }
    p.build()
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Issue of the first op → start of `End`, in µs (the issue path: what a pipeline
/// variant's figure measures).
pub fn pipeline_us(graph: &crate::lower::OpGraph, rep: &Report) -> f64 {
    let first = rep
        .ops
        .iter()
        .map(|o| o.issue_us)
        .fold(f64::INFINITY, f64::min);
    let end = rep
        .ops
        .iter()
        .find(|o| matches!(graph.op(o.op).kind, OpKind::End))
        .map(|o| o.start_us)
        .unwrap_or(rep.wall_us);
    end - first
}

/// One pipeline variant at one size: (µs/region median, setup+teardown ms/run median).
#[allow(clippy::too_many_arguments)]
fn run_pipeline(
    plugin: &dyn Plugin,
    regions: usize,
    bytes: u64,
    policy: SyncPolicy,
    streams: u32,
    issue: IssueMode,
    warmup: usize,
    reps: usize,
) -> Result<(f64, f64), String> {
    let program = saxpy_program(regions, bytes);
    let graph = lower(&program).map_err(|e| format!("lower: {e}"))?;
    let sched = schedule(
        &graph,
        &ScheduleOptions {
            policy,
            streams_per_device: streams,
            random_streams: None,
        },
    );
    let mut per_region = Vec::new();
    let mut overhead = Vec::new();
    for i in 0..warmup + reps {
        let opts = ExecOptions {
            issue,
            ..ExecOptions::default()
        };
        let rep = execute(&graph, &sched, plugin, &opts).map_err(|e| format!("execute: {e}"))?;
        if i >= warmup {
            let p = pipeline_us(&graph, &rep);
            per_region.push(p / regions.max(1) as f64);
            overhead.push((rep.wall_us - p) / 1e3);
        }
    }
    Ok((median(per_region), median(overhead)))
}

fn make_plugin(name: &str) -> Result<Box<dyn Plugin>, String> {
    let host = || -> Box<dyn Plugin> { Box::new(HostPlugin::new(HostPluginOptions::default())) };
    match name {
        "host" => Ok(host()),
        "null" => Ok(Box::new(crate::plugin::null::NullPlugin::new())),
        "cuda" => cuda_plugin(),
        "auto" => Ok(cuda_plugin().unwrap_or_else(|_| host())),
        other => Err(format!(
            "unknown plugin \"{other}\" (host, cuda, auto, null)"
        )),
    }
}

#[cfg(feature = "cuda")]
fn cuda_plugin() -> Result<Box<dyn Plugin>, String> {
    crate::plugin::cuda::probe()?;
    Ok(Box::new(crate::plugin::cuda::CudaPlugin::new(
        Default::default(),
    )?))
}

#[cfg(not(feature = "cuda"))]
fn cuda_plugin() -> Result<Box<dyn Plugin>, String> {
    crate::plugin::cuda::probe().map(|_| unreachable_plugin())
}

#[cfg(not(feature = "cuda"))]
fn unreachable_plugin() -> Box<dyn Plugin> {
    Box::new(HostPlugin::new(HostPluginOptions::default()))
}

fn size_name(b: u64) -> String {
    if b >= 1 << 20 && b.is_multiple_of(1 << 20) {
        format!("{} MiB", b >> 20)
    } else if b >= 1 << 10 && b.is_multiple_of(1 << 10) {
        format!("{} KiB", b >> 10)
    } else {
        format!("{b} B")
    }
}

/// Correctness: a few builder programs on the chosen plugin against the reference
/// interpreter (every built-in kernel, every element type where it applies, each policy).
pub fn check_programs(plugin: &dyn Plugin) -> Result<String, String> {
    use crate::exec::{check, reference};
    let mut out = String::new();
    let mut programs = vec![saxpy_program(8, 4096 * 4 + 12)];
    for ty in [
        ElemType::F32,
        ElemType::F64,
        ElemType::I32,
        ElemType::I64,
        ElemType::U8,
    ] {
        let n = 1000u64;
        let mut p = ProgramBuilder::new(&format!("kernels_{}", ty.name()));
        let a = p.buffer("a", ty, n, Init::Random(1));
        let b = p.buffer("b", ty, n, Init::Random(2));
        let c = p.buffer("c", ty, n, Init::Iota);
        let s = p.buffer("s", ty, 1, Init::Zeros);
        let g = p.buffer("g", ty, 30 * 30, Init::Random(3));
        let h = p.buffer("h", ty, 30 * 30, Init::Zeros);
        let m = p.buffer("m", ty, 16 * 16 * 3, Init::Random(4));
        let tf = MapType::ToFrom;
        p.target("saxpy", "saxpy")
            .num(3.0)
            .arg(a)
            .arg(b)
            .map(tf, a)
            .map(tf, b);
        p.target("scale", "scale").num(2.0).arg(c).map(tf, c);
        p.target("add", "add")
            .arg(a)
            .arg(b)
            .arg(c)
            .map(tf, a)
            .map(tf, b)
            .map(tf, c);
        p.target("triad", "triad")
            .num(1.5)
            .arg(a)
            .arg(c)
            .arg(b)
            .map(tf, a)
            .map(tf, b)
            .map(tf, c);
        p.target("copy", "copy").arg(b).arg(a).map(tf, a).map(tf, b);
        p.target("increment", "increment")
            .arg(c)
            .map(tf, c)
            .launch(3, 32);
        p.target("add_scalar", "add_scalar")
            .arg(a)
            .num(7.0)
            .map(tf, a);
        p.target("reduce", "reduce_sum")
            .arg(c)
            .arg(s)
            .map(tf, c)
            .map(tf, s);
        p.target("jacobi", "jacobi5")
            .num(30.0)
            .num(30.0)
            .arg(g)
            .arg(h)
            .map(tf, g)
            .map(tf, h);
        let mm = p.sec(m);
        let (ma, mb, mc) = (
            crate::model::Section::new(mm.buf, 0, 256),
            crate::model::Section::new(mm.buf, 256, 256),
            crate::model::Section::new(mm.buf, 512, 256),
        );
        p.target("matmul", "matmul_block")
            .num(16.0)
            .arg(ma)
            .arg(mb)
            .arg(mc)
            .map(tf, m);
        p.target("fill", "fill").arg(b).num(5.0).map(tf, b);
        p.target("spin", "spin").num(50.0);
        programs.push(p.build());
    }
    for program in &programs {
        let graph = lower(program).map_err(|e| format!("{}: lower: {e}", program.name))?;
        let expected = reference(&graph, &ExecOptions::default())
            .map_err(|e| format!("{}: reference: {e}", program.name))?;
        for policy in SyncPolicy::ALL {
            for streams in [1, 4] {
                let sched = schedule(
                    &graph,
                    &ScheduleOptions {
                        policy,
                        streams_per_device: streams,
                        random_streams: None,
                    },
                );
                for issue in [IssueMode::Serial, IssueMode::PerStream] {
                    let opts = ExecOptions {
                        issue,
                        ..ExecOptions::default()
                    };
                    let rep = execute(&graph, &sched, plugin, &opts).map_err(|e| {
                        format!("{} {policy} {streams} {issue:?}: {e}", program.name)
                    })?;
                    check(&rep.buffers, &expected).map_err(|e| {
                        format!(
                            "{} {policy} {streams} streams, {issue:?} issue, on {}: {e}",
                            program.name,
                            plugin.name()
                        )
                    })?;
                }
            }
        }
        let _ = writeln!(
            out,
            "check {}: {} ops, 3 policies x {{1,4}} streams x {{serial, per-stream}} issue on {}: OK",
            program.name,
            graph.ops.len(),
            plugin.name()
        );
    }
    Ok(out)
}

/// Fault injection on the CUDA plugin (with its per-stream device-block cache): an
/// 8-region saxpy program under minimal sync on 4 randomly assigned streams, failing the
/// k-th call of each kind for k = 1..=6, with serial and with per-stream issue; after every run, allocs == frees (counted by
/// [`crate::plugin::faulty::FaultyPlugin`]) and no device allocation is live. Then the
/// cache's counters. Errors: the first violation.
#[cfg(feature = "cuda")]
pub fn cuda_fault_check() -> Result<String, String> {
    use crate::plugin::cuda::CudaPlugin;
    use crate::plugin::faulty::{FaultKind, FaultyPlugin};
    let program = saxpy_program(8, 4096);
    let graph = lower(&program).map_err(|e| format!("lower: {e}"))?;
    let sched = schedule(
        &graph,
        &ScheduleOptions {
            policy: SyncPolicy::Minimal,
            streams_per_device: 4,
            random_streams: Some(5),
        },
    );
    let (mut runs, mut failed) = (0, 0);
    let (mut hits, mut misses) = (0, 0);
    for (kind, issue) in FaultKind::ALL
        .into_iter()
        .flat_map(|k| [(k, IssueMode::Serial), (k, IssueMode::PerStream)])
    {
        let opts = ExecOptions {
            issue,
            ..ExecOptions::default()
        };
        for k in 1..=6 {
            let p = FaultyPlugin::new(CudaPlugin::new(Default::default())?, kind, k);
            // Twice: the second run allocates from the blocks the first one cached, and
            // must succeed (the fault fires once).
            for run in 0..2 {
                let before = p.injected();
                let r = execute(&graph, &sched, &p, &opts);
                runs += 1;
                let fired = p.injected() && !before;
                if r.is_err() {
                    failed += 1;
                }
                if r.is_err() != fired {
                    return Err(format!(
                        "fault {kind:?} k={k} {issue:?} issue, run {run}: {} but the fault {}",
                        match &r {
                            Ok(_) => "Ok".to_string(),
                            Err(e) => format!("error {e}"),
                        },
                        if fired { "fired" } else { "did not fire" }
                    ));
                }
                if p.allocs() != p.frees() || p.inner().live_device_allocs() != 0 {
                    return Err(format!(
                        "fault {kind:?} k={k}: {} allocs, {} frees, {} live device allocations",
                        p.allocs(),
                        p.frees(),
                        p.inner().live_device_allocs()
                    ));
                }
            }
            let (_, h, m) = p.inner().device_cache_stats();
            hits += h;
            misses += m;
        }
    }
    Ok(format!(
        "fault check on cuda: {runs} runs ({failed} failed by injection), allocs == frees and 0 live device allocations after each; device-block cache {hits} hits, {misses} misses\n"
    ))
}

/// Runs the benchmark (or the check with `--check`) and returns the report (markdown).
pub fn run(args: &BenchArgs) -> Result<String, String> {
    let plugin = make_plugin(&args.plugin)?;
    let mut out = String::new();
    let _ = writeln!(out, "plugin: {}", plugin.name());
    #[cfg(feature = "cuda")]
    if plugin.name() == "cuda" {
        let _ = writeln!(
            out,
            "device: {}; {}",
            crate::plugin::cuda::probe().unwrap_or_default(),
            crate::plugin::cuda::versions().unwrap_or_default()
        );
    }
    if args.check {
        out.push_str(&check_programs(plugin.as_ref())?);
        #[cfg(feature = "cuda")]
        if plugin.name() == "cuda" {
            out.push_str(&cuda_fault_check()?);
        }
        return Ok(out);
    }
    let r = args.regions.max(1);
    let reps_for = |b: u64| {
        if b >= 8 << 20 {
            args.reps_large.max(1)
        } else {
            args.reps.max(1)
        }
    };
    let warm_for = |b: u64| {
        if b >= 8 << 20 {
            args.warmup.min(1)
        } else {
            args.warmup
        }
    };
    // (name, µs/region per size)
    let mut rows: Vec<(String, Vec<f64>)> = Vec::new();
    let mut overhead: Vec<(String, Vec<f64>)> = Vec::new();
    let variants = [
        ("(a) per-op, 4 streams", SyncPolicy::PerOp, 4),
        ("(b) per-region, 4 streams", SyncPolicy::PerRegion, 4),
        ("(c1) minimal, 1 stream", SyncPolicy::Minimal, 1),
        ("(c4) minimal, 4 streams", SyncPolicy::Minimal, 4),
    ];
    let auto = IssueMode::Auto;
    for (name, policy, streams) in variants {
        let mut v = Vec::new();
        let mut o = Vec::new();
        for &b in &args.sizes {
            let (us, ms) = run_pipeline(
                plugin.as_ref(),
                r,
                b,
                policy,
                streams,
                auto,
                warm_for(b),
                reps_for(b),
            )?;
            eprintln!("{name} {}: {us:.2} µs/region", size_name(b));
            v.push(us);
            o.push(ms);
        }
        rows.push((name.to_string(), v));
        overhead.push((name.to_string(), o));
    }
    // Extra pipeline rows (not in the ratio table): more streams; with a plugin that
    // issues per stream by default, the same variants issued from one thread (A/B of
    // the issue mode in the same process); and the CUDA plugin without its device-block
    // cache (A/B of the cache).
    let mut extra: Vec<(String, Vec<f64>)> = Vec::new();
    let mut more = vec![(
        "(c8) minimal, 8 streams".to_string(),
        SyncPolicy::Minimal,
        8,
        auto,
    )];
    if plugin.parallel_issue() {
        // The issue mode `Auto` did not choose (per-op and per-region issue serially,
        // minimal with several streams per stream).
        let (serial, per_stream) = (IssueMode::Serial, IssueMode::PerStream);
        for (name, policy, streams, issue) in [
            (
                "(a t) per-op, 4 streams, per-stream issue",
                SyncPolicy::PerOp,
                4,
                per_stream,
            ),
            (
                "(b t) per-region, 4 streams, per-stream issue",
                SyncPolicy::PerRegion,
                4,
                per_stream,
            ),
            (
                "(c4 s) minimal, 4 streams, serial issue",
                SyncPolicy::Minimal,
                4,
                serial,
            ),
            (
                "(c8 s) minimal, 8 streams, serial issue",
                SyncPolicy::Minimal,
                8,
                serial,
            ),
        ] {
            more.push((name.to_string(), policy, streams, issue));
        }
    }
    for (name, policy, streams, issue) in more {
        let mut v = Vec::new();
        for &b in &args.sizes {
            let (us, _) = run_pipeline(
                plugin.as_ref(),
                r,
                b,
                policy,
                streams,
                issue,
                warm_for(b),
                reps_for(b),
            )?;
            eprintln!("{name} {}: {us:.2} µs/region", size_name(b));
            v.push(us);
        }
        extra.push((name, v));
    }
    #[cfg(feature = "cuda")]
    if plugin.name() == "cuda" {
        let nocache =
            crate::plugin::cuda::CudaPlugin::new(crate::plugin::cuda::CudaPluginOptions {
                device_cache_bytes: 0,
                ..Default::default()
            })?;
        for (name, policy, streams) in [
            (
                "(a-) per-op, 4 streams, no device-block cache",
                SyncPolicy::PerOp,
                4,
            ),
            (
                "(c1-) minimal, 1 stream, no device-block cache",
                SyncPolicy::Minimal,
                1,
            ),
            (
                "(c4-) minimal, 4 streams, no device-block cache",
                SyncPolicy::Minimal,
                4,
            ),
        ] {
            let mut v = Vec::new();
            for &b in &args.sizes {
                let (w, n) = (warm_for(b), reps_for(b));
                let (us, _) = run_pipeline(&nocache, r, b, policy, streams, auto, w, n)?;
                eprintln!("{name} {}: {us:.2} µs/region", size_name(b));
                v.push(us);
            }
            extra.push((name.to_string(), v));
        }
    }
    #[allow(unused_mut)]
    let mut bw: Option<(f64, f64, f64)> = None;
    #[allow(unused_mut)]
    let mut mix: Vec<f64> = Vec::new();
    #[cfg(feature = "cuda")]
    if plugin.name() == "cuda" {
        use crate::plugin::cuda::raw;
        for (name, streams, sync_each, prealloc) in [
            ("(d) hand-written, 1 stream, sync/region", 1, true, false),
            ("(e) hand-written, 4 streams, sync at end", 4, false, false),
            (
                "(d0) hand-written, 1 stream, sync/region, no per-region alloc",
                1,
                true,
                true,
            ),
            ("(e1) hand-written, 1 stream, sync at end", 1, false, false),
            (
                "(e0) hand-written, 4 streams, sync at end, no per-region alloc",
                4,
                false,
                true,
            ),
        ] {
            let mut v = Vec::new();
            for &b in &args.sizes {
                let (w, n) = (warm_for(b).max(1), reps_for(b));
                let t = raw::saxpy_regions(r, b, streams, sync_each, prealloc, w, n)?;
                v.push(median(t));
            }
            rows.push((name.to_string(), v));
        }
        for (name, prealloc) in [
            (
                "(e t) hand-written, 4 streams, one issuing thread each, sync at end",
                false,
            ),
            (
                "(e0 t) hand-written, 4 streams, one issuing thread each, sync at end, no per-region alloc",
                true,
            ),
        ] {
            let mut v = Vec::new();
            for &b in &args.sizes {
                let (w, n) = (warm_for(b).max(1), reps_for(b));
                let (t, _) =
                    raw::saxpy_regions_by(raw::Issue::Threads, r, b, 4, prealloc, w, n)?;
                v.push(median(t));
            }
            rows.push((name.to_string(), v));
        }
        let b = raw::bandwidth(256 << 20, 5)?;
        bw = Some((b.h2d, b.d2h, b.bidir));
        for &b in &args.sizes {
            let t = raw::copy_mix(r, b, warm_for(b).max(1), reps_for(b))?;
            mix.push(median(t));
        }
    }
    if let Some(py) = &args.python {
        let sizes: Vec<String> = args.sizes.iter().map(|b| b.to_string()).collect();
        let o = std::process::Command::new("python3")
            .arg(py)
            .env("PYTHONUNBUFFERED", "1")
            .args(["--regions", &r.to_string(), "--sizes", &sizes.join(",")])
            .args(["--reps", &args.reps.to_string()])
            .output()
            .map_err(|e| format!("python3 {}: {e}", py.display()))?;
        let text = String::from_utf8_lossy(&o.stdout);
        let mut v = vec![f64::NAN; args.sizes.len()];
        for line in text.lines() {
            // torch_regions bytes=4096 us_per_region=12.3
            let mut b = None;
            let mut us = None;
            for f in line.split_whitespace() {
                if let Some(x) = f.strip_prefix("bytes=") {
                    b = x.parse::<u64>().ok();
                }
                if let Some(x) = f.strip_prefix("us_per_region=") {
                    us = x.parse::<f64>().ok();
                }
            }
            if let (Some(b), Some(us)) = (b, us) {
                if let Some(i) = args.sizes.iter().position(|s| *s == b) {
                    v[i] = us;
                }
            }
        }
        if !o.status.success() {
            let _ = writeln!(
                out,
                "PyTorch script failed ({}): {}",
                o.status,
                String::from_utf8_lossy(&o.stderr)
                    .lines()
                    .last()
                    .unwrap_or("")
            );
        }
        rows.push(("(f) PyTorch, 1 stream, sync at end".to_string(), v));
    }
    if let Some(dir) = &args.baselines {
        let o = std::process::Command::new("bash")
            .arg(dir.join("run.sh"))
            .env("INFO", "0")
            .env("SAXPY_R", r.to_string())
            .output()
            .map_err(|e| format!("bash {}/run.sh: {e}", dir.display()))?;
        let text = String::from_utf8_lossy(&o.stdout);
        let mut sync = vec![f64::NAN; args.sizes.len()];
        let mut nowait = vec![f64::NAN; args.sizes.len()];
        for line in text.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if let [b, variant, us] = f[..] {
                if let (Ok(b), Ok(us)) = (b.parse::<u64>(), us.parse::<f64>()) {
                    if let Some(i) = args.sizes.iter().position(|s| *s == b) {
                        match variant {
                            "sync" => sync[i] = us,
                            "nowait" => nowait[i] = us,
                            _ => {}
                        }
                    }
                }
            }
        }
        if !o.status.success() {
            let err = String::from_utf8_lossy(&o.stderr);
            let tail: Vec<&str> = err.lines().rev().take(3).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            let _ = writeln!(
                out,
                "libomptarget run.sh exited with {}: {}",
                o.status,
                tail.join(" / ")
            );
        }
        rows.push((
            "(g) libomptarget 16 sync (pageable, best of 5)".to_string(),
            sync,
        ));
        rows.push((
            "(g) libomptarget 16 nowait (pageable, best of 5)".to_string(),
            nowait,
        ));
    }

    // Tables.
    let header = |out: &mut String, first: &str| {
        let _ = write!(out, "| {first} |");
        for &b in &args.sizes {
            let _ = write!(out, " {} |", size_name(b));
        }
        let _ = write!(out, "\n|---|");
        for _ in &args.sizes {
            let _ = write!(out, "---|");
        }
        out.push('\n');
    };
    let _ = writeln!(
        out,
        "\nR = {r} regions per run; µs per region (median of {} runs, {} for ≥ 8 MiB)\n",
        args.reps, args.reps_large
    );
    header(&mut out, "variant");
    for (name, v) in &rows {
        let _ = write!(out, "| {name} |");
        for x in v {
            let _ = write!(out, " {x:.2} |");
        }
        out.push('\n');
    }
    if !extra.is_empty() {
        let _ = writeln!(
            out,
            "\nMore pipeline variants (µs per region, same medians)\n"
        );
        header(&mut out, "variant");
        for (name, v) in &extra {
            let _ = write!(out, "| {name} |");
            for x in v {
                let _ = write!(out, " {x:.2} |");
            }
            out.push('\n');
        }
    }
    let _ = writeln!(
        out,
        "\nExecutor setup+teardown per run (ms, not in the figures above)\n"
    );
    header(&mut out, "variant");
    for (name, v) in &overhead {
        let _ = write!(out, "| {name} |");
        for x in v {
            let _ = write!(out, " {x:.1} |");
        }
        out.push('\n');
    }
    // Ratios: pipeline variant time over each baseline time (< 1 means the pipeline is faster).
    let baselines: Vec<&(String, Vec<f64>)> = rows.iter().skip(4).collect();
    if !baselines.is_empty() {
        let _ = writeln!(
            out,
            "\nRatios: baseline µs / pipeline µs (> 1: the pipeline is faster)\n"
        );
        let _ = write!(out, "| pipeline \\ baseline |");
        for (bn, _) in &baselines {
            let _ = write!(out, " {} |", bn.split(',').next().unwrap_or(bn));
        }
        let _ = write!(out, "\n|---|");
        for _ in &baselines {
            let _ = write!(out, "---|");
        }
        out.push('\n');
        for (name, v) in rows.iter().take(4) {
            for (i, &b) in args.sizes.iter().enumerate() {
                let _ = write!(
                    out,
                    "| {} {} |",
                    name.split(',').next().unwrap_or(name),
                    size_name(b)
                );
                for (_, bv) in &baselines {
                    let _ = write!(out, " {:.2} |", bv[i] / v[i]);
                }
                out.push('\n');
            }
        }
    }
    // Per-op at its best: the default issue mode, or the other one if that was faster.
    let per_op_other = extra
        .iter()
        .find(|(n, _)| n.starts_with("(a t)"))
        .map(|(_, v)| v.clone());
    let _ = writeln!(
        out,
        "\nPer-op over minimal (4 streams), the speed-up of minimal sync (per-op: the faster of its issue modes):"
    );
    for (i, &b) in args.sizes.iter().enumerate() {
        let per_op = per_op_other
            .as_ref()
            .map_or(rows[0].1[i], |v| v[i].min(rows[0].1[i]));
        let _ = writeln!(
            out,
            "- {}: {:.2}× (per-op {:.2}, minimal {:.2} µs/region)",
            size_name(b),
            per_op / rows[3].1[i],
            per_op,
            rows[3].1[i]
        );
    }
    if let Some((h2d, d2h, bi)) = bw {
        let gb = |x: f64| x / 1e9;
        let _ = writeln!(
            out,
            "\nPinned copy bandwidth (256 MiB, median of 5): H2D {:.1} GB/s, D2H {:.1} GB/s, both at once {:.1} GB/s",
            gb(h2d),
            gb(d2h),
            gb(bi)
        );
        for (i, &b) in args.sizes.iter().enumerate() {
            let moved = 3.0 * b as f64; // x in, y in, y out
            let ach = moved / (rows[3].1[i] * 1e-6);
            // Lower bound of a region's copy time with perfect overlap of both directions.
            let bound = (2.0 * b as f64 / h2d).max(b as f64 / d2h);
            let _ = writeln!(
                out,
                "- minimal 4 streams {}: {:.1} GB/s moved = {:.0}% of both-at-once; {:.0}% of the duplex bound for 2:1 traffic ({:.1} µs/region)",
                size_name(b),
                gb(ach),
                100.0 * ach / bi,
                100.0 * bound * 1e6 / rows[3].1[i],
                bound * 1e6
            );
        }
    }
    if !mix.is_empty() {
        let _ = writeln!(
            out,
            "\nCopies alone with the regions' traffic, H2D (2 arrays/region) on one stream and D2H (1 array/region) on another, all at once (µs per region; the achievable copy time of a region):"
        );
        for (i, &b) in args.sizes.iter().enumerate() {
            let best = rows[2].1[i].min(rows[3].1[i]);
            let gbs = |us: f64| 3.0 * b as f64 / (us * 1e-6) / 1e9;
            let _ = writeln!(
                out,
                "- {}: copies alone {:.2} µs/region ({:.1} GB/s both directions at 2:1); minimal 4 streams {:.2} ({:.1} GB/s) = {:.0}% of it; best minimal {:.2} = {:.0}%",
                size_name(b),
                mix[i],
                gbs(mix[i]),
                rows[3].1[i],
                gbs(rows[3].1[i]),
                100.0 * mix[i] / rows[3].1[i],
                best,
                100.0 * mix[i] / best
            );
        }
    }
    if let Some(path) = &args.out {
        std::fs::write(path, &out).map_err(|e| format!("write {}: {e}", path.display()))?;
    }
    Ok(out)
}
