//! The host reference of `bench dag`'s blocked matmul, and its check.

use offload_sched::exec::Buffers;
use offload_sched::model::Program;

/// The host reference of [`offload_sched::model::blocked_matmul`]: `C = A·B` from the program's
/// initial `A_i_k` and `B_k_j` blocks, in f32 and in the order a sequential run of the
/// program adds (for each element: the `k` blocks in order, inside a block `kk` in
/// order, `acc = acc + a·b` without fused multiply-add), so the host plugin matches it
/// exactly; other orders (a GPU's fused multiply-adds) stay far inside the check's
/// 1e-5 relative tolerance (the summation error bound is about `n · 2⁻²⁴` relative for
/// these non-negative terms, and much less in practice).
#[derive(Clone, Debug)]
pub struct MatmulReference {
    n: usize,
    bs: usize,
    /// C, dense row-major `n × n`.
    c: Vec<f32>,
}

/// Relative tolerance of [`MatmulReference::check`] (the one of LLVM's `blocked_matmul.c`).
pub const MATMUL_REL_TOL: f64 = 1e-5;

impl MatmulReference {
    /// Computes the reference of `blocked_matmul(n, bs)` from `program`'s initial data.
    ///
    /// Errors: a block buffer missing or not f32 of `bs²` elements. Complexity `O(n³)`.
    pub fn new(program: &Program, n: u64, bs: u64) -> Result<MatmulReference, String> {
        let (n, bs) = (n as usize, bs as usize);
        let nb = n / bs.max(1);
        let init = Buffers::initial(&program.buffers);
        let block = |name: String| -> Result<Vec<f32>, String> {
            match init.as_f32(&name) {
                Some(v) if v.len() == bs * bs => Ok(v.to_vec()),
                _ => Err(format!("no f32 buffer {name} of {} elements", bs * bs)),
            }
        };
        let dense = |m: &str| -> Result<Vec<f32>, String> {
            let mut d = vec![0f32; n * n];
            for bi in 0..nb {
                for bj in 0..nb {
                    let b = block(format!("{m}_{bi}_{bj}"))?;
                    for ii in 0..bs {
                        let row = (bi * bs + ii) * n + bj * bs;
                        d[row..row + bs].copy_from_slice(&b[ii * bs..(ii + 1) * bs]);
                    }
                }
            }
            Ok(d)
        };
        let (a, b) = (dense("A")?, dense("B")?);
        let mut c = vec![0f32; n * n];
        for i in 0..n {
            for j in 0..n {
                let mut acc = 0f32;
                for k in 0..n {
                    acc += a[i * n + k] * b[k * n + j];
                }
                c[i * n + j] = acc;
            }
        }
        Ok(MatmulReference { n, bs, c })
    }

    /// Checks every `C_i_j` block of `buffers` against the reference (relative error at
    /// most [`MATMUL_REL_TOL`]; NaN is wrong).
    ///
    /// Errors: the number of wrong values and the first one, as `C_i_j[e] = x, expected
    /// y`; a missing block.
    pub fn check(&self, buffers: &Buffers) -> Result<(), String> {
        let (n, bs) = (self.n, self.bs);
        let nb = n / bs.max(1);
        let (mut wrong, mut first) = (0usize, None);
        for bi in 0..nb {
            for bj in 0..nb {
                let name = format!("C_{bi}_{bj}");
                let v = buffers
                    .as_f32(&name)
                    .filter(|v| v.len() == bs * bs)
                    .ok_or_else(|| format!("no f32 buffer {name} of {} elements", bs * bs))?;
                for (e, &x) in v.iter().enumerate() {
                    let want = self.c[(bi * bs + e / bs) * n + bj * bs + e % bs];
                    let d = (x as f64 - want as f64).abs();
                    let rel = if want != 0.0 {
                        d / (want as f64).abs()
                    } else {
                        d
                    };
                    if rel.is_nan() || rel > MATMUL_REL_TOL {
                        wrong += 1;
                        first.get_or_insert_with(|| format!("{name}[{e}] = {x}, expected {want}"));
                    }
                }
            }
        }
        match first {
            None => Ok(()),
            Some(f) => Err(format!("{wrong} wrong values (first: {f})")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use offload_sched::exec;
    use offload_sched::schedule::ScheduleOptions;
    use offload_sched::Plan;

    #[test]
    fn the_matmul_check_finds_a_corrupted_element() {
        let p = offload_sched::model::blocked_matmul(32, 8);
        let r = MatmulReference::new(&p, 32, 8).unwrap();
        let plan = Plan::new(p.clone(), &ScheduleOptions::default()).unwrap();
        let mut b = plan.reference().unwrap();
        r.check(&b).unwrap();
        // C_1_2 element 5 off by 1e-4 relative: wrong.
        let c = b.get("C_1_2").unwrap().clone();
        let mut v = match c {
            exec::BufferData::F32(v) => v,
            other => panic!("{other:?}"),
        };
        let want = v[5];
        v[5] *= 1.0 + 1e-4;
        let bad = v[5];
        b = Buffers::new(
            b.iter()
                .map(|(n, d)| {
                    let d = if n == "C_1_2" {
                        exec::BufferData::F32(v.clone())
                    } else {
                        d.clone()
                    };
                    (n.to_string(), d)
                })
                .collect(),
        );
        assert_eq!(
            r.check(&b).unwrap_err(),
            format!("1 wrong values (first: C_1_2[5] = {bad}, expected {want})")
        );
        // The initial C (zeros) is wrong everywhere.
        let init = Buffers::initial(&p.buffers);
        assert!(r.check(&init).unwrap_err().starts_with("1024 wrong values"));
    }
}
