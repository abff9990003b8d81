//! WfCommons WfFormat import: a recorded scientific workflow becomes a [`Program`].
//!
//! WfFormat (<https://github.com/wfcommons/WfFormat>) describes a workflow as tasks that
//! read and write files. Schema 1.5 splits it into `workflow.specification` (tasks with
//! `id`, `parents`, `children`, `inputFiles`, `outputFiles`; files with `id` and
//! `sizeInBytes`) and `workflow.execution` (per task `runtimeInSeconds`). Schema 1.4 (and
//! 1.3) keep one `workflow.tasks[]` list whose tasks carry `runtimeInSeconds` and a
//! `files[]` list of `{link: "input"|"output", name, sizeInBytes}`; both are read.
//!
//! # The translation
//!
//! | WfFormat | program |
//! |---|---|
//! | task | a `nowait` target region named by the task id running the built-in `spin(us)` with `us = runtimeInSeconds × 10⁶ × time_scale` (0 when the runtime is missing) |
//! | file | a `u8` buffer of `max(1, round(sizeInBytes × size_scale))` elements (bytes), zeros |
//! | input file of a task | `map(to: f)` and `depend(in: f)` on the task's region |
//! | output file of a task | `map(from: f)` and `depend(out: f)` (both: `tofrom`, `inout`) |
//! | file produced by one task and consumed by another | *resident*: mapped once by an enclosing `target data` around all regions, so it never goes through the host |
//! | parent not implied by a file | `after = [parent]` on the region ([`TargetRegion::after`](crate::model::TargetRegion::after)) |
//!
//! The enclosing `target data` maps a resident file `alloc`, so by the mapping rules of
//! [design notes](crate::design) the regions' own `to`/`from` items find it present: a `to` of a present entry
//! copies nothing (rule 2), and a `from` whose count stays above 0 at region exit copies
//! nothing (rule 3). Files read only by the workflow (inputs) are copied in by each
//! consuming region; files written and never read (final outputs) are copied back by
//! their producer. Should a resident file be read before any task writes it (a task that
//! reads and writes it comes first) the enclosing map is `to` instead of `alloc`; should
//! the last task touching it write it, `from` (both: `tofrom`). The program is:
//!
//! ```text
//! target data "workflow data" map(alloc: <resident files>) {
//!   target "<task>" nowait depend(...) map(...) after(...)   // topological order
//!   ...
//!   taskwait
//! }
//! ```
//!
//! The `taskwait` sits inside the `target data`, as OpenMP requires of `nowait` tasks that
//! use the construct's data (without resident files there is no `target data` and the
//! body is the regions then the `taskwait`).
//!
//! Regions are emitted in a topological order of the task graph
//! ([`stable_toposort`](crate::graph::stable_toposort): ties broken by task order in the
//! file). Its edges are the `parents` and `children` lists plus producer → consumer
//! edges through files.
//!
//! # Layout
//!
//! One stage per module, in the order an import runs them (`resolve`, then
//! `ResolvedWorkflow::program`):
//! - `parse`: the JSON read into a `RawWorkflow` (tasks and files as written);
//! - `dag`: names resolved, the task DAG and its order (`TaskDag`);
//! - `buffers`: buffer lengths and the resident files' map types;
//! - `emit`: the program and the statistics.

mod buffers;
mod dag;
mod emit;
mod parse;

use super::ImportError;
use crate::model::{MapType, Program};
use buffers::{buffer_lengths, resident_map_types};
use dag::{task_dag, TaskDag};
use parse::{parse, Cx, RawWorkflow};

/// Largest buffer an import may create, in bytes (64 GiB), after scaling.
pub const MAX_BUFFER_BYTES: u64 = 64 << 30;

/// Name of the enclosing `target data` construct. Task names are sanitized to
/// `[A-Za-z0-9_.-]`, so no region can take this name.
pub const DATA_CONSTRUCT_NAME: &str = "workflow data";

/// Scales applied on import.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WfOptions {
    /// Spin time per second of recorded runtime, in seconds (so `1e-3` turns one second
    /// of recorded runtime into 1 ms = 1000 µs of `spin`). Finite, `>= 0`.
    pub time_scale: f64,
    /// Buffer bytes per recorded file byte. Finite, `>= 0`; every buffer keeps at least
    /// one byte.
    pub size_scale: f64,
}

