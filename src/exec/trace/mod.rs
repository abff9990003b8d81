//! Chrome / Perfetto trace of what actually ran (Trace Event Format, JSON object form:
//! `{"traceEvents": [...], "displayTimeUnit": "ns"}`; open in `ui.perfetto.dev` or
//! `chrome://tracing`).
//!
//! One process (`pid` 1, named after the graph); one track per stream (`tid` = stream
//! index + 1, named `s0 (device 0)`) and one for the host (`tid` 0, named `host`). Each
//! op is an `"X"` (complete) event with `ts`/`dur` in µs, `name` = [`OpGraph::describe`],
//! `cat` = the op kind, and `args` giving the op id, region and issue time.

use super::Report;
use crate::lower::OpGraph;
use serde_json::{json, Value};
use std::path::Path;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum TraceError {
    #[error("cannot write trace {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// The trace as a JSON value (see the module docs).
pub fn chrome_trace(report: &Report, graph: &OpGraph) -> Value {
    let mut events = Vec::with_capacity(report.ops.len() + 8);
    events.push(
        json!({"ph": "M", "pid": 1, "tid": 0, "name": "process_name",
        "args": {"name": format!("offload-sched {} ({})", graph.name, report.plugin)}}),
    );
    events.push(
        json!({"ph": "M", "pid": 1, "tid": 0, "name": "thread_name", "args": {"name": "host"}}),
    );
    events.push(json!({"ph": "M", "pid": 1, "tid": 0, "name": "thread_sort_index", "args": {"sort_index": 0}}));
    let mut streams: Vec<(u32, u32)> = report
        .ops
        .iter()
        .filter_map(|t| t.stream.map(|s| (s.0, t.device)))
        .collect();
    streams.sort_unstable();
    streams.dedup_by_key(|s| s.0);
    for (s, device) in streams {
        let tid = s + 1;
        events.push(
            json!({"ph": "M", "pid": 1, "tid": tid, "name": "thread_name",
            "args": {"name": format!("s{s} (device {device})")}}),
        );
        events.push(
            json!({"ph": "M", "pid": 1, "tid": tid, "name": "thread_sort_index",
            "args": {"sort_index": tid}}),
        );
    }
    for t in &report.ops {
        let Some(op) = graph.ops.get(t.op.index()) else {
            continue;
        };
        events.push(json!({
            "ph": "X",
            "pid": 1,
            "tid": t.stream.map_or(0, |s| s.0 + 1),
            "name": graph.describe(t.op),
            "cat": op.kind.name(),
            "ts": t.start_us,
            "dur": (t.end_us - t.start_us).max(0.0),
            "args": {
                "op": t.op.0,
                "region": graph.region_of(t.op).name,
                "issue_us": t.issue_us,
            }
        }));
    }
    json!({ "traceEvents": events, "displayTimeUnit": "ns" })
}

/// Writes [`chrome_trace`] to `path`, all or nothing ([`crate::file::write_atomic`]).
///
/// Errors: [`TraceError::Io`] naming the path.
pub fn write_chrome_trace(report: &Report, graph: &OpGraph, path: &Path) -> Result<(), TraceError> {
    let io = |source| TraceError::Io {
        path: path.display().to_string(),
        source,
    };
    let json = serde_json::to_vec(&chrome_trace(report, graph)).map_err(|e| io(e.into()))?;
    crate::file::write_atomic(path, &json).map_err(io)
}
