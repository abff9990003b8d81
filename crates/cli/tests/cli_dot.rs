//! `dot --view`: each view through the built binary, `auto` by op count, `-o` as stdout.

use offload_sched::dot::{DotView, AUTO_REGION_VIEW_OPS};
use offload_sched::schedule::ScheduleOptions;
use offload_sched::Plan;
use std::process::Command;

/// The repository root (graphs/).
const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn graph(name: &str) -> String {
    format!("{ROOT}/graphs/{name}")
}

/// `offload-sched ARGS`'s stdout, after asserting it succeeded.
fn ok(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_offload-sched"))
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {err}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn each_view_is_the_library_s() {
    for name in ["saxpy.toml", "montage-2mass-005d.toml"] {
        let g = graph(name);
        // The CLI's host lanes default to the machine's.
        let opts = ScheduleOptions {
            host_lanes: offload_sched::schedule::default_host_lanes(),
            ..ScheduleOptions::default()
        };
        let plan = Plan::from_file(&g, &opts).unwrap();
        for view in DotView::ALL {
            let text = ok(&["dot", &g, "--view", view.name()]);
            assert_eq!(text, plan.to_dot_view(view), "{name} --view {view}");
        }
        // The default is auto.
        assert_eq!(ok(&["dot", &g]), plan.to_dot_view(DotView::Auto), "{name}");
    }
    // auto: the op view of a small graph (unchanged from before views), the region view
    // of a large one.
    let small = ok(&["dot", &graph("saxpy.toml")]);
    assert_eq!(small, ok(&["dot", &graph("saxpy.toml"), "--view", "ops"]));
    assert!(small.contains("subgraph cluster_s0 {"));
    let large = ok(&["dot", &graph("montage-2mass-005d.toml")]);
    assert!(large.contains("policy=minimal (regions view)"), "{large}");
}

#[test]
fn view_and_output_together() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("f.dot");
    let g = graph("fanout.toml");
    let printed = ok(&["dot", &g, "--view", "streams", "--policy", "per-region"]);
    let o = out.to_str().unwrap();
    let args = [
        "dot",
        &g,
        "--view",
        "streams",
        "--policy",
        "per-region",
        "-o",
        o,
    ];
    assert_eq!(ok(&args), "");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), printed);
    assert!(printed.contains("rankdir=LR;"));
}

#[test]
fn a_bad_view_is_refused_and_help_names_the_views() {
    let out = Command::new(env!("CARGO_BIN_EXE_offload-sched"))
        .args(["dot", &graph("saxpy.toml"), "--view", "tree"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("possible values: ops, regions, streams, auto"),
        "{err}"
    );
    let help = ok(&["dot", "--help"]);
    assert!(help.contains("--view <VIEW>"), "{help}");
    // The help states the auto threshold; keep it in step with the library.
    assert!(
        help.contains(&format!("regions above {AUTO_REGION_VIEW_OPS} ops")),
        "{help}"
    );
    assert!(help.contains("[default: auto]"), "{help}");
}
