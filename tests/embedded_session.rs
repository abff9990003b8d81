//! The embedded API end to end: typed handles, application memory bound per run, results
//! by handle, pinned buffers, compile once / run many, submit (wait and Future).

use offload_sched::model::{Buf, Init, MapType, ProgramBuilder};
use offload_sched::plugin::faulty::{FaultKind, FaultyPlugin};
use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
use offload_sched::plugin::null::NullPlugin;
use offload_sched::plugin::Plugin;
use offload_sched::schedule::ScheduleOptions;
use offload_sched::{Bindings, Error, Plan, Session};
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

const N: usize = 1000;

/// `y = a·x + y` over two regions (halves, nowait on separate streams) plus `z`, an
/// unbound buffer the program fills with `x` copied through the device.
struct Saxpy {
    plan: Plan,
    x: Buf<f32>,
    y: Buf<f32>,
    z: Buf<f32>,
}

fn saxpy(a: f64) -> Saxpy {
    let mut p = ProgramBuilder::new("embedded_saxpy");
    let x = p.buf::<f32>("x", N as u64);
    let y = p.buf::<f32>("y", N as u64);
    let z = p.buf_init::<f32>("z", N as u64, Init::Fill(-1.0));
    let h = (N / 2) as u64;
    for (i, lo) in [0, h].into_iter().enumerate() {
        p.target(&format!("half{i}"), "saxpy")
            .num(a)
            .arg(x.part(lo, h))
            .arg(y.part(lo, h))
            .map(MapType::To, x.part(lo, h))
            .map(MapType::ToFrom, y.part(lo, h))
            .nowait();
    }
    p.target("copy", "copy")
        .arg(x)
        .arg(z)
        .map(MapType::To, x)
        .map(MapType::From, z);
    p.taskwait();
    let plan = Plan::new(p.build(), &ScheduleOptions::default()).unwrap();
    Saxpy { plan, x, y, z }
}

fn host() -> HostPlugin {
    HostPlugin::new(HostPluginOptions::default())
}

#[test]
fn bound_memory_runs_many_times_with_new_data_each_time() {
    let s = saxpy(2.0);
    let plugin = host();
    let mut session = Session::new(&s.plan, &plugin).unwrap();
    for run in 0..5 {
        let xs: Vec<f32> = (0..N).map(|i| (i * (run + 1)) as f32).collect();
        let mut ys: Vec<f32> = (0..N).map(|i| (i % 7) as f32 - run as f32).collect();
        let want: Vec<f32> = xs.iter().zip(&ys).map(|(x, y)| 2.0 * x + y).collect();
        session
            .run(Bindings::new().input(s.x, &xs).output(s.y, &mut ys))
            .unwrap();
        assert_eq!(ys, want, "run {run}");
        // The unbound buffer is read in place, by handle: the copy of x.
        assert_eq!(session.read(s.z).unwrap(), &xs[..], "run {run}");
    }
    drop(session);
    assert_eq!(plugin.live_device_allocs(), 0);
    assert_eq!(
        plugin.live_host_allocs(),
        0,
        "the session frees its host memory"
    );
}

#[test]
fn unbound_buffers_start_from_their_declared_contents_every_run() {
    let s = saxpy(1.0);
    let plugin = host();
    let mut session = Session::new(&s.plan, &plugin).unwrap();
    let xs = vec![3.0f32; N];
    for _ in 0..2 {
        // y unbound: zeros each run, so y = x every time (not accumulated).
        session.run(Bindings::new().input(s.x, &xs)).unwrap();
        assert_eq!(session.read(s.y).unwrap(), &xs[..]);
    }
    // A bound buffer's results are in the bound memory, not readable by handle.
    session.run(Bindings::new().input(s.x, &xs)).unwrap();
    let mut ys = vec![0.0f32; N];
    session
        .run(Bindings::new().input(s.x, &xs).output(s.y, &mut ys))
        .unwrap();
    let e = session.read(s.y).unwrap_err().to_string();
    assert_eq!(
        e,
        "embedded_saxpy: buffer `y`: was bound in the last run: its results are in the bound memory"
    );
}

