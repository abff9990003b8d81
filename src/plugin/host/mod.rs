//! The host plugin: emulated devices on the CPU, with the same semantics a GPU gives.
//!
//! - **Memory.** "Device" memory ([`Plugin::alloc`]) is separate from host memory
//!   ([`Plugin::alloc_host`]): a kernel sees only what an H2D copied in, and the host sees
//!   only what a D2H copied back, so a missing copy gives a wrong answer. Each device has
//!   its own address table; an address of device 0 is invalid on device 1.
//! - **Reuse of freed memory.** As on a GPU, reusing freed device memory is the
//!   allocator's job (contract rule 4 in [`crate::plugin`]): the lowering does not order
//!   the free of one allocation before the alloc of another. `free(s, p)` puts the block
//!   on stream `s`'s free list for its [`size_class`](crate::plugin::size_class) (the
//!   rule of the CUDA plugin's per-stream block cache); `alloc(s, n)` pops a block of
//!   `n`'s class from `s`'s list, else a *settled* block of another stream's list of the
//!   device (nothing holds it any more: its free and every op of the old allocation have
//!   completed), and enqueues on `s` work that zeroes it, so that in stream order the new
//!   allocation reads as fresh (zeroed) memory. That is legal by stream order on `s`
//!   (every op of the old allocation that the schedule ordered before the free has run
//!   before the zeroing) and by completion for a settled block. An op of the old
//!   allocation on another stream that was *not* ordered before the free (a missing
//!   event) then reads the new allocation's data or clobbers it — a wrong answer, as with
//!   `cuMemFreeAsync` / `cuMemAllocAsync` — while every block stays reference-counted, so
//!   never a use-after-free. Cached bytes per device are capped
//!   ([`HostPluginOptions::device_cache_bytes`], default 1 GiB, 0 turns reuse off); past
//!   the cap a free really releases the block in stream order. A failing allocation
//!   releases the device's cached blocks and retries once.
//! - **Streams.** One worker thread per stream, fed by a crossbeam channel, runs the
//!   stream's ops in issue order (see `stream`). Stream calls enqueue and return; only
//!   `synchronize` blocks.
//! - **Events.** Completion flags (an atomic, with a condvar for sleepers: `flag.rs`). A
//!   record enqueues "set a fresh flag"; a wait captures the event's current flag when
//!   issued and enqueues "block until set", so a missing wait gives a race and, usually,
//!   a wrong answer; a host wait on an event blocks the calling thread on the current
//!   flag. Every wait spins up to [`HostPluginOptions::wait_spin`] before it sleeps.
//! - **Kernels.** `extern "C"` functions called through libffi by the host-kernel
//!   runtime (`crate::runtime::ffi`): the built-in library
//!   (`crate::runtime::kernels`) or symbols of user shared libraries.
//! - **Graphs.** A launched graph is one stream item whose nodes run in parallel on the
//!   stream's worker and persistent helper threads, one participant per core, each node
//!   after its predecessors (`graph.rs`, `graph_run.rs`).
//! - **Delay jitter.** [`HostPluginOptions::delay_jitter`] sleeps 0-200 µs (uniform, from
//!   a ChaCha8 stream per worker seeded by the seed and the stream index) before every
//!   op, and before every node of a graph launch (whose threads then take ready nodes
//!   at random), to shake out missing edges.
//!
//! Layout: this file holds the options, the plugin value and its [`Plugin`] impl, which
//! dispatches to the files by job: `memory.rs` (the allocation tables, address checks,
//! host memory, copies and zero fills), `alloc.rs` (device alloc and free, the block
//! reuse cache), `stream.rs` (the stream table and the worker threads), `launch.rs`
//! (kernel loading and launch), `events.rs` (events as flags), `graph.rs` (graph
//! instantiation and launch) and `graph_run.rs` (a launch's parallel run). The kernels themselves and
//! the memory blocks are the host-kernel runtime's (`crate::runtime`).
//!
//! Dropping the plugin closes every channel, lets the workers finish what was issued, and
//! joins them.

mod alloc;
mod events;
pub(crate) mod flag;
mod graph;
mod graph_run;
mod graph_topology;
mod launch;
pub(crate) mod memory;
pub(crate) mod stream;

