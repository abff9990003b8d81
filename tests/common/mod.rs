//! Helpers shared by integration tests (each test file that uses them says `mod common;`).
//!
//! Whole programs go through [`Plan`] (load or build, lower, schedule, verify, run,
//! reference); the helpers here name the inputs (`graphs/`, `tests/data/`), the host
//! plugin and the usual "run and compare with the reference" check.

// Each test crate compiles this module and uses only some of it.
#![allow(dead_code)]

pub mod file_errors;
pub mod library;

use offload_sched::exec::{Buffers, ExecError, IssueMode, Report};
use offload_sched::lower::{KernelArg, OpGraph, OpKind};
use offload_sched::model::{ElemType, Init, MapType, Program, ProgramBuilder, Scalar};
use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
use offload_sched::reference::check;
use offload_sched::schedule::ScheduleOptions;
use offload_sched::{Error, Plan};
use std::path::PathBuf;

/// `graphs/` (the sample graph files; `graphs/errors/` holds the bad ones).
pub fn graphs_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("graphs")
}

/// `graphs/<name>` (`name` with its `.toml`).
pub fn graph_path(name: &str) -> PathBuf {
    graphs_dir().join(name)
}

/// `tests/data/<name>` (the loader's sample files).
pub fn data_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// The text of WfInstances sample `name` (tests/data/wfinstances, LGPL-3.0 as their
/// LICENSE says). Panics if it is missing: the samples are part of the repository, so a
/// missing one is a broken checkout, not a reason to test less.
pub fn wf_sample(name: &str) -> String {
    let path = data_path("wfinstances").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every graph file of `graphs/` (not `graphs/errors/`), sorted.
pub fn graph_files() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(graphs_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    paths
}

/// The plan of `graphs/<name>` under `options`; panics with the rendered error.
pub fn plan_with(name: &str, options: &ScheduleOptions) -> Plan {
    let path = graph_path(name);
    Plan::from_file(&path, options).unwrap_or_else(|e| panic!("{}: {}", path.display(), e.render()))
}

/// The plan of `graphs/<name>` under the default options.
pub fn plan(name: &str) -> Plan {
    plan_with(name, &ScheduleOptions::default())
}

/// The plan of `graphs/<name>` (default options) with every built-in `spin` set to 0 µs
/// ([`Plan::scale_spins`]`(0.0)`): the WfCommons graphs spin for their scaled runtimes,
/// which only costs time in tests that check results or cleanup.
pub fn plan_without_spin(name: &str) -> Plan {
    let mut plan = plan(name);
    plan.scale_spins(0.0)
        .unwrap_or_else(|e| panic!("{name}: {}", e.render()));
    // scale_spins leaves a user kernel named `spin` alone; graphs/ declares none.
    assert!(
        spin_args(plan.graph()).all(|us| us == 0.0),
        "{name}: a spin still waits"
    );
    plan
}

/// Every graph of [`graph_files`] as [`plan_without_spin`]: `(file stem, plan)`.
pub fn plans_without_spin() -> Vec<(String, Plan)> {
    graph_files()
        .into_iter()
        .map(|p| {
            let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
            let plan = plan_without_spin(&format!("{stem}.toml"));
            (stem, plan)
        })
        .collect()
}

/// The `f64` scalar arguments (µs) of every `spin` launch of `g`.
fn spin_args(g: &OpGraph) -> impl Iterator<Item = f64> + '_ {
    g.ops
        .iter()
        .filter_map(|op| match &op.kind {
            OpKind::Kernel(call) if call.kernel == "spin" => Some(&call.args),
            _ => None,
        })
        .flatten()
        .filter_map(|a| match a {
            KernelArg::Scalar(Scalar::F64(us)) => Some(*us),
            _ => None,
        })
}

