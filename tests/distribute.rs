//! Distributed runs (src/distribute) with every rank a thread of this process: results
//! identical to one process and to the reference for 1, 2 and 4 ranks under delay
//! jitter; the cross-rank verifier's mutations; a rank failing mid-run.

mod common;
#[path = "common/dist.rs"]
mod dist;

use dist::*;
use offload_sched::distribute::{
    run_in_process, verify_ranks, DistError, DistPlan, Distribution, Envelope, RankView,
    TransferOp, Violation,
};
use offload_sched::exec::Buffers;
use offload_sched::model::{
    tiled_cholesky, tiled_gemm, BufferId, ElemType, Init, MapType, Program, ProgramBuilder, Section,
};
use offload_sched::plugin::Plugin;
use offload_sched::schedule::ScheduleOptions;
use offload_sched::Plan;
use std::time::Duration;

/// Runs `program` over `dist` with jitter `seed` on host plugins of the program's device
/// count; returns rank 0's buffers (the result) and the number of transfers.
fn run(program: &Program, dist: &Distribution, seed: u64) -> (Buffers, usize) {
    let plan = DistPlan::new(program, dist, &ScheduleOptions::default())
        .unwrap_or_else(|e| panic!("{}: {e}", program.name));
    let devices = program.devices.max(1);
    let plugin =
        move |r: u32| -> Box<dyn Plugin> { Box::new(common::host(devices, Some(seed + r as u64))) };
    let out = run_in_process(&plan, &plugin, TIMEOUT, Some((seed, 300)))
        .unwrap_or_else(|e| panic!("{}: {e}", program.name));
    assert_eq!(out.ranks.len() as u32, dist.ranks());
    let transfers = plan.split.transfers.len();
    (
        out.ranks.into_iter().next().unwrap().report.buffers,
        transfers,
    )
}

#[test]
fn tiled_programs_match_one_process_on_1_2_4_ranks() {
    let t = tiling(256, 64);
    for program in [tiled_cholesky(&t), tiled_gemm(&t)] {
        let want = one_process(&program);
        for ranks in [1, 2, 4] {
            let mut dist = Distribution::new(ranks).unwrap();
            let (p, q) = grid(ranks);
            for b in ["A", "B", "C"] {
                if let Some(id) = program.buffer_id(b) {
                    dist.block_cyclic(&t, id, p, q).unwrap();
                }
            }
            let (got, transfers) = run(&program, &dist, 40 + ranks as u64);
            assert_eq!(bytes(&got), want, "{} on {ranks} ranks", program.name);
            assert_eq!(
                transfers == 0,
                ranks == 1,
                "{} on {ranks} ranks",
                program.name
            );
        }
    }
}

#[test]
fn graph_files_match_one_process_on_1_2_4_ranks() {
    for name in [
        "saxpy.toml",
        "wavefront.toml",
        "pipeline.toml",
        "fanout_shared.toml",
        "cholesky_mapped.toml",
    ] {
        let program = common::plan(name).program().clone();
        let want = one_process(&program);
        for ranks in [1, 2, 4] {
            let dist = Distribution::new(ranks).unwrap();
            let (got, _) = run(&program, &dist, 7 * ranks as u64);
            assert_eq!(bytes(&got), want, "{name} on {ranks} ranks");
        }
    }
}

/// x on rank 0, y and z on rank 1: `y = 2x + y` then `z = 2x + z` both on rank 1 read x
/// from rank 0; the second read finds it still valid there.
fn two_readers() -> Program {
    let mut p = ProgramBuilder::new("two_readers");
    let x = p.buffer("x", ElemType::F32, 64, Init::Iota);
    let y = p.buffer("y", ElemType::F32, 64, Init::Fill(1.0));
    let z = p.buffer("z", ElemType::F32, 64, Init::Fill(3.0));
    p.target("scale", "saxpy")
        .num(1.0)
        .arg(x)
        .arg(x)
        .map(MapType::ToFrom, x);
    for (name, out) in [("first", y), ("second", z)] {
        p.target(name, "saxpy")
            .num(2.0)
            .arg(x)
            .arg(out)
            .map(MapType::To, x)
            .map(MapType::ToFrom, out);
    }
    p.build()
}

