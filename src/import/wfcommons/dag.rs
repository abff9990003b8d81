//! The task DAG: task and file names resolved to indices, the edges (`parents`,
//! `children`, and producer → consumer through files), the parents that become `after`,
//! and the order regions are emitted in.

use super::parse::{join, Cx, Named, RawWorkflow};
use crate::graph::stable_toposort;
use crate::import::ImportError;
use petgraph::graph::{DiGraph, NodeIndex};
use std::collections::HashMap;

/// The task graph of a workflow, by task and file index (positions in
/// [`RawWorkflow::tasks`] and [`RawWorkflow::files`]).
pub(super) struct TaskDag {
    /// Input / output file indices per task, deduplicated, sorted.
    pub inputs: Vec<Vec<usize>>,
    pub outputs: Vec<Vec<usize>>,
    /// Tasks writing / reading each file, in task order.
    pub producers: Vec<Vec<usize>>,
    pub consumers: Vec<Vec<usize>>,
    /// Parents per task not implied by a file (for `after`), sorted.
    pub extra_parents: Vec<Vec<usize>>,
    /// Node `t` is task `t`; an edge `p → t` for every predecessor `p` of `t` (parents,
    /// children lists, files), one per pair.
    pub graph: DiGraph<(), ()>,
    /// Tasks in emission order: [`stable_toposort`] of `graph`, ties by task index.
    pub order: Vec<usize>,
}

/// Resolves names and builds the task DAG.
///
/// Errors, in this order: duplicate task ids, duplicate file ids, an unknown file (per
/// task, inputs then outputs), an unknown task in `parents` or `children`, a task that is
/// its own parent or child, then a cycle ([`ImportError::Cycle`], first task repeated at
/// the end).
///
/// Complexity: `O(T log T + F + R)` for `T` tasks, `F` files and `R` file references and
/// parent entries, plus `O(P·C)` producer → consumer edges per file.
pub(super) fn task_dag(wf: &RawWorkflow, cx: &Cx<'_>) -> Result<TaskDag, ImportError> {
    let nt = wf.tasks.len();
    let index = Index::new(wf, cx)?;
    let mut inputs = Vec::with_capacity(nt);
    let mut outputs = Vec::with_capacity(nt);
    for t in &wf.tasks {
        inputs.push(index.files(&t.inputs, cx)?);
        outputs.push(index.files(&t.outputs, cx)?);
    }
    let mut declared = declared_preds(wf, &index, cx)?;
    let (producers, consumers) = file_users(&inputs, &outputs, wf.files.len());
    let mut file_preds = file_preds(nt, &producers, &consumers);
    let mut preds: Vec<Vec<usize>> = Vec::with_capacity(nt);
    let mut extra_parents: Vec<Vec<usize>> = Vec::with_capacity(nt);
    for i in 0..nt {
        let fp = &mut file_preds[i];
        fp.sort_unstable();
        fp.dedup();
        let d = &mut declared[i];
        d.sort_unstable();
        d.dedup();
        extra_parents.push(
            d.iter()
                .copied()
                .filter(|p| fp.binary_search(p).is_err())
                .collect(),
        );
        let mut all: Vec<usize> = d.iter().chain(fp.iter()).copied().collect();
        all.sort_unstable();
        all.dedup();
        preds.push(all);
    }
    let graph = task_graph(&preds);
    let order = topo_order(&graph).map_err(|cycle| ImportError::Cycle {
        source_name: cx.source.to_string(),
        tasks: cycle.iter().map(|&i| wf.tasks[i].id.clone()).collect(),
    })?;
    Ok(TaskDag {
        inputs,
        outputs,
        producers,
        consumers,
        extra_parents,
        graph,
        order,
    })
}

/// Task and file names → indices.
struct Index<'w> {
    tasks: HashMap<&'w str, usize>,
    /// 1.4 task names (1.4 lists parents by name).
    names: HashMap<&'w str, usize>,
    files: HashMap<&'w str, usize>,
}

impl<'w> Index<'w> {
    /// Errors: a duplicate task id, then a duplicate file id.
    fn new(wf: &'w RawWorkflow, cx: &Cx<'_>) -> Result<Index<'w>, ImportError> {
        let mut tasks: HashMap<&str, usize> = HashMap::with_capacity(wf.tasks.len());
        for (i, t) in wf.tasks.iter().enumerate() {
            if let Some(&j) = tasks.get(t.id.as_str()) {
                return Err(cx.invalid(
                    &join(&t.path, "id"),
                    format!("duplicate task id \"{}\" (also {})", t.id, wf.tasks[j].path),
                ));
            }
            tasks.insert(&t.id, i);
        }
        let mut names: HashMap<&str, usize> = HashMap::new();
        for (i, t) in wf.tasks.iter().enumerate() {
            if let Some(n) = &t.alt_name {
                names.entry(n.as_str()).or_insert(i);
            }
        }
        let mut files: HashMap<&str, usize> = HashMap::with_capacity(wf.files.len());
        for (i, f) in wf.files.iter().enumerate() {
            if let Some(&j) = files.get(f.id.as_str()) {
                return Err(cx.invalid(
                    &join(&f.path, "id"),
                    format!("duplicate file id \"{}\" (also {})", f.id, wf.files[j].path),
                ));
            }
            files.insert(&f.id, i);
        }
        Ok(Index {
            tasks,
            names,
            files,
        })
    }

    /// A task named in `parents` or `children`: by 1.4 name first, then by id.
    fn task(&self, n: &Named, cx: &Cx<'_>) -> Result<usize, ImportError> {
        self.names
            .get(n.name.as_str())
            .or_else(|| self.tasks.get(n.name.as_str()))
            .copied()
            .ok_or_else(|| cx.invalid(&n.path, format!("unknown task \"{}\"", n.name)))
    }

    /// The files of a list, deduplicated and sorted.
    fn files(&self, list: &[Named], cx: &Cx<'_>) -> Result<Vec<usize>, ImportError> {
        let mut v = Vec::with_capacity(list.len());
        for n in list {
            let k = *self
                .files
                .get(n.name.as_str())
                .ok_or_else(|| cx.invalid(&n.path, format!("unknown file \"{}\"", n.name)))?;
            if !v.contains(&k) {
                v.push(k);
            }
        }
        v.sort_unstable();
        Ok(v)
    }
}

