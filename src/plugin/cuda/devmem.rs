//! Device memory of the CUDA plugin: stream-ordered allocations (`cuMemAllocAsync` /
//! `cuMemFreeAsync` on the op's stream, from the device's default pool), the table of
//! live allocations that every address is checked against, and the per-stream
//! device-block cache in front of the driver.
//!
//! # The device-block cache
//!
//! `free(s, p)` of a block of size class `c` puts `p` on the list `(s, c)` instead of
//! calling `cuMemFreeAsync`; `alloc(s, n)` with `size_class(n) == c` pops a block from
//! `(s, c)` without any CUDA call. This is safe by stream order (contract rules 1 and 4):
//! every use of the old allocation, on any stream, was ordered before the free on `s` (the
//! schedule's events guarantee that for other streams); every use of the new allocation
//! is issued to `s` after the alloc, or to another stream behind an event recorded on `s`
//! after the alloc, so it runs after the free, i.e. after every old use. It is the same
//! argument that lets the driver's stream-ordered pool reuse memory on one stream, minus
//! the driver calls (about 25 µs per region with four streams on the H200).
//!
//! Blocks are allocated with their class's capacity ([`size_class`], shared with the host
//! plugin's free lists), so every block of a class fits every request of that class.
//! Cached bytes per device are capped; past the cap a free goes to the driver. An
//! out-of-memory `cuMemAllocAsync` releases the whole cache (stream-ordered) and retries
//! once. Cached blocks are not "live": they do not count in
//! [`CudaPlugin::live_device_allocs`], and any address check against them fails.
//!
//! The lists live with their streams ([`StreamBlocks`], one lock each); the byte count per
//! device is reserved with an atomic update before a block is cached, so the cap holds
//! with several threads freeing at once.

use super::driver::{result, sys, Context};
use super::plugin::CudaPlugin;
use super::{backend, lock};
use crate::plugin::{size_class, DevicePtr, PluginCall, PluginError, StreamHandle};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Looks up `ptr..ptr+bytes` in an address → (.., size) table: the entry whose range
/// holds it (a zero-size entry counts as one byte).
pub(super) fn inside<V>(
    table: &BTreeMap<u64, V>,
    size: impl Fn(&V) -> u64,
    ptr: u64,
    bytes: u64,
) -> Option<&V> {
    let (&base, v) = table.range(..=ptr).next_back()?;
    let end = ptr.checked_add(bytes)?;
    (end <= base.checked_add(size(v).max(1))?).then_some(v)
}

/// One stream's lists of the device-block cache: size class → cached block addresses.
/// Dropping it frees the blocks (`cuMemFree`; the owner synchronized the stream first),
/// recording errors in the context.
pub(super) struct StreamBlocks {
    lists: Mutex<BTreeMap<u64, Vec<u64>>>,
    ctx: Arc<Context>,
}

impl StreamBlocks {
    /// Empty lists for a stream of `ctx`.
    pub(super) fn new(ctx: Arc<Context>) -> StreamBlocks {
        StreamBlocks {
            lists: Mutex::new(BTreeMap::new()),
            ctx,
        }
    }

    /// A cached block of size class `class`, taken off its list.
    pub(super) fn pop(&self, class: u64) -> Option<u64> {
        lock(&self.lists).get_mut(&class).and_then(Vec::pop)
    }

    /// Caches block `p` of size class `class`.
    pub(super) fn push(&self, class: u64, p: u64) {
        lock(&self.lists).entry(class).or_default().push(p);
    }

    /// Every cached block, taken off the lists.
    pub(super) fn take(&self) -> BTreeMap<u64, Vec<u64>> {
        std::mem::take(&mut *lock(&self.lists))
    }

    /// Number of cached blocks.
    pub(super) fn count(&self) -> usize {
        lock(&self.lists).values().map(Vec::len).sum()
    }
}

impl Drop for StreamBlocks {
    fn drop(&mut self) {
        let lists = std::mem::take(self.lists.get_mut().unwrap_or_else(|p| p.into_inner()));
        for p in lists.into_values().flatten() {
            self.ctx.record(self.ctx.bind());
            // SAFETY: a cached block of ours, freed once (a cached block is not in the live
            // table); the owner synchronized every stream.
            self.ctx.record(unsafe { result::mem_free(p) });
        }
    }
}

/// The live device allocations and the cache's counters (its lists are per stream:
/// [`StreamBlocks`]). Dropping it frees the live allocations (`cuMemFree`; the owner
/// synchronized every stream first), recording errors in their contexts.
pub(super) struct DeviceMemory {
    /// Live allocations: address → (device, bytes asked for). Read by the address checks
    /// of every copy and launch, written by allocs and frees.
    live: RwLock<BTreeMap<u64, (u32, u64)>>,
    /// Cached bytes per device (index = device).
    cached: Vec<AtomicU64>,
    /// Allocations served from the cache / by the driver (for reports).
    hits: AtomicU64,
    misses: AtomicU64,
    /// The cache's limit in bytes per device (0: off).
    limit: u64,
    /// Each device's context (index = device), to free what is left.
    ctxs: Vec<Arc<Context>>,
}

