//! Graphviz DOT of a schedule: one cluster per stream, event waits as dashed edges, a
//! node per host wait.
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
//!   op2 -> hw1 [style=bold, label="e1"];  // host wait on event e1, recorded after op2
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
//! the device's streams; for a wait on an event, from the op the event was recorded
//! after, labelled with the event), and host ops and host waits are chained in host
//! order. A host
//! op also gets a dotted edge to the next op issued on each stream after it, since the
//! host issues in program order.
//!
//! Ids are stable: `opN` is op `#N` of the OpGraph, `hwK` the `K`-th host wait; output
//! depends only on the graph and the schedule (no addresses, no hash-map order).
//!
//! Node shape by op kind: alloc `note`, h2d `box`, kernel `ellipse`, d2h rounded `box`,
//! free `invhouse`, host task `hexagon`, taskwait `octagon`, end `doubleoctagon`, host
//! wait `doublecircle`. Fill colour by stream index from a fixed 8-colour palette
//! (ColorBrewer Set3), cycling; host nodes white.

use crate::lower::{OpGraph, OpId, OpKind};
use crate::schedule::{Schedule, Step};
use std::collections::BTreeMap;
use std::fmt;

/// Fill colours by stream index (ColorBrewer Set3, 8 classes), cycled.
pub const PALETTE: [&str; 8] = [
    "#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5",
];

/// A `Display` wrapper that writes the DOT of `sched` over `graph` (petgraph's
/// `Dot` style). See the module docs for what is drawn.
///
/// A schedule that does not belong to the graph (op ids out of range) still prints:
/// unknown ops are labelled `#N ?`. Never panics.
///
/// Complexity: `O(V + S)` for `V` ops and `S` schedule steps, plus `O(S · T)` for the
/// dotted issue edges of `T` streams.
///
/// ```
/// use offload_sched::model::{ElemType, Init, MapType, ProgramBuilder};
/// use offload_sched::schedule::{schedule, ScheduleOptions};
/// let mut p = ProgramBuilder::new("inc");
/// let a = p.buffer("a", ElemType::I32, 16, Init::Zeros);
/// p.target("inc", "increment").arg(a).map(MapType::ToFrom, a);
/// let g = offload_sched::lower::lower(&p.build()).unwrap();
/// let s = schedule(&g, &ScheduleOptions::default());
/// let dot = offload_sched::dot::Dot::new(&g, &s).to_string();
/// assert!(dot.starts_with("digraph \"inc\" {"));
/// assert!(dot.contains("subgraph cluster_s0 {"));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Dot<'a> {
    graph: &'a OpGraph,
    sched: &'a Schedule,
}

impl<'a> Dot<'a> {
    pub fn new(graph: &'a OpGraph, sched: &'a Schedule) -> Dot<'a> {
        Dot { graph, sched }
    }
}

/// The DOT text of a schedule; the same as `Dot::new(graph, sched).to_string()`.
pub fn to_dot(graph: &OpGraph, sched: &Schedule) -> String {
    Dot::new(graph, sched).to_string()
}

/// A node of the host cluster.
enum HostItem {
    Op(OpId),
    /// Host wait number and its label.
    Wait(usize, String),
}

impl HostItem {
    fn id(&self) -> String {
        match self {
            HostItem::Op(op) => format!("op{}", op.0),
            HostItem::Wait(k, _) => format!("hw{k}"),
        }
    }
}

/// Everything the text needs, gathered in one pass over the steps.
struct Layout {
    /// Ops per stream index, in issue order.
    stream_ops: Vec<Vec<OpId>>,
    host: Vec<HostItem>,
    /// Edge lines, in the order found.
    edges: Vec<String>,
    /// Remarks about steps that could not be drawn (written as DOT comments).
    notes: Vec<String>,
}

