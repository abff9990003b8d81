//! Bad input as a new user would give it, through the built binary: graph files,
//! workflows and command lines. Every case exits non-zero, prints a short error (with
//! `file:line:column` and a caret where the input has a position), and writes nothing
//! (`dot -o` and `import -o` leave no file). Memory, outputs and failures while running:
//! `cli_bad_input_runs.rs`; the helpers both share: `common/mod.rs`.

mod common;

use common::{fails, located, region, tmp, BIN, HEAD, ROOT};
use std::path::{Path, PathBuf};
use std::process::Command;

#[test]
fn empty_file() {
    let d = tmp();
    located(d.path(), "empty.toml", b"", "1:1", "graph file is empty");
}

#[test]
fn wrong_types() {
    let d = tmp();
    located(
        d.path(),
        "name.toml",
        b"name = 5\n",
        "1:8",
        "must be a string",
    );
    let text = HEAD.replace("len = 4", "len = \"four\"") + &region("r", "");
    located(d.path(), "len.toml", text.as_bytes(), "5:7", "`len`");
    let text = format!("{HEAD}{}", region("r", "nowait = 1\n"));
    located(d.path(), "nowait.toml", text.as_bytes(), "11:10", "nowait");
}

#[test]
fn unknown_kernel() {
    let d = tmp();
    let text = format!("{HEAD}{}", region("r", "")).replace("increment", "incremnet");
    located(
        d.path(),
        "k.toml",
        text.as_bytes(),
        "8:10",
        "unknown kernel `incremnet`",
    );
}

#[test]
fn a_spin_that_cannot_end_soon_is_rejected() {
    let d = tmp();
    for (n, us) in [
        ("inf", "inf"),
        ("nan", "nan"),
        ("neg", "-1.0"),
        ("long", "4e9"),
    ] {
        let text = format!("{HEAD}[[body]]\ntarget = \"s\"\nkernel = \"spin\"\nargs = [{us}]\n");
        located(
            d.path(),
            &format!("spin_{n}.toml"),
            text.as_bytes(),
            "7:10",
            "kernel `spin` takes a duration in µs from 0 to 3.6e9 (one hour), got",
        );
    }
}

#[test]
fn negative_and_absurd_lengths_are_size_errors_without_allocating() {
    let d = tmp();
    let neg = HEAD.replace("len = 4", "len = -4") + &region("r", "");
    located(
        d.path(),
        "neg.toml",
        neg.as_bytes(),
        "5:7",
        "must not be negative",
    );
    // 2^62 elements of f32: over the 64 GiB limit; answered at once (never allocated).
    let huge = HEAD.replace("len = 4", "len = 4611686018427387904") + &region("r", "");
    let t0 = std::time::Instant::now();
    located(
        d.path(),
        "huge.toml",
        huge.as_bytes(),
        "5:7",
        "64 GiB limit",
    );
    assert!(t0.elapsed().as_secs() < 10);
    // Many buffers that fit one by one but not together.
    let mut many = String::from("name = \"x\"\n");
    for i in 0..5 {
        many += &format!("[[buffer]]\nname = \"b{i}\"\ntype = \"f64\"\nlen = 8000000000\n");
    }
    let path = d.path().join("many.toml");
    std::fs::write(&path, many).unwrap();
    let err = fails(&["schedule", path.to_str().unwrap()]);
    assert!(err.contains("256 GiB"), "{err}");
}

