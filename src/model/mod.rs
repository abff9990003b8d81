//! The program model: buffers, sections, kernels and OpenMP-style constructs, plus a
//! builder for writing programs in Rust.

mod builder;
mod embedded;
mod kernels;
pub mod library;
pub mod limits;
mod num;
mod program;
pub mod residual;
mod synthetic;
pub mod taskbench;
pub mod tiled;
pub mod tiled_lu;
mod tiled_shape;
mod typed;
mod types;

pub use crate::runtime::views::{BoxError, HostBuf, HostCtx, HostFnError, KernelArgs, ViewError};
pub use builder::{DataBuilder, ProgramBuilder, RegionBuilder, Sel};
pub(crate) use embedded::RustKernelError;
pub use embedded::{CudaCode, HostFn, KernelBuilder, RustKernel};
pub use kernels::{
    builtin_kernel, builtin_kernels, builtin_write_extent, check_builtin_sizes, find_kernel,
    kernel_names, unknown_kernel_help, Access, CallError, CostHint, KernelSig, KernelSource, Param,
    ParamKind, SPIN_MAX_US,
};
pub use library::{Diag, Flag, LibraryCall, LibraryKernel, Side, Trans, Uplo};
pub use num::Num;
pub use program::*;
pub use synthetic::{blocked_matmul, fanout_shared, saxpy_regions, synthetic, wavefront};
pub use taskbench::{
    taskbench_program, TaskBenchError, TaskBenchKernel, TaskBenchParams, TaskBenchPattern,
    TaskBenchSpec,
};
pub use tiled::{
    tiled_cholesky, tiled_cholesky_lookahead, tiled_cholesky_priority, tiled_gemm,
    try_tiled_cholesky, try_tiled_cholesky_lookahead, try_tiled_cholesky_priority, try_tiled_gemm,
    DataStyle, MatrixInit, Tiling, TilingError,
};
pub use tiled_lu::{tiled_lu, tiled_lu_lookahead, try_tiled_lu, try_tiled_lu_lookahead};
pub(crate) use typed::foreign_handle;
pub use typed::{Buf, Elem, ProgramTag, TypedSection};
pub use types::{
    escape_controls, escape_controls_but_lines, escape_quoted, human_bytes, unescape_quoted,
    Buffer, BufferId, ElemType, Init, Section, SectionDisplay,
};
