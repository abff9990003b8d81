//! `bench replay`: a compiled plan run by a [`Session`] with stream issue against the
//! same session replaying plugin graphs ([`Session::with_replay`]), one process,
//! medians; every replayed result is compared bit for bit with the stream-issue one.
//!
//! Workloads:
//! - **saxpy** (the `bench` program, [`saxpy_regions`]): `regions` independent regions of
//!   2 H2D + saxpy + 1 D2H at each size, on 4 streams (c4) and 1 stream (c1); µs per
//!   region. With `--python`, PyTorch's `torch.cuda.CUDAGraph` of the same regions
//!   (`torch_regions.py --graph`) runs in the same call.
//! - **jacobi**: a `grid × grid` f32 5-point stencil kept on the device by `target data`,
//!   `iterations` regions (each one `jacobi5` launch, maps `present`), the grid copied
//!   back at the end; µs per iteration.
//! - **matmul**: the blocked-matmul DAG ([`blocked_matmul`], `n`, `bs`), with transfer
//!   elision and with `no-elide` (issue 28: every copy the mapping rules name); µs per region.
//!
//! Per workload also: the first replayed run's build time (arena, node addresses,
//! instantiation, proof) per graph node, and the segments and nodes.

use crate::{make_plugin, median, PLUGINS};
use offload_sched::exec::{BufferData, Report};
use offload_sched::lower::LowerOptions;
use offload_sched::model::{
    blocked_matmul, saxpy_regions, ElemType, MapType, Program, ProgramBuilder,
};
use offload_sched::plugin::{open, Backend, OpenOptions, Plugin};
use offload_sched::schedule::ScheduleOptions;
use offload_sched::{Bindings, Plan, Session};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

/// Arguments of `bench replay`.
#[derive(clap::Args, Clone, Debug)]
pub struct ReplayArgs {
    /// Plugin: `host`, `cuda`, `auto` (cuda if a device answers) or `null`.
    #[arg(long, default_value = "auto", value_parser = PLUGINS)]
    pub plugin: String,
    /// saxpy: regions per run.
    #[arg(long, default_value_t = 64)]
    pub regions: usize,
    /// saxpy: bytes per array, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "4096,1048576",
          value_parser = clap::value_parser!(u64).range(4..))]
    pub sizes: Vec<u64>,
    /// jacobi: iterations (regions) per run.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub iterations: u64,
    /// jacobi: grid side (f32 elements).
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u64).range(3..=8192))]
    pub grid: u64,
    /// matmul: matrix side.
    #[arg(long, default_value_t = 256)]
    pub n: u64,
    /// matmul: block side (divides `n`).
    #[arg(long, default_value_t = 16)]
    pub bs: u64,
    /// Timed runs per row (median).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    pub reps: u32,
    /// Untimed runs before each row.
    #[arg(long, default_value_t = 3)]
    pub warmup: u32,
    /// PyTorch script (benches/gpu/torch_regions.py) for the CUDAGraph row.
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// Also replay every graph file (`*.toml`) of this folder (spins scaled to 0 µs) and
    /// compare its buffers bit for bit with stream issue (two runs each).
    #[arg(long)]
    pub graphs: Option<PathBuf>,
}