/// A library kernel's shape errors (a leading dimension below the rows, a section
/// shorter than its tile, a written tile overlapping a read one) point at the argument
/// they are about, not at the construct.
#[test]
fn library_shape_errors_point_at_the_argument() {
    let d = tmp();
    let head = "name = \"g\"\n[[buffer]]\nname = \"A\"\ntype = \"f32\"\nlen = 16\n\
                [[buffer]]\nname = \"B\"\ntype = \"f32\"\nlen = 16\n\
                [[buffer]]\nname = \"C\"\ntype = \"f32\"\nlen = 16\n\
                [[body]]\ntarget = \"mm\"\nkernel = \"gemm\"\n";
    for (name, args, line_col, want) in [
        (
            "lda.toml",
            "[\"N\", \"N\", 4, 4, 4, 1, \"A\", 2, \"B\", 4, 1, \"C\", 4]",
            "17:36",
            "kernel `gemm` in target \"mm\": `lda` = 2 is less than max(1, rows of `a`) = 4",
        ),
        (
            "short.toml",
            "[\"N\", \"N\", 4, 4, 5, 1, \"A\", 4, \"B\", 5, 1, \"C\", 4]",
            "17:31",
            "tile `a` (transa = N) is 4×5 with lda 4: it needs 20 elements, the section has 16",
        ),
        (
            "alias.toml",
            "[\"N\", \"N\", 4, 4, 4, 1, \"A\", 4, \"B\", 4, 1, \"A\", 4]",
            "17:50",
            "writes tile `c`, which overlaps tile `a` of the same call",
        ),
    ] {
        let text = format!("{head}args = {args}\nmap = [\"to: A\", \"to: B\", \"tofrom: C\"]\n");
        located(d.path(), name, text.as_bytes(), line_col, want);
    }
}

#[test]
fn cycle_through_after_and_depend() {
    let d = tmp();
    let text = format!(
        "{HEAD}{}{}",
        region("r1", "after = [\"r2\"]\n"),
        region("r2", "after = [\"r1\"]\n")
    );
    located(d.path(), "cycle.toml", text.as_bytes(), "11:10", "cycle");
    // r2 must follow r1 through a depend (in program order), r1 is asked to follow r2.
    let text = format!(
        "{HEAD}{}{}",
        region("r1", "depend = [\"out: a\"]\nafter = [\"r2\"]\n"),
        region("r2", "depend = [\"in: a\"]\nafter = [\"r1\"]\n")
    );
    let path = d.path().join("cycle2.toml");
    std::fs::write(&path, text).unwrap();
    let err = fails(&["schedule", path.to_str().unwrap()]);
    assert!(err.contains("cycle"), "{err}");
}

#[test]
fn sections_out_of_bounds() {
    let d = tmp();
    let text = format!("{HEAD}{}", region("r", "")).replace("tofrom: a", "tofrom: a[2:5]");
    located(
        d.path(),
        "oob.toml",
        text.as_bytes(),
        "10:17",
        "out of bounds",
    );
    let text =
        format!("{HEAD}{}", region("r", "")).replace("[\"a\"]", "[\"a[18446744073709551615:2]\"]");
    located(d.path(), "wrap.toml", text.as_bytes(), "9:10", "a[");
}

#[test]
fn duplicate_names() {
    let d = tmp();
    let text = format!("{HEAD}[[buffer]]\nname = \"a\"\ntype = \"i32\"\nlen = 4\n");
    located(
        d.path(),
        "dupbuf.toml",
        text.as_bytes(),
        "7:8",
        "duplicate buffer `a`",
    );
    let text = format!("{HEAD}{}{}", region("r1", ""), region("r1", ""));
    located(
        d.path(),
        "dupreg.toml",
        text.as_bytes(),
        "12:10",
        "duplicate construct name",
    );
}

#[test]
fn non_utf8_file() {
    let d = tmp();
    located(
        d.path(),
        "bad.toml",
        b"name = \"x\xff\"\n",
        "1:10",
        "not valid UTF-8",
    );
}

#[test]
fn unreadable_files_a_directory_and_a_missing_path() {
    let d = tmp();
    let dir = d.path().join("graph.toml");
    std::fs::create_dir(&dir).unwrap();
    let missing = d.path().join("missing.toml");
    let out = d.path().join("out.dot");
    for (p, want) in [(&dir, "Is a directory"), (&missing, "No such file")] {
        let ps = p.to_str().unwrap();
        for args in [
            vec!["schedule", ps],
            vec!["run", ps],
            vec!["dot", ps, "-o", out.to_str().unwrap()],
        ] {
            let err = fails(&args);
            assert!(err.starts_with(&format!("{ps}: error: ")), "{err}");
            assert!(err.contains(want), "{err}");
            assert!(!out.exists());
        }
    }
}

