//! Host steps as Rust closures (`ProgramBuilder::host_fn`): typed views of the declared
//! sections between device regions, checked against the reference interpreter on the
//! host plugin; run many times on a session with application memory bound; and every
//! way a closure fails (an `Err`, a panic, an undeclared buffer, a wrong type,
//! overlapping views) is an error naming the task that frees all device memory and
//! leaves no thread behind.
//!
//! The tests of this file take one lock ([`serial`]) so that the thread check sees no
//! other test's threads.

mod common;

use common::{exec_error, host, run_checked};
use offload_sched::exec::{ExecError, IssueMode};
use offload_sched::model::{HostFnError, Init, MapType, ProgramBuilder, Sel, ViewError};
use offload_sched::plugin::null::NullPlugin;
use offload_sched::schedule::ScheduleOptions;
use offload_sched::{Bindings, Plan, Session};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

const N: u64 = 1000;
/// The host step reads `x[LO:N-LO]`.
const LO: u64 = 10;

/// Two independent nowait regions (`x *= 2` on f32, `w += 3` on f64), a host closure
/// `mix` reading a part of each result and writing `y`, and a region `z = y + y` after
/// it. `calls` counts the closure's calls.
fn pipeline(calls: Arc<AtomicUsize>) -> Plan {
    let mut p = ProgramBuilder::new("pipeline");
    let x = p.buf_init::<f32>("x", N, Init::Iota);
    let w = p.buf_init::<f64>("w", N, Init::Fill(1.0));
    let y = p.buf::<f64>("y", N);
    let z = p.buf::<f64>("z", N);
    p.target("dx", "scale")
        .num(2.0)
        .arg(x)
        .map(MapType::ToFrom, x)
        .nowait();
    p.target("dw", "add_scalar")
        .arg(w)
        .num(3.0)
        .map(MapType::ToFrom, w)
        .nowait();
    let reads: [Sel; 2] = [x.part(LO, N - LO).into(), w.into()];
    p.host_fn("mix", &reads, &[y.into()], move |ctx| {
        calls.fetch_add(1, Ordering::SeqCst);
        let xs = ctx.read(x)?; // x[LO..N]: element 0 is x[LO]
        let ws = ctx.read(w)?;
        let ys = ctx.write(y)?;
        assert_eq!(
            (xs.len(), ws.len(), ys.len()),
            ((N - LO) as usize, N as usize, N as usize)
        );
        for (i, y) in ys.iter_mut().enumerate() {
            *y = match xs.get(i) {
                Some(&x) => f64::from(x) * ws[i],
                None => -1.0,
            };
        }
        Ok(())
    });
    p.target("double", "add")
        .arg(y)
        .arg(y)
        .arg(z)
        .map(MapType::To, y)
        .map(MapType::From, z);
    Plan::new(p.build(), &ScheduleOptions::default()).unwrap()
}

fn expected_z() -> Vec<f64> {
    (0..N)
        .map(|i| {
            if i < N - LO {
                2.0 * (2.0 * (LO + i) as f64 * 4.0)
            } else {
                -2.0
            }
        })
        .collect()
}

#[test]
fn a_host_closure_between_regions_matches_the_reference() {
    let _g = serial();
    let calls = Arc::new(AtomicUsize::new(0));
    let plan = pipeline(calls.clone());
    let want = plan.reference().unwrap();
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "the reference calls the closure"
    );
    assert_eq!(want.as_f64("z").unwrap(), expected_z());
    assert_eq!(want.as_f32("x").unwrap()[3], 6.0);
    let mut runs = 1;
    for issue in [IssueMode::Serial, IssueMode::PerStream, IssueMode::PerGroup] {
        for jitter in [None, Some(7), Some(8)] {
            let what = format!("{issue:?} jitter {jitter:?}");
            let r = run_checked(&what, &plan, &host(1, jitter), issue, &want);
            assert_eq!(r.buffers.as_f64("z").unwrap(), expected_z(), "{what}");
            runs += 1;
        }
    }
    assert_eq!(calls.load(Ordering::SeqCst), runs, "once per run");
    // The schedule waits for both regions before the closure, and on no more.
    assert!(plan.schedule().used_streams() >= 2, "{}", plan.schedule());
}

