//! Hand-written driver-API programs the benchmark compares the pipeline with: the same
//! saxpy regions issued directly (no lowering, no executor, no plugin tables), and pinned
//! copy bandwidth.
//!
//! Written against the library's public CUDA layers only (`plugin::cuda::driver`: the
//! result-style wrappers and RAII handles, and `builtins_cubin`): nothing of the plugin's
//! caches, batching or tables is used, so a figure here is the driver's alone.

use offload_sched::plugin::cuda::builtins_cubin;
use offload_sched::plugin::cuda::driver::{
    self, check, sys, Context, DeviceBlock, Module, PinnedHost, Stream,
};
use std::ffi::c_void;
use std::sync::Arc;
use std::time::Instant;

/// Pinned H2D, D2H and bidirectional copy bandwidth in bytes/s.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bandwidth {
    pub h2d: f64,
    pub d2h: f64,
    /// H2D and D2H of the same size at once on two streams: total bytes moved over time.
    pub bidir: f64,
}

/// `(major, minor)` compute capability of `dev` (`cuDeviceGetAttribute`).
fn compute_capability(dev: sys::CUdevice) -> Result<(i32, i32), String> {
    use sys::CUdevice_attribute::{
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR as MAJOR,
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR as MINOR,
    };
    let (mut major, mut minor) = (0, 0);
    // SAFETY: valid out-pointers and attribute ids; the driver is initialised.
    unsafe {
        check(
            "cuDeviceGetAttribute",
            sys::cuDeviceGetAttribute(&mut major, MAJOR, dev),
        )?;
        check(
            "cuDeviceGetAttribute",
            sys::cuDeviceGetAttribute(&mut minor, MINOR, dev),
        )?;
    }
    Ok((major, minor))
}

/// Device 0's primary context, streams, device blocks, pinned host blocks and the
/// built-in module. Dropping it synchronizes the streams, then the fields release
/// themselves in declaration order (the context last, after everything made in it).
struct Session {
    streams: Vec<Stream>,
    dev: Vec<DeviceBlock>,
    host: Vec<PinnedHost>,
    module: Option<Module>,
    ctx: Arc<Context>,
}

impl Session {
    fn new() -> Result<Session, String> {
        driver::init()?;
        let ctx = Context::retain_primary(0)?;
        ctx.bind()?;
        Ok(Session {
            streams: Vec::new(),
            dev: Vec::new(),
            host: Vec::new(),
            module: None,
            ctx,
        })
    }

    fn pinned(&mut self, bytes: usize, fill: u8) -> Result<*mut c_void, String> {
        let b = PinnedHost::alloc(&self.ctx, bytes, sys::CU_MEMHOSTALLOC_PORTABLE)?;
        let p = b.as_ptr();
        self.host.push(b);
        // SAFETY: `p` holds `bytes` bytes.
        unsafe { std::ptr::write_bytes(p as *mut u8, fill, bytes) };
        Ok(p)
    }

    fn device(&mut self, bytes: usize) -> Result<sys::CUdeviceptr, String> {
        let b = DeviceBlock::alloc(&self.ctx, bytes)?;
        let p = b.ptr();
        self.dev.push(b);
        Ok(p)
    }

    fn streams(&mut self, n: usize) -> Result<Vec<sys::CUstream>, String> {
        while self.streams.len() < n {
            let s = Stream::create(&self.ctx, Stream::NON_BLOCKING)?;
            self.streams.push(s);
        }
        Ok(self.streams[..n].iter().map(Stream::raw).collect())
    }

    /// The saxpy regions' setup: `saxpy_f32`, `streams` streams, and per region pinned
    /// `x` and `y` of `bytes` (rounded down to whole f32) bytes each, with `prealloc` two
    /// device blocks of that size too (else `None`: the region allocates its own).
    fn regions(
        &mut self,
        regions: usize,
        bytes: u64,
        streams: usize,
        prealloc: bool,
    ) -> Result<Regions, String> {
        let bytes = (bytes / 4 * 4) as usize;
        let mut r = Regions {
            f: self.saxpy()?,
            st: self.streams(streams.max(1))?,
            bytes,
            xs: Vec::new(),
            ys: Vec::new(),
            pre: Vec::new(),
        };
        for _ in 0..regions {
            r.xs.push(self.pinned(bytes, 0x3f)?);
            r.ys.push(self.pinned(bytes, 0x3f)?);
            r.pre.push(if prealloc {
                Some((self.device(bytes)?, self.device(bytes)?))
            } else {
                None
            });
        }
        Ok(r)
    }

