//! The region view ([`DotView::Regions`]): one node per region, edges from the
//! OpGraph's dependencies between regions.
//!
//! ```text
//! digraph "montage-chameleon-2mass-005d-001" {        // (attributes elided)
//!   r0 [label="workflow data\ntarget data begin · s0 · 78 ops", shape=house, ...];
//!   r1 [label="mProject_ID0000001\ntarget · s1 · 7 ops\nh2d 149.4 KiB", shape=box, ...];
//!   r61 [label="end\nend · host · 1 op", shape=doubleoctagon, ..., fillcolor="white"];
//!   r0 -> r1 [style=dashed, color="#d62728", ..., label="e0"];  // an event orders it
//!   r0 -> r4 [color=gray30];                  // both on s0: stream order
//!   r4 -> r10 [color=gray60];                 // s0 → s2: implied by earlier syncs
//!   r58 -> r59 [style=bold, label="host wait s0"];
//!   r58 -> r61 [color=gray60, label="7.2 KiB via host"];  // r58's D2H, read at the end
//!   // 226 dependency edge(s) implied by other paths are not drawn
//! }
//! ```
//!
//! Graph label: the schedule's name, policy and view, then on a second line the bytes the
//! program moves, [`crate::lower::BytesMoved`] (`moved: H2D 768 KiB, D2H 256 KiB, peer 0
//! B; elided …; evicted …, prefetched …`), the figures of the `run` summary and the
//! `schedule` header.
//!
//! Nodes: every region that lowered to at least one op (a region with no ops issues
//! nothing and is not drawn), id `rN` for region `N` of the OpGraph, in id order (program
//! order). Label: the region's name; its kind (`target`, `target data begin`, `enter
//! data`, `update`, `host task`, `taskwait`, `end`, …), its stream (`sN`, or `host`) and
//! its op count; then the bytes it copies, `h2d` (host to device), `d2h` (device to
//! host) and `peer` (device to device, peer copies), when not zero; then `N host waits inside` when the host waits between two of
//! its own ops (the `per-op` policy); then, when the schedule has more than one host
//! lane, the lane its host ops run on (`lane h1`; `lanes h0, h1` if they differ). Fill: the stream's [`PALETTE`]
//! colour, white for host regions. Shape by kind: target rounded `box`, data entry
//! (`target data begin`, `enter data`) `house`, data exit (`target data end`, `exit
//! data`) `invhouse`, update `parallelogram`, host task `hexagon`, taskwait `octagon`,
//! end `doubleoctagon`.
//!
//! Edges: one per ordered pair of regions `(A, B)` with at least one OpGraph edge from an
//! op of `A` to an op of `B` (collapsed and deduplicated), in `(A, B)` id order, plus a
//! pair for each event or host wait of the schedule and each host-memory flow that
//! links two regions no dependency links (a `per-region` host wait orders the next
//! region, dependent or not). The label says what the schedule does for the pair and what flows across it:
//! - events: the events recorded after an op of `A` and waited before an op of `B` (the
//!   op view's dashed edges, collapsed), as `e3 e7`, or `N events` above three; the edge
//!   is then dashed red;
//! - host waits: host waits that cover an op of `A` (the last op issued to a waited
//!   stream, or the op after which a waited event was recorded) and precede an op of `B`
//!   (the first op issued after the wait), as `host wait s1` or `N host waits`; the
//!   edge is then bold;
//! - `X via host`: the bytes `B` reads from host memory (its H2D copies, a host task's
//!   read sections, everything for the end of the program) whose last writer, in
//!   program order, is `A` (a D2H copy, a host task's written sections), element by
//!   element; the program's initial contents flow from no region.
//!   Data that stays in device memory from one region to the next (the usual case
//!   inside a `target data`) is not copied and carries no bytes; the node labels give
//!   each region's own copies.
//!
//! An edge with neither events nor host waits is ordered without a sync of its own:
//! grey (`gray30`) when both regions share a stream (stream order), light grey
//! (`gray60`) otherwise (implied by stream order and earlier syncs; the verifier checks
//! that).
//!
//! A plain edge (no event, host wait or bytes) that a path through other edges implies
//! is left out (transitive reduction; a `//` comment at the end counts them): it adds
//! no order, and a workflow's `target data` orders every task inside it after its
//! begin and before its end, which would draw two fans of hundreds of edges. Every dependency between two drawn regions is
//! still a path of drawn edges. Above 10 000 regions (or on a cycle, which a valid
//! schedule never has) every edge is drawn.

