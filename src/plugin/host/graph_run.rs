//! Parallel launch of a host graph: the nodes of one launch run on several threads at
//! once, each node started as soon as its predecessors have completed.
//!
//! **Threads.** One participant per core (at least two): the stream worker that reaches
//! the launch's item, and the plugin's persistent helper threads ([`GraphPool`], started
//! at the first graph launch, one fewer than the participants, never per launch). Per
//! core rather than per stream of the schedule a graph came from: a graph carries no
//! streams ([`crate::plugin::GraphDesc`] is nodes and edges, as a CUDA graph), the
//! cores are what runs host nodes in parallel, and a shared ready list lets whichever
//! thread is free take the next node, where per-stream lists would leave a core idle
//! behind a stream whose next node is not ready while another stream's is.
//!
//! **Ready nodes.** Per launch every node has an atomic count of predecessors not yet
//! completed (fresh per launch, from the graph's in-degrees). A participant takes a
//! ready node from the launch's list, runs it, and decrements the count of each
//! successor; the decrement that reaches zero puts the successor on the list. An idle
//! participant checks the list for up to the plugin's spin
//! ([`super::HostPluginOptions::wait_spin`], `flag.rs`'s adaptive spin) before it sleeps
//! on the launch's condvar; a push or the launch's end wakes it. The stream worker
//! returns from the launch's item when every node has completed, so the stream's later
//! work starts after every node (the contract of [`crate::plugin::graph`]).
//!
//! **Memory ordering.** A node's effects are released by its successors' decrements
//! (`AcqRel`); the decrement that makes a node ready has acquired every predecessor's,
//! and hands the node over through the list's mutex, so the thread that runs it sees
//! every predecessor's writes. The count of nodes left is decremented (`AcqRel`) after
//! each node; the stream worker leaves when it reads zero (`Acquire`), having seen every
//! node's writes before it runs the stream's next item (or sets the synchronize flag the
//! host waits on).
//!
//! **Jitter.** With [`super::HostPluginOptions::delay_jitter`] each participant picks a
//! random ready node (not the latest pushed) and sleeps 0-200 µs before each node, from a
//! ChaCha8 stream seeded by the seed, the launch and the participant: the order and the
//! thread of every node change from launch to launch, so a missing edge shows as a
//! wrong answer.
//!
//! **Failures.** A node that fails (or panics) records `graph node N (kind): message`
//! (`N` its index in the graph's description); nodes not started by then are skipped
//! (counted as completed without running), so the launch ends and the stream reports the
//! failure at its next synchronize. No participant waits on anything outside the launch,
//! so a launch always ends.

use super::stream::{run_work, Work};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// The edges of an instantiated graph as successor lists (CSR) and in-degrees, shared by
/// its launches.
#[derive(Debug)]
pub(super) struct Topology {
    /// Successors of node `i`: `succ[start[i]..start[i + 1]]`.
    start: Vec<u32>,
    succ: Vec<u32>,
    indegree: Vec<u32>,
}

