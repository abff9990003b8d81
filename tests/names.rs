//! Construct names (issue 25 point 10): no two regions are shown by one name, whether
//! the program comes from a graph file or the Rust builder (duplicates, a construct
//! named like a taskgraph execution `r@1` or a `target data`'s end `d end`: refused,
//! located), and names with control characters are shown escaped in every message and
//! output, so they cannot drive a terminal.

use offload_sched::file::SourceFile;
use offload_sched::lower::{lower, LowerError};
use offload_sched::model::{ElemType, Init, MapType, ProgramBuilder};
use offload_sched::schedule::ScheduleOptions;
use offload_sched::{Error, Plan};

fn refused(text: &str) -> String {
    let src = SourceFile::new("g.toml", text);
    match Plan::from_source(src, &ScheduleOptions::default()) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.render(),
    }
}

const HEAD: &str =
    "name = \"n\"\n[[buffer]]\nname = \"x\"\ntype = \"i32\"\nlen = 4\ninit = \"iota\"\n";

fn target(name: &str) -> String {
    format!(
        "[[body]]\ntarget = \"{name}\"\nkernel = \"increment\"\nargs = [\"x\"]\nmap = [\"tofrom: x\"]\n"
    )
}

#[test]
fn a_construct_named_like_a_taskgraph_execution_is_refused_located() {
    let tg = "[[body]]\ntaskgraph = \"tg\"\nrepeat = 2\n[[body.body]]\ntarget = \"r\"\n\
              kernel = \"increment\"\nargs = [\"x\"]\nmap = [\"tofrom: x\"]\n";
    // After the taskgraph, and before it.
    for text in [
        format!("{HEAD}{tg}{}", target("r@1")),
        format!("{HEAD}{}{tg}", target("r@1")),
    ] {
        let e = refused(&text);
        let line = text.lines().position(|l| l == "target = \"r@1\"").unwrap() + 1;
        assert!(
            e.starts_with(&format!("g.toml:{line}:10: error: construct \"r@1\": target \"r@1\" is shown as \"r@1\", the name of execution 1 of \"r\" in taskgraph \"tg\"")),
            "{e}"
        );
    }
    // repeat = 2 has no execution 2: `r@2` is a name of its own.
    let ok = format!("{HEAD}{tg}{}", target("r@2"));
    Plan::from_source(SourceFile::new("g.toml", ok), &ScheduleOptions::default()).unwrap();

    // The end of a target data's execution: `d@1 end`.
    let td = "[[body]]\ntaskgraph = \"tg\"\nrepeat = 3\n[[body.body]]\ntarget_data = \"d\"\n\
              map = [\"to: x\"]\n[[body.body.body]]\ntarget = \"k\"\nkernel = \"increment\"\n\
              args = [\"x\"]\nmap = [\"present, alloc: x\"]\n";
    let e = refused(&format!("{HEAD}{td}{}", target("d@2 end")));
    assert!(
        e.contains("the name of the end of execution 2 of target data \"d\" in taskgraph \"tg\""),
        "{e}"
    );
}

#[test]
fn the_builder_refuses_duplicate_names_as_graph_files_do() {
    let mut p = ProgramBuilder::new("dup");
    let x = p.buffer("x", ElemType::I32, 4, Init::Iota);
    p.target("k", "increment").arg(x).map(MapType::ToFrom, x);
    p.target("k", "increment").arg(x).map(MapType::ToFrom, x);
    let e = lower(&p.build()).unwrap_err();
    assert!(
        matches!(e, LowerError::NameClash { ref name, .. } if name == "k"),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "construct \"k\": two constructs are named \"k\""
    );
    // The graph file: refused when read.
    let e = refused(&format!("{HEAD}{}{}", target("k"), target("k")));
    assert!(e.contains("duplicate construct name \"k\""), "{e}");

    // A taskgraph body and a construct outside it, a host task and a target, a target
    // data's end and a construct named like it.
    let mut p = ProgramBuilder::new("tg");
    let x = p.buffer("x", ElemType::I32, 4, Init::Iota);
    p.taskgraph("t", 2, |p| {
        p.target("step", "increment").arg(x).map(MapType::ToFrom, x);
    });
    p.target("step@1", "increment")
        .arg(x)
        .map(MapType::ToFrom, x);
    let e = lower(&p.build()).unwrap_err().to_string();
    assert!(
        e.contains("execution 1 of \"step\" in taskgraph \"t\""),
        "{e}"
    );

    let mut p = ProgramBuilder::new("end");
    let x = p.buffer("x", ElemType::I32, 4, Init::Iota);
    let maps = vec![p.map(MapType::To, x)];
    p.target_data("d", maps, |_| {});
    p.host_task("d end", &[x.into()], &[]);
    let e = lower(&p.build()).unwrap_err().to_string();
    assert_eq!(
        e,
        "construct \"d end\": the end of target data \"d\" and host \"d end\" are both shown as \"d end\""
    );
}

#[test]
fn control_characters_in_names_are_shown_escaped() {
    let esc = "\u{1b}[2J\u{7}\u{9b}";
    let mut p = ProgramBuilder::new(&format!("p{esc}"));
    let x = p.buffer("x", ElemType::I32, 4, Init::Iota);
    p.target(&format!("k{esc}"), "increment")
        .arg(x)
        .map(MapType::ToFrom, x);
    let plan = Plan::new(p.build(), &ScheduleOptions::default()).unwrap();
    let raw = |t: &str| t.chars().any(|c| c.is_control() && c != '\n' && c != '\t');
    let text = plan.to_string();
    assert!(!raw(&text), "{text:?}");
    assert!(
        text.contains("region \"k\\u{1b}[2J\\u{7}\\u{9b}\""),
        "{text}"
    );
    for view in offload_sched::dot::DotView::ALL {
        let dot = plan.to_dot_view(view);
        assert!(!raw(&dot), "{view}: {dot:?}");
    }

    // Errors: an unknown kernel, from the builder and from a graph file.
    let mut p = ProgramBuilder::new("e");
    let x = p.buffer("x", ElemType::I32, 4, Init::Iota);
    p.target(&format!("r{esc}"), &format!("no{esc}")).arg(x);
    let program = p.build();
    let e = lower(&program).unwrap_err();
    assert!(!raw(&e.to_string()), "{e}");
    assert!(e.to_string().starts_with("region \"r\\u{1b}[2J"), "{e}");
    let err = Plan::new(program, &ScheduleOptions::default()).unwrap_err();
    assert!(matches!(err, Error::Lower { .. }));
    assert!(!raw(&err.render()) && !raw(&err.to_string()), "{err}");

    let text = format!(
        "{HEAD}[[body]]\ntarget = \"t\\u001b[31m\"\nkernel = \"nope\\u001b]0;x\\u0007\"\nargs = [\"x\"]\n"
    );
    let e = refused(&text);
    assert!(!raw(&e), "{e:?}");
    assert!(e.contains("unknown kernel `nope\\u{1b}]0;x\\u{7}`"), "{e}");
}
