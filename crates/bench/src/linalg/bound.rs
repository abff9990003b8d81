//! The host **work bound** of a tiled program: every tile kernel it calls, timed alone on
//! one thread (OpenBLAS, as the host plugin calls them), times how often the program
//! calls it, spread perfectly over the cores. No schedule of those kernels on that many
//! cores can be faster, whatever the runtime (ours, StarPU's, LAPACK's own tiling with
//! those kernels): it is what the targets of issue 27 are measured against when one sits
//! close to it.
//!
//! The kernels are those of [`offload_sched::model::tiled`]: Cholesky `potrf(L)`,
//! `trsm(right, L, T, N)`, `syrk(L, N)`, `gemm(N, T)`; GEMM `gemm(N, N)`, all of order
//! `tile` with leading dimension `tile` (tile layout). Each is timed as the median of
//! `reps` calls after one untimed call, on inputs made once (the written tile is restored
//! from a copy before each call, outside the time).

use super::report::{Kind, Row};
use super::Algorithm;
use cblas_sys::{CblasColMajor, CblasLower, CblasNoTrans, CblasNonUnit, CblasRight, CblasTrans};
use offload_sched::model::ElemType;
use std::os::raw::{c_char, c_int};
use std::time::Instant;

/// One tile kernel's count in the program and its time alone.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelTime {
    /// `potrf`, `trsm`, `syrk` or `gemm`.
    pub name: &'static str,
    /// How many calls the tiled program makes.
    pub count: u64,
    /// Median time of one call alone on one thread, µs.
    pub us: f64,
}

/// The bound of one tiled program (module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct WorkBound {
    pub kernels: Vec<KernelTime>,
    pub cores: usize,
}

impl WorkBound {
    /// Σ count × time / cores, in µs: the shortest span any schedule of these calls on
    /// `cores` cores can have.
    pub fn span_us(&self) -> f64 {
        let work: f64 = self.kernels.iter().map(|k| k.count as f64 * k.us).sum();
        work / self.cores.max(1) as f64
    }

    /// `flops` (the algorithm's count: `n³/3`, `2n³`) over [`WorkBound::span_us`], GFLOP/s.
    pub fn gflops(&self, flops: f64) -> f64 {
        flops / self.span_us() / 1e3
    }

