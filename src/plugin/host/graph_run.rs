//! Parallel launch of a host graph: the nodes of one launch run on several threads at
//! once, each node started as soon as its predecessors have completed.
//!
//! **Threads.** One participant per core (at least two): the stream worker that reaches
//! the launch's item, and the plugin's persistent helper threads ([`GraphPool`], started
//! at the first graph launch, one fewer than the participants, never per launch). Per
//! core rather than per stream of the schedule a graph came from: a graph carries no
//! streams ([`crate::plugin::GraphDesc`] is nodes and edges, as a CUDA graph), the
//! cores are what runs host nodes in parallel.
//!
//! **Ready nodes** (the work-stealing scheme of rayon-core and Cilk, on
//! `crossbeam-deque`). Per launch every node of two or more predecessors has an atomic
//! count of predecessors not yet completed (fresh per launch, from the graph's
//! in-degrees). A participant that completes a node decrements the count of each such
//! successor; of the successors whose count reaches zero, and those of one predecessor
//! (ready at once), the first runs **next on the same thread** (no hand-over, its
//! inputs are in this core's cache) and the others go on the participant's own deque,
//! from which idle participants steal. The graph's sources start in a shared injector
//! queue. The hot path is atomics only: no mutex or condvar per node. A participant
//! with nothing to run checks for news (a push or the launch's end: a counter) for up to
//! the plugin's spin ([`super::HostPluginOptions::wait_spin`], `flag.rs`'s adaptive
//! spin, zero on an oversubscribed machine) before it sleeps on the launch's condvar;
//! a push or the end takes the condvar's lock and notifies only while a participant
//! sleeps (a count of sleepers). The stream worker returns from the launch's item when
//! every node has completed, so the stream's later work starts after every node (the
//! contract of [`crate::plugin::graph`]).
//!
//! **Memory ordering.** A node's effects are released by its successors' decrements
//! (`AcqRel`); the decrement that makes a node ready has acquired every predecessor's.
//! The node then runs on the same thread, or is handed over through a deque or the
//! injector (a push releases, a steal acquires), so the thread that runs it sees every
//! predecessor's writes; a node with a single predecessor needs no decrement (its
//! predecessor, on this thread, makes it ready). Each participant counts the nodes it
//! completes and subtracts them from the count of nodes left (`AcqRel`) in one step
//! whenever it runs out of ready nodes, before it waits or leaves (not once per node:
//! that count's cache line would move between the participants at every node); the
//! stream worker leaves when it reads zero (`Acquire`), having seen every node's writes
//! before it runs the stream's next item (or sets the synchronize flag the host waits
//! on). The counters written across threads (nodes left, news, sleepers) sit on cache
//! lines of their own. A sleeper increments the sleeper count before its last check of the
//! news counter, a pusher bumps the news counter before it reads the sleeper count (all
//! `SeqCst`): either the sleeper sees the news or the pusher sees the sleeper and
//! notifies under the lock the sleeper holds until it waits.
//!
//! **Jitter.** With [`super::HostPluginOptions::delay_jitter`] the sources start in a
//! random order, each ready successor goes at random to the next-slot, the own deque or
//! the injector, an idle participant looks at its deque, the injector and the others'
//! deques in a random order, and each participant sleeps 0-200 µs before each node, all
//! from ChaCha8 streams seeded by the seed, the launch and the participant: the order and
//! the thread of every node change from launch to launch, so a missing edge shows as a
//! wrong answer.
//!
//! **Failures.** A node that fails (or panics) records `graph node N (kind): message`
//! (`N` its index in the graph's description); nodes not started by then are skipped
//! (counted as completed without running), so the launch ends and the stream reports the
//! failure at its next synchronize. No participant waits on anything outside the launch,
//! so a launch always ends.

