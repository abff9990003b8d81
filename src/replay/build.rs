//! A device segment's graph: nodes and edges from a run of schedule steps.
//!
//! Walking the steps with, per stream, the *frontier* of its last op (the nodes that op
//! stands for: itself when it is a node, else — a contracted alloc or free — the
//! frontier of what was before it) and the frontiers that event waits hand to the
//! stream's next op:
//! - an op on stream `s` depends on `s`'s frontier (stream order) and on the frontiers
//!   of the events `s` waited on since its previous op;
//! - a record captures `s`'s frontier; a wait adds the captured frontier to the waiting
//!   stream's pending set.
//!
//! A node gets an edge from every node in those frontiers; a contracted op passes them
//! on. Records and waits across segments need no edge: segments run one after another.

use super::is_node;
use crate::lower::{OpGraph, OpId};
use crate::schedule::{Schedule, Step, StreamId};
use std::ops::Range;

/// The schedule op behind a graph node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeSource {
    pub op: OpId,
    pub stream: StreamId,
}

/// One device segment: schedule steps `steps`, a node per copy, kernel and zero-filled
/// alloc among them (in step order), and the edges `(from, to)` between nodes (sorted,
/// no duplicates).
#[derive(Clone, Debug, PartialEq)]
pub struct Segment {
    pub steps: Range<usize>,
    /// The taskgraph execution whose ops these are (`None`: ops of no taskgraph).
    pub execution: Option<super::Execution>,
    pub nodes: Vec<NodeSource>,
    pub edges: Vec<(u32, u32)>,
}

fn merge(into: &mut Vec<u32>, from: &[u32]) {
    into.extend_from_slice(from);
    into.sort_unstable();
    into.dedup();
}

/// The segment of steps `steps` of `sched` (device steps only).
/// Complexity: `O(n · S log S)` for `n` steps and `S` streams.
pub(crate) fn segment(graph: &OpGraph, sched: &Schedule, steps: Range<usize>) -> Segment {
    let ns = sched.streams.len();
    let mut last: Vec<Vec<u32>> = vec![Vec::new(); ns];
    let mut pending: Vec<Vec<u32>> = vec![Vec::new(); ns];
    let mut recorded: Vec<Option<Vec<u32>>> = vec![None; sched.events as usize];
    let mut nodes = Vec::new();
    let mut edges = Vec::new();
    for st in &sched.steps[steps.clone()] {
        match *st {
            Step::Op(op) => {
                let Some(s) = sched.op_stream[op.index()] else {
                    continue;
                };
                let si = s.index();
                let mut preds = std::mem::take(&mut pending[si]);
                merge(&mut preds, &last[si]);
                if is_node(&graph.op(op).kind, graph) {
                    let n = nodes.len() as u32;
                    nodes.push(NodeSource { op, stream: s });
                    edges.extend(preds.iter().map(|&p| (p, n)));
                    last[si] = vec![n];
                } else {
                    last[si] = preds;
                }
            }
            Step::Record { event, stream } => {
                recorded[event.index()] = Some(last[stream.index()].clone());
            }
            Step::Wait { event, stream } => {
                if let Some(f) = &recorded[event.index()] {
                    let f = f.clone();
                    merge(&mut pending[stream.index()], &f);
                }
            }
            _ => {}
        }
    }
    edges.sort_unstable();
    edges.dedup();
    Segment {
        steps,
        execution: None,
        nodes,
        edges,
    }
}