impl DeviceMemory {
    /// The block cache's limit in bytes per device (0: off).
    pub(super) fn cache_limit(&self) -> u64 {
        self.limit
    }

    /// An empty table for devices with contexts `ctxs`, caching up to `limit` bytes per
    /// device (0: no cache).
    pub(super) fn new(ctxs: Vec<Arc<Context>>, limit: u64) -> DeviceMemory {
        DeviceMemory {
            live: RwLock::new(BTreeMap::new()),
            cached: ctxs.iter().map(|_| AtomicU64::new(0)).collect(),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            limit,
            ctxs,
        }
    }

    fn read(&self) -> RwLockReadGuard<'_, BTreeMap<u64, (u32, u64)>> {
        self.live.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, BTreeMap<u64, (u32, u64)>> {
        self.live.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Number of live allocations.
    pub(super) fn live_count(&self) -> usize {
        self.read().len()
    }

    /// `(hits, misses)` of the cache so far.
    pub(super) fn hits_misses(&self) -> (u64, u64) {
        (
            self.hits.load(Ordering::Relaxed),
            self.misses.load(Ordering::Relaxed),
        )
    }

    /// Checks that `ptr..ptr+bytes` lies inside one live allocation of `device`.
    /// Errors: [`PluginError::InvalidPointer`] (`device` space).
    pub(super) fn check(
        &self,
        call: PluginCall,
        device: u32,
        ptr: u64,
        bytes: u64,
    ) -> Result<(), PluginError> {
        self.check_in(&self.read(), call, device, ptr, bytes)
    }

    /// The live table, read-locked, for several [`DeviceMemory::check_in`] in a row.
    pub(super) fn live(&self) -> RwLockReadGuard<'_, BTreeMap<u64, (u32, u64)>> {
        self.read()
    }

    /// [`DeviceMemory::check`] against a table already locked ([`DeviceMemory::live`]).
    pub(super) fn check_in(
        &self,
        live: &BTreeMap<u64, (u32, u64)>,
        call: PluginCall,
        device: u32,
        ptr: u64,
        bytes: u64,
    ) -> Result<(), PluginError> {
        match inside(live, |&(_, b)| b, ptr, bytes) {
            Some(&(d, _)) if d == device => Ok(()),
            _ => Err(PluginError::InvalidPointer {
                call,
                space: "device",
                ptr,
                bytes,
            }),
        }
    }

    /// Gives `lists`' blocks (just taken from a stream of `device`) back to the cache's
    /// byte count.
    fn uncount(&self, device: u32, lists: &BTreeMap<u64, Vec<u64>>) {
        let bytes: u64 = lists.iter().map(|(c, v)| c * v.len() as u64).sum();
        if let Some(b) = self.cached.get(device as usize) {
            let _ = b.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |x| {
                Some(x.saturating_sub(bytes))
            });
        }
    }
}

impl Drop for DeviceMemory {
    fn drop(&mut self) {
        let live = std::mem::take(self.live.get_mut().unwrap_or_else(|p| p.into_inner()));
        for (p, (d, _)) in live {
            let ctx = &self.ctxs[d as usize];
            ctx.record(ctx.bind());
            // SAFETY: a live allocation of ours, freed once; the owner synchronized every
            // stream.
            ctx.record(unsafe { result::mem_free(p) });
        }
    }
}

