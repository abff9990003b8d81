//! The library tile kernels ([`crate::model::library`]: `gemm`, `syrk`, `trsm`, `potrf`, `getrf`,
//! f32/f64) on the CUDA plugin's streams, with cuBLAS and cuSOLVER (`blas.rs`), under
//! contract rule 8 of [`crate::plugin`]: a library kernel is loaded and launched like any
//! kernel; the launch runs one vendor-library call on the stream.
//!
//! - **One handle per stream.** Each stream gets, on its first library launch, a cuBLAS
//!   handle and a cuSOLVER handle bound to it ([`StreamLibrary`]), kept for the stream's
//!   life.
//! - **Workspace from the stream-ordered pool.** With the handles, one block from the
//!   device's default pool (`cuMemAllocAsync` on the stream, as `devmem.rs` allocates):
//!   the cuBLAS workspace (`cublasSetWorkspace`, `blas::blas_workspace_bytes`) and the
//!   `int` cuSOLVER writes LAPACK's `info` into. The `potrf` / `getrf` workspace
//!   (`cusolverDn<t>potrf_bufferSize`, `cusolverDn<t>getrf_bufferSize`) is a second block, grown in stream order (the old
//!   one `cuMemFreeAsync`ed on the stream, a larger one allocated behind it). None of
//!   them is in the live table: no program address can reach them.
//! - **Arguments.** Checked as the host plugin checks them (`library::decode`,
//!   `library::check_shapes`, the written tile overlapping no other, each tile inside a
//!   live allocation of the stream's device): [`PluginError::Signature`] or
//!   [`PluginError::InvalidPointer`], nothing enqueued.
//! - **`potrf` and `getrf` failures.** After each `potrf` or `getrf`, the built-in
//!   `offload_solver_info` kernel (`builtins.cu`, one block of 256 threads on the same
//!   stream) checks the factor's diagonal and copies a failure into the stream's sticky
//!   record in pinned host memory ([`Sticky`]), with the kernel, the element type and the
//!   `seq` of the call's stream call (a launch parameter, fixed at issue): `potrf`,
//!   cuSOLVER's nonzero `info`, else the first NaN on the factor's diagonal (the host
//!   plugin's check, [`crate::model::library::potrf_nan_failure`]: OpenBLAS and cuSOLVER
//!   do not test for NaN, reference LAPACK does); `getrf` (no pivoting), the first pivot
//!   that is not finite before cuSOLVER's first zero one, else that zero one (the host's
//!   rule: it stops at the first failing pivot). The next `synchronize` of the
//!   stream (or `synchronize_event` of an event recorded on it) reads and clears it and
//!   reports [`PluginError::Async`] with the host plugin's words: ``kernel "potrf"
//!   failed: `` and [`crate::model::library::potrf_failure`] (LAPACK's `info`; or
//!   ``kernel "getrf" failed: `` and [`crate::model::library::getrf_failure`]), and that
//!   `seq`, so the executor names the failing op and its region
//!   (`exec/locate.rs`). Graph launches have a record per graph, watched by the stream
//!   they were launched on (`capture.rs`); a captured call's parameters are fixed when
//!   the graph is built, so its record carries no `seq` ([`NO_SEQ`]) and the failure is
//!   reported where it was found. The check reads `n` strided elements in one block and
//!   rides on the launch that copied `info` before it: for a 1024 tile, 4 loads per
//!   thread beside a `potrf` of 0.36 GFLOP.

use super::backend;
use super::blas::{self, Handles};
use super::driver::{result, sys, Context, PinnedHost};
use super::plugin::CudaPlugin;
use crate::model::library::{self, LibraryKernel, TileArgs};
use crate::model::ElemType;
use crate::plugin::{KernelHandle, LaunchArg, PluginCall, PluginError, StreamHandle};
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

/// The `seq` a `potrf` / `getrf` passes to `offload_solver_info` when its stream call is
/// not known (a call captured into a graph).
pub(super) const NO_SEQ: u64 = u64::MAX;

/// A pinned record `{info: i32, tag: i32, seq: u64}` that `offload_solver_info` sets on a
/// `potrf` / `getrf` failure (tag: [`tag`], plus 8 when the diagonal check found it; seq
/// the call's stream call or [`NO_SEQ`]) and the host clears when it reports it.
pub(super) struct Sticky {
    block: PinnedHost,
}

/// Bytes of a [`Sticky`] record.
const STICKY_BYTES: usize = 16;

