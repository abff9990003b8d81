//! [`PinnedBuf`]: page-locked host memory the plugin owns, handed to the application.

use super::hold::Hold;
use crate::model::Elem;
use crate::plugin::{HostPtr, Plugin, PluginError};
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};

/// `len` elements of `T` in host memory from [`Plugin::alloc_host`] (page-locked on the
/// CUDA plugin: `cuMemHostAlloc`), zeroed when made; derefs to `[T]`. Bound to a run
/// ([`crate::Bindings::pinned_input`], [`crate::Bindings::pinned_output`]) its memory is
/// used by the copies in place: no staging copy, no per-run cost in its size. Freed on
/// drop (an error then is logged). Made by [`crate::Session::pinned`]; `'p` is the
/// session's (`'static` for a [`crate::Session::shared`] one, whose buffers keep the
/// plugin alive).
pub struct PinnedBuf<'p, T: Elem> {
    ptr: HostPtr,
    len: usize,
    plugin: Hold<'p, dyn Plugin + 'p>,
    _t: PhantomData<T>,
}

impl<'p, T: Elem> PinnedBuf<'p, T> {
    /// `len` zeroed elements from `plugin`. Errors: the plugin's (out of memory), or
    /// [`PluginError::OutOfMemory`] when `len × size_of::<T>()` overflows.
    pub(crate) fn new(
        plugin: Hold<'p, dyn Plugin + 'p>,
        len: usize,
    ) -> Result<PinnedBuf<'p, T>, PluginError> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .and_then(|b| u64::try_from(b).ok())
            .ok_or(PluginError::OutOfMemory {
                call: crate::plugin::PluginCall::AllocHost,
                bytes: u64::MAX,
            })?;
        let ptr = plugin.alloc_host(bytes)?;
        Ok(PinnedBuf {
            ptr,
            len,
            plugin,
            _t: PhantomData,
        })
    }

    pub(crate) fn host_ptr(&self) -> HostPtr {
        self.ptr
    }

    /// The identity of the plugin that allocated it (its address).
    pub(crate) fn plugin_id(&self) -> usize {
        plugin_id(&*self.plugin)
    }
}

/// A plugin's identity: the address of the object behind the reference.
pub(crate) fn plugin_id(p: &dyn Plugin) -> usize {
    p as *const dyn Plugin as *const () as usize
}

impl<T: Elem> Deref for PinnedBuf<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `alloc_host` gave `len × size_of::<T>()` zeroed bytes aligned to at
        // least 64 (a valid `[T]`: every bit pattern of an `Elem` is a value). No run
        // uses it now: a run borrows the buffer for as long as it is in flight.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr() as *const T, self.len) }
    }
}

impl<T: Elem> DerefMut for PinnedBuf<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` makes this the only view.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr() as *mut T, self.len) }
    }
}

impl<T: Elem> Drop for PinnedBuf<'_, T> {
    fn drop(&mut self) {
        if let Err(e) = self.plugin.free_host(self.ptr) {
            tracing::warn!(target: "offload_sched::session", error = %e, "free a pinned buffer");
        }
    }
}

impl<T: Elem> std::fmt::Debug for PinnedBuf<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PinnedBuf<{}>(len {})", T::TYPE, self.len)
    }
}

// SAFETY: the memory is plain host memory owned by this value; the plugin is `Sync`.
unsafe impl<T: Elem> Send for PinnedBuf<'_, T> {}
// SAFETY: shared access only reads (`Deref`).
unsafe impl<T: Elem> Sync for PinnedBuf<'_, T> {}
