//! Lowering: a [`Program`] becomes an [`OpGraph`] under OpenMP map semantics, with a
//! [`MappingTable`] per device holding reference counts ([design notes](crate::design) "Semantics the
//! lowering must implement").
//!
//! Region names: a region is named after its construct (`step0`); the exit half of a
//! `target data "d"` is `d end`; a nameless taskwait is `taskwait`. A `taskgraph` of
//! `repeat = N` (OpenMP 6.0 §14.3, [`crate::model::Taskgraph`]) is unrolled into N
//! executions of its body, each lowered as the body written out: execution 0 keeps the
//! plain names and execution `k` ≥ 1 appends `@k` (`step0@1`, `step0@2`, `d@1 end`,
//! `taskwait@3`), so every region of the schedule, DOT and run output says which
//! execution it is. `@` is not part of a construct's name: an `after = "step0"` means
//! what it would in the body written out (the latest `step0` lowered so far), and an
//! `after` naming the taskgraph follows all its executions' last ops. Errors in
//! execution `k` ≥ 1 name the region `step0@k`. Where each execution's ops are is in
//! [`OpGraph::taskgraphs`].

pub(crate) mod cost;
mod deps;
mod elide;
pub(crate) use deps::{DepTracker, Space};
pub use elide::{ElidedBytes, ElidedCopy, Eviction};
mod options;
pub use options::{DefaultCap, LowerOptions, Prefetch, DEFAULT_KEEP_LIMIT};
mod cap;
mod evict;
mod prefetch;
pub use evict::EvictionPolicy;
mod error;
mod mapping;
mod moved;
mod names;
mod opgraph;
mod scale;
mod warning;

pub use error::LowerError;
pub use mapping::{Lookup, MapEntry, MappingTable};
pub use moved::BytesMoved;
pub use opgraph::*;
pub use placement::{choose as choose_device, DeviceScore};
pub use scale::scale_spins;
pub use taskgraph::MAX_UNROLLED_CONSTRUCTS;
pub use warning::{Warning, WarningKind};

use crate::model::Program;

/// Lowers a program to an OpGraph. What is legal but probably not meant (an input
/// mapped `tofrom` implicitly, a map no argument uses) is in [`OpGraph::warnings`].
///
/// Errors: the first [`LowerError`] in program order; nothing is returned then, so
/// nothing can run.
///
/// Complexity: `O((V + E) log V)` for `V` ops and `E` edges; see `deps` for the
/// dependency tracker's bound.
pub fn lower(program: &Program) -> Result<OpGraph, LowerError> {
    lower_with(program, &LowerOptions::default())
}

/// [`lower`] with options: `opts.elide` on leaves out the copies no op can observe
/// (kept device copies, deferred D2H; see [`LowerOptions`] and the module docs of
/// `lower/elide.rs`); off gives exactly the copies the mapping rules name. [`lower`]
/// uses [`LowerOptions::default`].
///
/// With `opts.prefetches(cap, binds)` ([`LowerOptions::prefetch`]; by default only
/// where the cap binds: the lowering evicted, or an alloc waits for a free) the H2D copies to issue
/// ahead of need on a copy stream are listed in [`OpGraph::prefetches`] (`lower/prefetch.rs`).
///
/// Errors: as [`lower`], plus [`LowerError::DeviceMemory`] under a device memory cap
/// (`opts.device_memory`) that a construct's storage cannot fit.
pub fn lower_with(program: &Program, opts: &LowerOptions) -> Result<OpGraph, LowerError> {
    check_program(program)?;
    let mut g = builder::Lowerer::new(program, opts).run()?;
    if opts.prefetches(g.device_memory, prefetch::cap_binds(&g)) {
        prefetch::select(&mut g);
    }
    Ok(g)
}

