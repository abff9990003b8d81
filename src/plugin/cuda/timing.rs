//! Op timing of the CUDA plugin (option `timing`, for traces). Work is timed in
//! **units**: a kernel (or graph launch), a copy on the copy engines, or a whole batch of
//! small copies (one copy-kernel launch, `batch.rs`), whose copies all get the unit's
//! start and end and its size ([`Timing::batch`]). Batching stays on with timing, so a
//! traced run issues what an untraced one does, plus what timing needs:
//!
//! - **A batch or a built-in kernel stamps itself**: the copy kernel, and each built-in's
//!   `NAME_timed` entry (`builtins.cu`: the kernel between two stamps), writes its start
//!   and end (`%globaltimer`, ns) into a **timing slot** of the stream (3 words of device
//!   memory), so it costs no driver call. Slots come in chunks of
//!   [`SLOTS_PER_CHUNK`] (one `cuMemAlloc` and one `cuMemsetD8Async` each), are reused
//!   once [`Timer::drain`] has read them, and live as long as the stream.
//! - **Any other unit** (a user kernel, a graph launch, a copy on the copy engines) runs
//!   between **marks**, timing events (flags 0: no blocking sync) recorded on its
//!   stream: one end mark after it, and a start mark before it
//!   unless it starts on the previous unit's end (below). Marks are kept per stream and
//!   reused after [`Timer::drain`] has read them, so steady-state timing creates no
//!   events.
//!
//! **When a unit starts on the previous unit's end** ([`start_rule`](super::chain::start_rule)).
//! Its start is the end of the stream's previous unit (*chained*: no record) only if
//! nothing else was issued to the stream since that unit (no event record or wait,
//! alloc, free, fill, synchronize or drain: [`Timer::interrupt`]) and the stream is still
//! busy with it, so the new work starts when the previous ends:
//! - the unit is issued by the same plugin call right after that unit (a kernel after the
//!   batch its own call flushed, `adjacent`): chained without asking the driver. The batch
//!   was launched µs before, and the kernel's launch follows it at once; if the batch did
//!   finish first, the idle time counted into the kernel is at most the host time
//!   between the batch's end and the kernel's launch (the same window a query would
//!   leave open: it can turn true just after it answered);
//! - otherwise one query (`cuEventQuery` of the end mark, or `cuStreamQuery` after a
//!   stamped batch): still pending, chained; completed (the stream ran dry: the host
//!   issues slower than the GPU runs, the usual case for small regions), a fresh start
//!   mark.
//!
//! Never chaining without asking (starting fresh only after host waits and event waits)
//! would be cheaper but not truthful: on the blocked-matmul DAG the host issues a region
//! every ~6.6 µs over 4 streams while a region's GPU work takes a few µs, so the streams
//! are idle most of the time, and chaining would draw every stream as always busy.
//!
//! Driver calls per timed unit: a stamped batch or built-in kernel none; a user kernel
//! chained on the batch its call issued one `cuEventRecord`; any other unit one query
//! and one record (still busy) or two (ran dry). On the blocked-matmul DAG (built-in
//! kernels) that is none per region. Why stamps (benches/gpu/timing_probe.cu, run 19 on
//! the H200, µs per region of that issue pattern, against untimed): one timing-event
//! record per unit +43% issue time; CUPTI activity records +41% (+24% with CUPTI
//! attached but off); self-stamped copy kernels +0.3%. Recording the end marks on a
//! second thread was tried and dropped: the driver serializes the two threads' calls
//! (traced matmul 1.25× instead of 1.20×) and 27 of 64 marks came after their kernel had
//! ended.
//! The issue path takes only the stream's own timing lock (no lock shared between
//! streams, no heap allocation per unit once the stream's lists have grown).
//!
//! **Clocks.** [`Timer::drain`] turns marks into host instants through a per-device clock
//! origin (an event recorded and synchronized once, and the host instant just after), off
//! the issue path. Stamps are `%globaltimer` values: the first stamped batch of a device
//! first launches the copy kernel [`CALIBRATIONS`] times on a slot alone, each followed by
//! an event, and takes as the timer's value at the origin the largest
//! `stamp end − (event − origin)` ([`clock_origin`](super::chain::clock_origin)): the
//! event completes right after the kernel, so each is a lower bound within about a µs.

