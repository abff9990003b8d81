//! Plainer words for two TOML syntax errors whose `toml_edit` message does not say what
//! is wrong: a key with no value (`name = ` at the end of the file, where the parser's
//! message is empty, or before a newline), and an integer outside TOML's 64-bit range
//! (`priority = 99999999999999999999`: "number too large to fit in target type"), which
//! is named with its key and, for the graph-file keys that take an integer, the values
//! allowed.

use crate::model::limits::{MAX_BUFFER_BYTES, MAX_DEVICES};

/// A syntax error explained: the message (after `TOML syntax error: `) and a help line.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Explained {
    pub message: String,
    pub help: Option<String>,
}

/// The key whose value holds byte `at` of `text`, and the line up to `at`: the last
/// `key =` before `at` on its line (`priority = 1`; `b` in `a = { b = 1 }`; a dotted or
/// quoted key as written).
fn key_of_line(text: &str, at: usize) -> Option<(&str, &str)> {
    let at = at.min(text.len());
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let before = &text[start..at];
    let (head, _) = before.rsplit_once('=')?;
    let key = head.rsplit(['{', ',']).next().unwrap_or(head).trim();
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-.\"' ".contains(c);
    (!key.is_empty() && key.chars().all(plain)).then_some((key, before))
}

/// The values a graph-file key that takes an integer allows, and the rule's source.
fn allowed(key: &str) -> Option<String> {
    Some(match key {
        "priority" => format!(
            "`priority` takes an integer from 0 to {} (OpenMP 5.2 §12.4 `priority(n)`: a \
             non-negative integer, a hint; this implementation's largest priority, its \
             max-task-priority, is 2^32 − 1)",
            u32::MAX
        ),
        "repeat" => format!("`repeat` takes an integer from 1 to {}", u32::MAX),
        "devices" => format!("`devices` takes an integer from 1 to {MAX_DEVICES}"),
        "device" => "`device` takes a device number from 0 to `devices` − 1, or \"auto\"".into(),
        "len" => format!(
            "`len` takes a number of elements from 0, at most {} bytes in all (64 GiB)",
            MAX_BUFFER_BYTES
        ),
        "rank" => "`rank` takes a rank number from 0 to the rank count − 1".into(),
        _ => return None,
    })
}

/// Explains the syntax error `msg` that the TOML parser reports at byte `at`, when it is
/// one of the two this module knows; `None` leaves the parser's message as it is.
pub(super) fn explain(text: &str, at: usize, msg: &str) -> Option<Explained> {
    let at = at.min(text.len());
    let line_end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    let rest = text[at..line_end].trim();
    let (key, before) = key_of_line(text, at)?;
    let value_missing =
        before.trim_end().ends_with('=') && (rest.is_empty() || rest.starts_with(['#', '}', ',']));
    if value_missing {
        let at_end = text[at..].trim().is_empty();
        let parser = match msg.is_empty() {
            true => String::new(),
            false => format!(" (the parser: {msg})"),
        };
        return Some(Explained {
            message: format!(
                "`{key} =` has no value{}{parser}",
                if at_end {
                    ": the file ends after `=`"
                } else {
                    ""
                }
            ),
            help: Some(format!(
                "give `{key}` a value on the same line: a string in quotes, a number, true or \
                 false, an array [...] or an inline table {{...}}"
            )),
        });
    }
    if msg.contains("number too large") || msg.contains("number too small") {
        let literal: String = text[at..line_end]
            .chars()
            .take_while(|c| c.is_ascii_digit() || "+-_".contains(*c))
            .collect();
        return Some(Explained {
            message: format!(
                "the integer {literal} of `{key}` is out of range: TOML integers are 64-bit, \
                 from {} to {}",
                i64::MIN,
                i64::MAX
            ),
            help: allowed(key.trim_matches(|c| c == '"' || c == '\'')),
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_without_values_and_huge_integers_are_explained() {
        let e = explain("name = ", 7, "").unwrap();
        assert_eq!(e.message, "`name =` has no value: the file ends after `=`");
        let e = explain("name = \"p\"\nlen = \n[[body]]\n", 17, "invalid string").unwrap();
        assert_eq!(
            e.message,
            "`len =` has no value (the parser: invalid string)"
        );
        let text = "priority = -99999999999999999999\n";
        let e = explain(text, 11, "number too large to fit in target type").unwrap();
        assert_eq!(
            e.message,
            "the integer -99999999999999999999 of `priority` is out of range: TOML integers \
             are 64-bit, from -9223372036854775808 to 9223372036854775807"
        );
        assert!(e
            .help
            .unwrap()
            .starts_with("`priority` takes an integer from 0 to 4294967295"));
        let e = explain("x = { a = }\n", 10, "invalid inline table").unwrap();
        assert_eq!(
            e.message,
            "`a =` has no value (the parser: invalid inline table)"
        );
        // Other errors keep the parser's message.
        assert_eq!(explain("len = [1 2]\n", 9, "invalid array"), None);
        assert_eq!(explain("[[body\n", 6, "invalid table header"), None);
    }
}
