//! The task kernels: Task Bench's `TaskGraph::execute_point` (check the inputs, write the
//! output, check the scratch, run the kernel) with its `compute_bound` and `memory_bound`
//! kernels (`core/core.cc`, `core/core_kernel.cc`), as a Rust function for the host
//! plugin and host tasks and as CUDA C (`taskbench.cu`, compiled by NVRTC) for the CUDA
//! plugin.
//!
//! One kernel per kernel kind and input count `n` (Task Bench passes its inputs as an
//! array; a kernel signature here has a fixed parameter list), named
//! `taskbench_{empty,compute,memory}_{n}`, parameters in order:
//!
//! ```text
//! t: i64, p: i64, out: out i64*,            the task and its output pairs
//! (in_k: in i64*, first_k: i64) × n,        input k: the outputs of points first_k ..
//! iterations: i64                           compute and memory only
//! scratch: inout i64*                       memory only: the point's scratch
//! ```
//!
//! An input holds whole outputs of consecutive points from `first_k`: pair `i` must be
//! `(t − 1, first_k + i / pairs)` with `pairs = len(out) / 2`. A wrong pair fails the task
//! naming it (host: the launch's error; CUDA: `__trap()`, which fails the launch and the
//! context, as Task Bench's `assert` aborts).
//!
//! On CUDA every kernel is one block of [`CUDA_THREADS`] threads: the compute kernel's 64
//! doubles are one per thread (Task Bench's CPU kernel is one thread over 64 doubles in 16
//! AVX registers; its repository has no GPU kernel), the output, input checks and the
//! memory kernel's copies are block-stride loops.

use super::spec::TaskBenchKernel;
use crate::model::{BoxError, KernelArgs, KernelSig};
use std::fmt::Write;

/// Task Bench's `kernel.samples` default (`default_graph`), the memory kernel's sample
/// count; this generator has no `-sample` option.
pub const MEMORY_SAMPLES: u64 = 16;

/// Task Bench's `MAGIC_VALUE`, which `prepare_scratch` fills every scratch word with and
/// `execute_point` checks in the first word before the kernel.
pub const SCRATCH_MAGIC: i64 = 0x5C4A_7C8B;

/// Threads of the one block a task kernel launches with on CUDA.
pub const CUDA_THREADS: u32 = 64;

/// The CUDA device code every task kernel calls.
const TASKBENCH_CU: &str = include_str!("taskbench.cu");

/// The kernel kind's part of a task kernel's name.
pub(super) fn kind_name(k: TaskBenchKernel) -> &'static str {
    match k {
        TaskBenchKernel::Empty => "empty",
        TaskBenchKernel::ComputeBound { .. } => "compute",
        TaskBenchKernel::MemoryBound { .. } => "memory",
    }
}

/// The name of the task kernel of `kernel` with `n` inputs.
pub(super) fn kernel_name(kernel: TaskBenchKernel, n: usize) -> String {
    format!("taskbench_{}_{n}", kind_name(kernel))
}

/// The CUDA C of the task kernels with the input counts `arities`: the device code and one
/// `extern "C"` entry per count.
pub(super) fn cuda_source(kernel: TaskBenchKernel, arities: &[usize]) -> String {
    let mut s = String::from(TASKBENCH_CU);
    for &n in arities {
        let mut params = String::from("i64 t, i64 p, i64* out, i64 nout");
        let mut fill = String::new();
        for k in 0..n {
            let _ = write!(params, ", const i64* in{k}, i64 nin{k}, i64 first{k}");
            let _ = writeln!(
                fill,
                "  ins[{k}] = in{k}; lens[{k}] = nin{k}; firsts[{k}] = first{k};"
            );
        }
        let (extra, call) = match kernel {
            TaskBenchKernel::Empty => ("", "tb_none()".to_string()),
            TaskBenchKernel::ComputeBound { .. } => {
                (", i64 iterations", "tb_compute(iterations)".to_string())
            }
            TaskBenchKernel::MemoryBound { .. } => (
                ", i64 iterations, i64* scratch, i64 nscratch",
                "tb_memory(t, iterations, scratch, nscratch)".to_string(),
            ),
        };
        let scratch = if matches!(kernel, TaskBenchKernel::MemoryBound { .. }) {
            "tb_check_scratch(scratch, nscratch);\n  __syncthreads();\n  "
        } else {
            ""
        };
        let _ = write!(
            s,
            "\nextern \"C\" __global__ void {name}({params}{extra}) {{\n  \
             const i64* ins[{m}]; i64 lens[{m}]; i64 firsts[{m}];\n{fill}  \
             tb_point(t, p, out, nout, {n}, ins, lens, firsts);\n  {scratch}{call};\n}}\n",
            name = kernel_name(kernel, n),
            m = n.max(1),
        );
    }
    s
}

/// The colouring's estimate of one round of the compute-bound kernel, ns
/// ([`crate::model::CostHint`]): 128 flops (2 per double, 64 doubles) at about 48
/// GFLOP/s, one AVX2-FMA core of the 2-core development machine (Task Bench MPI's best
/// rate there, benches/README.md). Without it every task is estimated at a launch's
/// 3 µs whatever its iterations, and the entered stencil (no copies per task) was
/// kept on one stream: two columns of long tasks on one core (issue 30).
pub(super) const COMPUTE_NS_PER_ITERATION: u64 = 3;

