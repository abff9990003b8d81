//! Graphs of the host plugin ([`crate::plugin::graph`] has the semantics): an
//! instantiated graph is its node list and its edges as successor lists, checked once
//! (in range, acyclic), and its nodes resolved against the memory tables (as the stream
//! call of the same kind would check them) into the items the launches run. A launch
//! reuses those items while neither memory table of the graph's device has lost an
//! allocation since they were resolved (`MemTable::epoch` of `memory.rs`), and resolves every
//! node again otherwise (so a node whose memory was freed fails at the launch, named, as
//! before); a copy node rebound to new host memory is resolved again at the next launch.
//! It then enqueues **one** worker item, which runs the nodes on the stream's worker and
//! the plugin's graph helpers in parallel, each node started when its predecessors have
//! completed (`graph_run.rs`: the threads, the ready queues, the memory ordering, the
//! jitter and the failures) — the recorded issue list replayed without the executor's
//! per-step work, and without the plugin's per-call checks after the first launch.
//!
//! The resolved items hold a reference to every block they use (as an enqueued op does),
//! so a block freed while a graph still names it stays allocated (never reused on
//! another stream) until the graph is launched again or destroyed.

use super::graph_run::{GraphPool, GraphRun, Launch};
use super::graph_topology::Topology;
use super::stream::Work;
use super::{lock, HostPlugin};
use crate::plugin::StreamHandle;
use crate::plugin::{GraphDesc, GraphHandle, GraphNode, HostPtr, PluginCall, PluginError};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

/// A graph's node items as resolved, with the memory epochs they were resolved at
/// (device table, host table).
type Resolved = ((u64, u64), Arc<Vec<Work>>);

/// An instantiated graph: the description, its edges as successor lists, and its nodes'
/// items as last resolved.
#[derive(Debug)]
pub(super) struct HostGraph {
    desc: GraphDesc,
    topo: Arc<Topology>,
    /// Launches so far (seeds the random choices under jitter).
    launches: u64,
    /// The nodes' items and the memory epochs they were resolved at (device table, host
    /// table); `None` after a rebinding.
    resolved: Option<Resolved>,
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

    /// The memory epochs of `device`'s table and the host table (`device` checked by the
    /// caller).
    fn memory_epochs(&self, device: u32) -> (u64, u64) {
        let d = self
            .device_mem
            .get(device as usize)
            .map_or(0, |t| lock(t).epoch());
        (d, lock(&self.host_mem).epoch())
    }

    /// Every node of `desc` resolved and checked now, with the epochs read before.
    /// Complexity: `O(n log a)` for `n` nodes and `a` live allocations.
    fn resolve_nodes(&self, call: PluginCall, desc: &GraphDesc) -> Result<Resolved, PluginError> {
        // Read first: a free racing with the resolution changes the epoch after this, so
        // the next launch resolves again.
        let epochs = self.memory_epochs(desc.device);
        let mut works = Vec::with_capacity(desc.nodes.len());
        for n in &desc.nodes {
            works.push(self.node_work(call, desc.device, n)?);
        }
        Ok((epochs, Arc::new(works)))
    }

