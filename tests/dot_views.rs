//! The region and streams DOT views (`dot::DotView`): snapshots of three graphs' region
//! view and one streams view, and structure checked on every graph in graphs/ (one node
//! per region with ops, fill by stream, edges deduplicated, every cross-region
//! dependency a path of drawn edges, the same events as the op view), bytes through host
//! memory on a small program, and Graphviz laying the pictures out.

mod common;

use offload_sched::dot::{to_dot_view, DotView, AUTO_REGION_VIEW_OPS, PALETTE};
use offload_sched::lower::OpGraph;
use offload_sched::model::{ElemType, Init, MapType, ProgramBuilder, Section};
use offload_sched::schedule::{Schedule, ScheduleOptions, SyncPolicy};
use offload_sched::Plan;
use std::collections::{BTreeMap, BTreeSet};

/// A DOT file as the views write it: nodes with their attributes and cluster, edges.
#[derive(Debug, Default)]
struct Parsed {
    /// `(id, attributes, cluster name or "")`, in order.
    nodes: Vec<(String, String, String)>,
    /// `(from, to, attributes)`, in order.
    edges: Vec<(String, String, String)>,
}

/// Parses the views' own line format (one statement a line), not DOT at large.
fn parse(dot: &str) -> Parsed {
    let mut p = Parsed::default();
    let mut cluster = String::new();
    for line in dot.lines() {
        let t = line.trim();
        if let Some(name) = t.strip_prefix("subgraph ") {
            cluster = name.trim_end_matches(" {").to_string();
        } else if t == "}" {
            cluster.clear();
        } else if let Some((head, rest)) = t.split_once(" [") {
            let attrs = rest.trim_end_matches("];").to_string();
            match head.split_once(" -> ") {
                Some((a, b)) => p.edges.push((a.into(), b.into(), attrs)),
                None if !head.contains('=') && !head.starts_with("node") && head != "edge" => {
                    p.nodes.push((head.into(), attrs, cluster.clone()))
                }
                None => {}
            }
        } else if let Some((a, b)) = t.trim_end_matches(';').split_once(" -> ") {
            p.edges.push((a.into(), b.into(), String::new()));
        }
    }
    p
}

/// The value of `key` in an attribute list (`key="v"` with `\"` escapes, or `key=v`).
fn attr(attrs: &str, key: &str) -> Option<String> {
    let pat = format!("{key}=");
    let mut from = 0;
    let at = loop {
        let i = from + attrs[from..].find(&pat)?;
        if i == 0 || attrs[..i].ends_with(' ') {
            break i + pat.len();
        }
        from = i + 1;
    };
    let rest = &attrs[at..];
    if let Some(q) = rest.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = q.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next()? {
                    'n' => out.push('\n'),
                    c => out.push(c),
                },
                '"' => return Some(out),
                c => out.push(c),
            }
        }
        None
    } else {
        Some(rest.split([',', ']']).next()?.trim().to_string())
    }
}

/// Region index of `rN`.
fn region_id(id: &str) -> usize {
    id.strip_prefix('r')
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not a region node: {id}"))
}

/// Stream index of each region with ops, `None` for host regions.
fn region_streams(g: &OpGraph, s: &Schedule) -> BTreeMap<usize, Option<usize>> {
    let mut out = BTreeMap::new();
    for (ri, r) in g.regions.iter().enumerate() {
        if r.ops.is_empty() {
            continue;
        }
        let stream = if r.kind.is_host() {
            None
        } else {
            s.op_stream[r.ops.start as usize].map(|s| s.index())
        };
        out.insert(ri, stream);
    }
    out
}

fn fill_of(stream: Option<usize>) -> String {
    match stream {
        Some(si) => PALETTE[si % PALETTE.len()].to_string(),
        None => "white".to_string(),
    }
}

/// `(from region, to region) → event ids` of dashed edges; ids of labels like `e3 e7`,
/// or `N` placeholders for `N events`.
fn event_pairs(p: &Parsed, region: impl Fn(&str) -> usize) -> BTreeMap<(usize, usize), String> {
    let mut out = BTreeMap::new();
    for (a, b, attrs) in &p.edges {
        if attrs.contains("dashed") {
            let label = attr(attrs, "label").unwrap();
            let events = label.lines().next().unwrap().to_string();
            out.insert((region(a), region(b)), events);
        }
    }
    out
}

