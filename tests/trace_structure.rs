//! The `--trace` of a run on the host plugin: its tracks, the flows from event records
//! and stream ends to what waited on them, host-wait slices named by what they waited
//! for, setup and teardown, the critical path, and the bytes-in-flight counters; and a
//! snapshot of its structure (times left out) for two graphs with cross-stream events and
//! host waits.

mod common;

use offload_sched::exec::{IssueMode, Report};
use offload_sched::lower::{OpGraph, OpKind};
use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
use offload_sched::schedule::ScheduleOptions;
use offload_sched::timeline;
use offload_sched::Plan;
use serde_json::Value;
use std::collections::BTreeMap;

fn traced(name: &str, issue: IssueMode) -> (Plan, Report, Vec<Value>) {
    let plan = Plan::from_file(common::graph_path(name), &ScheduleOptions::default()).unwrap();
    let r = plan
        .run_with(&HostPlugin::new(HostPluginOptions::default()), issue)
        .unwrap();
    let v = timeline::trace::chrome_trace(&r, plan.graph(), plan.schedule());
    let events = v["traceEvents"].as_array().unwrap().clone();
    (plan, r, events)
}

fn f(e: &Value, key: &str) -> f64 {
    e[key].as_f64().unwrap_or_else(|| panic!("{key} of {e}"))
}

/// Track names by tid.
fn tracks(events: &[Value]) -> BTreeMap<u64, String> {
    events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| {
            let name = e["args"]["name"].as_str().unwrap().to_string();
            (e["tid"].as_u64().unwrap(), name)
        })
        .collect()
}

/// The `X` slice of op `op` on the host or a stream track.
fn op_slice(events: &[Value], op: u32) -> &Value {
    let found: Vec<&Value> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] != "critical path" && e["args"]["op"] == op)
        .collect();
    assert_eq!(found.len(), 1, "one slice of op #{op}");
    found[0]
}

/// The host-wait slice named `name`.
fn wait_slice<'a>(events: &'a [Value], name: &str) -> &'a Value {
    let found: Vec<&Value> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "host wait" && e["name"] == name)
        .collect();
    assert_eq!(found.len(), 1, "one host wait {name}");
    found[0]
}

fn encloses(slice: &Value, e: &Value) -> bool {
    let (ts, at) = (f(slice, "ts"), f(e, "ts"));
    slice["tid"] == e["tid"] && ts <= at && at <= ts + f(slice, "dur")
}

/// What a flow's target is, in the expectations: an op or a host wait (by name).
#[derive(Clone, Copy, Debug)]
enum To {
    Op(u32),
    Wait(&'static str),
}

/// Checks the flows: exactly `want` (via, source op, target), each `s` before its `f`,
/// inside the source op's slice, and the `f` inside the target's slice.
fn check_flows(events: &[Value], want: &[(&str, u32, To)]) {
    let starts: BTreeMap<u64, &Value> = events
        .iter()
        .filter(|e| e["ph"] == "s")
        .map(|e| (e["id"].as_u64().unwrap(), e))
        .collect();
    let ends: BTreeMap<u64, &Value> = events
        .iter()
        .filter(|e| e["ph"] == "f")
        .map(|e| (e["id"].as_u64().unwrap(), e))
        .collect();
    assert_eq!(
        starts.keys().collect::<Vec<_>>(),
        ends.keys().collect::<Vec<_>>()
    );
    assert_eq!(starts.len(), want.len(), "flows: {starts:?}");
    for (k, &(via, from, to)) in want.iter().enumerate() {
        let id = k as u64 + 1;
        let (s, e) = (starts[&id], ends[&id]);
        assert_eq!(
            (s["name"].as_str(), e["name"].as_str()),
            (Some(via), Some(via))
        );
        assert_eq!(e["bp"], "e", "{e}");
        assert!(
            f(s, "ts") <= f(e, "ts"),
            "flow {id} goes back in time: {s} {e}"
        );
        let src = op_slice(events, from);
        assert!(encloses(src, s), "flow {id} start {s} not in {src}");
        let dst = match to {
            To::Op(op) => op_slice(events, op),
            To::Wait(name) => wait_slice(events, name),
        };
        assert!(encloses(dst, e), "flow {id} end {e} not in {dst}");
    }
}

/// Setup, teardown and host waits on the host track, in the order the run made them.
fn check_host_track(events: &[Value], r: &Report, waits: &[&str]) {
    let host: Vec<&Value> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["tid"] == 0)
        .collect();
    let named = |n: &str| -> Vec<&&Value> { host.iter().filter(|e| e["name"] == n).collect() };
    let (setup, teardown) = (named("setup"), named("teardown"));
    assert_eq!((setup.len(), teardown.len()), (1, 1));
    assert_eq!(f(setup[0], "ts"), 0.0);
    let setup_end = f(setup[0], "dur");
    assert!(setup_end > 0.0 && setup_end == r.setup_us);
    let tear = f(teardown[0], "ts");
    assert!((tear + f(teardown[0], "dur") - r.wall_us).abs() < 1e-6);
    for t in &r.ops {
        assert!(t.issue_us >= setup_end, "#{} issued during setup", t.op.0);
    }
    let mut names = Vec::new();
    for w in host.iter().filter(|e| e["cat"] == "host wait") {
        let (ts, dur) = (f(w, "ts"), f(w, "dur"));
        assert!(ts >= setup_end && dur >= 0.0 && ts + dur <= tear, "{w}");
        names.push(w["name"].as_str().unwrap());
    }
    assert_eq!(names, waits);
    assert_eq!(r.counts.host_waits, waits.len());
}

