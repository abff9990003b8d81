//! Graphs of the host plugin ([`crate::plugin::graph`] has the semantics): an
//! instantiated graph is its node list in one topological order, checked once; a launch
//! resolves every node against the memory tables (as the stream call of the same kind
//! would) and enqueues them as **one** worker item that runs them in that order — the
//! recorded issue list replayed without the executor's per-step work. One order that
//! respects every edge runs each node after its predecessors, so the semantics hold.
//! With delay jitter on ([`super::HostPluginOptions::delay_jitter`]) each launch picks
//! another topological order at random (seeded), so a missing edge shows as a wrong
//! answer instead of hiding behind one fixed order.

use super::stream::Work;
use super::{lock, HostPlugin};
use crate::plugin::StreamHandle;
use crate::plugin::{GraphDesc, GraphHandle, GraphNode, HostPtr, PluginCall, PluginError};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// An instantiated graph: the description and a topological order of its nodes.
#[derive(Debug)]
pub(super) struct HostGraph {
    desc: GraphDesc,
    order: Vec<u32>,
    /// Launches so far (seeds the random order under jitter).
    launches: u64,
}

/// A topological order of `n` nodes under `edges` (acyclic, in range) picking a random
/// ready node at each step. Complexity: `O(n + e)`.
fn random_topological(n: usize, edges: &[(u32, u32)], rng: &mut impl rand::Rng) -> Vec<u32> {
    let mut indeg = vec![0u32; n];
    let mut succ: Vec<Vec<u32>> = vec![Vec::new(); n];
    for &(a, b) in edges {
        succ[a as usize].push(b);
        indeg[b as usize] += 1;
    }
    let mut ready: Vec<u32> = (0..n as u32).filter(|&i| indeg[i as usize] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while !ready.is_empty() {
        let i = ready.swap_remove(rng.gen_range(0..ready.len()));
        order.push(i);
        for &j in &succ[i as usize] {
            indeg[j as usize] -= 1;
            if indeg[j as usize] == 0 {
                ready.push(j);
            }
        }
    }
    order
}

/// A topological order of `n` nodes under `edges` (smallest index first among ready
/// nodes), or `None` if the edges have a cycle or name a node `>= n`.
/// Complexity: `O((n + e) log n)`.
fn topological(n: usize, edges: &[(u32, u32)]) -> Option<Vec<u32>> {
    let mut indeg = vec![0u32; n];
    let mut succ: Vec<Vec<u32>> = vec![Vec::new(); n];
    for &(a, b) in edges {
        if a as usize >= n || b as usize >= n {
            return None;
        }
        succ[a as usize].push(b);
        indeg[b as usize] += 1;
    }
    let mut ready: BinaryHeap<Reverse<u32>> = (0..n as u32)
        .filter(|&i| indeg[i as usize] == 0)
        .map(Reverse)
        .collect();
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse(i)) = ready.pop() {
        order.push(i);
        for &j in &succ[i as usize] {
            indeg[j as usize] -= 1;
            if indeg[j as usize] == 0 {
                ready.push(Reverse(j));
            }
        }
    }
    (order.len() == n).then_some(order)
}

impl HostPlugin {
    /// The worker item of `node` on `device`, every address checked now.
    fn node_work(
        &self,
        call: PluginCall,
        device: u32,
        node: &GraphNode,
    ) -> Result<Work, PluginError> {
        Ok(match node {
            GraphNode::Submit { dst, src, bytes } => {
                let (d, dst_off) = self.device_range(call, device, *dst, *bytes)?;
                let (s, src_off) = self.host_range(call, *src, *bytes)?;
                Work::Copy {
                    dst: d,
                    dst_off,
                    src: s,
                    src_off,
                    bytes: *bytes,
                }
            }
            GraphNode::Retrieve { dst, src, bytes } => {
                let (s, src_off) = self.device_range(call, device, *src, *bytes)?;
                let (d, dst_off) = self.host_range(call, *dst, *bytes)?;
                Work::Copy {
                    dst: d,
                    dst_off,
                    src: s,
                    src_off,
                    bytes: *bytes,
                }
            }
            GraphNode::FillZero { ptr, bytes } => {
                let (block, off) = self.device_range(call, device, *ptr, *bytes)?;
                Work::Zero {
                    block,
                    off,
                    bytes: *bytes,
                    byte: 0,
                }
            }
            GraphNode::Launch { kernel, args, .. } => {
                self.launch_work(call, device, *kernel, args)?
            }
        })
    }

