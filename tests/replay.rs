//! Replay (`Session::with_replay`) on the host plugin: every graph in graphs/ replayed
//! gives bit-identical results to stream issue, run after run; rebinding moves copy
//! nodes; plans that cannot be replayed fall back; failures clean up.

mod common;

use common::library::read_all;

use offload_sched::model::{MapType, ProgramBuilder};
use offload_sched::plugin::faulty::{FaultKind, FaultyPlugin};
use offload_sched::plugin::host::HostPlugin;
use offload_sched::plugin::Plugin;
use offload_sched::schedule::ScheduleOptions;
use offload_sched::{Bindings, Plan, Session};

fn eager(plan: &Plan, plugin: &dyn Plugin) -> Vec<(String, Vec<u8>)> {
    let r = plan.run(plugin).unwrap();
    plan.program()
        .buffers
        .iter()
        .map(|b| {
            (
                b.name.clone(),
                r.buffers.get(&b.name).unwrap().to_ne_bytes(),
            )
        })
        .collect()
}

#[test]
fn every_graph_replayed_is_bit_identical_to_stream_issue_run_after_run() {
    let plugin = common::host(2, None);
    let mut replayed = 0;
    for (name, plan) in common::plans_without_spin() {
        if plan.graph().devices > 1 {
            continue; // covered by the fallback test
        }
        let want = eager(&plan, &plugin);
        let mut s = Session::new(&plan, &plugin).unwrap().with_replay(true);
        for run in 0..3 {
            let r = s
                .run(Bindings::new())
                .unwrap_or_else(|e| panic!("{name} run {run}: {e}"));
            let got = read_all(&plan, &s);
            assert!(
                got == want,
                "{name} run {run}: replay differs from stream issue"
            );
            let stats = r
                .replay
                .as_ref()
                .unwrap_or_else(|| panic!("{name}: not replayed"));
            assert_eq!(
                stats.instantiate_us > 0.0,
                run == 0,
                "{name} run {run}: {stats:?}"
            );
            assert_eq!(stats.reinstantiated, 0, "{name}");
            assert_eq!(
                r.counts.device_ops,
                plan.graph()
                    .ops
                    .iter()
                    .filter(|o| !o.kind.is_host())
                    .count(),
                "{name}: every device op counted once"
            );
        }
        replayed += 1;
        drop(s);
        assert_eq!(
            plugin.live_device_allocs(),
            0,
            "{name}: arena freed with the session"
        );
    }
    assert!(replayed >= 20, "only {replayed} graphs replayed");
}

#[test]
fn random_node_orders_under_jitter_still_give_the_same_results() {
    // With delay jitter the host plugin runs each launch's nodes on several threads,
    // each taking a random ready node after a random delay: every launch another order
    // and another split over the threads, so a missing edge would show here as a wrong
    // value.
    for name in [
        "case_e02",
        "fanout",
        "matmul_small",
        "wavefront",
        "montage-2mass-005d",
        "case_d01",
    ] {
        let plan = common::plan_without_spin(&format!("{name}.toml"));
        let want = eager(&plan, &common::host(1, None));
        for seed in 0..4 {
            let plugin = common::host(1, Some(seed));
            let mut s = Session::new(&plan, &plugin).unwrap().with_replay(true);
            for run in 0..2 {
                s.run(Bindings::new()).unwrap();
                assert!(read_all(&plan, &s) == want, "{name} seed {seed} run {run}");
            }
        }
    }
}

/// `y = 2·x + y` over 4 nowait regions of 256 elements each.
fn saxpy4() -> (
    Plan,
    offload_sched::model::Buf<f32>,
    offload_sched::model::Buf<f32>,
) {
    let mut p = ProgramBuilder::new("saxpy4");
    let x = p.buf::<f32>("x", 1024);
    let y = p.buf::<f32>("y", 1024);
    for r in 0..4u64 {
        let (xs, ys) = (x.part(r * 256, 256), y.part(r * 256, 256));
        p.target(&format!("r{r}"), "saxpy")
            .num(2.0)
            .arg(xs)
            .arg(ys)
            .map(MapType::To, xs)
            .map(MapType::ToFrom, ys)
            .nowait();
    }
    p.taskwait();
    (
        Plan::new(p.build(), &ScheduleOptions::default()).unwrap(),
        x,
        y,
    )
}