/// Counters: time-ordered, never negative, 0 at the end; the peak per direction.
fn check_counters(events: &[Value], peak_h2d: u64, peak_d2h: u64) {
    let c: Vec<&Value> = (events.iter())
        .filter(|e| e["ph"] == "C" && e["name"] == "bytes in flight")
        .collect();
    assert!(!c.is_empty());
    assert!(c.windows(2).all(|w| f(w[0], "ts") < f(w[1], "ts")));
    let series = |k: &str| -> Vec<i64> {
        c.iter()
            .map(|e| e["args"][k].as_i64().unwrap_or_else(|| panic!("{e}")))
            .collect()
    };
    for (k, peak) in [("H2D", peak_h2d), ("D2H", peak_d2h)] {
        let v = series(k);
        assert!(v.iter().all(|&x| x >= 0), "{k}: {v:?}");
        assert_eq!(v.last().copied().unwrap_or(0), 0, "{k}: {v:?}");
        assert_eq!(
            v.iter().copied().max().unwrap_or(0),
            peak as i64,
            "{k}: {v:?}"
        );
    }
}

/// The `bytes moved` counter: running totals per direction, never falling, ending at the
/// graph's [`BytesMoved`](offload_sched::lower::BytesMoved) copies (every copy of the host
/// plugin is timed); the `bytes elided` counter: the graph's elided figures at 0 and at
/// the run's end. No other counter.
fn check_moved(events: &[Value], g: &OpGraph, r: &Report) {
    let named = |n: &str| -> Vec<&Value> {
        (events.iter())
            .filter(|e| e["ph"] == "C" && e["name"] == n)
            .collect()
    };
    let m = g.bytes_moved();
    let moved = named("bytes moved");
    assert!(moved.windows(2).all(|w| f(w[0], "ts") < f(w[1], "ts")));
    for (k, want) in [("H2D", m.h2d), ("D2H", m.d2h), ("peer", m.peer)] {
        let v: Vec<u64> = moved
            .iter()
            .map(|e| e["args"][k].as_u64().unwrap())
            .collect();
        assert!(v.windows(2).all(|w| w[0] <= w[1]), "{k}: {v:?}");
        assert_eq!(v.last().copied().unwrap_or(0), want, "{k}: {v:?}");
    }
    let elided = named("bytes elided");
    assert_eq!(elided.len(), 2);
    assert_eq!((f(elided[0], "ts"), f(elided[1], "ts")), (0.0, r.wall_us));
    for e in elided {
        assert_eq!(
            e["args"],
            serde_json::json!({"H2D elided": m.elided_h2d, "D2H dropped": m.d2h_dropped,
                "D2H deferred": m.d2h_deferred, "evicted": m.evicted,
                "prefetched": m.prefetched})
        );
    }
    let others = (events.iter()).filter(|e| {
        e["ph"] == "C"
            && !["bytes in flight", "bytes moved", "bytes elided"]
                .contains(&e["name"].as_str().unwrap())
    });
    assert_eq!(others.count(), 0);
}

