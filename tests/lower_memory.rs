//! The host memory bound that the lowering checks before it lowers anything
//! (`offload_sched::lower::size`, issue 25 point 6) holds: a counting allocator measures
//! the peak of lowering, scheduling, verifying and running a taskgraph-heavy program
//! under each policy, and the peak stays within `graph_bytes` (and not far under it: the
//! bound is a bound, not a guess ten times too big).

use offload_sched::lower::size::{graph_bytes, op_bound};
use offload_sched::model::{MapType, ProgramBuilder};
use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
use offload_sched::schedule::{ScheduleOptions, SyncPolicy};
use offload_sched::Plan;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            let now = LIVE.fetch_add(l.size(), Relaxed) + l.size();
            PEAK.fetch_max(now, Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        LIVE.fetch_sub(l.size(), Relaxed);
    }
}

#[global_allocator]
static A: Counting = Counting;

/// A taskgraph of `repeat` executions of one region mapping `maps` buffers (the first
/// `to`, the others `tofrom`), then a taskwait.
fn program(repeat: u32, maps: usize) -> offload_sched::model::Program {
    let mut p = ProgramBuilder::new("tg");
    let bufs: Vec<_> = (0..maps)
        .map(|i| p.buf::<f32>(&format!("b{i}"), 16))
        .collect();
    p.taskgraph("t", repeat, |p| {
        let mut r = p.target("r", "saxpy").num(2.0).arg(bufs[0]).arg(bufs[1]);
        for (i, b) in bufs.iter().enumerate() {
            r = r.map(if i == 0 { MapType::To } else { MapType::ToFrom }, *b);
        }
        drop(r);
    });
    p.taskwait();
    p.build()
}

#[test]
fn lowering_scheduling_and_running_stay_within_the_checked_bound() {
    for (repeat, maps) in [(20_000, 2), (6_000, 6)] {
        for policy in [
            SyncPolicy::PerOp,
            SyncPolicy::PerRegion,
            SyncPolicy::Minimal,
        ] {
            let what = format!("{repeat} × {maps} maps, {policy:?}");
            let program = program(repeat, maps);
            let bound = graph_bytes(&program);
            assert_eq!(
                op_bound(&program.body),
                u64::from(repeat) * (1 + 4 * maps as u64) + 1
            );
            let plugin = HostPlugin::new(HostPluginOptions::default());
            let base = LIVE.load(Relaxed);
            PEAK.store(base, Relaxed);
            let opts = ScheduleOptions {
                policy,
                ..ScheduleOptions::default()
            };
            // Transfer elision off: the bound is for the copies the mapping rules name
            // (every execution maps its buffers afresh), and this program is its worst
            // case; with elision the graph only shrinks (kept copies, fewer ops).
            let plan = Plan::new_lowered(
                program,
                &opts,
                &offload_sched::lower::LowerOptions::no_elide(),
            )
            .unwrap();
            let report = plan.run(&plugin).unwrap();
            assert_eq!(report.buffers.as_f32("b1").unwrap().len(), 16);
            let peak = (PEAK.load(Relaxed) - base) as u64;
            drop((plan, report));
            println!("{what}: peak {peak} B, bound {bound} B");
            assert!(
                peak <= bound,
                "{what}: peak {peak} B over the bound {bound} B"
            );
            assert!(
                peak * 6 >= bound,
                "{what}: peak {peak} B, the bound {bound} B is more than 6× it"
            );
        }
    }
}
