//! Generated programs for benchmarks and scale tests.

use super::{DependType, ElemType, Init, MapType, Program, ProgramBuilder};

/// The saxpy-regions program of the `bench` command: `regions` independent target
/// regions `r{i}`, each `y_i = 2·x_i + y_i` on its own `x{i}` (0.5) and `y{i}` (1.0) of
/// `bytes / 4` f32 elements (at least 1), mapped `to: x`, `tofrom: y`. After a run every
/// `y{i}` is 2.0 exactly.
pub fn saxpy_regions(regions: usize, bytes: u64) -> Program {
    let n = (bytes / 4).max(1);
    let mut p = ProgramBuilder::new("saxpy_regions");
    for r in 0..regions {
        let x = p.buffer(&format!("x{r}"), ElemType::F32, n, Init::Fill(0.5));
        let y = p.buffer(&format!("y{r}"), ElemType::F32, n, Init::Fill(1.0));
        p.target(&format!("r{r}"), "saxpy")
            .num(2.0)
            .arg(x)
            .arg(y)
            .map(MapType::To, x)
            .map(MapType::ToFrom, y);
    }
    p.build()
}

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

/// LLVM's bug49334 shape (`offload/test/offloading/bug49334.cpp`), as
/// LLVM 19's libomptarget `blocked_matmul.c` baseline writes it: `C += A·B` for
/// `n × n` f32 matrices stored as `nb × nb` separate blocks of `bs × bs` elements
/// (`nb = n / bs`), each block its own buffer, row-major inside: `A_i_k`, `B_k_j`,
/// `C_i_j` (block indices). For `i`, `j`, `k` in that order, one region `mm_i_j_k`:
///
/// ```text
/// #pragma omp target nowait depend(in: A(i,k), B(k,j)) depend(inout: C(i,j))
///         map(to: A(i,k), B(k,j)) map(tofrom: C(i,j))
///   matmul_block(bs, A(i,k), B(k,j), C(i,j))      // C(i,j) += A(i,k)·B(k,j)
/// ```
///
/// then `taskwait`: `nb³` regions, each mapping `3 · bs² · 4` bytes; the `nb` products
/// into one `C` block form a chain (in `k` order), the `nb²` chains are independent.
///
/// Initial values: `C` zeros; every `A` and `B` block `Init::Random` (uniform in
/// `[0, 1)`) with its own seed (`A_i_k`: `1 + i·nb + k`; `B_k_j`: `1 + nb² + k·nb + j`),
/// since [`super::Init`] has no per-element formula such as `blocked_matmul.c`'s; the
/// bench's host reference is computed from the same initial data.
///
/// Panics if `bs` is 0 or does not divide `n`.
pub fn blocked_matmul(n: u64, bs: u64) -> Program {
    assert!(
        bs > 0 && n.is_multiple_of(bs),
        "bs = {bs} must divide n = {n}"
    );
    let nb = n / bs;
    let mut p = ProgramBuilder::new(&format!("blocked_matmul_n{n}_bs{bs}"));
    let mut block = |m: &str, seed: Option<u64>, r: u64, c: u64| {
        let init = seed.map_or(Init::Zeros, |s| Init::Random(s + r * nb + c));
        p.buffer(&format!("{m}_{r}_{c}"), ElemType::F32, bs * bs, init)
    };
    let mut ids = [Vec::new(), Vec::new(), Vec::new()];
    for r in 0..nb {
        for c in 0..nb {
            ids[0].push(block("A", Some(1), r, c));
            ids[1].push(block("B", Some(1 + nb * nb), r, c));
            ids[2].push(block("C", None, r, c));
        }
    }
    let [a, b, c] = ids;
    for i in 0..nb {
        for j in 0..nb {
            let cij = c[(i * nb + j) as usize];
            for k in 0..nb {
                let (aik, bkj) = (a[(i * nb + k) as usize], b[(k * nb + j) as usize]);
                p.target(&format!("mm_{i}_{j}_{k}"), "matmul_block")
                    .num(bs as f64)
                    .arg(aik)
                    .arg(bkj)
                    .arg(cij)
                    .map(MapType::To, aik)
                    .map(MapType::To, bkj)
                    .map(MapType::ToFrom, cij)
                    .nowait()
                    .depend(DependType::In, aik)
                    .depend(DependType::In, bkj)
                    .depend(DependType::InOut, cij);
            }
        }
    }
    p.taskwait();
    p.build()
}

