//! How much a run overlapped, and how close it came to the DAG's critical path.
//!
//! [`overlap`] reads the measured op times of a [`Report`] against the [`OpGraph`] it
//! ran and returns an [`Overlap`]: the span of the run, the busy time of each stream and
//! of the host, and the critical-path bound (the longest path through the graph's edges,
//! each op weighing its measured duration). A schedule can never finish faster than its
//! critical path, so `span / critical path` says how far the colouring and the sync are
//! from the best any schedule could do with these op times (the target of the [design notes](crate::design) on the
//! host plugin: ≤ 1.2), and `busy / span` how many lanes were busy on average.
//!
//! Which ops count:
//! - **work ops**: every device op with a measured time ([`OpTime::timed`]) and every
//!   host task (with or without a kernel). They make the span, the busy times, and weigh
//!   their duration `end_us - start_us` on the critical path.
//! - **markers** (`Taskwait`, `End`) do no work of the program (`End`'s time is the
//!   executor copying the final buffers out): they are left out of the span and busy
//!   times and weigh 0 on the critical path (they still link their predecessors to their
//!   successors).
//! - **untimed device ops** (allocs and frees on the CUDA plugin with timing, which
//!   only times copies and kernels): left out like markers, weighing 0. Stream-ordered
//!   allocation costs µs, so the bound is low by at most that much per op on the path.
//!
//! When any copy or kernel in the report is untimed (the null plugin, the CUDA plugin
//! without `timing` / `--trace`: their start and end are the issue time), the figures
//! would describe the issue loop, not the run: [`overlap`] returns `None`.

use crate::exec::{OpTime, Report};
use crate::lower::{OpGraph, OpId, OpKind};
use crate::schedule::StreamId;
use std::collections::BTreeMap;

/// The overlap figures of one run. Times in µs.
#[derive(Clone, Debug, PartialEq)]
pub struct Overlap {
    /// From the earliest start to the latest end of the work ops (see the module docs):
    /// the time the program's work took, without setup, teardown or the `End` snapshot.
    /// 0 when there is no work op.
    pub span_us: f64,
    /// Per stream that ran a work op: the length of the union of its ops' intervals
    /// `[start_us, end_us)`. Ops on one stream run in order so the union is their sum,
    /// but overlapping intervals are merged, never counted twice.
    pub busy_us: BTreeMap<StreamId, f64>,
    /// The host lane's busy time: the union of the host tasks' intervals. Host tasks do
    /// the program's work (a kernel on the host copies) while the streams run, so they
    /// count towards [`Overlap::overlap`] as one more lane.
    pub host_busy_us: f64,
    /// The time during which at least two lanes (streams or the host) were busy at once,
    /// in µs (≤ [`Overlap::span_us`]); see [`Overlap::concurrent_share`].
    pub concurrent_us: f64,
    /// The longest path through the graph's edges, each op weighing its measured
    /// duration (markers and untimed ops 0): no schedule of these op times can have a
    /// shorter span.
    pub critical_path_us: f64,
    /// The ops of one longest path, from its first op to its last, in id (= topological)
    /// order; includes zero-weight ops it passes through (allocs, markers). Ties go to
    /// the lowest id: the path ends at the first op whose finish is the longest and
    /// each step back takes the lowest-id predecessor with the latest finish. Empty for
    /// an empty graph.
    pub critical_ops: Vec<OpId>,
    /// Per host task (with a kernel, a closure or neither), in op id order: `(ready_us,
    /// work_us)`, the earliest it could start — the longest path to it, each op weighing
    /// its measured duration, as for [`Overlap::critical_path_us`] — and its measured
    /// duration. See [`Overlap::host_lane_bound_us`].
    pub host_tasks: Vec<(f64, f64)>,
}

impl Overlap {
    /// The lower bound on the span with `streams` device streams, in µs: the critical
    /// path, or the streams' busy time spread evenly over `streams` (at least 1) if that
    /// is longer (no schedule on that many in-order streams finishes sooner).
    pub fn stream_bound_us(&self, streams: usize) -> f64 {
        let work: f64 = self.busy_us.values().sum();
        self.critical_path_us.max(work / streams.max(1) as f64)
    }

