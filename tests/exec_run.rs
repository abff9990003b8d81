//! The executor on the host plugin: whole programs run as plans (lower → schedule →
//! verify → execute), checked against the reference interpreter and against
//! hand-computed values; traces; fault injection. Schedules broken by hand go to
//! `exec::execute` directly.

mod common;

use common::saxpy;
use offload_sched::exec::{execute, ExecError, ExecOptions, IssueMode};
use offload_sched::model::{
    Arg, DependType, ElemType, Init, KernelSig, KernelSource, MapType, Param, ParamKind, Program,
    ProgramBuilder,
};
use offload_sched::plugin::faulty::{FaultyPlugin, RUN_CALLS};
use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
use offload_sched::plugin::PluginError;
use offload_sched::reference::check;
use offload_sched::schedule::{ScheduleOptions, Step, SyncPolicy};
use offload_sched::timeline;
use offload_sched::verify::verify;
use offload_sched::Plan;

/// The host plugin, one device.
fn host(jitter: Option<u64>) -> HostPlugin {
    common::host(1, jitter)
}

/// `program`'s plan under `policy` (4 streams, `random` stream assignment).
fn plan(program: Program, policy: SyncPolicy, random: Option<u64>) -> Plan {
    Plan::new(program, &options(policy, random)).unwrap()
}

fn options(policy: SyncPolicy, random: Option<u64>) -> ScheduleOptions {
    ScheduleOptions {
        policy,
        streams_per_device: 4,
        random_streams: random,
        host_lanes: 1,
    }
}

/// 16 independent nowait regions, then a chain over one buffer with depend clauses, a
/// taskwait, a host kernel and a final region: exercises events, several streams and
/// host ops.
fn mixed() -> Program {
    let n = 512;
    let mut p = ProgramBuilder::new("mixed");
    let mut ys = Vec::new();
    for i in 0..16 {
        let x = p.buffer(&format!("x{i}"), ElemType::F64, n, Init::Random(i));
        let y = p.buffer(&format!("y{i}"), ElemType::F64, n, Init::Iota);
        p.target(&format!("r{i}"), "saxpy")
            .num(0.5 + i as f64)
            .arg(x)
            .arg(y)
            .map(MapType::To, x)
            .map(MapType::ToFrom, y)
            .nowait();
        ys.push(y);
    }
    let c = p.buffer("c", ElemType::I32, n, Init::Zeros);
    for i in 0..6 {
        p.target(&format!("inc{i}"), "add_scalar")
            .arg(c)
            .num(i as f64 + 1.0)
            .map(MapType::ToFrom, c)
            .depend(DependType::InOut, c)
            .nowait();
    }
    p.taskwait();
    let s = p.buffer("s", ElemType::F64, 1, Init::Zeros);
    p.host_kernel(
        "sum",
        "reduce_sum",
        vec![Arg::Buffer(p.sec(ys[3])), Arg::Buffer(p.sec(s))],
    );
    let z = p.buffer("z", ElemType::F64, n, Init::Zeros);
    p.target("add", "add")
        .arg(ys[0])
        .arg(ys[1])
        .arg(z)
        .map(MapType::To, ys[0])
        .map(MapType::To, ys[1])
        .map(MapType::From, z);
    p.build()
}

#[test]
fn saxpy_every_policy_gives_the_hand_computed_answer() {
    let want: Vec<f32> = (0..1000).map(|i| 2.0 * i as f32 + 1.0).collect();
    for policy in SyncPolicy::ALL {
        let plan = plan(saxpy(1000), policy, None);
        let (g, s) = (plan.graph(), plan.schedule());
        let p = host(None);
        let r = plan.run(&p).unwrap();
        assert_eq!(r.as_f32("y").unwrap(), &want[..], "{policy}");
        assert_eq!(r.as_f32("x").unwrap()[999], 999.0);
        assert_eq!(r.counts.ops, g.ops.len());
        assert_eq!(r.counts.host_waits, s.host_waits().count());
        assert_eq!(r.bytes_h2d, 8000);
        assert_eq!(r.bytes_d2h, 4000);
        assert_eq!(r.ops.len(), g.ops.len());
        assert!(r
            .ops
            .iter()
            .all(|t| t.start_us <= t.end_us && t.end_us <= r.wall_us));
        assert_eq!(p.live_device_allocs(), 0);
        assert_eq!(p.live_host_allocs(), 0);
    }
}

