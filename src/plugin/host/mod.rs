//! The host plugin: emulated devices on the CPU, with the same semantics a GPU gives.
//!
//! - **Memory.** "Device" memory ([`Plugin::alloc`]) is separate from host memory
//!   ([`Plugin::alloc_host`]): a kernel sees only what an H2D copied in, and the host sees
//!   only what a D2H copied back, so a missing copy gives a wrong answer. Each device has
//!   its own address table; an address of device 0 is invalid on device 1.
//! - **Reuse of freed memory.** As on a GPU, reusing freed device memory is the
//!   allocator's job (contract rule 4 in [`crate::plugin`]): the lowering does not order
//!   the free of one allocation before the alloc of another. `free(s, p)` puts the block
//!   on stream `s`'s free list for its [`size_class`] (the rule of the CUDA plugin's
//!   per-stream block cache); `alloc(s, n)` pops a block of `n`'s class from `s`'s list
//!   only, never another stream's, and enqueues on `s` work that zeroes it, so that in
//!   stream order the new allocation reads as fresh (zeroed) memory. That is legal
//!   exactly by stream order: every op of the old allocation that the schedule ordered
//!   before the free has run before the zeroing. An op of the old allocation on another
//!   stream that was *not* ordered before the free (a missing event) then reads the new
//!   allocation's data or clobbers it — a wrong answer, as with `cuMemFreeAsync` /
//!   `cuMemAllocAsync` — while every block stays reference-counted, so never a
//!   use-after-free. Cached bytes per device are capped
//!   ([`HostPluginOptions::device_cache_bytes`], default 1 GiB, 0 turns reuse off);
//!   past the cap a free really releases the block in stream order. A failing
//!   allocation releases the device's cached blocks and retries once.
//! - **Streams.** One worker thread per stream, fed by a crossbeam channel, runs the
//!   stream's ops in issue order (see [`stream`]). Stream calls enqueue and return; only
//!   `synchronize` blocks.
//! - **Events.** Completion flags (Mutex + Condvar). A record enqueues "set a fresh
//!   flag"; a wait captures the event's current flag when issued and enqueues "block
//!   until set", so a missing wait gives a race and, usually, a wrong answer.
//! - **Kernels.** `extern "C"` functions called through libffi by the host-kernel
//!   runtime ([`crate::runtime::ffi`]): the built-in library
//!   ([`crate::runtime::kernels`]) or symbols of user shared libraries.
//! - **Delay jitter.** [`HostPluginOptions::delay_jitter`] sleeps 0-200 µs (uniform, from
//!   a ChaCha8 stream per worker seeded by the seed and the stream index) before every
//!   op, to shake out missing edges.
//!
//! Dropping the plugin closes every channel, lets the workers finish what was issued, and
//! joins them.

pub mod memory;
pub mod stream;

use crate::model::{ElemType, KernelSig, LaunchShape};
use crate::plugin::{
    size_class, DevicePtr, EventHandle, HostPtr, KernelHandle, LaunchArg, Plugin, PluginCall,
    PluginError, StreamHandle, Timing,
};
use crate::runtime::ffi::{self, HostKernel, KernelLibrary, RawArg};
use crate::runtime::memory::Block;
use crossbeam_channel::Sender;
use memory::MemTable;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::thread::JoinHandle;
use std::time::Instant;
use stream::{Flag, Item, LaunchArgs, Shared, Work};

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
}

impl Default for HostPluginOptions {
    fn default() -> Self {
        HostPluginOptions {
            devices: 1,
            delay_jitter: None,
            library_dir: None,
            poison: None,
            device_cache_bytes: 1 << 30,
        }
    }
}

struct Stream {
    device: u32,
    tx: Sender<Item>,
    /// Number of stream calls that returned `Ok` (the next call's `Timing::seq`).
    seq: AtomicU64,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    /// This stream's free lists: size class → freed blocks of that capacity, handed out
    /// only to allocs on this stream.
    cache: Mutex<BTreeMap<u64, Vec<Arc<Block>>>>,
}

#[derive(Default)]
struct EventState {
    device: u32,
    /// The flag of the most recent record; `None` before the first.
    current: Option<Arc<Flag>>,
}

/// The host plugin (see the module docs).
pub struct HostPlugin {
    opts: HostPluginOptions,
    streams: RwLock<Vec<Stream>>,
    pools: Mutex<BTreeMap<u32, Vec<StreamHandle>>>,
    device_mem: Vec<Mutex<MemTable>>,
    host_mem: Mutex<MemTable>,
    events: Mutex<Vec<Option<EventState>>>,
    kernels: Mutex<Vec<(u32, Arc<HostKernel>)>>,
    library: KernelLibrary,
    timings: Arc<Mutex<Vec<Timing>>>,
    /// Bytes (size-class capacities) on the free lists, per device (index = device).
    cached_bytes: Vec<AtomicU64>,
    /// Allocations served from a free list / by a fresh block (with reuse on).
    cache_hits: AtomicU64,
    cache_misses: AtomicU64,
}

