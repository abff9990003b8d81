//! The executor: runs a [`Schedule`] of an [`OpGraph`] on a [`Plugin`].
//!
//! [`execute`] issues `sched.steps` in order from one host thread:
//! - `Step::Op` of a device op → the plugin call on the op's stream (`alloc`, `submit`,
//!   `launch`, `retrieve`, `free`); of a host op → run on the host: a `HostTask` with a
//!   kernel runs it on the host buffers, `Taskwait` does nothing by itself (the
//!   schedule's host waits before it do the waiting), `End` takes the final snapshot of
//!   the host buffers — so a missing host wait before `End` shows as a wrong answer.
//! - `Step::Record` / `Step::Wait` → `record_event` / `wait_event`; schedule events map
//!   to plugin events taken from a per-device pool and returned after their last use.
//! - `Step::HostWait` → `synchronize` on that stream.
//!
//! At the end every stream is synchronized, leftover device memory freed, events and host
//! memory released. On any error, issuing stops, what is in flight is synchronized, every
//! device allocation is freed, and the error names the op and region; nothing leaks.
//!
//! Also here: the reference interpreter ([`reference::reference`]), the result check
//! ([`check::check`]) and the Chrome trace writer ([`trace::write_chrome_trace`]).

pub mod buffers;
pub mod check;
mod hostmem;
pub mod reference;
pub mod trace;

pub use buffers::{BufferData, Buffers};
pub use check::{check, check_tol, CheckError};
pub use reference::reference;

use crate::lower::{AllocId, KernelArg, KernelCall, OpGraph, OpId, OpKind};
use crate::model::{ElemType, KernelSig, Section};
use crate::plugin::host::ffi::{HostKernel, KernelError, KernelLibrary, RawArg};
use crate::plugin::{
    DevicePtr, EventHandle, HostPtr, KernelHandle, LaunchArg, Plugin, PluginError, StreamHandle,
};
use crate::schedule::{EventId, Schedule, Step, StreamId};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;
use thiserror::Error;

const LOG: &str = "offload_sched::exec";

/// Options of [`execute`] and [`reference()`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExecOptions {
    /// Folder relative user-library paths of host-task kernels are resolved against
    /// (the graph file's folder); the current directory when `None`.
    pub kernel_dir: Option<PathBuf>,
}

/// What went wrong running a schedule.
#[derive(Debug, Error)]
pub enum ExecError {
    /// The schedule does not fit the graph or the plugin (op missing or repeated, stream
    /// or event out of range, a device op without a stream, a device the plugin lacks).
    #[error("schedule \"{name}\" cannot run: {message}")]
    Schedule { name: String, message: String },
    /// An op the graph describes inconsistently (section outside its allocation, unknown
    /// kernel, device memory used before its alloc).
    #[error("op {op} ({what}) in region \"{region}\": {message}")]
    Invalid {
        op: OpId,
        what: String,
        region: String,
        message: String,
    },
    /// A plugin call for an op failed.
    #[error("op {op} ({what}) in region \"{region}\": {source}")]
    Op {
        op: OpId,
        what: String,
        region: String,
        #[source]
        source: PluginError,
    },
    /// A host task's kernel could not be loaded or called.
    #[error("op {op} ({what}) in region \"{region}\": {source}")]
    HostKernel {
        op: OpId,
        what: String,
        region: String,
        #[source]
        source: KernelError,
    },
    /// A sync step, setup or teardown call failed (`what` says which:
    /// `record e3 on s1`, `host wait s0`, `final synchronize s2`, `alloc host x`).
    #[error("{what}: {source}")]
    Step {
        what: String,
        #[source]
        source: PluginError,
    },
}

/// When one op ran, in µs since [`execute`] started.
#[derive(Clone, Debug, PartialEq)]
pub struct OpTime {
    pub op: OpId,
    /// `None` for host ops.
    pub stream: Option<StreamId>,
    pub device: u32,
    /// When the host issued it.
    pub issue_us: f64,
    /// When it started and ended: measured by the plugin for device ops (issue time
    /// for both when the plugin has no timing), on the host for host ops.
    pub start_us: f64,
    pub end_us: f64,
}