#[test]
fn bad_bindings_are_refused_by_name_before_anything_runs() {
    let s = saxpy(2.0);
    let other = saxpy(2.0);
    let plugin = FaultyPlugin::new(host(), FaultKind::Alloc, 0);
    let mut session = Session::new(&s.plan, &plugin).unwrap();
    let xs = vec![1.0f32; N];
    let short = vec![1.0f32; N - 1];
    let mut ys = vec![5.0f32; N];
    let ys_in = vec![5.0f32; N];
    let cases: Vec<(Bindings<'_>, &str)> = vec![
        (
            Bindings::new().input(s.x, &short),
            "embedded_saxpy: buffer `x`: has 1000 elements, the bound memory 999",
        ),
        (
            Bindings::new().input(s.y, &ys_in),
            "embedded_saxpy: buffer `y`: is written by the program on the host (a copy back \
             or a host task): bind it with `output`, not `input`",
        ),
        (
            Bindings::new().input(s.x, &xs).input(s.x, &xs),
            "embedded_saxpy: buffer `x`: is bound twice",
        ),
        (
            Bindings::new().input(other.x, &xs),
            "embedded_saxpy: buffer `x`: the handle belongs to another program of the same \
             name \"embedded_saxpy\" (each builder, and each plan's lookup, makes handles of \
             its own program)",
        ),
    ];
    for (b, want) in cases {
        let e = session.run(b).unwrap_err();
        assert!(matches!(e, Error::Bind { .. }), "{e}");
        assert_eq!(e.to_string(), want);
    }
    let e = session
        .run(Bindings::new().output(other.y, &mut ys))
        .unwrap_err();
    assert!(matches!(e, Error::Bind { .. }));
    assert!(ys.iter().all(|&v| v == 5.0), "nothing ran");
    assert_eq!(plugin.allocs(), 0, "nothing was issued");
    assert_eq!(plugin.host_allocs(), 0, "nothing was set up");
    let e = session.read(s.z).unwrap_err().to_string();
    assert_eq!(
        e,
        "embedded_saxpy: buffer `z`: no run has completed (or the last one failed)"
    );
}

#[test]
fn a_session_sets_up_once_and_reuses_its_host_memory() {
    let s = saxpy(2.0);
    let plugin = FaultyPlugin::new(host(), FaultKind::Alloc, 0);
    let mut session = Session::new(&s.plan, &plugin).unwrap();
    let xs = vec![1.0f32; N];
    for _ in 0..4 {
        session.run(Bindings::new().input(s.x, &xs)).unwrap();
    }
    // x is used in place (the host plugin takes application memory); y and z get one
    // block each, for all four runs.
    assert_eq!(plugin.host_allocs(), 2);
    assert_eq!(plugin.host_frees(), 0);
    drop(session);
    assert_eq!(plugin.host_frees(), 2);
    assert_eq!(plugin.allocs(), plugin.frees());
}

#[test]
fn a_failed_run_frees_its_device_memory_and_the_session_stays_usable() {
    let s = saxpy(2.0);
    // The 3rd device allocation fails (in the first run).
    let plugin = FaultyPlugin::new(host(), FaultKind::Alloc, 3);
    let mut session = Session::new(&s.plan, &plugin).unwrap();
    let xs = vec![2.0f32; N];
    let mut ys = vec![1.0f32; N];
    let e = session
        .run(Bindings::new().input(s.x, &xs).output(s.y, &mut ys))
        .unwrap_err();
    assert!(matches!(e, Error::Exec { .. }), "{e}");
    assert_eq!(plugin.inner().live_device_allocs(), 0);
    assert!(
        session.read(s.z).is_err(),
        "a failed run leaves nothing to read"
    );
    let mut ys = vec![1.0f32; N];
    session
        .run(Bindings::new().input(s.x, &xs).output(s.y, &mut ys))
        .unwrap();
    assert!(ys.iter().all(|&v| v == 5.0));
    assert_eq!(plugin.inner().live_device_allocs(), 0);
}

#[test]
fn pinned_buffers_are_used_in_place() {
    let s = saxpy(0.5);
    let plugin = host();
    let mut session = Session::new(&s.plan, &plugin).unwrap();
    let mut xs = session.pinned::<f32>(N).unwrap();
    let mut ys = session.pinned::<f32>(N).unwrap();
    assert!(xs.iter().all(|&v| v == 0.0), "zeroed when made");
    for (i, v) in xs.iter_mut().enumerate() {
        *v = i as f32;
    }
    ys.fill(1.0);
    session
        .run(
            Bindings::new()
                .pinned_input(s.x, &xs)
                .pinned_output(s.y, &mut ys),
        )
        .unwrap();
    assert!(ys
        .iter()
        .enumerate()
        .all(|(i, &v)| v == 0.5 * i as f32 + 1.0));
    drop((xs, ys));
    drop(session);
    assert_eq!(plugin.live_host_allocs(), 0);
}

