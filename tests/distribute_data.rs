//! Distributed runs of programs with device data environments (issue 29): `enter data`,
//! `exit data`, `target data`, `update` and `present` maps, every rank a thread of this
//! process; results identical to one process (and the reference) under delay jitter.

mod common;
#[path = "common/dist.rs"]
mod dist;

use dist::*;
use offload_sched::distribute::{DistError, DistPlan, Distribution};
use offload_sched::exec::Buffers;
use offload_sched::model::{
    tiled_cholesky, tiled_gemm, tiled_lu, BufferId, DataStyle, ElemType, Init, MapItem, MapType,
    Program, ProgramBuilder, Section,
};
use offload_sched::schedule::ScheduleOptions;

/// [`run_jittered`] under the default schedule.
fn run(program: &Program, dist: &Distribution, seed: u64, inline: bool) -> Buffers {
    run_jittered(program, dist, &ScheduleOptions::default(), seed, inline)
}

#[test]
fn entered_tiled_programs_match_one_process_on_1_2_4_ranks() {
    let t = offload_sched::model::Tiling {
        style: DataStyle::Entered,
        ..tiling(256, 64)
    };
    for program in [tiled_cholesky(&t), tiled_gemm(&t), tiled_lu(&t)] {
        let want = one_process(&program);
        for ranks in [1, 2, 4] {
            let mut dist = Distribution::new(ranks).unwrap();
            let (p, q) = grid(ranks);
            for b in ["A", "B", "C"] {
                if let Some(id) = program.buffer_id(b) {
                    dist.block_cyclic(&t, id, p, q).unwrap();
                }
            }
            for inline in [false, true] {
                let got = run(&program, &dist, 50 + ranks as u64, inline);
                assert_eq!(
                    bytes(&got),
                    want,
                    "{} on {ranks} ranks, inline {inline}",
                    program.name
                );
            }
        }
    }
}

/// Buffer `i` on rank `(i + 1) mod ranks` (so most buffers are off rank 0).
fn spread(program: &Program, ranks: u32) -> Distribution {
    let mut dist = Distribution::new(ranks).unwrap();
    for i in 0..program.buffers.len() as u32 {
        dist.own_buffer(program, BufferId(i), (i + 1) % ranks)
            .unwrap();
    }
    dist
}

/// Every graph file with data constructs (but the taskgraph and the two-device one)
/// gives the one-process result on 2 and 4 ranks, buffers spread over the ranks; the
/// tiled ones (12 × 12, tiles of 4) with `A` block-cyclic too.
#[test]
fn graph_files_with_data_constructs_match_one_process_on_2_and_4_ranks() {
    for name in [
        "jacobi.toml",
        "cholesky_entered.toml",
        "lu_entered.toml",
        "case_d01.toml",
        "case_d02.toml",
        "case_d03.toml",
        "case_e01.toml",
        "case_e02.toml",
        "case_m01_m04_ok.toml",
        "case_m07.toml",
        "case_m08.toml",
        "case_m09.toml",
        "case_m12_ok.toml",
        "case_m13.toml",
        "case_m14.toml",
        "case_m15.toml",
        "fanout.toml",
        "helloworld-chain-5.toml",
        "montage-2mass-005d.toml",
    ] {
        let program = common::plan(name).program().clone();
        let want = one_process(&program);
        for ranks in [2, 4] {
            let mut dists = vec![spread(&program, ranks)];
            if name.ends_with("_entered.toml") {
                let t = offload_sched::model::Tiling {
                    style: DataStyle::Entered,
                    ..tiling(12, 4)
                };
                let mut dist = Distribution::new(ranks).unwrap();
                let (p, q) = grid(ranks);
                let a = program.buffer_id("A").unwrap();
                dist.block_cyclic(&t, a, p, q).unwrap();
                dists.push(dist);
            }
            for dist in dists {
                let got = run(&program, &dist, 5 * ranks as u64, false);
                assert_eq!(bytes(&got), want, "{name} on {ranks} ranks");
            }
        }
    }
}

