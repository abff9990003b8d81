//! The op view ([`DotView::Ops`](super::DotView::Ops)): one node per op, one cluster per
//! stream, event waits as dashed edges, a node per host wait.
//!
//! ```text
//! digraph "saxpy" {
//!   subgraph cluster_s0 {                 // one per used stream, label "s0 (device 0)"
//!     op0 [label="#0 alloc x[0:1024] 4 KiB\nregion \"saxpy\"", shape=note, ...];
//!     ...
//!   }
//!   subgraph cluster_host {               // host ops and host waits, in host order
//!     hw0 [label="host wait s0", shape=doublecircle];
//!     op6 [label="#6 end", shape=doubleoctagon];
//!   }
//!   op0 -> op1;                           // stream order (solid)
//!   op3 -> op9 [style=dashed, label="e0"];  // event: recorded after op3, waited before op9
//!   op5 -> hw0 [style=bold];              // host wait on the stream whose last op is op5
//!   hw0 -> op6;                           // host order
//!   op6 -> op7 [style=dotted];            // issue order: host op before later device ops
//! }
//! ```
//!
//! What is drawn, and why: the edges that make the schedule correct, not the whole
//! OpGraph. Within a stream, consecutive ops in issue order (stream order covers every
//! OpGraph edge between them). Across streams, one dashed edge per event wait, from the
//! op after which the event was recorded to the first op issued on the waiting stream
//! after the wait (`cuStreamWaitEvent` orders everything issued later). For the host,
//! each host wait is a node (`hwK`, numbered in issue order) with an edge from the last
//! op issued to the waited stream (for a device-wide wait, from the last op of each of
//! the device's streams), and host ops and host waits are chained in host order. A host
//! op also gets a dotted edge to the next op issued on each stream after it, since the
//! host issues in program order.
//!
//! Ids are stable: `opN` is op `#N` of the OpGraph, `hwK` the `K`-th host wait; output
//! depends only on the graph and the schedule (no addresses, no hash-map order).
//!
//! Node shape by op kind: alloc `note`, h2d `box`, kernel `ellipse`, d2h rounded `box`,
//! free `invhouse`, host task `hexagon`, taskwait `octagon`, end `doubleoctagon`, host
//! wait `doublecircle`. Fill colour by stream index from a fixed 8-colour palette
//! (ColorBrewer Set3), cycling; host nodes white. With more than one host lane
//! ([`crate::schedule::ScheduleOptions::host_lanes`]) each host op's label ends with its
//! lane, `lane h1` (the schedule text's `on h1`).

use super::facts::{Facts, HostItem, Link};
use super::{esc, open_lane, PALETTE};
use crate::lower::{OpGraph, OpId, OpKind};
use crate::schedule::Schedule;
use std::fmt;

/// Shape and extra style for an op kind.
fn shape(kind: &OpKind) -> (&'static str, &'static str) {
    match kind {
        OpKind::Alloc { .. } => ("note", "filled"),
        OpKind::H2D { .. } => ("box", "filled"),
        OpKind::Kernel(_) => ("ellipse", "filled"),
        OpKind::D2H { .. } => ("box", "filled,rounded"),
        OpKind::PeerCopy { .. } => ("box", "filled,diagonals"),
        OpKind::Free { .. } => ("invhouse", "filled"),
        OpKind::HostTask { .. } => ("hexagon", "filled"),
        OpKind::Taskwait => ("octagon", "filled"),
        OpKind::End => ("doubleoctagon", "filled"),
    }
}

fn op_node(graph: &OpGraph, sched: &Schedule, op: OpId, fill: &str) -> String {
    match graph.ops.get(op.index()) {
        Some(o) => {
            let region = graph
                .regions
                .get(o.region.index())
                .map(|r| r.name.as_str())
                .unwrap_or("?");
            let mut label = format!("{op} {}\nregion \"{region}\"", graph.describe(op));
            if let Some(lane) = super::host_lane(sched, op) {
                label.push_str(&format!("\nlane {lane}"));
            }
            let (shape, style) = shape(&o.kind);
            format!(
                "op{} [label=\"{}\", shape={shape}, style=\"{style}\", fillcolor=\"{fill}\"];",
                op.0,
                esc(&label)
            )
        }
        None => format!(
            "op{} [label=\"{op} ?\", shape=box, style=\"filled,dashed\", fillcolor=\"{fill}\"];",
            op.0
        ),
    }
}

