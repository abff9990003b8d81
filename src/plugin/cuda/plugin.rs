//! [`CudaPlugin`]: the [`Plugin`] contract on the CUDA driver API (see the module docs of
//! [`crate::plugin::cuda`]).

use super::batch::{self, Batch, HeldCopy};
use super::driver::{self, check};
use crate::model::{ElemType, KernelSig, KernelSource, LaunchShape, ParamKind, Scalar};
use crate::plugin::{
    size_class, DevicePtr, EventHandle, HostPtr, KernelHandle, LaunchArg, Plugin, PluginCall,
    PluginError, StreamHandle, Timing,
};
use cudarc::driver::sys;
use std::collections::BTreeMap;
use std::ffi::{c_void, CString};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Instant;

/// `cuStreamCreate` flag: no implicit sync with the legacy default stream.
const CU_STREAM_NON_BLOCKING: u32 = 1;
/// `cuEventCreate` flag: no timing (cheaper record/wait).
const CU_EVENT_DISABLE_TIMING: u32 = 2;

/// Options of the CUDA plugin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CudaPluginOptions {
    /// Folder relative `.cu` / `.ptx` paths of user kernels are resolved against (the
    /// graph file's folder); the current directory when `None`.
    pub kernel_dir: Option<PathBuf>,
    /// Bytes of freed pinned host memory kept for reuse by later `alloc_host` calls
    /// (pinning is slow: about 1 ms per 10 MiB). Default 4 GiB.
    pub host_cache_bytes: u64,
    /// Bytes of freed device blocks kept per device in the per-stream block cache (see
    /// [`CudaPlugin`]); 0 turns the cache off (every `alloc`/`free` is then a
    /// `cuMemAllocAsync`/`cuMemFreeAsync`). Default 1 GiB; `OFFLOAD_CUDA_DEV_CACHE=0` in
    /// the environment also turns it off.
    pub device_cache_bytes: u64,
    /// Time every copy and kernel with a pair of timing events, for traces
    /// ([`Plugin::drain_timings`]); off by default (two extra `cuEventRecord` per op).
    /// Timing turns copy batching off, so that every copy is timed on its own.
    pub timing: bool,
    /// Copies (H2D or D2H) of at most this many bytes are batched: consecutive ones on a
    /// stream are issued as one launch of a copy kernel on the SMs instead of one
    /// copy-engine transfer each (see `batch.rs` for the measurements and the ordering
    /// rules). 0 turns batching off (every copy a `cuMemcpyHtoDAsync` /
    /// `cuMemcpyDtoHAsync`), as does `OFFLOAD_CUDA_BATCH_COPIES=0` in the environment.
    /// Needs unified addressing (every 64-bit platform); without it, or if the built-in
    /// kernels cannot be compiled, copies go to the copy engines. Default 64 KiB.
    pub batch_copy_max_bytes: u64,
}

impl Default for CudaPluginOptions {
    fn default() -> Self {
        CudaPluginOptions {
            kernel_dir: None,
            host_cache_bytes: 4 << 30,
            device_cache_bytes: 1 << 30,
            timing: false,
            batch_copy_max_bytes: 64 << 10,
        }
    }
}

struct Dev {
    cu: sys::CUdevice,
    ctx: sys::CUcontext,
    name: String,
    cc: (i32, i32),
    builtins: OnceLock<Result<sys::CUmodule, String>>,
    /// Unified addressing: pinned host memory is device-addressable at its host address
    /// (`CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING`), which the copy kernel needs.
    unified: bool,
    /// The built-in `offload_copy_batch` kernel (loaded with the first batch).
    copy_batch: OnceLock<Result<sys::CUfunction, String>>,
}

struct Stream {
    device: u32,
    raw: sys::CUstream,
    /// Stream calls on it that returned `Ok` (the next call's `Timing::seq`); counted only
    /// with `timing` (without it there are no timings to match).
    seq: AtomicU64,
    /// This stream's lists of the device-block cache ([`DevCache`]): size class → cached
    /// block addresses. A lock per stream, so that threads issuing different streams do
    /// not contend for it.
    cache: Mutex<BTreeMap<u64, Vec<u64>>>,
    /// Small copies held back to be issued as one copy-kernel launch ([`batch`]); issued
    /// under this lock, before any other driver call on the stream.
    batch: Mutex<Batch>,
}

/// A timed op: (stream, seq, start event, end event), events with timing.
type Timed = (StreamHandle, u64, sys::CUevent, sys::CUevent);

struct Event {
    device: u32,
    raw: sys::CUevent,
}

struct Kernel {
    device: u32,
    sig: KernelSig,
    ty: ElemType,
    func: sys::CUfunction,
}

/// The CUDA plugin: one primary context per device, a stream pool per device, pooled
/// events without timing, stream-ordered device memory from each device's default pool,
/// pinned host memory, kernels from NVRTC.
pub struct CudaPlugin {
    opts: CudaPluginOptions,
    devices: Vec<Dev>,
    streams: RwLock<Vec<Stream>>,
    pools: Mutex<BTreeMap<u32, Vec<StreamHandle>>>,
    events: Mutex<Vec<Option<Event>>>,
    free_events: Mutex<Vec<Event>>,
    kernels: RwLock<Vec<Arc<Kernel>>>,
    user_modules: Mutex<BTreeMap<(u32, PathBuf), sys::CUmodule>>,
    /// Live device allocations: address → (device, bytes asked for). Read by the address
    /// checks of every copy and launch, written by allocs and frees.
    dev_live: RwLock<BTreeMap<u64, (u32, u64)>>,
    /// The device-block cache's counters (its lists are per stream: `Stream::cache`).
    dev_cache: DevCache,
    /// The device-block cache's limit in bytes per device (0: off), fixed at `new`.
    dev_cache_limit: u64,
    /// Largest copy that is batched, in bytes (0: batching off), fixed at `new`.
    batch_limit: u64,
    /// Live host allocations: address → bytes asked for.
    host_mem: RwLock<BTreeMap<u64, u64>>,
    /// Freed pinned blocks kept for reuse: (address, capacity in bytes).
    host_cache: Mutex<Vec<(u64, u64)>>,
    /// With `timing`: ops timed since the last `drain_timings`.
    timed: Mutex<Vec<Timed>>,
    /// With `timing`: per device, an event recorded and synchronized once, and the host
    /// instant just after that synchronize (the clock origin of the timing events).
    time_base: Mutex<BTreeMap<u32, (sys::CUevent, Instant)>>,
}

/// The per-stream device-block cache.
///
/// `free(s, p)` of a block of size class `c` puts `p` on the list `(s, c)` instead of
/// calling `cuMemFreeAsync`; `alloc(s, n)` with `size_class(n) == c` pops a block from
/// `(s, c)` without any CUDA call. This is safe by stream order (contract rules 1 and 4):
/// every use of the old allocation, on any stream, was ordered before the free on `s` (the
/// schedule's events guarantee that for other streams); every use of the new allocation
/// is issued to `s` after the alloc, or to another stream behind an event recorded on `s`
/// after the alloc, so it runs after the free, i.e. after every old use. It is the same
/// argument that lets the driver's stream-ordered pool reuse memory on one stream, minus
/// the driver calls (about 25 µs per region with four streams on the H200).
///
/// Blocks are allocated with their class's capacity ([`size_class`], shared with the host
/// plugin's free lists), so every block of a class fits every request of that class.
/// Cached bytes per device are capped; past the cap a free goes to the driver. An
/// out-of-memory `cuMemAllocAsync` releases the whole cache (stream-ordered) and retries
/// once. Cached blocks are not "live": they do not count in
/// [`CudaPlugin::live_device_allocs`], and any address check against them fails.
///
/// The lists live with their streams (`Stream::cache`, one lock each); the byte count per
/// device is reserved with an atomic update before a block is cached, so the cap holds
/// with several threads freeing at once.
#[derive(Default)]
struct DevCache {
    /// Cached bytes per device (index = device).
    bytes: Vec<AtomicU64>,
    /// Allocations served from the cache / by the driver (for reports).
    hits: AtomicU64,
    misses: AtomicU64,
}

