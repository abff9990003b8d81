//! The device memory of a replayed plan: an arena of blocks owned by the session,
//! allocated once before the first launch, with each [`crate::lower::DeviceAlloc`]
//! placed in one block for the whole plan.
//!
//! # Reuse rule
//!
//! A block freed by a `Free` may serve a later `Alloc` — on any stream — when the free
//! *happens before* the alloc in the replayed run. That is the case when
//! - the free is in an earlier part of the [`super::ReplayPlan`] (segments launch one
//!   after another on one stream, and host parts synchronize it), or
//! - within one segment, the schedule orders the free before the alloc: vector clocks
//!   over the segment's steps with CUDA stream semantics (stream order, event record →
//!   wait), counting every op, frees and allocs included.
//!
//! Reuse is then safe: every use of the old allocation precedes its free (op-graph
//! edges, which the verifier proved the schedule orders), and the new allocation's alloc
//! precedes its uses, so the schedule orders every old use before every new use; the
//! replay proof ([`super::prove`]) shows the plugin graph orders every pair the schedule
//! orders, contracted allocs and frees included, and segment order covers the rest.
//!
//! # Choice of block
//!
//! Walking the steps, an `Alloc` of `b` bytes takes, among the free blocks whose free
//! happens before it: a block of capacity ≥ `b` whose `Free` is a direct op-graph
//! predecessor of the alloc (the room the lowering's cap claims, `lower/cap.rs`, paid it
//! from), else any block of capacity ≥ `b` (smallest first, then one freed on the same
//! stream, then the latest freed); else the largest such block, grown to `b` (blocks are
//! sized when the whole plan is placed, so growing costs only the difference); else a new
//! block of `b` bytes. Blocks are sized in bytes asked for, not plugin size classes (the
//! plugins' caches round; the cap counts bytes asked for).
//!
//! # Against the verifier's peak
//!
//! The arena's bytes ([`Arena::bytes`]) are what a replayed run holds for its whole
//! length. They are at least the replay's own peak of live bytes, which is at most the
//! verifier's exact peak (`verify::peak_live_bytes`: replay orders more than the op
//! graph, so it reaches fewer states). They may exceed it: a block is never split or
//! joined (two freed 1 KiB blocks cannot hold one 2 KiB allocation, a grown block keeps
//! its size for smaller ones), and the choice above is greedy (placing blocks of mixed
//! sizes over a partial order optimally is dynamic storage allocation, NP-hard). With
//! equal sizes (tiles) the lowering's claims make it exact in the programs tested
//! (`tests/replay_cap.rs`). Where the arena exceeds the plan's cap
//! ([`crate::lower::OpGraph::device_memory`]), the executor issues the run to streams
//! instead, before allocating anything ([`super::Unsupported::OverCap`], naming the cap
//! and both figures in its debug log): stream issue keeps the proven peak.

use super::Part;
use crate::lower::{AllocId, OpGraph, OpId, OpKind};
use crate::schedule::{Schedule, Step};

/// Where each allocation lives (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Arena {
    /// Capacity in bytes of each block: the largest allocation placed in it.
    pub blocks: Vec<u64>,
    /// Block of each allocation (by [`AllocId`] index); `None` for one never allocated.
    pub place: Vec<Option<u32>>,
}

/// How [`choose`] picks a block: `claims` prefers the blocks of the alloc's direct
/// predecessor frees, `grow` grows a free block too small rather than adding one.
#[derive(Clone, Copy)]
struct Strategy {
    claims: bool,
    grow: bool,
}

/// The placements tried; the arena keeps the smallest.
const STRATEGIES: [Strategy; 4] = [
    Strategy {
        claims: true,
        grow: true,
    },
    Strategy {
        claims: false,
        grow: true,
    },
    Strategy {
        claims: true,
        grow: false,
    },
    Strategy {
        claims: false,
        grow: false,
    },
];

/// A block on the free list: freed by `op` on stream `stream` as that stream's
/// `tick`-th op, in part `part`.
struct Freed {
    block: u32,
    op: OpId,
    stream: usize,
    tick: u32,
    part: u32,
}

impl Arena {
    /// Places every allocation of `graph` in the step order of `sched`, cut into `parts`
    /// (the plan's parts; steps outside every part count as one part of their own).
    ///
    /// Complexity: `O(steps · S + A · F)` for `S` streams, `A` allocs and at most `F`
    /// blocks free at once.
    pub fn plan(graph: &OpGraph, sched: &Schedule, parts: &[Part]) -> Arena {
        STRATEGIES
            .iter()
            .map(|&s| Arena::place(graph, sched, parts, s))
            .min_by_key(Arena::bytes)
            .unwrap_or_default()
    }