    /// [`crate::plugin::Plugin::graph_instantiate`]: checks the device, the edges
    /// (acyclic, in range) and every node against the memory tables now.
    pub(super) fn instantiate_graph(&self, desc: &GraphDesc) -> Result<GraphHandle, PluginError> {
        let call = PluginCall::GraphInstantiate;
        self.check_device(call, desc.device)?;
        let order =
            topological(desc.nodes.len(), &desc.edges).ok_or_else(|| PluginError::Backend {
                call,
                message: "the graph's edges have a cycle or name a node it lacks".into(),
            })?;
        for n in &desc.nodes {
            self.node_work(call, desc.device, n)?;
        }
        let mut graphs = lock(&self.graphs);
        graphs.push(Some(HostGraph {
            desc: desc.clone(),
            order,
            launches: 0,
        }));
        Ok(GraphHandle(graphs.len() as u32 - 1))
    }

    fn invalid_graph(call: PluginCall, graph: GraphHandle) -> PluginError {
        PluginError::InvalidHandle {
            call,
            what: graph.to_string(),
        }
    }

    /// [`crate::plugin::Plugin::graph_edges`]: the edges as instantiated.
    pub(super) fn graph_edge_list(
        &self,
        graph: GraphHandle,
    ) -> Result<Vec<(u32, u32)>, PluginError> {
        let graphs = lock(&self.graphs);
        match graphs.get(graph.0 as usize) {
            Some(Some(g)) => Ok(g.desc.edges.clone()),
            _ => Err(Self::invalid_graph(PluginCall::GraphEdges, graph)),
        }
    }

    /// [`crate::plugin::Plugin::graph_set_host`]: checks the new range against the host
    /// table now.
    pub(super) fn set_graph_host(
        &self,
        graph: GraphHandle,
        node: u32,
        host: HostPtr,
    ) -> Result<(), PluginError> {
        let call = PluginCall::GraphUpdate;
        let mut graphs = lock(&self.graphs);
        let g = match graphs.get_mut(graph.0 as usize) {
            Some(Some(g)) => g,
            _ => return Err(Self::invalid_graph(call, graph)),
        };
        let Some(n) = g.desc.nodes.get_mut(node as usize) else {
            return Err(PluginError::InvalidHandle {
                call,
                what: format!("node {node} of {graph}"),
            });
        };
        let bytes = match n {
            GraphNode::Submit { bytes, .. } | GraphNode::Retrieve { bytes, .. } => *bytes,
            _ => {
                return Err(PluginError::InvalidHandle {
                    call,
                    what: format!("node {node} of {graph} (a {}, not a copy)", n.kind_name()),
                })
            }
        };
        self.host_range(call, host, bytes)?;
        *n = n.with_host(host);
        Ok(())
    }

    /// [`crate::plugin::Plugin::graph_launch`]: one worker item running every node in
    /// the graph's order; every address is checked now, as the stream calls would.
    pub(super) fn launch_graph(
        &self,
        graph: GraphHandle,
        stream: StreamHandle,
    ) -> Result<(), PluginError> {
        let call = PluginCall::GraphLaunch;
        self.with_stream(call, stream, |st, send, _| {
            let mut graphs = lock(&self.graphs);
            let g = match graphs.get_mut(graph.0 as usize) {
                Some(Some(g)) => g,
                _ => return Err(Self::invalid_graph(call, graph)),
            };
            if g.desc.device != st.device {
                return Err(PluginError::InvalidHandle {
                    call,
                    what: format!(
                        "{graph} (of device {}, launched on {stream} of device {})",
                        g.desc.device, st.device
                    ),
                });
            }
            g.launches += 1;
            let shuffled = self.options().delay_jitter.map(|seed| {
                use rand::SeedableRng;
                let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(
                    seed ^ u64::from(graph.0).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ g.launches,
                );
                random_topological(g.desc.nodes.len(), &g.desc.edges, &mut rng)
            });
            let order = shuffled.as_ref().unwrap_or(&g.order);
            let mut works = Vec::with_capacity(order.len());
            for &i in order {
                works.push(self.node_work(call, st.device, &g.desc.nodes[i as usize])?);
            }
            drop(graphs);
            send(Work::Graph(works))
        })
    }

    /// [`crate::plugin::Plugin::graph_destroy`].
    pub(super) fn destroy_graph(&self, graph: GraphHandle) -> Result<(), PluginError> {
        let mut graphs = lock(&self.graphs);
        match graphs.get_mut(graph.0 as usize) {
            Some(g @ Some(_)) => {
                *g = None;
                Ok(())
            }
            _ => Err(Self::invalid_graph(PluginCall::GraphDestroy, graph)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::topological;

    #[test]
    fn topological_order_respects_edges_and_finds_cycles() {
        assert_eq!(
            topological(4, &[(2, 0), (3, 1), (0, 1)]),
            Some(vec![2, 0, 3, 1])
        );
        assert_eq!(topological(2, &[(0, 1), (1, 0)]), None);
        assert_eq!(topological(2, &[(0, 2)]), None);
    }
}
