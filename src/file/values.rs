//! Reading `toml_edit` tables and values with spans: the typed getters the parser uses,
//! each failing with a located error that names the key and what it belongs to.

use std::ops::Range;

use toml_edit::{Item, TableLike, Value};

use super::error::ErrorKind;
use super::parse::{Parser, R};
use super::section::StrLoc;
use crate::model::Span;
use crate::suggest;

/// One `key = value` of a table, with spans.
pub(super) struct Field<'a> {
    pub(super) key: &'a str,
    pub(super) key_span: Span,
    pub(super) item: &'a Item,
    /// Span of the value (the key's span when the value has none).
    pub(super) span: Span,
}

/// A table (`[[x]]` or inline) as a list of fields in file order.
pub(super) struct Tbl<'a> {
    pub(super) fields: Vec<Field<'a>>,
    /// Span of the table header (`[[body]]`), or of the inline table.
    pub(super) header: Span,
}

impl<'a> Tbl<'a> {
    pub(super) fn get(&self, key: &str) -> Option<&Field<'a>> {
        self.fields.iter().find(|f| f.key == key)
    }
}

pub(super) fn span_of(r: Option<Range<usize>>) -> Option<Span> {
    r.map(|r| Span::new(r.start, r.end))
}

pub(super) fn type_name(item: &Item) -> &'static str {
    match item {
        Item::None => "nothing",
        Item::Table(_) => "a table",
        Item::ArrayOfTables(_) => "an array of tables",
        Item::Value(v) => match v {
            Value::String(_) => "a string",
            Value::Integer(_) => "an integer",
            Value::Float(_) => "a float",
            Value::Boolean(_) => "a boolean",
            Value::Datetime(_) => "a date-time",
            Value::Array(_) => "an array",
            Value::InlineTable(_) => "an inline table",
        },
    }
}

pub(super) fn value_type_name(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "a string",
        Value::Integer(_) => "an integer",
        Value::Float(_) => "a float",
        Value::Boolean(_) => "a boolean",
        Value::Datetime(_) => "a date-time",
        Value::Array(_) => "an array",
        Value::InlineTable(_) => "an inline table",
    }
}