/// What was issued.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// All ops run (device + host).
    pub ops: usize,
    pub device_ops: usize,
    pub host_ops: usize,
    pub events_recorded: usize,
    pub event_waits: usize,
    pub host_waits: usize,
}

/// The result of a run.
#[derive(Clone, Debug)]
pub struct Report {
    /// The plugin's name.
    pub plugin: String,
    /// Final host buffers, as read when the `End` op ran (after the final synchronize if
    /// the graph has no `End`).
    pub buffers: Buffers,
    /// Every op in issue order.
    pub ops: Vec<OpTime>,
    pub counts: Counts,
    /// Bytes copied host → device and device → host.
    pub bytes_h2d: u64,
    pub bytes_d2h: u64,
    /// Wall time of the whole run (setup, steps, teardown) in µs.
    pub wall_us: f64,
}

impl Report {
    pub fn as_f32(&self, name: &str) -> Option<&[f32]> {
        self.buffers.as_f32(name)
    }
    pub fn as_f64(&self, name: &str) -> Option<&[f64]> {
        self.buffers.as_f64(name)
    }
    pub fn as_i32(&self, name: &str) -> Option<&[i32]> {
        self.buffers.as_i32(name)
    }
    pub fn as_i64(&self, name: &str) -> Option<&[i64]> {
        self.buffers.as_i64(name)
    }
    pub fn as_u8(&self, name: &str) -> Option<&[u8]> {
        self.buffers.as_u8(name)
    }
}

/// Runs `sched` on `plugin`. See the module docs for what each step does.
///
/// Errors: [`ExecError::Schedule`] before anything is issued if the schedule does not
/// fit the graph or plugin; otherwise the first failing op or step. Either way every
/// device allocation, event and host allocation made is released before returning.
///
/// Complexity: `O(V + S)` plugin calls for `V` ops and `S` steps, plus the work itself.
pub fn execute(
    graph: &OpGraph,
    sched: &Schedule,
    plugin: &dyn Plugin,
    opts: &ExecOptions,
) -> Result<Report, ExecError> {
    validate(graph, sched, plugin)?;
    let mut ex = Exec::new(graph, sched, plugin, opts);
    let run = ex.setup().and_then(|()| ex.run_steps());
    if let Err(e) = &run {
        tracing::debug!(target: LOG, error = %e, "stopping after error; cleaning up");
    }
    let down = ex.teardown(run.is_err());
    run?;
    down?;
    Ok(ex.report())
}

/// The signature of kernel `name`: the graph's user declarations first, then built-ins.
pub(crate) fn kernel_sig(graph: &OpGraph, name: &str) -> Option<KernelSig> {
    crate::model::find_kernel(&graph.kernels, name).cloned()
}

fn validate(graph: &OpGraph, sched: &Schedule, plugin: &dyn Plugin) -> Result<(), ExecError> {
    let err = |message: String| ExecError::Schedule {
        name: sched.name.clone(),
        message,
    };
    if sched.op_stream.len() != graph.ops.len() {
        return Err(err(format!(
            "it has streams for {} ops, the graph has {}",
            sched.op_stream.len(),
            graph.ops.len()
        )));
    }
    let devices = plugin.device_count();
    for (i, s) in sched.streams.iter().enumerate() {
        if s.device >= devices {
            return Err(err(format!(
                "stream s{i} is on device {}, the {} plugin has {devices}",
                s.device,
                plugin.name()
            )));
        }
    }
    let stream_ok = |s: StreamId| -> Result<(), ExecError> {
        if s.index() < sched.streams.len() {
            Ok(())
        } else {
            Err(err(format!(
                "step names stream {s}, there are {}",
                sched.streams.len()
            )))
        }
    };
    let mut seen = vec![false; graph.ops.len()];
    for step in &sched.steps {
        match *step {
            Step::Op(op) => {
                let Some(slot) = seen.get_mut(op.index()) else {
                    return Err(err(format!(
                        "step names op {op}, the graph has {}",
                        graph.ops.len()
                    )));
                };
                if std::mem::replace(slot, true) {
                    return Err(err(format!("op {op} is issued twice")));
                }
                let o = graph.op(op);
                match sched.op_stream[op.index()] {
                    Some(s) => {
                        stream_ok(s)?;
                        if sched.streams[s.index()].device != o.device && !o.kind.is_host() {
                            return Err(err(format!(
                                "op {op} ({}) is for device {} but on {s} of device {}",
                                graph.describe(op),
                                o.device,
                                sched.streams[s.index()].device
                            )));
                        }
                    }
                    None if !o.kind.is_host() => {
                        return Err(err(format!(
                            "device op {op} ({}) has no stream",
                            graph.describe(op)
                        )))
                    }
                    None => {}
                }
            }
            Step::Record { event, stream } | Step::Wait { event, stream } => {
                stream_ok(stream)?;
                if event.0 >= sched.events {
                    return Err(err(format!(
                        "step names event {event}, there are {}",
                        sched.events
                    )));
                }
            }
            Step::HostWait { stream } => stream_ok(stream)?,
            Step::HostWaitDevice { device } => {
                if device >= devices {
                    return Err(err(format!(
                        "host wait on device {device}, the {} plugin has {devices}",
                        plugin.name()
                    )));
                }
            }
        }
    }
    if let Some(i) = seen.iter().position(|s| !s) {
        return Err(err(format!(
            "op #{i} ({}) is never issued",
            graph.describe(OpId(i as u32))
        )));
    }
    Ok(())
}

