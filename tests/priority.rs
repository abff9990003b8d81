//! OpenMP `priority(n)` on target regions (OpenMP 5.2 §12.4; issue 27): graph files read
//! and write `priority = N` and refuse a bad value at its position; the builder sets it;
//! the schedule puts every device region with `priority > 0` on its device's
//! high-priority stream (src/schedule/priority.rs), shown in the text and DOT, parsed
//! back, and verified under every policy; a tiled Cholesky with a priority panel factors
//! under every policy with delay jitter and random streams on the host plugin (residual).

mod common;

use common::{host, run_checked};
use offload_sched::exec::{BufferData, IssueMode};
use offload_sched::file::{parse, to_toml, ErrorKind, SourceFile};
use offload_sched::lower::lower;
use offload_sched::model::residual::{cholesky_residual, shifted_matrix, RESIDUAL_BOUND};
use offload_sched::model::{
    tiled_cholesky_lookahead, tiled_cholesky_priority, Construct, DataStyle, ElemType, Init,
    MapType, MatrixInit, Program, ProgramBuilder, Tiling,
};
use offload_sched::schedule::{schedule, ScheduleOptions, StreamId, SyncPolicy};
use offload_sched::Plan;

const BASE: &str = r#"name = "p"

[[buffer]]
name = "x"
type = "f32"
len = 16

[[body]]
target = "k"
kernel = "scale"
args = [2.0, "x"]
map = ["tofrom: x"]
"#;

fn priorities(p: &Program) -> Vec<(String, u32)> {
    p.body
        .iter()
        .filter_map(|c| match c {
            Construct::Target(r) => Some((r.name.clone(), r.priority)),
            _ => None,
        })
        .collect()
}

#[test]
fn graph_files_read_and_write_priority() {
    let p = parse(&SourceFile::new("g.toml", BASE)).unwrap();
    assert_eq!(priorities(&p), [("k".to_string(), 0)], "absent: 0");
    let text = format!("{BASE}priority = 7\n");
    let p = parse(&SourceFile::new("g.toml", &text)).unwrap();
    assert_eq!(priorities(&p), [("k".to_string(), 7)]);
    let written = to_toml(&p);
    assert!(written.contains("\npriority = 7\n"), "{written}");
    let back = parse(&SourceFile::new("w.toml", &written)).unwrap();
    assert_eq!(priorities(&back), [("k".to_string(), 7)]);
    // Priority 0 is the default and is not written.
    let zero = parse(&SourceFile::new("g.toml", format!("{BASE}priority = 0\n"))).unwrap();
    assert!(!to_toml(&zero).contains("priority"));
}

#[test]
fn a_bad_priority_is_refused_at_its_value() {
    for (value, message) in [
        (
            "-1",
            "`priority` of target \"k\" must not be negative (OpenMP `priority(n)` takes an \
             integer from 0), found -1"
                .to_string(),
        ),
        (
            "4294967296",
            "`priority` of target \"k\" is too large: 4294967296 is over the largest \
             priority, 4294967295 (2^32 − 1)"
                .to_string(),
        ),
        (
            "1.5",
            "`priority` of target \"k\" must be an integer, found a float".to_string(),
        ),
        (
            "\"high\"",
            "`priority` of target \"k\" must be an integer, found a string".to_string(),
        ),
    ] {
        let text = format!("{BASE}priority = {value}\n");
        let e = parse(&SourceFile::new("g.toml", &text)).unwrap_err();
        assert_eq!(e.message(), message, "\n{}", e.render());
        assert_eq!(e.kind(), ErrorKind::BadValue);
        let line = text.lines().count();
        let col = "priority = ".len() + 1;
        assert_eq!(
            e.location(),
            Some(("g.toml".to_string(), line, col)),
            "\n{}",
            e.render()
        );
    }
    // On a construct that takes no priority: an unknown key, at the key.
    let text = BASE.replace(
        "[[body]]\ntarget",
        "[[body]]\nenter_data = \"e\"\nmap = [\"to: x\"]\npriority = 1\n\n[[body]]\ntarget",
    );
    let e = parse(&SourceFile::new("g.toml", &text)).unwrap_err();
    let line = text.lines().position(|l| l == "priority = 1").unwrap() + 1;
    assert_eq!(
        e.location(),
        Some(("g.toml".to_string(), line, 1)),
        "\n{}",
        e.render()
    );
}

