//! Each rank's body in *readiness* order: the constructs a rank runs, reordered so that
//! work on data the rank holds goes ahead of work that waits for a receive, as far as
//! the data allows (the split's last step, before [`super::split`]'s chain, when the
//! split has transfers: without, no rank waits and each keeps one process's order).
//!
//! Why: a rank's schedule issues its body in order onto in-order streams (one BLAS
//! worker per rank in `bench linalg --ranks`), so a construct that waits for another
//! rank's data holds back every later one on its stream, even those whose data is
//! local. StarPU-MPI picks ready tasks at run time; here the order is fixed before the
//! run, as every other decision of the schedule, by a list schedule of all ranks
//! together (Graham's list scheduling with critical-path priority, as HEFT's upward
//! rank: whenever a rank's worker is free it starts the ready construct with the
//! longest path to the end of the program, the first in program order on a tie).
//!
//! # Rules
//!
//! - Order kept within a rank (so the rank computes what program order computes): two
//!   constructs that touch overlapping host elements, one of them writing (a target
//!   region reads every mapped section and buffer argument and writes its `from` /
//!   `tofrom` / `alloc` ones, its written arguments and those no map item contains, a
//!   host task reads its `reads` and `writes` and writes its `writes`, a send reads and a
//!   receive writes its section, a `depend(in)` item reads its section and any other
//!   `depend` type writes it; an `update`, the program's or the split's rank-local one,
//!   reads and writes every section it maps, host and device), an `after` and the
//!   construct it names, and everything before and after a `taskwait`, an `enter data`
//!   or an `exit data` (they act on whole entries of the present table: a zero-length
//!   item on the entry holding it, so their sections do not say what they touch).
//! - Across ranks: a receive is ready one tick after its send.
//! - Model: one worker per rank; a target region or a host task of the program takes one
//!   tick, a send, a receive or a `taskwait` none. Among the constructs ready when a
//!   worker is free it takes the one with the longest path of ticks (latencies
//!   included) from its start to the end of the program, then the first in program
//!   order (the split's keys): the panel of a tiled factorization, which every other
//!   rank waits for, goes ahead of the trailing updates. The ranks' workers advance
//!   together, the earliest start first (lowest rank on a tie).
//! - Output: each rank's body in the order its worker started them. The sequence of
//!   starts over all ranks is one global order in which every send starts before its
//!   receive and after the writes of its bytes, so chaining each rank's transfers in
//!   this order keeps the chain's guarantee (every rank progresses; the cross-rank check
//!   proves it again on the compiled plans).
//!
//! Complexity: `O(C log C + E + A + C·R)` for `C` constructs, `E` order constraints, `A`
//! section accesses (with the segments they split) and `R` ranks.

use super::split::Item;
use super::transfer::Transfer;
use crate::model::{Construct, DependType, Program, Section};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

/// Ticks a construct takes: a program's target region or host task 1, a send, receive
/// or `taskwait` 0.
fn cost(item: &Item) -> u64 {
    match &item.c {
        Construct::Target(_) => 1,
        Construct::HostTask(_) if !item.transfer => 1,
        _ => 0,
    }
}

/// Ticks from a send's start to its receive being ready.
const LATENCY: u64 = 1;

/// One segment of a buffer's elements: its last writer and its readers since.
#[derive(Clone, Default)]
struct Seg {
    hi: u64,
    writer: Option<u32>,
    readers: Vec<u32>,
}

/// The accesses seen so far of one rank, per buffer: segments keyed by their first
/// element (every element of a buffer in exactly one).
struct Tracker {
    bufs: Vec<BTreeMap<u64, Seg>>,
}

impl Tracker {
    fn new(lens: &[u64]) -> Tracker {
        Tracker {
            bufs: lens
                .iter()
                .map(|&len| {
                    let mut m = BTreeMap::new();
                    m.insert(
                        0,
                        Seg {
                            hi: len.max(1),
                            ..Seg::default()
                        },
                    );
                    m
                })
                .collect(),
        }
    }