// SAFETY: `func` is a driver function handle, immutable and usable from any thread once
// its context is current (every launch binds it).
unsafe impl Send for Kernel {}
// SAFETY: as above.
unsafe impl Sync for Kernel {}

// SAFETY: every raw handle (context, stream, event, module, function, pointers) is a
// driver object usable from any thread once its context is made current, which every
// call does (`driver::bind`); the tables around them are behind locks.
unsafe impl Send for CudaPlugin {}
// SAFETY: as above.
unsafe impl Sync for CudaPlugin {}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|p| p.into_inner())
}

fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|p| p.into_inner())
}

fn backend(call: PluginCall) -> impl Fn(String) -> PluginError {
    move |message| PluginError::Backend { call, message }
}

/// Looks up `ptr..ptr+bytes` in an address → (.., size) table.
fn inside<V: Copy>(
    table: &BTreeMap<u64, V>,
    size: impl Fn(V) -> u64,
    ptr: u64,
    bytes: u64,
) -> Option<V> {
    let (&base, &v) = table.range(..=ptr).next_back()?;
    let end = ptr.checked_add(bytes)?;
    (end <= base.checked_add(size(v).max(1))?).then_some(v)
}

impl CudaPlugin {
    /// Opens every CUDA device: retains its primary context and sets its default memory
    /// pool's release threshold to `u64::MAX`, so freed device memory stays in the pool
    /// and is reused without syncs.
    ///
    /// Errors: no driver or no device (the one-line reason of
    /// [`super::probe`]), or a failing driver call (named).
    pub fn new(opts: CudaPluginOptions) -> Result<CudaPlugin, String> {
        let count = driver::init()?;
        let mut devices = Vec::new();
        for i in 0..count {
            let mut cu: sys::CUdevice = 0;
            // SAFETY: valid out-pointer, ordinal < count.
            check("cuDeviceGet", unsafe { sys::cuDeviceGet(&mut cu, i) })?;
            let mut ctx: sys::CUcontext = std::ptr::null_mut();
            // SAFETY: valid out-pointer and device.
            check("cuDevicePrimaryCtxRetain", unsafe {
                sys::cuDevicePrimaryCtxRetain(&mut ctx, cu)
            })?;
            let dev = Dev {
                cu,
                ctx,
                name: driver::device_name(cu)?,
                cc: driver::compute_capability(cu)?,
                builtins: OnceLock::new(),
                unified: driver::unified_addressing(cu)?,
                copy_batch: OnceLock::new(),
            };
            driver::bind(ctx)?;
            let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
            // SAFETY: valid out-pointer and device; `threshold` outlives the call.
            unsafe {
                check(
                    "cuDeviceGetDefaultMemPool",
                    sys::cuDeviceGetDefaultMemPool(&mut pool, cu),
                )?;
                let mut threshold: u64 = u64::MAX;
                check(
                    "cuMemPoolSetAttribute(RELEASE_THRESHOLD)",
                    sys::cuMemPoolSetAttribute(
                        pool,
                        sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                        &mut threshold as *mut u64 as *mut c_void,
                    ),
                )?;
            }
            // Experiment knob: `OFFLOAD_CUDA_POOL_DEPS=0` stops the pool from reusing
            // memory freed on another stream by inserting hidden cross-stream waits.
            if std::env::var("OFFLOAD_CUDA_POOL_DEPS").is_ok_and(|v| v == "0") {
                let mut off: i32 = 0;
                // SAFETY: valid pool; the attribute takes an `int`.
                check(
                    "cuMemPoolSetAttribute(REUSE_ALLOW_INTERNAL_DEPENDENCIES)",
                    unsafe {
                        sys::cuMemPoolSetAttribute(
                        pool,
                        sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES,
                        &mut off as *mut i32 as *mut c_void,
                    )
                    },
                )?;
            }
            devices.push(dev);
        }
        let dev_cache_limit = if std::env::var("OFFLOAD_CUDA_DEV_CACHE").is_ok_and(|v| v == "0") {
            0
        } else {
            opts.device_cache_bytes
        };
        let batch_limit =
            if opts.timing || std::env::var("OFFLOAD_CUDA_BATCH_COPIES").is_ok_and(|v| v == "0") {
                0
            } else {
                opts.batch_copy_max_bytes
            };
        Ok(CudaPlugin {
            opts,
            devices,
            streams: RwLock::new(Vec::new()),
            pools: Mutex::new(BTreeMap::new()),
            events: Mutex::new(Vec::new()),
            free_events: Mutex::new(Vec::new()),
            kernels: RwLock::new(Vec::new()),
            user_modules: Mutex::new(BTreeMap::new()),
            dev_live: RwLock::new(BTreeMap::new()),
            dev_cache: DevCache {
                bytes: (0..count).map(|_| AtomicU64::new(0)).collect(),
                ..DevCache::default()
            },
            dev_cache_limit,
            batch_limit,
            host_mem: RwLock::new(BTreeMap::new()),
            host_cache: Mutex::new(Vec::new()),
            timed: Mutex::new(Vec::new()),
            time_base: Mutex::new(BTreeMap::new()),
        })
    }

    /// Runs one stream call `f` with the stream's device and raw handle (its context made
    /// current): one lookup of the stream per call. With `timing`: on `Ok` advances the
    /// stream's `seq`, and for `timed` calls (copies and kernels) brackets `f`'s work by
    /// two timing events on the stream; if `f` fails, the start event is destroyed at once
    /// (nothing else of the call was enqueued).
    fn stream_call<R>(
        &self,
        call: PluginCall,
        stream: StreamHandle,
        timed: bool,
        f: impl FnOnce(u32, sys::CUstream) -> Result<R, PluginError>,
    ) -> Result<R, PluginError> {
        let (device, raw) = self.stream(call, stream)?;
        if !self.opts.timing {
            return f(device, raw);
        }
        let mark = if timed {
            self.ensure_time_base(device, raw).map_err(backend(call))?;
            Some(record_timing_event(raw).map_err(backend(call))?)
        } else {
            None
        };
        let r = f(device, raw);
        let streams = self.streams.read().unwrap_or_else(|p| p.into_inner());
        let st = streams.get(stream.0 as usize);
        match (&r, mark) {
            (Ok(_), Some(e0)) => {
                let seq = st.map_or(0, |s| s.seq.load(Ordering::Relaxed));
                match record_timing_event(raw) {
                    Ok(e1) => lock(&self.timed).push((stream, seq, e0, e1)),
                    Err(_) => destroy_event_quietly(e0),
                }
            }
            (Err(_), Some(e0)) => destroy_event_quietly(e0),
            _ => {}
        }
        if r.is_ok() {
            if let Some(s) = st {
                s.seq.fetch_add(1, Ordering::Relaxed);
            }
        }
        r
    }

