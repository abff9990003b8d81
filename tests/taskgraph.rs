//! The OpenMP 6.0 `taskgraph` construct (§14.3) as this crate models it: `repeat = N`
//! gives the results of the body written out N times (host plugin and reference
//! interpreter, bit for bit), the lowering records exact op ranges per execution and
//! names regions `name@k`, graph files read and write it, and misuse is refused with its
//! position or name.

mod common;

use offload_sched::exec::Buffers;
use offload_sched::file::{parse, to_toml, ErrorKind, FileError, SourceFile};
use offload_sched::lower::{lower, OpGraph, OpId};
use offload_sched::model::{
    Arg, Construct, ElemType, Init, MapType, Program, ProgramBuilder, Taskgraph,
};
use offload_sched::schedule::ScheduleOptions;
use offload_sched::Plan;

/// A 16x16 Jacobi in `target data`: per execution two sweeps (a → b, b → a), an
/// `update from: a`, a host `reduce_sum` of `a` and a `taskwait`. As a taskgraph of
/// `repeat = n` when `taskgraph`, else the same body written out `n` times (execution
/// `k` ≥ 1's constructs named `name@k`, as the lowering shows a taskgraph's: two
/// constructs may not share a name).
fn jacobi(n: u32, taskgraph: bool) -> Program {
    let mut p = ProgramBuilder::new("j");
    let a = p.buffer("a", ElemType::F32, 256, Init::Random(3));
    let b = p.buffer("b", ElemType::F32, 256, Init::Zeros);
    let r = p.buffer("residual", ElemType::F32, 1, Init::Zeros);
    let maps = vec![p.map(MapType::To, a), p.map(MapType::Alloc, b)];
    let body = move |p: &mut ProgramBuilder, k: u32| {
        let named = |name: &str| match k {
            0 => name.to_string(),
            k => format!("{name}@{k}"),
        };
        for (name, src, dst) in [("step0", a, b), ("step1", b, a)] {
            let name = named(name);
            let m = vec![
                p.map(MapType::To, src).present(),
                p.map(MapType::Alloc, dst),
            ];
            let mut t = p
                .target(&name, "jacobi5")
                .num(16.0)
                .num(16.0)
                .arg(src)
                .arg(dst);
            for item in m {
                t = t.map_item(item);
            }
        }
        let show = vec![p.map(MapType::From, a)];
        p.update(&named("show"), show);
        let (sa, sr) = (p.sec(a), p.sec(r));
        p.host_kernel(
            &named("sum"),
            "reduce_sum",
            vec![Arg::Buffer(sa), Arg::Buffer(sr)],
        );
        p.taskwait();
    };
    p.target_data("grid", maps, |p| {
        if taskgraph {
            p.taskgraph("sweeps", n, |p| body(p, 0));
        } else {
            for k in 0..n {
                body(p, k);
            }
        }
    });
    p.build()
}

/// Each buffer's name and its elements' bits.
type Bits = Vec<(String, Vec<u32>)>;

fn bits(b: &Buffers) -> Bits {
    ["a", "b", "residual"]
        .iter()
        .map(|n| {
            let v = b.as_f32(n).unwrap().iter().map(|x| x.to_bits()).collect();
            (n.to_string(), v)
        })
        .collect()
}

/// Reference buffers and host-plugin buffers of `p`, as bits.
fn results(p: Program) -> (Bits, Bits) {
    let plan = Plan::new(p, &ScheduleOptions::default()).unwrap();
    let reference = bits(&plan.reference().unwrap());
    let run = plan.run(&common::host(1, None)).unwrap();
    (reference, bits(&run.buffers))
}

/// Ops, their devices and edges, without region names.
fn shape(g: &OpGraph) -> (Vec<String>, Vec<(OpId, OpId)>) {
    let ops = g.op_ids().map(|i| g.describe(i)).collect();
    (ops, g.edges().collect())
}

