//! The small string syntaxes inside a graph file: sections (`y`, `y[0:512]`), map items
//! (`"always, present, from: z[0:10]"`), update motions (`"to: x"`) and depend items
//! (`"inout: y[0:4]"`). Each result carries the byte span of its section in the file.

use std::collections::HashMap;

use super::error::ErrorKind;
use crate::model::{Buffer, BufferId, Depend, DependType, MapItem, MapType, Section, Span};
use crate::suggest;

/// A problem found in a string value, before it becomes a [`super::FileError`].
#[derive(Debug, Clone)]
pub(crate) struct Bad {
    pub kind: ErrorKind,
    pub span: Span,
    pub message: String,
    /// A help line ("did you mean ...").
    pub help: Option<String>,
}

pub(crate) fn bad(kind: ErrorKind, span: Span, message: String) -> Bad {
    Bad {
        kind,
        span,
        message,
        help: None,
    }
}

impl Bad {
    /// Adds a help line when there is one.
    pub(crate) fn with_help(mut self, help: Option<String>) -> Bad {
        self.help = help;
        self
    }
}

/// A string value and where its characters lie in the file.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StrLoc<'a> {
    /// The decoded string.
    pub text: &'a str,
    /// File offset of `text[0]` when the file holds the characters verbatim (a string
    /// without escapes); `None` otherwise.
    pub base: Option<usize>,
    /// Span of the whole TOML value (quotes included).
    pub whole: Span,
}

impl StrLoc<'_> {
    /// The file span of `text[start..end]`, or of the whole value when the string had
    /// escapes.
    pub fn sub(&self, start: usize, end: usize) -> Span {
        match self.base {
            Some(b) => Span::new(b + start, b + end),
            None => self.whole,
        }
    }
}

/// Buffers by name, for resolving sections.
pub(crate) struct Buffers<'a> {
    pub list: &'a [Buffer],
    pub by_name: &'a HashMap<String, BufferId>,
}

/// True for characters allowed in buffer names: letters, digits, `_`, `.`, `-`.
pub(crate) fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '.' | '-')
}

/// Splits `s[start..end]` at top-level commas (not inside `[...]`), returning trimmed
/// pieces with their offsets in `s`.
fn split_list(s: &str, start: usize, end: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut piece = start;
    for (i, c) in s[start..end].char_indices() {
        let i = start + i;
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth <= 0 => {
                out.push(trim(s, piece, i));
                piece = i + 1;
            }
            _ => {}
        }
    }
    out.push(trim(s, piece, end));
    out
}

/// Trims whitespace from `s[a..b]`; returns the trimmed range.
fn trim(s: &str, a: usize, b: usize) -> (usize, usize) {
    let t = &s[a..b];
    let lead = t.len() - t.trim_start().len();
    let tail = t.len() - t.trim_end().len();
    if lead == t.len() {
        (a, a)
    } else {
        (a + lead, b - tail)
    }
}

/// Position of the first `:` outside brackets.
fn top_colon(s: &str) -> Option<usize> {
    let mut depth = 0i32;
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ':' if depth <= 0 => return Some(i),
            _ => {}
        }
    }
    None
}

