//! Quick scale check of the pipeline (lower, schedule, verify) on a synthetic program of
//! about N ops, with transfer elision and without (`--no-elide`), in one call:
//! `cargo run --release --example scale -- 1000000 [elide|no-elide]`; with a third argument
//! `phases` (`-- 1000000 no-elide phases`) the wall and CPU time of lower, schedule and
//! verify one by one. Criterion figures are in the bench `benches/schedule.rs`.
//!
//! `cargo run --release --example scale -- 1000000 --ranks 4 [no-elide]`: the same program split over
//! 4 ranks (default owners: buffer i on rank i mod 4; owner computes), every rank's plan
//! compiled (lowered, scheduled, verified) and the cross-rank check (`verify_ranks`),
//! with each phase's wall and CPU time; issue 29's target: < 2 s to verify a program of
//! 1M ops (`no-elide`: every copy the mapping rules name, 8 ops a region) over 4 ranks.
//!
//! `cargo run --release --example scale -- 1000000 --device-memory BYTES [no-elide]`: the
//! same program lowered under a device memory cap (`512KiB`, `1GiB`, bytes), wall and CPU
//! time of lower + schedule + verify, how many devices the verifier needed the exact
//! peak for (the lowering's claims prove the rest, `verify/peak.rs`), and the time of the
//! exact peak (`peak_live_bytes`, the min cut) computed on its own.
use offload_sched::distribute::{split, DistPlan, Distribution};
use offload_sched::lower::LowerOptions;
use offload_sched::model::synthetic;
use offload_sched::schedule::ScheduleOptions;
use offload_sched::Plan;
use rayon::prelude::*;
use std::time::Instant;

fn main() -> Result<(), String> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    // With transfer elision (the default), then without (`--no-elide`), same program;
    // a second argument `elide` or `no-elide` runs that one alone (for `/usr/bin/time`).
    let only = std::env::args().nth(2);
    // A third argument `phases` times lower, schedule and verify one by one.
    let phases = std::env::args().nth(3).as_deref() == Some("phases");
    if only.as_deref() == Some("--device-memory") {
        let cap = std::env::args()
            .nth(3)
            .and_then(|a| offload_sched::estimate::parse_bytes(&a).ok())
            .ok_or("--device-memory takes a size in bytes")?;
        let elide = std::env::args().nth(4).as_deref() != Some("no-elide");
        return capped(n, cap, elide);
    }
    if only.as_deref() == Some("--ranks") {
        let ranks: u32 = std::env::args()
            .nth(3)
            .and_then(|a| a.parse().ok())
            .ok_or("--ranks takes a rank count")?;
        let lower = match std::env::args().nth(4).as_deref() {
            Some("no-elide") => LowerOptions::no_elide(),
            _ => LowerOptions::elided(),
        };
        return distributed(n, ranks, &lower);
    }
    for (what, lower) in [
        ("elide", LowerOptions::elided()),
        ("no-elide", LowerOptions::no_elide()),
    ] {
        if only.as_deref().is_some_and(|o| o != what) {
            continue;
        }
        let p = synthetic(n);
        if phases {
            // Each phase on its own (the plan below does the same work in one call).
            let opts = ScheduleOptions::default();
            let (g, wl, cl) =
                timed(|| offload_sched::lower::lower_with(&p, &lower).map_err(|e| e.to_string()));
            let g = g?;
            let (s, ws, cs) = timed(|| offload_sched::schedule::schedule(&g, &opts));
            let (r, wv, cv) = timed(|| offload_sched::verify::verify(&g, &s));
            r.map_err(|e| e.to_string())?;
            let ms = |us: f64| format!("{:.0} ms", us / 1e3);
            println!(
                "{what}: lower {} (cpu {}), schedule {} (cpu {}), verify {} (cpu {}); total {} (cpu {})",
                ms(wl), ms(cl), ms(ws), ms(cs), ms(wv), ms(cv),
                ms(wl + ws + wv), ms(cl + cs + cv)
            );
            continue;
        }
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

/// The `--device-memory` mode (module docs).
fn capped(n: usize, cap: u64, elide: bool) -> Result<(), String> {
    let lower = LowerOptions {
        device_memory: Some(cap),
        ..match elide {
            true => LowerOptions::elided(),
            false => LowerOptions::no_elide(),
        }
    };
    let p = synthetic(n);
    let (plan, w, c) = timed(|| Plan::new_lowered(p, &ScheduleOptions::default(), &lower));
    let plan = plan.map_err(|e| e.render())?;
    let g = plan.graph();
    let (peak, wp, cp) = timed(|| offload_sched::verify::peak_live_bytes(g, 0));
    println!(
        "cap {cap} elide={elide}: ops={} lower+schedule+verify {:.0} ms (cpu {:.0} ms), exact peaks in verify {}, evictions {}; \
         exact peak alone {} bytes in {:.0} ms (cpu {:.0} ms)",
        g.ops.len(),
        w / 1e3,
        c / 1e3,
        plan.proof().exact_peaks,
        g.evictions.len(),
        peak.bytes,
        wp / 1e3,
        cp / 1e3
    );
    println!("moved: {}", g.bytes_moved());
    Ok(())
}

/// CPU time of this process so far (every thread), in µs.
fn cpu_us() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec for clock_gettime(2) to write.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 * 1e6 + t.tv_nsec as f64 / 1e3
}

/// Runs `f`, returning its value, wall and CPU time (µs).
fn timed<R>(f: impl FnOnce() -> R) -> (R, f64, f64) {
    let (t0, c0) = (Instant::now(), cpu_us());
    let r = f();
    (r, t0.elapsed().as_secs_f64() * 1e6, cpu_us() - c0)
}

/// The `--ranks` mode (module docs): each phase's wall and CPU time (the CPU time of the
/// process: on a loaded machine the wall time counts other people's work too).
fn distributed(n: usize, ranks: u32, lower: &LowerOptions) -> Result<(), String> {
    let p = synthetic(n);
    let dist = Distribution::new(ranks).map_err(|e| e.to_string())?;
    let e = |e: offload_sched::distribute::DistError| e.to_string();
    let opts = ScheduleOptions::default();
    let (split, w0, c0) = timed(|| split(&p, &dist));
    let split = split.map_err(e)?;
    let (plans, w1, c1) = timed(|| {
        // In parallel, as `DistPlan::new` compiles them.
        (split.ranks.par_iter())
            .map(|r| DistPlan::compile_rank(r, &opts, lower))
            .collect::<Vec<_>>()
            .into_iter()
            .collect::<Result<Vec<_>, _>>()
    });
    let plans = plans.map_err(e)?;
    let (plan, w2, c2) = timed(|| DistPlan::from_parts(split, plans));
    let plan = plan.map_err(e)?;
    let ops: usize = plan.plans.iter().map(|p| p.graph().ops.len()).sum();
    let ms = |us: f64| format!("{:.0} ms", us / 1e3);
    let phase = |what: &str, w: f64, c: f64| format!("{what} {} (cpu {})", ms(w), ms(c));
    println!(
        "ranks={ranks} elide={}: ops={ops} over the ranks, transfers={}",
        lower.elide,
        plan.split.transfers.len()
    );
    println!(
        "  {}; {}; {}; total {} (cpu {})",
        phase("split", w0, c0),
        phase("ranks compiled (lower+schedule+verify each)", w1, c1),
        phase("verify_ranks", w2, c2),
        ms(w0 + w1 + w2),
        ms(c0 + c1 + c2)
    );
    Ok(())
}
