//! Chrome / Perfetto trace of what actually ran (Trace Event Format, JSON object form:
//! `{"traceEvents": [...], "displayTimeUnit": "ns"}`; open in `ui.perfetto.dev` or
//! `chrome://tracing`). Every `ts` and `dur` is in µs since the run started.
//!
//! One process (`pid` 1, named after the graph and the plugin) with these tracks:
//! - **`host`** (`tid` 0):
//!   - `setup` and `teardown` (`cat` `run`): the executor's setup (streams, kernels, host
//!     buffers, events) before the first step, and its teardown (final synchronize, frees,
//!     the plugin's timings matched to ops) after the last;
//!   - host ops (`cat` = the op kind: `host`, `taskwait`, `end`);
//!   - host waits (`cat` `host wait`), the time the host blocked in the plugin's
//!     `synchronize` / `synchronize_event`, named after what they waited for: `wait s1
//!     (after #6)` (a whole stream, whose last op before the wait was #6), `wait e0 (after
//!     #2)` (an event recorded after op #2), `wait device 0`; `args.step` is the step's
//!     index in the schedule.
//! - **`host lane h0`**, … (with more than one host lane, `tid` = [`lane_tid`]): the host
//!   ops of each lane of the schedule ([`Schedule::op_lane`]) and the host waits the lane
//!   runs ([`Schedule::wait_owners`]); the `host` track then keeps setup, teardown and
//!   the issuing thread's own waits. (The executor may run a lane's op on the issuing
//!   thread when that thread awaits it and the lane is idle; the track is the schedule's
//!   lane.)
//! - **`s0 (device 0)`**, … (`tid` = stream index + 1): one `"X"` slice per device op,
//!   `name` = [`OpGraph::describe`], `cat` = the op kind, `args` = op id, region, issue
//!   time (`issue_us`) and whether the plugin measured the op (`timed`; an untimed op
//!   shows its issue time, with `dur` 0). A copy the CUDA plugin moved in a small-copy
//!   batch, timed as one unit with the others of its batch, is named `… · batched copy
//!   (2 of 5)`: every copy of the batch spans the batch's one copy-kernel launch.
//! - **`critical path`** (`tid` = number of schedule streams + 1): the ops of one longest
//!   path through the graph's edges with the measured op times ([`super::overlap()`]), each at its
//!   own time; `args.path_us` is the path's length. Absent when copies or kernels were
//!   not timed.
//! - **flows** (`"ph":"s"` then `"ph":"f"` with `"bp":"e"`, `cat` `wait`, `name` = what
//!   carried the wait: `e3`, `s1`, `device 0`): an arrow from the op before an event
//!   record to the first op after each of its waits on another stream, from the op
//!   before a record to each host wait on that event, and from a stream's last op to each
//!   host wait on the stream (or its device). Read from the schedule's steps
//!   ([`flows`](self)); the `s` sits inside the source slice, the `f` inside the target
//!   slice, never before the `s`.
//! - **`bytes in flight`** (`"ph":"C"`, series `H2D` and `D2H`): the bytes of the timed
//!   copies that had started and not ended, per direction, sampled at each copy's start
//!   and end; never negative, 0 at the end.
//! - **`bytes moved`** (`"ph":"C"`, series `H2D`, `D2H`, `peer`): the running totals of
//!   the timed copies, sampled at each copy's end; the last sample is the run's
//!   [`crate::lower::BytesMoved`] `h2d`, `d2h`, `peer` when every copy was timed.
//! - **`bytes elided`** (`"ph":"C"`, series `H2D elided`, `D2H dropped`, `D2H deferred`,
//!   `evicted`, `prefetched`): what transfer elision saved
//!   ([`crate::lower::BytesMoved`]), constant, sampled at 0 and at the run's end.

mod counters;
mod flows;

