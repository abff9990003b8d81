//! A static cost estimate of every op, in µs, for the colouring's critical-path and
//! load decisions (never for correctness).
//!
//! The estimate only has to rank: which successor of a fan-out lies on the longest
//! remaining path, which stream frees up first. It is deliberately simple:
//!
//! | op | estimate |
//! |---|---|
//! | `H2D`, `D2H` | [`COPY_LATENCY_US`] + bytes / [`COPY_BYTES_PER_US`] |
//! | `Kernel` `spin(us)` | `us` (the built-in busy-wait states its own duration) |
//! | library kernels (`gemm`, `syrk`, `trsm`, `potrf`, `getrf` at `potrf`'s rate) | [`LAUNCH_LATENCY_US`] + flops ([`LibraryKernel::flops`], LAWN 41) / the kernel's rate in [`LIBRARY_FLOPS_PER_US`] |
//! | a kernel with a [`CostHint`](crate::model::CostHint) (`KernelBuilder::cost_per_unit`) | [`LAUNCH_LATENCY_US`] + its ns per unit × the hinted scalar argument |
//! | other kernels | [`LAUNCH_LATENCY_US`] + bytes of its device arguments / [`KERNEL_BYTES_PER_US`] |
//! | `Alloc`, `Free` | [`ALLOC_US`] (stream-ordered pools and block caches make them cheap) |
//! | host ops | a host task's kernel as a kernel; `taskwait` and `end` 0 |
//!
//! The figures are of the order the H200 machine measured ([design notes](crate::design), benches/README.md):
//! a few µs per small copy or launch, about 10 GB/s for pinned copies on the host plugin
//! and far more on a GPU. Only their ratios matter.

use crate::lower::{KernelArg, KernelCall, OpGraph, OpId, OpKind};
use crate::model::library::{self, LibraryKernel};

/// Fixed cost of one copy, µs.
pub const COPY_LATENCY_US: f64 = 3.0;
/// Copy bandwidth, bytes per µs (10 GB/s).
pub const COPY_BYTES_PER_US: f64 = 10_000.0;
/// Fixed cost of one kernel launch, µs.
pub const LAUNCH_LATENCY_US: f64 = 3.0;
/// Bytes a kernel touches per µs (its device arguments once; 50 GB/s).
pub const KERNEL_BYTES_PER_US: f64 = 50_000.0;
/// Floating-point operations per µs of the library tile kernels (`gemm`, `syrk`, `trsm`,
/// `potrf`), in that order: one CPU core of OpenBLAS 0.3.21 on 512 × 512 f32 tiles, the
/// median of a tiled Cholesky's calls on the 2-core development machine (2026-12-02:
/// 91, 82, 61 and 44 GFLOP/s). Their work grows as `tile³` while their bytes grow as
/// `tile²`, and a triangular solve or factorization runs well below a `gemm`'s rate
/// (cuBLAS and cuSOLVER too), so a cost by bytes, or by flops at one rate, would put the
/// critical path of a tiled factorization (potrf → trsm → syrk/gemm → potrf) on one stream
/// with more work than the others can take over. Only the ratios matter.
pub const LIBRARY_FLOPS_PER_US: [f64; 4] = [91_000.0, 82_000.0, 61_000.0, 44_000.0];

/// Stream-ordered alloc or free, µs.
pub const ALLOC_US: f64 = 0.5;
/// One cross-stream event (a record and a wait: two driver calls), µs.
pub const EVENT_US: f64 = 2.0;

/// Estimated duration of op `id`, in µs (finite, ≥ 0).
///
/// Complexity: `O(arguments)` of the op's kernel, `O(1)` otherwise.
pub fn op_cost_us(graph: &OpGraph, id: OpId) -> f64 {
    match &graph.op(id).kind {
        OpKind::H2D { .. } | OpKind::D2H { .. } | OpKind::PeerCopy { .. } => {
            COPY_LATENCY_US + graph.op_bytes(id) as f64 / COPY_BYTES_PER_US
        }
        OpKind::Alloc { .. } | OpKind::Free { .. } => ALLOC_US,
        OpKind::Kernel(call) => kernel_cost_us(graph, call),
        OpKind::HostTask { call, .. } => call.as_ref().map_or(0.0, |c| kernel_cost_us(graph, c)),
        OpKind::Taskwait | OpKind::End => 0.0,
    }
}

