//! METG — minimum effective task granularity — from a recorded sweep, as Task Bench
//! computes it (`scripts/chart_metg.py`, `analyze`, upstream commit bf4ad19).
//!
//! A sweep runs one task graph (fixed pattern, width, steps) at decreasing kernel
//! iteration counts; each run records its wall time, its task count and its work (FLOPs
//! for the compute-bound kernel, bytes for the memory-bound one: Task Bench's `Total
//! FLOPs` / `Total Bytes`, `core.cc` `count_flops_per_task`). Per iteration count:
//!
//! - the wall time is the **mean** over the runs of that count (Task Bench's `numpy.mean`);
//! - **task granularity** = wall × cores / tasks (Task Bench's `time_per_task`, with one
//!   node), here in **µs** (chart_metg.py multiplies by 1000 and prints milliseconds);
//! - **rate** = work / wall (FLOP/s or B/s);
//! - **efficiency** = rate / peak. Task Bench divides by a fixed machine peak
//!   (`get_machine_parameters`, e.g. Cori's 1.26 TFLOP/s); [`Peak::BestOfSweep`] takes
//!   the best rate of the sweep itself instead, the usual choice where no machine peak is
//!   measured (it is what the efficiency at the longest tasks reaches).
//!
//! **METG(threshold)**: among the points with efficiency ≥ threshold, the one of smallest
//! granularity; if the next point of the sweep (next smaller iteration count) has a
//! smaller granularity, the value is interpolated linearly between the two at the
//! threshold (`numpy.interp(threshold, [e₊₁, eᵢ], [g₊₁, gᵢ])`), else it is that point's
//! granularity. Where Task Bench asserts (no point above the threshold; no point below
//! it or none after the chosen one: "maybe run was truncated"), [`Metg`] says which bound
//! the sweep gives instead of a value.

use std::fmt;

/// One measured run of a sweep.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SweepRun {
    /// Kernel iterations per task (Task Bench's `-iter`).
    pub iterations: u64,
    /// Wall time of the whole graph, seconds (Task Bench's `Elapsed Time`).
    pub elapsed_s: f64,
    /// Tasks in the graph (Task Bench's `Total Tasks`: steps × width for the full patterns).
    pub tasks: u64,
    /// Work of the whole graph: FLOPs or bytes (Task Bench's `Total FLOPs` / `Total Bytes`).
    pub work: f64,
}

/// What efficiency is measured against.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Peak {
    /// The best rate of the sweep (work per second of its fastest-rate point).
    BestOfSweep,
    /// A given peak rate of the machine, work per second (FLOP/s or B/s).
    Given(f64),
}

/// One iteration count of the sweep, after grouping its runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SweepPoint {
    /// Kernel iterations per task.
    pub iterations: u64,
    /// Runs averaged into this point.
    pub reps: usize,
    /// Mean wall time, seconds.
    pub elapsed_s: f64,
    /// Task granularity: mean wall × cores / tasks, µs.
    pub granularity_us: f64,
    /// Work per second (FLOP/s or B/s) at the mean wall time.
    pub rate: f64,
    /// `rate` / the peak (1.0 = the peak).
    pub efficiency: f64,
}

/// METG of a sweep, or the bound the sweep gives where it has no value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Metg {
    /// A value, µs; `interpolated` when it lies between two measured points.
    Value { us: f64, interpolated: bool },
    /// Every point at or after the smallest efficient one is efficient (the sweep
    /// stopped before efficiency fell below the threshold): METG ≤ `us`.
    AtMost { us: f64 },
    /// No point reaches the threshold: METG > `us`, the largest granularity measured.
    Above { us: f64 },
}

impl Metg {
    /// The value or the bound, µs.
    pub fn us(&self) -> f64 {
        match *self {
            Metg::Value { us, .. } | Metg::AtMost { us } | Metg::Above { us } => us,
        }
    }
}

