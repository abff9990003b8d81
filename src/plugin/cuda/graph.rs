//! Graphs of the CUDA plugin ([`crate::plugin::graph`] has the semantics): a
//! [`GraphDesc`] becomes a CUDA graph by explicit node construction (no stream capture),
//! instantiated once and launched as one op of a stream (CUDA Driver API §6.24 "Graph
//! Management").
//!
//! # Nodes
//!
//! | desc node | CUDA graph node |
//! |---|---|
//! | `Launch` | kernel node (`cuGraphAddKernelNode`): the function, argument slots and grid of the stream launch (`launch.rs`: same signature check, device-range checks, packing and `launch::grid`) |
//! | `FillZero` | memset node (`cuGraphAddMemsetNode`) in the device's context: 4-byte elements when address and size are multiples of 4, else bytes |
//! | `Submit` / `Retrieve` | a copy-kernel node or a memcpy node, below |
//! | any node of 0 bytes | an empty node (`cuGraphAddEmptyNode`): it moves nothing, its edges still order |
//!
//! **Copies.** A copy of at most the batch limit (`CudaPluginOptions::batch_copy_max_bytes`,
//! the rule of `batch::holds`) becomes a kernel node of the built-in copy kernel
//! `offload_copy_batch` with a one-copy batch, when `CudaPluginOptions::graph_copy_kernels`
//! is on (the default), the device has unified addressing and the built-ins compile: as
//! for stream issue (`batch.rs`), small DMA copies serialize on the copy engines at
//! 2.4-2.8 µs each on the H200, while a copy kernel moves one in about 1 µs and runs
//! concurrently with the graph's other branches. Larger copies, and every copy when the
//! option is off or the copy kernel is unavailable, are memcpy nodes
//! (`cuGraphAddMemcpyNode`, a `CUDA_MEMCPY3D` of one row: host side
//! `CU_MEMORYTYPE_HOST`, device side `CU_MEMORYTYPE_DEVICE`) on the copy engines. With
//! the `timing` option the batch limit is 0, so every copy is a memcpy node. Independent
//! small copies are not merged into one batch node (one node per copy keeps a desc node
//! per graph node, so the edges read back map one to one).
//!
//! **Host memory.** Every host address must lie in the plugin's pinned memory
//! (`alloc_host`), checked at instantiation and at [`crate::plugin::Plugin::graph_set_host`]
//! ([`PluginError::InvalidPointer`] otherwise): the copy kernel reads and writes it
//! through unified addressing, which pageable memory does not have.
//!
//! **Kept per node** for updates: the copy itself (`HeldCopy`); the memcpy or kernel
//! parameters are a pure function of it (`memcpy3d`, `batch::launch_of`), so an update
//! rebuilds them with only the host side changed and calls
//! `cuGraphExecMemcpyNodeSetParams` or `cuGraphExecKernelNodeSetParams` (new batch
//! parameter and grid; same function) on the executable graph. The template (`CUgraph`)
//! and the node handles are kept too: [`crate::plugin::Plugin::graph_edges`] reads the
//! edges back from the driver (`cuGraphGetEdges`), never from the desc.
//!
//! **Edges.** Checked first (in range, no self-loop, no duplicate, acyclic: an error
//! naming the problem, nothing made), then added in one `cuGraphAddDependencies`.
//! Instantiation is `cuGraphInstantiateWithFlags(.., 0)` in the device's context,
//! followed by `cuGraphUpload` on the legacy stream and a wait for it, so the first
//! launch does not pay the upload.
//!
//! **Launch.** `cuGraphLaunch` on the stream after the stream's held small copies are
//! issued (a held batch goes before any driver call that orders memory, `batch.rs`);
//! with `timing` the launch is timed as one op, and it counts as one stream call (`seq`).
//!
//! **Library calls.** A `Launch` of a library tile kernel (cuBLAS / cuSOLVER) becomes a
//! child graph node of the call recorded by stream capture, with a workspace slot that
//! only calls ordered by the graph's edges share (`capture.rs`); a call that cannot be
//! captured fails the instantiation, naming it.
//!
//! **What falls back (not expressed as a graph).** Nothing of a [`GraphDesc`]: it has
//! only the four node kinds above. What the desc cannot hold stays with the caller's
//! stream issue: allocation and free (graphs allocate nothing), host tasks and host
//! waits, cross-device edges (a desc is one device), and event records or waits to
//! streams outside the graph.

