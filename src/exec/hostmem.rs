//! Host-side access to plugin-allocated host memory ([`crate::plugin::HostPtr`]).
//!
//! The executor reads and writes host buffers only where the plugin contract allows it
//! (rule 3: after a host wait covers every op that used the range), or where the
//! schedule says so — a wrong schedule then reads stale values, exactly as on a GPU. The
//! copies go through raw pointers and never hold a Rust reference into the memory, so a
//! concurrently running stream op cannot alias a `&mut`.

use super::{BufferData, Buffers, ExecError};
use crate::model::{Buffer, ElemType};
use crate::plugin::HostPtr;
use crate::runtime::memory::try_vec;

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
/// new `Vec` in one pass (no intermediate byte vector); `None` if the vector cannot be
/// allocated.
///
/// # Safety
/// `ptr..ptr + n * size_of::<T>()` lies inside one live allocation from
/// `Plugin::alloc_host`.
pub(crate) unsafe fn read_vec<T: Plain>(ptr: HostPtr, n: usize) -> Option<Vec<T>> {
    let mut v: Vec<T> = try_vec(n)?;
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
    Some(v)
}

/// The final contents of every buffer (`host[i]`: buffer `i`'s allocation, `None` for
/// one never allocated, read as empty): the run's result snapshot.
///
/// Errors: [`ExecError::Alloc`] naming the buffer whose copy cannot be allocated.
///
/// # Safety
/// Each `host[i]` holds `buffers[i].bytes()` bytes from `Plugin::alloc_host`, live, and
/// no stream writes them meanwhile.
pub(crate) unsafe fn snapshot(
    buffers: &[Buffer],
    host: &[Option<HostPtr>],
) -> Result<Buffers, ExecError> {
    let mut out = Vec::with_capacity(buffers.len());
    for (b, p) in buffers.iter().zip(host) {
        let n = b.len as usize;
        let data = match p {
            // SAFETY (every arm): `p` holds `n` elements of `b.ty` (caller).
            Some(p) => match b.ty {
                ElemType::F32 => unsafe { read_vec(*p, n) }.map(BufferData::F32),
                ElemType::F64 => unsafe { read_vec(*p, n) }.map(BufferData::F64),
                ElemType::I32 => unsafe { read_vec(*p, n) }.map(BufferData::I32),
                ElemType::I64 => unsafe { read_vec(*p, n) }.map(BufferData::I64),
                ElemType::U8 => unsafe { read_vec(*p, n) }.map(BufferData::U8),
            },
            None => Some(BufferData::from_ne_bytes(b.ty, &[])),
        };
        let data = data.ok_or_else(|| ExecError::Alloc {
            what: format!("the result snapshot of buffer \"{}\"", b.name),
            bytes: b.bytes(),
        })?;
        out.push((b.name.clone(), data));
    }
    Ok(Buffers::new(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::{execute, ExecOptions};
    use crate::model::{ElemType, Init, MapType, ProgramBuilder};
    use crate::plugin::null::NullPlugin;
    use crate::runtime::memory::{fail, Block};
    use crate::schedule::{schedule, ScheduleOptions};

    #[test]
    fn a_snapshot_that_cannot_be_allocated_is_an_error_naming_the_buffer() {
        let b = Buffer {
            name: "x".into(),
            ty: ElemType::I32,
            len: 250,
            init: Init::Zeros,
        };
        let block = Block::new(1000).unwrap();
        let host = [Some(HostPtr(block.addr()))];
        // SAFETY: the block holds 1000 bytes = 250 i32; nothing else uses it.
        let s = unsafe { snapshot(std::slice::from_ref(&b), &host) }.unwrap();
        assert_eq!(s.as_i32("x").unwrap(), [0; 250]);
        let _fail = fail::allocations_of(1000);
        // SAFETY: as above.
        let e = unsafe { snapshot(std::slice::from_ref(&b), &host) }.unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot allocate 1000 B of host memory for the result snapshot of buffer \"x\""
        );
    }

    /// Through a whole run: the null plugin's host blocks are whole 64-byte lines (1024
    /// bytes here), the snapshot of the 1000-byte buffer is not; the error comes back and
    /// every host block is freed.
    #[test]
    fn a_run_whose_snapshot_cannot_be_allocated_fails_cleanly() {
        let mut b = ProgramBuilder::new("p");
        let x = b.buffer("x", ElemType::U8, 1000, Init::Iota);
        b.target("inc", "increment").arg(x).map(MapType::ToFrom, x);
        let g = crate::lower::lower(&b.build()).unwrap();
        let s = schedule(&g, &ScheduleOptions::default());
        let p = NullPlugin::new();
        assert!(execute(&g, &s, &p, &ExecOptions::default()).is_ok());
        let _fail = fail::allocations_of(1000);
        let e = execute(&g, &s, &p, &ExecOptions::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot allocate 1000 B of host memory for the result snapshot of buffer \"x\""
        );
        assert_eq!((p.live_host_allocs(), p.live_device_allocs()), (0, 0));
    }
}
