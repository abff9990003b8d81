//! [`Program`] → TOML in the graph-file format, deterministic and readable, so that
//! `parse(to_toml(p))` equals `p` once spans are stripped ([`strip_spans`]).

use std::fmt::Write as _;

use crate::model::{
    Arg, Buffer, Construct, DataConstruct, Depend, Init, KernelSig, KernelSource, MapItem, Program,
    Section,
};

/// Writes `p` as a graph file. Constructs are written in program order; a `target_data`
/// or `taskgraph` body follows its other keys as `[[body.body]]` tables (one more `.body` per level).
///
/// Limits of the format (the writer cannot express these; the loader rejects them):
/// an empty program body; construct and buffer names the loader refuses (empty, or a
/// buffer name with characters other than letters, digits, `_`, `.`, `-`); a
/// [`KernelSource::Builtin`] entry in `p.kernels` (written as a user kernel with neither
/// `library` nor `cuda`); a `taskwait`'s name, which the model does not keep; and code
/// registered from Rust: a host task's closure (`host_fn`: the task is written with its
/// sections, without the closure) and a [`KernelSource::Embedded`] kernel's code (written
/// as its signature only, which the loader refuses for naming no code).
pub fn to_toml(p: &Program) -> String {
    let mut w = String::new();
    let _ = writeln!(w, "name = {}", quote(&p.name));
    if p.devices != 1 {
        let _ = writeln!(w, "devices = {}", p.devices);
    }
    for b in &p.buffers {
        write_buffer(&mut w, b);
    }
    for k in &p.kernels {
        write_kernel(&mut w, k);
    }
    write_body(&mut w, p, &p.body, "body");
    w
}

/// Removes every span (constructs, map items, depend items), so a parsed program
/// compares equal to a built one.
pub fn strip_spans(p: &mut Program) {
    fn items(maps: &mut [MapItem], deps: &mut [Depend]) {
        maps.iter_mut().for_each(|m| m.span = None);
        deps.iter_mut().for_each(|d| d.span = None);
    }
    fn body(cs: &mut [Construct]) {
        for c in cs {
            match c {
                Construct::Target(r) => {
                    r.span = None;
                    items(&mut r.maps, &mut r.depends);
                }
                Construct::TargetData(d) => {
                    d.span = None;
                    items(&mut d.maps, &mut []);
                    body(&mut d.body);
                }
                Construct::Taskgraph(t) => {
                    t.span = None;
                    body(&mut t.body);
                }
                Construct::EnterData(d) | Construct::ExitData(d) | Construct::Update(d) => {
                    d.span = None;
                    items(&mut d.maps, &mut d.depends);
                }
                Construct::Taskwait { span, .. } => *span = None,
                Construct::HostTask(h) => {
                    h.span = None;
                    items(&mut [], &mut h.depends);
                }
            }
        }
    }
    body(&mut p.body);
}

/// A TOML basic string.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A number as TOML: integral values below 2^53 as integers, others as floats that
/// read back to the same `f64`.
fn number(v: f64) -> String {
    if v.is_nan() {
        "nan".to_string()
    } else if v.is_infinite() {
        if v > 0.0 { "inf" } else { "-inf" }.to_string()
    } else if v.fract() == 0.0
        && v.abs() < 9_007_199_254_740_992.0
        && !(v == 0.0 && v.is_sign_negative())
    {
        format!("{}", v as i64)
    } else {
        // `{:?}` prints the shortest text that reads back exactly ("2.5", "1e-7", "1e300").
        let s = format!("{v:?}");
        if s.contains(['.', 'e', 'E']) {
            s
        } else {
            format!("{s}.0")
        }
    }
}

fn list(items: impl IntoIterator<Item = String>) -> String {
    let v: Vec<String> = items.into_iter().collect();
    format!("[{}]", v.join(", "))
}

