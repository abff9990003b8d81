//! Loading the sample graph files, spans, reordering by `after`, and reading errors.
//! The loader is the stage under test, so `file::load` and `file::parse` are called alone
//! (the samples' whole pipeline runs as plans).

mod common;

use common::data_path;
use offload_sched::file::{load, parse, to_toml, ErrorKind, SourceFile};
use offload_sched::model::{
    Access, Arg, BufferId, Construct, DependType, ElemType, Init, KernelSource, MapType, ParamKind,
    Section,
};
use offload_sched::schedule::ScheduleOptions;
use offload_sched::Plan;

#[test]
fn saxpy_sample() {
    let (src, p) = load(data_path("saxpy.toml")).unwrap();
    assert_eq!(p.name, "saxpy");
    assert_eq!(p.devices, 1);
    assert_eq!(p.buffers.len(), 3);
    assert_eq!(p.buffers[0].init, Init::Iota);
    assert_eq!(p.buffers[1].init, Init::Fill(1.0));
    assert_eq!(p.buffers[1].len, 1024);
    assert_eq!(p.body.len(), 4);
    let Construct::Target(lo) = &p.body[0] else {
        panic!("{:?}", p.body[0])
    };
    assert_eq!(lo.kernel, "saxpy");
    assert_eq!(
        lo.args,
        vec![
            Arg::Number(2.0),
            Arg::Buffer(Section::new(BufferId(0), 0, 512)),
            Arg::Buffer(Section::new(BufferId(1), 0, 512)),
        ]
    );
    assert!(lo.nowait);
    assert_eq!(lo.maps[1].map_type, MapType::ToFrom);
    assert_eq!(lo.maps[1].section, Section::new(BufferId(1), 0, 512));
    // Spans: the construct name and each map section, exactly.
    let at = |s: Option<offload_sched::model::Span>| {
        let s = s.unwrap();
        &src.text[s.start..s.end]
    };
    assert_eq!(at(lo.span), "\"lo\"");
    assert_eq!(at(lo.maps[0].span), "x[0:512]");
    assert_eq!(at(lo.depends[0].span), "y[0:512]");
    assert_eq!(lo.depends[0].kind, DependType::InOut);
    let Construct::Target(hi) = &p.body[1] else {
        panic!()
    };
    assert_eq!(hi.args[0], Arg::Number(2.0));
    assert_eq!(hi.launch.map(|l| (l.teams, l.threads)), Some((4, 128)));
    assert!(matches!(&p.body[2], Construct::Taskwait { name, span: Some(_) } if name == "tw"));
    let Construct::HostTask(h) = &p.body[3] else {
        panic!()
    };
    assert_eq!(h.reads, vec![Section::new(BufferId(1), 0, 1024)]);
    assert_eq!(h.writes, vec![Section::new(BufferId(2), 0, 1)]);
    assert_eq!(h.kernel.as_deref(), Some("reduce_sum"));
}

#[test]
fn nested_sample_reorders_by_after() {
    let (src, p) = load(data_path("nested.toml")).unwrap();
    assert_eq!(p.devices, 2);
    assert_eq!(p.buffers[0].init, Init::Random(7));
    assert_eq!(p.buffers[1].ty, ElemType::I32);
    assert_eq!(p.buffers[1].init, Init::Zeros);
    let k = &p.kernels[0];
    assert_eq!(k.name, "my_k");
    assert_eq!(k.params[0].name, "src");
    assert_eq!(k.params[1].name, "arg1");
    assert_eq!(
        k.params[1].kind,
        ParamKind::Buffer {
            ty: Some(ElemType::I32),
            access: Access::InOut
        }
    );
    assert_eq!(
        k.source,
        KernelSource::User {
            library: Some("libmy.so".into()),
            cuda: Some("my.cu".into()),
            symbol: "my_k_impl".into()
        }
    );
    let Construct::TargetData(d) = &p.body[0] else {
        panic!()
    };
    assert_eq!(d.device, 1);
    let names: Vec<&str> = d
        .body
        .iter()
        .map(|c| match c {
            Construct::Target(r) => r.name.as_str(),
            Construct::Update(u) => u.name.as_str(),
            _ => "?",
        })
        .collect();
    // k2 names k1 in `after`, so k1 moves first; u keeps its place after both.
    assert_eq!(names, ["k1", "k2", "u"]);
    let Construct::Update(u) = &d.body[2] else {
        panic!()
    };
    assert_eq!(u.maps[0].map_type, MapType::From);
    assert!(u.maps[1].present);
    let Construct::ExitData(x) = &p.body[2] else {
        panic!()
    };
    assert!(x.maps[0].always);
    assert_eq!(x.maps[1].map_type, MapType::Delete);
    let s = x.span.unwrap();
    assert_eq!(&src.text[s.start..s.end], "\"x\"");
}

