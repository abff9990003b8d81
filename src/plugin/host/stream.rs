//! Streams of the host plugin: the plugin's stream table (per device, a pool created
//! once) and the stream workers: one thread per stream, fed by a crossbeam channel,
//! running [`Item`]s strictly in order. Events and synchronize markers are [`Flag`]s: a
//! waiting worker or host thread spins up to [`super::HostPluginOptions::wait_spin`],
//! then sleeps on the flag's condvar (`flag.rs`).
//!
//! Deadlock freedom: a `Wait` item always refers to a flag whose `Signal` item was
//! enqueued before it (the plugin captures the event's current flag when the wait is
//! issued), so by induction on issue order every waited-on flag is eventually set.
//! Workers catch panics of an item and keep running, so a flag is never left unset.

pub use super::flag::Flag;
use super::{lock, HostPlugin};
use crate::plugin::{PluginCall, PluginError, StreamHandle, Timing};
use crate::runtime::ffi::{HostKernel, RawArg};
use crate::runtime::memory::Block;
use crossbeam_channel::{Receiver, Sender};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Kernel arguments with raw pointers into blocks the same item keeps alive, checked
/// against the item's kernel's signature when the item was made (`launch.rs`'s
/// `launch_work`, the only place that makes them), so the call does not check them
/// again ([`HostKernel::call_checked`]).
#[derive(Debug)]
pub struct LaunchArgs(pub Vec<RawArg>);
// SAFETY: every pointer in the arguments points into a `Block` held by the same
// `Work::Launch` (its `blocks`), so it stays valid wherever the item is run.
unsafe impl Send for LaunchArgs {}
// SAFETY: as above; the arguments are only read (a graph's node items are shared by its
// launches' threads), and what the kernel writes through them is ordered by the
// schedule's edges, as for any op.
unsafe impl Sync for LaunchArgs {}

/// What a stream item does.
#[derive(Debug)]
pub enum Work {
    /// Copies `bytes` bytes between two blocks (H2D: host → device, D2H: device → host,
    /// peer: device → device).
    Copy {
        dst: Arc<Block>,
        dst_off: u64,
        src: Arc<Block>,
        src_off: u64,
        bytes: u64,
    },
    Launch {
        kernel: Arc<HostKernel>,
        args: LaunchArgs,
        /// Keeps every block the arguments point into alive (held, never read).
        #[allow(dead_code)]
        blocks: Vec<Arc<Block>>,
    },
    /// Stream-ordered free: drops this item's reference here (the last one unless the
    /// block went to the stream's free list, or an op of another stream still holds it).
    Free(Arc<Block>),
    /// Stream-ordered zeroing of `bytes` bytes from `off`: re-initialises a block handed
    /// out again by the free list (so the new allocation reads as fresh memory to the ops
    /// behind it on this stream), and [`crate::plugin::Plugin::fill_zero`].
    Zero {
        block: Arc<Block>,
        off: u64,
        bytes: u64,
        /// The byte written: 0, or the poison of [`super::HostPluginOptions::poison`].
        byte: u8,
    },
    /// Sets a flag (event record, synchronize marker).
    Signal(Arc<Flag>),
    /// Blocks this stream until the flag is set (event wait).
    Wait(Arc<Flag>),
    /// A graph launch: its nodes run on this worker and the graph helpers in parallel,
    /// each after its predecessors (`graph_run.rs`); the first failure skips the nodes
    /// not started yet.
    Graph(super::graph_run::GraphRun),
}

/// One enqueued op.
#[derive(Debug)]
pub struct Item {
    /// Sequence number of the stream call (see [`Timing::seq`]); `None` for internal
    /// markers (synchronize).
    pub seq: Option<u64>,
    pub work: Work,
}

/// State a worker shares with the plugin.
#[derive(Debug, Default)]
pub struct Shared {
    /// The first failure of this stream's work not yet reported: taken (reported once)
    /// by the next `synchronize` of the stream or `synchronize_event` of an event recorded
    /// on it after the failure, so a later run on the plugin starts clean.
    /// The message and the failing call's `seq` (`None` for an internal item).
    pub error: Mutex<Option<(String, Option<u64>)>>,
}