    /// Splits the segment of buffer `b` holding element `at` so one starts at `at`.
    fn cut(&mut self, b: usize, at: u64) {
        let m = &mut self.bufs[b];
        let Some((&lo, seg)) = m.range_mut(..=at).next_back() else {
            return;
        };
        if lo == at || seg.hi <= at {
            return;
        }
        let upper = Seg {
            hi: seg.hi,
            ..seg.clone()
        };
        seg.hi = at;
        m.insert(at, upper);
    }

    /// Records access `id` of `s` (`write` or read), pushing the accesses it must follow
    /// onto `preds`.
    fn touch(&mut self, s: Section, write: bool, id: u32, preds: &mut Vec<u32>) {
        let b = s.buf.index();
        if s.len == 0 || b >= self.bufs.len() {
            return;
        }
        let (lo, hi) = (s.lo, s.lo + s.len);
        self.cut(b, lo);
        self.cut(b, hi);
        for (_, seg) in self.bufs[b].range_mut(lo..hi) {
            preds.extend(seg.writer);
            if write {
                preds.append(&mut seg.readers);
                seg.writer = Some(id);
            } else {
                seg.readers.push(id);
            }
        }
    }
}

/// The host sections `c` reads and writes (see the module docs).
fn accesses<'c>(c: &'c Construct, program: &Program) -> (Vec<Section>, Vec<Section>, &'c [String]) {
    let dep = |d: &[crate::model::Depend], reads: &mut Vec<Section>, writes: &mut Vec<Section>| {
        for d in d {
            match d.kind {
                DependType::In => reads.push(d.section),
                _ => writes.push(d.section),
            }
        }
    };
    match c {
        Construct::Target(t) => {
            let mut reads: Vec<Section> = t.maps.iter().map(|m| m.section).collect();
            let mut writes: Vec<Section> = t
                .maps
                .iter()
                .filter(|m| m.map_type.has_from() || !m.map_type.has_to())
                .map(|m| m.section)
                .collect();
            // Buffer arguments no map item contains are mapped implicitly (`tofrom`,
            // or used in place when present, OpenMP 5.2 §5.8.9): read and written.
            for a in &t.args {
                if let crate::model::Arg::Buffer(s) = a {
                    reads.push(*s);
                }
            }
            writes.extend(t.unmapped_args());
            writes.extend(super::split::kernel_accesses(program, &t.kernel, &t.args).1);
            dep(&t.depends, &mut reads, &mut writes);
            (reads, writes, &t.after)
        }
        Construct::HostTask(h) => {
            // A kernel's buffer arguments count as declared.
            let (args_read, args_written) = match &h.kernel {
                Some(k) => super::split::kernel_accesses(program, k, &h.args),
                None => (Vec::new(), Vec::new()),
            };
            let mut writes = h.writes.clone();
            writes.extend(args_written);
            let mut reads = h.reads.clone();
            reads.extend(args_read);
            reads.extend(writes.iter().copied());
            dep(&h.depends, &mut reads, &mut writes);
            (reads, writes, &h.after)
        }
        // An `update` (the program's, on every rank, or the split's rank-local one):
        // touches every section it maps, host and device alike (read and written).
        Construct::Update(d) => {
            let mut reads: Vec<Section> = d.maps.iter().map(|m| m.section).collect();
            let mut writes = reads.clone();
            dep(&d.depends, &mut reads, &mut writes);
            (reads, writes, &d.after)
        }
        _ => (Vec::new(), Vec::new(), &[]),
    }
}

/// The name of a target region, host task or data construct.
fn name(c: &Construct) -> Option<&str> {
    match c {
        Construct::Target(t) => Some(&t.name),
        Construct::HostTask(h) => Some(&h.name),
        Construct::EnterData(d) | Construct::ExitData(d) | Construct::Update(d) => Some(&d.name),
        _ => None,
    }
}

