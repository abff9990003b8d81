//! Graph algorithms on petgraph graphs that petgraph 0.6 does not have in the form the
//! crate needs.
//!
//! petgraph's [`toposort`](petgraph::algo::toposort) is a depth-first search: its order
//! follows edge insertion, and on a cycle it names one node. The graph-file loader
//! (`after` and `depend` between constructs) and the WfCommons importer (task
//! dependencies) need an order that depends on the graph alone and keeps the order the
//! user wrote wherever the dependencies allow, and a cycle error that names every node of
//! one cycle. [`stable_toposort`] gives both, on any directed petgraph graph.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use petgraph::visit::{IntoNeighborsDirected, IntoNodeIdentifiers, NodeIndexable};
use petgraph::Direction::{Incoming, Outgoing};

/// One cycle of a directed graph, found by [`stable_toposort`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cycle<N> {
    /// The nodes of the cycle in edge direction, none repeated: an edge leads from each
    /// node to the next and from the last back to the first (a self-loop is one node).
    /// The first node is where the search closed the cycle; callers that print a cycle
    /// choose their own starting point.
    pub nodes: Vec<N>,
}

/// Topological order of a directed graph, ties broken by node index: of the nodes whose
/// predecessors are all placed, the one with the lowest [`NodeIndexable::to_index`]
/// comes next (Kahn's algorithm with a min-heap). The result is the lexicographically
/// smallest topological order, so it depends only on the nodes and edges, not on the
/// order edges were added; a graph whose nodes are already in a topological order comes
/// back unchanged.
///
/// Arguments: `g`, a directed graph (for example `&DiGraph<N, E>`); parallel edges are
/// allowed.
///
/// Returns: every node of `g` once, each before its successors.
///
/// Errors: [`Cycle`] when `g` has a cycle (a self-loop included). The cycle is found
/// deterministically: among the nodes left unplaced (each has an unplaced predecessor),
/// walk from the lowest-index one to its lowest-index unplaced predecessor, and on, until
/// a node repeats; the loop closed there is the cycle, listed in edge direction from the
/// last node the walk reached.
///
/// Complexity: `O(|V| log |V| + |E|)` time, `O(|V|)` extra space (`|V|` counted as
/// [`NodeIndexable::node_bound`]).
///
/// ```
/// use offload_sched::graph::stable_toposort;
/// use petgraph::graph::DiGraph;
///
/// let mut g = DiGraph::<&str, ()>::new();
/// let (a, b, c) = (g.add_node("a"), g.add_node("b"), g.add_node("c"));
/// g.add_edge(c, a, ());
/// // `b` and `c` are free; `b` comes first, as it was added first.
/// assert_eq!(stable_toposort(&g).unwrap(), [b, c, a]);
///
/// g.add_edge(a, c, ());
/// let cycle = stable_toposort(&g).unwrap_err();
/// assert_eq!(cycle.nodes, [c, a]); // c → a → c
/// ```
pub fn stable_toposort<G>(g: G) -> Result<Vec<G::NodeId>, Cycle<G::NodeId>>
where
    G: IntoNeighborsDirected + IntoNodeIdentifiers + NodeIndexable,
{
    // Unplaced predecessors per node; a node is placed when its count reaches 0.
    let mut waiting = vec![0usize; g.node_bound()];
    let mut ready = BinaryHeap::new();
    let mut nodes = 0;
    for n in g.node_identifiers() {
        nodes += 1;
        let i = g.to_index(n);
        waiting[i] = g.neighbors_directed(n, Incoming).count();
        if waiting[i] == 0 {
            ready.push(Reverse(i));
        }
    }
    let mut order = Vec::with_capacity(nodes);
    while let Some(Reverse(i)) = ready.pop() {
        let n = g.from_index(i);
        order.push(n);
        for s in g.neighbors_directed(n, Outgoing) {
            let j = g.to_index(s);
            waiting[j] -= 1;
            if waiting[j] == 0 {
                ready.push(Reverse(j));
            }
        }
    }
    if order.len() == nodes {
        return Ok(order);
    }
    Err(cycle_among_unplaced(g, &waiting))
}