fn layout(sched: &Schedule) -> Layout {
    let max_stream = sched
        .op_stream
        .iter()
        .flatten()
        .map(|s| s.index() + 1)
        .chain(sched.steps.iter().map(|st| match st {
            Step::Record { stream, .. } | Step::Wait { stream, .. } | Step::HostWait { stream } => {
                stream.index() + 1
            }
            _ => 0,
        }))
        .max()
        .unwrap_or(0);
    let ns = max_stream.max(sched.streams.len());
    let mut l = Layout {
        stream_ops: vec![Vec::new(); ns],
        host: Vec::new(),
        edges: Vec::new(),
        notes: Vec::new(),
    };
    let mut last_on: Vec<Option<OpId>> = vec![None; ns];
    let mut pending_waits: Vec<Vec<u32>> = vec![Vec::new(); ns];
    let mut pending_issue: Vec<Option<OpId>> = vec![None; ns];
    let mut recorded: BTreeMap<u32, Option<OpId>> = BTreeMap::new();
    let mut host_waits = 0usize;

    for step in &sched.steps {
        match *step {
            Step::Op(op) => match sched.op_stream.get(op.index()).copied().flatten() {
                Some(s) => {
                    let si = s.index();
                    l.stream_ops[si].push(op);
                    if let Some(prev) = last_on[si] {
                        l.edges.push(format!("op{} -> op{};", prev.0, op.0));
                    }
                    last_on[si] = Some(op);
                    for e in std::mem::take(&mut pending_waits[si]) {
                        match recorded.get(&e).copied().flatten() {
                            Some(src) => l.edges.push(format!(
                                "op{} -> op{} [style=dashed, color=\"#d62728\", fontcolor=\"#d62728\", label=\"e{e}\"];",
                                src.0, op.0
                            )),
                            None => l.notes.push(format!(
                                "e{e} waited on {s} before op{} but recorded after no op",
                                op.0
                            )),
                        }
                    }
                    if let Some(h) = pending_issue[si].take() {
                        l.edges.push(format!(
                            "op{} -> op{} [style=dotted, color=gray50];",
                            h.0, op.0
                        ));
                    }
                }
                None => {
                    push_host(&mut l, HostItem::Op(op));
                    for p in pending_issue.iter_mut() {
                        *p = Some(op);
                    }
                }
            },
            Step::Record { event, stream } => {
                recorded.insert(event.0, last_on.get(stream.index()).copied().flatten());
            }
            Step::Wait { event, stream } => {
                if let Some(w) = pending_waits.get_mut(stream.index()) {
                    w.push(event.0);
                }
            }
            Step::HostWait { stream } => {
                let k = host_waits;
                host_waits += 1;
                if let Some(Some(last)) = last_on.get(stream.index()) {
                    l.edges.push(format!("op{} -> hw{k} [style=bold];", last.0));
                }
                push_host(&mut l, HostItem::Wait(k, format!("host wait {stream}")));
            }
            Step::HostWaitEvent { event } => {
                let k = host_waits;
                host_waits += 1;
                match recorded.get(&event.0).copied().flatten() {
                    Some(src) => l.edges.push(format!(
                        "op{} -> hw{k} [style=bold, label=\"{event}\"];",
                        src.0
                    )),
                    None => l.notes.push(format!(
                        "host wait hw{k} on {event}, which is recorded after no op"
                    )),
                }
                push_host(&mut l, HostItem::Wait(k, format!("host wait {event}")));
            }
            Step::HostWaitDevice { device } => {
                let k = host_waits;
                host_waits += 1;
                for (si, last) in last_on.iter().enumerate() {
                    let on_device = sched.streams.get(si).map(|i| i.device) == Some(device);
                    if let (true, Some(last)) = (on_device, last) {
                        l.edges.push(format!("op{} -> hw{k} [style=bold];", last.0));
                    }
                }
                push_host(
                    &mut l,
                    HostItem::Wait(k, format!("host wait device {device}")),
                );
            }
        }
    }
    for (si, waits) in pending_waits.iter().enumerate() {
        for e in waits {
            l.notes.push(format!(
                "e{e} waited on s{si} with no later op on that stream"
            ));
        }
    }
    l
}

fn push_host(l: &mut Layout, item: HostItem) {
    if let Some(prev) = l.host.last() {
        l.edges.push(format!("{} -> {};", prev.id(), item.id()));
    }
    l.host.push(item);
}

/// Escapes a string for a DOT double-quoted id (`"` and `\`; newlines become `\n`).
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => {}
            c => out.push(c),
        }
    }
    out
}

/// Shape and extra style for an op kind.
fn shape(kind: &OpKind) -> (&'static str, &'static str) {
    match kind {
        OpKind::Alloc { .. } => ("note", "filled"),
        OpKind::H2D { .. } => ("box", "filled"),
        OpKind::Kernel(_) => ("ellipse", "filled"),
        OpKind::D2H { .. } => ("box", "filled,rounded"),
        OpKind::Free { .. } => ("invhouse", "filled"),
        OpKind::HostTask { .. } => ("hexagon", "filled"),
        OpKind::Taskwait => ("octagon", "filled"),
        OpKind::End => ("doubleoctagon", "filled"),
    }
}