/// A run's results read by name: `Report::read` says why a read fails (the Option forms
/// only that it did).
#[test]
fn report_read_names_an_unknown_buffer_or_the_wrong_element_type() {
    let r = plan(saxpy(8), SyncPolicy::Minimal, None)
        .run(&host(None))
        .unwrap();
    assert_eq!(r.read::<f32>("y").unwrap()[3], 7.0);
    assert_eq!(r.read::<f32>("y").ok(), r.as_f32("y"));
    assert_eq!(
        r.read::<f64>("y").unwrap_err().to_string(),
        "buffer \"y\" holds f32 elements, not f64: read it as f32"
    );
    assert!(r.as_f64("y").is_none());
    assert_eq!(
        r.read::<f32>("z").unwrap_err().to_string(),
        "no buffer \"z\" in the results; the buffers are \"x\", \"y\""
    );
}

#[test]
fn mixed_program_matches_reference_under_jitter_and_random_streams() {
    let mixed = plan(mixed(), SyncPolicy::Minimal, None);
    let want = mixed.reference().unwrap();
    // Hand checks of the reference itself.
    let c = want.as_i32("c").unwrap();
    assert!(c.iter().all(|v| *v == 21), "1+2+...+6");
    let y3 = want.as_f64("y3").unwrap();
    let s = want.as_f64("s").unwrap()[0];
    assert_eq!(s, y3.iter().sum::<f64>());
    assert_eq!(y3[0], 3.5 * want.as_f64("x3").unwrap()[0]);
    for seed in 0..6 {
        for policy in SyncPolicy::ALL {
            let random = (seed % 2 == 1).then_some(seed);
            let plan = mixed.reschedule(&options(policy, random)).unwrap();
            let p = host(Some(seed));
            let what = format!("seed {seed} {policy}");
            let r = common::run_checked(&what, &plan, &p, IssueMode::Auto, &want);
            assert_eq!(
                r.counts.events_recorded,
                plan.schedule()
                    .steps
                    .iter()
                    .filter(|s| matches!(s, Step::Record { .. }))
                    .count()
            );
        }
    }
}

