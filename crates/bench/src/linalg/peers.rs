//! The peers `bench linalg` runs beside offload-sched: StarPU's Debian examples (other
//! processes) and the library's monolithic routine on the host (LAPACK `?potrf` /
//! `?getrf` / BLAS `?gemm` of the system OpenBLAS, called here with as many threads as
//! cores; LAPACK's `?getrf` pivots, there is no non-pivoting one).
//!
//! **StarPU** (Debian's `starpu-examples`, StarPU 1.3: `cholesky_implicit` (single
//! precision only), `lu_implicit_example_float` / `_double` (LU without pivoting: the
//! example pivots only with `-piv`), `sgemm`, `dgemm` in
//! `/usr/lib/x86_64-linux-gnu/starpu/examples`, or
//! `--starpu DIR`): the same N and tile size (Cholesky and LU `-size N -nblocks N/tile`; the GEMMs
//! `-xy N -z N -nblocks N/tile`), `STARPU_NCPU` = the cores, `STARPU_NCUDA=0`,
//! `STARPU_NOPENCL=0`, `OPENBLAS_NUM_THREADS=1` (the BLAS it links is this OpenBLAS,
//! through Debian's `libblas.so.3` alternative). Each scheduler (`lws`, `dmda`) first runs
//! `CALIBRATION_RUNS` times with `STARPU_CALIBRATE=1` (dmda's performance models; lws
//! ignores them), then `reps` measured runs; `STARPU_HOME` is a folder of this bench's
//! under the system temp folder, so calibrations persist between calls. Figures: the
//! milliseconds StarPU prints (`cholesky_implicit` and `lu_implicit`: `# size ms GFlop/s`; the GEMMs
//! `# x y z ms GFlops`, per iteration) with this bench's flop counts. The Debian build
//! divides `-iter` by 10 (`STARPU_QUICK_CHECK`), so the GEMMs are run with `-iter 10`:
//! one timed iteration each.

use super::Algorithm;
use offload_sched::model::residual::{cholesky_residual, gemm_residual, lu_residual};
use offload_sched::model::tiled::{cholesky_flops, gemm_flops};
use offload_sched::model::tiled_lu::lu_flops;
use offload_sched::model::ElemType;
use std::ffi::{c_char, c_int};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// Where Debian's `starpu-examples` installs the examples.
pub const STARPU_EXAMPLES: &str = "/usr/lib/x86_64-linux-gnu/starpu/examples";

/// Unmeasured runs per scheduler before the measured ones.
pub const CALIBRATION_RUNS: usize = 3;

/// One peer's measured runs.
#[derive(Clone, Debug)]
pub struct PeerRuns {
    /// GFLOP/s of each measured run.
    pub gflops: Vec<f64>,
    /// The scaled residual of one run (`None`: not checked).
    pub residual: Option<f64>,
}

/// The StarPU example for `alg` and `ty`: its file name, or why there is none.
pub fn starpu_example(alg: Algorithm, ty: ElemType) -> Result<&'static str, String> {
    match (alg, ty) {
        (Algorithm::Cholesky, ElemType::F32) => Ok("cholesky_implicit"),
        (Algorithm::Cholesky, _) => {
            Err("StarPU's cholesky_implicit is single precision only".into())
        }
        (Algorithm::Lu, ElemType::F32) => Ok("lu_implicit_example_float"),
        (Algorithm::Lu, _) => Ok("lu_implicit_example_double"),
        (Algorithm::Gemm, ElemType::F32) => Ok("sgemm"),
        (Algorithm::Gemm, _) => Ok("dgemm"),
    }
}

/// The flops `bench linalg` credits to `alg` at order `n` (Cholesky `n³/3`, LU `2n³/3`,
/// GEMM `2n³`).
pub fn flops(alg: Algorithm, n: u64) -> f64 {
    match alg {
        Algorithm::Cholesky => cholesky_flops(n),
        Algorithm::Lu => lu_flops(n),
        Algorithm::Gemm => gemm_flops(n),
    }
}

