//! Graph files: one [`Program`] per TOML file, loaded with byte spans so every error
//! points at `file:line:column` with a caret, and written back by [`to_toml`].
//!
//! ```toml
//! name = "saxpy"
//! devices = 1                      # optional, default 1
//!
//! [[buffer]]
//! name = "x"
//! type = "f32"                     # f32 f64 i32 i64 u8
//! len = 1024                       # elements
//! init = "iota"                    # "zeros" | "iota" | { fill = 2.0 } | { random = 7 }
//!
//! [[kernel]]                       # user kernels only (built-ins need no declaration)
//! name = "my_k"
//! params = ["x: in f32*", "inout f32*", "f32"]   # ParamKind syntax, optionally named
//! library = "libmy.so"             # optional, relative to the graph file
//! cuda = "my.cu"                   # optional .cu or .ptx
//! symbol = "my_k"                  # optional, defaults to name
//!
//! [[body]]                         # constructs in program order, one kind key each
//! target = "saxpy"
//! kernel = "saxpy"
//! args = [2.0, "x", "y[0:512]"]    # numbers, or buffer sections as strings
//! map = ["to: x", "tofrom: y", "always, present, from: z[0:10]"]
//! nowait = true
//! depend = ["in: x", "inout: y[0:4]"]
//! device = 0
//! launch = [16, 256]               # [teams, threads]
//! priority = 1                     # OpenMP priority(n): integer >= 0, default 0, a hint
//! after = ["other"]                # constructs this one follows (may be later ones)
//!
//! [[body]]
//! target_data = "d"                # nested body: [[body.body]], [[body.body.body]] ...
//! map = ["tofrom: a"]
//! [[body.body]]
//! enter_data = "e"                 # also exit_data, update (update items: to/from)
//! map = ["to: a"]
//!
//! [[body]]
//! taskgraph = "tg"                 # OpenMP 6.0 taskgraph (§14.3): body run `repeat` times
//! repeat = 500                     # integer >= 1, default 1; no taskgraph inside another
//! [[body.body]]
//! target = "step"                  # regions of execution k >= 1 are named `step@k`
//! kernel = "scale"
//! args = [0.5, "a"]
//!
//! [[body]]
//! host = "check"                   # reads, writes, optional kernel + args, depend, after
//! reads = ["y"]
//!
//! [[body]]
//! taskwait = "tw"                  # its region's name in output ("" shows as taskwait)
//! ```
//!
//! Sections are `name` (whole buffer) or `name[lo:len]` in elements (also `name[lo:]`,
//! `name[:len]`); a clause string may list several: `"to: x, y[0:4]"`. A map item
//! without a type (`"x"`) is `tofrom` (OpenMP's default). The loader checks names,
//! bounds, kernel signatures, devices and sizes (64 GiB per buffer, 256 GiB in all,
//! nothing allocated), and reorders bodies by `after` (see `order`). A graph file holds at
//! most [`MAX_FILE_BYTES`] (64 MiB); a TOML byte order mark at its start is allowed.

mod body;
mod decl;
mod error;
mod order;
mod output;
mod parse;
mod section;
mod syntax;
mod unclosed;
mod values;
mod write;

use std::path::{Path, PathBuf};

pub use decl::kernel_decl_span;
pub use error::{ErrorKind, FileError};
pub use output::{check_writable, write_atomic, MAX_LINKS};
pub use parse::{MAX_BUFFER_BYTES, MAX_DEPTH, MAX_DEVICES, MAX_TOTAL_BYTES};
pub use write::{strip_spans, to_toml};

use crate::lower::LowerError;
use crate::model::{Program, Span};

/// A graph file's path (as given, for messages) and its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceFile {
    pub path: String,
    pub text: String,
}

impl SourceFile {
    /// A source from memory (tests, generated programs).
    pub fn new(path: impl Into<String>, text: impl Into<String>) -> SourceFile {
        SourceFile {
            path: path.into(),
            text: text.into(),
        }
    }