pub use alloc::DeviceCacheStats;

use crate::model::{ElemType, KernelSig, LaunchShape};
use crate::plugin::{
    DeviceMemory, DevicePtr, EventHandle, GraphDesc, GraphHandle, HostPtr, KernelHandle, LaunchArg,
    MemoryInfo, Plugin, PluginCall, PluginError, PluginInfo, StreamHandle, Timing,
};
use crate::runtime::ffi::{HostKernel, KernelLibrary};
use events::EventState;
use memory::MemTable;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use stream::Stream;

/// The default [`HostPluginOptions::wait_spin`]: 50 µs, past the wake-up cost of a
/// sleeping thread on a loaded VM (5-50 µs).
pub const DEFAULT_WAIT_SPIN: std::time::Duration = std::time::Duration::from_micros(50);

/// Options of the host plugin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostPluginOptions {
    /// Number of emulated devices (at least 1). Default 1.
    pub devices: u32,
    /// `Some(seed)`: sleep 0-200 µs before every stream op.
    pub delay_jitter: Option<u64>,
    /// Folder relative user-library paths are resolved against (the graph file's
    /// folder); the current directory when `None`.
    pub library_dir: Option<PathBuf>,
    /// Bytes of freed device blocks kept per device on the streams' free lists for reuse
    /// by later allocs on the same stream (see the module docs), counted by size-class
    /// capacity. 0 turns reuse off: every `alloc` is then a fresh zeroed block and every
    /// `free` releases its block in stream order. Default 1 GiB, as the CUDA plugin's
    /// `device_cache_bytes`.
    pub device_cache_bytes: u64,
    /// `Some(byte)`: every allocation starts filled with `byte` (fresh and reused
    /// blocks alike) instead of zeros, so only [`Plugin::fill_zero`] gives zeros. A
    /// program then checks against the reference interpreter (which has fresh storage
    /// as zeros) only if the lowering zero-fills every allocation it reads before writing
    /// ([`crate::lower::DeviceAlloc::zero`]): what the CUDA plugin's recycled memory
    /// would show as garbage shows here in CI. Default `None` (zeros).
    pub poison: Option<u8>,
    /// `Some(bytes)`: each device holds at most this many live bytes (allocated, not yet
    /// freed, counted at the `alloc` and `free` calls, in stream order as CUDA's
    /// stream-ordered allocator has them), like a device of that size: an `alloc` beyond
    /// it fails with [`PluginError::OverDeviceMemory`] (the executor names the op and its
    /// buffer), never the host's OOM killer. Cached free blocks do not count. Default
    /// `None`: unlimited (the CLI's `--device-memory` sets it).
    pub device_memory: Option<u64>,
    /// How long a wait on an event or a stream (a worker's event wait, the host's
    /// `synchronize` and `synchronize_event`) checks for completion before it sleeps on
    /// a condvar: about 1 µs of busy checks, then checks that yield the core in between.
    /// Waking a sleeping thread costs 5-50 µs on a shared 2-core VM, ~0.1 µs when the
    /// waiter is still spinning, so small ops handed between streams (Task Bench's
    /// stencil) run several times faster. A wait longer than the budget costs at most
    /// the budget of one core, and a thread whose last two waits outlasted it (a stream
    /// waiting on long kernels) sleeps at once until one of its waits is short again, so
    /// coarse tasks lose no CPU to spinning (`flag.rs`). `Duration::ZERO`: sleep at
    /// once. Default 50 µs.
    ///
    /// The plugin spins only on a machine that is not oversubscribed: when its 1-minute
    /// load average (`/proc/loadavg`, read once by [`HostPlugin::new`]) is at least the
    /// number of cores, every wait sleeps at once, as CUDA's `cudaDeviceScheduleAuto`
    /// yields instead of spinning when there are more active contexts than processors.
    /// Measured on the 2-core VM beside busy-polling processes (Task Bench MPI), a
    /// spinning waiter was 5-10× slower: a sleeper is favoured by the scheduler when it
    /// wakes, a spinner is not. [`HostPlugin::wait_spin`] says which applies.
    pub wait_spin: std::time::Duration,
    /// Run every stream op on the thread that issues it, at the call, instead of on the
    /// stream's worker thread: an op has completed when its call returns (an event is
    /// set at its record, `synchronize` returns at once), and an event wait blocks the
    /// issuing thread until another thread's record sets it (threaded issue). Stream
    /// order holds because each stream's ops run under its lock in call order; ops of
    /// two streams issued by one thread run one after another, so a schedule's
    /// concurrency is gone, and so are the hand-offs to the workers and back (two thread
    /// wake-ups per wait, 5-50 µs each on a shared 2-core VM): for a process with one core
    /// and one stream, an MPI rank of `bench taskbench --ranks` or `linalg --ranks` on
    /// a core of its own. Failures are reported as from the worker (at the next
    /// `synchronize`). Default `false`.
    pub inline_streams: bool,
}