/// Six independent regions on two devices; `hot0` (device 0) and `hot1` (device 1) have
/// priority 2 and 1.
fn program() -> Program {
    let mut p = ProgramBuilder::new("prio");
    p.devices(2);
    for (name, device, priority) in [
        ("a", 0, 0),
        ("hot0", 0, 2),
        ("b", 0, 0),
        ("c", 1, 0),
        ("hot1", 1, 1),
        ("d", 1, 0),
    ] {
        let x = p.buffer(&format!("x_{name}"), ElemType::F32, 64, Init::Random(1));
        drop(
            p.target(name, "scale")
                .num(2.0)
                .arg(x)
                .map(MapType::ToFrom, x)
                .nowait()
                .device(device)
                .priority(priority),
        );
    }
    p.build()
}

#[test]
fn the_builder_sets_priority() {
    assert_eq!(
        priorities(&program()),
        [
            ("a".to_string(), 0),
            ("hot0".to_string(), 2),
            ("b".to_string(), 0),
            ("c".to_string(), 0),
            ("hot1".to_string(), 1),
            ("d".to_string(), 0),
        ]
    );
}

#[test]
fn priority_regions_run_on_their_devices_high_priority_stream_and_verify() {
    let g = lower(&program()).unwrap();
    for policy in SyncPolicy::ALL {
        for random in [None, Some(3u64)] {
            let opts = ScheduleOptions {
                policy,
                streams_per_device: 3,
                random_streams: random,
                ..ScheduleOptions::default()
            };
            let s = schedule(&g, &opts);
            let what = format!("{policy} random={random:?}\n{s}");
            // Pool 3 + the high-priority stream: s3 on device 0, s7 on device 1.
            assert_eq!(s.streams.len(), 8, "{what}");
            let high: Vec<usize> = (0..8).filter(|&i| s.streams[i].high_priority).collect();
            assert_eq!(high, [3, 7], "{what}");
            assert_eq!((s.streams[3].device, s.streams[7].device), (0, 1));
            for (r, region) in g.regions.iter().enumerate() {
                let want = match region.name.as_str() {
                    "hot0" => Some(StreamId(3)),
                    "hot1" => Some(StreamId(7)),
                    _ => None,
                };
                for o in region.ops.clone() {
                    let got = s.op_stream[o as usize];
                    match want {
                        Some(w) => assert_eq!(got, Some(w), "region {r}: {what}"),
                        None => assert!(
                            got.is_none_or(|st| !s.streams[st.index()].high_priority),
                            "region {} on a high-priority stream: {what}",
                            region.name
                        ),
                    }
                }
            }
            offload_sched::verify::verify(&g, &s).unwrap_or_else(|e| panic!("{e}\n{what}"));
            let text = s.to_string();
            assert!(text.contains("\ns3 (device 0, high priority):\n"), "{what}");
            assert!(text.contains("\ns7 (device 1, high priority):\n"), "{what}");
            assert!(text.contains("(pool 4 per device)"), "{what}");
            let back = offload_sched::schedule::parse(&text, &g).unwrap();
            assert_eq!(back, s, "{what}");
            let dot = offload_sched::dot::to_dot(&g, &s);
            assert!(
                dot.contains("label=\"s3 (device 0, high priority)\";"),
                "{dot}"
            );
        }
    }
}

#[test]
fn without_priorities_no_stream_is_high_priority_and_the_pool_is_unchanged() {
    let mut p = program();
    for c in &mut p.body {
        if let Construct::Target(r) = c {
            r.priority = 0;
        }
    }
    let g = lower(&p).unwrap();
    let s = schedule(&g, &ScheduleOptions::default());
    assert_eq!(s.streams.len(), 8);
    assert!(s.streams.iter().all(|i| !i.high_priority));
    assert!(!s.to_string().contains("high priority"));
}

fn values(d: &BufferData) -> Vec<f64> {
    (0..d.len()).map(|i| d.get_f64(i).unwrap()).collect()
}

