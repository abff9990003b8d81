//! The host-kernel runtime: kernels callable from the host, and the memory they run on.
//!
//! - [`ffi`]: a kernel's signature checked against its arguments, then called through
//!   libffi with the host ABI (`(T* ptr, int64_t len_elements)` per buffer, scalars by
//!   value); kernels are the built-ins or `extern "C"` symbols of user shared libraries,
//!   resolved by a [`ffi::KernelLibrary`] (the shape of libomptarget's generic-elf host
//!   plugin).
//! - [`kernels`]: the built-in kernel library as `extern "C"` functions, one per kernel
//!   and element type (what [`crate::model::builtin_kernels`] declares).
//! - `blas`: the library tile kernels (`gemm`, `syrk`, `trsm`, `potrf`, `getrf`) with the
//!   system OpenBLAS, one thread per call (what [`crate::model::library`] declares);
//!   `getrf`: LU without pivoting as a recursion of BLAS calls (LAPACK has none).
//! - [`memory`]: 64-byte-aligned, zero-initialised memory blocks.
//! - [`views`] (`views/`: `host_ctx`, `kernel_args`): typed, checked views of that memory for Rust code: host closures
//!   ([`views::HostCtx`]) and kernels written in Rust ([`views::KernelArgs`]).
//!
//! Who uses it: the host plugin ([`crate::plugin::host`]) keeps its "device" and host
//! allocations in [`memory::Block`]s and runs kernel launches through [`ffi`] on its
//! stream workers; the executor ([`crate::exec`]) runs host tasks' kernels on the host
//! buffers; the reference interpreter ([`crate::reference::reference()`]) runs every kernel
//! on blocks of its own. None of it knows about streams, schedules or plugins.

mod blas;
pub mod ffi;
mod getrf;
pub(crate) mod kernels;
pub(crate) mod memory;
mod symbol;
pub(crate) mod views;
