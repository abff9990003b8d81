//! Every loader error: its message and its `line:column` (1-based). The loader is the
//! stage under test, so `file::parse` is called alone.

use offload_sched::file::{parse, ErrorKind, FileError, SourceFile};

const BASE: &str = r#"name = "p"

[[buffer]]
name = "x"
type = "f32"
len = 16

[[buffer]]
name = "y"
type = "f32"
len = 16

[[body]]
target = "k"
kernel = "saxpy"
args = [2.0, "x", "y"]
map = ["to: x", "tofrom: y"]
"#;

fn err(text: &str) -> FileError {
    match parse(&SourceFile::new("g.toml", text)) {
        Ok(p) => panic!("expected an error, parsed {p:?}"),
        Err(e) => e,
    }
}

/// 1-based (line, column) of the `nth` occurrence of `needle` in `text`.
fn pos(text: &str, needle: &str, nth: usize) -> (usize, usize) {
    let at = text
        .match_indices(needle)
        .nth(nth)
        .unwrap_or_else(|| panic!("`{needle}` not in text"))
        .0;
    let line = text[..at].matches('\n').count() + 1;
    let col = at - text[..at].rfind('\n').map(|i| i + 1).unwrap_or(0) + 1;
    (line, col)
}

/// Asserts kind, message, and that the error points at `needle` (its `nth` occurrence).
fn check(text: &str, kind: ErrorKind, message: &str, needle: &str, nth: usize) -> FileError {
    let e = err(text);
    assert_eq!(e.message(), message, "\n{}", e.render());
    assert_eq!(e.kind(), kind, "\n{}", e.render());
    let (line, col) = pos(text, needle, nth);
    assert_eq!(
        e.location(),
        Some(("g.toml".to_string(), line, col)),
        "\n{}",
        e.render()
    );
    e
}

fn with(extra: &str) -> String {
    format!("{BASE}{extra}")
}

#[test]
fn base_parses() {
    assert!(parse(&SourceFile::new("g.toml", BASE)).is_ok());
}

#[test]
fn syntax_error_uses_toml_span() {
    let text = "name = \"p\"\n[[buffer]]\nname = \"x\"\nlen = [1,\n";
    let e = err(text);
    assert_eq!(e.kind(), ErrorKind::Syntax);
    assert!(
        e.message().starts_with("TOML syntax error: "),
        "{}",
        e.message()
    );
    assert_eq!(e.location(), Some(("g.toml".to_string(), 5, 1)));
}

#[test]
fn plain_render_has_position_line_and_caret() {
    let text = BASE.replace("\"tofrom: y\"", "\"tofrom: z\"");
    let e = err(&text);
    assert_eq!(
        e.render(),
        "g.toml:17:26: error: unknown buffer `z` in map item of target \"k\"\n\
         17 | map = [\"to: x\", \"tofrom: z\"]\n   |                          ^\n\
         help: declared buffers: x, y\n"
    );
}

#[test]
fn empty_file_and_missing_body() {
    let e = check(
        "  \n",
        ErrorKind::Missing,
        "graph file is empty: it needs `name`, [[buffer]] and [[body]] entries",
        "  ",
        0,
    );
    assert_eq!(e.location(), Some(("g.toml".to_string(), 1, 1)));
    let text = "name = \"p\"\n";
    let e = err(text);
    assert_eq!(
        e.message(),
        "program \"p\" has no body: add [[body]] entries"
    );
    assert_eq!(e.location(), Some(("g.toml".to_string(), 2, 1)));
    check(
        "name = \"p\"\nbody = []\n",
        ErrorKind::Missing,
        "program \"p\" has an empty body",
        "[]",
        0,
    );
    check(
        "devices = 1\n[[body]]\ntaskwait = \"\"\n",
        ErrorKind::Missing,
        "graph file is missing `name = \"...\"` at the top",
        "devices",
        0,
    );
}