    fn saxpy(&mut self) -> Result<sys::CUfunction, String> {
        if self.module.is_none() {
            let (major, minor) = compute_capability(self.ctx.device())?;
            let cubin = builtins_cubin(major, minor)?;
            // SAFETY: a CUBIN from NVRTC.
            self.module = Some(unsafe { Module::load(&self.ctx, &cubin) }?);
        }
        let m = self.module.as_ref().expect("loaded above");
        Ok(m.function(c"saxpy_f32")?)
    }
}

/// What [`Session::regions`] set up (released with the session).
struct Regions {
    f: sys::CUfunction,
    st: Vec<sys::CUstream>,
    bytes: usize,
    xs: Vec<*mut c_void>,
    ys: Vec<*mut c_void>,
    pre: Vec<Option<(sys::CUdeviceptr, sys::CUdeviceptr)>>,
}

/// `cuStreamSynchronize` on each stream of `st` (live streams, context current).
fn sync_streams(st: &[sys::CUstream]) -> Result<(), String> {
    for raw in st {
        // SAFETY: a live stream of the session.
        check("cuStreamSynchronize", unsafe {
            sys::cuStreamSynchronize(*raw)
        })?;
    }
    Ok(())
}

/// µs per region of `regions` regions since `t`.
fn us_per_region(t: Instant, regions: usize) -> f64 {
    t.elapsed().as_secs_f64() * 1e6 / regions.max(1) as f64
}

impl Drop for Session {
    /// Waits for the streams, so that no pending work uses what the fields release next;
    /// errors are recorded in the context.
    fn drop(&mut self) {
        self.ctx.record(self.ctx.bind());
        for s in &self.streams {
            self.ctx.record(s.synchronize());
        }
    }
}

/// Times `regions` saxpy regions of `bytes` bytes per array (f32), issued by hand: per
/// region `cuMemAllocAsync` x and y, H2D x and y, launch `saxpy_f32` (256 threads per
/// block, one element per thread), D2H y, `cuMemFreeAsync` both — round-robin over
/// `streams` streams from pinned buffers allocated once (with `prealloc`, device buffers
/// too, and no per-region alloc/free). With `sync_each`, one
/// `cuStreamSynchronize` per region; otherwise one per stream at the end.
///
/// Returns µs per region for each of `reps` runs after `warmup` runs.
pub fn saxpy_regions(
    regions: usize,
    bytes: u64,
    streams: usize,
    sync_each: bool,
    prealloc: bool,
    warmup: usize,
    reps: usize,
) -> Result<Vec<f64>, String> {
    let mut s = Session::new()?;
    let Regions {
        f,
        st,
        bytes,
        xs,
        ys,
        pre,
    } = s.regions(regions, bytes, streams, prealloc)?;
    let mut out = Vec::with_capacity(reps);
    for rep in 0..warmup + reps {
        let t = Instant::now();
        for r in 0..regions {
            let raw = st[r % st.len()];
            // SAFETY: see `issue_region`; each region has its own buffers, and the host
            // rewrites nothing before the synchronize below.
            unsafe { issue_region(f, raw, xs[r], ys[r], bytes, pre[r], false)? };
            if sync_each {
                sync_streams(&[raw])?;
            }
        }
        sync_streams(&st)?;
        if rep >= warmup {
            out.push(us_per_region(t, regions));
        }
    }
    Ok(out)
}

