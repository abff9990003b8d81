//! The device memory cap ([`super::LowerOptions::device_memory`]; issue 28 point 2): the
//! lowering keeps the live device bytes of every device within the cap at every point
//! any execution of the op graph can reach, not only in program order.
//!
//! # Claims (why every execution stays within the cap)
//!
//! Each device has a pool of `cap` bytes. An `Alloc` of `b` bytes *claims* `b` bytes:
//! first from what is left of the pool, then from earlier `Free`s of the device whose
//! bytes no earlier `Alloc` claimed, oldest first, and it gets a *memory edge* from each
//! `Free` it claims from (a `Free` may be shared by two allocs, each claiming part).
//! In any state an execution reaches (a set `D` of completed ops closed under
//! predecessors: a down-set of the op graph), every alloc in `D` has the frees it
//! claimed from in `D`, so
//! `Σ_{Alloc∈D} b = (pool claims) + (free claims) ≤ cap + Σ_{Free∈D} b`, that is,
//! live bytes `Σ_{Alloc∈D} b − Σ_{Free∈D} b ≤ cap`. The proof needs nothing of the
//! schedule but that it orders every edge (the verifier proves that); the verifier
//! (`verify/peak.rs`) rechecks the claims from the graph alone and, where they do not
//! prove it, computes the peak exactly.
//!
//! # Making room
//!
//! When an `Alloc` finds fewer unclaimed bytes than it needs (in program order: pool
//! plus unclaimed frees = cap − live bytes), kept copies of its device (transfer
//! elision) are evicted first, in the order of [`super::EvictionPolicy`] (dirty ones
//! written back first, as any eviction: module docs of `elide`), each counted in
//! [`super::OpGraph::evictions`]. A construct whose storage cannot fit even with every
//! kept copy evicted is refused before anything is emitted
//! ([`super::LowerError::DeviceMemory`]: its own working set over the cap, or with the
//! bytes other mappings still hold).
//!
//! Complexity: `O(1)` amortized per `Alloc` and `Free` (each claim ends at most one
//! partly claimed free; the rest are popped), plus the evictions' own cost.

use super::builder::{ConstructOps, Lowerer};
use super::mapping::Lookup;
use super::{AllocId, Eviction, LowerError, OpId, RegionId};
use crate::model::{Section, Span};
use std::collections::VecDeque;

/// One device's accounting in program order.
#[derive(Clone, Debug, Default)]
struct DeviceBytes {
    /// Bytes of the pool no alloc claimed yet.
    pool: u64,
    /// Frees with bytes no alloc claimed yet, oldest first: (free, unclaimed bytes).
    released: VecDeque<(OpId, u64)>,
    /// `pool + Σ released` (= cap − live bytes in program order).
    unclaimed: u64,
}

/// The cap's state during one lowering.
#[derive(Clone, Debug, Default)]
pub(super) struct Cap {
    cap: Option<u64>,
    devices: Vec<DeviceBytes>,
}

impl Cap {
    pub(super) fn new(cap: Option<u64>, devices: u32) -> Cap {
        let one = DeviceBytes {
            pool: cap.unwrap_or(0),
            released: VecDeque::new(),
            unclaimed: cap.unwrap_or(0),
        };
        Cap {
            cap,
            devices: vec![one; devices as usize],
        }
    }

    /// The cap (`None`: unlimited).
    pub(super) fn limit(&self) -> Option<u64> {
        self.cap
    }

    /// `b` bytes for an alloc on `device`: the frees it claims from (its memory edges).
    /// The caller made room first (`unclaimed ≥ b`).
    fn claim(&mut self, device: u32, mut b: u64) -> Vec<OpId> {
        let d = &mut self.devices[device as usize];
        let from_pool = d.pool.min(b);
        d.pool -= from_pool;
        d.unclaimed -= from_pool;
        b -= from_pool;
        let mut edges = Vec::new();
        while b > 0 {
            let Some(front) = d.released.front_mut() else {
                break;
            };
            let t = front.1.min(b);
            front.1 -= t;
            d.unclaimed -= t;
            b -= t;
            edges.push(front.0);
            if front.1 == 0 {
                d.released.pop_front();
            }
        }
        debug_assert_eq!(b, 0, "an alloc claimed more than the cap left");
        edges
    }

