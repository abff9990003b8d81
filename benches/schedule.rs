//! `cargo bench --bench schedule`: lower + schedule + verify generated programs of 1k,
//! 10k, 100k and 1M ops (see benches/README.md). The program is generated outside the
//! timed part; throughput is reported per op. `schedule_capped`: the 1M-op program
//! again with transfer elision and a device memory cap of 64 KiB (32 regions' buffers:
//! every alloc past the first few claims a free, `lower/cap.rs`; the verifier's claim
//! check proves the peak, `verify/peak.rs`).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use offload_sched::lower::{lower, lower_with, LowerOptions};
use offload_sched::model::synthetic;
use offload_sched::schedule::{schedule, ScheduleOptions};
use offload_sched::verify::verify;
use std::time::Duration;

fn pipeline(c: &mut Criterion) {
    let mut group = c.benchmark_group("schedule");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    for ops in [1_000usize, 10_000, 100_000, 1_000_000] {
        let program = synthetic(ops);
        let real_ops = lower(&program).expect("synthetic lowers").ops.len();
        group.throughput(Throughput::Elements(real_ops as u64));
        group.measurement_time(Duration::from_secs(if ops >= 1_000_000 { 15 } else { 3 }));
        group.bench_with_input(BenchmarkId::from_parameter(ops), &program, |b, p| {
            b.iter(|| {
                let g = lower(p).expect("lowers");
                let s = schedule(&g, &ScheduleOptions::default());
                verify(&g, &s).expect("verifies");
                s.events
            })
        });
    }
    group.finish();
    let mut group = c.benchmark_group("schedule_capped");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(15));
    let opts = LowerOptions {
        device_memory: Some(64 << 10),
        ..LowerOptions::elided()
    };
    let program = synthetic(1_000_000);
    let g = lower_with(&program, &opts).expect("synthetic lowers under the cap");
    group.throughput(Throughput::Elements(g.ops.len() as u64));
    group.bench_with_input(BenchmarkId::from_parameter(1_000_000), &program, |b, p| {
        b.iter(|| {
            let g = lower_with(p, &opts).expect("lowers");
            let s = schedule(&g, &ScheduleOptions::default());
            let r = verify(&g, &s).expect("verifies");
            assert_eq!(r.exact_peaks, 0, "the claims prove the cap");
            s.events
        })
    });
    group.finish();
}

criterion_group!(benches, pipeline);
criterion_main!(benches);