impl Shared {
    /// Reports (and takes) the stream's unreported failure as [`PluginError::Async`] of
    /// `call` on `stream`; `Ok` when there is none.
    pub fn report(&self, call: PluginCall, stream: StreamHandle) -> Result<(), PluginError> {
        match self.error.lock().unwrap_or_else(|p| p.into_inner()).take() {
            Some((message, seq)) => Err(PluginError::Async {
                call,
                stream,
                message,
                seq,
            }),
            None => Ok(()),
        }
    }
}

/// The worker loop: runs items until the channel closes (the plugin is dropped).
pub fn run_worker(
    handle: StreamHandle,
    rx: Receiver<Item>,
    shared: Arc<Shared>,
    timings: Arc<Mutex<Vec<Timing>>>,
    jitter: Option<u64>,
) {
    let mut rng = jitter_rng(handle, jitter);
    while let Ok(item) = rx.recv() {
        execute(handle, item, &shared, &timings, rng.as_mut());
    }
}

/// The delay-jitter generator of stream `handle` (`None` without jitter).
pub(super) fn jitter_rng(handle: StreamHandle, jitter: Option<u64>) -> Option<ChaCha8Rng> {
    jitter.map(|seed| {
        ChaCha8Rng::seed_from_u64(
            seed ^ (u64::from(handle.0) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        )
    })
}

/// Runs one item of stream `handle` on the calling thread (its worker, or with
/// [`super::HostPluginOptions::inline_streams`] the thread that issues it): the jitter
/// delay, the work, its failure kept for the stream's next report, its timing.
pub(super) fn execute(
    handle: StreamHandle,
    item: Item,
    shared: &Shared,
    timings: &Mutex<Vec<Timing>>,
    rng: Option<&mut ChaCha8Rng>,
) {
    {
        if let Some(rng) = rng {
            // Delay jitter: 0-200 µs before each op, to shake out missing edges.
            std::thread::sleep(Duration::from_micros(rng.gen_range(0..=200)));
        }
        let what = item.work.name();
        // Logging stays outside the op but may not kill the worker (a subscriber can
        // panic on a closed stderr): the completion signal below must always run.
        let _ = catch_unwind(|| {
            tracing::debug!(target: "offload_sched::plugin", stream = handle.0, seq = ?item.seq, what, "start");
        });
        let start = Instant::now();
        let result = catch_unwind(AssertUnwindSafe(|| run_work(item.work)));
        let end = Instant::now();
        let failure = match result {
            Ok(Ok(())) => None,
            Ok(Err(msg)) => Some(format!("{what} failed: {msg}")),
            Err(p) => Some(format!(
                "{what} panicked: {}",
                crate::runtime::views::panic_text(p)
            )),
        };
        if let Some(f) = failure {
            let mut e = shared.error.lock().unwrap_or_else(|p| p.into_inner());
            e.get_or_insert((f, item.seq));
        }
        let _ = catch_unwind(|| {
            tracing::debug!(target: "offload_sched::plugin", stream = handle.0, seq = ?item.seq, what,
                us = end.duration_since(start).as_secs_f64() * 1e6, "done");
        });
        if let Some(seq) = item.seq {
            timings
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(Timing {
                    stream: handle,
                    seq,
                    start,
                    end,
                    batch: 0,
                });
        }
    }
}

impl Work {
    /// `copy`, `launch`, `free`, `zero`, `signal`, `wait` or `graph`.
    pub(super) fn name(&self) -> &'static str {
        match self {
            Work::Copy { .. } => "copy",
            Work::Launch { .. } => "launch",
            Work::Free(_) => "free",
            Work::Zero { .. } => "zero",
            Work::Signal(_) => "signal",
            Work::Wait(_) => "wait",
            Work::Graph(_) => "graph",
        }
    }
}

/// Runs one item's work on the calling thread; `Err` with the failure's message.
pub(super) fn run_work(work: Work) -> Result<(), String> {
    match work {
        Work::Free(b) => drop(b),
        Work::Graph(g) => g.run()?,
        other => run_node_work(&other)?,
    }
    Ok(())
}

