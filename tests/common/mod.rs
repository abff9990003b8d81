//! Helpers shared by integration tests (each test file that uses them says `mod common;`).

use offload_sched::lower::{lower, KernelArg, OpGraph, OpKind};
use offload_sched::model::Scalar;
use std::path::PathBuf;

/// Sets every built-in `spin(us)` to 0 µs: the WfCommons graphs spin for their scaled
/// runtimes, which only costs time in tests that check results or cleanup.
pub fn no_spin(g: &mut OpGraph) {
    for op in &mut g.ops {
        if let OpKind::Kernel(call) = &mut op.kind {
            if call.kernel == "spin" {
                for a in &mut call.args {
                    if let KernelArg::Scalar(Scalar::F64(us)) = a {
                        *us = 0.0;
                    }
                }
            }
        }
    }
}

/// Every graph file of `graphs/` (not `graphs/errors/`), sorted, lowered, with
/// [`no_spin`] applied: `(file stem, graph)`.
pub fn graphs_without_spin() -> Vec<(String, OpGraph)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("graphs");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let (_, program) = offload_sched::file::load(&p).unwrap();
            let mut g = lower(&program).unwrap();
            no_spin(&mut g);
            (p.file_stem().unwrap().to_string_lossy().into_owned(), g)
        })
        .collect()
}
