//! The `run` command's text: the summary line (counts, wall time), the bytes moved, the
//! overlap line and busy time per stream.

use super::{IssueArg, RunArgs};
use offload_sched::exec;
use offload_sched::lower::OpGraph;
use offload_sched::model::human_bytes;
use offload_sched::schedule::Schedule;
use offload_sched::timeline;

/// The line of bytes moved every report prints ([`offload_sched::lower::BytesMoved`]):
/// `moved: H2D 768 KiB, D2H 256 KiB, peer 0 B; elided H2D 11.2 MiB, D2H 3.8 MiB dropped,
/// 256 KiB deferred; evicted 0 B, prefetched 0 B`. The `schedule` command's second line
/// and the `run` summary's second.
pub(super) fn moved_line(g: &OpGraph) -> String {
    format!("moved: {}", g.bytes_moved())
}

/// The line after [`moved_line`] for a graph lowered under a device memory cap
/// ([`OpGraph::device_memory`]): the cap and, per device, the exact peak of live device
/// bytes over every state an execution can reach
/// ([`offload_sched::verify::peak_live_bytes`]), e.g. `cap: 8 KiB (8192 B) per device;
/// peak live device 0 8 KiB (8192 B)`. `None` without a cap: the peak is a min-cut
/// (`O(V²E)` worst case), computed only where a cap makes it matter.
pub(super) fn cap_line(g: &OpGraph) -> Option<String> {
    let cap = g.device_memory?;
    let both = |b: u64| format!("{} ({b} B)", human_bytes(b));
    let peaks: Vec<String> = (0..g.devices.max(1))
        .map(|d| {
            let peak = offload_sched::verify::peak_live_bytes(g, d).bytes;
            format!("device {d} {}", both(peak))
        })
        .collect();
    Some(format!(
        "cap: {} per device; peak live {}",
        both(cap),
        peaks.join(", ")
    ))
}

pub(super) fn summary(g: &OpGraph, s: &Schedule, r: &exec::Report, args: &RunArgs) -> String {
    let n =
        |count: usize, what: &str| format!("{count} {what}{}", if count == 1 { "" } else { "s" });
    // The program's device regions, then the lowering's write-backs where there are any:
    // `2 regions + 1 writeback`.
    let regions = match g.writeback_regions() {
        0 => n(g.device_regions(), "region"),
        w => format!(
            "{} + {}",
            n(g.device_regions(), "region"),
            n(w, "writeback")
        ),
    };
    let mut t = format!(
        "{}: plugin {}, policy {}: {regions}, {}, {}, {}, {}, wall {:.3} ms{}\n",
        g.name,
        r.plugin,
        s.policy,
        n(r.counts.ops, "op"),
        n(s.used_streams(), "stream"),
        n(r.counts.events_recorded, "event"),
        n(r.counts.host_waits, "host wait"),
        r.wall_us / 1000.0,
        if args.repeat > 1 { " (last run)" } else { "" }
    );
    if r.issue != exec::IssueMode::Serial {
        let (k, g) = (r.issue_threads, r.stream_groups);
        let how = match r.issue {
            exec::IssueMode::PerStream => "one per stream".to_string(),
            _ => n(g, "stream group"),
        };
        t.insert_str(
            t.len() - 1,
            &format!(", issued by {} ({how})", n(k, "thread")),
        );
    } else if matches!(args.issue, IssueArg::PerGroup) {
        // Asked for per-group issue, but events join every stream into one group.
        t.insert_str(
            t.len() - 1,
            ", issued serially (the streams form 1 stream group)",
        );
    }
    t.push_str(&moved_line(g));
    t.push('\n');
    if let Some(cap) = cap_line(g) {
        t.push_str(&cap);
        t.push('\n');
    }
    t.push_str(&overlap_line(g, r, s.streams.len(), s.host_lanes as usize));
    if args.check {
        t.push_str(&format!(
            "check: ok ({} run(s), every buffer equals the sequential reference)\n",
            args.repeat
        ));
    }
    if args.compare_host {
        t.push_str(&format!(
            "compare-host: ok ({} run(s), every buffer equals the host plugin's)\n",
            args.repeat
        ));
    }
    t
}

