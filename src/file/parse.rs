//! TOML → [`Program`]: walks a `toml_edit` document (which keeps byte spans), checks
//! every key and value, and builds the program with a span on every construct, map item
//! and depend item. The first error stops the parse.

use std::collections::HashMap;
use std::ops::Range;

use toml_edit::{ImDocument, Item, TableLike, Value};

use super::error::{ErrorKind, FileError};
use super::order::{order_body, Node};
use super::section::{self, Bad, Buffers, MapPlace, StrLoc};
use super::SourceFile;
use crate::model::{
    Arg, Buffer, BufferId, Construct, DataConstruct, Depend, ElemType, HostTask, Init, KernelSig,
    KernelSource, LaunchShape, MapItem, Param, ParamKind, Program, Section, Span, TargetData,
    TargetRegion,
};

/// Largest buffer: 64 GiB. Checked before anything is allocated.
pub const MAX_BUFFER_BYTES: u64 = 64 << 30;
/// Largest total of all buffers: 256 GiB.
pub const MAX_TOTAL_BYTES: u64 = 256 << 30;
/// Largest `devices`.
pub const MAX_DEVICES: i64 = 1024;
/// Deepest nesting of `target_data` bodies.
pub const MAX_DEPTH: usize = 64;

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

/// One `key = value` of a table, with spans.
struct Field<'a> {
    key: &'a str,
    key_span: Span,
    item: &'a Item,
    /// Span of the value (the key's span when the value has none).
    span: Span,
}

/// A table (`[[x]]` or inline) as a list of fields in file order.
struct Tbl<'a> {
    fields: Vec<Field<'a>>,
    /// Span of the table header (`[[body]]`), or of the inline table.
    header: Span,
}

impl<'a> Tbl<'a> {
    fn get(&self, key: &str) -> Option<&Field<'a>> {
        self.fields.iter().find(|f| f.key == key)
    }
}

fn span_of(r: Option<Range<usize>>) -> Option<Span> {
    r.map(|r| Span::new(r.start, r.end))
}

fn type_name(item: &Item) -> &'static str {
    match item {
        Item::None => "nothing",
        Item::Table(_) => "a table",
        Item::ArrayOfTables(_) => "an array of tables",
        Item::Value(v) => match v {
            Value::String(_) => "a string",
            Value::Integer(_) => "an integer",
            Value::Float(_) => "a float",
            Value::Boolean(_) => "a boolean",
            Value::Datetime(_) => "a date-time",
            Value::Array(_) => "an array",
            Value::InlineTable(_) => "an inline table",
        },
    }
}

fn value_type_name(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "a string",
        Value::Integer(_) => "an integer",
        Value::Float(_) => "a float",
        Value::Boolean(_) => "a boolean",
        Value::Datetime(_) => "a date-time",
        Value::Array(_) => "an array",
        Value::InlineTable(_) => "an inline table",
    }
}

/// Walks one document. Holds the buffers and kernels declared so far.
pub(crate) struct Parser<'a> {
    src: &'a SourceFile,
    buffers: Vec<Buffer>,
    by_name: HashMap<String, BufferId>,
    buffer_spans: Vec<Span>,
    kernels: Vec<KernelSig>,
    devices: u32,
    total_bytes: u64,
}

type R<T> = Result<T, FileError>;

impl<'a> Parser<'a> {
    pub(crate) fn new(src: &'a SourceFile) -> Parser<'a> {
        Parser {
            src,
            buffers: Vec::new(),
            by_name: HashMap::new(),
            buffer_spans: Vec::new(),
            kernels: Vec::new(),
            devices: 1,
            total_bytes: 0,
        }
    }

    fn err(&self, kind: ErrorKind, span: Span, message: impl Into<String>) -> FileError {
        FileError::at(kind, &self.src.path, &self.src.text, Some(span), message)
    }

    fn bad(&self, b: Bad) -> FileError {
        self.err(b.kind, b.span, b.message)
    }

    fn line_of(&self, s: Span) -> usize {
        let end = s.start.min(self.src.text.len());
        self.src.text.as_bytes()[..end]
            .iter()
            .filter(|c| **c == b'\n')
            .count()
            + 1
    }

    fn bufs(&self) -> Buffers<'_> {
        Buffers {
            list: &self.buffers,
            by_name: &self.by_name,
        }
    }

    // ---- tables -------------------------------------------------------------------

