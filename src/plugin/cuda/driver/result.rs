//! Thin result-style wrappers over [`sys`], as cudarc's `driver::result`: each function is
//! one driver call with the same arguments, its status turned into a `Result` whose error
//! names the call ([`DriverError`], e.g. `cuMemcpyHtoDAsync`, the driver's name without
//! the ABI suffix `_v2`). Nothing is added: no context binding, no other driver call, no
//! allocation unless the call fails. So a hot path written with these makes exactly the
//! driver calls it names.
//!
//! Every function needs the driver loaded ([`super::init`]; before that cudarc's loader
//! panics). Functions taking handles or addresses are `unsafe`: the caller guarantees
//! that the handles are live, that the addresses are valid for the bytes named, and that
//! the right context is current where the driver requires it (CUDA Driver API reference,
//! each call's page).

use super::{check, sys, DriverError};
use std::ffi::{c_char, c_void, CStr};

mod streams;
pub use streams::*;

/// `cuInit(0)` (may be called any number of times).
pub fn init() -> Result<(), DriverError> {
    // SAFETY: no pointers; the driver is loaded (module docs).
    check("cuInit", unsafe { sys::cuInit(0) })
}

/// `cuDeviceGetCount`: the number of devices (after [`init`]).
pub fn device_count() -> Result<i32, DriverError> {
    let mut count = 0;
    // SAFETY: valid out-pointer.
    check("cuDeviceGetCount", unsafe {
        sys::cuDeviceGetCount(&mut count)
    })?;
    Ok(count)
}

/// `cuDeviceGet`: the device of ordinal `ordinal` (`0..device_count()`).
pub fn device_get(ordinal: i32) -> Result<sys::CUdevice, DriverError> {
    let mut cu: sys::CUdevice = 0;
    // SAFETY: valid out-pointer; a bad ordinal is an error status.
    check("cuDeviceGet", unsafe { sys::cuDeviceGet(&mut cu, ordinal) })?;
    Ok(cu)
}

/// `cuDeviceGetName`: the device's name, e.g. `NVIDIA H200`.
pub fn device_name(dev: sys::CUdevice) -> Result<String, DriverError> {
    let mut buf = [0 as c_char; 256];
    // SAFETY: `buf` holds 256 bytes; the driver writes a NUL-terminated name.
    check("cuDeviceGetName", unsafe {
        sys::cuDeviceGetName(buf.as_mut_ptr(), buf.len() as i32, dev)
    })?;
    // SAFETY: NUL-terminated within `buf` (above).
    Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned())
}

/// `cuDriverGetVersion`: the driver's CUDA version as `major.minor`.
pub fn driver_version() -> Result<String, DriverError> {
    let mut v = 0;
    // SAFETY: valid out-pointer.
    check("cuDriverGetVersion", unsafe {
        sys::cuDriverGetVersion(&mut v)
    })?;
    Ok(format!("{}.{}", v / 1000, (v % 1000) / 10))
}

/// Compute capability `(major, minor)` of `dev` (two `cuDeviceGetAttribute`).
pub fn compute_capability(dev: sys::CUdevice) -> Result<(i32, i32), DriverError> {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: valid out-pointers and attribute ids.
    unsafe {
        check(
            "cuDeviceGetAttribute",
            sys::cuDeviceGetAttribute(
                &mut major,
                sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                dev,
            ),
        )?;
        check(
            "cuDeviceGetAttribute",
            sys::cuDeviceGetAttribute(
                &mut minor,
                sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                dev,
            ),
        )?;
    }
    Ok((major, minor))
}

/// Whether `dev` has unified addressing (`CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING`): host
/// memory from `cuMemHostAlloc` is then addressable by kernels at its host address.
pub fn unified_addressing(dev: sys::CUdevice) -> Result<bool, DriverError> {
    let mut v = 0;
    // SAFETY: valid out-pointer and attribute id.
    check("cuDeviceGetAttribute(UNIFIED_ADDRESSING)", unsafe {
        sys::cuDeviceGetAttribute(
            &mut v,
            sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING,
            dev,
        )
    })?;
    Ok(v == 1)
}