/// Runs the work of a copy, launch, zero fill, signal or wait by reference (a graph
/// launch's nodes run the graph's items, shared by its launches, this way); `Err` with
/// the failure's message, or for a free or a graph, which need the item itself.
pub(super) fn run_node_work(work: &Work) -> Result<(), String> {
    match work {
        Work::Copy {
            dst,
            dst_off,
            src,
            src_off,
            bytes,
        } => {
            // SAFETY: the plugin checked both ranges lie inside their blocks when the op
            // was issued, and the blocks are kept alive by this item. `copy` tolerates
            // overlap (it cannot occur between two distinct blocks anyway).
            unsafe {
                std::ptr::copy(
                    src.ptr().add(*src_off as usize),
                    dst.ptr().add(*dst_off as usize),
                    *bytes as usize,
                )
            }
        }
        Work::Launch { kernel, args, .. } => {
            // SAFETY: the arguments were checked against this kernel's signature and
            // their ranges against live blocks when the item was made (`launch_work`),
            // an item's arguments never change, and its `blocks` keep the ranges alive.
            let r = unsafe { kernel.call_checked(&args.0) };
            return r.map_err(|e| e.to_string());
        }
        // SAFETY: the block is kept alive by this item and `zero` clamps to its capacity.
        // Ops ordered before the free that cached it have completed (stream order, and
        // the schedule's events for other streams); ops of the new allocation are issued
        // after this one. An op of the old allocation the schedule failed to order before
        // the free may race with it — a wrong value, as on a GPU, never a use-after-free.
        Work::Zero {
            block,
            off,
            bytes,
            byte,
        } => unsafe { block.fill(*off, *bytes, *byte) },
        Work::Signal(f) => f.set(),
        Work::Wait(f) => f.wait(),
        Work::Free(_) | Work::Graph(_) => {
            return Err(format!("a {} item cannot run by reference", work.name()))
        }
    }
    Ok(())
}

/// One stream of the plugin: its device, the channel to its worker, and its free lists.
pub(super) struct Stream {
    pub(super) device: u32,
    pub(super) tx: Sender<Item>,
    /// Number of stream calls that returned `Ok` (the next call's `Timing::seq`).
    pub(super) seq: AtomicU64,
    pub(super) shared: Arc<Shared>,
    pub(super) thread: Option<JoinHandle<()>>,
    /// With [`super::HostPluginOptions::inline_streams`]: the stream's jitter generator
    /// (the worker's otherwise), and the lock that keeps two issuing threads from
    /// running the stream's items at once.
    pub(super) inline: Mutex<Option<ChaCha8Rng>>,
    /// This stream's free lists: size class → freed blocks of that capacity, handed out
    /// only to allocs on this stream.
    pub(super) cache: Mutex<BTreeMap<u64, Vec<Arc<Block>>>>,
}

impl HostPlugin {
    /// Runs `f` with the stream (its device, its free lists) and a function that enqueues
    /// one item with the next sequence number; the number advances only if `f` returns
    /// `Ok`.
    pub(super) fn with_stream<R>(
        &self,
        call: PluginCall,
        s: StreamHandle,
        f: impl FnOnce(&Stream, &dyn Fn(Work) -> Result<(), PluginError>, u64) -> Result<R, PluginError>,
    ) -> Result<R, PluginError> {
        let streams = self.streams.read().unwrap_or_else(|p| p.into_inner());
        let st = streams
            .get(s.0 as usize)
            .ok_or_else(|| PluginError::InvalidHandle {
                call,
                what: format!("{s}"),
            })?;
        let seq = st.seq.load(Ordering::Relaxed);
        let send = |work: Work| {
            let item = Item {
                seq: Some(seq),
                work,
            };
            self.enqueue(st, s, item).map_err(|_| PluginError::Backend {
                call,
                message: format!("the worker of {s} has stopped"),
            })
        };
        let r = f(st, &send, seq)?;
        st.seq.store(seq + 1, Ordering::Relaxed);
        tracing::debug!(target: "offload_sched::plugin", stream = s.0, seq, call = call.name(), "issued");
        Ok(r)
    }