    /// The report's row of the bound for algorithm `name` (`cholesky`, `gemm`) in
    /// precision `prec` (`s`, `d`), order `n`, tile `tile`, whose algorithm does `flops`;
    /// `reps`: the calls each kernel's median is of.
    pub fn row(
        &self,
        (name, prec): (&'static str, char),
        (n, tile): (u64, u64),
        flops: f64,
        reps: usize,
    ) -> Row {
        let cores = self.cores;
        Row {
            alg: name,
            prec,
            n,
            tile: Some(tile),
            variant: format!(
                "work bound on {cores} cores: each tile kernel alone on 1 thread × its count, ÷ {cores} ({})",
                self.describe()
            ),
            kind: Kind::Bound,
            runs: reps,
            gflops: self.gflops(flops),
            whole: None,
            residual: None,
            wall_s: None,
            moved: None,
        }
    }

    /// `potrf 2 860 µs × 16, trsm ...`: what the bound is made of.
    pub fn describe(&self) -> String {
        self.kernels
            .iter()
            .map(|k| format!("{} {:.0} µs × {}", k.name, k.us, k.count))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// How often the tiled program of `alg` with `nt` tiles per dimension calls each kernel
/// (`tiled_cholesky`: `nt` potrf, `nt(nt−1)/2` trsm and syrk, `nt(nt−1)(nt−2)/6` gemm;
/// `tiled_gemm`: `nt³` gemm). `None` for LU (no bound computed).
pub fn kernel_counts(alg: Algorithm, nt: u64) -> Option<Vec<(&'static str, u64)>> {
    match alg {
        Algorithm::Cholesky => Some(vec![
            ("potrf", nt),
            ("trsm", nt * nt.saturating_sub(1) / 2),
            ("syrk", nt * nt.saturating_sub(1) / 2),
            ("gemm", nt * nt.saturating_sub(1) * nt.saturating_sub(2) / 6),
        ]),
        Algorithm::Gemm => Some(vec![("gemm", nt * nt * nt)]),
        Algorithm::Lu => None,
    }
}

/// Times the kernels of `alg` at `tile` in `ty` (f32 or f64) on one OpenBLAS thread and
/// returns the bound for `n` on `cores` cores; `None` for LU or another type.
pub fn host_work_bound(
    (alg, ty): (Algorithm, ElemType),
    (n, tile): (u64, u64),
    cores: usize,
    reps: usize,
) -> Option<WorkBound> {
    let counts = kernel_counts(alg, n / tile)?;
    let b = tile as usize;
    let times = super::peers::blas_threads(1, || match ty {
        ElemType::F32 => time_kernels::<f32>(b, reps, &counts),
        ElemType::F64 => time_kernels::<f64>(b, reps, &counts),
        _ => None,
    })?;
    Some(WorkBound {
        kernels: counts
            .iter()
            .zip(times)
            .map(|(&(name, count), us)| KernelTime { name, count, us })
            .collect(),
        cores,
    })
}

/// A BLAS element type: the four kernels of the module docs.
trait Tile: Copy + From<f32> {
    unsafe fn potrf(b: c_int, a: *mut Self) -> c_int;
    unsafe fn trsm(b: c_int, a: *const Self, x: *mut Self);
    unsafe fn syrk(b: c_int, a: *const Self, c: *mut Self);
    unsafe fn gemm(b: c_int, nt: bool, a: *const Self, x: *const Self, c: *mut Self);
}

macro_rules! tile_impl {
    ($t:ty, $potrf:ident, $trsm:ident, $syrk:ident, $gemm:ident) => {
        impl Tile for $t {
            unsafe fn potrf(b: c_int, a: *mut $t) -> c_int {
                let (u, mut info) = (b'L' as c_char, 0 as c_int);
                lapack_sys::$potrf(&u, &b, a, &b, &mut info);
                info
            }
            unsafe fn trsm(b: c_int, a: *const $t, x: *mut $t) {
                cblas_sys::$trsm(
                    CblasColMajor,
                    CblasRight,
                    CblasLower,
                    CblasTrans,
                    CblasNonUnit,
                    b,
                    b,
                    1.0,
                    a,
                    b,
                    x,
                    b,
                );
            }
            unsafe fn syrk(b: c_int, a: *const $t, c: *mut $t) {
                cblas_sys::$syrk(
                    CblasColMajor,
                    CblasLower,
                    CblasNoTrans,
                    b,
                    b,
                    -1.0,
                    a,
                    b,
                    1.0,
                    c,
                    b,
                );
            }
            unsafe fn gemm(b: c_int, nt: bool, a: *const $t, x: *const $t, c: *mut $t) {
                let tb = if nt { CblasTrans } else { CblasNoTrans };
                cblas_sys::$gemm(
                    CblasColMajor,
                    CblasNoTrans,
                    tb,
                    b,
                    b,
                    b,
                    -1.0,
                    a,
                    b,
                    x,
                    b,
                    1.0,
                    c,
                    b,
                );
            }
        }
    };
}
tile_impl!(f32, spotrf_, cblas_strsm, cblas_ssyrk, cblas_sgemm);
tile_impl!(f64, dpotrf_, cblas_dtrsm, cblas_dsyrk, cblas_dgemm);

/// Median µs of each kernel named in `counts` (same order), `b × b` tiles; `None` if the
/// SPD tile's `potrf` fails (then no time would mean anything).
fn time_kernels<T: Tile>(
    b: usize,
    reps: usize,
    counts: &[(&'static str, u64)],
) -> Option<Vec<f64>> {
    let bi = b as c_int;
    // Inputs in (0, 1); the SPD tile adds b on the diagonal (diagonally dominant).
    let fill = |seed: u32| -> Vec<T> {
        (0..b * b)
            .map(|i| {
                let h = (i as u32).wrapping_mul(2654435761).wrapping_add(seed) >> 8;
                T::from((h % 1000) as f32 / 1000.0 + 0.0005)
            })
            .collect()
    };
    let mut spd: Vec<f32> = (0..b * b)
        .map(|i| ((i as u32).wrapping_mul(2654435761) >> 8) as f32 % 1000.0 / 1e6)
        .collect();
    for j in 0..b {
        for i in 0..j {
            spd[i + j * b] = spd[j + i * b];
        }
        spd[j + j * b] += b as f32;
    }
    let spd: Vec<T> = spd.into_iter().map(T::from).collect();
    let (a, x, c0) = (fill(1), fill(2), fill(3));
    let mut c = c0.clone();
    // A factor for trsm: the SPD tile's Cholesky factor (a well-conditioned L).
    let mut l = spd.clone();
    // SAFETY: l is b × b column-major, lda b.
    if unsafe { T::potrf(bi, l.as_mut_ptr()) } != 0 {
        return None;
    }
    let mut work = spd.clone();
    let median_us = |f: &mut dyn FnMut() -> f64| {
        f();
        let mut t: Vec<f64> = (0..reps.max(1)).map(|_| f()).collect();
        t.sort_by(f64::total_cmp);
        t[t.len() / 2]
    };
    let times = counts
        .iter()
        .map(|&(name, _)| {
            let mut run = || -> f64 {
                // SAFETY: every buffer is b × b column-major with leading dimension b.
                // The output tile starts from the same values each call (repeated
                // trsm would otherwise shrink it into subnormal numbers).
                c.copy_from_slice(&c0);
                unsafe {
                    match name {
                        "potrf" => {
                            work.copy_from_slice(&spd);
                            let t0 = Instant::now();
                            T::potrf(bi, work.as_mut_ptr());
                            t0.elapsed().as_secs_f64() * 1e6
                        }
                        "trsm" => {
                            let t0 = Instant::now();
                            T::trsm(bi, l.as_ptr(), c.as_mut_ptr());
                            t0.elapsed().as_secs_f64() * 1e6
                        }
                        "syrk" => {
                            let t0 = Instant::now();
                            T::syrk(bi, a.as_ptr(), c.as_mut_ptr());
                            t0.elapsed().as_secs_f64() * 1e6
                        }
                        _ => {
                            let t0 = Instant::now();
                            // Cholesky's update is gemm(N, T); tiled GEMM's, the only
                            // kernel of its counts, gemm(N, N).
                            let nt = counts.len() > 1;
                            T::gemm(bi, nt, a.as_ptr(), x.as_ptr(), c.as_mut_ptr());
                            t0.elapsed().as_secs_f64() * 1e6
                        }
                    }
                }
            };
            median_us(&mut run)
        })
        .collect();
    Some(times)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cholesky_counts_match_the_program_regions() {
        // nt = 4: 4 potrf, 6 trsm, 6 syrk, 4 gemm (tiled_cholesky's region counts).
        let c = kernel_counts(Algorithm::Cholesky, 4).unwrap();
        assert_eq!(c, vec![("potrf", 4), ("trsm", 6), ("syrk", 6), ("gemm", 4)]);
        assert_eq!(
            kernel_counts(Algorithm::Gemm, 3).unwrap(),
            vec![("gemm", 27)]
        );
        assert!(kernel_counts(Algorithm::Lu, 3).is_none());
        assert_eq!(
            kernel_counts(Algorithm::Cholesky, 1).unwrap(),
            vec![("potrf", 1), ("trsm", 0), ("syrk", 0), ("gemm", 0)]
        );
    }

    #[test]
    fn the_bound_spreads_the_work_over_the_cores() {
        let b = WorkBound {
            kernels: vec![
                KernelTime {
                    name: "potrf",
                    count: 2,
                    us: 100.0,
                },
                KernelTime {
                    name: "gemm",
                    count: 10,
                    us: 50.0,
                },
            ],
            cores: 2,
        };
        // (2·100 + 10·50) / 2 = 350 µs; 7e8 flops in 350 µs = 2000 GFLOP/s.
        assert_eq!(b.span_us(), 350.0);
        assert!((b.gflops(7e8) - 2000.0).abs() < 1e-9);
        assert_eq!(b.describe(), "potrf 100 µs × 2, gemm 50 µs × 10");
    }

    #[test]
    fn host_kernels_time_positive_on_small_tiles() {
        let w = host_work_bound((Algorithm::Cholesky, ElemType::F64), (64, 32), 2, 3).unwrap();
        assert_eq!(w.kernels.len(), 4);
        assert!(w.kernels.iter().all(|k| k.us > 0.0), "{w:?}");
        assert!(host_work_bound((Algorithm::Lu, ElemType::F64), (64, 32), 2, 3).is_none());
    }
}