/// The panel (potrf, trsm and, with look-ahead, the updates feeding the next panel) at
/// priority 1 on the high-priority stream; the same DAG as without; factors under every
/// policy × fixed/random streams × issue mode with delay jitter, equal to the reference,
/// residual under the bound.
#[test]
fn tiled_cholesky_with_a_priority_panel_factors_under_every_policy() {
    let (n, tile) = (24u64, 6u64);
    for lookahead in [0, 1] {
        for style in [DataStyle::Entered, DataStyle::Mapped] {
            let t = Tiling {
                n,
                tile,
                ty: ElemType::F64,
                style,
                init: MatrixInit::Random(3),
            };
            let p = tiled_cholesky_priority(&t, lookahead, 1);
            let plain = tiled_cholesky_lookahead(&t, lookahead);
            assert_eq!(p.name, format!("{}_prio1", plain.name));
            let prio: Vec<String> = priorities(&p)
                .into_iter()
                .filter(|(_, n)| *n > 0)
                .map(|(name, _)| name)
                .collect();
            // 4 potrf + 6 trsm; with look-ahead the 3 syrk and 3 gemm of row/column k+1.
            let want = if lookahead == 0 { 10 } else { 16 };
            assert_eq!(prio.len(), want, "{prio:?}");
            assert!(prio
                .iter()
                .all(|r| r.starts_with("potrf") || r.starts_with("trsm") || lookahead > 0));
            assert!(prio.contains(&"gemm_3_1_0".to_string()) == (lookahead > 0));
            assert!(!prio.contains(&"gemm_3_2_0".to_string()));
            let what = p.name.clone();
            let mut want = None;
            for policy in SyncPolicy::ALL {
                for (k, random) in [None, Some(11u64)].into_iter().enumerate() {
                    let options = ScheduleOptions {
                        policy,
                        streams_per_device: 3,
                        random_streams: random,
                        ..ScheduleOptions::default()
                    };
                    let plan = Plan::new(p.clone(), &options)
                        .unwrap_or_else(|e| panic!("{what}: {}", e.render()));
                    let s = plan.schedule();
                    assert!(s.streams[3].high_priority, "{what}\n{s}");
                    let g = plan.graph();
                    for r in &g.regions {
                        let on_high = g
                            .regions
                            .iter()
                            .find(|q| q.name == r.name)
                            .map(|q| q.ops.clone())
                            .into_iter()
                            .flatten()
                            .filter_map(|o| s.op_stream[o as usize])
                            .all(|st| st == StreamId(3));
                        if r.priority > 0 {
                            assert!(on_high, "{what}: {} off s3\n{s}", r.name);
                        }
                    }
                    let want = want.get_or_insert_with(|| plan.reference().unwrap());
                    for issue in [IssueMode::Serial, IssueMode::PerStream] {
                        let label = format!("{what} {policy} random={random:?} {issue:?}");
                        let r =
                            run_checked(&label, &plan, &host(1, Some(5 + k as u64)), issue, want);
                        let a0 = p.buffers.iter().find(|b| b.name == "A").unwrap();
                        let a = shifted_matrix(
                            &values(&BufferData::init(a0)),
                            n as usize,
                            tile as usize,
                        );
                        let l = values(r.buffers.get("A").unwrap());
                        let res = cholesky_residual(&a, &l, n as usize, tile as usize, t.ty);
                        assert!(res < RESIDUAL_BOUND, "{label}: residual {res}");
                    }
                }
            }
        }
    }
}

/// With prefetched copies the copy stream comes first (`s3` of pool 3) and the
/// high-priority stream after it (`s4`, `pool 5`); a priority region's prefetched H2D
/// stays on the copy stream, its other ops move; verified under every policy.
#[test]
fn the_high_priority_stream_follows_the_copy_stream() {
    use offload_sched::lower::{lower_with, LowerOptions, OpKind, Prefetch};
    let t = Tiling {
        n: 24,
        tile: 6,
        ty: ElemType::F64,
        style: DataStyle::Mapped,
        init: MatrixInit::Random(3),
    };
    let p = tiled_cholesky_priority(&t, 0, 1);
    let opts = LowerOptions {
        prefetch: Prefetch::On,
        ..LowerOptions::elided()
    };
    let g = lower_with(&p, &opts).unwrap();
    let prefetched = g.prefetch_ops();
    assert!(
        !prefetched.is_empty(),
        "the mapped Cholesky prefetches its kept tiles"
    );
    for policy in SyncPolicy::ALL {
        let s = schedule(
            &g,
            &ScheduleOptions {
                policy,
                streams_per_device: 3,
                ..ScheduleOptions::default()
            },
        );
        assert_eq!(s.streams.len(), 5, "{s}");
        let high: Vec<usize> = (0..5).filter(|&i| s.streams[i].high_priority).collect();
        assert_eq!(high, [4], "{s}");
        for &o in &prefetched {
            assert_eq!(s.op_stream[o.index()], Some(StreamId(3)), "{s}");
        }
        let mut moved = 0;
        for r in g.regions.iter().filter(|r| r.priority > 0) {
            for o in r.ops.clone() {
                if prefetched.iter().any(|q| q.0 == o) {
                    continue;
                }
                assert_eq!(
                    s.op_stream[o as usize],
                    Some(StreamId(4)),
                    "{}: {s}",
                    r.name
                );
                moved +=
                    matches!(g.op(offload_sched::lower::OpId(o)).kind, OpKind::Kernel(_)) as usize;
            }
        }
        assert_eq!(moved, 10, "4 potrf + 6 trsm kernels on s4");
        offload_sched::verify::verify(&g, &s).unwrap_or_else(|e| panic!("{e}\n{s}"));
        let back = offload_sched::schedule::parse(&s.to_string(), &g).unwrap();
        assert_eq!(back, s);
    }
}
