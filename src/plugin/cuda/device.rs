//! One device of the CUDA plugin: its retained primary context, what the plugin asks of
//! it (name, architecture, unified addressing), its memory pool set up for
//! stream-ordered reuse, and its built-in module (compiled and loaded on first use).

use super::driver::{self, result, sys, Context, Module};
use super::modules;
use std::sync::{Arc, OnceLock};

/// A device opened by [`Device::open`].
pub(super) struct Device {
    /// The built-in kernels (`builtins.cu`), loaded on first use. Declared before `ctx`:
    /// unloaded before the context's last reference goes.
    builtins: OnceLock<Result<Module, String>>,
    /// The built-in `offload_copy_batch` kernel (looked up with the first batch).
    copy_batch: OnceLock<Result<sys::CUfunction, String>>,
    /// The built-in `offload_solver_info` kernel (looked up with the first library call).
    solver_info: OnceLock<Result<sys::CUfunction, String>>,
    pub(super) ctx: Arc<Context>,
    pub(super) name: String,
    /// Compute capability `(major, minor)`.
    pub(super) cc: (i32, i32),
    /// Unified addressing: pinned host memory is device-addressable at its host address
    /// (`CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING`), which the copy kernel needs.
    pub(super) unified: bool,
}

// SAFETY: `copy_batch` holds a driver function handle, immutable and usable from any
// thread once its context is current (every launch binds it); the rest is `Send + Sync`.
unsafe impl Send for Device {}
// SAFETY: as above.
unsafe impl Sync for Device {}

impl Device {
    /// Opens device `ordinal`: retains its primary context, reads its name, compute
    /// capability and unified addressing, makes the context current, and sets the default
    /// memory pool's release threshold to `u64::MAX`, so freed device memory stays in the
    /// pool and is reused without syncs. `OFFLOAD_CUDA_POOL_DEPS=0` in the environment (an
    /// experiment knob) also stops the pool from reusing memory freed on another stream by
    /// inserting hidden cross-stream waits.
    ///
    /// Errors: the first failing driver call, named.
    pub(super) fn open(ordinal: i32) -> Result<Device, driver::DriverError> {
        let ctx = Context::retain_primary(ordinal)?;
        let cu = ctx.device();
        let dev = Device {
            builtins: OnceLock::new(),
            copy_batch: OnceLock::new(),
            solver_info: OnceLock::new(),
            name: result::device_name(cu)?,
            cc: result::compute_capability(cu)?,
            unified: result::unified_addressing(cu)?,
            ctx,
        };
        dev.ctx.bind()?;
        let pool = result::device_default_mem_pool(cu)?;
        // SAFETY: the device's default pool, alive as long as the device.
        unsafe { result::mem_pool_set_release_threshold(pool, u64::MAX)? };
        if std::env::var("OFFLOAD_CUDA_POOL_DEPS").is_ok_and(|v| v == "0") {
            // SAFETY: as above.
            unsafe { result::mem_pool_set_reuse_internal_dependencies(pool, false)? };
        }
        Ok(dev)
    }

    /// The built-in module, compiled (once per process and architecture) and loaded
    /// (once per device) on first use; the compile or load error otherwise, every time.
    pub(super) fn builtins(&self) -> Result<&Module, String> {
        self.builtins
            .get_or_init(|| {
                let cubin = modules::builtins_cubin(self.cc.0, self.cc.1)?;
                // SAFETY: a CUBIN from NVRTC.
                unsafe { Module::load(&self.ctx, &cubin) }.map_err(String::from)
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The built-in copy kernel (compiles the built-ins on first use).
    pub(super) fn copy_kernel(&self) -> Result<sys::CUfunction, String> {
        self.copy_batch
            .get_or_init(|| {
                self.builtins()
                    .and_then(|m| modules::function(m, "offload_copy_batch"))
            })
            .clone()
    }

    /// The built-in `offload_solver_info` kernel (`library.rs`; compiles the built-ins on
    /// first use).
    pub(super) fn solver_info_kernel(&self) -> Result<sys::CUfunction, String> {
        self.solver_info
            .get_or_init(|| {
                self.builtins()
                    .and_then(|m| modules::function(m, "offload_solver_info"))
            })
            .clone()
    }
}
