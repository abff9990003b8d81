//! The reference interpreter: runs an OpGraph sequentially, op by op in id order (a
//! topological order), on the host, with no streams and no plugin. Device allocations are
//! separate memory, as in the host plugin, so the result is what any correct schedule
//! must produce. Kernels are the same host kernels (`crate::runtime::ffi`); host tasks'
//! Rust closures are called on the interpreter's own copies of the buffers (so a run
//! checked against the reference calls each closure twice).
//!
//! Memory: the host buffers are the result's own vectors, initialised in place and
//! handed back at the end (moved, not copied); a device allocation lives from its `Alloc`
//! to its `Free`. So the peak is the buffer bytes plus the device allocations live at
//! once in program order ([`crate::estimate::reference_bytes`]): 1× the buffer bytes plus
//! the largest set of live device copies — 2× when every buffer is mapped whole at once,
//! 1.125× for one buffer mapped as 8 tiles one after the other. (It was 3× to 3.5× while
//! every buffer was initialised through two temporary copies and the result snapshot was
//! a decoded copy of every buffer: tests/reference_memory.rs measures it.) A copy of the
//! buffers is taken at `End` only if an op after it writes host memory (a graph built by
//! hand). Every allocation is fallible: a failure is [`ExecError::Alloc`], not an abort.

pub mod check;

pub use check::{check, check_tol, CheckError};

use crate::estimate::{self as memory, MemoryNeed};
use crate::exec::buffers::{BufferData, Buffers};
use crate::exec::{kernel_sig, ExecError, ExecOptions};
use crate::lower::{AllocId, KernelArg, KernelCall, OpGraph, OpId, OpKind};
use crate::model::{HostCtx, HostFn, Section};
use crate::runtime::ffi::{KernelLibrary, RawArg};
use crate::runtime::memory::Block;

/// The final host buffers of `graph`: a snapshot at its `End` op, or after the last op.
///
/// Errors: [`ExecError::OutOfMemory`] before anything is allocated if the interpreter
/// needs more host memory than `opts.memory` allows ([`memory::reference_bytes`]);
/// [`ExecError::Alloc`] if an allocation fails all the same; [`ExecError::Invalid`] for
/// ops the graph describes inconsistently (sections outside their allocation, memory
/// used before its alloc or after its free, unknown kernels), [`ExecError::HostKernel`]
/// for kernels that cannot be loaded or called, [`ExecError::HostFn`] for a host closure
/// that fails.
///
/// Complexity: `O(V)` ops plus the kernels' work and the copies.
pub fn reference(graph: &OpGraph, opts: &ExecOptions) -> Result<Buffers, ExecError> {
    let (peak, _) = memory::reference_bytes(graph);
    memory::check(&MemoryNeed::reference_only(peak), &opts.memory)?;
    let lib = KernelLibrary::new(opts.kernel_dir.clone());
    let mut host = init_host(graph)?;
    let host_ptr = host.iter_mut().map(BufferData::as_mut_ptr).collect();
    let mut m = Interp {
        graph,
        lib,
        host,
        host_ptr,
        dev: (0..graph.allocs.len()).map(|_| None).collect(),
        last_host_write: memory::last_host_write(graph),
        snapshot: None,
    };
    for id in graph.op_ids() {
        m.run_op(id)?;
    }
    Ok(match m.snapshot {
        Some(s) => s,
        None => Buffers::new(
            graph
                .buffers
                .iter()
                .map(|b| b.name.clone())
                .zip(m.host)
                .collect(),
        ),
    })
}

/// The host buffers of `graph`, initialised. `O(total bytes)`, no temporary copies.
fn init_host(graph: &OpGraph) -> Result<Vec<BufferData>, ExecError> {
    let mut host = Vec::with_capacity(graph.buffers.len());
    for b in &graph.buffers {
        let data = BufferData::try_init(b).ok_or_else(|| ExecError::Alloc {
            what: format!("host buffer \"{}\" of the reference interpreter", b.name),
            bytes: b.bytes(),
        })?;
        host.push(data);
    }
    Ok(host)
}

