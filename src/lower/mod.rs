//! Lowering: a [`Program`] becomes an [`OpGraph`] under OpenMP map semantics, with a
//! [`MappingTable`] per device holding reference counts (DESIGN.md, "Semantics the
//! lowering must implement").

mod deps;
mod error;
mod mapping;
mod opgraph;

pub use error::LowerError;
pub use mapping::{MapEntry, MappingTable};
pub use opgraph::*;

use crate::model::Program;

/// Lowers a program to an OpGraph.
///
/// Errors: the first [`LowerError`] in program order; nothing is returned then, so
/// nothing can run.
///
/// Complexity: `O((V + E) log V)` for `V` ops and `E` edges; see `deps` for the
/// dependency tracker's bound.
pub fn lower(program: &Program) -> Result<OpGraph, LowerError> {
    builder::Lowerer::new(program).run()
}

mod builder;
