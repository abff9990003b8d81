//! The stream calls of [`super`]: create (with or without a priority), the priority
//! range, destroy, synchronize, query and wait on an event, each one driver call as the
//! rest of `result.rs`.

use super::super::{check, sys, DriverError};

/// `cuStreamCreate` in the current context with `flags` (1: non-blocking).
pub fn stream_create(flags: u32) -> Result<sys::CUstream, DriverError> {
    let mut raw: sys::CUstream = std::ptr::null_mut();
    // SAFETY: valid out-pointer; without a current context the driver returns an error.
    check("cuStreamCreate", unsafe {
        sys::cuStreamCreate(&mut raw, flags)
    })?;
    Ok(raw)
}

/// `cuStreamCreateWithPriority` in the current context with `flags` (1: non-blocking)
/// and `priority` (lower numbers run first; the driver clamps a value outside
/// [`stream_priority_range`]).
pub fn stream_create_with_priority(
    flags: u32,
    priority: i32,
) -> Result<sys::CUstream, DriverError> {
    let mut raw: sys::CUstream = std::ptr::null_mut();
    // SAFETY: valid out-pointer; without a current context the driver returns an error.
    check("cuStreamCreateWithPriority", unsafe {
        sys::cuStreamCreateWithPriority(&mut raw, flags, priority)
    })?;
    Ok(raw)
}

/// `cuCtxGetStreamPriorityRange` of the current context: `(least, greatest)` stream
/// priority; the greatest is the numerically lowest (e.g. `(0, -5)`).
pub fn stream_priority_range() -> Result<(i32, i32), DriverError> {
    let (mut least, mut greatest) = (0, 0);
    // SAFETY: valid out-pointers; without a current context the driver returns an error.
    check("cuCtxGetStreamPriorityRange", unsafe {
        sys::cuCtxGetStreamPriorityRange(&mut least, &mut greatest)
    })?;
    Ok((least, greatest))
}

/// `cuStreamDestroy`: releases `stream` (its pending work still completes).
///
/// # Safety
/// A live stream, destroyed once and not used afterwards.
pub unsafe fn stream_destroy(stream: sys::CUstream) -> Result<(), DriverError> {
    check("cuStreamDestroy", sys::cuStreamDestroy_v2(stream))
}

/// `cuStreamSynchronize`: blocks until `stream`'s issued work has completed; returns the
/// sticky errors of that work.
///
/// # Safety
/// A live stream.
#[inline]
pub unsafe fn stream_synchronize(stream: sys::CUstream) -> Result<(), DriverError> {
    check("cuStreamSynchronize", sys::cuStreamSynchronize(stream))
}

/// `cuStreamQuery`: whether `stream`'s issued work has completed (`CUDA_SUCCESS`) or
/// not yet (`CUDA_ERROR_NOT_READY`), without blocking; other codes are errors (sticky
/// errors of that work).
///
/// # Safety
/// A live stream.
#[inline]
pub unsafe fn stream_query(stream: sys::CUstream) -> Result<bool, DriverError> {
    match sys::cuStreamQuery(stream) {
        sys::cudaError_enum::CUDA_ERROR_NOT_READY => Ok(false),
        r => check("cuStreamQuery", r).map(|()| true),
    }
}

/// `cuStreamWaitEvent(stream, event, 0)`: work issued to `stream` later waits for the
/// work `event` captured at its latest record. The event may belong to another context.
///
/// # Safety
/// A live stream and a live event.
#[inline]
pub unsafe fn stream_wait_event(
    stream: sys::CUstream,
    event: sys::CUevent,
) -> Result<(), DriverError> {
    check(
        "cuStreamWaitEvent",
        sys::cuStreamWaitEvent(stream, event, 0),
    )
}