use super::backend;
use super::batch::{self, HeldCopy};
use super::capture::GraphLibrary;
use super::driver::{self, result, sys};
use super::launch;
use super::plugin::{CudaPlugin, Timed};
use crate::plugin::{
    GraphDesc, GraphHandle, GraphNode, HostPtr, PluginCall, PluginError, StreamHandle,
};
use std::collections::{HashMap, HashSet};
use std::ffi::c_void;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// How a copy node moves its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CopyNode {
    /// A memcpy node (copy engines).
    Memcpy,
    /// A kernel node of the copy kernel (one-copy batch).
    Kernel,
    /// An empty node (0 bytes).
    Empty,
}

/// What a node keeps for [`CudaPlugin::set_graph_host`].
#[derive(Clone, Copy, Debug)]
enum Kept {
    /// Not a copy (its desc kind name, for errors).
    Other(&'static str),
    Copy {
        copy: HeldCopy,
        how: CopyNode,
    },
}

/// An instantiated graph: the template and executable graph, desc node `i` as `nodes[i]`,
/// and what its library nodes use (`capture.rs`; dropped after the graph).
pub(super) struct CudaGraph {
    device: u32,
    nodes: Vec<sys::CUgraphNode>,
    kept: Vec<Kept>,
    graph: driver::Graph,
    library: Option<GraphLibrary>,
}

// SAFETY: node handles are plain driver handles, used only with the graph's context
// current and under the table's lock; `driver::Graph` is `Send + Sync`.
unsafe impl Send for CudaGraph {}
// SAFETY: as above.
unsafe impl Sync for CudaGraph {}

/// The instantiated graphs (`None`: destroyed), indexed by [`GraphHandle`]. Dropping it
/// destroys the graphs left (the plugin synchronized its streams first).
#[derive(Default)]
pub(super) struct Graphs {
    table: RwLock<Vec<Option<CudaGraph>>>,
}

impl Graphs {
    fn read(&self) -> RwLockReadGuard<'_, Vec<Option<CudaGraph>>> {
        self.table.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Vec<Option<CudaGraph>>> {
        self.table.write().unwrap_or_else(|p| p.into_inner())
    }
}

fn invalid(call: PluginCall, graph: GraphHandle) -> PluginError {
    PluginError::InvalidHandle {
        call,
        what: graph.to_string(),
    }
}

/// Checks the edges of a graph of `n` nodes: in range, no self-loop, no duplicate,
/// acyclic (Kahn). Errors: the first problem, in words. Complexity: O(n + e).
fn check_edges(n: usize, edges: &[(u32, u32)]) -> Result<(), String> {
    let mut seen = HashSet::with_capacity(edges.len());
    let mut indeg = vec![0u32; n];
    let mut succ: Vec<Vec<u32>> = vec![Vec::new(); n];
    for &(a, b) in edges {
        if a as usize >= n || b as usize >= n {
            return Err(format!(
                "edge {a} → {b} names a node the graph lacks ({n} nodes)"
            ));
        }
        if a == b {
            return Err(format!("edge {a} → {b} is a self-loop (a cycle)"));
        }
        if !seen.insert((a, b)) {
            return Err(format!("edge {a} → {b} is given twice"));
        }
        succ[a as usize].push(b);
        indeg[b as usize] += 1;
    }
    let mut ready: Vec<u32> = (0..n as u32).filter(|&i| indeg[i as usize] == 0).collect();
    let mut done = 0;
    while let Some(i) = ready.pop() {
        done += 1;
        for &j in &succ[i as usize] {
            indeg[j as usize] -= 1;
            if indeg[j as usize] == 0 {
                ready.push(j);
            }
        }
    }
    if done < n {
        let on = (0..n).find(|&i| indeg[i] > 0).unwrap_or(0);
        return Err(format!("the edges have a cycle (through node {on})"));
    }
    Ok(())
}

/// `c` with its host side (source of an H2D, destination of a D2H) at `host`.
fn with_host(c: HeldCopy, host: u64) -> HeldCopy {
    if c.to_device {
        HeldCopy { src: host, ..c }
    } else {
        HeldCopy { dst: host, ..c }
    }
}

/// The `CUDA_MEMCPY3D` of copy `c`: one row of `c.bytes` bytes (a 1-D copy: pitch = row,
/// height and depth 1, as `cuGraphExecMemcpyNodeSetParams` needs), the host side
/// `CU_MEMORYTYPE_HOST`, the device side `CU_MEMORYTYPE_DEVICE`.
fn memcpy3d(c: &HeldCopy) -> sys::CUDA_MEMCPY3D {
    use sys::CUmemorytype::{CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_HOST};
    let row = c.bytes as usize;
    // Every field written: cudarc 0.19's bindings derive no `Default` (an all-zero value
    // is no valid `CUmemorytype`), so the sides start as device and are set below.
    let mut p = sys::CUDA_MEMCPY3D {
        srcXInBytes: 0,
        srcY: 0,
        srcZ: 0,
        srcLOD: 0,
        srcMemoryType: CU_MEMORYTYPE_DEVICE,
        srcHost: std::ptr::null(),
        srcDevice: 0,
        srcArray: std::ptr::null_mut(),
        reserved0: std::ptr::null_mut(),
        srcPitch: row,
        srcHeight: 1,
        dstXInBytes: 0,
        dstY: 0,
        dstZ: 0,
        dstLOD: 0,
        dstMemoryType: CU_MEMORYTYPE_DEVICE,
        dstHost: std::ptr::null_mut(),
        dstDevice: 0,
        dstArray: std::ptr::null_mut(),
        reserved1: std::ptr::null_mut(),
        dstPitch: row,
        dstHeight: 1,
        WidthInBytes: row,
        Height: 1,
        Depth: 1,
    };
    if c.to_device {
        p.srcMemoryType = CU_MEMORYTYPE_HOST;
        p.srcHost = c.src as usize as *const c_void;
        p.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        p.dstDevice = c.dst;
    } else {
        p.srcMemoryType = CU_MEMORYTYPE_DEVICE;
        p.srcDevice = c.src;
        p.dstMemoryType = CU_MEMORYTYPE_HOST;
        p.dstHost = c.dst as usize as *mut c_void;
    }
    p
}

/// The memset of `bytes` zero bytes at `ptr` (`bytes > 0`): 4-byte elements when both
/// are multiples of 4, else bytes; one row.
fn memset_zero(ptr: u64, bytes: u64) -> sys::CUDA_MEMSET_NODE_PARAMS {
    let size = if (ptr | bytes).is_multiple_of(4) {
        4
    } else {
        1
    };
    sys::CUDA_MEMSET_NODE_PARAMS {
        dst: ptr,
        pitch: 0,
        value: 0,
        elementSize: size as u32,
        width: (bytes / size) as usize,
        height: 1,
    }
}

/// Kernel node parameters: `func` on `grid` × `block` with the parameter array `params`
/// (no shared memory, no `extra`; `kern` and `ctx` null: `func` in the current context).
fn kernel_node(
    func: sys::CUfunction,
    grid: (u32, u32),
    threads: u32,
    params: *mut *mut c_void,
) -> sys::CUDA_KERNEL_NODE_PARAMS {
    sys::CUDA_KERNEL_NODE_PARAMS {
        func,
        gridDimX: grid.0,
        gridDimY: grid.1,
        gridDimZ: 1,
        blockDimX: threads,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: 0,
        kernelParams: params,
        extra: std::ptr::null_mut(),
        kern: std::ptr::null_mut(),
        ctx: std::ptr::null_mut(),
    }
}

impl CudaPlugin {
    /// How a copy of `bytes` bytes on `device` is made in a graph (module docs).
    fn copy_node(&self, device: u32, bytes: u64) -> CopyNode {
        if bytes == 0 {
            CopyNode::Empty
        } else if self.opts.graph_copy_kernels && self.batchable(device, bytes) {
            CopyNode::Kernel
        } else {
            CopyNode::Memcpy
        }
    }