/// The jacobi program (see the module docs); `a` ends holding the last grid. With
/// `taskgraph`, the sweeps are a `taskgraph` of `iterations / 2` executions of two
/// sweeps (`iterations` even): the same program, recorded once and replayed.
fn jacobi(grid: u64, iterations: u64, taskgraph: bool) -> Program {
    let mut p = ProgramBuilder::new(&format!("jacobi_g{grid}_i{iterations}"));
    let cells = grid * grid;
    let a = p.buffer(
        "a",
        ElemType::F32,
        cells,
        offload_sched::model::Init::Random(1),
    );
    let b = p.buffer("b", ElemType::F32, cells, offload_sched::model::Init::Zeros);
    let maps = vec![p.map(MapType::ToFrom, a), p.map(MapType::Alloc, b)];
    let sweep = move |p: &mut ProgramBuilder, i: u64| {
        let (src, dst) = if i.is_multiple_of(2) { (a, b) } else { (b, a) };
        p.target(&format!("step{i}"), "jacobi5")
            .num(grid as f64)
            .num(grid as f64)
            .arg(src)
            .arg(dst)
            .map_item(present(MapType::To, src, cells))
            .map_item(present(MapType::Alloc, dst, cells));
    };
    p.target_data("grid", maps, |p| match taskgraph {
        true => {
            let n = u32::try_from(iterations / 2).unwrap_or(u32::MAX);
            p.taskgraph("sweeps", n, |p| (0..2).for_each(|i| sweep(p, i)));
        }
        false => (0..iterations).for_each(|i| sweep(p, i)),
    });
    p.build()
}

/// `map(present, t: b[0:len])`.
fn present(
    t: MapType,
    b: offload_sched::model::BufferId,
    len: u64,
) -> offload_sched::model::MapItem {
    offload_sched::model::MapItem::new(t, offload_sched::model::Section::new(b, 0, len)).present()
}

/// Every buffer of `plan` after the session's last run, as native bytes.
fn contents(plan: &Plan, s: &Session<'_>) -> Result<Vec<Vec<u8>>, String> {
    let e = |e: offload_sched::Error| e.to_string();
    plan.program()
        .buffers
        .iter()
        .map(|b| {
            Ok(match b.ty {
                ElemType::F32 => BufferData::F32(
                    s.read(plan.buffer::<f32>(&b.name).map_err(e)?)
                        .map_err(e)?
                        .to_vec(),
                ),
                ElemType::F64 => BufferData::F64(
                    s.read(plan.buffer::<f64>(&b.name).map_err(e)?)
                        .map_err(e)?
                        .to_vec(),
                ),
                ElemType::I32 => BufferData::I32(
                    s.read(plan.buffer::<i32>(&b.name).map_err(e)?)
                        .map_err(e)?
                        .to_vec(),
                ),
                ElemType::I64 => BufferData::I64(
                    s.read(plan.buffer::<i64>(&b.name).map_err(e)?)
                        .map_err(e)?
                        .to_vec(),
                ),
                ElemType::U8 => BufferData::U8(
                    s.read(plan.buffer::<u8>(&b.name).map_err(e)?)
                        .map_err(e)?
                        .to_vec(),
                ),
            }
            .to_ne_bytes())
        })
        .collect()
}

/// One workload's figures: µs per unit with stream issue and replayed (medians), the
/// first replayed run's build time per node, and its shape.
struct Figures {
    stream: f64,
    replay: f64,
    /// The same, issue path only (first op issued → `End` started, as `bench` reports).
    stream_path: f64,
    replay_path: f64,
    build_us_per_node: f64,
    segments: usize,
    nodes: usize,
    graphs: usize,
    identical: bool,
    /// Bytes one run of the plan's graph moves.
    moved: offload_sched::lower::BytesMoved,
}