/// Declared predecessors per task (its `parents`, and the tasks listing it among their
/// `children`), unsorted, with repeats.
///
/// Errors: an unknown task; a task its own parent or child ([`ImportError::Cycle`] of one
/// task).
fn declared_preds(
    wf: &RawWorkflow,
    index: &Index<'_>,
    cx: &Cx<'_>,
) -> Result<Vec<Vec<usize>>, ImportError> {
    let mut declared: Vec<Vec<usize>> = vec![Vec::new(); wf.tasks.len()];
    let own_cycle = |id: &str| ImportError::Cycle {
        source_name: cx.source.to_string(),
        tasks: vec![id.to_string(), id.to_string()],
    };
    for (i, t) in wf.tasks.iter().enumerate() {
        for p in &t.parents {
            let k = index.task(p, cx)?;
            if k == i {
                return Err(own_cycle(&t.id));
            }
            declared[i].push(k);
        }
        for c in &t.children {
            let k = index.task(c, cx)?;
            if k == i {
                return Err(own_cycle(&t.id));
            }
            declared[k].push(i);
        }
    }
    Ok(declared)
}

/// Producing and consuming tasks per file, in task order.
fn file_users(
    inputs: &[Vec<usize>],
    outputs: &[Vec<usize>],
    files: usize,
) -> (Vec<Vec<usize>>, Vec<Vec<usize>>) {
    let mut producers: Vec<Vec<usize>> = vec![Vec::new(); files];
    let mut consumers: Vec<Vec<usize>> = vec![Vec::new(); files];
    for (i, (ins, outs)) in inputs.iter().zip(outputs).enumerate() {
        for &f in outs {
            producers[f].push(i);
        }
        for &f in ins {
            consumers[f].push(i);
        }
    }
    (producers, consumers)
}

/// Predecessors through files: every producer of a file before every other consumer of
/// it. Unsorted, with repeats.
fn file_preds(tasks: usize, producers: &[Vec<usize>], consumers: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let mut file_preds: Vec<Vec<usize>> = vec![Vec::new(); tasks];
    for (ps, cs) in producers.iter().zip(consumers) {
        for &p in ps {
            for &c in cs {
                if c != p {
                    file_preds[c].push(p);
                }
            }
        }
    }
    file_preds
}

/// The graph with an edge `p → i` for each `p` in `preds[i]`.
fn task_graph(preds: &[Vec<usize>]) -> DiGraph<(), ()> {
    let edges: usize = preds.iter().map(Vec::len).sum();
    let mut g = DiGraph::<(), ()>::with_capacity(preds.len(), edges);
    for _ in preds {
        g.add_node(());
    }
    for (i, ps) in preds.iter().enumerate() {
        for &p in ps {
            g.add_edge(NodeIndex::new(p), NodeIndex::new(i), ());
        }
    }
    g
}

/// Tasks in a stable topological order ([`stable_toposort`]: ties by task index). `Err`
/// holds one cycle (first task repeated at the end), in dependency direction.
///
/// Complexity: `O(T log T + E)` for `T` tasks and `E` edges.
fn topo_order(graph: &DiGraph<(), ()>) -> Result<Vec<usize>, Vec<usize>> {
    let indices = |v: Vec<NodeIndex>| v.into_iter().map(NodeIndex::index).collect::<Vec<_>>();
    stable_toposort(graph).map(indices).map_err(|c| {
        let mut cycle = indices(c.nodes);
        if let Some(&first) = cycle.first() {
            cycle.push(first);
        }
        cycle
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topo_order_breaks_ties_by_index_and_finds_cycles() {
        // 2 -> 0, 1 free.
        let preds = vec![vec![2], vec![], vec![]];
        assert_eq!(topo_order(&task_graph(&preds)).unwrap(), [1, 2, 0]);
        // 0 -> 1 -> 2 -> 0, 3 after 2.
        let preds = vec![vec![2], vec![0], vec![1], vec![2]];
        let cycle = topo_order(&task_graph(&preds)).unwrap_err();
        assert_eq!(cycle, [1, 2, 0, 1]);
    }
}