/// What the host plugin's free lists hold and did, from
/// [`HostPlugin::device_cache_stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceCacheStats {
    /// Blocks on the free lists of all streams.
    pub blocks: usize,
    /// Their bytes (size-class capacities), over all devices.
    pub bytes: u64,
    /// Allocations served from a free list so far.
    pub hits: u64,
    /// Allocations that made a fresh block while reuse was on.
    pub misses: u64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl HostPlugin {
    /// A plugin with `opts.devices` devices (at least 1). Threads start when streams are
    /// created.
    pub fn new(opts: HostPluginOptions) -> HostPlugin {
        let devices = opts.devices.max(1);
        HostPlugin {
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
            timings: Arc::new(Mutex::new(Vec::new())),
            cached_bytes: (0..devices).map(|_| AtomicU64::new(0)).collect(),
            cache_hits: AtomicU64::new(0),
            cache_misses: AtomicU64::new(0),
        }
    }

    /// The options the plugin runs with.
    pub fn options(&self) -> &HostPluginOptions {
        &self.opts
    }

    /// Number of live device allocations over all devices (for leak checks). Blocks on
    /// the free lists are not live.
    pub fn live_device_allocs(&self) -> usize {
        self.device_mem.iter().map(|m| lock(m).len()).sum()
    }

    /// Number of live host allocations.
    pub fn live_host_allocs(&self) -> usize {
        lock(&self.host_mem).len()
    }

    /// The free lists' contents and hit counts (see the module docs).
    pub fn device_cache_stats(&self) -> DeviceCacheStats {
        let streams = self.streams.read().unwrap_or_else(|p| p.into_inner());
        DeviceCacheStats {
            blocks: streams
                .iter()
                .map(|st| lock(&st.cache).values().map(Vec::len).sum::<usize>())
                .sum(),
            bytes: self
                .cached_bytes
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .sum(),
            hits: self.cache_hits.load(Ordering::Relaxed),
            misses: self.cache_misses.load(Ordering::Relaxed),
        }
    }

    /// Drops the free lists of every stream of `device`; returns how many blocks they
    /// held. Ops still holding a block keep it alive until they finish.
    fn release_device_cache(&self, device: u32) -> usize {
        let streams = self.streams.read().unwrap_or_else(|p| p.into_inner());
        let mut released = 0;
        for st in streams.iter().filter(|st| st.device == device) {
            let lists = std::mem::take(&mut *lock(&st.cache));
            for (class, blocks) in lists {
                released += blocks.len();
                self.cached_bytes[device as usize]
                    .fetch_sub(class * blocks.len() as u64, Ordering::Relaxed);
            }
        }
        released
    }

    /// One stream-ordered allocation (see [`Plugin::alloc`] and the module docs).
    fn alloc_once(&self, stream: StreamHandle, bytes: u64) -> Result<DevicePtr, PluginError> {
        let call = PluginCall::Alloc;
        let limit = self.opts.device_cache_bytes;
        self.with_stream(call, stream, |st, send, seq| {
            let device = st.device as usize;
            let class = size_class(bytes);
            if limit > 0 {
                let hit = lock(&st.cache).get_mut(&class).and_then(Vec::pop);
                if let Some(b) = hit {
                    // Fresh memory in stream order: zeroed after every op issued to this
                    // stream before, i.e. after the free that listed it (rule 1).
                    let zero = Work::Zero {
                        block: b.clone(),
                        off: 0,
                        bytes,
                        byte: self.opts.poison.unwrap_or(0),
                    };
                    if let Err(e) = send(zero) {
                        lock(&st.cache).entry(class).or_default().push(b);
                        return Err(e);
                    }
                    self.cached_bytes[device].fetch_sub(class, Ordering::Relaxed);
                    self.cache_hits.fetch_add(1, Ordering::Relaxed);
                    let ptr = DevicePtr(b.addr());
                    lock(&self.device_mem[device]).insert(b, bytes);
                    return Ok(ptr);
                }
                self.cache_misses.fetch_add(1, Ordering::Relaxed);
            }
            let t = Instant::now();
            // With reuse on, blocks have their class's capacity, so that every block on a
            // list fits every request of its class.
            let cap = if limit > 0 { class } else { bytes };
            let b = Block::new(cap).ok_or(PluginError::OutOfMemory { call, bytes })?;
            if let Some(byte) = self.opts.poison {
                // SAFETY: the block is not shared yet: no op can touch it.
                unsafe { b.fill(0, cap, byte) };
            }
            let ptr = DevicePtr(b.addr());
            lock(&self.device_mem[device]).insert(Arc::new(b), bytes);
            // A fresh block is made (zeroed) at issue time, so it is complete at once.
            lock(&self.timings).push(Timing {
                stream,
                seq,
                start: t,
                end: Instant::now(),
            });
            Ok(ptr)
        })
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

    /// Runs `f` with the stream (its device, its free lists) and a function that enqueues
    /// one item with the next sequence number; the number advances only if `f` returns
    /// `Ok`.
    fn with_stream<R>(
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
            st.tx
                .send(Item {
                    seq: Some(seq),
                    work,
                })
                .map_err(|_| PluginError::Backend {
                    call,
                    message: format!("the worker of {s} has stopped"),
                })
        };
        let r = f(st, &send, seq)?;
        st.seq.store(seq + 1, Ordering::Relaxed);
        tracing::debug!(target: "offload_sched::plugin", stream = s.0, seq, call = call.name(), "issued");
        Ok(r)
    }

    fn device_range(
        &self,
        call: PluginCall,
        device: u32,
        ptr: DevicePtr,
        bytes: u64,
    ) -> Result<(Arc<Block>, u64), PluginError> {
        let table = self
            .device_mem
            .get(device as usize)
            .ok_or(PluginError::NoDevice {
                call,
                device,
                count: self.opts.devices,
            })?;
        lock(table)
            .lookup(ptr.0, bytes)
            .ok_or(PluginError::InvalidPointer {
                call,
                space: "device",
                ptr: ptr.0,
                bytes,
            })
    }

    fn host_range(
        &self,
        call: PluginCall,
        ptr: HostPtr,
        bytes: u64,
    ) -> Result<(Arc<Block>, u64), PluginError> {
        lock(&self.host_mem)
            .lookup(ptr.0, bytes)
            .ok_or(PluginError::InvalidPointer {
                call,
                space: "host",
                ptr: ptr.0,
                bytes,
            })
    }

    fn event_flag(
        &self,
        call: PluginCall,
        device: u32,
        e: EventHandle,
        new: bool,
    ) -> Result<Option<Arc<Flag>>, PluginError> {
        let mut events = lock(&self.events);
        let ev = events
            .get_mut(e.0 as usize)
            .and_then(|e| e.as_mut())
            .ok_or_else(|| PluginError::InvalidHandle {
                call,
                what: format!("{e}"),
            })?;
        // A record must be on a stream of the event's device; a wait may be on any device
        // (cuStreamWaitEvent: "hEvent may be from a different context or device than
        // hStream"), which cross-device edges of a schedule need.
        if new && ev.device != device {
            return Err(PluginError::InvalidHandle {
                call,
                what: format!("{e} (of device {}, used on device {device})", ev.device),
            });
        }
        if new {
            ev.current = Some(Flag::new());
        }
        Ok(ev.current.clone())
    }
}

