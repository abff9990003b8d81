//! `--device-memory` and `--eviction` end to end (issue 28 point 2): a capped run checked
//! against the reference on the host plugin held to the cap, the refusal of a region
//! over the cap located in the file, and bad sizes and policies refused by the parser.

use std::process::Command;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn run(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_offload-sched"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn graph(name: &str) -> String {
    format!("{ROOT}/graphs/{name}")
}

#[test]
fn a_capped_run_checks_under_both_policies() {
    // cholesky_mapped: 128-byte tiles; a gemm update holds three (384 bytes).
    for policy in ["belady", "lru"] {
        let g = graph("cholesky_mapped.toml");
        let (ok, out, err) = run(&[
            "run",
            &g,
            "--plugin",
            "host",
            "--elide",
            "--check",
            "--device-memory",
            "416",
            "--eviction",
            policy,
            "--delay-jitter",
            "7",
            "--random-streams",
            "3",
            "--repeat",
            "2",
        ]);
        assert!(ok, "{policy}: {err}");
        assert!(out.contains("check: ok (2 run(s)"), "{policy}: {out}");
    }
}

#[test]
fn a_region_over_the_cap_is_refused_at_its_line() {
    let g = graph("cholesky_entered.toml");
    let (ok, out, err) = run(&["schedule", &g, "--elide", "--device-memory", "1KiB"]);
    assert!(!ok && out.is_empty(), "{out}");
    assert!(
        err.contains(
            "cholesky_entered.toml:19:14: error: region \"enter_A\": its working set is 1.2 KiB \
             (1184 bytes) on device 0, over the device memory cap of 1 KiB (1024 bytes)"
        ),
        "{err}"
    );
}

#[test]
fn bad_sizes_and_policies_are_refused() {
    let g = graph("saxpy.toml");
    let (ok, _, err) = run(&["schedule", &g, "--device-memory", "12XB"]);
    assert!(!ok);
    assert!(
        err.contains("invalid value '12XB' for '--device-memory <BYTES>': `12XB` is not a size in bytes above 0"),
        "{err}"
    );
    let (ok, _, err) = run(&["schedule", &g, "--device-memory", "16EiB"]);
    assert!(!ok);
    assert!(
        err.contains(
            "invalid value '16EiB' for '--device-memory <BYTES>': `16EiB` is too large: \
             18446744073709551616 bytes is over the largest size, 18446744073709551615 bytes \
             (2^64 − 1 bytes, 1 byte under 16 EiB)"
        ),
        "{err}"
    );
    let (ok, _, err) = run(&["schedule", &g, "--eviction", "fifo"]);
    assert!(!ok);
    assert!(
        err.contains("unknown eviction policy `fifo` (expected belady or lru)"),
        "{err}"
    );
}

/// The cap is shown where it changes the schedule: `schedule` prints it after `moved:`
/// with the exact peak of live device bytes, and so does the `run` summary; without a
/// cap neither prints the line.
#[test]
fn the_cap_and_the_peak_are_printed_under_a_cap_only() {
    let g = graph("matmul_small.toml");
    let cap = "\ncap: 8 KiB (8192 B) per device; peak live device 0 8 KiB (8192 B)\n";
    let (ok, out, err) = run(&["schedule", &g, "--device-memory", "8KiB"]);
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[1].starts_with("moved: "), "{out}");
    assert_eq!(lines[2], cap.trim(), "{out}");
    let (ok, out, err) = run(&["run", &g, "--plugin", "host", "--device-memory", "8KiB"]);
    assert!(ok, "{err}");
    assert!(out.contains(cap), "{out}");
    for cmd in ["schedule", "run"] {
        let (ok, out, err) =
            run(&[cmd, &g, "--plugin", "host"][..if cmd == "run" { 4 } else { 2 }]);
        assert!(ok, "{err}");
        assert!(!out.contains("\ncap: "), "{out}");
    }
    // The decimal unit is 1000 bytes: a cap of 9 KB = 9000 B.
    let (ok, out, err) = run(&["schedule", &g, "--device-memory", "9KB"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("\ncap: 8.8 KiB (9000 B) per device; peak live device 0 "),
        "{out}"
    );
}

/// `--prefetch` / `--no-prefetch` and `schedule --plugin`: graphs/matmul_small.toml (4×4
/// tiles of 1 KiB each of A, B and C, every tile used by 4 regions, 48 KiB) prefetches by
/// default only under a cap that binds (`Prefetch::CapBinds`): 16 of its 60 KiB of H2D
/// under 16 KiB, where it evicts 12 KiB (those whose alloc waits for no free), on a fifth
/// stream of the pool; none under 1 MiB (nothing evicted), with `--no-prefetch` or
/// without a cap; `--prefetch` forces it (all 48 KiB, under 1 MiB or none). The host
/// plugin reports no free memory, so `--plugin host` leaves the cap as given.
#[test]
fn prefetch_is_on_under_a_binding_cap_and_switched_by_the_flags() {
    let g = graph("matmul_small.toml");
    let cases: [(&[&str], &str, &str); 7] = [
        (
            &["--device-memory", "1MiB"],
            "prefetched 0 B",
            "(pool 4 per device)",
        ),
        (
            &["--device-memory", "16KiB"],
            "evicted 12 KiB, prefetched 16 KiB",
            "(pool 5 per device)",
        ),
        (
            &["--device-memory", "16KiB", "--no-prefetch"],
            "prefetched 0 B",
            "(pool 4 per device)",
        ),
        (&[], "prefetched 0 B", "(pool 4 per device)"),
        (&["--prefetch"], "prefetched 48 KiB", "(pool 5 per device)"),
        (
            &["--device-memory", "1MiB", "--prefetch"],
            "prefetched 48 KiB",
            "(pool 5 per device)",
        ),
        (
            &["--device-memory", "16KiB", "--plugin", "host"],
            "prefetched 16 KiB",
            "(pool 5 per device)",
        ),
    ];
    for (flags, moved, pool) in cases {
        let mut args = vec!["schedule", g.as_str()];
        args.extend_from_slice(flags);
        let (ok, out, err) = run(&args);
        assert!(ok, "{flags:?}: {err}");
        let mut lines = out.lines();
        assert!(lines.next().unwrap().contains(pool), "{flags:?}: {out}");
        assert!(lines.next().unwrap().ends_with(moved), "{flags:?}: {out}");
        let cap = match (flags.contains(&"1MiB"), flags.contains(&"16KiB")) {
            (true, _) => Some("cap: 1 MiB (1048576 B) per device"),
            (_, true) => Some("cap: 16 KiB (16384 B) per device"),
            _ => None,
        };
        match cap {
            Some(c) => assert!(out.contains(c), "{flags:?}: {out}"),
            None => assert!(!out.contains("cap: "), "{flags:?}: {out}"),
        }
    }
    let (ok, _, err) = run(&["schedule", &g, "--prefetch", "--no-prefetch"]);
    assert!(!ok && err.contains("cannot be used with"), "{err}");
}
