//! Graphviz DOT of a schedule, in three views of one walk over its steps.
//!
//! | view | one node per | what the edges are | for |
//! |---|---|---|---|
//! | [`DotView::Ops`] (`ops`) | op, clustered by stream | stream order, event waits, host waits, host issue order | small graphs: every copy and launch |
//! | [`DotView::Regions`] (`regions`) | region, filled by stream | the OpGraph's cross-region dependencies, collapsed; labels: events, host bytes, host waits | the dataflow of a workflow |
//! | [`DotView::Streams`] (`streams`) | region, one lane per stream, left to right | stream order within a lane, events across lanes, host waits to the host lane | how the regions share the streams |
//!
//! [`DotView::Auto`] is the op view up to [`AUTO_REGION_VIEW_OPS`] ops and the region
//! view above: past a few hundred ops the op view is a ladder too tall to read (montage
//! 2mass-005d, 435 ops: 2732 × 32767 px) and, past a few thousand, one that Graphviz
//! does not lay out in minutes (2mass-05d, 12 111 ops), while its region view has one
//! node per task.
//!
//! Every view: ids are stable (`opN` op `#N`, `rN` region `N` of the OpGraph, `hwK` the
//! `K`-th host wait); the output depends only on the graph and the schedule (no
//! addresses, no hash-map order); fill colour by stream index from [`PALETTE`], host
//! nodes white. A schedule that does not belong to its graph still prints (unknown ops
//! are labelled `#N ?`, unknown streams and events become `//` comments); no view
//! panics.

mod facts;
#[cfg(test)]
mod fixtures;
mod flow;
pub(crate) mod ops;
mod reduce;
pub(crate) mod regions;
pub(crate) mod streams;

use crate::lower::OpGraph;
use crate::schedule::Schedule;
use std::fmt;

/// The host lane of host op `op` when `sched` has more than one lane (DOT labels it
/// `lane hN`, the schedule text's `on hN`); `None` for a device op, an op `sched` does
/// not know, or a schedule of one lane.
fn host_lane(sched: &Schedule, op: crate::lower::OpId) -> Option<crate::schedule::LaneId> {
    let host = sched.op_stream.get(op.index()).is_some_and(|s| s.is_none());
    let lane = sched.op_lane.get(op.index()).copied()?;
    (sched.host_lanes > 1 && host).then_some(crate::schedule::LaneId(lane))
}

/// Fill colours by stream index (ColorBrewer Set3, 8 classes), cycled.
pub const PALETTE: [&str; 8] = [
    "#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5",
];

/// [`DotView::Auto`] draws the region view of graphs with more ops than this, the op view
/// of the others. 300 ops is about 50 regions of a lowered workflow (Montage 2mass-005d
/// has 435 ops in 62 regions) and about the most the op view shows legibly on a page.
pub const AUTO_REGION_VIEW_OPS: usize = 300;

/// Which picture of a schedule to draw. See the module docs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DotView {
    /// One node per op (the picture before views existed).
    Ops,
    /// One node per region; edges are the OpGraph's dependencies between regions.
    Regions,
    /// One lane per stream with its regions in issue order; edges are the schedule's
    /// synchronization.
    Streams,
    /// [`DotView::Regions`] above [`AUTO_REGION_VIEW_OPS`] ops, else [`DotView::Ops`].
    #[default]
    Auto,
}

impl DotView {
    /// Every view, in the order the command line lists them.
    pub const ALL: [DotView; 4] = [
        DotView::Ops,
        DotView::Regions,
        DotView::Streams,
        DotView::Auto,
    ];

    /// `ops`, `regions`, `streams`, `auto` (the command line's spelling).
    pub fn name(self) -> &'static str {
        match self {
            DotView::Ops => "ops",
            DotView::Regions => "regions",
            DotView::Streams => "streams",
            DotView::Auto => "auto",
        }
    }

    /// The inverse of [`DotView::name`].
    pub fn parse(s: &str) -> Option<DotView> {
        DotView::ALL.into_iter().find(|v| v.name() == s)
    }

    /// The view drawn for `graph`: `Auto` resolved by op count, any other view itself.
    pub fn resolve(self, graph: &OpGraph) -> DotView {
        match self {
            DotView::Auto if graph.ops.len() > AUTO_REGION_VIEW_OPS => DotView::Regions,
            DotView::Auto => DotView::Ops,
            v => v,
        }
    }
}

impl fmt::Display for DotView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A `Display` wrapper that writes the DOT of `sched` over `graph` in one view
/// (petgraph's `Dot` style). [`Dot::new`] is the op view.
///
/// Complexity: `O(V + E + S · T)` for `V` ops, `E` OpGraph edges (region view only),
/// `S` schedule steps and `T` streams, plus sorting the region edges.
///
/// ```
/// use offload_sched::dot::{Dot, DotView};
/// use offload_sched::model::{ElemType, Init, MapType, ProgramBuilder};
/// use offload_sched::schedule::{schedule, ScheduleOptions};
/// let mut p = ProgramBuilder::new("inc");
/// let a = p.buffer("a", ElemType::I32, 16, Init::Zeros);
/// p.target("inc", "increment").arg(a).map(MapType::ToFrom, a);
/// let g = offload_sched::lower::lower(&p.build()).unwrap();
/// let s = schedule(&g, &ScheduleOptions::default());
/// let dot = Dot::new(&g, &s).to_string();
/// assert!(dot.starts_with("digraph \"inc\" {"));
/// assert!(dot.contains("subgraph cluster_s0 {"));
/// let regions = Dot::with_view(&g, &s, DotView::Regions).to_string();
/// assert!(regions.contains("  r0 [label=\"inc\\ntarget · s0 · 5 ops"));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Dot<'a> {
    graph: &'a OpGraph,
    sched: &'a Schedule,
    view: DotView,
}

