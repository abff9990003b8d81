//! A run's teardown (synchronize what is still running, free leftover device memory,
//! return events, copy staged outputs back, release what a one-shot run made) and its
//! report.

use super::run_state::{us_since, Core};
use super::steps::read_buffers;
use super::{Counts, Exec, ExecError, HostBinding, OpTime, Report, LOG};
use crate::lower::AllocId;
use crate::plugin::PluginError;
use crate::schedule::{Schedule, Step, StreamId};

impl Exec<'_> {
    /// Synchronizes every stream, frees leftover device memory, destroys events, takes
    /// the final snapshot (if `End` did not) and frees host memory. After a failed run
    /// (`failed`), teardown errors are logged and dropped (the run's error wins).
    pub(super) fn teardown(&mut self, failed: bool) -> Result<(), ExecError> {
        self.torn_down = true;
        self.teardown_start_us = self.core.now_us();
        let mut first: Option<ExecError> = None;
        let mut note = |what: String, e: PluginError, first: &mut Option<ExecError>| {
            tracing::debug!(target: LOG, %what, error = %e, "teardown error");
            if first.is_none() {
                *first = Some(ExecError::Step { what, source: e });
            }
        };
        // A stream the schedule issues nothing to has nothing to wait for; after a
        // complete run, neither has one whose last work a host wait already covered
        // (that wait returned its errors too).
        let (used, pending) = final_sync(self.core.sched);
        let must = if failed { used } else { pending };
        let sync_all =
            |core: &Core,
             first: &mut Option<ExecError>,
             note: &mut dyn FnMut(String, PluginError, &mut Option<ExecError>)| {
                for (i, h) in core.streams.iter().enumerate() {
                    if let (Some(h), true) = (h, must[i]) {
                        if let Err(e) = core.plugin.synchronize(*h) {
                            let last = core.step_context(
                                core.sched.steps.len(),
                                Some(StreamId(i as u32)),
                                false,
                            );
                            note(format!("final synchronize s{i}{last}"), e, first);
                        }
                    }
                }
            };
        let core = &self.core;
        sync_all(core, &mut first, &mut note);
        let mut freed_any = false;
        for a in 0..core.live.len() {
            let id = AllocId(a as u32);
            if let Some((ptr, s)) = core.live.get(id) {
                match core.plugin.free(core.stream(s), ptr) {
                    Ok(()) => {
                        core.live.clear(id);
                        freed_any = true;
                    }
                    Err(e) => note(
                        format!("free leftover device allocation {a}"),
                        e,
                        &mut first,
                    ),
                }
            }
        }
        if freed_any {
            sync_all(core, &mut first, &mut note);
        }
        // Events still held (threaded issue holds one per schedule event) go back to
        // the pool; a one-shot run then destroys every event it made.
        for (ev, device) in self.events.iter_mut().filter_map(Option::take) {
            let d = device as usize;
            if self.res.event_pool.len() <= d {
                self.res.event_pool.resize_with(d + 1, Vec::new);
            }
            self.res.event_pool[d].push(ev);
        }
        if !failed && self.snapshot.is_none() && core.snapshot_at_end {
            match read_buffers(core) {
                Ok(b) => self.snapshot = Some(b),
                Err(e) => {
                    tracing::debug!(target: LOG, error = %e, "teardown error");
                    first.get_or_insert(e);
                }
            }
        }
        for (i, bind) in self.binds.iter().enumerate() {
            let HostBinding::App {
                ptr: app,
                bytes,
                writable: true,
                ..
            } = *bind
            else {
                continue;
            };
            match core.host[i] {
                Some(h) if !failed && h.0 != app as usize as u64 => {
                    // SAFETY: staged: `h` is this buffer's plugin host memory of `bytes`
                    // bytes and every stream is synchronized; `app` is the application's
                    // memory of the same size, borrowed mutably for the run.
                    unsafe { std::ptr::copy_nonoverlapping(h.as_ptr(), app, bytes as usize) };
                }
                _ => {}
            }
        }
        for ptr in std::mem::take(&mut self.registered) {
            if let Err(e) = core.plugin.unregister_host(ptr) {
                note(format!("unregister host memory {ptr}"), e, &mut first);
            }
        }
        if !self.keep {
            let names: Vec<String> = core.graph.buffers.iter().map(|b| b.name.clone()).collect();
            if let Err((what, e)) = self.res.release(core.plugin, &names) {
                note(what, e, &mut first);
            }
        }
        // Match the plugin's timings to ops.
        let timings = match self.core.info.timing {
            true => self.core.plugin.drain_timings(),
            false => Vec::new(),
        };
        for t in timings {
            let Some(l) = self.core.streams.iter().position(|h| *h == Some(t.stream)) else {
                continue;
            };
            let lane = &mut self.lanes[l];
            if let Ok(k) = lane
                .timing_keys
                .binary_search_by_key(&t.seq, |&(seq, _)| seq)
            {
                let i = lane.timing_keys[k].1;
                lane.times[i].start_us = us_since(self.core.t0, t.start);
                lane.times[i].end_us = us_since(self.core.t0, t.end);
                lane.times[i].timed = true;
                lane.times[i].batch = t.batch;
            }
        }
        self.wall_us = self.core.now_us();
        match first {
            Some(e) if !failed => Err(e),
            _ => Ok(()),
        }
    }

    pub(super) fn report(&mut self) -> Report {
        let mut counts = Counts::default();
        let steps = self.core.sched.steps.len();
        let timed: usize =
            self.lanes.iter().map(|l| l.times.len()).sum::<usize>() + self.host_lane.times.len();
        // (step, time) of every timed op, each lane's in its issue order: sorted by step
        // below (a stable merge of the lanes' runs), with no per-step table to fill.
        let mut by_step: Vec<(usize, OpTime)> = Vec::with_capacity(timed);
        let (mut bytes_h2d, mut bytes_d2h, mut bytes_peer) = (0, 0, 0);
        let mut host_waits = Vec::new();
        for lane in self
            .lanes
            .iter_mut()
            .chain(std::iter::once(&mut self.host_lane))
        {
            counts.add(&lane.counts);
            host_waits.append(&mut lane.waits);
            bytes_h2d += lane.bytes_h2d;
            bytes_d2h += lane.bytes_d2h;
            bytes_peer += lane.bytes_peer;
            let times = std::mem::take(&mut lane.times).into_iter().zip(&lane.steps);
            by_step.extend(times.filter(|(_, &s)| s < steps).map(|(t, &s)| (s, t)));
        }
        by_step.sort_by_key(|(s, _)| *s);
        // A step timed twice keeps its last time.
        let mut ops: Vec<OpTime> = Vec::with_capacity(by_step.len());
        let mut last = None;
        for (s, t) in by_step {
            if last == Some(s) {
                ops.pop();
            }
            ops.push(t);
            last = Some(s);
        }
        // Step order is issue order with one issuing thread; with several, order by
        // issue time (ties in step order).
        if self.groups.is_some() {
            ops.sort_by(|a, b| a.issue_us.total_cmp(&b.issue_us));
        }
        Report {
            plugin: self.core.info.name.clone(),
            buffers: self.snapshot.take().unwrap_or_default(),
            ops,
            counts,
            bytes_h2d,
            bytes_d2h,
            bytes_peer,
            wall_us: self.wall_us,
            setup_us: self.setup_us,
            teardown_start_us: self.teardown_start_us,
            host_waits,
            issue: self.issue,
            issue_threads: self.stats.threads.max(1),
            stream_groups: self.stream_groups,
            plugin_streams: self.core.streams.iter().flatten().count(),
            issue_waits: self.stats.waits,
            issue_wait_us: self.stats.wait_ns as f64 / 1e3,
            replay: self.replay_stats.take(),
        }
    }
}

/// Per stream of `sched`: whether any step issues to it (`used`), and whether any does
/// after the last host wait that covers the whole stream (`pending`: what a final
/// synchronize must wait for after a complete run). `O(steps + streams)`.
fn final_sync(sched: &Schedule) -> (Vec<bool>, Vec<bool>) {
    let n = sched.streams.len();
    let (mut used, mut pending) = (vec![false; n], vec![false; n]);
    for step in &sched.steps {
        match *step {
            Step::Op(op) => {
                if let Some(s) = sched.op_stream[op.index()] {
                    used[s.index()] = true;
                    pending[s.index()] = true;
                }
            }
            Step::Record { stream, .. } | Step::Wait { stream, .. } => {
                used[stream.index()] = true;
                pending[stream.index()] = true;
            }
            Step::HostWait { stream } => pending[stream.index()] = false,
            Step::HostWaitDevice { device } => {
                for (t, info) in sched.streams.iter().enumerate() {
                    if info.device == device {
                        pending[t] = false;
                    }
                }
            }
            // Covers its stream only up to the record; an await covers no stream.
            Step::HostWaitEvent { .. } | Step::HostAwait { .. } => {}
        }
    }
    (used, pending)
}