    /// Runs `f` with the copy-kernel node parameters of `c` (a one-copy batch; the
    /// parameter array points into `f`'s stack frame, alive for the call).
    fn with_copy_kernel<R>(
        &self,
        device: u32,
        c: &HeldCopy,
        f: impl FnOnce(&sys::CUDA_KERNEL_NODE_PARAMS) -> Result<R, driver::DriverError>,
    ) -> Result<R, String> {
        let func = self.devices[device as usize].copy_kernel()?;
        let mut l = batch::launch_of(std::slice::from_ref(c), false);
        let mut args = [&mut l.params as *mut batch::Params as *mut c_void];
        let p = kernel_node(func, l.grid, l.threads, args.as_mut_ptr());
        f(&p).map_err(String::from)
    }

    /// Adds copy `c` to `g` (ranges checked by the caller).
    fn add_copy(
        &self,
        device: u32,
        g: &driver::Graph,
        c: HeldCopy,
    ) -> Result<(sys::CUgraphNode, Kept), String> {
        let how = self.copy_node(device, c.bytes);
        let node = match how {
            // SAFETY: a live template of the current context.
            CopyNode::Empty => unsafe { result::graph_add_empty_node(g.raw()) }?,
            // SAFETY: a live template; both ranges lie in live allocations (checked),
            // which the caller keeps while the graph is launched.
            CopyNode::Memcpy => {
                unsafe { result::graph_add_memcpy_node(g.raw(), &memcpy3d(&c), g.context().raw()) }?
            }
            CopyNode::Kernel => self.with_copy_kernel(device, &c, |p| {
                // SAFETY: one parameter, a `CopyBatch` by value laid out as
                // `batch::Params`; its addresses lie in live allocations (checked); the
                // copy kernel is a function of this context.
                unsafe { result::graph_add_kernel_node(g.raw(), p) }
            })?,
        };
        Ok((node, Kept::Copy { copy: c, how }))
    }

