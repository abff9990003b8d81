//! Large stream pools: the scheduler's and the verifier's vector clocks have one entry
//! per stream that carries work, so `schedule`, `verify` and `dot` of one region placed
//! over 1024 devices with 128 streams each (131 072 streams) finish at once in a few MiB
//! (they used to take (devices × streams)² entries: a 64 GiB allocation, an abort); a
//! program that really spreads over thousands of streams is refused with the figures
//! when its clocks would not fit the memory limit, before they are allocated; and a
//! short file whose taskgraph unrolls to more ops than memory holds is refused before it
//! is lowered.
#![cfg(target_os = "linux")]

use std::process::Command;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_offload-sched");
const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// Runs the binary under a 3 GiB address-space limit (`ulimit -v`: an allocation past it
/// fails at once, whatever the machine's memory and overcommit).
fn limited(args: &[&str], env: &[(&str, &str)]) -> (std::process::Output, Duration) {
    let t = Instant::now();
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg("ulimit -v 3145728 && exec \"$0\" \"$@\"")
        .arg(BIN)
        .args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    (out, t.elapsed())
}

#[test]
fn one_region_over_131072_streams_schedules_verifies_and_draws_at_once() {
    let g = format!("{ROOT}/graphs/saxpy.toml");
    for cmd in ["schedule", "verify", "dot"] {
        for streams in ["32", "128"] {
            let args = [
                cmd,
                &g,
                "--device",
                "auto",
                "--devices",
                "1024",
                "--streams",
                streams,
            ];
            let (out, took) = limited(&args, &[]);
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{args:?}: {:?} {err}", out.status);
            println!("{args:?}: done in {took:?}");
            let text = String::from_utf8_lossy(&out.stdout);
            if cmd == "schedule" {
                assert!(text.contains("summary: 9 ops, 1 stream,"), "{text}");
            }
        }
    }
}

#[test]
fn clocks_over_the_memory_limit_are_refused_with_the_figures() {
    // 2400 independent nowait regions placed over 1024 devices × 4 streams: about 2400
    // streams carry work, ~200 MiB of clocks at most; under a 64 MiB limit: refused.
    let d = tempfile::tempdir().unwrap();
    let mut text = String::from("name = \"wide\"\n");
    for i in 0..2400 {
        text.push_str(&format!(
            "[[buffer]]\nname = \"x{i}\"\ntype = \"f32\"\nlen = 4\ninit = \"iota\"\n"
        ));
    }
    for i in 0..2400 {
        text.push_str(&format!(
            "[[body]]\ntarget = \"r{i}\"\nkernel = \"increment\"\nargs = [\"x{i}\"]\n\
             map = [\"tofrom: x{i}\"]\nnowait = true\n"
        ));
    }
    let path = d.path().join("wide.toml");
    std::fs::write(&path, text).unwrap();
    let p = path.to_str().unwrap();
    for cmd in ["schedule", "verify", "dot"] {
        let args = [cmd, p, "--device", "auto", "--devices", "1024"];
        let (out, took) = limited(&args, &[("OFFLOAD_SCHED_MEMORY_LIMIT", "64MiB")]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(out.stdout.is_empty());
        assert!(
            err.starts_with(&format!("error: {p}: not enough host memory to schedule: ")),
            "{err}"
        );
        assert!(
            err.contains("streams that carry work (1024 devices, 4 streams each); 64 MiB available (OFFLOAD_SCHED_MEMORY_LIMIT)"),
            "{err}"
        );
        println!("{args:?}: refused in {took:?}");
    }
}

#[test]
fn a_taskgraph_too_big_for_memory_is_refused_before_lowering_at_its_line() {
    // 238 bytes: 2.5 million executions of a two-map region, about 22.5 million ops.
    // It used to be lowered until an allocation failed (under `ulimit -v`: an abort).
    let d = tempfile::tempdir().unwrap();
    let text = "name = \"tg\"\n[[buffer]]\nname = \"a\"\ntype = \"f32\"\nlen = 16\n\
                [[buffer]]\nname = \"b\"\ntype = \"f32\"\nlen = 16\n[[body]]\n\
                taskgraph = \"t\"\nrepeat = 2500000\n[[body.body]]\ntarget = \"r\"\n\
                kernel = \"saxpy\"\nargs = [2.0, \"a\", \"b\"]\n\
                map = [\"to: a\", \"tofrom: b\"]\n";
    let path = d.path().join("tg.toml");
    std::fs::write(&path, text).unwrap();
    let p = path.to_str().unwrap();
    for cmd in ["schedule", "verify", "dot", "run"] {
        let (out, _) = limited(&[cmd, p], &[("OFFLOAD_SCHED_MEMORY_LIMIT", "2GiB")]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{cmd}: {err}");
        assert!(out.stdout.is_empty(), "{cmd}");
        assert!(
            err.starts_with(&format!(
                "{p}:11:13: error: taskgraph \"t\": repeat = 2500000: lowering needs about \
                 21.5 GiB of host memory for the op graph and its schedule (at most 22500000 \
                 ops at 1024 B each); 2 GiB available (OFFLOAD_SCHED_MEMORY_LIMIT); nothing \
                 was lowered"
            )),
            "{cmd}: {err}"
        );
    }
}