/// Reorders every rank's body by readiness (module docs): sorts each body by its keys,
/// then gives each item the key of its place in the list schedule. `lens`: every
/// buffer's length in elements. Leaves the bodies in key order, unchanged, if the
/// constructs' order constraints form a cycle (they never do for a split program).
pub(super) fn by_readiness(
    bodies: &mut [Vec<Item>],
    transfers: &[Transfer],
    lens: &[u64],
    program: &Program,
) {
    for b in bodies.iter_mut() {
        b.sort_by_key(|i| i.key);
    }
    // Global ids: rank r's items are base[r]..base[r + 1].
    let mut base = vec![0u32];
    for b in bodies.iter() {
        base.push(base.last().copied().unwrap_or(0) + b.len() as u32);
    }
    let total = *base.last().unwrap_or(&0) as usize;
    let mut rank_of = Vec::with_capacity(total);
    let mut preds: Vec<Vec<(u32, u64)>> = vec![Vec::new(); total];
    let mut by_name: Vec<BTreeMap<&str, u32>> = Vec::with_capacity(bodies.len());
    for (r, body) in bodies.iter().enumerate() {
        let mut t = Tracker::new(lens);
        let mut names = BTreeMap::new();
        // The last taskwait and the items since it.
        let mut barrier: Option<u32> = None;
        let mut since: Vec<u32> = Vec::new();
        let mut p = Vec::new();
        for (k, item) in body.iter().enumerate() {
            let id = base[r] + k as u32;
            rank_of.push(r);
            p.clear();
            // `enter data` and `exit data` act on whole present-table entries (a
            // zero-length item on the entry holding it): barriers, as a `taskwait`.
            if matches!(
                item.c,
                Construct::Taskwait { .. } | Construct::EnterData(_) | Construct::ExitData(_)
            ) {
                p.append(&mut since);
                p.extend(barrier);
                barrier = Some(id);
            } else {
                let (reads, writes, after) = accesses(&item.c, program);
                for s in reads {
                    t.touch(s, false, id, &mut p);
                }
                for s in writes {
                    t.touch(s, true, id, &mut p);
                }
                p.extend(after.iter().filter_map(|a| names.get(a.as_str()).copied()));
                p.extend(barrier);
                since.push(id);
            }
            if let Some(n) = name(&item.c) {
                names.insert(n, id);
            }
            p.sort_unstable();
            p.dedup();
            preds[id as usize] = p.iter().filter(|&&q| q != id).map(|&q| (q, 0)).collect();
        }
        by_name.push(names);
    }
    for t in transfers {
        let (from, to) = (t.envelope.from as usize, t.envelope.to as usize);
        let (Some(&s), Some(&r)) = (
            by_name[from].get(t.send.as_str()),
            by_name[to].get(t.recv.as_str()),
        ) else {
            continue;
        };
        preds[r as usize].push((s, LATENCY));
    }
    let Some(order) = list_schedule(bodies, &base, &rank_of, &preds) else {
        return;
    };
    for (r, ids) in order.into_iter().enumerate() {
        for (pos, id) in ids.into_iter().enumerate() {
            bodies[r][(id - base[r]) as usize].key = (pos as u64, 0);
        }
    }
}

/// An item whose predecessors have all started: (ready time, key, id).
type Waiting = (u64, (u64, u8), u32);
/// An item ready when its rank's worker is free: (longest path, key, id), the longest
/// path first.
type Ready = (Reverse<u64>, (u64, u8), u32);

