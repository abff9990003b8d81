//! `taskgraph` (OpenMP 6.0 §14.3): unrolled into its executions, each lowered exactly as
//! the body written out (same mapping table, copies, dependencies), with the op range of
//! each execution recorded in [`OpGraph::taskgraphs`](super::OpGraph::taskgraphs) for a
//! replay engine. Region names of execution `k` ≥ 1 get `@k` (module docs of
//! [`crate::lower`]).
//!
//! Not modelled: the implicit taskgroup at the end of each execution (OpenMP waits there
//! for the tasks the execution generated unless `nogroup` is given). Only data
//! dependencies order the executions, as they order the body written out; a `taskwait`
//! at the end of the body gives OpenMP's wait.

use super::builder::Lowerer;
use super::{LowerError, OpId, TaskgraphInfo};
use crate::model::Taskgraph;

impl Lowerer<'_> {
    /// Lowers `t.body` `t.repeat` times (`check_program` has refused `repeat` = 0 and
    /// nesting). `O(repeat · body)`.
    pub(super) fn taskgraph(&mut self, t: &Taskgraph) -> Result<(), LowerError> {
        let outer = self.iteration;
        let mut iterations = Vec::with_capacity(t.repeat as usize);
        for k in 0..t.repeat {
            self.iteration = k;
            let start = self.g.ops.len() as u32;
            let first_region = self.g.regions.len();
            self.body(&t.body).map_err(|e| e.in_iteration(k))?;
            let end = self.g.ops.len() as u32;
            self.debug_check_iteration(first_region, start..end);
            iterations.push(start..end);
        }
        self.iteration = outer;
        if self.referenced.contains(&t.name) {
            let all =
                iterations.first().map_or(0, |r| r.start)..iterations.last().map_or(0, |r| r.end);
            let sinks = self.sinks(all);
            self.names.insert(t.name.clone(), sinks);
        }
        self.g.taskgraphs.push(TaskgraphInfo {
            name: t.name.clone(),
            iterations,
        });
        Ok(())
    }

    /// The ops of `range` that no op of `range` follows: what an `after` naming the
    /// taskgraph waits for. `O(ops + edges)` of the range.
    fn sinks(&self, range: std::ops::Range<u32>) -> Vec<OpId> {
        let mut followed = vec![false; range.len()];
        for i in range.clone() {
            for p in self.g.preds(OpId(i)) {
                if range.contains(&p.0) {
                    followed[(p.0 - range.start) as usize] = true;
                }
            }
        }
        range
            .zip(followed)
            .filter(|(_, f)| !f)
            .map(|(i, _)| OpId(i))
            .collect()
    }

    /// Debug builds: every op of an execution's range belongs to a region opened during
    /// that execution (the lowering appends ops in program order, so nothing of an
    /// enclosing construct can land inside).
    fn debug_check_iteration(&self, first_region: usize, ops: std::ops::Range<u32>) {
        if cfg!(debug_assertions) {
            let regions = first_region as u32..self.g.regions.len() as u32;
            for i in ops {
                let r = self.g.ops[i as usize].region.0;
                debug_assert!(
                    regions.contains(&r),
                    "op #{i} of a taskgraph execution is in region {r}, not of it"
                );
            }
        }
    }
}
