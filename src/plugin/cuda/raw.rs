//! Hand-written driver-API programs the benchmark compares the pipeline with: the same
//! saxpy regions issued directly (no lowering, no executor, no plugin tables), and pinned
//! copy bandwidth.

use super::driver::{self, check};
use cudarc::driver::sys;
use std::ffi::c_void;
use std::time::Instant;

/// Pinned H2D, D2H and bidirectional copy bandwidth in bytes/s.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bandwidth {
    pub h2d: f64,
    pub d2h: f64,
    /// H2D and D2H of the same size at once on two streams: total bytes moved over time.
    pub bidir: f64,
}

/// Device 0's primary context, pinned host blocks and device blocks; released on drop.
struct Session {
    cu: sys::CUdevice,
    ctx: sys::CUcontext,
    host: Vec<*mut c_void>,
    dev: Vec<sys::CUdeviceptr>,
    streams: Vec<sys::CUstream>,
    module: Option<sys::CUmodule>,
}

impl Session {
    fn new() -> Result<Session, String> {
        driver::init()?;
        let mut cu: sys::CUdevice = 0;
        let mut ctx: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: valid out-pointers, device 0 exists (init counted it).
        unsafe {
            check("cuDeviceGet", sys::cuDeviceGet(&mut cu, 0))?;
            check(
                "cuDevicePrimaryCtxRetain",
                sys::cuDevicePrimaryCtxRetain(&mut ctx, cu),
            )?;
        }
        let s = Session {
            cu,
            ctx,
            host: Vec::new(),
            dev: Vec::new(),
            streams: Vec::new(),
            module: None,
        };
        driver::bind(ctx)?;
        Ok(s)
    }

    fn pinned(&mut self, bytes: usize, fill: u8) -> Result<*mut c_void, String> {
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid out-pointer; context current.
        check("cuMemHostAlloc", unsafe {
            sys::cuMemHostAlloc(&mut p, bytes, sys::CU_MEMHOSTALLOC_PORTABLE)
        })?;
        self.host.push(p);
        // SAFETY: `p` holds `bytes` bytes.
        unsafe { std::ptr::write_bytes(p as *mut u8, fill, bytes) };
        Ok(p)
    }

    fn device(&mut self, bytes: usize) -> Result<sys::CUdeviceptr, String> {
        let mut p: sys::CUdeviceptr = 0;
        // SAFETY: valid out-pointer; context current.
        check("cuMemAlloc", unsafe { sys::cuMemAlloc_v2(&mut p, bytes) })?;
        self.dev.push(p);
        Ok(p)
    }

    fn streams(&mut self, n: usize) -> Result<Vec<sys::CUstream>, String> {
        while self.streams.len() < n {
            let mut s: sys::CUstream = std::ptr::null_mut();
            // SAFETY: valid out-pointer; context current; flag 1 = non-blocking.
            check("cuStreamCreate", unsafe { sys::cuStreamCreate(&mut s, 1) })?;
            self.streams.push(s);
        }
        Ok(self.streams[..n].to_vec())
    }