/// `cuDevicePrimaryCtxRetain`: the primary context of `dev`, its reference count + 1.
pub fn primary_ctx_retain(dev: sys::CUdevice) -> Result<sys::CUcontext, DriverError> {
    let mut ctx: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: valid out-pointer; a bad device is an error status.
    check("cuDevicePrimaryCtxRetain", unsafe {
        sys::cuDevicePrimaryCtxRetain(&mut ctx, dev)
    })?;
    Ok(ctx)
}

/// `cuDevicePrimaryCtxRelease`: undoes one [`primary_ctx_retain`].
///
/// # Safety
/// Once per retain; no handle of the context is used after the last release.
pub unsafe fn primary_ctx_release(dev: sys::CUdevice) -> Result<(), DriverError> {
    check(
        "cuDevicePrimaryCtxRelease",
        sys::cuDevicePrimaryCtxRelease_v2(dev),
    )
}

/// `cuCtxGetCurrent`: the calling thread's current context (null if none).
#[inline]
pub fn ctx_get_current() -> Result<sys::CUcontext, DriverError> {
    let mut cur: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: valid out-pointer; reads the calling thread's state.
    check("cuCtxGetCurrent", unsafe { sys::cuCtxGetCurrent(&mut cur) })?;
    Ok(cur)
}

/// `cuCtxSetCurrent`: makes `ctx` current on the calling thread.
///
/// # Safety
/// `ctx` is a live (retained) context.
#[inline]
pub unsafe fn ctx_set_current(ctx: sys::CUcontext) -> Result<(), DriverError> {
    check("cuCtxSetCurrent", sys::cuCtxSetCurrent(ctx))
}

/// `cuDeviceGetDefaultMemPool`: the pool `cuMemAllocAsync` draws from on `dev`.
pub fn device_default_mem_pool(dev: sys::CUdevice) -> Result<sys::CUmemoryPool, DriverError> {
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: valid out-pointer; a bad device is an error status.
    check("cuDeviceGetDefaultMemPool", unsafe {
        sys::cuDeviceGetDefaultMemPool(&mut pool, dev)
    })?;
    Ok(pool)
}

/// `cuMemPoolSetAttribute(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)`: bytes the pool keeps
/// reserved at a synchronize instead of giving them back to the system.
///
/// # Safety
/// `pool` is a live memory pool.
pub unsafe fn mem_pool_set_release_threshold(
    pool: sys::CUmemoryPool,
    bytes: u64,
) -> Result<(), DriverError> {
    let mut threshold: u64 = bytes;
    // `threshold` outlives the call; the attribute takes a `cuuint64_t`.
    check(
        "cuMemPoolSetAttribute(RELEASE_THRESHOLD)",
        sys::cuMemPoolSetAttribute(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            &mut threshold as *mut u64 as *mut c_void,
        ),
    )
}

/// `cuMemPoolSetAttribute(CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES)`: whether
/// the pool may reuse memory freed on another stream by inserting hidden cross-stream
/// waits.
///
/// # Safety
/// `pool` is a live memory pool.
pub unsafe fn mem_pool_set_reuse_internal_dependencies(
    pool: sys::CUmemoryPool,
    allow: bool,
) -> Result<(), DriverError> {
    let mut v: i32 = allow as i32;
    // `v` outlives the call; the attribute takes an `int`.
    check(
        "cuMemPoolSetAttribute(REUSE_ALLOW_INTERNAL_DEPENDENCIES)",
        sys::cuMemPoolSetAttribute(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES,
            &mut v as *mut i32 as *mut c_void,
        ),
    )
}

/// `cuEventCreate` in the current context with `flags` (0: with timing; 2:
/// `CU_EVENT_DISABLE_TIMING`).
pub fn event_create(flags: u32) -> Result<sys::CUevent, DriverError> {
    let mut e: sys::CUevent = std::ptr::null_mut();
    // SAFETY: valid out-pointer; without a current context the driver returns an error.
    check("cuEventCreate", unsafe {
        sys::cuEventCreate(&mut e, flags)
    })?;
    Ok(e)
}

