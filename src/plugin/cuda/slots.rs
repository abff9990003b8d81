//! Workspace slots for the library calls of a graph (`capture.rs`), without the driver (so
//! it is tested without a GPU).
//!
//! A captured cuBLAS or cuSOLVER call keeps the addresses of its workspace and `info`
//! word. Two calls may share them only if a path of the graph's edges orders one before
//! the other: unordered nodes of a graph may run at once. [`assign`] gives each library
//! node a slot so that the calls of one slot form a chain; slots are few (about the
//! number of streams the schedule spread the calls over), so a graph of thousands of
//! tile calls needs a handful of workspaces, not one per call.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// The slot of each node of a graph of `n` nodes with `edges` (in range, acyclic: the
/// graph's checked edges) where `lib[i]` says node `i` is a library call (`None` for the
/// others), and the number of slots. Every two nodes of one slot are joined by a path.
///
/// Greedy in topological order (smallest index first among the ready nodes): a node takes
/// the first slot whose latest call is among its ancestors, else a new slot. A vector
/// clock per node (per slot, how many of the slot's calls are ancestors or the node
/// itself) answers that in O(slots) per node.
///
/// Complexity: O((n + e) · slots + n log n).
pub(super) fn assign(n: usize, edges: &[(u32, u32)], lib: &[bool]) -> (Vec<Option<u32>>, u32) {
    let mut succ: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut preds: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut indeg = vec![0u32; n];
    for &(a, b) in edges {
        succ[a as usize].push(b);
        preds[b as usize].push(a);
        indeg[b as usize] += 1;
    }
    let mut ready: BinaryHeap<Reverse<u32>> = (0..n as u32)
        .filter(|&i| indeg[i as usize] == 0)
        .map(Reverse)
        .collect();
    let mut clock: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut count: Vec<u32> = Vec::new();
    let mut slot = vec![None; n];
    while let Some(Reverse(v)) = ready.pop() {
        let v = v as usize;
        let mut c = vec![0u32; count.len()];
        for &p in &preds[v] {
            for (x, &y) in c.iter_mut().zip(&clock[p as usize]) {
                *x = (*x).max(y);
            }
        }
        if lib.get(v).copied().unwrap_or(false) {
            let s = match (0..count.len()).find(|&s| c[s] == count[s]) {
                Some(s) => s,
                None => {
                    count.push(0);
                    c.push(0);
                    count.len() - 1
                }
            };
            count[s] += 1;
            c[s] = count[s];
            slot[v] = Some(s as u32);
        }
        clock[v] = c;
        for &w in &succ[v] {
            indeg[w as usize] -= 1;
            if indeg[w as usize] == 0 {
                ready.push(Reverse(w));
            }
        }
    }
    (slot, count.len() as u32)
}

#[cfg(test)]
mod tests {
    use super::assign;

    #[test]
    fn a_chain_shares_one_slot_through_other_nodes() {
        // lib → copy → lib → lib
        let (s, n) = assign(4, &[(0, 1), (1, 2), (2, 3)], &[true, false, true, true]);
        assert_eq!(s, vec![Some(0), None, Some(0), Some(0)]);
        assert_eq!(n, 1);
    }

    #[test]
    fn unordered_calls_get_their_own_slots_and_a_join_reuses_one() {
        // 0 and 1 unordered, 2 after both, 3 after 1 only.
        let edges = [(0, 2), (1, 2), (1, 3)];
        let (s, n) = assign(4, &edges, &[true; 4]);
        assert_eq!(s, vec![Some(0), Some(1), Some(0), Some(1)]);
        assert_eq!(n, 2);
        // Every two nodes of a slot are ordered (here: directly by an edge).
        assert!(edges.contains(&(0, 2)) && edges.contains(&(1, 3)));
    }

    #[test]
    fn a_slot_is_taken_only_if_its_latest_call_is_an_ancestor() {
        // 0 → 1; 2 independent of both; 3 after 0 only: slot 0's latest call is 1, not an
        // ancestor of 3, so 3 may not take it; slot 1's latest (2) is not either.
        let (s, n) = assign(4, &[(0, 1), (0, 3)], &[true; 4]);
        assert_eq!(s, vec![Some(0), Some(0), Some(1), Some(2)]);
        assert_eq!(n, 3);
        let (s, n) = assign(3, &[], &[false, false, false]);
        assert_eq!((s, n), (vec![None, None, None], 0));
    }
}