/// `import -o OUT` with bad input writes nothing.
#[test]
fn import_bad_input_writes_nothing() {
    let d = tmp();
    let out: PathBuf = d.path().join("out.toml");
    let o = out.to_str().unwrap();
    let cases: [(&str, &[u8], &str); 5] = [
        (
            "trunc.json",
            b"{\"x\":\n",
            "trunc.json:2:1: error: invalid JSON",
        ),
        (
            "garbage.json",
            b"{\"a\": tru}",
            "garbage.json:1:10: error: invalid JSON",
        ),
        ("bad8.json", b"{\"a\": \xff}", "bad8.json:1:7: error: `"),
        ("empty.json", b"", "empty.json:1:1: error: invalid JSON"),
        (
            "noflow.json",
            b"{\"schemaVersion\": \"1.5\"}",
            "noflow.json: error: ",
        ),
    ];
    for (name, bytes, want) in cases {
        let p = d.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        let err = fails(&["import", "wfcommons", p.to_str().unwrap(), "-o", o]);
        let want = format!("{}/{want}", d.path().display());
        assert!(err.starts_with(&want), "{name}: {err}");
        if want.contains(": error: invalid JSON") || name == "bad8.json" {
            assert!(err.contains('^'), "{name}: no caret: {err}");
        }
        assert!(!out.exists(), "{name}: wrote {o}");
    }
    let err = fails(&["import", "wfcommons", d.path().to_str().unwrap(), "-o", o]);
    assert!(err.contains("cannot read"), "{err}");
    assert!(!out.exists());
}

#[test]
fn nonsense_tolerances_and_factors_are_rejected() {
    let g = format!("{}/graphs/saxpy.toml", ROOT);
    for (flag, v) in [
        ("--rel-tol", "-1"),
        ("--rel-tol", "nan"),
        ("--rel-tol", "inf"),
        ("--spin-scale", "-1"),
        ("--spin-scale", "nan"),
    ] {
        let arg = format!("{flag}={v}");
        let err = fails(&["run", &g, "--plugin", "host", "--check", &arg]);
        assert!(err.contains(flag), "{arg}: {err}");
        assert!(err.contains("must be finite and >= 0"), "{arg}: {err}");
    }
    // Scaled spins keep the one-hour limit (a finite factor can still ask for years).
    let g = format!("{}/graphs/helloworld-chain-5.toml", ROOT);
    let err = fails(&["run", &g, "--plugin", "host", "--spin-scale", "1e9"]);
    assert!(err.contains("over the 3.6e9 µs (one hour)"), "{err}");
    assert!(err.contains("cpuhog_chain_00000001"), "{err}");
}

/// Huge option values print in scientific notation (issue 15 point 7).
#[test]
fn option_numbers_in_errors_are_short() {
    let g = format!("{}/graphs/saxpy.toml", ROOT);
    for (args, want) in [
        (
            vec!["run", "--spin-scale=-1e300", &g],
            "error: --spin-scale -1e300 must be finite and >= 0",
        ),
        (
            vec!["run", "--check", "--rel-tol=-1e300", &g],
            "error: --rel-tol -1e300 must be finite and >= 0",
        ),
    ] {
        let out = Command::new(BIN).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.trim_end(), want, "{args:?}");
    }
}

