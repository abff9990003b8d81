//! The device memory cap (issue 28 point 2; `lower/cap.rs`, `verify/peak.rs`): the
//! schedule's peak live device bytes, computed exactly and checked by brute force on
//! small graphs, held under jitter and random streams by the host plugin set to the
//! cap, a removed memory edge found by the verifier, the refusal of a region too big
//! for the cap, and the default cap taken from the free memory a plugin reports
//! (`Plan::for_plugin`, `plan_cap.rs`).

mod common;

use offload_sched::exec::IssueMode;
use offload_sched::file::SourceFile;
use offload_sched::lower::{DeviceAlloc, LowerOptions, Op, OpGraph, OpId, OpKind, RegionId};
use offload_sched::model::{ElemType, Init, MapType, ProgramBuilder, Section};
use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
use offload_sched::schedule::{schedule, ScheduleOptions};
use offload_sched::verify::{peak_live_bytes, verify, Violation};
use offload_sched::Plan;

fn capped(cap: u64) -> LowerOptions {
    LowerOptions {
        device_memory: Some(cap),
        ..LowerOptions::elided()
    }
}

/// graphs/cholesky_mapped.toml (n 12, tile 4 f64: 128-byte tiles, 1152-byte matrix)
/// lowered with elision and `cap`.
fn cholesky(cap: Option<u64>, opts: &ScheduleOptions) -> Plan {
    let lower = LowerOptions {
        device_memory: cap,
        ..LowerOptions::elided()
    };
    common::plan_with("cholesky_mapped.toml", opts)
        .relower(&lower)
        .unwrap_or_else(|e| panic!("{}", e.render()))
}

#[test]
fn the_peak_stays_within_the_cap_and_the_cap_binds() {
    let free = cholesky(None, &ScheduleOptions::default());
    let uncapped = peak_live_bytes(free.graph(), 0).bytes;
    // A gemm update holds three tiles (384 bytes); the shift steps a tile and `ones`.
    for cap in [416, 512, 640] {
        let plan = cholesky(Some(cap), &ScheduleOptions::default());
        let peak = peak_live_bytes(plan.graph(), 0);
        assert!(peak.bytes <= cap, "cap {cap}: peak {}", peak.bytes);
        assert!(peak.bytes >= 384, "cap {cap}: peak {}", peak.bytes);
        let live: u64 = peak.live.iter().map(|&o| plan.graph().op_bytes(o)).sum();
        assert_eq!(live, peak.bytes, "the witness holds the peak");
        // The lowering's claims prove it: no exact peak needed in the verifier.
        assert_eq!(plan.proof().exact_peaks, 0);
        assert!(
            uncapped > cap,
            "cap {cap} is above the uncapped peak {uncapped}"
        );
    }
}

#[test]
fn runs_within_the_cap_on_the_host_plugin_under_jitter_and_random_streams() {
    let cap = 416;
    for seed in 1..=4u64 {
        let opts = ScheduleOptions {
            random_streams: Some(seed),
            ..ScheduleOptions::default()
        };
        let plan = cholesky(Some(cap), &opts);
        let want = plan.reference().unwrap();
        for issue in [IssueMode::Serial, IssueMode::PerStream] {
            let plugin = HostPlugin::new(HostPluginOptions {
                delay_jitter: Some(seed),
                device_memory: Some(cap),
                ..HostPluginOptions::default()
            });
            common::run_checked("capped", &plan, &plugin, issue, &want);
            let peak = plugin.peak_device_bytes(0);
            assert!(peak <= cap && peak >= 384, "seed {seed}: peak {peak}");
        }
    }
}

#[test]
fn the_host_plugin_refuses_an_alloc_over_its_cap_naming_the_op() {
    // Lowered without a cap, run on a device of 300 bytes: the gemm's third tile fails.
    let plan = cholesky(None, &ScheduleOptions::default());
    let plugin = HostPlugin::new(HostPluginOptions {
        device_memory: Some(300),
        ..HostPluginOptions::default()
    });
    let e = plan.run_with(&plugin, IssueMode::Serial).unwrap_err();
    let text = e.render();
    assert!(text.contains("(alloc A["), "{text}");
    assert!(
        text.contains("over its device memory cap of 300 bytes"),
        "{text}"
    );
    assert_eq!(plugin.live_device_allocs(), 0, "released after the failure");
}

