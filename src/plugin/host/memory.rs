//! "Device" and host memory of the host plugin: a table of live allocations keyed by
//! address, over [`Block`]s of the host-kernel runtime; address checks against it, host
//! allocations, and the stream-ordered copies and zero fills (device allocation and
//! block reuse are in `alloc.rs`).
//!
//! Blocks are reference-counted: the table holds one reference, and every enqueued op
//! that touches a block holds another, taken when the op is issued. Freeing removes the
//! table's reference (so later calls cannot name the address). The block then either
//! returns to the allocator when the last op using it finishes, or, with the device-block
//! cache on ([`super::HostPluginOptions::device_cache_bytes`]), waits on the freeing
//! stream's free list until an alloc on that stream hands it out again (re-zeroed in
//! stream order, see [`super::HostPlugin`]). Ops of the old allocation still in flight
//! keep their references, so a wrong schedule can give wrong values — an old op reading
//! or clobbering the new allocation, as on a GPU — but never a use-after-free.
//!
//! An allocation may be shorter than its block (a cached block has its size class's
//! capacity, [`crate::plugin::size_class`]): the table keeps the length asked for, and
//! address checks use that length, not the block's capacity.

use super::stream::Work;
use super::{lock, HostPlugin};
use crate::plugin::{DevicePtr, HostPtr, PluginCall, PluginError, StreamHandle};
use crate::runtime::memory::Block;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Live allocations by start address: the block and the allocation's length in bytes
/// (at most the block's capacity).
#[derive(Debug, Default)]
pub struct MemTable {
    blocks: BTreeMap<u64, (Arc<Block>, u64)>,
    /// Removals so far ([`MemTable::epoch`]).
    removals: u64,
}

impl MemTable {
    /// Adds an allocation of `len` bytes (`len <= b.len()`) at the block's address.
    pub fn insert(&mut self, b: Arc<Block>, len: u64) {
        debug_assert!(len <= b.len(), "{len} bytes in a block of {}", b.len());
        self.blocks.insert(b.addr(), (b, len));
    }

    /// Removes the allocation starting exactly at `addr`: its block and length.
    pub fn remove(&mut self, addr: u64) -> Option<(Arc<Block>, u64)> {
        self.removals += 1;
        self.blocks.remove(&addr)
    }

    /// Changes whenever an allocation may have left the table (a removal or a clear):
    /// a range found by [`MemTable::lookup`] at one epoch is found, in the same block,
    /// at every lookup while the epoch stays the same (insertions never move or shrink
    /// an allocation). Graph launches reuse their resolved nodes while it holds.
    pub fn epoch(&self) -> u64 {
        self.removals
    }

    /// The block of the allocation containing `[addr, addr + bytes)`, with the offset of
    /// `addr` in it. The range must lie inside the allocation's length, not just inside
    /// the block's capacity.
    pub fn lookup(&self, addr: u64, bytes: u64) -> Option<(Arc<Block>, u64)> {
        let (start, (b, len)) = self.blocks.range(..=addr).next_back()?;
        let off = addr - start;
        let end = off.checked_add(bytes)?;
        (end <= *len).then(|| (b.clone(), off))
    }

    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    /// Whether any allocation overlaps `[addr, addr + bytes)`.
    pub fn overlaps(&self, addr: u64, bytes: u64) -> bool {
        let end = addr.saturating_add(bytes.max(1));
        self.blocks
            .range(..end)
            .next_back()
            .is_some_and(|(start, (_, len))| start.saturating_add((*len).max(1)) > addr)
    }

    /// Drops every block reference.
    pub fn clear(&mut self) {
        self.removals += 1;
        self.blocks.clear();
    }
}

impl HostPlugin {
    /// Number of live device allocations over all devices (for leak checks). Blocks on
    /// the free lists are not live.
    pub fn live_device_allocs(&self) -> usize {
        self.device_mem.iter().map(|m| lock(m).len()).sum()
    }

    /// Number of live host allocations.
    pub fn live_host_allocs(&self) -> usize {
        lock(&self.host_mem).len()
    }

