//! Typed ids, element types, initial contents and array sections.

use std::fmt;

/// Index of a buffer in [`crate::model::Program::buffers`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BufferId(pub u32);

impl BufferId {
    /// The index as `usize`.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Element type of a buffer (the `T` of an OpenMP array `T a[n]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ElemType {
    F32,
    F64,
    I32,
    I64,
    U8,
}

impl ElemType {
    /// All element types, in file order.
    pub const ALL: [ElemType; 5] = [
        ElemType::F32,
        ElemType::F64,
        ElemType::I32,
        ElemType::I64,
        ElemType::U8,
    ];

    /// Size of one element in bytes.
    pub fn size_bytes(self) -> u64 {
        match self {
            ElemType::F32 | ElemType::I32 => 4,
            ElemType::F64 | ElemType::I64 => 8,
            ElemType::U8 => 1,
        }
    }

    /// The name used in graph files (`f32`, `f64`, `i32`, `i64`, `u8`).
    pub fn name(self) -> &'static str {
        match self {
            ElemType::F32 => "f32",
            ElemType::F64 => "f64",
            ElemType::I32 => "i32",
            ElemType::I64 => "i64",
            ElemType::U8 => "u8",
        }
    }

    /// Parses a graph-file type name; `None` if unknown.
    pub fn parse(s: &str) -> Option<ElemType> {
        ElemType::ALL.into_iter().find(|t| t.name() == s)
    }

    /// True for `f32` and `f64`.
    pub fn is_float(self) -> bool {
        matches!(self, ElemType::F32 | ElemType::F64)
    }
}

impl fmt::Display for ElemType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Initial contents of a host buffer.
#[derive(Clone, Debug, PartialEq)]
pub enum Init {
    /// All elements zero.
    Zeros,
    /// Element `i` holds `i` (wrapping for `u8`).
    Iota,
    /// Every element holds the value (converted to the element type).
    Fill(f64),
    /// Uniform values in `[0, 1)` for floats, `[0, 100)` for integers, from a ChaCha8
    /// generator with this seed (the same on every machine).
    Random(u64),
}

impl fmt::Display for Init {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Init::Zeros => f.write_str("zeros"),
            Init::Iota => f.write_str("iota"),
            Init::Fill(v) => write!(f, "fill({})", super::Num(*v)),
            Init::Random(s) => write!(f, "random({s})"),
        }
    }
}

/// A host buffer: a named array of `len` elements of `ty`.
#[derive(Clone, Debug, PartialEq)]
pub struct Buffer {
    pub name: String,
    pub ty: ElemType,
    /// Length in elements.
    pub len: u64,
    pub init: Init,
}

impl Buffer {
    /// Size in bytes (`len * ty.size_bytes()`).
    pub fn bytes(&self) -> u64 {
        self.len * self.ty.size_bytes()
    }
}

/// An OpenMP array section `buf[lo:len]`, in elements (OpenMP 5.2 §5.2.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Section {
    pub buf: BufferId,
    /// First element.
    pub lo: u64,
    /// Number of elements (may be 0: a zero-length section).
    pub len: u64,
}

impl Section {
    /// `buf[lo:len]`.
    pub fn new(buf: BufferId, lo: u64, len: u64) -> Section {
        Section { buf, lo, len }
    }

    /// One past the last element.
    pub fn end(&self) -> u64 {
        self.lo + self.len
    }

    /// True if both sections are of one buffer and share at least one element.
    pub fn overlaps(&self, other: &Section) -> bool {
        self.buf == other.buf
            && self.len > 0
            && other.len > 0
            && self.lo < other.end()
            && other.lo < self.end()
    }

    /// True if `other` lies wholly inside `self` (a zero-length `other` inside the range
    /// `[lo, end]` counts as contained).
    pub fn contains(&self, other: &Section) -> bool {
        self.buf == other.buf && self.lo <= other.lo && other.end() <= self.end()
    }

    /// Formats as `name[lo:len]` with the buffer's name.
    pub fn display<'a>(&'a self, buffers: &'a [Buffer]) -> SectionDisplay<'a> {
        SectionDisplay {
            section: self,
            buffers,
        }
    }
}

/// `Display` of a [`Section`] with its buffer's name: `y[0:1024]`.
pub struct SectionDisplay<'a> {
    section: &'a Section,
    buffers: &'a [Buffer],
}

impl fmt::Display for SectionDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self
            .buffers
            .get(self.section.buf.index())
            .map(|b| b.name.as_str())
            .unwrap_or("?");
        let name = escape_controls(name);
        write!(f, "{name}[{}:{}]", self.section.lo, self.section.len)
    }
}