fn op_node(graph: &OpGraph, op: OpId, fill: &str) -> String {
    match graph.ops.get(op.index()) {
        Some(o) => {
            let region = graph
                .regions
                .get(o.region.index())
                .map(|r| r.name.as_str())
                .unwrap_or("?");
            let label = format!("{op} {}\nregion \"{region}\"", graph.describe(op));
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

impl fmt::Display for Dot<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (graph, sched) = (self.graph, self.sched);
        let l = layout(sched);
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
            let device = match sched.streams.get(si) {
                Some(i) => i.device.to_string(),
                None => "?".to_string(),
            };
            writeln!(f, "  subgraph cluster_s{si} {{")?;
            writeln!(f, "    label=\"s{si} (device {device})\";")?;
            writeln!(f, "    style=rounded;")?;
            writeln!(f, "    color=\"{fill}\";")?;
            writeln!(f, "    penwidth=2;")?;
            for &op in ops {
                writeln!(f, "    {}", op_node(graph, op, fill))?;
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
                    HostItem::Op(op) => writeln!(f, "    {}", op_node(graph, *op, "white"))?,
                    HostItem::Wait(k, label) => writeln!(
                        f,
                        "    hw{k} [label=\"{}\", shape=doublecircle, style=filled, fillcolor=white, fontsize=8];",
                        esc(label)
                    )?,
                }
            }
            writeln!(f, "  }}")?;
        }
        for e in &l.edges {
            writeln!(f, "  {e}")?;
        }
        for n in &l.notes {
            writeln!(f, "  // {n}")?;
        }
        writeln!(f, "}}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::{
        AllocId, DeviceAlloc, KernelCall, Op, OpGraph, Region, RegionId, RegionKind,
    };
    use crate::model::{Buffer, ElemType, Init, LaunchShape, Section};
    use crate::schedule::{EventId, StreamId, StreamInfo, SyncPolicy};

    /// `p` = alloc + kernel on s0; `c` = kernel on s1 after p's kernel; `end` on the host.
    fn hand_graph() -> OpGraph {
        let y = Buffer {
            name: "y".into(),
            ty: ElemType::F32,
            len: 256,
            init: Init::Zeros,
        };
        let mut g = OpGraph::new("hand", vec![y], Vec::new(), 1);
        let sec = Section::new(crate::model::BufferId(0), 0, 256);
        g.allocs.push(DeviceAlloc {
            zero: false,
            section: sec,
            device: 0,
            bytes: 1024,
        });
        let call = |k: &str| {
            OpKind::Kernel(KernelCall {
                kernel: k.into(),
                ty: ElemType::F32,
                args: Vec::new(),
                launch: LaunchShape {
                    teams: 1,
                    threads: 256,
                },
            })
        };
        let op = |kind, r| Op {
            kind,
            region: RegionId(r),
            device: 0,
        };
        let a0 = g.push_op(op(OpKind::Alloc { alloc: AllocId(0) }, 0), vec![]);
        let k1 = g.push_op(op(call("fill"), 0), vec![a0]);
        let k2 = g.push_op(op(call("increment"), 1), vec![k1]);
        g.push_op(op(OpKind::End, 2), vec![k2]);
        for (name, kind, ops) in [
            ("p", RegionKind::Target, 0..2),
            ("c \"quoted\"", RegionKind::Target, 2..3),
            ("end", RegionKind::End, 3..4),
        ] {
            g.regions.push(Region {
                name: name.into(),
                kind,
                nowait: true,
                device: 0,
                ops,
                span: None,
            });
        }
        g
    }

    fn hand_schedule(steps: Vec<Step>) -> Schedule {
        Schedule {
            name: "hand".into(),
            policy: SyncPolicy::Minimal,
            streams: vec![StreamInfo { device: 0 }; 2],
            op_stream: vec![
                Some(StreamId(0)),
                Some(StreamId(0)),
                Some(StreamId(1)),
                None,
            ],
            steps,
            events: 1,
            text: Default::default(),
        }
    }

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
            Step::HostWaitEvent { event: e0 },
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
            "    hw2 [label=\"host wait e0\", shape=doublecircle, style=filled, fillcolor=white, fontsize=8];",
            "    op3 [label=\"#3 end\\nregion \\\"end\\\"\", shape=doubleoctagon, style=\"filled\", fillcolor=\"white\"];",
            "  op0 -> op1;",
            "  op1 -> op2 [style=dashed, color=\"#d62728\", fontcolor=\"#d62728\", label=\"e0\"];",
            "  op2 -> hw0 [style=bold];",
            "  op1 -> hw1 [style=bold];",
            "  op2 -> hw1 [style=bold];",
            "  op1 -> hw2 [style=bold, label=\"e0\"];",
            "  hw0 -> hw1;",
            "  hw1 -> hw2;",
            "  hw2 -> op3;",
            "  // e0 waited on s0 with no later op on that stream",
        ];
        let lines: Vec<&str> = dot.lines().collect();
        for w in want {
            assert!(lines.contains(&w), "missing line {w}\nin:\n{dot}");
        }
        // Edges appear in this order.
        let pos = |l: &str| lines.iter().position(|x| *x == l).unwrap();
        assert!(pos("  op0 -> op1;") < pos("  hw2 -> op3;"));
        assert_eq!(dot.matches(" -> ").count(), 9);
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
            Step::HostWaitEvent { event: EventId(7) },
        ]);
        s.op_stream.push(Some(StreamId(9)));
        let dot = to_dot(&g, &s);
        assert!(dot.contains("op99 [label=\"#99 ?\""));
        assert!(dot.contains("// e7 waited on s1 before op2 but recorded after no op"));
        assert!(dot.contains("hw0 [label=\"host wait s5\""));
        assert!(dot.contains("// host wait hw1 on e7, which is recorded after no op"));
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