/// Pinned copy bandwidth of `bytes`-byte copies: the median over `reps` (after one
/// warm-up) of H2D alone, D2H alone, and both at once on two streams.
pub fn bandwidth(bytes: u64, reps: usize) -> Result<Bandwidth, String> {
    let mut s = Session::new()?;
    let b = bytes as usize;
    let h1 = s.pinned(b, 1)?;
    let h2 = s.pinned(b, 2)?;
    let d1 = s.device(b)?;
    let d2 = s.device(b)?;
    let st = s.streams(2)?;
    let sync = |raw: sys::CUstream| sync_streams(&[raw]);
    let median = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    let (mut h2d, mut d2h, mut bi) = (Vec::new(), Vec::new(), Vec::new());
    for rep in 0..reps.max(1) + 1 {
        // SAFETY (all copies): pinned and device blocks of `b` bytes each, live until the
        // session drops; each direction uses its own pair.
        let t = Instant::now();
        check("cuMemcpyHtoDAsync", unsafe {
            sys::cuMemcpyHtoDAsync_v2(d1, h1, b, st[0])
        })?;
        sync(st[0])?;
        let t_h2d = t.elapsed().as_secs_f64();
        let t = Instant::now();
        check("cuMemcpyDtoHAsync", unsafe {
            sys::cuMemcpyDtoHAsync_v2(h2, d2, b, st[1])
        })?;
        sync(st[1])?;
        let t_d2h = t.elapsed().as_secs_f64();
        let t = Instant::now();
        check("cuMemcpyHtoDAsync", unsafe {
            sys::cuMemcpyHtoDAsync_v2(d1, h1, b, st[0])
        })?;
        check("cuMemcpyDtoHAsync", unsafe {
            sys::cuMemcpyDtoHAsync_v2(h2, d2, b, st[1])
        })?;
        sync(st[0])?;
        sync(st[1])?;
        let t_bi = t.elapsed().as_secs_f64();
        if rep > 0 {
            h2d.push(bytes as f64 / t_h2d);
            d2h.push(bytes as f64 / t_d2h);
            bi.push(2.0 * bytes as f64 / t_bi);
        }
    }
    Ok(Bandwidth {
        h2d: median(h2d),
        d2h: median(d2h),
        bidir: median(bi),
    })
}

/// The copies of `regions` saxpy regions of `bytes` bytes per array and nothing else:
/// 2 H2D per region on one stream and 1 D2H per region on a second stream, issued at once
/// from pinned memory to device memory allocated once (no kernels, no dependencies), then
/// one synchronize per stream. This is the fastest the regions' copy traffic can move with
/// both directions overlapped. Returns µs per region for each of `reps` runs after
/// `warmup` runs.
pub fn copy_mix(
    regions: usize,
    bytes: u64,
    warmup: usize,
    reps: usize,
) -> Result<Vec<f64>, String> {
    let mut s = Session::new()?;
    let b = bytes as usize;
    let st = s.streams(2)?;
    let mut bufs = Vec::new();
    for _ in 0..regions {
        bufs.push((
            s.pinned(b, 1)?,
            s.pinned(b, 2)?,
            s.pinned(b, 3)?,
            s.device(b)?,
            s.device(b)?,
            s.device(b)?,
        ));
    }
    let mut out = Vec::with_capacity(reps);
    for rep in 0..warmup + reps {
        let t = Instant::now();
        for &(hx, hy, hz, dx, dy, dz) in &bufs {
            // SAFETY: pinned and device blocks of `b` bytes each, live until the session
            // drops; the host does not touch them until the synchronizes below.
            unsafe {
                check(
                    "cuMemcpyHtoDAsync",
                    sys::cuMemcpyHtoDAsync_v2(dx, hx, b, st[0]),
                )?;
                check(
                    "cuMemcpyHtoDAsync",
                    sys::cuMemcpyHtoDAsync_v2(dy, hy, b, st[0]),
                )?;
                check(
                    "cuMemcpyDtoHAsync",
                    sys::cuMemcpyDtoHAsync_v2(hz, dz, b, st[1]),
                )?;
            }
        }
        sync_streams(&st)?;
        if rep >= warmup {
            out.push(us_per_region(t, regions));
        }
    }
    Ok(out)
}

