//! `cargo bench --bench issue`: the executor's own cost on the [`NullPlugin`] (no device
//! work).
//!
//! Saxpy: R = 64 independent saxpy regions of 4 KiB (each 2 alloc, 2 H2D, a kernel, 1
//! D2H, 2 free = 8 device ops), under each policy, issued serially (what `Auto` picks on
//! the null plugin):
//! - `issue/<variant>`: the issue path only, first op issued → `End` op started (what the
//!   GPU benchmark's pipeline figures measure), via `iter_custom`; throughput per device op.
//! - `execute/<variant>`: the whole `execute` call (validation, setup of 128 host buffers,
//!   issue, teardown, snapshot).
//!
//! Issue modes (`issue-mode/<program>/<mode>`, issue path only, throughput per device op;
//! `serial`, `per-stream` = one thread per stream, `per-group` = one per issue group):
//! - `saxpy-minimal-4`: the 64 saxpy regions, minimal, 4 streams (no events: 4 groups);
//! - `saxpy-random-4`: the same with `random_streams` (seed 1) — still no events: the
//!   regions are independent;
//! - `wavefront-64`: a 64 × 64 wavefront of 64-byte saxpy regions, block (i, j)
//!   `depend`ing on (i-1, j) and (i, j-1) (`nowait`), minimal, 4 streams: thousands of
//!   cross-stream events;
//! - `wavefront-64-random`: the same wavefront with `random_streams` (seed 1): fewer
//!   events (2 996 against 4 032), but nearly every one a hand-off between the
//!   per-stream threads.
//!
//! Before measuring, each issue-mode variant is run once and its events, threads, groups
//! and cross-thread waits (`Report::issue_waits`) are printed to stderr.
//!
//! Per region = time per iteration / regions; per op = criterion's "thrpt" inverse.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use offload_sched::exec::IssueMode;
use offload_sched::lower::OpGraph;
use offload_sched::model::{
    saxpy_regions, DependType, ElemType, Init, MapType, Program, ProgramBuilder,
};
use offload_sched::plugin::null::NullPlugin;
use offload_sched::schedule::{ScheduleOptions, SyncPolicy};
use offload_sched::Plan;
use std::time::Duration;

const VARIANTS: [(&str, SyncPolicy, u32); 4] = [
    ("per-op-4", SyncPolicy::PerOp, 4),
    ("per-region-4", SyncPolicy::PerRegion, 4),
    ("minimal-1", SyncPolicy::Minimal, 1),
    ("minimal-4", SyncPolicy::Minimal, 4),
];

const MODES: [(&str, IssueMode); 3] = [
    ("serial", IssueMode::Serial),
    ("per-stream", IssueMode::PerStream),
    ("per-group", IssueMode::PerGroup),
];

/// An `n` × `n` wavefront: region (i, j) runs saxpy on its own 16-element blocks and
/// `depend`s on (i-1, j) and (i, j-1), all `nowait`.
fn wavefront_program(n: usize) -> Program {
    let mut p = ProgramBuilder::new("wavefront");
    let mut y = Vec::with_capacity(n * n);
    for i in 0..n {
        for j in 0..n {
            let x = p.buffer(&format!("x{i}_{j}"), ElemType::F32, 16, Init::Fill(0.5));
            let yb = p.buffer(&format!("y{i}_{j}"), ElemType::F32, 16, Init::Fill(1.0));
            y.push(yb);
            let mut r = p
                .target(&format!("b{i}_{j}"), "saxpy")
                .num(2.0)
                .arg(x)
                .arg(yb)
                .map(MapType::To, x)
                .map(MapType::ToFrom, yb)
                .nowait()
                .depend(DependType::Out, yb);
            if i > 0 {
                r = r.depend(DependType::In, y[(i - 1) * n + j]);
            }
            if j > 0 {
                r = r.depend(DependType::In, y[i * n + j - 1]);
            }
            drop(r);
        }
    }
    p.build()
}

fn device_ops(graph: &OpGraph) -> u64 {
    graph.ops.iter().filter(|o| !o.kind.is_host()).count() as u64
}

/// Issue-path time of `iters` runs (criterion's `iter_custom`).
fn issue_time(plan: &Plan, issue: IssueMode, iters: u64) -> Duration {
    let plugin = NullPlugin::new();
    let mut us = 0.0;
    for _ in 0..iters {
        let rep = plan.run_with(&plugin, issue).expect("runs");
        us += rep.pipeline_us(plan.graph());
    }
    Duration::from_secs_f64(us / 1e6)
}

fn issue(c: &mut Criterion) {
    let saxpy = Plan::new(saxpy_regions(64, 4096), &ScheduleOptions::default()).expect("plans");
    let graph = saxpy.graph();
    let mut group = c.benchmark_group("issue");
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Elements(device_ops(graph)));
    for (name, policy, streams) in VARIANTS {
        let plan = saxpy
            .reschedule(&ScheduleOptions {
                policy,
                streams_per_device: streams,
                random_streams: None,
                host_lanes: 1,
            })
            .expect("verifies");
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter_custom(|iters| issue_time(&plan, IssueMode::Auto, iters))
        });
    }
    group.finish();
    let plugin = NullPlugin::new();
    let mut group = c.benchmark_group("execute");
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Elements(device_ops(graph)));
    for (name, policy, streams) in VARIANTS {
        let plan = saxpy
            .reschedule(&ScheduleOptions {
                policy,
                streams_per_device: streams,
                random_streams: None,
                host_lanes: 1,
            })
            .expect("verifies");
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| plan.run(&plugin).expect("runs").wall_us)
        });
    }
    group.finish();
}

fn issue_modes(c: &mut Criterion) {
    let opts = |random_streams| ScheduleOptions {
        random_streams,
        ..ScheduleOptions::default()
    };
    let saxpy = Plan::new(saxpy_regions(64, 4096), &opts(None)).expect("plans");
    let wave = Plan::new(wavefront_program(64), &opts(None)).expect("plans");
    let programs = [
        ("saxpy-minimal-4", saxpy.clone()),
        (
            "saxpy-random-4",
            saxpy.reschedule(&opts(Some(1))).expect("verifies"),
        ),
        ("wavefront-64", wave.clone()),
        (
            "wavefront-64-random",
            wave.reschedule(&opts(Some(1))).expect("verifies"),
        ),
    ];
    let mut group = c.benchmark_group("issue-mode");
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(4));
    for (program, plan) in &programs {
        let graph = plan.graph();
        group.throughput(Throughput::Elements(device_ops(graph)));
        for (mode, issue) in MODES {
            let rep = plan.run_with(&NullPlugin::new(), issue).expect("runs");
            eprintln!(
                "issue-mode/{program}/{mode}: {} device ops, {} events, {} host waits, \
                 issued {:?} by {} thread(s), {} group(s), {} cross-thread waits ({:.0} µs)",
                device_ops(graph),
                rep.counts.events_recorded,
                rep.counts.host_waits,
                rep.issue,
                rep.issue_threads,
                rep.stream_groups,
                rep.issue_waits,
                rep.issue_wait_us
            );
            group.bench_function(BenchmarkId::new(*program, mode), |b| {
                b.iter_custom(|iters| issue_time(plan, issue, iters))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, issue, issue_modes);
criterion_main!(benches);
