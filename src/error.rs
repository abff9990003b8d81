//! The crate-level [`Error`]: every stage's error joined, rendered for a person in one
//! place ([`Error::render`]: `file:line:column`, the offending line and a caret where the
//! error has a position).

use crate::exec::ExecError;
use crate::file::{self, ErrorKind, FileError, SourceFile};
use crate::import::ImportError;
use crate::lower::{LowerError, Warning};
use crate::model::{escape_controls_but_lines, Span};
use crate::verify::VerifyError;
use std::fmt;
use std::sync::Arc;

/// What went wrong building or running a [`Plan`](crate::Plan).
///
/// Each variant keeps the stage's own error (matchable by callers) and the name of the
/// input it came from (the graph file's path as given, the WfCommons file's, or the
/// program's name for a program built in memory).
///
/// `Display` gives one line with the position (`path:line:column: message`), for logs;
/// [`Error::render`] the full diagnostic with the offending line and a caret.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A graph file could not be read or parsed (located).
    File(FileError),
    /// A WfCommons workflow could not be imported.
    Import {
        /// The JSON text, for locating a syntax error.
        text: Arc<str>,
        error: Box<ImportError>,
    },
    /// The program cannot be lowered (a mapping rule, a kernel call, a limit).
    Lower {
        name: String,
        /// The graph file, when the program came from one: the error is shown at its
        /// construct.
        source_file: Option<Arc<SourceFile>>,
        error: Box<LowerError>,
    },
    /// The schedule failed verification (a scheduler bug, or a schedule given by hand).
    Verify { name: String, error: VerifyError },
    /// Running failed (the plugin, a host kernel, the schedule does not fit the plugin),
    /// or was refused before anything was allocated because it needs more host memory
    /// than is available ([`ExecError::OutOfMemory`], rendered in one line with both
    /// figures: `name: error: not enough host memory: needed …; … available (…); nothing
    /// was run`), or host memory could not be allocated ([`ExecError::Alloc`]).
    /// `at`: the same message located in the graph file the program came from: a user
    /// kernel that does not load at its `[[kernel]]` table's `library =`, `symbol =` or
    /// `cuda =` key ([`crate::file::kernel_decl_span`]); any other failure of an op (a
    /// `potrf` or `getrf` whose LAPACK `info > 0`, a plugin call, a host kernel) at its
    /// region's construct, as lowering errors are. `Display` and [`Error::render`] show
    /// it where present.
    Exec {
        name: String,
        error: Box<ExecError>,
        at: Option<Box<file::FileError>>,
    },
    /// Application memory bound to a run does not fit the buffer (another program's
    /// handle, a length or type that differs, bound twice, an input the program writes);
    /// nothing was issued.
    Bind {
        name: String,
        buffer: String,
        detail: String,
    },
    /// An argument out of range (a spin scale, a stream count); the message names it.
    Invalid(String),
}

/// A refused tiling ([`crate::model::Tiling::new`], the `try_tiled_*` builders) as
/// [`Error::Invalid`], its message unchanged.
impl From<crate::model::TilingError> for Error {
    fn from(e: crate::model::TilingError) -> Error {
        Error::Invalid(e.to_string())
    }
}

impl From<FileError> for Error {
    fn from(e: FileError) -> Error {
        Error::File(e)
    }
}

/// `path:line:column: message` where the error has a position, else `path: message`.
fn located(e: &FileError) -> String {
    match e.location() {
        Some((path, line, column)) => format!("{path}:{line}:{column}: {}", e.message()),
        None => format!("{}: {}", e.path(), e.message()),
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self.line();
        f.write_str(&escape_controls_but_lines(&text))
    }
}

impl Error {
    /// The one-line text of `Display`, before control characters are escaped.
    fn line(&self) -> String {
        use std::fmt::Write as _;
        let mut f = String::new();
        let _ = match self {
            Error::File(e) => f.write_str(&located(e)),
            Error::Import { error, .. } => write!(f, "{error}"),
            Error::Lower {
                name,
                source_file,
                error,
            } => match source_file {
                Some(src) => f.write_str(&located(&file::lower_error(src, error))),
                None => write!(f, "{name}: {error}"),
            },
            Error::Verify { name, error } => write!(f, "{name}: {error}"),
            Error::Exec { at: Some(at), .. } => f.write_str(&located(at)),
            Error::Exec { name, error, .. } => write!(f, "{name}: {error}"),
            Error::Bind {
                name,
                buffer,
                detail,
            } => write!(f, "{name}: buffer `{buffer}`: {detail}"),
            Error::Invalid(msg) => f.write_str(msg),
        };
        f
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::File(e) => Some(e),
            Error::Import { error, .. } => Some(error.as_ref()),
            Error::Lower { error, .. } => Some(error.as_ref()),
            Error::Verify { error, .. } => Some(error),
            Error::Exec { error, .. } => Some(error.as_ref()),
            Error::Bind { .. } | Error::Invalid(_) => None,
        }
    }
}