    /// The block and offset of `[ptr, ptr + bytes)` in `device`'s table.
    ///
    /// Errors: [`PluginError::NoDevice`], or [`PluginError::InvalidPointer`] if the range
    /// is not inside one live allocation.
    pub(super) fn device_range(
        &self,
        call: PluginCall,
        device: u32,
        ptr: DevicePtr,
        bytes: u64,
    ) -> Result<(Arc<Block>, u64), PluginError> {
        let table = self
            .device_mem
            .get(device as usize)
            .ok_or(PluginError::NoDevice {
                call,
                device,
                count: self.opts.devices,
            })?;
        lock(table)
            .lookup(ptr.0, bytes)
            .ok_or(PluginError::InvalidPointer {
                call,
                space: "device",
                ptr: ptr.0,
                bytes,
            })
    }

    /// The block and offset of `[ptr, ptr + bytes)` in the host table.
    ///
    /// Errors: [`PluginError::InvalidPointer`] if the range is not inside one live host
    /// allocation.
    pub(super) fn host_range(
        &self,
        call: PluginCall,
        ptr: HostPtr,
        bytes: u64,
    ) -> Result<(Arc<Block>, u64), PluginError> {
        lock(&self.host_mem)
            .lookup(ptr.0, bytes)
            .ok_or(PluginError::InvalidPointer {
                call,
                space: "host",
                ptr: ptr.0,
                bytes,
            })
    }

    /// [`crate::plugin::Plugin::fill_zero`]: enqueues on `stream` the zeroing of the
    /// range (checked now, against the stream's device).
    pub(super) fn zero_device_range(
        &self,
        stream: StreamHandle,
        ptr: DevicePtr,
        bytes: u64,
    ) -> Result<(), PluginError> {
        let call = PluginCall::FillZero;
        self.with_stream(call, stream, |st, send, _| {
            let (block, off) = self.device_range(call, st.device, ptr, bytes)?;
            send(Work::Zero {
                block,
                off,
                bytes,
                byte: 0,
            })
        })
    }

    /// [`crate::plugin::Plugin::alloc_host`]: a fresh zeroed block in the host table.
    pub(super) fn alloc_host_block(&self, bytes: u64) -> Result<HostPtr, PluginError> {
        let b = Block::new(bytes).ok_or(PluginError::OutOfMemory {
            call: PluginCall::AllocHost,
            bytes,
        })?;
        let ptr = HostPtr(b.addr());
        let len = b.len();
        lock(&self.host_mem).insert(Arc::new(b), len);
        Ok(ptr)
    }

    /// [`crate::plugin::Plugin::free_host`]: drops the host table's reference at once
    /// (the caller has waited for every op using it).
    pub(super) fn free_host_block(&self, ptr: HostPtr) -> Result<(), PluginError> {
        lock(&self.host_mem)
            .remove(ptr.0)
            .map(drop)
            .ok_or(PluginError::InvalidPointer {
                call: PluginCall::FreeHost,
                space: "host",
                ptr: ptr.0,
                bytes: 0,
            })
    }

    /// [`crate::plugin::Plugin::register_host`]: application memory joins the host table
    /// as a block that frees nothing; `Ok(false)` (not registered: the executor stages
    /// it) when it overlaps memory already in the table.
    pub(super) fn register_host_block(
        &self,
        ptr: HostPtr,
        bytes: u64,
    ) -> Result<bool, PluginError> {
        let len = usize::try_from(bytes).map_err(|_| PluginError::OutOfMemory {
            call: PluginCall::AllocHost,
            bytes,
        })?;
        let mut table = lock(&self.host_mem);
        if ptr.0 == 0 || table.overlaps(ptr.0, bytes) {
            return Ok(false);
        }
        // SAFETY: the caller (the executor, for a run that borrows the memory) keeps
        // `bytes` bytes at `ptr` alive and unregisters them after synchronizing every
        // stream; copies queued on streams hold the `Arc` only until they complete.
        let b = unsafe { Block::foreign(ptr.as_ptr(), len) };
        table.insert(Arc::new(b), bytes);
        Ok(true)
    }

