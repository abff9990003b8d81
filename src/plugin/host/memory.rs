//! "Device" and host memory of the host plugin: a table of live allocations keyed by
//! address, over [`Block`]s of the host-kernel runtime.
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

use crate::runtime::memory::Block;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Live allocations by start address: the block and the allocation's length in bytes
/// (at most the block's capacity).
#[derive(Debug, Default)]
pub struct MemTable {
    blocks: BTreeMap<u64, (Arc<Block>, u64)>,
}

impl MemTable {
    /// Adds an allocation of `len` bytes (`len <= b.len()`) at the block's address.
    pub fn insert(&mut self, b: Arc<Block>, len: u64) {
        debug_assert!(len <= b.len(), "{len} bytes in a block of {}", b.len());
        self.blocks.insert(b.addr(), (b, len));
    }

    /// Removes the allocation starting exactly at `addr`: its block and length.
    pub fn remove(&mut self, addr: u64) -> Option<(Arc<Block>, u64)> {
        self.blocks.remove(&addr)
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
        assert!(t.remove(a).is_some());
        assert!(t.lookup(a, 1).is_none());
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