    /// Adds desc node `node` to `g` of `device`, every address checked as the stream call
    /// of the same kind checks it.
    fn add_node(
        &self,
        call: PluginCall,
        device: u32,
        g: &driver::Graph,
        node: &GraphNode,
    ) -> Result<(sys::CUgraphNode, Kept), PluginError> {
        let copy = |dst: u64, src: u64, bytes: u64, to_device| {
            let (dev, host) = if to_device { (dst, src) } else { (src, dst) };
            self.dev_mem.check(call, device, dev, bytes)?;
            self.host.check(call, host, bytes)?;
            let c = HeldCopy {
                dst,
                src,
                bytes,
                to_device,
                seq: 0,
            };
            self.add_copy(device, g, c).map_err(backend(call))
        };
        match node {
            GraphNode::Submit { dst, src, bytes } => copy(dst.0, src.0, *bytes, true),
            GraphNode::Retrieve { dst, src, bytes } => copy(dst.0, src.0, *bytes, false),
            GraphNode::FillZero { ptr, bytes } => {
                self.dev_mem.check(call, device, ptr.0, *bytes)?;
                let n = if *bytes == 0 {
                    // SAFETY: a live template of the current context.
                    unsafe { result::graph_add_empty_node(g.raw()) }
                } else {
                    let p = memset_zero(ptr.0, *bytes);
                    // SAFETY: a live template; the range lies in a live allocation of
                    // this device (checked).
                    unsafe { result::graph_add_memset_node(g.raw(), &p, g.context().raw()) }
                };
                Ok((n.map_err(backend(call))?, Kept::Other("zero")))
            }
            GraphNode::Launch {
                kernel,
                args,
                shape,
            } => {
                let func = self.kernels.checked(call, *kernel, device, args, false)?;
                let mut slots = vec![0u64; launch::max_slots(args)];
                let used = {
                    let live = self.dev_mem.live();
                    launch::fill_slots(args, &mut slots, |addr, bytes| {
                        self.dev_mem.check_in(&live, call, device, addr, bytes)
                    })?
                };
                let mut params: Vec<*mut c_void> = slots[..used]
                    .iter_mut()
                    .map(|s| s as *mut u64 as *mut c_void)
                    .collect();
                let (teams, threads) = launch::grid(*shape);
                let p = kernel_node(func, (teams, 1), threads, params.as_mut_ptr());
                // SAFETY: `params` points at one slot per C parameter of the kernel, in
                // order (signature checked, as for a stream launch), alive for the call
                // (the driver copies them); buffer addresses lie in live allocations of
                // this device; `func` is a function of this context.
                let n = unsafe { result::graph_add_kernel_node(g.raw(), &p) };
                Ok((n.map_err(backend(call))?, Kept::Other("launch")))
            }
        }
    }

