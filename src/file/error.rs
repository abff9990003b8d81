//! [`FileError`]: a graph-file error with its position, rendered as a caret diagnostic.
//!
//! [`FileError::render`] gives the plain compact form the CLI and tests use
//! (`file:line:col: error: message`, the source line, a `^^^` caret line); the
//! [`miette::Diagnostic`] implementation gives an embedding application's own miette
//! handler the source, the label and the help (the library does not pull miette's
//! `fancy` renderer).

use miette::{Diagnostic, LabeledSpan, NamedSource, SourceCode, SourceSpan};
use std::fmt;
use thiserror::Error;

use crate::model::{escape_controls, escape_controls_but_lines, Span};

/// What went wrong, for callers that match on errors rather than read them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The file could not be read, or is not UTF-8.
    Io,
    /// TOML syntax error (reported by `toml_edit`).
    Syntax,
    /// A required key is missing, or the file has no body.
    Missing,
    /// A key not allowed where it appears.
    UnknownKey,
    /// A value of the wrong TOML type or outside its range.
    BadValue,
    /// A buffer, kernel or construct name that is not declared.
    UnknownName,
    /// A name declared twice.
    Duplicate,
    /// Bad section syntax, or a section outside its buffer.
    Section,
    /// A map, motion or depend item that is malformed.
    Clause,
    /// A buffer (or all buffers together) over the size limit.
    TooLarge,
    /// Kernel arguments that do not match the signature.
    Arguments,
    /// A `device` not below `devices`.
    Device,
    /// A cycle through `after` / `depend`, or an `after` that cannot be satisfied.
    Order,
    /// An error from the lowering, located in the file.
    Lower,
    /// A failure while running, located at the construct of the failing op.
    Run,
}

impl ErrorKind {
    fn code(self) -> &'static str {
        match self {
            ErrorKind::Io => "offload_sched::file::io",
            ErrorKind::Syntax => "offload_sched::file::syntax",
            ErrorKind::Missing => "offload_sched::file::missing",
            ErrorKind::UnknownKey => "offload_sched::file::unknown_key",
            ErrorKind::BadValue => "offload_sched::file::bad_value",
            ErrorKind::UnknownName => "offload_sched::file::unknown_name",
            ErrorKind::Duplicate => "offload_sched::file::duplicate",
            ErrorKind::Section => "offload_sched::file::section",
            ErrorKind::Clause => "offload_sched::file::clause",
            ErrorKind::TooLarge => "offload_sched::file::too_large",
            ErrorKind::Arguments => "offload_sched::file::arguments",
            ErrorKind::Device => "offload_sched::file::device",
            ErrorKind::Order => "offload_sched::file::order",
            ErrorKind::Lower => "offload_sched::lower",
            ErrorKind::Run => "offload_sched::exec",
        }
    }
}

/// An error in a graph file. `Display` is the message alone; [`FileError::render`] adds
/// `file:line:col`, the source line and a caret; the [`Diagnostic`] implementation gives
/// miette the source (a `NamedSource`), a label on the span, a code and the help.
///
/// Boxed inside, so `Result<_, FileError>` stays one pointer wide.
#[derive(Debug, Error)]
#[error("{}", self.0.message)]
pub struct FileError(Box<Inner>);

#[derive(Debug)]
struct Inner {
    kind: ErrorKind,
    message: String,
    path: String,
    span: Option<Span>,
    source_code: Option<NamedSource<String>>,
    help: Option<String>,
    located: Option<Located>,
}

impl Diagnostic for FileError {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(self.0.kind.code()))
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.0
            .help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display + 'a>)
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        self.0.source_code.as_ref().map(|s| s as &dyn SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let s = self.0.span?;
        let label = LabeledSpan::new_with_span(
            Some("here".to_string()),
            SourceSpan::new(s.start.into(), s.end - s.start),
        );
        Some(Box::new(std::iter::once(label)))
    }
}

#[derive(Debug, Clone)]
struct Located {
    line: usize,
    col: usize,
    line_text: String,
    /// Caret width in characters (at least 1, clipped to the line).
    width: usize,
}

