//! Sync insertion: turns a stream assignment into a host issue sequence with events and
//! host waits.
//!
//! The pass walks ops in id order (a topological order) and keeps vector clocks over
//! streams — for each stream, how many ops of every stream are known complete once
//! everything issued to it so far completes, and the same for the host. An edge
//! `a → b` is *implied* when `b`'s clock at issue already counts `a`. Only edges not
//! implied get synchronization:
//!
//! * `b` on a stream: one event per source stream, recorded right after the latest
//!   needed predecessor on that stream (reused if already recorded there), waited on by
//!   `b`'s stream just before `b`. Events whose knowledge the others already carry are
//!   dropped (transitive reduction), so every remaining wait is needed by some edge.
//! * `b` on the host (host task, taskwait, end): one host wait per source stream,
//!   reduced the same way, for exactly what `b` needs (under `minimal`, [design notes](crate::design): "the
//!   host waits only for the ops it needs"): on the whole stream (`cuStreamSynchronize`)
//!   when that teaches the host nothing the latest needed op's completion does not,
//!   except ops that do no device work ([`OpGraph::does_device_work`]: frees, plain
//!   allocs) — the needed op is the stream's last working op; otherwise on an event
//!   recorded right after the needed op (`cuEventSynchronize`; reused if one is recorded
//!   there already), so a host write to the source of an in-flight H2D does not wait for
//!   the kernel and D2H issued after it. When the needed waits would teach the host
//!   every op of a device anyway, one device-wide wait (`cuCtxSynchronize`) replaces
//!   them. Under `per-op` and `per-region` host ops wait on whole streams, as the
//!   runtimes they model synchronize whole queues.
//! * Policies add waits: `per-op` a host wait after every copy and kernel launch (and
//!   at the end of a synchronous region that has neither), as the pre-D77005 runtime
//!   did; `per-region` one after the last op of every region without `nowait` (D77005),
//!   issued after the lowering's write-backs that follow on the same stream
//!   ([`RegionKind::Writeback`]), so one wait covers both.
//!
//! Clocks have one entry per stream that carries work (`columns::Columns`), not per stream of
//! the pools: `S` below is the number of such streams (at most the device ops), so a
//! program placed over many devices with large pools pays only for the streams it uses.
//!
//! Complexity: `O(V·S + E + K·S³)` time for `S` used streams and `K` syncs considered (a
//! host-wait candidate costs `O(S)` more to choose between stream and event), plus
//! `O(P)` for the `P` streams of the pools, and `O(V + P + (K + S)·S)` memory: clocks
//! are kept per used stream and per event, and per op only at the ops where a stream's
//! knowledge of other streams changed (binary search). [`clock_bytes`] bounds it.

use super::columns::Columns;
// `sync::issue_order` is the path the colouring's tests use.
pub(crate) use super::order::issue_order;
use super::order::LaneChoice;
use super::{display::OpText, EventId, Schedule, Step, StreamAssignment, StreamId, SyncPolicy};
use crate::lower::{OpGraph, OpId, OpKind, RegionKind};

const NONE: u32 = u32::MAX;

/// Per-stream history of vector clocks, recorded where they change.
struct History {
    /// Positions from which each snapshot holds.
    pos: Vec<u32>,
    /// Flattened snapshots, `S` entries each.
    clocks: Vec<u32>,
}

struct State {
    s: usize,
    /// `known[t*S..][..S]`: knowledge once everything issued on `t` completes.
    known: Vec<u32>,
    host: Vec<u32>,
    count: Vec<u32>,
    hist: Vec<History>,
    /// Per stream: the position plus one of its last op that does device work (0: none).
    last_work: Vec<u32>,
    /// Position of each device op on its stream.
    pos: Vec<u32>,
    /// Device ops of each stream in position order.
    stream_ops: Vec<Vec<OpId>>,
    /// Event recorded right after each op, or NONE.
    record_after: Vec<u32>,
    /// Flattened clocks of events.
    ev_clock: Vec<u32>,
    events: u32,
}