/// The signature, host code and CUDA code of the task kernel of `kernel` with `n` inputs
/// (see the module docs); `cuda` is the program's CUDA text ([`cuda_source`]).
pub(super) fn task_kernel(kernel: TaskBenchKernel, n: usize, cuda: &str) -> KernelSig {
    let mut b = KernelSig::rust(&kernel_name(kernel, n))
        .scalar::<i64>()
        .named("t")
        .scalar::<i64>()
        .named("p")
        .writes::<i64>()
        .named("out");
    for k in 0..n {
        b = b
            .reads::<i64>()
            .named(&format!("in{k}"))
            .scalar::<i64>()
            .named(&format!("first{k}"));
    }
    if kernel != TaskBenchKernel::Empty {
        b = b.scalar::<i64>().named("iterations");
        if let TaskBenchKernel::ComputeBound { .. } = kernel {
            b = b.cost_per_unit(COMPUTE_NS_PER_ITERATION);
        }
    }
    if let TaskBenchKernel::MemoryBound { .. } = kernel {
        b = b.reads_writes::<i64>().named("scratch");
    }
    b.cuda_source(cuda)
        .body(move |args: &mut KernelArgs<'_>| run_task(kernel, n, args))
}

/// The host code of a task kernel: Task Bench's `execute_point`.
fn run_task(kernel: TaskBenchKernel, n: usize, args: &mut KernelArgs<'_>) -> Result<(), BoxError> {
    let t = args.scalar::<i64>(0)?;
    let p = args.scalar::<i64>(1)?;
    let out = args.output::<i64>(2)?;
    let pairs = out.len() / 2;
    for k in 0..n {
        let input = args.input::<i64>(3 + 2 * k)?;
        let first = args.scalar::<i64>(4 + 2 * k)?;
        check_input(t, p, k, first, pairs, input)?;
    }
    for pair in out.chunks_exact_mut(2) {
        pair[0] = t;
        pair[1] = p;
    }
    let after = 3 + 2 * n;
    match kernel {
        TaskBenchKernel::Empty => {}
        TaskBenchKernel::ComputeBound { .. } => {
            let iterations = args.scalar::<i64>(after)? as u64;
            std::hint::black_box(compute_bound(iterations));
        }
        TaskBenchKernel::MemoryBound { .. } => {
            let iterations = args.scalar::<i64>(after)? as u64;
            let scratch = args.output::<i64>(after + 1)?;
            if scratch.first() != Some(&SCRATCH_MAGIC) {
                return Err(format!(
                    "task (timestep {t}, point {p}): scratch word 0 is {:?}, not Task Bench's magic value {SCRATCH_MAGIC:#x}",
                    scratch.first()
                )
                .into());
            }
            memory_bound(t as u64, iterations, scratch);
        }
    }
    Ok(())
}

/// Task Bench's input check: pair `i` of input `k` (from point `first`) must be
/// `(t − 1, first + i / pairs)`, and the input whole outputs.
fn check_input(
    t: i64,
    p: i64,
    k: usize,
    first: i64,
    pairs: usize,
    input: &[i64],
) -> Result<(), BoxError> {
    // Written only for an error: this check runs for every input of every task.
    let task = || format!("task (timestep {t}, point {p})");
    if pairs == 0 || !input.len().is_multiple_of(2 * pairs) || input.is_empty() {
        return Err(format!(
            "{}: input {k} holds {} i64, not whole outputs of {pairs} pairs",
            task(),
            input.len()
        )
        .into());
    }
    for (i, pair) in input.chunks_exact(2).enumerate() {
        let q = first + (i / pairs) as i64;
        if pair[0] != t - 1 || pair[1] != q {
            return Err(format!(
                "{}: input {k} pair {i} is (timestep {}, point {}), expected (timestep {}, point {q}) (Task Bench: corrupted value)",
                task(),
                pair[0],
                pair[1],
                t - 1
            )
            .into());
        }
    }
    Ok(())
}

/// Task Bench's `execute_kernel_compute`: 64 doubles from 1.2345, `iterations` rounds of
/// `a = a·a + a`, then their product (returned so the work is not optimized away).
///
/// On x86-64 with AVX2 and FMA (detected at run time) the rounds are fused multiply-adds,
/// as Task Bench's `__AVX2__` branch (`_mm256_fmadd_pd` over 16 × 4 doubles, built with
/// `-mavx2 -mfma` by its core/Makefile) computes them; elsewhere its portable branch (a
/// multiply, then an add). The flops are the same (2 per double per round,
/// `count_flops_per_task`); the values differ only in rounding.
pub(super) fn compute_bound(iterations: u64) -> f64 {
    // Opaque start values, so the rounds are not folded at compile time; the caller keeps
    // the result (black_box), as Task Bench returns it.
    let a = std::hint::black_box([1.2345f64; 64]);
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has AVX2 and FMA (checked just above).
        return unsafe { compute_bound_fma(a, iterations) };
    }
    compute_bound_portable(a, iterations)
}

