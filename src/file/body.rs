//! `[[body]]` entries: construct kinds, their keys, clauses, kernel arguments checked
//! against the kernel's signature.

use toml_edit::Value;

use super::error::ErrorKind;
use super::order::Node;
use super::parse::{Parser, MAX_DEPTH, R};
use super::section::{self, MapPlace};
use super::values::{value_type_name, Field, Tbl};
use crate::model::{
    Arg, Construct, DataConstruct, Depend, ElemType, HostTask, KernelSig, LaunchShape, MapItem,
    ParamKind, Section, Span, TargetData, TargetRegion,
};

/// Construct kind keys of a `[[body]]` entry.
const KINDS: [&str; 7] = [
    "target",
    "target_data",
    "enter_data",
    "exit_data",
    "update",
    "host",
    "taskwait",
];

impl Parser<'_> {
    // ---- body ---------------------------------------------------------------------

    pub(super) fn construct(&self, t: &Tbl, depth: usize) -> R<Node> {
        let kinds: Vec<&Field> = t.fields.iter().filter(|f| KINDS.contains(&f.key)).collect();
        let kf = match kinds.as_slice() {
            [] => {
                return Err(self.err(
                    ErrorKind::Missing,
                    t.header,
                    format!(
                        "body entry has no construct kind: give exactly one of {}",
                        KINDS.join(", ")
                    ),
                ))
            }
            [one] => *one,
            [a, b, ..] => {
                return Err(self.err(
                    ErrorKind::BadValue,
                    b.key_span,
                    format!(
                        "body entry has two construct kinds, `{}` and `{}`: give exactly one",
                        a.key, b.key
                    ),
                ))
            }
        };
        let kind = kf.key;
        let nloc = self.string(kf, &format!("a {kind} entry"))?;
        let name = nloc.text.to_string();
        let span = Some(nloc.whole);
        if kind == "taskwait" {
            self.check_keys(t, &["taskwait"], "taskwait")?;
            return Ok(Node::leaf(Construct::Taskwait { span }, None, Vec::new()));
        }
        if name.is_empty() {
            return Err(self.err(
                ErrorKind::BadValue,
                nloc.whole,
                format!("{kind} name must not be empty"),
            ));
        }
        let what = format!("{kind} \"{name}\"");
        let allowed: &[&str] = match kind {
            "target" => &[
                "target", "kernel", "args", "map", "nowait", "depend", "device", "launch", "after",
            ],
            "target_data" => &["target_data", "map", "device", "body"],
            "host" => &[
                "host", "reads", "writes", "kernel", "args", "depend", "after",
            ],
            "enter_data" => &["enter_data", "map", "nowait", "depend", "device", "after"],
            "exit_data" => &["exit_data", "map", "nowait", "depend", "device", "after"],
            _ => &["update", "map", "nowait", "depend", "device", "after"],
        };
        self.check_keys(t, allowed, &what)?;
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
                let args = self.args(t, &what)?;
                self.check_call(kloc.text, kloc.whole, &args, t, &what)?;
                let launch = t.get("launch").map(|f| self.launch(f, &what)).transpose()?;
                Construct::Target(TargetRegion {
                    name: name.clone(),
                    kernel: kloc.text.to_string(),
                    args: args.into_iter().map(|(a, _)| a).collect(),
                    maps,
                    nowait,
                    depends,
                    device,
                    launch,
                    after: after_names,
                    span,
                })
            }
            "host" => {
                let kernel = t.get("kernel").map(|f| self.string(f, &what)).transpose()?;
                let args = self.args(t, &what)?;
                match &kernel {
                    Some(k) => self.check_call(k.text, k.whole, &args, t, &what)?,
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
                Construct::HostTask(HostTask {
                    name: name.clone(),
                    reads: self.section_list(t, "reads", &what)?,
                    writes: self.section_list(t, "writes", &what)?,
                    kernel: kernel.map(|k| k.text.to_string()),
                    args: args.into_iter().map(|(a, _)| a).collect(),
                    depends,
                    after: after_names,
                    span,
                })
            }
            "target_data" => {
                // `depth` is this target_data's level (1 at the top).
                if depth > MAX_DEPTH {
                    return Err(self.err(
                        ErrorKind::BadValue,
                        nloc.whole,
                        format!("{what} is nested {depth} deep, at most {MAX_DEPTH}"),
                    ));
                }
                let mut children = Vec::new();
                if let Some(f) = t.get("body") {
                    for ct in self.tables(f, &format!("body of {what}"))? {
                        children.push(self.construct(&ct, depth + 1)?);
                    }
                }
                let c = Construct::TargetData(TargetData {
                    name: name.clone(),
                    maps,
                    device,
                    body: Vec::new(),
                    span,
                });
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

    /// Kernel arguments: numbers, or buffer sections written as strings.
    pub(super) fn args(&self, t: &Tbl, what: &str) -> R<Vec<(Arg, Span)>> {
        let Some(f) = t.get("args") else {
            return Ok(Vec::new());
        };
        let bufs = self.bufs();
        let item_what = format!("arguments of {what}");
        self.array(f, what)?
            .into_iter()
            .map(|(v, span)| match v {
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
            .collect()
    }

    /// Checks a call of `kernel` with `args` against its signature: count, buffer vs
    /// number, concrete element types, one generic `T` per call, and integer scalars.
    pub(super) fn check_call(
        &self,
        kernel: &str,
        kernel_span: Span,
        args: &[(Arg, Span)],
        t: &Tbl,
        what: &str,
    ) -> R<()> {
        let sig = crate::model::find_kernel(&self.kernels, kernel)
            .cloned()
            .ok_or_else(|| {
                let builtins: Vec<String> = crate::model::builtin_kernels()
                    .into_iter()
                    .map(|k| k.name)
                    .collect();
                self.err(
                    ErrorKind::UnknownName,
                    kernel_span,
                    format!("unknown kernel `{kernel}` in {what}"),
                )
                .with_help(format!(
                    "built-in kernels are {}; declare others in [[kernel]]",
                    builtins.join(", ")
                ))
            })?;
        let describe = |sig: &KernelSig| {
            sig.params
                .iter()
                .map(|p| format!("{}: {}", p.name, p.kind))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if args.len() != sig.params.len() {
            let span = t.get("args").map(|f| f.span).unwrap_or(kernel_span);
            return Err(self.err(
                ErrorKind::Arguments,
                span,
                format!(
                    "kernel `{kernel}` takes {} argument{} ({}) but {what} gives {}",
                    sig.params.len(),
                    if sig.params.len() == 1 { "" } else { "s" },
                    describe(&sig),
                    args.len()
                ),
            ));
        }
        let mut generic: Option<(ElemType, &str)> = None;
        for (i, (p, (arg, span))) in sig.params.iter().zip(args).enumerate() {
            let head = format!(
                "argument {} (`{}: {}`) of kernel `{kernel}` in {what}",
                i + 1,
                p.name,
                p.kind
            );
            match (&p.kind, arg) {
                (ParamKind::Buffer { ty, .. }, Arg::Buffer(s)) => {
                    let b = &self.buffers[s.buf.index()];
                    match ty {
                        Some(want) if *want != b.ty => {
                            return Err(self.err(
                                ErrorKind::Arguments,
                                *span,
                                format!(
                                    "{head} needs {want} elements but buffer `{}` is {}",
                                    b.name, b.ty
                                ),
                            ))
                        }
                        Some(_) => {}
                        None => match generic {
                            None => generic = Some((b.ty, &b.name)),
                            Some((g, from)) if g != b.ty => {
                                return Err(self.err(
                                    ErrorKind::Arguments,
                                    *span,
                                    format!(
                                    "{head}: buffer `{}` is {} but T is {g} (from buffer `{from}`)",
                                    b.name, b.ty
                                ),
                                ))
                            }
                            Some(_) => {}
                        },
                    }
                }
                (ParamKind::Buffer { .. }, Arg::Number(v)) => {
                    return Err(self.err(
                        ErrorKind::Arguments,
                        *span,
                        format!(
                            "{head} must be a buffer section, found the number {}",
                            crate::model::Num(*v)
                        ),
                    ))
                }
                (ParamKind::Scalar { .. }, Arg::Buffer(s)) => {
                    return Err(self.err(
                        ErrorKind::Arguments,
                        *span,
                        format!(
                            "{head} must be a number, found buffer section `{}`",
                            s.display(&self.buffers)
                        ),
                    ))
                }
                (ParamKind::Scalar { .. }, Arg::Number(_)) => {}
            }
        }
        // Scalars, now that `T` is known.
        for (i, (p, (arg, span))) in sig.params.iter().zip(args).enumerate() {
            let (ParamKind::Scalar { ty }, Arg::Number(v)) = (&p.kind, arg) else {
                continue;
            };
            let Some(ty) = ty.or(generic.map(|g| g.0)) else {
                continue;
            };
            let range = match ty {
                ElemType::I32 => Some((i32::MIN as f64, i32::MAX as f64)),
                ElemType::I64 => Some((-9.223_372_036_854_776e18, 9.223_372_036_854_776e18)),
                ElemType::U8 => Some((0.0, 255.0)),
                ElemType::F32 | ElemType::F64 => None,
            };
            if let Some((lo, hi)) = range {
                if v.fract() != 0.0 || !(lo..=hi).contains(v) {
                    return Err(self.err(
                        ErrorKind::Arguments,
                        *span,
                        format!(
                            "argument {} (`{}: {}`) of kernel `{kernel}` in {what} is {}, not a valid {ty} value",
                            i + 1,
                            p.name,
                            p.kind,
                            crate::model::Num(*v)
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}
