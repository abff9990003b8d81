//! Construct names, checked before lowering: every region of the output is shown by a
//! name made from its construct's (`step0`, `step0@2` in execution 2 of a taskgraph, `d
//! end` for the exit half of `target data "d"`; see [`crate::lower`]), and `after`
//! refers to constructs by name, so two constructs may not be shown alike:
//!
//! - two constructs with one name (graph files refuse it when they are read; a program
//!   built in Rust is refused here, the same rule);
//! - a construct named like the exit half of a `target data` (`"d end"` beside
//!   `target_data = "d"`);
//! - a construct named like a later execution of a construct in a taskgraph body
//!   (`"r@1"` beside `r` in a body with `repeat` ≥ 2), or like its exit half (`"d@1 end"`).
//!
//! Names with no construct of their own (a nameless taskwait is shown `taskwait`, the
//! program's end `end`) are not checked. Unrolled names are never built: a name is
//! checked against the taskgraph bodies by splitting it at its last `@`, so the check is
//! `O(constructs · log constructs)` whatever the repeat counts.

use super::LowerError;
use crate::model::{Construct, Program, Span};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

/// What a shown name belongs to, for messages.
#[derive(Clone, Copy)]
struct Owner<'a> {
    /// The construct's own name.
    name: &'a str,
    kind: &'static str,
    span: Option<Span>,
    /// The exit half of a `target data` (the name is `name end`).
    end: bool,
}

impl Owner<'_> {
    fn describe(&self) -> String {
        let kind = self.kind.replace('_', " ");
        match self.end {
            true => format!("the end of {kind} \"{}\"", self.name),
            false => format!("{kind} \"{}\"", self.name),
        }
    }
}

/// A construct of a taskgraph body, whose executions `k` ≥ 1 are shown as `name@k`.
struct Unrolled<'a> {
    taskgraph: &'a str,
    repeat: u32,
    target_data: bool,
}

/// Refuses construct names that collide (see the module docs), naming both constructs
/// and located at the later one.
///
/// Errors: [`LowerError::NameClash`]. `O(C log C)` for `C` constructs (written, not
/// unrolled).
pub(super) fn check_names(p: &Program) -> Result<(), LowerError> {
    let mut unrolled: BTreeMap<&str, Unrolled> = BTreeMap::new();
    let mut order: Vec<Owner> = Vec::new();
    walk(&p.body, None, &mut order, &mut unrolled);
    // Written names against written names, in the order met (looked up only, never
    // iterated: a hash map keeps nothing printed from depending on its order).
    let mut shown: HashMap<Cow<str>, Owner> = HashMap::with_capacity(order.len());
    for owner in &order {
        let text = shown_name(owner);
        if let Some(first) = shown.get(&text) {
            let detail = match (first.end, owner.end) {
                (false, false) => format!("two constructs are named \"{text}\""),
                _ => format!(
                    "{} and {} are both shown as \"{text}\"",
                    first.describe(),
                    owner.describe()
                ),
            };
            return Err(clash(owner, detail));
        }
        shown.insert(text, *owner);
    }
    if unrolled.is_empty() {
        return Ok(());
    }
    // Written names against the later executions of taskgraph bodies, in program order.
    for owner in &order {
        // A name with ` end` may be the end of an execution of a target data; an
        // execution number has no space, so the shown name itself is then no
        // execution's name.
        let (stem, end) = match owner.end {
            true => (owner.name, true),
            false => match owner.name.strip_suffix(" end") {
                Some(stem) => (stem, true),
                None => (owner.name, false),
            },
        };
        if let Some((base, k)) = execution(stem) {
            let Some(u) = unrolled.get(base) else {
                continue;
            };
            if k < u64::from(u.repeat) && (!end || u.target_data) {
                let what = match end {
                    true => format!("the end of execution {k} of target data \"{base}\""),
                    false => format!("execution {k} of \"{base}\""),
                };
                let detail = format!(
                    "{} is shown as \"{}\", the name of {what} in taskgraph \"{}\" \
                     (repeat = {}; execution k >= 1 of a taskgraph's body is shown as \
                     name@k): rename one",
                    owner.describe(),
                    shown_name(owner),
                    u.taskgraph,
                    u.repeat
                );
                return Err(clash(owner, detail));
            }
        }
    }
    Ok(())
}

/// The name `owner` is shown by: its own, or `name end` for the exit half of a
/// `target data` (only that one is built).
fn shown_name<'a>(owner: &Owner<'a>) -> Cow<'a, str> {
    match owner.end {
        true => Cow::Owned(format!("{} end", owner.name)),
        false => Cow::Borrowed(owner.name),
    }
}

/// Collects the shown names of `body` in program order (a `target data`'s end after its
/// body) and the constructs of taskgraph bodies with `repeat` ≥ 2. Recursive: called
/// after the nesting depth is checked (at most [`crate::model::limits::MAX_DEPTH`]).
fn walk<'a>(
    body: &'a [Construct],
    tg: Option<(&'a str, u32)>,
    order: &mut Vec<Owner<'a>>,
    unrolled: &mut BTreeMap<&'a str, Unrolled<'a>>,
) {
    for c in body {
        let (name, span) = match c {
            Construct::Target(t) => (t.name.as_str(), t.span),
            Construct::TargetData(d) => (d.name.as_str(), d.span),
            Construct::Taskgraph(t) => (t.name.as_str(), t.span),
            Construct::EnterData(d) | Construct::ExitData(d) | Construct::Update(d) => {
                (d.name.as_str(), d.span)
            }
            Construct::Taskwait { name, span } => (name.as_str(), *span),
            Construct::HostTask(h) => (h.name.as_str(), h.span),
        };
        let target_data = matches!(c, Construct::TargetData(_));
        let owner = Owner {
            name,
            kind: c.kind_name(),
            span,
            end: false,
        };
        if !name.is_empty() {
            order.push(owner);
            if let Some((taskgraph, repeat)) = tg.filter(|&(_, r)| r >= 2) {
                unrolled.entry(name).or_insert(Unrolled {
                    taskgraph,
                    repeat,
                    target_data,
                });
            }
        }
        match c {
            Construct::TargetData(d) => walk(&d.body, tg, order, unrolled),
            Construct::Taskgraph(t) => walk(&t.body, Some((&t.name, t.repeat)), order, unrolled),
            _ => {}
        }
        if target_data && !name.is_empty() {
            order.push(Owner { end: true, ..owner });
        }
    }
}

/// `base@k` split into `(base, k)` for a decimal `k` ≥ 1 written as the lowering writes
/// it (no sign, no leading zero).
fn execution(name: &str) -> Option<(&str, u64)> {
    let (base, k) = name.rsplit_once('@')?;
    let digits = !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()) && !k.starts_with('0');
    match digits {
        true => k.parse().ok().map(|k| (base, k)),
        false => None,
    }
}

fn clash(owner: &Owner, detail: String) -> LowerError {
    LowerError::NameClash {
        name: owner.name.to_string(),
        detail,
        span: owner.span,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn executions_are_split_at_the_last_at() {
        assert_eq!(execution("r@1"), Some(("r", 1)));
        assert_eq!(execution("a@b@12"), Some(("a@b", 12)));
        assert_eq!(execution("r@01"), None);
        assert_eq!(execution("r@0"), None);
        assert_eq!(execution("r@"), None);
        assert_eq!(execution("r"), None);
        assert_eq!(execution("r@1 end"), None);
    }
}