impl Sticky {
    /// A cleared record in pinned, portable host memory of `ctx`.
    pub(super) fn new(ctx: &Arc<Context>) -> Result<Sticky, String> {
        let block = PinnedHost::alloc(ctx, STICKY_BYTES, sys::CU_MEMHOSTALLOC_PORTABLE)?;
        // SAFETY: `STICKY_BYTES` fresh bytes of ours.
        unsafe { std::ptr::write_bytes(block.as_ptr() as *mut u8, 0, STICKY_BYTES) };
        Ok(Sticky { block })
    }

    /// The address the kernel writes (unified addressing: the host address).
    pub(super) fn addr(&self) -> u64 {
        self.block.addr()
    }

    /// The failure recorded since the last take, cleared: `(info, tag, seq)` (`None` for
    /// [`NO_SEQ`]).
    pub(super) fn take(&self) -> Option<(i32, i32, Option<u64>)> {
        let p = self.block.as_ptr() as *mut i32;
        // SAFETY: two aligned `i32`s and an aligned `u64` (byte 8; the block is at least
        // 8-aligned) of ours; the device writes seq and tag, a system fence, then info,
        // so a nonzero info comes with its tag and seq.
        unsafe {
            let info = std::ptr::read_volatile(p);
            if info == 0 {
                return None;
            }
            let tag = std::ptr::read_volatile(p.add(1));
            let seq = std::ptr::read_volatile(p.add(2) as *const u64);
            std::ptr::write_volatile(p.add(2) as *mut u64, 0);
            std::ptr::write_volatile(p.add(1), 0);
            std::ptr::write_volatile(p, 0);
            Some((info, tag, (seq != NO_SEQ).then_some(seq)))
        }
    }

    /// [`Sticky::take`] as the error of `call` on `stream`.
    pub(super) fn report(&self, call: PluginCall, stream: StreamHandle) -> Result<(), PluginError> {
        match self.take() {
            Some((info, tag, seq)) => Err(PluginError::Async {
                call,
                stream,
                message: failure_message(info, tag),
                // The failing launch's stream call (stream issue), so the executor names
                // its op and region; `None` for a captured call.
                seq,
            }),
            None => Ok(()),
        }
    }
}

/// The `tag` `offload_solver_info` takes for kernel `k` on `ty`: 1 (f32) or 2 (f64), plus
/// 4 for `getrf`.
pub(super) fn tag(k: LibraryKernel, ty: ElemType) -> i32 {
    let t = if ty == ElemType::F64 { 2 } else { 1 };
    if k == LibraryKernel::Getrf {
        t + 4
    } else {
        t
    }
}

/// The host plugin's words for a failure `info` with tag `tag` (a [`tag`], plus 8 when
/// the diagonal check found it).
fn failure_message(info: i32, tag: i32) -> String {
    let ty = if tag & 3 == 2 {
        ElemType::F64
    } else {
        ElemType::F32
    };
    let (getrf, diagonal) = (tag & 4 != 0, tag & 8 != 0);
    let what = match (getrf, diagonal) {
        (false, false) => library::potrf_failure(ty, info),
        (false, true) => library::potrf_nan_failure(ty, (info - 1).max(0) as u64),
        (true, false) => library::getrf_failure(ty, info),
        (true, true) => library::getrf_nonfinite_failure(ty, info),
    };
    let name = if getrf { "getrf" } else { "potrf" };
    format!("kernel \"{name}\" failed: {what}")
}

/// Whether `k` is a cuSOLVER call (a workspace, `info`, the diagonal check).
pub(super) fn is_solver(k: LibraryKernel) -> bool {
    matches!(k, LibraryKernel::Potrf | LibraryKernel::Getrf)
}

/// The diagonal `offload_solver_info` checks of call `t` on tile `a`: `(a, elements, lda)`.
pub(super) fn diagonal(t: &TileArgs, a: u64) -> (u64, i64, i64) {
    let n = match t.kernel {
        LibraryKernel::Getrf => t.m.min(t.n),
        _ => t.n,
    };
    (a, n, t.ld[0])
}

/// What a stream needs for library calls (module docs). Dropping it frees its blocks
/// (`cuMemFree`; the plugin synchronized the stream first) and destroys its handles.
pub(super) struct StreamLibrary {
    handles: Handles,
    /// The cuBLAS workspace, then (at `info`) the `info` word.
    scratch: u64,
    info: u64,
    /// The `potrf` / `getrf` workspace: address and bytes (0: none yet).
    solver: Mutex<(u64, usize)>,
    pub(super) sticky: Sticky,
    info_fn: sys::CUfunction,
    ctx: Arc<Context>,
}

// SAFETY: `info_fn` is a driver function handle, usable from any thread once its context
// is current; the rest is `Send + Sync` or behind a lock.
unsafe impl Send for StreamLibrary {}
// SAFETY: as above.
unsafe impl Sync for StreamLibrary {}