#[test]
fn wrong_value_types() {
    let t = BASE.replacen("len = 16", "len = \"ten\"", 1);
    check(
        &t,
        ErrorKind::BadValue,
        "`len` of buffer `x` must be an integer, found a string",
        "\"ten\"",
        0,
    );
    let t = BASE.replacen("len = 16", "len = -4", 1);
    check(
        &t,
        ErrorKind::BadValue,
        "`len` of buffer `x` must not be negative, found -4",
        "-4",
        0,
    );
    let t = BASE.replacen("len = 16", "len = 16.5", 1);
    check(
        &t,
        ErrorKind::BadValue,
        "`len` of buffer `x` must be an integer, found a float",
        "16.5",
        0,
    );
    let t = BASE.replace("map = [", "nowait = 1\nmap = [");
    check(
        &t,
        ErrorKind::BadValue,
        "`nowait` of target \"k\" must be true or false, found an integer",
        "1\n",
        0,
    );
    let t = BASE.replace("args = [2.0,", "args = [true,");
    check(
        &t,
        ErrorKind::BadValue,
        "arguments of target \"k\" must be numbers or buffer sections (strings), found a boolean",
        "true",
        0,
    );
    let t = with("launch = [0, 256]\n");
    check(
        &t,
        ErrorKind::BadValue,
        "`launch` of target \"k\" must be [teams, threads], two integers from 1 to 4294967295",
        "0, 256",
        0,
    );
    let t = BASE.replace(
        "type = \"f32\"\nlen = 16\n\n[[body]]",
        "type = \"f32\"\nlen = 16\ninit = \"ones\"\n\n[[body]]",
    );
    check(
        &t,
        ErrorKind::BadValue,
        "unknown `init` \"ones\" for buffer `y` (expected \"zeros\", \"iota\", { fill = NUMBER } or { random = SEED })",
        "\"ones\"",
        0,
    );
}

#[test]
fn unknown_element_type() {
    let t = BASE.replacen("type = \"f32\"", "type = \"f16\"", 1);
    check(
        &t,
        ErrorKind::BadValue,
        "unknown element type `f16` for buffer `x` (expected f32, f64, i32, i64 or u8)",
        "\"f16\"",
        0,
    );
}

#[test]
fn absurd_sizes() {
    let t = BASE.replacen("len = 16", "len = 17179869185", 1);
    check(
        &t,
        ErrorKind::TooLarge,
        "buffer `x` is too large: 17179869185 × 4 bytes is over the 64 GiB limit for one buffer",
        "17179869185",
        0,
    );
    let t = BASE.replacen("len = 16", "len = 9223372036854775807", 1);
    assert_eq!(err(&t).kind(), ErrorKind::TooLarge);
    // Five buffers of 60 GiB: the fifth crosses 256 GiB.
    let mut t = String::from("name = \"p\"\n");
    for i in 0..5 {
        t.push_str(&format!(
            "[[buffer]]\nname = \"b{i}\"\ntype = \"u8\"\nlen = 64424509440\n"
        ));
    }
    t.push_str("[[body]]\ntaskwait = \"\"\n");
    check(
        &t,
        ErrorKind::TooLarge,
        "buffer `b4` brings the buffers to 322122547200 bytes, over the 256 GiB limit for all buffers",
        "64424509440",
        4,
    );
}

#[test]
fn unknown_buffers() {
    let t = BASE.replace("\"to: x\"", "\"to: q\"");
    check(
        &t,
        ErrorKind::UnknownName,
        "unknown buffer `q` in map item of target \"k\"",
        "q\"",
        0,
    );
    let t = BASE.replace("[2.0, \"x\"", "[2.0, \"q[0:2]\"");
    check(
        &t,
        ErrorKind::UnknownName,
        "unknown buffer `q` in arguments of target \"k\"",
        "q[",
        0,
    );
    let t = with("depend = [\"in: w\"]\n");
    check(
        &t,
        ErrorKind::UnknownName,
        "unknown buffer `w` in depend item of target \"k\"",
        "w\"",
        0,
    );
    let t = with("[[body]]\nhost = \"h\"\nreads = [\"y\", \"v\"]\n");
    check(
        &t,
        ErrorKind::UnknownName,
        "unknown buffer `v` in `reads` of host \"h\"",
        "v\"",
        0,
    );
}

