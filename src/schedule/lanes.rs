//! The lanes of the schedule text and the issue order they give back.
//!
//! The text prints the issue sequence split by *lane*: one block per stream (its ops, its
//! event records and waits, and the host waits issued right after one of its ops) and one
//! block for the host (host ops and the host waits before them). Each lane keeps its
//! steps in issue order; what the blocks do not say is how the lanes interleave.
//! [`canonical_order`] answers that with one rule, and the scheduler's output always
//! follows it ([`super::sync`] issues ops in id order, each with its syncs beside it), so
//! the text of a scheduled program needs no positions. A schedule that does not follow it
//! (one edited by hand) is printed with an explicit `issue order:` line instead.
//!
//! The rule: every lane is cut into *groups*, one per op line: the op's *leading* lines
//! (issued just before it), the op, and its *trailing* lines (issued just after it).
//! In a stream block an event wait, and every line after it up to the next op, leads
//! that op; any other sync line (a record, a host wait) trails the op above it. In the
//! host block every host wait leads the host op below it. The groups of all lanes are
//! issued in the order of their ops' ids, the lowest first among the lanes' next groups;
//! lines after a lane's last op are issued at the very end, streams first (by index),
//! then the host.
//!
//! Complexity: `O(K log L)` for `K` lines and `L` lanes.

use crate::lower::OpId;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// One line of a lane, as [`canonical_order`] sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Item {
    /// The op the line issues; `None` for a sync line.
    pub(super) op: Option<OpId>,
    /// For a sync line: it leads the lane's next op (an event wait in a stream block,
    /// any host wait in the host block) rather than trailing the previous one. Once a
    /// leading line appears, the rest of the lines up to the next op lead it too.
    pub(super) leads: bool,
}

/// A group of one lane: lines `start..end`, whose op (if any) is `op`.
struct Group {
    start: u32,
    end: u32,
    op: Option<OpId>,
}

/// The groups of one lane, in order. Only the last may have no op. `O(lines)`.
fn groups(items: &[Item]) -> Vec<Group> {
    let mut out = Vec::new();
    let mut start = 0u32;
    // The op of the group being read once its op line is seen (then trailing lines
    // follow).
    let mut op: Option<OpId> = None;
    for (i, item) in items.iter().enumerate() {
        let i = i as u32;
        match (item.op, op) {
            (Some(o), None) => op = Some(o),
            (Some(o), Some(_)) => {
                out.push(Group { start, end: i, op });
                start = i;
                op = Some(o);
            }
            (None, Some(_)) if item.leads => {
                out.push(Group { start, end: i, op });
                start = i;
                op = None;
            }
            (None, _) => {}
        }
    }
    if (start as usize) < items.len() {
        out.push(Group {
            start,
            end: items.len() as u32,
            op,
        });
    }
    out
}

/// The issue order of `lanes` (streams by index, then the host) under the rule of the
/// module docs: `(lane, line index in the lane)` for every line, in issue order.
///
/// Complexity: `O(K log L)` for `K` lines and `L` lanes; `O(K)` memory.
pub(super) fn canonical_order(lanes: &[Vec<Item>]) -> Vec<(u32, u32)> {
    let total: usize = lanes.iter().map(Vec::len).sum();
    let mut out = Vec::with_capacity(total);
    let groups: Vec<Vec<Group>> = lanes.iter().map(|l| groups(l)).collect();
    let mut next = vec![0usize; lanes.len()];
    let mut heap: BinaryHeap<Reverse<(u32, u32)>> = BinaryHeap::new();
    let push = |heap: &mut BinaryHeap<_>, lane: usize, at: usize| {
        if let Some(Group { op: Some(op), .. }) = groups[lane].get(at) {
            heap.push(Reverse((op.0, lane as u32)));
        }
    };
    for lane in 0..lanes.len() {
        push(&mut heap, lane, 0);
    }
    while let Some(Reverse((_, lane))) = heap.pop() {
        let l = lane as usize;
        let g = &groups[l][next[l]];
        out.extend((g.start..g.end).map(|j| (lane, j)));
        next[l] += 1;
        push(&mut heap, l, next[l]);
    }
    // Lines after each lane's last op.
    for (l, gs) in groups.iter().enumerate() {
        for g in &gs[next[l]..] {
            out.extend((g.start..g.end).map(|j| (l as u32, j)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(n: u32) -> Item {
        Item {
            op: Some(OpId(n)),
            leads: false,
        }
    }
    const TRAIL: Item = Item {
        op: None,
        leads: false,
    };
    const LEAD: Item = Item {
        op: None,
        leads: true,
    };

    #[test]
    fn groups_merge_by_op_id_with_leading_and_trailing_lines() {
        // s0: #0, record, #2, wait (after it nothing); s1: wait, #1, record, host wait;
        // host: wait, #3.
        let lanes = vec![
            vec![op(0), TRAIL, op(2), LEAD],
            vec![LEAD, op(1), TRAIL, TRAIL],
            vec![LEAD, op(3)],
        ];
        assert_eq!(
            canonical_order(&lanes),
            [
                (0, 0),
                (0, 1),
                (1, 0),
                (1, 1),
                (1, 2),
                (1, 3),
                (0, 2),
                (2, 0),
                (2, 1),
                (0, 3)
            ]
        );
    }

    #[test]
    fn a_trailing_line_after_a_leading_one_leads_too() {
        // s0: #0, wait, record, #5; s1: #3. The record follows the wait: it is issued
        // before #5, after #3.
        let lanes = vec![vec![op(0), LEAD, TRAIL, op(5)], vec![op(3)], vec![]];
        assert_eq!(
            canonical_order(&lanes),
            [(0, 0), (1, 0), (0, 1), (0, 2), (0, 3)]
        );
    }

    #[test]
    fn ops_out_of_id_order_keep_their_lane_order() {
        let lanes = vec![vec![op(4), op(1)], vec![op(2)]];
        assert_eq!(canonical_order(&lanes), [(1, 0), (0, 0), (0, 1)]);
    }
}