/// Which host-wait step a `synchronize` serves (named in its error).
#[derive(Clone, Copy)]
enum HostWaitKind {
    Stream,
    Device(u32),
}

struct Exec<'a> {
    graph: &'a OpGraph,
    sched: &'a Schedule,
    plugin: &'a dyn Plugin,
    t0: Instant,
    /// Plugin stream of each logical stream.
    streams: Vec<Option<StreamHandle>>,
    /// The plugin's next `seq` on each logical stream.
    seq: Vec<u64>,
    /// Whether `offload_sched::exec` debug logs are on (checked once per run): the
    /// per-op bookkeeping that only feeds logs is skipped when they are off.
    log_debug: bool,
    /// Ops issued to each stream since its last host wait (for completion logs; only
    /// with `log_debug`).
    in_flight: Vec<Vec<OpId>>,
    /// Per logical stream, `(seq, index in times)` of each issued device op, in issue
    /// (= `seq`) order, to match the plugin's timings to ops at teardown.
    timing_keys: Vec<Vec<(u64, usize)>>,
    /// Per op, the plugin kernel of a device `Kernel` op (loaded in `setup`).
    op_kernel: Vec<Option<KernelHandle>>,
    /// Scratch for a launch's arguments (reused, so a launch allocates nothing).
    args_buf: Vec<LaunchArg>,
    host: Vec<Option<HostPtr>>,
    live: Vec<Option<(DevicePtr, StreamId)>>,
    /// Plugin event of each schedule event, with the device it was created for.
    events: Vec<Option<(EventHandle, u32)>>,
    last_use: Vec<Option<usize>>,
    /// Free plugin events per device (index = device).
    event_pool: Vec<Vec<EventHandle>>,
    created_events: Vec<EventHandle>,
    kernels: BTreeMap<(u32, String, ElemType), KernelHandle>,
    host_lib: KernelLibrary,
    host_kernels: BTreeMap<(String, ElemType), HostKernel>,
    times: Vec<OpTime>,
    counts: Counts,
    bytes_h2d: u64,
    bytes_d2h: u64,
    snapshot: Option<Buffers>,
    wall_us: f64,
}

fn us_since(t0: Instant, t: Instant) -> f64 {
    t.saturating_duration_since(t0).as_secs_f64() * 1e6
}

