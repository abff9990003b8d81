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
//! | parent not implied by a file | `after = [parent]` on the region ([`TargetRegion::after`]) |
//!
//! The enclosing `target data` maps a resident file `alloc`, so by the mapping rules of
//! DESIGN.md the regions' own `to`/`from` items find it present: a `to` of a present entry
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
//! Regions are emitted in a topological order of the task graph (Kahn's algorithm, ties
//! broken by task order in the file). Its edges are the `parents` and `children` lists
//! plus producer → consumer edges through files.

use super::ImportError;
use crate::model::{DependType, ElemType, Init, MapItem, MapType, Program, ProgramBuilder};
use serde_json::{Map, Value};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

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
    let plan = plan(json_text, source_name, opts)?;
    Ok(plan.build(source_name))
}

/// Counts and sizes of a workflow at the scales `opts` (no program is built).
///
/// Errors: as [`import_wfcommons`].
pub fn workflow_stats(
    json_text: &str,
    source_name: &str,
    opts: &WfOptions,
) -> Result<WfStats, ImportError> {
    Ok(plan(json_text, source_name, opts)?.stats())
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
    let plan = plan(json_text, source_name, &unit)?;
    let s = plan.stats();
    let time_need = s.critical_path_us.max(s.total_spin_us / STREAMS);
    let time_scale = if time_need > 0.0 {
        nice_floor((TIME_BUDGET_US / time_need).min(1.0))
    } else {
        1.0
    };
    let raw_bytes: f64 = plan.wf.files.iter().map(|f| f.bytes).sum();
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

// ---------------------------------------------------------------------------------------
// Parsed workflow (names still unresolved).

/// A name as written, with its JSON path.
#[derive(Clone, Debug)]
struct Named {
    name: String,
    path: String,
}

#[derive(Clone, Debug)]
struct RawTask {
    id: String,
    /// Name used to resolve 1.4 `parents` (1.4 lists parents by task name).
    alt_name: Option<String>,
    path: String,
    parents: Vec<Named>,
    children: Vec<Named>,
    inputs: Vec<Named>,
    outputs: Vec<Named>,
    runtime_s: f64,
}

#[derive(Clone, Debug)]
struct RawFile {
    id: String,
    path: String,
    /// Recorded size in bytes.
    bytes: f64,
}

#[derive(Clone, Debug, Default)]
struct RawWorkflow {
    tasks: Vec<RawTask>,
    files: Vec<RawFile>,
}

struct Cx<'s> {
    source: &'s str,
}

impl Cx<'_> {
    fn invalid(&self, path: &str, message: impl Into<String>) -> ImportError {
        ImportError::Invalid {
            source_name: self.source.to_string(),
            path: if path.is_empty() { "(root)" } else { path }.to_string(),
            message: message.into(),
        }
    }

    fn object<'a>(&self, v: &'a Value, path: &str) -> Result<&'a Map<String, Value>, ImportError> {
        v.as_object()
            .ok_or_else(|| self.invalid(path, format!("expected an object, found {}", kind(v))))
    }

    fn array<'a>(&self, v: &'a Value, path: &str) -> Result<&'a [Value], ImportError> {
        v.as_array()
            .map(|a| a.as_slice())
            .ok_or_else(|| self.invalid(path, format!("expected an array, found {}", kind(v))))
    }

    fn string<'a>(&self, v: &'a Value, path: &str) -> Result<&'a str, ImportError> {
        v.as_str()
            .ok_or_else(|| self.invalid(path, format!("expected a string, found {}", kind(v))))
    }

    /// A finite number `>= 0`.
    fn non_negative(&self, v: &Value, path: &str) -> Result<f64, ImportError> {
        let x = v
            .as_f64()
            .ok_or_else(|| self.invalid(path, format!("expected a number, found {}", kind(v))))?;
        if x.is_finite() && x >= 0.0 {
            Ok(x)
        } else {
            Err(self.invalid(
                path,
                format!("expected a number >= 0, found {}", crate::model::Num(x)),
            ))
        }
    }

    fn required<'a>(
        &self,
        obj: &'a Map<String, Value>,
        path: &str,
        key: &str,
    ) -> Result<(&'a Value, String), ImportError> {
        match obj.get(key) {
            Some(v) => Ok((v, join(path, key))),
            None => Err(self.invalid(path, format!("missing required field `{key}`"))),
        }
    }

    /// A list of strings (`parents`, `inputFiles`, ...); absent or `null` is empty.
    fn names(
        &self,
        obj: &Map<String, Value>,
        path: &str,
        key: &str,
    ) -> Result<Vec<Named>, ImportError> {
        let Some(v) = obj.get(key).filter(|v| !v.is_null()) else {
            return Ok(Vec::new());
        };
        let p = join(path, key);
        self.array(v, &p)?
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let ip = format!("{p}[{i}]");
                Ok(Named {
                    name: self.string(item, &ip)?.to_string(),
                    path: ip,
                })
            })
            .collect()
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn kind(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) => format!("number {n}"),
        Value::String(s) => format!("string {s:?}"),
        Value::Array(_) => "an array".to_string(),
        Value::Object(_) => "an object".to_string(),
    }
}