    fn place(graph: &OpGraph, sched: &Schedule, parts: &[Part], how: Strategy) -> Arena {
        let ns = sched.streams.len();
        let mut part_of = vec![u32::MAX; sched.steps.len()];
        for (k, p) in parts.iter().enumerate() {
            let r = match p {
                Part::Device(s) => s.steps.clone(),
                Part::Host(r) => r.clone(),
            };
            for i in r {
                if let Some(slot) = part_of.get_mut(i) {
                    *slot = k as u32;
                }
            }
        }
        let mut blocks: Vec<u64> = Vec::new();
        let mut place = vec![None; graph.allocs.len()];
        let mut clock: Vec<Vec<u32>> = vec![vec![0; ns]; ns];
        let mut recorded: Vec<Option<Vec<u32>>> = vec![None; sched.events as usize];
        let mut free: Vec<Freed> = Vec::new();
        for (i, st) in sched.steps.iter().enumerate() {
            match *st {
                Step::Op(op) => {
                    let Some(s) = sched.op_stream[op.index()] else {
                        continue;
                    };
                    let s = s.index();
                    clock[s][s] += 1;
                    match graph.op(op).kind {
                        OpKind::Alloc { alloc } => {
                            let bytes = graph.allocs[alloc.index()].bytes;
                            let part = part_of[i];
                            let ready = |f: &Freed| f.part < part || clock[s][f.stream] >= f.tick;
                            let preds = graph.preds(op);
                            let b = match choose(&free, &blocks, bytes, (s, preds, how), ready) {
                                Some(k) => {
                                    let b = free.remove(k).block;
                                    let cap = &mut blocks[b as usize];
                                    *cap = (*cap).max(bytes);
                                    b
                                }
                                None => {
                                    blocks.push(bytes);
                                    blocks.len() as u32 - 1
                                }
                            };
                            place[alloc.index()] = Some(b);
                        }
                        OpKind::Free { alloc } => {
                            if let Some(block) = place[alloc.index()] {
                                free.push(Freed {
                                    block,
                                    op,
                                    stream: s,
                                    tick: clock[s][s],
                                    part: part_of[i],
                                });
                            }
                        }
                        _ => {}
                    }
                }
                Step::Record { event, stream } => {
                    recorded[event.index()] = Some(clock[stream.index()].clone());
                }
                Step::Wait { event, stream } => {
                    if let Some(v) = &recorded[event.index()] {
                        for (c, &k) in clock[stream.index()].iter_mut().zip(v) {
                            *c = (*c).max(k);
                        }
                    }
                }
                _ => {}
            }
        }
        Arena { blocks, place }
    }

    /// Total bytes of the arena: what a replayed run holds on its device.
    pub fn bytes(&self) -> u64 {
        self.blocks.iter().sum()
    }

    /// The block of allocation `a`.
    pub fn block_of(&self, a: AllocId) -> Option<u32> {
        self.place.get(a.index()).copied().flatten()
    }
}

/// A replay arena larger than the plan's device memory cap
/// ([`super::ReplayPlan::check_cap`]): a session asked to replay issues the plan to
/// streams instead ([`super::Unsupported::OverCap`]), before anything is allocated;
/// stream issue stays within the cap (the verifier proved its peak).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "replay needs an arena of {} ({arena} bytes) on device {device}, over its device memory \
     cap of {} ({cap} bytes; the schedule's proven peak is {peak} bytes: arena blocks are \
     neither split nor joined); stream issue keeps the cap",
    crate::model::human_bytes(*.arena),
    crate::model::human_bytes(*.cap)
)]
pub struct OverCap {
    pub device: u32,
    /// The cap, bytes ([`crate::lower::OpGraph::device_memory`]).
    pub cap: u64,
    /// The arena's bytes ([`Arena::bytes`]).
    pub arena: u64,
    /// The verifier's exact peak of live bytes on the device (`verify::peak_live_bytes`).
    pub peak: u64,
}

/// The free-list index of the block an alloc of `bytes` on stream `s` with op-graph
/// predecessors `preds` takes among those `ready` (module docs), if any.
fn choose(
    free: &[Freed],
    blocks: &[u64],
    bytes: u64,
    (s, preds, how): (usize, &[OpId], Strategy),
    ready: impl Fn(&Freed) -> bool,
) -> Option<usize> {
    let fit = free
        .iter()
        .enumerate()
        .filter(|(_, f)| blocks[f.block as usize] >= bytes && ready(f))
        .min_by_key(|&(k, f)| {
            (
                how.claims && !preds.contains(&f.op),
                blocks[f.block as usize],
                f.stream != s,
                std::cmp::Reverse(k),
            )
        });
    if let Some((k, _)) = fit {
        return Some(k);
    }
    if !how.grow {
        return None;
    }
    free.iter()
        .enumerate()
        .filter(|(_, f)| ready(f))
        .max_by_key(|&(k, f)| (blocks[f.block as usize], k))
        .map(|(k, _)| k)
}
