//! `cargo bench --bench issue`: the executor's own cost on the [`NullPlugin`] (no device
//! work), for the benchmark's program: R = 64 saxpy regions of 4 KiB (each 2 alloc, 2
//! H2D, a kernel, 1 D2H, 2 free = 8 device ops), under each policy.
//!
//! - `issue/<variant>`: the issue path only, first op issued → `End` op started (what the
//!   GPU benchmark's pipeline figures measure), via `iter_custom`; throughput per device op.
//! - `execute/<variant>`: the whole `execute` call (validation, setup of 128 host buffers,
//!   issue, teardown, snapshot).
//!
//! Per region = time per iteration / 64; per op = criterion's "thrpt" inverse.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use offload_sched::bench::{pipeline_us, saxpy_program};
use offload_sched::exec::{execute, ExecOptions};
use offload_sched::lower::lower;
use offload_sched::plugin::null::NullPlugin;
use offload_sched::schedule::{schedule, ScheduleOptions, SyncPolicy};
use std::time::Duration;

const VARIANTS: [(&str, SyncPolicy, u32); 4] = [
    ("per-op-4", SyncPolicy::PerOp, 4),
    ("per-region-4", SyncPolicy::PerRegion, 4),
    ("minimal-1", SyncPolicy::Minimal, 1),
    ("minimal-4", SyncPolicy::Minimal, 4),
];

fn issue(c: &mut Criterion) {
    let graph = lower(&saxpy_program(64, 4096)).expect("lowers");
    let device_ops = graph.ops.iter().filter(|o| !o.kind.is_host()).count() as u64;
    let plugin = NullPlugin::new();
    let opts = ExecOptions::default();
    let mut group = c.benchmark_group("issue");
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Elements(device_ops));
    for (name, policy, streams) in VARIANTS {
        let sched = schedule(
            &graph,
            &ScheduleOptions {
                policy,
                streams_per_device: streams,
                random_streams: None,
            },
        );
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter_custom(|iters| {
                let mut us = 0.0;
                for _ in 0..iters {
                    let rep = execute(&graph, &sched, &plugin, &opts).expect("runs");
                    us += pipeline_us(&graph, &rep);
                }
                Duration::from_secs_f64(us / 1e6)
            })
        });
    }
    group.finish();
    let mut group = c.benchmark_group("execute");
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Elements(device_ops));
    for (name, policy, streams) in VARIANTS {
        let sched = schedule(
            &graph,
            &ScheduleOptions {
                policy,
                streams_per_device: streams,
                random_streams: None,
            },
        );
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| {
                execute(&graph, &sched, &plugin, &opts)
                    .expect("runs")
                    .wall_us
            })
        });
    }
    group.finish();
}

criterion_group!(benches, issue);
criterion_main!(benches);
