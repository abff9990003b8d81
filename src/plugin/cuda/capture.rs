//! Library calls inside CUDA graphs (`graph.rs`): a `Launch` node of a library tile kernel
//! becomes a **child graph node** holding the cuBLAS or cuSOLVER call recorded by stream
//! capture (CUDA Driver API §6.22, `cuStreamBeginCapture` / `cuStreamEndCapture`;
//! `cuGraphAddChildGraphNode`), since the libraries have no node API of their own.
//!
//! - **Capture.** Per device one capture stream (non-blocking) with its own cuBLAS and
//!   cuSOLVER handles ([`CaptureKit`]), used under a lock by one instantiation at a time:
//!   the handles are bound to the capture stream and to the node's workspace slot, the
//!   stream captures in thread-local mode, the call is issued exactly as on a stream
//!   (`blas::Handles::issue`, and for `potrf` / `getrf` the `offload_solver_info` launch), the capture
//!   ends, the recorded graph is added as a child node and destroyed (the node holds a
//!   copy). A call that cannot be captured (the library refuses, or the driver ends the
//!   capture with an error) fails the instantiation with an error naming the node and
//!   the library's or driver's words: replay is then refused, never faked.
//! - **Workspaces.** Captured calls keep their workspace and `info` addresses, so calls
//!   that may run at once need different ones: `slots::assign` gives every library node
//!   a slot such that the calls of one slot are ordered by the graph's edges. Each slot
//!   is one device block (`cuMemAlloc` at instantiation, freed with the graph) holding
//!   the cuBLAS workspace (the size streams use: `blas::blas_workspace_bytes`, so a graph
//!   picks the kernels stream issue picks, for bit-identical results), the `info` word
//!   and the largest `potrf` / `getrf` workspace of its calls.
//! - **`potrf` / `getrf` failures.** A graph with one has its own sticky record
//!   (`library::Sticky`); each launch adds it to the launch stream's watched list, read at
//!   that stream's next synchronize, as for stream issue. A captured call's parameters
//!   are fixed when the graph is built, so the record names no stream call
//!   (`library::NO_SEQ`): the executor reports the failure at the host wait that found it.

use super::backend;
use super::blas::{self, Handles};
use super::driver::{self, result, sys, DeviceBlock};
use super::library::{decode_call, diagonal, is_solver, launch_info, tag, Sticky, NO_SEQ};
use super::plugin::CudaPlugin;
use super::slots;
use crate::model::library::TileArgs;
use crate::model::ElemType;
use crate::plugin::{GraphDesc, GraphNode, PluginCall, PluginError};
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

/// A device's capture stream and handles. Dropped handles first, then the stream.
pub(super) struct CaptureKit {
    handles: Handles,
    stream: driver::Stream,
}

/// The capture kits, one per device, made on first use. Dropped with the plugin after the
/// graphs (which hold no reference to them).
#[derive(Default)]
pub(super) struct Capture {
    kits: Mutex<BTreeMap<u32, CaptureKit>>,
}

/// One library node of a graph: its checked call and slot.
struct LibCall {
    slot: usize,
    /// The `potrf` / `getrf` workspace this call asks for, in bytes (0 for the others).
    lwork: usize,
    t: TileArgs,
    ty: ElemType,
    tiles: Vec<u64>,
}

/// What a graph's library nodes need, kept with the graph (`CudaGraph`): the slots'
/// blocks and the `potrf` record. Dropped after the graph (field order there).
pub(super) struct GraphLibrary {
    calls: Vec<Option<LibCall>>,
    blocks: Vec<DeviceBlock>,
    blas_bytes: usize,
    /// The `potrf` / `getrf` record, with the info kernel (`None` without either).
    pub(super) sticky: Option<(Arc<Sticky>, sys::CUfunction)>,
}

// SAFETY: the function handle is immutable and used with its context current; the rest
// is `Send + Sync`.
unsafe impl Send for GraphLibrary {}
// SAFETY: as above.
unsafe impl Sync for GraphLibrary {}

impl GraphLibrary {
    /// Whether desc node `i` is a library call.
    pub(super) fn is_call(&self, i: usize) -> bool {
        matches!(self.calls.get(i), Some(Some(_)))
    }
}