impl fmt::Display for Metg {
    /// `12.3 µs`, `12.3 µs (interpolated)`, `≤ 12.3 µs`, `> 12.3 µs`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Metg::Value {
                us,
                interpolated: false,
            } => write!(f, "{us:.2} µs"),
            Metg::Value {
                us,
                interpolated: true,
            } => write!(f, "{us:.2} µs (interpolated)"),
            Metg::AtMost { us } => write!(f, "≤ {us:.2} µs (sweep too short)"),
            Metg::Above { us } => write!(f, "> {us:.2} µs (no point efficient)"),
        }
    }
}

/// A sweep analysed: its points, largest iteration count first, the peak used and METG.
#[derive(Clone, Debug, PartialEq)]
pub struct Analysis {
    pub points: Vec<SweepPoint>,
    /// The peak rate efficiencies are measured against, work per second.
    pub peak: f64,
    /// The efficiency threshold (0.5 for METG(50%)).
    pub threshold: f64,
    pub metg: Metg,
}

/// Why a sweep cannot be analysed.
#[derive(Clone, Debug, PartialEq)]
pub enum MetgError {
    /// No runs.
    Empty,
    /// `cores` is 0, or the threshold is not in (0, 1], or a given peak is not > 0.
    BadParameter(String),
    /// A run with a wall time, task count or work that is not a positive finite number
    /// (work may be 0 only when every run's is, which leaves no rate to compare).
    BadRun { index: usize, why: String },
    /// Runs with different task counts (Task Bench: "tasks are not identical").
    TasksDiffer { first: u64, other: u64 },
    /// Runs of one iteration count with different work ("flops are not identical").
    WorkDiffers { iterations: u64 },
    /// An efficiency of 1.5 or more against a given peak (Task Bench: "suspiciously high
    /// efficiency over 150%, was run timed correctly?").
    TooEfficient { iterations: u64, efficiency: f64 },
}

impl fmt::Display for MetgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MetgError::Empty => write!(f, "METG: the sweep has no runs"),
            MetgError::BadParameter(why) => write!(f, "METG: {why}"),
            MetgError::BadRun { index, why } => write!(f, "METG: run {index}: {why}"),
            MetgError::TasksDiffer { first, other } => write!(
                f,
                "METG: runs of one sweep have different task counts ({first} and {other})"
            ),
            MetgError::WorkDiffers { iterations } => write!(
                f,
                "METG: runs at {iterations} iterations report different work"
            ),
            MetgError::TooEfficient {
                iterations,
                efficiency,
            } => write!(
                f,
                "METG: efficiency {:.0}% at {iterations} iterations is over 150% of the peak \
                 (was the run timed correctly?)",
                efficiency * 100.0
            ),
        }
    }
}

impl std::error::Error for MetgError {}

