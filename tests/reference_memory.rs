//! Peak heap use of the reference interpreter and of runs on the host plugin, measured
//! with a counting global allocator (this test binary's own; one test, so nothing else
//! allocates meanwhile), against the estimates of `offload_sched::estimate`.
//!
//! Each program's bytes are known by construction: `buffers` (every host buffer) and
//! `device` (the peak of the device allocations live at once, in program order). The
//! reference holds its host buffers (which become its result, moved, not copied) and
//! the live device copies; nothing else of buffer size (it held 3× to 3.5× the buffers
//! before: two temporary copies per buffer at initialisation, a decoded copy of every
//! buffer as its result).

use offload_sched::exec::IssueMode;
use offload_sched::model::{ElemType, Init, MapType, ProgramBuilder, Section};
use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
use offload_sched::schedule::{ScheduleOptions, SyncPolicy};
use offload_sched::Plan;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let now = CURRENT.fetch_add(bytes, SeqCst) + bytes;
    PEAK.fetch_max(now, SeqCst);
}

// SAFETY: every call is forwarded to `System` unchanged; only the byte counts are kept.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded (caller's contract).
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded (caller's contract).
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded (caller's contract).
        unsafe { System.dealloc(ptr, layout) };
        CURRENT.fetch_sub(layout.size(), SeqCst);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded (caller's contract).
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            CURRENT.fetch_sub(layout.size(), SeqCst);
            grew(new_size);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Peak heap bytes above the level before `f`, while `f` runs (its result included).
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let base = CURRENT.load(SeqCst);
    PEAK.store(base, SeqCst);
    let out = f();
    (out, (PEAK.load(SeqCst) - base) as u64)
}

const N: u64 = 4 << 20; // 4 Mi f32 = 16 MiB per buffer

/// `tiles` regions, each mapping one tile of `x` tofrom (one device tile live at a time).
fn tiled(tiles: u64) -> (offload_sched::model::Program, u64, u64) {
    let mut b = ProgramBuilder::new("tiled");
    let x = b.buffer("x", ElemType::F32, N, Init::Iota);
    let t = N / tiles;
    for i in 0..tiles {
        let s = Section::new(x, i * t, t);
        b.target(&format!("r{i}"), "increment")
            .arg(s)
            .map(MapType::ToFrom, s);
    }
    (b.build(), N * 4, t * 4)
}

/// `x` and `y` entered whole and never exited: both device copies live at the end.
fn entered() -> (offload_sched::model::Program, u64, u64) {
    let mut b = ProgramBuilder::new("entered");
    let x = b.buffer("x", ElemType::F32, N, Init::Fill(1.0));
    let y = b.buffer("y", ElemType::F32, N, Init::Random(3));
    b.enter_data("in", vec![b.map(MapType::To, x), b.map(MapType::To, y)]);
    b.target("saxpy", "saxpy")
        .num(2.0)
        .arg(x)
        .arg(y)
        .map(MapType::To, x)
        .map(MapType::ToFrom, y);
    (b.build(), 2 * N * 4, 2 * N * 4)
}

/// 1 MiB of slack for the interpreter's and the executor's own small allocations.
const SLACK: u64 = 1 << 20;

#[test]
fn the_reference_and_runs_stay_within_their_estimates() {
    for (program, buffers, device) in [tiled(8), entered()] {
        let name = program.name.clone();
        let plan = Plan::new(program, &ScheduleOptions::default()).unwrap();
        let (result, peak) = peak_of(|| plan.reference().unwrap());
        assert_eq!(result.len(), plan.graph().buffers.len());
        drop(result);
        let factor = peak as f64 / buffers as f64;
        eprintln!(
            "{name}: buffers {buffers} B, device peak {device} B, reference peak {peak} B ({factor:.2}× the buffers)"
        );
        assert!(
            peak <= buffers + device + SLACK,
            "{name}: the reference's peak {peak} B exceeds buffers {buffers} B + device {device} B"
        );
        // The estimate is exact here.
        assert_eq!(
            plan.reference_memory(),
            (buffers + device, buffers),
            "{name}"
        );
        // Runs on the host plugin (no free lists: every block freed in stream order)
        // stay within their estimate, whatever the policy and issue.
        for policy in SyncPolicy::ALL {
            let plan = plan
                .reschedule(&ScheduleOptions {
                    policy,
                    ..ScheduleOptions::default()
                })
                .unwrap();
            for issue in [IssueMode::Serial, IssueMode::PerStream] {
                let host = HostPlugin::new(HostPluginOptions {
                    device_cache_bytes: 0,
                    ..HostPluginOptions::default()
                });
                let need = plan.memory_need(&host);
                let (report, peak) = peak_of(|| plan.run_with(&host, issue).unwrap());
                drop(report);
                eprintln!("{name} {policy} {issue:?}: run peak {peak} B, estimate {need}");
                assert!(
                    peak <= need.total() + SLACK,
                    "{name} {policy} {issue:?}: the run's peak {peak} B exceeds its estimate {need}"
                );
            }
        }
    }
    // The host plugin's free lists (issue 25 point 6): on each of 8 devices, regions of
    // four sizes (1 to 4 MiB: four size classes), each followed by a host task that reads
    // its result, so the host waits past each region's free and its block is no longer
    // live but stays cached (no later allocation of its class takes it). Without the
    // cache in the estimate, the run's peak (buffers, the cached blocks, the snapshot)
    // was over it by the cached blocks, 80 MiB.
    let (program, cached) = cached_on_devices(8);
    let plan = Plan::new(program, &ScheduleOptions::default()).unwrap();
    let host = HostPlugin::new(HostPluginOptions {
        devices: 8,
        ..HostPluginOptions::default()
    });
    let need = plan.memory_need(&host);
    assert_eq!(need.device_cache, cached, "{need}");
    let (report, peak) = peak_of(|| plan.run_with(&host, IssueMode::Serial).unwrap());
    drop(report);
    let stats = host.device_cache_stats();
    eprintln!("cached on 8 devices: run peak {peak} B, estimate {need}, cache {stats:?}");
    assert_eq!(stats.bytes, cached, "every block stays cached");
    assert!(
        peak <= need.total() + SLACK,
        "the run's peak {peak} B exceeds its estimate {need}"
    );
    assert!(
        peak > need.total() - need.device_cache + SLACK,
        "without the cache the estimate would hold: {peak} B, {need}"
    );
}

/// On each of `devices` devices, four regions of 1, 2, 3 and 4 MiB (one buffer each,
/// mapped tofrom), each followed by a host task reading it. Returns the program and the
/// bytes its freed blocks take on the host plugin's free lists: all of them (four size
/// classes per device, each freed once).
fn cached_on_devices(devices: u32) -> (offload_sched::model::Program, u64) {
    let mut b = ProgramBuilder::new("cached");
    b.devices(devices);
    let mut cached = 0;
    for d in 0..devices {
        for k in 1..=4u64 {
            let n = k << 18; // k MiB of f32
            let x = b.buffer(&format!("x{d}_{k}"), ElemType::F32, n, Init::Iota);
            b.target(&format!("r{d}_{k}"), "increment")
                .arg(x)
                .map(MapType::ToFrom, x)
                .device(d);
            b.host_task(&format!("read{d}_{k}"), &[x.into()], &[]);
            cached += offload_sched::plugin::size_class(n * 4);
        }
    }
    (b.build(), cached)
}