/// Times `plan` run by a session with stream issue and by one replaying; `units` divides
/// the run time (regions or iterations).
fn measure(
    plan: &Plan,
    plugin: &dyn Plugin,
    units: f64,
    a: &ReplayArgs,
) -> Result<Figures, String> {
    let e = |e: offload_sched::Error| e.to_string();
    let mut out = Vec::new();
    let mut first: Option<Report> = None;
    for replay in [false, true] {
        let mut s = Session::new(plan, plugin).map_err(e)?.with_replay(replay);
        let mut t = Vec::new();
        let mut path = Vec::new();
        for i in 0..a.warmup + a.reps {
            let t0 = Instant::now();
            let r = s.run(Bindings::new()).map_err(e)?;
            let us = t0.elapsed().as_secs_f64() * 1e6;
            if i >= a.warmup {
                t.push(us / units);
                path.push(r.pipeline_us(plan.graph()) / units);
            }
            if replay && i == 0 {
                first = Some(r);
            }
        }
        out.push((median(t), median(path), contents(plan, &s)?));
    }
    let st = first.and_then(|r| r.replay).ok_or_else(|| {
        format!(
            "{}: the plan was not replayed (see RUST_LOG=offload_sched=debug)",
            plan.name()
        )
    })?;
    Ok(Figures {
        stream: out[0].0,
        replay: out[1].0,
        stream_path: out[0].1,
        replay_path: out[1].1,
        build_us_per_node: st.instantiate_us / st.instantiated_nodes.max(1) as f64,
        graphs: st.graphs,
        segments: st.segments,
        nodes: st.nodes,
        identical: out[0].2 == out[1].2,
        moved: plan.graph().bytes_moved(),
    })
}

/// Every buffer after one session run of `plan` (stream issue unless the plan has a
/// taskgraph).
fn measure_contents(plan: &Plan, plugin: &dyn Plugin) -> Result<Vec<Vec<u8>>, String> {
    let mut s = Session::new(plan, plugin).map_err(|e| e.to_string())?;
    s.run(Bindings::new()).map_err(|e| e.to_string())?;
    contents(plan, &s)
}

