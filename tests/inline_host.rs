//! A run on one thread: the host plugin's `inline_streams` (every stream op run by the
//! thread that issues it) and the executor's `HostOps::Inline` (every host op on the
//! issuing thread, no lane thread). Every graph in graphs/ gives the reference's values
//! that way under jitter, with serial and per-stream issue, and leaks nothing (a kernel
//! failing inline: `embedded_kernels.rs`).

mod common;

use offload_sched::exec::{execute, ExecOptions, HostOps, IssueMode};
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
