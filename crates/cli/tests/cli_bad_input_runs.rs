//! Bad runs through the built binary: a program over the host memory limit or the
//! address space, outputs that cannot be written (a trace path, a full stdout), and a
//! library kernel failing while running, located in its graph file. Every case exits
//! non-zero with a short error and writes nothing. Graph-file and command-line input:
//! `cli_bad_input.rs`; the helpers both share: `common/mod.rs`.

mod common;

use common::{fails, tmp, BIN, ROOT};
use std::process::Command;

#[test]
fn a_trace_that_cannot_be_written_names_the_path_once() {
    let g = format!("{}/graphs/saxpy.toml", ROOT);
    let err = fails(&[
        "run",
        &g,
        "--plugin",
        "host",
        "--trace",
        "/nonexistent/dir/x.json",
    ]);
    assert_eq!(err.matches("/nonexistent/dir/x.json").count(), 1, "{err}");
    assert!(err.contains("cannot write trace"), "{err}");
}

#[test]
fn a_full_stdout_is_an_error_and_a_closed_pipe_is_not() {
    let g = format!("{}/graphs/saxpy.toml", ROOT);
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full");
    let Ok(full) = full else {
        eprintln!("no /dev/full here: skipped");
        return;
    };
    let out = Command::new(BIN)
        .args(["dot", &g])
        .stdout(full)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot write the output"), "{err}");
    // A reader that closes early is not an error.
    let mut child = Command::new(BIN)
        .args(["dot", &g])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    assert!(child.wait().unwrap().success());
}

/// How long [`refused`] lets the binary run before it kills it: a hang guard, not a
/// measurement. A refusal exits at once; a run that was not refused ends after the
/// program's 20 s spin with exit code 0, which the exit-code assertion catches. Only a
/// binary that hangs meets the guard, which then fails the test saying so (instead of
/// the test run hanging).
const HANG_GUARD: std::time::Duration = std::time::Duration::from_secs(300);

