//! Every loader error: its message and its `line:column` (1-based). The loader is the
//! stage under test, so `file::parse` is called alone. This file: syntax, value types,
//! element types and sizes, buffers, sections, map types, duplicates
//! (`file_errors_refs.rs`: kernels, devices, keys, `after`, lowering errors;
//! `file_errors_names.rs`: the nesting limit and suggested names).

mod common;

use common::file_errors::*;
use offload_sched::file::{parse, ErrorKind, SourceFile};

#[test]
fn base_parses() {
    assert!(parse(&SourceFile::new("g.toml", BASE)).is_ok());
}

#[test]
fn syntax_error_uses_toml_span() {
    let text = "name = \"p\"\n[[buffer]]\nname = \"x\"\nlen = [1 2]\n";
    let e = err(text);
    assert_eq!(e.kind(), ErrorKind::Syntax);
    assert_eq!(
        e.message(),
        "TOML syntax error: invalid array; expected `]`",
    );
    assert_eq!(e.location(), Some(("g.toml".to_string(), 4, 10)));
}

/// An unclosed `[`, `{` or string is located at its opening delimiter with its key, not
/// where the parser gave up (the next table header, the end of the file).
#[test]
fn unclosed_brackets_and_strings_are_located_where_they_open() {
    let show = |text: &str| {
        let e = err(text);
        assert_eq!(e.kind(), ErrorKind::Syntax);
        let (_, line, col) = e.location().unwrap();
        format!("{line}:{col}: {}", e.message())
    };
    let eof = BASE.replace("\"tofrom: y\"]", "\"tofrom: y\"");
    let more = format!("{eof}\n[[body]]\ntarget = \"j\"\nkernel = \"saxpy\"\n");
    let got = [
        // At the end of the file, and with another [[body]] after it.
        show(&eof),
        show(&more),
        err(&more).render(),
        // An unclosed string, one-line and multi-line.
        show(&BASE.replace("\"k\"", "\"k")),
        show(&BASE.replace("\"k\"", "\"\"\"k")),
        // An unclosed inline table, and arrays nested in one.
        show(&BASE.replace("len = 16", "len = { a = 1")),
        show(&BASE.replace("len = 16", "len = { a = [1, [2]")),
        // A table header: the parser's own position, on its line.
        show(&BASE.replace("[[body]]", "[[body")),
    ];
    assert_eq!(
        got,
        [
            "17:7: TOML syntax error: the `[` of `map` is never closed (the parser stopped at \
             line 18, column 1: invalid array; expected `]`)",
            "17:7: TOML syntax error: the `[` of `map` is never closed (the parser stopped at \
             line 19, column 1: invalid array; expected `]`)",
            "g.toml:17:7: error: TOML syntax error: the `[` of `map` is never closed (the \
             parser stopped at line 19, column 1: invalid array; expected `]`)\n\
             17 | map = [\"to: x\", \"tofrom: y\"\n   |       ^\nhelp: close it with `]`\n",
            "14:10: TOML syntax error: the `\"` of `target` is never closed (the parser \
             stopped at line 14, column 12: invalid basic string)",
            "14:10: TOML syntax error: the `\"\"\"` of `target` is never closed (the parser \
             stopped at line 18, column 1: invalid multiline basic string)",
            "6:7: TOML syntax error: the `{` of `len` is never closed (the parser stopped at \
             line 6, column 14: invalid inline table; expected `}`)",
            "6:13: TOML syntax error: the `[` of `a` is never closed (the parser stopped at \
             line 8, column 1: invalid array; expected `]`)",
            "13:7: TOML syntax error: invalid table header; expected `.`, `]]`",
        ]
    );
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

/// A key with no value says which key, at the end of the file (where the TOML parser's
/// own message is empty) and before a newline.
#[test]
fn a_key_without_a_value_is_named() {
    let e = err("name = ");
    assert_eq!(e.kind(), ErrorKind::Syntax);
    assert_eq!(
        e.message(),
        "TOML syntax error: `name =` has no value: the file ends after `=`"
    );
    assert_eq!(e.location(), Some(("g.toml".to_string(), 1, 8)));
    assert_eq!(
        e.help_text(),
        Some(
            "give `name` a value on the same line: a string in quotes, a number, true or \
             false, an array [...] or an inline table {...}"
        )
    );
    let t = BASE.replace(
        "len = 16\n\n[[buffer]]\nname = \"y\"",
        "len = \n\n[[buffer]]\nname = \"y\"",
    );
    let e = err(&t);
    assert_eq!(
        e.message(),
        "TOML syntax error: `len =` has no value (the parser: invalid string; expected `\"`, `'`)"
    );
    let (line, col) = pos(&t, "len = \n", 0);
    assert_eq!(e.location(), Some(("g.toml".to_string(), line, col + 6)));
}

/// An integer past TOML's 64 bits names its key, TOML's range and the key's own range
/// (`priority`: OpenMP's `priority(n)`, capped at 2^32 − 1 here).
#[test]
fn a_huge_priority_names_the_field_and_its_range() {
    let t = with("priority = 99999999999999999999\n");
    check_help(
        &t,
        ErrorKind::Syntax,
        "TOML syntax error: the integer 99999999999999999999 of `priority` is out of range: \
         TOML integers are 64-bit, from -9223372036854775808 to 9223372036854775807",
        "99999999999999999999",
        Some(
            "`priority` takes an integer from 0 to 4294967295 (OpenMP 5.2 §12.4 \
             `priority(n)`: a non-negative integer, a hint; this implementation's largest \
             priority, its max-task-priority, is 2^32 − 1)",
        ),
    );
    // Inside the 64 bits but above the cap: the loader's own check, at the value.
    check(
        &with("priority = 4294967296\n"),
        ErrorKind::BadValue,
        "`priority` of target \"k\" is too large: 4294967296 is over the largest priority, \
         4294967295 (2^32 − 1)",
        "4294967296",
        0,
    );
}

/// Element type names of C and NumPy suggest the model's.
#[test]
fn c_type_names_suggest_the_element_type() {
    let t = BASE.replacen("type = \"f32\"", "type = \"float\"", 1);
    check_help(
        &t,
        ErrorKind::BadValue,
        "unknown element type `float` for buffer `x` (expected f32, f64, i32, i64 or u8)",
        "\"float\"",
        Some("did you mean `f32`? (C's `float`; `double` is `f64`)"),
    );
    let t = BASE.replacen("type = \"f32\"", "type = \"double\"", 1);
    assert_eq!(
        err(&t).help_text(),
        Some("did you mean `f64`? (C's `double`; `float` is `f32`)")
    );
    let t = with("[[kernel]]\nname = \"mine\"\nparams = [\"x: in float*\"]\nlibrary = \"l.so\"\n");
    check_help(
        &t,
        ErrorKind::BadValue,
        "bad parameter \"x: in float*\" of kernel `mine` (expected e.g. \"in f32*\", \
         \"inout T*\", \"out i32*\", \"f64\", \"T\", optionally named: \"x: in f32*\")",
        "\"x: in float*\"",
        Some("did you mean `f32`? (C's `float`; `double` is `f64`)"),
    );
}