/// The list schedule (module docs): per rank, its item ids in start order; `None` on a
/// cycle.
fn list_schedule(
    bodies: &[Vec<Item>],
    base: &[u32],
    rank_of: &[usize],
    preds: &[Vec<(u32, u64)>],
) -> Option<Vec<Vec<u32>>> {
    let total = rank_of.len();
    let ranks = bodies.len();
    let mut succs: Vec<Vec<(u32, u64)>> = vec![Vec::new(); total];
    let mut left: Vec<usize> = vec![0; total];
    for (i, p) in preds.iter().enumerate() {
        left[i] = p.len();
        for &(q, lat) in p {
            succs[q as usize].push((i as u32, lat));
        }
    }
    let item = |id: u32| &bodies[rank_of[id as usize]][(id - base[rank_of[id as usize]]) as usize];
    let level = levels(total, &succs, &left, &|id| cost(item(id)))?;
    // Ready times, and per rank the items whose predecessors have all started
    // (`waiting`: by ready time) and those ready when its worker is free (by key).
    let mut ready_at = vec![0u64; total];
    let mut waiting: Vec<BinaryHeap<Reverse<Waiting>>> =
        (0..ranks).map(|_| BinaryHeap::new()).collect();
    // Ready items by (longest path first, then key).
    let mut ready: Vec<BinaryHeap<Reverse<Ready>>> =
        (0..ranks).map(|_| BinaryHeap::new()).collect();
    for i in 0..total {
        if left[i] == 0 {
            waiting[rank_of[i]].push(Reverse((0, item(i as u32).key, i as u32)));
        }
    }
    let mut free = vec![0u64; ranks];
    let mut order: Vec<Vec<u32>> = bodies.iter().map(|b| Vec::with_capacity(b.len())).collect();
    for _ in 0..total {
        // The rank whose worker starts something first.
        let mut best: Option<(u64, usize)> = None;
        for r in 0..ranks {
            while let Some(&Reverse((t, key, id))) = waiting[r].peek() {
                if t > free[r] {
                    break;
                }
                waiting[r].pop();
                ready[r].push(Reverse((Reverse(level[id as usize]), key, id)));
            }
            let start = match (ready[r].is_empty(), waiting[r].peek()) {
                (false, _) => free[r],
                (true, Some(&Reverse((t, _, _)))) => t,
                (true, None) => continue,
            };
            if best.is_none_or(|(s, _)| start < s) {
                best = Some((start, r));
            }
        }
        let (start, r) = best?;
        free[r] = start;
        while let Some(&Reverse((t, key, id))) = waiting[r].peek() {
            if t > start {
                break;
            }
            waiting[r].pop();
            ready[r].push(Reverse((Reverse(level[id as usize]), key, id)));
        }
        let Reverse((_, _, id)) = ready[r].pop()?;
        let end = start + cost(item(id));
        free[r] = end;
        order[r].push(id);
        for &(s, lat) in &succs[id as usize] {
            let s = s as usize;
            // A cross-rank successor waits for the start plus the latency (a send takes
            // no time); a local one for the end.
            let at = if lat > 0 { start + lat } else { end };
            ready_at[s] = ready_at[s].max(at);
            left[s] -= 1;
            if left[s] == 0 {
                waiting[rank_of[s]].push(Reverse((ready_at[s], item(s as u32).key, s as u32)));
            }
        }
    }
    Some(order)
}

/// Every item's longest path of ticks to the end (its cost, then the latency and level
/// of its heaviest successor), by Kahn's order backwards; `None` on a cycle.
/// `left[i]`: item `i`'s predecessor count.
fn levels(
    total: usize,
    succs: &[Vec<(u32, u64)>],
    left: &[usize],
    cost: &dyn Fn(u32) -> u64,
) -> Option<Vec<u64>> {
    // A topological order (Kahn), then levels in reverse.
    let mut left = left.to_vec();
    let mut topo: Vec<u32> = (0..total as u32)
        .filter(|&i| left[i as usize] == 0)
        .collect();
    let mut k = 0;
    while k < topo.len() {
        let i = topo[k] as usize;
        k += 1;
        for &(s, _) in &succs[i] {
            left[s as usize] -= 1;
            if left[s as usize] == 0 {
                topo.push(s);
            }
        }
    }
    if topo.len() != total {
        return None;
    }
    let mut level = vec![0u64; total];
    for &i in topo.iter().rev() {
        let tail = succs[i as usize]
            .iter()
            .map(|&(s, lat)| lat + level[s as usize])
            .max()
            .unwrap_or(0);
        level[i as usize] = cost(i) + tail;
    }
    Some(level)
}