    /// Records the device's clock origin once: an event on `raw`, synchronized, and the
    /// host instant right after (later by the synchronize's return latency, a few µs, so
    /// trace times are at most that much late).
    fn ensure_time_base(&self, device: u32, raw: sys::CUstream) -> Result<(), String> {
        let mut base = lock(&self.time_base);
        if base.contains_key(&device) {
            return Ok(());
        }
        let e = record_timing_event(raw)?;
        // SAFETY: a live event just recorded on a live stream of the current context.
        check("cuEventSynchronize", unsafe { sys::cuEventSynchronize(e) })?;
        base.insert(device, (e, Instant::now()));
        Ok(())
    }

    /// The timings of every op timed since the last call (waits for their end events).
    fn drain_timings_raw(&self) -> Vec<Timing> {
        let timed = std::mem::take(&mut *lock(&self.timed));
        let base = lock(&self.time_base);
        let streams = self.streams.read().unwrap_or_else(|p| p.into_inner());
        let mut out = Vec::with_capacity(timed.len());
        for (stream, seq, e0, e1) in timed {
            let device = streams.get(stream.0 as usize).map(|s| s.device);
            if let Some(&(b, t0)) = device.and_then(|d| base.get(&d)) {
                let _ = driver::bind(self.devices[device.unwrap_or(0) as usize].ctx);
                let (mut ms0, mut ms1) = (0f32, 0f32);
                // SAFETY: live timing events of this context; the end event is waited for
                // first, so both have completed.
                let ok = unsafe {
                    sys::cuEventSynchronize(e1) == sys::CUresult::CUDA_SUCCESS
                        && sys::cuEventElapsedTime(&mut ms0, b, e0) == sys::CUresult::CUDA_SUCCESS
                        && sys::cuEventElapsedTime(&mut ms1, b, e1) == sys::CUresult::CUDA_SUCCESS
                };
                if ok {
                    let at =
                        |ms: f32| t0 + std::time::Duration::from_secs_f64(ms.max(0.0) as f64 / 1e3);
                    out.push(Timing {
                        stream,
                        seq,
                        start: at(ms0),
                        end: at(ms1.max(ms0)),
                    });
                }
            }
            destroy_event_quietly(e0);
            destroy_event_quietly(e1);
        }
        out
    }

    /// Device blocks held by the per-stream cache (not live), and allocations served from
    /// the cache and by the driver so far: `(cached blocks, hits, misses)`.
    pub fn device_cache_stats(&self) -> (usize, u64, u64) {
        let blocks = read(&self.streams)
            .iter()
            .map(|st| lock(&st.cache).values().map(Vec::len).sum::<usize>())
            .sum();
        let c = &self.dev_cache;
        (
            blocks,
            c.hits.load(Ordering::Relaxed),
            c.misses.load(Ordering::Relaxed),
        )
    }

    /// Releases every cached device block with a stream-ordered free on the stream that
    /// cached it. Errors: the first failing `cuMemFreeAsync` (the remaining blocks are
    /// still released).
    fn flush_dev_cache(&self) -> Result<(), String> {
        let streams = read(&self.streams);
        let mut first = Ok(());
        for (i, st) in streams.iter().enumerate() {
            let lists = std::mem::take(&mut *lock(&st.cache));
            let bytes: u64 = lists.iter().map(|(c, v)| c * v.len() as u64).sum();
            if let Some(b) = self.dev_cache.bytes.get(st.device as usize) {
                let _ = b.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |x| {
                    Some(x.saturating_sub(bytes))
                });
            }
            if let Err(e) = driver::bind(self.devices[st.device as usize].ctx) {
                first = first.and(Err(e));
                continue;
            }
            // Held copies may use these blocks: they go first, in stream order.
            first = first.and(self.issue_held(StreamHandle(i as u32), st));
            for p in lists.into_values().flatten() {
                // SAFETY: a block of ours that no later op uses (it was freed by the
                // executor on `st`, and cached blocks are handed out only by `alloc`).
                let r = check("cuMemFreeAsync", unsafe { sys::cuMemFreeAsync(p, st.raw) });
                first = first.and(r);
            }
        }
        first
    }

    /// Name and compute capability of each device, e.g. `NVIDIA H200 (sm_90)`.
    pub fn device_names(&self) -> Vec<String> {
        self.devices
            .iter()
            .map(|d| format!("{} (sm_{}{})", d.name, d.cc.0, d.cc.1))
            .collect()
    }

    /// Number of live device allocations (for leak checks).
    pub fn live_device_allocs(&self) -> usize {
        read(&self.dev_live).len()
    }

    fn dev(&self, call: PluginCall, device: u32) -> Result<&Dev, PluginError> {
        self.devices
            .get(device as usize)
            .ok_or(PluginError::NoDevice {
                call,
                device,
                count: self.devices.len() as u32,
            })
    }

    /// The stream's device index and raw handle, with its context made current.
    fn stream(
        &self,
        call: PluginCall,
        s: StreamHandle,
    ) -> Result<(u32, sys::CUstream), PluginError> {
        let (device, raw) = {
            let streams = self.streams.read().unwrap_or_else(|p| p.into_inner());
            let st = streams
                .get(s.0 as usize)
                .ok_or_else(|| PluginError::InvalidHandle {
                    call,
                    what: format!("{s}"),
                })?;
            (st.device, st.raw)
        };
        driver::bind(self.devices[device as usize].ctx).map_err(backend(call))?;
        Ok((device, raw))
    }

    fn dev_range(
        &self,
        call: PluginCall,
        device: u32,
        ptr: u64,
        bytes: u64,
    ) -> Result<(), PluginError> {
        match inside(&read(&self.dev_live), |(_, b)| b, ptr, bytes) {
            Some((d, _)) if d == device => Ok(()),
            _ => Err(PluginError::InvalidPointer {
                call,
                space: "device",
                ptr,
                bytes,
            }),
        }
    }

    fn host_range(&self, call: PluginCall, ptr: u64, bytes: u64) -> Result<(), PluginError> {
        inside(&read(&self.host_mem), |b| b, ptr, bytes)
            .map(|_| ())
            .ok_or(PluginError::InvalidPointer {
                call,
                space: "host",
                ptr,
                bytes,
            })
    }

    fn builtins(&self, device: u32) -> Result<sys::CUmodule, String> {
        let d = &self.devices[device as usize];
        d.builtins
            .get_or_init(|| {
                let cubin = driver::builtins_cubin(d.cc.0, d.cc.1)?;
                load_module(d.ctx, &cubin)
            })
            .clone()
    }

    fn user_module(&self, device: u32, path: &Path) -> Result<sys::CUmodule, String> {
        let mut mods = lock(&self.user_modules);
        if let Some(m) = mods.get(&(device, path.to_path_buf())) {
            return Ok(*m);
        }
        let d = &self.devices[device as usize];
        let data =
            std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let image = if path.extension().is_some_and(|e| e == "ptx") {
            let mut v = data;
            v.push(0);
            v
        } else {
            let src = String::from_utf8(data)
                .map_err(|_| format!("{} is not UTF-8 text", path.display()))?;
            let name = path.display().to_string();
            super::nvrtc::compile_cubin(&src, &name, d.cc.0, d.cc.1, driver::NVRTC_OPTIONS)?
        };
        let m = load_module(d.ctx, &image)?;
        mods.insert((device, path.to_path_buf()), m);
        Ok(m)
    }
}

