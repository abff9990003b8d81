//! The executor's step actions, shared by serial issue (`Exec::run_steps`) and threaded
//! issue (`threads.rs`): plugin events from the per-device pool, event records and waits,
//! host waits (on a stream or an event), host tasks (kernels called on the host buffers), and the final snapshot of
//! the host buffers.

use super::run_state::{Core, Lane, LOG};
use super::{hostmem, Buffers, ExecError, HostKernels, HostWaitKind, HostWaitTime, OpTime};
use crate::lower::{KernelArg, KernelCall, OpId, OpKind};
use crate::model::{HostCtx, HostFn, Section};
use crate::plugin::{EventHandle, Plugin};
use crate::runtime::ffi::RawArg;
use crate::schedule::{EventId, Schedule, StreamId};

/// `stream waits on event before it is recorded` (a schedule error).
pub(super) fn wait_before_record(sched: &Schedule, event: EventId, stream: StreamId) -> ExecError {
    ExecError::Schedule {
        name: sched.name.clone(),
        message: format!("{stream} waits on {event} before it is recorded"),
    }
}

/// `the host waits on event before it is recorded` (a schedule error).
pub(super) fn host_wait_before_record(sched: &Schedule, event: EventId) -> ExecError {
    ExecError::Schedule {
        name: sched.name.clone(),
        message: format!("the host waits on {event} before it is recorded"),
    }
}

/// A plugin event for schedule event `event` (first recorded on `stream` of `device`):
/// from the device's pool, else created (and remembered in `created` for teardown).
pub(super) fn take_event(
    plugin: &dyn Plugin,
    pool: &mut [Vec<EventHandle>],
    created: &mut Vec<EventHandle>,
    device: u32,
    event: EventId,
    stream: StreamId,
) -> Result<EventHandle, ExecError> {
    if let Some(ev) = pool.get_mut(device as usize).and_then(|p| p.pop()) {
        return Ok(ev);
    }
    let ev = plugin
        .create_event(device)
        .map_err(|source| ExecError::Step {
            what: format!("create an event for {event} on {stream}"),
            source,
        })?;
    created.push(ev);
    Ok(ev)
}

/// An event step: `Step::Record` or `Step::Wait`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum EventStep {
    Record,
    Wait,
}

/// Step `i`: record `ev` (schedule event `event`) on `stream`, or make `stream` wait on
/// it; counted in `lane`. An error names the op before (record) or after (wait) the step
/// on that stream.
pub(super) fn event_step(
    core: &Core,
    lane: &mut Lane,
    kind: EventStep,
    ev: EventHandle,
    event: EventId,
    stream: StreamId,
    i: usize,
) -> Result<(), ExecError> {
    let h = core.stream(stream);
    let (verb, r) = match kind {
        EventStep::Record => ("record", core.plugin.record_event(h, ev)),
        EventStep::Wait => ("wait", core.plugin.wait_event(h, ev)),
    };
    tracing::debug!(target: LOG, %event, %stream, "{verb}");
    r.map_err(|source| ExecError::Step {
        what: format!(
            "{verb} {event} on {stream}{}",
            core.step_context(i, Some(stream), kind == EventStep::Wait)
        ),
        source,
    })?;
    lane.seq += 1;
    match kind {
        EventStep::Record => lane.counts.events_recorded += 1,
        EventStep::Wait => lane.counts.event_waits += 1,
    }
    Ok(())
}

/// Runs host-wait step `step` (`wait`: the plugin's synchronize calls) and, when it
/// succeeds, counts it in the host's `lane` with its start and end (two clock reads per
/// host wait; [`super::Report::host_waits`]).
pub(super) fn timed_wait(
    core: &Core,
    lane: &mut Lane,
    step: usize,
    wait: impl FnOnce() -> Result<(), ExecError>,
) -> Result<(), ExecError> {
    let start_us = core.now_us();
    wait()?;
    lane.waits.push(HostWaitTime {
        step,
        start_us,
        end_us: core.now_us(),
    });
    lane.counts.host_waits += 1;
    Ok(())
}

/// Blocks until `stream` has finished what was issued to it; `step` (the host wait's
/// index) names the op the wait guards in an error. `in_flight` (the ops issued to the
/// stream since its last host wait, kept only for debug logs) is logged and emptied.
pub(super) fn host_wait(
    core: &Core,
    in_flight: &mut Vec<OpId>,
    stream: StreamId,
    kind: HostWaitKind,
    step: Option<usize>,
) -> Result<(), ExecError> {
    let what = || match kind {
        HostWaitKind::Stream => format!("host wait {stream}"),
        HostWaitKind::Device(d) => format!("host wait device {d}"),
    };
    tracing::debug!(target: LOG, %stream, "{}: waiting", what());
    core.plugin
        .synchronize(core.stream(stream))
        .map_err(|source| ExecError::Step {
            what: match step {
                Some(i) => format!("{}{}", what(), core.step_context(i, None, true)),
                None => what(),
            },
            source,
        })?;
    if core.log_debug {
        for op in std::mem::take(in_flight) {
            tracing::debug!(target: LOG, %op, what = %core.graph.describe(op), %stream, "completed");
        }
    }
    tracing::debug!(target: LOG, %stream, "{}: done", what());
    Ok(())
}