fn section(p: &Program, s: &Section) -> String {
    let name = p
        .buffers
        .get(s.buf.index())
        .map(|b| b.name.as_str())
        .unwrap_or("?");
    let whole = p.buffers.get(s.buf.index()).map(|b| b.len) == Some(s.len) && s.lo == 0;
    if whole {
        name.to_string()
    } else {
        format!("{name}[{}:{}]", s.lo, s.len)
    }
}

fn map_item(p: &Program, m: &MapItem) -> String {
    let mut s = String::new();
    for (on, word) in [
        (m.always, "always"),
        (m.present, "present"),
        (m.close, "close"),
    ] {
        if on {
            s.push_str(word);
            s.push_str(", ");
        }
    }
    let _ = write!(s, "{}: {}", m.map_type.name(), section(p, &m.section));
    quote(&s)
}

fn write_buffer(w: &mut String, b: &Buffer) {
    let _ = writeln!(w, "\n[[buffer]]");
    let _ = writeln!(w, "name = {}", quote(&b.name));
    let _ = writeln!(w, "type = {}", quote(b.ty.name()));
    let _ = writeln!(w, "len = {}", b.len);
    let init = match &b.init {
        Init::Zeros => "\"zeros\"".to_string(),
        Init::Iota => "\"iota\"".to_string(),
        Init::Fill(v) => format!("{{ fill = {} }}", number(*v)),
        Init::Random(s) if *s <= i64::MAX as u64 => format!("{{ random = {s} }}"),
        Init::Random(s) => format!("{{ random = \"{s}\" }}"),
    };
    let _ = writeln!(w, "init = {init}");
}

fn write_kernel(w: &mut String, k: &KernelSig) {
    let _ = writeln!(w, "\n[[kernel]]");
    let _ = writeln!(w, "name = {}", quote(&k.name));
    let params = k.params.iter().enumerate().map(|(i, p)| {
        if p.name == format!("arg{i}") {
            quote(&p.kind.to_string())
        } else {
            quote(&format!("{}: {}", p.name, p.kind))
        }
    });
    let _ = writeln!(w, "params = {}", list(params));
    if let KernelSource::User {
        library,
        cuda,
        symbol,
    } = &k.source
    {
        if let Some(l) = library {
            let _ = writeln!(w, "library = {}", quote(l));
        }
        if let Some(c) = cuda {
            let _ = writeln!(w, "cuda = {}", quote(c));
        }
        if *symbol != k.name {
            let _ = writeln!(w, "symbol = {}", quote(symbol));
        }
    }
}

fn write_common(
    w: &mut String,
    p: &Program,
    nowait: bool,
    depends: &[Depend],
    device: u32,
    after: &[String],
) {
    if nowait {
        let _ = writeln!(w, "nowait = true");
    }
    if !depends.is_empty() {
        let items = depends
            .iter()
            .map(|d| quote(&format!("{}: {}", d.kind.name(), section(p, &d.section))));
        let _ = writeln!(w, "depend = {}", list(items));
    }
    write_device(w, device);
    if !after.is_empty() {
        let _ = writeln!(w, "after = {}", list(after.iter().map(|a| quote(a))));
    }
}

/// `device = N`, `device = "auto"` ([`crate::model::DEVICE_AUTO`]), nothing for 0.
fn write_device(w: &mut String, device: u32) {
    match device {
        0 => {}
        crate::model::DEVICE_AUTO => {
            let _ = writeln!(w, "device = \"auto\"");
        }
        n => {
            let _ = writeln!(w, "device = {n}");
        }
    }
}

fn write_maps(w: &mut String, p: &Program, maps: &[MapItem]) {
    if !maps.is_empty() {
        let _ = writeln!(w, "map = {}", list(maps.iter().map(|m| map_item(p, m))));
    }
}

