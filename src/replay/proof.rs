//! The replay proof: a plugin graph orders every pair of nodes its schedule segment
//! orders (graph happens-before ⊇ schedule happens-before), checked before the first
//! launch on the edges read back from the plugin.
//!
//! Schedule side, independent of how [`super::build`] made the edges: vector clocks over
//! the segment's steps (CUDA stream semantics, as the verifier's `clocks`): per stream a
//! vector counting, for every stream, the nodes of that stream ordered before its next
//! op; a record snapshots its stream's vector; a wait joins it (element-wise max).
//! Contracted ops (allocs without fill, frees) carry order without counting. For each
//! node `y` and stream `r`, the latest node of `r` ordered before `y` must reach `y` in
//! the graph. That is enough: the stream-order predecessor of each node is among those
//! pairs, so by induction every earlier node of `r` reaches it too.
//!
//! Graph side: the read-back edges must be in range and acyclic, and each required pair
//! `(x, y)` must be joined by a path: a backward search from `y` that skips nodes whose
//! topological index is below `x`'s (they cannot lie on a path from `x`).
//!
//! Complexity: `O(n · S)` for the clocks (`n` nodes, `S` streams); per required pair a
//! pruned search, `O(n + e)` at worst, in practice a few nodes (most pairs are direct
//! edges).

use super::{is_node, Segment};
use crate::lower::{OpGraph, OpId};
use crate::schedule::{Schedule, Step};
use std::fmt;
use thiserror::Error;

/// What a plugin graph fails to order (or why it is not a graph at all).
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ProofError {
    /// The read-back graph has another node count, an edge out of range, or a cycle.
    #[error("replay graph of steps {steps}: {message}")]
    Malformed { steps: String, message: String },
    /// Pairs of ops the schedule orders and the graph does not (first at most 10, with
    /// the total).
    #[error("replay graph of steps {steps} misses {total} orderings the schedule has, e.g. {}", Missing(.missing))]
    Missing {
        steps: String,
        missing: Vec<(OpId, OpId)>,
        total: usize,
    },
}

struct Missing<'a>(&'a [(OpId, OpId)]);

impl fmt::Display for Missing<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (a, b)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{a} before {b}")?;
        }
        Ok(())
    }
}

/// For each node of `seg`, the nodes that must reach it: per stream, the latest node of
/// that stream the schedule orders before it.
pub fn required(graph: &OpGraph, sched: &Schedule, seg: &Segment) -> Vec<Vec<u32>> {
    let ns = sched.streams.len();
    // Per stream, its node indices in order.
    let mut of_stream: Vec<Vec<u32>> = vec![Vec::new(); ns];
    let mut clock: Vec<Vec<u32>> = vec![vec![0; ns]; ns];
    let mut recorded: Vec<Option<Vec<u32>>> = vec![None; sched.events as usize];
    let mut need = Vec::with_capacity(seg.nodes.len());
    for st in &sched.steps[seg.steps.clone()] {
        match *st {
            Step::Op(op) => {
                let Some(s) = sched.op_stream[op.index()] else {
                    continue;
                };
                if !is_node(&graph.op(op).kind, graph) {
                    continue;
                }
                let c = &clock[s.index()];
                let preds: Vec<u32> = c
                    .iter()
                    .enumerate()
                    .filter(|&(_, &k)| k > 0)
                    .map(|(r, &k)| of_stream[r][k as usize - 1])
                    .collect();
                need.push(preds);
                of_stream[s.index()].push(need.len() as u32 - 1);
                clock[s.index()][s.index()] += 1;
            }
            Step::Record { event, stream } => {
                recorded[event.index()] = Some(clock[stream.index()].clone());
            }
            Step::Wait { event, stream } => {
                if let Some(v) = &recorded[event.index()] {
                    for (c, &k) in clock[stream.index()].iter_mut().zip(v) {
                        *c = (*c).max(k);
                    }
                }
            }
            _ => {}
        }
    }
    need
}

/// Checks that `edges` (read back from the plugin) order every pair of nodes of `seg`
/// that `sched` orders (see the module docs).
///
/// Errors: [`ProofError::Malformed`] for edges out of range or a cycle;
/// [`ProofError::Missing`] naming the ops of unordered pairs.
pub fn prove(
    graph: &OpGraph,
    sched: &Schedule,
    seg: &Segment,
    edges: &[(u32, u32)],
) -> Result<(), ProofError> {
    let n = seg.nodes.len();
    let steps = format!("{}..{}", seg.steps.start, seg.steps.end);
    let malformed = |message: String| ProofError::Malformed {
        steps: steps.clone(),
        message,
    };
    let mut preds: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut succs: Vec<Vec<u32>> = vec![Vec::new(); n];
    for &(a, b) in edges {
        if a as usize >= n || b as usize >= n {
            return Err(malformed(format!(
                "edge {a} -> {b} names a node beyond its {n}"
            )));
        }
        preds[b as usize].push(a);
        succs[a as usize].push(b);
    }
    // Topological index (Kahn); a cycle leaves nodes unplaced.
    let mut indeg: Vec<usize> = preds.iter().map(Vec::len).collect();
    let mut stack: Vec<u32> = (0..n as u32).filter(|&i| indeg[i as usize] == 0).collect();
    let mut topo = vec![u32::MAX; n];
    let mut next = 0;
    while let Some(i) = stack.pop() {
        topo[i as usize] = next;
        next += 1;
        for &j in &succs[i as usize] {
            indeg[j as usize] -= 1;
            if indeg[j as usize] == 0 {
                stack.push(j);
            }
        }
    }
    if (next as usize) < n {
        return Err(malformed("the edges have a cycle".into()));
    }
    let need = required(graph, sched, seg);
    let mut seen = vec![u32::MAX; n];
    let mut stamp = 0u32;
    let mut missing = Vec::new();
    let mut total = 0;
    let mut work = Vec::new();
    for (y, xs) in need.iter().enumerate() {
        for &x in xs {
            stamp += 1;
            if !reaches(x, y as u32, &preds, &topo, &mut seen, stamp, &mut work) {
                total += 1;
                if missing.len() < 10 {
                    missing.push((seg.nodes[x as usize].op, seg.nodes[y].op));
                }
            }
        }
    }
    match total {
        0 => Ok(()),
        _ => Err(ProofError::Missing {
            steps,
            missing,
            total,
        }),
    }
}