impl Parser<'_> {
    // ---- tables -------------------------------------------------------------------

    pub(super) fn tbl<'t>(&self, t: &'t dyn TableLike, header: Span) -> Tbl<'t> {
        let fields = t
            .iter()
            .map(|(k, item)| {
                let key_span = t.key(k).and_then(|k| span_of(k.span())).unwrap_or(header);
                let span = span_of(item.span()).unwrap_or(key_span);
                Field {
                    key: k,
                    key_span,
                    item,
                    span,
                }
            })
            .collect();
        Tbl { fields, header }
    }

    /// The header line of a `[table]`: from its start to the end of that line.
    pub(super) fn header_span(&self, r: Option<Range<usize>>, fallback: Span) -> Span {
        match r {
            Some(r) => {
                let text = &self.src.text;
                let start = r.start.min(text.len());
                let end = text[start..]
                    .find('\n')
                    .map(|i| start + i)
                    .unwrap_or(text.len())
                    .min(r.end.max(start));
                Span::new(start, end)
            }
            None => fallback,
        }
    }

    /// An array of tables (`[[x]]`) or an array of inline tables.
    pub(super) fn tables<'t>(&self, f: &Field<'t>, what: &str) -> R<Vec<Tbl<'t>>> {
        match f.item {
            Item::ArrayOfTables(aot) => Ok(aot
                .iter()
                .map(|t| {
                    let h = self.header_span(t.span(), f.key_span);
                    self.tbl(t, h)
                })
                .collect()),
            Item::Value(Value::Array(arr)) => arr
                .iter()
                .map(|v| match v {
                    Value::InlineTable(t) => {
                        let h = span_of(t.span()).unwrap_or(f.span);
                        Ok(self.tbl(t, h))
                    }
                    other => Err(self.err(
                        ErrorKind::BadValue,
                        span_of(other.span()).unwrap_or(f.span),
                        format!(
                            "{what} entries must be tables, found {}",
                            value_type_name(other)
                        ),
                    )),
                })
                .collect(),
            other => Err(self.err(
                ErrorKind::BadValue,
                f.span,
                format!(
                    "`{}` must be an array of tables ([[{}]]), found {}",
                    f.key,
                    f.key,
                    type_name(other)
                ),
            )),
        }
    }

    /// Rejects keys outside `allowed`, pointing at the key.
    pub(super) fn check_keys(&self, t: &Tbl, allowed: &[&str], what: &str) -> R<()> {
        for f in &t.fields {
            if !allowed.contains(&f.key) {
                let e = self.err(
                    ErrorKind::UnknownKey,
                    f.key_span,
                    format!(
                        "unknown key `{}` in {what} (allowed: {})",
                        f.key,
                        allowed.join(", ")
                    ),
                );
                return Err(
                    match suggest::did_you_mean_text(f.key, allowed.iter().copied()) {
                        Some(h) => e.with_help(h),
                        None => e,
                    },
                );
            }
        }
        Ok(())
    }

    pub(super) fn required<'t, 'f>(
        &self,
        t: &'f Tbl<'t>,
        key: &str,
        what: &str,
    ) -> R<&'f Field<'t>> {
        t.get(key).ok_or_else(|| {
            self.err(
                ErrorKind::Missing,
                t.header,
                format!("{what} is missing `{key}`"),
            )
        })
    }

    // ---- values -------------------------------------------------------------------

    /// A string value and where its characters are in the file.
    pub(super) fn str_loc<'v>(&self, v: &'v Value, fallback: Span) -> Option<StrLoc<'v>> {
        let Value::String(s) = v else { return None };
        let text = s.value().as_str();
        let whole = span_of(s.span()).unwrap_or(fallback);
        let raw = self.src.text.get(whole.start..whole.end).unwrap_or("");
        let base = if raw.len() >= 6 && (raw.starts_with("\"\"\"") || raw.starts_with("'''")) {
            (raw.get(3..raw.len() - 3) == Some(text)).then_some(whole.start + 3)
        } else if raw.len() >= 2 {
            (raw.get(1..raw.len() - 1) == Some(text)).then_some(whole.start + 1)
        } else {
            None
        };
        Some(StrLoc { text, base, whole })
    }

    pub(super) fn string<'t>(&self, f: &Field<'t>, what: &str) -> R<StrLoc<'t>> {
        f.item
            .as_value()
            .and_then(|v| self.str_loc(v, f.span))
            .ok_or_else(|| {
                self.err(
                    ErrorKind::BadValue,
                    f.span,
                    format!(
                        "`{}` of {what} must be a string, found {}",
                        f.key,
                        type_name(f.item)
                    ),
                )
            })
    }

    pub(super) fn int(&self, f: &Field, what: &str) -> R<i64> {
        match f.item.as_value() {
            Some(Value::Integer(i)) => Ok(*i.value()),
            _ => Err(self.err(
                ErrorKind::BadValue,
                f.span,
                format!(
                    "`{}` of {what} must be an integer, found {}",
                    f.key,
                    type_name(f.item)
                ),
            )),
        }
    }

    pub(super) fn boolean(&self, f: &Field, what: &str) -> R<bool> {
        match f.item.as_value() {
            Some(Value::Boolean(b)) => Ok(*b.value()),
            _ => Err(self.err(
                ErrorKind::BadValue,
                f.span,
                format!(
                    "`{}` of {what} must be true or false, found {}",
                    f.key,
                    type_name(f.item)
                ),
            )),
        }
    }

    /// The elements of an array value, with spans.
    pub(super) fn array<'t>(&self, f: &Field<'t>, what: &str) -> R<Vec<(&'t Value, Span)>> {
        match f.item.as_value() {
            Some(Value::Array(a)) => Ok(a
                .iter()
                .map(|v| (v, span_of(v.span()).unwrap_or(f.span)))
                .collect()),
            _ => Err(self.err(
                ErrorKind::BadValue,
                f.span,
                format!(
                    "`{}` of {what} must be an array, found {}",
                    f.key,
                    type_name(f.item)
                ),
            )),
        }
    }

    /// An array of strings.
    pub(super) fn strings<'t>(&self, f: &Field<'t>, what: &str) -> R<Vec<StrLoc<'t>>> {
        self.array(f, what)?
            .into_iter()
            .map(|(v, span)| {
                self.str_loc(v, span).ok_or_else(|| {
                    self.err(
                        ErrorKind::BadValue,
                        span,
                        format!(
                            "`{}` of {what} must hold strings, found {}",
                            f.key,
                            value_type_name(v)
                        ),
                    )
                })
            })
            .collect()
    }
}