/// `cuEventDestroy`: a recorded event may be destroyed while pending (the driver releases
/// it when it completes).
///
/// # Safety
/// A live event, destroyed once and not used afterwards.
pub unsafe fn event_destroy(event: sys::CUevent) -> Result<(), DriverError> {
    check("cuEventDestroy", sys::cuEventDestroy_v2(event))
}

/// `cuEventRecord`: `event` captures the work issued to `stream` so far.
///
/// # Safety
/// A live event and a live stream of the same context.
#[inline]
pub unsafe fn event_record(event: sys::CUevent, stream: sys::CUstream) -> Result<(), DriverError> {
    check("cuEventRecord", sys::cuEventRecord(event, stream))
}

/// `cuEventQuery`: whether the work `event` captured has completed (`CUDA_SUCCESS`) or
/// not yet (`CUDA_ERROR_NOT_READY`), without blocking; other codes are errors.
///
/// # Safety
/// A live event.
#[inline]
pub unsafe fn event_query(event: sys::CUevent) -> Result<bool, DriverError> {
    match sys::cuEventQuery(event) {
        sys::cudaError_enum::CUDA_ERROR_NOT_READY => Ok(false),
        r => check("cuEventQuery", r).map(|()| true),
    }
}

/// `cuEventSynchronize`: blocks until the work `event` captured has completed.
///
/// # Safety
/// A live event.
pub unsafe fn event_synchronize(event: sys::CUevent) -> Result<(), DriverError> {
    check("cuEventSynchronize", sys::cuEventSynchronize(event))
}

/// `cuEventElapsedTime_v2` (CUDA 12.8+; the only name CUDA 13 keeps): milliseconds from
/// `start` to `end` (both completed).
///
/// # Safety
/// Live events with timing, of one context.
pub unsafe fn event_elapsed_time(
    start: sys::CUevent,
    end: sys::CUevent,
) -> Result<f32, DriverError> {
    let mut ms = 0f32;
    check(
        "cuEventElapsedTime",
        sys::cuEventElapsedTime_v2(&mut ms, start, end),
    )?;
    Ok(ms)
}

/// `cuMemAlloc`: `bytes` bytes of device memory in the current context.
pub fn mem_alloc(bytes: usize) -> Result<sys::CUdeviceptr, DriverError> {
    let mut p: sys::CUdeviceptr = 0;
    // SAFETY: valid out-pointer; without a current context the driver returns an error.
    check("cuMemAlloc", unsafe { sys::cuMemAlloc_v2(&mut p, bytes) })?;
    Ok(p)
}

/// `cuMemGetInfo`: `(free, total)` bytes of the current context's device (free: what
/// no process and no memory pool holds now).
pub fn mem_get_info() -> Result<(u64, u64), DriverError> {
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: valid out-pointers; without a current context the driver returns an error.
    check("cuMemGetInfo", unsafe {
        sys::cuMemGetInfo_v2(&mut free, &mut total)
    })?;
    Ok((free as u64, total as u64))
}

/// `cuMemFree`: frees device memory at once (synchronous).
///
/// # Safety
/// A live allocation of the current context, freed once, that no pending work uses.
pub unsafe fn mem_free(ptr: sys::CUdeviceptr) -> Result<(), DriverError> {
    check("cuMemFree", sys::cuMemFree_v2(ptr))
}

/// `cuMemAllocAsync`: `bytes` bytes from the device's default pool, usable by work issued
/// to `stream` afterwards (and by other streams behind an event).
///
/// # Safety
/// A live stream of the current context.
#[inline]
pub unsafe fn mem_alloc_async(
    bytes: usize,
    stream: sys::CUstream,
) -> Result<sys::CUdeviceptr, DriverError> {
    let mut p: sys::CUdeviceptr = 0;
    check(
        "cuMemAllocAsync",
        sys::cuMemAllocAsync(&mut p, bytes, stream),
    )?;
    Ok(p)
}

