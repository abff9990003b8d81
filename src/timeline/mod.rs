//! What a run's timings show, read from its [`crate::exec::Report`] after it ran (the
//! executor only measures): how much the streams overlapped against the DAG's critical
//! path ([`overlap()`]) and the Chrome / Perfetto timeline of what ran
//! ([`trace::write_chrome_trace`]).

pub(crate) mod overlap;
pub mod trace;

pub use overlap::{overlap, Overlap};