    /// The lower bound on the span with `lanes` host lanes (at least 1), in µs: for
    /// each host task's ready time `r` ([`Overlap::host_tasks`]), `r` plus the work of
    /// the host tasks ready at `r` or later spread evenly over the lanes — those tasks
    /// cannot start before `r`, and at most `lanes` run at once — the largest of these;
    /// 0 without host tasks. With the earliest ready time alone this is "earliest host
    /// task ready + host work / lanes"; the later thresholds can only raise it. Like the
    /// critical path it takes the measured op times as given.
    ///
    /// Complexity: `O(H log H)` for `H` host tasks.
    pub fn host_lane_bound_us(&self, lanes: usize) -> f64 {
        let mut tasks = self.host_tasks.clone();
        tasks.sort_by(|a, b| a.0.total_cmp(&b.0));
        let lanes = lanes.max(1) as f64;
        let mut later = 0.0;
        let mut bound = 0.0f64;
        for &(ready, work) in tasks.iter().rev() {
            later += work;
            bound = bound.max(ready + later / lanes);
        }
        bound
    }

    /// Busy time summed over the streams and the host lane, in µs.
    pub fn busy_total_us(&self) -> f64 {
        self.busy_us.values().sum::<f64>() + self.host_busy_us
    }

    /// Average number of busy lanes: [`Overlap::busy_total_us`] / [`Overlap::span_us`]
    /// (1.0 for a run that never overlapped). `None` when the span is 0.
    pub fn overlap(&self) -> Option<f64> {
        (self.span_us > 0.0).then(|| self.busy_total_us() / self.span_us)
    }

    /// [`Overlap::concurrent_us`] / [`Overlap::span_us`]: the share of the span (0..=1)
    /// with two or more lanes busy. `None` when the span is 0.
    pub fn concurrent_share(&self) -> Option<f64> {
        (self.span_us > 0.0).then(|| self.concurrent_us / self.span_us)
    }

    /// `span_us / critical_path_us`: 1.0 means the run was as short as its op times
    /// allow. `None` when the critical path is 0.
    pub fn span_per_critical_path(&self) -> Option<f64> {
        (self.critical_path_us > 0.0).then(|| self.span_us / self.critical_path_us)
    }
}

/// Whether `t` is a work op (see the module docs) of `graph`.
fn is_work(graph: &OpGraph, t: &OpTime) -> bool {
    match graph.op(t.op).kind {
        OpKind::Taskwait | OpKind::End => false,
        OpKind::HostTask { .. } => true,
        _ => t.timed,
    }
}

