//! Several GPUs of one host: peer access between their contexts and memory pools, and
//! [`Plugin::copy_peer`](crate::plugin::Plugin::copy_peer) as `cuMemcpyPeerAsync`.
//!
//! At [`CudaPlugin::new`] every ordered pair of devices `(i, j)` for which
//! `cuDeviceCanAccessPeer(i, j)` holds gets `cuCtxEnablePeerAccess` (i's context may
//! access j's `cuMemAlloc` memory) and `cuMemPoolSetAccess` (device i may read and write
//! j's default pool, which `cuMemAllocAsync` draws from: pool allocations are not covered
//! by context peer access). A pair without peer access still copies: `cuMemcpyPeerAsync`
//! then stages through host memory inside the driver (CUDA Driver API, `cuMemcpyPeer`),
//! so the plugin needs no staging buffers of its own. A failing enable is not an error
//! (logged at `debug`, target `offload_sched::plugin`); that pair copies staged.
//!
//! Events across devices need nothing here: `cuStreamWaitEvent` takes an event of another
//! context (`wait_event` in `plugin.rs`).
//!
//! Not measured yet: no machine of several GPUs was lent when this was written.

use super::backend;
use super::device::Device;
use super::driver::{peer, result};
use super::plugin::{CudaPlugin, Timed};
use crate::plugin::{DevicePtr, PluginCall, PluginError, StreamHandle};

/// Enables peer access for every pair of `devices` the hardware allows; returns
/// `access[i][j]`: device `i` may access device `j`'s memory directly (false on the
/// diagonal). Leaves device 0's context current. `O(devices²)` driver calls.
pub(super) fn enable_peer_access(devices: &[Device]) -> Vec<Vec<bool>> {
    let n = devices.len();
    let mut access = vec![vec![false; n]; n];
    for (i, di) in devices.iter().enumerate() {
        for (j, dj) in devices.iter().enumerate() {
            if i == j {
                continue;
            }
            let r = (|| -> Result<bool, String> {
                if !peer::device_can_access_peer(di.ctx.device(), dj.ctx.device())? {
                    return Ok(false);
                }
                di.ctx.bind()?;
                // SAFETY: live contexts of two different devices, i's current.
                unsafe { peer::ctx_enable_peer_access(dj.ctx.raw())? };
                let pool = result::device_default_mem_pool(dj.ctx.device())?;
                // SAFETY: j's default pool (alive as long as j), i ≠ j.
                unsafe { peer::mem_pool_grant_access(pool, di.ctx.device())? };
                Ok(true)
            })();
            access[i][j] = r.unwrap_or_else(|e| {
                tracing::debug!(target: "offload_sched::plugin", from = i, to = j, error = %e,
                    "peer access not enabled; peer copies between them are staged by the driver");
                false
            });
        }
    }
    if let Some(d0) = devices.first() {
        let _ = d0.ctx.bind();
    }
    access
}

impl CudaPlugin {
    /// Whether device `from` may access device `to`'s memory directly (peer access was
    /// enabled at [`CudaPlugin::new`]); false for a device and itself, or out of range.
    pub fn peer_access(&self, from: u32, to: u32) -> bool {
        self.peer
            .get(from as usize)
            .and_then(|r| r.get(to as usize))
            .copied()
            .unwrap_or(false)
    }

    /// [`crate::plugin::Plugin::copy_peer`]: held copies of `stream` first, then one
    /// `cuMemcpyPeerAsync` on it (timed as one op with option `timing`). Both ranges are
    /// checked against the live allocations of their devices.
    pub(super) fn copy_peer_async(
        &self,
        stream: StreamHandle,
        (dst, dst_device): (DevicePtr, u32),
        (src, src_device): (DevicePtr, u32),
        bytes: u64,
    ) -> Result<(), PluginError> {
        let call = PluginCall::CopyPeer;
        self.stream_call(call, stream, Timed::Op, |device, raw| {
            if device != dst_device {
                return Err(PluginError::Backend {
                    call,
                    message: format!(
                        "{stream} is on device {device}, the destination is on device {dst_device}"
                    ),
                });
            }
            let src_ctx = self.dev(call, src_device)?.ctx.raw();
            let dst_ctx = self.dev(call, dst_device)?.ctx.raw();
            {
                let live = self.dev_mem.live();
                self.dev_mem
                    .check_in(&live, call, dst_device, dst.0, bytes)?;
                self.dev_mem
                    .check_in(&live, call, src_device, src.0, bytes)?;
            }
            self.flush(call, stream)?;
            // SAFETY: both ranges lie inside live allocations of their devices (checked);
            // the executor orders the copy after the source's writer and before its free.
            unsafe { peer::memcpy_peer_async(dst.0, dst_ctx, src.0, src_ctx, bytes as usize, raw) }
                .map_err(backend(call))
        })
    }
}
