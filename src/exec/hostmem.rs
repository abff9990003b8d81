//! Host-side access to plugin-allocated host memory ([`crate::plugin::HostPtr`]).
//!
//! The executor reads and writes host buffers only where the plugin contract allows it
//! (rule 3: after a host wait covers every op that used the range), or where the
//! schedule says so — a wrong schedule then reads stale values, exactly as on a GPU. The
//! copies go through raw pointers and never hold a Rust reference into the memory, so a
//! concurrently running stream op cannot alias a `&mut`.

use crate::plugin::HostPtr;

/// Copies `data` into host memory at `ptr`.
///
/// # Safety
/// `ptr..ptr + data.len()` lies inside one live allocation from `Plugin::alloc_host`.
pub(crate) unsafe fn write(ptr: HostPtr, data: &[u8]) {
    // SAFETY: the destination range is valid (caller); `data` is a distinct Vec.
    unsafe { std::ptr::copy(data.as_ptr(), ptr.as_ptr(), data.len()) };
}

/// Element types whose every bit pattern is a valid value (plain numbers), so raw bytes
/// can be copied into a `Vec` of them.
pub(crate) trait Plain: Copy {}
impl Plain for f32 {}
impl Plain for f64 {}
impl Plain for i32 {}
impl Plain for i64 {}
impl Plain for u8 {}

/// Copies `n` elements of `T` (native-endian) starting at `ptr` out of host memory into a
/// new `Vec` in one pass (no intermediate byte vector).
///
/// # Safety
/// `ptr..ptr + n * size_of::<T>()` lies inside one live allocation from
/// `Plugin::alloc_host`.
pub(crate) unsafe fn read_vec<T: Plain>(ptr: HostPtr, n: usize) -> Vec<T> {
    let mut v: Vec<T> = Vec::with_capacity(n);
    // SAFETY: the source range is valid (caller); `v` has room for `n` elements, i.e.
    // `n * size_of::<T>()` bytes, and its buffer is a distinct allocation; byte copies
    // need no alignment of the source. Every bit pattern is a valid `T` (`Plain`), so
    // after the copy the first `n` elements are initialised.
    unsafe {
        std::ptr::copy(
            ptr.as_ptr(),
            v.as_mut_ptr() as *mut u8,
            n * std::mem::size_of::<T>(),
        );
        v.set_len(n);
    }
    v
}