/// Small-copy batches ([`batch`]).
impl CudaPlugin {
    /// Whether a copy of `bytes` bytes on `device` is held for a batch.
    fn batchable(&self, device: u32, bytes: u64) -> bool {
        batch::holds(self.batch_limit, bytes)
            && self.devices[device as usize].unified
            && self.copy_kernel(device).is_ok()
    }

    /// The built-in copy kernel of `device` (compiles the built-ins on first use).
    fn copy_kernel(&self, device: u32) -> Result<sys::CUfunction, String> {
        self.devices[device as usize]
            .copy_batch
            .get_or_init(|| {
                self.builtins(device)
                    .and_then(|m| get_function(m, "offload_copy_batch"))
            })
            .clone()
    }

    /// Launches the copy kernel for the copies held on `stream` (`raw`, its context
    /// current). If the launch fails, the copies go to the copy engines one by one, in
    /// order, so none is lost; if that fails too, the error names the launch's and the
    /// copy's CUDA errors, the stream and every held copy (they were held since earlier
    /// Submit/Retrieve calls, which returned `Ok`: the executor reports the error at the op
    /// whose call issued the batch).
    fn issue_copies(
        &self,
        (stream, device, raw): (StreamHandle, u32, sys::CUstream),
        (copies, ordered): (Vec<HeldCopy>, bool),
    ) -> Result<(), String> {
        let launched = self.launch_copies(device, raw, &copies, ordered);
        let Err(launch_error) = launched else {
            return Ok(());
        };
        tracing::warn!(target: "offload_sched::plugin", error = %launch_error, "copy batch launch failed; copy engines instead");
        for c in &copies {
            // SAFETY: as for the copy-engine calls of `submit_raw` / `retrieve_raw`: both
            // ranges were checked live when the copy was held and stay valid in stream order.
            let r = unsafe {
                if c.to_device {
                    sys::cuMemcpyHtoDAsync_v2(
                        c.dst,
                        c.src as usize as *const c_void,
                        c.bytes as usize,
                        raw,
                    )
                } else {
                    sys::cuMemcpyDtoHAsync_v2(
                        c.dst as usize as *mut c_void,
                        c.src,
                        c.bytes as usize,
                        raw,
                    )
                }
            };
            if let Err(e) = check(
                if c.to_device {
                    "cuMemcpyHtoDAsync"
                } else {
                    "cuMemcpyDtoHAsync"
                },
                r,
            ) {
                let list: Vec<String> = copies.iter().map(HeldCopy::describe).collect();
                return Err(format!(
                    "{launch_error}; then {e}; {} copies held on {stream} since earlier Submit/Retrieve calls: {}",
                    copies.len(),
                    list.join(", ")
                ));
            }
        }
        Ok(())
    }

