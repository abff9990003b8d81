//! The markdown report of `bench taskbench`: per pattern, one table of every system's
//! sweep (granularity and efficiency per iteration count), the METG of each, then the
//! targets judged from those figures.
//!
//! Point table, one row per (system, iteration count):
//! `| system | iterations | runs | wall µs | granularity µs | rate | efficiency % |`
//! (wall: the mean over the runs);
//! the METG table: `| system | METG(50%) | peak | METG(50%) against its own best | its
//! best |` (the first against the call's `--peak`, which the targets judge; the second
//! against the system's own best rate, so a system whose kernel is slower is judged on
//! its overheads alone). Granularities and efficiencies are
//! printed with enough digits (3 decimals) that [`super::metg::metg_of`] over the printed
//! rows gives the printed METG to 0.01 µs.

use super::metg::{Analysis, Metg};
use std::fmt::Write as _;

/// One system's sweep on one pattern: its analysis, or why there is none.
#[derive(Clone, Debug)]
pub struct SystemRow {
    /// `offload-sched minimal, 2 streams`, `Task Bench MPI (nonblock)`, …
    pub name: String,
    pub result: Result<Analysis, String>,
    /// METG against the system's own best rate, and that rate (work per second).
    pub own: Option<(Metg, f64)>,
    /// offload-sched's (not a peer).
    pub ours: bool,
    /// Replayed ([`offload_sched::Session::with_replay`]: plugin graphs).
    pub replayed: bool,
}

/// The row with the smallest METG among `rows` that `keep` accepts and that have one:
/// a value or an upper bound (`≤ x`) ranks by its µs, before any lower bound (`> x`,
/// no point efficient), which ranks by its µs after them; ties to the first row.
pub fn best_row(
    rows: &[SystemRow],
    keep: impl Fn(&SystemRow) -> bool,
) -> Option<(&SystemRow, Metg)> {
    let key = |m: &Metg| (matches!(m, Metg::Above { .. }), m.us());
    rows.iter()
        .filter(|r| keep(r))
        .filter_map(|r| r.result.as_ref().ok().map(|a| (r, a.metg)))
        .fold(
            None,
            |best: Option<(&SystemRow, Metg)>, (r, m)| match best {
                Some((_, b))
                    if key(&b).partial_cmp(&key(&m)) != Some(std::cmp::Ordering::Greater) =>
                {
                    best
                }
                _ => Some((r, m)),
            },
        )
}

/// Everything one pattern measured.
#[derive(Clone, Debug)]
pub struct PatternFigures {
    /// Task Bench's name: `stencil_1d`, …
    pub pattern: String,
    pub systems: Vec<SystemRow>,
}

/// What the report says about the call.
#[derive(Clone, Debug, Default)]
pub struct Figures {
    /// Header lines (plugin, cores, graph, sweep, load).
    pub header: Vec<String>,
    pub patterns: Vec<PatternFigures>,
    /// `rate` unit: `GFLOP/s` or `GB/s`.
    pub unit: &'static str,
    /// The targets' judgement lines.
    pub targets: Vec<String>,
    pub notes: Vec<String>,
}

/// Renders the report.
pub fn render(f: &Figures) -> String {
    let mut s = String::from("## Task Bench: METG(50%)\n\n");
    for h in &f.header {
        let _ = writeln!(s, "- {h}");
    }
    for p in &f.patterns {
        let _ = writeln!(s, "\n### {}\n", p.pattern);
        let _ = writeln!(
            s,
            "| system | iterations | runs | wall µs | granularity µs | {} | efficiency % |",
            f.unit
        );
        s.push_str("|---|---:|---:|---:|---:|---:|---:|\n");
        for sys in &p.systems {
            let Ok(a) = &sys.result else { continue };
            for q in &a.points {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {:.3} | {:.3} | {:.3} | {:.3} |",
                    sys.name,
                    q.iterations,
                    q.reps,
                    q.elapsed_s * 1e6,
                    q.granularity_us,
                    q.rate * 1e-9,
                    q.efficiency * 100.0
                );
            }
        }
        let _ = writeln!(
            s,
            "\n| system | METG(50%) | peak {u} | METG(50%) against its own best | its best {u} |",
            u = f.unit
        );
        s.push_str("|---|---|---:|---|---:|\n");
        for sys in &p.systems {
            let own = match sys.own {
                Some((m, best)) => format!("{m} | {:.3}", best * 1e-9),
                None => " | ".to_string(),
            };
            match &sys.result {
                Ok(a) => {
                    let _ = writeln!(
                        s,
                        "| {} | {} | {:.3} | {own} |",
                        sys.name,
                        a.metg,
                        a.peak * 1e-9
                    );
                }
                Err(e) => {
                    let _ = writeln!(s, "| {} | {} | | {own} |", sys.name, e.replace('|', "/"));
                }
            }
        }
    }
    s.push_str("\n### Targets\n\n");
    for t in &f.targets {
        let _ = writeln!(s, "- {t}");
    }
    if !f.notes.is_empty() {
        s.push_str("\n### Notes\n\n");
        for n in &f.notes {
            let _ = writeln!(s, "- {n}");
        }
    }
    s
}

