//! WfCommons import: the WfInstances sample files, the translation rules, and errors.
//! The importer is the stage under test, so it is called alone; the samples' lowering,
//! schedule and proof come from a [`offload_sched::Plan`].

mod common;

use common::wf_sample;
use offload_sched::import::{
    import_wfcommons, suggest_scales, workflow_stats, ImportError, WfOptions,
};
use offload_sched::model::{Arg, Construct, DependType, MapType, Program, TargetRegion};
use std::collections::BTreeMap;

/// (file, tasks, files) of each sample.
const TABLE: [(&str, usize, usize); 6] = [
    ("helloworld-chain-5-chameleon.json", 5, 6),
    ("helloworld-forkjoin-10-chameleon.json", 10, 11),
    ("srasearch-chameleon-10a-001.json", 22, 48),
    ("1000genome-chameleon-2ch-100k-001.json", 52, 64),
    ("montage-chameleon-2mass-005d-001.json", 58, 111),
    ("montage-chameleon-2mass-05d-001.json", 1738, 2475),
];

/// Flattens the body: (enclosing target data, regions, ends with taskwait).
fn parts(
    p: &Program,
) -> (
    Option<&offload_sched::model::TargetData>,
    Vec<&TargetRegion>,
    bool,
) {
    let (data, body) = match p.body.as_slice() {
        [Construct::TargetData(d)] => (Some(d), d.body.as_slice()),
        body => (None, body),
    };
    let regions = body
        .iter()
        .filter_map(|c| match c {
            Construct::Target(r) => Some(r),
            _ => None,
        })
        .collect();
    let ends_with_taskwait = matches!(body.last(), Some(Construct::Taskwait { .. }));
    (data, regions, ends_with_taskwait)
}

fn spin_us(r: &TargetRegion) -> f64 {
    match r.args.as_slice() {
        [Arg::Number(us)] => *us,
        other => panic!("region {} has args {other:?}", r.name),
    }
}

#[test]
fn every_sample_imports_with_the_documented_counts() {
    let mut checked = 0;
    for (name, tasks, files) in TABLE {
        let text = wf_sample(name);
        let p = import_wfcommons(&text, name, &WfOptions::default()).unwrap();
        assert_eq!(p.buffers.len(), files, "{name}: files");
        let (data, regions, tw) = parts(&p);
        assert_eq!(regions.len(), tasks, "{name}: regions");
        assert!(tw, "{name}: ends with a taskwait");
        assert_eq!(
            p.construct_count(),
            tasks + 2,
            "{name}: target data + regions + taskwait"
        );
        let data = data.expect("every sample has intermediate files");

        // Every region: nowait spin with one depend per map; maps are to/from/tofrom.
        let mut emitted: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, r) in regions.iter().enumerate() {
            assert_eq!(r.kernel, "spin");
            assert!(r.nowait);
            assert!(spin_us(r) >= 0.0);
            assert_eq!(r.maps.len(), r.depends.len());
            for (m, d) in r.maps.iter().zip(&r.depends) {
                assert_eq!(m.section, d.section);
                let ok = matches!(
                    (m.map_type, d.kind),
                    (MapType::To, DependType::In)
                        | (MapType::From, DependType::Out)
                        | (MapType::ToFrom, DependType::InOut)
                );
                assert!(ok, "{name}: {} {:?} {:?}", r.name, m.map_type, d.kind);
            }
            for a in &r.after {
                assert!(
                    emitted.contains_key(a.as_str()),
                    "{name}: after {a} not earlier"
                );
            }
            assert!(emitted.insert(r.name.as_str(), i).is_none(), "unique names");
        }
        // Topological: every reader of a buffer comes after every writer of it.
        let mut writers: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, r) in regions.iter().enumerate() {
            for m in &r.maps {
                if m.map_type.has_from() {
                    writers.entry(m.section.buf.0).or_default().push(i);
                }
            }
        }
        for (i, r) in regions.iter().enumerate() {
            for m in &r.maps {
                if m.map_type == MapType::To {
                    for &w in writers.get(&m.section.buf.0).into_iter().flatten() {
                        assert!(w < i, "{name}: {} reads before its writer", r.name);
                    }
                }
            }
        }
        // The enclosing data maps exactly the files both written and read, `alloc`.
        let mut shared: Vec<u32> = Vec::new();
        for (b, ws) in &writers {
            let read = regions
                .iter()
                .enumerate()
                .any(|(i, r)| !ws.contains(&i) && r.maps.iter().any(|m| m.section.buf.0 == *b));
            if read {
                shared.push(*b);
            }
        }
        let mapped: Vec<u32> = data.maps.iter().map(|m| m.section.buf.0).collect();
        assert_eq!(mapped, shared, "{name}: resident files");
        assert!(data.maps.iter().all(|m| m.map_type == MapType::Alloc));
        let stats = workflow_stats(&text, name, &WfOptions::default()).unwrap();
        assert_eq!((stats.tasks, stats.files), (tasks, files));
        assert_eq!(stats.resident_files, data.maps.len());
        checked += 1;
    }
    eprintln!("checked {checked} sample files");
}

