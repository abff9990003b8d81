//! Op timing of the CUDA plugin (option `timing`, for traces). Work is timed in
//! **units** between two timing events (marks) on its stream: a kernel, a copy on the
//! copy engines, or a whole batch of small copies (one copy-kernel launch, `batch.rs`),
//! whose copies all get the unit's start and end and its size ([`Timing::batch`]).
//! Batching stays on with timing, so a traced run issues what an untraced one does, plus
//! the marks.
//!
//! Marks are shared where that is exact: a unit starts on the end mark of the stream's
//! previous unit when no other work was issued to the stream in between and that mark
//! has not completed yet (`cuEventQuery`): the stream is still busy, so the new work
//! starts when the previous ends. Otherwise (the stream idle, or an event wait, alloc or
//! free between them) a fresh start mark is recorded. Marks come from a per-device pool
//! and go back to it once read ([`Timer::drain`]), so steady-state timing creates no
//! events: about one `cuEventRecord` per unit (two where the stream ran dry) and one
//! `cuEventQuery`.
//!
//! [`Timer::drain`] turns marks into host instants through a per-device clock origin (an
//! event recorded and synchronized once, and the host instant just after).

use super::driver::{result, sys, Context, DriverError, Event};
use super::lock;
use super::streams::Streams;
use crate::plugin::{StreamHandle, Timing};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Timed work on one stream: the `seq`s of the calls it covers (one for a kernel or an
/// unbatched copy, every copy of a batch), between marks `start` and `end`.
struct Unit {
    stream: StreamHandle,
    device: u32,
    seqs: Vec<u64>,
    /// A batch of copies (its copies' timings say how many).
    batched: bool,
    start: Arc<Event>,
    end: Arc<Event>,
}

/// The units timed since the last drain, the marks a next unit may start on, the pool of
/// free marks and each device's clock origin. Dropping it destroys their events.
#[derive(Default)]
pub(super) struct Timer {
    units: Mutex<Vec<Unit>>,
    /// Per stream: the end mark of its last unit while nothing else was issued to the
    /// stream after it.
    open: Mutex<BTreeMap<u32, Arc<Event>>>,
    /// Timing events not in use, per device.
    pool: Mutex<BTreeMap<u32, Vec<Event>>>,
    /// Per device: an event recorded and synchronized once, and the host instant just
    /// after that synchronize (the clock origin of the timing events).
    base: Mutex<BTreeMap<u32, (Event, Instant)>>,
}

impl Timer {
    /// A mark on `raw` (a stream of `device`, context `ctx` current): a pooled event or a
    /// new one with timing, recorded. If the record fails the event goes back to the pool.
    fn mark(
        &self,
        device: u32,
        ctx: &Arc<Context>,
        raw: sys::CUstream,
    ) -> Result<Arc<Event>, DriverError> {
        let pooled = lock(&self.pool).get_mut(&device).and_then(Vec::pop);
        let e = match pooled {
            Some(e) => e,
            None => Event::create(ctx, 0)?,
        };
        // SAFETY: a live event and a live stream of the same, current context.
        match unsafe { result::event_record(e.raw(), raw) } {
            Ok(()) => Ok(Arc::new(e)),
            Err(err) => {
                self.put_back(device, Arc::new(e));
                Err(err)
            }
        }
    }

    /// Returns mark `e` of `device` to the pool if nothing else holds it (else drops
    /// this reference).
    fn put_back(&self, device: u32, e: Arc<Event>) {
        if let Ok(e) = Arc::try_unwrap(e) {
            lock(&self.pool).entry(device).or_default().push(e);
        }
    }

    /// Starts a unit on `stream` (`raw`, of `device` with context `ctx` current): the
    /// device's clock origin on first use, then the stream's open end mark if it has not
    /// completed, else a new mark.
    pub(super) fn start(
        &self,
        (stream, device): (StreamHandle, u32),
        ctx: &Arc<Context>,
        raw: sys::CUstream,
    ) -> Result<Arc<Event>, DriverError> {
        self.ensure_base(device, ctx, raw)?;
        if let Some(prev) = lock(&self.open).remove(&stream.0) {
            // SAFETY: a live event of this (current) context.
            if let Ok(false) = unsafe { result::event_query(prev.raw()) } {
                return Ok(prev);
            }
            self.put_back(device, prev);
        }
        self.mark(device, ctx, raw)
    }

    /// Ends the unit started with `start` covering calls `seqs` on `stream`, whose work
    /// was issued: records the end mark and keeps the unit for [`Timer::drain`]; the end
    /// mark is where the stream's next unit may start. If that record fails the unit
    /// goes untimed.
    pub(super) fn finish(
        &self,
        (stream, device): (StreamHandle, u32),
        (seqs, batched): (Vec<u64>, bool),
        start: Arc<Event>,
        ctx: &Arc<Context>,
        raw: sys::CUstream,
    ) {
        let Ok(end) = self.mark(device, ctx, raw) else {
            self.put_back(device, start);
            return;
        };
        if let Some(old) = lock(&self.open).insert(stream.0, end.clone()) {
            self.put_back(device, old);
        }
        lock(&self.units).push(Unit {
            stream,
            device,
            seqs,
            batched,
            start,
            end,
        });
    }

    /// Returns start mark `m` of `device`, whose unit issued nothing (its call failed).
    pub(super) fn discard(&self, device: u32, m: Arc<Event>) {
        self.put_back(device, m);
    }

    /// Work that is not timed was issued to `stream` (an event record or wait, an alloc,
    /// a free, a fill): the next unit may not start on the previous one's end mark.
    pub(super) fn interrupt(&self, stream: StreamHandle, device: u32) {
        if let Some(prev) = lock(&self.open).remove(&stream.0) {
            self.put_back(device, prev);
        }
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
    /// their end marks), one per `seq`; `streams` is the plugin's stream table. A unit
    /// whose marks cannot be read is left out. Read marks go back to the pool.
    pub(super) fn drain(&self, streams: &Streams) -> Vec<Timing> {
        let units = std::mem::take(&mut *lock(&self.units));
        let mut out = Vec::with_capacity(units.len());
        {
            let base = lock(&self.base);
            let streams = streams.read();
            for u in &units {
                let st = streams.get(u.stream.0 as usize);
                let Some((st, (b, t0))) = st.and_then(|s| Some((s, base.get(&s.device)?))) else {
                    continue;
                };
                let _ = st.context().bind();
                // The end mark is waited for first, so both have completed.
                let ms = (u.end.synchronize())
                    .and_then(|()| Ok((b.elapsed_ms(&u.start)?, b.elapsed_ms(&u.end)?)));
                let Ok((ms0, ms1)) = ms else { continue };
                let at = |ms: f32| *t0 + Duration::from_secs_f64(ms.max(0.0) as f64 / 1e3);
                let batch = if u.batched { u.seqs.len() as u32 } else { 0 };
                for &seq in &u.seqs {
                    out.push(Timing {
                        stream: u.stream,
                        seq,
                        start: at(ms0),
                        end: at(ms1.max(ms0)),
                        batch,
                    });
                }
            }
        }
        // In unit order, so a mark shared by two units is pooled when the second lets go.
        for u in units {
            self.put_back(u.device, u.start);
            self.put_back(u.device, u.end);
        }
        out
    }
}
