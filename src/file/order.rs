//! Program order from `after`: constructs of one body may name later constructs in
//! `after`; each body is reordered stably ([`stable_toposort`], ties in file order) so that
//! every `after` names an earlier construct. `depend` items keep their file order: a
//! construct that conflicts with an earlier one through `depend` (overlapping sections,
//! at least one `out`/`inout`) stays after it, so a cycle may run through both.
//!
//! An `after` that names a construct in another body orders the two constructs' enclosing
//! elements in their deepest common body. Complexity: `O(N + A log N)` for `N` constructs
//! and `A` `after` names when no body needs reordering; a body that does adds
//! `O(K² D²)` for its `K` elements with `D` depend items each.

use std::collections::{BTreeMap, HashMap};

use petgraph::graph::{DiGraph, NodeIndex};

use super::error::ErrorKind;
use super::section::Bad;
use crate::graph::stable_toposort;
use crate::model::{Construct, Depend, DependType, Span};

/// A parsed construct before ordering; `target_data` and `taskgraph` children live in
/// `children` until [`order_body`] puts them into the construct.
pub(crate) struct Node {
    pub c: Construct,
    /// The construct's name and its span (`None` for `taskwait`).
    pub name: Option<(String, Span)>,
    /// `after` names with their spans.
    pub after: Vec<(String, Span)>,
    pub children: Vec<Node>,
}

impl Node {
    pub(crate) fn leaf(
        c: Construct,
        name: Option<(String, Span)>,
        after: Vec<(String, Span)>,
    ) -> Node {
        Node {
            c,
            name,
            after,
            children: Vec::new(),
        }
    }

    fn label(&self) -> String {
        match &self.name {
            Some((n, _)) => format!("{} \"{n}\"", self.c.kind_name()),
            None => self.c.kind_name().to_string(),
        }
    }
}

fn own_depends(c: &Construct) -> &[Depend] {
    match c {
        Construct::Target(r) => &r.depends,
        Construct::EnterData(d) | Construct::ExitData(d) | Construct::Update(d) => &d.depends,
        Construct::HostTask(h) => &h.depends,
        Construct::TargetData(_) | Construct::Taskgraph(_) | Construct::Taskwait { .. } => &[],
    }
}

fn all_depends<'a>(n: &'a Node, out: &mut Vec<&'a Depend>) {
    out.extend(own_depends(&n.c));
    for c in &n.children {
        all_depends(c, out);
    }
}

fn conflicts(a: &Depend, b: &Depend) -> bool {
    a.section.overlaps(&b.section) && !(a.kind == DependType::In && b.kind == DependType::In)
}

fn line_of(text: &str, s: Span) -> usize {
    text.as_bytes()[..s.start.min(text.len())]
        .iter()
        .filter(|c| **c == b'\n')
        .count()
        + 1
}

fn body_at<'a>(nodes: &'a [Node], path: &[usize]) -> &'a [Node] {
    match path.split_first() {
        None => nodes,
        Some((i, rest)) => nodes
            .get(*i)
            .map(|n| body_at(&n.children, rest))
            .unwrap_or(&[]),
    }
}

fn node_at<'a>(nodes: &'a [Node], path: &[usize]) -> Option<&'a Node> {
    let (last, head) = path.split_last()?;
    body_at(nodes, head).get(*last)
}

/// Edges `(from, to)` per body (keyed by the body's path), with the span to blame.
type Edges = BTreeMap<Vec<usize>, BTreeMap<(usize, usize), Span>>;