impl Default for WfOptions {
    /// `time_scale = 1e-3`, `size_scale = 1e-2`: every file of the WfInstances sample in
    /// `shared/data/wfinstances` then runs in under 3 s of spin on 4 streams with a
    /// critical path under 1.1 s, and holds under 110 MiB of buffers.
    fn default() -> Self {
        WfOptions {
            time_scale: 1e-3,
            size_scale: 1e-2,
        }
    }
}

/// Facts about an imported workflow at given scales (see [`workflow_stats`]).
#[derive(Clone, Debug, PartialEq)]
pub struct WfStats {
    pub tasks: usize,
    pub files: usize,
    /// Files produced by one task and consumed by another (kept on the device).
    pub resident_files: usize,
    /// `parents` entries not implied by a file (become `after`).
    pub extra_parent_edges: usize,
    /// Sum of every task's spin time, µs.
    pub total_spin_us: f64,
    /// Longest chain of spin times through the task graph, µs (a lower bound on the
    /// run time with unlimited streams).
    pub critical_path_us: f64,
    /// Sum of all buffer sizes, bytes.
    pub total_buffer_bytes: u64,
    /// Largest buffer, bytes.
    pub max_buffer_bytes: u64,
}

/// Imports a WfFormat workflow (schema 1.4 or 1.5) as a program; see the module docs for
/// the translation.
///
/// Arguments: `json_text`, the whole file; `source_name`, the name errors cite (a path)
/// and whose file stem names the program; `opts`, the scales.
///
/// Errors: [`ImportError::Syntax`] for text that is not JSON (with line and column);
/// [`ImportError::Invalid`] with the JSON path for a missing required field (`id` of a
/// task or file, `sizeInBytes`), a wrong type, an unknown file or task name, a duplicate
/// id, a negative size or runtime; [`ImportError::Cycle`] naming the tasks of a cycle;
/// [`ImportError::TooLarge`] for a buffer over [`MAX_BUFFER_BYTES`] after scaling;
/// [`ImportError::BadOption`] for a negative or non-finite scale. Never panics.
///
/// Complexity: `O(T log T + F + R)` for `T` tasks, `F` files and `R` file references and
/// parent entries, plus `O(P·C)` producer → consumer edges per file.
///
/// ```
/// use offload_sched::import::{import_wfcommons, WfOptions};
/// let json = r#"{"schemaVersion": "1.5", "workflow": {
///   "specification": {
///     "tasks": [
///       {"id": "a", "parents": [], "inputFiles": ["in"], "outputFiles": ["mid"]},
///       {"id": "b", "parents": ["a"], "inputFiles": ["mid"], "outputFiles": ["out"]}],
///     "files": [{"id": "in", "sizeInBytes": 4096}, {"id": "mid", "sizeInBytes": 4096},
///               {"id": "out", "sizeInBytes": 4096}]},
///   "execution": {"tasks": [{"id": "a", "runtimeInSeconds": 2.0},
///                           {"id": "b", "runtimeInSeconds": 1.0}]}}}"#;
/// let opts = WfOptions { time_scale: 1e-3, size_scale: 1.0 };
/// let program = import_wfcommons(json, "two.json", &opts).unwrap();
/// assert_eq!(program.name, "two");
/// assert_eq!(program.buffers.len(), 3);
/// ```
pub fn import_wfcommons(
    json_text: &str,
    source_name: &str,
    opts: &WfOptions,
) -> Result<Program, ImportError> {
    Ok(resolve(json_text, source_name, opts)?.program(source_name))
}

/// Counts and sizes of a workflow at the scales `opts` (no program is built).
///
/// Errors: as [`import_wfcommons`].
pub fn workflow_stats(
    json_text: &str,
    source_name: &str,
    opts: &WfOptions,
) -> Result<WfStats, ImportError> {
    Ok(resolve(json_text, source_name, opts)?.stats())
}

/// Scales that keep a run of this workflow short and small: the critical path and the
/// total spin time over 4 streams both at most 2 s, and all buffers together at most
/// 256 MiB. Each scale is the largest of `1, 2, 5 × 10^k` (at most 1) that fits.
///
/// Errors: as [`import_wfcommons`].
pub fn suggest_scales(json_text: &str, source_name: &str) -> Result<WfOptions, ImportError> {
    const TIME_BUDGET_US: f64 = 2e6;
    const STREAMS: f64 = 4.0;
    const BYTES_BUDGET: f64 = (256u64 << 20) as f64;
    let unit = WfOptions {
        time_scale: 1.0,
        // Sizes at scale 1 may exceed the buffer limit; the byte total is computed from
        // the raw sizes below instead.
        size_scale: 0.0,
    };
    let resolved = resolve(json_text, source_name, &unit)?;
    let s = resolved.stats();
    let time_need = s.critical_path_us.max(s.total_spin_us / STREAMS);
    let time_scale = if time_need > 0.0 {
        nice_floor((TIME_BUDGET_US / time_need).min(1.0))
    } else {
        1.0
    };
    let raw_bytes: f64 = resolved.wf.files.iter().map(|f| f.bytes).sum();
    let size_scale = if raw_bytes > 0.0 {
        nice_floor((BYTES_BUDGET / raw_bytes).min(1.0))
    } else {
        1.0
    };
    Ok(WfOptions {
        time_scale,
        size_scale,
    })
}