#[test]
fn repeat_n_equals_the_body_written_out_n_times_bit_for_bit() {
    for n in [1, 2, 7] {
        let (tg_ref, tg_run) = results(jacobi(n, true));
        let (un_ref, un_run) = results(jacobi(n, false));
        assert_eq!(tg_ref, un_ref, "reference, repeat {n}");
        assert_eq!(tg_run, un_run, "host plugin, repeat {n}");
        assert_eq!(tg_run, tg_ref, "host plugin vs reference, repeat {n}");
        // The same ops and edges: only region names differ.
        let (g, u) = (
            lower(&jacobi(n, true)).unwrap(),
            lower(&jacobi(n, false)).unwrap(),
        );
        assert_eq!(shape(&g), shape(&u), "repeat {n}");
        assert_eq!(g.taskgraphs.len(), 1);
        assert_eq!(g.taskgraphs[0].iterations.len(), n as usize);
        assert!(u.taskgraphs.is_empty());
    }
    // The sweeps changed the grid: the comparison is not of untouched inputs.
    let (r1, _) = results(jacobi(1, true));
    let (r7, _) = results(jacobi(7, true));
    assert_ne!(r1, r7);
}

/// `program` with every taskgraph replaced by its body written out `repeat` times, the
/// constructs of execution `k` ≥ 1 named `name@k` (bodies without `after`).
fn unrolled(body: &[Construct]) -> Vec<Construct> {
    body.iter()
        .flat_map(|c| match c {
            Construct::Taskgraph(t) => {
                let once = unrolled(&t.body);
                (0..t.repeat)
                    .flat_map(|k| once.iter().map(move |c| renamed(c, k)))
                    .collect()
            }
            Construct::TargetData(d) => {
                let mut d = d.clone();
                d.body = unrolled(&d.body);
                vec![Construct::TargetData(d)]
            }
            other => vec![other.clone()],
        })
        .collect()
}

/// `c` as execution `k` shows it: `name@k` for `k` ≥ 1 (nested bodies too).
fn renamed(c: &Construct, k: u32) -> Construct {
    let mut c = c.clone();
    if k == 0 {
        return c;
    }
    let at = |name: &mut String| {
        if !name.is_empty() {
            *name = format!("{name}@{k}");
        }
    };
    match &mut c {
        Construct::Target(t) => at(&mut t.name),
        Construct::TargetData(d) => {
            at(&mut d.name);
            d.body = d.body.iter().map(|c| renamed(c, k)).collect();
        }
        Construct::Taskgraph(t) => at(&mut t.name),
        Construct::EnterData(d) | Construct::ExitData(d) | Construct::Update(d) => at(&mut d.name),
        Construct::Taskwait { name, .. } => at(name),
        Construct::HostTask(h) => at(&mut h.name),
    }
    c
}

#[test]
fn jacobi_taskgraph_graph_equals_its_1000_sweeps_written_out() {
    let plan = common::plan("jacobi_taskgraph.toml");
    let g = plan.graph();
    assert_eq!(g.taskgraphs.len(), 1);
    let tg = &g.taskgraphs[0];
    assert_eq!(tg.name, "sweeps");
    assert_eq!(tg.iterations.len(), 500);
    assert_eq!(tg.iterations[0], 3..5);
    assert_eq!(tg.iterations[499], 1001..1003);
    let kernels = g.ops.iter().filter(|o| o.kind.name() == "kernel").count();
    assert_eq!(kernels, 1000);
    let mut flat = plan.program().clone();
    flat.body = unrolled(&flat.body);
    let flat = Plan::new(flat, &ScheduleOptions::default()).unwrap();
    let want = bits(&flat.reference().unwrap());
    assert_eq!(bits(&plan.reference().unwrap()), want);
    let run = plan.run(&common::host(1, None)).unwrap();
    assert_eq!(bits(&run.buffers), want);
}

/// `target data "d" map(tofrom: x) { taskgraph "tg" repeat 3 { target "k"; taskwait } }`
/// between a host task before and one after.
fn small(repeat: u32) -> Program {
    let mut p = ProgramBuilder::new("small");
    let x = p.buffer("x", ElemType::F32, 8, Init::Iota);
    p.host_task("pre", &[], &[x.into()]);
    let maps = vec![p.map(MapType::ToFrom, x)];
    p.target_data("d", maps, |p| {
        p.taskgraph("tg", repeat, |p| {
            p.target("k", "scale").num(2.0).arg(x);
            p.taskwait();
        });
    });
    p.host_task("post", &[x.into()], &[]);
    p.build()
}