/// `y = 2·x + y` over `n` f32 elements in one region "saxpy" (x = 0, 1, 2, …; y = 1):
/// `map(to: x) map(tofrom: y)`.
pub fn saxpy(n: u64) -> Program {
    let mut p = ProgramBuilder::new("saxpy");
    let x = p.buffer("x", ElemType::F32, n, Init::Iota);
    let y = p.buffer("y", ElemType::F32, n, Init::Fill(1.0));
    p.target("saxpy", "saxpy")
        .num(2.0)
        .arg(x)
        .arg(y)
        .map(MapType::To, x)
        .map(MapType::ToFrom, y);
    p.build()
}

/// The host plugin with `devices` devices and stream-worker delay jitter `jitter`
/// (`host(1, None)` is the default host plugin).
pub fn host(devices: u32, jitter: Option<u64>) -> HostPlugin {
    HostPlugin::new(HostPluginOptions {
        devices,
        delay_jitter: jitter,
        ..HostPluginOptions::default()
    })
}

/// Runs `plan` on `plugin` with `issue` and checks the run: no device or host memory left
/// allocated, and the buffers equal `want` (the plan's [`Plan::reference`]). `what` names
/// the run in panics. Returns the report.
pub fn run_checked(
    what: &str,
    plan: &Plan,
    plugin: &HostPlugin,
    issue: IssueMode,
    want: &Buffers,
) -> Report {
    let r = plan
        .run_with(plugin, issue)
        .unwrap_or_else(|e| panic!("{what}: run failed: {}", e.render()));
    assert_eq!(
        plugin.live_device_allocs(),
        0,
        "{what}: device memory leaked"
    );
    assert_eq!(plugin.live_host_allocs(), 0, "{what}: host memory leaked");
    if let Err(e) = check(&r.buffers, want) {
        panic!(
            "{what}: differs from the reference: {e}\n{}",
            plan.schedule()
        );
    }
    r
}

/// The executor's error inside a failed run's [`Error`] (panics on any other error).
pub fn exec_error(e: Error) -> ExecError {
    match e {
        Error::Exec { error, .. } => *error,
        other => panic!("not a run error: {}", other.render()),
    }
}

/// Builds a shared library `lib<name>.so` in `dir` from C source with the system `cc`;
/// `None` if there is none.
pub fn build_so(dir: &std::path::Path, name: &str, src: &str) -> Option<PathBuf> {
    let c = dir.join(format!("{name}.c"));
    let so = dir.join(format!("lib{name}.so"));
    std::fs::write(&c, src).ok()?;
    let ok = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&so)
        .arg(&c)
        .status()
        .ok()?
        .success();
    ok.then_some(so)
}

/// Lays `dot` out with Graphviz (`dot -Tsvg`), asserting it succeeds without a warning
/// and writes an SVG; returns how long it took. `None` (with a note on stderr) if `dot`
/// cannot be run here: `scripts/setup.sh` installs it.
pub fn graphviz_accepts(name: &str, dot: &str) -> Option<std::time::Duration> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let t0 = std::time::Instant::now();
    let child = Command::new("dot")
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "skipping the Graphviz check: cannot run `dot` ({e}); apt-get install graphviz"
            );
            return None;
        }
    };
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(dot.as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let took = t0.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{name}: dot -Tsvg failed: {stderr}");
    assert!(
        stderr.trim().is_empty(),
        "{name}: dot -Tsvg warned: {stderr}"
    );
    let svg = String::from_utf8_lossy(&out.stdout);
    assert!(svg.contains("<svg"), "{name}: no svg");
    Some(took)
}

/// Bytes of the H2D and D2H ops of `g`, `(h2d, d2h)`.
pub fn moved(g: &offload_sched::lower::OpGraph) -> (u64, u64) {
    use offload_sched::lower::OpKind;
    let (mut h, mut d) = (0, 0);
    for id in g.op_ids() {
        match g.op(id).kind {
            OpKind::H2D { .. } => h += g.op_bytes(id),
            OpKind::D2H { .. } => d += g.op_bytes(id),
            _ => {}
        }
    }
    (h, d)
}
