//! Pinned host memory of the CUDA plugin: every host buffer is page-locked
//! (`cuMemHostAlloc`, `PORTABLE` so every context can use it, not write-combined since
//! the host reads D2H results), and freed blocks are kept for reuse up to a byte limit
//! (pinning is slow: about 1 ms per 10 MiB).

use super::devmem::inside;
use super::driver::{sys, Context, PinnedHost};
use super::{backend, lock};
use crate::plugin::{HostPtr, PluginCall, PluginError};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};

/// The live pinned blocks (address → block, whose length is its capacity) and the cache
/// of freed ones. Dropping it frees them all (live first); the owner synchronized every
/// stream first.
pub(super) struct HostMemory {
    live: RwLock<BTreeMap<u64, PinnedHost>>,
    /// Freed blocks kept for reuse.
    cache: Mutex<Vec<PinnedHost>>,
    /// Bytes the cache keeps at most.
    limit: u64,
    /// The context new blocks are allocated in (device 0's).
    ctx: Arc<Context>,
}

impl HostMemory {
    /// No blocks; freed ones cached up to `limit` bytes; new ones allocated in `ctx`.
    pub(super) fn new(ctx: Arc<Context>, limit: u64) -> HostMemory {
        HostMemory {
            live: RwLock::new(BTreeMap::new()),
            cache: Mutex::new(Vec::new()),
            limit,
            ctx,
        }
    }

    fn read(&self) -> RwLockReadGuard<'_, BTreeMap<u64, PinnedHost>> {
        self.live.read().unwrap_or_else(|p| p.into_inner())
    }

    /// `bytes` zeroed bytes: the smallest cached block that fits and is at most twice the
    /// size, else a new pinned block. Errors: [`PluginError::OutOfMemory`], or the
    /// failing driver call.
    pub(super) fn alloc(&self, bytes: u64) -> Result<HostPtr, PluginError> {
        let call = PluginCall::AllocHost;
        let reuse = {
            let mut cache = lock(&self.cache);
            let best = cache
                .iter()
                .enumerate()
                .filter(|(_, b)| {
                    let cap = b.len() as u64;
                    cap >= bytes && cap <= bytes.max(1).saturating_mul(2)
                })
                .min_by_key(|(_, b)| b.len())
                .map(|(i, _)| i);
            best.map(|i| cache.swap_remove(i))
        };
        let block = match reuse {
            Some(b) => b,
            // PORTABLE: pinned for every context; not write-combined, since the host reads
            // D2H results.
            None => match PinnedHost::alloc(
                &self.ctx,
                bytes.max(1) as usize,
                sys::CU_MEMHOSTALLOC_PORTABLE,
            ) {
                Ok(b) => b,
                Err(e) if e.is_out_of_memory() => {
                    return Err(PluginError::OutOfMemory { call, bytes })
                }
                Err(e) => return Err(backend(call)(e)),
            },
        };
        // SAFETY: a pinned block of `len() >= bytes` bytes no stream uses (fresh, or
        // freed under contract rule 3).
        unsafe { std::ptr::write_bytes(block.as_ptr() as *mut u8, 0, bytes as usize) };
        let ptr = block.addr();
        // Keyed by address; its length is the capacity a later reuse needs and the range
        // ranges are checked against.
        self.live
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(ptr, block);
        Ok(HostPtr(ptr))
    }

    /// The capacity of live block `ptr`, if it is one.
    pub(super) fn capacity(&self, ptr: HostPtr) -> Option<u64> {
        self.read().get(&ptr.0).map(|b| b.len() as u64)
    }

    /// Frees live block `ptr` into the cache, or to the driver (`cuMemFreeHost`) when the
    /// cache is full. The caller issued the held copies that use it.
    /// Errors: [`PluginError::InvalidPointer`] for a block not live; the driver's.
    pub(super) fn free(&self, ptr: HostPtr) -> Result<(), PluginError> {
        let call = PluginCall::FreeHost;
        let block = self
            .live
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&ptr.0)
            .ok_or(PluginError::InvalidPointer {
                call,
                space: "host",
                ptr: ptr.0,
                bytes: 0,
            })?;
        let mut cache = lock(&self.cache);
        let cached: u64 = cache.iter().map(|b| b.len() as u64).sum();
        if cached + block.len() as u64 <= self.limit {
            cache.push(block);
            return Ok(());
        }
        drop(cache);
        // A live pinned block of ours, unused by any stream (caller, rule 3).
        block.free().map_err(backend(call))
    }

    /// Checks that `ptr..ptr+bytes` lies inside one live block.
    /// Errors: [`PluginError::InvalidPointer`] (`host` space).
    pub(super) fn check(&self, call: PluginCall, ptr: u64, bytes: u64) -> Result<(), PluginError> {
        inside(&self.read(), |b| b.len() as u64, ptr, bytes)
            .map(|_| ())
            .ok_or(PluginError::InvalidPointer {
                call,
                space: "host",
                ptr,
                bytes,
            })
    }
}