/// `enter data map(to: x)`, then a host task on rank 0 writes x (no `update to`), then
/// a region on rank 1 reads x on the device: it sees the entered (stale) value, as in
/// one process; `exit data map(release: x)` leaves the host write as x's value.
#[test]
fn a_region_reads_the_stale_device_value_after_a_host_write() {
    let mut p = ProgramBuilder::new("stale_device");
    let x = p.buffer("x", ElemType::F32, 64, Init::Iota);
    let y = p.buffer("y", ElemType::F32, 64, Init::Fill(1.0));
    let sx = Section::new(x, 0, 64);
    drop(p.enter_data("enter", vec![MapItem::new(MapType::To, sx)]));
    p.host_fn("host_write", &[], &[x.into()], |ctx| {
        for v in ctx.write_at::<f32>(BufferId(0), 0, 64)?.iter_mut() {
            *v = 100.0;
        }
        Ok(())
    });
    p.target("use", "saxpy")
        .num(2.0)
        .arg(x)
        .arg(y)
        .map_item(MapItem::new(MapType::To, sx).present())
        .map(MapType::ToFrom, y);
    drop(p.exit_data("exit", vec![MapItem::new(MapType::Release, sx)]));
    let program = p.build();
    let want = one_process(&program);
    // y = 2·iota + 1 (the device's x), x = 100 (the host's).
    let ys: Vec<f32> = (0..64).map(|i| 2.0 * i as f32 + 1.0).collect();
    assert_eq!(want[1].1, bytemuck_f32(&ys));
    assert_eq!(want[0].1, bytemuck_f32(&[100.0; 64]));
    let mut dist = Distribution::new(2).unwrap();
    dist.own_buffer(&program, x, 0).unwrap();
    dist.own_buffer(&program, y, 1).unwrap();
    let plan = DistPlan::new(&program, &dist, &ScheduleOptions::default()).unwrap();
    assert_eq!(
        plan.split.placement,
        [("host_write".to_string(), 0), ("use".to_string(), 1)]
    );
    for seed in [1, 2, 3] {
        assert_eq!(bytes(&run(&program, &dist, seed, false)), want);
    }
}