/// Parses a section `name`, `name[lo:len]`, `name[:len]`, `name[lo:]` or `name[:]`
/// (elements, OpenMP 5.2 §5.2.5 array sections) occupying `loc.text[a..b]`, and checks
/// it against the buffer's length.
///
/// Errors: unknown buffer (span of the name), bad syntax, out of bounds (`lo + len`
/// overflow included).
pub(crate) fn parse_section(
    loc: &StrLoc,
    a: usize,
    b: usize,
    bufs: &Buffers,
    what: &str,
) -> Result<Section, Bad> {
    let s = &loc.text[a..b];
    let whole = loc.sub(a, b);
    let syntax = |why: &str| {
        bad(
            ErrorKind::Section,
            whole,
            format!("bad section `{s}` in {what}: {why} (expected `name` or `name[lo:len]`)"),
        )
    };
    if s.is_empty() {
        return Err(syntax("empty"));
    }
    let name_end = s.find('[').unwrap_or(s.len());
    let name = s[..name_end].trim_end();
    if name.is_empty() {
        return Err(syntax("missing buffer name"));
    }
    if let Some(c) = name.chars().find(|c| !is_name_char(*c)) {
        return Err(syntax(&format!("unexpected `{c}`")));
    }
    let name_span = loc.sub(a, a + name.len());
    let id = *bufs.by_name.get(name).ok_or_else(|| {
        let declared = bufs.list.iter().map(|b| b.name.as_str());
        bad(
            ErrorKind::UnknownName,
            name_span,
            format!("unknown buffer `{name}` in {what}"),
        )
        .with_help(Some(suggest::help_for(name, "declared buffers", declared)))
    })?;
    let buf_len = bufs.list.get(id.index()).map(|b| b.len).unwrap_or(0);
    if name_end == s.len() {
        return Ok(Section::new(id, 0, buf_len));
    }
    let rest = &s[name_end..];
    let inner = rest
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .ok_or_else(|| syntax("unbalanced brackets"))?;
    let (lo_s, len_s) = inner
        .split_once(':')
        .ok_or_else(|| syntax("missing `:` between lower bound and length"))?;
    let num = |t: &str, default: u64| -> Result<u64, Bad> {
        let t = t.trim();
        if t.is_empty() {
            return Ok(default);
        }
        if !t.bytes().all(|c| c.is_ascii_digit()) {
            return Err(syntax(&format!("`{t}` is not a non-negative integer")));
        }
        t.parse::<u64>()
            .map_err(|_| syntax(&format!("`{t}` is too large")))
    };
    let lo = num(lo_s, 0)?;
    let len = num(len_s, buf_len.saturating_sub(lo))?;
    let end = lo.checked_add(len);
    if lo > buf_len || end.is_none_or(|e| e > buf_len) {
        return Err(bad(
            ErrorKind::Section,
            whole,
            format!(
                "section `{name}[{lo}:{len}]` in {what} is out of bounds of buffer `{name}` ({buf_len} elements)"
            ),
        ));
    }
    Ok(Section::new(id, lo, len))
}

/// Parses a list of sections `"x, y[0:4]"` (a `reads`/`writes` entry or the list after
/// a clause's colon) in `loc.text[a..b]`; returns each with its span.
pub(crate) fn parse_sections(
    loc: &StrLoc,
    a: usize,
    b: usize,
    bufs: &Buffers,
    what: &str,
) -> Result<Vec<(Section, Span)>, Bad> {
    split_list(loc.text, a, b)
        .into_iter()
        .map(|(x, y)| Ok((parse_section(loc, x, y, bufs, what)?, loc.sub(x, y))))
        .collect()
}

/// Which construct a map item belongs to; decides the allowed map types and modifiers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MapPlace {
    /// `target`, `target_data`, `enter_data`: no `release`/`delete`.
    Entry,
    /// `exit_data`: no `to`/`alloc`.
    Exit,
    /// `update`: `to` or `from` only, `present` the only modifier.
    Update,
}

