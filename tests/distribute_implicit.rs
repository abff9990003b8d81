//! Tester 20 (session 20): distributed runs of regions whose kernel arguments are mapped
//! implicitly (OpenMP 5.2 §5.8.9: an argument no map item contains is mapped `tofrom`,
//! or used in place when present), and `rank = N` on nested `[[body.body]]` entries.
//! Each program's one-process result is asserted by value, then compared with rank 0's
//! buffers on 2 ranks. Before the fixes (1d8faa9, b701fca) all four failed (wrong values).

mod common;
#[path = "common/dist.rs"]
mod dist;

use dist::*;
use offload_sched::distribute::{DistPlan, Distribution};
use offload_sched::exec::Buffers;
use offload_sched::file::{parse, SourceFile};
use offload_sched::model::{ElemType, Init, MapItem, MapType, Program, ProgramBuilder, Section};
use offload_sched::schedule::ScheduleOptions;

/// [`run_jittered`] under the default schedule, ranks on lanes.
fn run(program: &Program, dist: &Distribution, seed: u64) -> Buffers {
    run_jittered(program, dist, &ScheduleOptions::default(), seed, false)
}

fn i32s(v: impl IntoIterator<Item = i32>) -> Vec<u8> {
    v.into_iter().flat_map(|x| x.to_ne_bytes()).collect()
}

/// x (iota) owned by rank 0; a region placed on rank 1 increments x with no map
/// clause: x is mapped `tofrom` implicitly, so rank 1 must receive x and its result
/// come back to rank 0 (it was lost: x stayed iota).
#[test]
fn implicit_tofrom_on_another_rank_is_moved_both_ways() {
    let mut p = ProgramBuilder::new("implicit_remote");
    let x = p.buffer("x", ElemType::I32, 16, Init::Iota);
    p.host_fn("bump", &[], &[x.into()], |ctx| {
        for v in ctx
            .write_at::<i32>(offload_sched::model::BufferId(0), 0, 16)?
            .iter_mut()
        {
            *v += 100;
        }
        Ok(())
    });
    p.target("r", "increment").arg(x);
    let program = p.build();
    let want = one_process(&program);
    assert_eq!(want[0].1, i32s((0..16).map(|i| i + 101)));
    let mut dist = Distribution::new(2).unwrap();
    dist.own_buffer(&program, x, 0).unwrap();
    dist.place("bump", 0).unwrap();
    dist.place("r", 1).unwrap();
    for seed in [1, 2] {
        assert_eq!(bytes(&run(&program, &dist, seed)), want, "seed {seed}");
    }
}

/// `map(from: y[0:8])` on a region whose kernel takes all of y (16): y is mapped
/// `tofrom` whole (the map item does not contain the argument), so y[8:16] is written
/// too (it kept the host task's value on rank 0).
#[test]
fn a_map_item_covering_part_of_an_argument_maps_it_whole() {
    let mut p = ProgramBuilder::new("implicit_partial");
    let y = p.buffer("y", ElemType::I32, 16, Init::Iota);
    p.host_fn("bump", &[], &[y.into()], |ctx| {
        for v in ctx
            .write_at::<i32>(offload_sched::model::BufferId(0), 0, 16)?
            .iter_mut()
        {
            *v += 100;
        }
        Ok(())
    });
    p.target("r", "fill")
        .arg(y)
        .num(5.0)
        .map_item(MapItem::new(MapType::From, Section::new(y, 0, 8)));
    let program = p.build();
    let want = one_process(&program);
    assert_eq!(want[0].1, i32s([5; 16]));
    let mut dist = Distribution::new(2).unwrap();
    dist.own_buffer(&program, y, 0).unwrap();
    dist.place("bump", 0).unwrap();
    dist.place("r", 1).unwrap();
    for seed in [1, 2] {
        assert_eq!(bytes(&run(&program, &dist, seed)), want, "seed {seed}");
    }
}

/// x entered `to`; a region on rank 1 increments x with no map clause (present: it
/// uses the device copy); `update from(x)` on every rank must bring rank 1's device
/// value to rank 0 (rank 0 kept x = iota).
#[test]
fn an_implicit_argument_of_present_data_is_a_device_write() {
    let mut p = ProgramBuilder::new("implicit_present");
    let x = p.buffer("x", ElemType::I32, 16, Init::Iota);
    let sx = Section::new(x, 0, 16);
    drop(p.enter_data("enter", vec![MapItem::new(MapType::To, sx)]));
    p.target("r", "increment").arg(x);
    drop(p.update("show", vec![MapItem::new(MapType::From, sx)]));
    drop(p.exit_data("exit", vec![MapItem::new(MapType::Release, sx)]));
    let program = p.build();
    let want = one_process(&program);
    assert_eq!(want[0].1, i32s((0..16).map(|i| i + 1)));
    let mut dist = Distribution::new(2).unwrap();
    dist.own_buffer(&program, x, 0).unwrap();
    dist.place("r", 1).unwrap();
    for seed in [1, 2] {
        assert_eq!(bytes(&run(&program, &dist, seed)), want, "seed {seed}");
    }
}

/// `rank = 1` on a region inside a `target data` body (`[[body.body]]`) places it
/// there, as on a top-level `[[body]]` (it was ignored: the region ran on rank 0).
#[test]
fn rank_on_a_nested_body_entry_places_the_region() {
    let src = SourceFile::new(
        "nested_rank.toml",
        "name = \"nested_rank\"\n\
         [[buffer]]\nname = \"a\"\ntype = \"i32\"\nlen = 16\ninit = \"iota\"\nrank = 0\n\
         [[body]]\ntarget_data = \"d\"\nmap = [\"tofrom: a\"]\n\
         [[body.body]]\ntarget = \"r\"\nkernel = \"increment\"\nargs = [\"a\"]\n\
         map = [\"present, tofrom: a\"]\nrank = 1\n",
    );
    let program = parse(&src).unwrap();
    let dist =
        offload_sched::distribute::file::distribution_from_source(&src, &program, 2).unwrap();
    assert_eq!(dist.placed("r"), Some(1));
    let plan = DistPlan::new(&program, &dist, &ScheduleOptions::default()).unwrap();
    assert!(
        plan.split.placement.contains(&("r".to_string(), 1)),
        "{:?}",
        plan.split.placement
    );
    let want = one_process(&program);
    assert_eq!(want[0].1, i32s((0..16).map(|i| i + 1)));
    assert_eq!(bytes(&run(&program, &dist, 3)), want);
}