use super::overlap;
use crate::exec::{OpTime, Report};
use crate::lower::{OpGraph, OpKind};
use crate::schedule::Schedule;
use serde_json::{json, Value};
use std::path::Path;
use thiserror::Error;

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum TraceError {
    #[error("cannot write trace {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// `tid` of the host track.
pub const HOST_TID: u32 = 0;

/// `tid` of the critical-path track of a run of `sched`: after every stream's.
pub fn critical_path_tid(sched: &Schedule) -> u32 {
    sched.streams.len() as u32 + 1
}

/// `tid` of host lane `lane`'s track: with more than one lane, the tracks after the
/// critical path's (`host lane h0`, `host lane h1`, …); with one lane, the host track.
pub fn lane_tid(sched: &Schedule, lane: u32) -> u32 {
    if sched.host_lanes > 1 {
        critical_path_tid(sched) + 1 + lane
    } else {
        HOST_TID
    }
}

fn track_names(events: &mut Vec<Value>, tid: u32, name: &str) {
    events.push(
        json!({"ph": "M", "pid": 1, "tid": tid, "name": "thread_name",
        "args": {"name": name}}),
    );
    events.push(
        json!({"ph": "M", "pid": 1, "tid": tid, "name": "thread_sort_index",
        "args": {"sort_index": tid}}),
    );
}

/// A slice's `[start, end]` in µs (end never before start).
fn span(t: &OpTime) -> (f64, f64) {
    (t.start_us, t.end_us.max(t.start_us))
}

/// Per report entry, ` · batched copy (n of m)` for a copy timed in a batch of `m`, else
/// empty: `n` counts the consecutive copies of one stream with the same batch size and
/// times (one unit).
fn batch_labels(report: &Report) -> Vec<String> {
    // Per stream: (start, end, m, n) of the unit being counted.
    let mut unit: std::collections::BTreeMap<u32, (f64, f64, u32, u32)> = Default::default();
    report
        .ops
        .iter()
        .map(|t| {
            let Some(s) = t.stream.filter(|_| t.batch > 0 && t.timed) else {
                return String::new();
            };
            let n = match unit.get(&s.0) {
                Some(&(a, b, m, n)) if (a, b, m) == (t.start_us, t.end_us, t.batch) && n < m => {
                    n + 1
                }
                _ => 1,
            };
            unit.insert(s.0, (t.start_us, t.end_us, t.batch, n));
            format!(" · batched copy ({n} of {})", t.batch)
        })
        .collect()
}

/// The trace of `report`, a run of `sched` on `graph`, as a JSON value (see the module
/// docs for its tracks and events).
///
/// Complexity: `O(V + S + n log n)` for `V` ops, `S` steps and `n` report entries.
pub fn chrome_trace(report: &Report, graph: &OpGraph, sched: &Schedule) -> Value {
    let mut events = Vec::with_capacity(3 * report.ops.len() + 16);
    events.push(
        json!({"ph": "M", "pid": 1, "tid": HOST_TID, "name": "process_name",
        "args": {"name": format!("offload-sched {} ({})", graph.name, report.plugin)}}),
    );
    track_names(&mut events, HOST_TID, "host");
    let mut streams: Vec<(u32, u32)> = report
        .ops
        .iter()
        .filter_map(|t| t.stream.map(|s| (s.0, t.device)))
        .collect();
    streams.sort_unstable();
    streams.dedup_by_key(|s| s.0);
    for (s, device) in streams {
        track_names(&mut events, s + 1, &format!("s{s} (device {device})"));
    }
    if sched.host_lanes > 1 {
        for l in 0..sched.host_lanes {
            track_names(&mut events, lane_tid(sched, l), &format!("host lane h{l}"));
        }
    }
    let host_op_tid = |op: usize| lane_tid(sched, sched.op_lane.get(op).copied().unwrap_or(0));
    let owners = sched.wait_owners();
    let wait_tid = |step: usize| match owners.get(step).copied().flatten() {
        Some(l) => lane_tid(sched, l.0),
        None => HOST_TID,
    };
    let run_slice = |name: &str, from: f64, to: f64| {
        json!({"ph": "X", "pid": 1, "tid": HOST_TID, "name": name, "cat": "run",
            "ts": from, "dur": (to - from).max(0.0)})
    };
    events.push(run_slice("setup", 0.0, report.setup_us));
    events.push(run_slice(
        "teardown",
        report.teardown_start_us,
        report.wall_us,
    ));

    // Ops, and where each one is (track and times) for flows.
    let mut at: Vec<Option<(u32, f64, f64)>> = vec![None; graph.ops.len()];
    for (t, batch) in report.ops.iter().zip(batch_labels(report)) {
        let Some(op) = graph.ops.get(t.op.index()) else {
            continue;
        };
        let tid = t
            .stream
            .map_or_else(|| host_op_tid(t.op.index()), |s| s.0 + 1);
        let (start, end) = span(t);
        at[t.op.index()] = Some((tid, start, end));
        events.push(json!({
            "ph": "X",
            "pid": 1,
            "tid": tid,
            "name": format!("{}{batch}", graph.describe(t.op)),
            "cat": op.kind.name(),
            "ts": start,
            "dur": end - start,
            "args": {
                "op": t.op.0,
                "region": graph.region_of(t.op).name,
                "issue_us": t.issue_us,
                "timed": t.timed,
            }
        }));
    }

    // Host waits.
    let waits = flows::waits(graph, sched);
    let mut wait_at = std::collections::BTreeMap::new();
    for w in &report.host_waits {
        let name = waits
            .names
            .get(&w.step)
            .cloned()
            .unwrap_or_else(|| "wait".into());
        let end = w.end_us.max(w.start_us);
        wait_at.insert(w.step, (w.start_us, end));
        events.push(
            json!({"ph": "X", "pid": 1, "tid": wait_tid(w.step), "name": name,
            "cat": "host wait", "ts": w.start_us, "dur": end - w.start_us,
            "args": {"step": w.step}}),
        );
    }

    // Critical path.
    if let Some(o) = overlap(graph, report) {
        let tid = critical_path_tid(sched);
        track_names(&mut events, tid, "critical path");
        for &op in &o.critical_ops {
            let Some((_, start, end)) = at[op.index()] else {
                continue;
            };
            if matches!(graph.op(op).kind, OpKind::Taskwait | OpKind::End) {
                continue;
            }
            events.push(json!({"ph": "X", "pid": 1, "tid": tid,
                "name": graph.describe(op), "cat": "critical path", "ts": start,
                "dur": end - start, "args": {"op": op.0, "path_us": o.critical_path_us}}));
        }
    }

    // Flows: `s` inside the source slice (its middle, or earlier so that it does not
    // come after the `f`), `f` inside the target slice and not before the source's middle.
    let mut id = 0u64;
    for link in &waits.links {
        let Some((from_tid, fs, fe)) = at[link.from.index()] else {
            continue;
        };
        let (to_tid, ts, te) = match link.to {
            flows::Target::Op(op) => match at[op.index()] {
                Some(x) => x,
                None => continue,
            },
            flows::Target::HostWait(step) => match wait_at.get(&step) {
                Some(&(s, e)) => (wait_tid(step), s, e),
                None => continue,
            },
        };
        let mid = fs + (fe - fs) / 2.0;
        let f_ts = mid.clamp(ts, te);
        let s_ts = mid.min(f_ts);
        id += 1;
        events.push(json!({"ph": "s", "id": id, "pid": 1, "tid": from_tid,
            "name": link.via, "cat": "wait", "ts": s_ts}));
        events.push(
            json!({"ph": "f", "bp": "e", "id": id, "pid": 1, "tid": to_tid,
            "name": link.via, "cat": "wait", "ts": f_ts}),
        );
    }

    // Bytes in flight.
    for s in counters::bytes_in_flight(graph, report) {
        events.push(
            json!({"ph": "C", "pid": 1, "tid": HOST_TID, "name": "bytes in flight",
            "ts": s.ts_us, "args": {"H2D": s.h2d, "D2H": s.d2h}}),
        );
    }
    // Bytes moved so far, and what elision saved (the same figures all run long).
    for s in counters::bytes_moved(graph, report) {
        events.push(
            json!({"ph": "C", "pid": 1, "tid": HOST_TID, "name": "bytes moved",
            "ts": s.ts_us, "args": {"H2D": s.h2d, "D2H": s.d2h, "peer": s.peer}}),
        );
    }
    let m = graph.bytes_moved();
    for ts in [0.0, report.wall_us] {
        events.push(
            json!({"ph": "C", "pid": 1, "tid": HOST_TID, "name": "bytes elided",
            "ts": ts, "args": {"H2D elided": m.elided_h2d, "D2H dropped": m.d2h_dropped,
            "D2H deferred": m.d2h_deferred, "evicted": m.evicted,
            "prefetched": m.prefetched}}),
        );
    }
    json!({ "traceEvents": events, "displayTimeUnit": "ns" })
}

/// Writes [`chrome_trace`] to `path`, all or nothing ([`crate::file::write_atomic`]).
///
/// Errors: [`TraceError::Io`] naming the path.
pub fn write_chrome_trace(
    report: &Report,
    graph: &OpGraph,
    sched: &Schedule,
    path: &Path,
) -> Result<(), TraceError> {
    let io = |source| TraceError::Io {
        path: path.display().to_string(),
        source,
    };
    let json = serde_json::to_vec(&chrome_trace(report, graph, sched)).map_err(|e| io(e.into()))?;
    crate::file::write_atomic(path, &json).map_err(io)
}
