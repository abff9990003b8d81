//! "Did you mean" for names a user mistyped: keys, kernels, buffers, construct kinds and
//! names, map types, command-line values.
//!
//! A candidate is close when the Jaro similarity of the lower-cased names is over 0.7 (the
//! measure and the threshold clap uses for its own suggestions); the closest is the one
//! with the highest Jaro-Winkler similarity (a longer common prefix wins). So one typo, a transposition, a missing
//! or doubled letter or a different case is found, and short unrelated names are not:
//! `nowiat` → `nowait`, `saxpyy` → `saxpy`, `F32` → `f32`, but nothing for `z` among
//! `x, y`.
//!
//! Complexity: `O(n · l²)` for `n` candidates of length `l`; only called on an error path.

/// Similarity above which a candidate is suggested (clap's threshold).
const THRESHOLD: f64 = 0.7;

/// Lists of at most this many candidates are shown in full by [`candidates`].
pub const MAX_LISTED: usize = 12;

/// How many of the closest candidates a long list shows.
pub const CLOSEST_SHOWN: usize = 5;

fn similarity(word: &str, candidate: &str) -> f64 {
    strsim::jaro(&word.to_lowercase(), &candidate.to_lowercase())
}

/// For ranking close candidates: Jaro-Winkler, which prefers a longer common prefix
/// (`buf3x`: `buf30` before `buf13`).
fn rank(word: &str, candidate: &str) -> f64 {
    strsim::jaro_winkler(&word.to_lowercase(), &candidate.to_lowercase())
}

/// The candidate closest to `word`, if one is close enough (ties: the first given).
/// Never `word` itself.
pub fn did_you_mean<'a, I>(word: &str, candidates: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let mut best: Option<(&str, f64)> = None;
    for c in candidates {
        if c == word {
            continue;
        }
        if similarity(word, c) <= THRESHOLD {
            continue;
        }
        let r = rank(word, c);
        if best.is_none_or(|(_, b)| r > b) {
            best = Some((c, r));
        }
    }
    best.map(|(c, _)| c)
}

/// `did you mean `x`?`, or `None` when no candidate is close.
pub fn did_you_mean_text<'a, I>(word: &str, candidates: I) -> Option<String>
where
    I: IntoIterator<Item = &'a str>,
{
    did_you_mean(word, candidates).map(|c| format!("did you mean `{c}`?"))
}

/// The candidates as a comma-separated list: all of them, in the order given, when
/// there are at most [`MAX_LISTED`]; else the [`CLOSEST_SHOWN`] closest to `word` and
/// how many more there are (`a, b, c, d, e and 59 more`). `none` when there are none.
pub fn candidates<'a, I>(word: &str, candidates: I) -> String
where
    I: IntoIterator<Item = &'a str>,
{
    let all: Vec<&str> = candidates.into_iter().collect();
    if all.is_empty() {
        return "none".to_string();
    }
    if all.len() <= MAX_LISTED {
        return all.join(", ");
    }
    let mut ranked: Vec<(usize, f64)> = all
        .iter()
        .enumerate()
        .map(|(i, c)| (i, rank(word, c)))
        .collect();
    // Closest first; equal ones in the order given (stable sort).
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
    let shown: Vec<&str> = ranked
        .iter()
        .take(CLOSEST_SHOWN)
        .map(|&(i, _)| all[i])
        .collect();
    format!("{} and {} more", shown.join(", "), all.len() - shown.len())
}

/// The help line of an unknown name: ``did you mean `y`? (declared buffers: x, y)``, or
/// the list alone (`declared buffers: x, y`) when no candidate is close; `what` names
/// the list.
pub fn help_for<'a, I>(word: &str, what: &str, list: I) -> String
where
    I: IntoIterator<Item = &'a str> + Clone,
{
    let listed = format!("{what}: {}", candidates(word, list.clone()));
    match did_you_mean_text(word, list) {
        Some(q) => format!("{q} ({listed})"),
        None => listed,
    }
}

/// The model's element types, as graph files and `ElemType` name them.
const ELEM_TYPES: [&str; 5] = ["f32", "f64", "i32", "i64", "u8"];