use super::batch::Launch;
use super::chain::{clock_origin, stamp_span, start_rule, Seqs, Start};
use super::driver::{result, sys, Context, DeviceBlock, DriverError, Event};
use super::lock;
use super::streams::Streams;
use crate::plugin::{StreamHandle, Timing};
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Timing slots per chunk of device memory (24 bytes each: 48 KiB).
pub(super) const SLOTS_PER_CHUNK: u32 = 2048;

/// Words per timing slot: start (ns), end (ns), blocks finished (`builtins.cu`).
const SLOT_WORDS: usize = 3;

/// Stamp-only launches of the clock calibration (see the module docs).
pub(super) const CALIBRATIONS: usize = 4;

/// Where a unit's start or end time comes from.
enum Mark {
    /// The end of the stream's previous unit (a start only).
    Chained,
    /// A timing event recorded on the stream.
    Event(Event),
    /// Timing slot `k` of the stream, which the copy kernel wrote (start and end).
    Stamp(u32),
}

/// Timed work on one stream.
struct Unit {
    seqs: Seqs,
    /// A batch of copies (its copies' timings say how many).
    batched: bool,
    start: Mark,
    end: Mark,
}

/// One stream's timing slots: chunks of [`SLOTS_PER_CHUNK`] slots in device memory
/// (zeroed on allocation, in stream order), and the free ones.
#[derive(Default)]
struct Slots {
    chunks: Vec<DeviceBlock>,
    free: Vec<u32>,
}

impl Slots {
    /// A free slot (index, device address); a new chunk on `raw` (of context `ctx`,
    /// current) when none is free.
    fn take(&mut self, ctx: &Arc<Context>, raw: sys::CUstream) -> Result<(u32, u64), DriverError> {
        if self.free.is_empty() {
            let bytes = SLOTS_PER_CHUNK as usize * SLOT_WORDS * 8;
            let chunk = DeviceBlock::alloc(ctx, bytes)?;
            // SAFETY: a live allocation of `bytes` bytes of this (current) context and a
            // live stream of it; every use of the chunk comes later in stream order.
            unsafe { result::memset_d8_async(chunk.ptr(), 0, bytes, raw) }?;
            let first = self.chunks.len() as u32 * SLOTS_PER_CHUNK;
            self.chunks.push(chunk);
            self.free.extend((first..first + SLOTS_PER_CHUNK).rev());
        }
        let k = self.free.pop().expect("a chunk was just added");
        Ok((k, self.addr(k)))
    }

    /// The device address of slot `k`.
    fn addr(&self, k: u32) -> u64 {
        let chunk = &self.chunks[(k / SLOTS_PER_CHUNK) as usize];
        chunk.ptr() + (k % SLOTS_PER_CHUNK) as u64 * (SLOT_WORDS as u64 * 8)
    }
}

/// One stream's timing state, behind its own lock (in the stream's entry,
/// `streams.rs`): the units timed since the last drain in issue order, whether the next
/// unit may chain on the last one, the stream's free marks and its timing slots.
#[derive(Default)]
pub(super) struct Lane {
    units: Vec<Unit>,
    /// Nothing was issued to the stream since the last unit of `units`.
    open: bool,
    /// Timing events not in use (of the stream's device).
    pool: Vec<Event>,
    /// The device's clock origin exists ([`Timer::ensure_base`] was called for it).
    based: bool,
    /// The device's `%globaltimer` is calibrated ([`Timer::ensure_timer`] succeeded), so
    /// a stamped unit takes no lock but this lane's.
    calibrated: bool,
    /// The end of the last unit drained, in ms after the clock origin: the start of a
    /// unit that chained on it while the drain ran (started before, finished after).
    drained_end: Option<f64>,
    slots: Slots,
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