#[test]
fn after_can_cross_bodies() {
    let text = r#"name = "p"
[[buffer]]
name = "a"
type = "f32"
len = 8
[[body]]
host = "first"
after = ["inner"]
[[body]]
target_data = "d"
map = ["a"]
[[body.body]]
target = "inner"
kernel = "increment"
args = ["a"]
map = ["present, alloc: a"]
[[body]]
host = "last"
"#;
    let p = parse(&SourceFile::new("g.toml", text)).unwrap();
    let kinds: Vec<&str> = p.body.iter().map(|c| c.kind_name()).collect();
    // `first` follows `inner`, so it follows the whole target data; `last` stays last.
    assert_eq!(kinds, ["target_data", "host", "host"]);
    let Construct::HostTask(h) = &p.body[1] else {
        panic!()
    };
    assert_eq!(h.name, "first");
    // A stable order: a body without edges keeps file order, and writing the reordered
    // program gives a file that needs no reordering.
    let again = parse(&SourceFile::new("g2.toml", to_toml(&p))).unwrap();
    assert!(offload_sched::file::same_program(&p, &again));
}

#[test]
fn inline_tables_work_too() {
    let text = r#"name = "p"
buffer = [{ name = "a", type = "u8", len = 4, init = { fill = 3 } }]
body = [{ target = "t", kernel = "increment", args = ["a"], map = ["tofrom: a"] }]
"#;
    let p = parse(&SourceFile::new("g.toml", text)).unwrap();
    assert_eq!(p.buffers[0].init, Init::Fill(3.0));
    assert_eq!(p.body.len(), 1);
}

#[test]
fn read_errors_name_the_file() {
    let e = load("/nonexistent/dir/g.toml").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io);
    assert!(
        e.message()
            .starts_with("cannot read graph file `/nonexistent/dir/g.toml`: "),
        "{}",
        e.message()
    );
    assert_eq!(e.location(), None);
    assert!(e
        .render()
        .starts_with("/nonexistent/dir/g.toml: error: cannot read"));

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, b"name = \"p\"\nx = \"\xff\"\n").unwrap();
    let e = load(&path).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io);
    assert!(
        e.message().contains("is not valid UTF-8 (byte 16)"),
        "{}",
        e.message()
    );
    assert_eq!(e.location().map(|l| (l.1, l.2)), Some((2, 6)));
}

#[test]
fn samples_lower_and_lowering_errors_point_into_the_file() {
    use offload_sched::file::lower_error;
    for f in ["saxpy.toml", "nested.toml"] {
        if let Err(e) = Plan::from_file(data_path(f), &ScheduleOptions::default()) {
            panic!("{}", e.render());
        }
    }
    // M01: `present` on a section nothing mapped; the file stage's located lowering error.
    let text = r#"name = "m01"
[[buffer]]
name = "i"
type = "i32"
len = 4
[[body]]
target = "r"
kernel = "increment"
args = ["i"]
map = ["present, alloc: i"]
"#;
    let src = SourceFile::new("m01.toml", text);
    let p = parse(&src).unwrap();
    let e = offload_sched::lower::lower(&p).unwrap_err();
    let fe = lower_error(&src, &e);
    assert_eq!(fe.kind(), ErrorKind::Lower);
    let r = fe.render();
    assert!(r.contains("present"), "{r}");
    assert_eq!(fe.location(), Some(("m01.toml".to_string(), 10, 25)), "{r}");
}

#[test]
fn a_named_taskwait_keeps_its_name_in_schedule_dot_and_trace() {
    use offload_sched::lower::OpKind;
    use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
    let plan = Plan::from_file(data_path("saxpy.toml"), &ScheduleOptions::default()).unwrap();
    let g = plan.graph();
    let tw = g
        .op_ids()
        .find(|&op| g.op(op).kind == OpKind::Taskwait)
        .unwrap();
    assert_eq!(g.region_of(tw).name, "tw");
    // The schedule text (`offload-sched schedule`) and the DOT name the region as written.
    let line = format!("{:<6} taskwait", tw.to_string());
    let text = plan.to_string();
    let row = text.lines().find(|l| l.contains(&line)).unwrap();
    assert!(row.ends_with("region \"tw\""), "{row}");
    let dot = plan.to_dot();
    let node = dot
        .lines()
        .find(|l| l.contains(&format!("{tw} taskwait")))
        .unwrap();
    assert!(node.contains("region \\\"tw\\\""), "{node}");
    // The trace of a run (`run --trace`).
    let report = plan
        .run(&HostPlugin::new(HostPluginOptions::default()))
        .unwrap();
    let json = offload_sched::timeline::trace::chrome_trace(&report, g, plan.schedule());
    let ev = json["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["cat"] == "taskwait")
        .unwrap();
    assert_eq!(ev["args"]["region"], "tw", "{ev}");
    // An unnamed taskwait (`taskwait = ""`, or the builder's) is shown as `taskwait`.
    let mut b = offload_sched::model::ProgramBuilder::new("t");
    b.taskwait().taskwait_named("sync");
    let g = offload_sched::lower::lower(&b.build()).unwrap();
    let names: Vec<&str> = g.regions.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["taskwait", "sync", "end"]);
}
