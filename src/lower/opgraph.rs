//! The OpGraph: Alloc, H2D, Kernel, D2H, Free and host ops with dependency edges.
//!
//! Ops are stored in creation order, which is program order, and every edge goes from a
//! lower id to a higher one: op id order is a topological order. Predecessor lists are
//! kept in compressed-sparse-row form (one `Vec` of all edges plus offsets), so the graph
//! costs `O(V + E)` memory.

use crate::model::{
    Access, Buffer, ElemType, HostFn, KernelSig, LaunchShape, Scalar, Section, Span,
};
use std::fmt;

/// Index of an op in [`OpGraph::ops`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OpId(pub u32);

impl OpId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for OpId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// Index of a region (one construct's ops) in [`OpGraph::regions`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RegionId(pub u32);

impl RegionId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Index of a device allocation (one mapping-table entry's storage) in
/// [`OpGraph::allocs`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AllocId(pub u32);

impl AllocId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Device storage for one mapped host section.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceAlloc {
    /// The host section this storage mirrors; element `i` of the storage is element
    /// `section.lo + i` of the host buffer.
    pub section: Section,
    pub device: u32,
    /// Size in bytes.
    pub bytes: u64,
    /// Whether the program reads some of this storage before writing it (a `from` or
    /// `alloc` item copied back, or passed to a kernel parameter that reads, with no H2D
    /// or kernel write of those elements before, in program order). OpenMP leaves such
    /// contents unspecified; this project defines fresh device storage as zero bytes, as
    /// the reference interpreter and the host plugin have it, so the executor has the
    /// plugin zero-fill it (`Plugin::fill_zero`) right after its `Alloc`. Allocations
    /// that are written first pay nothing.
    pub zero: bool,
}

/// A kernel argument after lowering.
#[derive(Clone, Debug, PartialEq)]
pub enum KernelArg {
    /// Device memory: `len` elements starting `offset` elements into `alloc`.
    Device {
        alloc: AllocId,
        offset: u64,
        len: u64,
        access: Access,
    },
    /// Host memory (for host tasks that run a kernel on the host copies).
    Host {
        section: Section,
        access: Access,
    },
    /// A zero-length section of data that is not mapped on the device: it maps nothing
    /// (rule 5) and the kernel gets a null pointer with length 0 (like the NULL that
    /// OpenMP gives a zero-length array section with no corresponding storage).
    Empty {
        ty: ElemType,
        access: Access,
    },
    Scalar(Scalar),
}

/// A kernel launch: the signature's name, its concrete element type, arguments in
/// signature order, and the launch shape.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelCall {
    pub kernel: String,
    /// The generic element type `T` (`f32` for kernels with no generic parameter).
    pub ty: ElemType,
    pub args: Vec<KernelArg>,
    pub launch: LaunchShape,
}

/// What an op does.
#[derive(Clone, Debug, PartialEq)]
pub enum OpKind {
    /// Allocate the device storage.
    Alloc { alloc: AllocId },
    /// Copy host `section` into the storage (at element `section.lo - alloc.section.lo`).
    H2D { alloc: AllocId, section: Section },
    /// Launch a kernel on the device.
    Kernel(KernelCall),
    /// Copy the storage back into host `section`.
    D2H { alloc: AllocId, section: Section },
    /// Copy host `section`'s elements from storage `src` (on another device, where the
    /// latest contents are) into storage `dst` (on the op's device), device to device
    /// (CUDA `cuMemcpyPeerAsync`). Both allocations hold `section`. Runs on a stream of
    /// `dst`'s device; the lowering emits it where a region on device d reads data whose
    /// latest copy a region on device e ≠ d wrote and nothing copied back to the host
    /// (see `lower::peer`).
    PeerCopy {
        src: AllocId,
        dst: AllocId,
        section: Section,
    },
    /// Release the device storage.
    Free { alloc: AllocId },
    /// A host step: reads and writes host sections, optionally running a kernel on the
    /// host copies, then optionally calling a Rust closure with views of them.
    HostTask {
        reads: Vec<Section>,
        writes: Vec<Section>,
        call: Option<KernelCall>,
        body: Option<HostFn>,
    },
    /// `taskwait`: the host waits for every earlier op.
    Taskwait,
    /// End of the program: the host reads every buffer.
    End,
}