impl State {
    /// Nothing issued yet, for `n` ops on `s` streams.
    fn new(n: usize, s: usize) -> State {
        State {
            s,
            known: vec![0; s * s],
            host: vec![0; s],
            count: vec![0; s],
            hist: (0..s)
                .map(|_| History {
                    pos: vec![0],
                    clocks: vec![0; s],
                })
                .collect(),
            last_work: vec![0; s],
            pos: vec![NONE; n],
            stream_ops: vec![Vec::new(); s],
            record_after: vec![NONE; n],
            ev_clock: Vec::new(),
            events: 0,
        }
    }

    fn known(&self, t: usize) -> &[u32] {
        &self.known[t * self.s..(t + 1) * self.s]
    }

    /// Clock once the op at position `p` on stream `st` completes.
    fn clock_after(&self, st: usize, p: u32) -> Vec<u32> {
        let h = &self.hist[st];
        let i = h.pos.partition_point(|&x| x <= p) - 1;
        let mut c = h.clocks[i * self.s..(i + 1) * self.s].to_vec();
        c[st] = p + 1;
        c
    }

    /// Whether a host wait on all of stream `t` teaches the host nothing that waiting
    /// for its op at position `need - 1` (clock `ev`, [`State::clock_after`]) does not,
    /// except ops of `t` after it that do no device work: no working op follows it on
    /// `t`, and what `t` learned from other streams since is known to `ev` or to `base`
    /// (what the waiting lane knows).
    /// `O(S)`.
    fn stream_wait_suffices(&self, t: usize, need: u32, ev: &[u32], base: &[u32]) -> bool {
        self.last_work[t] <= need
            && (0..self.s).all(|i| i == t || self.known(t)[i] <= ev[i].max(base[i]))
    }

    /// The event recorded right after device op `src` (whose clock is `clock`): the one
    /// already there, else a new one. `O(S)`.
    fn event_after(&mut self, src: OpId, clock: &[u32]) -> u32 {
        match self.record_after[src.index()] {
            NONE => {
                let e = self.events;
                self.events += 1;
                self.record_after[src.index()] = e;
                self.ev_clock.extend_from_slice(clock);
                e
            }
            e => e,
        }
    }

    /// Issues a device op on stream `t` (`works`: it does device work, see
    /// [`OpGraph::does_device_work`]): its start knowledge is the stream's plus the
    /// host's (the host issued it after everything the host knows complete).
    fn issue(&mut self, op: OpId, t: usize, works: bool) {
        let s = self.s;
        let p = self.count[t];
        let mut changed = false;
        for i in 0..s {
            let k = &mut self.known[t * s + i];
            if i != t && self.host[i] > *k {
                *k = self.host[i];
                changed = true;
            }
        }
        let h = &self.hist[t];
        let last = h.pos.len() - 1;
        if !changed {
            let snap = &h.clocks[last * s..(last + 1) * s];
            changed = (0..s).any(|i| i != t && snap[i] != self.known[t * s + i]);
        }
        if changed {
            let row = self.known[t * s..(t + 1) * s].to_vec();
            let h = &mut self.hist[t];
            h.pos.push(p);
            h.clocks.extend(row);
        }
        self.count[t] = p + 1;
        if works {
            self.last_work[t] = p + 1;
        }
        self.known[t * s + t] = p + 1;
        self.pos[op.index()] = p;
        self.stream_ops[t].push(op);
    }
}

/// A sync candidate: one source stream whose ops an op needs.
struct Cand {
    /// The source stream.
    stream: usize,
    /// The position on it that must be complete, plus one.
    need: u32,
    /// What the sync teaches (a vector clock).
    clock: Vec<u32>,
    /// The op after which its event is recorded (an event wait before a device op, or a
    /// host wait on an event).
    src: OpId,
    /// Before a host op: wait on the event after `src` (`true`) or on the whole stream.
    /// Always `true` before a device op.
    event: bool,
    /// The source is a host lane: await host op `src` ([`Step::HostAwait`]).
    await_op: bool,
}