    /// [`crate::plugin::Plugin::graph_instantiate`]: edges checked, nodes made and
    /// checked, edges added, instantiated and uploaded (module docs).
    pub(super) fn instantiate_graph(&self, desc: &GraphDesc) -> Result<GraphHandle, PluginError> {
        let call = PluginCall::GraphInstantiate;
        let dev = self.dev(call, desc.device)?;
        check_edges(desc.nodes.len(), &desc.edges).map_err(backend(call))?;
        // Dropped (destroyed) on every error below.
        let mut g = driver::Graph::create(&dev.ctx).map_err(backend(call))?;
        let library = self.plan_graph_library(call, desc)?;
        let mut nodes = Vec::with_capacity(desc.nodes.len());
        let mut kept = Vec::with_capacity(desc.nodes.len());
        for (i, node) in desc.nodes.iter().enumerate() {
            let (n, k) = match &library {
                Some(lib) if lib.is_call(i) => (
                    self.add_library_node(call, desc.device, &g, lib, i)?,
                    Kept::Other("library"),
                ),
                _ => self.add_node(call, desc.device, &g, node)?,
            };
            nodes.push(n);
            kept.push(k);
        }
        if !desc.edges.is_empty() {
            let from: Vec<_> = desc.edges.iter().map(|e| nodes[e.0 as usize]).collect();
            let to: Vec<_> = desc.edges.iter().map(|e| nodes[e.1 as usize]).collect();
            // SAFETY: a live template; every handle is a node of it (indices checked).
            unsafe { result::graph_add_dependencies(g.raw(), &from, &to) }
                .map_err(backend(call))?;
        }
        g.instantiate().map_err(backend(call))?;
        let null = std::ptr::null_mut();
        // SAFETY: a live executable graph of the current context; the legacy stream
        // (null) of that context. Its wait returns when the upload has run (our streams
        // are non-blocking: it does not wait for them).
        unsafe {
            result::graph_upload(g.exec(), null).and_then(|()| result::stream_synchronize(null))
        }
        .map_err(backend(call))?;
        let mut table = self.graphs.write();
        table.push(Some(CudaGraph {
            device: desc.device,
            nodes,
            kept,
            graph: g,
            library,
        }));
        Ok(GraphHandle(table.len() as u32 - 1))
    }

