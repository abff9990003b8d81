//! Loader errors, located (see `file_errors.rs`): the nesting limit at its boundary, and
//! unknown names with the closest suggested and the candidates listed.

mod common;

use common::file_errors::*;
use offload_sched::file::{parse, ErrorKind, SourceFile};

/// A graph of `levels` nested `target_data` ("d1" outermost), the innermost holding a
/// region.
fn nested(levels: usize) -> String {
    let mut t = String::from("name = \"p\"\n\n[[buffer]]\nname = \"x\"\ntype = \"f32\"\nlen = 4\n");
    let mut key = String::from("body");
    for i in 1..=levels {
        t += &format!("\n[[{key}]]\ntarget_data = \"d{i}\"\nmap = [\"tofrom: x\"]\n");
        key += ".body";
    }
    t += &format!("\n[[{key}]]\ntarget = \"k\"\nkernel = \"increment\"\nargs = [\"x\"]\n");
    t
}

#[test]
fn nesting_limit_is_exact_at_the_boundary() {
    use offload_sched::file::MAX_DEPTH;
    assert_eq!(MAX_DEPTH, 64);
    // The deepest accepted: 64 levels, which also lower (the library's limit agrees).
    let text = nested(MAX_DEPTH);
    let p = parse(&SourceFile::new("g.toml", &text)).unwrap();
    offload_sched::lower::lower(&p).unwrap();
    // The first refused: 65 levels, the error at the 65th.
    let text = nested(MAX_DEPTH + 1);
    check(
        &text,
        ErrorKind::BadValue,
        "target_data \"d65\" is nested 65 deep, at most 64",
        "\"d65\"",
        0,
    );
    // The library's limit, on programs built in Rust: 64 levels lower, 65 do not.
    use offload_sched::model::{Construct, ProgramBuilder, TargetData};
    for (levels, ok) in [(MAX_DEPTH, true), (MAX_DEPTH + 1, false)] {
        let mut p = ProgramBuilder::new("deep").build();
        for i in (1..=levels).rev() {
            p.body = vec![Construct::TargetData(TargetData {
                name: format!("d{i}"),
                maps: Vec::new(),
                device: 0,
                body: std::mem::take(&mut p.body),
                span: None,
            })];
        }
        match offload_sched::lower::lower(&p) {
            Ok(_) => assert!(ok, "{levels} levels lowered"),
            Err(e) => {
                assert!(!ok, "{levels} levels: {e}");
                assert_eq!(
                    e.to_string(),
                    "program \"deep\": target data \"d65\" is nested 65 deep, at most 64"
                );
            }
        }
    }
}
#[test]
fn unknown_names_suggest_the_closest_and_list_the_candidates() {
    // Keys, per table.
    check_help(
        &with("nowiat = true\n"),
        ErrorKind::UnknownKey,
        "unknown key `nowiat` in target \"k\" (allowed: target, kernel, args, map, nowait, depend, device, launch, priority, after, rank)",
        "nowiat",
        Some("did you mean `nowait`?"),
    );
    check_help(
        &BASE.replacen("len = 16", "lenght = 16", 1),
        ErrorKind::UnknownKey,
        "unknown key `lenght` in [[buffer]] (allowed: name, type, len, init, rank)",
        "lenght",
        Some("did you mean `len`?"),
    );
    check_help(
        &BASE.replacen("len = 16", "len = 16\nsize = 4", 1),
        ErrorKind::UnknownKey,
        "unknown key `size` in [[buffer]] (allowed: name, type, len, init, rank)",
        "size",
        None,
    );
    check_help(
        &BASE.replacen("len = 16", "len = 16\ninit = { fil = 2.0 }", 1),
        ErrorKind::UnknownKey,
        "unknown key `fil` in `init` of buffer `x` (allowed: fill, random)",
        "fil ",
        Some("did you mean `fill`?"),
    );
    // Construct kinds.
    check_help(
        &BASE.replace("target = \"k\"", "targt = \"k\""),
        ErrorKind::UnknownKey,
        "unknown construct kind `targt` in a body entry (kinds: target, target_data, taskgraph, enter_data, exit_data, update, host, taskwait)",
        "targt",
        Some("did you mean `target`?"),
    );
    check_help(
        &with("[[body]]\ntaskwiat = \"\"\n"),
        ErrorKind::UnknownKey,
        "unknown construct kind `taskwiat` in a body entry (kinds: target, target_data, taskgraph, enter_data, exit_data, update, host, taskwait)",
        "taskwiat",
        Some("did you mean `taskwait`?"),
    );
    // Kernels: built-ins and the file's own.
    let declared = BASE.replace(
        "[[body]]",
        "[[kernel]]\nname = \"my_scale\"\nparams = [\"inout f32*\"]\nlibrary = \"libk.so\"\n\n[[body]]",
    );
    check_help(
        &declared.replace("kernel = \"saxpy\"", "kernel = \"my_scael\""),
        ErrorKind::UnknownName,
        "unknown kernel `my_scael` in target \"k\"",
        "\"my_scael\"",
        Some(
            "did you mean `my_scale`? (kernels: my_scale, scale, add_scalar, matmul_block, \
             increment and 13 more); declare others in [[kernel]]",
        ),
    );
    check_help(
        &BASE.replace("kernel = \"saxpy\"", "kernel = \"zzz\""),
        ErrorKind::UnknownName,
        "unknown kernel `zzz` in target \"k\"",
        "\"zzz\"",
        Some("kernels: saxpy, scale, add, triad, copy and 12 more; declare others in [[kernel]]"),
    );
    // Buffers: the declared ones, the closest first when there are many.
    check_help(
        &BASE.replace("\"to: x\"", "\"to: xx\""),
        ErrorKind::UnknownName,
        "unknown buffer `xx` in map item of target \"k\"",
        "xx\"",
        Some("did you mean `x`? (declared buffers: x, y)"),
    );
    let mut many = String::from("name = \"p\"\n");
    for i in 0..20 {
        many += &format!("[[buffer]]\nname = \"part{i}\"\ntype = \"f32\"\nlen = 4\n");
    }
    many += "[[body]]\ntarget = \"k\"\nkernel = \"increment\"\nargs = [\"prat7\"]\n";
    check_help(
        &many,
        ErrorKind::UnknownName,
        "unknown buffer `prat7` in arguments of target \"k\"",
        "prat7",
        Some(
            "did you mean `part7`? (declared buffers: part7, part17, part0, part1, part2 \
             and 15 more)",
        ),
    );
    // Map types and modifiers, depend types.
    check_help(
        &BASE.replace("\"tofrom: y\"", "\"tofro: y\""),
        ErrorKind::Clause,
        "unknown map type or modifier `tofro` in map item of target \"k\" (types: to, from, tofrom, alloc, release, delete; modifiers: always, present, close)",
        "tofro",
        Some("did you mean `tofrom`?"),
    );
    check_help(
        &BASE.replace("\"to: x\"", "\"allways, to: x\""),
        ErrorKind::Clause,
        "unknown map type or modifier `allways` in map item of target \"k\" (types: to, from, tofrom, alloc, release, delete; modifiers: always, present, close)",
        "allways",
        Some("did you mean `always`?"),
    );
    check_help(
        &with("depend = [\"inot: x\"]\n"),
        ErrorKind::Clause,
        "unknown depend type `inot` in depend item of target \"k\" (expected in, out or inout)",
        "inot",
        Some("did you mean `inout`?"),
    );
    // Init kinds and element types.
    check_help(
        &BASE.replacen("len = 16", "len = 16\ninit = \"zero\"", 1),
        ErrorKind::BadValue,
        "unknown `init` \"zero\" for buffer `x` (expected \"zeros\", \"iota\", { fill = NUMBER } or { random = SEED })",
        "\"zero\"",
        Some("did you mean \"zeros\"?"),
    );
    check_help(
        &BASE.replacen("len = 16", "len = 16\ninit = \"fil\"", 1),
        ErrorKind::BadValue,
        "unknown `init` \"fil\" for buffer `x` (expected \"zeros\", \"iota\", { fill = NUMBER } or { random = SEED })",
        "\"fil\"",
        Some("did you mean { fill = NUMBER }?"),
    );
    check_help(
        &BASE.replacen("type = \"f32\"", "type = \"F32\"", 1),
        ErrorKind::BadValue,
        "unknown element type `F32` for buffer `x` (expected f32, f64, i32, i64 or u8)",
        "\"F32\"",
        Some("did you mean `f32`?"),
    );
    // Construct names in `after`, in file order.
    check_help(
        &with("after = [\"hh\"]\n[[body]]\nhost = \"h\"\n"),
        ErrorKind::UnknownName,
        "`after` of target \"k\" names unknown construct \"hh\"",
        "\"hh\"",
        Some("did you mean `h`? (constructs: k, h)"),
    );
    // The rendering ends with the help line.
    let e = err(&with("nowiat = true\n"));
    assert!(
        e.render().ends_with("\nhelp: did you mean `nowait`?\n"),
        "{}",
        e.render()
    );
}