/// Writes the op view of `sched` over `graph`. See the module docs.
///
/// Complexity: `O(V + S)` for `V` ops and `S` schedule steps, plus `O(S · T)` for the
/// dotted issue edges of `T` streams.
pub(super) fn write(f: &mut fmt::Formatter<'_>, graph: &OpGraph, sched: &Schedule) -> fmt::Result {
    let l = Facts::of(sched);
    writeln!(f, "digraph \"{}\" {{", esc(&sched.name))?;
    writeln!(
        f,
        "  label=\"schedule \\\"{}\\\" policy={}\";",
        esc(&sched.name),
        sched.policy
    )?;
    writeln!(f, "  labelloc=t;")?;
    writeln!(f, "  newrank=true;")?;
    writeln!(f, "  node [fontname=\"Helvetica\", fontsize=10];")?;
    writeln!(f, "  edge [fontname=\"Helvetica\", fontsize=9];")?;
    for (si, ops) in l.stream_ops.iter().enumerate() {
        if ops.is_empty() {
            continue;
        }
        let fill = PALETTE[si % PALETTE.len()];
        open_lane(f, sched, si)?;
        for &op in ops {
            writeln!(f, "    {}", op_node(graph, sched, op, fill))?;
        }
        writeln!(f, "  }}")?;
    }
    if !l.host.is_empty() {
        writeln!(f, "  subgraph cluster_host {{")?;
        writeln!(f, "    label=\"host\";")?;
        writeln!(f, "    style=rounded;")?;
        writeln!(f, "    color=gray50;")?;
        for item in &l.host {
            match item {
                HostItem::Op(op) => {
                    writeln!(f, "    {}", op_node(graph, sched, *op, "white"))?
                }
                HostItem::Wait(k) => writeln!(
                    f,
                    "    hw{k} [label=\"{}\", shape=doublecircle, style=filled, fillcolor=white, fontsize=8];",
                    esc(&l.waits[*k].label)
                )?,
            }
        }
        writeln!(f, "  }}")?;
    }
    for link in &l.links {
        match *link {
            Link::Stream { from, to } => writeln!(f, "  op{} -> op{};", from.0, to.0)?,
            Link::Event { event, from, to } => writeln!(
                f,
                "  op{} -> op{} [style=dashed, color=\"#d62728\", fontcolor=\"#d62728\", label=\"e{event}\"];",
                from.0, to.0
            )?,
            Link::Issue { from, to } => writeln!(
                f,
                "  op{} -> op{} [style=dotted, color=gray50];",
                from.0, to.0
            )?,
            Link::HostWait { from, wait } => {
                writeln!(f, "  op{} -> hw{wait} [style=bold];", from.0)?
            }
            Link::Host { from, to } => {
                writeln!(f, "  {} -> {};", l.host[from].id(), l.host[to].id())?
            }
        }
    }
    for n in &l.notes {
        writeln!(f, "  // {n}")?;
    }
    writeln!(f, "}}")
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{hand_graph, hand_schedule};
    use super::super::to_dot;
    use crate::lower::OpId;
    use crate::schedule::{EventId, Step, StreamId};

    #[test]
    fn hand_built_schedule_edges() {
        let g = hand_graph();
        let e0 = EventId(0);
        let (s0, s1) = (StreamId(0), StreamId(1));
        let s = hand_schedule(vec![
            Step::Op(OpId(0)),
            Step::Op(OpId(1)),
            Step::Record {
                event: e0,
                stream: s0,
            },
            Step::Wait {
                event: e0,
                stream: s1,
            },
            Step::Op(OpId(2)),
            Step::HostWait { stream: s1 },
            Step::HostWaitDevice { device: 0 },
            Step::Op(OpId(3)),
            Step::Wait {
                event: e0,
                stream: s0,
            },
        ]);
        let dot = to_dot(&g, &s);
        let want = [
            "digraph \"hand\" {",
            "  label=\"schedule \\\"hand\\\" policy=minimal\";",
            "  subgraph cluster_s0 {",
            "    label=\"s0 (device 0)\";",
            "    op0 [label=\"#0 alloc y[0:256] 1 KiB\\nregion \\\"p\\\"\", shape=note, style=\"filled\", fillcolor=\"#8dd3c7\"];",
            "    op1 [label=\"#1 kernel fill\\nregion \\\"p\\\"\", shape=ellipse, style=\"filled\", fillcolor=\"#8dd3c7\"];",
            "  subgraph cluster_s1 {",
            "    label=\"s1 (device 0)\";",
            "    op2 [label=\"#2 kernel increment\\nregion \\\"c \\\"quoted\\\"\\\"\", shape=ellipse, style=\"filled\", fillcolor=\"#ffffb3\"];",
            "  subgraph cluster_host {",
            "    hw0 [label=\"host wait s1\", shape=doublecircle, style=filled, fillcolor=white, fontsize=8];",
            "    hw1 [label=\"host wait device 0\", shape=doublecircle, style=filled, fillcolor=white, fontsize=8];",
            "    op3 [label=\"#3 end\\nregion \\\"end\\\"\", shape=doubleoctagon, style=\"filled\", fillcolor=\"white\"];",
            "  op0 -> op1;",
            "  op1 -> op2 [style=dashed, color=\"#d62728\", fontcolor=\"#d62728\", label=\"e0\"];",
            "  op2 -> hw0 [style=bold];",
            "  op1 -> hw1 [style=bold];",
            "  op2 -> hw1 [style=bold];",
            "  hw0 -> hw1;",
            "  hw1 -> op3;",
            "  // e0 waited on s0 with no later op on that stream",
        ];
        let lines: Vec<&str> = dot.lines().collect();
        for w in want {
            assert!(lines.contains(&w), "missing line {w}\nin:\n{dot}");
        }
        // Edges appear in this order.
        let pos = |l: &str| lines.iter().position(|x| *x == l).unwrap();
        assert!(pos("  op0 -> op1;") < pos("  hw1 -> op3;"));
        assert_eq!(dot.matches(" -> ").count(), 7);
        assert!(dot.ends_with("}\n"));
        assert_eq!(dot, to_dot(&g, &s), "deterministic");
    }

    #[test]
    fn mismatched_schedule_does_not_panic() {
        let g = hand_graph();
        let mut s = hand_schedule(vec![
            Step::Op(OpId(0)),
            Step::Op(OpId(99)),
            Step::Wait {
                event: EventId(7),
                stream: StreamId(1),
            },
            Step::Op(OpId(2)),
            Step::HostWait {
                stream: StreamId(5),
            },
        ]);
        s.op_stream.push(Some(StreamId(9)));
        let dot = to_dot(&g, &s);
        assert!(dot.contains("op99 [label=\"#99 ?\""));
        assert!(dot.contains("// e7 waited on s1 before op2 but recorded after no op"));
        assert!(dot.contains("hw0 [label=\"host wait s5\""));
    }

    #[test]
    fn host_ops_order_later_issues() {
        let g = hand_graph();
        // end (a host op) issued before op2: dotted edge to it.
        let s = hand_schedule(vec![
            Step::Op(OpId(0)),
            Step::Op(OpId(3)),
            Step::Op(OpId(1)),
            Step::Op(OpId(2)),
        ]);
        let dot = to_dot(&g, &s);
        assert!(dot.contains("  op3 -> op1 [style=dotted, color=gray50];"));
        assert!(dot.contains("  op3 -> op2 [style=dotted, color=gray50];"));
        assert!(!dot.contains("op3 -> op0"));
    }
}