/// A name (or message) as it may be shown on a terminal: control characters (Unicode
/// `Cc`: C0, DEL, C1, which include the escape character and CSI that start terminal
/// control sequences) written as Rust escapes (`\u{1b}`, `\n`, `\t`), everything else as
/// is. Names may hold any character (a TOML string can spell any); every message and
/// output that shows a name shows it through this, so a name cannot drive the terminal.
/// Borrowed when there is nothing to escape. `O(len)`.
///
/// ```
/// use offload_sched::model::escape_controls;
/// assert_eq!(escape_controls("saxpy"), "saxpy");
/// assert_eq!(escape_controls("r\u{1b}[2J"), "r\\u{1b}[2J");
/// ```
pub fn escape_controls(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// A name as it stands between double quotes in a text that is read back (the
/// `schedule` text's header and `region "…"` fields): `"` and `\` written `\"` and
/// `\\`, so a name cannot end its quotes early, and control characters as in
/// [`escape_controls`]. [`unescape_quoted`]
/// reads it back. Borrowed when there is nothing to escape. `O(len)`.
///
/// ```
/// use offload_sched::model::{escape_quoted, unescape_quoted};
/// assert_eq!(escape_quoted("a\"b"), "a\\\"b");
/// assert_eq!(unescape_quoted(&escape_quoted("x\\\"y")), "x\\\"y");
/// ```
pub fn escape_quoted(s: &str) -> std::borrow::Cow<'_, str> {
    let quoted = |c: char| c == '"' || c == '\\';
    if !s.chars().any(|c| quoted(c) || c.is_control()) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if quoted(c) {
            out.push('\\');
            out.push(c);
        } else if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The inverse of [`escape_quoted`]: `\"`, `\\`, and the escapes it writes for control
/// characters (`\t`, `\n`, `\r`, `\0`, `\u{…}`, Rust's `char::escape_debug`) are read
/// back; any other backslash is kept as written. `O(len)`.
///
/// ```
/// use offload_sched::model::{escape_quoted, unescape_quoted};
/// for name in ["a\"b\\", "\tx\u{1b}[2J\n", "\\t is not a tab"] {
///     assert_eq!(unescape_quoted(&escape_quoted(name)), name);
/// }
/// ```
pub fn unescape_quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let tail = &rest[i + 1..];
        let simple = match tail.chars().next() {
            Some(c @ ('"' | '\\')) => Some(c),
            Some('t') => Some('\t'),
            Some('n') => Some('\n'),
            Some('r') => Some('\r'),
            Some('0') => Some('\0'),
            _ => None,
        };
        if let Some(c) = simple {
            out.push(c);
            rest = &tail[1..];
            continue;
        }
        let unicode = tail
            .strip_prefix("u{")
            .and_then(|t| t.find('}').map(|end| (&t[..end], &t[end + 1..])))
            .and_then(|(hex, after)| {
                let c = u32::from_str_radix(hex, 16).ok().and_then(char::from_u32)?;
                Some((c, after))
            });
        match unicode {
            Some((c, after)) => {
                out.push(c);
                rest = after;
            }
            None => {
                out.push('\\');
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

/// [`escape_controls`] for text of several lines: newlines and tabs kept, every other
/// control character escaped (what the command line writes to a terminal).
pub fn escape_controls_but_lines(s: &str) -> std::borrow::Cow<'_, str> {
    let bad = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !s.chars().any(bad) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if bad(c) {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Formats a byte count in human units: `512 B`, `4 KiB`, `1.5 MiB`, `16 MiB`, `2 GiB`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else if (v - v.round()).abs() < 1e-9 {
        format!("{} {}", v.round() as u64, UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_bytes_units() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1000), "1000 B");
        assert_eq!(human_bytes(4096), "4 KiB");
        assert_eq!(human_bytes(1536 * 1024), "1.5 MiB");
        assert_eq!(human_bytes(16 << 20), "16 MiB");
        // The parser's units up to EiB (`--device-memory 15EiB`), not 15728640 TiB.
        assert_eq!(human_bytes(15 << 60), "15 EiB");
        assert_eq!(human_bytes(3 << 50), "3 PiB");
        assert_eq!(human_bytes(u64::MAX), "16 EiB");
    }

    #[test]
    fn section_overlap_and_containment() {
        let a = Section::new(BufferId(0), 0, 10);
        let b = Section::new(BufferId(0), 2, 4);
        let c = Section::new(BufferId(0), 8, 4);
        let d = Section::new(BufferId(1), 0, 10);
        assert!(a.contains(&b) && a.overlaps(&b));
        assert!(!a.contains(&c) && a.overlaps(&c));
        assert!(!a.overlaps(&d));
        assert!(a.contains(&Section::new(BufferId(0), 0, 0)));
        assert!(!Section::new(BufferId(0), 3, 0).overlaps(&a));
    }
}