impl StreamLibrary {
    /// The state of stream `raw` of `ctx` (current), with the info kernel `info_fn`:
    /// handles made and bound, scratch allocated on the stream.
    pub(super) fn new(
        ctx: &Arc<Context>,
        raw: sys::CUstream,
        cc_major: i32,
        info_fn: sys::CUfunction,
    ) -> Result<StreamLibrary, String> {
        blas::load()?;
        let handles = Handles::create(ctx)?;
        let bytes = blas::blas_workspace_bytes(cc_major);
        // SAFETY: a live stream of the current context.
        let scratch = unsafe { result::mem_alloc_async(bytes + 256, raw) }.map_err(String::from)?;
        let lib = StreamLibrary {
            handles,
            scratch,
            info: scratch + bytes as u64,
            solver: Mutex::new((0, 0)),
            sticky: Sticky::new(ctx)?,
            info_fn,
            ctx: ctx.clone(),
        };
        // SAFETY: the stream and the workspace are live (the workspace is used only in
        // this stream's order).
        unsafe { lib.handles.bind(raw as *mut c_void, scratch, bytes) }?;
        Ok(lib)
    }

    /// Issues call `t` (checked) on `raw`, the stream the handles are bound to, as the
    /// stream's call `seq` (named by a `potrf` / `getrf` failure).
    ///
    /// # Safety
    /// As [`Handles::issue`]; `raw` the stream of this state, its context current.
    unsafe fn issue(
        &self,
        t: &TileArgs,
        ty: ElemType,
        tiles: &[u64],
        (raw, seq): (sys::CUstream, u64),
    ) -> Result<(), String> {
        if !is_solver(t.kernel) {
            return unsafe { self.handles.issue(t, ty, tiles, (0, 0), 0) };
        }
        let need = unsafe { self.handles.solver_bytes(t, ty, tiles[0]) }?;
        let work = {
            let mut w = super::lock(&self.solver);
            if w.1 < need {
                if w.0 != 0 {
                    // SAFETY: our block, used only by this stream's earlier work.
                    unsafe { result::mem_free_async(w.0, raw) }.map_err(String::from)?;
                    *w = (0, 0);
                }
                // SAFETY: a live stream of the current context.
                let p = unsafe { result::mem_alloc_async(need, raw) }.map_err(String::from)?;
                *w = (p, need);
            }
            // Exactly what this call asked for (as in a graph: the same `Lwork`).
            (w.0, need)
        };
        unsafe { self.handles.issue(t, ty, tiles, work, self.info) }?;
        unsafe {
            launch_info(
                self.info_fn,
                (self.info, self.sticky.addr()),
                (tag(t.kernel, ty), seq),
                diagonal(t, tiles[0]),
                raw,
            )
        }
    }
}

impl Drop for StreamLibrary {
    fn drop(&mut self) {
        self.ctx.record(self.ctx.bind());
        let solver = super::lock(&self.solver).0;
        for p in [self.scratch, solver].into_iter().filter(|&p| p != 0) {
            // SAFETY: blocks of ours, freed once; the plugin synchronized the stream.
            self.ctx.record(unsafe { result::mem_free(p) });
        }
    }
}

/// Launches `offload_solver_info(info, sticky, tag, seq, a, n, lda)` on `raw` (one block
/// of 256 threads): `(a, n, lda)` the diagonal to check ([`diagonal`]).
///
/// # Safety
/// `info_fn` the built-in of the current context; `info` a device `int`; `sticky` a
/// pinned [`Sticky`] record; `a` a device tile of `tag`'s type holding `n` diagonal
/// elements `lda + 1` apart; `raw` a live stream (or one capturing) of the context.
pub(super) unsafe fn launch_info(
    info_fn: sys::CUfunction,
    (mut info, mut sticky): (u64, u64),
    (mut tag, mut seq): (i32, u64),
    (mut a, mut n, mut lda): (u64, i64, i64),
    raw: sys::CUstream,
) -> Result<(), String> {
    let mut params = [
        &mut info as *mut u64 as *mut c_void,
        &mut sticky as *mut u64 as *mut c_void,
        &mut tag as *mut i32 as *mut c_void,
        &mut seq as *mut u64 as *mut c_void,
        &mut a as *mut u64 as *mut c_void,
        &mut n as *mut i64 as *mut c_void,
        &mut lda as *mut i64 as *mut c_void,
    ];
    // SAFETY: seven parameters of the kernel's types (`const int*`, `volatile int*`,
    // `int`, `unsigned long long`, `const void*`, `long long`, `long long`), alive for
    // the call.
    unsafe { result::launch_kernel(info_fn, (1, 1, 1), (256, 1, 1), 0, raw, params.as_mut_ptr()) }
        .map_err(|e| e.named("cuLaunchKernel(offload_solver_info)").into())
}