/// `cuMemFreeAsync`: frees `ptr` after the work issued to `stream` so far.
///
/// # Safety
/// A live allocation, freed once; no work issued later (on any stream) uses it.
#[inline]
pub unsafe fn mem_free_async(
    ptr: sys::CUdeviceptr,
    stream: sys::CUstream,
) -> Result<(), DriverError> {
    check("cuMemFreeAsync", sys::cuMemFreeAsync(ptr, stream))
}

/// `cuMemsetD8Async`: sets `bytes` bytes at `ptr` to `value`, in stream order.
///
/// # Safety
/// `ptr..ptr + bytes` lies in live device memory; a live stream of the current context.
#[inline]
pub unsafe fn memset_d8_async(
    ptr: sys::CUdeviceptr,
    value: u8,
    bytes: usize,
    stream: sys::CUstream,
) -> Result<(), DriverError> {
    check(
        "cuMemsetD8Async",
        sys::cuMemsetD8Async(ptr, value, bytes, stream),
    )
}

/// `cuMemcpyHtoDAsync`: copies `bytes` bytes from host `src` to device `dst`, in stream
/// order (asynchronous for pinned `src`).
///
/// # Safety
/// Both ranges valid for `bytes` bytes until the copy has run; the host does not rewrite
/// `src` before then; a live stream of the current context.
#[inline]
pub unsafe fn memcpy_htod_async(
    dst: sys::CUdeviceptr,
    src: *const c_void,
    bytes: usize,
    stream: sys::CUstream,
) -> Result<(), DriverError> {
    check(
        "cuMemcpyHtoDAsync",
        sys::cuMemcpyHtoDAsync_v2(dst, src, bytes, stream),
    )
}

/// `cuMemcpyDtoHAsync`: copies `bytes` bytes from device `src` to host `dst`, in stream
/// order (asynchronous for pinned `dst`).
///
/// # Safety
/// Both ranges valid for `bytes` bytes until the copy has run; the host does not touch
/// `dst` before then; a live stream of the current context.
#[inline]
pub unsafe fn memcpy_dtoh_async(
    dst: *mut c_void,
    src: sys::CUdeviceptr,
    bytes: usize,
    stream: sys::CUstream,
) -> Result<(), DriverError> {
    check(
        "cuMemcpyDtoHAsync",
        sys::cuMemcpyDtoHAsync_v2(dst, src, bytes, stream),
    )
}

/// `cuMemHostAlloc`: `bytes` bytes of page-locked host memory with `flags` (e.g.
/// `CU_MEMHOSTALLOC_PORTABLE`), in the current context.
pub fn mem_host_alloc(bytes: usize, flags: u32) -> Result<*mut c_void, DriverError> {
    let mut p: *mut c_void = std::ptr::null_mut();
    // SAFETY: valid out-pointer; without a current context the driver returns an error.
    check("cuMemHostAlloc", unsafe {
        sys::cuMemHostAlloc(&mut p, bytes, flags)
    })?;
    Ok(p)
}

/// `cuMemFreeHost`: frees page-locked host memory.
///
/// # Safety
/// A live block from `cuMemHostAlloc`, freed once, that no pending work uses.
pub unsafe fn mem_free_host(ptr: *mut c_void) -> Result<(), DriverError> {
    check("cuMemFreeHost", sys::cuMemFreeHost(ptr))
}

/// `cuModuleLoadData`: loads a module image into the current context.
///
/// # Safety
/// `image` points at a CUBIN, fatbin or NUL-terminated PTX, alive for the call.
pub unsafe fn module_load_data(image: *const c_void) -> Result<sys::CUmodule, DriverError> {
    let mut m: sys::CUmodule = std::ptr::null_mut();
    check("cuModuleLoadData", sys::cuModuleLoadData(&mut m, image))?;
    Ok(m)
}

/// `cuModuleUnload`.
///
/// # Safety
/// A live module, unloaded once; no kernel of it runs or is launched afterwards.
pub unsafe fn module_unload(module: sys::CUmodule) -> Result<(), DriverError> {
    check("cuModuleUnload", sys::cuModuleUnload(module))
}