/// How [`saxpy_regions_by`] issues the regions (all: 4 driver calls per region, device
/// memory allocated per region unless `prealloc`, one synchronize at the end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Issue {
    /// One host thread per stream, each issuing its stream's regions and synchronizing it.
    Threads,
    /// The whole run captured once into a CUDA graph (fork/join over the streams with
    /// events), instantiated once, then one `cuGraphLaunch` + synchronize per run.
    Graph,
    /// One host thread; a region's two H2D copies in one `cuMemcpyBatchAsync` call.
    Batch,
}

/// Per-region issue of the hand-written saxpy program on `raw` (see [`saxpy_regions`]).
///
/// # Safety
/// `f` is `saxpy_f32` of the current context; `x` and `y` are pinned blocks of `bytes`
/// bytes; `pre`, when given, two device blocks of `bytes` bytes used by nothing else
/// in flight; `raw` a live stream of the current context.
#[allow(clippy::too_many_arguments)]
unsafe fn issue_region(
    f: sys::CUfunction,
    raw: sys::CUstream,
    x: *mut c_void,
    y: *mut c_void,
    bytes: usize,
    pre: Option<(sys::CUdeviceptr, sys::CUdeviceptr)>,
    batch: bool,
) -> Result<(), String> {
    let n = bytes / 4;
    let teams = n.div_ceil(256).clamp(1, i32::MAX as usize) as u32;
    let (mut dx, mut dy): (sys::CUdeviceptr, sys::CUdeviceptr) = (0, 0);
    let mut a = 2.0f32;
    let mut len = n as i64;
    match pre {
        Some(p) => (dx, dy) = p,
        None => {
            check("cuMemAllocAsync", sys::cuMemAllocAsync(&mut dx, bytes, raw))?;
            check("cuMemAllocAsync", sys::cuMemAllocAsync(&mut dy, bytes, raw))?;
        }
    }
    if batch {
        let mut dsts = [dx, dy];
        let mut srcs = [x as sys::CUdeviceptr, y as sys::CUdeviceptr];
        let mut sizes = [bytes, bytes];
        let mut attrs = [sys::CUmemcpyAttributes {
            srcAccessOrder: sys::CUmemcpySrcAccessOrder::CU_MEMCPY_SRC_ACCESS_ORDER_STREAM,
            srcLocHint: sys::CUmemLocation {
                type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_HOST,
                id: 0,
            },
            dstLocHint: sys::CUmemLocation {
                type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                id: 0,
            },
            flags: 0,
        }];
        let mut idx = [0usize];
        check(
            "cuMemcpyBatchAsync",
            sys::cuMemcpyBatchAsync_v2(
                dsts.as_mut_ptr(),
                srcs.as_mut_ptr(),
                sizes.as_mut_ptr(),
                2,
                attrs.as_mut_ptr(),
                idx.as_mut_ptr(),
                1,
                raw,
            ),
        )?;
    } else {
        check(
            "cuMemcpyHtoDAsync",
            sys::cuMemcpyHtoDAsync_v2(dx, x, bytes, raw),
        )?;
        check(
            "cuMemcpyHtoDAsync",
            sys::cuMemcpyHtoDAsync_v2(dy, y, bytes, raw),
        )?;
    }
    let mut params: [*mut c_void; 5] = [
        &mut a as *mut f32 as *mut c_void,
        &mut dx as *mut u64 as *mut c_void,
        &mut len as *mut i64 as *mut c_void,
        &mut dy as *mut u64 as *mut c_void,
        &mut len as *mut i64 as *mut c_void,
    ];
    check(
        "cuLaunchKernel",
        sys::cuLaunchKernel(
            f,
            teams,
            1,
            1,
            256,
            1,
            1,
            0,
            raw,
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        ),
    )?;
    check(
        "cuMemcpyDtoHAsync",
        sys::cuMemcpyDtoHAsync_v2(y, dy, bytes, raw),
    )?;
    if pre.is_none() {
        check("cuMemFreeAsync", sys::cuMemFreeAsync(dx, raw))?;
        check("cuMemFreeAsync", sys::cuMemFreeAsync(dy, raw))?;
    }
    Ok(())
}