impl<'a> Dot<'a> {
    /// The op view.
    pub fn new(graph: &'a OpGraph, sched: &'a Schedule) -> Dot<'a> {
        Dot::with_view(graph, sched, DotView::Ops)
    }

    /// `view`, with `Auto` resolved on `graph` (see [`DotView::resolve`]).
    pub fn with_view(graph: &'a OpGraph, sched: &'a Schedule, view: DotView) -> Dot<'a> {
        Dot {
            graph,
            sched,
            view: view.resolve(graph),
        }
    }

    /// The view this wrapper draws (never `Auto`).
    pub fn view(&self) -> DotView {
        self.view
    }
}

impl fmt::Display for Dot<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.view {
            DotView::Ops | DotView::Auto => ops::write(f, self.graph, self.sched),
            DotView::Regions => regions::write(f, self.graph, self.sched),
            DotView::Streams => streams::write(f, self.graph, self.sched),
        }
    }
}

/// The op view's DOT text; the same as `Dot::new(graph, sched).to_string()`.
pub fn to_dot(graph: &OpGraph, sched: &Schedule) -> String {
    Dot::new(graph, sched).to_string()
}

/// The DOT text of one view; the same as `Dot::with_view(graph, sched, view).to_string()`.
pub fn to_dot_view(graph: &OpGraph, sched: &Schedule, view: DotView) -> String {
    Dot::with_view(graph, sched, view).to_string()
}

/// Escapes a string for a DOT double-quoted id (`"` and `\`; newlines become `\n`;
/// other control characters are shown escaped, [`crate::model::escape_controls`]).
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => {}
            c if c.is_control() => {
                for e in c.escape_debug() {
                    if e == '\\' {
                        out.push_str("\\\\");
                    } else {
                        out.push(e);
                    }
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// The graph header every view writes: name, title, fonts.
/// Region and streams views with more edges than this get Graphviz layout limits in
/// their header (`header`): montage-2mass-05d's region view (4 475 edges) took `dot`
/// 11 s without them and 1 s with them, its streams view (1 930 edges) 9 s and 1.5 s
/// (Graphviz 2.43, 2 cores, 2026-12-01).
pub const LARGE_VIEW_EDGES: usize = 1500;

/// ... or more labelled edges than this (events, host waits, bytes via host: `dot`
/// places every label): a region view of 80 device regions each read by a host task
/// (161 labelled edges of 240) took over 100 s without the limits and 0.35 s with them;
/// 64 such regions (129) 7.4 s; montage-2mass-005d has 43.
pub const LARGE_VIEW_LABELLED_EDGES: usize = 100;

/// Opens stream `si`'s cluster (`subgraph cluster_sN {`): labelled with the stream and
/// its device (`?` for a stream the schedule does not list) and `, high priority` for a
/// device's high-priority stream ([`crate::schedule::StreamInfo::high_priority`]),
/// outlined in its colour.
fn open_lane(f: &mut fmt::Formatter<'_>, sched: &Schedule, si: usize) -> fmt::Result {
    let device = sched.streams.get(si).map_or_else(
        || "?".to_string(),
        |i| match i.high_priority {
            true => format!("{}, high priority", i.device),
            false => i.device.to_string(),
        },
    );
    writeln!(f, "  subgraph cluster_s{si} {{")?;
    writeln!(f, "    label=\"s{si} (device {device})\";")?;
    writeln!(f, "    style=rounded;")?;
    writeln!(f, "    color=\"{}\";", PALETTE[si % PALETTE.len()])?;
    writeln!(f, "    penwidth=2;")
}

/// The graph header of every view; `edges`: how many edges the view draws, and how many
/// of them carry a label (above [`LARGE_VIEW_EDGES`] or [`LARGE_VIEW_LABELLED_EDGES`]
/// the layout limits go in: straight edges, one network-simplex pass, bounded crossing
/// minimisation, as `scripts/viz.sh` passes on the command line). `moved`: the bytes
/// moved, as a second line of the graph's label (the region view).
fn header(
    f: &mut fmt::Formatter<'_>,
    sched: &Schedule,
    view: DotView,
    (edges, labelled): (usize, usize),
    moved: Option<&crate::lower::BytesMoved>,
) -> fmt::Result {
    writeln!(f, "digraph \"{}\" {{", esc(&sched.name))?;
    let moved = moved.map_or(String::new(), |m| format!("\\nmoved: {m}"));
    writeln!(
        f,
        "  label=\"schedule \\\"{}\\\" policy={} ({view} view){moved}\";",
        esc(&sched.name),
        sched.policy
    )?;
    writeln!(f, "  labelloc=t;")?;
    writeln!(f, "  newrank=true;")?;
    if edges > LARGE_VIEW_EDGES || labelled > LARGE_VIEW_LABELLED_EDGES {
        writeln!(
            f,
            "  // {edges} edges, {labelled} labelled: layout limits, so `dot` finishes in seconds"
        )?;
        writeln!(
            f,
            "  nslimit=1; nslimit1=1; mclimit=0.05; splines=line; remincross=false;"
        )?;
    }
    writeln!(f, "  node [fontname=\"Helvetica\", fontsize=10];")?;
    writeln!(f, "  edge [fontname=\"Helvetica\", fontsize=9];")
}