use super::facts::{Facts, Link};
use super::flow;
use super::reduce;
use super::{esc, header, DotView, PALETTE};
use crate::lower::{OpGraph, OpId, OpKind, RegionId, RegionKind};
use crate::model::human_bytes;
use crate::schedule::Schedule;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// Where a region runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Lane {
    /// Stream index.
    Stream(usize),
    Host,
}

impl fmt::Display for Lane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Lane::Stream(s) => write!(f, "s{s}"),
            Lane::Host => f.write_str("host"),
        }
    }
}

impl Lane {
    pub(super) fn fill(self) -> &'static str {
        match self {
            Lane::Stream(s) => PALETTE[s % PALETTE.len()],
            Lane::Host => "white",
        }
    }
}

/// One drawn region.
pub(super) struct RegionNode {
    pub(super) region: RegionId,
    pub(super) lane: Lane,
    pub(super) ops: usize,
    /// Bytes of its H2D, D2H and peer copies.
    pub(super) h2d: u64,
    pub(super) d2h: u64,
    pub(super) peer: u64,
    /// Host waits between two of its own ops.
    pub(super) inner_waits: usize,
    /// The host lanes of its host ops, ascending, when the schedule has more than one.
    pub(super) host_lanes: Vec<u32>,
}

/// The drawn regions, and each op's region.
pub(super) struct Summary {
    /// Regions with at least one op, in id order.
    pub(super) nodes: Vec<RegionNode>,
    /// Index into `nodes` by region id (`None`: not drawn).
    node_of: Vec<Option<usize>>,
    pub(super) notes: Vec<String>,
}

impl Summary {
    /// Complexity: `O(V + R)` for `V` ops and `R` regions.
    pub(super) fn of(graph: &OpGraph, sched: &Schedule) -> Summary {
        let mut s = Summary {
            nodes: Vec::new(),
            node_of: vec![None; graph.regions.len()],
            notes: Vec::new(),
        };
        for (ri, r) in graph.regions.iter().enumerate() {
            let ops: Vec<OpId> = (r.ops.clone())
                .filter(|&i| (i as usize) < graph.ops.len())
                .map(OpId)
                .collect();
            if ops.is_empty() {
                continue;
            }
            let streams: BTreeSet<usize> = (ops.iter())
                .filter_map(|op| sched.op_stream.get(op.index()).copied().flatten())
                .map(|s| s.index())
                .collect();
            let lane = match streams.first() {
                Some(&si) if !r.kind.is_host() => Lane::Stream(si),
                _ => Lane::Host,
            };
            if streams.len() > 1 || (r.kind.is_host() && !streams.is_empty()) {
                let on: Vec<String> = streams.iter().map(|s| format!("s{s}")).collect();
                s.notes.push(format!(
                    "r{ri} ({} \"{}\") has ops on {}; drawn on {lane}",
                    r.kind.name(),
                    r.name,
                    on.join(", ")
                ));
            }
            let bytes = |pick: fn(&OpKind) -> bool| -> u64 {
                (ops.iter())
                    .filter(|op| pick(&graph.op(**op).kind))
                    .map(|op| graph.op_bytes(*op))
                    .sum()
            };
            s.node_of[ri] = Some(s.nodes.len());
            s.nodes.push(RegionNode {
                region: RegionId(ri as u32),
                lane,
                ops: ops.len(),
                h2d: bytes(|k| matches!(k, OpKind::H2D { .. })),
                d2h: bytes(|k| matches!(k, OpKind::D2H { .. })),
                peer: bytes(|k| matches!(k, OpKind::PeerCopy { .. })),
                inner_waits: 0,
                host_lanes: (ops.iter())
                    .filter_map(|&op| super::host_lane(sched, op))
                    .map(|l| l.0)
                    .collect::<BTreeSet<u32>>()
                    .into_iter()
                    .collect(),
            });
        }
        s
    }