    /// One launch of the copy kernel for `copies` on `raw` (its context current).
    fn launch_copies(
        &self,
        device: u32,
        raw: sys::CUstream,
        copies: &[HeldCopy],
        ordered: bool,
    ) -> Result<(), String> {
        let func = self.copy_kernel(device)?;
        let mut l = batch::launch_of(copies, ordered);
        let mut args = [&mut l.params as *mut batch::Params as *mut c_void];
        // SAFETY: one parameter, a `CopyBatch` by value, laid out as `batch::Params`
        // (repr(C), same fields); every address was checked to lie in a live allocation
        // when its copy was held, and stays valid in stream order (batch.rs, "Ordering");
        // `l.params` outlives the call (the driver copies it).
        let r = unsafe {
            sys::cuLaunchKernel(
                func,
                l.grid.0,
                l.grid.1,
                1,
                l.threads,
                1,
                1,
                0,
                raw,
                args.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        check(
            &format!(
                "cuLaunchKernel(offload_copy_batch, {} batched copies)",
                copies.len()
            ),
            r,
        )
    }

    /// Issues the copies stream `s` (`st`) holds, if any (its context must be current).
    /// Under the stream's batch lock, so that another thread's flush of the same stream
    /// (`flush_dev_cache`, `free_host`) cannot reorder them.
    fn issue_held(&self, s: StreamHandle, st: &Stream) -> Result<(), String> {
        if self.batch_limit == 0 {
            return Ok(());
        }
        let mut b = lock(&st.batch);
        if b.is_empty() {
            return Ok(());
        }
        self.issue_copies((s, st.device, st.raw), b.take())
    }

    /// Issues every stream's held copies that touch `[lo, lo + len)` (before the host
    /// frees that memory). Errors: the first failing issue (the others are still issued).
    fn flush_touching(&self, lo: u64, len: u64) -> Result<(), String> {
        if self.batch_limit == 0 {
            return Ok(());
        }
        let streams = read(&self.streams);
        let mut first = Ok(());
        for (i, st) in streams.iter().enumerate() {
            if !lock(&st.batch).touches(lo, len) {
                continue;
            }
            let r = driver::bind(self.devices[st.device as usize].ctx)
                .and_then(|()| self.issue_held(StreamHandle(i as u32), st));
            first = first.and(r);
        }
        first
    }

    /// Issues the copies `stream` holds before a driver call on it.
    fn flush(&self, call: PluginCall, stream: StreamHandle) -> Result<(), PluginError> {
        if self.batch_limit == 0 {
            return Ok(());
        }
        let streams = read(&self.streams);
        match streams.get(stream.0 as usize) {
            Some(st) => self.issue_held(stream, st).map_err(backend(call)),
            None => Ok(()),
        }
    }

    /// A copy on `stream`: held for the stream's batch if small enough (the batch issued
    /// first when it is full), else the held copies and then `direct` (the copy-engine
    /// call).
    fn copy(
        &self,
        call: PluginCall,
        stream: StreamHandle,
        (device, raw): (u32, sys::CUstream),
        c: HeldCopy,
        direct: impl FnOnce() -> Result<(), String>,
    ) -> Result<(), PluginError> {
        if self.batchable(device, c.bytes) {
            let streams = read(&self.streams);
            if let Some(st) = streams.get(stream.0 as usize) {
                let mut b = lock(&st.batch);
                if b.is_full() {
                    self.issue_copies((stream, device, raw), b.take())
                        .map_err(backend(call))?;
                }
                b.push(c);
                return Ok(());
            }
        }
        self.flush(call, stream)?;
        direct().map_err(backend(call))
    }
}

/// A new event with timing, recorded on `raw` (whose context is current).
fn record_timing_event(raw: sys::CUstream) -> Result<sys::CUevent, String> {
    let mut e: sys::CUevent = std::ptr::null_mut();
    // SAFETY: valid out-pointer; flags 0 = default (timing enabled); live stream of the
    // current context.
    unsafe {
        check("cuEventCreate", sys::cuEventCreate(&mut e, 0))?;
        if let Err(err) = check("cuEventRecord", sys::cuEventRecord(e, raw)) {
            sys::cuEventDestroy_v2(e);
            return Err(err);
        }
    }
    Ok(e)
}

/// Destroys an event of ours, ignoring errors (cleanup of timing events).
fn destroy_event_quietly(e: sys::CUevent) {
    // SAFETY: an event of ours, destroyed once; a recorded event may be destroyed while
    // pending (the driver releases it when it completes).
    unsafe {
        sys::cuEventDestroy_v2(e);
    }
}

fn load_module(ctx: sys::CUcontext, image: &[u8]) -> Result<sys::CUmodule, String> {
    driver::bind(ctx)?;
    let mut m: sys::CUmodule = std::ptr::null_mut();
    // SAFETY: `image` is a CUBIN or NUL-terminated PTX, alive for the call.
    check("cuModuleLoadData", unsafe {
        sys::cuModuleLoadData(&mut m, image.as_ptr() as *const c_void)
    })?;
    Ok(m)
}

fn get_function(m: sys::CUmodule, name: &str) -> Result<sys::CUfunction, String> {
    let c = CString::new(name).map_err(|_| format!("bad symbol name {name:?}"))?;
    let mut f: sys::CUfunction = std::ptr::null_mut();
    // SAFETY: live module, NUL-terminated name, valid out-pointer.
    check(&format!("cuModuleGetFunction(\"{name}\")"), unsafe {
        sys::cuModuleGetFunction(&mut f, m, c.as_ptr())
    })?;
    Ok(f)
}

/// Checks launch arguments against the declared signature (the host plugin's rule: count,
/// buffer vs scalar, element types; generic `T` is the kernel's type).
fn check_signature(k: &Kernel, args: &[LaunchArg]) -> Result<(), String> {
    if args.len() != k.sig.params.len() {
        return Err(format!(
            "{} arguments given, the signature declares {}",
            args.len(),
            k.sig.params.len()
        ));
    }
    for (p, a) in k.sig.params.iter().zip(args) {
        match (&p.kind, a) {
            (ParamKind::Buffer { ty, .. }, LaunchArg::Buffer { ty: got, .. }) => {
                if ty.unwrap_or(k.ty) != *got {
                    return Err(format!(
                        "parameter \"{}\" is declared {}, given a {got} buffer",
                        p.name, p.kind
                    ));
                }
            }
            (ParamKind::Scalar { ty }, LaunchArg::Scalar(s)) => {
                let want = ty.unwrap_or(k.ty);
                if want != s.ty() {
                    return Err(format!(
                        "parameter \"{}\" is declared {want}, given a {} scalar",
                        p.name,
                        s.ty()
                    ));
                }
            }
            (ParamKind::Buffer { .. }, LaunchArg::Scalar(s)) => {
                return Err(format!(
                    "parameter \"{}\" is declared {}, given a {} scalar",
                    p.name,
                    p.kind,
                    s.ty()
                ))
            }
            (ParamKind::Scalar { .. }, LaunchArg::Buffer { ty, .. }) => {
                return Err(format!(
                    "parameter \"{}\" is declared {}, given a {ty} buffer",
                    p.name, p.kind
                ))
            }
        }
    }
    Ok(())
}

impl Plugin for CudaPlugin {
    fn name(&self) -> String {
        "cuda".to_string()
    }

    fn device_count(&self) -> u32 {
        self.devices.len() as u32
    }

    fn create_streams(&self, device: u32, count: u32) -> Result<Vec<StreamHandle>, PluginError> {
        let call = PluginCall::CreateStreams;
        let d = self.dev(call, device)?;
        let mut pools = lock(&self.pools);
        let pool = pools.entry(device).or_default();
        while pool.len() < count as usize {
            driver::bind(d.ctx).map_err(backend(call))?;
            let mut raw: sys::CUstream = std::ptr::null_mut();
            // SAFETY: valid out-pointer; the device's context is current.
            check("cuStreamCreate", unsafe {
                sys::cuStreamCreate(&mut raw, CU_STREAM_NON_BLOCKING)
            })
            .map_err(backend(call))?;
            let mut streams = self.streams.write().unwrap_or_else(|p| p.into_inner());
            pool.push(StreamHandle(streams.len() as u32));
            streams.push(Stream {
                device,
                raw,
                seq: AtomicU64::new(0),
                cache: Mutex::new(BTreeMap::new()),
                batch: Mutex::new(Batch::default()),
            });
        }
        Ok(pool[..count as usize].to_vec())
    }

    fn alloc_host(&self, bytes: u64) -> Result<HostPtr, PluginError> {
        let call = PluginCall::AllocHost;
        let reuse = {
            let mut cache = lock(&self.host_cache);
            // The smallest cached block that fits and is at most twice the size.
            let best = cache
                .iter()
                .enumerate()
                .filter(|(_, (_, cap))| *cap >= bytes && *cap <= bytes.max(1).saturating_mul(2))
                .min_by_key(|(_, (_, cap))| *cap)
                .map(|(i, _)| i);
            best.map(|i| cache.swap_remove(i))
        };
        let (ptr, cap) = match reuse {
            Some(b) => b,
            None => {
                driver::bind(self.devices[0].ctx).map_err(backend(call))?;
                let mut p: *mut c_void = std::ptr::null_mut();
                // SAFETY: valid out-pointer; a context is current. PORTABLE: pinned for
                // every context; not write-combined, since the host reads D2H results.
                let r = unsafe {
                    sys::cuMemHostAlloc(
                        &mut p,
                        bytes.max(1) as usize,
                        sys::CU_MEMHOSTALLOC_PORTABLE,
                    )
                };
                if r == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
                    return Err(PluginError::OutOfMemory { call, bytes });
                }
                check("cuMemHostAlloc", r).map_err(backend(call))?;
                (p as u64, bytes.max(1))
            }
        };
        // SAFETY: `ptr` is a pinned block of `cap >= bytes` bytes no stream uses (fresh,
        // or freed under contract rule 3).
        unsafe { std::ptr::write_bytes(ptr as usize as *mut u8, 0, bytes as usize) };
        // Record the capacity so a later reuse knows it; ranges are checked against it.
        write(&self.host_mem).insert(ptr, cap);
        Ok(HostPtr(ptr))
    }

    fn free_host(&self, ptr: HostPtr) -> Result<(), PluginError> {
        let call = PluginCall::FreeHost;
        // Copies held for a batch that use this block are issued before it can be reused
        // or unpinned (normally none: the executor frees host memory after its waits).
        if let Some(&cap) = read(&self.host_mem).get(&ptr.0) {
            self.flush_touching(ptr.0, cap).map_err(backend(call))?;
        }
        let cap = write(&self.host_mem)
            .remove(&ptr.0)
            .ok_or(PluginError::InvalidPointer {
                call,
                space: "host",
                ptr: ptr.0,
                bytes: 0,
            })?;
        let mut cache = lock(&self.host_cache);
        let cached: u64 = cache.iter().map(|(_, c)| *c).sum();
        if cached + cap <= self.opts.host_cache_bytes {
            cache.push((ptr.0, cap));
            return Ok(());
        }
        drop(cache);
        // SAFETY: a live pinned block of ours, unused by any stream (caller, rule 3).
        check("cuMemFreeHost", unsafe {
            sys::cuMemFreeHost(ptr.0 as usize as *mut c_void)
        })
        .map_err(backend(call))
    }

    fn load_kernel(
        &self,
        device: u32,
        sig: &KernelSig,
        ty: ElemType,
    ) -> Result<KernelHandle, PluginError> {
        let call = PluginCall::LoadKernel;
        self.dev(call, device)?;
        let mut kernels = write(&self.kernels);
        if let Some(i) = kernels
            .iter()
            .position(|k| k.device == device && k.ty == ty && k.sig == *sig)
        {
            return Ok(KernelHandle(i as u32));
        }
        let kerr = |message: String| PluginError::KernelLoad {
            call,
            kernel: sig.name.clone(),
            message,
        };
        let func = match &sig.source {
            KernelSource::Builtin => {
                if crate::model::builtin_kernel(&sig.name).is_none() {
                    return Err(kerr("no such built-in kernel".into()));
                }
                let m = self.builtins(device).map_err(&kerr)?;
                get_function(m, &format!("{}_{}", sig.name, ty.name())).map_err(&kerr)?
            }
            KernelSource::User { cuda, symbol, .. } => {
                let file = cuda
                    .as_ref()
                    .ok_or_else(|| kerr("declares no CUDA source (`cuda = \"file.cu\"`)".into()))?;
                let path = match &self.opts.kernel_dir {
                    Some(d) if Path::new(file).is_relative() => d.join(file),
                    _ => PathBuf::from(file),
                };
                let m = self.user_module(device, &path).map_err(&kerr)?;
                // A generic user kernel may export one symbol per type (`name_f32`).
                get_function(m, &format!("{symbol}_{}", ty.name()))
                    .or_else(|_| get_function(m, symbol))
                    .map_err(&kerr)?
            }
        };
        kernels.push(Arc::new(Kernel {
            device,
            sig: sig.clone(),
            ty,
            func,
        }));
        Ok(KernelHandle(kernels.len() as u32 - 1))
    }

    fn create_event(&self, device: u32) -> Result<EventHandle, PluginError> {
        let call = PluginCall::CreateEvent;
        let d = self.dev(call, device)?;
        let pooled = {
            let mut free = lock(&self.free_events);
            free.iter()
                .position(|e| e.device == device)
                .map(|i| free.swap_remove(i))
        };
        let ev = match pooled {
            Some(e) => e,
            None => {
                driver::bind(d.ctx).map_err(backend(call))?;
                let mut raw: sys::CUevent = std::ptr::null_mut();
                // SAFETY: valid out-pointer; the device's context is current.
                check("cuEventCreate", unsafe {
                    sys::cuEventCreate(&mut raw, CU_EVENT_DISABLE_TIMING)
                })
                .map_err(backend(call))?;
                Event { device, raw }
            }
        };
        let mut events = lock(&self.events);
        if let Some(i) = events.iter().position(|e| e.is_none()) {
            events[i] = Some(ev);
            return Ok(EventHandle(i as u32));
        }
        events.push(Some(ev));
        Ok(EventHandle(events.len() as u32 - 1))
    }

    fn destroy_event(&self, event: EventHandle) -> Result<(), PluginError> {
        let ev = lock(&self.events)
            .get_mut(event.0 as usize)
            .and_then(|e| e.take())
            .ok_or_else(|| PluginError::InvalidHandle {
                call: PluginCall::DestroyEvent,
                what: format!("{event}"),
            })?;
        // Pooled: waits already issued keep their captured state (cuStreamWaitEvent
        // semantics), so the event can be re-recorded by a later user.
        lock(&self.free_events).push(ev);
        Ok(())
    }

    fn synchronize(&self, stream: StreamHandle) -> Result<(), PluginError> {
        let call = PluginCall::Synchronize;
        let (_, raw) = self.stream(call, stream)?;
        // Held copies first; the stream is drained even if issuing them failed.
        let flushed = self.flush(call, stream);
        // SAFETY: live stream; its context is current.
        check("cuStreamSynchronize", unsafe {
            sys::cuStreamSynchronize(raw)
        })
        .map_err(|message| PluginError::Async {
            call,
            stream,
            message,
        })?;
        flushed
    }

    fn alloc(&self, stream: StreamHandle, bytes: u64) -> Result<DevicePtr, PluginError> {
        self.stream_call(PluginCall::Alloc, stream, false, |d, raw| {
            self.alloc_raw(stream, d, raw, bytes)
        })
    }

    fn fill_zero(
        &self,
        stream: StreamHandle,
        ptr: DevicePtr,
        bytes: u64,
    ) -> Result<(), PluginError> {
        let call = PluginCall::FillZero;
        self.stream_call(call, stream, false, |d, raw| {
            self.dev_range(call, d, ptr.0, bytes)?;
            // Copies held for batching go first: one may still read a block the cache
            // handed out again (stream order, rule 1).
            self.flush(call, stream)?;
            // SAFETY: the range lies inside a live allocation of this stream's device
            // (checked); the stream's context is current.
            check("cuMemsetD8Async", unsafe {
                sys::cuMemsetD8Async(ptr.0, 0, bytes as usize, raw)
            })
            .map_err(backend(call))
        })
    }

    fn free(&self, stream: StreamHandle, ptr: DevicePtr) -> Result<(), PluginError> {
        self.stream_call(PluginCall::Free, stream, false, |d, raw| {
            self.free_raw(stream, d, raw, ptr)
        })
    }

    fn submit(
        &self,
        stream: StreamHandle,
        dst: DevicePtr,
        src: HostPtr,
        bytes: u64,
    ) -> Result<(), PluginError> {
        self.stream_call(PluginCall::Submit, stream, true, |d, raw| {
            self.submit_raw(stream, d, raw, dst, src, bytes)
        })
    }

    fn retrieve(
        &self,
        stream: StreamHandle,
        dst: HostPtr,
        src: DevicePtr,
        bytes: u64,
    ) -> Result<(), PluginError> {
        self.stream_call(PluginCall::Retrieve, stream, true, |d, raw| {
            self.retrieve_raw(stream, d, raw, dst, src, bytes)
        })
    }

    fn launch(
        &self,
        stream: StreamHandle,
        kernel: KernelHandle,
        args: &[LaunchArg],
        shape: LaunchShape,
    ) -> Result<(), PluginError> {
        self.stream_call(PluginCall::Launch, stream, true, |d, raw| {
            self.launch_raw(stream, d, raw, kernel, args, shape)
        })
    }

    fn record_event(&self, stream: StreamHandle, event: EventHandle) -> Result<(), PluginError> {
        self.stream_call(PluginCall::RecordEvent, stream, false, |d, raw| {
            self.flush(PluginCall::RecordEvent, stream)?;
            self.record_event_raw(d, raw, event)
        })
    }

    fn wait_event(&self, stream: StreamHandle, event: EventHandle) -> Result<(), PluginError> {
        self.stream_call(PluginCall::WaitEvent, stream, false, |d, raw| {
            self.flush(PluginCall::WaitEvent, stream)?;
            self.wait_event_raw(d, raw, event)
        })
    }

    fn drain_timings(&self) -> Vec<Timing> {
        self.drain_timings_raw()
    }

    /// Copies and launches cost µs of host time each in the driver; calls on different
    /// streams from different threads overlap.
    fn parallel_issue(&self) -> bool {
        true
    }

    fn next_seq(&self, stream: StreamHandle) -> u64 {
        let streams = self.streams.read().unwrap_or_else(|p| p.into_inner());
        streams
            .get(stream.0 as usize)
            .map_or(0, |s| s.seq.load(Ordering::Relaxed))
    }
}

/// The stream calls themselves; [`Plugin`] wraps each in [`CudaPlugin::stream_call`],
/// which looked the stream up (`device`, `raw`) and made its context current.
impl CudaPlugin {
    fn alloc_raw(
        &self,
        stream: StreamHandle,
        device: u32,
        raw: sys::CUstream,
        bytes: u64,
    ) -> Result<DevicePtr, PluginError> {
        let call = PluginCall::Alloc;
        let limit = self.dev_cache_limit;
        let class = size_class(bytes);
        if limit > 0 {
            let hit = read(&self.streams)
                .get(stream.0 as usize)
                .and_then(|st| lock(&st.cache).get_mut(&class).and_then(Vec::pop));
            let c = &self.dev_cache;
            if let Some(p) = hit {
                c.bytes[device as usize].fetch_sub(class, Ordering::Relaxed);
                c.hits.fetch_add(1, Ordering::Relaxed);
                write(&self.dev_live).insert(p, (device, bytes));
                return Ok(DevicePtr(p));
            }
            c.misses.fetch_add(1, Ordering::Relaxed);
        }
        // Cached blocks have their class's capacity; without the cache, what was asked.
        let cap = if limit > 0 { class } else { bytes.max(1) };
        let mut p: sys::CUdeviceptr = 0;
        // SAFETY: valid out-pointer and stream; the stream's context is current.
        let mut r = unsafe { sys::cuMemAllocAsync(&mut p, cap as usize, raw) };
        if r == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY && limit > 0 {
            // Give the cached blocks back to the pool and try once more.
            self.flush_dev_cache().map_err(backend(call))?;
            driver::bind(self.devices[device as usize].ctx).map_err(backend(call))?;
            // SAFETY: as above.
            r = unsafe { sys::cuMemAllocAsync(&mut p, cap as usize, raw) };
        }
        if r == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            return Err(PluginError::OutOfMemory { call, bytes });
        }
        check("cuMemAllocAsync", r).map_err(backend(call))?;
        write(&self.dev_live).insert(p, (device, bytes));
        Ok(DevicePtr(p))
    }