#[test]
fn op_ranges_of_each_execution_are_exact() {
    let g = lower(&small(3)).unwrap();
    let names: Vec<String> = g
        .op_ids()
        .map(|i| format!("{} {}", g.describe(i), g.region_of(i).name))
        .collect();
    assert_eq!(
        names,
        [
            "host pre",
            "alloc x[0:8] 32 B d",
            "h2d x[0:8] 32 B d",
            "kernel scale k",
            "taskwait taskwait",
            "kernel scale k@1",
            "taskwait taskwait@1",
            "kernel scale k@2",
            "taskwait taskwait@2",
            "d2h x[0:8] 32 B d end",
            "free x[0:8] 32 B d end",
            "host post",
            "end end",
        ]
    );
    assert_eq!(g.taskgraphs.len(), 1);
    assert_eq!(g.taskgraphs[0].name, "tg");
    assert_eq!(g.taskgraphs[0].iterations, [3..5, 5..7, 7..9]);
    // Every op of execution k is in a region of execution k, and no other op is.
    for (k, range) in g.taskgraphs[0].iterations.iter().enumerate() {
        for i in range.clone() {
            let name = &g.region_of(OpId(i)).name;
            let suffix = name.rsplit_once('@').map(|(_, s)| s.to_string());
            let want = (k > 0).then(|| k.to_string());
            assert_eq!(suffix, want, "op #{i} in region {name}");
        }
    }
    for i in (0..3).chain(9..13) {
        assert!(!g.region_of(OpId(i)).name.contains('@'));
    }
}

#[test]
fn schedule_and_dot_show_the_execution_names() {
    let plan = Plan::new(small(2), &ScheduleOptions::default()).unwrap();
    let text = plan.schedule().to_string();
    for want in [
        "region \"k\"",
        "region \"k@1\"",
        "region \"taskwait@1\"",
        "region \"d end\"",
    ] {
        assert!(text.contains(want), "{want} not in\n{text}");
    }
    let dot = plan.to_dot();
    assert!(dot.contains("k@1"), "{dot}");
    assert!(dot.contains("taskwait@1"), "{dot}");
}

#[test]
fn builder_repeat_zero_is_refused_by_name() {
    let e = lower(&small(0)).unwrap_err().to_string();
    assert_eq!(
        e,
        "program \"small\": builder misuse: taskgraph \"tg\" has repeat = 0 (it must \
         execute at least once)"
    );
    // A program edited by hand, bypassing the builder: the lowering refuses it too.
    let mut p = small(1);
    let Construct::TargetData(d) = &mut p.body[1] else {
        panic!("{:?}", p.body[1]);
    };
    let Construct::Taskgraph(t) = &mut d.body[0] else {
        panic!("{:?}", d.body[0]);
    };
    t.repeat = 0;
    assert_eq!(
        lower(&p).unwrap_err().to_string(),
        "taskgraph \"tg\": repeat = 0: a taskgraph executes at least once"
    );
}

#[test]
fn a_nested_taskgraph_is_refused_by_the_lowering() {
    let mut p = ProgramBuilder::new("nest");
    let x = p.buffer("x", ElemType::F32, 8, Init::Iota);
    p.taskgraph("outer", 2, |p| {
        p.taskgraph("inner", 2, |p| {
            p.target("k", "scale").num(2.0).arg(x);
        });
    });
    assert_eq!(
        lower(&p.build()).unwrap_err().to_string(),
        "taskgraph \"inner\": nested taskgraph is not supported (it is inside taskgraph \
         \"outer\")"
    );
}

#[test]
fn an_error_in_a_later_execution_names_the_execution() {
    // Execution 0 deletes x, so execution 1's `present` map fails.
    let mut p = ProgramBuilder::new("late");
    let x = p.buffer("x", ElemType::F32, 8, Init::Iota);
    let enter = vec![p.map(MapType::To, x)];
    p.enter_data("in", enter);
    p.taskgraph("tg", 3, |p| {
        let m = p.map(MapType::To, x).present();
        p.target("k", "scale").num(2.0).arg(x).map_item(m);
        let del = vec![p.map(MapType::Delete, x)];
        p.exit_data("rm", del);
    });
    let e = lower(&p.build()).unwrap_err().to_string();
    assert_eq!(
        e,
        "region \"k@1\": map(present) of x[0:8] but x[0:8] is not present on device 0"
    );
}