#[test]
fn rebinding_moves_copy_nodes_to_the_new_memory_and_results_follow() {
    let (plan, x, y) = saxpy4();
    let plugin = common::host(1, None);
    let mut s = Session::new(&plan, &plugin).unwrap().with_replay(true);
    // Application slices (used in place by the host plugin): two pairs, alternated.
    let mut xs = [vec![0f32; 1024], vec![0f32; 1024]];
    let mut ys = [vec![0f32; 1024], vec![0f32; 1024]];
    for run in 0..3 {
        let k = run % 2;
        xs[k]
            .iter_mut()
            .enumerate()
            .for_each(|(i, v)| *v = (i + run) as f32);
        ys[k].iter_mut().for_each(|v| *v = run as f32);
        let r = s
            .run(Bindings::new().input(x, &xs[k]).output(y, &mut ys[k]))
            .unwrap();
        let want: Vec<f32> = (0..1024)
            .map(|i| 2.0 * (i + run) as f32 + run as f32)
            .collect();
        assert_eq!(ys[k], want, "run {run}");
        let st = r.replay.unwrap();
        assert_eq!(
            st.nodes,
            4 * 4,
            "an H2D of x and y, the kernel, a D2H of y per region"
        );
        assert_eq!(st.reinstantiated, 0);
        assert_eq!(st.instantiate_us > 0.0, run == 0);
        // Run 0 instantiates with its memory; later runs move every copy node (H2D x,
        // H2D y, D2H y in each of 4 regions) to the other pair.
        assert_eq!(st.updated, if run == 0 { 0 } else { 12 }, "run {run}");
    }
    // Pinned buffers: two pairs, alternated; the nodes follow each time.
    let mut px = [
        s.pinned::<f32>(1024).unwrap(),
        s.pinned::<f32>(1024).unwrap(),
    ];
    let mut py = [
        s.pinned::<f32>(1024).unwrap(),
        s.pinned::<f32>(1024).unwrap(),
    ];
    for (k, p) in px.iter_mut().enumerate() {
        p.iter_mut()
            .enumerate()
            .for_each(|(i, v)| *v = (i * (k + 1)) as f32);
    }
    for run in 0..4 {
        let k = run % 2;
        py[k].iter_mut().for_each(|v| *v = 1.0);
        let (a, b) = (&px[k], &mut py[k]);
        let r = s
            .run(Bindings::new().pinned_input(x, a).pinned_output(y, b))
            .unwrap();
        let want: Vec<f32> = (0..1024)
            .map(|i| 2.0 * (i * (k + 1)) as f32 + 1.0)
            .collect();
        assert_eq!(&py[k][..], &want[..], "pinned run {run}");
        assert_eq!(
            r.replay.unwrap().updated,
            12,
            "pinned run {run}: every copy node moved"
        );
    }
}

#[test]
fn plans_of_several_devices_fall_back_to_stream_issue() {
    let mut p = ProgramBuilder::new("two_devices");
    p.devices(2);
    let x = p.buf::<f32>("x", 64);
    let y = p.buf::<f32>("y", 64);
    p.target("d0", "increment")
        .arg(x)
        .map(MapType::ToFrom, x)
        .nowait();
    p.target("d1", "increment")
        .arg(y)
        .map(MapType::ToFrom, y)
        .device(1)
        .nowait();
    p.taskwait();
    let plan = Plan::new(p.build(), &ScheduleOptions::default()).unwrap();
    let plugin = common::host(2, None);
    let mut s = Session::new(&plan, &plugin).unwrap().with_replay(true);
    let r = s.run(Bindings::new()).unwrap();
    assert!(r.replay.is_none(), "issued to streams");
    assert_eq!(s.read(x).unwrap(), &[1.0; 64][..]);
    assert_eq!(s.read(y).unwrap(), &[1.0; 64][..]);
}

#[test]
fn a_failed_graph_call_is_an_error_and_the_session_cleans_up() {
    let (plan, x, y) = saxpy4();
    for (kind, k) in [
        (FaultKind::GraphInstantiate, 1),
        (FaultKind::GraphLaunch, 1),
        (FaultKind::GraphLaunch, 2),
    ] {
        let plugin = FaultyPlugin::new(HostPlugin::new(Default::default()), kind, k);
        {
            let mut s = Session::new(&plan, &plugin).unwrap().with_replay(true);
            let xs = vec![1.0f32; 1024];
            let mut ys = vec![0.0f32; 1024];
            let mut failed = 0;
            for _ in 0..3 {
                match s.run(Bindings::new().input(x, &xs).output(y, &mut ys)) {
                    Ok(_) => assert_eq!(ys, vec![2.0f32; 1024]),
                    Err(e) => {
                        failed += 1;
                        let m = e.to_string();
                        assert!(m.contains("injected fault"), "{kind:?}: {m}");
                    }
                }
                ys.iter_mut().for_each(|v| *v = 0.0);
            }
            assert_eq!(failed, 1, "{kind:?} #{k}: one run fails, the others run");
        }
        assert_eq!(
            plugin.inner().live_device_allocs(),
            0,
            "{kind:?}: arena freed"
        );
        assert_eq!(
            plugin.inner().live_host_allocs(),
            0,
            "{kind:?}: host memory freed"
        );
    }
}