/// The op view's dashed edges collapsed onto regions, labelled as the region views do.
fn op_view_event_pairs(g: &OpGraph, s: &Schedule) -> BTreeMap<(usize, usize), String> {
    let ops = parse(&to_dot_view(g, s, DotView::Ops));
    let region = |id: &str| -> usize {
        let op: usize = id.strip_prefix("op").unwrap().parse().unwrap();
        g.ops[op].region.index()
    };
    let mut sets: BTreeMap<(usize, usize), BTreeSet<u32>> = BTreeMap::new();
    for (a, b, attrs) in &ops.edges {
        if attrs.contains("dashed") {
            let e: u32 = attr(attrs, "label").unwrap()[1..].parse().unwrap();
            sets.entry((region(a), region(b))).or_default().insert(e);
        }
    }
    sets.into_iter()
        .map(|(k, v)| {
            let label = if v.len() > 3 {
                format!("{} events", v.len())
            } else {
                v.iter()
                    .map(|e| format!("e{e}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            (k, label)
        })
        .collect()
}

/// Checks the region view of `plan` (see the module docs); returns it.
fn check_region_view(what: &str, g: &OpGraph, s: &Schedule) -> String {
    let dot = to_dot_view(g, s, DotView::Regions);
    assert_eq!(
        dot,
        to_dot_view(g, s, DotView::Regions),
        "{what}: deterministic"
    );
    assert!(!dot.contains("0x"), "{what}: no addresses");
    let p = parse(&dot);
    let streams = region_streams(g, s);
    // One node per region with ops, filled by its stream.
    let ids: Vec<usize> = p.nodes.iter().map(|(id, _, _)| region_id(id)).collect();
    assert_eq!(
        ids,
        streams.keys().copied().collect::<Vec<_>>(),
        "{what}: nodes"
    );
    for (id, attrs, _) in &p.nodes {
        let want = fill_of(streams[&region_id(id)]);
        assert_eq!(attr(attrs, "fillcolor").unwrap(), want, "{what}: {id}");
        let label = attr(attrs, "label").unwrap();
        let r = &g.regions[region_id(id)];
        assert!(
            label.starts_with(&format!("{}\n{} · ", r.name, r.kind.name())),
            "{what}: {label}"
        );
    }
    // Edges: between drawn nodes, no self-loops, no duplicates.
    let mut pairs = BTreeSet::new();
    for (a, b, _) in &p.edges {
        let (a, b) = (region_id(a), region_id(b));
        assert!(
            streams.contains_key(&a) && streams.contains_key(&b),
            "{what}"
        );
        assert_ne!(a, b, "{what}: self-loop r{a}");
        assert!(pairs.insert((a, b)), "{what}: r{a} -> r{b} twice");
    }
    // Every dependency between two regions is a path of drawn edges.
    let mut succ: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for &(a, b) in &pairs {
        succ.entry(a).or_default().push(b);
    }
    let mut reach: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
    let mut need: BTreeSet<(usize, usize)> = BTreeSet::new();
    for (from, to) in g.edges() {
        let (a, b) = (
            g.ops[from.index()].region.index(),
            g.ops[to.index()].region.index(),
        );
        if a != b {
            need.insert((a, b));
        }
    }
    for (a, b) in need {
        let r = reach.entry(a).or_insert_with(|| {
            let mut seen = BTreeSet::new();
            let mut stack = vec![a];
            while let Some(v) = stack.pop() {
                for &w in succ.get(&v).into_iter().flatten() {
                    if seen.insert(w) {
                        stack.push(w);
                    }
                }
            }
            seen
        });
        assert!(r.contains(&b), "{what}: r{a} -> r{b} is no path");
    }
    // The op view's events, collapsed.
    assert_eq!(
        event_pairs(&p, region_id),
        op_view_event_pairs(g, s),
        "{what}: events"
    );
    // Host waits are drawn when there are any.
    if s.host_waits().count() > 0 {
        assert!(dot.contains("host wait"), "{what}: no host wait drawn");
    }
    dot
}

/// Checks the streams view (see the module docs); returns it.
fn check_streams_view(what: &str, g: &OpGraph, s: &Schedule, regions_dot: &str) -> String {
    let dot = to_dot_view(g, s, DotView::Streams);
    assert_eq!(
        dot,
        to_dot_view(g, s, DotView::Streams),
        "{what}: deterministic"
    );
    let p = parse(&dot);
    let streams = region_streams(g, s);
    let lanes: BTreeSet<&str> = p.nodes.iter().map(|(_, _, c)| c.as_str()).collect();
    let stream_lanes = lanes.iter().filter(|c| c.starts_with("cluster_s")).count();
    assert_eq!(stream_lanes, s.used_streams(), "{what}: lanes");
    let mut regions = Vec::new();
    let mut waits = 0;
    for (id, attrs, cluster) in &p.nodes {
        if id.starts_with("hw") {
            assert_eq!(cluster, "cluster_host", "{what}: {id}");
            // One wait, or "N host waits (hwA–hwB)" for N merged ones.
            let label = attr(attrs, "label").unwrap();
            waits += match label.split_once(" host waits (") {
                Some((n, _)) => {
                    let n: usize = n.parse().unwrap();
                    assert!(n >= 2, "{what}: {id}: {label}");
                    assert!(
                        label.contains(&format!("({id}–hw")),
                        "{what}: {id}: {label}"
                    );
                    n
                }
                None => 1,
            };
            continue;
        }
        let r = region_id(id);
        regions.push(r);
        let want_lane = match streams[&r] {
            Some(si) => format!("cluster_s{si}"),
            None => "cluster_host".to_string(),
        };
        assert_eq!(cluster, &want_lane, "{what}: {id}");
        assert_eq!(
            attr(attrs, "fillcolor").unwrap(),
            fill_of(streams[&r]),
            "{what}"
        );
    }
    regions.sort_unstable();
    assert_eq!(
        regions,
        streams.keys().copied().collect::<Vec<_>>(),
        "{what}"
    );
    assert_eq!(waits, s.host_waits().count(), "{what}: host waits");
    // The same events as the region view (and so as the op view).
    let id = |n: &str| region_id(n);
    assert_eq!(
        event_pairs(&p, id),
        event_pairs(&parse(regions_dot), id),
        "{what}: events"
    );
    dot
}

#[test]
fn every_graph_region_and_streams_views() {
    for path in common::graph_files() {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        for policy in [
            SyncPolicy::Minimal,
            SyncPolicy::PerRegion,
            SyncPolicy::PerOp,
        ] {
            let options = ScheduleOptions {
                policy,
                ..ScheduleOptions::default()
            };
            let plan = common::plan_with(&name, &options);
            if policy != SyncPolicy::Minimal && plan.graph().ops.len() > 1000 {
                continue;
            }
            let what = format!("{name} {policy}");
            let (g, s) = (plan.graph(), plan.schedule());
            let regions = check_region_view(&what, g, s);
            check_streams_view(&what, g, s, &regions);
        }
    }
}

#[test]
fn auto_is_the_region_view_above_the_threshold() {
    for path in common::graph_files() {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let plan = common::plan(&name);
        let want = if plan.graph().ops.len() > AUTO_REGION_VIEW_OPS {
            DotView::Regions
        } else {
            DotView::Ops
        };
        assert_eq!(DotView::Auto.resolve(plan.graph()), want, "{name}");
        assert_eq!(plan.to_dot_view(DotView::Auto), plan.to_dot_view(want));
    }
    assert!(plan_ops("saxpy.toml") <= AUTO_REGION_VIEW_OPS);
    assert!(plan_ops("montage-2mass-005d.toml") > AUTO_REGION_VIEW_OPS);
    assert_eq!(
        common::plan("saxpy.toml").to_dot(),
        common::plan("saxpy.toml").to_dot_view(DotView::Ops)
    );
    for v in DotView::ALL {
        assert_eq!(DotView::parse(v.name()), Some(v));
    }
}

fn plan_ops(name: &str) -> usize {
    common::plan(name).graph().ops.len()
}

/// `produce` copies all of y back (4 KiB), `consume` copies y[0:512] in and out, `check`
/// (a host task) reads y[256:768]: 2 KiB flow from produce to consume; check reads
/// y[256:512] last written by consume (1 KiB) and y[512:768] by produce (1 KiB); the end
/// reads y[0:512] from consume and y[512:1024] from produce.
#[test]
fn bytes_via_host_follow_the_last_writer() {
    let mut p = ProgramBuilder::new("flow");
    let y = p.buffer("y", ElemType::F32, 1024, Init::Zeros);
    p.target("produce", "fill")
        .arg(y)
        .num(1.0)
        .map(MapType::From, y);
    let half = Section::new(y, 0, 512);
    p.target("consume", "increment")
        .arg(half)
        .map(MapType::ToFrom, half);
    p.host_task("check", &[Section::new(y, 256, 512).into()], &[]);
    let plan = Plan::new(p.build(), &ScheduleOptions::default()).unwrap();
    let dot = check_region_view("flow", plan.graph(), plan.schedule());
    let edges: BTreeMap<(usize, usize), String> = parse(&dot)
        .edges
        .iter()
        .map(|(a, b, attrs)| {
            (
                (region_id(a), region_id(b)),
                attr(attrs, "label").unwrap_or_default(),
            )
        })
        .collect();
    let names: Vec<&str> = plan
        .graph()
        .regions
        .iter()
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(names, ["produce", "consume", "check", "end"]);
    assert!(edges[&(0, 1)].ends_with("2 KiB via host"), "{dot}");
    assert!(edges[&(0, 2)].ends_with("1 KiB via host"), "{dot}");
    assert!(edges[&(1, 2)].ends_with("1 KiB via host"), "{dot}");
    assert!(edges[&(0, 3)].ends_with("2 KiB via host"), "{dot}");
    assert!(edges[&(1, 3)].ends_with("2 KiB via host"), "{dot}");
    assert!(
        dot.contains("r0 [label=\"produce\\ntarget · s0 · 4 ops\\nd2h 4 KiB\""),
        "{dot}"
    );
    assert!(dot.contains("\\nh2d 2 KiB · d2h 2 KiB\""), "{dot}");
}

#[test]
fn region_view_snapshots() {
    for name in [
        "case_e02",
        "fanout",
        "montage-2mass-005d",
        "peer_two_devices",
    ] {
        let plan = common::plan(&format!("{name}.toml"));
        let dot = check_region_view(name, plan.graph(), plan.schedule());
        insta::assert_snapshot!(format!("regions_{name}"), dot);
    }
}

#[test]
fn streams_view_snapshot() {
    let plan = common::plan("fanout.toml");
    let (g, s) = (plan.graph(), plan.schedule());
    let regions = to_dot_view(g, s, DotView::Regions);
    let dot = check_streams_view("fanout", g, s, &regions);
    insta::assert_snapshot!("streams_fanout", dot);
}

/// Under per-op, case_e03's 1 000 regions each have 3 host waits (after the H2D, the
/// kernel and the D2H); in the streams view the waits of one region, which follow one
/// another and cover the same region, are one node with one bold edge from the region.
#[test]
fn streams_view_merges_consecutive_waits_on_the_same_regions() {
    let options = ScheduleOptions {
        policy: SyncPolicy::PerOp,
        ..ScheduleOptions::default()
    };
    let plan = common::plan_with("case_e03.toml", &options);
    assert_eq!(plan.schedule().host_waits().count(), 3000);
    let dot = plan.to_dot_view(DotView::Streams);
    let merged = dot.matches("[label=\"3 host waits (hw").count();
    assert_eq!(merged, 1000, "one node per region");
    assert!(dot.contains("hw0 [label=\"3 host waits (hw0–hw2)\\nhost wait s0\""));
    assert_eq!(dot.matches(" [style=bold];").count(), 1000);
    assert_eq!(dot.matches("  r0 -> hw0 [style=bold];").count(), 1);
    assert!(dot.contains("  hw0 -> hw3 [weight=10];"), "host order");
}

/// A region view with many labelled edges gets the layout limits: 80 device regions each
/// read by a host task (161 labelled edges of 240) took Graphviz 2.43 over 100 s without
/// them; with them, well under 10 s.
#[test]
fn many_labelled_edges_get_layout_limits() {
    let mut toml = String::from("name = \"host_reads\"\n[[buffer]]\nname = \"sum\"\ntype = \"i32\"\nlen = 1\ninit = \"zeros\"\n");
    for i in 0..80 {
        toml +=
            &format!("[[buffer]]\nname = \"A{i}\"\ntype = \"i32\"\nlen = 16\ninit = \"iota\"\n");
    }
    for i in 0..80 {
        toml += &format!(
            "[[body]]\ntarget = \"k{i}\"\nkernel = \"increment\"\nargs = [\"A{i}\"]\nmap = [\"tofrom: A{i}\"]\nnowait = true\n\
             [[body]]\nhost = \"h{i}\"\nreads = [\"A{i}\"]\nkernel = \"reduce_sum\"\nargs = [\"A{i}\", \"sum\"]\n"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("host_reads.toml");
    std::fs::write(&path, toml).unwrap();
    let plan = Plan::from_file(&path, &ScheduleOptions::default()).unwrap();
    let dot = plan.to_dot_view(DotView::Regions);
    assert!(dot.contains(" labelled: layout limits"), "{}", &dot[..400]);
    assert!(dot.contains("  nslimit=1; nslimit1=1; mclimit=0.05; splines=line; remincross=false;"));
    // Graphviz lays it out (how long it takes is a benchmark's figure, not a test's:
    // under load it varies tenfold).
    if let Some(took) = common::graphviz_accepts("host_reads regions", &dot) {
        eprintln!("host_reads regions: laid out in {took:?}");
    }
    // A small graph's views carry none.
    let small = common::plan("fanout.toml");
    for view in [DotView::Regions, DotView::Streams] {
        assert!(!small.to_dot_view(view).contains("nslimit"), "{view}");
    }
}

/// Graphviz lays out the region and streams views of the snapshot graphs, under each
/// policy, without a warning (the montage region view takes about 1 s on an idle 2-core
/// machine, against the 10 s that scripts/viz.sh allows; its op view took 7 s before
/// views existed; the time is printed, not asserted: it varies tenfold under load). case_e03 under
/// per-op has 3 000 host waits: one node each made Graphviz 2.43 fail after minutes.
#[test]
fn graphviz_accepts_the_views() {
    for name in [
        "case_e02",
        "case_e03",
        "fanout",
        "montage-2mass-005d",
        "jacobi",
        "srasearch-10a",
    ] {
        for policy in [SyncPolicy::Minimal, SyncPolicy::PerOp] {
            let options = ScheduleOptions {
                policy,
                ..ScheduleOptions::default()
            };
            let plan = common::plan_with(&format!("{name}.toml"), &options);
            for view in [DotView::Regions, DotView::Streams] {
                let what = format!("{name} {policy} {view}");
                let Some(took) = common::graphviz_accepts(&what, &plan.to_dot_view(view)) else {
                    return;
                };
                eprintln!("{what}: laid out in {took:?}");
            }
        }
    }
}

#[test]
fn host_ops_are_labelled_with_their_lane_when_there_are_several() {
    for lanes in [1, 2, 3] {
        let options = ScheduleOptions {
            host_lanes: lanes,
            ..ScheduleOptions::default()
        };
        let plan = common::plan_with("batch_host_consumers.toml", &options);
        let (g, s) = (plan.graph(), plan.schedule());
        let host: Vec<_> = g.op_ids().filter(|&o| g.op(o).kind.is_host()).collect();
        assert_eq!(host.len(), 10, "8 host tasks, taskwait, end");
        let used: BTreeSet<u32> = host.iter().map(|o| s.op_lane[o.index()]).collect();
        match lanes {
            1 => assert_eq!(used, BTreeSet::from([0]), "{lanes} lane"),
            _ => assert!(used.len() >= 2, "{lanes} lanes: {used:?}"),
        }
        for view in [DotView::Ops, DotView::Regions, DotView::Streams] {
            let p = parse(&to_dot_view(g, s, view));
            for &op in &host {
                let id = match view {
                    DotView::Ops => format!("op{}", op.0),
                    _ => format!("r{}", g.op(op).region.0),
                };
                let (_, attrs, _) = p.nodes.iter().find(|n| n.0 == id).unwrap();
                let label = attr(attrs, "label").unwrap();
                match lanes {
                    1 => assert!(!label.contains("lane"), "{view:?} {id}: {label}"),
                    _ => assert!(
                        label.ends_with(&format!("\nlane h{}", s.op_lane[op.index()])),
                        "{view:?} {lanes} lanes, {id}: {label}"
                    ),
                }
            }
            // Device ops and regions never name a lane.
            for (id, attrs, cluster) in &p.nodes {
                if cluster.starts_with("cluster_s") || attrs.contains("fillcolor=\"#") {
                    let label = attr(attrs, "label").unwrap_or_default();
                    assert!(!label.contains("lane h"), "{view:?} {id}: {label}");
                }
            }
        }
    }
}
