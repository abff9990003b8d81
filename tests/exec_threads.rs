//! Worker threads a run starts (issue 25 point 7): only for the streams the schedule
//! uses. On the host plugin every plugin stream is a worker thread named
//! `offload-stream-N`; this file holds one test so that no other test's plugin adds
//! threads to the count.

use offload_sched::exec::{execute, ExecOptions};
use offload_sched::model::{ElemType, Init, MapType, ProgramBuilder};
use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
use offload_sched::schedule::{schedule, ScheduleOptions};

/// Threads of this process whose name starts with `offload-stream` (Linux: the `comm`
/// of each task in /proc/self/task); `None` where /proc is not there.
fn stream_threads() -> Option<usize> {
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    Some(
        tasks
            .flatten()
            .filter(|t| {
                std::fs::read_to_string(t.path().join("comm"))
                    .is_ok_and(|c| c.starts_with("offload-stream"))
            })
            .count(),
    )
}

#[test]
fn a_run_starts_worker_threads_only_for_the_streams_its_schedule_uses() {
    const DEVICES: u32 = 64;
    const STREAMS: u32 = 16;
    // One region on device 3 of 64, 16 streams per device: the schedule has 1 024
    // streams and uses one.
    let mut p = ProgramBuilder::new("one_of_many");
    p.devices(DEVICES);
    let x = p.buffer("x", ElemType::F32, 256, Init::Iota);
    let y = p.buffer("y", ElemType::F32, 256, Init::Fill(1.0));
    p.target("saxpy", "saxpy")
        .num(2.0)
        .arg(x)
        .arg(y)
        .map(MapType::To, x)
        .map(MapType::ToFrom, y)
        .device(3);
    let g = offload_sched::lower::lower(&p.build()).unwrap();
    let s = schedule(
        &g,
        &ScheduleOptions {
            streams_per_device: STREAMS,
            ..ScheduleOptions::default()
        },
    );
    assert_eq!(s.streams.len(), (DEVICES * STREAMS) as usize);
    assert_eq!(s.used_streams(), 1);
    let plugin = HostPlugin::new(HostPluginOptions {
        devices: DEVICES,
        ..HostPluginOptions::default()
    });
    let before = stream_threads();
    let r = execute(&g, &s, &plugin, &ExecOptions::default()).unwrap();
    let y = r.as_f32("y").unwrap();
    assert_eq!(&y[..3], &[1.0, 3.0, 5.0], "saxpy 2·x + y");
    assert_eq!(r.plugin_streams, 1);
    // The plugin keeps its workers until it is dropped: count them now.
    if let (Some(before), Some(after)) = (before, stream_threads()) {
        assert_eq!(after - before, 1, "worker threads started by the run");
    }
    drop(plugin);
}