/// Drops candidates whose need the others (plus `base`) already cover; each kept one is
/// needed: without it its own need, or that of a dropped one, is uncovered.
///
/// A candidate is dropped only if the candidates still kept cover its need *and* the
/// need of every candidate dropped before it. Checking only its own need is unsound
/// when a clock says more than the need (a host wait's clock on a whole stream is
/// everything issued to it, not the prefix up to the need): `a` dropped because `b`'s
/// full clock covers it, then `b` dropped because `c` covers `b`'s need, leaves `a`
/// uncovered.
fn reduce(base: &[u32], cands: &mut Vec<Cand>) {
    let n = cands.len();
    let mut keep = vec![true; n];
    let covered = |keep: &[bool], j: usize| {
        let (st, need) = (cands[j].stream, cands[j].need);
        base[st] >= need || (0..n).any(|k| keep[k] && k != j && cands[k].clock[st] >= need)
    };
    for i in 0..n {
        keep[i] = false;
        if !(0..n).filter(|&j| !keep[j]).all(|j| covered(&keep, j)) {
            keep[i] = true;
        }
    }
    let mut k = keep.into_iter();
    cands.retain(|_| k.next().unwrap_or(true));
}

/// Inserts synchronization under `policy`, with `host_lanes` host lanes (0 counts as 1).
///
/// Arguments: the graph and its stream assignment (every device op must have a stream).
/// Returns the schedule: ops issued in readiness order (device ops ahead of host ops they
/// do not depend on; see `order::issue_order`), each host op on the lane where the
/// op cost model estimates it starts first (a host pred's lane on a tie).
/// Panics if a device op has no stream (an assignment bug).
///
/// Host lanes are clock columns after the streams': a host op takes the next position of
/// its lane's column; a host wait run by a lane teaches that lane's row, one run by the
/// issuing thread the host's (see [`Schedule::wait_owners`] for who runs which). An edge
/// from a host op is ordered by lane order (the same lane), or by a
/// [`Step::HostAwait`] before the op that needs it (on its lane, or on the issuing
/// thread before a device op).
///
/// Complexity: see the module docs.
pub fn insert_sync(
    graph: &OpGraph,
    a: &StreamAssignment,
    policy: SyncPolicy,
    host_lanes: u32,
) -> Schedule {
    let n = graph.ops.len();
    let lanes = host_lanes.clamp(1, super::MAX_HOST_LANES) as usize;
    let cols = used_columns(a);
    let ns = cols.width();
    let s = ns + lanes;
    let mut st = State::new(n, s);
    let mut steps: Vec<Step> = Vec::with_capacity(n + n / 4);
    let mut sc = Scratch::new(s);
    let mut choice = LaneChoice::new(lanes, n);
    let mut op_lane = vec![0u32; n];
    // Columns whose policy host waits (issued after a device op) are not yet given to a
    // lane or the issuing thread: the next op decides (`Schedule::wait_owners`).
    let mut deferred: Vec<usize> = Vec::new();
    // A `per-region` host wait not yet issued: it waits past the write-backs that
    // follow it on its stream ([`hold_policy_wait`]). `per-op` waits right after each
    // copy, write-backs' too, as the old runtime did.
    let mut held: Option<(StreamId, usize)> = None;
    // Ops of each region not issued yet: a region ends at its last op in issue order,
    // which need not be its last by id (a `target data` end's free issued ahead of a
    // D2H that waits for a host task).
    let mut unissued: Vec<u32> = graph.regions.iter().map(|r| r.ops.len() as u32).collect();
    for id in issue_order(graph, a) {
        let stream = a.op_stream[id.index()];
        if let Some((t, col)) = held {
            if !hold_policy_wait(graph, t, stream, id) {
                steps.push(Step::HostWait { stream: t });
                deferred.push(col);
                held = None;
            }
        }
        let col = match stream.and_then(|t| cols.col(t)) {
            Some(c) => c,
            None => {
                let l = choice.pick(graph, &op_lane, id);
                op_lane[id.index()] = l as u32;
                ns + l
            }
        };
        let on_stream = stream.is_some();
        for c in deferred.drain(..) {
            match on_stream {
                true => join_row_into_host(&mut st, c),
                false => join_rows(&mut st, col, c),
            }
        }
        sc.start_knowledge(&st, col);
        sc.unimplied_needs(graph, a, &cols, &op_lane, &st, id);
        sc.candidates(graph, &st, on_stream, ns, policy);
        reduce(&sc.base, &mut sc.cands);
        match stream {
            Some(t) => {
                host_awaits(&mut st, &mut steps, &mut sc.cands, None);
                wait_events(&mut st, &mut steps, &mut sc.cands, t, col);
                st.issue(id, col, graph.does_device_work(id));
                steps.push(Step::Op(id));
                let left = &mut unissued[graph.op(id).region.index()];
                *left -= 1;
                if policy_waits_after(graph, policy, id, *left == 0) {
                    match policy {
                        SyncPolicy::PerRegion => held = Some((t, col)),
                        _ => {
                            steps.push(Step::HostWait { stream: t });
                            deferred.push(col);
                        }
                    }
                }
            }
            None => {
                host_awaits(&mut st, &mut steps, &mut sc.cands, Some(col));
                host_waits_before(a, &cols, &mut st, &mut steps, &sc.cands, col);
                sc.cands.clear();
                st.issue(id, col, true);
                steps.push(Step::Op(id));
            }
        }
    }
    if let Some((t, _)) = held {
        steps.push(Step::HostWait { stream: t });
    }
    Schedule {
        name: graph.name.clone(),
        policy,
        streams: a.streams.clone(),
        op_stream: a.op_stream.clone(),
        steps: place_records(a, &st, steps),
        events: st.events,
        host_lanes: lanes as u32,
        op_lane,
        text: OpText::new(graph, a.pool),
    }
}