/// Element type names of C, C++ and NumPy (lower-cased) → the model's name and what the
/// other name is. Jaro similarity cannot find these (`float` and `f32` share one
/// letter), so they are listed.
const ELEM_ALIASES: [(&str, &str, &str); 17] = [
    ("float", "f32", "C's `float`; `double` is `f64`"),
    ("double", "f64", "C's `double`; `float` is `f32`"),
    ("float32", "f32", "NumPy's `float32`"),
    ("float64", "f64", "NumPy's `float64`"),
    ("single", "f32", "single precision; double is `f64`"),
    (
        "half",
        "f32",
        "there is no 16-bit float; the smallest is `f32`",
    ),
    (
        "float16",
        "f32",
        "there is no 16-bit float; the smallest is `f32`",
    ),
    ("int", "i32", "C's `int`; `long` is `i64`"),
    ("int32", "i32", "NumPy's `int32`"),
    ("int32_t", "i32", "C's `int32_t`"),
    ("long", "i64", "C's `long` on 64-bit Linux; `int` is `i32`"),
    ("int64", "i64", "NumPy's `int64`"),
    ("int64_t", "i64", "C's `int64_t`"),
    (
        "size_t",
        "i64",
        "there is no unsigned 64-bit type; `i64` holds sizes up to 2^63 - 1",
    ),
    ("uint8", "u8", "NumPy's `uint8`"),
    ("uint8_t", "u8", "C's `uint8_t`"),
    ("char", "u8", "C's `unsigned char`, one byte"),
];

/// The help line for an unknown element type `word` (`type =` of a buffer, a kernel
/// parameter's type): `` did you mean `f32`? (C's `float`; `double` is `f64`) `` for a
/// name of C, C++ or NumPy (any case), ``did you mean `f64`?`` for a typo (`f46`), else
/// `None`.
pub fn elem_type_help(word: &str) -> Option<String> {
    let lower = word.to_lowercase();
    let alias = ELEM_ALIASES.iter().find(|(a, ..)| *a == lower);
    match alias {
        Some((_, ours, note)) => Some(format!("did you mean `{ours}`? ({note})")),
        None => did_you_mean_text(word, ELEM_TYPES),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_names_are_found_and_far_ones_are_not() {
        let keys = ["target", "kernel", "args", "map", "nowait", "depend"];
        assert_eq!(did_you_mean("nowiat", keys), Some("nowait"));
        assert_eq!(did_you_mean("dependd", keys), Some("depend"));
        assert_eq!(did_you_mean("Kernel", keys), Some("kernel"));
        assert_eq!(did_you_mean("size", keys), None);
        assert_eq!(did_you_mean("z", ["x", "y"]), None);
        assert_eq!(did_you_mean("F32", ["f32", "f64"]), Some("f32"));
        assert_eq!(did_you_mean("f16", ["f32", "f64", "i32"]), None);
        assert_eq!(
            did_you_mean("inoutset", ["in", "out", "inout"]),
            Some("inout")
        );
        // The word itself is never suggested; ties go to the first candidate.
        assert_eq!(did_you_mean("x", ["x"]), None);
        assert_eq!(did_you_mean("ab", ["a", "b"]), Some("a"));
    }

    #[test]
    fn element_types_of_other_languages_suggest_ours() {
        let help = |w| elem_type_help(w).unwrap_or_default();
        assert_eq!(
            help("float"),
            "did you mean `f32`? (C's `float`; `double` is `f64`)"
        );
        assert_eq!(
            help("Double"),
            "did you mean `f64`? (C's `double`; `float` is `f32`)"
        );
        assert_eq!(help("int64_t"), "did you mean `i64`? (C's `int64_t`)");
        assert_eq!(help("uint8"), "did you mean `u8`? (NumPy's `uint8`)");
        // A typo of one of ours, as other names.
        assert_eq!(help("F32"), "did you mean `f32`?");
        assert_eq!(elem_type_help("complex"), None);
    }

    #[test]
    fn long_lists_show_the_closest_few_and_a_count() {
        assert_eq!(candidates("q", ["x", "y"]), "x, y");
        assert_eq!(candidates("q", []), "none");
        let many: Vec<String> = (0..40).map(|i| format!("buf{i}")).collect();
        assert_eq!(
            candidates("buf3x", many.iter().map(String::as_str)),
            "buf3, buf30, buf31, buf32, buf33 and 35 more"
        );
        assert_eq!(
            help_for("yy", "declared buffers", ["x", "y"]),
            "did you mean `y`? (declared buffers: x, y)"
        );
        assert_eq!(
            help_for("q", "declared buffers", ["x", "y"]),
            "declared buffers: x, y"
        );
    }
}
