//! What issuing one device op needs, shared by every issuing thread: the read-only run
//! state ([`Core`]: graph, schedule, plugin, streams, kernels, host buffers), the device
//! allocation table ([`Live`], written by the stream that allocates), and the per-stream
//! bookkeeping ([`Lane`]: sequence numbers, times, counts) that only its issuer touches.

use super::{Counts, ExecError, HostWaitTime, OpTime};
use crate::lower::{AllocId, KernelArg, KernelCall, OpGraph, OpId, OpKind};
use crate::model::{ElemType, Section};
use crate::plugin::{
    DevicePtr, HostPtr, KernelHandle, LaunchArg, Plugin, PluginError, PluginInfo, StreamHandle,
};
use crate::schedule::{Schedule, Step, StreamId};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

pub(super) const LOG: &str = "offload_sched::exec";

pub(super) fn us_since(t0: Instant, t: Instant) -> f64 {
    t.saturating_duration_since(t0).as_secs_f64() * 1e6
}

/// Live device allocations: per [`AllocId`], its address and the stream that allocated
/// it. Lock-free so that issuing threads can publish and read addresses: the stream slot
/// is stored last (`Release`) and read first (`Acquire`); `NONE` = not live.
pub(super) struct Live {
    ptr: Vec<AtomicU64>,
    stream: Vec<AtomicU32>,
}

const NONE: u32 = u32::MAX;

impl Live {
    pub(super) fn new(n: usize) -> Live {
        Live {
            ptr: (0..n).map(|_| AtomicU64::new(0)).collect(),
            stream: (0..n).map(|_| AtomicU32::new(NONE)).collect(),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.ptr.len()
    }

    pub(super) fn get(&self, a: AllocId) -> Option<(DevicePtr, StreamId)> {
        let s = self.stream.get(a.index())?.load(Ordering::Acquire);
        (s != NONE).then(|| {
            (
                DevicePtr(self.ptr[a.index()].load(Ordering::Relaxed)),
                StreamId(s),
            )
        })
    }

    pub(super) fn set(&self, a: AllocId, ptr: DevicePtr, s: StreamId) {
        self.ptr[a.index()].store(ptr.0, Ordering::Relaxed);
        self.stream[a.index()].store(s.0, Ordering::Release);
    }

    pub(super) fn clear(&self, a: AllocId) {
        self.stream[a.index()].store(NONE, Ordering::Release);
    }
}

/// Per-stream issue bookkeeping, owned by the thread issuing that stream (the host's
/// own lane holds host ops and host-wait counts).
#[derive(Default)]
pub(super) struct Lane {
    /// The plugin's next `seq` on this stream.
    pub(super) seq: u64,
    /// `(seq, index in times)` of each issued device op, in issue (= `seq`) order, to
    /// match the plugin's timings to ops at teardown.
    pub(super) timing_keys: Vec<(u64, usize)>,
    pub(super) times: Vec<OpTime>,
    /// Step index of each entry of `times` (orders ops issued at the same instant).
    pub(super) steps: Vec<usize>,
    pub(super) counts: Counts,
    pub(super) bytes_h2d: u64,
    pub(super) bytes_d2h: u64,
    pub(super) bytes_peer: u64,
    /// Scratch for a launch's arguments (reused, so a launch allocates nothing).
    pub(super) args_buf: Vec<LaunchArg>,
    /// Ops issued since the last host wait (for completion logs; only with debug logs).
    pub(super) in_flight: Vec<OpId>,
    /// The host's lane: its completed host waits, in step order.
    pub(super) waits: Vec<HostWaitTime>,
}

impl Lane {
    pub(super) fn push_time(&mut self, step: usize, t: OpTime) {
        self.times.push(t);
        self.steps.push(step);
    }
}

/// Read-only after setup; shared by every issuing thread.
pub(super) struct Core<'a> {
    pub(super) graph: &'a OpGraph,
    pub(super) sched: &'a Schedule,
    pub(super) plugin: &'a dyn Plugin,
    /// What the plugin can do, asked once for the run ([`Plugin::info`]).
    pub(super) info: &'a PluginInfo,
    pub(super) t0: Instant,
    /// Plugin stream of each logical stream.
    pub(super) streams: Vec<Option<StreamHandle>>,
    /// Per op, the plugin kernel of a device `Kernel` op (loaded in setup).
    pub(super) op_kernel: Vec<Option<KernelHandle>>,
    /// Host buffer of each graph buffer.
    pub(super) host: Vec<Option<HostPtr>>,
    /// Whether `offload_sched::exec` debug logs are on (checked once per run): the
    /// per-op bookkeeping that only feeds logs is skipped when they are off.
    pub(super) log_debug: bool,
    pub(super) live: Live,
    /// Whether the `End` op copies every buffer into the report (a one-shot run); a
    /// session's runs leave results in place.
    pub(super) snapshot_at_end: bool,
    /// `ExecOptions::on_issue`.
    pub(super) on_issue: Option<super::OnIssue>,
    /// Set at the run's first failure (serial issue with host lanes records it as it
    /// happens): host task bodies see it through [`crate::model::HostCtx::run_failed`],
    /// so one that waits (a distributed receive) stops instead of holding the run open.
    pub(super) failed: std::sync::atomic::AtomicBool,
}