use super::graph_topology::{Topology, NO_SLOT};
use super::stream::{run_node_work, Work};
use crossbeam_deque::{Injector, Steal, Stealer, Worker};
use crossbeam_utils::CachePadded;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// One launch in flight: its nodes' items (shared with the graph and its other
/// launches, run by reference), readiness counts and ready queues.
#[derive(Debug)]
pub struct Launch {
    topo: Arc<Topology>,
    /// Node `i`'s item; node items are copies, zero fills and kernel calls, which run by
    /// reference ([`run_node_work`]).
    works: Arc<Vec<Work>>,
    /// Per node of two or more predecessors (by [`Topology::slot`]): predecessors not
    /// completed yet. A node with one predecessor is made ready by it without a count,
    /// so a launch makes and fills counts for those nodes only (of Task Bench's
    /// stencil_1d replayed: 2 of 7 nodes per timestep).
    missing: Vec<AtomicU32>,
    /// Nodes not completed yet, less those completed by a participant that has not
    /// reported them yet: each participant subtracts its completed nodes in one step
    /// before it looks for news or leaves ([`Launch::participate`]), so the count is
    /// written a few times per launch rather than once per node by both participants.
    /// Alone on its cache line, as `news` and `sleepers`: the lines every participant
    /// reads per node (`failed`, the node tables) are not invalidated by these writes.
    left: CachePadded<AtomicUsize>,
    /// The sources, and ready nodes of a participant without a deque.
    injector: Injector<u32>,
    /// Participant `k`'s deque, taken by it when it joins ([`Launch::participate`]).
    locals: Vec<Mutex<Option<Worker<u32>>>>,
    stealers: Vec<Stealer<u32>>,
    /// Bumped at every push others can see and at the end, so an idle participant sees
    /// news without a lock.
    news: CachePadded<AtomicU64>,
    /// Participants asleep (or about to sleep) on the condvar of `sleep`.
    sleepers: CachePadded<AtomicU32>,
    /// The sleepers' lock and condvar, on a line of their own (a notify writes the
    /// condvar's futex word).
    sleep: CachePadded<(Mutex<()>, Condvar)>,
    failed: AtomicBool,
    error: Mutex<Option<String>>,
    spin: Duration,
    /// `Some(seed)`: random placement, choice and delays (see the module docs).
    jitter: Option<u64>,
}

/// Where a participant looks for a ready node, in its usual order.
#[derive(Clone, Copy)]
enum Source {
    Own,
    Injector,
    Others,
}

impl Launch {
    /// A launch of the graph `topo` whose node `i` runs `works[i]` (`works.len()` nodes)
    /// on up to `participants` threads; idle participants spin up to `spin`; `jitter` as
    /// [`super::HostPluginOptions::delay_jitter`], already mixed with the graph and the
    /// launch count. Complexity: `O(n)` for `n` nodes.
    pub(super) fn new(
        topo: Arc<Topology>,
        works: Arc<Vec<Work>>,
        participants: usize,
        spin: Duration,
        jitter: Option<u64>,
    ) -> Launch {
        let mut sources = topo.sources.clone();
        if let Some(seed) = jitter {
            sources.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
        }
        let injector = Injector::new();
        for i in sources {
            injector.push(i);
        }
        let workers: Vec<Worker<u32>> = (0..participants).map(|_| Worker::new_lifo()).collect();
        Launch {
            missing: topo.counted.iter().map(|&d| AtomicU32::new(d)).collect(),
            left: CachePadded::new(AtomicUsize::new(works.len())),
            stealers: workers.iter().map(Worker::stealer).collect(),
            locals: workers.into_iter().map(|w| Mutex::new(Some(w))).collect(),
            works,
            topo,
            injector,
            news: CachePadded::new(AtomicU64::new(0)),
            sleepers: CachePadded::new(AtomicU32::new(0)),
            sleep: CachePadded::new((Mutex::new(()), Condvar::new())),
            failed: AtomicBool::new(false),
            error: Mutex::new(None),
            spin,
            jitter,
        }
    }

    fn done(&self) -> bool {
        self.left.load(Ordering::Acquire) == 0
    }

    /// Wakes sleeping participants after news (a push or the end).
    fn announce(&self) {
        self.news.fetch_add(1, Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            let (lock, cv) = &*self.sleep;
            let _g = lock.lock().unwrap_or_else(|p| p.into_inner());
            cv.notify_all();
        }
    }

    /// Steals one node from `source` (retrying while a steal races with another).
    fn steal(&self, source: Source, own: Option<&Worker<u32>>, who: usize) -> Option<u32> {
        match source {
            Source::Own => own?.pop(),
            Source::Injector => loop {
                let s = match own {
                    Some(w) => self.injector.steal_batch_and_pop(w),
                    None => self.injector.steal(),
                };
                match s {
                    Steal::Success(i) => return Some(i),
                    Steal::Empty => return None,
                    Steal::Retry => std::hint::spin_loop(),
                }
            },
            Source::Others => {
                let n = self.stealers.len();
                (1..n).find_map(|d| loop {
                    match self.stealers[(who + d) % n].steal() {
                        Steal::Success(i) => return Some(i),
                        Steal::Empty => return None,
                        Steal::Retry => std::hint::spin_loop(),
                    }
                })
            }
        }
    }

