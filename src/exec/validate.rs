//! Checks that a schedule can run before anything is issued ([`ExecError::Schedule`]
//! otherwise). Its structure (every op exactly once; streams, events and ops in range; a
//! stream of the op's device for every device op, none for a host op) is the verifier's
//! to check ([`verify::check_structure`], one layer); here only what the plugin adds: every
//! device the schedule names exists on the plugin, and its peer copies have a plugin that
//! makes them ([`PluginInfo`]).

use super::ExecError;
use crate::lower::{OpGraph, OpKind};
use crate::plugin::PluginInfo;
use crate::schedule::{Schedule, Step};
use crate::verify::{self, VerifyError, Violation};

/// [`verify::check_order`] (well-formed, and every edge and every conflicting access
/// ordered: running it is safe), its error as [`ExecError::Schedule`]: the first
/// violation, and how many more there are. See `check_order` for the complexity.
pub(super) fn order(graph: &OpGraph, sched: &Schedule) -> Result<(), ExecError> {
    verify::check_order(graph, sched)
        .map(|_| ())
        .map_err(|VerifyError { name, violations }| {
            let mut message = match &violations[0] {
                // A host wait's violation names no op (its `op` is u32::MAX): just the detail.
                Violation::BadIssue { op, detail } if op.0 == u32::MAX => detail.clone(),
                v => v.to_string(),
            };
            if violations.len() > 1 {
                message += &format!(" (and {} more)", violations.len() - 1);
            }
            ExecError::Schedule { name, message }
        })
}

/// Every stream's device and every host-wait device is one the plugin (whose
/// [`PluginInfo`] is `info`) has, and a graph with a peer copy runs only on a plugin with
/// [`PluginInfo::peer_copies`]. The first misfit is the error. `O(S + K)` for `S` streams
/// and `K` steps, plus `O(V)` for `V` ops on a plugin without peer copies.
pub(super) fn fits_plugin(
    graph: &OpGraph,
    sched: &Schedule,
    info: &PluginInfo,
) -> Result<(), ExecError> {
    let err = |message: String| ExecError::Schedule {
        name: sched.name.clone(),
        message,
    };
    let (devices, name) = (info.devices, &info.name);
    for (i, s) in sched.streams.iter().enumerate() {
        if s.device >= devices {
            return Err(err(format!(
                "stream s{i} is on device {}, the {name} plugin has {devices}",
                s.device,
            )));
        }
    }
    for step in &sched.steps {
        if let Step::HostWaitDevice { device } = *step {
            if device >= devices {
                return Err(err(format!(
                    "host wait on device {device}, the {name} plugin has {devices}",
                )));
            }
        }
    }
    // Library tile kernels (model::library) the plugin does not list.
    for op in graph.op_ids() {
        let OpKind::Kernel(call) = &graph.op(op).kind else {
            continue;
        };
        let lib = crate::model::find_kernel(&graph.kernels, &call.kernel)
            .and_then(crate::model::LibraryKernel::of);
        if lib.is_some_and(|k| !info.library_kernels.contains(k.name())) {
            return Err(err(format!(
                "op {op} ({}) in region \"{}\" calls library kernel `{}`; the {name} plugin \
                 does not run it (its library kernels: {})",
                graph.describe(op),
                graph.region_of(op).name,
                call.kernel,
                crate::model::library::list_names(&info.library_kernels)
            )));
        }
    }
    if !info.peer_copies {
        if let Some(op) = graph
            .op_ids()
            .find(|&o| matches!(graph.op(o).kind, OpKind::PeerCopy { .. }))
        {
            return Err(err(format!(
                "op {op} ({}) in region \"{}\" copies between devices; the {name} plugin has \
                 no peer copies",
                graph.describe(op),
                graph.region_of(op).name
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::{execute, execute_verified, ExecError, ExecOptions};
    use crate::lower::OpId;
    use crate::plugin::null::NullPlugin;
    use crate::schedule::{Step, StreamId};
    use crate::verify::tests::saxpy;

    fn message(e: ExecError) -> String {
        match e {
            ExecError::Schedule { message, .. } => message,
            e => panic!("not a schedule error: {e}"),
        }
    }

    #[test]
    fn a_malformed_schedule_is_refused_with_the_verifiers_first_violation() {
        let (g, mut s) = saxpy();
        let p = NullPlugin::new();
        s.steps.push(Step::Op(OpId(0)));
        s.steps.push(Step::HostWait {
            stream: StreamId(99),
        });
        let e = execute(&g, &s, &p, &ExecOptions::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "schedule \"saxpy\" cannot run: op #0: issued twice (and 1 more)"
        );
        assert_eq!(p.live_device_allocs(), 0);
        s.steps.truncate(s.steps.len() - 2);
        s.steps.insert(
            0,
            Step::HostWait {
                stream: StreamId(99),
            },
        );
        let e = execute(&g, &s, &p, &ExecOptions::default()).unwrap_err();
        assert_eq!(message(e), "host wait on missing stream s99");
    }

    #[test]
    fn a_device_the_plugin_lacks_is_named_first() {
        let (g, mut s) = saxpy();
        let p = NullPlugin::new();
        s.streams[0].device = 3;
        let e = execute(&g, &s, &p, &ExecOptions::default()).unwrap_err();
        assert_eq!(
            message(e),
            "stream s0 is on device 3, the null plugin has 1"
        );
        let (g, mut s) = saxpy();
        s.steps.insert(0, Step::HostWaitDevice { device: 1 });
        let e = execute_verified(&g, &s, &p, &ExecOptions::default()).unwrap_err();
        assert_eq!(message(e), "host wait on device 1, the null plugin has 1");
    }

    #[test]
    fn a_verified_schedule_runs_without_the_structural_check() {
        let (g, s) = saxpy();
        crate::verify::verify(&g, &s).unwrap();
        let p = NullPlugin::new();
        let r = execute_verified(&g, &s, &p, &ExecOptions::default()).unwrap();
        assert_eq!(r.ops.len(), g.ops.len());
        assert_eq!(p.live_device_allocs(), 0);
    }
}