#[test]
fn host_closures_show_as_host_tasks_in_schedule_text_and_dot() {
    let _g = serial();
    let build = |closure: bool| {
        let mut p = ProgramBuilder::new("show");
        let x = p.buf_init::<f32>("x", 64, Init::Iota);
        let y = p.buf::<f32>("y", 64);
        p.target("inc", "increment").arg(x).map(MapType::ToFrom, x);
        if closure {
            p.host_fn("h", &[x.into()], &[y.into()], |_| Ok(()));
        } else {
            p.host_task("h", &[x.into()], &[y.into()]);
        }
        p.target("cp", "copy")
            .arg(y)
            .arg(x)
            .map(MapType::To, y)
            .map(MapType::From, x);
        Plan::new(p.build(), &ScheduleOptions::default()).unwrap()
    };
    let (with, without) = (build(true), build(false));
    assert_eq!(with.to_string(), without.to_string());
    assert_eq!(with.to_dot(), without.to_dot());
    assert!(with.to_string().contains("host"), "{with}");
    // A graph file keeps the task's sections, not the closure.
    let text = offload_sched::file::to_toml(with.program());
    assert_eq!(text, offload_sched::file::to_toml(without.program()));
    assert_ne!(with.program(), without.program());
    assert_eq!(with.program().clone(), *with.program());
}

/// `b = a + 1` on the host from bound input memory; `b += 1` on the device; `out = 10·b`
/// on the host into bound output memory.
fn session_program() -> (
    Plan,
    offload_sched::model::Buf<f32>,
    offload_sched::model::Buf<f32>,
) {
    let mut p = ProgramBuilder::new("session");
    let a = p.buf::<f32>("a", 256);
    let b = p.buf::<f32>("b", 256);
    let out = p.buf::<f32>("out", 256);
    p.host_fn("pre", &[a.into()], &[b.into()], move |ctx| {
        let (a, b) = (ctx.read(a)?, ctx.write(b)?);
        b.iter_mut().zip(a).for_each(|(b, a)| *b = a + 1.0);
        Ok(())
    });
    p.target("inc", "increment").arg(b).map(MapType::ToFrom, b);
    p.host_fn("post", &[b.into()], &[out.into()], move |ctx| {
        let (b, out) = (ctx.read(b)?, ctx.write(out)?);
        out.iter_mut().zip(b).for_each(|(o, b)| *o = 10.0 * b);
        Ok(())
    });
    let plan = Plan::new(p.build(), &ScheduleOptions::default()).unwrap();
    (plan, a, out)
}

#[test]
fn a_session_calls_the_closures_on_bound_memory_every_run() {
    let _g = serial();
    let (plan, a, out) = session_program();
    let plugin = host(1, None);
    let mut session = Session::new(&plan, &plugin).unwrap();
    for run in 0..4 {
        let input: Vec<f32> = (0..256).map(|i| (i * run) as f32).collect();
        let mut result = vec![0.0f32; 256];
        session
            .run(Bindings::new().input(a, &input).output(out, &mut result))
            .unwrap();
        let want: Vec<f32> = input.iter().map(|v| 10.0 * (v + 2.0)).collect();
        assert_eq!(result, want, "run {run}");
    }
    // Submitted: the closures run when the run is driven to completion.
    let input = vec![1.5f32; 256];
    let mut result = vec![0.0f32; 256];
    session
        .submit(Bindings::new().input(a, &input).output(out, &mut result))
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(result, vec![35.0; 256]);
    drop(session);
    assert_eq!(plugin.live_device_allocs(), 0);
    assert_eq!(plugin.live_host_allocs(), 0);
}

/// How the closure of [`failing`] misbehaves.
#[derive(Clone, Copy, Debug)]
enum Fault {
    Err,
    Panic,
    Undeclared,
    WrongType,
    Overlap,
    /// Panics with a payload whose `Drop` panics again (issue 25 point 9: it escaped
    /// `Session::run`, `Plan::run` and `Plan::reference`).
    DropBomb,
}

/// A panic payload that panics when dropped.
struct Bomb;

impl Drop for Bomb {
    fn drop(&mut self) {
        panic!("the payload went off");
    }
}

/// `y` entered on the device and brought home by an update; the closure `bad` (reading
/// `y`, writing `out`) fails as `fault` says while `y`'s device copy is still mapped; an
/// exit data after it would release it.
fn failing(fault: Fault) -> Plan {
    let mut p = ProgramBuilder::new("failing");
    let y = p.buf_init::<f32>("y", N, Init::Fill(1.0));
    let out = p.buf::<f32>("out", N);
    let z = p.buf::<f32>("z", N);
    let enter = vec![p.map(MapType::To, y)];
    p.enter_data("in", enter);
    p.target("inc", "increment").arg(y).map(MapType::To, y);
    let back = vec![p.map(MapType::From, y)];
    p.update("get", back);
    p.host_fn("bad", &[y.into()], &[out.into()], move |ctx| {
        match fault {
            Fault::Err => return Err("the input is odd".into()),
            Fault::Panic => panic!("the closure gave up"),
            Fault::DropBomb => std::panic::panic_any(Bomb),
            Fault::Undeclared => {
                ctx.read(z)?;
            }
            Fault::WrongType => {
                ctx.read::<i32>(y.id())?;
            }
            Fault::Overlap => {
                let o = ctx.write(out)?;
                let again = ctx.read(out)?;
                o[0] = again[0];
            }
        }
        Ok(())
    });
    let exit = vec![p.map(MapType::From, y)];
    p.exit_data("out", exit);
    p.target("after", "increment")
        .arg(z)
        .map(MapType::ToFrom, z);
    Plan::new(p.build(), &ScheduleOptions::default()).unwrap()
}