/// Whether a path of edges leads from `x` to `y`: a backward search from `y` over
/// nodes of topological index above `x`'s.
fn reaches(
    x: u32,
    y: u32,
    preds: &[Vec<u32>],
    topo: &[u32],
    seen: &mut [u32],
    stamp: u32,
    work: &mut Vec<u32>,
) -> bool {
    let floor = topo[x as usize];
    work.clear();
    work.push(y);
    seen[y as usize] = stamp;
    while let Some(v) = work.pop() {
        for &p in &preds[v as usize] {
            if p == x {
                return true;
            }
            if seen[p as usize] != stamp && topo[p as usize] > floor {
                seen[p as usize] = stamp;
                work.push(p);
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ElemType, Init, MapType, ProgramBuilder};
    use crate::replay::{Part, ReplayPlan};
    use crate::Plan;

    /// Two producers on their own streams (nowait) and a consumer of both: event edges
    /// into the consumer's stream.
    fn fan_in() -> Plan {
        let mut p = ProgramBuilder::new("fan_in");
        let a = p.buffer("a", ElemType::F32, 256, Init::Zeros);
        let b = p.buffer("b", ElemType::F32, 256, Init::Zeros);
        let c = p.buffer("c", ElemType::F32, 256, Init::Zeros);
        for (n, x) in [("pa", a), ("pb", b)] {
            p.target(n, "fill")
                .arg(x)
                .num(1.0)
                .map(MapType::From, x)
                .nowait();
        }
        p.target("sum", "add")
            .arg(a)
            .arg(b)
            .arg(c)
            .map(MapType::To, a)
            .map(MapType::To, b)
            .map(MapType::From, c)
            .nowait();
        p.taskwait();
        Plan::new(p.build(), &Default::default()).unwrap()
    }

    #[test]
    fn built_edges_prove_and_dropping_any_needed_edge_is_caught() {
        let plan = fan_in();
        let (g, s) = (plan.graph(), plan.schedule());
        let rp = ReplayPlan::new(g, s).unwrap();
        let mut checked = 0;
        for part in &rp.parts {
            let Part::Device(seg) = part else { continue };
            assert_eq!(prove(g, s, seg, &seg.edges), Ok(()));
            for i in 0..seg.edges.len() {
                let mut e = seg.edges.clone();
                let (a, b) = e.remove(i);
                // An edge is needed unless another path joins its ends.
                let other = reaches_in(a, b, &e, seg.nodes.len());
                match prove(g, s, seg, &e) {
                    Ok(()) => assert!(other, "dropping {a}->{b} went unnoticed"),
                    Err(ProofError::Missing { missing, .. }) => {
                        assert!(!other);
                        assert!(
                            missing.contains(&(seg.nodes[a as usize].op, seg.nodes[b as usize].op))
                        );
                        checked += 1;
                    }
                    Err(e) => panic!("{e}"),
                }
            }
        }
        assert!(checked >= 3, "only {checked} needed edges");
    }

    #[test]
    fn a_cycle_or_an_edge_out_of_range_is_malformed() {
        let plan = fan_in();
        let (g, s) = (plan.graph(), plan.schedule());
        let rp = ReplayPlan::new(g, s).unwrap();
        let seg = rp.segments().find(|s| s.nodes.len() >= 2).unwrap();
        let mut e = seg.edges.clone();
        e.push((1, 0));
        e.push((0, 1));
        assert!(matches!(
            prove(g, s, seg, &e),
            Err(ProofError::Malformed { .. })
        ));
        let n = seg.nodes.len() as u32;
        assert!(matches!(
            prove(g, s, seg, &[(0, n)]),
            Err(ProofError::Malformed { .. })
        ));
    }

    /// Whether a path joins `a` to `b` under `edges` (`n` nodes): a plain search, for tests.
    fn reaches_in(a: u32, b: u32, edges: &[(u32, u32)], n: usize) -> bool {
        let mut succ = vec![Vec::new(); n];
        for &(x, y) in edges {
            succ[x as usize].push(y);
        }
        let mut seen = vec![false; n];
        let mut work = vec![a];
        while let Some(v) = work.pop() {
            if v == b {
                return true;
            }
            for &w in &succ[v as usize] {
                if !std::mem::replace(&mut seen[w as usize], true) {
                    work.push(w);
                }
            }
        }
        false
    }
}