/// The parameters every way of issuing shares: regions per run, warm-up and timed runs.
#[derive(Clone, Copy)]
struct Runs {
    regions: usize,
    warmup: usize,
    reps: usize,
}

/// The hand-written saxpy regions of [`saxpy_regions`] (sync at the end, round-robin over
/// `streams`), issued the way `how` says. Returns µs per region for each of `reps` runs
/// after `warmup` runs; for [`Issue::Graph`] the one-off capture + instantiate time in µs
/// (not in the per-run figures) comes second.
pub fn saxpy_regions_by(
    how: Issue,
    regions: usize,
    bytes: u64,
    streams: usize,
    prealloc: bool,
    warmup: usize,
    reps: usize,
) -> Result<(Vec<f64>, f64), String> {
    let mut s = Session::new()?;
    let rg = s.regions(regions, bytes, streams, prealloc)?;
    let runs = Runs {
        regions,
        warmup,
        reps,
    };
    match how {
        Issue::Batch => Ok((by_batch(&rg, runs)?, 0.0)),
        Issue::Threads => Ok((by_threads(&s.ctx, &rg, runs)?, 0.0)),
        Issue::Graph => by_graph(&rg, runs),
    }
}

/// [`Issue::Batch`]: µs per region of each timed run.
fn by_batch(rg: &Regions, runs: Runs) -> Result<Vec<f64>, String> {
    let Runs {
        regions,
        warmup,
        reps,
    } = runs;
    let (f, st, bytes, xs, ys, pre) = (rg.f, &rg.st, rg.bytes, &rg.xs, &rg.ys, &rg.pre);
    let per = |t: Instant| us_per_region(t, regions);
    let mut out = Vec::with_capacity(reps);
    for rep in 0..warmup + reps {
        let t = Instant::now();
        for r in 0..regions {
            // SAFETY: see `issue_region`; buffers are per region and the host
            // rewrites nothing before the final synchronize.
            unsafe { issue_region(f, st[r % st.len()], xs[r], ys[r], bytes, pre[r], true)? };
        }
        sync_streams(st)?;
        if rep >= warmup {
            out.push(per(t));
        }
    }
    Ok(out)
}

/// [`Issue::Threads`] (`ctx` made current on each thread): µs per region of each timed
/// run.
fn by_threads(ctx: &Context, rg: &Regions, runs: Runs) -> Result<Vec<f64>, String> {
    let Runs {
        regions,
        warmup,
        reps,
    } = runs;
    let (f, st, bytes, xs, ys, pre) = (rg.f, &rg.st, rg.bytes, &rg.xs, &rg.ys, &rg.pre);
    let per = |t: Instant| us_per_region(t, regions);
    let mut out = Vec::with_capacity(reps);
    let k = st.len();
    let start = std::sync::Barrier::new(k + 1);
    let end = std::sync::Barrier::new(k + 1);
    let err: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
    let (fu, stu) = (
        f as usize,
        st.iter().map(|p| *p as usize).collect::<Vec<_>>(),
    );
    let xu: Vec<usize> = xs.iter().map(|p| *p as usize).collect();
    let yu: Vec<usize> = ys.iter().map(|p| *p as usize).collect();
    std::thread::scope(|sc| {
        for (i, &raw) in stu.iter().enumerate() {
            let (start, end, err, xu, yu) = (&start, &end, &err, &xu, &yu);
            sc.spawn(move || {
                let bound = ctx.bind().map_err(String::from);
                for _ in 0..warmup + reps {
                    start.wait();
                    let res = bound.clone().and_then(|_| {
                        for r in (i..regions).step_by(k) {
                            // SAFETY: as in `Batch`; each thread owns its stream
                            // and its regions' buffers.
                            unsafe {
                                issue_region(
                                    fu as sys::CUfunction,
                                    raw as sys::CUstream,
                                    xu[r] as *mut c_void,
                                    yu[r] as *mut c_void,
                                    bytes,
                                    pre[r],
                                    false,
                                )?
                            };
                        }
                        sync_streams(&[raw as sys::CUstream])
                    });
                    if let Err(e) = res {
                        *err.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                    }
                    end.wait();
                }
            });
        }
        for rep in 0..warmup + reps {
            start.wait();
            let t = Instant::now();
            end.wait();
            if rep >= warmup {
                out.push(per(t));
            }
        }
    });
    if let Some(e) = err.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    Ok(out)
}

