//! LLVM 19's `blocked_matmul` (a libomptarget-19 baseline folder, the bug49334
//! shape) as another process in the same call as `bench dag`: `bash DIR/run_matmul.sh`
//! with `INFO=0`, one process per mode (`MM_MODE=nowait`, `sync`), its per-repetition
//! lines parsed here.

use std::path::Path;
use std::process::Command;

/// One mode's figures from one `run_matmul.sh` process.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct MatmulRun {
    /// µs per region of every timed repetition (`rep K: T us total, U us per region`),
    /// in order; the untimed warm-up is not among them.
    pub per_region: Vec<f64>,
    /// The program's probe region ran on the host (`probe target region ran on: HOST
    /// (fallback)`): the figures are host-fallback figures, not libomptarget's CUDA path.
    pub host_fallback: bool,
    /// `wrong values: W` (every repetition is checked against the program's host
    /// reference); `None` if the line is missing.
    pub wrong: Option<u64>,
}

/// Parses `blocked_matmul`'s stdout.
pub(crate) fn parse(text: &str) -> MatmulRun {
    let mut r = MatmulRun::default();
    for line in text.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("probe target region ran on:") {
            r.host_fallback = rest.trim_start().starts_with("HOST");
        } else if let Some(rest) = line.strip_prefix("rep ") {
            // "rep 3: 597.0 us total, 9.33 us per region"
            let us = rest
                .split(',')
                .nth(1)
                .and_then(|f| f.trim().strip_suffix("us per region"))
                .and_then(|x| x.trim().parse::<f64>().ok());
            r.per_region.extend(us);
        } else if let Some(w) = line.strip_prefix("wrong values:") {
            r.wrong = w.trim().parse().ok();
        }
    }
    r
}

/// Runs `blocked_matmul` once in `mode` (`nowait` or `sync`) with `MM_N=n`, `MM_BS=bs`,
/// `MM_REPS=reps` (one untimed warm-up first, in the program). `host`: `HOST=1` (host
/// fallback, no GPU needed; the script sets `LIBOMP_USE_HIDDEN_HELPER_TASK=0`), else
/// `OMP_TARGET_OFFLOAD=MANDATORY` on the GPU.
///
/// Errors: `bash` cannot be started; the process fails (with its last stderr lines);
/// it prints no repetition; it reports wrong values.
pub(crate) fn run(
    dir: &Path,
    mode: &str,
    (n, bs): (u64, u64),
    reps: usize,
    host: bool,
) -> Result<MatmulRun, String> {
    let script = dir.join("run_matmul.sh");
    let mut cmd = Command::new("bash");
    crate::external::baseline_env(&mut cmd)
        .arg(&script)
        .env("INFO", "0")
        .env("MM_MODE", mode)
        .env("MM_N", n.to_string())
        .env("MM_BS", bs.to_string())
        .env("MM_REPS", reps.max(1).to_string());
    if host {
        cmd.env("HOST", "1");
    }
    let o = cmd
        .output()
        .map_err(|e| format!("bash {}: {e}", script.display()))?;
    let what = format!("LLVM 19 blocked_matmul MM_MODE={mode}");
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr);
        let tail: Vec<&str> = err.lines().rev().take(3).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(format!(
            "{what} exited with {}: {}",
            o.status,
            tail.join(" / ")
        ));
    }
    let r = parse(&String::from_utf8_lossy(&o.stdout));
    if r.per_region.is_empty() {
        return Err(format!("{what} printed no repetition"));
    }
    match r.wrong {
        Some(0) => Ok(r),
        Some(w) => Err(format!("{what}: {w} wrong values")),
        None => Err(format!("{what} printed no \"wrong values\" line")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The output of `HOST=1 INFO=0 MM_MODE=nowait MM_N=64 MM_BS=16 MM_REPS=3
    // bash run_matmul.sh` (libomptarget-19 bundle, 2-core VM).
    const HOST_OUTPUT: &str = "\
===== host fallback MM_MODE=nowait (OMP_TARGET_OFFLOAD=DISABLED, LIBOMP_USE_HIDDEN_HELPER_TASK=0)
blocked_matmul: N=64 BS=16 -> 4x4 blocks of 256 floats (1024 bytes), 64 target regions per repetition
mode=nowait: target ... nowait depend(in: A blk, B blk) depend(inout: C blk), issued in omp parallel + omp single, then omp taskwait
omp_get_num_devices() = 0, omp_get_default_device() = 0, omp_get_initial_device() = 0, omp_get_max_threads() = 2
probe target region ran on: HOST (fallback)
REPS=3 timed repetitions after 1 untimed warm-up
warm-up: 1040.0 us total, 16.25 us per region (not in the statistics)
rep 1: 3397.9 us total, 53.09 us per region
rep 2: 3994.9 us total, 62.42 us per region
rep 3: 597.0 us total, 9.33 us per region
median: 53.09 us per region, best: 9.33 us per region
max relative error: 0 (4 checks of 4096 values)
wrong values: 0
";

    #[test]
    fn repetitions_fallback_and_wrong_values_are_parsed() {
        let r = parse(HOST_OUTPUT);
        assert_eq!(r.per_region, [53.09, 62.42, 9.33]);
        assert!(r.host_fallback);
        assert_eq!(r.wrong, Some(0));
        let gpu = HOST_OUTPUT
            .replace("HOST (fallback)", "DEVICE")
            .replace("wrong values: 0", "wrong values: 12");
        let r = parse(&gpu);
        assert!(!r.host_fallback);
        assert_eq!(r.wrong, Some(12));
        assert_eq!(parse("").per_region, Vec::<f64>::new());
    }

    #[test]
    fn a_missing_bundle_is_an_error_naming_the_mode() {
        let dir = tempfile::tempdir().unwrap();
        let e = run(dir.path(), "nowait", (64, 16), 1, true).unwrap_err();
        assert!(e.contains("MM_MODE=nowait exited with"), "{e}");
    }
}