/// The milliseconds in StarPU's output: the second column (cholesky, LU) or the fourth
/// (GEMM) of the last line that starts with a digit.
pub fn parse_starpu_ms(out: &str, cholesky: bool) -> Result<f64, String> {
    let line = out
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .ok_or_else(|| format!("no result line in StarPU's output: {:?}", tail(out)))?;
    let col = if cholesky { 1 } else { 3 };
    let ms: f64 = line
        .split_whitespace()
        .nth(col)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("no milliseconds in StarPU's line {line:?}"))?;
    if !(ms.is_finite() && ms > 0.0) {
        return Err(format!("StarPU printed {ms} ms ({line:?})"));
    }
    Ok(ms)
}

fn tail(s: &str) -> String {
    let t: Vec<&str> = s.lines().rev().take(3).collect();
    t.into_iter().rev().collect::<Vec<_>>().join(" / ")
}

/// Runs the StarPU example for (`cholesky`, `ty`) at `n`, `tile` with scheduler `sched`:
/// calibration runs, then `reps` measured runs (module docs).
///
/// Errors: the example missing (naming the path), a failing run (its output's end), no
/// figure in the output.
pub fn starpu(
    dir: &Path,
    (alg, ty): (Algorithm, ElemType),
    (n, tile): (u64, u64),
    sched: &str,
    (cores, reps): (usize, usize),
) -> Result<PeerRuns, String> {
    let name = starpu_example(alg, ty)?;
    // Cholesky and LU print `# size ms GFlop/s` and take `-size -nblocks`.
    let cholesky = alg != Algorithm::Gemm;
    let bin = dir.join(name);
    if !bin.is_file() {
        return Err(format!(
            "{} not found (Debian package starpu-examples: benches/setup-linalg.sh)",
            bin.display()
        ));
    }
    let home: PathBuf = std::env::temp_dir().join("offload-bench-starpu");
    std::fs::create_dir_all(&home).map_err(|e| format!("{}: {e}", home.display()))?;
    let nb = (n / tile).to_string();
    let args: Vec<String> = if cholesky {
        vec!["-size".into(), n.to_string(), "-nblocks".into(), nb]
    } else {
        let n = n.to_string();
        vec![
            "-xy".into(),
            n.clone(),
            "-z".into(),
            n,
            "-nblocks".into(),
            nb,
            "-iter".into(),
            "10".into(),
        ]
    };
    let flops = flops(alg, n);
    let run = |calibrate: bool| -> Result<f64, String> {
        let out = Command::new(&bin)
            .args(&args)
            .env("STARPU_SCHED", sched)
            .env("STARPU_NCPU", cores.to_string())
            .env("STARPU_NCUDA", "0")
            .env("STARPU_NOPENCL", "0")
            .env("STARPU_HOME", &home)
            .env("STARPU_CALIBRATE", if calibrate { "1" } else { "0" })
            .env("STARPU_SILENT", "1")
            .env("OPENBLAS_NUM_THREADS", "1")
            .output()
            .map_err(|e| format!("{}: {e}", bin.display()))?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if !out.status.success() {
            return Err(format!("{name} {sched}: {}: {}", out.status, tail(&text)));
        }
        Ok(flops / (parse_starpu_ms(&text, cholesky)? * 1e6))
    };
    for _ in 0..CALIBRATION_RUNS {
        run(true)?;
    }
    let gflops = (0..reps)
        .map(|_| run(false))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(PeerRuns {
        gflops,
        residual: None,
    })
}

#[link(name = "openblas")]
extern "C" {
    fn openblas_set_num_threads(n: c_int);
}