/// [`Issue::Graph`]: µs per region of each timed run, and the capture + instantiate time
/// in µs.
fn by_graph(rg: &Regions, runs: Runs) -> Result<(Vec<f64>, f64), String> {
    let Runs {
        regions,
        warmup,
        reps,
    } = runs;
    let (f, st, bytes, xs, ys, pre) = (rg.f, &rg.st, rg.bytes, &rg.xs, &rg.ys, &rg.pre);
    let per = |t: Instant| us_per_region(t, regions);
    let mut out = Vec::with_capacity(reps);
    let t = Instant::now();
    let mut graph: sys::CUgraph = std::ptr::null_mut();
    let mut exec: sys::CUgraphExec = std::ptr::null_mut();
    let mut evs: Vec<sys::CUevent> = Vec::new();
    // SAFETY: capture on live streams of the current context; events created
    // here and destroyed below; the graph and its executable destroyed below.
    let res = unsafe {
        (|| -> Result<(), String> {
            for _ in 0..st.len() {
                let mut e: sys::CUevent = std::ptr::null_mut();
                check("cuEventCreate", sys::cuEventCreate(&mut e, 2))?;
                evs.push(e);
            }
            check(
                "cuStreamBeginCapture",
                sys::cuStreamBeginCapture_v2(
                    st[0],
                    sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                ),
            )?;
            check("cuEventRecord", sys::cuEventRecord(evs[0], st[0]))?;
            for raw in &st[1..] {
                check("cuStreamWaitEvent", sys::cuStreamWaitEvent(*raw, evs[0], 0))?;
            }
            for r in 0..regions {
                let issued = issue_region(f, st[r % st.len()], xs[r], ys[r], bytes, pre[r], false);
                if let Err(e) = issued {
                    // Leave capture mode; the partial graph is discarded.
                    let mut g: sys::CUgraph = std::ptr::null_mut();
                    if sys::cuStreamEndCapture(st[0], &mut g) == sys::CUresult::CUDA_SUCCESS
                        && !g.is_null()
                    {
                        sys::cuGraphDestroy(g);
                    }
                    return Err(e);
                }
            }
            for (i, raw) in st.iter().enumerate().skip(1) {
                check("cuEventRecord", sys::cuEventRecord(evs[i], *raw))?;
                check(
                    "cuStreamWaitEvent",
                    sys::cuStreamWaitEvent(st[0], evs[i], 0),
                )?;
            }
            check(
                "cuStreamEndCapture",
                sys::cuStreamEndCapture(st[0], &mut graph),
            )?;
            check(
                "cuGraphInstantiateWithFlags",
                sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0),
            )?;
            Ok(())
        })()
    };
    let setup_us = t.elapsed().as_secs_f64() * 1e6;
    let res = res.and_then(|_| {
        for rep in 0..warmup + reps {
            let t = Instant::now();
            // SAFETY: instantiated graph, live stream.
            check("cuGraphLaunch", unsafe { sys::cuGraphLaunch(exec, st[0]) })?;
            sync_streams(&st[..1])?;
            if rep >= warmup {
                out.push(per(t));
            }
        }
        Ok(())
    });
    // SAFETY: handles made above, released once after the stream idles.
    unsafe {
        sys::cuStreamSynchronize(st[0]);
        if !exec.is_null() {
            sys::cuGraphExecDestroy(exec);
        }
        if !graph.is_null() {
            sys::cuGraphDestroy(graph);
        }
        for e in evs {
            sys::cuEventDestroy_v2(e);
        }
    }
    res?;
    Ok((out, setup_us))
}
