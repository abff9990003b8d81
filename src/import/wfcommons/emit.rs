//! Emitting the program of a [`ResolvedWorkflow`] (the `target data` around `nowait`
//! regions in the task order, see the module docs of [`super`]) and its statistics.

use super::{ResolvedWorkflow, WfStats, DATA_CONSTRUCT_NAME};
use crate::model::{DependType, ElemType, Init, MapItem, MapType, Program, ProgramBuilder};
use petgraph::graph::NodeIndex;
use petgraph::Direction::Incoming;
use std::collections::HashSet;

impl ResolvedWorkflow {
    /// Counts and sizes; the critical path is the longest chain of spin times through the
    /// task graph, over the tasks in their topological order (`O(T + E)`).
    pub(super) fn stats(&self) -> WfStats {
        let mut finish = vec![0.0f64; self.spin_us.len()];
        let mut critical: f64 = 0.0;
        for &t in &self.dag.order {
            let start = self
                .dag
                .graph
                .neighbors_directed(NodeIndex::new(t), Incoming)
                .map(|p| finish[p.index()])
                .fold(0.0f64, f64::max);
            finish[t] = start + self.spin_us[t];
            critical = critical.max(finish[t]);
        }
        WfStats {
            tasks: self.wf.tasks.len(),
            files: self.wf.files.len(),
            resident_files: self.resident.iter().filter(|r| r.is_some()).count(),
            extra_parent_edges: self.dag.extra_parents.iter().map(Vec::len).sum(),
            total_spin_us: self.spin_us.iter().sum(),
            critical_path_us: critical,
            total_buffer_bytes: self.buffer_len.iter().sum(),
            max_buffer_bytes: self.buffer_len.iter().copied().max().unwrap_or(0),
        }
    }

    /// The program, named by the file stem of `source_name`: buffers named by the file
    /// ids and regions by the task ids ([`unique_names`]).
    pub(super) fn program(&self, source_name: &str) -> Program {
        let stem = std::path::Path::new(source_name)
            .file_stem()
            .and_then(|s| s.to_str())
            .filter(|s| !s.is_empty())
            .unwrap_or(source_name);
        let region_names = unique_names(self.wf.tasks.iter().map(|t| t.id.as_str()), "task");
        let buffer_names = unique_names(self.wf.files.iter().map(|f| f.id.as_str()), "file");
        let mut b = ProgramBuilder::new(stem);
        let ids: Vec<_> = buffer_names
            .iter()
            .zip(&self.buffer_len)
            .map(|(name, &len)| b.buffer(name, ElemType::U8, len, Init::Zeros))
            .collect();
        let data_maps: Vec<MapItem> = self
            .resident
            .iter()
            .enumerate()
            .filter_map(|(f, r)| r.map(|t| b.map(t, ids[f])))
            .collect();
        let body = |b: &mut ProgramBuilder| {
            for &t in &self.dag.order {
                let mut r = b
                    .target(&region_names[t], "spin")
                    .num(self.spin_us[t])
                    .nowait();
                // One map item per file: to (read), from (written) or tofrom (both).
                let ins = &self.dag.inputs[t];
                let outs = &self.dag.outputs[t];
                let mut files: Vec<usize> = ins.iter().chain(outs.iter()).copied().collect();
                files.sort_unstable();
                files.dedup();
                for f in files {
                    let reads = ins.binary_search(&f).is_ok();
                    let writes = outs.binary_search(&f).is_ok();
                    let (m, d) = match (reads, writes) {
                        (true, true) => (MapType::ToFrom, DependType::InOut),
                        (true, false) => (MapType::To, DependType::In),
                        _ => (MapType::From, DependType::Out),
                    };
                    r = r.map(m, ids[f]).depend(d, ids[f]);
                }
                for &p in &self.dag.extra_parents[t] {
                    r = r.after(&region_names[p]);
                }
                drop(r);
            }
            b.taskwait();
        };
        if data_maps.is_empty() {
            body(&mut b);
        } else {
            b.target_data(DATA_CONSTRUCT_NAME, data_maps, body);
        }
        b.build()
    }
}

/// Names limited to `[A-Za-z0-9_.-]` (others become `_`; empty becomes `fallback`), made
/// unique in order by appending `_2`, `_3`, ...
fn unique_names<'a>(raw: impl Iterator<Item = &'a str>, fallback: &str) -> Vec<String> {
    let raw: Vec<&str> = raw.collect();
    let sanitized: Vec<String> = raw
        .iter()
        .map(|s| {
            let t: String = s
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            if t.is_empty() {
                fallback.to_string()
            } else {
                t
            }
        })
        .collect();
    // Names valid as written keep them; renamed ones then take theirs (or a suffixed
    // one) in order, so a renamed name never steals a name written in the file.
    let mut taken: HashSet<String> = HashSet::with_capacity(raw.len());
    let mut out: Vec<Option<String>> = vec![None; raw.len()];
    for (i, s) in sanitized.iter().enumerate() {
        if s == raw[i] && taken.insert(s.clone()) {
            out[i] = Some(s.clone());
        }
    }
    for (i, base) in sanitized.iter().enumerate() {
        if out[i].is_some() {
            continue;
        }
        let mut cand = base.clone();
        let mut k = 2u64;
        while !taken.insert(cand.clone()) {
            cand = format!("{base}_{k}");
            k += 1;
        }
        out[i] = Some(cand);
    }
    out.into_iter().map(Option::unwrap_or_default).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sanitized_and_unique() {
        let names = unique_names(["a b", "a_b", "", "x", "x"].into_iter(), "task");
        assert_eq!(names, ["a_b_2", "a_b", "task", "x", "x_2"]);
    }
}
