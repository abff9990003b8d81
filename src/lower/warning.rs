//! Warnings of the lowering: programs that are legal OpenMP but probably not what was
//! meant. The lowering goes on; the warnings travel with the op graph
//! ([`super::OpGraph::warnings`], [`crate::Plan::warnings`]) and the command line prints
//! them (`file:line:column: warning: …`) before it schedules or runs.

use crate::model::{Access, Buffer, KernelSig, KernelSource, MapItem, MapType, Section, Span};
use std::fmt;

/// What a [`Warning`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WarningKind {
    /// A buffer argument of a target region missing from its `map` (and not present) is
    /// mapped `tofrom` implicitly (OpenMP 5.2 §5.8.9), but the kernel only reads it: the
    /// copy back to the host moves an unchanged input.
    ImplicitToFrom,
    /// A target region with no `map` clause whose buffer arguments are mapped implicitly
    /// (none was present from an enclosing data construct).
    NoMaps,
    /// A map item of a target region whose section no buffer argument of the kernel
    /// touches, though the item allocates (and maybe copies) it: the section was not
    /// present on entry. Only for kernels that take buffers: a kernel without buffer
    /// parameters (`spin`) models its data by its maps; and a map of present data only
    /// counts a reference, while it orders the region as an access would ([design notes](crate::design),
    /// "Dependencies"), which may be why it is there.
    UnusedMap,
    /// A kernel the program declares (`[[kernel]]`, or registered from Rust) with the
    /// name of a built-in kernel: every call of that name runs the program's kernel, and
    /// the built-in cannot be called.
    ShadowsBuiltin,
    /// A host task (or Rust closure) reads a section whose latest contents are on a
    /// device: a kernel wrote them in device storage that is still mapped (inside a data
    /// region, or entered), and no `update from` or `from` map brought them back. OpenMP
    /// gives the host its own, older copy (5.2 §5.8.3: a device copy reaches the host
    /// only through a `from` map or `target update from`, §13.9); the lowering knows the
    /// device copy is newer.
    StaleHostRead,
    /// A kernel reads device storage that nothing wrote: no `to` map copied the host's
    /// contents in (the data was mapped `alloc` or `from`, here or by an enclosing data
    /// construct) and no earlier kernel wrote it. OpenMP leaves such contents undefined
    /// (5.2 §5.8.3, the `alloc` map type); this project's devices start them as zero
    /// bytes, so results are deterministic, but not what a real runtime gives. Given
    /// only where no kernel declared a write (an `out` or `inout` parameter) to that
    /// device storage since it was made: a user kernel may write what the lowering cannot
    /// see, so a read after one is never warned about (no false warning; a read of a part
    /// the kernel did not write goes unwarned).
    UndefinedDeviceRead,
}

