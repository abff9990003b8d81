//! Generated programs for benchmarks and scale tests.

use super::{DependType, ElemType, Init, MapType, Program, ProgramBuilder};

/// A program of about `ops` ops: each target region lowers to 8 (2 allocs, 2 H2D, a
/// kernel, a D2H, 2 frees), plus a few host tasks, so the count is within 1%.
///
/// Shape: `buffers` = max(16, regions / 64) buffer pairs of 256 f32; region `i` runs
/// saxpy on pair `i % buffers` reading pair `(i * 7 + 3) % buffers`'s `x` as well, so
/// regions form interleaved chains with cross edges; every 8th region is `nowait` with a
/// `depend(inout)`, and a host task reads a buffer every 1024 regions.
pub fn synthetic(ops: usize) -> Program {
    let regions = (ops / 8).max(1);
    let pairs = (regions / 64).max(16);
    let mut p = ProgramBuilder::new("synthetic");
    let mut xs = Vec::with_capacity(pairs);
    let mut ys = Vec::with_capacity(pairs);
    for i in 0..pairs {
        xs.push(p.buffer(&format!("x{i}"), ElemType::F32, 256, Init::Iota));
        ys.push(p.buffer(&format!("y{i}"), ElemType::F32, 256, Init::Zeros));
    }
    for i in 0..regions {
        let k = i % pairs;
        let j = (i * 7 + 3) % pairs;
        {
            let r = p
                .target(&format!("r{i}"), "saxpy")
                .num(0.5)
                .arg(xs[j])
                .arg(ys[k])
                .map(MapType::To, xs[j])
                .map(MapType::ToFrom, ys[k]);
            if i % 8 == 0 {
                r.nowait().depend(DependType::InOut, ys[k]);
            }
        }
        if i % 1024 == 1023 {
            let y = ys[k];
            p.host_task(&format!("h{i}"), &[y.into()], &[]);
        }
    }
    p.build()
}