/// Negative option values reach the option's own check (not clap's "unexpected argument
/// '-1'"), and a workflow JSON given as a graph file says how to import it.
#[test]
fn negative_values_and_json_graph_files() {
    let g = format!("{ROOT}/graphs/saxpy.toml");
    let err = fails(&["run", &g, "--rel-tol", "-1"]);
    assert_eq!(
        err.trim_end(),
        "error: --rel-tol -1 must be finite and >= 0"
    );
    let err = fails(&["run", &g, "--spin-scale", "-2"]);
    assert_eq!(
        err.trim_end(),
        "error: --spin-scale -2 must be finite and >= 0"
    );
    let json = format!("{ROOT}/tests/data/wfinstances/helloworld-chain-5-chameleon.json");
    let err = fails(&["schedule", &json]);
    assert!(err.contains("TOML syntax error"), "{err}");
    assert!(
        err.contains("help: graph files are TOML; a WfCommons workflow (JSON) is converted first"),
        "{err}"
    );
}

/// `import` applies the loader's limits before writing: five files of 60 GiB each (each
/// under the 64 GiB buffer limit, 300 GiB in all, over the 256 GiB total) are refused and
/// nothing is written (issue 15 point 5).
#[test]
fn import_refuses_what_the_loader_would_refuse() {
    let d = tmp();
    let out = d.path().join("out.toml");
    let files: Vec<String> = (0..5)
        .map(|i| format!(r#"{{"id": "f{i}", "sizeInBytes": 64424509440}}"#))
        .collect();
    let outputs: Vec<String> = (0..5).map(|i| format!("\"f{i}\"")).collect();
    let json = format!(
        r#"{{"name": "big", "schemaVersion": "1.5", "workflow": {{
  "specification": {{
    "tasks": [{{"id": "t", "parents": [], "children": [], "inputFiles": [], "outputFiles": [{}]}}],
    "files": [{}]
  }},
  "execution": {{"tasks": [{{"id": "t", "runtimeInSeconds": 1}}]}}
}}}}"#,
        outputs.join(", "),
        files.join(", ")
    );
    let input = d.path().join("big.json");
    std::fs::write(&input, json).unwrap();
    let err = fails(&[
        "import",
        "wfcommons",
        input.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--size-scale",
        "1",
    ]);
    assert!(err.contains("big.json: error: "), "{err}");
    assert!(err.contains("256 GiB"), "{err}");
    assert!(!out.exists(), "nothing is written");
}

#[test]
fn misspelt_names_get_a_suggestion_on_every_command() {
    let d = tmp();
    let text = format!("{HEAD}{}", region("r", "")).replace("increment", "incremnet");
    let path = d.path().join("k.toml");
    std::fs::write(&path, text).unwrap();
    let p = path.to_str().unwrap();
    for cmd in ["schedule", "verify", "run", "dot"] {
        let err = fails(&[cmd, p]);
        assert!(
            err.ends_with(
                "help: did you mean `increment`? (kernels: increment, spin, gemm, trsm, \
                 reduce_sum and 12 more); declare others in [[kernel]]\n"
            ),
            "{cmd}: {err}"
        );
    }
    let text = format!("{HEAD}{}", region("r", "nowiat = true\n"));
    std::fs::write(&path, text).unwrap();
    let err = fails(&["schedule", p]);
    assert!(
        err.starts_with(&format!(
            "{p}:11:1: error: unknown key `nowiat` in target \"r\""
        )),
        "{err}"
    );
    assert!(err.ends_with("help: did you mean `nowait`?\n"), "{err}");
}

