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
use crate::model::{Construct, Program, Taskgraph};

/// Most constructs a program may have once its taskgraphs are unrolled (16 Mi): a
/// taskgraph multiplies its body by `repeat`, so a short graph file could otherwise ask
/// for billions of ops (op ids are `u32`).
pub const MAX_UNROLLED_CONSTRUCTS: u64 = 1 << 24;

/// Refuses a program whose unrolled size is over [`MAX_UNROLLED_CONSTRUCTS`], naming
/// the first taskgraph that takes it over. Call after the nesting depth is checked (it
/// recurses per level). `O(constructs)`.
pub(super) fn check_unrolled(p: &Program) -> Result<(), LowerError> {
    /// Constructs of `body` unrolled, saturating; the first taskgraph over the cap.
    fn count<'a>(body: &'a [Construct], over: &mut Option<&'a Taskgraph>) -> u64 {
        body.iter()
            .map(|c| match c {
                Construct::TargetData(d) => 1 + count(&d.body, over),
                Construct::Taskgraph(t) => {
                    let n = count(&t.body, over).saturating_mul(u64::from(t.repeat));
                    if n > MAX_UNROLLED_CONSTRUCTS && over.is_none() {
                        *over = Some(t);
                    }
                    1 + n
                }
                _ => 1,
            })
            .fold(0, u64::saturating_add)
    }
    let mut over = None;
    let n = count(&p.body, &mut over);
    match over {
        Some(t) => Err(LowerError::Taskgraph {
            name: t.name.clone(),
            detail: format!(
                "repeat = {} unrolls its body to more than {MAX_UNROLLED_CONSTRUCTS} constructs",
                t.repeat
            ),
            span: t.span,
        }),
        None if n > MAX_UNROLLED_CONSTRUCTS => Err(LowerError::Program {
            program: p.name.clone(),
            detail: format!(
                "{n} constructs once its taskgraphs are unrolled, at most {MAX_UNROLLED_CONSTRUCTS}"
            ),
        }),
        None => Ok(()),
    }
}

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