/// `cuModuleGetFunction`: the kernel `name` of `module`; the error names the symbol
/// (`cuModuleGetFunction("saxpy_f32")`).
///
/// # Safety
/// A live module.
pub unsafe fn module_get_function(
    module: sys::CUmodule,
    name: &CStr,
) -> Result<sys::CUfunction, DriverError> {
    let mut f: sys::CUfunction = std::ptr::null_mut();
    let r = sys::cuModuleGetFunction(&mut f, module, name.as_ptr());
    if r != sys::CUresult::CUDA_SUCCESS {
        let call = format!("cuModuleGetFunction(\"{}\")", name.to_string_lossy());
        return Err(DriverError::new(call, r));
    }
    Ok(f)
}

/// `cuLaunchKernel(f, grid.0, grid.1, grid.2, block.0, block.1, block.2, shared, stream,
/// params, null)`.
///
/// # Safety
/// `f` is a live function of the current context; `params` points at one pointer per
/// kernel parameter, in order, each at a value of that parameter's type, alive for the
/// call (the driver copies them); every address they carry is valid for what the kernel
/// touches until it has run; a live stream of the current context.
#[inline]
pub unsafe fn launch_kernel(
    f: sys::CUfunction,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    shared_bytes: u32,
    stream: sys::CUstream,
    params: *mut *mut c_void,
) -> Result<(), DriverError> {
    check(
        "cuLaunchKernel",
        sys::cuLaunchKernel(
            f,
            grid.0,
            grid.1,
            grid.2,
            block.0,
            block.1,
            block.2,
            shared_bytes,
            stream,
            params,
            std::ptr::null_mut(),
        ),
    )
}

/// `cuGraphCreate(&graph, 0)`: an empty graph (a template to add nodes to).
pub fn graph_create() -> Result<sys::CUgraph, DriverError> {
    let mut g: sys::CUgraph = std::ptr::null_mut();
    // SAFETY: valid out-pointer; flags must be 0.
    check("cuGraphCreate", unsafe { sys::cuGraphCreate(&mut g, 0) })?;
    Ok(g)
}

/// `cuGraphDestroy`: destroys a graph template and its nodes (executable graphs
/// instantiated from it are independent of it).
///
/// # Safety
/// A live graph, destroyed once; none of its node handles is used afterwards.
pub unsafe fn graph_destroy(graph: sys::CUgraph) -> Result<(), DriverError> {
    check("cuGraphDestroy", sys::cuGraphDestroy(graph))
}

/// `cuGraphAddEmptyNode(&node, graph, null, 0)`: a node that does nothing (it still
/// orders its predecessors before its successors).
///
/// # Safety
/// A live graph.
pub unsafe fn graph_add_empty_node(graph: sys::CUgraph) -> Result<sys::CUgraphNode, DriverError> {
    let mut n: sys::CUgraphNode = std::ptr::null_mut();
    check(
        "cuGraphAddEmptyNode",
        sys::cuGraphAddEmptyNode(&mut n, graph, std::ptr::null(), 0),
    )?;
    Ok(n)
}

/// `cuGraphAddKernelNode(&node, graph, null, 0, params)` (the `_v2` ABI), without
/// dependencies. The driver copies the kernel parameters during the call.
///
/// # Safety
/// A live graph; `params.func` a live function of the current context; `kernelParams`
/// points at one pointer per kernel parameter, each at a value of that parameter's type,
/// alive for the call; every address they carry stays valid while the graph is launched.
pub unsafe fn graph_add_kernel_node(
    graph: sys::CUgraph,
    params: &sys::CUDA_KERNEL_NODE_PARAMS,
) -> Result<sys::CUgraphNode, DriverError> {
    let mut n: sys::CUgraphNode = std::ptr::null_mut();
    check(
        "cuGraphAddKernelNode",
        sys::cuGraphAddKernelNode_v2(&mut n, graph, std::ptr::null(), 0, params),
    )?;
    Ok(n)
}

