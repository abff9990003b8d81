//! Op timing of the CUDA plugin (option `timing`, for traces). Work is timed in
//! **units** between two timing events (marks) on its stream: a kernel (or graph
//! launch), a copy on the copy engines, or a whole batch of small copies (one copy-kernel
//! launch, `batch.rs`), whose copies all get the unit's start and end and its size
//! ([`Timing::batch`]). Batching stays on with timing, so a traced run issues what an
//! untraced one does, plus the marks.
//!
//! **When a unit starts on the previous unit's end mark** ([`start_rule`](super::chain::start_rule)). Every unit
//! records an end mark. Its start is the end mark of the stream's previous unit
//! (*chained*: no record) only if nothing else was issued to the stream since that unit
//! (no event record or wait, alloc, free, fill, synchronize or drain: [`Timer::interrupt`])
//! and the stream is still busy with it, so the new work starts when the previous ends:
//! - the unit is issued by the same plugin call right after that unit (a kernel after the
//!   batch its own call flushed, `adjacent`): chained without asking the driver. The batch
//!   was launched µs before, and the kernel's launch follows its end mark at once; if the
//!   batch did finish first, the idle time counted into the kernel is at most the host
//!   time between the batch's end mark and the kernel's launch (the same window a query
//!   would leave open: it can turn true just after it answered);
//! - otherwise one `cuEventQuery` of that end mark: still pending, chained; completed (the
//!   stream ran dry: the host issues slower than the GPU runs, the usual case for small
//!   regions), a fresh start mark.
//!
//! Never chaining without asking (starting fresh only after host waits and event waits)
//! would be cheaper but not truthful: on the blocked-matmul DAG the host issues a region
//! every ~6.6 µs over 4 streams while a region's GPU work takes a few µs, so the streams
//! are idle most of the time, and chaining would draw every stream as always busy.
//!
//! Driver calls per timed unit: a chained adjacent unit one `cuEventRecord`; any other
//! unit one `cuEventQuery` and one record (still busy) or two (ran dry). Marks are
//! events with timing (flags 0: no blocking sync), kept per stream, reused after
//! [`Timer::drain`] has read them, so steady-state timing creates no events; the issue
//! path takes only the stream's own timing lock (no lock shared between streams, no heap
//! allocation per unit once the stream's lists have grown).
//!
//! [`Timer::drain`] turns marks into host instants through a per-device clock origin (an
//! event recorded and synchronized once, and the host instant just after), off the
//! issue path.

use super::chain::{start_rule, Seqs, Start};
use super::driver::{result, sys, Context, DriverError, Event};
use super::lock;
use super::streams::Streams;
use crate::plugin::{StreamHandle, Timing};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Timed work on one stream, between marks `start` and `end`.
struct Unit {
    seqs: Seqs,
    /// A batch of copies (its copies' timings say how many).
    batched: bool,
    /// `None`: chained, it starts at the previous unit's end (in the same [`Lane`]).
    start: Option<Event>,
    end: Event,
}

/// One stream's timing state, behind its own lock (in the stream's entry,
/// `streams.rs`): the units timed since the last drain in issue order, whether the next
/// unit may chain on the last one, and the stream's free marks.
#[derive(Default)]
pub(super) struct Lane {
    units: Vec<Unit>,
    /// Nothing was issued to the stream since the last unit of `units`.
    open: bool,
    /// Timing events not in use (of the stream's device).
    pool: Vec<Event>,
    /// The device's clock origin exists ([`Timer::ensure_base`] was called for it).
    based: bool,
    /// The end of the last unit drained, in ms after the clock origin: the start of a
    /// unit that chained on it while the drain ran (started before, finished after).
    drained_end: Option<f32>,
}

impl Lane {
    /// A mark on `raw` (a stream of context `ctx`, current): a pooled event or a new one
    /// with timing, recorded. If the record fails the event goes back to the pool.
    fn mark(&mut self, ctx: &Arc<Context>, raw: sys::CUstream) -> Result<Event, DriverError> {
        let e = match self.pool.pop() {
            Some(e) => e,
            None => Event::create(ctx, 0)?,
        };
        // SAFETY: a live event and a live stream of the same, current context.
        match unsafe { result::event_record(e.raw(), raw) } {
            Ok(()) => Ok(e),
            Err(err) => {
                self.pool.push(e);
                Err(err)
            }
        }
    }
}

/// Each device's clock origin. Dropping it destroys their events (the marks go with
/// the streams' lanes).
#[derive(Default)]
pub(super) struct Timer {
    /// Per device: an event recorded and synchronized once, and the host instant just
    /// after that synchronize (the clock origin of the timing events).
    base: Mutex<BTreeMap<u32, (Event, Instant)>>,
}

