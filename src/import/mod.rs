//! Importers: workflows written in other formats become [`Program`](crate::model::Program)s.
//!
//! - `wfcommons`: WfCommons WfFormat JSON (schema 1.4 and 1.5), the format of the
//!   WfInstances collection of recorded scientific-workflow executions.

pub(crate) mod wfcommons;

pub use wfcommons::{
    import_wfcommons, suggest_scales, workflow_stats, WfOptions, WfStats, MAX_BUFFER_BYTES,
};

use thiserror::Error;

/// The most bytes a WfCommons workflow file may hold when read by
/// [`crate::file::read_capped`] (the command line's `import wfcommons`): 256 MiB, several
/// times the largest WfInstances trace, so that endless input (`/dev/zero`) or a huge
/// file is refused instead of read into memory whole.
pub const MAX_WORKFLOW_BYTES: u64 = 256 << 20;

/// An import error. Every variant names the input (`source`, as given by the caller) and
/// where in it the problem is: a JSON path such as
/// `workflow.specification.tasks[3].inputFiles[0]`, or the line and column of a syntax
/// error.
#[derive(Debug, Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum ImportError {
    /// The text is not JSON (truncated, garbage, nesting too deep), as serde_json reports
    /// it; `line` and `column` are 1-based.
    #[error("{source_name}:{line}:{column}: invalid JSON: {message}")]
    Syntax {
        source_name: String,
        line: usize,
        column: usize,
        message: String,
    },
    /// JSON that is not a workflow this importer understands: a missing required field, a
    /// wrong type, an unknown file or task name, a duplicate id, a negative size.
    #[error("{source_name}: {path}: {message}")]
    Invalid {
        source_name: String,
        path: String,
        message: String,
    },
    /// The task graph (`parents`/`children` plus producer → consumer edges through files)
    /// has a cycle; `tasks` lists one cycle, first task repeated at the end.
    #[error("{source_name}: task dependencies form a cycle: {}", tasks.join(" -> "))]
    Cycle {
        source_name: String,
        tasks: Vec<String>,
    },
    /// A file whose size after scaling exceeds [`MAX_BUFFER_BYTES`].
    #[error("{source_name}: {path}: file \"{file}\" is {} bytes after scaling, over the limit of {limit} bytes (lower the size scale)", crate::model::Num(*.bytes))]
    TooLarge {
        source_name: String,
        path: String,
        file: String,
        bytes: f64,
        limit: u64,
    },
    /// An option out of range (a negative or non-finite scale).
    #[error("{source_name}: option {option} = {} is invalid: {message}", crate::model::Num(*.value))]
    BadOption {
        source_name: String,
        option: &'static str,
        value: f64,
        message: &'static str,
    },
}
