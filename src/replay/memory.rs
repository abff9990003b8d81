//! The device memory of a replayed plan: an arena of blocks owned by the session, one
//! per allocation class in use, with each [`crate::lower::DeviceAlloc`] placed in one.
//!
//! Placement follows the rule of the plugins' stream-ordered caches (contract rule 4 in
//! [`crate::plugin`]): walking the steps, a `Free` on stream `s` puts its block on `s`'s
//! free list for its [`size_class`]; an `Alloc` on `s` takes a block of its class from
//! `s`'s list, else a new block. Reuse is then safe by stream order, which the graph
//! keeps (an edge chain per stream, proved by [`super::prove`]): every use of the old
//! allocation is ordered before its free, and the free before the new allocation's uses.
//! A block is never shared between streams, so the arena holds at most what the eager
//! run's caches would.

use crate::lower::{AllocId, OpGraph, OpKind};
use crate::plugin::size_class;
use crate::schedule::{Schedule, Step};
use std::collections::BTreeMap;

/// Where each allocation lives (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Arena {
    /// Capacity in bytes of each block (a [`size_class`]).
    pub blocks: Vec<u64>,
    /// Block of each allocation (by [`AllocId`] index); `None` for one never allocated.
    pub place: Vec<Option<u32>>,
}

impl Arena {
    /// Places every allocation of `graph` in the step order of `sched`.
    /// Complexity: `O(steps · log B)` for `B` blocks.
    pub fn plan(graph: &OpGraph, sched: &Schedule) -> Arena {
        let mut blocks = Vec::new();
        let mut place = vec![None; graph.allocs.len()];
        // (stream, class) → free blocks.
        let mut free: BTreeMap<(u32, u64), Vec<u32>> = BTreeMap::new();
        for st in &sched.steps {
            let Step::Op(op) = *st else { continue };
            let Some(s) = sched.op_stream[op.index()] else {
                continue;
            };
            match graph.op(op).kind {
                OpKind::Alloc { alloc } => {
                    let class = size_class(graph.allocs[alloc.index()].bytes);
                    let b = free
                        .get_mut(&(s.0, class))
                        .and_then(|l| l.pop())
                        .unwrap_or_else(|| {
                            blocks.push(class);
                            blocks.len() as u32 - 1
                        });
                    place[alloc.index()] = Some(b);
                }
                OpKind::Free { alloc } => {
                    if let Some(b) = place[alloc.index()] {
                        free.entry((s.0, blocks[b as usize])).or_default().push(b);
                    }
                }
                _ => {}
            }
        }
        Arena { blocks, place }
    }

    /// Total bytes of the arena.
    pub fn bytes(&self) -> u64 {
        self.blocks.iter().sum()
    }

    /// The block of allocation `a`.
    pub fn block_of(&self, a: AllocId) -> Option<u32> {
        self.place.get(a.index()).copied().flatten()
    }
}