#[test]
fn bad_sections() {
    let t = BASE.replace("\"tofrom: y\"", "\"tofrom: y[0;4]\"");
    check(
        &t,
        ErrorKind::Section,
        "bad section `y[0;4]` in map item of target \"k\": missing `:` between lower bound and length (expected `name` or `name[lo:len]`)",
        "y[0;4]",
        0,
    );
    let t = BASE.replace("\"tofrom: y\"", "\"tofrom: y[8:9]\"");
    check(
        &t,
        ErrorKind::Section,
        "section `y[8:9]` in map item of target \"k\" is out of bounds of buffer `y` (16 elements)",
        "y[8:9]",
        0,
    );
    let t = BASE.replace("\"tofrom: y\"", "\"tofrom: y[1:18446744073709551615]\"");
    let e = err(&t);
    assert_eq!(e.kind(), ErrorKind::Section);
    assert!(e.message().contains("out of bounds"), "{}", e.message());
}

#[test]
fn map_types_and_modifiers() {
    let t = BASE.replace("\"to: x\"", "\"always, sometimes, to: x\"");
    check(
        &t,
        ErrorKind::Clause,
        "unknown map type or modifier `sometimes` in map item of target \"k\" (types: to, from, tofrom, alloc, release, delete; modifiers: always, present, close)",
        "sometimes",
        0,
    );
    let t = BASE.replace("\"to: x\"", "\"delete: x\"");
    check(
        &t,
        ErrorKind::Clause,
        "map type `delete` in map item of target \"k\" is only allowed on exit data",
        "delete",
        0,
    );
    let t = with("[[body]]\nupdate = \"u\"\nmap = [\"to: x\", \"tofrom: y\"]\n");
    check(
        &t,
        ErrorKind::Clause,
        "map type `tofrom` in update motion of update \"u\" is not a motion: update items are `to` or `from`",
        "tofrom",
        1,
    );
    let t = with("[[body]]\nupdate = \"u\"\nmap = [\"y\"]\n");
    check(
        &t,
        ErrorKind::Clause,
        "update motion `y` in update motion of update \"u\" needs `to:` or `from:`",
        "y\"]",
        2,
    );
    let t = with("depend = [\"inoutset: x\"]\n");
    check(
        &t,
        ErrorKind::Clause,
        "unknown depend type `inoutset` in depend item of target \"k\" (expected in, out or inout)",
        "inoutset",
        0,
    );
}

#[test]
fn duplicates() {
    let t = BASE.replacen("name = \"y\"", "name = \"x\"", 1);
    check(
        &t,
        ErrorKind::Duplicate,
        "duplicate buffer `x` (first declared on line 4)",
        "\"x\"",
        1,
    );
    let t = with("[[body]]\ntarget = \"k\"\nkernel = \"increment\"\nargs = [\"x\"]\n");
    check(
        &t,
        ErrorKind::Duplicate,
        "duplicate construct name \"k\" (first used on line 14)",
        "\"k\"",
        1,
    );
}

