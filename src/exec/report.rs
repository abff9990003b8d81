//! What a run returns: [`Report`] with its per-op times ([`OpTime`]) and counts.

use super::{Buffers, IssueMode};
use crate::lower::OpId;
use crate::schedule::StreamId;

/// When one op ran, in µs since [`execute`](super::execute) started.
#[derive(Clone, Debug, PartialEq)]
pub struct OpTime {
    pub op: OpId,
    /// `None` for host ops.
    pub stream: Option<StreamId>,
    pub device: u32,
    /// When the host issued it.
    pub issue_us: f64,
    /// When it started and ended: measured by the plugin for device ops (issue time
    /// for both when the plugin has no timing), on the host for host ops.
    pub start_us: f64,
    pub end_us: f64,
    /// Whether `start_us..end_us` was measured: always for host ops; for a device op,
    /// whether the plugin's [`Plugin::drain_timings`](crate::plugin::Plugin::drain_timings) covered it (the host plugin times
    /// every stream call, the CUDA plugin with `timing` (`--trace`) copies and kernels
    /// but not allocs and frees, the null plugin and the CUDA plugin without `timing`
    /// nothing). When false, `start_us == end_us == issue_us`.
    pub timed: bool,
    /// How many copies were timed as one unit with this one (the CUDA plugin's
    /// small-copy batch, [`Timing::batch`](crate::plugin::Timing::batch)): every copy of
    /// the batch carries the unit's `start_us..end_us`. 0 for an op timed on its own or
    /// untimed.
    pub batch: u32,
}

/// When the host blocked in one host-wait step (`Step::HostWait`, `HostWaitEvent` or
/// `HostWaitDevice`): around the plugin's `synchronize` / `synchronize_event` calls, in
/// µs since [`execute`](super::execute) started.
#[derive(Clone, Debug, PartialEq)]
pub struct HostWaitTime {
    /// The step's index in [`Schedule::steps`](crate::schedule::Schedule::steps).
    pub step: usize,
    pub start_us: f64,
    pub end_us: f64,
}

/// What was issued.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// All ops run (device + host).
    pub ops: usize,
    pub device_ops: usize,
    pub host_ops: usize,
    pub events_recorded: usize,
    pub event_waits: usize,
    pub host_waits: usize,
}

impl Counts {
    pub(super) fn add(&mut self, o: &Counts) {
        self.ops += o.ops;
        self.device_ops += o.device_ops;
        self.host_ops += o.host_ops;
        self.events_recorded += o.events_recorded;
        self.event_waits += o.event_waits;
        self.host_waits += o.host_waits;
    }
}

/// The result of a run.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// The plugin's name.
    pub plugin: String,
    /// Final host buffers, as read when the `End` op ran (after the final synchronize if
    /// the graph has no `End`).
    pub buffers: Buffers,
    /// Every op in issue order.
    pub ops: Vec<OpTime>,
    pub counts: Counts,
    /// Bytes copied host → device and device → host.
    pub bytes_h2d: u64,
    pub bytes_d2h: u64,
    /// Bytes copied device → device by peer copies ([`crate::lower::OpKind::PeerCopy`]).
    pub bytes_peer: u64,
    /// Wall time of the whole run (setup, steps, teardown) in µs.
    pub wall_us: f64,
    /// Setup (streams, kernels, host buffers, events) ran from 0 to `setup_us`, in µs.
    pub setup_us: f64,
    /// Teardown (final synchronize, frees, timings matched, snapshot) ran from
    /// `teardown_start_us` to [`Report::wall_us`], in µs.
    pub teardown_start_us: f64,
    /// Every host wait that completed, in step order (see [`HostWaitTime`]).
    pub host_waits: Vec<HostWaitTime>,
    /// How the steps were issued: [`IssueMode::Serial`], [`IssueMode::PerStream`] or
    /// [`IssueMode::PerGroup`] (what [`IssueMode::Auto`] chose; `Serial` where
    /// `PerGroup` found one group).
    pub issue: IssueMode,
    /// Host threads that issued device steps: 1 with serial issue, else one per stream
    /// or issue group with steps.
    pub issue_threads: usize,
    /// Issue groups with steps where they were computed ([`IssueMode::PerGroup`], or
    /// [`IssueMode::Auto`] on a plugin that asks for parallel issue), also when one
    /// group made the run serial; else the streams with steps.
    pub stream_groups: usize,
    /// With threaded issue, how often a thread had to wait for another's progress (an
    /// event record, alloc or use not yet issued by another thread, a host step not yet
    /// done, a stream not yet issued up to a host wait): the run's cross-thread
    /// hand-offs. 0 with serial issue.
    pub issue_waits: u64,
    /// Time spent in those waits, summed over the threads, in µs.
    pub issue_wait_us: f64,
    /// Plugin streams the run holds: one per logical stream the schedule names (an op on
    /// it, or a record, event wait or host wait of it); a stream nothing names gets none.
    /// On the host plugin each is a worker thread.
    pub plugin_streams: usize,
    /// What replay did in this run ([`crate::Session::with_replay`]); `None` when the
    /// run issued to streams.
    pub replay: Option<super::ReplayStats>,
}

impl Report {
    /// Issue of the first op → start of the `End` op, in µs (the issue path: what the
    /// bench's µs-per-region figures measure; without setup and teardown). The wall time
    /// when no `End` op was timed.
    pub fn pipeline_us(&self, graph: &crate::lower::OpGraph) -> f64 {
        let first = self
            .ops
            .iter()
            .map(|o| o.issue_us)
            .fold(f64::INFINITY, f64::min);
        let end = self
            .ops
            .iter()
            .find(|o| matches!(graph.op(o.op).kind, crate::lower::OpKind::End))
            .map(|o| o.start_us)
            .unwrap_or(self.wall_us);
        end - first
    }

    /// Final buffer `name` as `&[T]` (`T` one of `f32 f64 i32 i64 u8`), or why not: the
    /// error names an unknown buffer and lists the known ones, or names the buffer's
    /// element type and the one asked for ([`Buffers::read`]).
    ///
    /// Errors: [`ReadError::Unknown`](super::ReadError::Unknown),
    /// [`ReadError::WrongType`](super::ReadError::WrongType).
    pub fn read<T: crate::model::Elem>(&self, name: &str) -> Result<&[T], super::ReadError> {
        self.buffers.read(name)
    }

    /// Final buffer `name` as `&[f32]`; `None` for an unknown name and for another
    /// element type alike ([`Report::read`] says which).
    pub fn as_f32(&self, name: &str) -> Option<&[f32]> {
        self.buffers.as_f32(name)
    }
    /// As [`Report::as_f32`], for `f64`.
    pub fn as_f64(&self, name: &str) -> Option<&[f64]> {
        self.buffers.as_f64(name)
    }
    /// As [`Report::as_f32`], for `i32`.
    pub fn as_i32(&self, name: &str) -> Option<&[i32]> {
        self.buffers.as_i32(name)
    }
    /// As [`Report::as_f32`], for `i64`.
    pub fn as_i64(&self, name: &str) -> Option<&[i64]> {
        self.buffers.as_i64(name)
    }
    /// As [`Report::as_f32`], for `u8`.
    pub fn as_u8(&self, name: &str) -> Option<&[u8]> {
        self.buffers.as_u8(name)
    }
}