/// The summary's overlap lines (see [`timeline::overlap`]): `span 3.40 s, critical path
/// 3.10 s (1.10×), overlap 2.7`, where the ratio is span / critical path and overlap the
/// busy time of the streams and the host summed, over the span; then `busy s0 3.10 s,
/// s1 2.00 s, host 0.0 µs; 2+ lanes busy 61% of the span`. `n/a` where the plugin did
/// not time copies and kernels (the CUDA plugin without `--trace`, the null plugin). After the critical
/// path, the tighter of two lower bounds when it exceeds the critical path: the work on
/// `streams` streams ([`timeline::Overlap::stream_bound_us`]) and the host tasks on
/// `host_lanes` lanes ([`timeline::Overlap::host_lane_bound_us`]), e.g. `bound on 2 host
/// lanes 180.00 ms (1.05×)`.
fn overlap_line(g: &OpGraph, r: &exec::Report, streams: usize, host_lanes: usize) -> String {
    let Some(o) = timeline::overlap(g, r) else {
        if r.replay.is_some() {
            // A plan with a taskgraph: its graphs ran, not one op at a time.
            return "critical path n/a (replayed as graphs: ops are not timed one by one)\n"
                .to_string();
        }
        if r.plugin == "null" {
            // Nothing ran: --trace would not help.
            return "critical path n/a (the null plugin does no work: nothing is timed)\n"
                .to_string();
        }
        return "critical path n/a (copies and kernels were not timed; run with --trace)\n"
            .to_string();
    };
    let ratio = o
        .span_per_critical_path()
        .map_or(String::new(), |x| format!(" ({x:.2}×)"));
    let overlap = o.overlap().map_or("n/a".to_string(), |x| format!("{x:.2}"));
    // With few streams or host lanes the work, not the critical path, bounds the span.
    let (on_streams, on_lanes) = (o.stream_bound_us(streams), o.host_lane_bound_us(host_lanes));
    let (bound, on) = match on_lanes > on_streams {
        true => (
            on_lanes,
            format!(
                "{host_lanes} host lane{}",
                if host_lanes == 1 { "" } else { "s" }
            ),
        ),
        false => (on_streams, format!("{streams} streams")),
    };
    let bound = if bound > o.critical_path_us && o.span_us > 0.0 {
        format!(
            ", bound on {on} {} ({:.2}×)",
            human_us(bound),
            o.span_us / bound
        )
    } else {
        String::new()
    };
    let mut busy: Vec<String> = (o.busy_us.iter())
        .map(|(s, us)| format!("{s} {}", human_us(*us)))
        .collect();
    busy.push(format!("host {}", human_us(o.host_busy_us)));
    let concurrent = o
        .concurrent_share()
        .map_or("n/a".to_string(), |x| format!("{:.0}%", x * 100.0));
    format!(
        "span {}, critical path {}{ratio}{bound}, overlap {overlap}\n\
         busy {}; 2+ lanes busy {concurrent} of the span\n",
        human_us(o.span_us),
        human_us(o.critical_path_us),
        busy.join(", ")
    )
}