impl Default for HostPluginOptions {
    fn default() -> Self {
        HostPluginOptions {
            devices: 1,
            delay_jitter: None,
            library_dir: None,
            poison: None,
            device_cache_bytes: 1 << 30,
            device_memory: None,
            wait_spin: DEFAULT_WAIT_SPIN,
            inline_streams: false,
        }
    }
}

/// The host plugin (see the module docs).
pub struct HostPlugin {
    opts: HostPluginOptions,
    /// The spin every wait takes: `opts.wait_spin`, or zero on an oversubscribed machine.
    spin: std::time::Duration,
    streams: RwLock<Vec<Stream>>,
    /// Stream pools by `(device, high priority)`: the high-priority pool is a pool of its
    /// own, run like any other (the host plugin ignores stream priorities).
    pools: Mutex<BTreeMap<(u32, bool), Vec<StreamHandle>>>,
    device_mem: Vec<Mutex<MemTable>>,
    host_mem: Mutex<MemTable>,
    events: Mutex<Vec<Option<EventState>>>,
    kernels: Mutex<Vec<(u32, Arc<HostKernel>)>>,
    /// Instantiated graphs (`None`: destroyed), indexed by [`GraphHandle`].
    graphs: Mutex<Vec<Option<graph::HostGraph>>>,
    /// The helper threads of graph launches (`graph_run.rs`), started at the first.
    graph_pool: Mutex<Option<Arc<graph_run::GraphPool>>>,
    library: KernelLibrary,
    timings: Arc<Mutex<Vec<Timing>>>,
    /// Bytes (size-class capacities) on the free lists, per device (index = device).
    cached_bytes: Vec<AtomicU64>,
    /// Per device: live bytes (allocated, not freed) and the most there were at once.
    live_bytes: Vec<AtomicU64>,
    peak_bytes: Vec<AtomicU64>,
    /// Allocations served from a free list / by a fresh block (with reuse on).
    cache_hits: AtomicU64,
    cache_misses: AtomicU64,
    /// Of the hits, blocks freed on another stream (settled, see `alloc.rs`).
    cache_cross_hits: AtomicU64,
}

/// Whether the 1-minute load average (`/proc/loadavg`) is at least the cores this
/// process may use; `false` where it cannot be read.
fn oversubscribed() -> bool {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .is_some_and(|load| load >= cores)
}

