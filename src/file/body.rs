//! `[[body]]` entries: construct kinds, their keys, clauses, kernel arguments checked
//! against the kernel's signature.

use toml_edit::Value;

use super::error::ErrorKind;
use super::order::Node;
use super::parse::{Parser, MAX_DEPTH, R};
use super::section::{self, MapPlace};
use super::values::{value_type_name, Field, Tbl};
use crate::model::{
    Arg, BufferId, CallError, Construct, DataConstruct, Depend, HostTask, KernelSig, LaunchShape,
    MapItem, Section, Span, TargetData, TargetRegion, Taskgraph,
};
use crate::suggest;

/// Construct kind keys of a `[[body]]` entry.
const KINDS: [&str; 8] = [
    "target",
    "target_data",
    "taskgraph",
    "enter_data",
    "exit_data",
    "update",
    "host",
    "taskwait",
];

/// The keys a `[[body]]` entry of `kind` may have (`rank` places the construct for a
/// distributed run; `distribute::file` reads it, one process ignores it).
fn allowed_keys(kind: &str) -> &'static [&'static str] {
    match kind {
        "target" => &[
            "target", "kernel", "args", "map", "nowait", "depend", "device", "launch", "priority",
            "after", "rank",
        ],
        "target_data" => &["target_data", "map", "device", "body"],
        "taskgraph" => &["taskgraph", "repeat", "body"],
        "host" => &[
            "host", "reads", "writes", "kernel", "args", "depend", "after", "rank",
        ],
        "enter_data" => &["enter_data", "map", "nowait", "depend", "device", "after"],
        "exit_data" => &["exit_data", "map", "nowait", "depend", "device", "after"],
        _ => &["update", "map", "nowait", "depend", "device", "after"],
    }
}