/// Two independent regions, each incrementing its own 256-byte buffer.
fn two_regions(cap: u64) -> Plan {
    let mut p = ProgramBuilder::new("two");
    let x = p.buffer("x", ElemType::I32, 64, Init::Iota);
    let y = p.buffer("y", ElemType::I32, 64, Init::Iota);
    for (name, b) in [("rx", x), ("ry", y)] {
        p.target(name, "increment")
            .arg(b)
            .map(MapType::ToFrom, b)
            .nowait();
    }
    Plan::new(p.build(), &ScheduleOptions::default())
        .and_then(|plan| plan.relower(&capped(cap)))
        .unwrap_or_else(|e| panic!("{}", e.render()))
}

/// `g` without the edge `from → to` (every other op, edge and record kept).
fn without_edge(g: &OpGraph, from: OpId, to: OpId) -> OpGraph {
    let mut h = OpGraph::new(&g.name, g.buffers.clone(), g.kernels.clone(), g.devices);
    h.regions = g.regions.clone();
    h.allocs = g.allocs.clone();
    h.device_memory = g.device_memory;
    for id in g.op_ids() {
        let preds = g
            .preds(id)
            .iter()
            .copied()
            .filter(|&p| (p, id) != (from, to));
        h.push_op(g.op(id).clone(), preds.collect());
    }
    h
}

#[test]
fn a_removed_memory_edge_is_a_peak_violation_naming_the_allocs() {
    // Cap 256: y's alloc must follow x's free (the regions are otherwise independent).
    let plan = two_regions(256);
    let g = plan.graph();
    let find = |kind: &str, buf: &str| {
        g.op_ids()
            .find(|&o| g.op(o).kind.name() == kind && g.describe(o).contains(buf))
            .unwrap()
    };
    let (alloc_x, free_x, alloc_y) = (find("alloc", "x["), find("free", "x["), find("alloc", "y["));
    assert!(g.preds(alloc_y).contains(&free_x), "the memory edge");
    assert_eq!(peak_live_bytes(g, 0).bytes, 256);
    // Without it, both buffers can be live at once: 512 bytes.
    let h = without_edge(g, free_x, alloc_y);
    let s = schedule(&h, &ScheduleOptions::default());
    let e = verify(&h, &s).unwrap_err();
    let v = e
        .violations
        .iter()
        .find(|v| matches!(v, Violation::DeviceMemory { .. }))
        .unwrap_or_else(|| panic!("{e}"));
    match v {
        Violation::DeviceMemory {
            device,
            peak,
            cap,
            live,
            ..
        } => {
            assert_eq!((*device, *peak, *cap), (0, 512, 256));
            assert_eq!(live, &vec![alloc_x, alloc_y]);
        }
        _ => unreachable!(),
    }
    let text = v.to_string();
    assert!(
        text.contains(&format!("{alloc_x} (alloc x[0:64] 256 B)")),
        "{text}"
    );
    assert!(
        text.contains(&format!("{alloc_y} (alloc y[0:64] 256 B)")),
        "{text}"
    );
    // Unmutated, the same schedule check passes.
    let s = schedule(g, &ScheduleOptions::default());
    assert_eq!(verify(g, &s).unwrap().exact_peaks, 0);
}

/// A deterministic xorshift.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// A random graph of `k` allocs (1-4 KiB each) and their frees in a random order
/// (each free after its alloc, with an edge), plus random forward edges.
fn random_graph(rng: &mut Rng, k: usize, base: &OpGraph) -> OpGraph {
    let mut g = OpGraph::new("random", base.buffers.clone(), vec![], 1);
    g.regions = base.regions.clone();
    let b = base.allocs[0].section.buf;
    let mut order: Vec<(bool, usize)> = Vec::new();
    let mut open: Vec<usize> = Vec::new();
    let mut next = 0;
    while order.len() < 2 * k {
        let alloc = next < k && (open.is_empty() || rng.next().is_multiple_of(2));
        if alloc {
            order.push((true, next));
            open.push(next);
            next += 1;
        } else {
            let i = (rng.next() as usize) % open.len();
            order.push((false, open.swap_remove(i)));
        }
    }
    for _ in 0..k {
        g.allocs.push(DeviceAlloc {
            section: Section::new(b, 0, 1),
            device: 0,
            bytes: 1024 * (1 + rng.next() % 4),
            zero: false,
        });
    }
    let mut alloc_op = vec![OpId(0); k];
    for (i, &(is_alloc, a)) in order.iter().enumerate() {
        let alloc = offload_sched::lower::AllocId(a as u32);
        let mut preds: Vec<OpId> = (0..i as u32)
            .map(OpId)
            .filter(|_| rng.next() % 10 < 3)
            .collect();
        let kind = match is_alloc {
            true => {
                alloc_op[a] = OpId(i as u32);
                OpKind::Alloc { alloc }
            }
            false => {
                preds.push(alloc_op[a]);
                OpKind::Free { alloc }
            }
        };
        let op = Op {
            kind,
            region: RegionId(0),
            device: 0,
        };
        g.push_op(op, preds);
    }
    g
}