/// Row `from` joined into row `to` (a lane learns what a host wait it runs taught).
fn join_rows(st: &mut State, to: usize, from: usize) {
    let s = st.s;
    for i in 0..s {
        let v = st.known[from * s + i];
        let k = &mut st.known[to * s + i];
        *k = (*k).max(v);
    }
}

/// The issuing thread learns row `t` (a host wait on stream `t` that it runs).
fn join_row_into_host(st: &mut State, t: usize) {
    join_host(st, t);
}

/// [`Step::HostAwait`] for each await candidate of `cands` (removed from it): run by the
/// lane of row `row` (before a host op) or by the issuing thread (`None`, before a
/// device op), which learns the clock right after the awaited op. `O(S)` each.
fn host_awaits(st: &mut State, steps: &mut Vec<Step>, cands: &mut Vec<Cand>, row: Option<usize>) {
    let s = st.s;
    cands.retain(|c| {
        if !c.await_op {
            return true;
        }
        let target = match row {
            Some(r) => &mut st.known[r * s..(r + 1) * s],
            None => &mut st.host[..],
        };
        for (k, v) in target.iter_mut().zip(&c.clock) {
            *k = (*k).max(*v);
        }
        steps.push(Step::HostAwait { op: c.src });
        false
    });
}

/// The clock columns of assignment `a`: the streams its ops are on.
fn used_columns(a: &StreamAssignment) -> Columns {
    Columns::new(a.streams.len(), a.op_stream.iter().flatten().copied())
}

/// Bytes the clock tables of [`insert_sync`] and of [`crate::verify::verify`] take
/// together for `graph` under assignment `a`, at most, for a memory check before the
/// work starts. Clocks are `S` entries wide for the `S` streams that carry work (see the
/// module docs). Counted, in clocks: what each stream knows, in both passes (`2·S`); the
/// sync pass's candidates before one op (`S`) and each stream's first snapshot (`S`);
/// a snapshot per device op whose stream learned something (at most the `D` device ops,
/// and at most one per edge `C` leaving a device op for another stream or the host plus
/// `S` per host op `H`); an event clock per such edge in both passes (`2·C`); the
/// verifier's end clock of each device op a host op depends on (`C`). In all
/// `4·S·(4·S + min(D, C + H·S) + 3·C)` bytes, saturating. `O(V + E)`.
pub fn clock_bytes(graph: &OpGraph, a: &StreamAssignment) -> u64 {
    let s = used_columns(a).width() as u64;
    let (mut device_ops, mut host_ops, mut leaving) = (0u64, 0u64, 0u64);
    for id in graph.op_ids() {
        let on = a.op_stream[id.index()];
        match on {
            Some(_) => device_ops += 1,
            None => host_ops += 1,
        }
        for &p in graph.preds(id) {
            let from = a.op_stream[p.index()];
            if from.is_some() && from != on {
                leaving += 1;
            }
        }
    }
    let snapshots = device_ops.min(leaving.saturating_add(host_ops.saturating_mul(s)));
    let clocks = s
        .saturating_mul(4)
        .saturating_add(snapshots)
        .saturating_add(leaving.saturating_mul(3));
    s.saturating_mul(clocks).saturating_mul(4)
}