    /// Whether the last unit's work is still pending on `raw`: its end mark's query, or
    /// the stream's after a stamped batch (nothing else went to the stream since: `open`).
    fn pending(&self, raw: sys::CUstream) -> bool {
        match self.units.last().map(|u| &u.end) {
            // SAFETY: a live event of this (current) context.
            Some(Mark::Event(e)) => matches!(unsafe { result::event_query(e.raw()) }, Ok(false)),
            // SAFETY: a live stream of the current context.
            Some(Mark::Stamp(_)) => matches!(unsafe { result::stream_query(raw) }, Ok(false)),
            _ => false,
        }
    }
}

/// A device's clock origin.
struct Base {
    /// Recorded and synchronized once.
    event: Event,
    /// The host instant just after that synchronize.
    at: Instant,
    /// `%globaltimer` at the origin (ns), once calibrated (the first stamped batch).
    timer_ns: Option<i64>,
}

/// Each device's clock origin. Dropping it destroys their events (the marks go with
/// the streams' lanes).
#[derive(Default)]
pub(super) struct Timer {
    base: Mutex<BTreeMap<u32, Base>>,
    /// Making a timing slot failed (its memory, the clock origin or the calibration):
    /// units stop stamping themselves and run between marks (a flag read without a lock
    /// on every launch; set at most once).
    stamps_failed: AtomicBool,
}

