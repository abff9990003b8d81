//! Plugin graphs: a piece of a verified schedule with every address resolved, handed to
//! a plugin once ([`crate::plugin::Plugin::graph_instantiate`]) and launched many times
//! as one stream op ([`crate::plugin::Plugin::graph_launch`]): the CUDA plugin builds a
//! CUDA graph node by node (`cuGraphAdd*Node`, `cuGraphInstantiate`, `cuGraphLaunch`);
//! the host plugin keeps the node list and runs its nodes in parallel from one worker
//! item (`plugin/host/graph_run.rs`). The replay
//! engine ([`crate::replay`]) builds them from a schedule.
//!
//! Semantics (every plugin that supports graphs keeps them):
//! - a node runs after every node with an edge into it has completed, including its
//!   memory effects; nothing else orders two nodes;
//! - a launch is one op of its stream: it starts after the stream's earlier work and the
//!   stream's later work starts after every node has completed;
//! - addresses are fixed at instantiation except a copy node's host address, which
//!   [`crate::plugin::Plugin::graph_set_host`] changes between launches (rebinding the
//!   application's memory); device memory is the caller's (allocated before and freed
//!   after every launch: graphs allocate nothing).

use super::{DevicePtr, HostPtr, KernelHandle, LaunchArg};
use crate::model::LaunchShape;
use std::fmt;

/// A graph the plugin instantiated. Valid until
/// [`crate::plugin::Plugin::graph_destroy`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GraphHandle(pub u32);

impl fmt::Display for GraphHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "graph {}", self.0)
    }
}

/// One node: a piece of stream work, as the stream call of the same name would issue it.
#[derive(Clone, Debug, PartialEq)]
pub enum GraphNode {
    /// H2D of `bytes` bytes from host `src` to device `dst` ([`super::Plugin::submit`]).
    Submit {
        dst: DevicePtr,
        src: HostPtr,
        bytes: u64,
    },
    /// D2H of `bytes` bytes from device `src` to host `dst` ([`super::Plugin::retrieve`]).
    Retrieve {
        dst: HostPtr,
        src: DevicePtr,
        bytes: u64,
    },
    /// Zero fill of `bytes` bytes at `ptr` ([`super::Plugin::fill_zero`]).
    FillZero { ptr: DevicePtr, bytes: u64 },
    /// A launch of a loaded kernel ([`super::Plugin::launch`]).
    Launch {
        kernel: KernelHandle,
        args: Vec<LaunchArg>,
        shape: LaunchShape,
    },
}

impl GraphNode {
    /// The host address of a copy node; `None` for other nodes.
    pub fn host(&self) -> Option<HostPtr> {
        match self {
            GraphNode::Submit { src, .. } => Some(*src),
            GraphNode::Retrieve { dst, .. } => Some(*dst),
            _ => None,
        }
    }

    /// The node with its host address (of a copy node) replaced by `host`.
    pub fn with_host(&self, host: HostPtr) -> GraphNode {
        let mut n = self.clone();
        match &mut n {
            GraphNode::Submit { src, .. } => *src = host,
            GraphNode::Retrieve { dst, .. } => *dst = host,
            _ => {}
        }
        n
    }

    /// `h2d`, `d2h`, `zero` or `launch`.
    pub fn kind_name(&self) -> &'static str {
        match self {
            GraphNode::Submit { .. } => "h2d",
            GraphNode::Retrieve { .. } => "d2h",
            GraphNode::FillZero { .. } => "zero",
            GraphNode::Launch { .. } => "launch",
        }
    }
}

/// A graph to instantiate: nodes of one device and the edges between them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GraphDesc {
    /// The device every node runs on.
    pub device: u32,
    pub nodes: Vec<GraphNode>,
    /// `(from, to)` node indices: `to` runs after `from` has completed. No duplicates;
    /// acyclic.
    pub edges: Vec<(u32, u32)>,
}
