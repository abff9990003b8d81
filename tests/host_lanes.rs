//! Host lanes and issue order by readiness (issue 26 points 1 and 2): the batch shape of
//! graphs/batch_host_consumers.toml issues batch i+1's device steps before the host wait
//! of batch i and spreads the host tasks over the lanes (in the schedule text too);
//! every graph with host work gives the reference's values on several lanes under delay
//! jitter; dropping a lane edge (a `HostAwait`) or a host op's ordering is a violation.

mod common;

use offload_sched::lower::{OpGraph, OpId, OpKind};
use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
use offload_sched::schedule::{parse, Schedule, ScheduleOptions, Step};
use offload_sched::verify::{verify, Violation};
use offload_sched::Plan;

fn lanes(n: u32) -> ScheduleOptions {
    ScheduleOptions {
        host_lanes: n,
        ..ScheduleOptions::default()
    }
}

/// The step index of op `op` in `s`.
fn at(s: &Schedule, op: OpId) -> usize {
    s.steps.iter().position(|x| *x == Step::Op(op)).unwrap()
}

/// Host tasks of `g` by region name prefix `consume`, in program order.
fn consumers(g: &OpGraph) -> Vec<OpId> {
    g.op_ids()
        .filter(|&o| matches!(g.op(o).kind, OpKind::HostTask { .. }))
        .collect()
}

#[test]
fn batch_i_plus_1_is_issued_before_the_host_wait_of_batch_i_and_lanes_show() {
    let plan = common::plan_with("batch_host_consumers.toml", &lanes(2));
    let (g, s) = (plan.graph(), plan.schedule());
    let tasks = consumers(g);
    assert_eq!(tasks.len(), 8);
    let owners = s.wait_owners();
    for (i, &task) in tasks.iter().enumerate() {
        // The host wait leading host task i: the step just before it, run by its lane.
        let wait = at(s, task) - 1;
        assert!(s.steps[wait].is_host_wait(), "{s}");
        assert_eq!(owners[wait].map(|l| l.0), Some(s.op_lane[task.index()]));
        // Every device op of batch i + 1 is issued before it.
        if let Some(next) = g
            .regions
            .iter()
            .find(|r| r.name == format!("batch{}", i + 1))
        {
            for op in next.ops.clone() {
                assert!(
                    at(s, OpId(op)) < wait,
                    "batch{} op #{op} after wait of {i}",
                    i + 1
                );
            }
        }
    }
    // The host tasks alternate over the two lanes (equal work each).
    let on: Vec<u32> = tasks.iter().map(|t| s.op_lane[t.index()]).collect();
    assert_eq!(on, [0, 1, 0, 1, 0, 1, 0, 1]);
    // The text names the lanes and reads back.
    let text = s.to_string();
    assert!(
        text.lines().next().unwrap().ends_with(" host lanes=2"),
        "{text}"
    );
    assert!(
        text.contains("region \"consume0\" on h0") && text.contains("region \"consume1\" on h1"),
        "{text}"
    );
    assert_eq!(&parse(&text, g).unwrap(), s);
    // Proven: every edge ordered, every sync necessary.
    let r = verify(g, s).unwrap();
    assert_eq!(
        r.syncs_proven_necessary,
        s.host_waits().count() + s.event_waits().count()
    );
}