impl Parser<'_> {
    // ---- body ---------------------------------------------------------------------

    /// The field of a `[[body]]` entry that names its kind (`target = "name"`, ...).
    fn kind_field<'t>(&self, t: &'t Tbl<'t>) -> R<&'t Field<'t>> {
        let kinds: Vec<&Field> = t.fields.iter().filter(|f| KINDS.contains(&f.key)).collect();
        match kinds.as_slice() {
            [] => {
                // A misspelt kind (`targt = "k"`) is pointed at; else the entry's header.
                let typo = t.fields.iter().find_map(|f| {
                    suggest::did_you_mean(f.key, KINDS)
                        .filter(|_| !KINDS.iter().any(|k| allowed_keys(k).contains(&f.key)))
                        .map(|k| (f, k))
                });
                let list = KINDS.join(", ");
                Err(match typo {
                    Some((f, k)) => self
                        .err(
                            ErrorKind::UnknownKey,
                            f.key_span,
                            format!(
                                "unknown construct kind `{}` in a body entry (kinds: {list})",
                                f.key
                            ),
                        )
                        .with_help(format!("did you mean `{k}`?")),
                    None => self.err(
                        ErrorKind::Missing,
                        t.header,
                        format!("body entry has no construct kind: give exactly one of {list}"),
                    ),
                })
            }
            [one] => Ok(*one),
            [a, b, ..] => Err(self.err(
                ErrorKind::BadValue,
                b.key_span,
                format!(
                    "body entry has two construct kinds, `{}` and `{}`: give exactly one",
                    a.key, b.key
                ),
            )),
        }
    }

    /// Refuses a nested body (`[[body.body]]`, a `body` key) under an entry of `kind` other
    /// than `target_data` and `taskgraph`, the two constructs whose body holds
    /// constructs (OpenMP: a `target` region's body is its kernel; enter/exit data,
    /// update and taskwait are stand-alone directives), naming which nest. Located at
    /// the nested entry's header.
    fn no_nested_body(&self, t: &Tbl, kind: &str, what: &str) -> R<()> {
        if allowed_keys(kind).contains(&"body") {
            return Ok(());
        }
        let Some(f) = t.get("body") else {
            return Ok(());
        };
        Err(self
            .err(
                ErrorKind::UnknownKey,
                f.key_span,
                format!(
                    "{what} cannot hold a nested body ([[body.body]]): only `target_data` and \
                     `taskgraph` entries nest constructs; `target`, `enter_data`, `exit_data`, \
                     `update`, `host` and `taskwait` entries do not"
                ),
            )
            .with_help(
                "move the nested entries up one level (after this one), or put this entry \
                 and them in the body of a `target_data` or `taskgraph` entry",
            ))
    }

    /// One `[[body]]` entry as a [`Node`]; a `target_data` or `taskgraph` entry's own
    /// body is read recursively (`depth`: how deeply `t` is nested; `taskgraph`: the
    /// name of the taskgraph `t` is inside, if any).
    pub(super) fn construct(&self, t: &Tbl, depth: usize, taskgraph: Option<&str>) -> R<Node> {
        let kf = self.kind_field(t)?;
        let kind = kf.key;
        let nloc = self.string(kf, &format!("a {kind} entry"))?;
        let name = nloc.text.to_string();
        let span = Some(nloc.whole);
        if kind == "taskwait" {
            self.no_nested_body(t, kind, "taskwait")?;
            self.check_keys(t, &["taskwait"], "taskwait")?;
            return Ok(Node::leaf(
                Construct::Taskwait { name, span },
                None,
                Vec::new(),
            ));
        }
        if name.is_empty() {
            return Err(self.err(
                ErrorKind::BadValue,
                nloc.whole,
                format!("{kind} name must not be empty"),
            ));
        }
        let what = format!("{kind} \"{name}\"");
        self.no_nested_body(t, kind, &what)?;
        self.check_keys(t, allowed_keys(kind), &what)?;
        let place = match kind {
            "exit_data" => MapPlace::Exit,
            "update" => MapPlace::Update,
            _ => MapPlace::Entry,
        };
        let maps = self.maps(t, place, &what)?;
        let depends = self.depends(t, &what)?;
        let device = self.device(t, &what)?;
        let nowait = t
            .get("nowait")
            .map(|f| self.boolean(f, &what))
            .transpose()?
            .unwrap_or(false);
        let after = self.after(t, &what)?;
        let after_names: Vec<String> = after.iter().map(|(n, _)| n.clone()).collect();
        let c = match kind {
            "target" => {
                let kf = self.required(t, "kernel", &what)?;
                let kloc = self.string(kf, &what)?;
                let (args, arg_spans) = self.args(t, &what)?;
                self.check_call(kloc.text, kloc.whole, &args, &arg_spans, t, &what)?;
                let launch = t.get("launch").map(|f| self.launch(f, &what)).transpose()?;
                let priority = self.priority(t, &what)?;
                Construct::Target(TargetRegion {
                    name: name.clone(),
                    kernel: kloc.text.to_string(),
                    args,
                    maps,
                    nowait,
                    depends,
                    device,
                    launch,
                    priority,
                    after: after_names,
                    span,
                })
            }
            "host" => {
                let (kernel, args) = self.host_call(t, &what)?;
                Construct::HostTask(HostTask {
                    name: name.clone(),
                    reads: self.section_list(t, "reads", &what)?,
                    writes: self.section_list(t, "writes", &what)?,
                    kernel,
                    args,
                    body: None,
                    depends,
                    after: after_names,
                    lane: None,
                    span,
                })
            }
            "target_data" | "taskgraph" => {
                // `depth` is this construct's level (1 at the top).
                if depth > MAX_DEPTH {
                    return Err(self.err(
                        ErrorKind::BadValue,
                        nloc.whole,
                        format!("{what} is nested {depth} deep, at most {MAX_DEPTH}"),
                    ));
                }
                let inner = if kind == "taskgraph" {
                    if let Some(outer) = taskgraph {
                        return Err(self.err(
                            ErrorKind::BadValue,
                            nloc.whole,
                            format!(
                                "nested taskgraph is not supported: {what} is inside taskgraph \"{outer}\""
                            ),
                        ));
                    }
                    Some(name.as_str())
                } else {
                    taskgraph
                };
                let mut children = Vec::new();
                if let Some(f) = t.get("body") {
                    for ct in self.tables(f, &format!("body of {what}"))? {
                        children.push(self.construct(&ct, depth + 1, inner)?);
                    }
                }
                let c = if kind == "taskgraph" {
                    Construct::Taskgraph(Taskgraph {
                        name: name.clone(),
                        repeat: self.repeat(t, &what)?,
                        body: Vec::new(),
                        span,
                    })
                } else {
                    Construct::TargetData(TargetData {
                        name: name.clone(),
                        maps,
                        device,
                        body: Vec::new(),
                        span,
                    })
                };
                return Ok(Node {
                    c,
                    name: Some((name, nloc.whole)),
                    after: Vec::new(),
                    children,
                });
            }
            _ => {
                let d = DataConstruct {
                    name: name.clone(),
                    maps,
                    nowait,
                    depends,
                    device,
                    after: after_names,
                    span,
                };
                match kind {
                    "enter_data" => Construct::EnterData(d),
                    "exit_data" => Construct::ExitData(d),
                    _ => Construct::Update(d),
                }
            }
        };
        let mut n = Node::leaf(c, Some((name, nloc.whole)), Vec::new());
        n.after = after;
        Ok(n)
    }

    /// `repeat` of a taskgraph: an integer from 1 to 4294967295, default 1.
    /// `priority = N` of a target region (OpenMP 5.2 §12.4 `priority(n)`: a
    /// non-negative integer, a hint): 0 when absent. Errors: not an integer, negative,
    /// or above 4294967295, located at the value.
    fn priority(&self, t: &Tbl, what: &str) -> R<u32> {
        let Some(f) = t.get("priority") else {
            return Ok(0);
        };
        let n = self.int(f, what)?;
        u32::try_from(n).map_err(|_| {
            let message = if n < 0 {
                format!(
                    "`priority` of {what} must not be negative (OpenMP `priority(n)` takes an \
                     integer from 0), found {n}"
                )
            } else {
                format!(
                    "`priority` of {what} is too large: {n} is over the largest priority, {} \
                     (2^32 − 1)",
                    u32::MAX
                )
            };
            self.err(ErrorKind::BadValue, f.span, message)
        })
    }

    fn repeat(&self, t: &Tbl, what: &str) -> R<u32> {
        let Some(f) = t.get("repeat") else {
            return Ok(1);
        };
        let n = self.int(f, what)?;
        u32::try_from(n).ok().filter(|&n| n >= 1).ok_or_else(|| {
            self.err(
                ErrorKind::BadValue,
                f.span,
                format!(
                    "`repeat` of {what} must be an integer from 1 to {}, found {n}",
                    u32::MAX
                ),
            )
        })
    }

    /// The optional kernel of a `host` entry and its arguments, checked.
    fn host_call(&self, t: &Tbl, what: &str) -> R<(Option<String>, Vec<Arg>)> {
        let kernel = t.get("kernel").map(|f| self.string(f, what)).transpose()?;
        let (args, arg_spans) = self.args(t, what)?;
        match &kernel {
            Some(k) => self.check_call(k.text, k.whole, &args, &arg_spans, t, what)?,
            None => {
                if let (Some(f), Some(_)) = (t.get("args"), args.first()) {
                    return Err(self.err(
                        ErrorKind::Arguments,
                        f.span,
                        format!("{what} has `args` but no `kernel`"),
                    ));
                }
            }
        }
        Ok((kernel.map(|k| k.text.to_string()), args))
    }

    pub(super) fn maps(&self, t: &Tbl, place: MapPlace, what: &str) -> R<Vec<MapItem>> {
        let Some(f) = t.get("map") else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        let bufs = self.bufs();
        let item_what = match place {
            MapPlace::Update => format!("update motion of {what}"),
            _ => format!("map item of {what}"),
        };
        for s in self.strings(f, what)? {
            out.extend(section::parse_map(&s, &bufs, place, &item_what).map_err(|b| self.bad(b))?);
        }
        Ok(out)
    }

    pub(super) fn depends(&self, t: &Tbl, what: &str) -> R<Vec<Depend>> {
        let Some(f) = t.get("depend") else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        let bufs = self.bufs();
        let item_what = format!("depend item of {what}");
        for s in self.strings(f, what)? {
            out.extend(section::parse_depend(&s, &bufs, &item_what).map_err(|b| self.bad(b))?);
        }
        Ok(out)
    }

    pub(super) fn section_list(&self, t: &Tbl, key: &str, what: &str) -> R<Vec<Section>> {
        let Some(f) = t.get(key) else {
            return Ok(Vec::new());
        };
        let bufs = self.bufs();
        let item_what = format!("`{key}` of {what}");
        let mut out = Vec::new();
        for s in self.strings(f, what)? {
            let v = section::parse_sections(&s, 0, s.text.len(), &bufs, &item_what)
                .map_err(|b| self.bad(b))?;
            out.extend(v.into_iter().map(|(sec, _)| sec));
        }
        Ok(out)
    }

    pub(super) fn device(&self, t: &Tbl, what: &str) -> R<u32> {
        let Some(f) = t.get("device") else {
            return Ok(0);
        };
        // `device = "auto"`: placed by the lowering (`crate::model::DEVICE_AUTO`).
        if let Some(Value::String(s)) = f.item.as_value() {
            if s.value() == "auto" {
                return Ok(crate::model::DEVICE_AUTO);
            }
            return Err(self.err(
                ErrorKind::BadValue,
                f.span,
                format!(
                    "`device` of {what} must be an integer or \"auto\", found \"{}\"",
                    s.value()
                ),
            ));
        }
        let d = self.int(f, what)?;
        if d < 0 {
            return Err(self.err(
                ErrorKind::BadValue,
                f.span,
                format!("`device` of {what} must not be negative, found {d}"),
            ));
        }
        if d >= i64::from(self.devices) {
            return Err(self.err(
                ErrorKind::Device,
                f.span,
                format!(
                    "device {d} of {what} does not exist (the program has {} device{}; set `devices` at the top)",
                    self.devices,
                    if self.devices == 1 { "" } else { "s" }
                ),
            ));
        }
        Ok(d as u32)
    }

    pub(super) fn after(&self, t: &Tbl, what: &str) -> R<Vec<(String, Span)>> {
        let Some(f) = t.get("after") else {
            return Ok(Vec::new());
        };
        Ok(self
            .strings(f, what)?
            .into_iter()
            .map(|s| (s.text.to_string(), s.whole))
            .collect())
    }

    pub(super) fn launch(&self, f: &Field, what: &str) -> R<LaunchShape> {
        let a = self.array(f, what)?;
        let msg = format!(
            "`launch` of {what} must be [teams, threads], two integers from 1 to 4294967295"
        );
        if a.len() != 2 {
            return Err(self.err(ErrorKind::BadValue, f.span, msg));
        }
        let mut v = [0u32; 2];
        for (i, (x, span)) in a.iter().enumerate() {
            v[i] = match x {
                Value::Integer(n) if *n.value() >= 1 && *n.value() <= i64::from(u32::MAX) => {
                    *n.value() as u32
                }
                _ => return Err(self.err(ErrorKind::BadValue, *span, msg)),
            };
        }
        Ok(LaunchShape {
            teams: v[0],
            threads: v[1],
        })
    }

    /// Kernel arguments: numbers, or buffer sections written as strings; with the span
    /// of each.
    pub(super) fn args(&self, t: &Tbl, what: &str) -> R<(Vec<Arg>, Vec<Span>)> {
        let Some(f) = t.get("args") else {
            return Ok((Vec::new(), Vec::new()));
        };
        let bufs = self.bufs();
        let item_what = format!("arguments of {what}");
        // A library kernel's flags are written as names ("N", "L", "left").
        let lib = t
            .get("kernel")
            .and_then(|k| self.string(k, what).ok())
            .and_then(|k| crate::model::find_kernel(&self.kernels, k.text))
            .and_then(crate::model::LibraryKernel::of);
        self.array(f, what)?
            .into_iter()
            .enumerate()
            .map(|(i, (v, span))| match v {
                _ if lib.is_some_and(|k| k.flag_param(i).is_some()) => {
                    let k = lib.expect("guarded");
                    let kind = k.flag_param(i).expect("guarded");
                    let flag = self
                        .str_loc(v, span)
                        .and_then(|s| kind.parse(s.text.trim()));
                    match flag {
                        Some(f) => Ok((Arg::Number(f64::from(f.code())), span)),
                        None => Err(self.err(
                            ErrorKind::BadValue,
                            span,
                            format!(
                                "argument {} (`{}`, the {}) of kernel `{k}` in {what} must be {}",
                                i + 1,
                                k.sig().params[i].name,
                                kind.what(),
                                kind.choices()
                            ),
                        )),
                    }
                }
                Value::Integer(i) => Ok((Arg::Number(*i.value() as f64), span)),
                Value::Float(x) => Ok((Arg::Number(*x.value()), span)),
                Value::String(_) => {
                    let s = self.str_loc(v, span).ok_or_else(|| {
                        self.err(ErrorKind::BadValue, span, "string argument expected")
                    })?;
                    let trimmed_start = s.text.len() - s.text.trim_start().len();
                    let trimmed_end = s.text.trim_end().len();
                    let sec = section::parse_section(
                        &s,
                        trimmed_start,
                        trimmed_end.max(trimmed_start),
                        &bufs,
                        &item_what,
                    )
                    .map_err(|b| self.bad(b))?;
                    Ok((Arg::Buffer(sec), span))
                }
                other => Err(self.err(
                    ErrorKind::BadValue,
                    span,
                    format!(
                        "arguments of {what} must be numbers or buffer sections (strings), found {}",
                        value_type_name(other)
                    ),
                )),
            })
            .collect::<R<Vec<(Arg, Span)>>>()
            .map(|v| v.into_iter().unzip())
    }

    /// Checks a call of `kernel` with `args` (written at `arg_spans`) against its
    /// signature ([`KernelSig::check_args`], [`KernelSig::check_scalar_values`]): count,
    /// buffer vs number, concrete element types, one generic `T` per call, and integer
    /// scalars; then a library kernel's shapes ([`crate::model::library::check_call_at`]),
    /// each error at the argument it is about.
    pub(super) fn check_call(
        &self,
        kernel: &str,
        kernel_span: Span,
        args: &[Arg],
        arg_spans: &[Span],
        t: &Tbl,
        what: &str,
    ) -> R<()> {
        let sig = crate::model::find_kernel(&self.kernels, kernel).ok_or_else(|| {
            self.err(
                ErrorKind::UnknownName,
                kernel_span,
                format!("unknown kernel `{kernel}` in {what}"),
            )
            .with_help(format!(
                "{}; declare others in [[kernel]]",
                crate::model::unknown_kernel_help(kernel, &self.kernels)
            ))
        })?;
        let args_span = || t.get("args").map(|f| f.span).unwrap_or(kernel_span);
        let generic = sig
            .check_args(args, &self.buffers)
            .and_then(|generic| sig.check_scalar_values(args, generic).map(|()| generic))
            .map_err(|e| {
                let span = e.arg().map(|i| arg_spans[i]).unwrap_or_else(args_span);
                self.err(
                    ErrorKind::Arguments,
                    span,
                    self.call_error_text(sig, what, &e),
                )
            })?;
        // A library tile kernel's shapes (leading dimensions, section lengths, aliasing),
        // which the lowering checks again for programs built in Rust: here the caret goes
        // on the argument the error is about.
        match (crate::model::LibraryKernel::of(sig), generic) {
            (Some(lib), Some(ty)) => crate::model::library::check_call_at(lib, args, ty)
                .map(|_| ())
                .map_err(|e| {
                    let span = e.arg.map(|i| arg_spans[i]).unwrap_or_else(args_span);
                    let text = format!("kernel `{kernel}` in {what}: {}", e.message);
                    self.err(ErrorKind::Arguments, span, text)
                }),
            _ => Ok(()),
        }
    }

    /// The message of a [`CallError`] in a call of `sig` in `what`.
    fn call_error_text(&self, sig: &KernelSig, what: &str, e: &CallError) -> String {
        let kernel = &sig.name;
        let head = |i: usize| {
            let p = &sig.params[i];
            format!(
                "argument {} (`{}: {}`) of kernel `{kernel}` in {what}",
                i + 1,
                p.name,
                p.kind
            )
        };
        let name = |b: &BufferId| &self.buffers[b.index()].name;
        match e {
            CallError::Count { want, got } => format!(
                "kernel `{kernel}` takes {want} argument{} ({}) but {what} gives {got}",
                if *want == 1 { "" } else { "s" },
                sig.param_list(),
            ),
            CallError::NumberForBuffer { arg, value } => format!(
                "{} must be a buffer section, found the number {}",
                head(*arg),
                crate::model::Num(*value)
            ),
            CallError::BufferForScalar { arg, section } => format!(
                "{} must be a number, found buffer section `{}`",
                head(*arg),
                section.display(&self.buffers)
            ),
            CallError::ElemType {
                arg,
                buffer,
                want,
                found,
                t_from: None,
            } => format!(
                "{} needs {want} elements but buffer `{}` is {found}",
                head(*arg),
                name(buffer)
            ),
            CallError::ElemType {
                arg,
                buffer,
                want,
                found,
                t_from: Some(from),
            } => format!(
                "{}: buffer `{}` is {found} but T is {want} (from buffer `{}`)",
                head(*arg),
                name(buffer),
                name(from)
            ),
            CallError::NotAValue { arg, ty, value } => {
                format!(
                    "{} is {}, not a valid {ty} value",
                    head(*arg),
                    crate::model::Num(*value)
                )
            }
        }
    }
}
