//! The reference interpreter: runs an OpGraph sequentially, op by op in id order (a
//! topological order), on the host, with no streams and no plugin. Device allocations are
//! separate memory, as in the host plugin, so the result is what any correct schedule
//! must produce. Kernels are the same host kernels ([`crate::runtime::ffi`]).

use super::buffers::{BufferData, Buffers};
use super::memory::{self, MemoryNeed};
use super::{kernel_sig, ExecError, ExecOptions};
use crate::lower::{AllocId, KernelArg, KernelCall, OpGraph, OpId, OpKind};
use crate::model::Section;
use crate::runtime::ffi::{KernelLibrary, RawArg};
use crate::runtime::memory::Block;

/// The final host buffers of `graph`: a snapshot at its `End` op, or after the last op.
///
/// Errors: [`ExecError::OutOfMemory`] before anything is allocated if the interpreter
/// needs more host memory than `opts.memory` allows ([`memory::reference_bytes`]);
/// [`ExecError::Invalid`] for ops the graph describes inconsistently (sections
/// outside their allocation, memory used before its alloc or after its free, unknown
/// kernels), [`ExecError::HostKernel`] for kernels that cannot be loaded or called.
///
/// Complexity: `O(V)` ops plus the kernels' work and the copies.
pub fn reference(graph: &OpGraph, opts: &ExecOptions) -> Result<Buffers, ExecError> {
    let (peak, _) = memory::reference_bytes(graph);
    memory::check(&MemoryNeed::reference_only(peak), &opts.memory)?;
    let lib = KernelLibrary::new(opts.kernel_dir.clone());
    let mut m = Interp {
        graph,
        lib,
        host: init_host(graph)?,
        dev: (0..graph.allocs.len()).map(|_| None).collect(),
        snapshot: None,
    };
    for id in graph.op_ids() {
        m.run_op(id)?;
    }
    Ok(m.snapshot.unwrap_or_else(|| read(graph, &m.host)))
}

/// The host buffers of `graph`, each in its own block, initialised. `O(total bytes)`.
fn init_host(graph: &OpGraph) -> Result<Vec<Block>, ExecError> {
    let mut host = Vec::with_capacity(graph.buffers.len());
    for b in &graph.buffers {
        let data = BufferData::init(b).to_ne_bytes();
        let block = Block::new(data.len() as u64).ok_or_else(|| ExecError::Schedule {
            name: graph.name.clone(),
            message: format!("cannot allocate host buffer \"{}\"", b.name),
        })?;
        // SAFETY: the block holds `data.len()` bytes and nothing else uses it.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), block.ptr(), data.len()) };
        host.push(block);
    }
    Ok(host)
}

/// The interpreter's memory: host buffers, device allocations (separate blocks, `None`
/// when not allocated) and the snapshot taken at `End`.
struct Interp<'a> {
    graph: &'a OpGraph,
    lib: KernelLibrary,
    /// Per graph buffer.
    host: Vec<Block>,
    /// Per graph allocation.
    dev: Vec<Option<Block>>,
    snapshot: Option<Buffers>,
}