#[test]
fn chain_sample_is_a_chain_with_scaled_sizes_and_times() {
    let name = "helloworld-chain-5-chameleon.json";
    let text = wf_sample(name);
    let opts = WfOptions {
        time_scale: 1e-3,
        size_scale: 1e-3,
    };
    let p = import_wfcommons(&text, name, &opts).unwrap();
    assert_eq!(p.name, "helloworld-chain-5-chameleon");
    let (data, regions, _) = parts(&p);
    let names: Vec<&str> = regions.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "cpuhog_chain_00000001",
            "cpuhog_chain_00000002",
            "cpuhog_chain_00000003",
            "cpuhog_chain_00000004",
            "cpuhog_chain_00000005"
        ]
    );
    // Files 1..4 outputs are intermediates; the first input and the last output are not.
    assert_eq!(data.unwrap().maps.len(), 4);
    // Parents are all implied by files: no `after`.
    assert!(regions.iter().all(|r| r.after.is_empty()));
    // round(16666667 × 1e-3) = 16667 bytes.
    let out1 = p.buffer_id("chain_00000001_output.txt").unwrap();
    assert_eq!(p.buffer(out1).len, 16667);
    assert_eq!(p.buffer(out1).ty, offload_sched::model::ElemType::U8);
    let stats = workflow_stats(&text, name, &opts).unwrap();
    assert!(
        (stats.total_spin_us - stats.critical_path_us).abs() < 1e-6,
        "a chain"
    );
    let sum: f64 = regions.iter().map(|r| spin_us(r)).sum();
    assert!((sum - stats.total_spin_us).abs() < 1e-6);
}

/// A small 1.5 workflow: `a` writes `mid`, `b` and `c` read it; `c` also has parent `b`
/// without a file between them; `d` is independent and listed first among the roots
/// after `a`.
const SMALL: &str = r#"{
  "name": "small", "schemaVersion": "1.5",
  "workflow": {
    "specification": {
      "tasks": [
        {"id": "c", "parents": ["a", "b"], "children": [], "inputFiles": ["mid"], "outputFiles": ["out c"]},
        {"id": "a", "parents": [], "children": ["b", "c"], "inputFiles": ["in"], "outputFiles": ["mid"]},
        {"id": "b", "parents": ["a"], "children": ["c"], "inputFiles": ["mid", "in"], "outputFiles": ["bout"]},
        {"id": "d", "parents": [], "children": [], "inputFiles": [], "outputFiles": []}
      ],
      "files": [
        {"id": "in", "sizeInBytes": 1000},
        {"id": "mid", "sizeInBytes": 2000.4},
        {"id": "out c", "sizeInBytes": 0},
        {"id": "bout", "sizeInBytes": 10}
      ]
    },
    "execution": {
      "tasks": [
        {"id": "a", "runtimeInSeconds": 1.5},
        {"id": "b", "runtimeInSeconds": 2},
        {"id": "c"}
      ]
    }
  }
}"#;