/// Whole-program limits, checked before anything is lowered, so that a program built in
/// Rust meets what the graph-file loader enforces: at most
/// [`crate::model::limits::MAX_DEVICES`] devices, `target_data` and `taskgraph` nested at most
/// [`crate::model::limits::MAX_DEPTH`] deep together (the lowering recurses per level), every
/// taskgraph with `repeat` ≥ 1 and none inside another, at most
/// [`MAX_UNROLLED_CONSTRUCTS`] constructs once taskgraphs are unrolled, buffer names
/// unique (results are read by name), and buffer sizes computed without overflow within
/// [`crate::model::limits::MAX_BUFFER_BYTES`] each and [`crate::model::limits::MAX_TOTAL_BYTES`] in all,
/// and construct names that no two regions would be shown by (`names`: unique, none
/// like a `target data`'s end or a taskgraph execution's `name@k`). Iterative: a program
/// nested 10 000 deep is an error, not a stack overflow.
/// `O(constructs · log constructs + buffers · log buffers)`.
fn check_program(p: &Program) -> Result<(), LowerError> {
    use crate::model::Construct;
    let bad = |detail: String| LowerError::Program {
        program: p.name.clone(),
        detail,
    };
    if let Some(first) = p.builder_errors.first() {
        let more = match p.builder_errors.len() {
            1 => String::new(),
            n => format!(" ({} more)", n - 1),
        };
        return Err(bad(format!("builder misuse: {first}{more}")));
    }
    let max_devices = crate::model::limits::MAX_DEVICES as u64;
    if u64::from(p.devices) > max_devices {
        return Err(bad(format!("{} devices, at most {max_devices}", p.devices)));
    }
    let mut names = std::collections::BTreeSet::new();
    let mut total: u64 = 0;
    for b in &p.buffers {
        if !names.insert(b.name.as_str()) {
            return Err(bad(format!("two buffers are named `{}`", b.name)));
        }
        // Sizes in checked arithmetic: `len × element size` must not wrap.
        let bytes = b
            .len
            .checked_mul(b.ty.size_bytes())
            .filter(|&x| x <= crate::model::limits::MAX_BUFFER_BYTES)
            .ok_or_else(|| {
                bad(format!(
                    "buffer `{}` of {} {} elements is over the {} GiB limit of one buffer",
                    b.name,
                    b.len,
                    b.ty,
                    crate::model::limits::MAX_BUFFER_BYTES >> 30
                ))
            })?;
        total = total
            .checked_add(bytes)
            .filter(|&x| x <= crate::model::limits::MAX_TOTAL_BYTES)
            .ok_or_else(|| {
                bad(format!(
                    "the buffers hold more than the {} GiB limit in all",
                    crate::model::limits::MAX_TOTAL_BYTES >> 30
                ))
            })?;
    }
    // (body, target_data and taskgraph nesting depth, enclosing taskgraph)
    let mut stack: Vec<(&[Construct], usize, Option<&str>)> = vec![(&p.body, 0, None)];
    while let Some((body, depth, tg)) = stack.pop() {
        for c in body {
            let (name, inner, kind) = match c {
                Construct::TargetData(d) => (&d.name, &d.body, "target data"),
                Construct::Taskgraph(t) => (&t.name, &t.body, "taskgraph"),
                _ => continue,
            };
            if depth + 1 > crate::model::limits::MAX_DEPTH {
                return Err(bad(format!(
                    "{kind} \"{name}\" is nested {} deep, at most {}",
                    depth + 1,
                    crate::model::limits::MAX_DEPTH
                )));
            }
            let mut inner_tg = tg;
            if let Construct::Taskgraph(t) = c {
                let refuse = |detail: String| LowerError::Taskgraph {
                    name: t.name.clone(),
                    detail,
                    span: t.span,
                };
                if t.repeat == 0 {
                    return Err(refuse(
                        "repeat = 0: a taskgraph executes at least once".to_string(),
                    ));
                }
                if let Some(outer) = tg {
                    return Err(refuse(format!(
                        "nested taskgraph is not supported (it is inside taskgraph \"{outer}\")"
                    )));
                }
                inner_tg = Some(t.name.as_str());
            }
            stack.push((inner, depth + 1, inner_tg));
        }
    }
    taskgraph::check_unrolled(p)?;
    size::check_graph_memory(p, &crate::estimate::MemoryLimit::Machine)?;
    names::check_names(p)
}

mod builder;
mod emit;
mod kernel;
mod latest;
mod placement;
pub(crate) mod rules;
pub mod size;
mod taskgraph;
mod written;
