//! Reading WfFormat JSON (schema 1.3, 1.4 and 1.5) into a [`RawWorkflow`]: tasks and
//! files as written, names not yet resolved, every value checked for its type and range
//! with its JSON path.

use crate::import::ImportError;
use serde_json::{Map, Value};
use std::collections::HashMap;

/// A name as written, with its JSON path.
#[derive(Clone, Debug)]
pub(super) struct Named {
    pub name: String,
    pub path: String,
}

/// A task as written, with its JSON path.
#[derive(Clone, Debug)]
pub(super) struct RawTask {
    pub id: String,
    /// Name used to resolve 1.4 `parents` (1.4 lists parents by task name).
    pub alt_name: Option<String>,
    pub path: String,
    pub parents: Vec<Named>,
    pub children: Vec<Named>,
    pub inputs: Vec<Named>,
    pub outputs: Vec<Named>,
    /// Recorded runtime in seconds (0 when absent).
    pub runtime_s: f64,
}

/// A file as written, with its JSON path.
#[derive(Clone, Debug)]
pub(super) struct RawFile {
    pub id: String,
    pub path: String,
    /// Recorded size in bytes.
    pub bytes: f64,
}

/// A parsed workflow: tasks and files in file order, names still unresolved.
#[derive(Clone, Debug, Default)]
pub(super) struct RawWorkflow {
    pub tasks: Vec<RawTask>,
    pub files: Vec<RawFile>,
}

/// The input's name, for errors.
pub(super) struct Cx<'s> {
    pub source: &'s str,
}

impl Cx<'_> {
    /// An [`ImportError::Invalid`] at JSON path `path` (`(root)` when empty).
    pub(super) fn invalid(&self, path: &str, message: impl Into<String>) -> ImportError {
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

/// `path.key` (`key` alone at the root).
pub(super) fn join(path: &str, key: &str) -> String {
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

/// Parses the whole file; the schema version picks the layout. A leading UTF-8 byte
/// order mark (which editors on Windows write, and which JSON parsers may ignore, RFC
/// 8259 §8.1) is read as whitespace of the same length, so positions in errors stay
/// those of the file.
///
/// Errors: [`ImportError::Syntax`] for text that is not JSON, [`ImportError::Invalid`]
/// for an unsupported schema version, a missing field or a wrong type or value.
pub(super) fn parse(json_text: &str, cx: &Cx<'_>) -> Result<RawWorkflow, ImportError> {
    let without_bom;
    let json_text = match json_text.strip_prefix('\u{feff}') {
        Some(rest) => {
            without_bom = format!("   {rest}");
            without_bom.as_str()
        }
        None => json_text,
    };
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