impl FileError {
    /// An error located at `span` of `text` (the whole file).
    pub fn at(
        kind: ErrorKind,
        path: &str,
        text: &str,
        span: Option<Span>,
        message: impl Into<String>,
    ) -> FileError {
        let span = span.map(|s| clamp(text, s));
        let located = span.map(|s| locate(text, s));
        FileError(Box::new(Inner {
            kind,
            message: shown(message.into()),
            path: escape_controls(path).into_owned(),
            span,
            source_code: Some(NamedSource::new(path, text.to_string()).with_language("toml")),
            help: None,
            located,
        }))
    }

    /// An error with no source text (an unreadable file).
    pub fn without_source(kind: ErrorKind, path: &str, message: impl Into<String>) -> FileError {
        FileError(Box::new(Inner {
            kind,
            message: shown(message.into()),
            path: escape_controls(path).into_owned(),
            span: None,
            source_code: None,
            help: None,
            located: None,
        }))
    }

    /// What kind of error this is.
    pub fn kind(&self) -> ErrorKind {
        self.0.kind
    }

    /// The message, naming the buffer, construct or kernel involved (no position).
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// The graph file's path as given.
    pub fn path(&self) -> &str {
        &self.0.path
    }

    /// Byte range of the offending text in the file, when known.
    pub fn span(&self) -> Option<Span> {
        self.0.span
    }

    /// The help line, if any.
    pub fn help_text(&self) -> Option<&str> {
        self.0.help.as_deref()
    }

    /// Adds a help line (shown by miette and by [`FileError::render`]).
    pub fn with_help(mut self, help: impl Into<String>) -> FileError {
        self.0.help = Some(shown(help.into()));
        self
    }

    /// `(file, line, column)`, 1-based; the column counts characters. `None` when the
    /// error has no position (an unreadable file).
    pub fn location(&self) -> Option<(String, usize, usize)> {
        self.0
            .located
            .as_ref()
            .map(|l| (self.0.path.clone(), l.line, l.col))
    }

    /// The plain compact rendering:
    ///
    /// ```text
    /// graphs/x.toml:12:9: error: unknown buffer `z` in map item
    ///    12 | map = ["to: z"]
    ///       |            ^
    /// ```
    ///
    /// followed by `help: ...` when there is help. Without a position it is
    /// `graphs/x.toml: error: message`.
    pub fn render(&self) -> String {
        self.render_as("error")
    }

    /// [`FileError::render`] with another severity in place of `error` (`warning`: the
    /// lowering's warnings are shown the same way).
    pub(crate) fn render_as(&self, severity: &str) -> String {
        let mut out = String::new();
        let i = &self.0;
        match &i.located {
            Some(l) => {
                out.push_str(&format!(
                    "{}:{}:{}: {severity}: {}\n",
                    i.path, l.line, l.col, i.message
                ));
                let num = l.line.to_string();
                let pad = " ".repeat(num.len());
                // A long line (minified TOML, a binary file) is cut to a window around
                // the caret, control characters shown as `�`.
                let chars: Vec<char> = l.line_text.chars().collect();
                let at = (l.col - 1).min(chars.len());
                let from = if chars.len() <= SHOWN_CHARS {
                    0
                } else {
                    at.saturating_sub(SHOWN_CHARS / 2)
                };
                let to = (from + SHOWN_CHARS).min(chars.len());
                let shown: String = chars[from..to]
                    .iter()
                    .map(|&c| {
                        if c.is_control() && c != '\t' {
                            '�'
                        } else {
                            c
                        }
                    })
                    .collect();
                let (pre, post) = (
                    if from > 0 { "…" } else { "" },
                    if to < chars.len() { "…" } else { "" },
                );
                out.push_str(&format!("{num} | {pre}{shown}{post}\n"));
                // Keep tabs so the caret lines up under the text.
                let lead: String = pre
                    .chars()
                    .map(|_| ' ')
                    .chain(
                        chars[from..at]
                            .iter()
                            .map(|&c| if c == '\t' { '\t' } else { ' ' }),
                    )
                    .collect();
                let width = l.width.min(to.saturating_sub(at)).max(1);
                out.push_str(&format!("{pad} | {lead}{}\n", "^".repeat(width)));
            }
            None => out.push_str(&format!("{}: {severity}: {}\n", i.path, i.message)),
        }
        if let Some(h) = &i.help {
            out.push_str(&format!("help: {h}\n"));
        }
        out
    }
}

