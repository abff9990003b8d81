//! Helpers of the loader error tests (tests/file_errors*.rs): a base graph file, the
//! error of a text, and assertions of an error's message, kind, `line:column` and help.

use offload_sched::file::{parse, ErrorKind, FileError, SourceFile};

pub const BASE: &str = r#"name = "p"

[[buffer]]
name = "x"
type = "f32"
len = 16

[[buffer]]
name = "y"
type = "f32"
len = 16

[[body]]
target = "k"
kernel = "saxpy"
args = [2.0, "x", "y"]
map = ["to: x", "tofrom: y"]
"#;

pub fn err(text: &str) -> FileError {
    match parse(&SourceFile::new("g.toml", text)) {
        Ok(p) => panic!("expected an error, parsed {p:?}"),
        Err(e) => e,
    }
}

/// 1-based (line, column) of the `nth` occurrence of `needle` in `text`.
pub fn pos(text: &str, needle: &str, nth: usize) -> (usize, usize) {
    let at = text
        .match_indices(needle)
        .nth(nth)
        .unwrap_or_else(|| panic!("`{needle}` not in text"))
        .0;
    let line = text[..at].matches('\n').count() + 1;
    let col = at - text[..at].rfind('\n').map(|i| i + 1).unwrap_or(0) + 1;
    (line, col)
}

/// Asserts kind, message, and that the error points at `needle` (its `nth` occurrence).
pub fn check(text: &str, kind: ErrorKind, message: &str, needle: &str, nth: usize) -> FileError {
    let e = err(text);
    assert_eq!(e.message(), message, "\n{}", e.render());
    assert_eq!(e.kind(), kind, "\n{}", e.render());
    let (line, col) = pos(text, needle, nth);
    assert_eq!(
        e.location(),
        Some(("g.toml".to_string(), line, col)),
        "\n{}",
        e.render()
    );
    e
}

pub fn with(extra: &str) -> String {
    format!("{BASE}{extra}")
}

/// Asserts an error's message, position and help line (`None`: no help).
pub fn check_help(text: &str, kind: ErrorKind, message: &str, needle: &str, help: Option<&str>) {
    let e = check(text, kind, message, needle, 0);
    assert_eq!(e.help_text(), help, "\n{}", e.render());
}
