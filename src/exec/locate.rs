//! Where an asynchronous failure happened. A plugin reports a failure of queued work at
//! the next call that waits for it (contract rule: errors are sticky until a
//! `synchronize`), so the executor first sees it at a host wait or at teardown. Where the
//! plugin names the failing stream call ([`PluginError::Async`] with `seq`, the host
//! plugin does), this maps `(stream, seq)` back to the op issued as that call, with the
//! same bookkeeping that matches plugin timings to ops, and reports the error there: the
//! op and its region, as a synchronous failure would be.

use super::{Exec, ExecError};
use crate::plugin::PluginError;

impl Exec<'_> {
    /// `e`, moved to the op that failed when it is an asynchronous failure whose call the
    /// plugin named and this run issued; otherwise `e` unchanged.
    pub(super) fn locate(&self, e: ExecError) -> ExecError {
        let (ExecError::Step { source, .. } | ExecError::Op { source, .. }) = &e else {
            return e;
        };
        let PluginError::Async {
            stream,
            seq: Some(seq),
            ..
        } = source
        else {
            return e;
        };
        let Some(l) = self.core.streams.iter().position(|h| *h == Some(*stream)) else {
            return e;
        };
        let lane = &self.lanes[l];
        let Ok(k) = lane.timing_keys.binary_search_by_key(seq, |&(s, _)| s) else {
            return e;
        };
        let op = lane.times[lane.timing_keys[k].1].op;
        match e {
            ExecError::Step { source, .. } | ExecError::Op { source, .. } => {
                self.core.op_err(op, source)
            }
            other => other,
        }
    }
}