impl Core<'_> {
    pub(super) fn now_us(&self) -> f64 {
        us_since(self.t0, Instant::now())
    }

    pub(super) fn region(&self, op: OpId) -> String {
        self.graph.region_of(op).name.clone()
    }

    pub(super) fn op_err(&self, op: OpId, source: PluginError) -> ExecError {
        ExecError::Op {
            op,
            what: self.graph.describe(op),
            region: self.region(op),
            source,
        }
    }

    pub(super) fn invalid(&self, op: OpId, message: String) -> ExecError {
        ExecError::Invalid {
            op,
            what: self.graph.describe(op),
            region: self.region(op),
            message,
        }
    }

    pub(super) fn stream(&self, s: StreamId) -> StreamHandle {
        // Setup created every logical stream; `validate` checked the index.
        self.streams[s.index()].unwrap_or(StreamHandle(u32::MAX))
    }

    /// For an error at sync step `i`: ` before op #N (what) in region "R"` (the next op,
    /// on `stream` if given) when `forward`, else ` after ...` (the previous op on
    /// `stream`); empty if there is none. Scans the steps only when called.
    pub(super) fn step_context(&self, i: usize, stream: Option<StreamId>, forward: bool) -> String {
        let on = |st: &Step| match st {
            Step::Op(op) if stream.is_none() || self.sched.op_stream[op.index()] == stream => {
                Some(*op)
            }
            _ => None,
        };
        let steps = &self.sched.steps;
        let found = if forward {
            steps.iter().skip(i + 1).find_map(on)
        } else {
            steps.iter().take(i).rev().find_map(on)
        };
        match found {
            Some(op) => format!(
                " {} op {op} ({}) in region \"{}\"",
                if forward { "before" } else { "after" },
                self.graph.describe(op),
                self.region(op)
            ),
            None => String::new(),
        }
    }

    fn alloc_elem(&self, alloc: AllocId) -> ElemType {
        let a = &self.graph.allocs[alloc.index()];
        self.graph.buffers[a.section.buf.index()].ty
    }

    /// The live device address of `alloc`, or an error naming `op`.
    fn live_ptr(&self, op: OpId, alloc: AllocId) -> Result<(DevicePtr, StreamId), ExecError> {
        self.live
            .get(alloc)
            .ok_or_else(|| self.invalid(op, format!("device allocation {} is not live", alloc.0)))
    }

    /// Device and host addresses and the byte count of a copy of `section` of `alloc`.
    fn copy_range(
        &self,
        op: OpId,
        alloc: AllocId,
        section: &Section,
    ) -> Result<(DevicePtr, HostPtr, u64), ExecError> {
        let (ptr, _) = self.live_ptr(op, alloc)?;
        self.copy_range_at(op, alloc, section, ptr)
    }

    /// [`Core::copy_range`] with `alloc` at device address `ptr` (a replay arena's).
    pub(super) fn copy_range_at(
        &self,
        op: OpId,
        alloc: AllocId,
        section: &Section,
        ptr: DevicePtr,
    ) -> Result<(DevicePtr, HostPtr, u64), ExecError> {
        let a = &self.graph.allocs[alloc.index()];
        let buf = &self.graph.buffers[section.buf.index()];
        if !a.section.contains(section) || section.end() > buf.len {
            return Err(self.invalid(
                op,
                format!(
                    "section {} is not inside its allocation {}",
                    self.graph.section_name(section),
                    self.graph.section_name(&a.section)
                ),
            ));
        }
        let size = buf.ty.size_bytes();
        let dev = ptr.offset((section.lo - a.section.lo) * size);
        let host = self.host[section.buf.index()]
            .ok_or_else(|| self.invalid(op, "host buffer not allocated".into()))?
            .offset(section.lo * size);
        Ok((dev, host, section.len * size))
    }

    /// `(dst, src, bytes)` of a peer copy of `section` from allocation `src` into `dst`,
    /// both live and both holding `section`.
    fn peer_range(
        &self,
        op: OpId,
        src: AllocId,
        dst: AllocId,
        section: &Section,
    ) -> Result<(DevicePtr, DevicePtr, u64), ExecError> {
        let g = self.graph;
        let (sp, _) = self.live_ptr(op, src)?;
        let (dp, _) = self.live_ptr(op, dst)?;
        let (sa, da) = (&g.allocs[src.index()], &g.allocs[dst.index()]);
        if !sa.section.contains(section) || !da.section.contains(section) {
            return Err(self.invalid(
                op,
                format!(
                    "peer copy of {} is not inside its allocations {} and {}",
                    g.section_name(section),
                    g.section_name(&sa.section),
                    g.section_name(&da.section)
                ),
            ));
        }
        let size = g.buffers[section.buf.index()].ty.size_bytes();
        Ok((
            dp.offset((section.lo - da.section.lo) * size),
            sp.offset((section.lo - sa.section.lo) * size),
            section.len * size,
        ))
    }

    /// Resolves a device kernel's arguments into `out` (cleared first).
    fn launch_args(
        &self,
        op: OpId,
        call: &KernelCall,
        out: &mut Vec<LaunchArg>,
    ) -> Result<(), ExecError> {
        self.launch_args_at(op, call, out, |a| self.live_ptr(op, a).map(|(p, _)| p))
    }

    /// [`Core::launch_args`] with each allocation's device address from `dev` (a replay
    /// arena's).
    pub(super) fn launch_args_at(
        &self,
        op: OpId,
        call: &KernelCall,
        out: &mut Vec<LaunchArg>,
        dev: impl Fn(AllocId) -> Result<DevicePtr, ExecError>,
    ) -> Result<(), ExecError> {
        out.clear();
        for a in &call.args {
            out.push(match *a {
                KernelArg::Device {
                    alloc,
                    offset,
                    len,
                    access,
                } => {
                    let ptr = dev(alloc)?;
                    let sec = &self.graph.allocs[alloc.index()].section;
                    if offset.checked_add(len).is_none_or(|e| e > sec.len) {
                        return Err(self.invalid(
                            op,
                            format!(
                                "argument [{offset}:{len}] is outside its allocation {}",
                                self.graph.section_name(sec)
                            ),
                        ));
                    }
                    let ty = self.alloc_elem(alloc);
                    LaunchArg::Buffer {
                        ptr,
                        offset: offset * ty.size_bytes(),
                        len,
                        ty,
                        access,
                    }
                }
                KernelArg::Scalar(s) => LaunchArg::Scalar(s),
                KernelArg::Empty { ty, access } => LaunchArg::Buffer {
                    ptr: DevicePtr(0),
                    offset: 0,
                    len: 0,
                    ty,
                    access,
                },
                KernelArg::Host { .. } => {
                    return Err(self.invalid(op, "a device kernel was given a host buffer".into()))
                }
            });
        }
        Ok(())
    }

    /// Issues device op `op` (schedule step `step`) on stream `s`, with `lane` the
    /// stream's bookkeeping. Host ops are not handled here.
    pub(super) fn issue_device(
        &self,
        lane: &mut Lane,
        op: OpId,
        s: StreamId,
        step: usize,
    ) -> Result<(), ExecError> {
        let graph = self.graph;
        let h = self.stream(s);
        let issue_us = self.now_us();
        tracing::debug!(target: LOG, %op, what = %graph.describe(op), stream = %s, "issue");
        match &graph.op(op).kind {
            OpKind::Alloc { alloc } => {
                if self.live.get(*alloc).is_some() {
                    return Err(self.invalid(op, "allocated twice".into()));
                }
                let bytes = graph.allocs[alloc.index()].bytes;
                let ptr = self
                    .plugin
                    .alloc(h, bytes)
                    .map_err(|e| self.op_err(op, e))?;
                self.live.set(*alloc, ptr, s);
                if graph.allocs[alloc.index()].zero {
                    // Storage read before written: fresh device memory is zeros (see
                    // `DeviceAlloc::zero`). The alloc call took one `seq`; the op's
                    // timing is its zero fill's.
                    lane.seq += 1;
                    self.plugin
                        .fill_zero(h, ptr, bytes)
                        .map_err(|e| self.op_err(op, e))?;
                }
            }
            OpKind::H2D { alloc, section } => {
                let (dev, host, bytes) = self.copy_range(op, *alloc, section)?;
                self.plugin
                    .submit(h, dev, host, bytes)
                    .map_err(|e| self.op_err(op, e))?;
                lane.bytes_h2d += bytes;
            }
            OpKind::D2H { alloc, section } => {
                let (dev, host, bytes) = self.copy_range(op, *alloc, section)?;
                self.plugin
                    .retrieve(h, host, dev, bytes)
                    .map_err(|e| self.op_err(op, e))?;
                lane.bytes_d2h += bytes;
            }
            OpKind::PeerCopy { src, dst, section } => {
                let (d, s, bytes) = self.peer_range(op, *src, *dst, section)?;
                let (sd, dd) = (
                    graph.allocs[src.index()].device,
                    graph.allocs[dst.index()].device,
                );
                self.plugin
                    .copy_peer(h, d, dd, s, sd, bytes)
                    .map_err(|e| self.op_err(op, e))?;
                lane.bytes_peer += bytes;
            }
            OpKind::Kernel(call) => {
                let k = self.op_kernel[op.index()]
                    .ok_or_else(|| self.invalid(op, "kernel not loaded".into()))?;
                let mut args = std::mem::take(&mut lane.args_buf);
                let r = self.launch_args(op, call, &mut args).and_then(|()| {
                    self.plugin
                        .launch(h, k, &args, call.launch)
                        .map_err(|e| self.op_err(op, e))
                });
                lane.args_buf = args;
                r?;
            }
            OpKind::Free { alloc } => {
                let (ptr, _) = self.live_ptr(op, *alloc)?;
                self.plugin.free(h, ptr).map_err(|e| self.op_err(op, e))?;
                self.live.clear(*alloc);
            }
            OpKind::HostTask { .. } | OpKind::Taskwait | OpKind::End => {
                return Err(self.invalid(op, "a host op was issued to a stream".into()));
            }
        }
        let seq = lane.seq;
        lane.seq += 1;
        if let Some(f) = &self.on_issue {
            (f.0)(op, h, seq);
        }
        lane.timing_keys.push((seq, lane.times.len()));
        lane.push_time(
            step,
            OpTime {
                op,
                stream: Some(s),
                device: graph.op(op).device,
                issue_us,
                start_us: issue_us,
                end_us: issue_us,
                timed: false,
                batch: 0,
            },
        );
        if self.log_debug {
            lane.in_flight.push(op);
        }
        lane.counts.device_ops += 1;
        lane.counts.ops += 1;
        Ok(())
    }
}
