//! Eviction of kept copies (issue 28 point 2; `lower::elide`, `lower::evict`): which
//! kept copies are freed before their next use to make room, and the bytes
//! [`offload_sched::lower::ElidedBytes`] counts for them.

use offload_sched::lower::{EvictionPolicy, LowerOptions, OpGraph};
use offload_sched::model::{ElemType, Init, MapType, Program, ProgramBuilder};
use offload_sched::schedule::ScheduleOptions;
use offload_sched::Plan;

/// Regions `r0..` each copying the input named by `order[i]` (`x`, `y` or `z`, 64 i32
/// = 256 bytes each) into a fresh output.
fn readers(order: &[&str]) -> Program {
    let mut p = ProgramBuilder::new("readers");
    let x = p.buffer("x", ElemType::I32, 64, Init::Iota);
    let y = p.buffer("y", ElemType::I32, 64, Init::Iota);
    let z = p.buffer("z", ElemType::I32, 64, Init::Iota);
    for (i, name) in order.iter().enumerate() {
        let out = p.buffer(&format!("o{i}"), ElemType::I32, 64, Init::Zeros);
        let inp = match *name {
            "x" => x,
            "y" => y,
            _ => z,
        };
        p.target(&format!("r{i}"), "copy")
            .arg(inp)
            .arg(out)
            .map(MapType::To, inp)
            .map(MapType::From, out);
    }
    p.build()
}

fn lowered(p: Program, opts: &LowerOptions) -> Plan {
    Plan::new(p, &ScheduleOptions::default())
        .and_then(|plan| plan.relower(opts))
        .unwrap_or_else(|e| panic!("{}", e.render()))
}

fn h2d_bytes(g: &OpGraph) -> u64 {
    g.op_ids()
        .filter(|&id| g.op(id).kind.name() == "h2d")
        .map(|id| g.op_bytes(id))
        .sum()
}

#[test]
fn the_keep_limit_evicts_and_counts_the_bytes() {
    // Room for one kept copy: x y x y keeps x after r0 and evicts it at r1's end to
    // keep y; x is copied in again at r2 and freed after it (no later use), so y is
    // still kept and r3 takes it: H2D x, y, x (3 × 256 bytes), one elided (y).
    let opts = LowerOptions {
        keep_limit_bytes: 256,
        ..LowerOptions::elided()
    };
    let plan = lowered(readers(&["x", "y", "x", "y"]), &opts);
    let g = plan.graph();
    let e = g.elided_bytes();
    assert_eq!(g.evictions.len(), 1);
    assert_eq!(e.evicted, 256);
    assert_eq!(e.h2d, 256);
    assert_eq!(e.prefetched, 0);
    assert_eq!(h2d_bytes(g), 3 * 256);
    // With room for both, nothing is evicted and the second reads are elided.
    let plan = lowered(readers(&["x", "y", "x", "y"]), &LowerOptions::elided());
    let e = plan.graph().elided_bytes();
    assert_eq!((e.evicted, e.h2d), (0, 512));
    assert_eq!(h2d_bytes(plan.graph()), 2 * 256);
}

/// H2D bytes and evicted bytes of `order` under `policy` with room for two kept copies.
fn moved(order: &[&str], policy: EvictionPolicy, cap: Option<u64>) -> (u64, u64) {
    let opts = LowerOptions {
        keep_limit_bytes: 512,
        device_memory: cap,
        eviction: policy,
        ..LowerOptions::elided()
    };
    let plan = lowered(readers(order), &opts);
    let g = plan.graph();
    (h2d_bytes(g), g.elided_bytes().evicted)
}

#[test]
fn belady_moves_fewer_bytes_than_lru_on_a_cycle() {
    // x y z x y z x y z, room for two. LRU evicts what the next region needs every
    // time: H2D x y z x y z x (7 × 256), evicting x y z x (4 × 256). Belady keeps
    // the nearer one: at r2 it evicts y (next use r4, x's r3), at r4 x (next r6, z's
    // r5): H2D x y z y x (5 × 256), evicting y x (2 × 256).
    let order = ["x", "y", "z", "x", "y", "z", "x", "y", "z"];
    assert_eq!(moved(&order, EvictionPolicy::Lru, None), (7 * 256, 4 * 256));
    assert_eq!(
        moved(&order, EvictionPolicy::Belady, None),
        (5 * 256, 2 * 256)
    );
    // Under a device memory cap of three tiles (each region holds its input and
    // output, 512 bytes; kept copies fill the rest) Belady still moves no more.
    for cap in [768, 1024, 1280] {
        let lru = moved(&order, EvictionPolicy::Lru, Some(cap));
        let belady = moved(&order, EvictionPolicy::Belady, Some(cap));
        assert!(
            belady.0 <= lru.0,
            "cap {cap}: belady {belady:?}, lru {lru:?}"
        );
    }
}

#[test]
fn policies_parse_by_name() {
    assert_eq!("belady".parse(), Ok(EvictionPolicy::Belady));
    assert_eq!("lru".parse(), Ok(EvictionPolicy::Lru));
    assert_eq!(
        "fifo".parse::<EvictionPolicy>().unwrap_err(),
        "unknown eviction policy `fifo` (expected belady or lru)"
    );
    assert_eq!(EvictionPolicy::default(), EvictionPolicy::Belady);
}