impl CudaPlugin {
    /// The library nodes of `desc` checked (handle, device, arguments as for a stream
    /// launch), given slots and their blocks; `None` when it has none.
    ///
    /// Errors: as a stream launch's checks; cuBLAS / cuSOLVER missing; an allocation or
    /// workspace query failing (named).
    pub(super) fn plan_graph_library(
        &self,
        call: PluginCall,
        desc: &GraphDesc,
    ) -> Result<Option<GraphLibrary>, PluginError> {
        let device = desc.device;
        let mut calls: Vec<Option<LibCall>> = Vec::with_capacity(desc.nodes.len());
        for node in &desc.nodes {
            let lib = match node {
                GraphNode::Launch { kernel, args, .. } => {
                    self.kernels.library_of(*kernel).map(|l| (*kernel, l, args))
                }
                _ => None,
            };
            calls.push(match lib {
                None => None,
                Some((kernel, lib, args)) => {
                    self.kernels.checked(call, kernel, device, args, false)?;
                    let live = self.dev_mem.live();
                    let (t, tiles) = decode_call(call, lib, args, |p, b| {
                        self.dev_mem.check_in(&live, call, device, p, b)
                    })?;
                    Some(LibCall {
                        slot: 0,
                        lwork: 0,
                        t,
                        ty: lib.1,
                        tiles,
                    })
                }
            });
        }
        if calls.iter().all(Option::is_none) {
            return Ok(None);
        }
        let is_lib: Vec<bool> = calls.iter().map(Option::is_some).collect();
        let (slot_of, n_slots) = slots::assign(desc.nodes.len(), &desc.edges, &is_lib);
        let dev = self.dev(call, device)?;
        let blas_bytes = blas::blas_workspace_bytes(dev.cc.0);
        let mut solver = vec![0usize; n_slots as usize];
        let mut kits = super::lock(&self.capture.kits);
        let kit = self.kit(&mut kits, device).map_err(backend(call))?;
        let mut has_solver = false;
        for (c, s) in calls.iter_mut().zip(&slot_of) {
            if let (Some(c), Some(s)) = (c.as_mut(), s) {
                c.slot = *s as usize;
                if is_solver(c.t.kernel) {
                    has_solver = true;
                    // SAFETY: the tile was checked live on this device; a size query.
                    let need = unsafe { kit.handles.solver_bytes(&c.t, c.ty, c.tiles[0]) }
                        .map_err(backend(call))?;
                    c.lwork = need;
                    solver[c.slot] = solver[c.slot].max(need);
                }
            }
        }
        let blocks = solver
            .iter()
            .map(|w| DeviceBlock::alloc(&dev.ctx, blas_bytes + 256 + w))
            .collect::<Result<Vec<_>, _>>()
            .map_err(backend(call))?;
        let sticky = match has_solver {
            false => None,
            true => {
                let f = dev.solver_info_kernel().map_err(backend(call))?;
                Some((Arc::new(Sticky::new(&dev.ctx).map_err(backend(call))?), f))
            }
        };
        Ok(Some(GraphLibrary {
            calls,
            blocks,
            blas_bytes,
            sticky,
        }))
    }

    /// The capture kit of `device` in `kits`, made on first use.
    fn kit<'a>(
        &self,
        kits: &'a mut BTreeMap<u32, CaptureKit>,
        device: u32,
    ) -> Result<&'a CaptureKit, String> {
        use std::collections::btree_map::Entry;
        Ok(match kits.entry(device) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                blas::load()?;
                let ctx = &self.devices[device as usize].ctx;
                let stream = driver::Stream::create(ctx, driver::Stream::NON_BLOCKING)?;
                let handles = Handles::create(ctx)?;
                e.insert(CaptureKit { handles, stream })
            }
        })
    }

    /// Adds desc node `i` (a library call of `lib`) to `g` as a child graph node of its
    /// captured call (module docs).
    ///
    /// Errors: [`PluginError::Backend`] naming the node and kernel, with the library's
    /// or the driver's words, when the call cannot be captured.
    pub(super) fn add_library_node(
        &self,
        call: PluginCall,
        device: u32,
        g: &driver::Graph,
        lib: &GraphLibrary,
        i: usize,
    ) -> Result<sys::CUgraphNode, PluginError> {
        let Some(Some(c)) = lib.calls.get(i) else {
            return Err(backend(call)(format!("node {i} is no library call")));
        };
        let fail = |e: String| {
            backend(call)(format!(
                "node {i} (library kernel `{}`, {}) cannot be captured into a CUDA graph: {e}",
                c.t.kernel.name(),
                c.ty
            ))
        };
        let mut kits = super::lock(&self.capture.kits);
        let kit = self.kit(&mut kits, device).map_err(&fail)?;
        let block = lib.blocks[c.slot].ptr();
        let info = block + lib.blas_bytes as u64;
        let work = (info + 256, c.lwork);
        let raw = kit.stream.raw();
        // SAFETY: the capture stream and the slot's block are live and of this context
        // (current); the block is used only by this slot's calls, which the graph orders.
        unsafe { kit.handles.bind(raw as *mut c_void, block, lib.blas_bytes) }.map_err(&fail)?;
        // SAFETY: a live stream of the current context, not capturing (the kit's lock).
        unsafe { result::stream_begin_capture(raw) }.map_err(|e| fail(e.into()))?;
        // SAFETY: the call was checked (`plan_graph_library`); work and info lie in the
        // slot's block; the stream captures, so nothing runs now.
        let issued =
            unsafe { kit.handles.issue(&c.t, c.ty, &c.tiles, work, info) }.and_then(|()| {
                match &lib.sticky {
                    Some((s, f)) if is_solver(c.t.kernel) => {
                        // SAFETY: the built-in of this context; the record lives with
                        // the graph; the tile was checked live.
                        unsafe {
                            launch_info(
                                *f,
                                (info, s.addr()),
                                (tag(c.t.kernel, c.ty), NO_SEQ),
                                diagonal(&c.t, c.tiles[0]),
                                raw,
                            )
                        }
                    }
                    _ => Ok(()),
                }
            });
        // The capture ends whatever happened, so the stream is usable again.
        // SAFETY: the stream captures since the call above, on this thread.
        let ended = unsafe { result::stream_end_capture(raw) };
        let child = match (issued, ended) {
            (Ok(()), Ok(child)) => child,
            (Err(e), ended) => {
                if let Ok(child) = ended {
                    // SAFETY: the partial capture, ours, destroyed once.
                    let _ = unsafe { result::graph_destroy(child) };
                }
                return Err(fail(e));
            }
            (Ok(()), Err(e)) => return Err(fail(e.into())),
        };
        // SAFETY: live graphs of the current context; the child holds no allocation node
        // (the workspaces are the slot's).
        let node = unsafe { result::graph_add_child_graph_node(g.raw(), child) };
        // SAFETY: the captured graph, ours; the node holds a copy.
        let destroyed = unsafe { result::graph_destroy(child) };
        let node = node.map_err(|e| fail(e.into()))?;
        destroyed.map_err(|e| fail(e.into()))?;
        Ok(node)
    }
}