#[test]
fn read_takes_the_length_from_the_plan_not_from_the_handle() {
    // A clone of a program is the same program (same tag); edit the clone's buffer so
    // that the handle's length (64 MiB) is larger than the plan's (1 element).
    let mut p = ProgramBuilder::new("edited");
    let big = p.buf::<u8>("big", 64 << 20);
    let x = p.buf_init::<f32>("x", 4, Init::Iota);
    p.target("k", "increment").arg(x).map(MapType::ToFrom, x);
    let mut edited = p.build();
    edited.buffers[big.id().index()].len = 1;
    let plan = Plan::new(edited, &ScheduleOptions::default()).unwrap();
    let plugin = host();
    let mut session = Session::new(&plan, &plugin).unwrap();
    session.run(Bindings::new()).unwrap();
    assert_eq!(session.read(big).unwrap(), [0u8]);
}

#[test]
fn a_pinned_buffer_of_another_plugin_is_refused_by_name() {
    let s = saxpy(0.5);
    let (plugin, other) = (host(), host());
    let mut session = Session::new(&s.plan, &plugin).unwrap();
    let theirs = Session::new(&s.plan, &other).unwrap();
    let xs = theirs.pinned::<f32>(N).unwrap();
    let e = session
        .run(Bindings::new().pinned_input(s.x, &xs))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "embedded_saxpy: buffer `x`: is bound to a PinnedBuf of another plugin, not of this \
         session's \"host\""
    );
    assert_eq!(plugin.live_device_allocs(), 0);
}

#[test]
fn submit_returns_before_the_run_completes_and_wait_delivers_the_outputs() {
    let s = saxpy(2.0);
    let plugin = host();
    let mut session = Session::new(&s.plan, &plugin).unwrap();
    let xs = vec![1.0f32; N];
    let mut ys = vec![1.0f32; N];
    let handle = session
        .submit(Bindings::new().input(s.x, &xs).output(s.y, &mut ys))
        .unwrap();
    let report = handle.wait().unwrap();
    assert!(report.counts.ops > 0);
    assert!(ys.iter().all(|&v| v == 3.0));
    assert_eq!(session.read(s.z).unwrap(), &xs[..]);
}

/// The smallest executor: polls until ready (the future asks to be polled again).
fn block_on<F: Future>(f: F) -> (F::Output, usize) {
    struct Noop;
    impl Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }
    let waker = Waker::from(Arc::new(Noop));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    let mut polls = 0;
    loop {
        polls += 1;
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return (v, polls);
        }
    }
}

#[test]
fn a_submitted_run_is_a_future() {
    let s = saxpy(2.0);
    let plugin = host();
    let mut session = Session::new(&s.plan, &plugin).unwrap();
    let xs = vec![4.0f32; N];
    let mut ys = vec![0.0f32; N];
    let handle = session
        .submit(Bindings::new().input(s.x, &xs).output(s.y, &mut ys))
        .unwrap();
    let (r, polls) = block_on(handle);
    r.unwrap();
    assert!(polls >= 1);
    assert!(ys.iter().all(|&v| v == 8.0));
}

#[test]
fn a_leaked_submitted_run_does_not_corrupt_the_next_one() {
    let s = saxpy(2.0);
    let plugin = host();
    let mut session = Session::new(&s.plan, &plugin).unwrap();
    let xs = vec![1.0f32; N];
    let mut ys = vec![1.0f32; N];
    let handle = session
        .submit(Bindings::new().input(s.x, &xs).output(s.y, &mut ys))
        .unwrap();
    std::mem::forget(handle);
    // The leaked run was staged: ys was never written.
    assert!(ys.iter().all(|&v| v == 1.0));
    let xs = vec![3.0f32; N];
    session
        .run(Bindings::new().input(s.x, &xs).output(s.y, &mut ys))
        .unwrap();
    assert!(ys.iter().all(|&v| v == 7.0));
}

#[test]
fn a_leaked_submit_never_writes_a_pinned_output_afterwards() {
    let s = saxpy(2.0);
    let plugin = host();
    let mut session = Session::new(&s.plan, &plugin).unwrap();
    let xs = vec![1.0f32; N];
    let mut py = session.pinned::<f32>(N).unwrap();
    py.fill(1.0);
    let handle = session
        .submit(Bindings::new().input(s.x, &xs).pinned_output(s.y, &mut py))
        .unwrap();
    std::mem::forget(handle);
    // The next run settles the leaked one (it synchronizes every stream first).
    session.run(Bindings::new().input(s.x, &xs)).unwrap();
    assert!(
        py.iter().all(|&v| v == 1.0),
        "staged: the leaked run wrote elsewhere"
    );
}