fn parse(json_text: &str, cx: &Cx<'_>) -> Result<RawWorkflow, ImportError> {
    let root: Value = serde_json::from_str(json_text).map_err(|e| ImportError::Syntax {
        source_name: cx.source.to_string(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    let root_obj = cx.object(&root, "(root)")?;
    if let Some(v) = root_obj.get("schemaVersion") {
        let version = cx.string(v, "schemaVersion")?;
        if !matches!(version, "1.3" | "1.4" | "1.5") {
            return Err(cx.invalid(
                "schemaVersion",
                format!(
                    "unsupported WfFormat schema version {version:?} (supported: 1.3, 1.4, 1.5)"
                ),
            ));
        }
    }
    let (wf, wf_path) = cx.required(root_obj, "", "workflow")?;
    let wf = cx.object(wf, &wf_path)?;
    if wf.contains_key("specification") {
        parse_v15(wf, &wf_path, cx)
    } else if wf.contains_key("tasks") {
        parse_v14(wf, &wf_path, cx)
    } else {
        Err(cx.invalid(
            &wf_path,
            "missing required field `specification` (schema 1.5) or `tasks` (schema 1.4)",
        ))
    }
}

/// Schema 1.5: `workflow.specification.{tasks, files}` and `workflow.execution.tasks`.
fn parse_v15(
    wf: &Map<String, Value>,
    wf_path: &str,
    cx: &Cx<'_>,
) -> Result<RawWorkflow, ImportError> {
    let (spec, spec_path) = cx.required(wf, wf_path, "specification")?;
    let spec = cx.object(spec, &spec_path)?;
    let (tasks_v, tasks_path) = cx.required(spec, &spec_path, "tasks")?;
    let mut out = RawWorkflow::default();
    for (i, t) in cx.array(tasks_v, &tasks_path)?.iter().enumerate() {
        let path = format!("{tasks_path}[{i}]");
        let obj = cx.object(t, &path)?;
        let (id, id_path) = cx.required(obj, &path, "id")?;
        let id = cx.string(id, &id_path)?.to_string();
        out.tasks.push(RawTask {
            id,
            alt_name: None,
            parents: cx.names(obj, &path, "parents")?,
            children: cx.names(obj, &path, "children")?,
            inputs: cx.names(obj, &path, "inputFiles")?,
            outputs: cx.names(obj, &path, "outputFiles")?,
            runtime_s: 0.0,
            path,
        });
    }
    if let Some(files_v) = spec.get("files").filter(|v| !v.is_null()) {
        let files_path = join(&spec_path, "files");
        for (i, f) in cx.array(files_v, &files_path)?.iter().enumerate() {
            let path = format!("{files_path}[{i}]");
            let obj = cx.object(f, &path)?;
            let (id, id_path) = cx.required(obj, &path, "id")?;
            let id = cx.string(id, &id_path)?.to_string();
            let (size, size_path) = cx.required(obj, &path, "sizeInBytes")?;
            let bytes = cx.non_negative(size, &size_path)?;
            out.files.push(RawFile { id, path, bytes });
        }
    }
    // Runtimes from the execution section (optional: a specification alone is a valid
    // workflow description; its tasks then spin for 0 µs).
    if let Some(exec) = wf.get("execution").filter(|v| !v.is_null()) {
        let exec_path = join(wf_path, "execution");
        let exec = cx.object(exec, &exec_path)?;
        if let Some(et) = exec.get("tasks").filter(|v| !v.is_null()) {
            let et_path = join(&exec_path, "tasks");
            let index: HashMap<&str, usize> = out
                .tasks
                .iter()
                .enumerate()
                .map(|(i, t)| (t.id.as_str(), i))
                .collect();
            let mut seen: Vec<Option<String>> = vec![None; out.tasks.len()];
            let mut runtimes = vec![0.0; out.tasks.len()];
            for (i, t) in cx.array(et, &et_path)?.iter().enumerate() {
                let path = format!("{et_path}[{i}]");
                let obj = cx.object(t, &path)?;
                let (id, id_path) = cx.required(obj, &path, "id")?;
                let id = cx.string(id, &id_path)?;
                let Some(&k) = index.get(id) else {
                    return Err(cx.invalid(
                        &id_path,
                        format!("task \"{id}\" is not in workflow.specification.tasks"),
                    ));
                };
                if let Some(prev) = &seen[k] {
                    return Err(cx.invalid(
                        &id_path,
                        format!("task \"{id}\" already has an execution record at {prev}"),
                    ));
                }
                seen[k] = Some(path.clone());
                if let Some(rt) = obj.get("runtimeInSeconds").filter(|v| !v.is_null()) {
                    runtimes[k] = cx.non_negative(rt, &join(&path, "runtimeInSeconds"))?;
                }
            }
            for (t, rt) in out.tasks.iter_mut().zip(runtimes) {
                t.runtime_s = rt;
            }
        }
    }
    Ok(out)
}

/// Schema 1.4 (and 1.3): `workflow.tasks[]` with `name`, `id`, `parents` (task names),
/// `runtimeInSeconds` and `files[] {link, name, sizeInBytes}`.
fn parse_v14(
    wf: &Map<String, Value>,
    wf_path: &str,
    cx: &Cx<'_>,
) -> Result<RawWorkflow, ImportError> {
    let (tasks_v, tasks_path) = cx.required(wf, wf_path, "tasks")?;
    let mut out = RawWorkflow::default();
    let mut file_index: HashMap<String, usize> = HashMap::new();
    for (i, t) in cx.array(tasks_v, &tasks_path)?.iter().enumerate() {
        let path = format!("{tasks_path}[{i}]");
        let obj = cx.object(t, &path)?;
        let name = match obj.get("name") {
            Some(v) => Some(cx.string(v, &join(&path, "name"))?.to_string()),
            None => None,
        };
        let id = match obj.get("id") {
            Some(v) => cx.string(v, &join(&path, "id"))?.to_string(),
            None => match &name {
                Some(n) => n.clone(),
                None => return Err(cx.invalid(&path, "missing required field `id` (or `name`)")),
            },
        };
        let runtime_s = match obj.get("runtimeInSeconds").filter(|v| !v.is_null()) {
            Some(v) => cx.non_negative(v, &join(&path, "runtimeInSeconds"))?,
            None => 0.0,
        };
        let mut inputs = Vec::new();
        let mut outputs = Vec::new();
        if let Some(fv) = obj.get("files").filter(|v| !v.is_null()) {
            let fpath = join(&path, "files");
            for (j, f) in cx.array(fv, &fpath)?.iter().enumerate() {
                let p = format!("{fpath}[{j}]");
                let fo = cx.object(f, &p)?;
                let (fname, fname_path) = match fo.get("name") {
                    Some(v) => (v, join(&p, "name")),
                    None => cx.required(fo, &p, "id")?,
                };
                let fname = cx.string(fname, &fname_path)?.to_string();
                let (size, size_path) = cx.required(fo, &p, "sizeInBytes")?;
                let bytes = cx.non_negative(size, &size_path)?;
                let (link, link_path) = cx.required(fo, &p, "link")?;
                let named = Named {
                    name: fname.clone(),
                    path: p.clone(),
                };
                match cx.string(link, &link_path)? {
                    "input" => inputs.push(named),
                    "output" => outputs.push(named),
                    other => {
                        return Err(cx.invalid(
                            &link_path,
                            format!("expected \"input\" or \"output\", found {other:?}"),
                        ))
                    }
                }
                // One buffer per file name; a file listed by several tasks with different
                // sizes takes the largest.
                match file_index.get(&fname) {
                    Some(&k) => {
                        let f = &mut out.files[k];
                        f.bytes = f.bytes.max(bytes);
                    }
                    None => {
                        file_index.insert(fname.clone(), out.files.len());
                        out.files.push(RawFile {
                            id: fname,
                            path: p,
                            bytes,
                        });
                    }
                }
            }
        }
        out.tasks.push(RawTask {
            id,
            alt_name: name,
            parents: cx.names(obj, &path, "parents")?,
            children: cx.names(obj, &path, "children")?,
            inputs,
            outputs,
            runtime_s,
            path,
        });
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// Resolved plan.

struct Plan {
    wf: RawWorkflow,
    /// Sanitized, unique region name per task.
    region_names: Vec<String>,
    /// Sanitized, unique buffer name per file.
    buffer_names: Vec<String>,
    /// Buffer length per file, bytes.
    buffer_len: Vec<u64>,
    /// Spin time per task, µs.
    spin_us: Vec<f64>,
    /// Input / output file indices per task, deduplicated, in file-list order.
    inputs: Vec<Vec<usize>>,
    outputs: Vec<Vec<usize>>,
    /// Parents per task not implied by a file (for `after`), sorted.
    extra_parents: Vec<Vec<usize>>,
    /// All predecessors per task (parents, children lists, files), sorted.
    preds: Vec<Vec<usize>>,
    /// Tasks in emission order.
    order: Vec<usize>,
    /// Map type of each file in the enclosing `target data`; `None`: not resident.
    resident: Vec<Option<MapType>>,
}

fn plan(json_text: &str, source_name: &str, opts: &WfOptions) -> Result<Plan, ImportError> {
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
    let nt = wf.tasks.len();
    let nf = wf.files.len();

    // Unique ids.
    let mut task_index: HashMap<&str, usize> = HashMap::with_capacity(nt);
    for (i, t) in wf.tasks.iter().enumerate() {
        if let Some(&j) = task_index.get(t.id.as_str()) {
            return Err(cx.invalid(
                &join(&t.path, "id"),
                format!("duplicate task id \"{}\" (also {})", t.id, wf.tasks[j].path),
            ));
        }
        task_index.insert(&t.id, i);
    }
    // 1.4 lists parents by name; names resolve first, then ids.
    let mut name_index: HashMap<&str, usize> = HashMap::new();
    for (i, t) in wf.tasks.iter().enumerate() {
        if let Some(n) = &t.alt_name {
            name_index.entry(n.as_str()).or_insert(i);
        }
    }
    let mut file_index: HashMap<&str, usize> = HashMap::with_capacity(nf);
    for (i, f) in wf.files.iter().enumerate() {
        if let Some(&j) = file_index.get(f.id.as_str()) {
            return Err(cx.invalid(
                &join(&f.path, "id"),
                format!("duplicate file id \"{}\" (also {})", f.id, wf.files[j].path),
            ));
        }
        file_index.insert(&f.id, i);
    }
    let lookup_task = |n: &Named| -> Result<usize, ImportError> {
        name_index
            .get(n.name.as_str())
            .or_else(|| task_index.get(n.name.as_str()))
            .copied()
            .ok_or_else(|| cx.invalid(&n.path, format!("unknown task \"{}\"", n.name)))
    };
    let lookup_files = |list: &[Named]| -> Result<Vec<usize>, ImportError> {
        let mut v = Vec::with_capacity(list.len());
        for n in list {
            let k = *file_index
                .get(n.name.as_str())
                .ok_or_else(|| cx.invalid(&n.path, format!("unknown file \"{}\"", n.name)))?;
            if !v.contains(&k) {
                v.push(k);
            }
        }
        v.sort_unstable();
        Ok(v)
    };

    let mut inputs = Vec::with_capacity(nt);
    let mut outputs = Vec::with_capacity(nt);
    for t in &wf.tasks {
        inputs.push(lookup_files(&t.inputs)?);
        outputs.push(lookup_files(&t.outputs)?);
    }

    // Declared edges (parents, and children seen from the other side).
    let mut declared: Vec<Vec<usize>> = vec![Vec::new(); nt];
    for (i, t) in wf.tasks.iter().enumerate() {
        for p in &t.parents {
            let k = lookup_task(p)?;
            if k == i {
                return Err(ImportError::Cycle {
                    source_name: source_name.to_string(),
                    tasks: vec![t.id.clone(), t.id.clone()],
                });
            }
            declared[i].push(k);
        }
        for c in &t.children {
            let k = lookup_task(c)?;
            if k == i {
                return Err(ImportError::Cycle {
                    source_name: source_name.to_string(),
                    tasks: vec![t.id.clone(), t.id.clone()],
                });
            }
            declared[k].push(i);
        }
    }
    // File edges: every producer before every other consumer.
    let mut producers: Vec<Vec<usize>> = vec![Vec::new(); nf];
    let mut consumers: Vec<Vec<usize>> = vec![Vec::new(); nf];
    for i in 0..nt {
        for &f in &outputs[i] {
            producers[f].push(i);
        }
        for &f in &inputs[i] {
            consumers[f].push(i);
        }
    }
    let mut file_preds: Vec<Vec<usize>> = vec![Vec::new(); nt];
    for f in 0..nf {
        for &p in &producers[f] {
            for &c in &consumers[f] {
                if c != p {
                    file_preds[c].push(p);
                }
            }
        }
    }
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

    let order = topo_order(&preds).map_err(|cycle| ImportError::Cycle {
        source_name: source_name.to_string(),
        tasks: cycle.iter().map(|&i| wf.tasks[i].id.clone()).collect(),
    })?;

    // Resident files and their enclosing map type (see the module docs).
    let mut position = vec![0usize; nt];
    for (pos, &t) in order.iter().enumerate() {
        position[t] = pos;
    }
    let mut resident = vec![None; nf];
    for f in 0..nf {
        let shared = producers[f]
            .iter()
            .any(|p| consumers[f].iter().any(|c| c != p));
        if !shared {
            continue;
        }
        let users = producers[f].iter().chain(consumers[f].iter());
        let first = users.clone().min_by_key(|&&t| position[t]).copied();
        let last = users.max_by_key(|&&t| position[t]).copied();
        let to = first.is_some_and(|t| inputs[t].binary_search(&f).is_ok());
        let from = last.is_some_and(|t| outputs[t].binary_search(&f).is_ok());
        resident[f] = Some(match (to, from) {
            (true, true) => MapType::ToFrom,
            (true, false) => MapType::To,
            (false, true) => MapType::From,
            (false, false) => MapType::Alloc,
        });
    }

    // Sizes and times.
    let mut buffer_len = Vec::with_capacity(nf);
    for f in &wf.files {
        let scaled = (f.bytes * opts.size_scale).round();
        if !scaled.is_finite() || scaled > MAX_BUFFER_BYTES as f64 {
            return Err(ImportError::TooLarge {
                source_name: source_name.to_string(),
                path: join(&f.path, "sizeInBytes"),
                file: f.id.clone(),
                bytes: scaled,
                limit: MAX_BUFFER_BYTES,
            });
        }
        buffer_len.push((scaled as u64).max(1));
    }
    let mut spin_us = Vec::with_capacity(nt);
    for t in &wf.tasks {
        let us = t.runtime_s * 1e6 * opts.time_scale;
        if !us.is_finite() {
            return Err(cx.invalid(
                &t.path,
                format!(
                    "runtime {} s × time scale is not a finite number of µs",
                    t.runtime_s
                ),
            ));
        }
        spin_us.push(us);
    }

    let region_names = unique_names(wf.tasks.iter().map(|t| t.id.as_str()), "task");
    let buffer_names = unique_names(wf.files.iter().map(|f| f.id.as_str()), "file");
    Ok(Plan {
        wf,
        region_names,
        buffer_names,
        buffer_len,
        spin_us,
        inputs,
        outputs,
        extra_parents,
        preds,
        order,
        resident,
    })
}

/// Kahn's algorithm with ties broken by index. `Err` holds one cycle (first task
/// repeated at the end), in dependency direction.
///
/// Complexity: `O((V + E) log V)`.
fn topo_order(preds: &[Vec<usize>]) -> Result<Vec<usize>, Vec<usize>> {
    let n = preds.len();
    let mut succs: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut indeg = vec![0usize; n];
    for (i, ps) in preds.iter().enumerate() {
        indeg[i] = ps.len();
        for &p in ps {
            succs[p].push(i);
        }
    }
    let mut ready: BinaryHeap<Reverse<usize>> =
        (0..n).filter(|&i| indeg[i] == 0).map(Reverse).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse(i)) = ready.pop() {
        order.push(i);
        for &s in &succs[i] {
            indeg[s] -= 1;
            if indeg[s] == 0 {
                ready.push(Reverse(s));
            }
        }
    }
    if order.len() == n {
        return Ok(order);
    }
    // Every task left has a predecessor left: walk predecessors until one repeats.
    let left: Vec<bool> = indeg.iter().map(|&d| d > 0).collect();
    let start = (0..n).find(|&i| left[i]).unwrap_or(0);
    let mut seen_at = vec![usize::MAX; n];
    let mut walk = Vec::new();
    let mut cur = start;
    while seen_at[cur] == usize::MAX {
        seen_at[cur] = walk.len();
        walk.push(cur);
        match preds[cur].iter().copied().find(|&p| left[p]) {
            Some(p) => cur = p,
            None => break, // cannot happen: `cur` is left, so a predecessor is left
        }
    }
    let from = if seen_at[cur] == usize::MAX {
        0
    } else {
        seen_at[cur]
    };
    let mut cycle: Vec<usize> = walk[from..].to_vec();
    cycle.reverse();
    if let Some(&first) = cycle.first() {
        cycle.push(first);
    }
    Err(cycle)
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

impl Plan {
    fn stats(&self) -> WfStats {
        let mut finish = vec![0.0f64; self.spin_us.len()];
        let mut critical: f64 = 0.0;
        for &t in &self.order {
            let start = self.preds[t]
                .iter()
                .map(|&p| finish[p])
                .fold(0.0f64, f64::max);
            finish[t] = start + self.spin_us[t];
            critical = critical.max(finish[t]);
        }
        WfStats {
            tasks: self.wf.tasks.len(),
            files: self.wf.files.len(),
            resident_files: self.resident.iter().filter(|r| r.is_some()).count(),
            extra_parent_edges: self.extra_parents.iter().map(Vec::len).sum(),
            total_spin_us: self.spin_us.iter().sum(),
            critical_path_us: critical,
            total_buffer_bytes: self.buffer_len.iter().sum(),
            max_buffer_bytes: self.buffer_len.iter().copied().max().unwrap_or(0),
        }
    }

    fn build(&self, source_name: &str) -> Program {
        let stem = std::path::Path::new(source_name)
            .file_stem()
            .and_then(|s| s.to_str())
            .filter(|s| !s.is_empty())
            .unwrap_or(source_name);
        let mut b = ProgramBuilder::new(stem);
        let ids: Vec<_> = self
            .buffer_names
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
            for &t in &self.order {
                let mut r = b
                    .target(&self.region_names[t], "spin")
                    .num(self.spin_us[t])
                    .nowait();
                // One map item per file: to (read), from (written) or tofrom (both).
                let ins = &self.inputs[t];
                let outs = &self.outputs[t];
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
                for &p in &self.extra_parents[t] {
                    r = r.after(&self.region_names[p]);
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

    #[test]
    fn names_are_sanitized_and_unique() {
        let names = unique_names(["a b", "a_b", "", "x", "x"].into_iter(), "task");
        assert_eq!(names, ["a_b_2", "a_b", "task", "x", "x_2"]);
    }

    #[test]
    fn topo_order_breaks_ties_by_index_and_finds_cycles() {
        // 2 -> 0, 1 free.
        let preds = vec![vec![2], vec![], vec![]];
        assert_eq!(topo_order(&preds).unwrap(), [1, 2, 0]);
        // 0 -> 1 -> 2 -> 0, 3 after 2.
        let preds = vec![vec![2], vec![0], vec![1], vec![2]];
        let cycle = topo_order(&preds).unwrap_err();
        assert_eq!(cycle, [1, 2, 0, 1]);
    }
}