    /// [`crate::plugin::Plugin::create_streams`] (`high` false) and
    /// [`crate::plugin::Plugin::create_priority_streams`] (`high` true): the first `count`
    /// streams of `device`'s pool of that kind, starting a worker thread for each stream
    /// the pool lacks.
    pub(super) fn stream_pool(
        &self,
        device: u32,
        count: u32,
        high: bool,
    ) -> Result<Vec<StreamHandle>, PluginError> {
        let call = match high {
            true => PluginCall::CreatePriorityStreams,
            false => PluginCall::CreateStreams,
        };
        self.check_device(call, device)?;
        let mut pools = lock(&self.pools);
        let pool = pools.entry((device, high)).or_default();
        while pool.len() < count as usize {
            let mut streams = self.streams.write().unwrap_or_else(|p| p.into_inner());
            let handle = StreamHandle(streams.len() as u32);
            let (tx, rx) = crossbeam_channel::unbounded();
            let shared = Arc::new(Shared::default());
            let (sh, tm, jitter) = (shared.clone(), self.timings.clone(), self.opts.delay_jitter);
            let thread = std::thread::Builder::new()
                .name(format!("offload-stream-{}", handle.0))
                .spawn(move || run_worker(handle, rx, sh, tm, jitter))
                .map_err(|e| PluginError::Backend {
                    call,
                    message: format!("cannot start a worker thread: {e}"),
                })?;
            streams.push(Stream {
                device,
                tx,
                seq: AtomicU64::new(0),
                shared,
                thread: Some(thread),
                cache: Mutex::new(BTreeMap::new()),
                inline: Mutex::new(jitter_rng(handle, jitter)),
            });
            pool.push(handle);
        }
        Ok(pool[..count as usize].to_vec())
    }

    /// [`crate::plugin::Plugin::synchronize`]: enqueues a marker on `stream` and blocks
    /// until the worker reaches it; then reports the stream's first failure, if any.
    pub(super) fn synchronize_stream(&self, stream: StreamHandle) -> Result<(), PluginError> {
        let call = PluginCall::Synchronize;
        let (flag, shared) = {
            let streams = self.streams.read().unwrap_or_else(|p| p.into_inner());
            let st = streams
                .get(stream.0 as usize)
                .ok_or_else(|| PluginError::InvalidHandle {
                    call,
                    what: format!("{stream}"),
                })?;
            let flag = Flag::new(self.spin);
            let item = Item {
                seq: None,
                work: Work::Signal(flag.clone()),
            };
            self.enqueue(st, stream, item)
                .map_err(|_| PluginError::Backend {
                    call,
                    message: format!("the worker of {stream} has stopped"),
                })?;
            (flag, st.shared.clone())
        };
        tracing::debug!(target: "offload_sched::plugin", stream = stream.0, "synchronize: waiting");
        flag.wait();
        tracing::debug!(target: "offload_sched::plugin", stream = stream.0, "synchronize: done");
        shared.report(call, stream)
    }

    /// Hands `item` to `stream`'s worker, or with
    /// [`super::HostPluginOptions::inline_streams`] runs it here and now; `Err` when the
    /// worker has stopped.
    pub(super) fn enqueue(&self, st: &Stream, stream: StreamHandle, item: Item) -> Result<(), ()> {
        if !self.opts.inline_streams {
            return st.tx.send(item).map_err(|_| ());
        }
        let mut rng = st.inline.lock().unwrap_or_else(|p| p.into_inner());
        execute(stream, item, &st.shared, &self.timings, rng.as_mut());
        Ok(())
    }

    /// [`crate::plugin::Plugin::next_seq`]: the sequence number the next call on `stream`
    /// gets (0 for an unknown stream).
    pub(super) fn stream_next_seq(&self, stream: StreamHandle) -> u64 {
        let streams = self.streams.read().unwrap_or_else(|p| p.into_inner());
        streams
            .get(stream.0 as usize)
            .map_or(0, |s| s.seq.load(Ordering::Relaxed))
    }
}
