//! Baselines that run as other processes in the same call: PyTorch (a Python script such
//! as `benches/gpu/torch_regions.py`) and real libomptarget (LLVM 16, the bundle's
//! `run.sh` from `../shared/baselines/libomptarget-16`). Their stdout is parsed here.

use super::median;
use std::path::Path;
use std::process::Command;

/// The PyTorch baseline: µs per region for each of `sizes` (NaN where the script printed
/// none), and a one-line note when the script failed.
///
/// The script gets `--regions`, `--sizes` (bytes per array, comma-separated), `--warmup`,
/// `--reps` and `--reps-large` (repetitions for sizes ≥ 8 MiB) and prints one line per
/// size: `torch_regions bytes=B us_per_region=U` (the median of its repetitions).
///
/// Errors: `python3` cannot be started.
pub(crate) fn torch(
    script: &Path,
    regions: usize,
    sizes: &[u64],
    (warmup, reps, reps_large): (usize, usize, usize),
) -> Result<(Vec<f64>, Option<String>), String> {
    let list: Vec<String> = sizes.iter().map(|b| b.to_string()).collect();
    let o = Command::new("python3")
        .arg(script)
        .env("PYTHONUNBUFFERED", "1")
        .args([
            "--regions",
            &regions.to_string(),
            "--sizes",
            &list.join(","),
        ])
        .args(["--warmup", &warmup.to_string()])
        .args(["--reps", &reps.to_string()])
        .args(["--reps-large", &reps_large.to_string()])
        .output()
        .map_err(|e| format!("python3 {}: {e}", script.display()))?;
    let us = parse_torch(&String::from_utf8_lossy(&o.stdout), sizes);
    let note = (!o.status.success()).then(|| {
        format!(
            "PyTorch script failed ({}): {}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .last()
                .unwrap_or("")
        )
    });
    Ok((us, note))
}

/// `torch_regions bytes=B us_per_region=U ...` lines → µs per region per size (NaN where
/// missing).
pub(crate) fn parse_torch(text: &str, sizes: &[u64]) -> Vec<f64> {
    let mut v = vec![f64::NAN; sizes.len()];
    for line in text.lines() {
        let field = |key: &str| {
            line.split_whitespace()
                .find_map(|f| f.strip_prefix(key))
                .and_then(|x| x.parse::<f64>().ok())
        };
        if let (Some(b), Some(us)) = (field("bytes="), field("us_per_region=")) {
            if let Some(i) = sizes.iter().position(|s| *s as f64 == b) {
                v[i] = us;
            }
        }
    }
    v
}

/// libomptarget's figures: for each size, µs per region of every timed repetition (over
/// all process runs), for the plain (`sync`) and the `nowait` variant; how they were
/// taken; a note when a run failed (the runs stop there).
#[derive(Debug, Default)]
pub(crate) struct OmpSamples {
    pub sync: Vec<Vec<f64>>,
    pub nowait: Vec<Vec<f64>>,
    /// For each size, the median of each run's nowait repetitions (run-to-run spread).
    pub nowait_by_run: Vec<Vec<f64>>,
    /// "N reps in M runs" (with the timing shim) or "M runs, 1 rep each".
    pub how: String,
    pub note: Option<String>,
}

impl OmpSamples {
    /// (median, best) of the sync samples per size (NaN where none).
    pub fn sync_stats(&self) -> (Vec<f64>, Vec<f64>) {
        stats(&self.sync)
    }

    /// (median, best) of the nowait samples per size (NaN where none).
    pub fn nowait_stats(&self) -> (Vec<f64>, Vec<f64>) {
        stats(&self.nowait)
    }
}

fn stats(samples: &[Vec<f64>]) -> (Vec<f64>, Vec<f64>) {
    let med = samples.iter().map(|s| median(s.clone())).collect();
    let best = samples
        .iter()
        .map(|s| s.iter().copied().fold(f64::NAN, f64::min))
        .collect();
    (med, best)
}