/// The spin of host-lane awaits (the executor's, `exec/host_lanes.rs`):
/// [`DEFAULT_WAIT_SPIN`], or zero where the machine was oversubscribed at the first call
/// of the process.
pub(crate) fn lane_spin() -> std::time::Duration {
    static SPIN: std::sync::OnceLock<std::time::Duration> = std::sync::OnceLock::new();
    *SPIN.get_or_init(|| {
        if oversubscribed() {
            std::time::Duration::ZERO
        } else {
            DEFAULT_WAIT_SPIN
        }
    })
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl HostPlugin {
    /// A plugin with `opts.devices` devices (at least 1). Threads start when streams are
    /// created.
    pub fn new(opts: HostPluginOptions) -> HostPlugin {
        let devices = opts.devices.max(1);
        let spin = if oversubscribed() {
            std::time::Duration::ZERO
        } else {
            opts.wait_spin
        };
        HostPlugin {
            spin,
            library: KernelLibrary::new(opts.library_dir.clone()),
            opts: HostPluginOptions { devices, ..opts },
            streams: RwLock::new(Vec::new()),
            pools: Mutex::new(BTreeMap::new()),
            device_mem: (0..devices)
                .map(|_| Mutex::new(MemTable::default()))
                .collect(),
            host_mem: Mutex::new(MemTable::default()),
            events: Mutex::new(Vec::new()),
            kernels: Mutex::new(Vec::new()),
            graphs: Mutex::new(Vec::new()),
            graph_pool: Mutex::new(None),
            timings: Arc::new(Mutex::new(Vec::new())),
            cached_bytes: (0..devices).map(|_| AtomicU64::new(0)).collect(),
            live_bytes: (0..devices).map(|_| AtomicU64::new(0)).collect(),
            peak_bytes: (0..devices).map(|_| AtomicU64::new(0)).collect(),
            cache_hits: AtomicU64::new(0),
            cache_misses: AtomicU64::new(0),
            cache_cross_hits: AtomicU64::new(0),
        }
    }

    /// The spin its waits take ([`HostPluginOptions::wait_spin`], or zero where the
    /// machine was oversubscribed when the plugin was made).
    pub fn wait_spin(&self) -> std::time::Duration {
        self.spin
    }

    /// The options the plugin runs with.
    pub fn options(&self) -> &HostPluginOptions {
        &self.opts
    }

    fn check_device(&self, call: PluginCall, device: u32) -> Result<(), PluginError> {
        if device < self.opts.devices {
            Ok(())
        } else {
            Err(PluginError::NoDevice {
                call,
                device,
                count: self.opts.devices,
            })
        }
    }
}

impl Plugin for HostPlugin {
    /// `opts.devices` emulated devices whose memory is host RAM; every optional
    /// capability but parallel issue (a stream call only enqueues) and send / receive:
    /// application memory, graphs, timing (every stream op is timed by its worker), peer
    /// copies, and every library tile kernel (`gemm`, `syrk`, `trsm`, `potrf`, `getrf` with the
    /// system OpenBLAS, one thread per call: `runtime::blas`).
    fn info(&self) -> PluginInfo {
        PluginInfo {
            app_memory: true,
            graphs: true,
            timing: true,
            peer_copies: true,
            library_kernels: crate::model::LibraryKernel::all_names(),
            device_cache_bytes: self.opts.device_cache_bytes,
            ..PluginInfo::new("host", self.opts.devices, DeviceMemory::HostRam)
        }
    }

    fn create_streams(&self, device: u32, count: u32) -> Result<Vec<StreamHandle>, PluginError> {
        self.stream_pool(device, count, false)
    }

    /// Worker threads like [`Plugin::create_streams`]'s, in a pool of their own: the
    /// host plugin has no stream priorities (its threads are scheduled by the OS alike).
    fn create_priority_streams(
        &self,
        device: u32,
        count: u32,
    ) -> Result<Vec<StreamHandle>, PluginError> {
        self.stream_pool(device, count, true)
    }

    fn alloc(&self, stream: StreamHandle, bytes: u64) -> Result<DevicePtr, PluginError> {
        self.alloc_device(stream, bytes)
    }

    fn fill_zero(
        &self,
        stream: StreamHandle,
        ptr: DevicePtr,
        bytes: u64,
    ) -> Result<(), PluginError> {
        self.zero_device_range(stream, ptr, bytes)
    }

    fn free(&self, stream: StreamHandle, ptr: DevicePtr) -> Result<(), PluginError> {
        self.free_device(stream, ptr)
    }

    fn alloc_host(&self, bytes: u64) -> Result<HostPtr, PluginError> {
        self.alloc_host_block(bytes)
    }

    fn free_host(&self, ptr: HostPtr) -> Result<(), PluginError> {
        self.free_host_block(ptr)
    }

    fn register_host(&self, ptr: HostPtr, bytes: u64) -> Result<bool, PluginError> {
        self.register_host_block(ptr, bytes)
    }

    fn unregister_host(&self, ptr: HostPtr) -> Result<(), PluginError> {
        self.free_host_block(ptr)
    }

    fn submit(
        &self,
        stream: StreamHandle,
        dst: DevicePtr,
        src: HostPtr,
        bytes: u64,
    ) -> Result<(), PluginError> {
        self.copy_htod(stream, dst, src, bytes)
    }

    fn retrieve(
        &self,
        stream: StreamHandle,
        dst: HostPtr,
        src: DevicePtr,
        bytes: u64,
    ) -> Result<(), PluginError> {
        self.copy_dtoh(stream, dst, src, bytes)
    }

    fn copy_peer(
        &self,
        stream: StreamHandle,
        dst: DevicePtr,
        dst_device: u32,
        src: DevicePtr,
        src_device: u32,
        bytes: u64,
    ) -> Result<(), PluginError> {
        self.copy_dtod_peer(stream, dst, dst_device, src, src_device, bytes)
    }

    fn load_kernel(
        &self,
        device: u32,
        sig: &KernelSig,
        ty: ElemType,
    ) -> Result<KernelHandle, PluginError> {
        self.load_host_kernel(device, sig, ty)
    }

    fn launch(
        &self,
        stream: StreamHandle,
        kernel: KernelHandle,
        args: &[LaunchArg],
        shape: LaunchShape,
    ) -> Result<(), PluginError> {
        self.launch_host_kernel(stream, kernel, args, shape)
    }

    fn create_event(&self, device: u32) -> Result<EventHandle, PluginError> {
        self.new_event(device)
    }

    fn destroy_event(&self, event: EventHandle) -> Result<(), PluginError> {
        self.free_event(event)
    }

    fn record_event(&self, stream: StreamHandle, event: EventHandle) -> Result<(), PluginError> {
        self.enqueue_record(stream, event)
    }

    fn wait_event(&self, stream: StreamHandle, event: EventHandle) -> Result<(), PluginError> {
        self.enqueue_wait(stream, event)
    }

    fn synchronize(&self, stream: StreamHandle) -> Result<(), PluginError> {
        self.synchronize_stream(stream)
    }

    /// The host plugin cannot tell without blocking: waits as `synchronize` does.
    fn query(&self, stream: StreamHandle) -> Result<bool, PluginError> {
        self.synchronize_stream(stream).map(|()| true)
    }

    fn synchronize_event(&self, event: EventHandle) -> Result<(), PluginError> {
        self.wait_event_flag(event)
    }

    fn graph_instantiate(&self, desc: &GraphDesc) -> Result<GraphHandle, PluginError> {
        self.instantiate_graph(desc)
    }

    fn graph_edges(&self, graph: GraphHandle) -> Result<Vec<(u32, u32)>, PluginError> {
        self.graph_edge_list(graph)
    }

    fn graph_set_host(
        &self,
        graph: GraphHandle,
        node: u32,
        host: HostPtr,
    ) -> Result<(), PluginError> {
        self.set_graph_host(graph, node, host)
    }

    fn graph_launch(&self, graph: GraphHandle, stream: StreamHandle) -> Result<(), PluginError> {
        self.launch_graph(graph, stream)
    }

    fn graph_destroy(&self, graph: GraphHandle) -> Result<(), PluginError> {
        self.destroy_graph(graph)
    }

    fn memory_info(&self, device: u32) -> Result<Option<MemoryInfo>, PluginError> {
        self.memory_of(device)
    }

    fn drain_timings(&self) -> Vec<Timing> {
        std::mem::take(&mut *lock(&self.timings))
    }

    fn next_seq(&self, stream: StreamHandle) -> u64 {
        self.stream_next_seq(stream)
    }
}

impl Drop for HostPlugin {
    fn drop(&mut self) {
        let streams = std::mem::take(self.streams.get_mut().unwrap_or_else(|p| p.into_inner()));
        let mut threads = Vec::with_capacity(streams.len());
        for s in streams {
            // Closing the channel ends the worker's loop after the issued work.
            drop(s.tx);
            threads.extend(s.thread);
        }
        for t in threads {
            let _ = t.join();
        }
        // After the stream workers: every launch they ran has ended.
        if let Some(p) = lock(&self.graph_pool).take() {
            p.shutdown();
        }
        for m in &self.device_mem {
            lock(m).clear();
        }
        lock(&self.host_mem).clear();
    }
}

impl std::fmt::Debug for HostPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostPlugin")
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}