    /// A `Free` of `b` bytes on `device`: its bytes may be claimed.
    fn released(&mut self, device: u32, free: OpId, b: u64) {
        if self.cap.is_some() && b > 0 {
            let d = &mut self.devices[device as usize];
            d.released.push_back((free, b));
            d.unclaimed += b;
        }
    }
}

impl Lowerer<'_> {
    /// After `Free` op `free` of `a` was pushed: its bytes may be claimed.
    pub(super) fn cap_freed(&mut self, a: AllocId, free: OpId) {
        let d = &self.g.allocs[a.index()];
        let (device, bytes) = (d.device, d.bytes);
        self.cap.released(device, free, bytes);
    }

    /// Before the `Alloc` of `a`: evicts kept copies of its device while the unclaimed
    /// bytes are fewer than it needs, then claims them. Returns the memory edges. The
    /// evictions take none of the construct's `depend`/`after` predecessors: the `Alloc`
    /// that follows them takes those (see `elide_prepass`).
    pub(super) fn make_room(
        &mut self,
        a: AllocId,
        region: RegionId,
        ids: &mut Vec<OpId>,
    ) -> Vec<OpId> {
        if self.cap.cap.is_none() {
            return Vec::new();
        }
        let d = &self.g.allocs[a.index()];
        let (device, bytes) = (d.device, d.bytes);
        while self.cap.devices[device as usize].unclaimed < bytes {
            let Some(old) = self.kept_victim(device) else {
                break;
            };
            self.evict_for_room(old, region, device, &mut Vec::new(), ids);
        }
        self.cap.claim(device, bytes)
    }

    /// Refuses construct `region` (entered: its storage is in `plan` and the mapping
    /// table) when its storage on `device` cannot fit the cap even with every kept copy
    /// evicted. `sections`: its map items' sections (their storage is its working set).
    pub(super) fn check_cap(
        &self,
        region: &str,
        device: u32,
        sections: impl Iterator<Item = Section>,
        plan: &ConstructOps,
        span: Option<Span>,
    ) -> Result<(), LowerError> {
        let Some(cap) = self.cap.cap else {
            return Ok(());
        };
        let table = &self.tables[device as usize];
        let mut set: Vec<AllocId> = sections
            .filter_map(|s| match table.lookup(&s) {
                Lookup::Inside(e) if s.len > 0 => Some(e.alloc),
                _ => None,
            })
            .chain(plan.allocs.iter().copied())
            .collect();
        set.sort_unstable();
        set.dedup();
        let bytes = |a: &AllocId| self.g.allocs[a.index()].bytes;
        let working_set: u64 = set.iter().map(bytes).sum();
        let need: u64 = plan.allocs.iter().map(bytes).sum();
        let d = &self.cap.devices[device as usize];
        let room = d.unclaimed.saturating_add(self.kept_bytes_on(device));
        if working_set <= cap && need <= room {
            return Ok(());
        }
        Err(LowerError::DeviceMemory {
            region: region.to_string(),
            device,
            working_set,
            // Bytes live before this construct that it does not use and cannot evict.
            held: (cap - room).saturating_sub(working_set - need),
            cap,
            span,
        })
    }

    /// The kept copy of `device` to evict first ([`super::LowerOptions::eviction`]).
    pub(super) fn kept_victim(&mut self, device: u32) -> Option<AllocId> {
        let allocs = &self.g.allocs;
        self.elide
            .victims
            .first(|a| allocs[a.index()].device == device)
    }

    /// Bytes of the kept copies of `device`.
    pub(super) fn kept_bytes_on(&self, device: u32) -> u64 {
        // Elision is on for single-device programs only.
        match device {
            0 => self.elide.kept_bytes,
            _ => 0,
        }
    }

    /// Evicts kept copy `a` to make room (keep limit or cap), recorded in
    /// [`super::OpGraph::evictions`].
    pub(super) fn evict_for_room(
        &mut self,
        a: AllocId,
        region: RegionId,
        device: u32,
        first: &mut Vec<OpId>,
        ids: &mut Vec<OpId>,
    ) {
        self.evict(a, region, device, first, ids);
        let free = *ids.last().expect("evict pushes its Free");
        self.g.evictions.push(Eviction { alloc: a, free });
    }
}
