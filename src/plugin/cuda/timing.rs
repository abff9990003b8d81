//! Op timing of the CUDA plugin (option `timing`, for traces): each copy and kernel is
//! bracketed by two events with timing on its stream; [`Timer::drain`] turns them into
//! host instants through a per-device clock origin (an event recorded and synchronized
//! once, and the host instant just after). Off by default: it costs two extra
//! `cuEventCreate` + `cuEventRecord` per op.

use super::driver::{result, sys, Context, DriverError, Event};
use super::lock;
use super::streams::Streams;
use crate::plugin::{StreamHandle, Timing};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A timed op: stream, seq, start event, end event.
type Timed = (StreamHandle, u64, Event, Event);

/// The ops timed since the last drain and each device's clock origin. Dropping it
/// destroys their events.
#[derive(Default)]
pub(super) struct Timer {
    timed: Mutex<Vec<Timed>>,
    /// Per device: an event recorded and synchronized once, and the host instant just
    /// after that synchronize (the clock origin of the timing events).
    base: Mutex<BTreeMap<u32, (Event, Instant)>>,
}

/// A new event with timing of `ctx` (current), recorded on `raw`. If the record fails the
/// event is destroyed.
fn record_timing_event(ctx: &Arc<Context>, raw: sys::CUstream) -> Result<Event, DriverError> {
    let e = Event::create(ctx, 0)?;
    // SAFETY: a live event and a live stream of the same, current context.
    unsafe { result::event_record(e.raw(), raw) }?;
    Ok(e)
}

impl Timer {
    /// Starts timing an op on stream `raw` of `device` (context `ctx`, current): records
    /// the device's clock origin on first use, then the start event.
    pub(super) fn start(
        &self,
        device: u32,
        ctx: &Arc<Context>,
        raw: sys::CUstream,
    ) -> Result<Event, DriverError> {
        self.ensure_base(device, ctx, raw)?;
        record_timing_event(ctx, raw)
    }

    /// Ends the op started with `e0` (its `seq` on `stream`), which succeeded: records
    /// the end event and keeps the pair for [`Timer::drain`]. If that record fails the op
    /// goes untimed.
    pub(super) fn finish(
        &self,
        (stream, seq): (StreamHandle, u64),
        e0: Event,
        ctx: &Arc<Context>,
        raw: sys::CUstream,
    ) {
        if let Ok(e1) = record_timing_event(ctx, raw) {
            lock(&self.timed).push((stream, seq, e0, e1));
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
        let e = record_timing_event(ctx, raw)?;
        e.synchronize()?;
        base.insert(device, (e, Instant::now()));
        Ok(())
    }

    /// The timings of every op timed since the last call (waits for their end events);
    /// `streams` is the plugin's stream table. An op whose events cannot be read is left
    /// out.
    pub(super) fn drain(&self, streams: &Streams) -> Vec<Timing> {
        let timed = std::mem::take(&mut *lock(&self.timed));
        let base = lock(&self.base);
        let streams = streams.read();
        let mut out = Vec::with_capacity(timed.len());
        for (stream, seq, e0, e1) in timed {
            let st = streams.get(stream.0 as usize);
            if let Some((st, (b, t0))) = st.and_then(|s| Some((s, base.get(&s.device)?))) {
                let _ = st.context().bind();
                // The end event is waited for first, so both have completed.
                let ms = e1
                    .synchronize()
                    .and_then(|()| Ok((b.elapsed_ms(&e0)?, b.elapsed_ms(&e1)?)));
                if let Ok((ms0, ms1)) = ms {
                    let at = |ms: f32| *t0 + Duration::from_secs_f64(ms.max(0.0) as f64 / 1e3);
                    out.push(Timing {
                        stream,
                        seq,
                        start: at(ms0),
                        end: at(ms1.max(ms0)),
                    });
                }
            }
            // `e0` and `e1` are destroyed here.
        }
        out
    }
}
