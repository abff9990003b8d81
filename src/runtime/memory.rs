//! Aligned host memory blocks: 64-byte-aligned allocations, zero-initialised when made;
//! and [`try_vec`], a vector allocated fallibly.
//!
//! A [`Block`] is plain memory with no owner discipline of its own: who may touch it when
//! is the user's contract. The host plugin keeps its "device" and host allocations in
//! blocks (reference-counted, under stream order: see [`crate::plugin::host`]); the
//! reference interpreter keeps its device allocations in them.
//!
//! Every allocation of buffer size on the run paths goes through [`Block::new`] or
//! [`try_vec`], so that a failure is an error naming what could not be had, never an
//! abort (`handle_alloc_error`). Under Linux's default overcommit a large allocation may
//! succeed and fail only when its pages are touched (the OOM killer): what
//! [`crate::estimate`] checks up front is for that.

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
        #[cfg(test)]
        if fail::fails(len) {
            return None;
        }
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

/// An empty vector with room for exactly `n` elements; `None` if the size overflows or
/// the allocator refuses (`try_reserve_exact`).
pub fn try_vec<T>(n: usize) -> Option<Vec<T>> {
    #[cfg(test)]
    if fail::fails(n.saturating_mul(std::mem::size_of::<T>())) {
        return None;
    }
    let mut v = Vec::new();
    v.try_reserve_exact(n).ok()?;
    Some(v)
}

/// Unit tests only: make this thread's [`Block::new`] and [`try_vec`] fail for one size
/// in bytes, as an allocator that has run out would (one size, so that a test can fail
/// one allocation of a run and not the others).
#[cfg(test)]
pub(crate) mod fail {
    use std::cell::Cell;

    thread_local! {
        static SIZE: Cell<Option<usize>> = const { Cell::new(None) };
    }

    /// Until the guard is dropped, allocations of exactly `bytes` fail on this thread.
    pub(crate) fn allocations_of(bytes: usize) -> Guard {
        SIZE.with(|o| o.set(Some(bytes)));
        Guard
    }

    pub(crate) struct Guard;

    impl Drop for Guard {
        fn drop(&mut self) {
            SIZE.with(|o| o.set(None));
        }
    }

    pub(super) fn fails(bytes: usize) -> bool {
        SIZE.with(|o| o.get() == Some(bytes))
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

    #[test]
    fn sizes_that_cannot_be_had_are_none_not_aborts() {
        // More than the address space: refused whatever the overcommit policy.
        assert!(Block::new(1 << 62).is_none());
        assert!(Block::new(u64::MAX).is_none());
        assert!(try_vec::<u64>(usize::MAX / 4).is_none());
        assert!(try_vec::<u8>(1 << 62).is_none());
        let v = try_vec::<f32>(1000).unwrap();
        assert!(v.is_empty() && v.capacity() == 1000);
        let _guard = fail::allocations_of(100);
        assert!(Block::new(100).is_none());
        assert!(Block::new(101).is_some());
        assert!(try_vec::<f32>(25).is_none());
    }
}