#[test]
fn after_inside_names_the_same_execution_and_after_the_taskgraph_follows_it_all() {
    // Through a graph file: the builder's host tasks take no `after`.
    let text = r#"name = "after"
[[buffer]]
name = "x"
type = "f32"
len = 8
[[buffer]]
name = "y"
type = "f32"
len = 8
[[body]]
taskgraph = "tg"
repeat = 2
[[body.body]]
host = "hx"
writes = ["x"]
after = ["hy"]
[[body.body]]
host = "hy"
writes = ["y"]
[[body]]
host = "last"
after = ["tg"]
"#;
    let prog = parse(&SourceFile::new("after.toml", text)).unwrap();
    let g = lower(&prog).unwrap();
    let name = |i: u32| g.region_of(OpId(i)).name.clone();
    // Reordered by `after`: hy, hx, hy@1, hx@1, last, end.
    assert_eq!(
        (0..6).map(name).collect::<Vec<_>>(),
        ["hy", "hx", "hy@1", "hx@1", "last", "end"]
    );
    assert_eq!(g.taskgraphs[0].iterations, [0..2, 2..4]);
    // hx follows hy of its own execution (and hx@1 the hx before it: both write x);
    // `last` follows the ops of the taskgraph that no op of it follows: here hx@1 only.
    assert_eq!(g.preds(OpId(1)), [OpId(0)]);
    assert_eq!(g.preds(OpId(2)), [OpId(0)]);
    assert_eq!(g.preds(OpId(3)), [OpId(1), OpId(2)]);
    let last: Vec<OpId> = g.preds(OpId(4)).to_vec();
    assert_eq!(last, [OpId(3)]);
}

#[test]
fn taskgraphs_round_trip_through_graph_files() {
    let p = small(4);
    let text = to_toml(&p);
    assert!(text.contains("taskgraph = \"tg\"\nrepeat = 4\n"), "{text}");
    assert!(
        text.contains("[[body.body.body]]\ntarget = \"k\""),
        "{text}"
    );
    let back = parse(&SourceFile::new("g.toml", &text)).unwrap();
    assert!(offload_sched::file::same_program(&p, &back), "{text}");
    let (src, prog) = offload_sched::file::load(common::graph_path("jacobi_taskgraph.toml"))
        .unwrap_or_else(|e| panic!("{}", e.render()));
    let again = parse(&SourceFile::new(&src.path, to_toml(&prog))).unwrap();
    assert!(offload_sched::file::same_program(&prog, &again));
    let Construct::TargetData(d) = &prog.body[0] else {
        panic!()
    };
    assert!(matches!(
        &d.body[0],
        Construct::Taskgraph(Taskgraph { repeat: 500, .. })
    ));
}

// ----- graph-file errors -------------------------------------------------------------

const HEAD: &str = r#"name = "p"

[[buffer]]
name = "x"
type = "f32"
len = 16
"#;

/// Asserts that `body` (after [`HEAD`]) fails with `kind` and `message` at `needle`.
fn file_error(body: &str, kind: ErrorKind, message: &str, needle: &str) -> FileError {
    let text = format!("{HEAD}{body}");
    let e = match parse(&SourceFile::new("g.toml", &text)) {
        Ok(p) => panic!("expected an error, parsed {p:?}"),
        Err(e) => e,
    };
    assert_eq!(e.message(), message, "\n{}", e.render());
    assert_eq!(e.kind(), kind, "\n{}", e.render());
    let at = text
        .find(needle)
        .unwrap_or_else(|| panic!("`{needle}` not in text"));
    let line = text[..at].matches('\n').count() + 1;
    let col = at - text[..at].rfind('\n').map_or(0, |i| i + 1) + 1;
    assert_eq!(
        e.location(),
        Some(("g.toml".into(), line, col)),
        "\n{}",
        e.render()
    );
    e
}

fn tg(repeat: &str) -> String {
    format!(
        "\n[[body]]\ntaskgraph = \"tg\"\n{repeat}\n[[body.body]]\ntarget = \"k\"\n\
         kernel = \"scale\"\nargs = [2.0, \"x\"]\n"
    )
}