/// The heaviest down-set of `g` by enumerating every subset of its ops.
fn brute_force_peak(g: &OpGraph) -> u64 {
    let n = g.ops.len();
    let mut best = 0i64;
    for set in 0u32..(1 << n) {
        let inside = |o: OpId| set & (1 << o.0) != 0;
        let closed = g
            .op_ids()
            .filter(|&o| inside(o))
            .all(|o| g.preds(o).iter().all(|&p| inside(p)));
        if !closed {
            continue;
        }
        let w: i64 = g
            .op_ids()
            .filter(|&o| inside(o))
            .map(|o| match g.op(o).kind {
                OpKind::Alloc { .. } => g.op_bytes(o) as i64,
                _ => -(g.op_bytes(o) as i64),
            })
            .sum();
        best = best.max(w);
    }
    best as u64
}

#[test]
fn the_min_cut_peak_equals_brute_force_on_small_graphs() {
    let base = two_regions(1 << 20);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut seen_partial = 0;
    for case in 0..300 {
        let k = 1 + case % 7;
        let g = random_graph(&mut rng, k, base.graph());
        let want = brute_force_peak(&g);
        let got = peak_live_bytes(&g, 0);
        assert_eq!(got.bytes, want, "case {case}: {} ops", g.ops.len());
        let live: u64 = got.live.iter().map(|&o| g.op_bytes(o)).sum();
        assert_eq!(live, want, "case {case}: the witness");
        let total: u64 = g.allocs.iter().map(|a| a.bytes).sum();
        seen_partial += usize::from(want < total);
    }
    // The edges made some peaks less than every alloc at once.
    assert!(seen_partial > 50, "{seen_partial}");
}

#[test]
fn a_region_over_the_cap_is_refused_naming_it_and_the_bytes() {
    let text = r#"name = "too_big"

[[buffer]]
name = "x"
type = "f32"
len = 1024
init = "iota"

[[buffer]]
name = "y"
type = "f32"
len = 1024
init = "zeros"

[[body]]
target = "big"
kernel = "copy"
args = ["x", "y"]
map = ["to: x", "from: y"]
"#;
    let src = SourceFile::new("too_big.toml", text);
    let plan = Plan::from_source(src, &ScheduleOptions::default()).unwrap();
    let e = plan.relower(&capped(6 << 10)).unwrap_err();
    insta::assert_snapshot!("region_over_the_cap", e.render());
}

