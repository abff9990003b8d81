//! Lowering: a [`Program`] becomes an [`OpGraph`] under OpenMP map semantics, with a
//! [`MappingTable`] per device holding reference counts (DESIGN.md, "Semantics the
//! lowering must implement").

mod deps;
mod error;
mod mapping;
mod opgraph;
mod scale;
mod warning;

pub use error::LowerError;
pub use mapping::{MapEntry, MappingTable};
pub use opgraph::*;
pub use scale::scale_spins;
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
    check_program(program)?;
    builder::Lowerer::new(program).run()
}

/// Whole-program limits, checked before anything is lowered, so that a program built in
/// Rust meets what the graph-file loader enforces: at most
/// [`crate::file::MAX_DEVICES`] devices, `target_data` nested at most
/// [`crate::file::MAX_DEPTH`] deep (the lowering recurses per level), buffer names
/// unique (results are read by name), and buffer sizes computed without overflow within
/// [`crate::file::MAX_BUFFER_BYTES`] each and [`crate::file::MAX_TOTAL_BYTES`] in all. Iterative: a program nested 10 000 deep is an
/// error, not a stack overflow. `O(constructs + buffers · log buffers)`.
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
    let max_devices = crate::file::MAX_DEVICES as u64;
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
            .filter(|&x| x <= crate::file::MAX_BUFFER_BYTES)
            .ok_or_else(|| {
                bad(format!(
                    "buffer `{}` of {} {} elements is over the {} GiB limit of one buffer",
                    b.name,
                    b.len,
                    b.ty,
                    crate::file::MAX_BUFFER_BYTES >> 30
                ))
            })?;
        total = total
            .checked_add(bytes)
            .filter(|&x| x <= crate::file::MAX_TOTAL_BYTES)
            .ok_or_else(|| {
                bad(format!(
                    "the buffers hold more than the {} GiB limit in all",
                    crate::file::MAX_TOTAL_BYTES >> 30
                ))
            })?;
    }
    let mut stack: Vec<(&[Construct], usize)> = vec![(&p.body, 0)];
    while let Some((body, depth)) = stack.pop() {
        for c in body {
            if let Construct::TargetData(d) = c {
                if depth + 1 > crate::file::MAX_DEPTH {
                    return Err(bad(format!(
                        "target data \"{}\" is nested {} deep, at most {}",
                        d.name,
                        depth + 1,
                        crate::file::MAX_DEPTH
                    )));
                }
                stack.push((&d.body, depth + 1));
            }
        }
    }
    Ok(())
}

mod builder;
mod kernel;
mod rules;
mod written;
