//! Sync insertion (in progress).
use super::{display::OpText, Schedule, Step, StreamAssignment, SyncPolicy};
use crate::lower::{OpGraph, OpId};
/// Inserts synchronization.
pub fn insert_sync(graph: &OpGraph, a: &StreamAssignment, policy: SyncPolicy) -> Schedule {
    Schedule {
        name: graph.name.clone(),
        policy,
        streams: a.streams.clone(),
        op_stream: a.op_stream.clone(),
        steps: graph.op_ids().map(Step::Op).collect(),
        events: 0,
        text: OpText::new(graph, a.pool),
    }
}
#[allow(dead_code)]
fn _unused(_: OpId) {}