#[test]
fn sizes_parse_with_binary_and_decimal_suffixes() {
    use offload_sched::estimate::parse_bytes;
    assert_eq!(parse_bytes("4096"), Ok(4096));
    assert_eq!(parse_bytes("512KiB"), Ok(512 << 10));
    assert_eq!(parse_bytes("256MiB"), Ok(256 << 20));
    assert_eq!(parse_bytes("16GiB"), Ok(16 << 30));
    assert_eq!(
        parse_bytes("12XB").unwrap_err(),
        "`12XB` is not a size in bytes above 0 (e.g. 1073741824, 512KiB, 256MiB, 16GiB, 4KB)"
    );
    assert!(parse_bytes("0").is_err());
    // Decimal (SI) units beside binary ones, fractions that give whole bytes.
    assert_eq!(parse_bytes("4KB"), Ok(4_000));
    assert_eq!(parse_bytes("4kB"), Ok(4_000));
    assert_eq!(parse_bytes("3MB"), Ok(3_000_000));
    assert_eq!(parse_bytes("2 GB"), Ok(2_000_000_000));
    assert_eq!(parse_bytes("1TB"), Ok(1_000_000_000_000));
    assert_eq!(parse_bytes("1.5MiB"), Ok(3 << 19));
    assert_eq!(parse_bytes("0.5KB"), Ok(500));
    assert_eq!(parse_bytes("1.25GB"), Ok(1_250_000_000));
    assert_eq!(
        parse_bytes("1.0001KiB").unwrap_err(),
        "`1.0001KiB` is not a whole number of bytes (a fraction needs a unit it fills, e.g. 1.5KiB)"
    );
    assert_eq!(
        parse_bytes("99999999999999999999999").unwrap_err(),
        "`99999999999999999999999` is too large: over the largest size, 18446744073709551615 \
         bytes (2^64 − 1 bytes, 1 byte under 16 EiB)"
    );
    assert_eq!(
        parse_bytes("16EiB").unwrap_err(),
        "`16EiB` is too large: 18446744073709551616 bytes is over the largest size, \
         18446744073709551615 bytes (2^64 − 1 bytes, 1 byte under 16 EiB)"
    );
    assert_eq!(parse_bytes("15EiB"), Ok(15 << 60));
    assert_eq!(parse_bytes("2PB"), Ok(2_000_000_000_000_000));
    assert!(parse_bytes("16777216TiB")
        .unwrap_err()
        .contains("is too large"));
    assert_eq!(parse_bytes("18446744073709551615"), Ok(u64::MAX));
}

#[test]
fn a_region_that_fits_alone_but_not_beside_entered_data_is_refused_with_both() {
    let mut p = ProgramBuilder::new("beside");
    let x = p.buffer("x", ElemType::F32, 1024, Init::Iota);
    let y = p.buffer("y", ElemType::F32, 1024, Init::Iota);
    drop(p.enter_data(
        "keep_x",
        vec![offload_sched::model::MapItem::new(
            MapType::To,
            Section::new(x, 0, 1024),
        )],
    ));
    p.target("bump_y", "increment")
        .arg(y)
        .map(MapType::ToFrom, y);
    let plan = Plan::new(p.build(), &ScheduleOptions::default()).unwrap();
    let e = plan.relower(&capped(6 << 10)).unwrap_err().render();
    assert!(
        e.contains(
            "region \"bump_y\": its working set of 4 KiB (4096 bytes) does not fit beside the \
             4 KiB (4096 bytes) other mappings still hold on device 0, over the device memory \
             cap of 6 KiB (6144 bytes)"
        ),
        "{e}"
    );
    // With room for both it lowers, and the peak is both buffers.
    let plan = plan.relower(&capped(8 << 10)).unwrap();
    assert_eq!(peak_live_bytes(plan.graph(), 0).bytes, 8 << 10);
}

/// `Plan::for_plugin` (the default cap, `DefaultCap::DeviceFree`) on host plugins: one
/// held to a cap reports it as its free memory (`Plugin::memory_info`), so the plan is
/// lowered again under it, with prefetch on; one without a cap reports nothing and the
/// plan stays unlimited; a cap given in bytes or `DefaultCap::Unlimited` is kept.
#[test]
fn for_plugin_takes_the_free_memory_the_plugin_reports() {
    use offload_sched::lower::DefaultCap;
    use offload_sched::plugin::{MemoryInfo, Plugin};
    let free = cholesky(None, &ScheduleOptions::default());
    let held = HostPlugin::new(HostPluginOptions {
        device_memory: Some(640),
        ..HostPluginOptions::default()
    });
    let info = held.memory_info(0).unwrap();
    assert_eq!(
        info,
        Some(MemoryInfo {
            free: 640,
            total: 640,
            reserve: 0
        })
    );
    assert!(held.memory_info(1).is_err(), "no device 1");
    let bound = free.for_plugin(&held).unwrap();
    assert_eq!(bound.graph().device_memory, Some(640));
    assert!(peak_live_bytes(bound.graph(), 0).bytes <= 640);
    assert!(bound.graph().bytes_moved().prefetched > 0);
    let want = bound.reference().unwrap();
    common::run_checked("bound", &bound, &held, IssueMode::Serial, &want);

    let unlimited = HostPlugin::new(HostPluginOptions::default());
    assert_eq!(unlimited.memory_info(0).unwrap(), None);
    assert_eq!(
        free.for_plugin(&unlimited).unwrap().graph().device_memory,
        None
    );
    let given = cholesky(Some(512), &ScheduleOptions::default());
    assert_eq!(
        given.for_plugin(&held).unwrap().graph().device_memory,
        Some(512)
    );
    let off = free
        .relower(&LowerOptions {
            default_cap: DefaultCap::Unlimited,
            ..LowerOptions::elided()
        })
        .unwrap();
    assert_eq!(off.for_plugin(&held).unwrap().graph().device_memory, None);
}