/// Per-op working memory of [`insert_sync`], reused from op to op (`S` = used streams).
struct Scratch {
    /// Per source stream, the latest needed position plus one (0: none), and its op.
    need: Vec<u32>,
    need_op: Vec<OpId>,
    /// Source streams with a need, then sorted.
    touched: Vec<usize>,
    cands: Vec<Cand>,
    /// The op's start knowledge before any new sync.
    base: Vec<u32>,
}

impl Scratch {
    fn new(s: usize) -> Scratch {
        Scratch {
            need: vec![0u32; s],
            need_op: vec![OpId(0); s],
            touched: Vec::new(),
            cands: Vec::new(),
            base: vec![0u32; s],
        }
    }

    /// `base` := the start knowledge of an op on the stream or lane of column `col`,
    /// before any new sync: the column's and the issuing thread's. `O(S)`.
    fn start_knowledge(&mut self, st: &State, col: usize) {
        let known = st.known(col);
        for ((b, k), h) in self.base.iter_mut().zip(known).zip(&st.host) {
            *b = (*k).max(*h);
        }
    }

    /// The unimplied in-edges of op `id`: per source column (a stream, or a host lane
    /// after the streams), the latest needed position (`need`, `need_op`), the columns in
    /// `touched` (sorted). `O(in-degree + S log S)`.
    fn unimplied_needs(
        &mut self,
        graph: &OpGraph,
        a: &StreamAssignment,
        cols: &Columns,
        op_lane: &[u32],
        st: &State,
        id: OpId,
    ) {
        self.touched.clear();
        for &p in graph.preds(id) {
            let ps = match a.op_stream[p.index()] {
                Some(t) => match cols.col(t) {
                    Some(c) => c,
                    None => continue,
                },
                None => cols.width() + op_lane[p.index()] as usize,
            };
            let want = st.pos[p.index()] + 1;
            if self.base[ps] >= want {
                continue;
            }
            if self.need[ps] == 0 {
                self.touched.push(ps);
            }
            if want > self.need[ps] {
                self.need[ps] = want;
                self.need_op[ps] = p;
            }
        }
        self.touched.sort_unstable();
    }

    /// `cands` := one candidate per touched stream (and the needs reset): for an op on a
    /// stream, an event at the [`record_point`] of the need; for a host op, a host wait
    /// on the whole stream (its clock: everything issued to it) where
    /// [`State::stream_wait_suffices`] or the policy is not `minimal`, else on an event
    /// right after the needed op (not moved past allocs and frees: the host waits for
    /// exactly that op). `O(S)` per candidate, plus the [`record_point`] walk.
    /// A source column at or after `ns` is a host lane: its candidate awaits the needed
    /// host op ([`Step::HostAwait`]; the clock right after it).
    fn candidates(
        &mut self,
        graph: &OpGraph,
        st: &State,
        on_stream: bool,
        ns: usize,
        policy: SyncPolicy,
    ) {
        self.cands.clear();
        for &ps in &self.touched {
            // The need stays the real one (what must be covered); the clock is what
            // waiting on the event recorded at `src` (or on the stream) teaches.
            let need = self.need[ps];
            let (clock, src, event) = match on_stream {
                _ if ps >= ns => (st.clock_after(ps, need - 1), self.need_op[ps], false),
                true => {
                    let (upto, src) = record_point(graph, st, ps, self.need_op[ps]);
                    (st.clock_after(ps, upto - 1), src, true)
                }
                false => {
                    let ev = st.clock_after(ps, need - 1);
                    if policy != SyncPolicy::Minimal
                        || st.stream_wait_suffices(ps, need, &ev, &self.base)
                    {
                        (st.known(ps).to_vec(), self.need_op[ps], false)
                    } else {
                        (ev, self.need_op[ps], true)
                    }
                }
            };
            self.cands.push(Cand {
                stream: ps,
                need,
                clock,
                src,
                event,
                await_op: ps >= ns,
            });
            self.need[ps] = 0;
        }
    }
}