impl OpKind {
    /// Short name used in schedule text and DOT: `alloc h2d kernel d2h peer free host
    /// taskwait end`.
    pub fn name(&self) -> &'static str {
        match self {
            OpKind::Alloc { .. } => "alloc",
            OpKind::H2D { .. } => "h2d",
            OpKind::Kernel(_) => "kernel",
            OpKind::D2H { .. } => "d2h",
            OpKind::PeerCopy { .. } => "peer",
            OpKind::Free { .. } => "free",
            OpKind::HostTask { .. } => "host",
            OpKind::Taskwait => "taskwait",
            OpKind::End => "end",
        }
    }

    /// True for ops the host runs itself (host task, taskwait, end); all others run on a
    /// device stream.
    pub fn is_host(&self) -> bool {
        matches!(
            self,
            OpKind::HostTask { .. } | OpKind::Taskwait | OpKind::End
        )
    }

    /// True for copies and kernel launches (the ops the `per-op` policy waits after).
    pub fn is_copy_or_launch(&self) -> bool {
        matches!(
            self,
            OpKind::H2D { .. } | OpKind::Kernel(_) | OpKind::D2H { .. } | OpKind::PeerCopy { .. }
        )
    }
}

/// One op.
#[derive(Clone, Debug, PartialEq)]
pub struct Op {
    pub kind: OpKind,
    pub region: RegionId,
    /// Device the op runs on (host ops: 0).
    pub device: u32,
}

/// What construct a region came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RegionKind {
    Target,
    /// The entry half of a `target data` (allocs and H2D before the body).
    DataBegin,
    /// The exit half of a `target data` (D2H and frees after the body).
    DataEnd,
    EnterData,
    ExitData,
    /// Write-backs the lowering adds, not a construct of the program: deferred D2H
    /// copies and evictions of kept device copies ([`crate::lower`]'s elision and
    /// memory cap), issued `nowait` before the host access that needs them.
    Writeback,
    Update,
    HostTask,
    Taskwait,
    End,
}

impl RegionKind {
    pub fn name(self) -> &'static str {
        match self {
            RegionKind::Target => "target",
            RegionKind::DataBegin => "target data begin",
            RegionKind::DataEnd => "target data end",
            RegionKind::EnterData => "enter data",
            RegionKind::ExitData => "exit data",
            RegionKind::Writeback => "writeback",
            RegionKind::Update => "update",
            RegionKind::HostTask => "host task",
            RegionKind::Taskwait => "taskwait",
            RegionKind::End => "end",
        }
    }

    /// True for regions the host runs (no stream).
    pub fn is_host(self) -> bool {
        matches!(
            self,
            RegionKind::HostTask | RegionKind::Taskwait | RegionKind::End
        )
    }
}

/// One construct's ops: a contiguous id range.
#[derive(Clone, Debug, PartialEq)]
pub struct Region {
    /// The name the region is shown by (module docs of [`crate::lower`]: `step0@2`,
    /// `d end`), control characters escaped ([`crate::model::escape_controls`]).
    pub name: String,
    pub kind: RegionKind,
    /// `nowait` given (always true for host regions, which never imply a device wait).
    pub nowait: bool,
    pub device: u32,
    /// The target region's `priority(n)` ([`crate::model::TargetRegion::priority`]); 0
    /// for every other kind. A hint: `n > 0` puts the region on its device's
    /// high-priority stream.
    pub priority: u32,
    /// The host lane a host task asked for ([`crate::model::HostTask::lane`]); `None`
    /// for every other kind.
    pub lane: Option<u32>,
    /// Ops `ops.start .. ops.end` belong to this region (possibly none).
    pub ops: std::ops::Range<u32>,
    pub span: Option<Span>,
}

/// Where one `taskgraph` construct's executions are in the OpGraph
/// ([`crate::model::Taskgraph`], OpenMP 6.0 §14.3).
///
/// The lowering unrolls a taskgraph of `repeat = N` into N copies of its body, each
/// lowered exactly as the body written out; `iterations[k]` is the half-open [`OpId`]
/// index range of execution `k`'s ops (`OpId(i)` for `i` in the range), in program
/// order: the ranges are contiguous, ascending, and each starts where the previous one
/// ends. Every op of range `k` belongs to a region of execution `k` (shown as `name@k`
/// for `k` ≥ 1), and ops outside every range (entry and exit ops of enclosing
/// `target data`, constructs before and after) belong to no execution. A range may be
/// empty (a body whose constructs lower to no ops). A replay engine can record
/// execution 0 and replay it for the others: execution `k`'s op `start_k + j` does what
/// execution 0's op `start_0 + j` does, when the ops of each execution are the same
/// (they are unless mapping state differs between executions, e.g. a body that maps
/// data first entered inside it; compare the ops to be sure).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskgraphInfo {
    /// The taskgraph's name as the program gives it.
    pub name: String,
    /// `OpId` index range of each execution, in order (`repeat` entries).
    pub iterations: Vec<std::ops::Range<u32>>,
}