    fn saxpy(&mut self) -> Result<sys::CUfunction, String> {
        let m = match self.module {
            Some(m) => m,
            None => {
                let (major, minor) = driver::compute_capability(self.cu)?;
                let cubin = driver::builtins_cubin(major, minor)?;
                let mut m: sys::CUmodule = std::ptr::null_mut();
                // SAFETY: a CUBIN image alive for the call.
                check("cuModuleLoadData", unsafe {
                    sys::cuModuleLoadData(&mut m, cubin.as_ptr() as *const c_void)
                })?;
                self.module = Some(m);
                m
            }
        };
        let mut f: sys::CUfunction = std::ptr::null_mut();
        // SAFETY: live module, NUL-terminated name.
        check("cuModuleGetFunction", unsafe {
            sys::cuModuleGetFunction(&mut f, m, c"saxpy_f32".as_ptr())
        })?;
        Ok(f)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // SAFETY: every handle below is ours and released once, after the streams idle.
        unsafe {
            let _ = driver::bind(self.ctx);
            for s in &self.streams {
                sys::cuStreamSynchronize(*s);
            }
            for s in &self.streams {
                sys::cuStreamDestroy_v2(*s);
            }
            for p in &self.dev {
                sys::cuMemFree_v2(*p);
            }
            for p in &self.host {
                sys::cuMemFreeHost(*p);
            }
            if let Some(m) = self.module {
                sys::cuModuleUnload(m);
            }
            driver::unbind_all();
            sys::cuDevicePrimaryCtxRelease_v2(self.cu);
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
    let n = (bytes / 4) as usize;
    let bytes = n * 4;
    let f = s.saxpy()?;
    let st = s.streams(streams.max(1))?;
    let mut xs = Vec::new();
    let mut ys = Vec::new();
    for _ in 0..regions {
        xs.push(s.pinned(bytes, 0x3f)?);
        ys.push(s.pinned(bytes, 0x3f)?);
    }
    let mut pre = Vec::new();
    if prealloc {
        for _ in 0..regions {
            pre.push((s.device(bytes)?, s.device(bytes)?));
        }
    }
    let teams = n.div_ceil(256).clamp(1, i32::MAX as usize) as u32;
    let mut out = Vec::with_capacity(reps);
    for rep in 0..warmup + reps {
        let t = Instant::now();
        for r in 0..regions {
            let raw = st[r % st.len()];
            let (mut dx, mut dy): (sys::CUdeviceptr, sys::CUdeviceptr) = (0, 0);
            let mut a = 2.0f32;
            let mut len = n as i64;
            // SAFETY: device pointers come from the allocations just made on `raw` and are
            // used only by work on `raw` before their stream-ordered free; host buffers
            // hold `bytes` bytes and are only rewritten after the final synchronize;
            // kernel parameters match `saxpy_f32(float, float*, i64, float*, i64)`.
            unsafe {
                if prealloc {
                    (dx, dy) = pre[r];
                } else {
                    check("cuMemAllocAsync", sys::cuMemAllocAsync(&mut dx, bytes, raw))?;
                    check("cuMemAllocAsync", sys::cuMemAllocAsync(&mut dy, bytes, raw))?;
                }
                check(
                    "cuMemcpyHtoDAsync",
                    sys::cuMemcpyHtoDAsync_v2(dx, xs[r], bytes, raw),
                )?;
                check(
                    "cuMemcpyHtoDAsync",
                    sys::cuMemcpyHtoDAsync_v2(dy, ys[r], bytes, raw),
                )?;
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
                    sys::cuMemcpyDtoHAsync_v2(ys[r], dy, bytes, raw),
                )?;
                if !prealloc {
                    check("cuMemFreeAsync", sys::cuMemFreeAsync(dx, raw))?;
                    check("cuMemFreeAsync", sys::cuMemFreeAsync(dy, raw))?;
                }
                if sync_each {
                    check("cuStreamSynchronize", sys::cuStreamSynchronize(raw))?;
                }
            }
        }
        for raw in &st {
            // SAFETY: live stream.
            check("cuStreamSynchronize", unsafe {
                sys::cuStreamSynchronize(*raw)
            })?;
        }
        if rep >= warmup {
            out.push(t.elapsed().as_secs_f64() * 1e6 / regions.max(1) as f64);
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
    let sync = |raw: sys::CUstream| -> Result<(), String> {
        // SAFETY: live stream.
        check("cuStreamSynchronize", unsafe {
            sys::cuStreamSynchronize(raw)
        })
    };
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
        for raw in &st {
            // SAFETY: live stream.
            check("cuStreamSynchronize", unsafe {
                sys::cuStreamSynchronize(*raw)
            })?;
        }
        if rep >= warmup {
            out.push(t.elapsed().as_secs_f64() * 1e6 / regions.max(1) as f64);
        }
    }
    Ok(out)
}