#[test]
fn small_workflow_translation() {
    let opts = WfOptions {
        time_scale: 1e-2,
        size_scale: 1.0,
    };
    let p = import_wfcommons(SMALL, "dir/small.json", &opts).unwrap();
    assert_eq!(p.name, "small");
    let lens: Vec<(&str, u64)> = p.buffers.iter().map(|b| (b.name.as_str(), b.len)).collect();
    assert_eq!(
        lens,
        [("in", 1000), ("mid", 2000), ("out_c", 1), ("bout", 10)]
    );
    let (data, regions, tw) = parts(&p);
    assert!(tw);
    let data = data.unwrap();
    assert_eq!(data.maps.len(), 1);
    assert_eq!(
        (data.maps[0].map_type, data.maps[0].section.buf.0),
        (MapType::Alloc, 1)
    );
    assert_eq!(data.maps[0].section.len, 2000);
    // Kahn with ties by file order: d (index 3) is ready from the start but a (index 1)
    // comes first; then b (2) and d (3) are ready: b first; then c (0) and d: c first.
    let order: Vec<&str> = regions.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(order, ["a", "b", "c", "d"]);
    let by = |n: &str| *regions.iter().find(|r| r.name == n).unwrap();
    assert_eq!(spin_us(by("a")), 15_000.0);
    assert_eq!(spin_us(by("b")), 20_000.0);
    assert_eq!(spin_us(by("c")), 0.0);
    assert_eq!(spin_us(by("d")), 0.0);
    let maps = |n: &str| -> Vec<(MapType, String)> {
        by(n)
            .maps
            .iter()
            .map(|m| (m.map_type, p.section_name(&m.section)))
            .collect()
    };
    assert_eq!(
        maps("a"),
        [
            (MapType::To, "in[0:1000]".into()),
            (MapType::From, "mid[0:2000]".into())
        ]
    );
    assert_eq!(
        maps("b"),
        [
            (MapType::To, "in[0:1000]".into()),
            (MapType::To, "mid[0:2000]".into()),
            (MapType::From, "bout[0:10]".into())
        ]
    );
    assert_eq!(
        maps("c"),
        [
            (MapType::To, "mid[0:2000]".into()),
            (MapType::From, "out_c[0:1]".into())
        ]
    );
    assert!(maps("d").is_empty());
    // c's parent b shares no file with it: `after`. a is implied by `mid`.
    assert_eq!(by("c").after, ["b"]);
    assert!(by("b").after.is_empty());
    let stats = workflow_stats(SMALL, "small.json", &opts).unwrap();
    assert_eq!(stats.extra_parent_edges, 1);
    assert_eq!(stats.critical_path_us, 35_000.0);
    assert_eq!(stats.total_buffer_bytes, 3011);
    assert_eq!(stats.max_buffer_bytes, 2000);
}

#[test]
fn read_then_written_resident_file_is_mapped_to() {
    // `a` reads and writes f, then `b` reads it: f needs its host contents first.
    let json = r#"{"workflow": {"specification": {
        "tasks": [{"id": "a", "inputFiles": ["f"], "outputFiles": ["f"]},
                  {"id": "b", "inputFiles": ["f"]}],
        "files": [{"id": "f", "sizeInBytes": 8}]}}}"#;
    let p = import_wfcommons(json, "rw.json", &WfOptions::default()).unwrap();
    let (data, regions, _) = parts(&p);
    assert_eq!(data.unwrap().maps[0].map_type, MapType::To);
    assert_eq!(regions[0].maps[0].map_type, MapType::ToFrom);
    assert_eq!(regions[0].depends[0].kind, DependType::InOut);
    assert_eq!(regions[1].maps[0].map_type, MapType::To);
}

#[test]
fn no_intermediates_means_no_target_data() {
    let json = r#"{"workflow": {"specification": {
        "tasks": [{"id": "x y", "inputFiles": ["f"]}, {"id": "x_y", "parents": ["x y"]}],
        "files": [{"id": "f", "sizeInBytes": 8}]}}}"#;
    let p = import_wfcommons(json, "flat.json", &WfOptions::default()).unwrap();
    assert!(matches!(p.body[0], Construct::Target(_)));
    let (data, regions, tw) = parts(&p);
    assert!(data.is_none() && tw);
    // "x_y" as written keeps its name; the sanitized "x y" gets a suffix.
    assert_eq!(regions[0].name, "x_y_2");
    assert_eq!(regions[1].name, "x_y");
    assert_eq!(regions[1].after, ["x_y_2"]);
}