/// The lowered program.
#[derive(Clone, Debug, Default)]
pub struct OpGraph {
    pub name: String,
    pub buffers: Vec<Buffer>,
    pub kernels: Vec<KernelSig>,
    pub devices: u32,
    pub ops: Vec<Op>,
    pub regions: Vec<Region>,
    pub allocs: Vec<DeviceAlloc>,
    /// What the lowering found legal but probably not meant, in program order.
    pub warnings: Vec<super::Warning>,
    /// Every `taskgraph` construct, in program order, with the op ranges of its
    /// executions (empty when the program has none).
    pub taskgraphs: Vec<TaskgraphInfo>,
    /// Copies the mapping rules name that transfer elision left out or deferred, in
    /// program order (empty with elision off; see [`super::LowerOptions`]).
    pub elided: Vec<super::ElidedCopy>,
    /// Kept copies freed before their next use to make room (keep limit or device memory
    /// cap), in program order ([`super::ElidedBytes::evicted`]).
    pub evictions: Vec<super::Eviction>,
    /// H2D ops issued ahead of need on a copy stream, in program order
    /// ([`super::ElidedBytes::prefetched`]).
    pub prefetches: Vec<OpId>,
    /// The device memory cap the graph was lowered under, bytes per device
    /// ([`super::LowerOptions::device_memory`]; `None`: unlimited). The verifier proves
    /// the live device bytes stay within it (`verify/peak.rs`).
    pub device_memory: Option<u64>,
    /// CSR offsets: preds of op `i` are `pred_list[pred_start[i]..pred_start[i+1]]`.
    pred_start: Vec<u32>,
    pred_list: Vec<OpId>,
}

impl OpGraph {
    /// Number of device regions of the program that lowered to at least one op (what
    /// "µs per region" and `run`'s summary count): the lowering's
    /// [`RegionKind::Writeback`] regions are not the program's and are left out
    /// ([`OpGraph::writeback_regions`] counts them). `O(regions)`.
    pub fn device_regions(&self) -> usize {
        self.regions
            .iter()
            .filter(|r| !r.kind.is_host() && r.kind != RegionKind::Writeback && !r.ops.is_empty())
            .count()
    }

    /// Number of [`RegionKind::Writeback`] regions with ops: the deferred D2H copies and
    /// evictions the lowering added. `O(regions)`.
    pub fn writeback_regions(&self) -> usize {
        self.regions
            .iter()
            .filter(|r| r.kind == RegionKind::Writeback && !r.ops.is_empty())
            .count()
    }

    /// Bytes of the copies in [`OpGraph::elided`]: H2D left out, D2H dropped, D2H
    /// written back later than the mapping rules put them; bytes of the kept copies in
    /// [`OpGraph::evictions`] and of the H2D in [`OpGraph::prefetches`].
    /// `O(elided + evictions + prefetches)`.
    pub fn elided_bytes(&self) -> super::ElidedBytes {
        let mut out = super::ElidedBytes::default();
        for e in &self.elided {
            let s = e.section();
            let bytes = s.len * self.buffers[s.buf.index()].ty.size_bytes();
            match e {
                super::ElidedCopy::H2D { .. } => out.h2d += bytes,
                super::ElidedCopy::D2H {
                    written_back: None, ..
                } => out.d2h += bytes,
                super::ElidedCopy::D2H { .. } => out.d2h_deferred += bytes,
            }
        }
        out.evicted = self
            .evictions
            .iter()
            .map(|e| self.allocs[e.alloc.index()].bytes)
            .sum();
        out.prefetched = self.prefetches.iter().map(|&h| self.op_bytes(h)).sum();
        out
    }

    /// An empty graph for a program with these buffers.
    pub fn new(name: &str, buffers: Vec<Buffer>, kernels: Vec<KernelSig>, devices: u32) -> Self {
        OpGraph {
            name: name.to_string(),
            buffers,
            kernels,
            devices,
            pred_start: vec![0],
            ..OpGraph::default()
        }
    }

    /// Room for `ops` more ops in `regions` more regions with `edges` more edges, so
    /// that a large lowering does not copy its growing op list again and again (an
    /// estimate: growth past it works as without it). `O(1)` plus the allocation.
    pub(crate) fn reserve(&mut self, ops: usize, regions: usize, edges: usize) {
        self.ops.reserve(ops);
        self.pred_start.reserve(ops);
        self.pred_list.reserve(edges);
        self.regions.reserve(regions);
    }

    /// Gives back the room [`OpGraph::reserve`] took beyond what was used.
    pub(crate) fn shrink_to_fit(&mut self) {
        self.ops.shrink_to_fit();
        self.pred_start.shrink_to_fit();
        self.pred_list.shrink_to_fit();
        self.regions.shrink_to_fit();
    }