#[test]
fn kernels_and_arguments() {
    let t = BASE.replace("kernel = \"saxpy\"", "kernel = \"saxpyy\"");
    let e = check(
        &t,
        ErrorKind::UnknownName,
        "unknown kernel `saxpyy` in target \"k\"",
        "\"saxpyy\"",
        0,
    );
    assert_eq!(
        e.help_text(),
        Some(
            "did you mean `saxpy`? (kernels: saxpy, copy, spin, scale, add and 12 more); \
             declare others in [[kernel]]"
        )
    );
    let t = BASE.replace("args = [2.0, \"x\", \"y\"]", "args = [2.0, \"x\"]");
    check(
        &t,
        ErrorKind::Arguments,
        "kernel `saxpy` takes 3 arguments (a: T, x: in T*, y: inout T*) but target \"k\" gives 2",
        "[2.0",
        0,
    );
    let t = BASE.replace("args = [2.0, \"x\", \"y\"]", "args = [\"x\", \"x\", \"y\"]");
    check(
        &t,
        ErrorKind::Arguments,
        "argument 1 (`a: T`) of kernel `saxpy` in target \"k\" must be a number, found buffer section `x[0:16]`",
        "\"x\"",
        1,
    );
    let t = BASE.replace("args = [2.0, \"x\", \"y\"]", "args = [2.0, 1.0, \"y\"]");
    check(
        &t,
        ErrorKind::Arguments,
        "argument 2 (`x: in T*`) of kernel `saxpy` in target \"k\" must be a buffer section, found the number 1",
        "1.0",
        0,
    );
    // Generic T must agree.
    let t = BASE.replacen(
        "type = \"f32\"\nlen = 16\n\n[[body]]",
        "type = \"i32\"\nlen = 16\n\n[[body]]",
        1,
    );
    check(
        &t,
        ErrorKind::Arguments,
        "argument 3 (`y: inout T*`) of kernel `saxpy` in target \"k\": buffer `y` is i32 but T is f32 (from buffer `x`)",
        "\"y\"]",
        0,
    );
    // Concrete parameter types.
    let t = format!(
        "{}[[kernel]]\nname = \"mine\"\nparams = [\"in f64*\"]\nlibrary = \"libmine.so\"\n\n[[body]]\ntarget = \"m\"\nkernel = \"mine\"\nargs = [\"x\"]\n",
        BASE
    );
    check(
        &t,
        ErrorKind::Arguments,
        "argument 1 (`arg0: in f64*`) of kernel `mine` in target \"m\" needs f64 elements but buffer `x` is f32",
        "\"x\"]\n",
        0,
    );
    // Integer scalars.
    let t = with("[[body]]\ntarget = \"j\"\nkernel = \"jacobi5\"\nargs = [4.5, 4, \"x\", \"y\"]\n");
    check(
        &t,
        ErrorKind::Arguments,
        "argument 1 (`nx: i64`) of kernel `jacobi5` in target \"j\" is 4.5, not a valid i64 value",
        "4.5",
        0,
    );
    let t = with("[[kernel]]\nname = \"bad\"\nparams = [\"sideways f32*\"]\n");
    let e = err(&t);
    assert_eq!(e.kind(), ErrorKind::BadValue);
    assert!(
        e.message()
            .starts_with("bad parameter \"sideways f32*\" of kernel `bad`"),
        "{}",
        e.message()
    );
    // A user kernel must name its code for at least one plugin.
    let t = with("[[kernel]]\nname = \"mine\"\nparams = [\"in f32*\"]\n");
    check(
        &t,
        ErrorKind::BadValue,
        "kernel `mine` names no code: give `library` (a shared library for the host plugin) and/or `cuda` (a .cu or .ptx file for the CUDA plugin)",
        "\"mine\"",
        0,
    );
    let t = with("[[body]]\nhost = \"h\"\nargs = [\"x\"]\n");
    check(
        &t,
        ErrorKind::Arguments,
        "host \"h\" has `args` but no `kernel`",
        "[\"x\"]\n",
        0,
    );
}

#[test]
fn devices() {
    let t = with("device = 1\n");
    check(
        &t,
        ErrorKind::Device,
        "device 1 of target \"k\" does not exist (the program has 1 device; set `devices` at the top)",
        "1\n",
        0,
    );
    let t = format!("devices = 2\n{}", with("device = 1\n"));
    assert!(parse(&SourceFile::new("g.toml", t)).is_ok());
    let t = BASE.replace("name = \"p\"\n", "name = \"p\"\ndevices = 0\n");
    check(
        &t,
        ErrorKind::BadValue,
        "`devices` must be between 1 and 1024, found 0",
        "0\n",
        0,
    );
}

#[test]
fn kind_keys() {
    let t = with("[[body]]\nmap = [\"to: x\"]\n");
    check(
        &t,
        ErrorKind::Missing,
        "body entry has no construct kind: give exactly one of target, target_data, taskgraph, enter_data, exit_data, update, host, taskwait",
        "[[body]]",
        1,
    );
    let t = with("host = \"h\"\n");
    check(
        &t,
        ErrorKind::BadValue,
        "body entry has two construct kinds, `target` and `host`: give exactly one",
        "host",
        0,
    );
}