#[test]
fn schema_1_4_layout_is_read() {
    let json = r#"{"schemaVersion": "1.4", "workflow": {"tasks": [
        {"name": "t1", "id": "ID01", "parents": [], "runtimeInSeconds": 3,
         "files": [{"link": "input", "name": "in.txt", "sizeInBytes": 100},
                   {"link": "output", "name": "mid.txt", "sizeInBytes": 50}]},
        {"name": "t2", "id": "ID02", "parents": ["t1"], "runtimeInSeconds": 1,
         "files": [{"link": "input", "name": "mid.txt", "sizeInBytes": 50},
                   {"link": "output", "name": "out.txt", "sizeInBytes": 7}]}]}}"#;
    let opts = WfOptions {
        time_scale: 1.0,
        size_scale: 1.0,
    };
    let p = import_wfcommons(json, "v14.json", &opts).unwrap();
    let names: Vec<&str> = p.buffers.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["in.txt", "mid.txt", "out.txt"]);
    let (data, regions, _) = parts(&p);
    assert_eq!(data.unwrap().maps.len(), 1);
    assert_eq!(regions[0].name, "ID01");
    assert_eq!(spin_us(regions[0]), 3e6);
    assert!(regions[1].after.is_empty());
}

fn err(json: &str) -> ImportError {
    import_wfcommons(json, "bad.json", &WfOptions::default()).unwrap_err()
}

#[test]
fn unknown_file_names_its_json_path() {
    let json = SMALL.replace(
        r#""inputFiles": ["mid", "in"]"#,
        r#""inputFiles": ["mid", "x.dat"]"#,
    );
    assert_eq!(
        err(&json).to_string(),
        r#"bad.json: workflow.specification.tasks[2].inputFiles[1]: unknown file "x.dat""#
    );
}

#[test]
fn missing_and_mistyped_fields_name_their_paths() {
    let cases = [
        (r#"{"workflow": {}}"#, "bad.json: workflow: missing required field `specification` (schema 1.5) or `tasks` (schema 1.4)"),
        (r#"{"name": 1}"#, "bad.json: (root): missing required field `workflow`"),
        (r#"[1, 2]"#, "bad.json: (root): expected an object, found an array"),
        (
            r#"{"workflow": {"specification": {"tasks": [{"id": "a"}, {"name": "b"}]}}}"#,
            "bad.json: workflow.specification.tasks[1]: missing required field `id`",
        ),
        (
            r#"{"workflow": {"specification": {"tasks": [], "files": [{"id": "f"}]}}}"#,
            "bad.json: workflow.specification.files[0]: missing required field `sizeInBytes`",
        ),
        (
            r#"{"workflow": {"specification": {"tasks": [], "files": [{"id": "f", "sizeInBytes": -3}]}}}"#,
            "bad.json: workflow.specification.files[0].sizeInBytes: expected a number >= 0, found -3",
        ),
        (
            r#"{"workflow": {"specification": {"tasks": [{"id": "a", "parents": "b"}]}}}"#,
            "bad.json: workflow.specification.tasks[0].parents: expected an array, found string \"b\"",
        ),
        (
            r#"{"workflow": {"specification": {"tasks": [{"id": "a", "parents": ["zz"]}]}}}"#,
            "bad.json: workflow.specification.tasks[0].parents[0]: unknown task \"zz\"",
        ),
        (
            r#"{"workflow": {"specification": {"tasks": [{"id": "a"}, {"id": "a"}]}}}"#,
            "bad.json: workflow.specification.tasks[1].id: duplicate task id \"a\" (also workflow.specification.tasks[0])",
        ),
        (
            r#"{"workflow": {"specification": {"tasks": [{"id": "a"}]}, "execution": {"tasks": [{"id": "q", "runtimeInSeconds": 1}]}}}"#,
            "bad.json: workflow.execution.tasks[0].id: task \"q\" is not in workflow.specification.tasks",
        ),
        (
            r#"{"schemaVersion": "2.0", "workflow": {}}"#,
            "bad.json: schemaVersion: unsupported WfFormat schema version \"2.0\" (supported: 1.3, 1.4, 1.5)",
        ),
    ];
    for (json, want) in cases {
        assert_eq!(err(json).to_string(), want, "for {json}");
    }
}

#[test]
fn cycles_name_their_tasks() {
    let json = r#"{"workflow": {"specification": {"tasks": [
        {"id": "root"},
        {"id": "p", "parents": ["root", "r"]},
        {"id": "q", "parents": ["p"]},
        {"id": "r", "inputFiles": ["f"]},
        {"id": "s", "outputFiles": ["f"], "parents": ["q"]}],
      "files": [{"id": "f", "sizeInBytes": 1}]}}}"#;
    // p -> q -> s -> (file f) r -> p
    assert_eq!(
        err(json),
        ImportError::Cycle {
            source_name: "bad.json".into(),
            tasks: vec!["q".into(), "s".into(), "r".into(), "p".into(), "q".into()],
        }
    );
    assert_eq!(
        err(json).to_string(),
        "bad.json: task dependencies form a cycle: q -> s -> r -> p -> q"
    );
    let own = r#"{"workflow": {"specification": {"tasks": [{"id": "a", "parents": ["a"]}]}}}"#;
    assert_eq!(
        err(own).to_string(),
        "bad.json: task dependencies form a cycle: a -> a"
    );
}