/// `f()` with OpenBLAS on `threads` threads, then back to 1 (the host plugin's tile calls
/// run on one; `runtime/blas.rs` of the library sets 1 before each of them anyway): for
/// the residual checks, one BLAS call of order n each.
pub fn blas_threads<R>(threads: usize, f: impl FnOnce() -> R) -> R {
    // SAFETY: sets OpenBLAS's thread count.
    unsafe { openblas_set_num_threads(threads as c_int) };
    let r = f();
    // SAFETY: as above.
    unsafe { openblas_set_num_threads(1) };
    r
}

/// A column-major `n × n` symmetric positive definite matrix: uniform `[0, 1)` from
/// `seed` (a 64-bit LCG), symmetric, plus `n` on the diagonal.
fn spd(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut a = vec![0.0; n * n];
    for j in 0..n {
        for i in j..n {
            let v = next() + if i == j { n as f64 } else { 0.0 };
            a[i + j * n] = v;
            a[j + i * n] = v;
        }
    }
    a
}

/// The library's monolithic routine on the host: LAPACK `?potrf` (lower) of an SPD
/// matrix, LAPACK `?getrf` (partial pivoting: LAPACK has no other) of the same matrix
/// (diagonally dominant by columns, so the pivot search keeps every diagonal element
/// and no row is interchanged: checked, `IPIV(i) = i`), or BLAS `?gemm` `C = A·B`, of
/// order `n`, OpenBLAS with `threads` threads (set
/// for the call, back to 1 after it: the host plugin's tile calls run on one), `reps`
/// timed calls on fresh copies of the input; the last result's scaled residual when
/// `n ≤ residual_max_n` (computed on `threads` threads too).
///
/// Errors: a `potrf` or `getrf` that fails (LAPACK's info), a `getrf` that interchanged
/// rows (its residual would need the permutation).
pub fn host_monolithic(
    (alg, ty): (Algorithm, ElemType),
    n: u64,
    (threads, reps): (usize, usize),
    residual_max_n: u64,
) -> Result<PeerRuns, String> {
    let nu = n as usize;
    let ni = n as c_int;
    let cholesky = alg == Algorithm::Cholesky;
    let gemm = alg == Algorithm::Gemm;
    let a = spd(nu, 1);
    let b: Vec<f64> = if gemm { spd(nu, 2) } else { Vec::new() };
    let mut gflops = Vec::with_capacity(reps);
    let mut last: Vec<f64> = Vec::new();
    // SAFETY: sets OpenBLAS's thread count.
    unsafe { openblas_set_num_threads(threads as c_int) };
    let r = (|| {
        for _ in 0..reps {
            macro_rules! call {
                ($t:ty, $potrf:ident, $getrf:ident, $gemm:ident) => {{
                    let mut x: Vec<$t> = a.iter().map(|&v| v as $t).collect();
                    let y: Vec<$t> = b.iter().map(|&v| v as $t).collect();
                    let mut c: Vec<$t> = vec![0.0; if gemm { nu * nu } else { 0 }];
                    let mut ipiv: Vec<c_int> = vec![0; if alg == Algorithm::Lu { nu } else { 0 }];
                    let t0 = Instant::now();
                    if alg == Algorithm::Lu {
                        let mut info = 0 as c_int;
                        // SAFETY: x is n×n column-major, lda n; ipiv holds n.
                        unsafe {
                            lapack_sys::$getrf(
                                &ni,
                                &ni,
                                x.as_mut_ptr(),
                                &ni,
                                ipiv.as_mut_ptr(),
                                &mut info,
                            )
                        };
                        if info != 0 {
                            return Err(format!("LAPACK getrf: info = {info}"));
                        }
                        if let Some(i) = (0..nu).find(|&i| ipiv[i] != i as c_int + 1) {
                            return Err(format!(
                                "LAPACK getrf interchanged row {} with row {}",
                                i + 1,
                                ipiv[i]
                            ));
                        }
                    } else if cholesky {
                        let (u, mut info) = (b'L' as c_char, 0 as c_int);
                        // SAFETY: x is n×n column-major, lda n.
                        unsafe { lapack_sys::$potrf(&u, &ni, x.as_mut_ptr(), &ni, &mut info) };
                        if info != 0 {
                            return Err(format!("LAPACK potrf: info = {info}"));
                        }
                    } else {
                        use cblas_sys::{CblasColMajor, CblasNoTrans};
                        // SAFETY: all three n×n column-major, leading dimension n.
                        unsafe {
                            cblas_sys::$gemm(
                                CblasColMajor,
                                CblasNoTrans,
                                CblasNoTrans,
                                ni,
                                ni,
                                ni,
                                1.0,
                                x.as_ptr(),
                                ni,
                                y.as_ptr(),
                                ni,
                                0.0,
                                c.as_mut_ptr(),
                                ni,
                            )
                        };
                    }
                    let s = t0.elapsed().as_secs_f64();
                    let out = if gemm { &c } else { &x };
                    last = out.iter().map(|&v| v as f64).collect();
                    s
                }};
            }
            let s = match ty {
                ElemType::F32 => call!(f32, spotrf_, sgetrf_, cblas_sgemm),
                _ => call!(f64, dpotrf_, dgetrf_, cblas_dgemm),
            };
            gflops.push(flops(alg, n) / s / 1e9);
        }
        Ok(())
    })();
    // SAFETY: as above.
    unsafe { openblas_set_num_threads(1) };
    r?;
    let residual = (n <= residual_max_n).then(|| {
        blas_threads(threads, || match alg {
            Algorithm::Cholesky => cholesky_residual(&a, &last, nu, nu, ty),
            Algorithm::Lu => lu_residual(&a, &last, nu, nu, ty),
            Algorithm::Gemm => gemm_residual(&a, &b, &last, nu, nu, ty),
        })
    });
    Ok(PeerRuns { gflops, residual })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starpu_figures_are_read_from_its_last_result_line() {
        let chol = "[starpu][check_bus_config_file] calibrating...\n# size\tms\tGFlop/s\n4096\t229\t100.1\n";
        assert_eq!(parse_starpu_ms(chol, true), Ok(229.0));
        let gemm = "# x\ty\tz\tms\tGFlops\n1024\t1024\t1024\t33\t64.7\n";
        assert_eq!(parse_starpu_ms(gemm, false), Ok(33.0));
        // The Debian build's `-iter 1` (divided by 10 to 0 iterations) prints inf.
        let inf = "# x\ty\tz\tms\tGFlops\n1024\t1024\t1024\tinf\t0.0\n";
        assert!(parse_starpu_ms(inf, false).unwrap_err().contains("inf"));
        assert!(parse_starpu_ms("oops", true)
            .unwrap_err()
            .contains("no result line"));
        assert!(starpu_example(Algorithm::Cholesky, ElemType::F64).is_err());
        assert_eq!(starpu_example(Algorithm::Gemm, ElemType::F64), Ok("dgemm"));
        assert_eq!(
            starpu_example(Algorithm::Lu, ElemType::F64),
            Ok("lu_implicit_example_double")
        );
        let lu = "# size\tms\tGFlop/s\n1024\t73\t9.8\n";
        assert_eq!(parse_starpu_ms(lu, true), Ok(73.0));
    }

    #[test]
    fn the_monolithic_routines_factor_and_multiply_within_the_residual_bound() {
        for ty in [ElemType::F32, ElemType::F64] {
            for alg in [Algorithm::Cholesky, Algorithm::Lu, Algorithm::Gemm] {
                let r = host_monolithic((alg, ty), 64, (1, 2), 64).unwrap();
                assert_eq!(r.gflops.len(), 2);
                assert!(r.gflops.iter().all(|g| *g > 0.0));
                let res = r.residual.unwrap();
                assert!(
                    res < offload_sched::model::residual::RESIDUAL_BOUND,
                    "{res}"
                );
            }
        }
    }
}
