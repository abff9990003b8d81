//! Loader errors, located (see `file_errors.rs`): kernels and their arguments, devices,
//! construct kind keys, unknown keys, `after` references and cycles, and lowering errors
//! mapped back to the file.

mod common;

use common::file_errors::*;
use offload_sched::file::{parse, ErrorKind, SourceFile};

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