impl Topology {
    /// The topology of `n` nodes under `edges` (every index `< n`; checked by the caller).
    /// Complexity: `O(n + e)`.
    pub(super) fn new(n: usize, edges: &[(u32, u32)]) -> Topology {
        let mut start = vec![0u32; n + 1];
        let mut indegree = vec![0u32; n];
        for &(a, b) in edges {
            start[a as usize + 1] += 1;
            indegree[b as usize] += 1;
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let mut fill = start.clone();
        let mut succ = vec![0u32; edges.len()];
        for &(a, b) in edges {
            succ[fill[a as usize] as usize] = b;
            fill[a as usize] += 1;
        }
        Topology {
            start,
            succ,
            indegree,
        }
    }

    fn successors(&self, i: u32) -> &[u32] {
        &self.succ[self.start[i as usize] as usize..self.start[i as usize + 1] as usize]
    }
}

/// One launch in flight: its nodes' items, readiness counts and ready list.
#[derive(Debug)]
pub struct Launch {
    topo: Arc<Topology>,
    /// Each node's item, taken by the participant that runs it.
    works: Vec<Mutex<Option<Work>>>,
    /// Per node: predecessors not completed yet.
    missing: Vec<AtomicU32>,
    /// Nodes not completed yet.
    left: AtomicUsize,
    ready: Mutex<Vec<u32>>,
    /// Bumped at every push and at the end, so a spinning participant sees news without
    /// the lock.
    news: AtomicU64,
    /// Participants asleep (or about to sleep) on `cv`.
    sleepers: AtomicU32,
    cv: Condvar,
    failed: AtomicBool,
    error: Mutex<Option<String>>,
    spin: Duration,
    /// `Some(seed)`: random ready choice and delays (see the module docs).
    jitter: Option<u64>,
}

impl Launch {
    /// A launch of the graph `topo` whose node `i` runs `works[i]`; idle participants spin
    /// up to `spin`; `jitter` as [`super::HostPluginOptions::delay_jitter`], already
    /// mixed with the graph and the launch count.
    pub(super) fn new(
        topo: Arc<Topology>,
        works: Vec<Work>,
        spin: Duration,
        jitter: Option<u64>,
    ) -> Launch {
        let ready: Vec<u32> = (0..works.len() as u32)
            .filter(|&i| topo.indegree[i as usize] == 0)
            .rev()
            .collect();
        Launch {
            missing: topo.indegree.iter().map(|&d| AtomicU32::new(d)).collect(),
            left: AtomicUsize::new(works.len()),
            works: works.into_iter().map(|w| Mutex::new(Some(w))).collect(),
            topo,
            ready: Mutex::new(ready),
            news: AtomicU64::new(0),
            sleepers: AtomicU32::new(0),
            cv: Condvar::new(),
            failed: AtomicBool::new(false),
            error: Mutex::new(None),
            spin,
            jitter,
        }
    }

    fn done(&self) -> bool {
        self.left.load(Ordering::Acquire) == 0
    }

    /// Takes a ready node: the latest pushed, or a random one under jitter.
    fn take(&self, rng: Option<&mut ChaCha8Rng>) -> Option<u32> {
        let mut r = self.ready.lock().unwrap_or_else(|p| p.into_inner());
        match rng {
            Some(rng) if !r.is_empty() => {
                let k = rng.gen_range(0..r.len());
                Some(r.swap_remove(k))
            }
            _ => r.pop(),
        }
    }

    /// Wakes sleeping participants after news (a push or the end).
    fn announce(&self) {
        self.news.fetch_add(1, Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            let _g = self.ready.lock().unwrap_or_else(|p| p.into_inner());
            self.cv.notify_all();
        }
    }

    /// Runs node `i` (or skips it after a failure) and completes it.
    fn run_node(&self, i: u32, rng: Option<&mut ChaCha8Rng>) {
        let work = self.works[i as usize]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let (Some(work), false) = (work, self.failed.load(Ordering::Acquire)) {
            if let Some(rng) = rng {
                std::thread::sleep(Duration::from_micros(rng.gen_range(0..=200)));
            }
            let what = work.name();
            let failure = match catch_unwind(AssertUnwindSafe(|| run_work(work))) {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e),
                Err(p) => Some(format!(
                    "panicked: {}",
                    crate::runtime::views::panic_text(p)
                )),
            };
            if let Some(e) = failure {
                let mut err = self.error.lock().unwrap_or_else(|p| p.into_inner());
                err.get_or_insert(format!("graph node {i} ({what}): {e}"));
                self.failed.store(true, Ordering::Release);
            }
        }
        let mut pushed = false;
        for &j in self.topo.successors(i) {
            if self.missing[j as usize].fetch_sub(1, Ordering::AcqRel) == 1 {
                self.ready.lock().unwrap_or_else(|p| p.into_inner()).push(j);
                pushed = true;
            }
        }
        let last = self.left.fetch_sub(1, Ordering::AcqRel) == 1;
        if pushed || last {
            self.announce();
        }
    }

    /// Takes part in the launch until every node has completed. `who` (0 for the stream
    /// worker) seeds the jitter stream.
    pub fn participate(&self, who: u64) {
        let mut rng = self.jitter.map(|seed| {
            ChaCha8Rng::seed_from_u64(seed ^ (who + 1).wrapping_mul(0xD1B5_4A32_D192_ED03))
        });
        while !self.done() {
            // Read before the take: a push the take missed bumps `news` after this load.
            let seen = self.news.load(Ordering::SeqCst);
            if let Some(i) = self.take(rng.as_mut()) {
                self.run_node(i, rng.as_mut());
                continue;
            }
            let has_news = || self.news.load(Ordering::SeqCst) != seen || self.done();
            super::flag::spin_then_block(self.spin, has_news, || {
                let mut g = self.ready.lock().unwrap_or_else(|p| p.into_inner());
                self.sleepers.fetch_add(1, Ordering::SeqCst);
                while g.is_empty() && self.news.load(Ordering::SeqCst) == seen && !self.done() {
                    g = self.cv.wait(g).unwrap_or_else(|p| p.into_inner());
                }
                self.sleepers.fetch_sub(1, Ordering::SeqCst);
            });
        }
    }

