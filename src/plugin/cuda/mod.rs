//! The CUDA plugin (feature `cuda`): the [`crate::plugin::Plugin`] contract on the CUDA
//! driver API through cudarc's raw `sys` layer (so nothing adds its own syncs or event
//! tracking: the schedule's events are the only synchronization).
//!
//! - **Driver.** Loaded at run time ([`probe`] says why not, in one line, instead of
//!   panicking). One primary context per device.
//! - **Streams.** A per-device pool of non-blocking streams, created once and grown on
//!   demand (`create_streams`). The driver gives a device 8 hardware queues unless
//!   `CUDA_DEVICE_MAX_CONNECTIONS` says more; streams beyond that share queues and are
//!   serialized on them. `driver::raise_device_connections` asks for 32 (the
//!   project's binaries call it at the start of `main`; an application calls it itself,
//!   or sets the variable).
//! - **Events.** `CU_EVENT_DISABLE_TIMING`, pooled: `destroy_event` returns the event to
//!   a per-device free list (contract rule 2 allows re-recording). A host wait on one
//!   event is `cuEventSynchronize` (`synchronize_event`); a record first issues the
//!   stream's held copies, so the event captures them.
//! - **Memory.** Device memory is stream-ordered (`cuMemAllocAsync` / `cuMemFreeAsync` on
//!   the op's stream) from the device's default pool, whose release threshold is
//!   `u64::MAX` so freed memory is reused without syncs. Host memory is pinned
//!   (`cuMemHostAlloc`, `PORTABLE`, not write-combined since the host reads D2H results);
//!   freed blocks are cached for reuse up to `CudaPluginOptions::host_cache_bytes`.
//!   Every address passed in is checked against the live allocations.
//! - **Copies.** `cuMemcpyHtoDAsync` / `cuMemcpyDtoHAsync` on the stream; copies of at
//!   most `CudaPluginOptions::batch_copy_max_bytes` (64 KiB) that follow each other on a
//!   stream are batched into one launch of a copy kernel on the SMs (`batch.rs`).
//! - **Graphs.** A `GraphDesc` becomes a CUDA graph built node by node (kernel, memset,
//!   copy-kernel or memcpy nodes), instantiated and uploaded once, launched with
//!   `cuGraphLaunch`; rebinding host memory updates the copy node's parameters in the
//!   executable graph (`graph.rs`).
//! - **Kernels.** The built-ins (`builtins.cu`, one `extern "C"` entry per kernel and
//!   element type, e.g. `saxpy_f32`) compiled once per process and architecture with NVRTC
//!   to a CUBIN for the device (`sm_XY`), loaded once per device. User kernels come from
//!   the `.cu` (compiled by NVRTC) or `.ptx` file of `KernelSource::User { cuda, .. }`,
//!   relative to `CudaPluginOptions::kernel_dir`; the symbol `NAME_T` (e.g. `foo_f32`)
//!   is tried before `NAME`. ABI: the host plugin's — each buffer `(T*, int64 length in
//!   elements)`, scalars by value.
//! - **Library kernels.** `gemm`, `syrk`, `trsm`, `potrf`, `getrf` (no pivoting; f32, f64)
//!   run with cuBLAS and cuSOLVER (cudarc, loaded at run time like the driver): one handle
//!   pair per stream, workspace from the stream-ordered pool, a `potrf` / `getrf` failure
//!   (LAPACK's `info`, or a NaN factor / non-finite pivot found by a check of the
//!   diagonal) reported at the stream's next synchronize; in graphs, each call captured into a child
//!   graph node (`library.rs`, `capture.rs`).
//! - **Errors.** Every CUDA status is checked; messages name the call and CUDA's error
//!   name and string. `synchronize` and `synchronize_event` report asynchronous failures as
//!   [`crate::plugin::PluginError::Async`]. Releases that cannot return an error (`Drop`)
//!   record it in their context, which logs what is left when it goes (see `driver`).
//!
//! # Layout
//!
//! | file | job |
//! |---|---|
//! | `driver/` | the driver API in layers: loading and errors, `driver::result` (one call each), RAII handles |
//! | `device.rs` | one device: context, name, architecture, memory pool, built-in module |
//! | `streams.rs` | the stream pool and the event pool |
//! | `devmem.rs` | stream-ordered device memory, the live table, the per-stream block cache |
//! | `hostmem.rs` | pinned host memory and its cache |
//! | `copy.rs`, `batch.rs` | copies: copy engines, or small ones batched into one copy-kernel launch |
//! | `modules.rs`, `nvrtc.rs` | built-in and user modules (NVRTC), the kernel table |
//! | `launch.rs` | launch marshalling: signature check, argument slots, grid |
//! | `graph.rs` | plugin graphs as CUDA graphs: node construction, edge readback, host rebinding, launch |
//! | `blas.rs` | cuBLAS and cuSOLVER: loading, handles, status codes as errors, one call per library kernel |
//! | `library.rs` | library tile kernels on streams: a handle pair and workspace per stream, argument checks, `potrf` / `getrf` failures |
//! | `capture.rs`, `slots.rs` | library calls in graphs: stream capture into child graph nodes, workspace slots |
//! | `timing.rs`, `chain.rs` | op timing for traces: kernels, copies and whole copy batches as units, stamped by the copy kernel and the built-ins or between pooled timing events |
//! | `plugin.rs` | `CudaPlugin`: the [`crate::plugin::Plugin`] impl composing the above |
//!
//! (Plain names, not links: the items exist only with the `cuda` feature.)
//!
//! `unsafe` is confined to this module; each block carries a `// SAFETY:` comment.

