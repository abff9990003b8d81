//! The host plugin: emulated devices on the CPU, with the same semantics a GPU gives.
//!
//! - **Memory.** "Device" memory ([`Plugin::alloc`]) is separate from host memory
//!   ([`Plugin::alloc_host`]): a kernel sees only what an H2D copied in, and the host sees
//!   only what a D2H copied back, so a missing copy gives a wrong answer. Each device has
//!   its own address table; an address of device 0 is invalid on device 1.
//! - **Streams.** One worker thread per stream, fed by a crossbeam channel, runs the
//!   stream's ops in issue order (see [`stream`]). Stream calls enqueue and return; only
//!   `synchronize` blocks.
//! - **Events.** Completion flags (Mutex + Condvar). A record enqueues "set a fresh
//!   flag"; a wait captures the event's current flag when issued and enqueues "block
//!   until set", so a missing wait gives a race and, usually, a wrong answer.
//! - **Kernels.** `extern "C"` functions called through libffi ([`ffi`]): the built-in
//!   library ([`kernels`]) or symbols of user shared libraries.
//! - **Delay jitter.** [`HostPluginOptions::delay_jitter`] sleeps 0-200 µs (uniform, from
//!   a ChaCha8 stream per worker seeded by the seed and the stream index) before every
//!   op, to shake out missing edges.
//!
//! Dropping the plugin closes every channel, lets the workers finish what was issued, and
//! joins them.

pub mod ffi;
pub mod kernels;
pub mod memory;
pub mod stream;

use crate::model::{ElemType, KernelSig, LaunchShape};
use crate::plugin::{
    DevicePtr, EventHandle, HostPtr, KernelHandle, LaunchArg, Plugin, PluginCall, PluginError,
    StreamHandle, Timing,
};
use crossbeam_channel::Sender;
use ffi::{HostKernel, KernelLibrary, RawArg};
use memory::{Block, MemTable};
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
}

impl Default for HostPluginOptions {
    fn default() -> Self {
        HostPluginOptions {
            devices: 1,
            delay_jitter: None,
            library_dir: None,
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
        }
    }

    /// The options the plugin runs with.
    pub fn options(&self) -> &HostPluginOptions {
        &self.opts
    }

    /// Number of live device allocations over all devices (for leak checks).
    pub fn live_device_allocs(&self) -> usize {
        self.device_mem.iter().map(|m| lock(m).len()).sum()
    }

    /// Number of live host allocations.
    pub fn live_host_allocs(&self) -> usize {
        lock(&self.host_mem).len()
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

    /// Runs `f` with the stream's device and a function that enqueues one item with the
    /// next sequence number; the number advances only if `f` returns `Ok`.
    fn with_stream<R>(
        &self,
        call: PluginCall,
        s: StreamHandle,
        f: impl FnOnce(u32, &dyn Fn(Work) -> Result<(), PluginError>, u64) -> Result<R, PluginError>,
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
        let r = f(st.device, &send, seq)?;
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
            });
            pool.push(handle);
        }
        Ok(pool[..count as usize].to_vec())
    }

    fn alloc(&self, stream: StreamHandle, bytes: u64) -> Result<DevicePtr, PluginError> {
        let call = PluginCall::Alloc;
        self.with_stream(call, stream, |device, _send, seq| {
            let t = Instant::now();
            let b = Block::new(bytes).ok_or(PluginError::OutOfMemory { call, bytes })?;
            let ptr = DevicePtr(b.addr());
            lock(&self.device_mem[device as usize]).insert(Arc::new(b));
            // The allocation is made at issue time, so it is complete at once.
            lock(&self.timings).push(Timing {
                stream,
                seq,
                start: t,
                end: Instant::now(),
            });
            Ok(ptr)
        })
    }

    fn free(&self, stream: StreamHandle, ptr: DevicePtr) -> Result<(), PluginError> {
        let call = PluginCall::Free;
        self.with_stream(call, stream, |device, send, _| {
            let mut table = lock(&self.device_mem[device as usize]);
            let b = table.remove(ptr.0).ok_or(PluginError::InvalidPointer {
                call,
                space: "device",
                ptr: ptr.0,
                bytes: 0,
            })?;
            if let Err(e) = send(Work::Free(b.clone())) {
                table.insert(b);
                return Err(e);
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
        lock(&self.host_mem).insert(Arc::new(b));
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
        self.with_stream(call, stream, |device, send, _| {
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
        self.with_stream(call, stream, |device, send, _| {
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
        self.with_stream(call, stream, |device, send, _| {
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
        self.with_stream(call, stream, |device, send, _| {
            let flag = self.event_flag(call, device, event, true)?;
            match flag {
                Some(f) => send(Work::Signal(f)),
                None => Ok(()),
            }
        })
    }

    fn wait_event(&self, stream: StreamHandle, event: EventHandle) -> Result<(), PluginError> {
        let call = PluginCall::WaitEvent;
        self.with_stream(call, stream, |device, send, seq| {
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