#[test]
fn received_data_is_kept_until_overwritten() {
    let program = two_readers();
    let mut dist = Distribution::new(2).unwrap();
    dist.own_buffer(&program, BufferId(0), 0).unwrap();
    dist.own_buffer(&program, BufferId(1), 1).unwrap();
    dist.own_buffer(&program, BufferId(2), 1).unwrap();
    let plan = DistPlan::new(&program, &dist, &ScheduleOptions::default()).unwrap();
    let moved: Vec<_> = plan
        .split
        .transfers
        .iter()
        .map(|t| (t.envelope.from, t.envelope.to, t.consumer.as_str(), t.bytes))
        .collect();
    // x once to rank 1 (for "first"; "second" reuses it), y and z back to rank 0 at the end.
    assert_eq!(
        moved,
        [(0, 1, "first", 256), (1, 0, "end", 256), (1, 0, "end", 256)]
    );
    assert_eq!(
        plan.split.placement,
        [
            ("scale".to_string(), 0),
            ("first".to_string(), 1),
            ("second".to_string(), 1)
        ]
    );
    let (got, _) = run(&program, &dist, 3);
    assert_eq!(bytes(&got), one_process(&program));
}

#[test]
fn explicit_placement_beats_owner_computes() {
    let program = two_readers();
    let mut dist = Distribution::new(2).unwrap();
    dist.own_buffer(&program, BufferId(1), 1).unwrap();
    dist.place("first", 0).unwrap();
    let plan = DistPlan::new(&program, &dist, &ScheduleOptions::default()).unwrap();
    assert_eq!(plan.split.placement[1], ("first".to_string(), 0));
    let mut bad = Distribution::new(2).unwrap();
    bad.place("nothing", 1).unwrap();
    let e = DistPlan::new(&program, &bad, &ScheduleOptions::default()).unwrap_err();
    assert!(
        matches!(e, DistError::Placed { ref name } if name == "nothing"),
        "{e}"
    );
}