fn bytemuck_f32(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

/// A region on rank 1 writes present x; `update from(x)` (every rank); a host task on
/// rank 0 reads x into y: it sees rank 1's device value (sent from rank 1's host).
#[test]
fn update_from_brings_a_remote_device_write_to_a_host_task() {
    let mut p = ProgramBuilder::new("update_from_remote");
    let x = p.buffer("x", ElemType::F32, 64, Init::Iota);
    let y = p.buffer("y", ElemType::F32, 64, Init::Zeros);
    let sx = Section::new(x, 0, 64);
    drop(p.enter_data("enter", vec![MapItem::new(MapType::To, sx)]));
    p.target("bump", "increment")
        .arg(x)
        .map_item(MapItem::new(MapType::ToFrom, sx).present());
    drop(p.update("show", vec![MapItem::new(MapType::From, sx)]));
    p.host_fn("copy", &[x.into()], &[y.into()], |ctx| {
        let v = ctx.read_at::<f32>(BufferId(0), 0, 64)?.to_vec();
        ctx.write_at::<f32>(BufferId(1), 0, 64)?.copy_from_slice(&v);
        Ok(())
    });
    drop(p.exit_data("exit", vec![MapItem::new(MapType::Delete, sx)]));
    let program = p.build();
    let want = one_process(&program);
    let plus1: Vec<f32> = (0..64).map(|i| i as f32 + 1.0).collect();
    assert_eq!(want[1].1, bytemuck_f32(&plus1));
    let mut dist = Distribution::new(2).unwrap();
    dist.own_buffer(&program, x, 1).unwrap();
    dist.own_buffer(&program, y, 0).unwrap();
    let plan = DistPlan::new(&program, &dist, &ScheduleOptions::default()).unwrap();
    assert_eq!(
        plan.split.placement,
        [("bump".to_string(), 1), ("copy".to_string(), 0)]
    );
    // x's updated value once to rank 0 (for "copy"; the end finds it there).
    let moved: Vec<_> = plan
        .split
        .transfers
        .iter()
        .map(|t| (t.envelope.from, t.envelope.to, t.consumer.as_str()))
        .collect();
    assert_eq!(moved, [(1, 0, "copy")]);
    for seed in [4, 5] {
        assert_eq!(bytes(&run(&program, &dist, seed, false)), want);
    }
}

/// `always` maps of present data: `map(always, to: x)` on a region copies rank 1's
/// (current) host x onto its device, `map(always, from: x)` copies the result back to
/// the host while x stays entered.
#[test]
fn always_maps_of_present_data_copy() {
    let mut p = ProgramBuilder::new("always_present");
    let x = p.buffer("x", ElemType::F32, 64, Init::Iota);
    let z = p.buffer("z", ElemType::F32, 64, Init::Zeros);
    let sx = Section::new(x, 0, 64);
    drop(p.enter_data("enter", vec![MapItem::new(MapType::To, sx)]));
    p.host_fn("host_write", &[], &[x.into()], |ctx| {
        for v in ctx.write_at::<f32>(BufferId(0), 0, 64)?.iter_mut() {
            *v *= 3.0;
        }
        Ok(())
    });
    // Device x = host x (3·iota), then + 1, copied back: host x = 3·iota + 1.
    p.target("bump", "increment")
        .arg(x)
        .map_item(MapItem::new(MapType::ToFrom, sx).present().always());
    // Device x again + 1, not copied back (count stays 1).
    p.target("bump2", "increment")
        .arg(x)
        .map_item(MapItem::new(MapType::ToFrom, sx).present());
    // z = host x.
    p.host_fn("copy", &[x.into()], &[z.into()], |ctx| {
        let v = ctx.read_at::<f32>(BufferId(0), 0, 64)?.to_vec();
        ctx.write_at::<f32>(BufferId(1), 0, 64)?.copy_from_slice(&v);
        Ok(())
    });
    drop(p.exit_data("exit", vec![MapItem::new(MapType::From, sx)]));
    let program = p.build();
    let want = one_process(&program);
    let z_want: Vec<f32> = (0..64).map(|i| 3.0 * i as f32 + 1.0).collect();
    let x_want: Vec<f32> = (0..64).map(|i| 3.0 * i as f32 + 2.0).collect();
    assert_eq!(want[1].1, bytemuck_f32(&z_want));
    assert_eq!(want[0].1, bytemuck_f32(&x_want));
    for (bump, bump2, copy) in [(1, 0, 1), (0, 1, 0), (1, 1, 0)] {
        let mut dist = Distribution::new(2).unwrap();
        dist.place("host_write", 0).unwrap();
        dist.place("bump", bump).unwrap();
        dist.place("bump2", bump2).unwrap();
        dist.place("copy", copy).unwrap();
        for seed in [6, 7] {
            assert_eq!(
                bytes(&run(&program, &dist, seed, false)),
                want,
                "bump on {bump}, bump2 on {bump2}, copy on {copy}"
            );
        }
    }
}

/// The case the suggested model refused: rank 1's device writes x, rank 0's host
/// writes x (the current host value, on rank 0 alone), a region on rank 0 reads x on
/// the device, so rank 1's device value passes through rank 0's host copy. The split
/// keeps rank 0's host value aside and puts it back: the final x is the host write's,
/// as in one process.
#[test]
fn a_device_value_passing_through_the_only_current_host_copy_keeps_it() {
    let mut p = ProgramBuilder::new("only_host_copy");
    let x = p.buffer("x", ElemType::F32, 64, Init::Iota);
    let y = p.buffer("y", ElemType::F32, 64, Init::Fill(1.0));
    let sx = Section::new(x, 0, 64);
    drop(p.enter_data("enter", vec![MapItem::new(MapType::To, sx)]));
    p.target("dev_write", "increment")
        .arg(x)
        .map_item(MapItem::new(MapType::ToFrom, sx).present());
    p.host_fn("host_write", &[], &[x.into()], |ctx| {
        for v in ctx.write_at::<f32>(BufferId(0), 0, 64)?.iter_mut() {
            *v = -5.0;
        }
        Ok(())
    });
    p.target("dev_read", "saxpy")
        .num(2.0)
        .arg(x)
        .arg(y)
        .map_item(MapItem::new(MapType::To, sx).present())
        .map(MapType::ToFrom, y);
    drop(p.exit_data("exit", vec![MapItem::new(MapType::Release, sx)]));
    let program = p.build();
    let want = one_process(&program);
    let ys: Vec<f32> = (0..64).map(|i| 2.0 * (i as f32 + 1.0) + 1.0).collect();
    assert_eq!(want[1].1, bytemuck_f32(&ys));
    assert_eq!(want[0].1, bytemuck_f32(&[-5.0; 64]));
    let mut dist = Distribution::new(2).unwrap();
    dist.place("dev_write", 1).unwrap();
    dist.place("host_write", 0).unwrap();
    dist.place("dev_read", 0).unwrap();
    let plan = DistPlan::new(&program, &dist, &ScheduleOptions::default()).unwrap();
    let names: Vec<String> = plan.split.ranks[0]
        .program
        .body
        .iter()
        .map(|c| match c {
            offload_sched::model::Construct::HostTask(h) => h.name.clone(),
            offload_sched::model::Construct::Update(d) => d.name.clone(),
            other => other.kind_name().to_string(),
        })
        .filter(|n| n.contains('#'))
        .collect();
    // Rank 0 keeps its host x aside, receives rank 1's device x, copies it to its
    // device and puts its host x back.
    assert_eq!(
        names,
        [
            "keep r1→r0 #0",
            "recv r1→r0 #0",
            "h2d r1→r0 #0",
            "put back r1→r0 #0"
        ]
    );
    for seed in [8, 9, 10] {
        assert_eq!(bytes(&run(&program, &dist, seed, false)), want);
    }
}

#[test]
fn a_taskgraph_is_refused_naming_why() {
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

#[test]
fn a_data_construct_off_device_0_is_refused() {
    let mut p = ProgramBuilder::new("dev1");
    p.devices(2);
    let x = p.buffer("x", ElemType::F32, 8, Init::Iota);
    drop(
        p.enter_data(
            "in1",
            vec![MapItem::new(MapType::To, Section::new(x, 0, 8))],
        )
        .device(1),
    );
    let program = p.build();
    let e = DistPlan::new(
        &program,
        &Distribution::new(2).unwrap(),
        &ScheduleOptions::default(),
    )
    .unwrap_err();
    assert!(
        matches!(e, DistError::DataDevice { ref name, .. } if name == "in1"),
        "{e}"
    );
}

/// A random program of `seed` over `ranks` ranks on entered data: buffers `b0`, `b1`
/// entered in halves, `b2` never; 8 to 19 constructs: regions incrementing a present
/// half (some with `always`), `saxpy` from a present half into another or into `b2`
/// (mapped), host tasks writing a half or copying one into `b2`, `update to` / `from`
/// of a half; every region and host task placed on a random rank; `exit data` at the
/// end.
fn random_entered(seed: u64, ranks: u32) -> (Program, Distribution) {
    let mut below = below_of(seed);
    let mut p = ProgramBuilder::new("random_entered");
    let b: Vec<BufferId> = (0..3)
        .map(|i| {
            p.buffer(
                &format!("b{i}"),
                ElemType::F32,
                64,
                Init::Fill(i as f64 + 1.0),
            )
        })
        .collect();
    let halves: Vec<Section> = (0..2)
        .flat_map(|i| [Section::new(b[i], 0, 32), Section::new(b[i], 32, 32)])
        .collect();
    let enter: Vec<MapItem> = halves
        .iter()
        .map(|&s| MapItem::new(MapType::To, s))
        .collect();
    drop(p.enter_data("enter", enter));
    let mut placed = Vec::new();
    for k in 0..8 + below(12) {
        let name = format!("c{k}");
        let x = halves[below(4) as usize];
        let y = halves[below(4) as usize];
        let mut place = true;
        match below(8) {
            0 | 1 => {
                let mut m = MapItem::new(MapType::ToFrom, y).present();
                if below(3) == 0 {
                    m = m.always();
                }
                p.target(&name, "increment").arg(y).map_item(m);
            }
            2 if x != y => {
                p.target(&name, "saxpy")
                    .num(0.5)
                    .arg(x)
                    .arg(y)
                    .map_item(MapItem::new(MapType::To, x).present())
                    .map_item(MapItem::new(MapType::ToFrom, y).present());
            }
            3 => {
                let out = Section::new(b[2], x.lo, 32);
                p.target(&name, "saxpy")
                    .num(2.0)
                    .arg(x)
                    .arg(out)
                    .map_item(MapItem::new(MapType::To, x).present())
                    .map(MapType::ToFrom, out);
            }
            4 => {
                let (buf, lo) = (y.buf, y.lo);
                p.host_fn(&name, &[], &[y.into()], move |ctx| {
                    for v in ctx.write_at::<f32>(buf, lo, 32)?.iter_mut() {
                        *v = *v * 3.0 + 1.0;
                    }
                    Ok(())
                });
            }
            5 => {
                let out = Section::new(b[2], x.lo, 32);
                let (xb, xlo, ob, olo) = (x.buf, x.lo, out.buf, out.lo);
                p.host_fn(&name, &[x.into()], &[out.into()], move |ctx| {
                    let v = ctx.read_at::<f32>(xb, xlo, 32)?.to_vec();
                    for (o, v) in ctx.write_at::<f32>(ob, olo, 32)?.iter_mut().zip(v) {
                        *o += v;
                    }
                    Ok(())
                });
            }
            6 => {
                drop(p.update(&name, vec![MapItem::new(MapType::To, y)]));
                place = false;
            }
            _ => {
                drop(p.update(&name, vec![MapItem::new(MapType::From, y)]));
                place = false;
            }
        }
        if place {
            placed.push((name, below(ranks as u64) as u32));
        }
    }
    let exit: Vec<MapItem> = halves
        .iter()
        .map(|&s| MapItem::new(MapType::From, s))
        .collect();
    drop(p.exit_data("exit", exit));
    let program = p.build();
    let mut dist = Distribution::new(ranks).unwrap();
    for (name, r) in &placed {
        if program.body.iter().any(|c| match c {
            offload_sched::model::Construct::Target(t) => &t.name == name,
            offload_sched::model::Construct::HostTask(h) => &h.name == name,
            _ => false,
        }) {
            dist.place(name, *r).unwrap();
        }
    }
    (program, dist)
}

/// Random programs on entered data (stale host and device copies, `always`, updates,
/// staging through host copies that hold the current host value) give the one-process
/// result on 2, 3 and 4 ranks under jitter.
#[test]
fn random_programs_on_entered_data_match_one_process() {
    for seed in 0..40 {
        for ranks in [2, 3, 4] {
            let (program, dist) = random_entered(seed, ranks);
            let want = one_process(&program);
            let got = run(&program, &dist, seed + ranks as u64, seed % 4 == 0);
            assert_eq!(bytes(&got), want, "seed {seed} on {ranks} ranks");
        }
    }
}