/// A program that lowers but is probably not what was meant. `message` starts with the
/// construct as written (`target "k": …`); `span` is the construct's name or the map
/// item in the graph file, when the program came from one.
#[derive(Clone, Debug, PartialEq)]
pub struct Warning {
    pub kind: WarningKind,
    /// The construct's name as the program gives it.
    pub construct: String,
    pub message: String,
    /// What to change, if the warning is right, phrased for the API the program came
    /// from: graph-file keys (`add "to: x" to `map``) for a construct with a `span`,
    /// [`crate::model::ProgramBuilder`] calls (`add `.map(MapType::To, x)` to the
    /// region`) for one without (a program built in Rust).
    pub help: Option<String>,
    pub span: Option<Span>,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// A section as a builder call selects it, for help lines of programs built in Rust:
/// `x` (the whole buffer's handle), else `x.part(lo, len)`.
fn selected(buffers: &[Buffer], s: &Section) -> String {
    match buffers.get(s.buf.index()) {
        Some(b) if s.lo == 0 && s.len == b.len => b.name.clone(),
        Some(b) => format!("{}.part({}, {})", b.name, s.lo, s.len),
        None => format!("#{}.part({}, {})", s.buf.0, s.lo, s.len),
    }
}

/// A section as a user writes it: `x` for the whole buffer, else `x[lo:len]`.
fn written(buffers: &[Buffer], s: &Section) -> String {
    match buffers.get(s.buf.index()) {
        Some(b) if s.lo == 0 && s.len == b.len => b.name.clone(),
        Some(b) => format!("{}[{}:{}]", b.name, s.lo, s.len),
        None => format!("#{}[{}:{}]", s.buf.0, s.lo, s.len),
    }
}

/// Appends a [`WarningKind::ShadowsBuiltin`] warning per kernel of `kernels` (the
/// program's own) named like a built-in. `O(kernels · log builtins)`.
pub(super) fn shadowed_builtins(kernels: &[KernelSig], out: &mut Vec<Warning>) {
    for k in kernels {
        if matches!(k.source, KernelSource::Builtin)
            || crate::model::builtin_kernel(&k.name).is_none()
        {
            continue;
        }
        out.push(Warning {
            kind: WarningKind::ShadowsBuiltin,
            construct: k.name.clone(),
            message: format!(
                "kernel `{}` is declared by the program and shadows the built-in kernel of \
                 that name: every call of `{}` runs the declared kernel",
                k.name, k.name
            ),
            help: Some(
                "rename the declared kernel (and its calls) to call the built-in too".into(),
            ),
            span: None,
        });
    }
}

/// Appends a [`WarningKind::StaleHostRead`] warning for host task `task` when `newer`
/// (the parts of what it reads whose latest contents are on a device, with the device)
/// is not empty; parts of one buffer that overlap or touch are named once, as one
/// section (a task that reads `x` twice, or two overlapping sections of it). `O(parts²)`.
pub(super) fn stale_host_read(
    buffers: &[Buffer],
    task: &str,
    span: Option<Span>,
    newer: &[(Section, u32)],
    out: &mut Vec<Warning>,
) {
    let Some(&(_, device)) = newer.first() else {
        return;
    };
    let mut merged: Vec<Section> = Vec::new();
    for (s, _) in newer {
        let near = merged
            .iter_mut()
            .find(|m| m.buf == s.buf && m.lo <= s.lo + s.len && s.lo <= m.lo + m.len);
        match near {
            Some(m) => {
                let end = (m.lo + m.len).max(s.lo + s.len);
                m.lo = m.lo.min(s.lo);
                m.len = end - m.lo;
            }
            None => merged.push(*s),
        }
    }
    let list: Vec<String> = merged.iter().map(|s| written(buffers, s)).collect();
    // A graph file's construct has a span: its help names TOML keys; a program built in
    // Rust has none: its help names the builder calls.
    let update = match span {
        Some(_) => {
            let from: Vec<String> = list.iter().map(|s| format!("\"from: {s}\"")).collect();
            format!("an `update` with map = [{}]", from.join(", "))
        }
        None => {
            let from: Vec<String> = (merged.iter())
                .map(|s| format!("p.map(MapType::From, {})", selected(buffers, s)))
                .collect();
            format!("`p.update(\"NAME\", vec![{}])`", from.join(", "))
        }
    };
    out.push(Warning {
        kind: WarningKind::StaleHostRead,
        construct: task.to_string(),
        message: format!(
            "host task \"{task}\": reads {}, whose latest contents are on device {device} (a \
             kernel wrote them there and nothing copied them back): it sees the older host \
             copy",
            list.join(", ")
        ),
        help: Some(format!(
            "copy them back before it: {update} (OpenMP `target update from`, 5.2 §13.9)"
        )),
        span,
    });
}

/// What one target region does with its data, for [`target_warnings`].
pub(super) struct TargetUse<'a> {
    /// The region's name and its span.
    pub region: &'a str,
    pub span: Option<Span>,
    pub kernel: &'a str,
    /// The sections its buffer arguments mapped implicitly (missing from `map`, absent).
    pub implicit: &'a [Section],
    /// The kernel's buffer arguments with their access, in argument order.
    pub args: &'a [(Section, Access)],
    /// The region's map items.
    pub maps: &'a [MapItem],
    /// Whether a section lies in device storage the region allocated (it was absent on
    /// entry).
    pub allocated: &'a dyn Fn(&Section) -> bool,
}

