//! Aligned host memory blocks: 64-byte-aligned allocations, zero-initialised when made.
//!
//! A [`Block`] is plain memory with no owner discipline of its own: who may touch it when
//! is the user's contract. The host plugin keeps its "device" and host allocations in
//! blocks (reference-counted, under stream order: see [`crate::plugin::host`]); the
//! reference interpreter keeps every buffer and allocation in one.

use std::alloc::{alloc_zeroed, dealloc, Layout};

/// Alignment of every block, in bytes.
pub const ALIGN: usize = 64;

/// One 64-byte-aligned allocation, zero-initialised when made.
#[derive(Debug)]
pub struct Block {
    ptr: *mut u8,
    /// Capacity in bytes as asked for at `new` (the layout holds at least 1 byte).
    len: usize,
    /// `None` for memory the block does not own ([`Block::foreign`]).
    layout: Option<Layout>,
}

// SAFETY: a block is plain memory; who may touch it when is governed by the plugin
// contract (stream order, events, host waits), as for device memory.
unsafe impl Send for Block {}
// SAFETY: as above.
unsafe impl Sync for Block {}

impl Block {
    /// Allocates `bytes` zeroed bytes; `None` if the size is too large or allocation fails.
    pub fn new(bytes: u64) -> Option<Block> {
        let len = usize::try_from(bytes).ok()?;
        let layout = Layout::from_size_align(len.max(1), ALIGN).ok()?;
        // SAFETY: the layout has non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            return None;
        }
        Some(Block {
            ptr,
            len,
            layout: Some(layout),
        })
    }

    /// A block over `len` bytes at `ptr` that someone else allocated (application memory
    /// registered with the host plugin); dropping it frees nothing.
    ///
    /// # Safety
    /// `ptr` is valid for reads and writes of `len` bytes for as long as the block (and
    /// every clone of an `Arc` holding it) lives.
    pub unsafe fn foreign(ptr: *mut u8, len: usize) -> Block {
        Block {
            ptr,
            len,
            layout: None,
        }
    }

    /// The start address, as the integer plugins hand out (`DevicePtr`, `HostPtr`).
    pub fn addr(&self) -> u64 {
        self.ptr as usize as u64
    }

    /// The start pointer; valid for `len()` bytes while the block lives.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Capacity in bytes (what `new` was asked for).
    pub fn len(&self) -> u64 {
        self.len as u64
    }

    /// Whether the capacity is 0 bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Sets `bytes` bytes from offset `off` (clipped to the capacity) to `byte`.
    ///
    /// # Safety
    /// Nothing else may access those bytes meanwhile (the caller runs it in stream order,
    /// as any other op on the block).
    pub unsafe fn fill(&self, off: u64, bytes: u64, byte: u8) {
        let off = (off as usize).min(self.len);
        let n = (bytes as usize).min(self.len - off);
        // SAFETY: `n` bytes from `ptr + off` lie inside the allocation; exclusive access
        // is the caller's promise.
        unsafe { std::ptr::write_bytes(self.ptr.add(off), byte, n) }
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        if let Some(layout) = self.layout {
            // SAFETY: allocated in `new` with this layout, freed once.
            unsafe { dealloc(self.ptr, layout) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_clears_only_the_bytes_asked_for() {
        let b = Block::new(128).unwrap();
        // SAFETY: nothing else uses `b`.
        unsafe {
            std::ptr::write_bytes(b.ptr(), 0xAB, 128);
            b.fill(0, 64, 0);
            assert_eq!(*b.ptr(), 0);
            assert_eq!(*b.ptr().add(63), 0);
            assert_eq!(*b.ptr().add(64), 0xAB);
            b.fill(0, 1 << 20, 0); // clamped to the capacity
            assert_eq!(*b.ptr().add(127), 0);
        }
    }
}