#[test]
fn oversized_buffers_and_bad_scales_are_rejected() {
    let json = r#"{"workflow": {"specification": {"tasks": [],
        "files": [{"id": "big", "sizeInBytes": 1e12}]}}}"#;
    let opts = WfOptions {
        time_scale: 1.0,
        size_scale: 1.0,
    };
    let e = import_wfcommons(json, "big.json", &opts).unwrap_err();
    assert!(
        matches!(e, ImportError::TooLarge { ref file, limit, .. } if file == "big" && limit == 64 << 30)
    );
    assert!(e
        .to_string()
        .starts_with("big.json: workflow.specification.files[0].sizeInBytes: file \"big\""));
    // Scaled down it fits.
    let small = WfOptions {
        time_scale: 1.0,
        size_scale: 1e-6,
    };
    let p = import_wfcommons(json, "big.json", &small).unwrap();
    assert_eq!(p.buffers[0].len, 1_000_000);
    for bad in [-1.0, f64::NAN, f64::INFINITY] {
        let o = WfOptions {
            time_scale: bad,
            size_scale: 1.0,
        };
        assert!(matches!(
            import_wfcommons(json, "big.json", &o),
            Err(ImportError::BadOption {
                option: "time_scale",
                ..
            })
        ));
    }
}

#[test]
fn truncated_and_garbage_json_never_panics() {
    // Every prefix of a real-looking document, and some garbage.
    let mut syntax = 0;
    for end in 0..SMALL.len() {
        if !SMALL.is_char_boundary(end) {
            continue;
        }
        match err(&SMALL[..end]) {
            ImportError::Syntax { line, column, .. } => {
                assert!(line >= 1);
                let _ = column;
                syntax += 1;
            }
            other => panic!("prefix {end}: {other}"),
        }
    }
    assert!(syntax > 100);
    let e = err("{\n  \"workflow\": {\n    \"specification\": [1, 2,,]\n  }\n}");
    match e {
        ImportError::Syntax { line, column, .. } => assert_eq!((line, column), (3, 28)),
        other => panic!("{other}"),
    }
    for garbage in [
        "",
        "null",
        "\u{0}\u{1}",
        "ÿÿÿ",
        "{\"workflow\": null}",
        "{\"workflow\": {\"specification\": {\"tasks\": [null]}}}",
        "{\"workflow\": {\"specification\": {\"tasks\": [{\"id\": 5}]}}}",
        "{\"workflow\": {\"specification\": {\"tasks\": {}}}}",
        "{\"workflow\": {\"tasks\": [{\"files\": [{\"link\": \"sideways\"}]}]}}",
        &"[".repeat(10_000),
    ] {
        let _ = err(garbage).to_string();
    }
}

