//! viz/ is what the graphs draw today: every DOT file under viz/ is regenerated here
//! with the library's DOT functions and compared with the file, so a change to the DOT
//! output or to a graph that leaves viz/ stale fails CI, naming each file.
//!
//! This test is the one list of what viz/ holds; scripts/viz.sh runs it with
//! `UPDATE_VIZ=1` to write the DOT files, then renders each to SVG with Graphviz's `dot`.
//! What viz/ holds, for every graph `graphs/NAME.toml` under the default schedule options
//! (`offload-sched dot FILE`: policy minimal, 4 streams per device):
//! - `NAME.dot`: the default view (`--view auto`: the op view up to 300 ops, the region
//!   view above);
//! - `NAME.regions.dot`: also the region view of each WfCommons workflow whose default
//!   view is the op view (so viz/ holds the region view of every workflow);
//! - `NAME.svg` / `NAME.regions.svg` beside each DOT file (their layout depends on the
//!   Graphviz version, so only their presence is checked).
//!
//! `UPDATE_VIZ=1 cargo test --release --test viz_drift` rewrites the DOT files that
//! differ and removes those no graph makes (with their SVG); refused when `CI` is set.

mod common;

use offload_sched::dot::DotView;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// File-name prefixes of the WfCommons workflows in graphs/ (imported with
/// `offload-sched import wfcommons`), which also get their region view.
const WORKFLOWS: [&str; 4] = ["montage-", "1000genome-", "srasearch-", "helloworld-"];

fn viz_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("viz")
}

/// Every DOT file viz/ should hold: file name → text.
fn expected() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for path in common::graph_files() {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let plan = common::plan(&format!("{name}.toml"));
        let auto = plan.to_dot_view(DotView::Auto);
        let regions_by_default = auto.contains("(regions view)");
        out.insert(format!("{name}.dot"), auto);
        if WORKFLOWS.iter().any(|w| name.starts_with(w)) && !regions_by_default {
            out.insert(
                format!("{name}.regions.dot"),
                plan.to_dot_view(DotView::Regions),
            );
        }
    }
    out
}

/// The files of viz/ with extension `ext`, by name.
fn files(ext: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(viz_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| Path::new(n).extension().is_some_and(|x| x == ext))
        .collect();
    names.sort();
    names
}

/// The first line where `a` and `b` differ (1-based), with both lines.
fn first_difference(a: &str, b: &str) -> String {
    let (mut la, mut lb) = (a.lines(), b.lines());
    for no in 1.. {
        match (la.next(), lb.next()) {
            (None, None) => return "only line endings differ".into(),
            (x, y) if x == y => {}
            (x, y) => {
                return format!(
                    "line {no}: file has {:?}, the graph draws {:?}",
                    x.unwrap_or("(end of file)"),
                    y.unwrap_or("(end of file)")
                )
            }
        }
    }
    unreachable!()
}

#[test]
fn viz_holds_what_the_graphs_draw() {
    let want = expected();
    let dir = viz_dir();
    let update = std::env::var("UPDATE_VIZ").is_ok_and(|v| v == "1");
    let in_ci = std::env::var_os("CI").is_some();
    assert!(
        !(update && in_ci),
        "UPDATE_VIZ=1 is refused in CI (CI is set): regenerate viz/ in a checkout and commit it"
    );
    let mut problems = Vec::new();
    for (name, text) in &want {
        let path = dir.join(name);
        let problem = match std::fs::read_to_string(&path) {
            Ok(have) if have == *text => continue,
            Ok(have) => format!("viz/{name} is stale ({})", first_difference(&have, text)),
            Err(_) => format!("viz/{name} is missing"),
        };
        if update {
            std::fs::write(&path, text).unwrap();
            eprintln!("wrote viz/{name}");
        } else {
            problems.push(problem);
        }
    }
    for name in files("dot") {
        if !want.contains_key(&name) {
            if update {
                std::fs::remove_file(dir.join(&name)).unwrap();
                let _ = std::fs::remove_file(dir.join(&name).with_extension("svg"));
                eprintln!("removed viz/{name} and its SVG");
            } else {
                problems.push(format!("viz/{name} is drawn by no graph of graphs/"));
            }
        }
    }
    // Each DOT file has its SVG and no SVG is left without one (scripts/viz.sh renders
    // them; not checked while updating, before it does).
    if !update {
        let svgs = files("svg");
        for name in want.keys() {
            let svg = Path::new(name).with_extension("svg");
            let svg = svg.to_string_lossy();
            if !svgs.iter().any(|s| *s == svg) {
                problems.push(format!("viz/{svg} is missing"));
            }
        }
        for svg in &svgs {
            let dot = Path::new(svg).with_extension("dot");
            if !want.contains_key(dot.to_string_lossy().as_ref()) {
                problems.push(format!("viz/{svg} has no DOT file"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "viz/ does not hold what the graphs draw ({} problem(s)):\n  {}\n\
         Regenerate with `bash scripts/viz.sh` (DOT and SVG), or the DOT files alone with \
         `UPDATE_VIZ=1 cargo test --release --test viz_drift`, and commit viz/.",
        problems.len(),
        problems.join("\n  ")
    );
    // The list is the graphs of graphs/, plus the workflows' region views.
    assert!(want.len() > common::graph_files().len());
}