/// With elision, the counters of a blocked matmul give what it copied and left out.
#[test]
fn the_byte_counters_give_what_was_moved_and_elided() {
    let (plan, r, events) = traced("matmul_small.toml", IssueMode::Serial);
    let m = plan.graph().bytes_moved();
    // 48 tiles of 1 KiB in once, 16 C tiles back once; the rest of the mapping rules'
    // 192 + 64 copies left out.
    assert_eq!((m.h2d, m.d2h), (48 << 10, 16 << 10));
    assert_eq!((m.elided_h2d, m.d2h_dropped), (144 << 10, 48 << 10));
    check_moved(&events, plan.graph(), &r);
}

/// The critical-path track holds overlap()'s path (markers left out), each op at its own
/// time, consecutive ops joined by an edge of the graph.
fn check_critical_path(events: &[Value], g: &OpGraph, r: &Report, sched_streams: usize) {
    let tid = sched_streams as u64 + 1;
    assert_eq!(tracks(events)[&tid], "critical path");
    let on: Vec<&Value> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["tid"] == tid)
        .collect();
    let o = timeline::overlap(g, r).unwrap();
    let want: Vec<u32> = (o.critical_ops.iter())
        .filter(|&&op| !matches!(g.op(op).kind, OpKind::Taskwait | OpKind::End))
        .map(|op| op.0)
        .collect();
    let got: Vec<u32> = on
        .iter()
        .map(|e| e["args"]["op"].as_u64().unwrap() as u32)
        .collect();
    assert_eq!(got, want);
    assert!(!got.is_empty());
    for w in got.windows(2) {
        let to = offload_sched::lower::OpId(w[1]);
        assert!(g.preds(to).iter().any(|p| p.0 == w[0]), "{w:?} not an edge");
    }
    for e in on {
        let op = op_slice(events, e["args"]["op"].as_u64().unwrap() as u32);
        assert_eq!((f(e, "ts"), f(e, "dur")), (f(op, "ts"), f(op, "dur")));
        assert_eq!(e["args"]["path_us"].as_f64(), Some(o.critical_path_us));
    }
}

#[test]
fn cross_stream_events_and_a_stream_host_wait() {
    // case_e02: K2, K3 (and the alloc of sum) on s1..s3 each record an event; s0 waits
    // on all three before K4a; the host waits for s0 at the end.
    for issue in [IssueMode::Serial, IssueMode::PerStream] {
        let (plan, r, events) = traced("case_e02.toml", issue);
        check_flows(
            &events,
            &[
                ("e0", 4, To::Op(7)),
                ("e1", 5, To::Op(7)),
                ("e2", 6, To::Op(7)),
                ("s0", 10, To::Wait("wait s0 (after #10)")),
            ],
        );
        check_host_track(&events, &r, &["wait s0 (after #10)"]);
        check_counters(&events, 0, 1 << 20);
        check_moved(&events, plan.graph(), &r);
        check_critical_path(&events, plan.graph(), &r, plan.schedule().streams.len());
    }
}

#[test]
fn event_host_wait_and_stream_host_wait() {
    // case_d04: the host waits on e0 (after the H2D #2) before overwriting H, then on s0.
    let (plan, r, events) = traced("case_d04.toml", IssueMode::Serial);
    check_flows(
        &events,
        &[
            ("e0", 2, To::Wait("wait e0 (after #2)")),
            ("s0", 6, To::Wait("wait s0 (after #6)")),
        ],
    );
    check_host_track(&events, &r, &["wait e0 (after #2)", "wait s0 (after #6)"]);
    check_counters(&events, 4 << 20, 4 << 20);
    check_moved(&events, plan.graph(), &r);
    check_critical_path(&events, plan.graph(), &r, plan.schedule().streams.len());
    // While the H2D ran, its 4 MiB were in flight.
    let h2d = op_slice(&events, 2);
    let mid = f(h2d, "ts") + f(h2d, "dur") / 2.0;
    let at = events
        .iter()
        .rev()
        .find(|e| e["ph"] == "C" && e["name"] == "bytes in flight" && f(e, "ts") <= mid)
        .unwrap();
    assert_eq!(at["args"]["H2D"], 4 << 20, "{at}");
}

/// The trace's structure without times: one sorted line per event, `ph track name`,
/// flows with their id; the critical path's slices (which ops, by measured times) left
/// out.
fn structure(events: &[Value]) -> String {
    let tracks = tracks(events);
    let mut lines: Vec<String> = events
        .iter()
        .filter(|e| e["cat"] != "critical path")
        .map(|e| {
            let track = e["tid"]
                .as_u64()
                .and_then(|t| tracks.get(&t))
                .map_or("-", String::as_str);
            let ph = e["ph"].as_str().unwrap();
            let name = e["name"].as_str().unwrap();
            match ph {
                "M" => format!("M {track} {name} {}", e["args"]),
                "s" | "f" => format!("{ph} {track} flow {} {name}", e["id"]),
                "C" => format!("C {name}"),
                _ => format!("{ph} {track} {name} [{}]", e["cat"].as_str().unwrap()),
            }
        })
        .collect();
    lines.sort();
    lines.join("\n") + "\n"
}