#[test]
fn an_unknown_kernel_of_a_program_built_in_rust_is_suggested_too() {
    use offload_sched::model::{ElemType, Init, MapType, ProgramBuilder};
    use offload_sched::schedule::ScheduleOptions;
    let mut b = ProgramBuilder::new("prog");
    let x = b.buffer("x", ElemType::F32, 4, Init::Zeros);
    b.target("r0", "incremnt").arg(x).map(MapType::ToFrom, x);
    let e = offload_sched::Plan::new(b.build(), &ScheduleOptions::default()).unwrap_err();
    assert_eq!(
        e.render(),
        "prog: error: region \"r0\": unknown kernel `incremnt`\n\
         help: did you mean `increment`? (kernels: increment, spin, gemm, trsm, scale and \
         12 more)\n"
    );
}

/// `[[body.body]]` under a construct without a body names the two that nest, at the
/// nested table's header.
#[test]
fn a_nested_body_under_a_target_says_which_constructs_nest() {
    let nested = "[[body.body]]\ntarget = \"j\"\nkernel = \"saxpy\"\nargs = [2.0, \"x\", \"y\"]\n";
    let help = Some(
        "move the nested entries up one level (after this one), or put this entry and them \
         in the body of a `target_data` or `taskgraph` entry",
    );
    check_help(
        &with(nested),
        ErrorKind::UnknownKey,
        "target \"k\" cannot hold a nested body ([[body.body]]): only `target_data` and \
         `taskgraph` entries nest constructs; `target`, `enter_data`, `exit_data`, `update`, \
         `host` and `taskwait` entries do not",
        "body]]\ntarget = \"j\"",
        help,
    );
    let t = with(&format!("[[body]]\ntaskwait = \"tw\"\n{nested}"));
    check_help(
        &t,
        ErrorKind::UnknownKey,
        "taskwait cannot hold a nested body ([[body.body]]): only `target_data` and \
         `taskgraph` entries nest constructs; `target`, `enter_data`, `exit_data`, `update`, \
         `host` and `taskwait` entries do not",
        "body]]\ntarget = \"j\"",
        help,
    );
    // Under a target_data it nests.
    let t = format!(
        "{}[[body]]\ntarget_data = \"d\"\nmap = [\"tofrom: y\"]\n{nested}",
        BASE
    );
    assert!(parse(&SourceFile::new("g.toml", &t)).is_ok());
}
