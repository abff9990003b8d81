//! Driver calls between the GPUs of one host, in the style of [`super::result`]: one
//! driver call each, its status turned into a `Result` naming the call (CUDA Driver API
//! reference, "Peer Context Memory Access" and "Stream Ordered Memory Allocator").

use super::{check, sys, DriverError};

/// `cuDeviceCanAccessPeer`: whether contexts on `dev` may access memory of `peer`
/// directly (NVLink or PCIe peer-to-peer).
pub fn device_can_access_peer(
    dev: sys::CUdevice,
    peer: sys::CUdevice,
) -> Result<bool, DriverError> {
    let mut can: std::ffi::c_int = 0;
    // SAFETY: valid out-pointer; bad devices are an error status.
    check("cuDeviceCanAccessPeer", unsafe {
        sys::cuDeviceCanAccessPeer(&mut can, dev, peer)
    })?;
    Ok(can != 0)
}

/// `cuCtxEnablePeerAccess(peer, 0)`: the current context may access `peer`'s memory
/// (allocations made with `cuMemAlloc`; pool allocations need [`mem_pool_grant_access`]).
/// `CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED` is success.
///
/// # Safety
/// `peer` is a live context of another device; a context is current.
pub unsafe fn ctx_enable_peer_access(peer: sys::CUcontext) -> Result<(), DriverError> {
    let r = sys::cuCtxEnablePeerAccess(peer, 0);
    if r == sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED {
        return Ok(());
    }
    check("cuCtxEnablePeerAccess", r)
}

/// `cuMemPoolSetAccess`: device `peer` may read and write every allocation of `pool`
/// (a device's default pool: what `cuMemAllocAsync` draws from), present and future.
///
/// # Safety
/// `pool` is a live memory pool of another device than `peer`.
pub unsafe fn mem_pool_grant_access(
    pool: sys::CUmemoryPool,
    peer: sys::CUdevice,
) -> Result<(), DriverError> {
    let desc = sys::CUmemAccessDesc {
        location: sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: peer,
        },
        flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
    };
    check(
        "cuMemPoolSetAccess",
        sys::cuMemPoolSetAccess(pool, &desc, 1),
    )
}

/// `cuMemcpyPeerAsync`: copies `bytes` bytes from `src` in context `src_ctx` to `dst` in
/// context `dst_ctx`, in `stream`'s order. Works without peer access too: the driver then
/// stages the copy through host memory itself (CUDA Driver API, `cuMemcpyPeer`).
///
/// # Safety
/// Both ranges valid for `bytes` bytes in their contexts until the copy has run; a live
/// stream.
pub unsafe fn memcpy_peer_async(
    dst: sys::CUdeviceptr,
    dst_ctx: sys::CUcontext,
    src: sys::CUdeviceptr,
    src_ctx: sys::CUcontext,
    bytes: usize,
    stream: sys::CUstream,
) -> Result<(), DriverError> {
    check(
        "cuMemcpyPeerAsync",
        sys::cuMemcpyPeerAsync(dst, dst_ctx, src, src_ctx, bytes, stream),
    )
}