/// Parses one `map` string: `[modifiers,] [type:] sections`, modifiers `always`,
/// `present`, `close` (OpenMP 5.2 §5.8.3); without a type the map is `tofrom`.
/// Returns one item per section, each spanning its section.
pub(crate) fn parse_map(
    loc: &StrLoc,
    bufs: &Buffers,
    place: MapPlace,
    what: &str,
) -> Result<Vec<MapItem>, Bad> {
    let s = loc.text;
    let (head, list_start) = match top_colon(s) {
        Some(i) => (Some(i), i + 1),
        None => (None, 0),
    };
    let mut map_type: Option<MapType> = None;
    let (mut always, mut present, mut close) = (false, false, false);
    if let Some(colon) = head {
        let mut tokens = Vec::new();
        let mut start = None;
        for (i, c) in s[..colon].char_indices() {
            if c == ',' || c.is_whitespace() {
                if let Some(st) = start.take() {
                    tokens.push((st, i));
                }
            } else if start.is_none() {
                start = Some(i);
            }
        }
        if let Some(st) = start {
            tokens.push((st, colon));
        }
        for (x, y) in tokens {
            let t = &s[x..y];
            let span = loc.sub(x, y);
            let flag = match t {
                "always" => Some(&mut always),
                "present" => Some(&mut present),
                "close" => Some(&mut close),
                _ => None,
            };
            if let Some(flag) = flag {
                if place == MapPlace::Update && t != "present" {
                    return Err(bad(
                        ErrorKind::Clause,
                        span,
                        format!("modifier `{t}` is not allowed in {what} (only `present`)"),
                    ));
                }
                if *flag {
                    return Err(bad(
                        ErrorKind::Clause,
                        span,
                        format!("modifier `{t}` given twice in {what}"),
                    ));
                }
                *flag = true;
                continue;
            }
            let Some(mt) = MapType::parse(t) else {
                let words = [
                    "to", "from", "tofrom", "alloc", "release", "delete", "always", "present",
                    "close",
                ];
                return Err(bad(
                    ErrorKind::Clause,
                    span,
                    format!(
                        "unknown map type or modifier `{t}` in {what} (types: to, from, tofrom, alloc, release, delete; modifiers: always, present, close)"
                    ),
                )
                .with_help(suggest::did_you_mean_text(t, words)));
            };
            if let Some(prev) = map_type {
                return Err(bad(
                    ErrorKind::Clause,
                    span,
                    format!("{what} has two map types, `{prev}` and `{mt}`"),
                ));
            }
            let allowed = match place {
                MapPlace::Entry => !matches!(mt, MapType::Release | MapType::Delete),
                MapPlace::Exit => !matches!(mt, MapType::To | MapType::Alloc),
                MapPlace::Update => matches!(mt, MapType::To | MapType::From),
            };
            if !allowed {
                let why = match place {
                    MapPlace::Entry => "is only allowed on exit data",
                    MapPlace::Exit => "is not allowed on exit data",
                    MapPlace::Update => "is not a motion: update items are `to` or `from`",
                };
                return Err(bad(
                    ErrorKind::Clause,
                    span,
                    format!("map type `{mt}` in {what} {why}"),
                ));
            }
            map_type = Some(mt);
        }
    }
    let map_type = match (map_type, place) {
        (Some(t), _) => t,
        (None, MapPlace::Update) => {
            return Err(bad(
                ErrorKind::Clause,
                loc.sub(0, s.len()),
                format!("update motion `{s}` in {what} needs `to:` or `from:`"),
            ))
        }
        (None, _) => MapType::ToFrom,
    };
    parse_sections(loc, list_start, s.len(), bufs, what)?
        .into_iter()
        .map(|(section, span)| {
            Ok(MapItem {
                map_type,
                section,
                always,
                present,
                close,
                span: Some(span),
            })
        })
        .collect()
}