impl Timer {
    /// Whether units may stamp themselves (making a timing slot never failed).
    pub(super) fn stamps(&self) -> bool {
        !self.stamps_failed.load(Ordering::Relaxed)
    }

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
        let open = l.open && !l.units.is_empty();
        match start_rule(open, adjacent, || l.pending(raw)) {
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
            start: start.map_or(Mark::Chained, Mark::Event),
            end: Mark::Event(end),
        });
        l.open = true;
    }

    /// A timing slot for a batch about to be launched on stream `lane` (`raw`, of
    /// `device` with context `ctx` current; `func`, the device's copy kernel): its index
    /// and device address. The device's clock origin and its timer calibration come
    /// first if missing (see the module docs: a few µs, once per device). Errors: the
    /// failing driver call (the unit then runs between marks or untimed); after any
    /// failure every later call fails at once ([`Timer::stamps`] turns false: units run
    /// between marks).
    pub(super) fn stamp_slot(
        &self,
        lane: &Mutex<Lane>,
        (device, ctx, raw): (u32, &Arc<Context>, sys::CUstream),
        func: sys::CUfunction,
    ) -> Result<(u32, u64), DriverError> {
        if !self.stamps() {
            return Err(DriverError::new(
                "timer calibration failed before",
                sys::cudaError_enum::CUDA_ERROR_UNKNOWN,
            ));
        }
        let mut l = lock(lane);
        let r = self.slot_in(&mut l, (device, ctx, raw), func);
        if r.is_err() {
            self.stamps_failed.store(true, Ordering::Relaxed);
        }
        r
    }

    /// [`Timer::stamp_slot`] under the lane's lock.
    fn slot_in(
        &self,
        l: &mut Lane,
        (device, ctx, raw): (u32, &Arc<Context>, sys::CUstream),
        func: sys::CUfunction,
    ) -> Result<(u32, u64), DriverError> {
        if !l.based {
            self.ensure_base(device, ctx, raw)?;
            l.based = true;
        }
        let slot = l.slots.take(ctx, raw)?;
        if !l.calibrated {
            if let Err(e) = self.ensure_timer(device, ctx, raw, (func, slot.1)) {
                l.slots.free.push(slot.0);
                return Err(e);
            }
            l.calibrated = true;
        }
        Ok(slot)
    }

    /// Keeps the unit of calls `seqs` (a batch, or a built-in kernel) launched with
    /// timing slot `slot` for [`Timer::drain`]; the stream's next unit may chain on it.
    pub(super) fn finish_stamped(
        &self,
        lane: &Mutex<Lane>,
        (seqs, batched): (Seqs, bool),
        slot: u32,
    ) {
        let mut l = lock(lane);
        l.units.push(Unit {
            seqs,
            batched,
            start: Mark::Stamp(slot),
            end: Mark::Stamp(slot),
        });
        l.open = true;
    }

    /// Returns timing slot `slot`, whose batch was not launched with it.
    pub(super) fn discard_slot(&self, lane: &Mutex<Lane>, slot: u32) {
        lock(lane).slots.free.push(slot);
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
        base.insert(
            device,
            Base {
                event: e,
                at: Instant::now(),
                timer_ns: None,
            },
        );
        Ok(())
    }

    /// Calibrates the device's `%globaltimer` against its clock origin once (see the
    /// module docs), with copy kernel `func` writing slot `addr` on `raw` (context `ctx`
    /// current); the origin exists. Synchronizes `raw` [`CALIBRATIONS`] times. Errors: a
    /// failing driver call, or no stamp read back (the timer stays uncalibrated).
    fn ensure_timer(
        &self,
        device: u32,
        ctx: &Arc<Context>,
        raw: sys::CUstream,
        (func, addr): (sys::CUfunction, u64),
    ) -> Result<(), DriverError> {
        let mut base = lock(&self.base);
        let Some(b) = base.get_mut(&device) else {
            return Err(DriverError::new(
                "timer calibration",
                sys::cudaError_enum::CUDA_ERROR_NOT_INITIALIZED,
            ));
        };
        if b.timer_ns.is_some() {
            return Ok(());
        }
        let mut best: Option<i64> = None;
        for _ in 0..CALIBRATIONS {
            let mut launch = Launch::stamp_only(addr);
            // SAFETY: the copy kernel of this (current) context on a live stream of it;
            // the slot is live device memory of the stream, zeroed before in its order.
            unsafe { launch.issue(func, raw) }?;
            let e = Event::create(ctx, 0)?;
            // SAFETY: a live event and a live stream of the same, current context.
            unsafe { result::event_record(e.raw(), raw) }?;
            let mut words = [0u64; SLOT_WORDS];
            // SAFETY: the slot's words, into a host array that outlives the synchronize
            // below (pageable memory: the copy completes before the call returns or at
            // the synchronize).
            unsafe {
                result::memcpy_dtoh_async(
                    words.as_mut_ptr() as *mut c_void,
                    addr,
                    SLOT_WORDS * 8,
                    raw,
                )
            }?;
            // SAFETY: a live stream of the current context.
            unsafe { result::stream_synchronize(raw) }?;
            let since = b.event.elapsed_ms(&e)? as f64;
            let bound = clock_origin(words[1], since);
            best = best.max(bound);
        }
        match best {
            Some(ns) => {
                b.timer_ns = Some(ns);
                Ok(())
            }
            // The kernel wrote no stamp: stamped units would all be unreadable.
            None => Err(DriverError::new(
                "timer calibration (no stamp read back)",
                sys::cudaError_enum::CUDA_ERROR_UNKNOWN,
            )),
        }
    }

    /// The timings of every call of every unit timed since the last call (waits for
    /// their work), one per `seq`, stream by stream in issue order; `streams` is the
    /// plugin's stream table. A unit whose marks or stamps cannot be read is left out,
    /// and so is a unit chained on it. Read marks and slots go back to their stream's
    /// pools; each stream's next unit starts fresh (one that chained while this ran
    /// starts at the last end read here, `Lane::drained_end`).
    pub(super) fn drain(&self, streams: &Streams) -> Vec<Timing> {
        let mut out = Vec::new();
        let streams = streams.read();
        for (i, st) in streams.iter().enumerate() {
            let (units, prev, chunks) = {
                let mut l = lock(&st.timing);
                l.open = false;
                let units = std::mem::take(&mut l.units);
                let stamped = units.iter().any(|u| matches!(u.end, Mark::Stamp(_)));
                let chunks: Vec<u64> = match stamped {
                    true => l.slots.chunks.iter().map(DeviceBlock::ptr).collect(),
                    false => Vec::new(),
                };
                (units, l.drained_end, chunks)
            };
            if units.is_empty() {
                continue;
            }
            let stream = StreamHandle(i as u32);
            let mut end = None;
            // The slots' words (after every unit issued to the stream so far); not read,
            // their kernels may still run, so the slots are not reused.
            let mut read = false;
            if st.context().bind().is_ok() {
                let words = read_slots(&chunks, st.raw());
                read = words.is_some();
                let base = lock(&self.base);
                if let Some(b) = base.get(&st.device) {
                    let words = words.unwrap_or_default();
                    end = read_units(&units, b, &words, (stream, prev), &mut out);
                }
            }
            let mut l = lock(&st.timing);
            l.drained_end = end;
            for u in units {
                // A stamped start is the same slot as its unit's end: freed once.
                if let Mark::Event(e) = u.start {
                    l.pool.push(e);
                }
                match u.end {
                    Mark::Event(e) => l.pool.push(e),
                    Mark::Stamp(k) if read => l.slots.free.push(k),
                    Mark::Stamp(_) | Mark::Chained => {}
                }
            }
        }
        out
    }
}

