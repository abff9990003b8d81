//! Checks that a schedule fits its graph and the plugin before anything is issued
//! ([`ExecError::Schedule`] otherwise): every op exactly once, streams, events and devices
//! in range, a stream for every device op.

use super::ExecError;
use crate::lower::{OpGraph, OpId};
use crate::plugin::Plugin;
use crate::schedule::{Schedule, Step, StreamId};

pub(super) fn validate(
    graph: &OpGraph,
    sched: &Schedule,
    plugin: &dyn Plugin,
) -> Result<(), ExecError> {
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