// Pure bookkeeping, tested without a GPU; used only by the plugin.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
mod batch;
#[cfg(feature = "cuda")]
mod blas;
#[cfg(feature = "cuda")]
mod capture;
// Pure timing rules, tested without a GPU; used only by the plugin.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
mod chain;
#[cfg(feature = "cuda")]
mod copy;
#[cfg(feature = "cuda")]
mod device;
#[cfg(feature = "cuda")]
mod devmem;
#[cfg(feature = "cuda")]
pub mod driver;
#[cfg(feature = "cuda")]
mod graph;
#[cfg(feature = "cuda")]
mod hostmem;
// Pure marshalling, tested without a GPU; used only by the plugin.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
mod launch;
#[cfg(feature = "cuda")]
mod library;
#[cfg(feature = "cuda")]
mod modules;
#[cfg(feature = "cuda")]
mod nvrtc;
#[cfg(feature = "cuda")]
mod peer;
#[cfg(feature = "cuda")]
mod plugin;
// Pure planning of library-call workspaces in graphs, tested without a GPU.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
mod slots;
#[cfg(feature = "cuda")]
mod streams;
#[cfg(feature = "cuda")]
mod timing;

#[cfg(feature = "cuda")]
pub use modules::builtins_cubin;
#[cfg(feature = "cuda")]
pub use plugin::{CudaPlugin, CudaPluginOptions};

/// `m` locked, also after a panic of another holder (the tables stay consistent: every
/// update is a single insert, remove or push).
#[cfg(feature = "cuda")]
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The plugin error of a failed driver or backend step of `call`.
#[cfg(feature = "cuda")]
fn backend<E: Into<String>>(
    call: crate::plugin::PluginCall,
) -> impl Fn(E) -> crate::plugin::PluginError {
    move |e| crate::plugin::PluginError::Backend {
        call,
        message: e.into(),
    }
}

/// Whether a CUDA device can be used: the name of device 0 (e.g. `NVIDIA H200`), or a
/// one-line reason (no driver library, no device, built without the feature). Never
/// panics; loads the driver once per process.
pub fn probe() -> Result<String, String> {
    #[cfg(feature = "cuda")]
    {
        driver::init()?;
        let cu = driver::result::device_get(0)?;
        Ok(driver::result::device_name(cu)?)
    }
    #[cfg(not(feature = "cuda"))]
    {
        Err("built without the `cuda` feature".to_string())
    }
}

/// The driver's CUDA version and the NVRTC library in use, for reports.
pub fn versions() -> Result<String, String> {
    #[cfg(feature = "cuda")]
    {
        driver::init()?;
        let nv = nvrtc::describe().unwrap_or_else(|e| format!("NVRTC unavailable: {e}"));
        Ok(format!(
            "driver CUDA {}; NVRTC {nv}",
            driver::result::driver_version()?
        ))
    }
    #[cfg(not(feature = "cuda"))]
    {
        Err("built without the `cuda` feature".to_string())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn probe_never_panics() {
        match super::probe() {
            Ok(name) => assert!(!name.is_empty()),
            Err(reason) => assert!(!reason.contains('\n'), "{reason}"),
        }
    }
}