impl Error {
    /// The error as the command line prints it: `path:line:column: error: …` with the
    /// offending line and a caret when there is a position, else `path: error: …`;
    /// always ends with a newline.
    pub fn render(&self) -> String {
        // Names quoted in any stage's message are shown with control characters escaped.
        let mut text = escape_controls_but_lines(&self.render_text()).into_owned();
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text
    }

    fn render_text(&self) -> String {
        match self {
            Error::File(e) => e.render(),
            Error::Import { text, error } => render_import(text, error),
            Error::Lower {
                name,
                source_file,
                error,
            } => match source_file {
                Some(src) => file::lower_error(src, error).render(),
                None => match error.help() {
                    Some(h) => format!("{name}: error: {error}\nhelp: {h}"),
                    None => format!("{name}: error: {error}"),
                },
            },
            Error::Verify { name, error } => format!("{name}: error: {error}"),
            Error::Exec {
                at: Some(located), ..
            } => located.render(),
            Error::Exec { name, error, .. } => format!("{name}: error: {error}"),
            Error::Bind {
                name,
                buffer,
                detail,
            } => format!("{name}: error: buffer `{buffer}`: {detail}"),
            Error::Invalid(msg) => format!("error: {msg}"),
        }
    }
}

/// A lowering warning as the command line prints it (the shape of [`Error::render`]):
/// `path:line:column: warning: …` with the line and a caret when the program came from
/// a graph file (`source`) and the warning has a position, else `name: warning: …`;
/// then `help: …` where there is help. Ends with a newline. A kernel shadowing a
/// built-in is located at its declaration's `name =` ([`file::kernel_decl_span`]).
pub fn render_warning(name: &str, source: Option<&SourceFile>, w: &Warning) -> String {
    let text = match source {
        Some(src) => {
            // The lowering keeps no kernel spans: a shadowing declaration is found in the
            // file (its `name =`).
            let span = match w.kind {
                crate::lower::WarningKind::ShadowsBuiltin if w.span.is_none() => {
                    file::kernel_decl_span(src, &w.construct, &[])
                }
                _ => w.span,
            };
            let e = FileError::at(ErrorKind::Lower, &src.path, &src.text, span, &w.message);
            match &w.help {
                Some(h) => e.with_help(h.clone()),
                None => e,
            }
            .render_as("warning")
        }
        None => match &w.help {
            Some(h) => format!("{name}: warning: {}\nhelp: {h}\n", w.message),
            None => format!("{name}: warning: {}\n", w.message),
        },
    };
    escape_controls_but_lines(&text).into_owned()
}

/// Where run error `error` of the program of `graph` is shown in the graph file `src`
/// it came from: a user kernel that does not load at its `[[kernel]]` table's
/// `library =`, `symbol =` or `cuda =` key ([`file::kernel_decl_span`]; `symbol =`
/// first when the message is about the symbol); any other failure of an op (a plugin
/// call such as a `potrf` whose LAPACK `info > 0` or a `getrf` with a zero pivot, an op
/// the graph describes inconsistently, a host task's kernel) at its region's construct,
/// where lowering errors are shown ([`crate::lower::Region::span`]). `None` for an error
/// of no op (a sync step, memory) or of an op whose region has no span (the lowering's
/// `writeback` regions). `O(file)` for a kernel declaration, else `O(line)`.
pub(crate) fn exec_location(
    src: &SourceFile,
    graph: &crate::lower::OpGraph,
    error: &ExecError,
) -> Option<Box<FileError>> {
    use crate::plugin::PluginError;
    let (kind, span) = match error {
        ExecError::Op {
            source: PluginError::KernelLoad {
                kernel, message, ..
            },
            ..
        } => {
            let keys: &[&str] = if message.contains("symbol") {
                &["symbol", "library", "cuda"]
            } else {
                &["library", "cuda", "symbol"]
            };
            (ErrorKind::Io, file::kernel_decl_span(src, kernel, keys)?)
        }
        ExecError::Op { op, .. }
        | ExecError::Invalid { op, .. }
        | ExecError::HostKernel { op, .. } => {
            let region = graph.ops.get(op.index())?.region;
            (ErrorKind::Run, graph.regions.get(region.index())?.span?)
        }
        _ => return None,
    };
    let e = FileError::at(kind, &src.path, &src.text, Some(span), error.to_string());
    Some(Box::new(e))
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