/// `args = [...]` of a call of `kernel`; a library kernel's flags as their names
/// (`"N"`, `"L"`, `"left"`: [`crate::model::library`]).
fn write_args(w: &mut String, p: &Program, kernel: Option<&str>, args: &[Arg]) {
    if !args.is_empty() {
        let lib = kernel
            .and_then(|k| crate::model::find_kernel(&p.kernels, k))
            .and_then(crate::model::LibraryKernel::of);
        let items = args.iter().enumerate().map(|(i, a)| match a {
            Arg::Number(v) => match lib.and_then(|k| k.flag_param(i)?.of_code(*v)) {
                Some(flag) => quote(flag.name()),
                None => number(*v),
            },
            Arg::Buffer(s) => quote(&section(p, s)),
        });
        let _ = writeln!(w, "args = {}", list(items));
    }
}

fn write_data(w: &mut String, p: &Program, key: &str, d: &DataConstruct) {
    let _ = writeln!(w, "{key} = {}", quote(&d.name));
    write_maps(w, p, &d.maps);
    write_common(w, p, d.nowait, &d.depends, d.device, &d.after);
}

fn write_body(w: &mut String, p: &Program, body: &[Construct], header: &str) {
    for c in body {
        let _ = writeln!(w, "\n[[{header}]]");
        match c {
            Construct::Target(r) => {
                let _ = writeln!(w, "target = {}", quote(&r.name));
                let _ = writeln!(w, "kernel = {}", quote(&r.kernel));
                write_args(w, p, Some(&r.kernel), &r.args);
                write_maps(w, p, &r.maps);
                write_common(w, p, r.nowait, &r.depends, r.device, &r.after);
                if let Some(l) = r.launch {
                    let _ = writeln!(w, "launch = [{}, {}]", l.teams, l.threads);
                }
                if r.priority > 0 {
                    let _ = writeln!(w, "priority = {}", r.priority);
                }
            }
            Construct::TargetData(d) => {
                let _ = writeln!(w, "target_data = {}", quote(&d.name));
                write_maps(w, p, &d.maps);
                write_device(w, d.device);
                write_body(w, p, &d.body, &format!("{header}.body"));
            }
            Construct::Taskgraph(t) => {
                let _ = writeln!(w, "taskgraph = {}", quote(&t.name));
                let _ = writeln!(w, "repeat = {}", t.repeat);
                write_body(w, p, &t.body, &format!("{header}.body"));
            }
            Construct::EnterData(d) => write_data(w, p, "enter_data", d),
            Construct::ExitData(d) => write_data(w, p, "exit_data", d),
            Construct::Update(d) => write_data(w, p, "update", d),
            Construct::Taskwait { name, .. } => {
                let _ = writeln!(w, "taskwait = {}", quote(name));
            }
            Construct::HostTask(h) => {
                let _ = writeln!(w, "host = {}", quote(&h.name));
                let secs = |v: &[Section]| list(v.iter().map(|s| quote(&section(p, s))));
                if !h.reads.is_empty() {
                    let _ = writeln!(w, "reads = {}", secs(&h.reads));
                }
                if !h.writes.is_empty() {
                    let _ = writeln!(w, "writes = {}", secs(&h.writes));
                }
                if let Some(k) = &h.kernel {
                    let _ = writeln!(w, "kernel = {}", quote(k));
                }
                write_args(w, p, h.kernel.as_deref(), &h.args);
                write_common(w, p, false, &h.depends, 0, &h.after);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_back() {
        for v in [
            0.0,
            2.0,
            -3.0,
            2.5,
            1e-7,
            1e300,
            0.1,
            9.007_199_254_740_993e15,
            f64::MAX,
        ] {
            let s = number(v);
            let back: f64 = toml_edit::ImDocument::parse(format!("x = {s}"))
                .unwrap()
                .get("x")
                .and_then(|i| i.as_float().or(i.as_integer().map(|i| i as f64)))
                .unwrap();
            assert_eq!(back, v, "{s}");
        }
        assert_eq!(number(16.0), "16");
        assert_eq!(number(-0.0), "-0.0");
        assert_eq!(number(f64::NEG_INFINITY), "-inf");
    }

    #[test]
    fn quoting() {
        assert_eq!(quote("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\u0001\"");
    }
}
