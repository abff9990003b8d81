//! Transitive reduction for the region view: which edges of a small DAG a path through
//! other edges already implies.

/// Regions above which [`implied_edges`] does not run: its reachability sets cost `n²`
/// bits (10 000 regions: 12.5 MB), and a picture of that many nodes does not lay out in
/// Graphviz anyway.
pub(super) const MAX_REDUCE_NODES: usize = 10_000;

/// Arguments: `n` nodes `0..n`, and `edges` `(from, to)` sorted and without duplicates.
///
/// Returns, per edge, whether another path from `from` to `to` exists (a path of two or
/// more edges; such an edge can be left out of a picture without losing any order).
/// `None` if the graph has a cycle, a self-loop, an edge out of range, or more than
/// [`MAX_REDUCE_NODES`] nodes.
///
/// Complexity: `O(n + E · n / 64)` time and `n² / 8` bytes.
pub(super) fn implied_edges(n: usize, edges: &[(usize, usize)]) -> Option<Vec<bool>> {
    if n > MAX_REDUCE_NODES || edges.iter().any(|&(a, b)| a >= n || b >= n || a == b) {
        return None;
    }
    // Successor lists (edge indices), and a topological order (Kahn, smallest id first).
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut indeg = vec![0usize; n];
    for (i, &(a, b)) in edges.iter().enumerate() {
        succ[a].push(i);
        indeg[b] += 1;
    }
    let mut ready: std::collections::BTreeSet<usize> = (0..n).filter(|&v| indeg[v] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(v) = ready.pop_first() {
        order.push(v);
        for &i in &succ[v] {
            let b = edges[i].1;
            indeg[b] -= 1;
            if indeg[b] == 0 {
                ready.insert(b);
            }
        }
    }
    if order.len() < n {
        return None;
    }
    let mut pos = vec![0usize; n];
    for (p, &v) in order.iter().enumerate() {
        pos[v] = p;
    }
    // reach[v]: bitset of the nodes reachable from v. Nodes in reverse topological
    // order; each node's successors nearest first, so a successor reachable through an
    // earlier one is found already in the set.
    let words = n.div_ceil(64);
    let mut reach = vec![0u64; n * words];
    let mut implied = vec![false; edges.len()];
    for &v in order.iter().rev() {
        let mut out = succ[v].clone();
        out.sort_unstable_by_key(|&i| pos[edges[i].1]);
        for i in out {
            let w = edges[i].1;
            if reach[v * words + w / 64] >> (w % 64) & 1 == 1 {
                implied[i] = true;
                continue;
            }
            reach[v * words + w / 64] |= 1 << (w % 64);
            for k in 0..words {
                let bits = reach[w * words + k];
                reach[v * words + k] |= bits;
            }
        }
    }
    Some(implied)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shortcut_is_implied_and_a_chain_is_not() {
        // 0 -> 1 -> 2 -> 3, plus 0 -> 2 and 0 -> 3 (shortcuts), and 1 -> 4.
        let edges = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 4), (2, 3)];
        let got = implied_edges(5, &edges).unwrap();
        assert_eq!(got, [false, true, true, false, false, false]);
    }

    #[test]
    fn topological_order_need_not_be_id_order() {
        // 3 -> 0 -> 2, and 3 -> 2 implied.
        let edges = [(0, 2), (3, 0), (3, 2)];
        assert_eq!(implied_edges(4, &edges).unwrap(), [false, false, true]);
    }

    #[test]
    fn cycles_and_bad_edges_are_refused() {
        assert_eq!(implied_edges(2, &[(0, 1), (1, 0)]), None);
        assert_eq!(implied_edges(2, &[(0, 0)]), None);
        assert_eq!(implied_edges(2, &[(0, 2)]), None);
        assert_eq!(implied_edges(MAX_REDUCE_NODES + 1, &[]), None);
        assert_eq!(implied_edges(0, &[]), Some(vec![]));
    }

    #[test]
    fn wide_graphs_cross_word_boundaries() {
        // 0 -> k -> 199 for every k in 1..199, and 0 -> 199 implied.
        let mut edges: Vec<(usize, usize)> = (1..199).map(|k| (0, k)).collect();
        edges.extend((1..199).map(|k| (k, 199)));
        edges.push((0, 199));
        edges.sort_unstable();
        let got = implied_edges(200, &edges).unwrap();
        let i = edges.iter().position(|&e| e == (0, 199)).unwrap();
        assert!(got[i]);
        assert_eq!(got.iter().filter(|x| **x).count(), 1);
    }
}