/// Runs `bench replay` and returns its report (markdown).
///
/// Errors: an unknown plugin, a failed run, a plan not replayed, or replayed results
/// that differ from stream issue.
pub fn run(a: &ReplayArgs) -> Result<String, String> {
    let opened = make_plugin(&a.plugin)?;
    let backend = opened.backend;
    let plugin: &dyn Plugin = opened.plugin.as_ref();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# bench replay — plugin {}, session runs, medians of {} runs (after {} untimed)\n",
        plugin.info().name,
        a.reps,
        a.warmup
    );
    let _ = writeln!(
        out,
        "| workload | unit | stream issue µs/unit | replay µs/unit | replay vs stream | issue path: stream | issue path: replay | build µs/node (first run) | graphs | launches | nodes launched | bit-identical |"
    );
    let _ = writeln!(
        out,
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    let opts = |streams| ScheduleOptions {
        streams_per_device: streams,
        ..ScheduleOptions::default()
    };
    let mut rows: Vec<(String, &str, Figures)> = Vec::new();
    for &b in &a.sizes {
        for (tag, streams) in [("c4", 4), ("c1", 1)] {
            let plan = Plan::new(saxpy_regions(a.regions, b), &opts(streams))
                .map_err(|e| e.to_string())?;
            let f = measure(&plan, plugin, a.regions as f64, a)?;
            rows.push((
                format!("saxpy {} ({tag})", crate::size_name(b)),
                "region",
                f,
            ));
        }
    }
    let plan =
        Plan::new(jacobi(a.grid, a.iterations, false), &opts(4)).map_err(|e| e.to_string())?;
    let f = measure(&plan, plugin, a.iterations as f64, a)?;
    let (unrolled_stream, unrolled_path) = (f.stream, f.stream_path);
    rows.push((
        format!("jacobi {0}×{0}, {1} iterations", a.grid, a.iterations),
        "iteration",
        f,
    ));
    if a.iterations.is_multiple_of(2) {
        // The same sweeps as a taskgraph: a session run replays (each execution launches
        // the graph recorded from the first); compared with the unrolled stream issue.
        let tg =
            Plan::new(jacobi(a.grid, a.iterations, true), &opts(4)).map_err(|e| e.to_string())?;
        let t = measure(&tg, plugin, a.iterations as f64, a)?;
        let unrolled = measure_contents(&plan, plugin)?;
        rows.push((
            format!(
                "jacobi {0}×{0}, taskgraph of {1} executions × 2 sweeps (replayed per execution)",
                a.grid,
                a.iterations / 2
            ),
            "iteration",
            Figures {
                stream: unrolled_stream,
                stream_path: unrolled_path,
                identical: t.identical && measure_contents(&tg, plugin)? == unrolled,
                ..t
            },
        ));
    }
    if a.bs == 0 || !a.n.is_multiple_of(a.bs) {
        return Err(format!("--bs {} must divide --n {}", a.bs, a.n));
    }
    let regions = (a.n / a.bs).pow(3);
    // With transfer elision (the default) and without it (issue 28's comparison: every
    // copy OpenMP's mapping rules name), each by stream issue and replayed.
    for (tag, lower) in [
        ("", LowerOptions::default()),
        (", no-elide", LowerOptions::no_elide()),
    ] {
        let plan = Plan::new_lowered(blocked_matmul(a.n, a.bs), &opts(4), &lower)
            .map_err(|e| e.to_string())?;
        let f = measure(&plan, plugin, regions as f64, a)?;
        rows.push((
            format!("matmul n={} bs={} ({regions} regions){tag}", a.n, a.bs),
            "region",
            f,
        ));
    }
    let mut wrong: Vec<String> = Vec::new();
    for (name, unit, f) in &rows {
        let _ = writeln!(
            out,
            "| {name} | {unit} | {:.2} | {:.2} | {:.2}× | {:.2} | {:.2} | {:.2} | {} | {} | {} | {} |",
            f.stream,
            f.replay,
            f.stream / f.replay,
            f.stream_path,
            f.replay_path,
            f.build_us_per_node,
            f.graphs,
            f.segments,
            f.nodes,
            if f.identical { "yes" } else { "NO" }
        );
        if !f.identical {
            wrong.push(name.clone());
        }
    }
    {
        use crate::moved::{bytes_cells, BYTES_COLUMNS, BYTES_RULE};
        let _ = writeln!(
            out,
            "\nBytes moved per run (the same with stream issue and replayed)\n\n| workload | {BYTES_COLUMNS} |\n|---|{BYTES_RULE}|"
        );
        for (name, _, f) in &rows {
            let _ = writeln!(out, "| {name} | {} |", bytes_cells(&f.moved));
        }
    }
    if let Some(py) = &a.python {
        let reps = (a.warmup as usize, a.reps as usize, a.reps as usize);
        let (us, note) = crate::external::torch_with(py, &["--graph"], a.regions, &a.sizes, reps)?;
        let _ = writeln!(
            out,
            "\nPyTorch `torch.cuda.CUDAGraph` of the same saxpy regions (same call):\n"
        );
        for (b, u) in a.sizes.iter().zip(us) {
            let _ = writeln!(out, "- saxpy {}: {u:.2} µs/region", crate::size_name(*b));
        }
        if let Some(n) = note {
            let _ = writeln!(out, "- {n}");
        }
    }
    if let Some(dir) = &a.graphs {
        graph_files(&mut out, &mut wrong, dir, plugin, backend)?;
    }
    let _ = writeln!(
        out,
        "\nµs/unit: the session's whole run call (setup and teardown included) divided by regions or \
         iterations. issue path: first op issued (replay: the first graph launch) to `End` started, per unit, \
         as `bench` reports its rows. build: the first replayed run's arena, node addresses, instantiation and proof."
    );
    if !wrong.is_empty() {
        return Err(format!(
            "{out}\nreplayed results differ from stream issue: {}",
            wrong.join(", ")
        ));
    }
    Ok(out)
}

