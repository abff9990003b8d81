//! Starting a run without finishing it ([`start`], [`Started`]): a session's `submit`
//! issues up to the first step that blocks the host and returns; the rest is issued when
//! the run is waited on or polled.
//!
//! Host ops run here on the calling thread, in schedule order, not on host lanes (a
//! valid execution of the lanes' model: every lane merged into one thread in schedule
//! order, more order and never less). Kept because a started run returns to its caller
//! between steps: the lanes of `host_lanes.rs` are threads scoped to one call that
//! borrow the run's state, and a run that outlives the call would need lanes owning
//! that state (shared, `'static`) and a way to hand a half-issued schedule back — not
//! a contained change.

use super::{Exec, ExecError, ExecOptions, HostBinding, IssueMode, Job, Report, Resources, LOG};
use crate::lower::OpGraph;
use crate::schedule::{Schedule, Step};

/// A run started by [`start`]: set up, and issued up to the first step that blocks the
/// host. [`Started::finish`] issues the rest and tears down.
pub(crate) struct Started<'a> {
    ex: Exec<'a>,
    /// The next step to issue.
    next: usize,
    /// The error [`Started::advance`] met.
    failed: Option<ExecError>,
}

/// Starts a run for a session's `submit`: like [`super::execute_kept`], issued from
/// this thread (serial issue), stopping before the first host wait or host op. On an
/// error everything is torn down and the error returned.
pub(crate) fn start<'a>(
    job: Job<'a>,
    opts: &ExecOptions,
    res: &'a mut Resources,
    binds: Vec<HostBinding>,
) -> Result<Started<'a>, ExecError> {
    let Job {
        graph,
        sched,
        plugin,
        info,
    } = job;
    let opts = ExecOptions {
        issue: IssueMode::Serial,
        ..opts.clone()
    };
    res.settle(plugin);
    res.in_flight = true;
    let mut ex = Exec::new(graph, sched, (plugin, info), &opts, res, binds, true);
    match ex.setup().and_then(|()| ex.issue_serial(0, true)) {
        Ok(next) => Ok(Started {
            ex,
            next,
            failed: None,
        }),
        Err(e) => {
            let _ = ex.teardown(true);
            ex.res.in_flight = false;
            Err(e)
        }
    }
}

impl Started<'_> {
    /// Whether the next step can be issued without blocking for long: it is not a host
    /// wait, or every stream it waits for (for a wait on an event: the stream it was
    /// recorded on) is done ([`Plugin::query`]; a query error
    /// counts as ready, so that issuing the wait reports it).
    pub(crate) fn ready(&self) -> bool {
        let core = &self.ex.core;
        let streams: Vec<usize> = match core.sched.steps.get(self.next) {
            Some(Step::HostWait { stream }) => vec![stream.index()],
            Some(Step::HostWaitDevice { device }) => (0..core.sched.streams.len())
                .filter(|&t| core.sched.streams[t].device == *device)
                .collect(),
            // Its recording stream done implies the event done (conservative: the stream
            // may have received more work after the record).
            Some(Step::HostWaitEvent { event }) => (core.sched.steps[..self.next].iter())
                .rev()
                .find_map(|s| match *s {
                    Step::Record { event: e, stream } if e == *event => Some(stream.index()),
                    _ => None,
                })
                .into_iter()
                .collect(),
            _ => return true,
        };
        streams
            .into_iter()
            .filter_map(|t| core.streams[t])
            .all(|h| core.plugin.query(h).unwrap_or(true))
    }

    /// Issues the next step (blocking if it is a host wait or host op) and the steps
    /// after it up to the next one that blocks the host. Returns whether every step is
    /// issued. After an error, [`Started::finish`] tears down and returns it.
    pub(crate) fn advance(&mut self) -> bool {
        let len = self.ex.core.sched.steps.len();
        if self.failed.is_none() && self.next < len {
            match self.ex.issue_serial(self.next, true) {
                Ok(next) => self.next = next,
                Err(e) => self.failed = Some(e),
            }
        }
        self.failed.is_some() || self.next >= len
    }

    /// Issues the remaining steps, tears down and reports.
    pub(crate) fn finish(mut self) -> Result<Report, ExecError> {
        let run = match self.failed.take() {
            Some(e) => Err(e),
            None => self.ex.issue_serial(self.next, false),
        };
        if let Err(e) = &run {
            tracing::debug!(target: LOG, error = %e, "stopping after error; cleaning up");
        }
        let down = self.ex.teardown(run.is_err());
        self.ex.res.in_flight = false;
        run.map_err(|e| self.ex.locate(e))?;
        down.map_err(|e| self.ex.locate(e))?;
        Ok(self.ex.report())
    }
}

/// Whether `step` blocks the host: a host wait, or a host op (it runs on this thread).
pub(super) fn blocks_host(graph: &OpGraph, sched: &Schedule, step: &Step) -> bool {
    match *step {
        Step::Op(op) => sched.op_stream[op.index()].is_none() || graph.op(op).kind.is_host(),
        Step::HostWait { .. }
        | Step::HostWaitDevice { .. }
        | Step::HostWaitEvent { .. }
        | Step::HostAwait { .. } => true,
        Step::Record { .. } | Step::Wait { .. } => false,
    }
}