#[test]
fn repeat_must_be_an_integer_from_1() {
    for (v, found) in [("0", "0"), ("-3", "-3"), ("4294967296", "4294967296")] {
        file_error(
            &tg(&format!("repeat = {v}")),
            ErrorKind::BadValue,
            &format!(
                "`repeat` of taskgraph \"tg\" must be an integer from 1 to 4294967295, found {found}"
            ),
            &format!("{v}\n"),
        );
    }
    for (v, ty) in [("1.5", "a float"), ("\"2\"", "a string")] {
        file_error(
            &tg(&format!("repeat = {v}")),
            ErrorKind::BadValue,
            &format!("`repeat` of taskgraph \"tg\" must be an integer, found {ty}"),
            &format!("{v}\n"),
        );
    }
    // Default 1.
    let p = parse(&SourceFile::new("g.toml", format!("{HEAD}{}", tg("")))).unwrap();
    assert!(matches!(&p.body[0], Construct::Taskgraph(t) if t.repeat == 1));
}

#[test]
fn unknown_keys_of_a_taskgraph_suggest_the_right_one() {
    let e = file_error(
        &tg("repeats = 3"),
        ErrorKind::UnknownKey,
        "unknown key `repeats` in taskgraph \"tg\" (allowed: taskgraph, repeat, body)",
        "repeats",
    );
    assert_eq!(e.help_text(), Some("did you mean `repeat`?"));
    // `map` belongs to target_data, not to a taskgraph.
    file_error(
        &tg("map = [\"to: x\"]"),
        ErrorKind::UnknownKey,
        "unknown key `map` in taskgraph \"tg\" (allowed: taskgraph, repeat, body)",
        "map",
    );
    // A misspelt kind.
    let e = file_error(
        "\n[[body]]\ntaskgrap = \"tg\"\n",
        ErrorKind::UnknownKey,
        "unknown construct kind `taskgrap` in a body entry (kinds: target, target_data, \
         taskgraph, enter_data, exit_data, update, host, taskwait)",
        "taskgrap",
    );
    assert_eq!(e.help_text(), Some("did you mean `taskgraph`?"));
}

#[test]
fn a_nested_taskgraph_is_refused_at_its_name() {
    let body = "\n[[body]]\ntaskgraph = \"outer\"\nrepeat = 2\n[[body.body]]\n\
                target_data = \"d\"\nmap = [\"tofrom: x\"]\n[[body.body.body]]\n\
                taskgraph = \"inner\"\n[[body.body.body.body]]\ntarget = \"k\"\n\
                kernel = \"scale\"\nargs = [2.0, \"x\"]\n";
    file_error(
        body,
        ErrorKind::BadValue,
        "nested taskgraph is not supported: taskgraph \"inner\" is inside taskgraph \"outer\"",
        "\"inner\"",
    );
    // A taskgraph inside target data inside nothing else is fine, and so is a target data
    // inside a taskgraph.
    let ok = "\n[[body]]\ntarget_data = \"d\"\nmap = [\"tofrom: x\"]\n[[body.body]]\n\
              taskgraph = \"t\"\n[[body.body.body]]\ntarget_data = \"e\"\n\
              map = [\"tofrom: x\"]\n[[body.body.body.body]]\ntarget = \"k\"\n\
              kernel = \"scale\"\nargs = [2.0, \"x\"]\n";
    parse(&SourceFile::new("g.toml", format!("{HEAD}{ok}"))).unwrap();
}

#[test]
fn a_repeat_that_unrolls_past_the_limit_is_refused_before_lowering() {
    let text = format!("{HEAD}{}", tg("repeat = 4000000000"));
    let src = SourceFile::new("g.toml", &text);
    let e = Plan::from_source(src, &ScheduleOptions::default()).unwrap_err();
    let msg = e.render();
    assert!(
        msg.contains(
            "taskgraph \"tg\": repeat = 4000000000 unrolls its body to more than 16777216 \
             constructs"
        ),
        "{msg}"
    );
    // Located at the taskgraph's name.
    assert!(msg.contains("g.toml:9:13"), "{msg}");
    // A program built in Rust is refused the same way.
    let mut p = small(1);
    let Construct::TargetData(d) = &mut p.body[1] else {
        panic!()
    };
    let Construct::Taskgraph(t) = &mut d.body[0] else {
        panic!()
    };
    t.repeat = u32::MAX;
    let e = lower(&p).unwrap_err().to_string();
    assert_eq!(
        e,
        "taskgraph \"tg\": repeat = 4294967295 unrolls its body to more than 16777216 \
         constructs"
    );
}