/// Characters of the offending line an error shows at most (a window around the caret).
const SHOWN_CHARS: usize = 120;

/// Clamps a span to the text and to char boundaries.
fn clamp(text: &str, s: Span) -> Span {
    let mut start = s.start.min(text.len());
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = s.end.clamp(start, text.len());
    while !text.is_char_boundary(end) {
        end += 1;
    }
    Span { start, end }
}

fn locate(text: &str, s: Span) -> Located {
    let line_start = text[..s.start].rfind('\n').map(|i| i + 1).unwrap_or(0);
    let line_end = text[s.start..]
        .find('\n')
        .map(|i| s.start + i)
        .unwrap_or(text.len());
    let line = text[..s.start].matches('\n').count() + 1;
    let line_text = text[line_start..line_end]
        .trim_end_matches('\r')
        .to_string();
    let col = text[line_start..s.start].chars().count() + 1;
    let width = text[s.start..s.end.min(line_end)].chars().count().max(1);
    Located {
        line,
        col,
        line_text,
        width,
    }
}

/// A message as shown: control characters of the names in it escaped
/// ([`escape_controls_but_lines`]; the path and message of an error may quote any name).
fn shown(message: String) -> String {
    match escape_controls_but_lines(&message) {
        std::borrow::Cow::Borrowed(_) => message,
        std::borrow::Cow::Owned(s) => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_line_is_cut_around_the_caret() {
        let line = format!("map = [{}\"to: z\"]", "\"to: a\", ".repeat(10_000));
        let text = format!("name = \"p\"\n{line}\n");
        let start = text.rfind('z').unwrap();
        let e = FileError::at(
            ErrorKind::UnknownName,
            "g.toml",
            &text,
            Some(Span::new(start, start + 1)),
            "unknown buffer `z` in map item",
        );
        let r = e.render();
        assert!(r.len() < 600, "{} bytes", r.len());
        let lines: Vec<&str> = r.lines().collect();
        assert!(lines[1].starts_with("2 | …"), "{r}");
        // The caret sits under the `z`.
        let caret = lines[2].find('^').unwrap();
        assert_eq!(
            lines[1].chars().nth(lines[2][..caret].chars().count()),
            Some('z'),
            "{r}"
        );
        // Control characters (a binary file) are not echoed.
        let bin = "name = \u{1}\u{2}\u{7f}x\n";
        let e = FileError::at(
            ErrorKind::Syntax,
            "b.toml",
            bin,
            Some(Span::new(7, 8)),
            "bad",
        );
        assert!(!e.render().contains('\u{1}'), "{}", e.render());
    }

    #[test]
    fn render_shows_position_and_caret() {
        let text = "name = \"p\"\nmap = [\"to: z\"]\n";
        let start = text.find('z').unwrap();
        let e = FileError::at(
            ErrorKind::UnknownName,
            "g.toml",
            text,
            Some(Span::new(start, start + 1)),
            "unknown buffer `z` in map item",
        );
        assert_eq!(e.location(), Some(("g.toml".to_string(), 2, 13)));
        assert_eq!(
            e.render(),
            "g.toml:2:13: error: unknown buffer `z` in map item\n\
             2 | map = [\"to: z\"]\n  |             ^\n"
        );
        // The miette diagnostic carries the same position (for an embedder's handler).
        let labels: Vec<_> = Diagnostic::labels(&e).unwrap().collect();
        assert_eq!(labels.len(), 1);
        assert_eq!(labels[0].offset(), start);
    }

    #[test]
    fn spans_at_end_and_inside_chars_are_clamped() {
        let text = "a = \"é\"";
        let e = FileError::at(ErrorKind::BadValue, "f", text, Some(Span::new(6, 99)), "m");
        assert_eq!(e.location(), Some(("f".to_string(), 1, 6)));
        let e = FileError::at(ErrorKind::Missing, "f", "", Some(Span::new(0, 0)), "empty");
        assert_eq!(e.location(), Some(("f".to_string(), 1, 1)));
        assert!(e.render().contains("^"));
    }
}
