//! The region DAG the colouring ([`super::assign`]) works on: the distinct predecessor
//! regions of every region, each edge weighed by *where* in the two regions its op edges
//! sit.
//!
//! A region's ops run in order on one stream, so with each op's estimated cost
//! ([`crate::lower::cost::op_cost_us`], µs) an op `o` of region `p` ends
//! `through(o)` after `p` starts (the costs of `p`'s ops up to and including `o`), and an
//! op `q` of region `r` starts `before(q)` after `r` starts. An op edge `o → q` then
//! only asks `start(r) ≥ start(p) + through(o) − before(q)`; the region edge `p → r`
//! keeps the largest of these, its **lag**. A region that reads a kept device copy
//! (transfer elision: the H2D sits in the first region that mapped the data, see
//! `lower/elide.rs`) depends on that region's early H2D, not on its kernel: its lag is
//! a few µs, not the producer's whole cost, so it may start beside the producer on
//! another stream (one event) instead of behind it. Charging every region edge the
//! whole producer (`start(r) ≥ finish(p)`) made every reader of Montage's shared
//! header look like a successor of the first projection and piled them onto its stream.
//!
//! Each edge also says whether it is a **chain** edge, one along which `r` may keep
//! `p`'s stream (be its heir, see [`super::assign`]): some op edge leaves `p` at or after
//! its last kernel (or `p` has none: a data region's copies) and enters an op of `r`
//! other than a `Free` after `r`'s kernel. A reader of a kept copy needs only the producer's H2D, which its
//! kernel follows: queued behind that kernel, the reader would wait for work it does not
//! need, where on another stream it waits for one event. A `Free` that releases a kept
//! copy after its last reader's kernel waits for every earlier reader (write-after-read
//! on the allocation) without making the freeing region a successor of each; a region
//! of frees alone (the end of `target data`) still follows its last user.
//!
//! Complexity: `O(V + E)` time, `O(V + R + E_R)` memory for `V` ops, `E` op edges,
//! `R` regions and `E_R ≤ E` region edges.

use crate::lower::{OpGraph, OpId, OpKind};

const NONE: u32 = u32::MAX;

/// The region DAG: distinct predecessor regions of every region with each edge's lag and
/// slack (µs, see the module docs), flattened.
pub(crate) struct RegionDag {
    start: Vec<u32>,
    preds: Vec<u32>,
    lag: Vec<f64>,
    chain: Vec<bool>,
    /// Estimated cost of each region (the sum of its ops' costs), µs.
    pub cost: Vec<f64>,
}

/// One region edge `p → r` as [`RegionDag::preds`] gives it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct RegionEdge {
    /// The predecessor region `p`.
    pub pred: usize,
    /// `start(r) ≥ start(p) + lag`, µs; may be negative (`r` needs only its own late ops'
    /// inputs from `p`).
    pub lag: f64,
    /// Whether `r` may keep `p`'s stream (see the module docs).
    pub chain: bool,
}