/// Before a device op on stream `t` (column `ti`): a `Wait` on `t` per (reduced)
/// candidate, for the event recorded after its op (a new event unless one is recorded
/// there already); `t` learns each clock. Drains `cands`. `O(S)` per candidate.
fn wait_events(
    st: &mut State,
    steps: &mut Vec<Step>,
    cands: &mut Vec<Cand>,
    t: StreamId,
    ti: usize,
) {
    let s = st.s;
    for Cand { clock, src, .. } in cands.drain(..) {
        let e = st.event_after(src, &clock);
        for (k, c) in st.known[ti * s..(ti + 1) * s].iter_mut().zip(&clock) {
            *k = (*k).max(*c);
        }
        steps.push(Step::Wait {
            event: EventId(e),
            stream: t,
        });
    }
}

/// Whether `policy` puts a host wait right after device op `id` (`last`: the last op of
/// its region in issue order): `per-op` after every copy and launch, and at the end of
/// a synchronous region with neither; `per-region` at the end of every region without
/// `nowait`; `minimal` never. `O(1)`, or the region's ops for `per-op` at a region end.
///
/// The end is the region's last *issued* op, not its last by id: the issue order may
/// take a region's ops out of id order (a D2H of a `target data` end that waits for a
/// host task goes after the frees that do not), and a wait after the last by id would
/// leave the rest for the next host access to wait on again (a proptest seed counted
/// per-region 6 waits against per-op 5 so).
///
/// `per-region` waits at the end of every synchronous region, whatever it maps back:
/// a kernel-only region inside `target data` included. The construct is synchronous
/// (OpenMP 5.2 §13.8: without `nowait` the encountering thread waits for the target
/// task), and libomptarget's `targetKernel` ends every such region with
/// `AsyncInfo.synchronize()` on the region's queue, with or without a D2H in it.
fn policy_waits_after(graph: &OpGraph, policy: SyncPolicy, id: OpId, last: bool) -> bool {
    let region = graph.region_of(id);
    let region_end = !region.nowait && last;
    match policy {
        // The old runtime waited after every copy and launch; a
        // synchronous construct with neither still ends with a wait.
        SyncPolicy::PerOp => {
            graph.op(id).kind.is_copy_or_launch()
                || (region_end
                    && !region
                        .ops
                        .clone()
                        .any(|o| graph.op(OpId(o)).kind.is_copy_or_launch()))
        }
        SyncPolicy::PerRegion => region_end,
        SyncPolicy::Minimal => false,
    }
}

/// Whether a `per-region` host wait on stream `t` (after the last op of a region)
/// waits until device op `id` on `stream` is issued too: `id` is an op of a
/// [`RegionKind::Writeback`] region on the same stream. A write-back is a D2H (or an
/// eviction) the lowering deferred out of an earlier construct's exit; unelided, that
/// construct's own region-end wait covered it. Between the region's last op and the
/// write-backs the host touches no memory, so waiting after them is the same host wait
/// (`cuStreamSynchronize` on `t`, D77005's one sync per region) and spares the next host
/// access a wait of its own: `case_m10` under `per-region` makes 2 host waits, as
/// without elision, not 3. `O(1)`.
fn hold_policy_wait(graph: &OpGraph, t: StreamId, stream: Option<StreamId>, id: OpId) -> bool {
    stream == Some(t) && graph.region_of(id).kind == RegionKind::Writeback
}