    fn free_raw(
        &self,
        stream: StreamHandle,
        device: u32,
        raw: sys::CUstream,
        ptr: DevicePtr,
    ) -> Result<(), PluginError> {
        let call = PluginCall::Free;
        let found = read(&self.dev_live).get(&ptr.0).copied();
        let bytes = match found {
            Some((d, b)) if d == device => b,
            _ => {
                return Err(PluginError::InvalidPointer {
                    call,
                    space: "device",
                    ptr: ptr.0,
                    bytes: 0,
                })
            }
        };
        let limit = self.dev_cache_limit;
        if limit > 0 {
            let class = size_class(bytes);
            let cached = &self.dev_cache.bytes[device as usize];
            let reserved = cached
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
                    (c.saturating_add(class) <= limit).then_some(c + class)
                })
                .is_ok();
            if reserved {
                write(&self.dev_live).remove(&ptr.0);
                if let Some(st) = read(&self.streams).get(stream.0 as usize) {
                    lock(&st.cache).entry(class).or_default().push(ptr.0);
                    return Ok(());
                }
                // No such stream (cannot happen: the call looked it up): free below.
                cached.fetch_sub(class, Ordering::Relaxed);
                write(&self.dev_live).insert(ptr.0, (device, bytes));
            }
        }
        // Held copies may use the block: they go first, in stream order.
        self.flush(call, stream)?;
        // Out of the live table before the driver can hand the address out again (to an
        // alloc on another thread); back in if the free fails.
        write(&self.dev_live).remove(&ptr.0);
        // SAFETY: `ptr` is a live allocation of this device (checked); stream-ordered free.
        let r = check("cuMemFreeAsync", unsafe { sys::cuMemFreeAsync(ptr.0, raw) });
        if let Err(e) = r {
            write(&self.dev_live).insert(ptr.0, (device, bytes));
            return Err(backend(call)(e));
        }
        Ok(())
    }

    fn submit_raw(
        &self,
        stream: StreamHandle,
        device: u32,
        raw: sys::CUstream,
        dst: DevicePtr,
        src: HostPtr,
        bytes: u64,
    ) -> Result<(), PluginError> {
        let call = PluginCall::Submit;
        self.dev_range(call, device, dst.0, bytes)?;
        self.host_range(call, src.0, bytes)?;
        let c = HeldCopy {
            dst: dst.0,
            src: src.0,
            bytes,
            to_device: true,
        };
        self.copy(call, stream, (device, raw), c, || {
            // SAFETY: both ranges lie inside live allocations (checked); the host keeps
            // the source unchanged until a synchronize (rule 3).
            check("cuMemcpyHtoDAsync", unsafe {
                sys::cuMemcpyHtoDAsync_v2(
                    dst.0,
                    src.0 as usize as *const c_void,
                    bytes as usize,
                    raw,
                )
            })
        })
    }

    fn retrieve_raw(
        &self,
        stream: StreamHandle,
        device: u32,
        raw: sys::CUstream,
        dst: HostPtr,
        src: DevicePtr,
        bytes: u64,
    ) -> Result<(), PluginError> {
        let call = PluginCall::Retrieve;
        self.dev_range(call, device, src.0, bytes)?;
        self.host_range(call, dst.0, bytes)?;
        let c = HeldCopy {
            dst: dst.0,
            src: src.0,
            bytes,
            to_device: false,
        };
        self.copy(call, stream, (device, raw), c, || {
            // SAFETY: both ranges lie inside live allocations (checked); the host does not
            // touch the destination until a synchronize (rule 3).
            check("cuMemcpyDtoHAsync", unsafe {
                sys::cuMemcpyDtoHAsync_v2(dst.0 as usize as *mut c_void, src.0, bytes as usize, raw)
            })
        })
    }

    fn launch_raw(
        &self,
        stream: StreamHandle,
        device: u32,
        raw: sys::CUstream,
        kernel: KernelHandle,
        args: &[LaunchArg],
        shape: LaunchShape,
    ) -> Result<(), PluginError> {
        let call = PluginCall::Launch;
        // Checked under the table lock; only the function handle leaves it.
        let func = {
            let kernels = read(&self.kernels);
            let k = kernels
                .get(kernel.0 as usize)
                .ok_or_else(|| PluginError::InvalidHandle {
                    call,
                    what: format!("kernel {}", kernel.0),
                })?;
            if k.device != device {
                return Err(PluginError::InvalidHandle {
                    call,
                    what: format!(
                        "kernel \"{}\" (loaded on device {}, launched on device {device})",
                        k.sig.name, k.device
                    ),
                });
            }
            check_signature(k, args).map_err(|message| PluginError::Signature {
                call,
                kernel: k.sig.name.clone(),
                message,
            })?;
            k.func
        };
        // One 8-byte slot per C argument, the value in its low bytes (little-endian); on
        // the stack for up to `INLINE` slots (every built-in), else on the heap.
        const INLINE: usize = 16;
        let n = args.len() * 2;
        let mut slots_inline = [0u64; INLINE];
        let mut slots_heap = Vec::new();
        let slots: &mut [u64] = if n <= INLINE {
            &mut slots_inline
        } else {
            slots_heap.resize(n, 0u64);
            &mut slots_heap
        };
        let mut used = 0;
        {
            let mem = read(&self.dev_live);
            for a in args {
                match *a {
                    LaunchArg::Buffer {
                        ptr,
                        offset,
                        len,
                        ty,
                        ..
                    } => {
                        let addr = ptr.0.wrapping_add(offset);
                        let bytes = len.saturating_mul(ty.size_bytes());
                        match inside(&mem, |(_, b)| b, addr, bytes) {
                            Some((d, _)) if d == device => {}
                            // A zero-length argument without storage (`KernelArg::Empty`).
                            _ if addr == 0 && bytes == 0 => {}
                            _ => {
                                return Err(PluginError::InvalidPointer {
                                    call,
                                    space: "device",
                                    ptr: addr,
                                    bytes,
                                })
                            }
                        }
                        slots[used] = addr;
                        slots[used + 1] = len.min(i64::MAX as u64);
                        used += 2;
                    }
                    LaunchArg::Scalar(s) => {
                        slots[used] = match s {
                            Scalar::F32(v) => v.to_bits() as u64,
                            Scalar::F64(v) => v.to_bits(),
                            Scalar::I32(v) => v as u32 as u64,
                            Scalar::I64(v) => v as u64,
                            Scalar::U8(v) => v as u64,
                        };
                        used += 1;
                    }
                }
            }
        }
        let mut params_inline = [std::ptr::null_mut::<c_void>(); INLINE];
        let mut params_heap = Vec::new();
        let params: &mut [*mut c_void] = if used <= INLINE {
            &mut params_inline[..used]
        } else {
            params_heap.resize(used, std::ptr::null_mut());
            &mut params_heap
        };
        for (p, s) in params.iter_mut().zip(slots.iter_mut()) {
            *p = s as *mut u64 as *mut c_void;
        }
        let threads = shape.threads.clamp(1, 1024);
        let teams = shape.teams.clamp(1, i32::MAX as u32);
        self.flush(call, stream)?;
        // SAFETY: `params` points at one slot per C parameter of the kernel, in order, each
        // holding a value of the parameter's type in its low bytes (the signature was
        // checked, and built-ins have exactly the host ABI); buffer addresses are inside
        // live allocations of this device; the slots outlive the call (the driver copies
        // them before returning).
        check("cuLaunchKernel", unsafe {
            sys::cuLaunchKernel(
                func,
                teams,
                1,
                1,
                threads,
                1,
                1,
                0,
                raw,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        })
        .map_err(backend(call))
    }

    fn record_event_raw(
        &self,
        device: u32,
        raw: sys::CUstream,
        event: EventHandle,
    ) -> Result<(), PluginError> {
        let call = PluginCall::RecordEvent;
        let ev = self.event(call, Some(device), event)?;
        // SAFETY: live event and stream of the same context.
        check("cuEventRecord", unsafe { sys::cuEventRecord(ev, raw) }).map_err(backend(call))
    }

    fn wait_event_raw(
        &self,
        _device: u32,
        raw: sys::CUstream,
        event: EventHandle,
    ) -> Result<(), PluginError> {
        let call = PluginCall::WaitEvent;
        // An event of another device is allowed here (cuStreamWaitEvent: "hEvent may be
        // from a different context or device than hStream").
        let ev = self.event(call, None, event)?;
        // SAFETY: live event and stream; the event may belong to another context.
        check("cuStreamWaitEvent", unsafe {
            sys::cuStreamWaitEvent(raw, ev, 0)
        })
        .map_err(backend(call))
    }
}