/// Every graph file of `dir` run twice by a session with stream issue and twice by one
/// replaying: a line per file, and its name in `wrong` when the buffers differ. A file
/// that needs more devices than `plugin` has runs, on the host backend, on a host plugin
/// of as many emulated devices as it needs (its line says so); on another backend it is
/// skipped, its line naming the devices it needs and the plugin's count.
fn graph_files(
    out: &mut String,
    wrong: &mut Vec<String>,
    dir: &std::path::Path,
    plugin: &dyn Plugin,
    backend: Backend,
) -> Result<(), String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    let _ = writeln!(out, "\nGraph files replayed against stream issue (two runs each, buffers compared bit for bit):\n");
    let (mut same, mut fallback) = (0, 0);
    for f in &files {
        let name = f
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let mut plan =
            Plan::from_file(f, &ScheduleOptions::default()).map_err(|e| format!("{name}: {e}"))?;
        plan.scale_spins(0.0).map_err(|e| format!("{name}: {e}"))?;
        let need = plan.graph().devices;
        let mut wider = None;
        if need > plugin.info().devices {
            if backend != Backend::Host {
                let _ = writeln!(
                    out,
                    "- {name}: skipped (needs {need} devices, the {} plugin has {}; the host \
                     plugin runs it on {need} emulated devices)",
                    plugin.info().name,
                    plugin.info().devices
                );
                continue;
            }
            let opts = OpenOptions {
                devices: need,
                ..OpenOptions::default()
            };
            wider = Some(
                open("host", &opts)
                    .map_err(|e| format!("{name}: {e}"))?
                    .plugin,
            );
        }
        let plugin: &dyn Plugin = wider.as_deref().unwrap_or(plugin);
        let on = match &wider {
            Some(_) => format!(" (on a host plugin of {need} devices)"),
            None => String::new(),
        };
        let e = |e: offload_sched::Error| format!("{name}: {e}");
        let mut got = Vec::new();
        let mut replayed = true;
        for replay in [false, true] {
            let mut s = Session::new(&plan, plugin).map_err(e)?.with_replay(replay);
            for _ in 0..2 {
                let r = s.run(Bindings::new()).map_err(e)?;
                replayed &= !replay || r.replay.is_some();
            }
            got.push(contents(&plan, &s)?);
        }
        let ok = got[0] == got[1];
        let state = match (ok, replayed) {
            (true, true) => "identical",
            (true, false) => "identical (not replayed: issued to streams)",
            (false, _) => "DIFFERENT",
        };
        same += usize::from(ok && replayed);
        fallback += usize::from(!replayed);
        if !ok {
            wrong.push(name.clone());
        }
        let _ = writeln!(out, "- {name}: {state}{on}");
    }
    let _ = writeln!(
        out,
        "\n{same} of {} replayed bit-identical; {fallback} issued to streams; the rest skipped.",
        files.len()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A two-device graph file runs on a host plugin of two devices, its line says so,
    /// and a backend without the devices skips it naming the counts.
    #[test]
    fn a_two_device_file_runs_on_a_wider_host_plugin() {
        let dir = std::env::temp_dir().join(format!("replay-peer-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let graphs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../graphs");
        let file = "peer_two_devices.toml";
        std::fs::copy(graphs.join(file), dir.join(file)).unwrap();
        let host = open("host", &OpenOptions::default()).unwrap();
        assert_eq!(host.plugin.info().devices, 1);
        let (mut out, mut wrong) = (String::new(), Vec::new());
        graph_files(
            &mut out,
            &mut wrong,
            &dir,
            host.plugin.as_ref(),
            Backend::Host,
        )
        .unwrap();
        assert!(wrong.is_empty(), "{out}");
        assert!(
            out.contains(
                "- peer_two_devices: identical (not replayed: issued to streams) (on a host \
                 plugin of 2 devices)"
            ),
            "{out}"
        );
        // The null backend has one device and no wider form: skipped, saying why.
        let null = open("null", &OpenOptions::default()).unwrap();
        let mut out = String::new();
        graph_files(
            &mut out,
            &mut wrong,
            &dir,
            null.plugin.as_ref(),
            Backend::Null,
        )
        .unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            out.contains(
                "- peer_two_devices: skipped (needs 2 devices, the null plugin has 1; the host \
                 plugin runs it on 2 emulated devices)"
            ),
            "{out}"
        );
    }
}