    /// The drawn node of region `r`.
    pub(super) fn node_of(&self, r: RegionId) -> Option<usize> {
        self.node_of.get(r.index()).copied().flatten()
    }

    /// The drawn node of `op`'s region (`None` for an op or region the graph lacks).
    pub(super) fn node_of_op(&self, graph: &OpGraph, op: OpId) -> Option<usize> {
        self.node_of(graph.ops.get(op.index())?.region)
    }

    /// The DOT node line of `nodes[n]` (no indent, no newline).
    pub(super) fn node_line(&self, graph: &OpGraph, n: usize) -> String {
        let node = &self.nodes[n];
        let r = &graph.regions[node.region.index()];
        let ops = if node.ops == 1 { "op" } else { "ops" };
        let mut label = format!(
            "{}\n{} · {} · {} {ops}",
            r.name,
            r.kind.name(),
            node.lane,
            node.ops
        );
        let copies: Vec<String> = [("h2d", node.h2d), ("d2h", node.d2h), ("peer", node.peer)]
            .into_iter()
            .filter(|(_, b)| *b > 0)
            .map(|(dir, b)| format!("{dir} {}", human_bytes(b)))
            .collect();
        if !copies.is_empty() {
            label.push('\n');
            label.push_str(&copies.join(" · "));
        }
        match node.inner_waits {
            0 => {}
            1 => label.push_str("\n1 host wait inside"),
            k => label.push_str(&format!("\n{k} host waits inside")),
        }
        let lanes: Vec<String> = node.host_lanes.iter().map(|l| format!("h{l}")).collect();
        match lanes.len() {
            0 => {}
            1 => label.push_str(&format!("\nlane {}", lanes[0])),
            _ => label.push_str(&format!("\nlanes {}", lanes.join(", "))),
        }
        let (shape, style) = shape(r.kind);
        format!(
            "r{} [label=\"{}\", shape={shape}, style=\"{style}\", fillcolor=\"{}\"];",
            node.region.0,
            esc(&label),
            node.lane.fill()
        )
    }
}

/// Shape and style of a region node by kind.
fn shape(kind: RegionKind) -> (&'static str, &'static str) {
    match kind {
        RegionKind::Target => ("box", "filled,rounded"),
        RegionKind::DataBegin | RegionKind::EnterData => ("house", "filled"),
        RegionKind::DataEnd | RegionKind::ExitData | RegionKind::Writeback => {
            ("invhouse", "filled")
        }
        RegionKind::Update => ("parallelogram", "filled"),
        RegionKind::HostTask => ("hexagon", "filled"),
        RegionKind::Taskwait => ("octagon", "filled"),
        RegionKind::End => ("doubleoctagon", "filled"),
    }
}

/// `e3 e7`, or `N events` above three.
pub(super) fn events_label(events: &BTreeSet<u32>) -> String {
    if events.len() > 3 {
        format!("{} events", events.len())
    } else {
        let ids: Vec<String> = events.iter().map(|e| format!("e{e}")).collect();
        ids.join(" ")
    }
}

/// What the schedule and the data do across one pair of regions.
#[derive(Default)]
struct PairEdge {
    host_bytes: u64,
    events: BTreeSet<u32>,
    /// Host wait numbers.
    waits: BTreeSet<usize>,
}

impl PairEdge {
    /// Carries nothing but order: no event, host wait or bytes.
    fn is_plain(&self) -> bool {
        self.events.is_empty() && self.waits.is_empty() && self.host_bytes == 0
    }
}