#[test]
fn trace_structure_snapshots() {
    for name in ["case_e02", "case_d04"] {
        let (_, _, events) = traced(&format!("{name}.toml"), IssueMode::Serial);
        insta::assert_snapshot!(format!("trace_{name}"), structure(&events));
    }
}

/// Every flow of every graph's trace (host plugin, delays as they come, serial and
/// per-stream issue) starts inside a slice of its track, ends inside one, and never goes
/// back in time. fanout's waits are followed by an alloc on the waiting stream, which the
/// host plugin times at issue, before the wait is met: a flow ending there went back in
/// time and its start was drawn where the stream showed nothing.
#[test]
fn every_flow_runs_forward_between_slices() {
    for name in [
        "fanout.toml",
        "case_e02.toml",
        "pipeline.toml",
        "case_d04.toml",
        "jacobi.toml",
    ] {
        for issue in [IssueMode::Serial, IssueMode::PerStream] {
            let (_, _, events) = traced(name, issue);
            let slices: Vec<&Value> = events
                .iter()
                .filter(|e| e["ph"] == "X" && e["cat"] != "critical path")
                .collect();
            let inside = |e: &Value| slices.iter().any(|s| encloses(s, e));
            let ends: BTreeMap<u64, &Value> = events
                .iter()
                .filter(|e| e["ph"] == "f")
                .map(|e| (e["id"].as_u64().unwrap(), e))
                .collect();
            let mut flows = 0;
            for s in events.iter().filter(|e| e["ph"] == "s") {
                let e = ends[&s["id"].as_u64().unwrap()];
                assert!(f(s, "ts") <= f(e, "ts"), "{name} {issue:?}: {s} {e}");
                assert!(inside(s), "{name} {issue:?}: start {s} in no slice");
                assert!(inside(e), "{name} {issue:?}: end {e} in no slice");
                flows += 1;
            }
            assert!(flows > 0 || name == "jacobi.toml", "{name}: no flows");
        }
    }
}

#[test]
fn with_several_host_lanes_each_lane_has_its_track_with_its_host_ops_and_waits() {
    let opts = ScheduleOptions {
        host_lanes: 2,
        ..ScheduleOptions::default()
    };
    let plan = Plan::from_file(common::graph_path("batch_host_consumers.toml"), &opts).unwrap();
    let (g, s) = (plan.graph(), plan.schedule());
    let r = plan
        .run_with(
            &HostPlugin::new(HostPluginOptions::default()),
            IssueMode::Serial,
        )
        .unwrap();
    let events = timeline::trace::chrome_trace(&r, g, s)["traceEvents"]
        .as_array()
        .unwrap()
        .clone();
    let t = tracks(&events);
    let h0 = timeline::trace::lane_tid(s, 0) as u64;
    let h1 = timeline::trace::lane_tid(s, 1) as u64;
    assert_eq!(t[&h0], "host lane h0");
    assert_eq!(t[&h1], "host lane h1");
    // Every host task is on its lane's track; the 8 consumers spread over both.
    let mut per_lane = [0, 0];
    for o in g
        .op_ids()
        .filter(|&o| matches!(g.op(o).kind, OpKind::HostTask { .. }))
    {
        let lane = s.op_lane[o.index()];
        let tid = op_slice(&events, o.0)["tid"].as_u64().unwrap();
        assert_eq!(
            tid,
            timeline::trace::lane_tid(s, lane) as u64,
            "op #{}",
            o.0
        );
        per_lane[lane as usize] += 1;
    }
    assert_eq!(per_lane, [4, 4]);
    // A host wait a lane runs is on that lane's track.
    let owners = s.wait_owners();
    let lane_waits = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "host wait")
        .filter(|e| {
            let step = e["args"]["step"].as_u64().unwrap() as usize;
            let want = owners[step].map_or(0, |l| timeline::trace::lane_tid(s, l.0) as u64);
            assert_eq!(e["tid"].as_u64().unwrap(), want, "{e}");
            owners[step].is_some()
        })
        .count();
    assert!(lane_waits >= 8, "{lane_waits} lane waits");
}