    /// [`crate::plugin::Plugin::graph_instantiate`]: checks the device, the edges
    /// (acyclic, in range) and every node against the memory tables now.
    pub(super) fn instantiate_graph(&self, desc: &GraphDesc) -> Result<GraphHandle, PluginError> {
        let call = PluginCall::GraphInstantiate;
        self.check_device(call, desc.device)?;
        topological(desc.nodes.len(), &desc.edges).ok_or_else(|| PluginError::Backend {
            call,
            message: "the graph's edges have a cycle or name a node it lacks".into(),
        })?;
        let works = self.resolve_nodes(call, desc)?;
        let mut graphs = lock(&self.graphs);
        graphs.push(Some(HostGraph {
            topo: Arc::new(Topology::new(desc.nodes.len(), &desc.edges)),
            desc: desc.clone(),
            launches: 0,
            resolved: Some(works),
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
        g.resolved = None;
        Ok(())
    }

    /// The graph helpers, started at the first call.
    fn graph_pool(&self, call: PluginCall) -> Result<Arc<GraphPool>, PluginError> {
        let mut pool = lock(&self.graph_pool);
        if let Some(p) = pool.as_ref() {
            return Ok(p.clone());
        }
        let p =
            Arc::new(GraphPool::start().map_err(|message| PluginError::Backend { call, message })?);
        *pool = Some(p.clone());
        Ok(p)
    }

    /// [`crate::plugin::Plugin::graph_launch`]: one worker item that runs the nodes in
    /// parallel (`graph_run.rs`); the nodes' items of the last launch when no allocation
    /// left the memory tables since (every address they use is still live), else every
    /// node resolved and checked now, as the stream calls would.
    pub(super) fn launch_graph(
        &self,
        graph: GraphHandle,
        stream: StreamHandle,
    ) -> Result<(), PluginError> {
        let call = PluginCall::GraphLaunch;
        let pool = self.graph_pool(call)?;
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
            let jitter = self.options().delay_jitter.map(|seed| {
                seed ^ u64::from(graph.0).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ g.launches
            });
            let works = match &g.resolved {
                Some((at, works)) if *at == self.memory_epochs(st.device) => works.clone(),
                _ => {
                    // Dropped first: the old items' blocks are not held meanwhile.
                    g.resolved = None;
                    let r = self.resolve_nodes(call, &g.desc)?;
                    let works = r.1.clone();
                    g.resolved = Some(r);
                    works
                }
            };
            let launch = Launch::new(
                g.topo.clone(),
                works,
                GraphPool::participants(),
                self.spin,
                jitter,
            );
            drop(graphs);
            send(Work::Graph(GraphRun {
                launch: Arc::new(launch),
                pool,
            }))
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
    use crate::plugin::host::{HostPlugin, HostPluginOptions};
    use crate::plugin::{GraphDesc, GraphNode, Plugin, PluginError};

    #[test]
    fn launches_reuse_resolved_nodes_until_memory_is_freed_or_a_copy_rebound() {
        // H2D of 8 bytes then D2H into one of two host buffers: rebinding the D2H moves
        // the result on the next launch; after the device memory is freed the next
        // launch is refused, naming the address, as a stream call would be.
        let p = HostPlugin::new(HostPluginOptions::default());
        let s = p.create_streams(0, 1).unwrap()[0];
        let d = p.alloc(s, 8).unwrap();
        let (src, a, b) = (
            p.alloc_host(8).unwrap(),
            p.alloc_host(8).unwrap(),
            p.alloc_host(8).unwrap(),
        );
        let put = |h: crate::plugin::HostPtr, v: u64| {
            // SAFETY: 8 bytes of plugin host memory no stream uses now.
            unsafe { (h.as_ptr() as *mut u64).write(v) }
        };
        // SAFETY: as above, after a synchronize.
        let get = |h: crate::plugin::HostPtr| unsafe { (h.as_ptr() as *const u64).read() };
        let desc = GraphDesc {
            device: 0,
            nodes: vec![
                GraphNode::Submit {
                    dst: d,
                    src,
                    bytes: 8,
                },
                GraphNode::Retrieve {
                    dst: a,
                    src: d,
                    bytes: 8,
                },
            ],
            edges: vec![(0, 1)],
        };
        let g = p.graph_instantiate(&desc).unwrap();
        for v in [5u64, 6] {
            put(src, v);
            p.graph_launch(g, s).unwrap();
            p.synchronize(s).unwrap();
            assert_eq!(get(a), v);
        }
        p.graph_set_host(g, 1, b).unwrap();
        put(src, 7);
        p.graph_launch(g, s).unwrap();
        p.synchronize(s).unwrap();
        assert_eq!(
            (get(a), get(b)),
            (6, 7),
            "the rebound D2H wrote the old buffer"
        );
        // Another allocation coming and going leaves the graph's memory live: it runs.
        let other = p.alloc(s, 64).unwrap();
        p.free(s, other).unwrap();
        put(src, 8);
        p.graph_launch(g, s).unwrap();
        p.synchronize(s).unwrap();
        assert_eq!(get(b), 8);
        p.free(s, d).unwrap();
        p.synchronize(s).unwrap();
        let e = p.graph_launch(g, s).unwrap_err();
        assert!(
            matches!(e, PluginError::InvalidPointer { space: "device", ptr, .. } if ptr == d.0),
            "{e}"
        );
    }

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