/// The case tests/prop_cap.rs found (its regressions file, seed b8422fc4…): one region
/// incrementing half of a 2-byte `u8` buffer, a 1-byte peak. Two thirds of it is a
/// 0-byte cap, which the property test had raised to 1 byte for the lowering and the
/// plugin but not for its assertion (`peak ≤ 0`), so it failed on a plan within its
/// 1-byte cap. Here: the peak is the one byte under no cap and a 1-byte cap (proven by
/// the claims, held by the plugin, the reference's result), and a 0-byte cap is refused
/// naming the region and both byte counts.
#[test]
fn a_one_byte_region_fits_a_one_byte_cap_and_is_refused_under_zero() {
    use offload_sched::lower::{EvictionPolicy, LowerError};
    use offload_sched::Error;
    let mut p = ProgramBuilder::new("one_byte");
    let b = p.buffer("b0", ElemType::U8, 2, Init::Zeros);
    let half = Section::new(b, 0, 1);
    p.target("r1", "increment")
        .arg(half)
        .map(MapType::ToFrom, half)
        .nowait();
    let opts = ScheduleOptions {
        random_streams: Some(0),
        ..ScheduleOptions::default()
    };
    let free = Plan::new(p.build(), &opts)
        .and_then(|plan| plan.relower(&LowerOptions::elided()))
        .unwrap_or_else(|e| panic!("{}", e.render()));
    assert_eq!(peak_live_bytes(free.graph(), 0).bytes, 1);
    let want = free.reference().unwrap();
    assert_eq!(want.as_u8("b0"), Some(&[1u8, 0][..]));
    for eviction in EvictionPolicy::ALL {
        let lower = LowerOptions {
            device_memory: Some(1),
            eviction,
            ..LowerOptions::elided()
        };
        let plan = free
            .relower(&lower)
            .unwrap_or_else(|e| panic!("{}", e.render()));
        let peak = peak_live_bytes(plan.graph(), 0);
        assert_eq!(peak.bytes, 1, "{}", eviction.name());
        assert_eq!(peak.live.len(), 1, "{}", eviction.name());
        assert_eq!(plan.proof().exact_peaks, 0, "the claims prove the cap");
        for (k, issue) in [IssueMode::Serial, IssueMode::PerStream]
            .into_iter()
            .enumerate()
        {
            let plugin = HostPlugin::new(HostPluginOptions {
                delay_jitter: Some(k as u64),
                device_memory: Some(1),
                ..HostPluginOptions::default()
            });
            let r = common::run_checked("one byte", &plan, &plugin, issue, &want);
            assert_eq!(r.buffers.as_u8("b0"), Some(&[1u8, 0][..]));
            assert_eq!(plugin.peak_device_bytes(0), 1);
        }
        let lower = LowerOptions {
            device_memory: Some(0),
            ..lower
        };
        match free.relower(&lower) {
            Err(Error::Lower { error, .. }) => match *error {
                LowerError::DeviceMemory {
                    ref region,
                    device,
                    working_set,
                    held,
                    cap,
                    ..
                } => assert_eq!(
                    (region.as_str(), device, working_set, held, cap),
                    ("r1", 0, 1, 0, 0),
                    "{error}"
                ),
                ref other => panic!("not a cap refusal: {other}"),
            },
            Err(e) => panic!("not a lowering error: {}", e.render()),
            Ok(plan) => panic!(
                "lowered under a 0-byte cap, peak {}",
                peak_live_bytes(plan.graph(), 0).bytes
            ),
        }
    }
}