impl<'a> Exec<'a> {
    fn new(
        graph: &'a OpGraph,
        sched: &'a Schedule,
        plugin: &'a dyn Plugin,
        opts: &ExecOptions,
    ) -> Exec<'a> {
        let mut last_use = vec![None; sched.events as usize];
        for (i, s) in sched.steps.iter().enumerate() {
            if let Step::Record { event, .. } | Step::Wait { event, .. } = s {
                last_use[event.index()] = Some(i);
            }
        }
        Exec {
            graph,
            sched,
            plugin,
            t0: Instant::now(),
            streams: vec![None; sched.streams.len()],
            seq: vec![0; sched.streams.len()],
            log_debug: tracing::enabled!(target: LOG, tracing::Level::DEBUG),
            in_flight: vec![Vec::new(); sched.streams.len()],
            timing_keys: vec![Vec::new(); sched.streams.len()],
            op_kernel: vec![None; graph.ops.len()],
            args_buf: Vec::new(),
            host: vec![None; graph.buffers.len()],
            live: vec![None; graph.allocs.len()],
            events: vec![None; sched.events as usize],
            last_use,
            event_pool: Vec::new(),
            created_events: Vec::new(),
            kernels: BTreeMap::new(),
            host_lib: KernelLibrary::new(opts.kernel_dir.clone()),
            host_kernels: BTreeMap::new(),
            times: Vec::with_capacity(graph.ops.len()),
            counts: Counts::default(),
            bytes_h2d: 0,
            bytes_d2h: 0,
            snapshot: None,
            wall_us: 0.0,
        }
    }

    fn now_us(&self) -> f64 {
        us_since(self.t0, Instant::now())
    }

    fn region(&self, op: OpId) -> String {
        self.graph.region_of(op).name.clone()
    }

    fn op_err(&self, op: OpId, source: PluginError) -> ExecError {
        ExecError::Op {
            op,
            what: self.graph.describe(op),
            region: self.region(op),
            source,
        }
    }

    fn invalid(&self, op: OpId, message: String) -> ExecError {
        ExecError::Invalid {
            op,
            what: self.graph.describe(op),
            region: self.region(op),
            message,
        }
    }

    fn stream(&self, s: StreamId) -> StreamHandle {
        // `setup` created every logical stream; `validate` checked the index.
        self.streams[s.index()].unwrap_or(StreamHandle(u32::MAX))
    }

    /// Streams, host buffers (initialised) and kernels.
    fn setup(&mut self) -> Result<(), ExecError> {
        let _ = self.plugin.drain_timings();
        let mut by_device: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, s) in self.sched.streams.iter().enumerate() {
            by_device.entry(s.device).or_default().push(i);
        }
        for (device, logical) in &by_device {
            let handles = self
                .plugin
                .create_streams(*device, logical.len() as u32)
                .map_err(|source| ExecError::Step {
                    what: format!("create {} streams on device {device}", logical.len()),
                    source,
                })?;
            for (l, h) in logical.iter().zip(handles) {
                self.streams[*l] = Some(h);
                self.seq[*l] = self.plugin.next_seq(h);
            }
        }
        for (i, b) in self.graph.buffers.iter().enumerate() {
            let ptr = self
                .plugin
                .alloc_host(b.bytes())
                .map_err(|source| ExecError::Step {
                    what: format!("alloc host buffer \"{}\"", b.name),
                    source,
                })?;
            self.host[i] = Some(ptr);
            let mut at = 0u64;
            buffers::init_bytes(b, |chunk| {
                // SAFETY: `ptr` was just allocated with `b.bytes()` bytes and no stream
                // has used it yet; the chunks are consecutive and add up to `b.bytes()`
                // (`init_bytes` yields exactly the buffer's native-endian bytes).
                unsafe { hostmem::write(ptr.offset(at), chunk) };
                at += chunk.len() as u64;
            });
        }
        for id in self.graph.op_ids() {
            let op = self.graph.op(id);
            match &op.kind {
                OpKind::Kernel(call) => {
                    let key = (op.device, call.kernel.clone(), call.ty);
                    if let Some(&h) = self.kernels.get(&key) {
                        self.op_kernel[id.index()] = Some(h);
                        continue;
                    }
                    let sig = kernel_sig(self.graph, &call.kernel).ok_or_else(|| {
                        self.invalid(id, format!("unknown kernel \"{}\"", call.kernel))
                    })?;
                    let h = self
                        .plugin
                        .load_kernel(op.device, &sig, call.ty)
                        .map_err(|e| self.op_err(id, e))?;
                    self.kernels.insert(key, h);
                    self.op_kernel[id.index()] = Some(h);
                }
                OpKind::HostTask {
                    call: Some(call), ..
                } => {
                    let key = (call.kernel.clone(), call.ty);
                    if self.host_kernels.contains_key(&key) {
                        continue;
                    }
                    let sig = kernel_sig(self.graph, &call.kernel).ok_or_else(|| {
                        self.invalid(id, format!("unknown kernel \"{}\"", call.kernel))
                    })?;
                    let k = self.host_lib.resolve(&sig, call.ty).map_err(|source| {
                        ExecError::HostKernel {
                            op: id,
                            what: self.graph.describe(id),
                            region: self.region(id),
                            source,
                        }
                    })?;
                    self.host_kernels.insert(key, k);
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn run_steps(&mut self) -> Result<(), ExecError> {
        let sched = self.sched;
        for (i, step) in sched.steps.iter().enumerate() {
            match *step {
                Step::Op(op) => match sched.op_stream[op.index()] {
                    Some(s) if !self.graph.op(op).kind.is_host() => self.issue_device(op, s)?,
                    _ => self.run_host(op)?,
                },
                Step::Record { event, stream } => {
                    let h = self.stream(stream);
                    let ev = match self.events[event.index()] {
                        Some((ev, _)) => ev,
                        None => {
                            let device = sched.streams[stream.index()].device;
                            let ev = self.take_event(device, event, stream)?;
                            self.events[event.index()] = Some((ev, device));
                            ev
                        }
                    };
                    tracing::debug!(target: LOG, %event, %stream, "record");
                    self.plugin
                        .record_event(h, ev)
                        .map_err(|source| ExecError::Step {
                            what: format!(
                                "record {event} on {stream}{}",
                                self.step_context(i, Some(stream), false)
                            ),
                            source,
                        })?;
                    self.seq[stream.index()] += 1;
                    self.counts.events_recorded += 1;
                    self.release_event(i, event);
                }
                Step::Wait { event, stream } => {
                    let h = self.stream(stream);
                    let Some((ev, _)) = self.events[event.index()] else {
                        return Err(ExecError::Schedule {
                            name: sched.name.clone(),
                            message: format!("{stream} waits on {event} before it is recorded"),
                        });
                    };
                    tracing::debug!(target: LOG, %event, %stream, "wait");
                    self.plugin
                        .wait_event(h, ev)
                        .map_err(|source| ExecError::Step {
                            what: format!(
                                "wait {event} on {stream}{}",
                                self.step_context(i, Some(stream), true)
                            ),
                            source,
                        })?;
                    self.seq[stream.index()] += 1;
                    self.counts.event_waits += 1;
                    self.release_event(i, event);
                }
                Step::HostWait { stream } => {
                    self.host_wait(stream, HostWaitKind::Stream, Some(i))?;
                    self.counts.host_waits += 1;
                }
                Step::HostWaitDevice { device } => {
                    // Every schedule stream of the device (`cuCtxSynchronize` restricted
                    // to the streams this run uses, which is all the work it issued).
                    for (t, info) in sched.streams.iter().enumerate() {
                        if info.device == device {
                            self.host_wait(
                                StreamId(t as u32),
                                HostWaitKind::Device(device),
                                Some(i),
                            )?;
                        }
                    }
                    self.counts.host_waits += 1;
                }
            }
        }
        Ok(())
    }

    /// Blocks until `stream` has finished what was issued to it; `step` (the host wait's
    /// index) names the op the wait guards in an error.
    fn host_wait(
        &mut self,
        stream: StreamId,
        kind: HostWaitKind,
        step: Option<usize>,
    ) -> Result<(), ExecError> {
        let what = || match kind {
            HostWaitKind::Stream => format!("host wait {stream}"),
            HostWaitKind::Device(d) => format!("host wait device {d}"),
        };
        tracing::debug!(target: LOG, %stream, "{}: waiting", what());
        self.plugin
            .synchronize(self.stream(stream))
            .map_err(|source| ExecError::Step {
                what: match step {
                    Some(i) => format!("{}{}", what(), self.step_context(i, None, true)),
                    None => what(),
                },
                source,
            })?;
        if self.log_debug {
            for op in std::mem::take(&mut self.in_flight[stream.index()]) {
                tracing::debug!(target: LOG, %op, what = %self.graph.describe(op), %stream, "completed");
            }
        }
        tracing::debug!(target: LOG, %stream, "{}: done", what());
        Ok(())
    }

    /// For an error at sync step `i`: ` before op #N (what) in region "R"` (the next op,
    /// on `stream` if given) when `forward`, else ` after ...` (the previous op on
    /// `stream`); empty if there is none. Scans the steps only when called.
    fn step_context(&self, i: usize, stream: Option<StreamId>, forward: bool) -> String {
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

    fn take_event(
        &mut self,
        device: u32,
        event: EventId,
        stream: StreamId,
    ) -> Result<EventHandle, ExecError> {
        if let Some(ev) = self
            .event_pool
            .get_mut(device as usize)
            .and_then(|p| p.pop())
        {
            return Ok(ev);
        }
        let ev = self
            .plugin
            .create_event(device)
            .map_err(|source| ExecError::Step {
                what: format!("create an event for {event} on {stream}"),
                source,
            })?;
        self.created_events.push(ev);
        Ok(ev)
    }

    /// Returns the plugin event of `event` to the pool of the device it was created for
    /// (its record's device, not the device of a cross-device waiter) after its last
    /// record or wait.
    fn release_event(&mut self, step: usize, event: EventId) {
        if self.last_use[event.index()] == Some(step) {
            if let Some((ev, device)) = self.events[event.index()].take() {
                let d = device as usize;
                if self.event_pool.len() <= d {
                    self.event_pool.resize_with(d + 1, Vec::new);
                }
                self.event_pool[d].push(ev);
            }
        }
    }

    fn alloc_elem(&self, alloc: AllocId) -> ElemType {
        let a = &self.graph.allocs[alloc.index()];
        self.graph.buffers[a.section.buf.index()].ty
    }

    /// The live device address of `alloc`, or an error naming `op`.
    fn live_ptr(&self, op: OpId, alloc: AllocId) -> Result<(DevicePtr, StreamId), ExecError> {
        self.live
            .get(alloc.index())
            .copied()
            .flatten()
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

    /// Resolves a device kernel's arguments into `out` (cleared first).
    fn launch_args(
        &self,
        op: OpId,
        call: &KernelCall,
        out: &mut Vec<LaunchArg>,
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
                    let (ptr, _) = self.live_ptr(op, alloc)?;
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
                KernelArg::Host { .. } => {
                    return Err(self.invalid(op, "a device kernel was given a host buffer".into()))
                }
            });
        }
        Ok(())
    }

    fn issue_device(&mut self, op: OpId, s: StreamId) -> Result<(), ExecError> {
        let graph = self.graph;
        let h = self.stream(s);
        let issue_us = self.now_us();
        tracing::debug!(target: LOG, %op, what = %graph.describe(op), stream = %s, "issue");
        match &graph.op(op).kind {
            OpKind::Alloc { alloc } => {
                if self.live.get(alloc.index()).copied().flatten().is_some() {
                    return Err(self.invalid(op, "allocated twice".into()));
                }
                let bytes = graph.allocs[alloc.index()].bytes;
                let ptr = self
                    .plugin
                    .alloc(h, bytes)
                    .map_err(|e| self.op_err(op, e))?;
                self.live[alloc.index()] = Some((ptr, s));
            }
            OpKind::H2D { alloc, section } => {
                let (dev, host, bytes) = self.copy_range(op, *alloc, section)?;
                self.plugin
                    .submit(h, dev, host, bytes)
                    .map_err(|e| self.op_err(op, e))?;
                self.bytes_h2d += bytes;
            }
            OpKind::D2H { alloc, section } => {
                let (dev, host, bytes) = self.copy_range(op, *alloc, section)?;
                self.plugin
                    .retrieve(h, host, dev, bytes)
                    .map_err(|e| self.op_err(op, e))?;
                self.bytes_d2h += bytes;
            }
            OpKind::Kernel(call) => {
                let k = self.op_kernel[op.index()]
                    .ok_or_else(|| self.invalid(op, "kernel not loaded".into()))?;
                let mut args = std::mem::take(&mut self.args_buf);
                let r = self.launch_args(op, call, &mut args).and_then(|()| {
                    self.plugin
                        .launch(h, k, &args, call.launch)
                        .map_err(|e| self.op_err(op, e))
                });
                self.args_buf = args;
                r?;
            }
            OpKind::Free { alloc } => {
                let (ptr, _) = self.live_ptr(op, *alloc)?;
                self.plugin.free(h, ptr).map_err(|e| self.op_err(op, e))?;
                self.live[alloc.index()] = None;
            }
            OpKind::HostTask { .. } | OpKind::Taskwait | OpKind::End => {
                return self.run_host(op);
            }
        }
        let seq = self.seq[s.index()];
        self.seq[s.index()] += 1;
        self.timing_keys[s.index()].push((seq, self.times.len()));
        self.times.push(OpTime {
            op,
            stream: Some(s),
            device: graph.op(op).device,
            issue_us,
            start_us: issue_us,
            end_us: issue_us,
        });
        if self.log_debug {
            self.in_flight[s.index()].push(op);
        }
        self.counts.device_ops += 1;
        self.counts.ops += 1;
        Ok(())
    }

    fn run_host(&mut self, op: OpId) -> Result<(), ExecError> {
        let start = self.now_us();
        tracing::debug!(target: LOG, %op, what = %self.graph.describe(op), "host op: start");
        match &self.graph.op(op).kind {
            OpKind::HostTask {
                call: Some(call), ..
            } => self.host_call(op, call)?,
            OpKind::End => self.snapshot = Some(self.read_buffers()),
            _ => {}
        }
        let end = self.now_us();
        tracing::debug!(target: LOG, %op, what = %self.graph.describe(op), "host op: completed");
        self.times.push(OpTime {
            op,
            stream: None,
            device: self.graph.op(op).device,
            issue_us: start,
            start_us: start,
            end_us: end,
        });
        self.counts.host_ops += 1;
        self.counts.ops += 1;
        Ok(())
    }

    fn host_call(&self, op: OpId, call: &KernelCall) -> Result<(), ExecError> {
        let k = self
            .host_kernels
            .get(&(call.kernel.clone(), call.ty))
            .ok_or_else(|| self.invalid(op, "host kernel not loaded".into()))?;
        let mut raw = Vec::with_capacity(call.args.len());
        for a in &call.args {
            match *a {
                KernelArg::Host { section, .. } => {
                    let buf = self
                        .graph
                        .buffers
                        .get(section.buf.index())
                        .ok_or_else(|| self.invalid(op, "unknown buffer".into()))?;
                    if section.end() > buf.len {
                        return Err(self.invalid(
                            op,
                            format!(
                                "section {} is outside its buffer",
                                self.graph.section_name(&section)
                            ),
                        ));
                    }
                    let base = self.host[section.buf.index()]
                        .ok_or_else(|| self.invalid(op, "host buffer not allocated".into()))?;
                    raw.push(RawArg::Buffer {
                        ptr: base.offset(section.lo * buf.ty.size_bytes()).as_ptr(),
                        len: section.len,
                        ty: buf.ty,
                    });
                }
                KernelArg::Scalar(s) => raw.push(RawArg::Scalar(s)),
                KernelArg::Device { .. } => {
                    return Err(self.invalid(op, "a host task was given device memory".into()))
                }
            }
        }
        // SAFETY: every buffer range was checked to lie inside its host allocation, which
        // lives until teardown; the schedule's host waits make the host the only user.
        unsafe { k.call(&raw) }.map_err(|source| ExecError::HostKernel {
            op,
            what: self.graph.describe(op),
            region: self.region(op),
            source,
        })
    }

    fn read_buffers(&self) -> Buffers {
        Buffers::new(
            self.graph
                .buffers
                .iter()
                .zip(&self.host)
                .map(|(b, p)| {
                    let n = b.len as usize;
                    // SAFETY (every arm): allocated with `b.bytes()` = `n` elements of
                    // `b.ty` in `setup`, not freed before teardown.
                    let data = match p {
                        Some(p) => match b.ty {
                            ElemType::F32 => BufferData::F32(unsafe { hostmem::read_vec(*p, n) }),
                            ElemType::F64 => BufferData::F64(unsafe { hostmem::read_vec(*p, n) }),
                            ElemType::I32 => BufferData::I32(unsafe { hostmem::read_vec(*p, n) }),
                            ElemType::I64 => BufferData::I64(unsafe { hostmem::read_vec(*p, n) }),
                            ElemType::U8 => BufferData::U8(unsafe { hostmem::read_vec(*p, n) }),
                        },
                        None => BufferData::from_ne_bytes(b.ty, &[]),
                    };
                    (b.name.clone(), data)
                })
                .collect(),
        )
    }

    /// Synchronizes every stream, frees leftover device memory, destroys events, takes
    /// the final snapshot (if `End` did not) and frees host memory. After a failed run
    /// (`failed`), teardown errors are logged and dropped (the run's error wins).
    fn teardown(&mut self, failed: bool) -> Result<(), ExecError> {
        let mut first: Option<ExecError> = None;
        let mut note = |what: String, e: PluginError, first: &mut Option<ExecError>| {
            tracing::debug!(target: LOG, %what, error = %e, "teardown error");
            if first.is_none() {
                *first = Some(ExecError::Step { what, source: e });
            }
        };
        let sync_all =
            |ex: &Self,
             first: &mut Option<ExecError>,
             note: &mut dyn FnMut(String, PluginError, &mut Option<ExecError>)| {
                for (i, h) in ex.streams.iter().enumerate() {
                    // A stream the schedule issues nothing to has nothing to wait for.
                    let st = Some(StreamId(i as u32));
                    let used = ex.sched.steps.iter().any(|step| match step {
                        Step::Op(op) => ex.sched.op_stream[op.index()] == st,
                        Step::Record { stream, .. } | Step::Wait { stream, .. } => {
                            Some(*stream) == st
                        }
                        _ => false,
                    });
                    if let (Some(h), true) = (h, used) {
                        if let Err(e) = ex.plugin.synchronize(*h) {
                            let last = ex.step_context(
                                ex.sched.steps.len(),
                                Some(StreamId(i as u32)),
                                false,
                            );
                            note(format!("final synchronize s{i}{last}"), e, first);
                        }
                    }
                }
            };
        sync_all(self, &mut first, &mut note);
        let mut freed_any = false;
        for a in 0..self.live.len() {
            if let Some((ptr, s)) = self.live[a] {
                match self.plugin.free(self.stream(s), ptr) {
                    Ok(()) => {
                        self.live[a] = None;
                        freed_any = true;
                    }
                    Err(e) => note(
                        format!("free leftover device allocation {a}"),
                        e,
                        &mut first,
                    ),
                }
            }
        }
        if freed_any {
            sync_all(self, &mut first, &mut note);
        }
        for ev in std::mem::take(&mut self.created_events) {
            if let Err(e) = self.plugin.destroy_event(ev) {
                note(format!("destroy {ev}"), e, &mut first);
            }
        }
        self.event_pool.clear();
        if !failed && self.snapshot.is_none() {
            self.snapshot = Some(self.read_buffers());
        }
        for (i, p) in self.host.iter_mut().enumerate() {
            if let Some(ptr) = p.take() {
                if let Err(e) = self.plugin.free_host(ptr) {
                    note(
                        format!("free host buffer \"{}\"", self.graph.buffers[i].name),
                        e,
                        &mut first,
                    );
                }
            }
        }
        // Match the plugin's timings to ops.
        for t in self.plugin.drain_timings() {
            let Some(l) = self.streams.iter().position(|h| *h == Some(t.stream)) else {
                continue;
            };
            let keys = &self.timing_keys[l];
            if let Ok(k) = keys.binary_search_by_key(&t.seq, |&(seq, _)| seq) {
                let i = keys[k].1;
                self.times[i].start_us = us_since(self.t0, t.start);
                self.times[i].end_us = us_since(self.t0, t.end);
            }
        }
        self.wall_us = self.now_us();
        match first {
            Some(e) if !failed => Err(e),
            _ => Ok(()),
        }
    }

    fn report(&mut self) -> Report {
        Report {
            plugin: self.plugin.name(),
            buffers: self.snapshot.take().unwrap_or_default(),
            ops: std::mem::take(&mut self.times),
            counts: self.counts.clone(),
            bytes_h2d: self.bytes_h2d,
            bytes_d2h: self.bytes_d2h,
            wall_us: self.wall_us,
        }
    }
}