/// Analyses a sweep: groups `runs` by iteration count (mean wall time), computes each
/// point's granularity (µs), rate and efficiency against `peak`, and METG(`threshold`),
/// as Task Bench's `chart_metg.py` does (module docs). `cores` is the cores the runs used
/// (one node). Runs may come in any order.
///
/// Errors: [`MetgError`] for an empty sweep, bad parameters, a run that is not positive
/// and finite, runs of differing task counts, runs of one iteration count with differing
/// work, and an efficiency ≥ 1.5 against a given peak.
///
/// Complexity: O(r log r) in the runs r.
pub fn analyze(
    runs: &[SweepRun],
    cores: u32,
    threshold: f64,
    peak: Peak,
) -> Result<Analysis, MetgError> {
    let first = runs.first().ok_or(MetgError::Empty)?;
    if cores == 0 {
        return Err(MetgError::BadParameter("cores must be at least 1".into()));
    }
    if !(threshold > 0.0 && threshold <= 1.0) {
        return Err(MetgError::BadParameter(format!(
            "threshold {threshold} is not in (0, 1]"
        )));
    }
    if let Peak::Given(p) = peak {
        if !(p.is_finite() && p > 0.0) {
            return Err(MetgError::BadParameter(format!(
                "peak {p} is not a positive rate"
            )));
        }
    }
    for (index, r) in runs.iter().enumerate() {
        let why = if !(r.elapsed_s.is_finite() && r.elapsed_s > 0.0) {
            Some(format!("wall time {} s is not positive", r.elapsed_s))
        } else if r.tasks == 0 {
            Some("no tasks".to_string())
        } else if !(r.work.is_finite() && r.work > 0.0) {
            Some(format!("work {} is not positive", r.work))
        } else {
            None
        };
        if let Some(why) = why {
            return Err(MetgError::BadRun { index, why });
        }
        if r.tasks != first.tasks {
            return Err(MetgError::TasksDiffer {
                first: first.tasks,
                other: r.tasks,
            });
        }
    }
    let mut sorted = runs.to_vec();
    sorted.sort_by_key(|r| std::cmp::Reverse(r.iterations));
    let mut points = Vec::new();
    for group in sorted.chunk_by(|a, b| a.iterations == b.iterations) {
        let g0 = group[0];
        if group.iter().any(|r| r.work != g0.work) {
            return Err(MetgError::WorkDiffers {
                iterations: g0.iterations,
            });
        }
        let elapsed_s = group.iter().map(|r| r.elapsed_s).sum::<f64>() / group.len() as f64;
        points.push(SweepPoint {
            iterations: g0.iterations,
            reps: group.len(),
            elapsed_s,
            granularity_us: elapsed_s * f64::from(cores) / g0.tasks as f64 * 1e6,
            rate: g0.work / elapsed_s,
            efficiency: f64::NAN,
        });
    }
    let peak = match peak {
        Peak::Given(p) => p,
        Peak::BestOfSweep => points.iter().map(|p| p.rate).fold(0.0, f64::max),
    };
    for p in &mut points {
        p.efficiency = p.rate / peak;
        if p.efficiency >= 1.5 {
            return Err(MetgError::TooEfficient {
                iterations: p.iterations,
                efficiency: p.efficiency,
            });
        }
    }
    let metg = metg_of(&points, threshold);
    Ok(Analysis {
        points,
        peak,
        threshold,
        metg,
    })
}

/// METG(`threshold`) of `points` (largest iteration count first, efficiencies set, as
/// [`analyze`] returns them), by Task Bench's rule (module docs): what [`analyze`] uses,
/// public so that a report's printed points can be checked against its METG.
pub fn metg_of(points: &[SweepPoint], threshold: f64) -> Metg {
    let chosen = points
        .iter()
        .enumerate()
        .filter(|(_, p)| p.efficiency >= threshold)
        .min_by(|a, b| a.1.granularity_us.total_cmp(&b.1.granularity_us));
    let Some((i, p)) = chosen else {
        let largest = points.iter().map(|p| p.granularity_us).fold(0.0, f64::max);
        return Metg::Above { us: largest };
    };
    let any_below = points.iter().any(|q| q.efficiency < threshold);
    match points.get(i + 1) {
        Some(next) if any_below => {
            if next.granularity_us < p.granularity_us {
                // numpy.interp(threshold, [next.eff, p.eff], [next.g, p.g]): next is below
                // the threshold (else it would have been chosen), p at or above it.
                let t = (threshold - next.efficiency) / (p.efficiency - next.efficiency);
                Metg::Value {
                    us: next.granularity_us + t * (p.granularity_us - next.granularity_us),
                    interpolated: true,
                }
            } else {
                Metg::Value {
                    us: p.granularity_us,
                    interpolated: false,
                }
            }
        }
        _ => Metg::AtMost {
            us: p.granularity_us,
        },
    }
}