/// Every word of the timing-slot chunks at device addresses `chunks` (in order), read
/// on `raw` (context current) after the work issued to it so far. `None` if a copy
/// fails.
fn read_slots(chunks: &[u64], raw: sys::CUstream) -> Option<Vec<u64>> {
    if chunks.is_empty() {
        return Some(Vec::new());
    }
    let per = SLOTS_PER_CHUNK as usize * SLOT_WORDS;
    let mut words = vec![0u64; chunks.len() * per];
    for (k, &ptr) in chunks.iter().enumerate() {
        let dst = words[k * per..].as_mut_ptr() as *mut c_void;
        // SAFETY: a live chunk of `per` words (chunks live as long as the stream) into
        // `per` words of `words`, which outlives the synchronize below.
        unsafe { result::memcpy_dtoh_async(dst, ptr, per * 8, raw) }.ok()?;
    }
    // SAFETY: a live stream of the current context.
    unsafe { result::stream_synchronize(raw) }.ok()?;
    Some(words)
}

/// The timings of one stream's `units` (in issue order) against clock origin `b`, with
/// the stream's slot words `words`, appended to `out`; `prev`: the end of the unit
/// before the first (the last one drained before). Returns the last unit's end.
fn read_units(
    units: &[Unit],
    b: &Base,
    words: &[u64],
    (stream, mut prev): (StreamHandle, Option<f64>),
    out: &mut Vec<Timing>,
) -> Option<f64> {
    let at = |ms: f64| b.at + Duration::from_secs_f64(ms.max(0.0) / 1e3);
    // A stamped slot's (start, end) in ms after the origin.
    let span = |k: u32| {
        let w = words.get(k as usize * SLOT_WORDS..(k as usize + 1) * SLOT_WORDS)?;
        stamp_span([w[0], w[1]], b.timer_ns?)
    };
    // `prev`: the previous unit's end, in ms after the origin (None: unknown).
    for u in units {
        // An end mark is waited for first, so the start has completed too.
        let end = match &u.end {
            Mark::Event(e) => e
                .synchronize()
                .and_then(|()| b.event.elapsed_ms(e))
                .ok()
                .map(f64::from),
            Mark::Stamp(k) => span(*k).map(|s| s.1),
            Mark::Chained => None,
        };
        let start = match &u.start {
            Mark::Event(s) => b.event.elapsed_ms(s).ok().map(f64::from),
            Mark::Stamp(k) => span(*k).map(|s| s.0),
            Mark::Chained => prev,
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