/// Checks the error of a failed run or reference run of [`failing`]`(fault)`.
fn check_fault(fault: Fault, e: ExecError, what: &str) {
    let text = e.to_string();
    assert!(text.contains("host task \"bad\""), "{what}: {text}");
    let ExecError::HostFn { task, source, .. } = e else {
        panic!("{what}: not a host closure error: {text}");
    };
    assert_eq!(task, "bad", "{what}");
    match (fault, source) {
        (Fault::Err, HostFnError::Failed(e)) => assert_eq!(e.to_string(), "the input is odd"),
        (Fault::Panic, HostFnError::Panicked(m)) => assert_eq!(m, "the closure gave up"),
        (Fault::DropBomb, HostFnError::Panicked(m)) => {
            assert_eq!(m, "(a payload that is not a string)")
        }
        (Fault::Undeclared, HostFnError::View(v)) => assert_eq!(
            v,
            ViewError::Undeclared {
                buffer: "z".into(),
                access: "read or written"
            }
        ),
        (Fault::WrongType, HostFnError::View(v)) => {
            assert_eq!(v.to_string(), "buffer `y` holds f32 elements, not i32")
        }
        (Fault::Overlap, HostFnError::View(v)) => assert_eq!(
            v.to_string(),
            "out[0:1000] overlaps out[0:1000], already viewed mutably in this call"
        ),
        (f, s) => panic!("{what}: {f:?} gave {s:?}"),
    }
}

/// The names of this process's threads whose name starts with `prefix` (offload-sched
/// names its issue threads `offload-issue-…`, the host plugin's workers
/// `offload-stream-…`). A thread just joined may still be listed for a moment (Linux
/// clears its id before it leaves the task list), so this looks again for up to a
/// second while any is listed.
fn threads(prefix: &str) -> Vec<String> {
    let list = || -> Vec<String> {
        let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
            return Vec::new(); // not Linux: nothing to look at
        };
        dir.filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .map(|s| s.trim().to_string())
            .filter(|s| s.starts_with(prefix))
            .collect()
    };
    let start = std::time::Instant::now();
    loop {
        let found = list();
        if found.is_empty() || start.elapsed() > std::time::Duration::from_secs(1) {
            return found;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

#[test]
fn a_failing_closure_stops_the_run_naming_the_task_and_cleans_up() {
    let _g = serial();
    let faults = [
        Fault::Err,
        Fault::Panic,
        Fault::Undeclared,
        Fault::WrongType,
        Fault::Overlap,
        Fault::DropBomb,
    ];
    for fault in faults {
        let plan = failing(fault);
        check_fault(
            fault,
            exec_error(plan.reference().unwrap_err()),
            "reference",
        );
        for issue in [IssueMode::Serial, IssueMode::PerStream] {
            let what = format!("{fault:?} {issue:?}");
            let plugin = host(1, None);
            // Twice: a closure that panicked is called again (its mutex is not poisoned
            // for good), and the plugin is still usable after a failed run.
            for _ in 0..2 {
                let e = plan.run_with(&plugin, issue).unwrap_err();
                check_fault(fault, exec_error(e), &what);
                assert_eq!(
                    plugin.live_device_allocs(),
                    0,
                    "{what}: device memory leaked"
                );
                assert_eq!(plugin.live_host_allocs(), 0, "{what}: host memory leaked");
                let issuing = threads("offload-issue");
                assert!(issuing.is_empty(), "{what}: {issuing:?} left running");
            }
            drop(plugin);
            assert_eq!(threads("offload-"), Vec::<String>::new(), "{what}");
        }
        {
            // The same through a session, twice (a second run after a failed one).
            let plugin = host(1, None);
            let mut session = Session::new(&plan, &plugin).unwrap();
            for _ in 0..2 {
                let e = session.run(Bindings::new()).unwrap_err();
                check_fault(fault, exec_error(e), &format!("{fault:?} session"));
            }
        }
        let null = NullPlugin::new();
        let e = plan.run_with(&null, IssueMode::Serial).unwrap_err();
        check_fault(fault, exec_error(e), "null plugin");
        assert_eq!(null.live_device_allocs(), 0);
        assert_eq!(null.live_host_allocs(), 0);
    }
}