#[test]
fn a_taskgraph_is_refused_by_name() {
    let program = common::plan("jacobi_taskgraph.toml").program().clone();
    let e = DistPlan::new(
        &program,
        &Distribution::new(2).unwrap(),
        &ScheduleOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(e, DistError::Unsupported { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("a distributed program takes no taskgraph"),
        "{e}"
    );
}

fn cholesky_plan(ranks: u32) -> DistPlan {
    let t = tiling(256, 64);
    let program = tiled_cholesky(&t);
    let mut dist = Distribution::new(ranks).unwrap();
    let (p, q) = grid(ranks);
    dist.block_cyclic(&t, program.buffer_id("A").unwrap(), p, q)
        .unwrap();
    DistPlan::new(&program, &dist, &ScheduleOptions::default()).unwrap()
}

/// The verifier over `plan`'s ranks with each rank's transfer ops edited by `edit`.
fn verify_edited(plan: &DistPlan, edit: impl Fn(&mut Vec<Vec<TransferOp>>)) -> Vec<Violation> {
    let mut ops = plan.transfer_ops.clone();
    edit(&mut ops);
    let views: Vec<RankView<'_>> = plan
        .plans
        .iter()
        .zip(&ops)
        .map(|(p, t)| RankView {
            graph: p.graph(),
            schedule: p.schedule(),
            transfers: t,
        })
        .collect();
    verify_ranks(&views)
}

#[test]
fn verifier_passes_the_split_and_catches_a_dropped_receive() {
    let plan = cholesky_plan(4);
    assert!(verify_edited(&plan, |_| {}).is_empty());
    let v = verify_edited(&plan, |ops| {
        let i = ops[1].iter().position(|t| !t.send).unwrap();
        ops[1].remove(i);
    });
    assert_eq!(v.len(), 1, "{v:?}");
    let Violation::UnmatchedSend { at, envelope } = &v[0] else {
        panic!("{v:?}")
    };
    assert_eq!(envelope.to, 1);
    assert!(at.region.starts_with("send "), "{}", v[0]);
    assert!(
        v[0].to_string().contains("has no matching receive"),
        "{}",
        v[0]
    );
}

#[test]
fn verifier_catches_a_swapped_tag() {
    let plan = cholesky_plan(2);
    let v = verify_edited(&plan, |ops| {
        let recvs: Vec<usize> = (0..ops[1].len())
            .filter(|&i| !ops[1][i].send)
            .take(2)
            .collect();
        let (a, b) = (ops[1][recvs[0]].envelope, ops[1][recvs[1]].envelope);
        ops[1][recvs[0]].envelope = b;
        ops[1][recvs[1]].envelope = a;
    });
    assert!(!v.is_empty());
    assert!(
        v.iter()
            .all(|v| matches!(v, Violation::Mismatch { .. } | Violation::Cycle { .. })),
        "{v:?}"
    );
    let text = v[0].to_string();
    assert!(
        text.contains("rank 1") && text.contains("recv r0→r1"),
        "{text}"
    );
}

/// Two one-rank programs built by hand: rank `r` receives `recv` from the other rank,
/// computes `make` (or not, `chained = false`) and sends `send`.
fn hand_rank(chained: bool, first: &str, second: &str) -> (Plan, [OpIdName; 2]) {
    let mut p = ProgramBuilder::new("hand");
    let x = p.buffer("x", ElemType::F32, 4, Init::Fill(0.0));
    let y = p.buffer("y", ElemType::F32, 4, Init::Fill(0.0));
    p.host_fn(first, &[], &[y.into()], |_| Ok(()));
    if chained {
        p.host_fn("make", &[y.into()], &[x.into()], |_| Ok(()));
    }
    p.host_fn(second, &[x.into()], &[], |_| Ok(()));
    let plan = Plan::new(p.build(), &ScheduleOptions::default()).unwrap();
    let find = |name: &str| {
        let g = plan.graph();
        let r = g.regions.iter().find(|r| r.name == name).unwrap();
        offload_sched::lower::OpId(r.ops.start)
    };
    let ids = [OpIdName(find(first)), OpIdName(find(second))];
    (plan, ids)
}

struct OpIdName(offload_sched::lower::OpId);

fn cross(chained: bool) -> Vec<Violation> {
    let (p0, [r0, s0]) = hand_rank(chained, "recv_y", "send_x");
    let (p1, [r1, s1]) = hand_rank(chained, "recv_x", "send_y");
    let sec = Section::new(BufferId(0), 0, 4);
    let t = |op: &OpIdName, send, from, to| TransferOp {
        op: op.0,
        send,
        envelope: Envelope { from, to, seq: 0 },
        bytes: 16,
        section: sec,
    };
    let ops0 = [t(&r0, false, 1, 0), t(&s0, true, 0, 1)];
    let ops1 = [t(&r1, false, 0, 1), t(&s1, true, 1, 0)];
    verify_ranks(&[
        RankView {
            graph: p0.graph(),
            schedule: p0.schedule(),
            transfers: &ops0,
        },
        RankView {
            graph: p1.graph(),
            schedule: p1.schedule(),
            transfers: &ops1,
        },
    ])
}

#[test]
fn verifier_catches_a_cycle_across_ranks() {
    let v = cross(true);
    assert_eq!(v.len(), 1, "{v:?}");
    let Violation::Cycle { ops } = &v[0] else {
        panic!("{v:?}")
    };
    let regions: Vec<(u32, &str)> = ops.iter().map(|o| (o.rank, o.region.as_str())).collect();
    assert_eq!(regions.len(), 6, "{}", v[0]);
    for want in [
        (0, "recv_y"),
        (0, "make"),
        (0, "send_x"),
        (1, "recv_x"),
        (1, "make"),
        (1, "send_y"),
    ] {
        assert!(regions.contains(&want), "{want:?} not in {}", v[0]);
    }
}

#[test]
fn verifier_catches_a_deadlock_of_lane_order() {
    // No data path joins each rank's receive to its send, but one host lane runs the
    // receive first on both ranks: each waits for a send queued behind the other's receive.
    let v = cross(false);
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(
        matches!(&v[0], Violation::Deadlock { ops } if ops.len() == 4),
        "{}",
        v[0]
    );
    assert!(
        v[0].to_string()
            .starts_with("deadlock: the ranks wait on each other: rank "),
        "{}",
        v[0]
    );
}

#[test]
fn a_failing_rank_ends_every_rank_naming_rank_and_op() {
    // rank 1 fails in "boom"; rank 0 waits for y from rank 1 and must not hang.
    let mut p = ProgramBuilder::new("fails");
    let x = p.buffer("x", ElemType::F32, 8, Init::Iota);
    let y = p.buffer("y", ElemType::F32, 8, Init::Fill(1.0));
    p.host_fn("boom", &[], &[y.into()], |_| Err("injected failure".into()));
    p.target("use_y", "saxpy")
        .num(2.0)
        .arg(y)
        .arg(x)
        .map(MapType::To, y)
        .map(MapType::ToFrom, x);
    let program = p.build();
    let mut dist = Distribution::new(2).unwrap();
    dist.own_buffer(&program, BufferId(0), 0).unwrap();
    dist.own_buffer(&program, BufferId(1), 1).unwrap();
    let plan = DistPlan::new(&program, &dist, &ScheduleOptions::default()).unwrap();
    let plugin = |_r: u32| -> Box<dyn Plugin> { Box::new(common::host(1, None)) };
    // A progress timeout of an hour: only the abort can end rank 0's receive.
    let e = run_in_process(&plan, &plugin, Duration::from_secs(3600), None).unwrap_err();
    let DistError::Run { rank, message } = &e else {
        panic!("{e}")
    };
    assert_eq!(*rank, 1);
    assert!(
        message.contains("host task \"boom\"") && message.contains("injected failure"),
        "{e}"
    );
}

#[test]
fn a_rank_that_fails_while_its_receive_waits_ends_with_its_own_error() {
    // rank 0 fails in "boom" (it writes y) while its receive lane already waits for x,
    // which rank 1 sends only after it has received y: no rank will ever send it. The
    // waiting receive must stop (HostCtx::run_failed) so rank 0 ends and aborts rank 1,
    // and the job's error is rank 0's, not a receive's progress timeout.
    let mut p = ProgramBuilder::new("fails_waiting");
    let x = p.buffer("x", ElemType::F32, 8, Init::Iota);
    let y = p.buffer("y", ElemType::F32, 8, Init::Fill(1.0));
    let z = p.buffer("z", ElemType::F32, 8, Init::Fill(0.0));
    p.host_fn("boom", &[], &[y.into()], |_| Err("injected failure".into()));
    p.target("use_y", "saxpy")
        .num(2.0)
        .arg(y)
        .arg(x)
        .map(MapType::To, y)
        .map(MapType::ToFrom, x);
    p.target("use_x", "saxpy")
        .num(1.0)
        .arg(x)
        .arg(z)
        .map(MapType::To, x)
        .map(MapType::ToFrom, z);
    let program = p.build();
    let mut dist = Distribution::new(2).unwrap();
    dist.own_buffer(&program, BufferId(0), 1).unwrap();
    dist.own_buffer(&program, BufferId(1), 0).unwrap();
    dist.own_buffer(&program, BufferId(2), 0).unwrap();
    let plan = DistPlan::new(&program, &dist, &ScheduleOptions::default()).unwrap();
    let plugin = |_r: u32| -> Box<dyn Plugin> { Box::new(common::host(1, None)) };
    // Without the stop, rank 0's receive of x ends only at this timeout, and the error
    // would be that receive's.
    let e = run_in_process(&plan, &plugin, Duration::from_secs(60), None).unwrap_err();
    let DistError::Run { rank, message } = &e else {
        panic!("{e}")
    };
    assert_eq!(*rank, 0, "{e}");
    assert!(
        message.contains("host task \"boom\"") && message.contains("injected failure"),
        "{e}"
    );
}

/// x on rank 0, y on rank 1; `make_x` (rank 0) and `make_y` (rank 1) write them, then
/// `use_y` on rank 0 reads y and `use_x` on rank 1 reads x. In program order rank 0
/// receives y before it sends x; the send must not wait for that receive.
fn crossed_reads() -> (Program, Distribution) {
    let mut p = ProgramBuilder::new("crossed_reads");
    let x = p.buffer("x", ElemType::F32, 64, Init::Iota);
    let y = p.buffer("y", ElemType::F32, 64, Init::Fill(1.0));
    let w0 = p.buffer("w0", ElemType::F32, 64, Init::Fill(2.0));
    let w1 = p.buffer("w1", ElemType::F32, 64, Init::Fill(3.0));
    for (name, b) in [("make_x", x), ("make_y", y)] {
        p.target(name, "saxpy")
            .num(1.0)
            .arg(b)
            .arg(b)
            .map(MapType::ToFrom, b);
    }
    for (name, input, out) in [("use_y", y, w0), ("use_x", x, w1)] {
        p.target(name, "saxpy")
            .num(2.0)
            .arg(input)
            .arg(out)
            .map(MapType::To, input)
            .map(MapType::ToFrom, out);
    }
    let program = p.build();
    let mut dist = Distribution::new(2).unwrap();
    for (b, r) in [(x, 0), (y, 1), (w0, 0), (w1, 1)] {
        dist.own_buffer(&program, b, r).unwrap();
    }
    (program, dist)
}

#[test]
fn a_send_goes_as_soon_as_its_data_is_written_not_after_an_earlier_receive() {
    use offload_sched::model::Construct;
    use offload_sched::schedule::Step;
    let (program, dist) = crossed_reads();
    let plan = DistPlan::new(&program, &dist, &ScheduleOptions::default()).unwrap();
    // Rank 0's body: the send of x right after x's writer, then the receive of y before
    // its reader; the send waits for no receive, the receive follows the send before it
    // (so nothing that waits for y is issued ahead of the send's data).
    let body: Vec<(String, Vec<String>)> = plan.split.ranks[0]
        .program
        .body
        .iter()
        .map(|c| match c {
            Construct::Target(t) => (t.name.clone(), t.after.clone()),
            Construct::HostTask(h) => (h.name.clone(), h.after.clone()),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    let (send, recv) = ("send r0→r1 #0", "recv r1→r0 #0");
    let names: Vec<&str> = body.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names[..4], ["make_x", send, recv, "use_y"], "{names:?}");
    assert!(body[1].1.is_empty(), "{body:?}");
    assert_eq!(body[2].1, [send], "{body:?}");
    // In rank 0's schedule the send's op is issued before the receive's, the send on
    // lane h0, the receive on h1.
    let sched = plan.plans[0].schedule();
    let step_of = |op| {
        sched
            .steps
            .iter()
            .position(|s| matches!(s, Step::Op(o) if *o == op))
            .unwrap()
    };
    let ops = &plan.transfer_ops[0];
    let s = ops.iter().find(|t| t.send).unwrap();
    let r = ops.iter().find(|t| !t.send && t.envelope.seq == 0).unwrap();
    assert!(step_of(s.op) < step_of(r.op), "{ops:?}");
    assert_eq!(
        (sched.op_lane[s.op.index()], sched.op_lane[r.op.index()]),
        (0, 1)
    );
    // And the run is right under jitter.
    for seed in [1, 2, 3] {
        let (got, _) = run(&program, &dist, seed);
        assert_eq!(bytes(&got), one_process(&program));
    }
}

/// y on rank 1, the rest on rank 0. In program order rank 0 first runs `use_y` (it reads
/// y, written by `make_y` on rank 1), then `local` (x → z, data it holds), then
/// `after_use` (reads w0, which `use_y` writes).
fn remote_then_local() -> (Program, Distribution) {
    let mut p = ProgramBuilder::new("remote_then_local");
    let x = p.buffer("x", ElemType::F32, 64, Init::Iota);
    let y = p.buffer("y", ElemType::F32, 64, Init::Fill(1.0));
    let w0 = p.buffer("w0", ElemType::F32, 64, Init::Fill(2.0));
    let z = p.buffer("z", ElemType::F32, 64, Init::Fill(3.0));
    let z2 = p.buffer("z2", ElemType::F32, 64, Init::Fill(4.0));
    p.target("make_y", "saxpy")
        .num(1.0)
        .arg(y)
        .arg(y)
        .map(MapType::ToFrom, y);
    for (name, input, out) in [("use_y", y, w0), ("local", x, z), ("after_use", w0, z2)] {
        p.target(name, "saxpy")
            .num(2.0)
            .arg(input)
            .arg(out)
            .map(MapType::To, input)
            .map(MapType::ToFrom, out);
    }
    let program = p.build();
    let mut dist = Distribution::new(2).unwrap();
    for (b, r) in [(x, 0), (y, 1), (w0, 0), (z, 0), (z2, 0)] {
        dist.own_buffer(&program, b, r).unwrap();
    }
    (program, dist)
}

/// The names of rank `rank`'s constructs, in its body's order (targets and host tasks
/// only: what a split of these programs holds).
fn body_names(plan: &DistPlan, rank: usize) -> Vec<String> {
    use offload_sched::model::Construct;
    plan.split.ranks[rank]
        .program
        .body
        .iter()
        .map(|c| match c {
            Construct::Target(t) => t.name.clone(),
            Construct::HostTask(h) => h.name.clone(),
            other => panic!("unexpected {other:?}"),
        })
        .collect()
}

#[test]
fn local_work_goes_ahead_of_work_waiting_for_a_receive() {
    let (program, dist) = remote_then_local();
    let plan = DistPlan::new(&program, &dist, &ScheduleOptions::default()).unwrap();
    let names = body_names(&plan, 0);
    // `local` needs nothing from rank 1: it goes first; the receive of y and its reader
    // follow, and `after_use` stays after `use_y`, whose output it reads.
    assert_eq!(
        names,
        ["local", "recv r1→r0 #0", "use_y", "after_use"],
        "{names:?}"
    );
    let b1 = body_names(&plan, 1);
    assert_eq!(b1, ["make_y", "send r1→r0 #0"], "{b1:?}");
    for seed in [1, 2, 3] {
        let (got, _) = run(&program, &dist, seed);
        assert_eq!(bytes(&got), one_process(&program));
    }
}

/// Everything on rank 0 but `use_b` (rank 1, reads b). In program order rank 0 runs
/// `leaf` (x → z, which nothing reads) before `make_b` (writes b, which rank 1 waits
/// for).
fn leaf_then_needed() -> (Program, Distribution) {
    let mut p = ProgramBuilder::new("leaf_then_needed");
    let x = p.buffer("x", ElemType::F32, 64, Init::Iota);
    let z = p.buffer("z", ElemType::F32, 64, Init::Fill(1.0));
    let b = p.buffer("b", ElemType::F32, 64, Init::Fill(2.0));
    let w = p.buffer("w", ElemType::F32, 64, Init::Fill(3.0));
    for (name, input, out) in [("leaf", x, z), ("make_b", x, b), ("use_b", b, w)] {
        p.target(name, "saxpy")
            .num(2.0)
            .arg(input)
            .arg(out)
            .map(MapType::To, input)
            .map(MapType::ToFrom, out);
    }
    let program = p.build();
    let mut dist = Distribution::new(2).unwrap();
    for (buf, r) in [(x, 0), (z, 0), (b, 0), (w, 1)] {
        dist.own_buffer(&program, buf, r).unwrap();
    }
    (program, dist)
}

#[test]
fn work_another_rank_waits_for_goes_first() {
    let (program, dist) = leaf_then_needed();
    let plan = DistPlan::new(&program, &dist, &ScheduleOptions::default()).unwrap();
    let names = body_names(&plan, 0);
    // The longest path starts at `make_b` (make_b → send → use_b on rank 1 → the final
    // gather of w): it and its send go before `leaf`.
    assert_eq!(names[..3], ["make_b", "send r0→r1 #0", "leaf"], "{names:?}");
    for seed in [1, 2] {
        let (got, _) = run(&program, &dist, seed);
        assert_eq!(bytes(&got), one_process(&program));
    }
}

#[test]
fn every_receive_is_on_a_lane_of_its_own_and_every_send_off_it() {
    // The tiled Cholesky on 2 and 4 ranks: each rank's receives on h1, its sends and the
    // rest of its host ops (`end`) on h0, receives chained to receives and sends to
    // sends; the cross-rank check passes (DistPlan::new runs it).
    for ranks in [2, 4] {
        let plan = cholesky_plan(ranks);
        for (r, ops) in plan.transfer_ops.iter().enumerate() {
            let (g, s) = (plan.plans[r].graph(), plan.plans[r].schedule());
            assert_eq!(s.host_lanes, 2);
            let (mut sends, mut recvs) = (0, 0);
            for t in ops {
                let want = if t.send { 0 } else { 1 };
                assert_eq!(s.op_lane[t.op.index()], want, "rank {r}: {t:?}");
                if t.send {
                    sends += 1;
                } else {
                    recvs += 1;
                }
            }
            assert!(sends + recvs > 0, "rank {r} of {ranks} has no transfers");
            for op in g.op_ids() {
                let host = s.op_stream[op.index()].is_none();
                let transfer = ops.iter().any(|t| t.op == op);
                if host && !transfer {
                    assert_eq!(s.op_lane[op.index()], 0, "rank {r}: {op}");
                }
            }
        }
        // Sends chained to sends; each receive after the previous receive and the last
        // send before it.
        for r in &plan.split.ranks {
            let mut last: [Option<String>; 2] = [None, None];
            for c in &r.program.body {
                let offload_sched::model::Construct::HostTask(h) = c else {
                    continue;
                };
                let recv = h.name.starts_with("recv ");
                if !recv && !h.name.starts_with("send ") {
                    continue;
                }
                let mut want: Vec<String> = last[usize::from(recv)]
                    .replace(h.name.clone())
                    .into_iter()
                    .collect();
                if recv {
                    want.extend(last[0].clone());
                }
                assert_eq!(h.after, want, "{}", h.name);
            }
        }
    }
}

/// y on rank 1, written by a host task that takes a while (`make_y`, 300 ms); x and w on
/// rank 0. In program order rank 0 first reads y (`use_y`: a receive), then writes x
/// (`make_x`), which rank 1 reads (`use_x`): rank 0's send of x needs nothing of y.
fn late_receive_then_send() -> (Program, Distribution) {
    let mut p = ProgramBuilder::new("late_receive_then_send");
    let x = p.buffer("x", ElemType::F32, 64, Init::Iota);
    let y = p.buffer("y", ElemType::F32, 64, Init::Fill(1.0));
    let w0 = p.buffer("w0", ElemType::F32, 64, Init::Fill(2.0));
    let w1 = p.buffer("w1", ElemType::F32, 64, Init::Fill(3.0));
    p.host_fn("make_y", &[], &[y.into()], |_| {
        std::thread::sleep(Duration::from_millis(300));
        Ok(())
    });
    p.target("use_y", "saxpy")
        .num(2.0)
        .arg(y)
        .arg(w0)
        .map(MapType::To, y)
        .map(MapType::ToFrom, w0);
    p.target("make_x", "saxpy")
        .num(1.0)
        .arg(x)
        .arg(x)
        .map(MapType::ToFrom, x);
    p.target("use_x", "saxpy")
        .num(2.0)
        .arg(x)
        .arg(w1)
        .map(MapType::To, x)
        .map(MapType::ToFrom, w1);
    let program = p.build();
    let mut dist = Distribution::new(2).unwrap();
    for (b, r) in [(x, 0), (y, 1), (w0, 0), (w1, 1)] {
        dist.own_buffer(&program, b, r).unwrap();
    }
    dist.set_program_order(true);
    (program, dist)
}

#[test]
fn a_send_completes_while_an_earlier_receive_still_waits() {
    // Rank 0's body in program order: the receive of y, then the send of x. On one lane
    // (the old model) the send ran after the receive, which waits for rank 1's slow
    // make_y; on its own lane the send has gone before the receive completes.
    let (program, dist) = late_receive_then_send();
    let plan = DistPlan::new(&program, &dist, &ScheduleOptions::default()).unwrap();
    let names = body_names(&plan, 0);
    let at = |n: &str| names.iter().position(|x| x == n).unwrap();
    assert!(at("recv r1→r0 #0") < at("send r0→r1 #0"), "{names:?}");
    let plugin = |_r: u32| -> Box<dyn Plugin> { Box::new(common::host(1, None)) };
    let out = run_in_process(&plan, &plugin, TIMEOUT, None).unwrap();
    let report = &out.ranks[0].report;
    let g = plan.plans[0].graph();
    let end_of = |name: &str| {
        report
            .ops
            .iter()
            .find(|o| g.region_of(o.op).name == name)
            .map(|o| o.end_us)
            .unwrap_or_else(|| panic!("no op of {name}"))
    };
    assert!(
        end_of("send r0→r1 #0") < end_of("recv r1→r0 #0"),
        "the send waited for the receive"
    );
    assert_eq!(bytes(&report.buffers), one_process(&program));
}

#[test]
fn a_receive_follows_the_sends_before_it_so_no_send_waits_behind_it() {
    let (program, dist) = send_behind_a_later_receive();
    for (o, lower) in every_schedule() {
        let plan = DistPlan::new_lowered(&program, &dist, &o, &lower)
            .unwrap_or_else(|e| panic!("{o:?}, {lower:?}: {e}"));
        let names = body_names(&plan, 0);
        let at = |n: &str| names.iter().position(|x| x == n).unwrap();
        let (send, recv) = ("send r0→r1 #0", "recv r1→r0 #1");
        assert!(at(send) < at(recv), "{names:?}");
        let after = plan.split.ranks[0]
            .program
            .body
            .iter()
            .find_map(|c| match c {
                offload_sched::model::Construct::HostTask(h) if h.name == recv => {
                    Some(h.after.clone())
                }
                _ => None,
            })
            .unwrap();
        assert!(after.iter().any(|a| a == send), "{after:?}");
    }
    for seed in [1, 2, 3] {
        let (got, _) = run(&program, &dist, seed);
        assert_eq!(bytes(&got), one_process(&program));
    }
}

#[test]
fn a_tester_graph_that_deadlocked_on_4_ranks_splits_into_a_deadlock_free_plan() {
    // 13 regions over 5 buffers of 70000 f32, default owners, 3 regions placed on rank
    // 0. On 4 ranks rank 0's issue order once blocked on "recv r3→r0 #0" before the
    // device work of "send r0→r3 #0" (refused by the cross-rank check as a deadlock).
    let file = common::plan("distributed/deadlock_split_4ranks.toml");
    let program = file.program().clone();
    let want = one_process(&program);
    for ranks in 1..=4 {
        let dist = offload_sched::distribute::file::distribution_from_source(
            file.source().unwrap(),
            &program,
            ranks,
        )
        .unwrap();
        for (o, lower) in every_schedule() {
            DistPlan::new_lowered(&program, &dist, &o, &lower)
                .unwrap_or_else(|e| panic!("{ranks} ranks, {o:?}, {lower:?}: {e}"));
        }
        let (got, _) = run(&program, &dist, 5 + ranks as u64);
        assert_eq!(bytes(&got), want, "{ranks} ranks");
    }
}

#[test]
fn random_programs_split_into_deadlock_free_plans() {
    // 4 × 30 programs, 48 schedules each. Before every receive followed the sends
    // before it, 72 of these 5760 plans were refused by the cross-rank check as
    // deadlocks.
    let mut refused = Vec::new();
    for seed in 0..30 {
        for ranks in 2..=5 {
            let (program, dist) = random_program(seed * 7919 + ranks as u64, ranks);
            for (o, lower) in every_schedule() {
                for random_streams in [None, Some(seed)] {
                    let o = ScheduleOptions {
                        random_streams,
                        ..o
                    };
                    if let Err(e) = DistPlan::new_lowered(&program, &dist, &o, &lower) {
                        refused.push(format!("seed {seed}, {ranks} ranks, {o:?}: {e}"));
                    }
                }
            }
        }
    }
    assert!(
        refused.is_empty(),
        "{} refused:\n{}",
        refused.len(),
        refused[..refused.len().min(3)].join("\n")
    );
}