impl CudaPlugin {
    fn event(
        &self,
        call: PluginCall,
        device: Option<u32>,
        e: EventHandle,
    ) -> Result<sys::CUevent, PluginError> {
        let events = lock(&self.events);
        let ev = events
            .get(e.0 as usize)
            .and_then(|e| e.as_ref())
            .ok_or_else(|| PluginError::InvalidHandle {
                call,
                what: format!("{e}"),
            })?;
        match device {
            Some(device) if ev.device != device => Err(PluginError::InvalidHandle {
                call,
                what: format!("{e} (of device {}, used on device {device})", ev.device),
            }),
            _ => Ok(ev.raw),
        }
    }
}

impl Drop for CudaPlugin {
    fn drop(&mut self) {
        // Errors here cannot be returned; they are logged.
        let log = |r: Result<(), String>| {
            if let Err(e) = r {
                tracing::debug!(target: "offload_sched::plugin", error = %e, "cuda teardown");
            }
        };
        let streams = std::mem::take(self.streams.get_mut().unwrap_or_else(|p| p.into_inner()));
        for (i, s) in streams.iter().enumerate() {
            log(driver::bind(self.devices[s.device as usize].ctx));
            log(self.issue_held(StreamHandle(i as u32), s));
            // SAFETY: a live stream of ours.
            log(check("cuStreamSynchronize", unsafe {
                sys::cuStreamSynchronize(s.raw)
            }));
        }
        let cached: Vec<(u32, u64)> = streams
            .iter()
            .flat_map(|st| {
                let lists = std::mem::take(&mut *lock(&st.cache));
                let d = st.device;
                lists.into_values().flatten().map(move |p| (d, p))
            })
            .collect();
        let live: Vec<(u32, u64)> = read(&self.dev_live)
            .iter()
            .map(|(&p, &(d, _))| (d, p))
            .collect();
        for (d, p) in live.into_iter().chain(cached) {
            log(driver::bind(self.devices[d as usize].ctx));
            // SAFETY: a live or cached allocation of ours, freed once (a cached block is
            // no longer in the live table); every stream is idle (synchronized above).
            log(check("cuMemFree", unsafe { sys::cuMemFree_v2(p) }));
        }
        for s in &streams {
            log(driver::bind(self.devices[s.device as usize].ctx));
            // SAFETY: idle stream of ours, destroyed once.
            log(check("cuStreamDestroy", unsafe {
                sys::cuStreamDestroy_v2(s.raw)
            }));
        }
        for (_, _, e0, e1) in std::mem::take(&mut *lock(&self.timed)) {
            destroy_event_quietly(e0);
            destroy_event_quietly(e1);
        }
        for (_, (e, _)) in std::mem::take(&mut *lock(&self.time_base)) {
            destroy_event_quietly(e);
        }
        let mut events: Vec<Event> = std::mem::take(&mut *lock(&self.events))
            .into_iter()
            .flatten()
            .collect();
        events.append(&mut lock(&self.free_events));
        for e in events {
            log(driver::bind(self.devices[e.device as usize].ctx));
            // SAFETY: an event of ours, destroyed once; no stream uses it any more.
            log(check("cuEventDestroy", unsafe {
                sys::cuEventDestroy_v2(e.raw)
            }));
        }
        let hosts: Vec<u64> = read(&self.host_mem)
            .keys()
            .copied()
            .chain(lock(&self.host_cache).iter().map(|(p, _)| *p))
            .collect();
        for p in hosts {
            // SAFETY: a pinned block of ours, freed once; streams are idle.
            log(check("cuMemFreeHost", unsafe {
                sys::cuMemFreeHost(p as usize as *mut c_void)
            }));
        }
        for ((d, _), m) in std::mem::take(&mut *lock(&self.user_modules)) {
            log(driver::bind(self.devices[d as usize].ctx));
            // SAFETY: a module of ours, unloaded once; no kernel of it runs any more.
            log(check("cuModuleUnload", unsafe { sys::cuModuleUnload(m) }));
        }
        for d in &self.devices {
            if let Some(Ok(m)) = d.builtins.get() {
                log(driver::bind(d.ctx));
                // SAFETY: as above.
                log(check("cuModuleUnload", unsafe { sys::cuModuleUnload(*m) }));
            }
            driver::unbind_all();
            // SAFETY: releases the retain made in `new`.
            log(check("cuDevicePrimaryCtxRelease", unsafe {
                sys::cuDevicePrimaryCtxRelease_v2(d.cu)
            }));
        }
    }
}

impl std::fmt::Debug for CudaPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaPlugin")
            .field("devices", &self.device_names())
            .finish_non_exhaustive()
    }
}
