//! Host-side access to plugin-allocated host memory ([`crate::plugin::HostPtr`]).
//!
//! The executor reads and writes host buffers only where the plugin contract allows it
//! (rule 3: after a host wait covers every op that used the range), or where the
//! schedule says so — a wrong schedule then reads stale values, exactly as on a GPU. The
//! copies go through raw pointers and never hold a Rust reference into the memory, so a
//! concurrently running stream op cannot alias a `&mut`.

use crate::plugin::HostPtr;

/// Copies `bytes` bytes starting at `ptr` out of host memory.
///
/// # Safety
/// `ptr..ptr + bytes` lies inside one live allocation from `Plugin::alloc_host`.
pub(crate) unsafe fn read(ptr: HostPtr, bytes: usize) -> Vec<u8> {
    let mut v = vec![0u8; bytes];
    // SAFETY: the source range is valid (caller) and `v` holds `bytes` bytes.
    unsafe { std::ptr::copy(ptr.as_ptr(), v.as_mut_ptr(), bytes) };
    v
}

/// Copies `data` into host memory at `ptr`.
///
/// # Safety
/// `ptr..ptr + data.len()` lies inside one live allocation from `Plugin::alloc_host`.
pub(crate) unsafe fn write(ptr: HostPtr, data: &[u8]) {
    // SAFETY: the destination range is valid (caller); `data` is a distinct Vec.
    unsafe { std::ptr::copy(data.as_ptr(), ptr.as_ptr(), data.len()) };
}