/// `cuGraphAddMemcpyNode(&node, graph, null, 0, params, ctx)`, without dependencies.
///
/// # Safety
/// A live graph and context; the ranges `params` names stay valid while the graph is
/// launched.
pub unsafe fn graph_add_memcpy_node(
    graph: sys::CUgraph,
    params: &sys::CUDA_MEMCPY3D,
    ctx: sys::CUcontext,
) -> Result<sys::CUgraphNode, DriverError> {
    let mut n: sys::CUgraphNode = std::ptr::null_mut();
    check(
        "cuGraphAddMemcpyNode",
        sys::cuGraphAddMemcpyNode(&mut n, graph, std::ptr::null(), 0, params, ctx),
    )?;
    Ok(n)
}

/// `cuGraphAddMemsetNode(&node, graph, null, 0, params, ctx)`, without dependencies.
///
/// # Safety
/// A live graph and context; the device range `params` names stays valid while the
/// graph is launched.
pub unsafe fn graph_add_memset_node(
    graph: sys::CUgraph,
    params: &sys::CUDA_MEMSET_NODE_PARAMS,
    ctx: sys::CUcontext,
) -> Result<sys::CUgraphNode, DriverError> {
    let mut n: sys::CUgraphNode = std::ptr::null_mut();
    check(
        "cuGraphAddMemsetNode",
        sys::cuGraphAddMemsetNode(&mut n, graph, std::ptr::null(), 0, params, ctx),
    )?;
    Ok(n)
}

/// `cuGraphAddDependencies_v2(graph, from, to, null, n)` (CUDA 12.3+; CUDA 13 has only
/// this form): edge `from[k] → to[k]` for every `k`, with default edge data (a full
/// dependency, as the unversioned call made).
///
/// # Safety
/// A live graph; `from` and `to` of equal length, nodes of that graph.
pub unsafe fn graph_add_dependencies(
    graph: sys::CUgraph,
    from: &[sys::CUgraphNode],
    to: &[sys::CUgraphNode],
) -> Result<(), DriverError> {
    debug_assert_eq!(from.len(), to.len());
    check(
        "cuGraphAddDependencies",
        sys::cuGraphAddDependencies_v2(
            graph,
            from.as_ptr(),
            to.as_ptr(),
            std::ptr::null(),
            from.len().min(to.len()),
        ),
    )
}

/// `cuGraphGetEdges_v2(graph, from, to, null, &n)` (CUDA 12.3+; CUDA 13 has only this
/// form): with null arrays, the number of edges; else fills up to `*n` edges and sets
/// `*n` to the number of edges (edge data not asked for).
///
/// # Safety
/// A live graph; `from` and `to` null, or valid for `*n` node handles each.
pub unsafe fn graph_get_edges(
    graph: sys::CUgraph,
    from: *mut sys::CUgraphNode,
    to: *mut sys::CUgraphNode,
    n: &mut usize,
) -> Result<(), DriverError> {
    check(
        "cuGraphGetEdges",
        sys::cuGraphGetEdges_v2(graph, from, to, std::ptr::null_mut(), n),
    )
}

/// `cuGraphInstantiateWithFlags(&exec, graph, flags)`: an executable graph.
///
/// # Safety
/// A live graph; the context its nodes were made in is current.
pub unsafe fn graph_instantiate(
    graph: sys::CUgraph,
    flags: u64,
) -> Result<sys::CUgraphExec, DriverError> {
    let mut e: sys::CUgraphExec = std::ptr::null_mut();
    check(
        "cuGraphInstantiateWithFlags",
        sys::cuGraphInstantiateWithFlags(&mut e, graph, flags),
    )?;
    Ok(e)
}

/// `cuGraphExecDestroy`: an executable graph in flight is freed when it completes.
///
/// # Safety
/// A live executable graph, destroyed once.
pub unsafe fn graph_exec_destroy(exec: sys::CUgraphExec) -> Result<(), DriverError> {
    check("cuGraphExecDestroy", sys::cuGraphExecDestroy(exec))
}

/// `cuGraphUpload`: uploads `exec` to the device in `stream`'s order, without running it.
///
/// # Safety
/// A live executable graph and a live stream (or null: the legacy stream) of its context.
pub unsafe fn graph_upload(
    exec: sys::CUgraphExec,
    stream: sys::CUstream,
) -> Result<(), DriverError> {
    check("cuGraphUpload", sys::cuGraphUpload(exec, stream))
}