#[test]
fn graphs_with_host_work_give_the_references_values_on_several_lanes_under_jitter() {
    let mut checked = 0;
    for path in common::graph_files() {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        for n in [2, 3] {
            let Ok(mut plan) = Plan::from_file(&path, &lanes(n)) else {
                continue;
            };
            let g = plan.graph();
            let host_ops = g
                .ops
                .iter()
                .filter(|op| matches!(op.kind, OpKind::HostTask { .. } | OpKind::Taskwait))
                .count();
            if host_ops == 0 {
                continue;
            }
            plan.scale_spins(0.01).unwrap();
            let want = plan.reference().unwrap();
            for seed in [1, 2] {
                let p = HostPlugin::new(HostPluginOptions {
                    devices: plan.graph().devices.max(1),
                    delay_jitter: Some(seed),
                    ..HostPluginOptions::default()
                });
                let r = plan
                    .run(&p)
                    .unwrap_or_else(|e| panic!("{name} lanes {n}: {}", e.render()));
                offload_sched::reference::check(&r.buffers, &want)
                    .unwrap_or_else(|e| panic!("{name} lanes {n} seed {seed}: {e}"));
                assert_eq!(
                    r.counts.host_ops,
                    plan.graph().ops.iter().filter(|o| o.kind.is_host()).count()
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 16, "{checked} graph × lanes runs with host work");
}

fn unordered(g: &OpGraph, s: &Schedule) -> Vec<(OpId, OpId)> {
    match verify(g, s) {
        Ok(_) => Vec::new(),
        Err(e) => e
            .violations
            .into_iter()
            .filter_map(|v| match v {
                Violation::Unordered { from, to, .. } => Some((from, to)),
                _ => None,
            })
            .collect(),
    }
}

#[test]
fn dropping_a_lane_edge_is_a_violation() {
    // Two lanes: the taskwait on one lane awaits the host task on the other; without
    // the await the edge from that task is not ordered.
    let plan = common::plan_with("batch_host_consumers.toml", &lanes(2));
    let (g, s) = (plan.graph(), plan.schedule());
    let k = s
        .steps
        .iter()
        .position(|x| matches!(x, Step::HostAwait { .. }))
        .unwrap();
    let Step::HostAwait { op: awaited } = s.steps[k] else {
        unreachable!()
    };
    let mut dropped = s.clone();
    dropped.steps.remove(k);
    let v = unordered(g, &dropped);
    assert!(v.iter().any(|&(from, _)| from == awaited), "{v:?}");
    // Each await of the schedule is needed: dropping any one breaks an edge.
    for (k, st) in s.steps.iter().enumerate() {
        if let Step::HostAwait { op } = *st {
            let mut d = s.clone();
            d.steps.remove(k);
            assert!(
                unordered(g, &d).iter().any(|&(from, _)| from == op),
                "step {k}"
            );
        }
    }
}

#[test]
fn a_host_task_against_an_in_flight_copy_needs_its_await() {
    // jacobi: the D2H of the grid after a host task that reads it (write after read)
    // is issued after the issuing thread awaits the task; without the await, the copy
    // may write the grid while the task reads it.
    let plan = common::plan_with("jacobi.toml", &lanes(2));
    let (g, s) = (plan.graph(), plan.schedule());
    let (k, task) = s
        .steps
        .iter()
        .enumerate()
        .find_map(|(k, x)| match *x {
            Step::HostAwait { op } if s.wait_owners()[k].is_none() => Some((k, op)),
            _ => None,
        })
        .expect("an await before a device op");
    let Step::Op(copy) = s.steps[k + 1] else {
        panic!("{s}")
    };
    assert!(matches!(g.op(copy).kind, OpKind::D2H { .. }), "{s}");
    assert!(g.preds(copy).contains(&task));
    let mut dropped = s.clone();
    dropped.steps.remove(k);
    let v = unordered(g, &dropped);
    assert!(v.contains(&(task, copy)), "{v:?}");
    assert!(v.iter().all(|&(from, _)| from == task), "{v:?}");
    // The safety check the executor runs on a schedule it did not make finds it too.
    assert!(offload_sched::verify::check_order(g, &dropped).is_err());
}

#[test]
fn a_wait_moved_off_the_lane_that_needs_it_is_a_violation() {
    // The host wait before consume1 (lane h1) moved after the next device op: now the
    // issuing thread runs it, and consume1's lane no longer knows its D2H completed.
    let plan = common::plan_with("batch_host_consumers.toml", &lanes(2));
    let (g, s) = (plan.graph(), plan.schedule());
    let task = consumers(g)[1];
    let mut moved = s.clone();
    let w = at(&moved, task) - 1;
    let wait = moved.steps.remove(w);
    // Put it at the front, before any device op: the issuing thread's, and it
    // waits before the record it names.
    moved.steps.insert(0, wait);
    let v = unordered(g, &moved);
    assert!(v.iter().any(|&(_, to)| to == task), "{v:?}");
}

#[test]
fn a_host_read_the_issuing_thread_awaits_runs_on_that_thread() {
    use offload_sched::model::{MapType, ProgramBuilder};
    use std::sync::{Arc, Mutex};
    // jacobi's shape: kernel, `update from`, a host read, three times; each next `update
    // from` overwrites what the read reads, so the issuing thread awaits the read first.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut p = ProgramBuilder::new("inline_reads");
    let a = p.buf::<f32>("a", 1024);
    let maps = vec![p.map(MapType::ToFrom, a)];
    p.target_data("d", maps, |p| {
        for i in 0..3 {
            p.target(&format!("k{i}"), "add_scalar").arg(a).num(1.0);
            let back = vec![p.map(MapType::From, a)];
            p.update(&format!("get{i}"), back);
            let seen = Arc::clone(&seen);
            p.host_fn(&format!("read{i}"), &[a.into()], &[], move |ctx| {
                let sum: f32 = ctx.read(a)?.iter().sum();
                let thread = std::thread::current().name().map(String::from);
                seen.lock().unwrap().push((thread, sum));
                Ok(())
            });
        }
    });
    let plan = Plan::new(p.build(), &lanes(2)).unwrap();
    let (g, s) = (plan.graph(), plan.schedule());
    let reads = consumers(g);
    assert_eq!(reads.len(), 3);
    // The issuing thread (owner `None`) awaits reads 0 and 1, each before a device op.
    let owners = s.wait_owners();
    for &r in &reads[..2] {
        let k = (s.steps.iter())
            .position(|x| *x == Step::HostAwait { op: r })
            .unwrap_or_else(|| panic!("no await of {r}:\n{s}"));
        assert_eq!(owners[k], None, "{s}");
    }
    plan.run(&HostPlugin::new(HostPluginOptions::default()))
        .unwrap();
    let seen = seen.lock().unwrap().clone();
    let sums: Vec<f32> = seen.iter().map(|x| x.1).collect();
    assert_eq!(sums, [1024.0, 2048.0, 3072.0]);
    // Reads 0 and 1 ran on this thread, the one that issued the run, not on a lane.
    let me = std::thread::current().name().map(String::from);
    assert!(me.is_some());
    for (i, (thread, _)) in seen[..2].iter().enumerate() {
        assert_eq!(thread, &me, "read{i}");
    }
    // The last read has no await after it: on the issuing thread (the tail) or its lane.
    let last = seen[2].0.clone().unwrap_or_default();
    let lane = format!("offload-host-h{}", s.op_lane[reads[2].index()]);
    assert!(Some(&last) == me.as_ref() || last == lane, "{last}");
}

#[test]
fn a_chain_of_dependent_host_tasks_stays_on_one_lane_without_awaits() {
    use offload_sched::model::{ElemType, Init, ProgramBuilder, Sel};
    let mut p = ProgramBuilder::new("chain");
    let h = p.buffer("h", ElemType::F32, 64, Init::Iota);
    let a = p.buffer("a", ElemType::F32, 64, Init::Zeros);
    let b = p.buffer("b", ElemType::F32, 64, Init::Zeros);
    // h -> a -> b: each reads what the one before wrote.
    p.host_task("t1", &[Sel::Whole(h)], &[Sel::Whole(a)]);
    p.host_task("t2", &[Sel::Whole(a)], &[Sel::Whole(b)]);
    p.host_task("t3", &[Sel::Whole(b)], &[Sel::Whole(a)]);
    let plan = Plan::new(p.build(), &lanes(8)).unwrap();
    let (g, s) = (plan.graph(), plan.schedule());
    let lane = |name: &str| {
        let o = g
            .op_ids()
            .find(|&o| g.regions[g.op(o).region.index()].name == name)
            .unwrap_or_else(|| panic!("no region {name}:\n{s}"));
        s.op_lane[o.index()]
    };
    assert_eq!(lane("t1"), lane("t2"), "{s}");
    assert_eq!(lane("t2"), lane("t3"), "{s}");
    assert!(
        !s.steps.iter().any(|x| matches!(x, Step::HostAwait { .. })),
        "{s}"
    );
    verify(g, s).unwrap();
}
