//! The crate-level [`Error`]: every stage's error joined, rendered for a person in one
//! place ([`Error::render`]: `file:line:column`, the offending line and a caret where the
//! error has a position).

use crate::exec::ExecError;
use crate::file::{self, ErrorKind, FileError, SourceFile};
use crate::import::ImportError;
use crate::lower::LowerError;
use crate::model::Span;
use crate::verify::VerifyError;
use std::sync::Arc;
use thiserror::Error;

/// What went wrong building or running a [`Plan`](crate::Plan).
///
/// Each variant keeps the stage's own error (matchable by callers) and the name of the
/// input it came from (the graph file's path as given, the WfCommons file's, or the
/// program's name for a program built in memory).
#[derive(Debug, Error)]
pub enum Error {
    /// A graph file could not be read or parsed (located).
    #[error(transparent)]
    File(#[from] FileError),
    /// A WfCommons workflow could not be imported.
    #[error("{error}")]
    Import {
        /// The JSON text, for locating a syntax error.
        text: Arc<str>,
        error: Box<ImportError>,
    },
    /// The program cannot be lowered (a mapping rule, a kernel call, a limit).
    #[error("{name}: {error}")]
    Lower {
        name: String,
        /// The graph file, when the program came from one: the error is shown at its
        /// construct.
        source_file: Option<Arc<SourceFile>>,
        error: Box<LowerError>,
    },
    /// The schedule failed verification (a scheduler bug, or a schedule given by hand).
    #[error("{name}: {error}")]
    Verify { name: String, error: VerifyError },
    /// Running failed (the plugin, a host kernel, the schedule does not fit the plugin).
    #[error("{name}: {error}")]
    Exec { name: String, error: Box<ExecError> },
    /// An argument out of range (a spin scale, a tolerance); the message names it.
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    /// The error as the command line prints it: `path:line:column: error: …` with the
    /// offending line and a caret when there is a position, else `path: error: …`.
    pub fn render(&self) -> String {
        match self {
            Error::File(e) => e.render(),
            Error::Import { text, error } => render_import(text, error),
            Error::Lower {
                name,
                source_file,
                error,
            } => match source_file {
                Some(src) => file::lower_error(src, error).render(),
                None => format!("{name}: error: {error}"),
            },
            Error::Verify { name, error } => format!("{name}: error: {error}"),
            Error::Exec { name, error } => format!("{name}: error: {error}"),
            Error::Invalid(msg) => format!("error: {msg}"),
        }
    }
}

/// An import error; a JSON syntax error gets `file:line:column` and a caret (serde_json's
/// column is 1-based, or 0 at the start of a line).
fn render_import(text: &str, e: &ImportError) -> String {
    match e {
        ImportError::Syntax {
            source_name,
            line,
            column,
            message,
        } => {
            let start: usize = text
                .split_inclusive('\n')
                .take(line.saturating_sub(1))
                .map(str::len)
                .sum();
            let at = (start + column.saturating_sub(1)).min(text.len());
            let span = Some(Span::new(at, at + 1));
            let msg = format!("invalid JSON: {message}");
            FileError::at(ErrorKind::Syntax, source_name, text, span, msg).render()
        }
        other => {
            let name = import_source(other);
            format!(
                "{name}: error: {}",
                other.to_string().trim_start_matches(&format!("{name}: "))
            )
        }
    }
}

fn import_source(e: &ImportError) -> &str {
    match e {
        ImportError::Syntax { source_name, .. }
        | ImportError::Invalid { source_name, .. }
        | ImportError::Cycle { source_name, .. }
        | ImportError::TooLarge { source_name, .. }
        | ImportError::BadOption { source_name, .. } => source_name,
    }
}