/// `cuGraphLaunch`: runs `exec` as one op of `stream`.
///
/// # Safety
/// A live executable graph and a live stream of its context (current); every address
/// its nodes use is valid until the launch has run.
#[inline]
pub unsafe fn graph_launch(
    exec: sys::CUgraphExec,
    stream: sys::CUstream,
) -> Result<(), DriverError> {
    check("cuGraphLaunch", sys::cuGraphLaunch(exec, stream))
}

/// `cuGraphExecMemcpyNodeSetParams(exec, node, params, ctx)`: later launches of `exec`
/// copy as `params` says (same memory types and contexts as the node had).
///
/// # Safety
/// A live executable graph, `node` a memcpy node of the graph it was instantiated from;
/// the ranges `params` names stay valid while the graph is launched; no launch of `exec`
/// is in flight that must see the old parameters.
pub unsafe fn graph_exec_memcpy_node_set_params(
    exec: sys::CUgraphExec,
    node: sys::CUgraphNode,
    params: &sys::CUDA_MEMCPY3D,
    ctx: sys::CUcontext,
) -> Result<(), DriverError> {
    check(
        "cuGraphExecMemcpyNodeSetParams",
        sys::cuGraphExecMemcpyNodeSetParams(exec, node, params, ctx),
    )
}

/// `cuGraphExecKernelNodeSetParams` (the `_v2` ABI): later launches of `exec` run the
/// kernel node with `params` (same function; the driver copies the parameters).
///
/// # Safety
/// A live executable graph, `node` a kernel node of the graph it was instantiated from;
/// `params` as for [`graph_add_kernel_node`].
pub unsafe fn graph_exec_kernel_node_set_params(
    exec: sys::CUgraphExec,
    node: sys::CUgraphNode,
    params: &sys::CUDA_KERNEL_NODE_PARAMS,
) -> Result<(), DriverError> {
    check(
        "cuGraphExecKernelNodeSetParams",
        sys::cuGraphExecKernelNodeSetParams_v2(exec, node, params),
    )
}

/// `cuStreamBeginCapture_v2(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)`: work issued to
/// `stream` from now on is recorded into a graph instead of run, until
/// [`stream_end_capture`] (CUDA Driver API §6.22 "Stream Management"; thread-local mode:
/// only this thread's unsafe calls, such as a synchronous `cuMemAlloc`, are refused).
///
/// # Safety
/// A live stream of the current context that is not capturing.
pub unsafe fn stream_begin_capture(stream: sys::CUstream) -> Result<(), DriverError> {
    check(
        "cuStreamBeginCapture",
        sys::cuStreamBeginCapture_v2(
            stream,
            sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
        ),
    )
}

/// `cuStreamEndCapture(stream, &graph)`: ends a capture and returns the graph of what
/// was issued (the caller destroys it; a failed capture returns the error, no graph).
///
/// # Safety
/// A live stream capturing since [`stream_begin_capture`] on this thread.
pub unsafe fn stream_end_capture(stream: sys::CUstream) -> Result<sys::CUgraph, DriverError> {
    let mut g: sys::CUgraph = std::ptr::null_mut();
    check(
        "cuStreamEndCapture",
        sys::cuStreamEndCapture(stream, &mut g),
    )?;
    Ok(g)
}

/// `cuGraphAddChildGraphNode(&node, graph, null, 0, child)`: a node running a copy of
/// `child` (the driver clones it: the caller still owns and destroys `child`).
///
/// # Safety
/// Live graphs of the current context; `child` holds no memory-allocation node.
pub unsafe fn graph_add_child_graph_node(
    graph: sys::CUgraph,
    child: sys::CUgraph,
) -> Result<sys::CUgraphNode, DriverError> {
    let mut n: sys::CUgraphNode = std::ptr::null_mut();
    check(
        "cuGraphAddChildGraphNode",
        sys::cuGraphAddChildGraphNode(&mut n, graph, std::ptr::null(), 0, child),
    )?;
    Ok(n)
}
