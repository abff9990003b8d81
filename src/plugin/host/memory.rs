//! Memory of the host plugin: aligned zeroed blocks and a table of live ones keyed by
//! address.
//!
//! Blocks are reference-counted: the table holds one reference, and every enqueued op
//! that touches a block holds another, taken when the op is issued. Freeing removes the
//! table's reference (so later calls cannot name the address), and the memory returns to
//! the allocator when the last op using it finishes. A wrong schedule can therefore give
//! wrong values, but never a use-after-free.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Alignment of every block, in bytes.
pub const ALIGN: usize = 64;

/// One zero-initialised, 64-byte-aligned allocation.
#[derive(Debug)]
pub struct Block {
    ptr: *mut u8,
    /// Size in bytes as asked for (the layout holds at least 1 byte).
    len: usize,
    layout: Layout,
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
        Some(Block { ptr, len, layout })
    }

    pub fn addr(&self) -> u64 {
        self.ptr as usize as u64
    }

    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Size in bytes.
    pub fn len(&self) -> u64 {
        self.len as u64
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

/// Live blocks by start address.
#[derive(Debug, Default)]
pub struct MemTable {
    blocks: BTreeMap<u64, Arc<Block>>,
}

impl MemTable {
    pub fn insert(&mut self, b: Arc<Block>) {
        self.blocks.insert(b.addr(), b);
    }

    /// Removes the block starting exactly at `addr`.
    pub fn remove(&mut self, addr: u64) -> Option<Arc<Block>> {
        self.blocks.remove(&addr)
    }

    /// The block containing `[addr, addr + bytes)`, with the offset of `addr` in it.
    pub fn lookup(&self, addr: u64, bytes: u64) -> Option<(Arc<Block>, u64)> {
        let (start, b) = self.blocks.range(..=addr).next_back()?;
        let off = addr - start;
        let end = off.checked_add(bytes)?;
        (end <= b.len()).then(|| (b.clone(), off))
    }

    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// Drops every block reference.
    pub fn clear(&mut self) {
        self.blocks.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_checks_bounds() {
        let mut t = MemTable::default();
        let b = Arc::new(Block::new(100).unwrap());
        let a = b.addr();
        assert_eq!(a % ALIGN as u64, 0);
        t.insert(b);
        assert_eq!(t.lookup(a + 10, 90).unwrap().1, 10);
        assert!(t.lookup(a + 10, 91).is_none());
        assert!(t.lookup(a.wrapping_sub(1), 1).is_none());
        assert!(t.remove(a).is_some());
        assert!(t.lookup(a, 1).is_none());
    }
}