    /// Appends an op with its predecessors (all earlier ops; duplicates are removed).
    /// Returns its id. Panics if a predecessor is not an earlier op (a lowering bug).
    ///
    /// Complexity: `O(p log p)` for `p` predecessors.
    pub fn push_op(&mut self, op: Op, mut preds: Vec<OpId>) -> OpId {
        let id = OpId(self.ops.len() as u32);
        preds.sort_unstable();
        preds.dedup();
        for p in &preds {
            assert!(*p < id, "edge {p} -> {id} goes backwards");
        }
        self.ops.push(op);
        self.pred_list.extend(preds);
        self.pred_start.push(self.pred_list.len() as u32);
        id
    }

    /// Predecessors of an op, sorted by id.
    pub fn preds(&self, op: OpId) -> &[OpId] {
        let i = op.index();
        &self.pred_list[self.pred_start[i] as usize..self.pred_start[i + 1] as usize]
    }

    /// Every edge `(from, to)`, ordered by `to` then `from`.
    pub fn edges(&self) -> impl Iterator<Item = (OpId, OpId)> + '_ {
        (0..self.ops.len()).flat_map(move |i| {
            let to = OpId(i as u32);
            self.preds(to).iter().map(move |&p| (p, to))
        })
    }

    /// Number of edges.
    pub fn edge_count(&self) -> usize {
        self.pred_list.len()
    }

    pub fn op(&self, id: OpId) -> &Op {
        &self.ops[id.index()]
    }

    pub fn region_of(&self, id: OpId) -> &Region {
        &self.regions[self.ops[id.index()].region.index()]
    }

    /// Ids of all ops.
    pub fn op_ids(&self) -> impl Iterator<Item = OpId> {
        (0..self.ops.len() as u32).map(OpId)
    }

    /// Whether device op `id` makes its device do work: a copy, a kernel, or an `Alloc`
    /// whose storage is zero-filled ([`DeviceAlloc::zero`], `cuMemsetD8Async`). A `Free`
    /// and any other `Alloc` are stream-ordered bookkeeping (`cuMemFreeAsync`,
    /// `cuMemAllocAsync`, or a block cache that makes no driver call): they complete as
    /// soon as the work before them on their stream has, so waiting for them costs
    /// nothing. False for host ops. `O(1)`.
    pub fn does_device_work(&self, id: OpId) -> bool {
        match &self.op(id).kind {
            OpKind::Alloc { alloc } => self.allocs.get(alloc.index()).is_some_and(|a| a.zero),
            OpKind::Free { .. } => false,
            OpKind::H2D { .. }
            | OpKind::D2H { .. }
            | OpKind::PeerCopy { .. }
            | OpKind::Kernel(_) => true,
            OpKind::HostTask { .. } | OpKind::Taskwait | OpKind::End => false,
        }
    }

    /// Bytes an op moves (copies, peer copies included), allocates or frees; 0 for kernels and host ops.
    pub fn op_bytes(&self, id: OpId) -> u64 {
        match &self.op(id).kind {
            OpKind::Alloc { alloc } | OpKind::Free { alloc } => self.allocs[alloc.index()].bytes,
            OpKind::H2D { section, .. }
            | OpKind::D2H { section, .. }
            | OpKind::PeerCopy { section, .. } => {
                section.len * self.buffers[section.buf.index()].ty.size_bytes()
            }
            _ => 0,
        }
    }

    /// `name[lo:len]`.
    pub fn section_name(&self, s: &Section) -> String {
        s.display(&self.buffers).to_string()
    }

    /// A one-line description of an op: `h2d x[0:1024] 4 KiB`, `kernel saxpy`,
    /// `peer x[0:256] 1 KiB from d1` (a peer copy from device 1 to the op's device).
    pub fn describe(&self, id: OpId) -> String {
        use crate::model::human_bytes;
        let op = self.op(id);
        match &op.kind {
            OpKind::Alloc { alloc } | OpKind::Free { alloc } => {
                let a = &self.allocs[alloc.index()];
                format!(
                    "{} {} {}",
                    op.kind.name(),
                    self.section_name(&a.section),
                    human_bytes(a.bytes)
                )
            }
            OpKind::H2D { section, .. } | OpKind::D2H { section, .. } => format!(
                "{} {} {}",
                op.kind.name(),
                self.section_name(section),
                human_bytes(self.op_bytes(id))
            ),
            OpKind::PeerCopy { src, section, .. } => format!(
                "peer {} {} from d{}",
                self.section_name(section),
                human_bytes(self.op_bytes(id)),
                self.allocs[src.index()].device
            ),
            OpKind::Kernel(k) => format!("kernel {}", k.kernel),
            OpKind::HostTask { call, .. } => match call {
                Some(k) => format!("host {}", k.kernel),
                None => "host".to_string(),
            },
            OpKind::Taskwait => "taskwait".to_string(),
            OpKind::End => "end".to_string(),
        }
    }
}
