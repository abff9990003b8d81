//! Stream assignment (in progress).
use super::{ScheduleOptions, StreamId, StreamInfo};
use crate::lower::OpGraph;
/// The stream of every device op.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamAssignment {
    pub streams: Vec<StreamInfo>,
    pub op_stream: Vec<Option<StreamId>>,
    pub pool: u32,
}
/// Assigns streams.
pub fn assign_streams(graph: &OpGraph, opts: &ScheduleOptions) -> StreamAssignment {
    StreamAssignment { streams: vec![], op_stream: vec![None; graph.ops.len()], pool: opts.streams_per_device }
}
