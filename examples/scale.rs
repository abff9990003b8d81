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
//!
//! Any other command line (an N that is not a whole number >= 1, an unknown mode, a word
//! too many, a bad `--ranks` or `--device-memory` value) is refused with the reason and
//! the usage line on stderr, exit status 2, before any work.
use offload_sched::distribute::{split, DistPlan, Distribution};
use offload_sched::lower::LowerOptions;
use offload_sched::model::synthetic;
use offload_sched::schedule::ScheduleOptions;
use offload_sched::Plan;
use rayon::prelude::*;
use std::time::Instant;

/// The command line, as `main` runs it.
#[derive(Debug, PartialEq)]
enum Args {
    /// `N [elide|no-elide] [phases]`: `only` is the one mode to run (both when `None`).
    Plain {
        n: usize,
        only: Option<&'static str>,
        phases: bool,
    },
    /// `N --device-memory BYTES [no-elide]`.
    Capped { n: usize, cap: u64, elide: bool },
    /// `N --ranks R [no-elide]`.
    Ranks { n: usize, ranks: u32, elide: bool },
}

/// The usage line printed (to stderr, exit status 2) for a command line [`parse_args`]
/// refuses.
const USAGE: &str = "usage: scale [N] [elide|no-elide] [phases] | scale N --ranks R [no-elide] \
                     | scale N --device-memory BYTES [no-elide]   (N: ops, default 100000)";

/// Reads the arguments after the program name. Errors: the reason, naming the argument
/// (an N that is not a whole number ≥ 1, an unknown mode or a word too many, a missing
/// or bad `--ranks` / `--device-memory` value).
fn parse_args(args: &[String]) -> Result<Args, String> {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let count = |w: &str| match w.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("N must be a whole number of ops >= 1, found `{w}`")),
    };
    let elide_word = |rest: &[&str], after: &str| match rest {
        [] => Ok(true),
        ["no-elide"] => Ok(false),
        ["elide"] => Ok(true),
        [w] => Err(format!(
            "after {after} only `no-elide` may follow, found `{w}`"
        )),
        [_, w, ..] => Err(format!("unexpected argument `{w}` after {after}")),
    };
    let Some((&first, rest)) = a.split_first() else {
        return Ok(Args::Plain {
            n: 100_000,
            only: None,
            phases: false,
        });
    };
    let n = count(first)?;
    match rest {
        ["--device-memory", more @ ..] => {
            let Some((&b, more)) = more.split_first() else {
                return Err("--device-memory takes a size in bytes (512KiB, 1GiB, 4096)".into());
            };
            let cap = offload_sched::estimate::parse_bytes(b)
                .map_err(|e| format!("--device-memory: {e}"))?;
            let elide = elide_word(more, &format!("--device-memory {b}"))?;
            Ok(Args::Capped { n, cap, elide })
        }
        ["--ranks", more @ ..] => {
            let Some((&r, more)) = more.split_first() else {
                return Err("--ranks takes a rank count >= 1".into());
            };
            let ranks = r
                .parse::<u32>()
                .ok()
                .filter(|&r| r >= 1)
                .ok_or_else(|| format!("--ranks takes a rank count >= 1, found `{r}`"))?;
            let elide = elide_word(more, &format!("--ranks {r}"))?;
            Ok(Args::Ranks { n, ranks, elide })
        }
        _ => {
            let mut only = None;
            let mut phases = false;
            for (i, &w) in rest.iter().enumerate() {
                match (i, w) {
                    (0, "elide") => only = Some("elide"),
                    (0, "no-elide") => only = Some("no-elide"),
                    (0 | 1, "phases") if !phases => phases = true,
                    (0, w) => {
                        return Err(format!(
                            "unknown mode `{w}` (modes: elide, no-elide, phases, --ranks R, \
                             --device-memory BYTES)"
                        ))
                    }
                    (_, w) => return Err(format!("unexpected argument `{w}`")),
                }
            }
            Ok(Args::Plain { n, only, phases })
        }
    }
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (n, only, phases) = match parse_args(&args) {
        Err(e) => {
            eprintln!("scale: {e}\n{USAGE}");
            std::process::exit(2);
        }
        Ok(Args::Capped { n, cap, elide }) => return capped(n, cap, elide),
        Ok(Args::Ranks { n, ranks, elide }) => {
            let lower = match elide {
                true => LowerOptions::elided(),
                false => LowerOptions::no_elide(),
            };
            return distributed(n, ranks, &lower);
        }
        Ok(Args::Plain { n, only, phases }) => (n, only, phases),
    };
    for (what, lower) in [
        ("elide", LowerOptions::elided()),
        ("no-elide", LowerOptions::no_elide()),
    ] {
        if only.is_some_and(|o| o != what) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<Args, String> {
        parse_args(
            &line
                .split_whitespace()
                .map(String::from)
                .collect::<Vec<_>>(),
        )
    }

    #[test]
    fn good_command_lines_parse() {
        let plain = |n, only, phases| Ok(Args::Plain { n, only, phases });
        assert_eq!(parse(""), plain(100_000, None, false));
        assert_eq!(
            parse("1000 no-elide phases"),
            plain(1000, Some("no-elide"), true)
        );
        assert_eq!(parse("1000 phases"), plain(1000, None, true));
        assert_eq!(
            parse("10 --ranks 4 no-elide"),
            Ok(Args::Ranks {
                n: 10,
                ranks: 4,
                elide: false
            })
        );
        assert_eq!(
            parse("10 --device-memory 1KiB"),
            Ok(Args::Capped {
                n: 10,
                cap: 1024,
                elide: true
            })
        );
    }

    #[test]
    fn bad_arguments_are_refused_naming_them() {
        let bad = [
            ("abc", "N must be a whole number of ops >= 1, found `abc`"),
            ("0", "N must be a whole number of ops >= 1, found `0`"),
            ("100 fast", "unknown mode `fast` (modes: elide, no-elide, phases, --ranks R, --device-memory BYTES)"),
            ("100 elide phases extra", "unexpected argument `extra`"),
            ("100 phases phases", "unexpected argument `phases`"),
            ("100 --ranks", "--ranks takes a rank count >= 1"),
            ("100 --ranks 0", "--ranks takes a rank count >= 1, found `0`"),
            ("100 --ranks 2 fast", "after --ranks 2 only `no-elide` may follow, found `fast`"),
            ("100 --ranks 2 no-elide x", "unexpected argument `x` after --ranks 2"),
            ("100 --device-memory", "--device-memory takes a size in bytes (512KiB, 1GiB, 4096)"),
        ];
        for (line, want) in bad {
            assert_eq!(parse(line), Err(want.to_string()), "{line}");
        }
        assert_eq!(
            parse("100 --device-memory lots"),
            Err(
                "--device-memory: `lots` is not a size in bytes above 0 (e.g. 1073741824, \
                 512KiB, 256MiB, 16GiB, 4KB)"
                    .to_string()
            )
        );
    }
}
