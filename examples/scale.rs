//! Quick scale check: `cargo run --release --example scale -- 1000000`.
use offload_sched::{lower::lower, model::synthetic, schedule::*, verify::verify};
use std::time::Instant;
fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let p = synthetic(n);
    let t0 = Instant::now();
    let g = lower(&p).unwrap();
    let t1 = Instant::now();
    let s = schedule(&g, &ScheduleOptions::default());
    let t2 = Instant::now();
    let r = verify(&g, &s).unwrap();
    let t3 = Instant::now();
    println!("ops={} edges={} lower={:?} schedule={:?} verify={:?} total={:?} events={} hostwaits={} proven={}",
        g.ops.len(), g.edge_count(), t1-t0, t2-t1, t3-t2, t3-t0, s.events, s.host_waits().count(), r.syncs_proven_necessary);
}