fn kernel_cost_us(graph: &OpGraph, call: &KernelCall) -> f64 {
    if let Some(us) = hinted_cost_us(graph, call) {
        return us;
    }
    if call.kernel == "spin" {
        if let Some(KernelArg::Scalar(us)) = call.args.first() {
            let us = us.as_f64();
            if us.is_finite() && us >= 0.0 {
                return us;
            }
        }
    }
    if let Some(k) = LibraryKernel::from_name(&call.kernel) {
        let scalars: Vec<f64> = call
            .args
            .iter()
            .filter_map(|a| match a {
                KernelArg::Scalar(v) => Some(v.as_f64()),
                _ => None,
            })
            .collect();
        // The lowering checked the call; a call it did not decode costs by bytes below.
        if let Ok(t) = library::decode(k, &scalars) {
            let flops = k.flops(&t);
            if flops.is_finite() && flops >= 0.0 {
                let rate = match k {
                    LibraryKernel::Gemm => LIBRARY_FLOPS_PER_US[0],
                    LibraryKernel::Syrk => LIBRARY_FLOPS_PER_US[1],
                    LibraryKernel::Trsm => LIBRARY_FLOPS_PER_US[2],
                    // LU without pivoting: a factorization like potrf, at its rate.
                    LibraryKernel::Potrf | LibraryKernel::Getrf => LIBRARY_FLOPS_PER_US[3],
                };
                return LAUNCH_LATENCY_US + flops / rate;
            }
        }
    }
    let bytes: u64 = call
        .args
        .iter()
        .map(|a| match a {
            KernelArg::Device { len, .. } => len * call.ty.size_bytes(),
            KernelArg::Host { section, .. } => {
                section.len * graph.buffers[section.buf.index()].ty.size_bytes()
            }
            KernelArg::Empty { .. } | KernelArg::Scalar(_) => 0,
        })
        .sum();
    LAUNCH_LATENCY_US + bytes as f64 / KERNEL_BYTES_PER_US
}

/// The estimate of a kernel that declares its cost ([`crate::model::CostHint`]):
/// [`LAUNCH_LATENCY_US`] plus its per-unit time × the hinted scalar argument.
fn hinted_cost_us(graph: &OpGraph, call: &KernelCall) -> Option<f64> {
    let sig = graph.kernels.iter().find(|k| k.name == call.kernel)?;
    let crate::model::KernelSource::Embedded {
        cost: Some(hint), ..
    } = &sig.source
    else {
        return None;
    };
    let KernelArg::Scalar(v) = call.args.get(hint.param)? else {
        return None;
    };
    let units = v.as_f64();
    (units.is_finite() && units >= 0.0)
        .then(|| LAUNCH_LATENCY_US + units * hint.ns_per_unit as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::lower;
    use crate::model::{ElemType, Init, MapType, ProgramBuilder};

    #[test]
    fn spin_costs_its_duration_and_copies_grow_with_bytes() {
        let mut p = ProgramBuilder::new("c");
        let x = p.buffer("x", ElemType::F32, 250_000, Init::Zeros);
        p.target("s", "spin").num(1234.0);
        p.target("k", "scale")
            .num(2.0)
            .arg(x)
            .map(MapType::ToFrom, x);
        let g = lower(&p.build()).unwrap();
        let cost = |kind: &str| {
            g.op_ids()
                .filter(|&o| g.op(o).kind.name() == kind)
                .map(|o| op_cost_us(&g, o))
                .collect::<Vec<f64>>()
        };
        let kernels = cost("kernel");
        assert_eq!(kernels[0], 1234.0);
        // 1 MB once: 3 µs + 20 µs.
        assert!((kernels[1] - 23.0).abs() < 1e-9, "{kernels:?}");
        // 1 MB copy: 3 µs + 100 µs.
        assert!((cost("h2d")[0] - 103.0).abs() < 1e-9);
        assert_eq!(cost("end"), [0.0]);
    }

    #[test]
    fn a_kernel_with_a_cost_hint_costs_its_hinted_argument() {
        let k = crate::model::KernelSig::rust("work")
            .scalar::<i64>()
            .named("rounds")
            .cost_per_unit(4)
            .writes::<f32>()
            .body(|_: &mut crate::model::KernelArgs<'_>| Ok(()));
        let mut p = ProgramBuilder::new("c");
        let x = p.buffer("x", ElemType::F32, 250_000, Init::Zeros);
        p.kernel(k);
        for (name, rounds) in [("w0", 0.0), ("w1", 250_000.0)] {
            p.target(name, "work")
                .num(rounds)
                .arg(x)
                .map(MapType::From, x);
        }
        let g = lower(&p.build()).unwrap();
        let kernels: Vec<f64> = g
            .op_ids()
            .filter(|&o| g.op(o).kind.name() == "kernel")
            .map(|o| op_cost_us(&g, o))
            .collect();
        // 3 µs + 4 ns per round; the 1 MB the kernel writes no longer counts.
        assert_eq!(kernels, [3.0, 1003.0]);
    }

    #[test]
    fn library_kernels_cost_their_flops() {
        let tiled = crate::model::Tiling {
            n: 768,
            tile: 256,
            ty: ElemType::F64,
            style: crate::model::DataStyle::Entered,
            init: crate::model::MatrixInit::Given,
        };
        let g = lower(&crate::model::tiled_cholesky(&tiled)).unwrap();
        let by_kernel = |name: &str| {
            g.op_ids()
                .find(|&o| matches!(&g.op(o).kind, OpKind::Kernel(c) if c.kernel == name))
                .map(|o| op_cost_us(&g, o))
                .unwrap()
        };
        let b = 256.0f64;
        // LAWN 41 counts at each kernel's rate, plus the launch.
        let want_gemm = 3.0 + 2.0 * b * b * b / 91_000.0;
        assert!((by_kernel("gemm") - want_gemm).abs() < 1e-6);
        let want_potrf = 3.0 + (b * b * b / 3.0 + b * b / 2.0 + b / 6.0) / 44_000.0;
        assert!((by_kernel("potrf") - want_potrf).abs() < 1e-6);
        assert!(by_kernel("gemm") > 2.5 * by_kernel("potrf"));
    }
}