/// The largest `m × 10^k` with `m ∈ {1, 2, 5}` that is `<= x` (for `x > 0`).
fn nice_floor(x: f64) -> f64 {
    if x.is_nan() || x <= 0.0 || !x.is_finite() {
        return 0.0;
    }
    let k = x.log10().floor();
    let p = 10f64.powf(k);
    for m in [5.0, 2.0, 1.0] {
        // Guard against log10 rounding: accept within one part in 10⁹.
        if m * p <= x * (1.0 + 1e-9) {
            return m * p;
        }
    }
    p / 2.0
}

/// A workflow resolved for emission: names resolved to indices, the task DAG and its
/// order, the buffers and the spin times at the import's scales.
struct ResolvedWorkflow {
    wf: RawWorkflow,
    dag: TaskDag,
    /// Buffer length per file, bytes.
    buffer_len: Vec<u64>,
    /// Map type of each file in the enclosing `target data`; `None`: not resident.
    resident: Vec<Option<MapType>>,
    /// Spin time per task, µs.
    spin_us: Vec<f64>,
}

/// Checks the options, parses the JSON, builds the task DAG, then sizes the buffers and
/// the spin times; errors in that order (see [`import_wfcommons`]).
fn resolve(
    json_text: &str,
    source_name: &str,
    opts: &WfOptions,
) -> Result<ResolvedWorkflow, ImportError> {
    let cx = Cx {
        source: source_name,
    };
    for (option, value) in [
        ("time_scale", opts.time_scale),
        ("size_scale", opts.size_scale),
    ] {
        if !(value.is_finite() && value >= 0.0) {
            return Err(ImportError::BadOption {
                source_name: source_name.to_string(),
                option,
                value,
                message: "a scale must be a finite number >= 0",
            });
        }
    }
    let wf = parse(json_text, &cx)?;
    let dag = task_dag(&wf, &cx)?;
    let resident = resident_map_types(&dag);
    let buffer_len = buffer_lengths(&wf, opts.size_scale, source_name)?;
    let spin_us = spin_times(&wf, opts.time_scale, &cx)?;
    Ok(ResolvedWorkflow {
        wf,
        dag,
        buffer_len,
        resident,
        spin_us,
    })
}

/// Spin time per task in µs: `runtimeInSeconds × 10⁶ × time_scale`.
///
/// Errors: [`ImportError::Invalid`] for the first task whose time is not finite.
fn spin_times(wf: &RawWorkflow, time_scale: f64, cx: &Cx<'_>) -> Result<Vec<f64>, ImportError> {
    let mut spin_us = Vec::with_capacity(wf.tasks.len());
    for t in &wf.tasks {
        let us = t.runtime_s * 1e6 * time_scale;
        if !us.is_finite() {
            return Err(cx.invalid(
                &t.path,
                format!(
                    "runtime {} s × time scale is not a finite number of µs",
                    t.runtime_s
                ),
            ));
        }
        // The lowering's limit on one spin, checked here so the error names the task and
        // the option rather than a region of the lowered program.
        let max = crate::model::SPIN_MAX_US;
        if us > max {
            return Err(cx.invalid(
                &t.path,
                format!(
                    "runtime {} s × time_scale {} = {} µs of spin, over the {max:e} µs (one hour) a spin may take (lower time_scale)",
                    crate::model::Num(t.runtime_s),
                    crate::model::Num(time_scale),
                    crate::model::Num(us)
                ),
            ));
        }
        spin_us.push(us);
    }
    Ok(spin_us)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_floor_picks_1_2_5() {
        assert_eq!(nice_floor(1.0), 1.0);
        assert_eq!(nice_floor(0.7), 0.5);
        assert_eq!(nice_floor(0.03), 0.02);
        assert!((nice_floor(0.0012) - 0.001).abs() < 1e-15);
        assert_eq!(nice_floor(0.0), 0.0);
    }
}
