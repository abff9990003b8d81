//! Baselines that run as other processes in the same call: PyTorch (a Python script such
//! as `benches/gpu/torch_regions.py`) and real libomptarget (LLVM 16, the bundle's
//! `run.sh` of a libomptarget-16 baseline folder given with `--baselines DIR`). Their
//! stdout is parsed here.

use super::median;
use std::path::Path;
use std::process::Command;

/// `cmd` with the user's environment for the device: without `CUDA_DEVICE_MAX_CONNECTIONS`
/// where the bench itself set it (`raise_device_connections` in `offload-bench`'s
/// `main`), so a baseline run as a child process (PyTorch, libomptarget) gets the
/// driver's queue count as it would alone, not offload-sched's.
pub(crate) fn baseline_env(cmd: &mut Command) -> &mut Command {
    #[cfg(feature = "cuda")]
    if offload_sched::plugin::cuda::driver::device_connections_raised() {
        cmd.env_remove(offload_sched::plugin::cuda::driver::DEVICE_MAX_CONNECTIONS_VAR);
    }
    cmd
}

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
    torch_with(script, &[], regions, sizes, (warmup, reps, reps_large))
}

/// [`torch`] with `extra` arguments first (`--graph`: the regions captured once as a
/// `torch.cuda.CUDAGraph` and replayed).
pub(crate) fn torch_with(
    script: &Path,
    extra: &[&str],
    regions: usize,
    sizes: &[u64],
    (warmup, reps, reps_large): (usize, usize, usize),
) -> Result<(Vec<f64>, Option<String>), String> {
    let list: Vec<String> = sizes.iter().map(|b| b.to_string()).collect();
    let o = baseline_env(&mut Command::new("python3"))
        .arg(script)
        .args(extra)
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

    /// The median of the runs' nowait medians per size (NaN where none): the run-to-run
    /// figure, next to the median pooled over every repetition.
    pub fn nowait_median_of_runs(&self) -> Vec<f64> {
        self.nowait_by_run
            .iter()
            .map(|v| median(v.clone()))
            .collect()
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
/// best). With the shim, its path is made absolute and put first in `LD_PRELOAD` (after
/// it, whatever the caller had there); each run's log goes to a private temporary
/// directory (`tempfile`), removed before returning.
///
/// Errors: the shim is not a file, the temporary directory cannot be made, `bash`
/// cannot be started. A run that exits non-zero, writes no timing log, or whose log does
/// not match its printed figures ends the series with a note (with its last stderr
/// lines); the samples so far are kept.
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
    let shim = match timing {
        OmpTiming::OnePerRun => None,
        OmpTiming::Shim { so, reps } => {
            let so = so
                .canonicalize()
                .ok()
                .filter(|p| p.is_file())
                .ok_or_else(|| format!("--wtime-shim {}: not a file", so.display()))?;
            let logs = tempfile::Builder::new()
                .prefix(&format!("offload-bench-wtime-{}-", std::process::id()))
                .tempdir()
                .map_err(|e| format!("temporary directory for the timing logs: {e}"))?;
            Some((so, reps.max(1), logs))
        }
    };
    let reps = shim.as_ref().map_or(1, |(_, r, _)| *r);
    let runs = runs.max(1);
    let mut done = 0;
    for run in 0..runs {
        let mut cmd = Command::new("bash");
        baseline_env(&mut cmd)
            .arg(dir.join("run.sh"))
            .env("INFO", "0")
            .env("SAXPY_R", regions.to_string())
            .env("SAXPY_REPS", reps.to_string());
        let log = shim.as_ref().map(|(so, _, d)| {
            let log = d.path().join(format!("run{run}.log"));
            let mut pre = so.as_os_str().to_owned();
            if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|o| !o.is_empty()) {
                pre.push(":");
                pre.push(old);
            }
            cmd.env("LD_PRELOAD", pre).env("WTIME_LOG", &log);
            log
        });
        let o = cmd
            .output()
            .map_err(|e| format!("bash {}/run.sh: {e}", dir.display()))?;
        let lines = result_lines(&String::from_utf8_lossy(&o.stdout));
        let stderr_tail = || {
            let err = String::from_utf8_lossy(&o.stderr);
            let tail: Vec<&str> = err.lines().rev().take(3).collect();
            tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
        };
        let fail = |what: String| format!("libomptarget run.sh (run {} of {runs}) {what}", run + 1);
        if !o.status.success() {
            s.note = Some(fail(format!("exited with {}: {}", o.status, stderr_tail())));
            break;
        }
        let per_line: Vec<Vec<f64>> = match &log {
            None => lines.iter().map(|l| l.us.into_iter().collect()).collect(),
            Some(log) => {
                let Ok(text) = std::fs::read_to_string(log) else {
                    s.note = Some(fail(format!(
                        "wrote no timing log (shim not preloaded?): {}",
                        stderr_tail()
                    )));
                    break;
                };
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
                    "nowait" if !v.is_empty() => {
                        s.nowait_by_run[i].push(median(v.clone()));
                        s.nowait[i].extend(v)
                    }
                    _ => {}
                }
            }
        }
        done += 1;
    }
    s.how = match shim {
        None => format!("{done} runs, 1 rep each"),
        Some(_) => format!("{} reps in {done} runs", reps * done),
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
        let Some(c) = chunks.next() else {
            return Err("fewer clock reads than lines".into());
        };
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

    /// The shim path end to end with a stand-in bundle that writes the timing log itself:
    /// the shim goes first in `LD_PRELOAD` as an absolute path, `SAXPY_REPS` is the
    /// repetition count, every repetition is kept, the log directory is removed; a run
    /// that writes no log ends the series with a note; a missing shim is an error.
    #[test]
    fn libomptarget_with_the_shim_keeps_every_repetition() {
        let dir = tempfile::tempdir().unwrap();
        let so = dir.path().join("wtime_shim.so");
        std::fs::write(&so, b"not really a library").unwrap();
        let so_abs = so.canonicalize().unwrap();
        let bundle = |name: &str, write_log: bool| {
            let b = dir.path().join(name);
            std::fs::create_dir(&b).unwrap();
            let script = format!(
                r#"case "$LD_PRELOAD" in "{}"*) ;; *) echo "bad preload $LD_PRELOAD" >&2; exit 5;; esac
[ "$SAXPY_REPS" = 2 ] || exit 3
{}
echo "        4096  sync       skipped"
echo "        4096  nowait       20.00"
"#,
                so_abs.display(),
                if write_log {
                    r#"printf '1.0\n1.0001\n2.0\n2.00004\n3.0\n3.00006\n' > "$WTIME_LOG""#
                } else {
                    "true"
                }
            );
            std::fs::write(b.join("run.sh"), script).unwrap();
            b
        };
        let logs_before = count_log_dirs();
        let shim = OmpTiming::Shim { so: &so, reps: 2 };
        let s = libomptarget(&bundle("ok", true), 2, &[4096], 2, shim).unwrap();
        assert_eq!(s.note, None);
        assert_eq!(s.how, "4 reps in 2 runs");
        let r = |v: &[f64]| {
            v.iter()
                .map(|u| (u * 100.0).round() / 100.0)
                .collect::<Vec<_>>()
        };
        assert_eq!(r(&s.nowait[0]), vec![20.0, 30.0, 20.0, 30.0]);
        assert!(s.sync[0].is_empty()); // skipped: no samples, no NaN
        assert_eq!(r(&s.nowait_by_run[0]), vec![30.0, 30.0]); // upper middle of 20, 30
        assert_eq!(count_log_dirs(), logs_before);
        let s = libomptarget(&bundle("nolog", false), 2, &[4096], 2, shim).unwrap();
        assert!(
            s.note
                .as_deref()
                .unwrap_or("")
                .contains("run 1 of 2) wrote no timing log"),
            "{:?}",
            s.note
        );
        assert_eq!(s.how, "0 reps in 0 runs");
        assert_eq!(count_log_dirs(), logs_before);
        let missing = dir.path().join("nosuch.so");
        let shim = OmpTiming::Shim {
            so: &missing,
            reps: 2,
        };
        let e = libomptarget(&bundle("never", true), 2, &[4096], 1, shim).unwrap_err();
        assert!(e.contains("nosuch.so: not a file"), "{e}");
    }

    fn count_log_dirs() -> usize {
        let prefix = format!("offload-bench-wtime-{}-", std::process::id());
        std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            })
            .count()
    }
}
