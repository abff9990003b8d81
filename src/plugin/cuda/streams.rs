//! The CUDA plugin's stream and event tables.
//!
//! - **Streams.** A per-device pool of non-blocking streams (`cuStreamCreate` with
//!   `CU_STREAM_NON_BLOCKING`), created once and grown on demand; a [`StreamHandle`]
//!   indexes the table. Each stream carries its own lists of the device-block cache and
//!   its batch of held copies, each behind its own lock, so threads issuing different
//!   streams do not contend. Each device has a second pool of *high-priority* streams
//!   (`cuStreamCreateWithPriority` at the greatest priority of
//!   `cuCtxGetStreamPriorityRange`, CUDA Driver API §6.18), for the schedule's
//!   high-priority streams (OpenMP `priority(n)`); the pool's streams are made at the
//!   default priority.
//! - **Events.** `CU_EVENT_DISABLE_TIMING`, pooled: destroying an [`EventHandle`] returns
//!   the event to a per-device free list (contract rule 2 allows re-recording: waits
//!   already issued keep the state they captured, as `cuStreamWaitEvent` does).

use super::batch::Batch;
use super::devmem::StreamBlocks;
use super::driver::{self, sys, Context};
use super::library::{Sticky, StreamLibrary};
use super::timing::Lane;
use super::{backend, lock};
use crate::plugin::{EventHandle, PluginCall, PluginError, StreamHandle};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, RwLockReadGuard};

/// One stream of the pool. Dropping it frees its cached device blocks, then destroys the
/// stream (field order); the owner synchronizes it first.
pub(super) struct Stream {
    pub(super) device: u32,
    /// cuBLAS / cuSOLVER state of the stream's library calls (`library.rs`), made on the
    /// first one; dropped first (its handles are bound to the stream).
    pub(super) library: OnceLock<Result<StreamLibrary, String>>,
    /// The `potrf` records of graphs launched on the stream, checked at its next
    /// synchronize (`library.rs`, `capture.rs`).
    pub(super) watched: Mutex<Vec<Arc<Sticky>>>,
    /// This stream's lists of the device-block cache (`devmem.rs`).
    pub(super) blocks: StreamBlocks,
    pub(super) stream: driver::Stream,
    /// Stream calls on it that returned `Ok` (the next call's `Timing::seq`, and the call
    /// a `potrf` failure names: `library.rs`); counted with and without timing
    /// (`CudaPlugin::stream_call`).
    pub(super) seq: AtomicU64,
    /// Small copies held back to be issued as one copy-kernel launch (`batch.rs`); issued
    /// under this lock, before any other driver call on the stream.
    pub(super) batch: Mutex<Batch>,
    /// With timing: the stream's timed units and free marks (`timing.rs`), behind a lock
    /// of its own so that streams issued from different threads do not contend.
    pub(super) timing: Mutex<Lane>,
}

impl Stream {
    /// The raw handle.
    pub(super) fn raw(&self) -> sys::CUstream {
        self.stream.raw()
    }

    /// The stream's context (its device's).
    pub(super) fn context(&self) -> &Arc<Context> {
        self.stream.context()
    }
}

/// Every stream of every device, and the pool of each device.
#[derive(Default)]
pub(super) struct Streams {
    table: RwLock<Vec<Stream>>,
    /// By `(device, high priority)`.
    pools: Mutex<BTreeMap<(u32, bool), Vec<StreamHandle>>>,
}

impl Streams {
    /// The table, read-locked.
    pub(super) fn read(&self) -> RwLockReadGuard<'_, Vec<Stream>> {
        self.table.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The first `count` streams of `device`'s pool (context `ctx`), creating the missing
    /// ones; with `high`, of its high-priority pool (module docs). Errors: the failing
    /// `cuStreamCreate` / `cuStreamCreateWithPriority` / `cuCtxGetStreamPriorityRange`
    /// (or context binding); the streams made before it stay in the pool.
    pub(super) fn create(
        &self,
        device: u32,
        ctx: &Arc<Context>,
        count: u32,
        high: bool,
    ) -> Result<Vec<StreamHandle>, PluginError> {
        let call = match high {
            true => PluginCall::CreatePriorityStreams,
            false => PluginCall::CreateStreams,
        };
        let mut pools = lock(&self.pools);
        let pool = pools.entry((device, high)).or_default();
        while pool.len() < count as usize {
            let flags = driver::Stream::NON_BLOCKING;
            let stream = match high {
                true => driver::Stream::create_high_priority(ctx, flags),
                false => driver::Stream::create(ctx, flags),
            }
            .map_err(backend(call))?;
            let mut streams = self.table.write().unwrap_or_else(|p| p.into_inner());
            pool.push(StreamHandle(streams.len() as u32));
            streams.push(Stream {
                device,
                library: OnceLock::new(),
                watched: Mutex::new(Vec::new()),
                blocks: StreamBlocks::new(ctx.clone()),
                stream,
                seq: AtomicU64::new(0),
                batch: Mutex::new(Batch::default()),
                timing: Mutex::new(Lane::default()),
            });
        }
        Ok(pool[..count as usize].to_vec())
    }

    /// The stream's device index and raw handle (one read lock); with `count`, its `seq`
    /// advanced under the same lock (the call's, given back by [`Streams::uncount`] if
    /// the call fails).
    pub(super) fn lookup(
        &self,
        call: PluginCall,
        s: StreamHandle,
        count: bool,
    ) -> Result<(u32, sys::CUstream), PluginError> {
        let streams = self.read();
        let st = streams
            .get(s.0 as usize)
            .ok_or_else(|| PluginError::InvalidHandle {
                call,
                what: format!("{s}"),
            })?;
        if count {
            st.seq.fetch_add(1, Ordering::Relaxed);
        }
        Ok((st.device, st.raw()))
    }