/// How to time the libomptarget program's repetitions.
#[derive(Clone, Copy, Debug)]
pub(crate) enum OmpTiming<'a> {
    /// `SAXPY_REPS=1`: each process contributes one repetition after its warm-up sweep.
    OnePerRun,
    /// `SAXPY_REPS=reps` with the `omp_get_wtime` shim (`benches/gpu/wtime_shim.c`)
    /// preloaded: every repetition of every process, checked against the best the
    /// program prints.
    Shim { so: &'a Path, reps: usize },
}

/// Runs the libomptarget bundle `runs` times (`bash DIR/run.sh` with `INFO=0`,
/// `SAXPY_R=regions`). For each size and variant the program checks one region, runs one
/// untimed warm-up sweep of all regions, then `SAXPY_REPS` timed sweeps and prints the
/// best; `timing` says how the individual repetitions are obtained, so that the median
/// over them is the same statistic as the other variants' (the bundle alone reports the
/// best).
///
/// Errors: `bash` cannot be started. A run that exits non-zero, or whose timing log does
/// not match its printed figures, ends the series with a note; the samples so far are
/// kept.
pub(crate) fn libomptarget(
    dir: &Path,
    regions: usize,
    sizes: &[u64],
    runs: usize,
    timing: OmpTiming,
) -> Result<OmpSamples, String> {
    let mut s = OmpSamples {
        sync: vec![Vec::new(); sizes.len()],
        nowait: vec![Vec::new(); sizes.len()],
        nowait_by_run: vec![Vec::new(); sizes.len()],
        ..OmpSamples::default()
    };
    let runs = runs.max(1);
    let mut done = 0;
    for run in 0..runs {
        let log = std::env::temp_dir().join(format!(
            "offload-bench-wtime-{}-{run}.log",
            std::process::id()
        ));
        let mut cmd = Command::new("bash");
        cmd.arg(dir.join("run.sh"))
            .env("INFO", "0")
            .env("SAXPY_R", regions.to_string());
        let reps = match timing {
            OmpTiming::OnePerRun => 1,
            OmpTiming::Shim { so, reps } => {
                cmd.env("LD_PRELOAD", so).env("WTIME_LOG", &log);
                reps.max(1)
            }
        };
        cmd.env("SAXPY_REPS", reps.to_string());
        let o = cmd
            .output()
            .map_err(|e| format!("bash {}/run.sh: {e}", dir.display()))?;
        let lines = result_lines(&String::from_utf8_lossy(&o.stdout));
        let fail = |what: String| format!("libomptarget run.sh (run {} of {runs}) {what}", run + 1);
        if !o.status.success() {
            let err = String::from_utf8_lossy(&o.stderr);
            let tail: Vec<&str> = err.lines().rev().take(3).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            s.note = Some(fail(format!(
                "exited with {}: {}",
                o.status,
                tail.join(" / ")
            )));
            break;
        }
        let per_line: Vec<Vec<f64>> = match timing {
            OmpTiming::OnePerRun => lines.iter().map(|l| l.us.into_iter().collect()).collect(),
            OmpTiming::Shim { .. } => {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                let _ = std::fs::remove_file(&log);
                match split_wtime_log(&text, &lines, reps, regions) {
                    Ok(v) => v,
                    Err(e) => {
                        s.note = Some(fail(format!("timing log: {e}")));
                        break;
                    }
                }
            }
        };
        for (l, v) in lines.iter().zip(per_line) {
            if let Some(i) = sizes.iter().position(|b| *b == l.bytes) {
                match l.variant.as_str() {
                    "sync" => s.sync[i].extend(v),
                    "nowait" => {
                        s.nowait_by_run[i].push(median(v.clone()));
                        s.nowait[i].extend(v)
                    }
                    _ => {}
                }
            }
        }
        done += 1;
    }
    s.how = match timing {
        OmpTiming::OnePerRun => format!("{done} runs, 1 rep each"),
        OmpTiming::Shim { reps, .. } => format!("{} reps in {done} runs", reps.max(1) * done),
    };
    Ok(s)
}