impl Interp<'_> {
    /// Runs op `id`; `End` takes the snapshot. `O(1)` plus the op's copy, kernel or
    /// snapshot.
    fn run_op(&mut self, id: OpId) -> Result<(), ExecError> {
        let graph = self.graph;
        let op = graph.op(id);
        match &op.kind {
            OpKind::Alloc { alloc } => {
                let a = graph
                    .allocs
                    .get(alloc.index())
                    .ok_or_else(|| self.invalid(id, "unknown allocation".into()))?;
                let block = Block::new(a.bytes)
                    .ok_or_else(|| self.invalid(id, "out of host memory".into()))?;
                self.dev[alloc.index()] = Some(block);
            }
            OpKind::Free { alloc } => {
                if self
                    .dev
                    .get_mut(alloc.index())
                    .and_then(Option::take)
                    .is_none()
                {
                    return Err(self.invalid(id, "freeing memory that is not allocated".into()));
                }
            }
            OpKind::H2D { alloc, section } => self.copy(id, *alloc, section, true)?,
            OpKind::D2H { alloc, section } => self.copy(id, *alloc, section, false)?,
            // The built-in `spin` only burns time; it touches no memory, so the
            // reference skips it (a workflow's reference run costs no spin time).
            OpKind::Kernel(call)
            | OpKind::HostTask {
                call: Some(call), ..
            } if call.kernel == "spin" && graph.kernels.iter().all(|k| k.name != "spin") => {}
            OpKind::Kernel(call)
            | OpKind::HostTask {
                call: Some(call), ..
            } => self.call(id, call)?,
            OpKind::HostTask { call: None, .. } | OpKind::Taskwait => {}
            OpKind::End => self.snapshot = Some(read(graph, &self.host)),
        }
        Ok(())
    }

    /// Copies `section` between its host buffer and allocation `alloc` (host to device
    /// when `h2d`), after checking both ranges. `O(section bytes)`.
    fn copy(
        &self,
        id: OpId,
        alloc: AllocId,
        section: &Section,
        h2d: bool,
    ) -> Result<(), ExecError> {
        let graph = self.graph;
        let a = &graph.allocs[alloc.index()];
        let buf = &graph.buffers[section.buf.index()];
        let d = self.dev[alloc.index()]
            .as_ref()
            .ok_or_else(|| self.invalid(id, "device memory is not allocated".into()))?;
        if !a.section.contains(section) || section.end() > buf.len {
            return Err(self.invalid(id, "section outside its allocation".into()));
        }
        let size = buf.ty.size_bytes() as usize;
        let bytes = section.len as usize * size;
        let d_off = (section.lo - a.section.lo) as usize * size;
        let h_off = section.lo as usize * size;
        let h = &self.host[section.buf.index()];
        // SAFETY: both ranges were checked against the allocation and buffer
        // sizes; device and host blocks are distinct allocations.
        unsafe {
            if h2d {
                std::ptr::copy_nonoverlapping(h.ptr().add(h_off), d.ptr().add(d_off), bytes)
            } else {
                std::ptr::copy_nonoverlapping(d.ptr().add(d_off), h.ptr().add(h_off), bytes)
            }
        }
        Ok(())
    }

    /// Runs kernel call `call` of op `id` (a device kernel or a host task) as the host
    /// kernel, on the blocks its arguments name. `O(args)` plus the kernel's work.
    fn call(&self, id: OpId, call: &KernelCall) -> Result<(), ExecError> {
        let graph = self.graph;
        let sig = kernel_sig(graph, &call.kernel)
            .ok_or_else(|| self.invalid(id, format!("unknown kernel \"{}\"", call.kernel)))?;
        let hk = |source| ExecError::HostKernel {
            op: id,
            what: graph.describe(id),
            region: graph.region_of(id).name.clone(),
            source,
        };
        let k = self.lib.resolve(&sig, call.ty).map_err(hk)?;
        let mut raw = Vec::with_capacity(call.args.len());
        for a in &call.args {
            raw.push(self.raw_arg(id, a)?);
        }
        // SAFETY: every pointer was checked to cover `len` elements of a live
        // block; the interpreter is single-threaded.
        unsafe { k.call(&raw) }.map_err(hk)
    }

    /// Kernel argument `arg` of op `id` as the host kernel takes it: device and host
    /// ranges checked against their block and turned into pointers. `O(1)`.
    fn raw_arg(&self, id: OpId, arg: &KernelArg) -> Result<RawArg, ExecError> {
        let graph = self.graph;
        Ok(match *arg {
            KernelArg::Device {
                alloc, offset, len, ..
            } => {
                let sec = &graph.allocs[alloc.index()].section;
                let ty = graph.buffers[sec.buf.index()].ty;
                let d = self.dev[alloc.index()]
                    .as_ref()
                    .ok_or_else(|| self.invalid(id, "device memory is not allocated".into()))?;
                if offset.checked_add(len).is_none_or(|e| e > sec.len) {
                    return Err(self.invalid(id, "argument outside its allocation".into()));
                }
                // SAFETY: offset + len <= the allocation's length in elements.
                let ptr = unsafe { d.ptr().add((offset * ty.size_bytes()) as usize) };
                RawArg::Buffer { ptr, len, ty }
            }
            KernelArg::Empty { ty, .. } => RawArg::Buffer {
                ptr: std::ptr::null_mut(),
                len: 0,
                ty,
            },
            KernelArg::Host { section, .. } => {
                let buf = &graph.buffers[section.buf.index()];
                if section.end() > buf.len {
                    return Err(self.invalid(id, "section outside its buffer".into()));
                }
                let h = &self.host[section.buf.index()];
                // SAFETY: section.end() <= the buffer's length in elements.
                let ptr = unsafe { h.ptr().add((section.lo * buf.ty.size_bytes()) as usize) };
                RawArg::Buffer {
                    ptr,
                    len: section.len,
                    ty: buf.ty,
                }
            }
            KernelArg::Scalar(s) => RawArg::Scalar(s),
        })
    }

    /// [`ExecError::Invalid`] for op `op`.
    fn invalid(&self, op: OpId, message: String) -> ExecError {
        ExecError::Invalid {
            op,
            what: self.graph.describe(op),
            region: self.graph.region_of(op).name.clone(),
            message,
        }
    }
}

fn read(graph: &OpGraph, host: &[Block]) -> Buffers {
    Buffers::new(
        graph
            .buffers
            .iter()
            .zip(host)
            .map(|(b, h)| {
                let mut bytes = vec![0u8; b.bytes() as usize];
                // SAFETY: the block holds `b.bytes()` bytes.
                unsafe { std::ptr::copy_nonoverlapping(h.ptr(), bytes.as_mut_ptr(), bytes.len()) };
                (b.name.clone(), BufferData::from_ne_bytes(b.ty, &bytes))
            })
            .collect(),
    )
}