/// A region passing `a` to `copy` without mapping it: `a` is mapped tofrom implicitly
/// though `copy` only reads it.
fn warned(dir: &Path) -> PathBuf {
    let text = format!(
        "{HEAD}[[buffer]]\nname = \"b\"\ntype = \"f32\"\nlen = 4\n\
         [[body]]\ntarget = \"r\"\nkernel = \"copy\"\nargs = [\"a\", \"b\"]\nmap = [\"from: b\"]\n"
    );
    let path = dir.join("w.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn warnings_go_to_stderr_before_the_output_and_do_not_fail() {
    let d = tmp();
    let path = warned(d.path());
    let p = path.to_str().unwrap();
    let want = format!(
        "{p}:11:10: warning: target \"r\": `a` is not in `map`, so it is mapped `tofrom` \
         implicitly, but kernel `copy` only reads it: it is copied back for nothing\n\
         11 | target = \"r\"\n   |          ^^^\nhelp: add \"to: a\" to `map`\n"
    );
    let dot = d.path().join("w.dot");
    for args in [
        vec!["schedule", p],
        vec!["verify", p],
        vec!["run", p, "--plugin", "host"],
        vec!["dot", p, "-o", dot.to_str().unwrap()],
    ] {
        let out = Command::new(BIN).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?}: {err}");
        assert_eq!(err, want, "{args:?}");
        assert_eq!(out.stdout.is_empty(), args[0] == "dot", "{args:?}");
    }
    assert!(dot.exists());
    // --deny-warnings: the same warning, then an error; nothing printed or written.
    std::fs::remove_file(&dot).unwrap();
    for args in [
        vec!["schedule", p, "--deny-warnings"],
        vec!["run", p, "--deny-warnings"],
        vec!["dot", p, "--deny-warnings", "-o", dot.to_str().unwrap()],
    ] {
        let err = fails(&args);
        assert_eq!(
            err,
            format!("{want}error: 1 warning denied (--deny-warnings)\n"),
            "{args:?}"
        );
    }
    assert!(!dot.exists());
    // A graph without warnings prints nothing on stderr.
    let out = Command::new(BIN)
        .args(["schedule", &format!("{ROOT}/graphs/saxpy.toml")])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn every_file_argument_is_described_in_help() {
    for cmd in [
        &["schedule"][..],
        &["verify"],
        &["dot"],
        &["run"],
        &["import", "wfcommons"],
    ] {
        let mut args = cmd.to_vec();
        args.push("--help");
        let out = Command::new(BIN).args(&args).output().unwrap();
        assert!(out.status.success(), "{args:?}");
        let help = String::from_utf8_lossy(&out.stdout);
        let (arg, text) = if cmd[0] == "import" {
            ("<INPUT>", "The workflow: a WfCommons WfFormat JSON file")
        } else {
            (
                "<FILE>",
                "The graph file (TOML: buffers, kernels and target regions; see graphs/)",
            )
        };
        // `Arguments:` lists the positional with its description (on its line, or on
        // the next one in the long form).
        let args_block = help.split("Arguments:").nth(1).unwrap_or_default();
        let first = args_block.split("Options:").next().unwrap_or_default();
        assert!(
            first.contains(arg) && first.contains(text),
            "{cmd:?}:\n{help}"
        );
    }
}

/// A WfCommons file with a UTF-8 byte order mark imports as the same file without one
/// (TOML graph files with one load too); a syntax error after the mark keeps its column.
#[test]
fn a_byte_order_mark_is_allowed_in_workflows_and_graph_files() {
    let d = tmp();
    let sample = std::fs::read(format!(
        "{ROOT}/tests/data/wfinstances/helloworld-chain-5-chameleon.json"
    ))
    .unwrap();
    let bom: Vec<u8> = b"\xef\xbb\xbf".iter().chain(&sample).copied().collect();
    let (plain, marked) = (d.path().join("plain.json"), d.path().join("bom.json"));
    std::fs::write(&plain, &sample).unwrap();
    std::fs::write(&marked, &bom).unwrap();
    let out = |input: &Path, name: &str| {
        let o = d.path().join(name);
        let r = Command::new(BIN)
            .args(["import", "wfcommons", input.to_str().unwrap(), "-o"])
            .arg(&o)
            .output()
            .unwrap();
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        std::fs::read_to_string(o).unwrap()
    };
    let a = out(&plain, "a.toml");
    let b = out(&marked, "b.toml");
    // Only the program's name (the input's file stem) differs.
    assert_eq!(
        a.replacen("name = \"plain\"", "X", 1),
        b.replacen("name = \"bom\"", "X", 1),
        "the mark changes nothing"
    );
    let bad = d.path().join("badbom.json");
    std::fs::write(&bad, b"\xef\xbb\xbf{\"a\": tru}").unwrap();
    let err = fails(&["import", "wfcommons", bad.to_str().unwrap(), "-o", "x.toml"]);
    assert!(
        err.contains("badbom.json:1:11: error: invalid JSON"),
        "{err}"
    );
    // A TOML graph file with a mark.
    let g = std::fs::read(format!("{ROOT}/graphs/saxpy.toml")).unwrap();
    let gb: Vec<u8> = b"\xef\xbb\xbf".iter().chain(&g).copied().collect();
    let gp = d.path().join("g.toml");
    std::fs::write(&gp, gb).unwrap();
    let r = Command::new(BIN)
        .args(["schedule", gp.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
}

/// Graph files hold at most 64 MiB, workflows 256 MiB: a larger regular file is refused
/// before it is read, endless input (`/dev/zero`) after the cap, naming the file.
#[test]
fn inputs_over_the_size_cap_are_refused_without_reading_them_whole() {
    let d = tmp();
    let t = std::time::Instant::now();
    let err = fails(&["schedule", "/dev/zero"]);
    assert_eq!(
        err,
        "/dev/zero: error: graph file `/dev/zero` is larger than 64 MiB, the most a graph \
         file may hold\n"
    );
    let big = d.path().join("big.toml");
    std::fs::File::create(&big)
        .unwrap()
        .set_len((64 << 20) + 1)
        .unwrap();
    let b = big.to_str().unwrap();
    let err = fails(&["verify", b]);
    assert!(
        err.contains(&format!("graph file `{b}` is larger than 64 MiB")),
        "{err}"
    );
    let wf = d.path().join("big.json");
    std::fs::File::create(&wf)
        .unwrap()
        .set_len((256 << 20) + 1)
        .unwrap();
    let w = wf.to_str().unwrap();
    let err = fails(&["import", "wfcommons", w, "-o", "x.toml"]);
    assert_eq!(
        err,
        format!("{w}: error: cannot read: larger than 256 MiB, the most this input may hold\n")
    );
    // Endless input would never end without the cap; how long the refusals took is
    // printed, not asserted (speed is measured in benchmarks).
    println!("refused in {:?}", t.elapsed());
}

/// Names with control characters reach the terminal escaped: the schedule text, the
/// DOT, a summary and an error show `\u{1b}`, never the raw escape character.
#[test]
fn control_characters_in_names_reach_the_terminal_escaped() {
    let d = tmp();
    let g = d.path().join("esc.toml");
    std::fs::write(
        &g,
        format!(
            "name = \"e\\u001b[2J\"\n[[buffer]]\nname = \"a\"\ntype = \"f32\"\nlen = 4\n{}",
            region("r\\u001b]0;title\\u0007", "")
        ),
    )
    .unwrap();
    let p = g.to_str().unwrap();
    let raw = |b: &[u8]| {
        b.iter()
            .any(|&c| c < 0x20 && c != b'\n' && c != b'\t' || c == 0x7f)
    };
    for args in [
        vec!["schedule", p],
        vec!["dot", p],
        vec!["verify", p],
        vec!["run", "--plugin", "host", p],
    ] {
        let out = Command::new(BIN).args(&args).output().unwrap();
        assert!(out.status.success(), "{args:?}");
        assert!(!raw(&out.stdout) && !raw(&out.stderr), "{args:?}");
    }
    let out = Command::new(BIN).args(["schedule", p]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("region \"r\\u{1b}]0;title\\u{7}\""), "{text}");
    // An error quoting a name: an unknown kernel.
    std::fs::write(
        &g,
        format!("{HEAD}[[body]]\ntarget = \"k\"\nkernel = \"no\\u001b[31m\"\nargs = [\"a\"]\n"),
    )
    .unwrap();
    let out = Command::new(BIN).args(["schedule", p]).output().unwrap();
    assert!(!out.status.success());
    assert!(
        !raw(&out.stderr),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("`no\\u{1b}[31m`"));
}