/// One result line of the libomptarget program: `<bytes> <sync|nowait> <µs/region>`
/// (`us` is `None` for `skipped`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ResultLine {
    pub bytes: u64,
    pub variant: String,
    pub us: Option<f64>,
}

/// The program's result lines, in its order (sizes, then sync before nowait).
pub(crate) fn result_lines(text: &str) -> Vec<ResultLine> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let [b, variant, us] = f[..] else { return None };
            if variant != "sync" && variant != "nowait" {
                return None;
            }
            let bytes = b.parse::<u64>().ok()?;
            let us = match us {
                "skipped" => None,
                x => Some(x.parse::<f64>().ok()?),
            };
            Some(ResultLine {
                bytes,
                variant: variant.to_string(),
                us,
            })
        })
        .collect()
}

/// Splits a `WTIME_LOG` (one `omp_get_wtime()` value in s per line) into µs per region
/// of each timed repetition, per result line that was not skipped (skipped lines get
/// none). The program reads the clock twice per repetition (start, end), `reps + 1`
/// repetitions per line in the order of its result lines, the first being the warm-up.
///
/// Errors: the wrong number of values, a value that is not a number, or a line whose
/// fastest repetition is not the best it printed (to its 2 decimals).
pub(crate) fn split_wtime_log(
    log: &str,
    lines: &[ResultLine],
    reps: usize,
    regions: usize,
) -> Result<Vec<Vec<f64>>, String> {
    let t: Vec<f64> = log
        .lines()
        .map(|l| {
            l.trim()
                .parse::<f64>()
                .map_err(|_| format!("not a time: {l:?}"))
        })
        .collect::<Result<_, _>>()?;
    let timed = lines.iter().filter(|l| l.us.is_some()).count();
    let per_line = 2 * (reps + 1);
    if t.len() != timed * per_line {
        return Err(format!(
            "{} clock reads, expected {timed} lines x {per_line}",
            t.len()
        ));
    }
    let mut chunks = t.chunks(per_line);
    let mut out = Vec::with_capacity(lines.len());
    for l in lines {
        let Some(printed) = l.us else {
            out.push(Vec::new());
            continue;
        };
        let c = chunks.next().unwrap_or_default();
        let v: Vec<f64> = c
            .chunks(2)
            .skip(1)
            .map(|p| (p[1] - p[0]) * 1e6 / regions.max(1) as f64)
            .collect();
        let best = v.iter().copied().fold(f64::INFINITY, f64::min);
        if (best - printed).abs() > 0.006 {
            return Err(format!(
                "{} {}: fastest logged repetition {best:.3} µs, printed {printed:.2}",
                l.bytes, l.variant
            ));
        }
        out.push(v);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torch_lines_are_matched_to_sizes() {
        let text = "torch 2.11 NVIDIA H200\n\
                    torch_regions bytes=4096 us_per_region=40.65 check=ok\n\
                    torch_regions bytes=16777216 us_per_region=944.01 check=ok\n";
        let v = parse_torch(text, &[4096, 1 << 20, 16 << 20]);
        assert_eq!(v[0], 40.65);
        assert!(v[1].is_nan());
        assert_eq!(v[2], 944.01);
    }

    #[test]
    fn libomptarget_result_lines_in_order() {
        let text = "R=64 regions per timing, REPS=1 (best reported)\n\
                    check n=1024 variant=sync: wrong=0\n\
                    \n       bytes  variant      us/region\n\
                    \x20       4096  sync             55.38\n\
                    \x20       4096  nowait           33.90\n\
                    \x20    1048576  sync            618.17\n\
                    \x20    1048576  nowait        skipped\n\
                    total wrong values: 0\n";
        let l = result_lines(text);
        assert_eq!(l.len(), 4);
        assert_eq!(
            l[1],
            ResultLine {
                bytes: 4096,
                variant: "nowait".into(),
                us: Some(33.90)
            }
        );
        assert_eq!(l[3].us, None);
    }

    fn line(bytes: u64, variant: &str, us: Option<f64>) -> ResultLine {
        ResultLine {
            bytes,
            variant: variant.into(),
            us,
        }
    }

    #[test]
    fn wtime_log_gives_every_timed_repetition() {
        // 2 regions, 2 reps + 1 warm-up per line: (start, end) pairs in s.
        let lines = [
            line(4096, "sync", Some(20.0)),
            line(4096, "nowait", None),
            line(1 << 20, "sync", Some(5.0)),
        ];
        let log = "1.0\n1.0001\n2.0\n2.00004\n3.0\n3.00006\n\
                   10.0\n10.1\n11.0\n11.00001\n12.0\n12.00002\n";
        let v = split_wtime_log(log, &lines, 2, 2).unwrap();
        assert_eq!(v.len(), 3);
        let r = |x: &[f64]| {
            x.iter()
                .map(|u| (u * 100.0).round() / 100.0)
                .collect::<Vec<_>>()
        };
        assert_eq!(r(&v[0]), vec![20.0, 30.0]); // warm-up 50 µs dropped
        assert!(v[1].is_empty());
        assert_eq!(r(&v[2]), vec![5.0, 10.0]);
    }

    #[test]
    fn wtime_log_that_does_not_match_the_program_is_refused() {
        let lines = [line(4096, "sync", Some(20.0))];
        let log = "1.0\n1.0001\n2.0\n2.00004\n3.0\n3.00006\n";
        // Missing reads.
        let e = split_wtime_log("1.0\n1.1\n", &lines, 2, 2).unwrap_err();
        assert!(e.contains("2 clock reads, expected 1 lines x 6"), "{e}");
        // Its fastest repetition is not the printed best.
        let bad = [line(4096, "sync", Some(25.0))];
        let e = split_wtime_log(log, &bad, 2, 2).unwrap_err();
        assert!(
            e.contains("fastest logged repetition 20.000 µs, printed 25.00"),
            "{e}"
        );
        assert!(split_wtime_log("x\n", &lines, 0, 2)
            .unwrap_err()
            .contains("not a time"));
    }

    /// A stand-in bundle whose `run.sh` prints a different figure per run: one sample per
    /// run, the median and best over the runs.
    #[test]
    fn libomptarget_runs_one_repetition_each() {
        let dir = std::env::temp_dir().join(format!("omp-bundle-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = r#"set -e
[ "$INFO" = 0 ] && [ "$SAXPY_REPS" = 1 ] && [ "$SAXPY_R" = 8 ] || exit 3
n=$(cat "$(dirname "$0")/count" 2>/dev/null || echo 0); echo $((n + 1)) > "$(dirname "$0")/count"
case $n in 0) us=40;; 1) us=30;; 2) us=50;; *) exit 4;; esac
echo "        4096  sync   $((us * 2)).5"
echo "        4096  nowait $us.0"
"#;
        std::fs::write(dir.join("run.sh"), script).unwrap();
        let _ = std::fs::remove_file(dir.join("count"));
        let s = libomptarget(&dir, 8, &[4096], 3, OmpTiming::OnePerRun).unwrap();
        assert_eq!(s.note, None);
        assert_eq!(s.how, "3 runs, 1 rep each");
        assert_eq!(s.nowait[0], vec![40.0, 30.0, 50.0]);
        assert_eq!(s.nowait_stats(), (vec![40.0], vec![30.0]));
        assert_eq!(s.nowait_by_run[0], vec![40.0, 30.0, 50.0]);
        assert_eq!(s.sync_stats(), (vec![80.5], vec![60.5]));
        // The next run fails (exit 4): the series stops there, with a note.
        let s = libomptarget(&dir, 8, &[4096], 2, OmpTiming::OnePerRun).unwrap();
        assert!(s.nowait[0].is_empty() && s.sync[0].is_empty());
        assert_eq!(s.how, "0 runs, 1 rep each");
        assert!(
            s.note.as_deref().unwrap_or("").contains("run 1 of 2"),
            "{:?}",
            s.note
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
