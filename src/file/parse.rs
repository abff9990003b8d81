//! TOML → [`Program`]: walks a `toml_edit` document (which keeps byte spans), checks
//! every key and value, and builds the program with a span on every construct, map item
//! and depend item. The first error stops the parse.

use std::collections::HashMap;
use toml_edit::{ImDocument, Value};

use super::error::{ErrorKind, FileError};
use super::order::order_body;
use super::section::{self, Bad, Buffers, StrLoc};
use super::values::{span_of, type_name, Field, Tbl};
use super::SourceFile;
use crate::model::{
    Buffer, BufferId, ElemType, Init, KernelSig, KernelSource, Param, ParamKind, Program, Span,
};
use crate::suggest;

pub use crate::model::limits::{MAX_BUFFER_BYTES, MAX_DEPTH, MAX_DEVICES, MAX_TOTAL_BYTES};

/// Walks one document. Holds the buffers and kernels declared so far.
pub(crate) struct Parser<'a> {
    pub(super) src: &'a SourceFile,
    pub(super) buffers: Vec<Buffer>,
    pub(super) by_name: HashMap<String, BufferId>,
    pub(super) buffer_spans: Vec<Span>,
    pub(super) kernels: Vec<KernelSig>,
    pub(super) devices: u32,
    pub(super) total_bytes: u64,
}

pub(super) type R<T> = Result<T, FileError>;

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

    pub(super) fn err(&self, kind: ErrorKind, span: Span, message: impl Into<String>) -> FileError {
        FileError::at(kind, &self.src.path, &self.src.text, Some(span), message)
    }

    pub(super) fn bad(&self, b: Bad) -> FileError {
        let e = self.err(b.kind, b.span, b.message);
        match b.help {
            Some(h) => e.with_help(h),
            None => e,
        }
    }

    /// A TOML syntax error `msg` where the parser stopped (`span`), in plainer words for a
    /// key without a value and an integer out of range ([`super::syntax::explain`]), or,
    /// when an opening
    /// `[`, `{` or quote before it is never closed ([`super::unclosed::unclosed_at`]), at
    /// that delimiter with its key named and the parser's position in the message.
    fn syntax_error(&self, span: Span, msg: &str) -> FileError {
        let text = self.src.text.as_str();
        let Some(u) = super::unclosed::unclosed_at(text, span.start) else {
            let Some(x) = super::syntax::explain(text, span.start, msg) else {
                return self.err(ErrorKind::Syntax, span, format!("TOML syntax error: {msg}"));
            };
            let e = self.err(
                ErrorKind::Syntax,
                span,
                format!("TOML syntax error: {}", x.message),
            );
            return match x.help {
                Some(h) => e.with_help(h),
                None => e,
            };
        };
        let stop = span.start.min(text.len());
        let line = text[..stop].matches('\n').count() + 1;
        let col = text[..stop]
            .rsplit('\n')
            .next()
            .map_or(0, |l| l.chars().count())
            + 1;
        let of = match &u.key {
            Some(k) => format!("the `{}` of `{k}`", u.delim),
            None => format!("the `{}` opened here", u.delim),
        };
        let close = match u.delim {
            "[" => "]",
            "{" => "}",
            d => d,
        };
        self.err(
            ErrorKind::Syntax,
            Span::new(u.at, u.at + u.delim.len()),
            format!(
                "TOML syntax error: {of} is never closed (the parser stopped at line {line}, \
                 column {col}: {msg})"
            ),
        )
        .with_help(format!("close it with `{close}`"))
    }

    pub(super) fn line_of(&self, s: Span) -> usize {
        let end = s.start.min(self.src.text.len());
        self.src.text.as_bytes()[..end]
            .iter()
            .filter(|c| **c == b'\n')
            .count()
            + 1
    }

    pub(super) fn bufs(&self) -> Buffers<'_> {
        Buffers {
            list: &self.buffers,
            by_name: &self.by_name,
        }
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
            self.syntax_error(span, &msg)
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
            nodes.push(self.construct(t, 1, None)?);
        }
        let body = order_body(nodes, &self.src.text).map_err(|b| self.bad(b))?;
        Ok(Program {
            name,
            buffers: self.buffers,
            kernels: self.kernels,
            body,
            devices: self.devices,
            ..Program::default()
        })
    }

    fn buffer(&mut self, t: &Tbl) -> R<()> {
        // `rank` is the buffer's owner for a distributed run, read by `distribute::file`.
        self.check_keys(t, &["name", "type", "len", "init", "rank"], "[[buffer]]")?;
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
            let e = self.err(
                ErrorKind::BadValue,
                tloc.whole,
                format!(
                    "unknown element type `{}` for {what} (expected f32, f64, i32, i64 or u8)",
                    tloc.text
                ),
            );
            match suggest::elem_type_help(tloc.text) {
                Some(h) => e.with_help(h),
                None => e,
            }
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
                    other => {
                        let e = self.err(
                            ErrorKind::BadValue,
                            s.whole,
                            format!("unknown `init` \"{other}\" for {what} ({expected})"),
                        );
                        // `fill` and `random` are tables: `{ fill = 1.0 }`.
                        let help =
                            match suggest::did_you_mean(other, ["zeros", "iota", "fill", "random"])
                            {
                                Some(k @ ("zeros" | "iota")) => {
                                    Some(format!("did you mean \"{k}\"?"))
                                }
                                Some("fill") => Some("did you mean { fill = NUMBER }?".to_string()),
                                Some(_) => Some("did you mean { random = SEED }?".to_string()),
                                None => None,
                            };
                        Err(match help {
                            Some(h) => e.with_help(h),
                            None => e,
                        })
                    }
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
                let e = self.err(
                    ErrorKind::BadValue,
                    p.whole,
                    format!(
                        "bad parameter \"{}\" of {what} (expected e.g. \"in f32*\", \"inout T*\", \"out i32*\", \"f64\", \"T\", optionally named: \"x: in f32*\")",
                        p.text
                    ),
                );
                // The type is the last word (`in float*`, `double`).
                let ty = kind.trim().trim_end_matches('*').split_whitespace().last();
                let help = ty.filter(|t| ElemType::parse(t).is_none() && *t != "T");
                match help.and_then(suggest::elem_type_help) {
                    Some(h) => e.with_help(h),
                    None => e,
                }
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
        if library.is_none() && cuda.is_none() {
            return Err(self.err(
                ErrorKind::BadValue,
                nloc.whole,
                format!(
                    "{what} names no code: give `library` (a shared library for the host plugin) and/or `cuda` (a .cu or .ptx file for the CUDA plugin)"
                ),
            ));
        }
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
}