#[test]
fn a_taskgraph_records_its_first_execution_and_replays_it_in_a_one_shot_run() {
    // graphs/jacobi_taskgraph.toml: target data around a taskgraph of 500 executions of
    // two jacobi5 sweeps. A one-shot run replays: the first execution's graph is
    // instantiated, the other 499 launch it again.
    let plan = common::plan("jacobi_taskgraph.toml");
    let plugin = common::host(1, None);
    let r = plan.run(&plugin).unwrap();
    let st = r.replay.expect("a plan with a taskgraph is replayed");
    assert_eq!(
        st.graphs, 3,
        "before, the recorded execution, after: {st:?}"
    );
    assert_eq!(st.segments, 502, "{st:?}");
    assert_eq!(st.nodes, 1000 + st.instantiated_nodes - 2, "{st:?}");
    let want = plan.reference().unwrap();
    for (name, data) in want.iter() {
        assert!(
            r.buffers.get(name).unwrap().to_ne_bytes() == data.to_ne_bytes(),
            "{name}"
        );
    }
    assert_eq!(plugin.live_device_allocs(), 0);

    // A body that maps its own data each execution: alloc, H2D, kernel, D2H, free (the
    // mapping rules' copies: elision off); the arena hands each execution the same
    // block, so the executions are the same graph.
    let mut p = ProgramBuilder::new("tg");
    let x = p.buf::<i32>("x", 256);
    p.taskgraph("inc", 4, |p| {
        p.target("bump", "increment").arg(x).map(MapType::ToFrom, x);
    });
    let no_elide = offload_sched::lower::LowerOptions::no_elide();
    let plan = Plan::new_lowered(p.build(), &ScheduleOptions::default(), &no_elide).unwrap();
    let r = plan.run(&plugin).unwrap();
    let st = r.replay.unwrap();
    assert_eq!((st.graphs, st.segments), (1, 4), "{st:?}");
    assert_eq!(r.buffers.as_i32("x").unwrap(), &[4; 256][..]);
    // With elision (the default) x stays on the device between executions: the first
    // allocates and copies in, the middle two only launch, the last copies back and
    // frees. Three distinct graphs, the middle one replayed twice.
    let plan = plan
        .relower(&offload_sched::lower::LowerOptions::elided())
        .unwrap();
    let r = plan.run(&plugin).unwrap();
    let st = r.replay.unwrap();
    assert_eq!((st.graphs, st.segments), (3, 4), "{st:?}");
    assert_eq!(r.buffers.as_i32("x").unwrap(), &[4; 256][..]);
}

#[test]
fn an_update_the_plugin_refuses_reinstantiates_and_a_failed_run_rebuilds_the_graphs() {
    let (plan, x, y) = saxpy4();
    let xs = [vec![1.0f32; 1024], vec![3.0f32; 1024]];
    let want = |k: usize| vec![2.0 * xs[k][0]; 1024];
    // The first update is refused: the graph is instantiated again with the new memory.
    let plugin = FaultyPlugin::new(
        HostPlugin::new(Default::default()),
        FaultKind::GraphUpdate,
        1,
    );
    {
        let mut s = Session::new(&plan, &plugin).unwrap().with_replay(true);
        for run in 0..3 {
            let k = run % 2;
            let mut ys = vec![0.0f32; 1024];
            let r = s
                .run(Bindings::new().input(x, &xs[k]).output(y, &mut ys))
                .unwrap();
            assert!(ys == want(k), "run {run}: y[0] = {}", ys[0]);
            let st = r.replay.unwrap();
            assert_eq!(
                st.reinstantiated,
                usize::from(run == 1),
                "run {run}: {st:?}"
            );
        }
    }
    assert!(plugin.injected());
    assert_eq!(plugin.inner().live_device_allocs(), 0);
    // A run that fails leaves no half-rebound graph behind: the next run builds anew.
    let plugin = FaultyPlugin::new(
        HostPlugin::new(Default::default()),
        FaultKind::GraphLaunch,
        2,
    );
    {
        let mut s = Session::new(&plan, &plugin).unwrap().with_replay(true);
        let mut ys = vec![0.0f32; 1024];
        s.run(Bindings::new().input(x, &xs[0]).output(y, &mut ys))
            .unwrap();
        assert!(s
            .run(Bindings::new().input(x, &xs[1]).output(y, &mut ys))
            .is_err());
        ys.fill(0.0); // y is tofrom: the output memory is also the input
        let r = s
            .run(Bindings::new().input(x, &xs[1]).output(y, &mut ys))
            .unwrap();
        assert!(ys == want(1), "y[0] = {}", ys[0]);
        assert!(r.replay.unwrap().instantiate_us > 0.0, "built anew");
    }
    assert_eq!(plugin.inner().live_device_allocs(), 0);
    assert_eq!(plugin.inner().live_host_allocs(), 0);
}

#[test]
fn a_plan_whose_work_is_all_on_device_1_is_replayed_there() {
    // The schedule has device 0's (idle) pool streams too: replay goes by the streams
    // with ops, and launches on one of device 1's.
    let mut p = ProgramBuilder::new("on_device_1");
    p.devices(2);
    let x = p.buf::<i32>("x", 64);
    p.taskgraph("t", 3, |p| {
        p.target("bump", "increment")
            .arg(x)
            .map(MapType::ToFrom, x)
            .device(1);
    });
    let plan = Plan::new(p.build(), &ScheduleOptions::default()).unwrap();
    let plugin = common::host(2, None);
    let r = plan.run(&plugin).unwrap();
    let st = r.replay.expect("replayed on device 1");
    assert_eq!((st.graphs, st.segments), (1, 3), "{st:?}");
    assert_eq!(r.buffers.as_i32("x").unwrap(), &[3; 64][..]);
    assert_eq!(plugin.live_device_allocs(), 0);
}