    /// [`crate::plugin::Plugin::graph_edges`]: read back from the template
    /// (`cuGraphGetEdges`), mapped to desc node indices.
    pub(super) fn graph_edge_list(
        &self,
        graph: GraphHandle,
    ) -> Result<Vec<(u32, u32)>, PluginError> {
        let call = PluginCall::GraphEdges;
        let table = self.graphs.read();
        let g = table
            .get(graph.0 as usize)
            .and_then(Option::as_ref)
            .ok_or_else(|| invalid(call, graph))?;
        g.graph.context().bind().map_err(backend(call))?;
        let raw = g.graph.edges().map_err(backend(call))?;
        let index: HashMap<usize, u32> = g
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (*n as usize, i as u32))
            .collect();
        raw.into_iter()
            .map(
                |(a, b)| match (index.get(&(a as usize)), index.get(&(b as usize))) {
                    (Some(&a), Some(&b)) => Ok((a, b)),
                    _ => Err(backend(call)(
                        "cuGraphGetEdges: an edge names a node the graph was not built with",
                    )),
                },
            )
            .collect()
    }

    /// [`crate::plugin::Plugin::graph_set_host`]: the new range checked against the
    /// pinned host memory, then the node's parameters set on the executable graph.
    pub(super) fn set_graph_host(
        &self,
        graph: GraphHandle,
        node: u32,
        host: HostPtr,
    ) -> Result<(), PluginError> {
        let call = PluginCall::GraphUpdate;
        let mut table = self.graphs.write();
        let g = table
            .get_mut(graph.0 as usize)
            .and_then(Option::as_mut)
            .ok_or_else(|| invalid(call, graph))?;
        let not_copy = |what: String| PluginError::InvalidHandle { call, what };
        let (copy, how) = match g.kept.get(node as usize) {
            None => return Err(not_copy(format!("node {node} of {graph}"))),
            Some(Kept::Other(kind)) => {
                return Err(not_copy(format!(
                    "node {node} of {graph} (a {kind}, not a copy)"
                )))
            }
            Some(Kept::Copy { copy, how }) => (*copy, *how),
        };
        self.host.check(call, host.0, copy.bytes)?;
        let c = with_host(copy, host.0);
        let (exec, n, ctx) = (g.graph.exec(), g.nodes[node as usize], g.graph.context());
        ctx.bind().map_err(backend(call))?;
        match how {
            CopyNode::Empty => {}
            // SAFETY: a memcpy node of the graph `exec` was instantiated from, same memory
            // types and contexts; both ranges lie in live allocations (checked); the
            // caller synchronized every earlier launch.
            CopyNode::Memcpy => unsafe {
                result::graph_exec_memcpy_node_set_params(exec, n, &memcpy3d(&c), ctx.raw())
            }
            .map_err(backend(call))?,
            CopyNode::Kernel => self
                .with_copy_kernel(g.device, &c, |p| {
                    // SAFETY: a copy-kernel node of that graph, the same function; its
                    // one parameter laid out as `batch::Params`, addresses checked live.
                    unsafe { result::graph_exec_kernel_node_set_params(exec, n, p) }
                })
                .map_err(backend(call))?,
        }
        g.kept[node as usize] = Kept::Copy { copy: c, how };
        Ok(())
    }

    /// [`crate::plugin::Plugin::graph_launch`]: the stream's held copies issued, then
    /// `cuGraphLaunch` (timed as one op with `timing`).
    pub(super) fn launch_graph(
        &self,
        graph: GraphHandle,
        stream: StreamHandle,
    ) -> Result<(), PluginError> {
        let call = PluginCall::GraphLaunch;
        self.stream_call(call, stream, Timed::Op, |device, raw| {
            let table = self.graphs.read();
            let g = table
                .get(graph.0 as usize)
                .and_then(Option::as_ref)
                .ok_or_else(|| invalid(call, graph))?;
            if g.device != device {
                return Err(PluginError::InvalidHandle {
                    call,
                    what: format!(
                        "{graph} (of device {}, launched on {stream} of device {device})",
                        g.device
                    ),
                });
            }
            self.flush(call, stream)?;
            // SAFETY: a live executable graph of this stream's context (current); the
            // caller keeps every address it uses live until the launch has run.
            unsafe { result::graph_launch(g.graph.exec(), raw) }.map_err(backend(call))?;
            // Its `potrf` failures are read at the stream's next synchronize.
            if let Some((sticky, _)) = g.library.as_ref().and_then(|l| l.sticky.as_ref()) {
                if let Some(st) = self.streams.read().get(stream.0 as usize) {
                    let mut w = super::lock(&st.watched);
                    if !w.iter().any(|x| Arc::ptr_eq(x, sticky)) {
                        w.push(sticky.clone());
                    }
                }
            }
            Ok(())
        })
    }