#[test]
fn a_plugin_panic_in_a_run_leaves_no_application_memory_registered() {
    let s = saxpy(2.0);
    // The plugin panics at its first D2H (a misbehaving third-party plugin).
    let plugin = FaultyPlugin::panicking(host(), FaultKind::Retrieve, 1);
    let mut session = Session::new(&s.plan, &plugin).unwrap();
    let xs = vec![1.0f32; N];
    let mut ys = vec![1.0f32; N];
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        session.run(Bindings::new().input(s.x, &xs).output(s.y, &mut ys))
    }));
    assert!(r.is_err(), "the plugin panicked");
    // x and y were used in place: unregistered on the way out; z's kept block remains.
    assert_eq!(plugin.inner().live_host_allocs(), 1);
    drop(ys);
    drop(session);
    assert_eq!(plugin.inner().live_host_allocs(), 0);
}

#[test]
fn file_graphs_give_typed_handles_by_name() {
    let root = env!("CARGO_MANIFEST_DIR");
    let plan = Plan::from_file(
        std::path::Path::new(&format!("{root}/graphs/saxpy.toml")),
        &ScheduleOptions::default(),
    )
    .unwrap();
    let e = plan.buffer::<f64>("x").unwrap_err().to_string();
    assert_eq!(
        e,
        format!("{root}/graphs/saxpy.toml: buffer `x`: holds f32, not f64")
    );
    let e = plan.buffer::<f32>("nope").unwrap_err().to_string();
    assert_eq!(
        e,
        format!("{root}/graphs/saxpy.toml: buffer `nope`: no such buffer (declared: x, y)")
    );
    let x = plan.buffer::<f32>("x").unwrap();
    let y = plan.buffer::<f32>("y").unwrap();
    let plugin = NullPlugin::new();
    let mut session = Session::new(&plan, &plugin).unwrap();
    let xs = vec![1.0f32; x.len() as usize];
    let mut ys = vec![1.0f32; y.len() as usize];
    for _ in 0..3 {
        session
            .run(Bindings::new().input(x, &xs).output(y, &mut ys))
            .unwrap();
    }
    assert_eq!(plugin.live_device_allocs(), 0);
    let _: &dyn Plugin = &plugin;
}

/// An application owns its session: plan and plugin shared through `Arc`s, the session
/// in the application's own struct, moved to another thread; results as with a borrowed
/// session, and the plugin's memory given back when the last holder goes.
#[test]
fn a_shared_session_lives_in_the_application_struct_and_moves_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Session<'static>>();
    send_sync::<offload_sched::PinnedBuf<'static, f32>>();

    struct App {
        session: Session<'static>,
        x: offload_sched::Buf<f32>,
        y: offload_sched::Buf<f32>,
    }
    let mut p = ProgramBuilder::new("owned");
    let x = p.buf::<f32>("x", 256);
    let y = p.buf::<f32>("y", 256);
    p.target("saxpy", "saxpy")
        .num(3.0)
        .arg(x)
        .arg(y)
        .map(MapType::To, x)
        .map(MapType::ToFrom, y);
    let plan = Arc::new(Plan::new(p.build(), &ScheduleOptions::default()).unwrap());
    let host = Arc::new(HostPlugin::new(HostPluginOptions::default()));
    let plugin: Arc<dyn Plugin> = host.clone();
    let mut app = App {
        session: Session::shared(Arc::clone(&plan), plugin).unwrap(),
        x,
        y,
    };
    drop(plan); // the session keeps it alive
    let pinned = app.session.pinned::<f32>(256).unwrap();
    let worker = std::thread::spawn(move || {
        let xs: Vec<f32> = (0..256).map(|i| i as f32).collect();
        let mut ys = vec![1.0f32; 256];
        for _ in 0..3 {
            ys.fill(1.0);
            app.session
                .run(Bindings::new().input(app.x, &xs).output(app.y, &mut ys))
                .unwrap();
        }
        assert_eq!(app.session.plan().name(), "owned");
        (ys, app)
    });
    let (ys, app) = worker.join().unwrap();
    assert_eq!(ys[10], 31.0);
    assert_eq!(ys[255], 3.0 * 255.0 + 1.0);
    assert!(host.live_host_allocs() > 0, "the session keeps host memory");
    drop(app);
    assert!(
        host.live_host_allocs() > 0,
        "the pinned buffer is still alive"
    );
    drop(pinned);
    assert_eq!(host.live_host_allocs(), 0);
    assert_eq!(host.live_device_allocs(), 0);
}