#[test]
fn trace_is_valid_chrome_json() {
    let plan = plan(mixed(), SyncPolicy::Minimal, None);
    let (g, s) = (plan.graph(), plan.schedule());
    let r = plan.run(&host(None)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.json");
    timeline::trace::write_chrome_trace(&r, g, s, &path).unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let evs = v["traceEvents"].as_array().unwrap();
    // One slice per op on the host and stream tracks; the others are setup, teardown,
    // host waits and the critical path's copies of ops.
    let x: Vec<_> = evs
        .iter()
        .filter(|e| e["ph"] == "X")
        .filter(|e| !["run", "host wait", "critical path"].contains(&e["cat"].as_str().unwrap()))
        .collect();
    assert_eq!(x.len(), g.ops.len());
    assert!(x
        .iter()
        .any(|e| e["name"] == "kernel saxpy" && e["tid"].as_u64().unwrap() >= 1));
    assert!(x
        .iter()
        .any(|e| e["name"] == "host reduce_sum" && e["tid"] == 0));
    let names: Vec<&str> = evs
        .iter()
        .filter(|e| e["name"] == "thread_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names[0], "host");
    assert!(names.contains(&"s0 (device 0)"));
    assert_eq!(names[names.len() - 1], "critical path");
    assert_eq!(names.len(), 2 + s.used_streams());
}

#[test]
fn injected_faults_never_leak() {
    let plan = plan(mixed(), SyncPolicy::Minimal, Some(5));
    assert!(
        plan.schedule().events > 0,
        "the schedule should exercise events"
    );
    let mut injected = 0;
    for kind in RUN_CALLS {
        for k in 1.. {
            let p = FaultyPlugin::new(host(Some(k)), kind, k);
            let r = plan.run(&p);
            if !p.injected() {
                r.unwrap();
                break;
            }
            injected += 1;
            let e = common::exec_error(r.expect_err("an injected fault must fail the run"));
            let msg = e.to_string();
            assert!(msg.contains("injected fault"), "{msg}");
            match &e {
                ExecError::Op { region, source, .. } => {
                    assert!(!region.is_empty());
                    assert_eq!(source.call(), kind);
                }
                ExecError::Step { source, .. } => {
                    assert!(matches!(source, PluginError::Injected { .. }))
                }
                other => panic!("unexpected error {other}"),
            }
            assert_eq!(p.allocs(), p.frees(), "{kind:?} k={k}: {msg}");
            assert_eq!(p.host_allocs(), p.host_frees(), "{kind:?} k={k}");
            assert_eq!(p.inner().live_device_allocs(), 0);
            assert_eq!(p.inner().live_host_allocs(), 0);
        }
    }
    assert!(injected > 50, "{injected}");
}

#[test]
fn saxpy_fault_at_every_k_frees_everything() {
    let plan = plan(saxpy(64), SyncPolicy::PerOp, None);
    for kind in RUN_CALLS {
        for k in 1..=8 {
            let p = FaultyPlugin::new(host(None), kind, k);
            let r = plan.run(&p);
            assert_eq!(r.is_err(), p.injected(), "{kind:?} k={k}");
            assert_eq!(p.allocs(), p.frees(), "{kind:?} k={k}");
            assert_eq!(p.inner().live_device_allocs(), 0);
        }
    }
}

const SLOW: &str = r#"
#include <stdint.h>
#include <time.h>
void slow_inc(int32_t* x, int64_t n) {
    struct timespec t = {0, 50 * 1000 * 1000};
    nanosleep(&t, 0);
    for (int64_t i = 0; i < n; i++) x[i] += 1;
}
"#;

#[test]
fn user_kernel_runs_and_a_missing_host_wait_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    common::build_so(dir.path(), "slow", SLOW).expect("cc failed");
    let mut p = ProgramBuilder::new("slow");
    p.kernel(KernelSig {
        name: "slow_inc".into(),
        params: vec![Param {
            name: "x".into(),
            kind: ParamKind::parse("inout i32*").unwrap(),
        }],
        source: KernelSource::User {
            library: Some("libslow.so".into()),
            cuda: None,
            symbol: "slow_inc".into(),
        },
    });
    let x = p.buffer("x", ElemType::I32, 100, Init::Iota);
    p.target("slow", "slow_inc").arg(x).map(MapType::ToFrom, x);
    let plan = plan(p.build(), SyncPolicy::Minimal, None).with_kernel_dir(dir.path());
    let (g, s) = (plan.graph(), plan.schedule());
    let plugin = HostPlugin::new(HostPluginOptions {
        library_dir: Some(dir.path().to_path_buf()),
        ..HostPluginOptions::default()
    });
    let want = plan.reference().unwrap();
    assert_eq!(want.as_i32("x").unwrap()[99], 100);
    let r = plan.run(&plugin).unwrap();
    check(&r.buffers, &want).unwrap();
    let kernel = r
        .ops
        .iter()
        .find(|t| g.describe(t.op) == "kernel slow_inc")
        .unwrap();
    assert!(kernel.end_us - kernel.start_us >= 50_000.0, "{kernel:?}");

    // Drop the host wait: End would read x while the kernel still sleeps. A schedule
    // broken by hand is refused by the verifier and by `exec::execute` (which proves
    // every edge ordered before it issues anything), naming the edge; nothing runs.
    let mut broken = s.clone();
    broken
        .steps
        .retain(|s| !matches!(s, Step::HostWait { .. } | Step::HostWaitDevice { .. }));
    assert!(verify(g, &broken).is_err());
    let opts = ExecOptions {
        kernel_dir: Some(dir.path().to_path_buf()),
        ..ExecOptions::default()
    };
    let e = execute(g, &broken, &plugin, &opts).unwrap_err();
    assert!(matches!(e, ExecError::Schedule { .. }), "{e}");
    assert!(
        e.to_string().contains("-> ") && e.to_string().contains("is not ordered"),
        "{e}"
    );
    assert!(
        e.to_string().contains("(end)") || e.to_string().contains("end"),
        "{e}"
    );
    assert_eq!(plugin.live_device_allocs(), 0);
    assert_eq!(plugin.live_host_allocs(), 0);
}

/// Schedules broken by hand: `exec::execute` checks their fit.
#[test]
fn schedule_that_does_not_fit_is_rejected_before_running() {
    let plan = plan(saxpy(8), SyncPolicy::Minimal, None);
    let g = plan.graph();
    let mut s = plan.schedule().clone();
    let p = host(None);
    s.steps.pop();
    let e = execute(g, &s, &p, &ExecOptions::default()).unwrap_err();
    assert!(matches!(e, ExecError::Schedule { .. }), "{e}");
    assert!(e.to_string().contains("never issued"), "{e}");
    let mut s2 = plan.schedule().clone();
    s2.streams[0].device = 3;
    let e = execute(g, &s2, &p, &ExecOptions::default()).unwrap_err();
    assert!(e.to_string().contains("device 3"), "{e}");
    assert_eq!(p.live_host_allocs(), 0);
}

/// Two 20 ms spins in parallel, then a 10 ms spin after both (depend clauses, no maps):
/// the critical path is one 20 ms spin and the 10 ms one.
fn spin_fork_join() -> Program {
    let mut p = ProgramBuilder::new("spin-fork-join");
    let a = p.buffer("a", ElemType::U8, 1, Init::Zeros);
    let b = p.buffer("b", ElemType::U8, 1, Init::Zeros);
    p.target("left", "spin")
        .num(20_000.0)
        .nowait()
        .depend(DependType::Out, a);
    p.target("right", "spin")
        .num(20_000.0)
        .nowait()
        .depend(DependType::Out, b);
    p.target("join", "spin")
        .num(10_000.0)
        .nowait()
        .depend(DependType::In, a)
        .depend(DependType::In, b);
    p.build()
}

#[test]
fn overlap_of_a_spin_fork_join_on_the_host_plugin() {
    let plan = plan(spin_fork_join(), SyncPolicy::Minimal, None);
    let g = plan.graph();
    let kernel = |name: &str| {
        g.op_ids()
            .find(|&op| g.region_of(op).name == name)
            .unwrap_or_else(|| panic!("no op of region {name}"))
    };
    let (left, right, join) = (kernel("left"), kernel("right"), kernel("join"));
    let s = plan.schedule();
    assert_ne!(s.op_stream[left.index()], s.op_stream[right.index()]);
    let r = plan.run(&host(None)).unwrap();
    let o = timeline::overlap(g, &r).expect("the host plugin times every op");
    let dur = |op: offload_sched::lower::OpId| {
        let t = r.ops.iter().find(|t| t.op == op).unwrap();
        assert!(t.timed);
        t.end_us - t.start_us
    };
    let (dl, dr, dj) = (dur(left), dur(right), dur(join));
    // spin busy-waits at least its argument.
    assert!(
        dl >= 20_000.0 && dr >= 20_000.0 && dj >= 10_000.0,
        "{dl} {dr} {dj}"
    );
    // The critical path is the longer spin, then the join (other ops take µs).
    let longer = if dl >= dr { left } else { right };
    assert!(o.critical_ops.contains(&longer), "{:?}", o.critical_ops);
    assert!(o.critical_ops.contains(&join), "{:?}", o.critical_ops);
    let bound = dl.max(dr) + dj;
    assert!(
        o.critical_path_us >= bound - 1e-6 && o.critical_path_us < bound + 1_000.0,
        "{} vs {bound}",
        o.critical_path_us
    );
    // What was measured is consistent: no run beats its critical path; busy time is at
    // least the spins' and at most the span per lane (1e-6: sums in another order).
    assert!(o.critical_path_us <= o.span_us + 1e-6, "{o:?}");
    assert!(o.busy_total_us() >= dl + dr + dj - 1e-6, "{o:?}");
    assert_eq!(o.host_busy_us, 0.0);
    assert_eq!(o.busy_us.len(), 2, "{o:?}");
    for busy in o.busy_us.values() {
        assert!(*busy <= o.span_us + 1e-6, "{o:?}");
    }
    // Ideally 50 ms busy over a 30 ms span: 5/3. On 2 loaded cores a descheduled spin
    // runs long, so only: the two spins overlapped somewhat, and no more than their
    // durations allow (busy ≈ dl + dr + dj over a span ≥ the critical path).
    let x = o.overlap().unwrap();
    let most = o.busy_total_us() / bound;
    assert!(
        x > 1.1 && x <= most + 1e-9,
        "overlap {x} (at most {most}): {o:?}"
    );
    let ratio = o.span_per_critical_path().unwrap();
    assert!(ratio >= 1.0 - 1e-9, "{ratio}");
}