/// Parses one `depend` string `"in|out|inout: sections"` (OpenMP 5.2 §15.9.5).
pub(crate) fn parse_depend(loc: &StrLoc, bufs: &Buffers, what: &str) -> Result<Vec<Depend>, Bad> {
    let s = loc.text;
    let Some(colon) = top_colon(s) else {
        return Err(bad(
            ErrorKind::Clause,
            loc.sub(0, s.len()),
            format!("depend item `{s}` in {what} needs a type: `in: x`, `out: x` or `inout: x`"),
        ));
    };
    let (x, y) = trim(s, 0, colon);
    let kind = DependType::parse(&s[x..y]).ok_or_else(|| {
        bad(
            ErrorKind::Clause,
            loc.sub(x, y.max(x)),
            format!(
                "unknown depend type `{}` in {what} (expected in, out or inout)",
                &s[x..y]
            ),
        )
        .with_help(suggest::did_you_mean_text(&s[x..y], ["in", "out", "inout"]))
    })?;
    Ok(parse_sections(loc, colon + 1, s.len(), bufs, what)?
        .into_iter()
        .map(|(section, span)| Depend {
            kind,
            section,
            span: Some(span),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ElemType, Init};

    fn bufs() -> (Vec<Buffer>, HashMap<String, BufferId>) {
        let list = vec![
            Buffer {
                name: "x".into(),
                ty: ElemType::F32,
                len: 100,
                init: Init::Zeros,
            },
            Buffer {
                name: "y".into(),
                ty: ElemType::F32,
                len: 10,
                init: Init::Zeros,
            },
        ];
        let by_name = list
            .iter()
            .enumerate()
            .map(|(i, b)| (b.name.clone(), BufferId(i as u32)))
            .collect();
        (list, by_name)
    }

    fn loc(s: &str) -> StrLoc<'_> {
        StrLoc {
            text: s,
            base: Some(1000),
            whole: Span::new(999, 1001 + s.len()),
        }
    }

    #[test]
    fn sections() {
        let (list, by_name) = bufs();
        let b = Buffers {
            list: &list,
            by_name: &by_name,
        };
        let p = |s: &str| parse_section(&loc(s), 0, s.len(), &b, "t");
        assert_eq!(p("x").unwrap(), Section::new(BufferId(0), 0, 100));
        assert_eq!(p("y[2:3]").unwrap(), Section::new(BufferId(1), 2, 3));
        assert_eq!(p("y[ 2 : 3 ]").unwrap(), Section::new(BufferId(1), 2, 3));
        assert_eq!(p("y[4:]").unwrap(), Section::new(BufferId(1), 4, 6));
        assert_eq!(p("y[:4]").unwrap(), Section::new(BufferId(1), 0, 4));
        assert_eq!(p("y[10:0]").unwrap(), Section::new(BufferId(1), 10, 0));
        let e = p("z[0:1]").unwrap_err();
        assert_eq!(e.message, "unknown buffer `z` in t");
        assert_eq!(e.span, Span::new(1000, 1001));
        let e = p("y[8:3]").unwrap_err();
        assert_eq!(
            e.message,
            "section `y[8:3]` in t is out of bounds of buffer `y` (10 elements)"
        );
        assert!(p("y[1:18446744073709551615]").is_err());
        assert!(p("y[11:]").is_err());
        assert!(p("y[1-2]").unwrap_err().message.contains("missing `:`"));
        assert!(p("y[a:2]").unwrap_err().message.contains("`a` is not"));
        assert!(p("y[1:2").unwrap_err().message.contains("unbalanced"));
        assert!(p("[1:2]").is_err());
        assert!(p("y x").is_err());
    }

    #[test]
    fn map_items() {
        let (list, by_name) = bufs();
        let b = Buffers {
            list: &list,
            by_name: &by_name,
        };
        let s = "always, present, from: x[0:10], y";
        let items = parse_map(&loc(s), &b, MapPlace::Entry, "t").unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].map_type, MapType::From);
        assert!(items[0].always && items[0].present && !items[0].close);
        assert_eq!(items[0].span, Some(Span::new(1023, 1030)));
        assert_eq!(items[1].span, Some(Span::new(1032, 1033)));
        let items = parse_map(&loc("x"), &b, MapPlace::Entry, "t").unwrap();
        assert_eq!(items[0].map_type, MapType::ToFrom);
        let e = parse_map(&loc("sometimes to: x"), &b, MapPlace::Entry, "t").unwrap_err();
        assert!(e
            .message
            .starts_with("unknown map type or modifier `sometimes`"));
        assert_eq!(e.span, Span::new(1000, 1009));
        let e = parse_map(&loc("tofrom: x"), &b, MapPlace::Update, "t").unwrap_err();
        assert!(
            e.message.contains("update items are `to` or `from`"),
            "{}",
            e.message
        );
        let e = parse_map(&loc("delete: x"), &b, MapPlace::Entry, "t").unwrap_err();
        assert!(e.message.contains("only allowed on exit data"));
        assert!(parse_map(&loc("present, from: x"), &b, MapPlace::Update, "t").is_ok());
        assert!(parse_map(&loc("always, from: x"), &b, MapPlace::Update, "t").is_err());
        assert!(parse_map(&loc("to from: x"), &b, MapPlace::Entry, "t").is_err());
        assert!(parse_map(&loc("to: "), &b, MapPlace::Entry, "t").is_err());
    }

    #[test]
    fn depends() {
        let (list, by_name) = bufs();
        let b = Buffers {
            list: &list,
            by_name: &by_name,
        };
        let d = parse_depend(&loc("inout: y[0:4]"), &b, "t").unwrap();
        assert_eq!(d[0].kind, DependType::InOut);
        assert_eq!(d[0].section, Section::new(BufferId(1), 0, 4));
        assert!(parse_depend(&loc("y"), &b, "t").is_err());
        let e = parse_depend(&loc("mutexinoutset: y"), &b, "t").unwrap_err();
        assert!(e.message.contains("unknown depend type `mutexinoutset`"));
    }
}