    /// [`crate::plugin::Plugin::submit`]: enqueues on `stream` a copy host → device
    /// (both ranges checked now).
    pub(super) fn copy_htod(
        &self,
        stream: StreamHandle,
        dst: DevicePtr,
        src: HostPtr,
        bytes: u64,
    ) -> Result<(), PluginError> {
        let call = PluginCall::Submit;
        self.with_stream(call, stream, |st, send, _| {
            let device = st.device;
            let (d, dst_off) = self.device_range(call, device, dst, bytes)?;
            let (s, src_off) = self.host_range(call, src, bytes)?;
            send(Work::Copy {
                dst: d,
                dst_off,
                src: s,
                src_off,
                bytes,
            })
        })
    }

    /// [`crate::plugin::Plugin::retrieve`]: enqueues on `stream` a copy device → host
    /// (both ranges checked now).
    pub(super) fn copy_dtoh(
        &self,
        stream: StreamHandle,
        dst: HostPtr,
        src: DevicePtr,
        bytes: u64,
    ) -> Result<(), PluginError> {
        let call = PluginCall::Retrieve;
        self.with_stream(call, stream, |st, send, _| {
            let device = st.device;
            let (s, src_off) = self.device_range(call, device, src, bytes)?;
            let (d, dst_off) = self.host_range(call, dst, bytes)?;
            send(Work::Copy {
                dst: d,
                dst_off,
                src: s,
                src_off,
                bytes,
            })
        })
    }

    /// [`crate::plugin::Plugin::copy_peer`]: enqueues on `stream` (of `dst_device`) a
    /// copy from device `src_device`'s memory to `dst_device`'s (both ranges checked
    /// now). The simulated devices' memories are separate tables, so a copy that names the
    /// wrong device for a pointer is an error, as a wrong pointer is on a GPU.
    pub(super) fn copy_dtod_peer(
        &self,
        stream: StreamHandle,
        dst: DevicePtr,
        dst_device: u32,
        src: DevicePtr,
        src_device: u32,
        bytes: u64,
    ) -> Result<(), PluginError> {
        let call = PluginCall::CopyPeer;
        self.with_stream(call, stream, |st, send, _| {
            if st.device != dst_device {
                return Err(PluginError::Backend {
                    call,
                    message: format!(
                        "{stream} is on device {}, the destination is on device {dst_device}",
                        st.device
                    ),
                });
            }
            let (d, dst_off) = self.device_range(call, dst_device, dst, bytes)?;
            let (s, src_off) = self.device_range(call, src_device, src, bytes)?;
            send(Work::Copy {
                dst: d,
                dst_off,
                src: s,
                src_off,
                bytes,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::memory::ALIGN;

    #[test]
    fn lookup_checks_bounds() {
        let mut t = MemTable::default();
        let b = Arc::new(Block::new(100).unwrap());
        let a = b.addr();
        assert_eq!(a % ALIGN as u64, 0);
        t.insert(b, 100);
        assert_eq!(t.lookup(a + 10, 90).unwrap().1, 10);
        assert!(t.lookup(a + 10, 91).is_none());
        assert!(t.lookup(a.wrapping_sub(1), 1).is_none());
        let e = t.epoch();
        t.insert(Arc::new(Block::new(8).unwrap()), 8);
        assert_eq!(t.epoch(), e, "an insertion keeps every lookup's answer");
        assert!(t.remove(a).is_some());
        assert_ne!(t.epoch(), e, "a removal changes the epoch");
        assert!(t.lookup(a, 1).is_none());
        let e = t.epoch();
        t.clear();
        assert_ne!(t.epoch(), e, "a clear changes the epoch");
    }

    #[test]
    fn an_allocation_shorter_than_its_block_is_checked_against_its_length() {
        let mut t = MemTable::default();
        let b = Arc::new(Block::new(640).unwrap());
        let a = b.addr();
        t.insert(b.clone(), 600);
        assert!(t.lookup(a, 600).is_some());
        assert!(
            t.lookup(a + 599, 2).is_none(),
            "past the length, inside the block"
        );
        assert_eq!(t.remove(a).unwrap().1, 600);
    }
}