/// Blocks until plugin event `ev` (schedule event `event`, recorded by an earlier step
/// that has been issued) has completed; `step` (the host wait's index) names the op the
/// wait guards in an error.
pub(super) fn host_wait_event(
    core: &Core,
    ev: EventHandle,
    event: EventId,
    step: usize,
) -> Result<(), ExecError> {
    tracing::debug!(target: LOG, %event, "host wait {event}: waiting");
    core.plugin
        .synchronize_event(ev)
        .map_err(|source| ExecError::Step {
            what: format!("host wait {event}{}", core.step_context(step, None, true)),
            source,
        })?;
    tracing::debug!(target: LOG, %event, "host wait {event}: done");
    Ok(())
}

/// Runs host op `op` (step `step`) on the host: a host task's kernel and closure, or the
/// final snapshot for `End`.
pub(super) fn run_host(
    core: &Core,
    host_kernels: &HostKernels,
    lane: &mut Lane,
    snapshot: &mut Option<Buffers>,
    op: OpId,
    step: usize,
) -> Result<(), ExecError> {
    let start = core.now_us();
    tracing::debug!(target: LOG, %op, what = %core.graph.describe(op), "host op: start");
    match &core.graph.op(op).kind {
        OpKind::HostTask {
            reads,
            writes,
            call,
            body,
        } => {
            if let Some(call) = call {
                host_call(core, host_kernels, op, call)?;
            }
            if let Some(f) = body {
                host_fn(core, op, f, reads, writes)?;
            }
        }
        OpKind::End if core.snapshot_at_end => *snapshot = Some(read_buffers(core)?),
        _ => {}
    }
    let end = core.now_us();
    tracing::debug!(target: LOG, %op, what = %core.graph.describe(op), "host op: completed");
    lane.push_time(
        step,
        OpTime {
            op,
            stream: None,
            device: core.graph.op(op).device,
            issue_us: start,
            start_us: start,
            end_us: end,
            timed: true,
            batch: 0,
        },
    );
    lane.counts.host_ops += 1;
    lane.counts.ops += 1;
    Ok(())
}

pub(super) fn host_call(
    core: &Core,
    host_kernels: &HostKernels,
    op: OpId,
    call: &KernelCall,
) -> Result<(), ExecError> {
    let k = host_kernels
        .get(&(call.kernel.clone(), call.ty))
        .ok_or_else(|| core.invalid(op, "host kernel not loaded".into()))?;
    let mut raw = Vec::with_capacity(call.args.len());
    for a in &call.args {
        match *a {
            KernelArg::Host { section, .. } => {
                let buf = core
                    .graph
                    .buffers
                    .get(section.buf.index())
                    .ok_or_else(|| core.invalid(op, "unknown buffer".into()))?;
                if section.end() > buf.len {
                    return Err(core.invalid(
                        op,
                        format!(
                            "section {} is outside its buffer",
                            core.graph.section_name(&section)
                        ),
                    ));
                }
                let base = core.host[section.buf.index()]
                    .ok_or_else(|| core.invalid(op, "host buffer not allocated".into()))?;
                raw.push(RawArg::Buffer {
                    ptr: base.offset(section.lo * buf.ty.size_bytes()).as_ptr(),
                    len: section.len,
                    ty: buf.ty,
                });
            }
            KernelArg::Scalar(s) => raw.push(RawArg::Scalar(s)),
            KernelArg::Device { .. } | KernelArg::Empty { .. } => {
                return Err(core.invalid(op, "a host task was given device memory".into()))
            }
        }
    }
    // SAFETY: every buffer range was checked to lie inside its host allocation, which
    // lives until teardown; the schedule's host waits make the host the only user.
    unsafe { k.call(&raw) }.map_err(|source| ExecError::HostKernel {
        op,
        what: core.graph.describe(op),
        region: core.region(op),
        source,
    })
}

/// Calls host task `op`'s closure `f` with views of its declared sections `reads` and
/// `writes` of the host buffers.
fn host_fn(
    core: &Core,
    op: OpId,
    f: &HostFn,
    reads: &[Section],
    writes: &[Section],
) -> Result<(), ExecError> {
    let task = &core.graph.region_of(op).name;
    let host = &core.host;
    // SAFETY: each host buffer was allocated with its `bytes()` in `setup` and
    // initialised there, and lives until teardown, after this call. The schedule's host
    // waits before this op (proven by the verifier for a plan) complete every device op
    // that reads a written section or writes a declared one; ops issued after it that
    // touch them depend on it, so no stream uses them during the call; host ops run one
    // at a time on this thread.
    let mut ctx = unsafe {
        HostCtx::new(
            task,
            &core.graph.buffers,
            Some(f.program()),
            reads,
            writes,
            |b| host.get(b.index()).copied().flatten().map(|p| p.as_ptr()),
        )
        .with_run_failed(&core.failed)
    };
    f.call(&mut ctx).map_err(|source| ExecError::HostFn {
        op,
        task: task.clone(),
        source,
    })
}

pub(super) fn read_buffers(core: &Core) -> Result<Buffers, ExecError> {
    // SAFETY: allocated with `b.bytes()` bytes in `setup`, not freed before teardown;
    // the schedule's host waits (or teardown's synchronize) make the host the only user.
    unsafe { hostmem::snapshot(&core.graph.buffers, &core.host) }
}
