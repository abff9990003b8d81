//! A run on one thread: the host plugin's `inline_streams` (every stream op run by the
//! thread that issues it) and the executor's `HostOps::Inline` (every host op on the
//! issuing thread, no lane thread). Every graph in graphs/ gives the reference's values
//! that way under jitter, with serial and per-stream issue, and leaks nothing; a kernel
//! that fails inline is reported at its op as from a stream worker, once.

mod common;

use offload_sched::exec::{execute, ExecError, ExecOptions, HostOps, IssueMode};
use offload_sched::model::{Init, KernelArgs, KernelSig, MapType, ProgramBuilder};
use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
use offload_sched::schedule::ScheduleOptions;
use offload_sched::Plan;

fn inline_plugin(devices: u32, jitter: Option<u64>) -> HostPlugin {
    HostPlugin::new(HostPluginOptions {
        devices,
        delay_jitter: jitter,
        inline_streams: true,
        ..HostPluginOptions::default()
    })
}

fn inline_opts(plan: &Plan, issue: IssueMode) -> ExecOptions {
    ExecOptions {
        kernel_dir: plan.kernel_dir().map(Into::into),
        issue,
        host_ops: HostOps::Inline {
            deferred_lane: Some(1),
        },
        ..ExecOptions::default()
    }
}

#[test]
fn every_graph_gives_the_references_values_on_one_thread() {
    let mut checked = 0;
    let mut with_host_ops = 0;
    for path in common::graph_files() {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let opts = ScheduleOptions {
            host_lanes: 2,
            ..ScheduleOptions::default()
        };
        let Ok(mut plan) = Plan::from_file(&path, &opts) else {
            continue;
        };
        if plan.graph().ops.len() > 2000 {
            continue; // the largest WfCommons workflows: their shapes are in smaller graphs
        }
        plan.scale_spins(0.01).unwrap();
        let want = plan.reference().unwrap();
        let devices = plan.graph().devices.max(1);
        let host = plan.graph().ops.iter().filter(|o| o.kind.is_host()).count();
        with_host_ops += usize::from(host > 1);
        for (k, issue) in [IssueMode::Serial, IssueMode::PerStream]
            .into_iter()
            .enumerate()
        {
            let p = inline_plugin(devices, Some(k as u64 + 1));
            let r = execute(
                plan.graph(),
                plan.schedule(),
                &p,
                &inline_opts(&plan, issue),
            )
            .unwrap_or_else(|e| panic!("{name} {issue:?}: {e}"));
            offload_sched::reference::check(&r.buffers, &want)
                .unwrap_or_else(|e| panic!("{name} {issue:?}: {e}"));
            assert_eq!(r.counts.host_ops, host, "{name} {issue:?}");
            assert_eq!(p.live_device_allocs(), 0, "{name}: device memory leaked");
            assert_eq!(p.live_host_allocs(), 0, "{name}: host memory leaked");
        }
        checked += 1;
    }
    assert!(checked >= 30, "{checked} graphs run");
    assert!(with_host_ops >= 5, "{with_host_ops} graphs with host tasks");
}

/// A Rust kernel that fails on its first call, run inline: the run fails at the kernel's
/// op and region with its message, reported as an asynchronous stream failure (as from
/// a worker), and the next run on the same plugin is clean with the right values.
#[test]
fn a_kernel_failing_inline_is_reported_at_its_op_once() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let failed = Arc::new(AtomicBool::new(false));
    let seen = failed.clone();
    let flaky =
        KernelSig::rust("flaky")
            .reads_writes::<f32>()
            .body(move |args: &mut KernelArgs| {
                if !seen.swap(true, Ordering::SeqCst) {
                    return Err("first call fails".into());
                }
                for v in args.output::<f32>(0)? {
                    *v += 1.0;
                }
                Ok(())
            });
    let mut p = ProgramBuilder::new("one");
    p.kernel(flaky);
    let x = p.buf_init::<f32>("x", 64, Init::Iota);
    drop(p.target("r", "flaky").arg(x).map(MapType::ToFrom, x));
    let plan = Plan::new(p.build(), &ScheduleOptions::default()).unwrap();
    for issue in [IssueMode::Serial, IssueMode::PerStream] {
        failed.store(false, Ordering::SeqCst);
        let plugin = inline_plugin(1, None);
        let opts = inline_opts(&plan, issue);
        let e = execute(plan.graph(), plan.schedule(), &plugin, &opts).unwrap_err();
        let ExecError::Op { region, what, .. } = &e else {
            panic!("{issue:?}: not at an op: {e}");
        };
        assert_eq!(region, "r", "{issue:?}: {e}");
        assert!(what.starts_with("kernel"), "{issue:?}: {what}");
        let e = e.to_string();
        assert!(e.contains("first call fails"), "{issue:?}: {e}");
        assert!(
            e.contains("asynchronous failure on stream"),
            "{issue:?}: {e}"
        );
        assert_eq!(plugin.live_device_allocs(), 0, "{e}");
        let r = execute(plan.graph(), plan.schedule(), &plugin, &opts).unwrap();
        let x = r.buffers.as_f32("x").unwrap();
        assert!(
            x.iter().enumerate().all(|(i, &v)| v == i as f32 + 1.0),
            "{issue:?}"
        );
    }
}
