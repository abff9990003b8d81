//! Where an unclosed bracket, brace or string of a graph file was opened. `toml_edit`
//! reports an unclosed `map = [` where it gave up (the next table header, or the end of
//! the file); the loader points at the opening delimiter instead, with its key, by this
//! small scan of TOML's lexical structure (strings, comments, table headers, `key =`).

/// An opening delimiter that the rest of the file never closes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Unclosed {
    /// Byte offset of the delimiter.
    pub at: usize,
    /// The delimiter as written: `[`, `{`, `"`, `'`, `"""` or `'''`.
    pub delim: &'static str,
    /// The key whose value it opens (`map`, `args`), as written, when there is one.
    pub key: Option<String>,
}

/// The innermost delimiter open at byte `err` (where the TOML parser stopped) that is
/// never closed before the end of `text`, if any. A delimiter open at `err` but closed
/// later (`[1 2]`) is not reported: the parser's own position is right for it.
pub(super) fn unclosed_at(text: &str, err: usize) -> Option<Unclosed> {
    let b = text.as_bytes();
    // Open `[` / `{` of values: (delimiter, offset, key).
    let mut stack: Vec<(u8, usize, Option<String>)> = Vec::new();
    // The stack as it was at `err`, and the shortest it has been since.
    let mut at_err: Option<Vec<(u8, usize, Option<String>)>> = None;
    let mut min_len = usize::MAX;
    let mut key_start: Option<usize> = Some(0); // a key may start here (line start, `{`, `,`)
    let mut key: Option<String> = None; // the key of the value being read
    let mut i = 0;
    while i < b.len() {
        if i >= err && at_err.is_none() {
            if stack.is_empty() {
                return None;
            }
            at_err = Some(stack.clone());
            min_len = stack.len();
        }
        let c = b[i];
        match c {
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'"' | b'\'' => {
                let triple = b[i..].starts_with(&[c, c, c]);
                let delim = match (c, triple) {
                    (b'"', true) => "\"\"\"",
                    (b'"', false) => "\"",
                    (_, true) => "'''",
                    (_, false) => "'",
                };
                let end = string_end(b, i + delim.len(), c, triple);
                if at_err.is_none() && end.is_none_or(|e| err < e) {
                    // The parser stopped inside this string: unclosed when no quote ends
                    // it (before the end of its line, for a one-line string).
                    return end.is_none().then(|| Unclosed {
                        at: i,
                        delim,
                        key: key.clone(),
                    });
                }
                i = end.unwrap_or(b.len());
                continue;
            }
            b'[' if stack.is_empty() && key_start.is_some() && key.is_none() => {
                // A table header: one line; the parser locates an unclosed one there.
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'[' | b'{' => {
                stack.push((c, i, key.clone()));
                key_start = (c == b'{').then_some(i + 1);
                key = None;
            }
            b']' | b'}' => {
                let want = if c == b']' { b'[' } else { b'{' };
                if stack.last().map(|s| s.0) == Some(want) {
                    stack.pop();
                    min_len = min_len.min(stack.len());
                    // The value ended; inside an array the enclosing key applies again.
                    key = stack.last().and_then(|s| s.2.clone());
                }
            }
            b'=' if key_start.is_some() && key.is_none() => {
                key = Some(text[key_start.unwrap_or(0)..i].trim().to_string());
                key_start = None;
            }
            b',' if stack.last().map(|s| s.0) == Some(b'{') => {
                key_start = Some(i + 1);
                key = None;
            }
            b'\n' if stack.is_empty() => {
                key_start = Some(i + 1);
                key = None;
            }
            _ => {}
        }
        i += 1;
    }
    let snapshot = match at_err {
        Some(s) => s,
        None => {
            min_len = stack.len(); // `err` at the end of the file
            stack
        }
    };
    let (d, at, key) = snapshot.get(min_len.checked_sub(1)?)?.clone();
    Some(Unclosed {
        at,
        delim: if d == b'[' { "[" } else { "{" },
        key,
    })
}

/// The offset just past the closing quote of a string whose contents start at `i`
/// (`q` the quote, `triple` for `"""` / `'''`); `None` when the file ends first or, for a
/// single-line string, its line does.
fn string_end(b: &[u8], mut i: usize, q: u8, triple: bool) -> Option<usize> {
    while i < b.len() {
        let c = b[i];
        if c == b'\\' && q == b'"' {
            i += 2;
            continue;
        }
        if c == b'\n' && !triple {
            return None;
        }
        if c == q && (!triple || b[i..].starts_with(&[q, q, q])) {
            let mut end = i + if triple { 3 } else { 1 };
            // `""""` : up to two more quotes belong to the contents.
            while triple && end < b.len() && b[end] == q && end < i + 5 {
                end += 1;
            }
            return Some(end);
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str, err: usize) -> Option<(usize, &'static str, Option<String>)> {
        unclosed_at(text, err).map(|u| (u.at, u.delim, u.key))
    }

    #[test]
    fn an_unclosed_array_is_found_at_its_bracket_with_its_key() {
        let text = "name = \"p\"\nmap = [\"to: x\",\n\n[[body]]\nx = [1]\n";
        let open = text.find('[').unwrap();
        assert_eq!(at(text, text.len()), Some((open, "[", Some("map".into()))));
        // The parser stopping at the next header finds it too.
        let header = text.find("[[body]]").unwrap() + 2;
        assert_eq!(at(text, header), Some((open, "[", Some("map".into()))));
    }

    #[test]
    fn a_closed_delimiter_and_a_header_are_not_reported() {
        let text = "a = [1 2]\nb = 3\n";
        assert_eq!(at(text, text.find('2').unwrap()), None);
        let text = "[[buffer\nname = \"x\"\n";
        assert_eq!(at(text, 8), None);
        // Brackets inside strings and comments do not count.
        let text = "a = \"[\" # [\nb = [\n";
        assert_eq!(at(text, text.len()), Some((16, "[", Some("b".into()))));
    }

    #[test]
    fn unclosed_strings_and_inline_tables() {
        let text = "name = \"p\nty = 1\n";
        assert_eq!(at(text, 9), Some((7, "\"", Some("name".into()))));
        let text = "name = \"\"\"p\nx = 1\n";
        assert_eq!(
            at(text, text.len()),
            Some((7, "\"\"\"", Some("name".into())))
        );
        let text = "x = { a = [1, 2\n";
        assert_eq!(at(text, text.len()), Some((10, "[", Some("a".into()))));
        let text = "x = { a = 1, b = 2\ny = 3\n";
        assert_eq!(at(text, 18), Some((4, "{", Some("x".into()))));
        let text = "s = 'a\\'\nt = [\"a\\\"]\"]\n";
        // A literal string has no escapes: 'a\' is closed; "a\"]" is one string.
        assert_eq!(at(text, text.len()), None);
    }
}