    /// Reads a graph file of at most [`MAX_FILE_BYTES`] ([`read_capped`]: a larger file,
    /// or endless input such as `/dev/zero`, is refused without being read whole).
    ///
    /// Errors: the file cannot be read (the message names it and the OS error), is over
    /// the size limit ([`ErrorKind::TooLarge`]), or is not UTF-8 (located at the first
    /// bad byte).
    pub fn read(path: &Path) -> Result<SourceFile, FileError> {
        let name = path.display().to_string();
        let bytes = read_capped(path, MAX_FILE_BYTES).map_err(|e| match e {
            Capped::Io(e) => FileError::without_source(
                ErrorKind::Io,
                &name,
                format!("cannot read graph file `{name}`: {e}"),
            ),
            Capped::Over(cap) => FileError::without_source(
                ErrorKind::TooLarge,
                &name,
                format!(
                    "graph file `{name}` is larger than {}, the most a graph file may hold",
                    crate::model::human_bytes(cap)
                ),
            ),
        })?;
        match String::from_utf8(bytes) {
            Ok(text) => Ok(SourceFile { path: name, text }),
            Err(e) => {
                let at = e.utf8_error().valid_up_to();
                let lossy = String::from_utf8_lossy(e.as_bytes()).into_owned();
                Err(FileError::at(
                    ErrorKind::Io,
                    &name,
                    &lossy,
                    Some(Span::new(at, at + 1)),
                    format!("graph file `{name}` is not valid UTF-8 (byte {at})"),
                ))
            }
        }
    }
}

/// The most bytes a graph file may hold (64 MiB, [`SourceFile::read`]): far above any
/// program the lowering can take in reasonable time (a taskgraph repeats a body instead
/// of writing it out), low enough that reading it never exhausts memory.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// Why [`read_capped`] failed.
#[derive(Debug)]
pub enum Capped {
    /// The OS error of opening or reading.
    Io(std::io::Error),
    /// The input holds more than this many bytes (the cap): refused, not read further.
    Over(u64),
}

impl std::fmt::Display for Capped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Capped::Io(e) => e.fmt(f),
            Capped::Over(cap) => write!(
                f,
                "larger than {}, the most this input may hold",
                crate::model::human_bytes(*cap)
            ),
        }
    }
}

/// Reads at most `cap` bytes of `path`: a regular file whose size is over `cap` is
/// refused before any byte is read; anything else (a FIFO, a device such as
/// `/dev/zero`, a file growing meanwhile) is read up to `cap + 1` bytes and refused if
/// it has more. Memory: at most `cap + 1` bytes.
///
/// Errors: [`Capped::Io`] (cannot open or read), [`Capped::Over`].
pub fn read_capped(path: &Path, cap: u64) -> Result<Vec<u8>, Capped> {
    use std::io::Read;
    let f = std::fs::File::open(path).map_err(Capped::Io)?;
    let meta = f.metadata().map_err(Capped::Io)?;
    if meta.is_file() && meta.len() > cap {
        return Err(Capped::Over(cap));
    }
    let hint = if meta.is_file() {
        meta.len().min(cap)
    } else {
        0
    };
    let mut bytes = Vec::with_capacity(hint as usize);
    f.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(Capped::Io)?;
    if bytes.len() as u64 > cap {
        return Err(Capped::Over(cap));
    }
    Ok(bytes)
}

/// Parses a graph file into a [`Program`] with spans on every construct, map item and
/// depend item.
///
/// Errors: the first problem found, as a located [`FileError`]. Never panics.
pub fn parse(src: &SourceFile) -> Result<Program, FileError> {
    parse::Parser::new(src).program()
}

/// Reads and parses a graph file; returns the source too, for later diagnostics
/// ([`lower_error`]).
pub fn load(path: impl AsRef<Path>) -> Result<(SourceFile, Program), FileError> {
    let src = SourceFile::read(path.as_ref())?;
    let program = parse(&src)?;
    Ok((src, program))
}

/// The folder a graph file's relative paths (`library = "libk.so"`, `cuda = "k.cu"`)
/// are resolved against: the file's real folder, absolute. A bare file name
/// (`run g.toml`) has the empty path as its parent, which would send `dlopen` to the
/// system's search path; this gives the current directory's real path instead. Falls
/// back to the lexical parent (or `.`) when the file cannot be resolved.
pub fn graph_dir(path: &Path) -> PathBuf {
    let lexical = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::canonicalize(path)
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or(lexical)
}

/// Turns a lowering error into a located diagnostic on the file the program came from
/// (no position when the error carries no span).
pub fn lower_error(src: &SourceFile, e: &LowerError) -> FileError {
    let fe = FileError::at(
        ErrorKind::Lower,
        &src.path,
        &src.text,
        e.span(),
        e.to_string(),
    );
    match e.help() {
        Some(h) => fe.with_help(h),
        None => fe,
    }
}

/// True when `a` and `b` are equal apart from spans.
pub fn same_program(a: &Program, b: &Program) -> bool {
    let (mut a, mut b) = (a.clone(), b.clone());
    strip_spans(&mut a);
    strip_spans(&mut b);
    a == b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_file_name_has_the_current_folder_as_its_graph_dir() {
        assert_eq!(
            graph_dir(Path::new("no-such-file.toml")),
            PathBuf::from(".")
        );
    }
}
