//! Helpers of the distributed-run tests (`distribute.rs`, `distribute_inline.rs`,
//! `distribute_data.rs`): programs, distributions, schedules, a jittered in-process run
//! and the one-process result to compare with.

#![allow(dead_code)]

use super::common;
use offload_sched::distribute::{run_in_process_with, DistPlan, Distribution};
use offload_sched::exec::Buffers;
use offload_sched::model::{
    BufferId, DataStyle, ElemType, Init, MapType, MatrixInit, Program, ProgramBuilder, Tiling,
};
use offload_sched::plugin::Plugin;
use offload_sched::schedule::ScheduleOptions;
use offload_sched::Plan;
use std::time::Duration;

pub const TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `program` over `dist` as in-process ranks on host plugins with delay jitter
/// `seed` (plugins and messages; `inline`: every rank on its thread alone, its plugin's
/// streams inline too); returns rank 0's buffers.
pub fn run_jittered(
    program: &Program,
    dist: &Distribution,
    o: &ScheduleOptions,
    seed: u64,
    inline: bool,
) -> Buffers {
    let plan = DistPlan::new(program, dist, o).unwrap_or_else(|e| panic!("{}: {e}", program.name));
    let devices = program.devices.max(1);
    let plugin = move |r: u32| -> Box<dyn Plugin> {
        Box::new(offload_sched::plugin::host::HostPlugin::new(
            offload_sched::plugin::host::HostPluginOptions {
                devices,
                delay_jitter: Some(seed + r as u64),
                inline_streams: inline,
                ..Default::default()
            },
        ))
    };
    let out = run_in_process_with(&plan, &plugin, TIMEOUT, Some((seed, 300)), inline)
        .unwrap_or_else(|e| panic!("{} (inline {inline}): {e}", program.name));
    assert_eq!(out.ranks.len() as u32, dist.ranks());
    out.ranks.into_iter().next().unwrap().report.buffers
}

/// A seeded generator of `below(n)` in `0..n` (a 64-bit LCG: Knuth's MMIX constants),
/// for the random programs.
pub fn below_of(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut state = seed;
    move |n: u64| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) % n
    }
}

pub fn tiling(n: u64, tile: u64) -> Tiling {
    Tiling {
        n,
        tile,
        ty: ElemType::F64,
        style: DataStyle::Mapped,
        init: MatrixInit::Random(11),
    }
}

/// Every buffer's bytes, for exact comparison.
pub fn bytes(b: &Buffers) -> Vec<(String, Vec<u8>)> {
    b.iter()
        .map(|(n, d)| (n.to_string(), d.to_ne_bytes()))
        .collect()
}

/// The one-process run and the reference of `program`, which must agree, as bytes.
pub fn one_process(program: &Program) -> Vec<(String, Vec<u8>)> {
    let plan = Plan::new(program.clone(), &ScheduleOptions::default()).unwrap();
    let reference = bytes(&plan.reference().unwrap());
    let host = common::host(program.devices.max(1), None);
    let report = plan.run(&host).unwrap();
    assert_eq!(
        bytes(&report.buffers),
        reference,
        "{}: one process",
        program.name
    );
    reference
}

/// The library's default grid (1 × 1, 1 × 2, 2 × 2 here).
pub fn grid(ranks: u32) -> (u32, u32) {
    Distribution::grid(ranks)
}

/// b and c on rank 1, x and h on rank 0. Rank 0's body: the receive of b, `make_x`
/// (device work reading b, so issued after the issuing thread waits for that receive),
/// the send of x, the receive of c (which rank 1 writes from x) and `read_c`, a host
/// task on the work lane that reads c. Without an edge from the send to the later
/// receive, rank 0's issue order takes the host ops first (the receives, then `read_c`,
/// which waits for the receive of c on the work lane) and the device work of `make_x`
/// last: the send of x lands on the work lane behind `read_c`, which waits for c, which
/// rank 1 computes from x.
pub fn send_behind_a_later_receive() -> (Program, Distribution) {
    let mut p = ProgramBuilder::new("send_behind_a_later_receive");
    let b = p.buffer("b", ElemType::F32, 64, Init::Iota);
    let x = p.buffer("x", ElemType::F32, 64, Init::Fill(1.0));
    let c = p.buffer("c", ElemType::F32, 64, Init::Fill(2.0));
    let h = p.buffer("h", ElemType::F32, 64, Init::Fill(3.0));
    p.target("make_b", "saxpy")
        .num(1.0)
        .arg(b)
        .arg(b)
        .map(MapType::ToFrom, b);
    for (name, input, out) in [("make_x", b, x), ("use_x", x, c)] {
        p.target(name, "saxpy")
            .num(2.0)
            .arg(input)
            .arg(out)
            .map(MapType::To, input)
            .map(MapType::ToFrom, out);
    }
    p.host_fn("read_c", &[c.into()], &[h.into()], |_| Ok(()));
    let program = p.build();
    let mut dist = Distribution::new(2).unwrap();
    for (buf, r) in [(b, 1), (x, 0), (c, 1), (h, 0)] {
        dist.own_buffer(&program, buf, r).unwrap();
    }
    (program, dist)
}

/// Every policy with 1, 2, 4 and 8 streams per device, elision on and off.
pub fn every_schedule() -> Vec<(ScheduleOptions, offload_sched::lower::LowerOptions)> {
    use offload_sched::lower::LowerOptions;
    use offload_sched::schedule::SyncPolicy;
    let mut out = Vec::new();
    for policy in SyncPolicy::ALL {
        for streams_per_device in [1, 2, 4, 8] {
            for lower in [LowerOptions::default(), LowerOptions::no_elide()] {
                let o = ScheduleOptions {
                    policy,
                    streams_per_device,
                    ..ScheduleOptions::default()
                };
                out.push((o, lower));
            }
        }
    }
    out
}

/// A random program of `seed` for `ranks` ranks: 3 to 6 f32 buffers of 64, 20000 or
/// 70000 elements (the lowering's costs, and so the per-rank issue order, change with the
/// size), 6 to 17 constructs (saxpy, increment, host tasks reading one buffer and writing
/// another), a quarter of them placed on a random rank, default owners for the rest.
pub fn random_program(seed: u64, ranks: u32) -> (Program, Distribution) {
    let mut below = below_of(seed);
    let mut p = ProgramBuilder::new("random");
    let nb = 3 + below(4) as usize;
    let len = [64, 20000, 70000][below(3) as usize];
    let bufs: Vec<BufferId> = (0..nb)
        .map(|i| p.buffer(&format!("b{i}"), ElemType::F32, len, Init::Fill(i as f64)))
        .collect();
    let mut placed = Vec::new();
    for k in 0..6 + below(12) {
        let name = format!("t{k}");
        let i = below(nb as u64) as usize;
        let j = (i + 1 + below(nb as u64 - 1) as usize) % nb;
        let (a, b) = (bufs[i], bufs[j]);
        match below(6) {
            0 => {
                p.target(&name, "increment").arg(b).map(MapType::ToFrom, b);
            }
            1 => {
                p.host_fn(&name, &[a.into()], &[b.into()], |_| Ok(()));
            }
            _ => {
                p.target(&name, "saxpy")
                    .num(0.5)
                    .arg(a)
                    .arg(b)
                    .map(MapType::To, a)
                    .map(MapType::ToFrom, b);
            }
        }
        if below(4) == 0 {
            placed.push((name, below(ranks as u64) as u32));
        }
    }
    let program = p.build();
    let mut dist = Distribution::new(ranks).unwrap();
    for (name, r) in &placed {
        dist.place(name, *r).unwrap();
    }
    (program, dist)
}
