//! Where a graph file declares a kernel, for messages about it that come after the
//! parse: a user kernel whose library or symbol does not load at run time, a declared
//! kernel that shadows a built-in. The program keeps no kernel spans (a
//! [`crate::model::KernelSig`] is the same from a file or from Rust), so the file is
//! read again, only when such a message is made.

use super::values::span_of;
use super::SourceFile;
use crate::model::Span;
use toml_edit::ImDocument;

/// The span of the first of `keys` present in the `[[kernel]]` table whose `name` is
/// `kernel` (the key's value), else of that `name` value. `None` when the text does not
/// parse or declares no such kernel. `O(file)`.
pub fn kernel_decl_span(src: &SourceFile, kernel: &str, keys: &[&str]) -> Option<Span> {
    let doc = ImDocument::parse(src.text.as_str()).ok()?;
    let tables = doc.get("kernel")?.as_array_of_tables()?;
    let t = tables
        .iter()
        .find(|t| t.get("name").and_then(|n| n.as_str()) == Some(kernel))?;
    keys.iter()
        .find_map(|k| t.get(k).and_then(|i| span_of(i.span())))
        .or_else(|| span_of(t.get("name")?.span()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_declaring_key_of_a_kernel() {
        let text = "name = \"p\"\n[[kernel]]\nname = \"a\"\nparams = []\nlibrary = \"la.so\"\n\
                    [[kernel]]\nname = \"b\"\nparams = []\nsymbol = \"s\"\n";
        let src = SourceFile::new("p.toml", text);
        let at =
            |k: &str, keys: &[&str]| kernel_decl_span(&src, k, keys).map(|s| &text[s.start..s.end]);
        assert_eq!(at("a", &["library"]), Some("\"la.so\""));
        assert_eq!(at("b", &["library", "symbol"]), Some("\"s\""));
        assert_eq!(at("b", &["cuda"]), Some("\"b\""));
        assert_eq!(at("c", &["library"]), None);
    }
}