/// The plugin's stream-ordered device memory calls; `CudaPlugin::stream_call` looked
/// the stream up (`device`, `raw`) and made its context current.
impl CudaPlugin {
    /// `alloc` on `stream`: a cached block of the size class if the stream has one (no
    /// driver call), else `cuMemAllocAsync`; on out-of-memory the cache is released and
    /// the allocation tried once more.
    pub(super) fn alloc_raw(
        &self,
        stream: StreamHandle,
        device: u32,
        raw: sys::CUstream,
        bytes: u64,
    ) -> Result<DevicePtr, PluginError> {
        let call = PluginCall::Alloc;
        let mem = &self.dev_mem;
        let limit = mem.limit;
        let class = size_class(bytes);
        if limit > 0 {
            let hit = self
                .streams
                .read()
                .get(stream.0 as usize)
                .and_then(|st| st.blocks.pop(class));
            if let Some(p) = hit {
                mem.cached[device as usize].fetch_sub(class, Ordering::Relaxed);
                mem.hits.fetch_add(1, Ordering::Relaxed);
                mem.write().insert(p, (device, bytes));
                return Ok(DevicePtr(p));
            }
            mem.misses.fetch_add(1, Ordering::Relaxed);
        }
        // Cached blocks have their class's capacity; without the cache, what was asked.
        let cap = if limit > 0 { class } else { bytes.max(1) };
        // SAFETY: a live stream; its context is current.
        let mut r = unsafe { result::mem_alloc_async(cap as usize, raw) };
        if limit > 0 && r.as_ref().is_err_and(|e| e.is_out_of_memory()) {
            // Give the cached blocks back to the pool and try once more.
            self.flush_dev_cache().map_err(backend(call))?;
            self.devices[device as usize]
                .ctx
                .bind()
                .map_err(backend(call))?;
            // SAFETY: as above.
            r = unsafe { result::mem_alloc_async(cap as usize, raw) };
        }
        let p = match r {
            Ok(p) => p,
            Err(e) if e.is_out_of_memory() => return Err(PluginError::OutOfMemory { call, bytes }),
            Err(e) => return Err(backend(call)(e)),
        };
        mem.write().insert(p, (device, bytes));
        Ok(DevicePtr(p))
    }

    /// `free` on `stream`: onto the stream's cache list if the device's cache has room
    /// (no driver call), else the held copies and then `cuMemFreeAsync`.
    pub(super) fn free_raw(
        &self,
        stream: StreamHandle,
        device: u32,
        raw: sys::CUstream,
        ptr: DevicePtr,
    ) -> Result<(), PluginError> {
        let call = PluginCall::Free;
        let mem = &self.dev_mem;
        let found = mem.read().get(&ptr.0).copied();
        let bytes = match found {
            Some((d, b)) if d == device => b,
            _ => {
                return Err(PluginError::InvalidPointer {
                    call,
                    space: "device",
                    ptr: ptr.0,
                    bytes: 0,
                })
            }
        };
        let limit = mem.limit;
        if limit > 0 {
            let class = size_class(bytes);
            let cached = &mem.cached[device as usize];
            let reserved = cached
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
                    (c.saturating_add(class) <= limit).then_some(c + class)
                })
                .is_ok();
            if reserved {
                mem.write().remove(&ptr.0);
                if let Some(st) = self.streams.read().get(stream.0 as usize) {
                    st.blocks.push(class, ptr.0);
                    return Ok(());
                }
                // No such stream (cannot happen: the call looked it up): free below.
                cached.fetch_sub(class, Ordering::Relaxed);
                mem.write().insert(ptr.0, (device, bytes));
            }
        }
        // Held copies may use the block: they go first, in stream order.
        self.flush(call, stream)?;
        // Out of the live table before the driver can hand the address out again (to an
        // alloc on another thread); back in if the free fails.
        mem.write().remove(&ptr.0);
        // SAFETY: `ptr` is a live allocation of this device (checked); stream-ordered free.
        if let Err(e) = unsafe { result::mem_free_async(ptr.0, raw) } {
            mem.write().insert(ptr.0, (device, bytes));
            return Err(backend(call)(e));
        }
        Ok(())
    }

    /// Releases every cached device block with a stream-ordered free on the stream that
    /// cached it. Errors: the first failing `cuMemFreeAsync` (the remaining blocks are
    /// still released).
    pub(super) fn flush_dev_cache(&self) -> Result<(), String> {
        let streams = self.streams.read();
        let mut first = Ok(());
        for (i, st) in streams.iter().enumerate() {
            let lists = st.blocks.take();
            self.dev_mem.uncount(st.device, &lists);
            if let Err(e) = st.context().bind() {
                first = first.and(Err(e.into()));
                continue;
            }
            // Held copies may use these blocks: they go first, in stream order.
            first = first.and(self.issue_held(StreamHandle(i as u32), st));
            for p in lists.into_values().flatten() {
                // SAFETY: a block of ours that no later op uses (it was freed by the
                // executor on `st`, and cached blocks are handed out only by `alloc`).
                let r = unsafe { result::mem_free_async(p, st.raw()) };
                first = first.and(r.map_err(String::from));
            }
        }
        first
    }

    /// Device blocks held by the per-stream cache (not live), and allocations served from
    /// the cache and by the driver so far: `(cached blocks, hits, misses)`.
    pub fn device_cache_stats(&self) -> (usize, u64, u64) {
        let blocks = self.streams.read().iter().map(|st| st.blocks.count()).sum();
        let (hits, misses) = self.dev_mem.hits_misses();
        (blocks, hits, misses)
    }

    /// Number of live device allocations (for leak checks).
    pub fn live_device_allocs(&self) -> usize {
        self.dev_mem.live_count()
    }
}