/// Orders every body, checks names, and assembles the constructs.
///
/// Errors: duplicate construct names, an `after` naming an unknown construct, itself, or
/// a construct enclosing it (or enclosed by it), and cycles (the message names every
/// construct on one cycle).
pub(crate) fn order_body(nodes: Vec<Node>, text: &str) -> Result<Vec<Construct>, Bad> {
    // Names → paths.
    let mut names: HashMap<String, (Vec<usize>, Span)> = HashMap::new();
    let mut stack: Vec<(Vec<usize>, &Node)> = nodes
        .iter()
        .enumerate()
        .rev()
        .map(|(i, n)| (vec![i], n))
        .collect();
    let mut with_after = Vec::new();
    while let Some((path, n)) = stack.pop() {
        if let Some((name, span)) = &n.name {
            if let Some((_, first)) = names.get(name) {
                return Err(Bad {
                    help: None,
                    kind: ErrorKind::Duplicate,
                    span: *span,
                    message: format!(
                        "duplicate construct name \"{name}\" (first used on line {})",
                        line_of(text, *first)
                    ),
                });
            }
            names.insert(name.clone(), (path.clone(), *span));
        }
        if !n.after.is_empty() {
            with_after.push(path.clone());
        }
        for (i, c) in n.children.iter().enumerate().rev() {
            let mut p = path.clone();
            p.push(i);
            stack.push((p, c));
        }
    }
    // `after` edges, in the deepest common body.
    let mut edges: Edges = BTreeMap::new();
    for cpath in &with_after {
        let Some(n) = node_at(&nodes, cpath) else {
            continue;
        };
        for (target, span) in &n.after {
            let Some((dpath, _)) = names.get(target) else {
                // The construct names in file order.
                let mut known: Vec<(&str, usize)> =
                    names.iter().map(|(k, v)| (k.as_str(), v.1.start)).collect();
                known.sort_by_key(|&(_, at)| at);
                let known: Vec<&str> = known.into_iter().map(|(k, _)| k).collect();
                return Err(Bad {
                    help: Some(crate::suggest::help_for(
                        target,
                        "constructs",
                        known.iter().copied(),
                    )),
                    kind: ErrorKind::UnknownName,
                    span: *span,
                    message: format!(
                        "`after` of {} names unknown construct \"{target}\"",
                        n.label()
                    ),
                });
            };
            let k = cpath.iter().zip(dpath).take_while(|(a, b)| a == b).count();
            if k == cpath.len() || k == dpath.len() {
                let other = node_at(&nodes, dpath)
                    .map(|d| d.label())
                    .unwrap_or_default();
                let why = if dpath == cpath {
                    "itself".to_string()
                } else if k == dpath.len() {
                    format!("{other}, which encloses it")
                } else {
                    format!("{other}, which it encloses")
                };
                return Err(Bad {
                    help: None,
                    kind: ErrorKind::Order,
                    span: *span,
                    message: format!("{} cannot be `after` {why}", n.label()),
                });
            }
            edges
                .entry(cpath[..k].to_vec())
                .or_default()
                .entry((dpath[k], cpath[k]))
                .or_insert(*span);
        }
    }
    // Reorder each body that has edges.
    let mut perms: BTreeMap<Vec<usize>, Vec<usize>> = BTreeMap::new();
    for (path, after_edges) in &edges {
        let body = body_at(&nodes, path);
        let mut all = after_edges.clone();
        let deps: Vec<Vec<&Depend>> = body
            .iter()
            .map(|n| {
                let mut v = Vec::new();
                all_depends(n, &mut v);
                v
            })
            .collect();
        for j in 0..body.len() {
            for i in 0..j {
                let hit = deps[j]
                    .iter()
                    .find(|b| deps[i].iter().any(|a| conflicts(a, b)));
                if let Some(d) = hit {
                    all.entry((i, j)).or_insert(d.span.unwrap_or_default());
                }
            }
        }
        perms.insert(path.clone(), stable_order(body, &all)?);
    }
    let mut nodes = nodes;
    let mut path = Vec::new();
    apply(&mut nodes, &mut path, &mut perms);
    Ok(assemble(nodes))
}

/// Stable topological order of `0..body.len()` (ties in file order, see
/// [`stable_toposort`]), or a cycle error naming the cycle from its first construct in
/// file order, blamed on the span of the edge that closes it.
fn stable_order(body: &[Node], edges: &BTreeMap<(usize, usize), Span>) -> Result<Vec<usize>, Bad> {
    let n = body.len();
    let mut g = DiGraph::<(), Span>::with_capacity(n, edges.len());
    for _ in body {
        g.add_node(());
    }
    for (&(u, v), &span) in edges {
        if u < n && v < n {
            g.add_edge(NodeIndex::new(u), NodeIndex::new(v), span);
        }
    }
    let mut cycle = match stable_toposort(&g) {
        Ok(order) => return Ok(order.into_iter().map(NodeIndex::index).collect()),
        Err(cycle) => cycle.nodes,
    };
    let first = cycle.iter().copied().min().unwrap_or_default();
    let rot = cycle.iter().position(|x| *x == first).unwrap_or(0);
    cycle.rotate_left(rot);
    let span = g
        .find_edge(cycle[cycle.len() - 1], cycle[0])
        .map(|e| g[e])
        .unwrap_or_default();
    let mut names: Vec<String> = cycle.iter().map(|i| body[i.index()].label()).collect();
    names.push(body[cycle[0].index()].label());
    Err(Bad {
        help: None,
        kind: ErrorKind::Order,
        span,
        message: format!(
            "cycle through `after`/`depend` (each must run before the next): {}",
            names.join(" → ")
        ),
    })
}

fn apply(
    nodes: &mut Vec<Node>,
    path: &mut Vec<usize>,
    perms: &mut BTreeMap<Vec<usize>, Vec<usize>>,
) {
    for (i, n) in nodes.iter_mut().enumerate() {
        path.push(i);
        apply(&mut n.children, path, perms);
        path.pop();
    }
    if let Some(perm) = perms.remove(path.as_slice()) {
        let mut slots: Vec<Option<Node>> = std::mem::take(nodes).into_iter().map(Some).collect();
        *nodes = perm
            .iter()
            .filter_map(|i| slots.get_mut(*i).and_then(Option::take))
            .collect();
    }
}

fn assemble(nodes: Vec<Node>) -> Vec<Construct> {
    nodes
        .into_iter()
        .map(|n| {
            let mut c = n.c;
            match &mut c {
                Construct::TargetData(d) => d.body = assemble(n.children),
                Construct::Taskgraph(t) => t.body = assemble(n.children),
                _ => {}
            }
            c
        })
        .collect()
}