/// Writes the region view of `sched` over `graph`. See the module docs.
///
/// Complexity: `O(V + E log E + S · T)` for `V` ops, `E` OpGraph edges, `S` steps and
/// `T` streams.
pub(super) fn write(f: &mut fmt::Formatter<'_>, graph: &OpGraph, sched: &Schedule) -> fmt::Result {
    let facts = Facts::of(sched);
    let mut sum = Summary::of(graph, sched);
    let mut notes = std::mem::take(&mut sum.notes);
    let mut pairs: BTreeMap<(usize, usize), PairEdge> = BTreeMap::new();
    for (from, to) in graph.edges() {
        let (Some(a), Some(b)) = (sum.node_of_op(graph, from), sum.node_of_op(graph, to)) else {
            continue;
        };
        if a != b {
            pairs.entry((a, b)).or_default();
        }
    }
    for ((wa, wb), bytes) in flow::host_flow(graph) {
        if let (Some(a), Some(b)) = (sum.node_of(wa), sum.node_of(wb)) {
            pairs.entry((a, b)).or_default().host_bytes += bytes;
        }
    }
    for link in &facts.links {
        match *link {
            Link::Event { event, from, to } => {
                match (sum.node_of_op(graph, from), sum.node_of_op(graph, to)) {
                    (Some(a), Some(b)) if a != b => {
                        pairs.entry((a, b)).or_default().events.insert(event);
                    }
                    _ => notes.push(format!(
                        "e{event} (op{} -> op{}) links no two drawn regions",
                        from.0, to.0
                    )),
                }
            }
            Link::HostWait { from, wait } => {
                let next = facts.waits[wait].next;
                let a = sum.node_of_op(graph, from);
                let b = next.and_then(|op| sum.node_of_op(graph, op));
                match (a, b) {
                    (Some(a), Some(b)) if a == b => sum.nodes[a].inner_waits += 1,
                    (Some(a), Some(b)) => {
                        pairs.entry((a, b)).or_default().waits.insert(wait);
                    }
                    _ => notes.push(format!(
                        "hw{wait} ({}) after op{} precedes no drawn region",
                        facts.waits[wait].label, from.0
                    )),
                }
            }
            Link::Stream { .. } | Link::Issue { .. } | Link::Host { .. } => {}
        }
    }

    // Leave out plain edges (no event, host wait or bytes) that a path through other
    // edges implies.
    let keys: Vec<(usize, usize)> = pairs.keys().copied().collect();
    match reduce::implied_edges(sum.nodes.len(), &keys) {
        Some(implied) => {
            let mut left_out = 0;
            for (key, implied) in keys.iter().zip(implied) {
                if implied && pairs[key].is_plain() {
                    pairs.remove(key);
                    left_out += 1;
                }
            }
            if left_out > 0 {
                notes.push(format!(
                    "{left_out} dependency edge(s) implied by other paths are not drawn"
                ));
            }
        }
        None => notes.push(format!(
            "every dependency edge drawn: no transitive reduction ({} regions, or a cycle)",
            sum.nodes.len()
        )),
    }

    let labelled = pairs.values().filter(|e| !e.is_plain()).count();
    header(
        f,
        sched,
        DotView::Regions,
        (pairs.len(), labelled),
        Some(&graph.bytes_moved()),
    )?;
    for n in 0..sum.nodes.len() {
        writeln!(f, "  {}", sum.node_line(graph, n))?;
    }
    for (&(a, b), e) in &pairs {
        let mut label: Vec<String> = Vec::new();
        if !e.events.is_empty() {
            label.push(events_label(&e.events));
        }
        match e.waits.len() {
            0 => {}
            1 => {
                let k = *e.waits.first().unwrap_or(&0);
                label.push(facts.waits[k].label.clone());
            }
            k => label.push(format!("{k} host waits")),
        }
        if e.host_bytes > 0 {
            label.push(format!("{} via host", human_bytes(e.host_bytes)));
        }
        let (na, nb) = (&sum.nodes[a], &sum.nodes[b]);
        let mut attrs: Vec<String> = Vec::new();
        match (e.events.is_empty(), e.waits.is_empty()) {
            (false, true) => attrs.push("style=dashed".into()),
            (true, false) => attrs.push("style=bold".into()),
            (false, false) => attrs.push("style=\"dashed,bold\"".into()),
            (true, true) => {}
        }
        if !e.events.is_empty() {
            attrs.push("color=\"#d62728\", fontcolor=\"#d62728\"".into());
        } else if e.waits.is_empty() {
            let same = na.lane == nb.lane && na.lane != Lane::Host;
            attrs.push(if same { "color=gray30" } else { "color=gray60" }.into());
        }
        if !label.is_empty() {
            attrs.push(format!("label=\"{}\"", esc(&label.join("\n"))));
        }
        writeln!(
            f,
            "  r{} -> r{} [{}];",
            na.region.0,
            nb.region.0,
            attrs.join(", ")
        )?;
    }
    for n in facts.notes.iter().chain(&notes) {
        writeln!(f, "  // {n}")?;
    }
    writeln!(f, "}}")
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{hand_graph, hand_schedule};
    use super::super::{to_dot_view, DotView};
    use crate::lower::OpId;
    use crate::schedule::{EventId, Step, StreamId};

    fn hand_steps() -> Vec<Step> {
        let e0 = EventId(0);
        vec![
            Step::Op(OpId(0)),
            Step::Op(OpId(1)),
            Step::Record {
                event: e0,
                stream: StreamId(0),
            },
            Step::Wait {
                event: e0,
                stream: StreamId(1),
            },
            Step::Op(OpId(2)),
            Step::HostWait {
                stream: StreamId(1),
            },
            Step::Op(OpId(3)),
        ]
    }

    #[test]
    fn hand_built_region_view() {
        let g = hand_graph();
        let s = hand_schedule(hand_steps());
        let dot = to_dot_view(&g, &s, DotView::Regions);
        let want = [
            "  label=\"schedule \\\"hand\\\" policy=minimal (regions view)\\nmoved: H2D 0 B, D2H 0 B, peer 0 B; elided H2D 0 B, D2H 0 B dropped, 0 B deferred; evicted 0 B, prefetched 0 B\";",
            "  r0 [label=\"p\\ntarget · s0 · 2 ops\", shape=box, style=\"filled,rounded\", fillcolor=\"#8dd3c7\"];",
            "  r1 [label=\"c \\\"quoted\\\"\\ntarget · s1 · 1 op\", shape=box, style=\"filled,rounded\", fillcolor=\"#ffffb3\"];",
            "  r2 [label=\"end\\nend · host · 1 op\", shape=doubleoctagon, style=\"filled\", fillcolor=\"white\"];",
            "  r0 -> r1 [style=dashed, color=\"#d62728\", fontcolor=\"#d62728\", label=\"e0\"];",
            "  r1 -> r2 [style=bold, label=\"host wait s1\"];",
        ];
        let lines: Vec<&str> = dot.lines().collect();
        for w in want {
            assert!(lines.contains(&w), "missing line {w}\nin:\n{dot}");
        }
        assert_eq!(dot.matches(" -> ").count(), 2, "{dot}");
        assert_eq!(dot, to_dot_view(&g, &s, DotView::Regions), "deterministic");
    }

    #[test]
    fn per_op_waits_inside_a_region_go_in_its_label() {
        let g = hand_graph();
        let mut steps = hand_steps();
        // A host wait between the two ops of region p.
        steps.insert(
            1,
            Step::HostWait {
                stream: StreamId(0),
            },
        );
        let s = hand_schedule(steps);
        let dot = to_dot_view(&g, &s, DotView::Regions);
        assert!(
            dot.contains("r0 [label=\"p\\ntarget · s0 · 2 ops\\n1 host wait inside\""),
            "{dot}"
        );
        let streams = to_dot_view(&g, &s, DotView::Streams);
        assert!(streams.contains("  r0 -> hw0 [style=bold];"), "{streams}");
        assert!(streams.contains("  hw0 -> hw1 [weight=10];"), "{streams}");
    }

    #[test]
    fn mismatched_schedules_do_not_panic() {
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
            Step::HostWaitDevice { device: 3 },
        ]);
        s.op_stream.push(Some(StreamId(9)));
        // Region 1 claims an op the graph lacks; op 1 sits on another stream than op 0.
        s.op_stream[1] = Some(StreamId(1));
        let mut g2 = g.clone();
        g2.regions[1].ops = 2..40;
        for g in [&g, &g2] {
            for view in DotView::ALL {
                let dot = to_dot_view(g, &s, view);
                assert!(dot.ends_with("}\n"), "{view}: {dot}");
            }
        }
        let dot = to_dot_view(&g, &s, DotView::Regions);
        assert!(
            dot.contains("// r0 (target \"p\") has ops on s0, s1; drawn on s0"),
            "{dot}"
        );
        let streams = to_dot_view(&g, &s, DotView::Streams);
        assert!(
            streams.contains("// r2 has no op in the schedule"),
            "{streams}"
        );
    }
}