/// A duration given in µs: in µs with one decimal below 1 ms, else in ms or s with two.
fn human_us(us: f64) -> String {
    if us < 1e3 {
        format!("{us:.1} µs")
    } else if us < 1e6 {
        format!("{:.2} ms", us / 1e3)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use offload_sched::exec::{OpTime, Report};
    use offload_sched::lower::{AllocId, Op, OpId, OpKind, RegionId};
    use offload_sched::model::{BufferId, Section};
    use offload_sched::schedule::StreamId;

    #[test]
    fn human_us_units() {
        assert_eq!(human_us(0.0), "0.0 µs");
        assert_eq!(human_us(999.94), "999.9 µs");
        assert_eq!(human_us(31_204.0), "31.20 ms");
        assert_eq!(human_us(3_400_000.0), "3.40 s");
    }

    #[test]
    fn overlap_line_with_and_without_timing() {
        // alloc -> h2d on one stream.
        let mut g = OpGraph::new("t", Vec::new(), Vec::new(), 1);
        let section = Section {
            buf: BufferId(0),
            lo: 0,
            len: 1,
        };
        for (kind, preds) in [
            (OpKind::Alloc { alloc: AllocId(0) }, vec![]),
            (
                OpKind::H2D {
                    alloc: AllocId(0),
                    section,
                },
                vec![OpId(0)],
            ),
        ] {
            let region = RegionId(0);
            g.push_op(
                Op {
                    kind,
                    region,
                    device: 0,
                },
                preds,
            );
        }
        let time = |op: u32, start: f64, end: f64, timed: bool| OpTime {
            op: OpId(op),
            stream: Some(StreamId(0)),
            device: 0,
            issue_us: start,
            start_us: start,
            end_us: end,
            timed,
            batch: 0,
        };
        let mut r = Report {
            plugin: "test".into(),
            ops: vec![time(0, 0.0, 1_000.0, true), time(1, 2_000.0, 4_000.0, true)],
            wall_us: 5_000.0,
            ..Report::default()
        };
        assert_eq!(
            overlap_line(&g, &r, 4, 1),
            "span 4.00 ms, critical path 3.00 ms (1.33×), overlap 0.75\n\
             busy s0 3.00 ms, host 0.0 µs; 2+ lanes busy 0% of the span\n"
        );
        // The CUDA plugin without --trace: the copy carries its issue time.
        r.ops[1] = time(1, 2_000.0, 2_000.0, false);
        assert_eq!(
            overlap_line(&g, &r, 4, 1),
            "critical path n/a (copies and kernels were not timed; run with --trace)\n"
        );
        // The null plugin times nothing, with or without --trace.
        r.plugin = "null".into();
        assert_eq!(
            overlap_line(&g, &r, 4, 1),
            "critical path n/a (the null plugin does no work: nothing is timed)\n"
        );
    }

    #[test]
    fn overlap_line_names_the_host_lane_bound_when_it_is_the_tightest() {
        // A 10 µs alloc, then two 20 µs host tasks that both need it.
        let mut g = OpGraph::new("t", Vec::new(), Vec::new(), 1);
        let host = || OpKind::HostTask {
            reads: Vec::new(),
            writes: Vec::new(),
            call: None,
            body: None,
        };
        for (kind, preds) in [
            (OpKind::Alloc { alloc: AllocId(0) }, vec![]),
            (host(), vec![OpId(0)]),
            (host(), vec![OpId(0)]),
        ] {
            let op = Op {
                kind,
                region: RegionId(0),
                device: 0,
            };
            g.push_op(op, preds);
        }
        let time = |op: u32, stream: Option<StreamId>, start: f64, end: f64| OpTime {
            op: OpId(op),
            stream,
            device: 0,
            issue_us: start,
            start_us: start,
            end_us: end,
            timed: true,
            batch: 0,
        };
        let r = Report {
            plugin: "test".into(),
            ops: vec![
                time(0, Some(StreamId(0)), 0.0, 10.0),
                time(1, None, 10.0, 30.0),
                time(2, None, 30.0, 50.0),
            ],
            wall_us: 60.0,
            ..Report::default()
        };
        // One lane: ready at 10 µs, then 40 µs of host work: 50 µs, above the critical
        // path (30 µs) and the work on 4 streams (10 µs spread, so the critical path).
        assert_eq!(
            overlap_line(&g, &r, 4, 1),
            "span 50.0 µs, critical path 30.0 µs (1.67×), bound on 1 host lane 50.0 µs \
             (1.00×), overlap 1.00\n\
             busy s0 10.0 µs, host 40.0 µs; 2+ lanes busy 0% of the span\n"
        );
        // Two lanes: 10 + 40 / 2 = 30 µs, no more than the critical path: no bound.
        assert_eq!(
            overlap_line(&g, &r, 4, 2),
            "span 50.0 µs, critical path 30.0 µs (1.67×), overlap 1.00\n\
             busy s0 10.0 µs, host 40.0 µs; 2+ lanes busy 0% of the span\n"
        );
        // One stream, one lane: the stream bound is 30 µs, the lane bound still wins.
        assert!(overlap_line(&g, &r, 1, 1).contains(", bound on 1 host lane 50.0 µs"));
    }
}