/// A library call's arguments decoded and checked (module docs): the tile arguments and
/// the tiles' device addresses in signature order. `live` checks a device range.
pub(super) fn decode_call(
    call: PluginCall,
    (k, ty): (LibraryKernel, ElemType),
    args: &[LaunchArg],
    live: impl Fn(u64, u64) -> Result<(), PluginError>,
) -> Result<(TileArgs, Vec<u64>), PluginError> {
    let sig_err = |message: String| PluginError::Signature {
        call,
        kernel: k.name().to_string(),
        message,
    };
    let mut scalars = Vec::with_capacity(args.len());
    let mut tiles = Vec::with_capacity(3);
    for a in args {
        match *a {
            LaunchArg::Scalar(s) => scalars.push(s.as_f64()),
            LaunchArg::Buffer {
                ptr, offset, len, ..
            } => tiles.push((ptr.0.wrapping_add(offset), len)),
        }
    }
    let t = library::decode(k, &scalars).map_err(sig_err)?;
    let lens: Vec<u64> = tiles.iter().map(|&(_, l)| l).collect();
    library::check_shapes(&t, ty, &lens).map_err(sig_err)?;
    let size = ty.size_bytes();
    let starts: Vec<(u64, u64)> = tiles.iter().map(|&(p, _)| (0, p)).collect();
    if let Some(i) = library::aliased_tile(&t, &starts, size) {
        return Err(sig_err(format!(
            "the written tile overlaps tile {} of the call (BLAS leaves aliased arguments undefined)",
            i + 1
        )));
    }
    for &(p, l) in &tiles {
        if l > 0 {
            live(p, l * size)?;
        }
    }
    Ok((t, tiles.into_iter().map(|(p, _)| p).collect()))
}

impl CudaPlugin {
    /// The library launch of `kernel` (library kernel `lib`) on `stream` (`device`, `raw`,
    /// its context current): the handle and arguments checked, the stream's held copies
    /// issued, then the vendor call (module docs).
    pub(super) fn launch_library(
        &self,
        stream: StreamHandle,
        (device, raw): (u32, sys::CUstream),
        kernel: KernelHandle,
        lib: (LibraryKernel, ElemType),
        args: &[LaunchArg],
    ) -> Result<(), PluginError> {
        let call = PluginCall::Launch;
        self.kernels.checked(call, kernel, device, args, false)?;
        let (t, tiles) = {
            let live = self.dev_mem.live();
            decode_call(call, lib, args, |p, b| {
                self.dev_mem.check_in(&live, call, device, p, b)
            })?
        };
        self.flush(call, stream)?;
        let dev = &self.devices[device as usize];
        let streams = self.streams.read();
        let st = streams
            .get(stream.0 as usize)
            .ok_or_else(|| PluginError::InvalidHandle {
                call,
                what: format!("{stream}"),
            })?;
        let state = st
            .library
            .get_or_init(|| {
                let f = dev.solver_info_kernel()?;
                StreamLibrary::new(&dev.ctx, raw, dev.cc.0, f)
            })
            .as_ref()
            .map_err(|e| backend(call)(e.clone()))?;
        let seq = self.call_seq(st);
        // SAFETY: checked above (shapes, no aliasing of the written tile, live tiles of
        // this device); `raw` is the stream the state is bound to; its context is current.
        unsafe { state.issue(&t, lib.1, &tiles, (raw, seq)) }.map_err(backend(call))
    }

    /// Reports (and clears) a `potrf` / `getrf` failure of `stream`'s library calls or of the graphs
    /// launched on it, as the error of `call` (module docs). With `drain` (after the whole
    /// stream completed: `synchronize`) the graphs' records stop being watched.
    pub(super) fn library_failures(
        &self,
        call: PluginCall,
        stream: StreamHandle,
        drain: bool,
    ) -> Result<(), PluginError> {
        let streams = self.streams.read();
        let Some(st) = streams.get(stream.0 as usize) else {
            return Ok(());
        };
        if let Some(Ok(lib)) = st.library.get() {
            lib.sticky.report(call, stream)?;
        }
        let mut w = super::lock(&st.watched);
        let watched = if drain {
            std::mem::take(&mut *w)
        } else {
            w.clone()
        };
        drop(w);
        let mut first = Ok(());
        for s in &watched {
            let r = s.report(call, stream);
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}
