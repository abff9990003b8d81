//! Eviction of kept copies (issue 28 point 2; `lower::elide`, `lower::evict`): which
//! kept copies are freed before their next use to make room, and the bytes
//! [`offload_sched::lower::ElidedBytes`] counts for them.

use offload_sched::lower::{LowerOptions, OpGraph};
use offload_sched::model::{ElemType, Init, MapType, Program, ProgramBuilder};
use offload_sched::schedule::ScheduleOptions;
use offload_sched::Plan;

/// Regions `r0..` each copying the input named by `order[i]` (`x` or `y`, 64 i32 =
/// 256 bytes each) into a fresh output.
fn readers(order: &[&str]) -> Program {
    let mut p = ProgramBuilder::new("readers");
    let x = p.buffer("x", ElemType::I32, 64, Init::Iota);
    let y = p.buffer("y", ElemType::I32, 64, Init::Iota);
    for (i, name) in order.iter().enumerate() {
        let out = p.buffer(&format!("o{i}"), ElemType::I32, 64, Init::Zeros);
        let inp = if *name == "x" { x } else { y };
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