/// The cycle [`stable_toposort`] reports, among the nodes with `waiting > 0`.
///
/// Complexity: `O(|V| + |E|)`.
fn cycle_among_unplaced<G>(g: G, waiting: &[usize]) -> Cycle<G::NodeId>
where
    G: IntoNeighborsDirected + NodeIndexable,
{
    let unplaced = |i: usize| waiting[i] > 0;
    let start = (0..waiting.len()).find(|&i| unplaced(i)).unwrap_or(0);
    // Position of each node in the walk; usize::MAX: not visited.
    let mut seen_at = vec![usize::MAX; waiting.len()];
    let mut walk = Vec::new();
    let mut cur = start;
    let closed_at = loop {
        seen_at[cur] = walk.len();
        walk.push(cur);
        let pred = g
            .neighbors_directed(g.from_index(cur), Incoming)
            .map(|p| g.to_index(p))
            .filter(|&p| unplaced(p))
            .min();
        match pred {
            Some(p) if seen_at[p] != usize::MAX => break seen_at[p],
            Some(p) => cur = p,
            // Cannot happen: an unplaced node has an unplaced predecessor.
            None => break 0,
        }
    };
    // The walk follows edges backwards; the cycle reads it in reverse.
    Cycle {
        nodes: walk[closed_at..]
            .iter()
            .rev()
            .map(|&i| g.from_index(i))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use petgraph::graph::{DiGraph, NodeIndex};

    /// A graph on `n` nodes with an edge `p → i` for each `p` in `preds[i]`.
    fn from_preds(preds: &[Vec<usize>]) -> DiGraph<(), ()> {
        let mut g = DiGraph::new();
        for _ in preds {
            g.add_node(());
        }
        for (i, ps) in preds.iter().enumerate() {
            for &p in ps {
                g.add_edge(NodeIndex::new(p), NodeIndex::new(i), ());
            }
        }
        g
    }

    fn order(preds: &[Vec<usize>]) -> Result<Vec<usize>, Vec<usize>> {
        let idx = |v: Vec<NodeIndex>| v.into_iter().map(NodeIndex::index).collect();
        stable_toposort(&from_preds(preds))
            .map(idx)
            .map_err(|c| idx(c.nodes))
    }

    #[test]
    fn ties_go_to_the_lowest_index() {
        // 2 -> 0, 1 free.
        assert_eq!(order(&[vec![2], vec![], vec![]]), Ok(vec![1, 2, 0]));
        assert_eq!(order(&[vec![], vec![], vec![]]), Ok(vec![0, 1, 2]));
        // Parallel edges count once per edge.
        assert_eq!(order(&[vec![1, 1], vec![]]), Ok(vec![1, 0]));
        assert_eq!(order(&[]), Ok(vec![]));
    }

    #[test]
    fn the_order_does_not_depend_on_edge_insertion() {
        let mut g = DiGraph::<(), ()>::new();
        let n: Vec<_> = (0..4).map(|_| g.add_node(())).collect();
        let mut h = g.clone();
        for (a, b) in [(3, 1), (2, 0), (3, 0)] {
            g.add_edge(n[a], n[b], ());
        }
        for (a, b) in [(3, 0), (2, 0), (3, 1)] {
            h.add_edge(n[a], n[b], ());
        }
        assert_eq!(stable_toposort(&g), stable_toposort(&h));
        assert_eq!(stable_toposort(&g).unwrap(), [n[2], n[3], n[0], n[1]]);
    }

    #[test]
    fn cycles_are_named_from_where_the_walk_closed() {
        // 0 -> 1 -> 2 -> 0, 3 after 2.
        assert_eq!(
            order(&[vec![2], vec![0], vec![1], vec![2]]),
            Err(vec![1, 2, 0])
        );
        // A self-loop.
        assert_eq!(order(&[vec![], vec![1]]), Err(vec![1]));
        // The walk starts at node 1 (the lowest unplaced) and closes the cycle 2 <-> 3 at
        // 3, its last node.
        assert_eq!(
            order(&[vec![], vec![0, 2], vec![3], vec![2]]),
            Err(vec![3, 2])
        );
    }
}
