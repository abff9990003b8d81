//! [`ParseError`]: why a schedule text could not be read, with its line and column.

use crate::lower::OpId;
use crate::schedule::StreamId;
use thiserror::Error;

/// Why a schedule text could not be read. Lines and columns count from 1 (columns in
/// characters).
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ParseError {
    /// The text does not follow the grammar here.
    #[error("{line}:{column}: expected {expected}, found {found}")]
    Expected {
        line: usize,
        column: usize,
        /// What the grammar allows here.
        expected: String,
        /// What the text has (quoted), or `end of line` / `end of text`.
        found: String,
    },
    /// An op line names an op the graph does not have.
    #[error("{line}:{column}: no op #{op}: the graph has {ops} ops")]
    NoSuchOp {
        line: usize,
        column: usize,
        op: u64,
        ops: usize,
    },
    /// An op line's description is not that of the graph's op.
    #[error("{line}:{column}: op {op} is `{expected}` in the graph, the text says `{found}`")]
    WrongOp {
        line: usize,
        column: usize,
        op: OpId,
        expected: String,
        found: String,
    },
    /// An op listed in two blocks (a step names its op, the op names one stream).
    #[error(
        "{line}:{column}: op {op} is already in the {first} block (line {first_line}); an \
         op is on one stream, or on the host"
    )]
    OpInTwoBlocks {
        line: usize,
        column: usize,
        op: OpId,
        /// The block it was listed in first (`sN` or `host`).
        first: String,
        first_line: usize,
    },
    /// A block header names a stream the graph's devices and the pool do not give.
    #[error("{line}:{column}: no stream s{stream}: {devices} device(s) with pool {pool} have s0 to s{}", devices * pool - 1)]
    NoSuchStream {
        line: usize,
        column: usize,
        stream: u64,
        devices: u32,
        pool: u32,
    },
    /// A block header names the wrong device for its stream.
    #[error("{line}:{column}: stream {stream} is of device {expected} (pool {pool} per device), not {found}")]
    WrongDevice {
        line: usize,
        column: usize,
        stream: StreamId,
        expected: u32,
        found: u64,
        pool: u32,
    },
    /// A block that appears twice.
    #[error("{line}:{column}: a second {block} block (the first is at line {first_line})")]
    DuplicateBlock {
        line: usize,
        column: usize,
        /// `sN` or `host`.
        block: String,
        first_line: usize,
    },
    /// Something the text derives (a count, a host wait's `(after #k)`, the issue
    /// order's run lengths) disagrees with the schedule the text describes.
    #[error("{line}:{column}: {what} is {actual}, the text says {stated}")]
    Disagrees {
        line: usize,
        column: usize,
        /// What is stated (`the number of host waits`, ...).
        what: String,
        stated: String,
        actual: String,
    },
}

impl ParseError {
    /// The line of the problem (from 1).
    pub fn line(&self) -> usize {
        match *self {
            ParseError::Expected { line, .. }
            | ParseError::NoSuchOp { line, .. }
            | ParseError::WrongOp { line, .. }
            | ParseError::OpInTwoBlocks { line, .. }
            | ParseError::NoSuchStream { line, .. }
            | ParseError::WrongDevice { line, .. }
            | ParseError::DuplicateBlock { line, .. }
            | ParseError::Disagrees { line, .. } => line,
        }
    }

    /// The column of the problem (from 1, in characters).
    pub fn column(&self) -> usize {
        match *self {
            ParseError::Expected { column, .. }
            | ParseError::NoSuchOp { column, .. }
            | ParseError::WrongOp { column, .. }
            | ParseError::OpInTwoBlocks { column, .. }
            | ParseError::NoSuchStream { column, .. }
            | ParseError::WrongDevice { column, .. }
            | ParseError::DuplicateBlock { column, .. }
            | ParseError::Disagrees { column, .. } => column,
        }
    }
}