    /// The first node failure, if any (after [`Launch::participate`] returned).
    pub fn failure(&self) -> Option<String> {
        self.error.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// A graph launch as a stream item: the launch, and the pool whose helpers join it.
#[derive(Debug)]
pub struct GraphRun {
    pub(super) launch: Arc<Launch>,
    pub(super) pool: Arc<GraphPool>,
}

impl GraphRun {
    /// Runs the launch on the calling stream worker and the pool's helpers; returns when
    /// every node has completed, with the first node failure.
    pub fn run(self) -> Result<(), String> {
        if !self.launch.done() {
            self.pool.join(&self.launch);
            self.launch.participate(0);
        }
        self.launch.failure().map_or(Ok(()), Err)
    }
}

/// The persistent helper threads of graph launches: each takes part in every launch
/// handed to it, in the order handed.
#[derive(Debug)]
pub struct GraphPool {
    senders: Mutex<Vec<crossbeam_channel::Sender<Arc<Launch>>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl GraphPool {
    /// Participants of a launch: the cores this process may use, at least 2 (so that
    /// edges between threads are exercised on any machine).
    pub(super) fn participants() -> usize {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .max(2)
    }

    /// Starts `participants() - 1` helper threads.
    ///
    /// Errors: the message of a thread that could not be started.
    pub(super) fn start() -> Result<GraphPool, String> {
        let mut senders = Vec::new();
        let mut threads = Vec::new();
        for k in 1..Self::participants() {
            let (tx, rx) = crossbeam_channel::unbounded::<Arc<Launch>>();
            let t = std::thread::Builder::new()
                .name(format!("offload-graph-{k}"))
                .spawn(move || {
                    while let Ok(l) = rx.recv() {
                        l.participate(k as u64);
                    }
                })
                .map_err(|e| format!("cannot start a graph helper thread: {e}"))?;
            senders.push(tx);
            threads.push(t);
        }
        Ok(GraphPool {
            senders: Mutex::new(senders),
            threads: Mutex::new(threads),
        })
    }

    /// Hands `launch` to every helper (one that has stopped is skipped: the launch runs
    /// on the others).
    fn join(&self, launch: &Arc<Launch>) {
        for tx in self
            .senders
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            let _ = tx.send(launch.clone());
        }
    }

    /// Stops the helpers after the launches handed to them and joins them.
    pub(super) fn shutdown(&self) {
        self.senders
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|p| p.into_inner()));
        for t in threads {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{HostPlugin, HostPluginOptions};
    use super::*;
    use crate::model::{builtin_kernel, Access, ElemType, KernelSig, LaunchShape, Scalar};
    use crate::plugin::{
        DevicePtr, GraphDesc, GraphNode, HostPtr, KernelHandle, LaunchArg, Plugin, PluginError,
    };

    const SHAPE: LaunchShape = LaunchShape {
        teams: 1,
        threads: 1,
    };

    fn cell(d: DevicePtr, i: u32, access: Access) -> LaunchArg {
        LaunchArg::Buffer {
            ptr: d,
            offset: u64::from(i) * 8,
            len: 1,
            ty: ElemType::F64,
            access,
        }
    }

    fn write(p: HostPtr, v: &[f64]) {
        // SAFETY: `p` is plugin host memory of at least `v.len()` doubles no stream uses now.
        unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), p.as_ptr() as *mut f64, v.len()) }
    }

    fn read(p: HostPtr, n: usize) -> Vec<f64> {
        let mut v = vec![0f64; n];
        // SAFETY: as above, after a synchronize.
        unsafe { std::ptr::copy_nonoverlapping(p.as_ptr() as *const f64, v.as_mut_ptr(), n) };
        v
    }

    /// A random DAG over `cells` device cells whose every cell depends on every edge into
    /// it: node 0 zeroes the cells; cells `0..3` are sources copied in from `hin`; every
    /// later cell `j` is `add` of two earlier cells (or `copy` of one), an edge from each;
    /// the last node copies every cell out to `hout`, after every other node. Returns the
    /// description and, per cell, its inputs. Cells are nodes `1..=cells`.
    fn dag(
        cells: u32,
        seed: u64,
        d: DevicePtr,
        (hin, hout): (HostPtr, HostPtr),
        (add, copy): (KernelHandle, KernelHandle),
    ) -> (GraphDesc, Vec<Vec<u32>>) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let bytes = u64::from(cells) * 8;
        let mut nodes = vec![GraphNode::FillZero { ptr: d, bytes }];
        let mut edges = Vec::new();
        let mut inputs = Vec::new();
        for j in 0..cells {
            edges.push((0, j + 1));
            let ins: Vec<u32> = if j < 3 {
                Vec::new()
            } else if rng.gen_bool(0.25) {
                vec![rng.gen_range(0..j)]
            } else {
                let a = rng.gen_range(0..j);
                let b = (a + rng.gen_range(1..j)) % j;
                vec![a, b]
            };
            nodes.push(match ins.as_slice() {
                [] => GraphNode::Submit {
                    dst: d.offset(u64::from(j) * 8),
                    src: hin.offset(u64::from(j) * 8),
                    bytes: 8,
                },
                [a] => GraphNode::Launch {
                    kernel: copy,
                    args: vec![cell(d, *a, Access::In), cell(d, j, Access::Out)],
                    shape: SHAPE,
                },
                [a, b] => GraphNode::Launch {
                    kernel: add,
                    args: vec![
                        cell(d, *a, Access::In),
                        cell(d, *b, Access::In),
                        cell(d, j, Access::Out),
                    ],
                    shape: SHAPE,
                },
                _ => unreachable!(),
            });
            edges.extend(ins.iter().map(|&i| (i + 1, j + 1)));
            inputs.push(ins);
        }
        nodes.push(GraphNode::Retrieve {
            dst: hout,
            src: d,
            bytes,
        });
        edges.extend((1..=cells).map(|j| (j, cells + 1)));
        let desc = GraphDesc {
            device: 0,
            nodes,
            edges,
        };
        (desc, inputs)
    }

    fn kernels(p: &HostPlugin) -> (KernelHandle, KernelHandle) {
        let load = |n: &str| {
            p.load_kernel(0, &builtin_kernel(n).unwrap(), ElemType::F64)
                .unwrap()
        };
        (load("add"), load("copy"))
    }

    #[test]
    fn a_dag_whose_result_needs_every_edge_is_right_on_every_launch_under_jitter() {
        // More nodes than threads (42 against 2 or the cores); under jitter each launch
        // takes ready nodes at random on random threads, so a node started before one of
        // its predecessors finished reads a zero (or the previous launch's value: the
        // sources change per launch) and the cells come out wrong.
        let cells = 40u32;
        for (seed, jitter) in [(1u64, Some(7u64)), (2, Some(8)), (3, None)] {
            let p = HostPlugin::new(HostPluginOptions {
                delay_jitter: jitter,
                ..HostPluginOptions::default()
            });
            let s = p.create_streams(0, 1).unwrap()[0];
            let d = p.alloc(s, u64::from(cells) * 8).unwrap();
            let (hin, hout) = (p.alloc_host(24).unwrap(), p.alloc_host(8 * 40).unwrap());
            let (desc, inputs) = dag(cells, seed, d, (hin, hout), kernels(&p));
            assert!(desc.nodes.len() > 2 * GraphPool::participants());
            let g = p.graph_instantiate(&desc).unwrap();
            for launch in 0..25u32 {
                let src: Vec<f64> = (0..3).map(|i| f64::from(launch * 10 + i + 1)).collect();
                write(hin, &src);
                p.graph_launch(g, s).unwrap();
                p.synchronize(s).unwrap();
                let mut want = src.clone();
                for ins in &inputs[3..] {
                    want.push(ins.iter().map(|&i| want[i as usize]).sum());
                }
                assert_eq!(
                    read(hout, cells as usize),
                    want,
                    "seed {seed}, jitter {jitter:?}, launch {launch}"
                );
            }
        }
    }

    #[test]
    fn a_launch_runs_independent_nodes_on_two_threads_at_once() {
        // One node waits for a flag only another sets, with no edge between them: a thread
        // taking the waiting node first blocks, so the launch ends only if another thread
        // runs the setting node meanwhile (and node 2, after both, on whichever thread).
        // The waiting node is node 0 (taken first without jitter) or node 1, and under
        // jitter either; a hang guard, not a timing.
        for jitter in [None, Some(3u64)] {
            for first in [0u32, 1] {
                let (tx, rx) = crossbeam_channel::bounded(1);
                std::thread::spawn(move || {
                    let pool = Arc::new(GraphPool::start().unwrap());
                    let topo = Arc::new(Topology::new(3, &[(0, 2), (1, 2)]));
                    let f = super::super::flag::Flag::new(Duration::from_micros(50));
                    let g = super::super::flag::Flag::new(Duration::ZERO);
                    let mut works = vec![Work::Wait(f.clone()), Work::Signal(f.clone())];
                    if first == 1 {
                        works.swap(0, 1);
                    }
                    works.push(Work::Signal(g.clone()));
                    let launch = Arc::new(Launch::new(topo, works, Duration::ZERO, jitter));
                    let r = GraphRun {
                        launch,
                        pool: pool.clone(),
                    }
                    .run();
                    pool.shutdown();
                    let _ = tx.send((r, g.is_set()));
                });
                let got = rx.recv_timeout(Duration::from_secs(120));
                assert_eq!(
                    got.ok(),
                    Some((Ok(()), true)),
                    "first {first}, jitter {jitter:?}: the launch did not end"
                );
            }
        }
    }

    #[test]
    fn a_failing_node_ends_the_launch_naming_the_node_and_the_stream_recovers() {
        let p = HostPlugin::new(HostPluginOptions {
            delay_jitter: Some(5),
            ..HostPluginOptions::default()
        });
        let s = p.create_streams(0, 1).unwrap()[0];
        let boom: KernelSig = KernelSig::rust("boom")
            .reads_writes::<f64>()
            .body(|_| Err("the kernel refused".into()));
        let boom = p.load_kernel(0, &boom, ElemType::F64).unwrap();
        let fill = p
            .load_kernel(0, &builtin_kernel("fill").unwrap(), ElemType::F64)
            .unwrap();
        let d = p.alloc(s, 8 * 8).unwrap();
        let h = p.alloc_host(8 * 8).unwrap();
        // 0..6 fill a cell each; node 6 (boom) after 0; node 7 copies everything out
        // after all of them.
        let mut nodes: Vec<GraphNode> = (0..6)
            .map(|i| GraphNode::Launch {
                kernel: fill,
                args: vec![cell(d, i, Access::Out), LaunchArg::Scalar(Scalar::F64(1.0))],
                shape: SHAPE,
            })
            .collect();
        nodes.push(GraphNode::Launch {
            kernel: boom,
            args: vec![cell(d, 6, Access::InOut)],
            shape: SHAPE,
        });
        nodes.push(GraphNode::Retrieve {
            dst: h,
            src: d,
            bytes: 64,
        });
        let mut edges = vec![(0, 6), (6, 7)];
        edges.extend((0..6).map(|i| (i, 7)));
        let g = p
            .graph_instantiate(&GraphDesc {
                device: 0,
                nodes,
                edges,
            })
            .unwrap();
        for _ in 0..3 {
            p.graph_launch(g, s).unwrap();
            let e = p.synchronize(s).unwrap_err();
            assert!(
                matches!(e, PluginError::Async { .. })
                    && e.to_string().contains("graph node 6 (launch)")
                    && e.to_string().contains("the kernel refused"),
                "{e}"
            );
        }
        // The error was reported once; the stream runs on.
        p.fill_zero(s, d, 64).unwrap();
        p.synchronize(s).unwrap();
    }

    #[test]
    fn topology_lists_successors_and_in_degrees() {
        let t = Topology::new(4, &[(2, 0), (3, 1), (0, 1), (2, 3)]);
        assert_eq!(t.indegree, vec![1, 2, 0, 1]);
        assert_eq!(t.successors(2), &[0, 3]);
        assert_eq!(t.successors(0), &[1]);
        assert!(t.successors(1).is_empty());
    }
}
