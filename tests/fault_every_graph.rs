//! Fault injection over every graph of `graphs/` (issue 4): for every fault kind (alloc,
//! h2d, launch, d2h, record, wait, synchronize) and every `k` from 1 to the number of
//! calls of that kind in a clean run, the `k`-th call fails
//! ([`FaultyPlugin`] over the host plugin). Each run must return an error that names
//! the op and region (`region "`), free every device and host allocation it made,
//! leave no worker thread running once the plugin is dropped, and not panic.
//!
//! `montage-2mass-05d` (about 10 000 ops) is capped at the first and last
//! [`HUGE_CAP`] calls of each kind. Fault points exercised: 2 131 over 26 graphs (printed by the
//! test and asserted exactly, so a change in any schedule shows here).

use offload_sched::exec::{execute, ExecOptions};
use offload_sched::lower::{lower, KernelArg, OpGraph, OpKind};
use offload_sched::model::Scalar;
use offload_sched::plugin::faulty::{FaultKind, FaultyPlugin};
use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
use offload_sched::schedule::{schedule, Schedule, ScheduleOptions};
use std::path::PathBuf;

/// Calls per kind exercised at each end for the huge graph.
const HUGE_CAP: u64 = 5;

/// Total fault points this test exercises (see the module docs).
const FAULT_POINTS: u64 = 2_131;

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| d.count())
        .unwrap_or(0)
}

fn host(devices: u32) -> HostPlugin {
    HostPlugin::new(HostPluginOptions {
        devices,
        delay_jitter: None,
        library_dir: None,
    })
}

/// Sets every built-in `spin(us)` to 0 µs: the WfCommons graphs spin for their scaled
/// runtimes, which only costs time here (what is in flight is drained after a fault).
fn no_spin(g: &mut OpGraph) {
    for op in &mut g.ops {
        if let OpKind::Kernel(call) = &mut op.kind {
            if call.kernel == "spin" {
                for a in &mut call.args {
                    if let KernelArg::Scalar(Scalar::F64(us)) = a {
                        *us = 0.0;
                    }
                }
            }
        }
    }
}

fn graphs() -> Vec<(String, OpGraph, Schedule)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("graphs");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let (_, program) = offload_sched::file::load(&p).unwrap();
            let mut g = lower(&program).unwrap();
            no_spin(&mut g);
            // Random streams so that events (record / wait faults) occur in every graph
            // that has more than one region.
            let s = schedule(
                &g,
                &ScheduleOptions {
                    random_streams: Some(1),
                    ..ScheduleOptions::default()
                },
            );
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            (name, g, s)
        })
        .collect()
}

/// One faulty run: the fault must be injected and handled as the module docs require.
fn one(name: &str, g: &OpGraph, s: &Schedule, kind: FaultKind, k: u64) {
    let before = threads();
    {
        let p = FaultyPlugin::new(host(g.devices), kind, k);
        let r = execute(g, s, &p, &ExecOptions::default());
        assert!(p.injected(), "{name} {kind:?} k={k}: no fault injected");
        let msg = match r {
            Ok(_) => panic!("{name} {kind:?} k={k}: the run succeeded"),
            Err(e) => e.to_string(),
        };
        assert!(
            msg.contains("injected fault"),
            "{name} {kind:?} k={k}: {msg}"
        );
        assert!(msg.contains("region \""), "{name} {kind:?} k={k}: {msg}");
        assert_eq!(p.allocs(), p.frees(), "{name} {kind:?} k={k}: {msg}");
        assert_eq!(p.host_allocs(), p.host_frees(), "{name} {kind:?} k={k}");
        assert_eq!(p.inner().live_device_allocs(), 0, "{name} {kind:?} k={k}");
        assert_eq!(p.inner().live_host_allocs(), 0, "{name} {kind:?} k={k}");
    }
    // A joined thread's /proc entry can outlive pthread_join by a moment: allow 2 s.
    let t0 = std::time::Instant::now();
    while threads() > before && t0.elapsed().as_secs() < 2 {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(
        threads(),
        before,
        "{name} {kind:?} k={k}: worker threads left"
    );
}

#[test]
fn every_fault_point_of_every_graph_fails_cleanly() {
    // Start rayon's global pool (large host kernels use it; its threads live for the
    // whole process) so that the thread count before and after each run is comparable.
    rayon::join(|| (), || ());
    let mut total = 0u64;
    for (name, g, s) in graphs() {
        let clean = FaultyPlugin::new(host(g.devices), FaultKind::Alloc, 0);
        execute(&g, &s, &clean, &ExecOptions::default())
            .unwrap_or_else(|e| panic!("{name}: clean run failed: {e}"));
        let huge = g.ops.len() > 5000;
        let mut line = format!("{name}:");
        for kind in FaultKind::ALL {
            let n = clean.calls(kind);
            let ks: Vec<u64> = if huge && n > 2 * HUGE_CAP {
                (1..=HUGE_CAP).chain(n - HUGE_CAP + 1..=n).collect()
            } else {
                (1..=n).collect()
            };
            for &k in &ks {
                one(&name, &g, &s, kind, k);
            }
            total += ks.len() as u64;
            line += &format!(" {kind:?}={}/{n}", ks.len());
        }
        eprintln!("{line}");
    }
    eprintln!("fault points exercised: {total}");
    assert_eq!(total, FAULT_POINTS);
}