    fn tbl<'t>(&self, t: &'t dyn TableLike, header: Span) -> Tbl<'t> {
        let fields = t
            .iter()
            .map(|(k, item)| {
                let key_span = t.key(k).and_then(|k| span_of(k.span())).unwrap_or(header);
                let span = span_of(item.span()).unwrap_or(key_span);
                Field {
                    key: k,
                    key_span,
                    item,
                    span,
                }
            })
            .collect();
        Tbl { fields, header }
    }

    /// The header line of a `[table]`: from its start to the end of that line.
    fn header_span(&self, r: Option<Range<usize>>, fallback: Span) -> Span {
        match r {
            Some(r) => {
                let text = &self.src.text;
                let start = r.start.min(text.len());
                let end = text[start..]
                    .find('\n')
                    .map(|i| start + i)
                    .unwrap_or(text.len())
                    .min(r.end.max(start));
                Span::new(start, end)
            }
            None => fallback,
        }
    }

    /// An array of tables (`[[x]]`) or an array of inline tables.
    fn tables<'t>(&self, f: &Field<'t>, what: &str) -> R<Vec<Tbl<'t>>> {
        match f.item {
            Item::ArrayOfTables(aot) => Ok(aot
                .iter()
                .map(|t| {
                    let h = self.header_span(t.span(), f.key_span);
                    self.tbl(t, h)
                })
                .collect()),
            Item::Value(Value::Array(arr)) => arr
                .iter()
                .map(|v| match v {
                    Value::InlineTable(t) => {
                        let h = span_of(t.span()).unwrap_or(f.span);
                        Ok(self.tbl(t, h))
                    }
                    other => Err(self.err(
                        ErrorKind::BadValue,
                        span_of(other.span()).unwrap_or(f.span),
                        format!(
                            "{what} entries must be tables, found {}",
                            value_type_name(other)
                        ),
                    )),
                })
                .collect(),
            other => Err(self.err(
                ErrorKind::BadValue,
                f.span,
                format!(
                    "`{}` must be an array of tables ([[{}]]), found {}",
                    f.key,
                    f.key,
                    type_name(other)
                ),
            )),
        }
    }

    /// Rejects keys outside `allowed`, pointing at the key.
    fn check_keys(&self, t: &Tbl, allowed: &[&str], what: &str) -> R<()> {
        for f in &t.fields {
            if !allowed.contains(&f.key) {
                return Err(self.err(
                    ErrorKind::UnknownKey,
                    f.key_span,
                    format!(
                        "unknown key `{}` in {what} (allowed: {})",
                        f.key,
                        allowed.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    fn required<'t, 'f>(&self, t: &'f Tbl<'t>, key: &str, what: &str) -> R<&'f Field<'t>> {
        t.get(key).ok_or_else(|| {
            self.err(
                ErrorKind::Missing,
                t.header,
                format!("{what} is missing `{key}`"),
            )
        })
    }

    // ---- values -------------------------------------------------------------------

    /// A string value and where its characters are in the file.
    fn str_loc<'v>(&self, v: &'v Value, fallback: Span) -> Option<StrLoc<'v>> {
        let Value::String(s) = v else { return None };
        let text = s.value().as_str();
        let whole = span_of(s.span()).unwrap_or(fallback);
        let raw = self.src.text.get(whole.start..whole.end).unwrap_or("");
        let base = if raw.len() >= 6 && (raw.starts_with("\"\"\"") || raw.starts_with("'''")) {
            (raw.get(3..raw.len() - 3) == Some(text)).then_some(whole.start + 3)
        } else if raw.len() >= 2 {
            (raw.get(1..raw.len() - 1) == Some(text)).then_some(whole.start + 1)
        } else {
            None
        };
        Some(StrLoc { text, base, whole })
    }

    fn string<'t>(&self, f: &Field<'t>, what: &str) -> R<StrLoc<'t>> {
        f.item
            .as_value()
            .and_then(|v| self.str_loc(v, f.span))
            .ok_or_else(|| {
                self.err(
                    ErrorKind::BadValue,
                    f.span,
                    format!(
                        "`{}` of {what} must be a string, found {}",
                        f.key,
                        type_name(f.item)
                    ),
                )
            })
    }

    fn int(&self, f: &Field, what: &str) -> R<i64> {
        match f.item.as_value() {
            Some(Value::Integer(i)) => Ok(*i.value()),
            _ => Err(self.err(
                ErrorKind::BadValue,
                f.span,
                format!(
                    "`{}` of {what} must be an integer, found {}",
                    f.key,
                    type_name(f.item)
                ),
            )),
        }
    }

    fn boolean(&self, f: &Field, what: &str) -> R<bool> {
        match f.item.as_value() {
            Some(Value::Boolean(b)) => Ok(*b.value()),
            _ => Err(self.err(
                ErrorKind::BadValue,
                f.span,
                format!(
                    "`{}` of {what} must be true or false, found {}",
                    f.key,
                    type_name(f.item)
                ),
            )),
        }
    }

    /// The elements of an array value, with spans.
    fn array<'t>(&self, f: &Field<'t>, what: &str) -> R<Vec<(&'t Value, Span)>> {
        match f.item.as_value() {
            Some(Value::Array(a)) => Ok(a
                .iter()
                .map(|v| (v, span_of(v.span()).unwrap_or(f.span)))
                .collect()),
            _ => Err(self.err(
                ErrorKind::BadValue,
                f.span,
                format!(
                    "`{}` of {what} must be an array, found {}",
                    f.key,
                    type_name(f.item)
                ),
            )),
        }
    }

    /// An array of strings.
    fn strings<'t>(&self, f: &Field<'t>, what: &str) -> R<Vec<StrLoc<'t>>> {
        self.array(f, what)?
            .into_iter()
            .map(|(v, span)| {
                self.str_loc(v, span).ok_or_else(|| {
                    self.err(
                        ErrorKind::BadValue,
                        span,
                        format!(
                            "`{}` of {what} must hold strings, found {}",
                            f.key,
                            value_type_name(v)
                        ),
                    )
                })
            })
            .collect()
    }

    // ---- top level ----------------------------------------------------------------

    pub(crate) fn program(mut self) -> R<Program> {
        let text = self.src.text.as_str();
        if text.trim().is_empty() {
            return Err(self.err(
                ErrorKind::Missing,
                Span::new(0, 0),
                "graph file is empty: it needs `name`, [[buffer]] and [[body]] entries",
            ));
        }
        let doc = ImDocument::parse(text).map_err(|e| {
            let span = span_of(e.span()).unwrap_or_default();
            let msg = e
                .message()
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join("; ");
            self.err(ErrorKind::Syntax, span, format!("TOML syntax error: {msg}"))
        })?;
        let root = self.tbl(doc.as_table(), Span::new(0, 0));
        let what = "the program";
        self.check_keys(
            &root,
            &["name", "devices", "buffer", "kernel", "body"],
            what,
        )?;
        let name = match root.get("name") {
            Some(f) => self.string(f, what)?.text.to_string(),
            None => {
                return Err(self.err(
                    ErrorKind::Missing,
                    Span::new(0, 0),
                    "graph file is missing `name = \"...\"` at the top",
                ))
            }
        };
        if let Some(f) = root.get("devices") {
            let d = self.int(f, what)?;
            if !(1..=MAX_DEVICES).contains(&d) {
                return Err(self.err(
                    ErrorKind::BadValue,
                    f.span,
                    format!("`devices` must be between 1 and {MAX_DEVICES}, found {d}"),
                ));
            }
            self.devices = d as u32;
        }
        if let Some(f) = root.get("buffer") {
            for t in self.tables(f, "[[buffer]]")? {
                self.buffer(&t)?;
            }
        }
        if let Some(f) = root.get("kernel") {
            for t in self.tables(f, "[[kernel]]")? {
                self.kernel(&t)?;
            }
        }
        let body_field = root.get("body").ok_or_else(|| {
            self.err(
                ErrorKind::Missing,
                Span::new(text.len(), text.len()),
                format!("program \"{name}\" has no body: add [[body]] entries"),
            )
        })?;
        let tables = self.tables(body_field, "[[body]]")?;
        if tables.is_empty() {
            return Err(self.err(
                ErrorKind::Missing,
                body_field.span,
                format!("program \"{name}\" has an empty body"),
            ));
        }
        let mut nodes = Vec::with_capacity(tables.len());
        for t in &tables {
            nodes.push(self.construct(t, 1)?);
        }
        let body = order_body(nodes, &self.src.text).map_err(|b| self.bad(b))?;
        Ok(Program {
            name,
            buffers: self.buffers,
            kernels: self.kernels,
            body,
            devices: self.devices,
        })
    }

    fn buffer(&mut self, t: &Tbl) -> R<()> {
        self.check_keys(t, &["name", "type", "len", "init"], "[[buffer]]")?;
        let nf = self.required(t, "name", "[[buffer]]")?;
        let nloc = self.string(nf, "[[buffer]]")?;
        let name = nloc.text.to_string();
        if name.is_empty() || !name.chars().all(section::is_name_char) {
            return Err(self.err(
                ErrorKind::BadValue,
                nloc.whole,
                format!("buffer name `{name}` is not allowed: use letters, digits, `_`, `.`, `-`"),
            ));
        }
        if let Some(id) = self.by_name.get(&name) {
            let first = self.line_of(self.buffer_spans[id.index()]);
            return Err(self.err(
                ErrorKind::Duplicate,
                nloc.whole,
                format!("duplicate buffer `{name}` (first declared on line {first})"),
            ));
        }
        let what = format!("buffer `{name}`");
        let tf = self.required(t, "type", &what)?;
        let tloc = self.string(tf, &what)?;
        let ty = ElemType::parse(tloc.text).ok_or_else(|| {
            self.err(
                ErrorKind::BadValue,
                tloc.whole,
                format!(
                    "unknown element type `{}` for {what} (expected f32, f64, i32, i64 or u8)",
                    tloc.text
                ),
            )
        })?;
        let lf = self.required(t, "len", &what)?;
        let len = self.int(lf, &what)?;
        if len < 0 {
            return Err(self.err(
                ErrorKind::BadValue,
                lf.span,
                format!("`len` of {what} must not be negative, found {len}"),
            ));
        }
        let len = len as u64;
        let bytes = len.saturating_mul(ty.size_bytes());
        if bytes > MAX_BUFFER_BYTES {
            return Err(self.err(
                ErrorKind::TooLarge,
                lf.span,
                format!(
                    "{what} is too large: {len} × {} bytes is over the 64 GiB limit for one buffer",
                    ty.size_bytes()
                ),
            ));
        }
        self.total_bytes += bytes;
        if self.total_bytes > MAX_TOTAL_BYTES {
            return Err(self.err(
                ErrorKind::TooLarge,
                lf.span,
                format!(
                    "{what} brings the buffers to {} bytes, over the 256 GiB limit for all buffers",
                    self.total_bytes
                ),
            ));
        }
        let init = match t.get("init") {
            None => Init::Zeros,
            Some(f) => self.init(f, &what)?,
        };
        self.by_name
            .insert(name.clone(), BufferId(self.buffers.len() as u32));
        self.buffer_spans.push(nloc.whole);
        self.buffers.push(Buffer {
            name,
            ty,
            len,
            init,
        });
        Ok(())
    }

    fn init(&self, f: &Field, what: &str) -> R<Init> {
        let expected = "expected \"zeros\", \"iota\", { fill = NUMBER } or { random = SEED }";
        if let Some(v) = f.item.as_value() {
            if let Some(s) = self.str_loc(v, f.span) {
                return match s.text {
                    "zeros" => Ok(Init::Zeros),
                    "iota" => Ok(Init::Iota),
                    other => Err(self.err(
                        ErrorKind::BadValue,
                        s.whole,
                        format!("unknown `init` \"{other}\" for {what} ({expected})"),
                    )),
                };
            }
        }
        let Some(table) = f.item.as_table_like() else {
            return Err(self.err(
                ErrorKind::BadValue,
                f.span,
                format!("`init` of {what} is {}: {expected}", type_name(f.item)),
            ));
        };
        let t = self.tbl(table, f.span);
        self.check_keys(&t, &["fill", "random"], &format!("`init` of {what}"))?;
        if t.fields.len() != 1 {
            return Err(self.err(
                ErrorKind::BadValue,
                f.span,
                format!("`init` of {what} needs exactly one of `fill` or `random`"),
            ));
        }
        let g = &t.fields[0];
        match (g.key, g.item.as_value()) {
            ("fill", Some(Value::Float(x))) => Ok(Init::Fill(*x.value())),
            ("fill", Some(Value::Integer(i))) => Ok(Init::Fill(*i.value() as f64)),
            ("random", Some(Value::Integer(i))) if *i.value() >= 0 => {
                Ok(Init::Random(*i.value() as u64))
            }
            ("random", Some(Value::String(s))) if s.value().parse::<u64>().is_ok() => {
                Ok(Init::Random(s.value().parse::<u64>().unwrap_or(0)))
            }
            ("fill", _) => Err(self.err(
                ErrorKind::BadValue,
                g.span,
                format!(
                    "`fill` of {what} must be a number, found {}",
                    type_name(g.item)
                ),
            )),
            _ => Err(self.err(
                ErrorKind::BadValue,
                g.span,
                format!("`random` seed of {what} must be a non-negative integer"),
            )),
        }
    }

    fn kernel(&mut self, t: &Tbl) -> R<()> {
        self.check_keys(
            t,
            &["name", "params", "library", "cuda", "symbol"],
            "[[kernel]]",
        )?;
        let nf = self.required(t, "name", "[[kernel]]")?;
        let nloc = self.string(nf, "[[kernel]]")?;
        let name = nloc.text.to_string();
        if name.is_empty() {
            return Err(self.err(ErrorKind::BadValue, nloc.whole, "kernel name is empty"));
        }
        if self.kernels.iter().any(|k| k.name == name) {
            return Err(self.err(
                ErrorKind::Duplicate,
                nloc.whole,
                format!("duplicate kernel `{name}`"),
            ));
        }
        let what = format!("kernel `{name}`");
        let pf = self.required(t, "params", &what)?;
        let mut params = Vec::new();
        for (i, p) in self.strings(pf, &what)?.into_iter().enumerate() {
            let (pname, kind) = match p.text.split_once(':') {
                Some((n, k)) => (n.trim().to_string(), k),
                None => (format!("arg{i}"), p.text),
            };
            let kind = ParamKind::parse(kind).filter(|_| !pname.is_empty()).ok_or_else(|| {
                self.err(
                    ErrorKind::BadValue,
                    p.whole,
                    format!(
                        "bad parameter \"{}\" of {what} (expected e.g. \"in f32*\", \"inout T*\", \"out i32*\", \"f64\", \"T\", optionally named: \"x: in f32*\")",
                        p.text
                    ),
                )
            })?;
            params.push(Param { name: pname, kind });
        }
        let opt = |key: &str| -> R<Option<StrLoc>> {
            t.get(key).map(|f| self.string(f, &what)).transpose()
        };
        let library = opt("library")?.map(|s| s.text.to_string());
        let cuda = match opt("cuda")? {
            Some(s) if !(s.text.ends_with(".cu") || s.text.ends_with(".ptx")) => {
                return Err(self.err(
                    ErrorKind::BadValue,
                    s.whole,
                    format!("`cuda` of {what} must name a .cu or .ptx file"),
                ))
            }
            s => s.map(|s| s.text.to_string()),
        };
        let symbol = opt("symbol")?
            .map(|s| s.text.to_string())
            .unwrap_or_else(|| name.clone());
        self.kernels.push(KernelSig {
            name,
            params,
            source: KernelSource::User {
                library,
                cuda,
                symbol,
            },
        });
        Ok(())
    }

    // ---- body ---------------------------------------------------------------------

    fn construct(&self, t: &Tbl, depth: usize) -> R<Node> {
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
                if depth >= MAX_DEPTH {
                    return Err(self.err(
                        ErrorKind::BadValue,
                        nloc.whole,
                        format!("{what} is nested deeper than {MAX_DEPTH} levels"),
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

    fn maps(&self, t: &Tbl, place: MapPlace, what: &str) -> R<Vec<MapItem>> {
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

    fn depends(&self, t: &Tbl, what: &str) -> R<Vec<Depend>> {
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

    fn section_list(&self, t: &Tbl, key: &str, what: &str) -> R<Vec<Section>> {
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

    fn device(&self, t: &Tbl, what: &str) -> R<u32> {
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

    fn after(&self, t: &Tbl, what: &str) -> R<Vec<(String, Span)>> {
        let Some(f) = t.get("after") else {
            return Ok(Vec::new());
        };
        Ok(self
            .strings(f, what)?
            .into_iter()
            .map(|s| (s.text.to_string(), s.whole))
            .collect())
    }

    fn launch(&self, f: &Field, what: &str) -> R<LaunchShape> {
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
    fn args(&self, t: &Tbl, what: &str) -> R<Vec<(Arg, Span)>> {
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
    fn check_call(
        &self,
        kernel: &str,
        kernel_span: Span,
        args: &[(Arg, Span)],
        t: &Tbl,
        what: &str,
    ) -> R<()> {
        let sig = self
            .kernels
            .iter()
            .find(|k| k.name == kernel)
            .cloned()
            .or_else(|| crate::model::builtin_kernel(kernel))
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
                        format!("{head} must be a buffer section, found the number {v}"),
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
                            "argument {} (`{}: {}`) of kernel `{kernel}` in {what} is {v}, not a valid {ty} value",
                            i + 1,
                            p.name,
                            p.kind
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}
