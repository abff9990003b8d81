//! Kernel dispatch of the host plugin: kernels loaded through the host-kernel runtime's
//! [`crate::runtime::ffi::KernelLibrary`] (one handle per device, signature and element
//! type), and launches: arguments resolved against the device's memory table and checked
//! against the signature at issue time, the call run by the stream's worker.

use super::stream::{LaunchArgs, Work};
use super::{lock, HostPlugin};
use crate::model::{ElemType, KernelSig, LaunchShape};
use crate::plugin::{KernelHandle, LaunchArg, PluginCall, PluginError, StreamHandle};
use crate::runtime::ffi::{self, RawArg};
use std::sync::Arc;

impl HostPlugin {
    /// [`crate::plugin::Plugin::load_kernel`]: the handle of an equal kernel already
    /// loaded on `device`, or a new one resolved by the kernel library.
    pub(super) fn load_host_kernel(
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

    /// [`crate::plugin::Plugin::launch`]: resolves and checks the arguments now, then
    /// enqueues the call on `stream` (the shape is ignored: one call runs the whole
    /// kernel).
    pub(super) fn launch_host_kernel(
        &self,
        stream: StreamHandle,
        kernel: KernelHandle,
        args: &[LaunchArg],
        _shape: LaunchShape,
    ) -> Result<(), PluginError> {
        let call = PluginCall::Launch;
        self.with_stream(call, stream, |st, send, _| {
            send(self.launch_work(call, st.device, kernel, args)?)
        })
    }

    /// The stream item of a launch of `kernel` with `args` on `device`, checked now:
    /// the kernel is loaded on `device`, every buffer argument lies in live device
    /// memory of `device`, and the arguments match the signature. Also used by graph
    /// launches ([`super::graph`]).
    pub(super) fn launch_work(
        &self,
        call: PluginCall,
        device: u32,
        kernel: KernelHandle,
        args: &[LaunchArg],
    ) -> Result<Work, PluginError> {
        let (kdev, k) = lock(&self.kernels)
            .get(kernel.0 as usize)
            .cloned()
            .ok_or_else(|| PluginError::InvalidHandle {
                call,
                what: format!("kernel {}", kernel.0),
            })?;
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
                    let (b, off) = self.device_range(call, device, ptr.offset(offset), bytes)?;
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
        Ok(Work::Launch {
            kernel: k.clone(),
            args: LaunchArgs(raw),
            blocks,
        })
    }
}