/// The interpreter's memory: host buffers, device allocations (separate blocks, `None`
/// when not allocated) and the copy taken at `End` when host memory is written after it.
struct Interp<'a> {
    graph: &'a OpGraph,
    lib: KernelLibrary,
    /// Per graph buffer: its contents, the result at the end. Not touched through
    /// references while the ops run: every access goes through `host_ptr`.
    host: Vec<BufferData>,
    /// Per graph buffer: the start of its elements, taken once from `host`.
    host_ptr: Vec<*mut u8>,
    /// Per graph allocation.
    dev: Vec<Option<Block>>,
    /// The index of the last op that writes host memory.
    last_host_write: Option<usize>,
    /// The buffers as of the last `End`, when ops after it write host memory; `None`:
    /// the result is the final contents.
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
                let block = Block::new(a.bytes).ok_or_else(|| ExecError::Alloc {
                    what: format!(
                        "the reference interpreter's device copy of {} (op {id} in region \"{}\")",
                        graph.section_name(&a.section),
                        graph.region_of(id).name
                    ),
                    bytes: a.bytes,
                })?;
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
            OpKind::PeerCopy { src, dst, section } => self.peer(id, *src, *dst, section)?,
            OpKind::Kernel(call) => self.kernel(id, call)?,
            OpKind::HostTask {
                reads,
                writes,
                call,
                body,
            } => {
                if let Some(call) = call {
                    self.kernel(id, call)?;
                }
                if let Some(f) = body {
                    self.host_fn(id, f, reads, writes)?;
                }
            }
            OpKind::Taskwait => {}
            OpKind::End => {
                self.snapshot = None;
                if self.last_host_write > Some(id.index()) {
                    self.snapshot = Some(self.copy_host()?);
                }
            }
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
        let h = self.host_ptr[section.buf.index()];
        // SAFETY: both ranges were checked against the allocation and buffer
        // sizes; device blocks and host vectors are distinct allocations.
        unsafe {
            if h2d {
                std::ptr::copy_nonoverlapping(h.add(h_off), d.ptr().add(d_off), bytes)
            } else {
                std::ptr::copy_nonoverlapping(d.ptr().add(d_off), h.add(h_off), bytes)
            }
        }
        Ok(())
    }

    /// Copies `section` from allocation `src` into allocation `dst` (a peer copy), after
    /// checking both ranges. `O(section bytes)`.
    fn peer(
        &self,
        id: OpId,
        src: AllocId,
        dst: AllocId,
        section: &Section,
    ) -> Result<(), ExecError> {
        let graph = self.graph;
        let (sa, da) = (&graph.allocs[src.index()], &graph.allocs[dst.index()]);
        if src == dst || !sa.section.contains(section) || !da.section.contains(section) {
            return Err(self.invalid(id, "peer copy section outside its allocations".into()));
        }
        let block = |a: AllocId| {
            self.dev[a.index()]
                .as_ref()
                .ok_or_else(|| self.invalid(id, "device memory is not allocated".into()))
        };
        let (s, d) = (block(src)?, block(dst)?);
        let size = graph.buffers[section.buf.index()].ty.size_bytes() as usize;
        let bytes = section.len as usize * size;
        let s_off = (section.lo - sa.section.lo) as usize * size;
        let d_off = (section.lo - da.section.lo) as usize * size;
        // SAFETY: both ranges were checked against their allocations; two different
        // allocations are distinct blocks.
        unsafe { std::ptr::copy_nonoverlapping(s.ptr().add(s_off), d.ptr().add(d_off), bytes) }
        Ok(())
    }

    /// Runs kernel call `call` of op `id`, except the built-in `spin`: it only burns
    /// time and touches no memory, so the reference skips it (a workflow's reference run
    /// costs no spin time).
    fn kernel(&self, id: OpId, call: &KernelCall) -> Result<(), ExecError> {
        let graph = self.graph;
        if call.kernel == "spin" && graph.kernels.iter().all(|k| k.name != "spin") {
            return Ok(());
        }
        self.call(id, call)
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
                let h = self.host_ptr[section.buf.index()];
                // SAFETY: section.end() <= the buffer's length in elements.
                let ptr = unsafe { h.add((section.lo * buf.ty.size_bytes()) as usize) };
                RawArg::Buffer {
                    ptr,
                    len: section.len,
                    ty: buf.ty,
                }
            }
            KernelArg::Scalar(s) => RawArg::Scalar(s),
        })
    }

    /// Calls host task `id`'s closure `f` with views of `reads` and `writes` of the
    /// interpreter's host blocks.
    fn host_fn(
        &self,
        id: OpId,
        f: &HostFn,
        reads: &[Section],
        writes: &[Section],
    ) -> Result<(), ExecError> {
        let graph = self.graph;
        let task = &graph.region_of(id).name;
        // SAFETY: each pointer is the start of its buffer's `bytes()` bytes (a vector of
        // `self.host`, initialised by `init_host`, never resized), which lives as long as
        // `self`; the interpreter is single-threaded and holds no reference into them
        // during the call.
        let mut ctx = unsafe {
            HostCtx::new(
                task,
                &graph.buffers,
                Some(f.program()),
                reads,
                writes,
                |b| self.host_ptr.get(b.index()).copied(),
            )
        };
        f.call(&mut ctx).map_err(|source| ExecError::HostFn {
            op: id,
            task: task.clone(),
            source,
        })
    }

    /// A copy of every host buffer (the snapshot at an `End` that ops writing host memory
    /// follow).
    fn copy_host(&self) -> Result<Buffers, ExecError> {
        let mut out = Vec::with_capacity(self.host.len());
        for (b, data) in self.graph.buffers.iter().zip(&self.host) {
            let copy = data.try_clone().ok_or_else(|| ExecError::Alloc {
                what: format!(
                    "the reference interpreter's snapshot of buffer \"{}\"",
                    b.name
                ),
                bytes: b.bytes(),
            })?;
            out.push((b.name.clone(), copy));
        }
        Ok(Buffers::new(out))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimate::MemoryLimit;
    use crate::lower::{lower, Op};
    use crate::model::{Access, ElemType, Init, LaunchShape, MapType, ProgramBuilder, Scalar};
    use crate::runtime::memory::fail;

    /// `x` (1000 `u8`, iota) with its first half incremented on the device.
    fn half() -> OpGraph {
        let mut b = ProgramBuilder::new("half");
        let x = b.buffer("x", ElemType::U8, 1000, Init::Iota);
        let s = Section::new(x, 0, 500);
        b.target("inc", "increment").arg(s).map(MapType::ToFrom, s);
        lower(&b.build()).unwrap()
    }

    #[test]
    fn allocation_failures_are_errors_naming_what_could_not_be_had() {
        let g = half();
        let opts = ExecOptions::default();
        let x = reference(&g, &opts).unwrap();
        assert_eq!(x.as_u8("x").unwrap()[..3], [1, 2, 3]);
        let _host = fail::allocations_of(1000);
        assert_eq!(
            reference(&g, &opts).unwrap_err().to_string(),
            "cannot allocate 1000 B of host memory for host buffer \"x\" of the reference \
             interpreter"
        );
        let _device = fail::allocations_of(500);
        assert_eq!(
            reference(&g, &opts).unwrap_err().to_string(),
            "cannot allocate 500 B of host memory for the reference interpreter's device \
             copy of x[0:500] (op #0 in region \"inc\")"
        );
    }

    #[test]
    fn the_reference_is_refused_when_it_does_not_fit() {
        let g = half();
        assert_eq!(memory::reference_bytes(&g), (1500, 1000));
        let opts = |bytes| ExecOptions {
            memory: MemoryLimit::Bytes(bytes),
            ..ExecOptions::default()
        };
        assert!(reference(&g, &opts(1500)).is_ok());
        assert_eq!(
            reference(&g, &opts(1499)).unwrap_err().to_string(),
            "not enough host memory: needed 1.5 KiB at its peak (reference interpreter \
             1.5 KiB); 1.5 KiB available (the limit given); nothing was run"
        );
    }

    /// A host task after `End` (a graph built by hand) fills `x` with 5s: the result is
    /// still the buffers as `End` saw them, now a copy.
    #[test]
    fn a_snapshot_is_copied_at_end_only_when_host_memory_is_written_after_it() {
        let mut g = half();
        let end = OpId(g.ops.len() as u32 - 1);
        assert!(matches!(g.op(end).kind, OpKind::End));
        assert_eq!(memory::reference_bytes(&g), (1500, 1000));
        let x = Section::new(crate::model::BufferId(0), 0, 1000);
        let call = KernelCall {
            kernel: "fill".into(),
            ty: ElemType::U8,
            args: vec![
                KernelArg::Host {
                    section: x,
                    access: Access::Out,
                },
                KernelArg::Scalar(Scalar::U8(5)),
            ],
            launch: LaunchShape {
                teams: 1,
                threads: 1,
            },
        };
        let region = g.op(end).region;
        g.push_op(
            Op {
                kind: OpKind::HostTask {
                    reads: vec![],
                    writes: vec![x],
                    call: Some(call),
                    body: None,
                },
                region,
                device: 0,
            },
            vec![end],
        );
        // The copy at End is counted: host + copy.
        assert_eq!(memory::reference_bytes(&g), (2000, 1000));
        let r = reference(&g, &ExecOptions::default()).unwrap();
        assert_eq!(r.as_u8("x").unwrap()[..3], [1, 2, 3]);
        assert_eq!(r.as_u8("x").unwrap()[999], (999 % 256) as u8);
    }
}