/// Runs `args` with `OFFLOAD_SCHED_MEMORY_LIMIT=limit`; asserts a one-line refusal on
/// stderr (exit code 1, nothing on stdout, "nothing was run"); returns it. Killed after
/// [`HANG_GUARD`].
fn refused(limit: &str, args: &[&str]) -> String {
    let d = tmp();
    let (out_path, err_path) = (d.path().join("stdout"), d.path().join("stderr"));
    let mut child = Command::new(BIN)
        .args(args)
        .env("OFFLOAD_SCHED_MEMORY_LIMIT", limit)
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if t0.elapsed() > HANG_GUARD {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{args:?}: hang guard: still running after {HANG_GUARD:?}, killed (a refusal \
                 exits at once, a run would end after its 20 s spin)"
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let err = std::fs::read_to_string(&err_path).unwrap();
    let stdout = std::fs::read(&out_path).unwrap();
    assert_eq!(status.code(), Some(1), "{args:?}: {err}");
    assert!(stdout.is_empty(), "{args:?} printed to stdout");
    assert_eq!(err.lines().count(), 1, "{args:?}: not one line:\n{err}");
    assert!(
        err.contains("not enough host memory: needed "),
        "{args:?}: {err}"
    );
    assert!(err.contains("nothing was run"), "{args:?}: {err}");
    err
}

/// Two 16 MiB buffers (`a` copied in, `b` in and out), then a 20 s spin: under a 48 MiB
/// limit every way of running it is refused at once with the figures.
#[test]
fn a_program_larger_than_the_memory_limit_is_refused_with_the_figures_before_any_work() {
    let d = tmp();
    let text = "name = \"mid\"\n\
        [[buffer]]\nname = \"a\"\ntype = \"f32\"\nlen = 4194304\n\
        [[buffer]]\nname = \"b\"\ntype = \"f32\"\nlen = 4194304\n\
        [[body]]\ntarget = \"add\"\nkernel = \"add\"\nargs = [\"a\", \"b\", \"b\"]\n\
        map = [\"to: a\", \"tofrom: b\"]\n\
        [[body]]\ntarget = \"wait\"\nkernel = \"spin\"\nargs = [20000000.0]\n";
    let path = d.path().join("mid.toml");
    std::fs::write(&path, text).unwrap();
    let p = path.to_str().unwrap();
    // The host plugin keeps both freed blocks on its free lists to the end (16 MiB each).
    let run = "needed 96 MiB at its peak (buffers 32 MiB, device memory emulated on the host \
               32 MiB, result snapshot 32 MiB (taken when 0 B of device memory is live), \
               freed device blocks kept for reuse 32 MiB";
    let tail = "; 48 MiB available (OFFLOAD_SCHED_MEMORY_LIMIT); nothing was run\n";
    let err = refused("48MiB", &["run", "--plugin", "host", p]);
    assert_eq!(
        err,
        format!("{p}: error: not enough host memory: {run}){tail}")
    );
    // With --check the reference runs first; its result is held during the run.
    let err = refused("48MiB", &["run", "--plugin", "host", "--check", p]);
    assert_eq!(
        err,
        format!(
            "{p}: error: not enough host memory: {}, reference interpreter 32 MiB){tail}",
            run.replacen("96 MiB", "128 MiB", 1)
        )
    );
    // --compare-host holds the first run's report while the host plugin runs.
    let err = refused("48MiB", &["run", "--plugin", "host", "--compare-host", p]);
    assert!(
        err.contains("needed 128 MiB") && err.contains("results held 32 MiB)"),
        "{err}"
    );
    // In bytes, with the default plugin.
    let err = refused("50331648", &["run", p]);
    assert!(
        err.contains("48 MiB available (OFFLOAD_SCHED_MEMORY_LIMIT)"),
        "{err}"
    );
    // Decimal units are 1000-based: 48 MB is 45.8 MiB.
    let err = refused("48 MB", &["run", p]);
    assert!(err.contains("45.8 MiB available"), "{err}");
    // A limit that is not a size is an error of its own.
    let err = fails_with_env("48 parsecs", &["run", p]);
    assert!(
        err.contains("OFFLOAD_SCHED_MEMORY_LIMIT=\"48 parsecs\" is not a size"),
        "{err}"
    );
    // `none`: no check (the spin is scaled down so the run ends soon).
    let out = Command::new(BIN)
        .args(["run", "--plugin", "host", "--check", "--spin-scale", "0", p])
        .env("OFFLOAD_SCHED_MEMORY_LIMIT", "none")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `bench` and `bench dag` check every size before they run anything.
#[test]
fn bench_refuses_sizes_larger_than_the_memory_limit_before_any_work() {
    let err = refused(
        "64MiB",
        &[
            "bench",
            "--plugin",
            "host",
            "--regions",
            "2",
            "--sizes",
            "4096,67108864",
            "--reps",
            "1",
            "--warmup",
            "0",
        ],
    );
    assert!(
        err.starts_with("error: 64 MiB per array: saxpy_regions: not enough host memory:"),
        "{err}"
    );
    assert!(
        err.contains("; 64 MiB available (OFFLOAD_SCHED_MEMORY_LIMIT)"),
        "{err}"
    );
    let err = refused(
        "64MiB",
        &[
            "bench",
            "dag",
            "--plugin",
            "host",
            "--dags",
            "wavefront",
            "--wave",
            "4",
            "--block-bytes",
            "16777216",
            "--reps",
            "1",
            "--warmup",
            "0",
        ],
    );
    assert!(
        err.starts_with("error: wavefront: wavefront_4x4: not enough host memory:"),
        "{err}"
    );
    assert!(err.contains("reference interpreter"), "{err}");
}

/// Runs `args` with the limit set to `limit`; asserts failure (exit code 1, short
/// stderr); returns stderr.
fn fails_with_env(limit: &str, args: &[&str]) -> String {
    let out = Command::new(BIN)
        .args(args)
        .env("OFFLOAD_SCHED_MEMORY_LIMIT", limit)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert!(err.lines().count() <= 2, "{args:?}: {err}");
    err
}

/// An allocation that fails is an error, not an abort: a 4 GiB buffer under a 3 GiB
/// address-space limit (`ulimit -v`: refused at once whatever the machine's memory and
/// overcommit policy, so nothing is ever touched), with the memory check off. `run
/// --check` used to die of SIGABRT in the reference interpreter.
#[cfg(target_os = "linux")]
#[test]
fn allocation_failures_are_errors_not_aborts() {
    let d = tmp();
    let text = "name = \"big\"\n[[buffer]]\nname = \"a\"\ntype = \"f32\"\nlen = 1073741824\n\
                [[body]]\ntarget = \"inc\"\nkernel = \"increment\"\nargs = [\"a\"]\n\
                map = [\"tofrom: a\"]\n";
    let path = d.path().join("big.toml");
    std::fs::write(&path, text).unwrap();
    let p = path.to_str().unwrap();
    for (args, want) in [
        (
            vec!["run", "--plugin", "host", "--check", p],
            "cannot allocate 4 GiB of host memory for host buffer \"a\" of the reference \
             interpreter",
        ),
        (
            vec!["run", "--plugin", "host", p],
            "alloc host buffer \"a\": alloc host: out of memory allocating 4294967296 bytes",
        ),
    ] {
        let out = Command::new("sh")
            .arg("-c")
            .arg("ulimit -v 3145728 && exec \"$0\" \"$@\"")
            .arg(BIN)
            .args(&args)
            .env("OFFLOAD_SCHED_MEMORY_LIMIT", "none")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(
            out.status.code(),
            Some(1),
            "{args:?}: {:?} {err}",
            out.status
        );
        assert_eq!(err, format!("{p}: error: {want}\n"), "{args:?}");
    }
}

/// A `potrf` of a matrix that is not positive definite and a `getrf` with a zero pivot
/// fail while running (LAPACK `info > 0`): the error names the op and region and is
/// located at the region's construct in the graph file (`target = "boom"`, line 10
/// column 10), with its line and a caret, as lowering errors are; also under `--check`
/// and with one issuing thread per stream.
#[test]
fn a_library_failure_while_running_is_located_at_its_region() {
    let d = tmp();
    for (kernel, args, fill, lapack) in [
        (
            "potrf",
            "[\"L\", 2, \"y\", 2]",
            "-1.0",
            "dpotrf: the matrix is not positive definite (LAPACK info = 1",
        ),
        (
            "getrf",
            "[2, 2, \"y\", 2]",
            "0.0",
            "dgetrf (no pivoting): zero pivot U(1,1) (LAPACK info = 1)",
        ),
    ] {
        let text = format!(
            "name = \"bad\"\n\n[[buffer]]\nname = \"y\"\ntype = \"f64\"\nlen = 4\n\
             init = {{ fill = {fill} }}\n\n[[body]]\ntarget = \"boom\"\nkernel = \"{kernel}\"\n\
             args = {args}\nmap = [\"tofrom: y\"]\n"
        );
        let path = d.path().join(format!("{kernel}.toml"));
        std::fs::write(&path, text).unwrap();
        let p = path.to_str().unwrap();
        for extra in [&[][..], &["--check"], &["--issue", "per-stream"]] {
            let mut args = vec!["run", p, "--plugin", "host"];
            args.extend_from_slice(extra);
            let err = fails(&args);
            assert!(
                err.starts_with(&format!(
                    "{p}:10:10: error: op #2 (kernel {kernel}) in region \"boom\": "
                )),
                "{args:?}: {err}"
            );
            assert!(err.contains(lapack), "{args:?}: {err}");
            assert!(
                err.contains("\n10 | target = \"boom\"\n   |          ^^^^^^\n"),
                "{args:?}: {err}"
            );
        }
    }
}
