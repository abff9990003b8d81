//! Quick scale check of the pipeline (lower, schedule, verify) on a synthetic program of
//! about N ops, with transfer elision and without (`--no-elide`), in one call:
//! `cargo run --release --example scale -- 1000000 [elide|no-elide]`. Per-stage figures are in
//! the criterion bench `benches/schedule.rs`.
use offload_sched::lower::LowerOptions;
use offload_sched::model::synthetic;
use offload_sched::schedule::ScheduleOptions;
use offload_sched::Plan;
use std::time::Instant;

fn main() -> Result<(), String> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    // With transfer elision (the default), then without (`--no-elide`), same program;
    // a second argument `elide` or `no-elide` runs that one alone (for `/usr/bin/time`).
    let only = std::env::args().nth(2);
    for (what, lower) in [
        ("elide", LowerOptions::elided()),
        ("no-elide", LowerOptions::no_elide()),
    ] {
        if only.as_deref().is_some_and(|o| o != what) {
            continue;
        }
        let p = synthetic(n);
        let t0 = Instant::now();
        let plan =
            Plan::new_lowered(p, &ScheduleOptions::default(), &lower).map_err(|e| e.render())?;
        let t = t0.elapsed();
        let (g, s) = (plan.graph(), plan.schedule());
        println!(
            "{what}: ops={} edges={} lower+schedule+verify={t:?} events={} hostwaits={} proven={} elisions_proven={}",
            g.ops.len(),
            g.edge_count(),
            s.events,
            s.host_waits().count(),
            plan.proof().syncs_proven_necessary,
            plan.proof().elisions_proven
        );
        println!("{what}: moved: {}", g.bytes_moved());
    }
    Ok(())
}