impl Plugin for HostPlugin {
    fn name(&self) -> String {
        "host".to_string()
    }

    fn device_count(&self) -> u32 {
        self.opts.devices
    }

    fn create_streams(&self, device: u32, count: u32) -> Result<Vec<StreamHandle>, PluginError> {
        let call = PluginCall::CreateStreams;
        self.check_device(call, device)?;
        let mut pools = lock(&self.pools);
        let pool = pools.entry(device).or_default();
        while pool.len() < count as usize {
            let mut streams = self.streams.write().unwrap_or_else(|p| p.into_inner());
            let handle = StreamHandle(streams.len() as u32);
            let (tx, rx) = crossbeam_channel::unbounded();
            let shared = Arc::new(Shared::default());
            let (sh, tm, jitter) = (shared.clone(), self.timings.clone(), self.opts.delay_jitter);
            let thread = std::thread::Builder::new()
                .name(format!("offload-stream-{}", handle.0))
                .spawn(move || stream::run_worker(handle, rx, sh, tm, jitter))
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
            });
            pool.push(handle);
        }
        Ok(pool[..count as usize].to_vec())
    }

    fn alloc(&self, stream: StreamHandle, bytes: u64) -> Result<DevicePtr, PluginError> {
        let r = self.alloc_once(stream, bytes);
        if let Err(PluginError::OutOfMemory { .. }) = r {
            // Give the device's cached blocks back to the allocator and try once more.
            let device = self
                .streams
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .get(stream.0 as usize)
                .map(|st| st.device);
            if device.is_some_and(|d| self.release_device_cache(d) > 0) {
                return self.alloc_once(stream, bytes);
            }
        }
        r
    }

    fn fill_zero(
        &self,
        stream: StreamHandle,
        ptr: DevicePtr,
        bytes: u64,
    ) -> Result<(), PluginError> {
        let call = PluginCall::FillZero;
        self.with_stream(call, stream, |st, send, _| {
            let (block, off) = self.device_range(call, st.device, ptr, bytes)?;
            send(Work::Zero {
                block,
                off,
                bytes,
                byte: 0,
            })
        })
    }

    fn free(&self, stream: StreamHandle, ptr: DevicePtr) -> Result<(), PluginError> {
        let call = PluginCall::Free;
        let limit = self.opts.device_cache_bytes;
        self.with_stream(call, stream, |st, send, _| {
            let device = st.device as usize;
            let mut table = lock(&self.device_mem[device]);
            let (b, len) = table.remove(ptr.0).ok_or(PluginError::InvalidPointer {
                call,
                space: "device",
                ptr: ptr.0,
                bytes: 0,
            })?;
            if let Err(e) = send(Work::Free(b.clone())) {
                table.insert(b, len);
                return Err(e);
            }
            drop(table);
            // Onto this stream's free list if the device's cap allows: an alloc on this
            // stream may take it at once (stream order puts its zeroing after the free);
            // another stream never takes it from here.
            let class = size_class(len);
            if limit > 0 && b.len() == class {
                let reserved = self.cached_bytes[device]
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
                        (c.saturating_add(class) <= limit).then_some(c + class)
                    })
                    .is_ok();
                if reserved {
                    lock(&st.cache).entry(class).or_default().push(b);
                }
            }
            Ok(())
        })
    }

    fn alloc_host(&self, bytes: u64) -> Result<HostPtr, PluginError> {
        let b = Block::new(bytes).ok_or(PluginError::OutOfMemory {
            call: PluginCall::AllocHost,
            bytes,
        })?;
        let ptr = HostPtr(b.addr());
        let len = b.len();
        lock(&self.host_mem).insert(Arc::new(b), len);
        Ok(ptr)
    }

    fn free_host(&self, ptr: HostPtr) -> Result<(), PluginError> {
        lock(&self.host_mem)
            .remove(ptr.0)
            .map(drop)
            .ok_or(PluginError::InvalidPointer {
                call: PluginCall::FreeHost,
                space: "host",
                ptr: ptr.0,
                bytes: 0,
            })
    }

    fn submit(
        &self,
        stream: StreamHandle,
        dst: DevicePtr,
        src: HostPtr,
        bytes: u64,
    ) -> Result<(), PluginError> {
        let call = PluginCall::Submit;
        self.with_stream(call, stream, |st, send, _| {
            let device = st.device;
            let (d, dst_off) = self.device_range(call, device, dst, bytes)?;
            let (s, src_off) = self.host_range(call, src, bytes)?;
            send(Work::Copy {
                dst: d,
                dst_off,
                src: s,
                src_off,
                bytes,
            })
        })
    }

    fn retrieve(
        &self,
        stream: StreamHandle,
        dst: HostPtr,
        src: DevicePtr,
        bytes: u64,
    ) -> Result<(), PluginError> {
        let call = PluginCall::Retrieve;
        self.with_stream(call, stream, |st, send, _| {
            let device = st.device;
            let (s, src_off) = self.device_range(call, device, src, bytes)?;
            let (d, dst_off) = self.host_range(call, dst, bytes)?;
            send(Work::Copy {
                dst: d,
                dst_off,
                src: s,
                src_off,
                bytes,
            })
        })
    }

    fn load_kernel(
        &self,
        device: u32,
        sig: &KernelSig,
        ty: ElemType,
    ) -> Result<KernelHandle, PluginError> {
        let call = PluginCall::LoadKernel;
        self.check_device(call, device)?;
        let mut kernels = lock(&self.kernels);
        if let Some(i) = kernels
            .iter()
            .position(|(d, k)| *d == device && k.ty == ty && k.sig == *sig)
        {
            return Ok(KernelHandle(i as u32));
        }
        let k = self
            .library
            .resolve(sig, ty)
            .map_err(|e| PluginError::KernelLoad {
                call,
                kernel: sig.name.clone(),
                message: e.to_string(),
            })?;
        kernels.push((device, Arc::new(k)));
        Ok(KernelHandle(kernels.len() as u32 - 1))
    }

    fn launch(
        &self,
        stream: StreamHandle,
        kernel: KernelHandle,
        args: &[LaunchArg],
        _shape: LaunchShape,
    ) -> Result<(), PluginError> {
        let call = PluginCall::Launch;
        let (kdev, k) = lock(&self.kernels)
            .get(kernel.0 as usize)
            .cloned()
            .ok_or_else(|| PluginError::InvalidHandle {
                call,
                what: format!("kernel {}", kernel.0),
            })?;
        self.with_stream(call, stream, |st, send, _| {
            let device = st.device;
            if kdev != device {
                return Err(PluginError::InvalidHandle {
                    call,
                    what: format!(
                        "kernel \"{}\" (loaded on device {kdev}, launched on device {device})",
                        k.sig.name
                    ),
                });
            }
            let mut raw = Vec::with_capacity(args.len());
            let mut blocks = Vec::new();
            for a in args {
                match *a {
                    LaunchArg::Buffer {
                        ptr,
                        offset,
                        len,
                        ty,
                        ..
                    } => {
                        let bytes = len.saturating_mul(ty.size_bytes());
                        if ptr.0 == 0 && bytes == 0 {
                            // A zero-length argument without storage (`KernelArg::Empty`).
                            raw.push(RawArg::Buffer {
                                ptr: std::ptr::null_mut(),
                                len: 0,
                                ty,
                            });
                            continue;
                        }
                        let (b, off) =
                            self.device_range(call, device, ptr.offset(offset), bytes)?;
                        // SAFETY: `off + bytes <= b.len()` (checked by the lookup), so
                        // the pointer stays inside the block.
                        let p = unsafe { b.ptr().add(off as usize) };
                        raw.push(RawArg::Buffer { ptr: p, len, ty });
                        blocks.push(b);
                    }
                    LaunchArg::Scalar(s) => raw.push(RawArg::Scalar(s)),
                }
            }
            k.check(&raw).map_err(|e| PluginError::Signature {
                call,
                kernel: k.sig.name.clone(),
                message: match e {
                    ffi::KernelError::Signature { message, .. } => message,
                    other => other.to_string(),
                },
            })?;
            send(Work::Launch {
                kernel: k.clone(),
                args: LaunchArgs(raw),
                blocks,
            })
        })
    }

    fn create_event(&self, device: u32) -> Result<EventHandle, PluginError> {
        self.check_device(PluginCall::CreateEvent, device)?;
        let mut events = lock(&self.events);
        let state = Some(EventState {
            device,
            current: None,
        });
        if let Some(i) = events.iter().position(|e| e.is_none()) {
            events[i] = state;
            return Ok(EventHandle(i as u32));
        }
        events.push(state);
        Ok(EventHandle(events.len() as u32 - 1))
    }

    fn destroy_event(&self, event: EventHandle) -> Result<(), PluginError> {
        let mut events = lock(&self.events);
        match events.get_mut(event.0 as usize) {
            Some(e @ Some(_)) => {
                *e = None;
                Ok(())
            }
            _ => Err(PluginError::InvalidHandle {
                call: PluginCall::DestroyEvent,
                what: format!("{event}"),
            }),
        }
    }

    fn record_event(&self, stream: StreamHandle, event: EventHandle) -> Result<(), PluginError> {
        let call = PluginCall::RecordEvent;
        self.with_stream(call, stream, |st, send, _| {
            let device = st.device;
            let flag = self.event_flag(call, device, event, true)?;
            match flag {
                Some(f) => send(Work::Signal(f)),
                None => Ok(()),
            }
        })
    }

    fn wait_event(&self, stream: StreamHandle, event: EventHandle) -> Result<(), PluginError> {
        let call = PluginCall::WaitEvent;
        self.with_stream(call, stream, |st, send, seq| {
            let device = st.device;
            match self.event_flag(call, device, event, false)? {
                Some(f) => send(Work::Wait(f)),
                None => {
                    // Never recorded: a no-op (cuStreamWaitEvent on a fresh event).
                    let t = Instant::now();
                    lock(&self.timings).push(Timing {
                        stream,
                        seq,
                        start: t,
                        end: t,
                    });
                    Ok(())
                }
            }
        })
    }

    fn synchronize(&self, stream: StreamHandle) -> Result<(), PluginError> {
        let call = PluginCall::Synchronize;
        let (flag, shared) = {
            let streams = self.streams.read().unwrap_or_else(|p| p.into_inner());
            let st = streams
                .get(stream.0 as usize)
                .ok_or_else(|| PluginError::InvalidHandle {
                    call,
                    what: format!("{stream}"),
                })?;
            let flag = Flag::new();
            st.tx
                .send(Item {
                    seq: None,
                    work: Work::Signal(flag.clone()),
                })
                .map_err(|_| PluginError::Backend {
                    call,
                    message: format!("the worker of {stream} has stopped"),
                })?;
            (flag, st.shared.clone())
        };
        tracing::debug!(target: "offload_sched::plugin", stream = stream.0, "synchronize: waiting");
        flag.wait();
        tracing::debug!(target: "offload_sched::plugin", stream = stream.0, "synchronize: done");
        let error = lock(&shared.error).clone();
        match error {
            Some(message) => Err(PluginError::Async {
                call,
                stream,
                message,
            }),
            None => Ok(()),
        }
    }

    fn drain_timings(&self) -> Vec<Timing> {
        std::mem::take(&mut *lock(&self.timings))
    }

    fn next_seq(&self, stream: StreamHandle) -> u64 {
        let streams = self.streams.read().unwrap_or_else(|p| p.into_inner());
        streams
            .get(stream.0 as usize)
            .map_or(0, |s| s.seq.load(Ordering::Relaxed))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{builtin_kernel, Access, Scalar};

    const SHAPE: LaunchShape = LaunchShape {
        teams: 1,
        threads: 1,
    };
    /// Four f32, the allocation every test uses (size class 512).
    const N: u64 = 4;
    const BYTES: u64 = N * 4;

    impl HostPlugin {
        /// Holds `s` until the returned flag is set by the test: an event wait released
        /// later, from the host.
        fn hold(&self, s: StreamHandle) -> Arc<Flag> {
            let gate = Flag::new();
            let streams = self.streams.read().unwrap();
            let item = Item {
                seq: None,
                work: Work::Wait(gate.clone()),
            };
            streams[s.0 as usize].tx.send(item).unwrap();
            gate
        }
    }

    fn plugin(cache: u64) -> HostPlugin {
        HostPlugin::new(HostPluginOptions {
            device_cache_bytes: cache,
            ..HostPluginOptions::default()
        })
    }

    fn buf(ptr: DevicePtr, access: Access) -> LaunchArg {
        LaunchArg::Buffer {
            ptr,
            offset: 0,
            len: N,
            ty: ElemType::F32,
            access,
        }
    }

    fn kernel(p: &HostPlugin, name: &str) -> KernelHandle {
        p.load_kernel(0, &builtin_kernel(name).unwrap(), ElemType::F32)
            .unwrap()
    }

    fn fill(p: &HostPlugin, s: StreamHandle, d: DevicePtr, v: f32) {
        let args = [buf(d, Access::Out), LaunchArg::Scalar(Scalar::F32(v))];
        p.launch(s, kernel(p, "fill"), &args, SHAPE).unwrap();
    }

    fn read(p: &HostPlugin, h: HostPtr) -> Vec<f32> {
        let _ = p;
        let mut v = vec![0f32; N as usize];
        // SAFETY: `h` holds N f32 and the streams that wrote it were synchronized.
        unsafe { std::ptr::copy_nonoverlapping(h.as_ptr() as *const f32, v.as_mut_ptr(), v.len()) };
        v
    }

    #[test]
    fn a_block_freed_on_a_stream_is_reused_there_and_reads_as_zeros() {
        let p = plugin(1 << 30);
        let s = p.create_streams(0, 1).unwrap()[0];
        let h = p.alloc_host(BYTES).unwrap();
        let d1 = p.alloc(s, BYTES).unwrap();
        fill(&p, s, d1, 7.0);
        p.free(s, d1).unwrap();
        // Another size of the same class (512 bytes) gets the same block at once.
        let d2 = p.alloc(s, BYTES + 4).unwrap();
        assert_eq!(d2, d1, "reused on the freeing stream");
        // No H2D: the kernel reads the new allocation as fresh zeros, not the old 7s.
        p.launch(s, kernel(&p, "increment"), &[buf(d2, Access::InOut)], SHAPE)
            .unwrap();
        p.retrieve(s, h, d2, BYTES).unwrap();
        p.synchronize(s).unwrap();
        assert_eq!(read(&p, h), [1.0; N as usize]);
        // A block of another class is not taken for it.
        p.free(s, d2).unwrap();
        let big = p.alloc(s, 4096).unwrap();
        assert_ne!(big, d1);
        let stats = p.device_cache_stats();
        assert_eq!((stats.blocks, stats.bytes), (1, 512));
        assert_eq!((stats.hits, stats.misses), (1, 2));
        p.free(s, big).unwrap();
        p.synchronize(s).unwrap();
        assert_eq!(p.live_device_allocs(), 0, "cached blocks are not live");
        // Timings: every stream call still gets one, zeroing work included.
        let mut seqs: Vec<u64> = p.drain_timings().iter().map(|t| t.seq).collect();
        seqs.sort_unstable();
        assert_eq!(seqs, (0..p.next_seq(s)).collect::<Vec<_>>());
        p.free_host(h).unwrap();
    }

    #[test]
    fn a_block_freed_on_one_stream_is_never_handed_to_another() {
        let p = plugin(1 << 30);
        let ss = p.create_streams(0, 2).unwrap();
        let (s1, s2) = (ss[0], ss[1]);
        let d1 = p.alloc(s1, BYTES).unwrap();
        p.free(s1, d1).unwrap();
        let d2 = p.alloc(s2, BYTES).unwrap();
        assert_ne!(d2, d1, "s2 gets a fresh block; s1's stays on s1's list");
        assert_eq!(p.device_cache_stats().blocks, 1);
        assert_eq!(p.alloc(s1, BYTES).unwrap(), d1);
        // Freed on s2, the block goes to s2's list, and back out only on s2.
        p.free(s2, d2).unwrap();
        assert_ne!(p.alloc(s1, BYTES).unwrap(), d2);
        assert_eq!(p.alloc(s2, BYTES).unwrap(), d2);
        // Devices have their own lists too (each stream belongs to one device).
        let q = HostPlugin::new(HostPluginOptions {
            devices: 2,
            ..HostPluginOptions::default()
        });
        let a = q.create_streams(0, 1).unwrap()[0];
        let b = q.create_streams(1, 1).unwrap()[0];
        let da = q.alloc(a, BYTES).unwrap();
        q.free(a, da).unwrap();
        assert_ne!(q.alloc(b, BYTES).unwrap(), da);
    }

    /// Old allocation `x` on s1 (filled with 7), used by s2 behind a gate the host opens
    /// later, while s1 frees `x`, allocates (gets the same block) and writes the new
    /// allocation. `ordered`: s2 records an event after its use and s1 waits on it before
    /// the free (the edge the schedule must have); otherwise the edge is missing.
    /// Returns (what s2 read from the old allocation, what s1 read from the new one).
    fn old_reader_vs_new_writer(p: &HostPlugin, ordered: bool) -> (Vec<f32>, Vec<f32>) {
        let ss = p.create_streams(0, 2).unwrap();
        let (s1, s2) = (ss[0], ss[1]);
        let (h_old, h_new) = (p.alloc_host(BYTES).unwrap(), p.alloc_host(BYTES).unwrap());
        let y = p.alloc(s2, BYTES).unwrap();
        let x = p.alloc(s1, BYTES).unwrap();
        fill(p, s1, x, 7.0);
        let (e1, done) = (p.create_event(0).unwrap(), p.create_event(0).unwrap());
        p.record_event(s1, e1).unwrap();
        p.wait_event(s2, e1).unwrap();
        let gate = p.hold(s2);
        let copy = [buf(x, Access::In), buf(y, Access::Out)];
        p.launch(s2, kernel(p, "copy"), &copy, SHAPE).unwrap();
        p.retrieve(s2, h_old, y, BYTES).unwrap();
        p.record_event(s2, done).unwrap();
        if ordered {
            p.wait_event(s1, done).unwrap();
        }
        p.free(s1, x).unwrap();
        let x2 = p.alloc(s1, BYTES).unwrap();
        fill(p, s1, x2, 9.0);
        p.retrieve(s1, h_new, x2, BYTES).unwrap();
        if !ordered {
            // s1 is not held by anything: let it write the new allocation first.
            p.synchronize(s1).unwrap();
        }
        gate.set();
        p.synchronize(s1).unwrap();
        p.synchronize(s2).unwrap();
        let seen = (read(p, h_old), read(p, h_new));
        p.free(s1, x2).unwrap();
        p.free(s2, y).unwrap();
        p.synchronize(s1).unwrap();
        p.synchronize(s2).unwrap();
        p.free_host(h_old).unwrap();
        p.free_host(h_new).unwrap();
        seen
    }

    /// As above, but s2's late op of the old allocation writes it (`increment`), and s1
    /// reads the new allocation (fresh zeros) after an event s2 records after that op.
    /// `ordered`: s1 also waits on that event before the free. Returns what s1 read.
    fn old_writer_vs_new_reader(p: &HostPlugin, ordered: bool) -> Vec<f32> {
        let ss = p.create_streams(0, 2).unwrap();
        let (s1, s2) = (ss[0], ss[1]);
        let h = p.alloc_host(BYTES).unwrap();
        let x = p.alloc(s1, BYTES).unwrap();
        fill(p, s1, x, 7.0);
        let (e1, e2) = (p.create_event(0).unwrap(), p.create_event(0).unwrap());
        p.record_event(s1, e1).unwrap();
        p.wait_event(s2, e1).unwrap();
        let gate = p.hold(s2);
        p.launch(s2, kernel(p, "increment"), &[buf(x, Access::InOut)], SHAPE)
            .unwrap();
        p.record_event(s2, e2).unwrap();
        if ordered {
            p.wait_event(s1, e2).unwrap();
        }
        p.free(s1, x).unwrap();
        let x2 = p.alloc(s1, BYTES).unwrap();
        if !ordered {
            // The new allocation's zeroing runs now, before the late increment.
            p.synchronize(s1).unwrap();
        }
        p.wait_event(s1, e2).unwrap();
        p.retrieve(s1, h, x2, BYTES).unwrap();
        gate.set();
        p.synchronize(s1).unwrap();
        p.synchronize(s2).unwrap();
        let seen = read(p, h);
        p.free(s1, x2).unwrap();
        p.synchronize(s1).unwrap();
        p.free_host(h).unwrap();
        seen
    }

    #[test]
    fn a_missing_edge_before_a_free_gives_a_wrong_answer_and_the_event_fixes_it() {
        // Missing edge: the old op reads the new allocation's 9s instead of its own 7s.
        let p = plugin(1 << 30);
        assert_eq!(
            old_reader_vs_new_writer(&p, false),
            (vec![9.0; 4], vec![9.0; 4])
        );
        assert_eq!(p.device_cache_stats().hits, 1);
        assert_eq!(p.live_device_allocs(), 0);
        // With the event: right values, and still a reuse.
        let p = plugin(1 << 30);
        assert_eq!(
            old_reader_vs_new_writer(&p, true),
            (vec![7.0; 4], vec![9.0; 4])
        );
        assert_eq!(p.device_cache_stats().hits, 1);
        // Missing edge: the old op's increment lands in the new allocation (1, not 0).
        let p = plugin(1 << 30);
        assert_eq!(old_writer_vs_new_reader(&p, false), vec![1.0; 4]);
        let p = plugin(1 << 30);
        assert_eq!(old_writer_vs_new_reader(&p, true), vec![0.0; 4]);
        assert_eq!(p.device_cache_stats().hits, 1);
    }

    #[test]
    fn with_reuse_off_the_missing_edge_goes_unseen() {
        // Fresh blocks every time: the old allocation stays intact (held by its ops), so
        // the wrong schedule gives the right values — what reuse is there to catch.
        let p = plugin(0);
        assert_eq!(
            old_reader_vs_new_writer(&p, false),
            (vec![7.0; 4], vec![9.0; 4])
        );
        let p = plugin(0);
        assert_eq!(old_writer_vs_new_reader(&p, false), vec![0.0; 4]);
        assert_eq!(p.device_cache_stats(), DeviceCacheStats::default());
        assert_eq!(p.live_device_allocs(), 0);
    }

    #[test]
    fn the_cap_bounds_cached_bytes_per_device() {
        // Room for two 512-byte blocks: the third free releases its block.
        let p = plugin(1024);
        let s = p.create_streams(0, 1).unwrap()[0];
        let ds: Vec<DevicePtr> = (0..3).map(|_| p.alloc(s, BYTES).unwrap()).collect();
        for d in &ds {
            p.free(s, *d).unwrap();
        }
        let stats = p.device_cache_stats();
        assert_eq!((stats.blocks, stats.bytes), (2, 1024));
        let again: Vec<DevicePtr> = (0..3).map(|_| p.alloc(s, BYTES).unwrap()).collect();
        let stats = p.device_cache_stats();
        assert_eq!((stats.blocks, stats.bytes), (0, 0));
        assert_eq!((stats.hits, stats.misses), (2, 4));
        // The two cached blocks came back (last freed first); the third is new memory.
        assert_eq!(&again[..2], &[ds[1], ds[0]]);
        // A block larger than the whole cap is never cached.
        let big = p.alloc(s, 4096).unwrap();
        p.free(s, big).unwrap();
        assert_eq!(p.device_cache_stats().blocks, 0);
        for d in again {
            p.free(s, d).unwrap();
        }
        p.synchronize(s).unwrap();
        assert_eq!(p.device_cache_stats().blocks, 2);
        assert_eq!(p.live_device_allocs(), 0);
    }

    #[test]
    fn an_allocation_is_checked_against_its_length_not_its_class() {
        let p = plugin(1 << 30);
        let s = p.create_streams(0, 1).unwrap()[0];
        let h = p.alloc_host(512).unwrap();
        let d = p.alloc(s, 100).unwrap();
        assert!(p.submit(s, d, h, 100).is_ok());
        assert!(matches!(
            p.submit(s, d, h, 101),
            Err(PluginError::InvalidPointer { .. })
        ));
        p.free(s, d).unwrap();
        let d2 = p.alloc(s, 200).unwrap();
        assert_eq!(d2, d);
        assert!(p.submit(s, d2, h, 200).is_ok());
        assert!(p.submit(s, d2, h, 201).is_err());
        p.synchronize(s).unwrap();
    }
}