/// Before a host op: the host waits for the (reduced) candidates, each on its stream or
/// on the event after its needed op. When the waits for the candidates of a device would
/// make the host know every op issued to that device complete anyway, one device-wide
/// wait (`cuCtxSynchronize`) replaces them; otherwise one wait per candidate, so the host
/// never waits for work it does not need. Decided per device before any wait changes
/// what the host knows. `O(S²)` (the candidates and their devices are at most `S`).
fn host_waits_before(
    a: &StreamAssignment,
    cols: &Columns,
    st: &mut State,
    steps: &mut Vec<Step>,
    cands: &[Cand],
    row: usize,
) {
    let ns = cols.width();
    let device = |c: usize| a.streams[cols.stream(c).index()].device;
    let mut devices: Vec<u32> = cands.iter().map(|c| device(c.stream)).collect();
    devices.sort_unstable();
    devices.dedup();
    for dev in devices {
        let group: Vec<&Cand> = cands.iter().filter(|c| device(c.stream) == dev).collect();
        // What the lane would know after the group's waits.
        let mut after = st.known(row).to_vec();
        for (h, k) in after.iter_mut().zip(&st.host) {
            *h = (*h).max(*k);
        }
        for c in &group {
            for (h, k) in after.iter_mut().zip(&c.clock) {
                *h = (*h).max(*k);
            }
        }
        // Streams of the device that carry no work have nothing to wait for.
        let covers_device = (0..ns)
            .filter(|&t| device(t) == dev)
            .all(|t| after[t] >= st.count[t]);
        if group.len() > 1 && covers_device {
            for t in (0..ns).filter(|&t| device(t) == dev) {
                join_rows(st, row, t);
            }
            steps.push(Step::HostWaitDevice { device: dev });
        } else {
            for c in group {
                if c.event {
                    host_wait_event(st, steps, c, row);
                } else {
                    join_rows(st, row, c.stream);
                    steps.push(Step::HostWait {
                        stream: cols.stream(c.stream),
                    });
                }
            }
        }
    }
}

/// The final issue sequence: `steps` with each event's `Record` right after the op it
/// follows. `O(steps + events)`.
fn place_records(a: &StreamAssignment, st: &State, steps: Vec<Step>) -> Vec<Step> {
    let mut out = Vec::with_capacity(steps.len() + st.events as usize);
    for step in steps {
        out.push(step);
        if let Step::Op(op) = step {
            let e = st.record_after[op.index()];
            if e != NONE {
                let stream = a.op_stream[op.index()].expect("events follow device ops");
                out.push(Step::Record {
                    event: EventId(e),
                    stream,
                });
            }
        }
    }
    out
}

/// Where an event for a wait on op `need` (on stream `ps`) is recorded: right after
/// `need`, moved past the allocs and frees of `need`'s region that follow it on the
/// stream and were issued already. Waiting for those costs nothing worth the name (a
/// stream-ordered alloc or free), and the event then stands for the region's whole
/// issued part, so later consumers of the same region share it instead of each taking
/// an event after its own alloc (a `target data` that maps 24 buffers gives one event per
/// consuming stream, not one per consuming region). Returns `(position + 1, op)`.
fn record_point(graph: &OpGraph, st: &State, ps: usize, need: OpId) -> (u32, OpId) {
    let ops = &st.stream_ops[ps];
    let region = graph.op(need).region;
    let mut p = st.pos[need.index()] as usize;
    while let Some(&next) = ops.get(p + 1) {
        let op = graph.op(next);
        let cheap = matches!(op.kind, OpKind::Alloc { .. } | OpKind::Free { .. });
        if op.region != region || !cheap {
            break;
        }
        p += 1;
    }
    (p as u32 + 1, ops[p])
}

fn join_host(st: &mut State, t: usize) {
    for i in 0..st.s {
        st.host[i] = st.host[i].max(st.known[t * st.s + i]);
    }
}

/// The lane of row `row` waits on the event right after candidate `c`'s op (recorded
/// there unless one is already) and learns its clock. `O(S)`.
fn host_wait_event(st: &mut State, steps: &mut Vec<Step>, c: &Cand, row: usize) {
    let e = st.event_after(c.src, &c.clock);
    let s = st.s;
    for (h, k) in st.known[row * s..(row + 1) * s].iter_mut().zip(&c.clock) {
        *h = (*h).max(*k);
    }
    steps.push(Step::HostWaitEvent { event: EventId(e) });
}