    /// [`crate::plugin::Plugin::graph_destroy`]: executable graph and template destroyed
    /// (a launch in flight still completes; errors recorded in the context).
    pub(super) fn destroy_graph(&self, graph: GraphHandle) -> Result<(), PluginError> {
        let g = self
            .graphs
            .write()
            .get_mut(graph.0 as usize)
            .and_then(Option::take)
            .ok_or_else(|| invalid(PluginCall::GraphDestroy, graph))?;
        drop(g);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges_out_of_range_looping_twice_given_or_cyclic_are_refused() {
        assert_eq!(check_edges(4, &[(0, 1), (0, 2), (1, 3), (2, 3)]), Ok(()));
        assert_eq!(check_edges(0, &[]), Ok(()));
        let e = |n, edges: &[(u32, u32)]| check_edges(n, edges).unwrap_err();
        assert!(e(2, &[(0, 2)]).contains("lacks"));
        assert!(e(2, &[(1, 1)]).contains("self-loop"));
        assert!(e(2, &[(0, 1), (0, 1)]).contains("twice"));
        assert!(e(3, &[(0, 1), (1, 2), (2, 1)]).contains("cycle"));
    }

    #[test]
    fn an_update_changes_only_the_host_side_of_a_copy() {
        let h2d = HeldCopy {
            dst: 0x7000_0000,
            src: 0x1000,
            bytes: 256,
            to_device: true,
            seq: 0,
        };
        let d2h = HeldCopy {
            dst: 0x1000,
            src: 0x7000_0000,
            bytes: 256,
            to_device: false,
            seq: 0,
        };
        assert_eq!(with_host(h2d, 0x2000), HeldCopy { src: 0x2000, ..h2d });
        assert_eq!(with_host(d2h, 0x2000), HeldCopy { dst: 0x2000, ..d2h });
        let (a, b) = (memcpy3d(&h2d), memcpy3d(&with_host(h2d, 0x2000)));
        assert_eq!(a.srcHost as usize, 0x1000);
        assert_eq!(b.srcHost as usize, 0x2000);
        assert_eq!(
            sys::CUDA_MEMCPY3D {
                srcHost: a.srcHost,
                ..b
            },
            a
        );
        assert_eq!(
            (a.dstDevice, a.WidthInBytes, a.Height, a.Depth),
            (0x7000_0000, 256, 1, 1)
        );
        assert_eq!(
            (a.srcPitch, a.dstPitch, a.srcHeight, a.dstHeight),
            (256, 256, 1, 1)
        );
        let c = memcpy3d(&d2h);
        assert_eq!(c.srcMemoryType, sys::CUmemorytype::CU_MEMORYTYPE_DEVICE);
        assert_eq!(c.dstMemoryType, sys::CUmemorytype::CU_MEMORYTYPE_HOST);
        assert_eq!((c.srcDevice, c.dstHost as usize), (0x7000_0000, 0x1000));
    }

    #[test]
    fn zero_fills_use_words_when_aligned() {
        let w = memset_zero(0x1000, 4096);
        assert_eq!((w.elementSize, w.width, w.height, w.value), (4, 1024, 1, 0));
        let b = memset_zero(0x1000, 4095);
        assert_eq!((b.elementSize, b.width), (1, 4095));
        assert_eq!(memset_zero(0x1002, 8).elementSize, 1);
    }
}
