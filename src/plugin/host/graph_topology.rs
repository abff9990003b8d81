//! The edges of an instantiated host graph, shared by its launches (`graph_run.rs`): successor
//! lists (CSR), the sources, and a counter slot only for nodes of two or more predecessors
//! (a node of one predecessor is made ready by that predecessor without a count).

/// The edges of an instantiated graph as successor lists (CSR), its sources and the
/// in-degrees of its nodes of several predecessors, shared by its launches.
#[derive(Debug)]
pub(super) struct Topology {
    /// Successors of node `i`: `succ[start[i]..start[i + 1]]`.
    start: Vec<u32>,
    succ: Vec<u32>,
    /// The nodes without predecessors, in index order.
    pub(super) sources: Vec<u32>,
    /// Per node: its slot among the nodes of two or more predecessors (the only ones a
    /// launch keeps a count for), or [`NO_SLOT`].
    pub(super) slot: Vec<u32>,
    /// Per slot: the in-degree of its node (a launch's initial counts).
    pub(super) counted: Vec<u32>,
}

/// [`Topology::slot`] of a node with fewer than two predecessors.
pub(super) const NO_SLOT: u32 = u32::MAX;

impl Topology {
    /// The topology of `n` nodes under `edges` (every index `< n`; checked by the caller).
    /// Complexity: `O(n + e)`.
    pub(super) fn new(n: usize, edges: &[(u32, u32)]) -> Topology {
        let mut start = vec![0u32; n + 1];
        let mut indegree = vec![0u32; n];
        for &(a, b) in edges {
            start[a as usize + 1] += 1;
            indegree[b as usize] += 1;
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let mut fill = start.clone();
        let mut succ = vec![0u32; edges.len()];
        for &(a, b) in edges {
            succ[fill[a as usize] as usize] = b;
            fill[a as usize] += 1;
        }
        let sources = (0..n as u32)
            .filter(|&i| indegree[i as usize] == 0)
            .collect();
        let mut counted = Vec::new();
        let slot = indegree
            .iter()
            .map(|&d| {
                if d < 2 {
                    return NO_SLOT;
                }
                counted.push(d);
                counted.len() as u32 - 1
            })
            .collect();
        Topology {
            start,
            succ,
            sources,
            slot,
            counted,
        }
    }

    pub(super) fn successors(&self, i: u32) -> &[u32] {
        &self.succ[self.start[i as usize] as usize..self.start[i as usize + 1] as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topology_lists_successors_and_in_degrees() {
        let t = Topology::new(4, &[(2, 0), (3, 1), (0, 1), (2, 3)]);
        // In-degrees 1, 2, 0, 1: only node 1 (two predecessors) has a count, starting
        // at 2; node 2 is the one source.
        assert_eq!(t.slot, vec![NO_SLOT, 0, NO_SLOT, NO_SLOT]);
        assert_eq!(t.counted, vec![2]);
        assert_eq!(t.sources, vec![2]);
        assert_eq!(t.successors(2), &[0, 3]);
        assert_eq!(t.successors(0), &[1]);
        assert!(t.successors(1).is_empty());
    }
}