fn compute_bound_portable(mut a: [f64; 64], iterations: u64) -> f64 {
    for _ in 0..iterations {
        for x in a.iter_mut() {
            *x = *x * *x + *x;
        }
    }
    a.iter().product()
}

/// The rounds as fused multiply-adds, vectorized for AVX2.
///
/// Safety: the CPU must have AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn compute_bound_fma(mut a: [f64; 64], iterations: u64) -> f64 {
    for _ in 0..iterations {
        for x in a.iter_mut() {
            *x = x.mul_add(*x, *x);
        }
    }
    a.iter().product()
}

/// Task Bench's `execute_kernel_memory` over `scratch` (whole words, a multiple of
/// `2 · MEMORY_SAMPLES` of them): `iterations` copies of one sample each, starting at
/// sample `(timestep · iterations) mod 16` and wrapping, grouped as its prologue (to the
/// end of the samples), body (all samples at once) and epilogue. Each group's span is
/// copied first half onto second half (Task Bench splits the span at 32-byte alignment
/// for AVX and copies each part's halves; the bytes moved are the same but for that
/// padding).
pub(super) fn memory_bound(timestep: u64, iterations: u64, scratch: &mut [i64]) {
    let s = MEMORY_SAMPLES;
    let sample = scratch.len() / s as usize;
    let start_at = |iter: u64| ((timestep % s) * (iterations % s) + iter % s) % s;
    let mut copy = |start: u64, samples: u64| {
        let (off, len) = (start as usize * sample, samples as usize * sample);
        scratch.copy_within(off..off + len / 2, off + len / 2);
    };
    let mut iter = 0;
    let start = start_at(iter);
    let num = (start + iterations).min(s) - start;
    if num > 0 {
        copy(start, num);
        iter += num;
    }
    while iter + s <= iterations {
        copy(start_at(iter), s);
        iter += s;
    }
    let rest = iterations - iter;
    if rest > 0 {
        copy(start_at(iter), rest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compute_bound_applies_task_bench_rounds() {
        let product = |v: f64| std::iter::repeat_n(v, 64).product::<f64>();
        assert_eq!(compute_bound(0), product(1.2345));
        assert_eq!(
            compute_bound_portable([1.2345; 64], 1),
            product(1.2345 * 1.2345 + 1.2345)
        );
        // Fused or not, one round differs from the portable one by rounding at most.
        let one = compute_bound(1);
        let want = product(1.2345 * 1.2345 + 1.2345);
        assert!((one - want).abs() <= want * 1e-13, "{one} against {want}");
        // a → a² + a overflows to infinity in round 11 (1.2345, 2.76, 10.4, 118, …).
        assert!(compute_bound(11).is_infinite());
    }

    #[test]
    fn memory_bound_copies_samples_in_task_bench_order() {
        // 16 samples of 4 words; word value = its index.
        let mut s: Vec<i64> = (0..64).collect();
        // timestep 0, 3 iterations: the prologue copies samples 0..3 (12 words) half onto
        // half: words 0..6 onto 6..12.
        memory_bound(0, 3, &mut s);
        let mut want: Vec<i64> = (0..64).collect();
        want.copy_within(0..6, 6);
        assert_eq!(s, want);
        // timestep 1, 15 iterations: start (1·15) mod 16 = 15; prologue sample 15 alone,
        // then 14 more: no full body, epilogue samples 0..14.
        let mut s: Vec<i64> = (0..64).collect();
        memory_bound(1, 15, &mut s);
        let mut want: Vec<i64> = (0..64).collect();
        want.copy_within(60..62, 62);
        want.copy_within(0..28, 28);
        assert_eq!(s, want);
    }

    #[test]
    fn inputs_are_checked_pair_by_pair() {
        // Two points' outputs of 2 pairs each, from point 3 at timestep 4.
        let good = [4, 3, 4, 3, 4, 4, 4, 4];
        assert!(check_input(5, 3, 0, 3, 2, &good).is_ok());
        let mut bad = good;
        bad[6] = 3;
        let e = check_input(5, 3, 0, 3, 2, &bad).unwrap_err().to_string();
        assert_eq!(
            e,
            "task (timestep 5, point 3): input 0 pair 3 is (timestep 3, point 4), expected \
             (timestep 4, point 4) (Task Bench: corrupted value)"
        );
        assert!(check_input(5, 3, 0, 3, 2, &good[..6]).is_err());
    }

    #[test]
    fn cuda_source_has_one_entry_per_arity() {
        let k = TaskBenchKernel::MemoryBound {
            iterations: 1,
            scratch_bytes: 256,
        };
        let src = cuda_source(k, &[0, 3]);
        assert!(src.contains("extern \"C\" __global__ void taskbench_memory_0(i64 t, i64 p, i64* out, i64 nout, i64 iterations, i64* scratch, i64 nscratch)"));
        assert!(src.contains("const i64* in2, i64 nin2, i64 first2, i64 iterations"));
        assert_eq!(src.matches("__global__").count(), 2);
    }
}
