//! The streams view ([`DotView::Streams`]): one lane per stream, left to right, with
//! its regions in issue order; the schedule's synchronization across lanes.
//!
//! ```text
//! digraph "fanout" {
//!   rankdir=LR;
//!   subgraph cluster_s0 {                  // one lane per used stream
//!     r0 [label="producer\ntarget · s0 · 5 ops", ...];
//!     r1 [...];
//!   }
//!   subgraph cluster_host {                // host regions and host waits, host order
//!     hw0 [label="host wait s0", shape=doublecircle, ...];
//!     r9 [label="end\nend · host · 1 op", ...];
//!   }
//!   r0 -> r1 [weight=10];                  // stream order
//!   hw0 -> r9 [weight=10];                 // host order
//!   r0 -> r2 [style=dashed, label="e0"];   // events: recorded after A, waited before B
//!   r1 -> hw0 [style=bold];                // host wait covering the lane's last region
//!   r9 -> r10 [style=dotted];              // host region issued before a later region
//! }
//! ```
//!
//! Nodes are the region view's nodes (same ids, labels and colours, see
//! [`super::regions`]), placed in their stream's lane in the order their first op is
//! issued; host regions and the host waits (`hwK`, as in the op view) share the host
//! lane in host order, host waits that follow one another with no host region between
//! them and cover the same regions merged into one node (`hwK`, the first one's id,
//! labelled `N host waits (hwK–hwL)`); past `MAX_WAIT_NODES` (1000) such nodes, every such
//! run of waits is one node, with one bold edge per lane from the latest region its
//! waits cover (a `//` note says so). The edges are the op view's, collapsed onto regions and
//! deduplicated: consecutive regions of a lane (stream order, or host order), event
//! waits between regions of different lanes (dashed red, labelled with the events as
//! in the region view), host waits (bold, from the region of the last op issued to the
//! waited stream), and host issue order (dotted, from a host region to the next region issued on a stream after
//! it). OpGraph dependencies that stream order and these syncs imply are not drawn; the
//! region view shows them.

use super::facts::{Facts, HostItem, Link};
use super::regions::{events_label, Lane, Summary};
use super::{esc, header, open_lane, DotView};
use crate::lower::OpGraph;
use crate::schedule::Schedule;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// A node of the host lane: a host region, or host waits `first..first + count` that
/// follow one another in host order with no host region between them and cover the same
/// regions (one node: per-op schedules have a host wait per op, and 3 000 wait nodes in
/// one cluster were more than Graphviz 2.43 lays out).
#[derive(Clone, Copy, PartialEq, Eq)]
enum HostNode {
    Region(usize),
    Waits { first: usize, count: usize },
}

/// Most wait labels a merged host-wait node lists.
const MERGED_LABELS: usize = 3;

/// Most host-wait nodes when waits are merged by the regions they cover; past it every
/// run of waits is one node (montage-2mass-05d under per-op: 1 741 nodes took Graphviz
/// 2.43 17 s; case_e03 under per-op, 1 000 nodes, 1.1 s).
const MAX_WAIT_NODES: usize = 1000;

/// The host lane: host regions (not yet `placed`, marked placed) and host waits in host
/// order, consecutive waits merged when they cover the same regions (`covers`: the
/// regions each wait covers), or every run of them (`None`).
fn host_lane(
    graph: &OpGraph,
    sum: &Summary,
    facts: &Facts,
    (placed, covers): (&mut [bool], Option<&[BTreeSet<usize>]>),
) -> Vec<HostNode> {
    let mut host: Vec<HostNode> = Vec::new();
    for item in &facts.host {
        let node = match *item {
            HostItem::Op(op) => match sum.node_of_op(graph, op) {
                Some(n) if sum.nodes[n].lane == Lane::Host && !placed[n] => {
                    placed[n] = true;
                    HostNode::Region(n)
                }
                _ => continue,
            },
            HostItem::Wait(k) => match host.last_mut() {
                Some(HostNode::Waits { first, count })
                    if *first + *count == k && covers.is_none_or(|c| c.get(*first) == c.get(k)) =>
                {
                    *count += 1;
                    continue;
                }
                _ => HostNode::Waits { first: k, count: 1 },
            },
        };
        host.push(node);
    }
    host
}