    /// Gives back the `seq` a failed call took with [`Streams::lookup`].
    pub(super) fn uncount(&self, s: StreamHandle) {
        if let Some(st) = self.read().get(s.0 as usize) {
            st.seq.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// The `seq` the next successful call on `s` gets (0 for an unknown stream).
    pub(super) fn next_seq(&self, s: StreamHandle) -> u64 {
        self.read()
            .get(s.0 as usize)
            .map_or(0, |st| st.seq.load(Ordering::Relaxed))
    }
}

/// A pooled event and its device.
struct PooledEvent {
    device: u32,
    event: driver::Event,
    /// The stream of its latest record (named in `synchronize_event` errors).
    recorded_on: Option<StreamHandle>,
}

/// The live events (an [`EventHandle`] indexes them; a destroyed slot is reused) and the
/// free list of destroyed ones. Dropping it destroys them all.
#[derive(Default)]
pub(super) struct Events {
    live: Mutex<Vec<Option<PooledEvent>>>,
    free: Mutex<Vec<PooledEvent>>,
}

impl Events {
    /// A live event of `device` (context `ctx`): from the free list, else a new one
    /// without timing. Errors: the failing `cuEventCreate` (or context binding).
    pub(super) fn create(
        &self,
        device: u32,
        ctx: &Arc<Context>,
    ) -> Result<EventHandle, PluginError> {
        let call = PluginCall::CreateEvent;
        let pooled = {
            let mut free = lock(&self.free);
            free.iter()
                .position(|e| e.device == device)
                .map(|i| free.swap_remove(i))
        };
        let ev = match pooled {
            Some(e) => PooledEvent {
                recorded_on: None,
                ..e
            },
            None => PooledEvent {
                recorded_on: None,
                device,
                event: driver::Event::create(ctx, driver::Event::DISABLE_TIMING)
                    .map_err(backend(call))?,
            },
        };
        let mut events = lock(&self.live);
        if let Some(i) = events.iter().position(|e| e.is_none()) {
            events[i] = Some(ev);
            return Ok(EventHandle(i as u32));
        }
        events.push(Some(ev));
        Ok(EventHandle(events.len() as u32 - 1))
    }

    /// Returns `event` to the free list. Errors: [`PluginError::InvalidHandle`] for an
    /// event not live.
    pub(super) fn destroy(&self, event: EventHandle) -> Result<(), PluginError> {
        let ev = lock(&self.live)
            .get_mut(event.0 as usize)
            .and_then(|e| e.take())
            .ok_or_else(|| PluginError::InvalidHandle {
                call: PluginCall::DestroyEvent,
                what: format!("{event}"),
            })?;
        // Pooled: waits already issued keep their captured state (cuStreamWaitEvent
        // semantics), so the event can be re-recorded by a later user.
        lock(&self.free).push(ev);
        Ok(())
    }

    /// The raw handle of live event `e`; with `device`, it must belong to that device.
    /// Errors: [`PluginError::InvalidHandle`] naming the event (and both devices).
    pub(super) fn raw(
        &self,
        call: PluginCall,
        device: Option<u32>,
        e: EventHandle,
    ) -> Result<sys::CUevent, PluginError> {
        let events = lock(&self.live);
        let ev = live(&events, call, e)?;
        match device {
            Some(device) if ev.device != device => Err(PluginError::InvalidHandle {
                call,
                what: format!("{e} (of device {}, used on device {device})", ev.device),
            }),
            _ => Ok(ev.event.raw()),
        }
    }

    /// [`Events::raw`] for a record of `e` on `stream` of `device`, noting the stream as
    /// the event's latest recorder. Errors: as [`Events::raw`].
    pub(super) fn raw_for_record(
        &self,
        call: PluginCall,
        device: u32,
        stream: StreamHandle,
        e: EventHandle,
    ) -> Result<sys::CUevent, PluginError> {
        let mut events = lock(&self.live);
        let ev = events
            .get_mut(e.0 as usize)
            .and_then(|e| e.as_mut())
            .ok_or_else(|| invalid(call, e))?;
        if ev.device != device {
            return Err(PluginError::InvalidHandle {
                call,
                what: format!("{e} (of device {}, used on device {device})", ev.device),
            });
        }
        ev.recorded_on = Some(stream);
        Ok(ev.event.raw())
    }

    /// Live event `e`'s device, raw handle and latest recording stream (for a host wait on
    /// it). Errors: [`PluginError::InvalidHandle`] naming the event.
    pub(super) fn for_sync(
        &self,
        call: PluginCall,
        e: EventHandle,
    ) -> Result<(u32, sys::CUevent, Option<StreamHandle>), PluginError> {
        let events = lock(&self.live);
        let ev = live(&events, call, e)?;
        Ok((ev.device, ev.event.raw(), ev.recorded_on))
    }
}

fn invalid(call: PluginCall, e: EventHandle) -> PluginError {
    PluginError::InvalidHandle {
        call,
        what: format!("{e}"),
    }
}

/// The live event `e` of `events`. Errors: [`PluginError::InvalidHandle`].
fn live(
    events: &[Option<PooledEvent>],
    call: PluginCall,
    e: EventHandle,
) -> Result<&PooledEvent, PluginError> {
    events
        .get(e.0 as usize)
        .and_then(|e| e.as_ref())
        .ok_or_else(|| invalid(call, e))
}
