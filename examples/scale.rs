//! Quick scale check of the pipeline (lower, schedule, verify) on a synthetic program of
//! about N ops: `cargo run --release --example scale -- 1000000`. Per-stage figures are in
//! the criterion bench `benches/schedule.rs`.
use offload_sched::model::synthetic;
use offload_sched::schedule::ScheduleOptions;
use offload_sched::Plan;
use std::time::Instant;

fn main() -> Result<(), String> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let p = synthetic(n);
    let t0 = Instant::now();
    let plan = Plan::new(p, &ScheduleOptions::default()).map_err(|e| e.render())?;
    let t = t0.elapsed();
    let (g, s) = (plan.graph(), plan.schedule());
    println!(
        "ops={} edges={} lower+schedule+verify={t:?} events={} hostwaits={} proven={}",
        g.ops.len(),
        g.edge_count(),
        s.events,
        s.host_waits().count(),
        plan.proof().syncs_proven_necessary
    );
    Ok(())
}