#[test]
fn suggested_scales_keep_every_sample_small() {
    eprintln!(
        "{:<42} {:>10} {:>10} {:>12} {:>12} {:>12} {:>12}",
        "file", "time_scale", "size_scale", "crit (s)", "sum/4 (s)", "bytes (MiB)", "default"
    );
    for (name, _, _) in TABLE {
        let text = wf_sample(name);
        let opts = suggest_scales(&text, name).unwrap();
        assert!(opts.time_scale > 0.0 && opts.time_scale <= 1.0);
        assert!(opts.size_scale > 0.0 && opts.size_scale <= 1.0);
        let s = workflow_stats(&text, name, &opts).unwrap();
        assert!(s.critical_path_us <= 2e6 * 1.0001, "{name}: {s:?}");
        assert!(s.total_spin_us / 4.0 <= 2e6 * 1.0001, "{name}: {s:?}");
        assert!(s.total_buffer_bytes <= 256 << 20, "{name}: {s:?}");
        // The defaults stay within the lead's limits too (< 10 s, < 512 MiB).
        let d = workflow_stats(&text, name, &WfOptions::default()).unwrap();
        assert!(
            d.critical_path_us < 5e6 && d.total_spin_us / 4.0 < 5e6,
            "{name}: {d:?}"
        );
        assert!(d.total_buffer_bytes < 512 << 20, "{name}: {d:?}");
        eprintln!(
            "{:<42} {:>10} {:>10} {:>12.3} {:>12.3} {:>12.1} crit {:.3} s, sum/4 {:.3} s, {:.1} MiB",
            name,
            opts.time_scale,
            opts.size_scale,
            s.critical_path_us / 1e6,
            s.total_spin_us / 4e6,
            s.total_buffer_bytes as f64 / (1 << 20) as f64,
            d.critical_path_us / 1e6,
            d.total_spin_us / 4e6,
            d.total_buffer_bytes as f64 / (1 << 20) as f64,
        );
    }
}

#[test]
fn samples_lower_schedule_and_verify_without_intermediate_copies() {
    use offload_sched::lower::OpKind;
    use offload_sched::schedule::ScheduleOptions;
    use offload_sched::Plan;
    for (name, tasks, _) in TABLE {
        let text = wf_sample(name);
        // Imported, lowered, scheduled and verified; then lowered with transfer elision
        // off, since the counts below are the copies the mapping rules name for the
        // importer's maps (elision's own counts: tests/elision.rs).
        let plan = Plan::from_wfcommons(
            &text,
            name,
            &WfOptions::default(),
            &ScheduleOptions::default(),
        )
        .and_then(|p| p.relower(&offload_sched::lower::LowerOptions::no_elide()))
        .unwrap_or_else(|e| panic!("{name}: {}", e.render()));
        let (p, g) = (plan.program(), plan.graph());
        let (data, regions, _) = parts(p);
        let resident: Vec<u32> = data.unwrap().maps.iter().map(|m| m.section.buf.0).collect();
        // Expected copies: each `to` of a non-resident file is an H2D, each `from` a D2H.
        let (mut h2d, mut d2h) = (0, 0);
        for r in &regions {
            for m in &r.maps {
                if !resident.contains(&m.section.buf.0) {
                    h2d += usize::from(m.map_type.has_to());
                    d2h += usize::from(m.map_type.has_from());
                }
            }
        }
        let count = |f: fn(&OpKind) -> bool| g.ops.iter().filter(|o| f(&o.kind)).count();
        assert_eq!(
            count(|k| matches!(k, OpKind::H2D { .. })),
            h2d,
            "{name}: h2d"
        );
        assert_eq!(
            count(|k| matches!(k, OpKind::D2H { .. })),
            d2h,
            "{name}: d2h"
        );
        assert_eq!(
            count(|k| matches!(k, OpKind::Kernel(_))),
            tasks,
            "{name}: kernels"
        );
        // No copy touches a resident file.
        for o in &g.ops {
            if let OpKind::H2D { section, .. } | OpKind::D2H { section, .. } = &o.kind {
                assert!(
                    !resident.contains(&section.buf.0),
                    "{name}: copy of a resident file"
                );
            }
        }
        let s = plan.schedule();
        assert!(s.used_streams() >= 1);
        let text = s.to_string();
        eprintln!("{name}: {}", text.lines().last().unwrap_or(""));
    }
}

/// A time scale that makes a task's spin longer than the lowering allows fails in the
/// importer, naming the task's JSON path and the option, not a region of the lowered
/// program (issue 15 point 5).
#[test]
fn time_scale_past_the_spin_limit_names_the_task_and_the_option() {
    let opts = WfOptions {
        time_scale: 1e30,
        size_scale: 1.0,
    };
    let e = import_wfcommons(SMALL, "dir/small.json", &opts).unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, ImportError::Invalid { .. }), "{e:?}");
    assert!(
        text.starts_with("dir/small.json: workflow.specification.tasks["),
        "{text}"
    );
    assert!(text.contains("× time_scale 1e30 = "), "{text}");
    assert!(text.contains("(lower time_scale)"), "{text}");
}