    /// A ready node: from the own deque, the injector, then the others' deques (in a
    /// random order under jitter).
    fn find(
        &self,
        own: Option<&Worker<u32>>,
        who: usize,
        rng: Option<&mut ChaCha8Rng>,
    ) -> Option<u32> {
        let mut order = [Source::Own, Source::Injector, Source::Others];
        if let Some(rng) = rng {
            order.shuffle(rng);
        }
        order.into_iter().find_map(|s| self.steal(s, own, who))
    }

    /// Runs node `i` (or skips it after a failure) and completes it, but for `left`
    /// (the caller counts it, [`Launch::report`]); returns the successor to run next on
    /// this thread, if one became ready.
    fn run_node(
        &self,
        i: u32,
        own: Option<&Worker<u32>>,
        mut rng: Option<&mut ChaCha8Rng>,
    ) -> Option<u32> {
        if !self.failed.load(Ordering::Acquire) {
            if let Some(rng) = rng.as_deref_mut() {
                std::thread::sleep(Duration::from_micros(rng.gen_range(0..=200)));
            }
            let work = &self.works[i as usize];
            let failure = match catch_unwind(AssertUnwindSafe(|| run_node_work(work))) {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e),
                Err(p) => Some(format!(
                    "panicked: {}",
                    crate::runtime::views::panic_text(p)
                )),
            };
            if let Some(e) = failure {
                let mut err = self.error.lock().unwrap_or_else(|p| p.into_inner());
                err.get_or_insert(format!("graph node {i} ({}): {e}", work.name()));
                self.failed.store(true, Ordering::Release);
            }
        }
        let mut next = None;
        let mut pushed = false;
        for &j in self.topo.successors(i) {
            // A node whose only predecessor is `i` is ready now: no other thread touches
            // its count, and this thread ran `i` (its writes are this thread's own).
            let slot = self.topo.slot[j as usize];
            if slot != NO_SLOT && self.missing[slot as usize].fetch_sub(1, Ordering::AcqRel) != 1 {
                continue;
            }
            let to = match rng.as_deref_mut() {
                Some(rng) => rng.gen_range(0..3u8),
                None => 0,
            };
            match (to, own) {
                (0, _) if next.is_none() => next = Some(j),
                (0 | 1, Some(w)) => {
                    w.push(j);
                    pushed = true;
                }
                _ => {
                    self.injector.push(j);
                    pushed = true;
                }
            }
        }
        if pushed {
            self.announce();
        }
        next
    }

    /// Subtracts `completed` nodes (run or skipped by this participant since its last
    /// report) from `left` (`AcqRel`: releases their writes to whoever reads zero), and
    /// announces the end when they were the last.
    fn report(&self, completed: &mut usize) {
        if *completed == 0 {
            return;
        }
        let n = std::mem::take(completed);
        if self.left.fetch_sub(n, Ordering::AcqRel) == n {
            self.announce();
        }
    }

    /// Takes part in the launch until every node has completed. `who` (0 for the stream
    /// worker, `k` for helper `k`) names the participant's deque and seeds its jitter
    /// stream.
    pub fn participate(&self, who: usize) {
        let own = self
            .locals
            .get(who)
            .and_then(|m| m.lock().unwrap_or_else(|p| p.into_inner()).take());
        let mut rng = self.jitter.map(|seed| {
            ChaCha8Rng::seed_from_u64(seed ^ (who as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03))
        });
        let mut next = None;
        // Nodes completed since this participant last reported to `left`.
        let mut completed = 0usize;
        loop {
            if let Some(i) = next.take() {
                next = self.run_node(i, own.as_ref(), rng.as_mut());
                completed += 1;
                continue;
            }
            // Read before the search: a push the search missed bumps `news` after this.
            let seen = self.news.load(Ordering::SeqCst);
            if let Some(i) = self.find(own.as_ref(), who, rng.as_mut()) {
                next = self.run_node(i, own.as_ref(), rng.as_mut());
                completed += 1;
                continue;
            }
            // Nothing found: report the completed nodes before waiting (the launch ends
            // only when every participant has), then leave if every node has completed.
            self.report(&mut completed);
            if self.done() {
                break;
            }
            let has_news = || self.news.load(Ordering::SeqCst) != seen || self.done();
            super::flag::spin_then_block(self.spin, has_news, || {
                let (lock, cv) = &*self.sleep;
                let mut g = lock.lock().unwrap_or_else(|p| p.into_inner());
                self.sleepers.fetch_add(1, Ordering::SeqCst);
                while self.news.load(Ordering::SeqCst) == seen && !self.done() {
                    g = cv.wait(g).unwrap_or_else(|p| p.into_inner());
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
    /// edges between threads are exercised on any machine); asked once per process
    /// (`available_parallelism` reads the cgroup's quota files).
    pub(super) fn participants() -> usize {
        static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        *N.get_or_init(|| {
            std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .max(2)
        })
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
                        l.participate(k);
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
                    let launch = Arc::new(Launch::new(
                        topo,
                        Arc::new(works),
                        GraphPool::participants(),
                        Duration::ZERO,
                        jitter,
                    ));
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

    /// A plugin, a stream and a graph of `n` nodes under `edges` whose node `i` records
    /// `(i, its thread)` in `log` when it runs.
    fn recording_graph(
        jitter: Option<u64>,
        n: u32,
        edges: Vec<(u32, u32)>,
        log: &'static Mutex<Vec<(i64, std::thread::ThreadId)>>,
    ) -> (
        HostPlugin,
        crate::plugin::StreamHandle,
        crate::plugin::GraphHandle,
    ) {
        let p = HostPlugin::new(HostPluginOptions {
            delay_jitter: jitter,
            ..HostPluginOptions::default()
        });
        let s = p.create_streams(0, 1).unwrap()[0];
        let rec = KernelSig::rust("rec").scalar::<i64>().body(move |a| {
            let i = a.scalar::<i64>(0)?;
            log.lock().unwrap().push((i, std::thread::current().id()));
            Ok(())
        });
        let rec = p.load_kernel(0, &rec, ElemType::F64).unwrap();
        let nodes = (0..n)
            .map(|i| GraphNode::Launch {
                kernel: rec,
                args: vec![LaunchArg::Scalar(Scalar::I64(i64::from(i)))],
                shape: SHAPE,
            })
            .collect();
        let g = p
            .graph_instantiate(&GraphDesc {
                device: 0,
                nodes,
                edges,
            })
            .unwrap();
        (p, s, g)
    }

    #[test]
    fn a_successor_made_ready_runs_next_on_the_thread_that_made_it_ready() {
        // A chain of 30 nodes without jitter: whichever participant takes node 0 runs
        // every later node itself (each one the single successor its predecessor made
        // ready), in order, on every launch.
        static LOG: Mutex<Vec<(i64, std::thread::ThreadId)>> = Mutex::new(Vec::new());
        let edges = (0..29).map(|i| (i, i + 1)).collect();
        let (p, s, g) = recording_graph(None, 30, edges, &LOG);
        for launch in 0..5 {
            LOG.lock().unwrap().clear();
            p.graph_launch(g, s).unwrap();
            p.synchronize(s).unwrap();
            let log = LOG.lock().unwrap().clone();
            let order: Vec<i64> = log.iter().map(|e| e.0).collect();
            assert_eq!(order, (0..30).collect::<Vec<i64>>(), "launch {launch}");
            assert!(
                log.iter().all(|e| e.1 == log[0].1),
                "launch {launch}: the chain moved between threads"
            );
        }
    }

    #[test]
    fn under_jitter_independent_nodes_run_in_an_order_that_changes_per_launch() {
        // Node 0 before 16 independent nodes before node 17: every launch keeps the edges,
        // and the 16 run in different orders across launches (a fixed order would hide
        // a missing edge between them).
        static LOG: Mutex<Vec<(i64, std::thread::ThreadId)>> = Mutex::new(Vec::new());
        let mut edges: Vec<(u32, u32)> = (1..17).map(|i| (0, i)).collect();
        edges.extend((1..17).map(|i| (i, 17)));
        let (p, s, g) = recording_graph(Some(11), 18, edges, &LOG);
        let mut orders = Vec::new();
        for launch in 0..4 {
            LOG.lock().unwrap().clear();
            p.graph_launch(g, s).unwrap();
            p.synchronize(s).unwrap();
            let order: Vec<i64> = LOG.lock().unwrap().iter().map(|e| e.0).collect();
            assert_eq!(order.len(), 18, "launch {launch}: {order:?}");
            assert_eq!((order[0], order[17]), (0, 17), "launch {launch}: {order:?}");
            let mut middle = order[1..17].to_vec();
            middle.sort_unstable();
            assert_eq!(middle, (1..17).collect::<Vec<i64>>(), "launch {launch}");
            orders.push(order);
        }
        assert!(
            orders.iter().any(|o| *o != orders[0]),
            "four launches under jitter ran the same order: {:?}",
            orders[0]
        );
    }
}