/// Whether `ours` is at most `factor` × `theirs`: `Some(true/false)` when the figures
/// decide it (a value or a bound on either side that settles the comparison), `None`
/// when they do not.
pub fn at_most(ours: &Metg, factor: f64, theirs: &Metg) -> Option<bool> {
    // ours ≤ a, theirs ≥ b (lower bounds of theirs; upper bounds of ours).
    let ours_hi = match *ours {
        Metg::Value { us, .. } | Metg::AtMost { us } => Some(us),
        Metg::Above { .. } => None,
    };
    let ours_lo = match *ours {
        Metg::Value { us, .. } | Metg::Above { us } => Some(us),
        Metg::AtMost { .. } => None,
    };
    let theirs_lo = match *theirs {
        Metg::Value { us, .. } | Metg::Above { us } => Some(us),
        Metg::AtMost { .. } => None,
    };
    let theirs_hi = match *theirs {
        Metg::Value { us, .. } | Metg::AtMost { us } => Some(us),
        Metg::Above { .. } => None,
    };
    if let (Some(o), Some(t)) = (ours_hi, theirs_lo) {
        if o <= factor * t {
            return Some(true);
        }
    }
    if let (Some(o), Some(t)) = (ours_lo, theirs_hi) {
        if o > factor * t {
            return Some(false);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparisons_decided_by_values_and_bounds() {
        let v = |us| Metg::Value {
            us,
            interpolated: false,
        };
        assert_eq!(at_most(&v(10.0), 0.5, &v(30.0)), Some(true));
        assert_eq!(at_most(&v(20.0), 0.5, &v(30.0)), Some(false));
        // ours ≤ 5 decides against anything ≥ 10 at 0.5×.
        assert_eq!(
            at_most(&Metg::AtMost { us: 5.0 }, 0.5, &v(10.0)),
            Some(true)
        );
        assert_eq!(at_most(&Metg::AtMost { us: 6.0 }, 0.5, &v(10.0)), None);
        // theirs > 100: ours 40 ≤ 0.5 × (more than 100).
        assert_eq!(
            at_most(&v(40.0), 0.5, &Metg::Above { us: 100.0 }),
            Some(true)
        );
        assert_eq!(
            at_most(&Metg::Above { us: 100.0 }, 2.0, &v(10.0)),
            Some(false)
        );
        assert_eq!(at_most(&Metg::Above { us: 10.0 }, 2.0, &v(10.0)), None);
    }

    #[test]
    fn the_best_row_is_the_smallest_metg_bounds_below_after_values() {
        let row = |name: &str, ours, replayed, metg: Option<Metg>| SystemRow {
            name: name.into(),
            result: metg
                .map(|metg| Analysis {
                    points: Vec::new(),
                    peak: 1.0,
                    threshold: 0.5,
                    metg,
                })
                .ok_or_else(|| "failed".to_string()),
            own: None,
            ours,
            replayed,
        };
        let v = |us| {
            Some(Metg::Value {
                us,
                interpolated: true,
            })
        };
        let rows = vec![
            row("live", true, false, v(45.0)),
            row("replayed", true, true, v(12.0)),
            row("failed", true, true, None),
            row("peer", false, false, v(1.0)),
            row("never", true, false, Some(Metg::Above { us: 3.0 })),
        ];
        let best = |keep: &dyn Fn(&SystemRow) -> bool| {
            best_row(&rows, keep).map(|(r, m)| (r.name.clone(), m.us()))
        };
        assert_eq!(best(&|r| r.ours), Some(("replayed".into(), 12.0)));
        assert_eq!(
            best(&|r| r.ours && !r.replayed),
            Some(("live".into(), 45.0))
        );
        assert_eq!(best(&|r| !r.ours), Some(("peer".into(), 1.0)));
        assert_eq!(best(&|r| r.name == "never"), Some(("never".into(), 3.0)));
        assert_eq!(best(&|r| r.name == "failed"), None);
    }
}