/// Writes the streams view of `sched` over `graph`. See the module docs.
///
/// Complexity: `O(V + S · T + R log R)` for `V` ops, `S` steps, `T` streams and `R`
/// regions.
pub(super) fn write(f: &mut fmt::Formatter<'_>, graph: &OpGraph, sched: &Schedule) -> fmt::Result {
    let facts = Facts::of(sched);
    let sum = Summary::of(graph, sched);
    let mut notes: Vec<String> = Vec::new();

    // Lanes: each region in its lane, in the order its first op was issued there.
    let mut placed = vec![false; sum.nodes.len()];
    let mut lanes: Vec<Vec<usize>> = vec![Vec::new(); facts.stream_ops.len()];
    for (si, ops) in facts.stream_ops.iter().enumerate() {
        for &op in ops {
            if let Some(n) = sum.node_of_op(graph, op) {
                if sum.nodes[n].lane == Lane::Stream(si) && !placed[n] {
                    placed[n] = true;
                    lanes[si].push(n);
                }
            }
        }
    }
    // The regions each host wait covers (the region of the last op issued to each
    // stream it waits for).
    let mut covers: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); facts.waits.len()];
    for link in &facts.links {
        if let Link::HostWait { from, wait } = *link {
            if let (Some(a), Some(c)) = (sum.node_of_op(graph, from), covers.get_mut(wait)) {
                c.insert(a);
            }
        }
    }
    // Waits on the same regions merged; past MAX_WAIT_NODES nodes, every run of waits.
    let mut placed_host = placed.clone();
    let mut host = host_lane(graph, &sum, &facts, (&mut placed_host, Some(&covers)));
    let merged_all = host
        .iter()
        .filter(|h| matches!(h, HostNode::Waits { .. }))
        .count()
        > MAX_WAIT_NODES;
    if merged_all {
        placed_host = placed.clone();
        host = host_lane(graph, &sum, &facts, (&mut placed_host, None));
        notes.push(format!(
            "host waits merged by runs (more than {MAX_WAIT_NODES} nodes when merged by the regions they cover)"
        ));
    }
    let placed = placed_host;
    for (n, node) in sum.nodes.iter().enumerate() {
        if !placed[n] {
            notes.push(format!("r{} has no op in the schedule", node.region.0));
            match node.lane {
                Lane::Stream(si) if si < lanes.len() => lanes[si].push(n),
                _ => host.push(HostNode::Region(n)),
            }
        }
    }

    let id = |h: HostNode| match h {
        HostNode::Region(n) => format!("r{}", sum.nodes[n].region.0),
        HostNode::Waits { first, .. } => format!("hw{first}"),
    };
    // Host wait k -> the first wait of its node.
    let mut wait_node = vec![0; facts.waits.len()];
    for &h in &host {
        if let HostNode::Waits { first, count } = h {
            for k in first..(first + count).min(wait_node.len()) {
                wait_node[k] = first;
            }
        }
    }
    let r = |n: usize| sum.nodes[n].region.0;

    // Syncs across lanes, collapsed onto regions: events by region pair, then host waits
    // and host issue order as first found.
    // Waits merged by runs: one bold edge per lane and node, from the latest region of
    // the lane any of them covers (lane order implies the earlier ones).
    let mut pos = vec![(usize::MAX, 0); sum.nodes.len()];
    for (si, lane) in lanes.iter().enumerate() {
        for (i, &n) in lane.iter().enumerate() {
            pos[n] = (si, i);
        }
    }
    let mut latest: BTreeMap<(usize, usize), usize> = BTreeMap::new();
    for link in facts.links.iter().filter(|_| merged_all) {
        if let Link::HostWait { from, wait } = *link {
            if let Some(a) = sum.node_of_op(graph, from) {
                let w = wait_node.get(wait).copied().unwrap_or(wait);
                let e = latest.entry((w, pos[a].0)).or_insert(a);
                if pos[a].1 > pos[*e].1 {
                    *e = a;
                }
            }
        }
    }
    let mut events: BTreeMap<(usize, usize), BTreeSet<u32>> = BTreeMap::new();
    let mut seen: BTreeSet<(bool, usize, usize)> = BTreeSet::new();
    let mut lines: Vec<String> = Vec::new();
    for link in &facts.links {
        match *link {
            Link::Event { event, from, to } => {
                match (sum.node_of_op(graph, from), sum.node_of_op(graph, to)) {
                    (Some(a), Some(b)) if a != b => {
                        events.entry((a, b)).or_default().insert(event);
                    }
                    _ => notes.push(format!(
                        "e{event} (op{} -> op{}) links no two drawn regions",
                        from.0, to.0
                    )),
                }
            }
            Link::HostWait { from, wait } => {
                if let Some(a) = sum.node_of_op(graph, from) {
                    let w = wait_node.get(wait).copied().unwrap_or(wait);
                    let a = latest.get(&(w, pos[a].0)).copied().unwrap_or(a);
                    if seen.insert((true, a, w)) {
                        lines.push(format!("  r{} -> hw{w} [style=bold];", r(a)));
                    }
                }
            }
            Link::Issue { from, to } => {
                let (a, b) = (sum.node_of_op(graph, from), sum.node_of_op(graph, to));
                if let (Some(a), Some(b)) = (a, b) {
                    if a != b && seen.insert((false, a, b)) {
                        lines.push(format!(
                            "  r{} -> r{} [style=dotted, color=gray50];",
                            r(a),
                            r(b)
                        ));
                    }
                }
            }
            Link::Stream { .. } | Link::Host { .. } => {}
        }
    }
    let edges = lanes
        .iter()
        .map(|l| l.len().saturating_sub(1))
        .sum::<usize>()
        + host.len().saturating_sub(1)
        + events.len()
        + lines.len();
    header(f, sched, DotView::Streams, (edges, events.len()), None)?;
    writeln!(f, "  rankdir=LR;")?;
    for (si, lane) in lanes.iter().enumerate() {
        if lane.is_empty() {
            continue;
        }
        open_lane(f, sched, si)?;
        for &n in lane {
            writeln!(f, "    {}", sum.node_line(graph, n))?;
        }
        writeln!(f, "  }}")?;
    }
    if !host.is_empty() {
        writeln!(f, "  subgraph cluster_host {{")?;
        writeln!(f, "    label=\"host\";")?;
        writeln!(f, "    style=rounded;")?;
        writeln!(f, "    color=gray50;")?;
        for &h in &host {
            match h {
                HostNode::Region(n) => writeln!(f, "    {}", sum.node_line(graph, n))?,
                HostNode::Waits { first, count } => writeln!(
                    f,
                    "    hw{first} [label=\"{}\", shape=doublecircle, style=filled, fillcolor=white, fontsize=8];",
                    esc(&waits_label(&facts, first, count))
                )?,
            }
        }
        writeln!(f, "  }}")?;
    }

    // Lane order.
    for lane in &lanes {
        for w in lane.windows(2) {
            writeln!(f, "  r{} -> r{} [weight=10];", r(w[0]), r(w[1]))?;
        }
    }
    for w in host.windows(2) {
        writeln!(f, "  {} -> {} [weight=10];", id(w[0]), id(w[1]))?;
    }
    for (&(a, b), set) in &events {
        writeln!(
            f,
            "  r{} -> r{} [style=dashed, color=\"#d62728\", fontcolor=\"#d62728\", label=\"{}\"];",
            r(a),
            r(b),
            esc(&events_label(set))
        )?;
    }
    for line in &lines {
        writeln!(f, "{line}")?;
    }
    for n in facts.notes.iter().chain(&sum.notes).chain(&notes) {
        writeln!(f, "  // {n}")?;
    }
    writeln!(f, "}}")
}

/// The label of host waits `first..first + count`: the wait's own label for one, else
/// `"N host waits (hwA–hwB)"` and the first [`MERGED_LABELS`] distinct labels.
fn waits_label(facts: &Facts, first: usize, count: usize) -> String {
    let label = |k: usize| {
        facts
            .waits
            .get(k)
            .map_or("host wait ?", |w| w.label.as_str())
    };
    if count == 1 {
        return label(first).to_string();
    }
    let mut distinct: Vec<&str> = Vec::new();
    for k in first..first + count {
        if !distinct.contains(&label(k)) {
            distinct.push(label(k));
        }
    }
    let mut s = format!("{count} host waits (hw{first}–hw{})", first + count - 1);
    for l in distinct.iter().take(MERGED_LABELS) {
        s.push('\n');
        s.push_str(l);
    }
    if distinct.len() > MERGED_LABELS {
        s.push_str(&format!("\n+{} more", distinct.len() - MERGED_LABELS));
    }
    s
}