/// Appends the warnings of one target region to `out`.
///
/// Complexity: `O((I + M) · A)` for `I` implicit maps, `M` map items and `A` arguments.
pub(super) fn target_warnings(buffers: &[Buffer], t: &TargetUse, out: &mut Vec<Warning>) {
    let TargetUse {
        region,
        span,
        kernel,
        implicit,
        args,
        maps,
        allocated,
    } = *t;
    let warn = |kind, message: String, help: Option<String>, span| Warning {
        kind,
        construct: region.to_string(),
        message: format!("target \"{region}\": {message}"),
        help,
        span,
    };
    if maps.is_empty() && !implicit.is_empty() {
        let list: Vec<String> = implicit.iter().map(|s| written(buffers, s)).collect();
        out.push(warn(
            WarningKind::NoMaps,
            format!(
                "no `map` clause: {} {} mapped `tofrom` implicitly",
                list.join(", "),
                if list.len() == 1 { "is" } else { "are" }
            ),
            Some(
                "map each buffer argument: `to` for inputs, `from` for outputs, `tofrom` for both"
                    .to_string(),
            ),
            span,
        ));
    }
    for s in implicit {
        let mut uses = args.iter().filter(|(a, _)| a == s).peekable();
        if uses.peek().is_some() && uses.all(|(_, acc)| !acc.writes()) {
            let name = written(buffers, s);
            out.push(warn(
                WarningKind::ImplicitToFrom,
                format!(
                    "`{name}` is not in `map`, so it is mapped `tofrom` implicitly, but kernel \
                     `{kernel}` only reads it: it is copied back for nothing"
                ),
                Some(match span {
                    Some(_) => format!("add \"to: {name}\" to `map`"),
                    None => format!(
                        "add `.map(MapType::To, {})` to the region",
                        selected(buffers, s)
                    ),
                }),
                span,
            ));
        }
    }
    if args.is_empty() {
        return;
    }
    for m in maps {
        let unused = m.section.len > 0 && !args.iter().any(|(a, _)| a.overlaps(&m.section));
        if unused && allocated(&m.section) {
            let name = written(buffers, &m.section);
            let what = match m.map_type {
                MapType::Alloc => "allocated",
                _ => "allocated and copied",
            };
            out.push(warn(
                WarningKind::UnusedMap,
                format!(
                    "map item `{}: {name}` is not used: no argument of kernel `{kernel}` \
                     touches {name}, yet it is {what} for the region",
                    m.map_type
                ),
                Some(format!("remove it, or pass `{name}` to the kernel")),
                m.span.or(span),
            ));
        }
    }
}

/// Appends a [`WarningKind::UndefinedDeviceRead`] warning: kernel `kernel` of region
/// `region` (its shown name, `span`) reads `s`, part of which nothing wrote on the
/// device. `O(1)`.
pub(super) fn undefined_device_read(
    buffers: &[Buffer],
    (region, span): (&str, Option<Span>),
    kernel: &str,
    s: &Section,
    out: &mut Vec<Warning>,
) {
    // One warning per region and buffer (a kernel may read several parts of one buffer).
    let name = written(buffers, s);
    let buffer = buffers.get(s.buf.index()).map_or("", |b| b.name.as_str());
    let prefix = format!("target \"{region}\": kernel `{kernel}` reads {buffer}");
    let seen = out
        .iter()
        .rev()
        .take_while(|w| w.construct == region)
        .any(|w| {
            w.kind == WarningKind::UndefinedDeviceRead
                && w.construct == region
                && w.message
                    .strip_prefix(&prefix)
                    .is_some_and(|rest| rest.starts_with([',', '[']))
        });
    if seen {
        return;
    }
    let help = match span {
        Some(_) => format!(
            "map it `to` (\"to: {name}\" or \"tofrom: {name}\") to copy the host's contents in, \
             or write it in an earlier kernel"
        ),
        None => format!(
            "map it `to` (`.map(MapType::To, {})` or `MapType::ToFrom`) to copy the host's \
             contents in, or write it in an earlier kernel",
            selected(buffers, s)
        ),
    };
    out.push(Warning {
        kind: WarningKind::UndefinedDeviceRead,
        construct: region.to_string(),
        message: format!(
            "target \"{region}\": kernel `{kernel}` reads {name}, whose device copy nothing \
             wrote: no `to` map copied it in (it is mapped `alloc` or `from`) and no earlier \
             kernel wrote it. OpenMP leaves it undefined (5.2 §5.8.3); here it reads zeros"
        ),
        help: Some(help),
        span,
    });
}