/// The iteration counts and repetitions of Task Bench's METG sweeps
/// (`experiments/*/metg_*.sh`, `sweep`): step s = 0, 1, … runs `2^(top_log2 − s)`
/// iterations `min(s + 1, max_reps)` times (upstream: `top_log2` 26, `max_reps` 5, 22
/// steps for MPI), stopping before the count would drop below 1.
///
/// Returns `(iterations, reps)` pairs, largest first; `steps` pairs at most.
pub fn sweep_plan(top_log2: u32, steps: u32, max_reps: u32) -> Vec<(u64, u32)> {
    (0..steps.min(top_log2.min(63) + 1))
        .map(|s| (1u64 << (top_log2.min(63) - s), (s + 1).min(max_reps.max(1))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One run of a 4-task graph doing 100 FLOPs per task and iteration.
    fn run(iterations: u64, elapsed_s: f64) -> SweepRun {
        SweepRun {
            iterations,
            elapsed_s,
            tasks: 4,
            work: 4.0 * 100.0 * iterations as f64,
        }
    }

    #[test]
    fn granularity_rate_and_efficiency_per_point() {
        // 2 cores, 4 tasks: granularity = wall × 2 / 4.
        let runs = [run(1000, 0.004), run(100, 0.0008), run(10, 0.0004)];
        let a = analyze(&runs, 2, 0.5, Peak::BestOfSweep).unwrap();
        let g: Vec<f64> = a.points.iter().map(|p| p.granularity_us).collect();
        assert_eq!(g.len(), 3);
        assert!((g[0] - 2000.0).abs() < 1e-9, "{g:?}");
        assert!((g[1] - 400.0).abs() < 1e-9, "{g:?}");
        assert!((g[2] - 200.0).abs() < 1e-9, "{g:?}");
        // rates: 400000/0.004 = 1e8, 40000/0.0008 = 5e7, 4000/0.0004 = 1e7
        assert!((a.peak - 1e8).abs() < 1e-3);
        let e: Vec<f64> = a.points.iter().map(|p| p.efficiency).collect();
        assert!((e[0] - 1.0).abs() < 1e-12 && (e[1] - 0.5).abs() < 1e-12);
        assert!((e[2] - 0.1).abs() < 1e-12, "{e:?}");
        // 0.5 is reached at 400 µs (up to rounding): either that point is chosen and
        // interp(0.5, [0.1, 0.5], [200, 400]) = 400, or it falls a hair below and
        // interp(0.5, [0.5-ε, 1.0], [400, 2000]) ≈ 400.
        match a.metg {
            Metg::Value { us, interpolated } => {
                assert!(interpolated);
                assert!((us - 400.0).abs() < 1e-6, "{us}");
            }
            m => panic!("{m:?}"),
        }
    }

    #[test]
    fn interpolates_between_the_last_efficient_point_and_the_next() {
        // rates 1e8, 8e7 (eff 0.8), 2e7 (eff 0.2).
        let runs = [run(1000, 0.004), run(100, 0.0005), run(10, 0.0002)];
        let a = analyze(&runs, 2, 0.5, Peak::BestOfSweep).unwrap();
        // g = 2000, 250, 100 µs; interp(0.5, [0.2, 0.8], [100, 250]) = 100 + 0.5·150 = 175.
        match a.metg {
            Metg::Value { us, interpolated } => {
                assert!(interpolated);
                assert!((us - 175.0).abs() < 1e-9, "{us}");
            }
            m => panic!("{m:?}"),
        }
    }

    #[test]
    fn runs_of_one_count_are_averaged_and_order_does_not_matter() {
        let runs = [
            run(10, 0.0001),
            run(1000, 0.005),
            run(1000, 0.003),
            run(10, 0.0003),
        ];
        let a = analyze(&runs, 1, 0.5, Peak::BestOfSweep).unwrap();
        assert_eq!(a.points[0].iterations, 1000);
        assert_eq!(a.points[0].reps, 2);
        assert!((a.points[0].elapsed_s - 0.004).abs() < 1e-15);
        assert!((a.points[1].elapsed_s - 0.0002).abs() < 1e-15);
        // 1 core, 4 tasks: 0.004 s → 1000 µs.
        assert!((a.points[0].granularity_us - 1000.0).abs() < 1e-9);
    }

    #[test]
    fn a_given_peak_and_the_bounds_where_task_bench_asserts() {
        let runs = [run(1000, 0.004), run(100, 0.0008), run(10, 0.0004)];
        // Peak 1.6e8: efficiencies 0.625, 0.3125, 0.0625; 0.5 only at 2000 µs, the next
        // point (400 µs) is below: interp(0.5, [0.3125, 0.625], [400, 2000]) = 1360.
        let a = analyze(&runs, 2, 0.5, Peak::Given(1.6e8)).unwrap();
        assert!((a.points[1].efficiency - 0.3125).abs() < 1e-12);
        match a.metg {
            Metg::Value { us, interpolated } => {
                assert!(interpolated);
                assert!((us - 1360.0).abs() < 1e-6, "{us}");
            }
            m => panic!("{m:?}"),
        }
        // Peak 1e9: nothing efficient → above the largest granularity.
        let a = analyze(&runs, 2, 0.5, Peak::Given(1e9)).unwrap();
        assert!(matches!(a.metg, Metg::Above { us } if (us - 2000.0).abs() < 1e-9));
        // Threshold 0.05 against the sweep's best: every point efficient → at most 200.
        let a = analyze(&runs, 2, 0.05, Peak::BestOfSweep).unwrap();
        assert!(matches!(a.metg, Metg::AtMost { us } if (us - 200.0).abs() < 1e-9));
        assert_eq!(a.metg.to_string(), "≤ 200.00 µs (sweep too short)");
        // Peak 5e7: efficiency 2.0 at the top → Task Bench's 150% check.
        let e = analyze(&runs, 2, 0.5, Peak::Given(5e7)).unwrap_err();
        match e {
            MetgError::TooEfficient {
                iterations,
                efficiency,
            } => assert!(iterations == 1000 && (efficiency - 2.0).abs() < 1e-9),
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn no_interpolation_when_the_next_point_is_not_finer() {
        // Efficiencies 1.0, 0.8 (250 µs), 0.025; the 10-iteration point is noisy, slower
        // than the 100-iteration one (800 µs > 250 µs), so 250 µs is not interpolated.
        let runs = [run(1000, 0.004), run(100, 0.0005), run(10, 0.0016)];
        let a = analyze(&runs, 2, 0.5, Peak::BestOfSweep).unwrap();
        match a.metg {
            Metg::Value { us, interpolated } => {
                assert!(!interpolated);
                assert!((us - 250.0).abs() < 1e-9, "{us}");
            }
            m => panic!("{m:?}"),
        }
    }

    #[test]
    fn bad_sweeps_are_errors() {
        assert_eq!(
            analyze(&[], 2, 0.5, Peak::BestOfSweep),
            Err(MetgError::Empty)
        );
        let mut other = run(10, 0.001);
        other.tasks = 5;
        assert_eq!(
            analyze(&[run(100, 0.01), other], 2, 0.5, Peak::BestOfSweep),
            Err(MetgError::TasksDiffer { first: 4, other: 5 })
        );
        let mut w = run(100, 0.01);
        w.work += 1.0;
        assert_eq!(
            analyze(&[run(100, 0.01), w], 2, 0.5, Peak::BestOfSweep),
            Err(MetgError::WorkDiffers { iterations: 100 })
        );
        let e = analyze(&[run(100, 0.0)], 2, 0.5, Peak::BestOfSweep).unwrap_err();
        assert!(matches!(e, MetgError::BadRun { index: 0, .. }), "{e:?}");
        assert!(matches!(
            analyze(&[run(100, 0.01)], 0, 0.5, Peak::BestOfSweep),
            Err(MetgError::BadParameter(_))
        ));
        assert!(matches!(
            analyze(&[run(100, 0.01)], 1, 1.5, Peak::BestOfSweep),
            Err(MetgError::BadParameter(_))
        ));
    }

    #[test]
    fn the_sweep_plan_is_task_bench_s() {
        assert_eq!(
            sweep_plan(26, 7, 5),
            vec![
                (1 << 26, 1),
                (1 << 25, 2),
                (1 << 24, 3),
                (1 << 23, 4),
                (1 << 22, 5),
                (1 << 21, 5),
                (1 << 20, 5)
            ]
        );
        // It stops at 1 iteration.
        assert_eq!(sweep_plan(2, 10, 1), vec![(4, 1), (2, 1), (1, 1)]);
    }
}
