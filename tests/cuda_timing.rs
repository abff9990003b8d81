//! The CUDA plugin's op timing (option `timing`, what `run --trace` uses) on a GPU: every
//! copy and kernel is timed, copy batches by the copy kernel's own stamps (their clock
//! calibrated against the timing events), units on one stream in stream order, a kernel
//! after the batch its launch issued. Skips, saying so, without the `cuda` feature or a
//! CUDA driver.

#![cfg(feature = "cuda")]

use offload_sched::exec::Report;
use offload_sched::lower::{OpGraph, OpKind};
use offload_sched::model::blocked_matmul;
use offload_sched::plugin::cuda::{probe, CudaPlugin, CudaPluginOptions};
use offload_sched::schedule::ScheduleOptions;
use offload_sched::Plan;
use std::collections::BTreeMap;

/// Slack for comparing times from the two clocks (timing events and `%globaltimer`
/// stamps: the calibration is good to about a µs) and their rounding, in µs.
const SLACK_US: f64 = 3.0;

fn is_timed_kind(g: &OpGraph, r: &offload_sched::exec::OpTime) -> bool {
    matches!(
        g.op(r.op).kind,
        OpKind::H2D { .. } | OpKind::D2H { .. } | OpKind::Kernel(_)
    )
}

/// Checks one run's timings; returns how many copies were timed in batches.
fn check_timings(g: &OpGraph, rep: &Report, run: usize) -> usize {
    let mut batched = 0;
    // (stream, start, end) -> copies of that unit, and its batch size.
    let mut units: BTreeMap<(u32, u64, u64), (u32, u32)> = BTreeMap::new();
    let mut per_stream: BTreeMap<u32, Vec<&offload_sched::exec::OpTime>> = BTreeMap::new();
    for r in rep.ops.iter().filter(|r| is_timed_kind(g, r)) {
        let what = format!("run {run}: op {} ({:?})", r.op.0, g.op(r.op).kind);
        assert!(r.timed, "{what}: not timed");
        assert!(r.start_us <= r.end_us, "{what}: {r:?}");
        assert!(
            r.end_us - r.start_us < 1e5,
            "{what}: {:.1} µs long",
            r.end_us - r.start_us
        );
        let s = r.stream.expect("device op").0;
        if r.batch > 0 {
            batched += 1;
            let key = (s, r.start_us.to_bits(), r.end_us.to_bits());
            let e = units.entry(key).or_insert((0, r.batch));
            e.0 += 1;
            assert_eq!(e.1, r.batch, "{what}: one unit, one batch size");
        }
        per_stream.entry(s).or_default().push(r);
    }
    for ((s, ..), (copies, batch)) in &units {
        assert_eq!(
            copies, batch,
            "run {run}: a batch on s{s} times all its copies"
        );
    }
    // In issue order, a stream's units do not overlap (stream order), and a kernel
    // starts at or after the batch before it ended.
    for (s, mut ops) in per_stream {
        ops.sort_by(|a, b| a.issue_us.total_cmp(&b.issue_us));
        for w in ops.windows(2) {
            let (a, b) = (w[0], w[1]);
            if a.start_us == b.start_us && a.end_us == b.end_us {
                continue; // the same batch
            }
            assert!(
                b.start_us + SLACK_US >= a.end_us,
                "run {run}: s{s}: op {} ({:.1}..{:.1} µs) starts before op {} ({:.1}..{:.1} µs) ends",
                b.op.0,
                b.start_us,
                b.end_us,
                a.op.0,
                a.start_us,
                a.end_us
            );
        }
    }
    batched
}

#[test]
fn cuda_timing_times_every_copy_and_kernel_with_stamped_batches_in_stream_order() {
    if let Err(why) = probe() {
        eprintln!("skipped: no CUDA device ({why})");
        return;
    }
    let plugin = CudaPlugin::new(CudaPluginOptions {
        timing: true,
        ..CudaPluginOptions::default()
    })
    .unwrap();
    // 64 regions of 3 small H2D copies (one batch), a kernel and a D2H on 4 streams.
    let plan = Plan::new(blocked_matmul(64, 16), &ScheduleOptions::default()).unwrap();
    let want = plan.reference().unwrap();
    let g = plan.graph();
    // Several runs: timing slots and marks are reused after each run's drain.
    for run in 0..4 {
        let rep = plan.run(&plugin).unwrap();
        for name in ["C_0_0", "C_3_3", "C_1_2"] {
            assert_eq!(rep.as_f32(name), want.as_f32(name), "run {run}: {name}");
        }
        let batched = check_timings(g, &rep, run);
        assert!(batched >= 64 * 3, "run {run}: {batched} batched copies");
    }
}
