//! Helpers shared by the CLI's bad-input tests (`cli_bad_input.rs`: graph files and
//! command lines; `cli_bad_input_runs.rs`: memory, outputs and failures while running),
//! each of which says `mod common;`.

// Each test crate compiles this module and uses only some of it.
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

/// The repository root (graphs/, tests/data/).
pub const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

pub const BIN: &str = env!("CARGO_BIN_EXE_offload-sched");

pub const HEAD: &str = "name = \"x\"\n[[buffer]]\nname = \"a\"\ntype = \"f32\"\nlen = 4\n";

pub fn region(name: &str, extra: &str) -> String {
    format!(
        "[[body]]\ntarget = \"{name}\"\nkernel = \"increment\"\nargs = [\"a\"]\nmap = [\"tofrom: a\"]\n{extra}"
    )
}

/// Runs `args`; asserts failure, a short stderr, empty stdout; returns stderr.
pub fn fails(args: &[&str]) -> String {
    let out = Command::new(BIN).args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{args:?} succeeded: {err}");
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert!(out.stdout.is_empty(), "{args:?} printed to stdout");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    assert!(err.lines().count() <= 6, "{args:?}: error too long:\n{err}");
    err
}

/// Writes `bytes` to `dir/name` and checks `schedule`, `verify`, `run` and `dot -o`
/// all fail with a located error (`name:line:col` and a caret line) containing `want`;
/// the dot output must not exist afterwards.
pub fn located(dir: &Path, name: &str, bytes: &[u8], line_col: &str, want: &str) {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    let p = path.to_str().unwrap();
    let out = dir.join(format!("{name}.dot"));
    let o = out.to_str().unwrap();
    for args in [
        vec!["schedule", p],
        vec!["verify", p],
        vec!["run", p],
        vec!["dot", p, "-o", o],
    ] {
        let err = fails(&args);
        assert!(
            err.starts_with(&format!("{p}:{line_col}: error: ")),
            "{args:?}: {err}"
        );
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(
            err.lines()
                .any(|l| l.trim_start().starts_with('|') && l.contains('^')),
            "{args:?}: no caret: {err}"
        );
        assert!(!out.exists(), "{args:?} wrote {o}");
    }
}

pub fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}
