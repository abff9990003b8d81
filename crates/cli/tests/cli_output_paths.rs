//! Output paths of the command line (`dot -o`, `import -o`, `run --trace`; `bench --out`
//! goes through the same `offload_sched::file::write_atomic`, tested in src/file/output.rs):
//! a regular file is replaced atomically keeping its mode, a character device and a FIFO
//! are written through and stay what they are, a symbolic link is followed and stays a
//! link.
#![cfg(target_os = "linux")]

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_offload-sched");
const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn ok(args: &[&str]) -> String {
    let out = Command::new(BIN).args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {err}");
    String::from_utf8(out.stdout).unwrap()
}

fn saxpy() -> String {
    format!("{ROOT}/graphs/saxpy.toml")
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A node of /dev/null's device in `d` where this process may make one (as root), else
/// /dev/null itself (which an unprivileged process cannot replace): a regression never
/// turns the machine's /dev/null into a file.
fn null_device(d: &Path) -> PathBuf {
    let p = d.join("null");
    let dev = std::fs::metadata("/dev/null").unwrap().rdev();
    let c = std::ffi::CString::new(s(&p)).unwrap();
    // SAFETY: `c` is NUL-terminated and outlives the call.
    if unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, dev) } == 0 {
        p
    } else {
        PathBuf::from("/dev/null")
    }
}

#[test]
fn dot_to_a_character_device_leaves_it_a_character_device() {
    let d = tempfile::tempdir().unwrap();
    let null = null_device(d.path());
    ok(&["dot", &saxpy(), "-o", s(&null)]);
    ok(&["run", &saxpy(), "--plugin", "host", "--trace", s(&null)]);
    assert!(std::fs::symlink_metadata(&null)
        .unwrap()
        .file_type()
        .is_char_device());
}

#[test]
fn a_0600_output_keeps_0600_on_every_command() {
    let d = tempfile::tempdir().unwrap();
    let wf = format!("{ROOT}/tests/data/wfinstances/helloworld-chain-5-chameleon.json");
    let (dot, toml, trace) = (
        d.path().join("g.dot"),
        d.path().join("g.toml"),
        d.path().join("t.json"),
    );
    for p in [&dot, &toml, &trace] {
        std::fs::write(p, "old").unwrap();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    ok(&["dot", &saxpy(), "-o", s(&dot)]);
    ok(&["import", "wfcommons", &wf, "-o", s(&toml)]);
    ok(&["run", &saxpy(), "--plugin", "host", "--trace", s(&trace)]);
    for p in [&dot, &toml, &trace] {
        let m = std::fs::metadata(p).unwrap();
        assert_eq!(m.permissions().mode() & 0o7777, 0o600, "{}", p.display());
        assert!(m.len() > 3, "{} not rewritten", p.display());
    }
    assert!(std::fs::read_to_string(&dot)
        .unwrap()
        .starts_with("digraph"));
}

#[test]
fn dot_into_a_fifo_is_read_by_its_reader() {
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("fifo");
    let keep = d.path().join("fifo.keep");
    let c = std::ffi::CString::new(s(&fifo)).unwrap();
    // SAFETY: `c` is NUL-terminated and outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    // A second name, so the reader never waits on a FIFO the command no longer reaches.
    std::fs::hard_link(&fifo, &keep).unwrap();
    let reader = {
        let keep = keep.clone();
        std::thread::spawn(move || std::fs::read_to_string(keep).unwrap())
    };
    let out = Command::new(BIN)
        .args(["dot", &saxpy(), "-o", s(&fifo)])
        .output()
        .unwrap();
    {
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&keep);
    }
    let got = reader.join().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    assert_eq!(got, ok(&["dot", &saxpy()]));
}

#[test]
fn an_output_through_a_symlink_writes_its_target_and_keeps_the_link() {
    let d = tempfile::tempdir().unwrap();
    let real = d.path().join("real.dot");
    std::fs::write(&real, "old").unwrap();
    let link = d.path().join("link.dot");
    std::os::unix::fs::symlink("real.dot", &link).unwrap();
    ok(&["dot", &saxpy(), "-o", s(&link)]);
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        std::fs::read_to_string(&real).unwrap(),
        ok(&["dot", &saxpy()])
    );
    // A folder is refused with the reason.
    let out = Command::new(BIN)
        .args(["dot", &saxpy(), "-o", s(d.path())])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("it is a folder"), "{err}");
}

/// Finding s12-5: an output path that is the input file (by name, through a symlink, or
/// a hard link) is refused with both paths named, and the input is left as it was.
#[test]
fn an_output_that_is_the_input_file_is_refused_and_the_input_kept() {
    let d = tempfile::tempdir().unwrap();
    let graph = d.path().join("same.toml");
    let text = std::fs::read_to_string(saxpy()).unwrap();
    std::fs::write(&graph, &text).unwrap();
    let link = d.path().join("link.toml");
    std::os::unix::fs::symlink("same.toml", &link).unwrap();
    let hard = d.path().join("hard.toml");
    std::fs::hard_link(&graph, &hard).unwrap();
    for out_path in [&graph, &link, &hard] {
        for (args, option) in [
            (vec!["dot", s(&graph), "-o", s(out_path)], "-o"),
            (vec!["run", s(&graph), "--trace", s(out_path)], "--trace"),
            (vec!["dot", s(&link), "-o", s(&graph)], "-o"),
        ] {
            let out = Command::new(BIN).args(&args).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{args:?}: accepted");
            assert!(
                err.contains(&format!("error: {option} {} is the input file", args[3]))
                    && err.contains(args[1])
                    && err.contains("refusing to overwrite it"),
                "{args:?}: {err}"
            );
            assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
            assert_eq!(std::fs::read_to_string(&graph).unwrap(), text, "{args:?}");
        }
    }
    // import: the workflow named as its own output.
    let json = d.path().join("wf.json");
    std::fs::write(&json, "{}").unwrap();
    let out = Command::new(BIN)
        .args(["import", "wfcommons", s(&json), "-o", s(&json)])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("is the input file"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&json).unwrap(), "{}");
    // A different file in the same folder is written.
    let other = d.path().join("other.dot");
    ok(&["dot", s(&graph), "-o", s(&other)]);
    assert!(std::fs::read_to_string(&other)
        .unwrap()
        .starts_with("digraph"));
}