#[test]
fn unknown_keys() {
    let t = with("nowiat = true\n");
    check(
        &t,
        ErrorKind::UnknownKey,
        "unknown key `nowiat` in target \"k\" (allowed: target, kernel, args, map, nowait, depend, device, launch, priority, after, rank)",
        "nowiat",
        0,
    );
    let t = BASE.replacen("len = 16", "len = 16\nsize = 4", 1);
    check(
        &t,
        ErrorKind::UnknownKey,
        "unknown key `size` in [[buffer]] (allowed: name, type, len, init, rank)",
        "size",
        0,
    );
    let t = format!("version = 2\n{BASE}");
    check(
        &t,
        ErrorKind::UnknownKey,
        "unknown key `version` in the program (allowed: name, devices, buffer, kernel, body)",
        "version",
        0,
    );
    let t = with("[[body]]\ntarget_data = \"d\"\nnowait = true\n");
    let e = check(
        &t,
        ErrorKind::UnknownKey,
        "unknown key `nowait` in target_data \"d\" (allowed: target_data, map, device, body)",
        "nowait",
        0,
    );
    assert_eq!(e.location().map(|l| l.1), Some(20));
}

#[test]
fn after_unknown_self_and_cycles() {
    let t = with("after = [\"nope\"]\n");
    check(
        &t,
        ErrorKind::UnknownName,
        "`after` of target \"k\" names unknown construct \"nope\"",
        "\"nope\"",
        0,
    );
    let t = with("after = [\"k\"]\n");
    check(
        &t,
        ErrorKind::Order,
        "target \"k\" cannot be `after` itself",
        "\"k\"]",
        0,
    );
    let t = with(
        "after = [\"b\"]\n[[body]]\nhost = \"b\"\nafter = [\"c\"]\n[[body]]\nhost = \"c\"\nafter = [\"k\"]\n",
    );
    check(
        &t,
        ErrorKind::Order,
        "cycle through `after`/`depend` (each must run before the next): target \"k\" → host \"c\" → host \"b\" → target \"k\"",
        "\"b\"]",
        0,
    );
    // A cycle through a depend: `k` writes y before `h` reads it (file order), but `k`
    // asks to follow `h`.
    let t = with(
        "depend = [\"inout: y\"]\nafter = [\"h\"]\n[[body]]\nhost = \"h\"\ndepend = [\"in: y[0:4]\"]\n",
    );
    check(
        &t,
        ErrorKind::Order,
        "cycle through `after`/`depend` (each must run before the next): target \"k\" → host \"h\" → target \"k\"",
        "\"h\"]",
        0,
    );
    // Enclosing constructs.
    let t = with("[[body]]\ntarget_data = \"d\"\n[[body.body]]\nhost = \"in\"\nafter = [\"d\"]\n");
    check(
        &t,
        ErrorKind::Order,
        "host \"in\" cannot be `after` target_data \"d\", which encloses it",
        "\"d\"]",
        0,
    );
}

#[test]
fn lower_errors_are_located() {
    use offload_sched::file::lower_error;
    use offload_sched::lower::LowerError;
    use offload_sched::model::Construct;
    let src = SourceFile::new("g.toml", BASE);
    let p = parse(&src).unwrap();
    let Construct::Target(r) = &p.body[0] else {
        panic!()
    };
    let e = LowerError::NotPresent {
        region: "k".into(),
        section: "y[0:16]".into(),
        device: 0,
        span: r.maps[1].span,
    };
    let fe = lower_error(&src, &e);
    assert_eq!(fe.kind(), ErrorKind::Lower);
    assert_eq!(fe.location(), Some(("g.toml".to_string(), 17, 26)));
    assert!(fe.render().starts_with(
        "g.toml:17:26: error: region \"k\": map(present) of y[0:16] but y[0:16] is not present on device 0\n"
    ));
    let none = LowerError::UnknownKernel {
        region: "k".into(),
        kernel: "saxpyy".into(),
        span: None,
        known: vec!["saxpy".into(), "scale".into()],
    };
    assert_eq!(lower_error(&src, &none).location(), None);
    assert_eq!(
        lower_error(&src, &none).render(),
        "g.toml: error: region \"k\": unknown kernel `saxpyy`\n\
         help: did you mean `saxpy`? (kernels: saxpy, scale)\n"
    );
}

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

/// Asserts an error's message, position and help line (`None`: no help).
fn check_help(text: &str, kind: ErrorKind, message: &str, needle: &str, help: Option<&str>) {
    let e = check(text, kind, message, needle, 0);
    assert_eq!(e.help_text(), help, "\n{}", e.render());
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