impl RegionDag {
    /// Builds the DAG from the op graph and each op's cost (`op_cost[o]`, µs, by op
    /// index). One pass over the op edges; duplicate region edges merge (largest lag;
    /// a chain edge if any op edge is one). Ops of a region are taken in op-index order, the order the
    /// lowering emits and the stream runs them in.
    pub fn new(graph: &OpGraph, op_cost: &[f64]) -> RegionDag {
        let n = graph.regions.len();
        // through(o): end of op o after its region's start.
        let mut through = vec![0.0f64; graph.ops.len()];
        let mut cost = vec![0.0f64; n];
        // The first op a chain edge may leave from: the region's last kernel; and the
        // region's first kernel, after which a chain edge may not enter a Free.
        let mut tail_from = vec![0u32; n];
        let mut first_kernel = vec![NONE; n];
        for (ri, region) in graph.regions.iter().enumerate() {
            let mut t = 0.0;
            tail_from[ri] = region.ops.start;
            for op in region.ops.clone() {
                t += op_cost[op as usize];
                through[op as usize] = t;
                if matches!(graph.op(OpId(op)).kind, OpKind::Kernel(_)) {
                    tail_from[ri] = op;
                    first_kernel[ri] = first_kernel[ri].min(op);
                }
            }
            cost[ri] = t;
        }
        let mut start = Vec::with_capacity(n + 1);
        let mut preds = Vec::new();
        let mut lag = Vec::new();
        let mut chain = Vec::new();
        let mut seen = vec![NONE; n];
        let mut slot = vec![0u32; n];
        for (ri, region) in graph.regions.iter().enumerate() {
            start.push(preds.len() as u32);
            let mut before = 0.0;
            for op in region.ops.clone() {
                let into_free =
                    matches!(graph.op(OpId(op)).kind, OpKind::Free { .. }) && op > first_kernel[ri];
                for p in graph.preds(OpId(op)) {
                    let pr = graph.op(*p).region.index();
                    if pr == ri {
                        continue;
                    }
                    let l = through[p.index()] - before;
                    let c = !into_free && p.0 >= tail_from[pr];
                    if seen[pr] != ri as u32 {
                        seen[pr] = ri as u32;
                        slot[pr] = preds.len() as u32;
                        preds.push(pr as u32);
                        lag.push(l);
                        chain.push(c);
                    } else {
                        let k = slot[pr] as usize;
                        lag[k] = lag[k].max(l);
                        chain[k] |= c;
                    }
                }
                before += op_cost[op as usize];
            }
        }
        start.push(preds.len() as u32);
        RegionDag {
            start,
            preds,
            lag,
            chain,
            cost,
        }
    }

    /// The predecessor regions of region `r`, each once, in the order first met.
    pub fn preds(&self, r: usize) -> impl Iterator<Item = RegionEdge> + '_ {
        let range = self.start[r] as usize..self.start[r + 1] as usize;
        range.map(|k| RegionEdge {
            pred: self.preds[k] as usize,
            lag: self.lag[k],
            chain: self.chain[k],
        })
    }

    /// Number of predecessor regions of region `r`.
    pub fn pred_count(&self, r: usize) -> usize {
        (self.start[r + 1] - self.start[r]) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::cost::op_cost_us;
    use crate::lower::lower;
    use crate::model::{ElemType, Init, MapType, ProgramBuilder};

    /// A reader of a kept copy depends on the producer's H2D (and frees the copy after
    /// the producer's kernel): its lag is the producer's allocs and copy, not its
    /// 1000 µs kernel, and it is no chain edge. A consumer of the producer's output
    /// depends on the kernel: a lag past the kernel, and a chain edge.
    #[test]
    fn a_kept_copy_reader_lags_the_h2d_not_the_kernel() {
        let mut p = ProgramBuilder::new("kept");
        let t = p.buffer("t", ElemType::F32, 16, Init::Zeros);
        let y = p.buffer("y", ElemType::F32, 16, Init::Zeros);
        p.target("first", "spin")
            .num(1000.0)
            .map(MapType::To, t)
            .map(MapType::From, y)
            .nowait();
        p.target("reader", "spin")
            .num(1000.0)
            .map(MapType::To, t)
            .nowait();
        p.target("consumer", "spin")
            .num(10.0)
            .map(MapType::To, y)
            .nowait();
        let g = lower(&p.build()).unwrap();
        let cost: Vec<f64> = g.op_ids().map(|o| op_cost_us(&g, o)).collect();
        let dag = RegionDag::new(&g, &cost);
        let region = |name: &str| g.regions.iter().position(|r| r.name == name).unwrap();
        let edge = |from: &str, to: &str| {
            dag.preds(region(to))
                .find(|e| e.pred == region(from))
                .unwrap_or_else(|| panic!("no edge {from} -> {to}"))
        };
        let reader = edge("first", "reader");
        assert!(reader.lag < 20.0, "{reader:?}");
        assert!(!reader.chain, "{reader:?}");
        let consumer = edge("first", "consumer");
        assert!(consumer.lag >= 1000.0, "{consumer:?}");
        assert!(consumer.chain, "{consumer:?}");
        assert!(dag.cost[region("first")] > 1000.0);
    }
}