/// The union of the intervals `[start, end)` as disjoint intervals in start order (an
/// interval with `end < start` counts as empty at `start`). Sorts `iv`.
///
/// Complexity: `O(n log n)` for `n` intervals.
fn merge(iv: &mut [(f64, f64)]) -> Vec<(f64, f64)> {
    iv.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<(f64, f64)> = Vec::new();
    for &(s, e) in iv.iter() {
        let e = e.max(s);
        match out.last_mut() {
            Some((_, ce)) if s <= *ce => *ce = ce.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// Length of the union of the intervals `[start, end)`, in their unit. Sorts `iv`.
///
/// Complexity: `O(n log n)` for `n` intervals.
#[cfg(test)]
fn union_len(iv: &mut [(f64, f64)]) -> f64 {
    merge(iv).iter().map(|(s, e)| e - s).sum()
}

/// The time during which at least two of `lanes` (each a list of disjoint intervals) are
/// busy, in their unit: a sweep over the interval ends, an end before a start at the same
/// instant.
///
/// Complexity: `O(n log n)` for `n` intervals in all.
fn concurrent_len(lanes: &[Vec<(f64, f64)>]) -> f64 {
    let mut edges: Vec<(f64, i32)> = lanes
        .iter()
        .flatten()
        .flat_map(|&(s, e)| [(s, 1), (e, -1)])
        .collect();
    edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut busy, mut at, mut total) = (0i32, 0.0f64, 0.0f64);
    for (t, d) in edges {
        if busy >= 2 {
            total += t - at;
        }
        busy += d;
        at = t;
    }
    total
}

/// The overlap figures of `report`, a run of `graph` (see the module docs for which ops
/// count and how).
///
/// Arguments: the graph that was run and its [`Report`]. Report entries naming an op the
/// graph lacks are ignored; graph ops missing from the report weigh 0.
///
/// Returns `None` when a copy or kernel in the report has no measured time (a plugin
/// without timing), else the [`Overlap`].
///
/// The critical path is a dynamic program over the ops in id order, which is a
/// topological order of the [`OpGraph`] (every edge goes from a lower to a higher id,
/// [`OpGraph::push_op`] asserts it): `finish(v) = weight(v) + max finish(preds(v))`, the
/// path read back through each op's latest-finishing predecessor. No petgraph graph is
/// built: the graph's own predecessor lists already give the order.
///
/// Complexity: `O(V + E + n log n)` time and `O(V + n)` memory for `V` ops, `E` edges
/// and `n` report entries (the sort is the busy-time union per lane).
pub fn overlap(graph: &OpGraph, report: &Report) -> Option<Overlap> {
    let n = graph.ops.len();
    let mut weight = vec![0.0f64; n];
    let mut lanes: BTreeMap<Option<StreamId>, Vec<(f64, f64)>> = BTreeMap::new();
    let (mut first, mut last) = (f64::INFINITY, f64::NEG_INFINITY);
    for t in &report.ops {
        if t.op.index() >= n {
            continue;
        }
        if !t.timed && graph.op(t.op).kind.is_copy_or_launch() {
            return None;
        }
        if !is_work(graph, t) {
            continue;
        }
        let end = t.end_us.max(t.start_us);
        weight[t.op.index()] = end - t.start_us;
        first = first.min(t.start_us);
        last = last.max(end);
        lanes.entry(t.stream).or_default().push((t.start_us, end));
    }
    let span_us = if last >= first { last - first } else { 0.0 };
    let mut busy_us = BTreeMap::new();
    let mut host_busy_us = 0.0;
    let mut merged = Vec::with_capacity(lanes.len());
    for (lane, mut iv) in lanes {
        let m = merge(&mut iv);
        let busy = m.iter().map(|(s, e)| e - s).sum();
        merged.push(m);
        match lane {
            Some(s) => {
                busy_us.insert(s, busy);
            }
            None => host_busy_us += busy,
        }
    }
    let (critical_path_us, critical_ops, finish) = critical_path(graph, &weight);
    let host_tasks = (graph.op_ids())
        .filter(|&v| matches!(graph.op(v).kind, OpKind::HostTask { .. }))
        .map(|v| {
            let ready = (graph.preds(v).iter()).fold(0.0f64, |r, u| r.max(finish[u.index()]));
            (ready, weight[v.index()])
        })
        .collect();
    Some(Overlap {
        span_us,
        busy_us,
        host_busy_us,
        concurrent_us: concurrent_len(&merged),
        critical_path_us,
        critical_ops,
        host_tasks,
    })
}

/// The longest path of `graph` with op `i` weighing `weight[i]` (µs, ≥ 0): its length,
/// its ops in id order, and every op's earliest finish (the longest path ending with
/// it). See [`overlap`] for the method and tie rules.
///
/// Complexity: `O(V + E)`.
fn critical_path(graph: &OpGraph, weight: &[f64]) -> (f64, Vec<OpId>, Vec<f64>) {
    let n = graph.ops.len();
    let mut finish = vec![0.0f64; n];
    let mut via: Vec<Option<OpId>> = vec![None; n];
    let mut end: Option<OpId> = None;
    for v in graph.op_ids() {
        let mut best: Option<OpId> = None;
        for &u in graph.preds(v) {
            if best.is_none_or(|b| finish[u.index()] > finish[b.index()]) {
                best = Some(u);
            }
        }
        let before = best.map_or(0.0, |b| finish[b.index()]);
        finish[v.index()] = before + weight[v.index()];
        via[v.index()] = best;
        if end.is_none_or(|e| finish[v.index()] > finish[e.index()]) {
            end = Some(v);
        }
    }
    let Some(end) = end else {
        return (0.0, Vec::new(), finish);
    };
    let mut path = vec![end];
    while let Some(p) = via[path[path.len() - 1].index()] {
        path.push(p);
    }
    path.reverse();
    (finish[end.index()], path, finish)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::{AllocId, Op, RegionId};

    /// A graph of `kinds` with `preds`, all in region 0 on device 0.
    fn graph(ops: &[(OpKind, &[u32])]) -> OpGraph {
        let mut g = OpGraph::new("t", Vec::new(), Vec::new(), 1);
        for (kind, preds) in ops {
            g.push_op(
                Op {
                    kind: kind.clone(),
                    region: RegionId(0),
                    device: 0,
                },
                preds.iter().map(|&p| OpId(p)).collect(),
            );
        }
        g
    }

    fn alloc() -> OpKind {
        OpKind::Alloc { alloc: AllocId(0) }
    }

    fn host() -> OpKind {
        OpKind::HostTask {
            reads: Vec::new(),
            writes: Vec::new(),
            call: None,
            body: None,
        }
    }

    /// Op `op` on stream `s` (`None`: host) from `start` to `end` µs, measured.
    fn t(op: u32, s: Option<u32>, start: f64, end: f64) -> OpTime {
        OpTime {
            op: OpId(op),
            stream: s.map(StreamId),
            device: 0,
            issue_us: start,
            start_us: start,
            end_us: end,
            timed: true,
            batch: 0,
        }
    }

    fn report(ops: Vec<OpTime>) -> Report {
        Report {
            plugin: "test".into(),
            ops,
            ..Report::default()
        }
    }

    #[test]
    fn chain_on_one_stream() {
        // 0 -> 1 -> 2 -> 3(end): one stream, gaps between ops.
        let g = graph(&[
            (alloc(), &[]),
            (host(), &[0]),
            (alloc(), &[1]),
            (OpKind::End, &[2]),
        ]);
        let r = report(vec![
            t(0, Some(0), 10.0, 20.0),
            t(1, None, 25.0, 45.0),
            t(2, Some(0), 50.0, 60.0),
            t(3, None, 60.0, 500.0), // the marker's time counts nowhere
        ]);
        let o = overlap(&g, &r).unwrap();
        assert_eq!(o.span_us, 50.0);
        assert_eq!(o.busy_us, BTreeMap::from([(StreamId(0), 20.0)]));
        assert_eq!(o.host_busy_us, 20.0);
        assert_eq!(o.busy_total_us(), 40.0);
        assert_eq!(o.overlap(), Some(0.8));
        // The host task and the stream's ops never ran at once.
        assert_eq!(o.concurrent_us, 0.0);
        assert_eq!(o.critical_path_us, 40.0);
        assert_eq!(o.critical_ops, [OpId(0), OpId(1), OpId(2)]);
        assert_eq!(o.span_per_critical_path(), Some(1.25));
    }

    #[test]
    fn fork_join_on_two_streams() {
        // 0 -> {1, 2} -> 3 -> 4(end); 1 and 2 in parallel on s0 and s1.
        let g = graph(&[
            (alloc(), &[]),
            (alloc(), &[0]),
            (alloc(), &[0]),
            (alloc(), &[1, 2]),
            (OpKind::End, &[3]),
        ]);
        let r = report(vec![
            t(0, Some(0), 0.0, 5.0),
            t(1, Some(0), 5.0, 25.0),
            t(2, Some(1), 6.0, 36.0),
            t(3, Some(0), 40.0, 50.0),
            t(4, None, 50.0, 51.0),
        ]);
        let o = overlap(&g, &r).unwrap();
        assert_eq!(o.span_us, 50.0);
        assert_eq!(
            o.busy_us,
            BTreeMap::from([(StreamId(0), 35.0), (StreamId(1), 30.0)])
        );
        assert_eq!(o.host_busy_us, 0.0);
        assert_eq!(o.overlap(), Some(65.0 / 50.0));
        // s0 busy 0..25 and 40..50, s1 6..36: both busy 6..25.
        assert_eq!(o.concurrent_us, 19.0);
        assert_eq!(o.concurrent_share(), Some(19.0 / 50.0));
        // 5 + 30 + 10 through op 2, not 5 + 20 + 10 through op 1.
        assert_eq!(o.critical_path_us, 45.0);
        assert_eq!(o.critical_ops, [OpId(0), OpId(2), OpId(3)]);
    }

    #[test]
    fn overlapping_intervals_on_one_lane_are_merged() {
        let g = graph(&[(alloc(), &[]), (alloc(), &[]), (alloc(), &[])]);
        let r = report(vec![
            t(0, Some(0), 0.0, 10.0),
            t(1, Some(0), 5.0, 15.0),
            t(2, Some(0), 20.0, 22.0),
        ]);
        let o = overlap(&g, &r).unwrap();
        assert_eq!(o.busy_us[&StreamId(0)], 17.0);
        assert_eq!(o.span_us, 22.0);
        // Three independent ops: the longest one alone; ties go to the lowest id.
        assert_eq!(o.critical_path_us, 10.0);
        assert_eq!(o.critical_ops, [OpId(0)]);
        assert_eq!(union_len(&mut []), 0.0);
        // One lane alone is never concurrent, however its intervals overlap.
        assert_eq!(o.concurrent_us, 0.0);
        let lanes = [vec![(0.0, 10.0)], vec![(10.0, 20.0)], vec![(5.0, 15.0)]];
        assert_eq!(concurrent_len(&lanes), 10.0);
        assert_eq!(union_len(&mut [(3.0, 1.0), (0.0, 2.0)]), 2.0);
    }

    #[test]
    fn untimed_copies_or_kernels_give_none_untimed_allocs_weigh_nothing() {
        use crate::model::Section;
        let h2d = OpKind::H2D {
            alloc: AllocId(0),
            section: Section {
                buf: crate::model::BufferId(0),
                lo: 0,
                len: 1,
            },
        };
        let g = graph(&[(alloc(), &[]), (h2d, &[0])]);
        let untimed = |mut x: OpTime| {
            x.end_us = x.start_us;
            x.timed = false;
            x
        };
        // The copy untimed: no figures (the CUDA plugin without --trace).
        let r = report(vec![
            untimed(t(0, Some(0), 1.0, 1.0)),
            untimed(t(1, Some(0), 2.0, 2.0)),
        ]);
        assert_eq!(overlap(&g, &r), None);
        // Only the alloc untimed (the CUDA plugin with --trace): left out of the span.
        let r = report(vec![
            untimed(t(0, Some(0), 1.0, 1.0)),
            t(1, Some(0), 30.0, 40.0),
        ]);
        let o = overlap(&g, &r).unwrap();
        assert_eq!(o.span_us, 10.0);
        assert_eq!(o.critical_path_us, 10.0);
        assert_eq!(o.critical_ops, [OpId(0), OpId(1)]);
        assert_eq!(o.span_per_critical_path(), Some(1.0));
    }

    #[test]
    fn empty_graph_and_report() {
        let o = overlap(&OpGraph::default(), &report(Vec::new())).unwrap();
        assert_eq!(o.span_us, 0.0);
        assert_eq!(o.critical_path_us, 0.0);
        assert!(o.critical_ops.is_empty());
        assert_eq!(o.overlap(), None);
        assert_eq!(o.span_per_critical_path(), None);
    }

    #[test]
    fn host_lane_bound_spreads_the_host_work_ready_after_each_threshold() {
        // The batch shape in small: a 20 µs kernel feeds each of 4 host tasks of 20 µs,
        // kernels chained (k0 -> k1 -> k2 -> k3), host task i after kernel i.
        let mut ops: Vec<(OpKind, Vec<u32>)> = Vec::new();
        for i in 0..4u32 {
            let prev = if i == 0 { vec![] } else { vec![2 * i - 2] };
            ops.push((alloc(), prev));
            ops.push((host(), vec![2 * i]));
        }
        let refs: Vec<(OpKind, &[u32])> = ops.iter().map(|(k, p)| (k.clone(), &p[..])).collect();
        let g = graph(&refs);
        let mut times = Vec::new();
        for i in 0..4u32 {
            let at = 20.0 * f64::from(i);
            times.push(t(2 * i, Some(0), at, at + 20.0));
            times.push(t(2 * i + 1, None, at + 20.0, at + 40.0));
        }
        let o = overlap(
            &g,
            &Report {
                plugin: "test".into(),
                ops: times,
                ..Report::default()
            },
        )
        .unwrap();
        // Ready at 20, 40, 60, 80 µs (the kernel chain), 20 µs each.
        assert_eq!(
            o.host_tasks,
            [(20.0, 20.0), (40.0, 20.0), (60.0, 20.0), (80.0, 20.0)]
        );
        assert_eq!(o.critical_path_us, 100.0);
        // One lane: 20 + 80 = 100; the last task alone gives 80 + 20 = 100 too.
        assert_eq!(o.host_lane_bound_us(1), 100.0);
        // Two lanes: the first threshold gives 20 + 40 = 60, the last 80 + 10 = 90: the
        // later threshold is the tighter bound (below the critical path here).
        assert_eq!(o.host_lane_bound_us(2), 90.0);
        // Many lanes: the last task's ready time plus its share.
        assert_eq!(o.host_lane_bound_us(8), 82.5);
        assert_eq!(o.host_lane_bound_us(0), 100.0); // clamped to 1 lane
    }
}

#[cfg(test)]
mod bound_tests {
    use super::*;

    #[test]
    fn stream_bound_is_the_longer_of_critical_path_and_spread_work() {
        let o = Overlap {
            span_us: 10.0,
            busy_us: [(StreamId(0), 6.0), (StreamId(1), 6.0)]
                .into_iter()
                .collect(),
            host_busy_us: 0.0,
            concurrent_us: 0.0,
            critical_path_us: 4.0,
            critical_ops: Vec::new(),
            host_tasks: Vec::new(),
        };
        assert_eq!(o.host_lane_bound_us(2), 0.0);
        assert_eq!(o.stream_bound_us(4), 4.0); // 12 µs of work over 4 streams: 3 < 4
        assert_eq!(o.stream_bound_us(2), 6.0);
        assert_eq!(o.stream_bound_us(1), 12.0);
        assert_eq!(o.stream_bound_us(0), 12.0); // clamped to 1 stream
    }
}
