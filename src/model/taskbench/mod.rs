//! Task Bench (Slaughter et al., "Task Bench: A Parameterized Benchmark for Evaluating
//! Parallel Runtime Performance", SC20; github.com/StanfordLegion/task-bench) as programs.
//!
//! A Task Bench graph is `steps` timesteps of up to `width` points; task `(t, p)` reads
//! the outputs of its dependencies at timestep `t − 1` ([`dependencies`], one of Task
//! Bench's [`TaskBenchPattern`]s), runs a [`TaskBenchKernel`], and writes its output:
//! `output_bytes / 16` pairs `(t, p)` of `i64` (Task Bench's `std::pair<long, long>`).
//! Every task checks its inputs first: each pair of an input from point `q` must be
//! `(t − 1, q)`, or the task fails (Task Bench's `TaskGraph::execute_point` asserts the
//! same). The definitions are transcribed from Task Bench's `core/core.cc` and
//! `core/core_kernel.cc` (commit bf4ad19); each item names its source.
//!
//! [`TaskBenchSpec::new`] validates a [`TaskBenchParams`] (Task Bench's command-line
//! checks and `App::check`); [`taskbench_program`] builds the [`Program`](super::Program)
//! (see there for its buffers, regions and kernels); [`check_outputs`] checks a finished
//! run's last outputs; [`TaskBenchSpec::total_flops`] and [`TaskBenchSpec::total_bytes`]
//! are Task Bench's `count_flops` / `count_bytes`, for efficiency.

mod kernel;
mod pattern;
mod program;
mod spec;

pub use kernel::{MEMORY_SAMPLES, SCRATCH_MAGIC};
pub use program::{check_outputs, field_name, taskbench_program};
pub use spec::{TaskBenchError, TaskBenchKernel, TaskBenchParams, TaskBenchPattern, TaskBenchSpec};

/// The points of timestep `timestep` that are tasks: Task Bench's
/// `offset_at_timestep .. offset_at_timestep + width_at_timestep` (all `0..width` but for
/// `dom`, whose band slides, and `tree`, which doubles per timestep up to `width`); empty
/// past the last timestep.
pub fn points(spec: &TaskBenchSpec, timestep: usize) -> std::ops::Range<usize> {
    if timestep >= spec.steps() {
        return 0..0;
    }
    let g = spec.graph();
    let (o, w) = (g.offset_at(timestep as i64), g.width_at(timestep as i64));
    o as usize..(o + w) as usize
}

/// The predecessors of task `(timestep, point)`: the points of timestep `timestep − 1`
/// whose outputs it reads, ascending, each once. Task Bench's
/// `TaskGraph::dependencies(dependence_set_at_timestep(timestep), point)`, kept to the
/// points of timestep `timestep − 1` (as its `execute_point` does), so timestep 0 has
/// none. Empty for a `(timestep, point)` that is not a task ([`points`]).
///
/// Complexity: `O(d)` for `d` dependencies (`O(radix)` hashes for random_nearest).
pub fn dependencies(spec: &TaskBenchSpec, timestep: usize, point: usize) -> Vec<usize> {
    let mut v: Vec<usize> = dependency_intervals(spec, timestep, point)
        .into_iter()
        .flat_map(|(a, b)| a..=b)
        .collect();
    v.sort_unstable();
    v
}

/// The successors of task `(timestep, point)`: the points of timestep `timestep + 1` that
/// read its output, ascending. Task Bench's `TaskGraph::reverse_dependencies` with the
/// dependence set of timestep `timestep + 1`, kept to that timestep's points. Empty for
/// the last timestep and for a `(timestep, point)` that is not a task.
pub fn reverse_dependencies(spec: &TaskBenchSpec, timestep: usize, point: usize) -> Vec<usize> {
    if !points(spec, timestep).contains(&point) {
        return Vec::new();
    }
    let next = points(spec, timestep + 1);
    let g = spec.graph();
    let mut v: Vec<usize> = g
        .reverse_dependencies(g.dset_at(timestep as i64 + 1), point as i64)
        .into_iter()
        .flat_map(|(a, b)| a..=b)
        .filter(|&r| r >= 0 && next.contains(&(r as usize)))
        .map(|r| r as usize)
        .collect();
    v.sort_unstable();
    v
}

/// [`dependencies`] as Task Bench's inclusive intervals `(first, last)` of points, each
/// clipped to the points of timestep `timestep − 1`, empty ones dropped, in Task Bench's
/// order: one input section per interval in [`taskbench_program`].
pub fn dependency_intervals(
    spec: &TaskBenchSpec,
    timestep: usize,
    point: usize,
) -> Vec<(usize, usize)> {
    if !points(spec, timestep).contains(&point) || timestep == 0 {
        return Vec::new();
    }
    let prev = points(spec, timestep - 1);
    let (lo, hi) = (prev.start as i64, prev.end as i64 - 1);
    let g = spec.graph();
    g.dependencies(g.dset_at(timestep as i64), point as i64)
        .into_iter()
        .filter_map(|(a, b)| {
            let (a, b) = (a.max(lo), b.min(hi));
            (a <= b).then_some((a as usize, b as usize))
        })
        .collect()
}