impl Timer {
    /// Starts a unit on stream `lane` (`raw`, of `device` with context `ctx` current):
    /// the device's clock origin on the stream's first unit, then [`start_rule`]:
    /// `Ok(None)` chained, else the new start mark. `adjacent`: as in [`start_rule`].
    pub(super) fn start(
        &self,
        lane: &Mutex<Lane>,
        (device, ctx, raw): (u32, &Arc<Context>, sys::CUstream),
        adjacent: bool,
    ) -> Result<Option<Event>, DriverError> {
        let mut l = lock(lane);
        if !l.based {
            self.ensure_base(device, ctx, raw)?;
            l.based = true;
        }
        let last = l.units.last().map(|u| u.end.raw());
        let pending = || match last {
            // SAFETY: a live event of this (current) context.
            Some(e) => matches!(unsafe { result::event_query(e) }, Ok(false)),
            None => false,
        };
        match start_rule(l.open && last.is_some(), adjacent, pending) {
            Start::Chained => Ok(None),
            Start::Fresh => l.mark(ctx, raw).map(Some),
        }
    }

    /// Ends the unit started with `start` covering calls `seqs`, whose work was issued:
    /// records the end mark and keeps the unit for [`Timer::drain`]; the stream's next
    /// unit may chain on it. If that record fails the unit goes untimed (and the next
    /// unit starts fresh).
    pub(super) fn finish(
        &self,
        lane: &Mutex<Lane>,
        (ctx, raw): (&Arc<Context>, sys::CUstream),
        (seqs, batched): (Seqs, bool),
        start: Option<Event>,
    ) {
        let mut l = lock(lane);
        let Ok(end) = l.mark(ctx, raw) else {
            l.pool.extend(start);
            l.open = false;
            return;
        };
        l.units.push(Unit {
            seqs,
            batched,
            start,
            end,
        });
        l.open = true;
    }

    /// Returns start mark `m`, whose unit issued nothing (its call failed); the stream's
    /// last unit is still the last work on it.
    pub(super) fn discard(&self, lane: &Mutex<Lane>, m: Option<Event>) {
        lock(lane).pool.extend(m);
    }

    /// Work that is not timed was issued to the stream (an event record or wait, an
    /// alloc, a free, a fill): its next unit starts on a fresh mark.
    pub(super) fn interrupt(&self, lane: &Mutex<Lane>) {
        lock(lane).open = false;
    }

    /// Records the device's clock origin once: an event on `raw`, synchronized, and the
    /// host instant right after (later by the synchronize's return latency, a few µs, so
    /// trace times are at most that much late).
    fn ensure_base(
        &self,
        device: u32,
        ctx: &Arc<Context>,
        raw: sys::CUstream,
    ) -> Result<(), DriverError> {
        let mut base = lock(&self.base);
        if base.contains_key(&device) {
            return Ok(());
        }
        let e = Event::create(ctx, 0)?;
        // SAFETY: a live event and a live stream of the same, current context.
        unsafe { result::event_record(e.raw(), raw) }?;
        e.synchronize()?;
        base.insert(device, (e, Instant::now()));
        Ok(())
    }

    /// The timings of every call of every unit timed since the last call (waits for
    /// their end marks), one per `seq`, stream by stream in issue order; `streams` is
    /// the plugin's stream table. A unit whose marks cannot be read is left out, and so
    /// is a unit chained on an end mark that cannot be read. Read marks go back to their
    /// stream's pool; each stream's next unit starts fresh (one that chained while this
    /// ran starts at the last end read here, `Lane::drained_end`).
    pub(super) fn drain(&self, streams: &Streams) -> Vec<Timing> {
        let mut out = Vec::new();
        let streams = streams.read();
        for (i, st) in streams.iter().enumerate() {
            let units = {
                let mut l = lock(&st.timing);
                l.open = false;
                std::mem::take(&mut l.units)
            };
            if units.is_empty() {
                continue;
            }
            let stream = StreamHandle(i as u32);
            let prev = lock(&st.timing).drained_end;
            let mut end = None;
            {
                let base = lock(&self.base);
                if let Some((b, t0)) = base.get(&st.device) {
                    let _ = st.context().bind();
                    end = read_units(&units, (b, *t0), (stream, prev), &mut out);
                }
            }
            let mut l = lock(&st.timing);
            l.drained_end = end;
            for u in units {
                l.pool.extend(u.start);
                l.pool.push(u.end);
            }
        }
        out
    }
}

/// The timings of one stream's `units` (in issue order) against clock origin `b` at host
/// instant `t0`, appended to `out`; `prev`: the end of the unit before the first (the
/// last one drained before). Returns the last unit's end.
fn read_units(
    units: &[Unit],
    (b, t0): (&Event, Instant),
    (stream, mut prev): (StreamHandle, Option<f32>),
    out: &mut Vec<Timing>,
) -> Option<f32> {
    let at = |ms: f32| t0 + Duration::from_secs_f64(ms.max(0.0) as f64 / 1e3);
    // `prev`: the previous unit's end, in ms after the origin (None: unknown).
    for u in units {
        // The end mark is waited for first, so the start has completed too.
        let end = u.end.synchronize().and_then(|()| b.elapsed_ms(&u.end)).ok();
        let start = match &u.start {
            Some(s) => b.elapsed_ms(s).ok(),
            None => prev,
        };
        prev = end;
        let (Some(ms0), Some(ms1)) = (start, end) else {
            continue;
        };
        let batch = if u.batched { u.seqs.len() as u32 } else { 0 };
        for &seq in u.seqs.as_slice() {
            out.push(Timing {
                stream,
                seq,
                start: at(ms0),
                end: at(ms1.max(ms0)),
                batch,
            });
        }
    }
    prev
}