/// A fan-out over one shared read-only input: `width` independent `nowait` regions
/// `r{r}`, each `map(to: table) map(from: out{r})` running
/// `triad(r + 1, table, table, out{r})` (`out{r}[i] = (r + 2) · table[i]` over the first
/// `out_bytes / 4` elements), then `taskwait`. `table`: `table_bytes / 4` f32, `iota`;
/// `out{r}`: `out_bytes / 4` f32, zeros (at least one element each). Every region maps
/// the table afresh (no enclosing `target data`), as independent OpenMP tasks do, so the
/// table is copied `width` times; results are exact in f32 while
/// `(width + 1) · out_bytes / 4 < 2²⁴`.
pub fn fanout_shared(width: usize, table_bytes: u64, out_bytes: u64) -> Program {
    let mut p = ProgramBuilder::new(&format!("fanout_shared_w{width}"));
    let table = p.buffer("table", ElemType::F32, (table_bytes / 4).max(1), Init::Iota);
    let outs: Vec<_> = (0..width)
        .map(|r| {
            let len = (out_bytes / 4).max(1);
            p.buffer(&format!("out{r}"), ElemType::F32, len, Init::Zeros)
        })
        .collect();
    for (r, &out) in outs.iter().enumerate() {
        p.target(&format!("r{r}"), "triad")
            .num(r as f64 + 1.0)
            .arg(table)
            .arg(table)
            .arg(out)
            .map(MapType::To, table)
            .map(MapType::From, out)
            .nowait();
    }
    p.taskwait();
    p.build()
}

/// A 2-D wavefront over `n × n` blocks `W_i_j` of `block_bytes / 8` f64 (zeros; at least
/// one element): region `w_i_j` computes its block from its upper and left neighbours,
/// issued row by row as `nowait` tasks, then `taskwait`:
///
/// ```text
/// #pragma omp target nowait depend(in: W(i-1,j), W(i,j-1)) depend(inout: W(i,j))
///         map(to: W(i-1,j), W(i,j-1)) map(from: W(i,j))
///   add(W(i-1,j), W(i,j-1), W(i,j))     // copy from the one neighbour on an edge,
///                                         // fill(W(0,0), 1) at the corner
/// ```
///
/// So `W(i,j)` holds the binomial `C(i + j, i)` in every element: exact in f64 for
/// `n ≤ 29` (`C(56, 28) < 2⁵³`). `n²` regions; the critical path has `2n − 1` of them.
pub fn wavefront(n: usize, block_bytes: u64) -> Program {
    let mut p = ProgramBuilder::new(&format!("wavefront_{n}x{n}"));
    let len = (block_bytes / 8).max(1);
    let w: Vec<Vec<_>> = (0..n)
        .map(|i| {
            (0..n)
                .map(|j| p.buffer(&format!("W_{i}_{j}"), ElemType::F64, len, Init::Zeros))
                .collect()
        })
        .collect();
    for i in 0..n {
        for j in 0..n {
            let own = w[i][j];
            let ins: Vec<_> = [(i > 0).then(|| w[i - 1][j]), (j > 0).then(|| w[i][j - 1])]
                .into_iter()
                .flatten()
                .collect();
            let kernel = match ins.len() {
                0 => "fill",
                1 => "copy",
                _ => "add",
            };
            let mut r = p.target(&format!("w_{i}_{j}"), kernel);
            for &x in &ins {
                r = r.arg(x);
            }
            r = r.arg(own);
            if ins.is_empty() {
                r = r.num(1.0);
            }
            for &x in &ins {
                r = r.map(MapType::To, x).depend(DependType::In, x);
            }
            r.map(MapType::From, own)
                .nowait()
                .depend(DependType::InOut, own);
        }
    }
    p.taskwait();
    p.build()
}
