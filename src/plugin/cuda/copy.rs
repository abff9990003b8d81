//! Copies of the CUDA plugin on the driver: `cuMemcpyHtoDAsync` / `cuMemcpyDtoHAsync` on
//! the copy engines, or, for copies of at most the batch limit, held per stream and
//! issued as one launch of the built-in copy kernel ([`batch`] has the bookkeeping, the
//! measurements and the ordering rules this code keeps).

use super::batch::{self, HeldCopy};
use super::chain::Seqs;
use super::driver::{result, sys};
use super::plugin::CudaPlugin;
use super::streams::Stream;
use super::{backend, lock};
use crate::plugin::{PluginCall, PluginError, StreamHandle};
use std::ffi::c_void;

/// One copy on the copy engines, on `raw` (its context current).
///
/// # Safety
/// As for [`result::memcpy_htod_async`] / [`result::memcpy_dtoh_async`]: both ranges of
/// `c` valid until the copy has run, the host keeping off them until a synchronize; a
/// live stream of the current context.
pub(super) unsafe fn copy_engine(c: &HeldCopy, raw: sys::CUstream) -> Result<(), String> {
    let r = if c.to_device {
        result::memcpy_htod_async(
            c.dst,
            c.src as usize as *const c_void,
            c.bytes as usize,
            raw,
        )
    } else {
        result::memcpy_dtoh_async(c.dst as usize as *mut c_void, c.src, c.bytes as usize, raw)
    };
    r.map_err(String::from)
}

/// Small-copy batches ([`batch`]).
impl CudaPlugin {
    /// Whether a copy of `bytes` bytes on `device` is held for a batch.
    pub(super) fn batchable(&self, device: u32, bytes: u64) -> bool {
        let dev = &self.devices[device as usize];
        batch::holds(self.batch_limit, bytes) && dev.unified && dev.copy_kernel().is_ok()
    }

    /// Launches the copy kernel for the copies held on `stream` (`raw`, its context
    /// current). If the launch fails, the copies go to the copy engines one by one, in
    /// order, so none is lost; if that fails too, the error names the launch's and the
    /// copy's CUDA errors, the stream and every held copy (they were held since earlier
    /// Submit/Retrieve calls, which returned `Ok`: the executor reports the error at the op
    /// whose call issued the batch).
    fn issue_copies(
        &self,
        st: &Stream,
        (stream, device, raw): (StreamHandle, u32, sys::CUstream),
        (copies, ordered): (Vec<HeldCopy>, bool),
    ) -> Result<(), String> {
        if !self.timing() {
            return self
                .issue_copies_with((stream, device, raw), &copies, ordered, 0)
                .map(drop);
        }
        // With timing: the batch is one unit (`timing.rs`) that the kernel stamps itself
        // (a timing slot, no driver call); without a slot (it could not be made) it runs
        // between event marks. If the kernel could not be launched the copies went to the
        // copy engines untimed, and the stream's next unit starts fresh.
        let ctx = &self.devices[device as usize].ctx;
        let mut seqs = Seqs::default();
        copies.iter().for_each(|c| seqs.push(c.seq));
        let func = self.devices[device as usize].copy_kernel();
        if let Some(slot) = func.ok().and_then(|f| {
            self.timer
                .stamp_slot(&st.timing, (device, ctx, raw), f)
                .ok()
        }) {
            let issued = self.issue_copies_with((stream, device, raw), &copies, ordered, slot.1);
            match issued {
                Ok(true) => self.timer.finish_stamped(&st.timing, (seqs, true), slot.0),
                _ => {
                    self.timer.discard_slot(&st.timing, slot.0);
                    self.timer.interrupt(&st.timing);
                }
            }
            return issued.map(drop);
        }
        let mark = self.timer.start(&st.timing, (device, ctx, raw), false);
        let issued = self.issue_copies_with((stream, device, raw), &copies, ordered, 0);
        match mark {
            Ok(m) if issued.is_ok() => {
                self.timer.finish(&st.timing, (ctx, raw), (seqs, true), m);
            }
            // Failed: what it enqueued (some engine copies, perhaps) is not timed.
            Ok(m) => {
                self.timer.discard(&st.timing, m);
                self.timer.interrupt(&st.timing);
            }
            Err(_) => self.timer.interrupt(&st.timing),
        }
        issued.map(drop)
    }

    /// Issues `copies` on `raw`: one launch of the copy kernel (writing timing slot
    /// `stamp` unless 0), `Ok(true)`; if that launch fails, the copies one by one on the
    /// copy engines, in order, so none is lost, `Ok(false)`; if that fails too, the
    /// error (see [`CudaPlugin::issue_copies`]).
    fn issue_copies_with(
        &self,
        (stream, device, raw): (StreamHandle, u32, sys::CUstream),
        copies: &[HeldCopy],
        ordered: bool,
        stamp: u64,
    ) -> Result<bool, String> {
        let launched = self.launch_copies(device, raw, copies, ordered, stamp);
        let Err(launch_error) = launched else {
            return Ok(true);
        };
        tracing::warn!(target: "offload_sched::plugin", error = %launch_error, "copy batch launch failed; copy engines instead");
        for c in copies {
            // SAFETY: as for the copy-engine calls of `submit_raw` / `retrieve_raw`: both
            // ranges were checked live when the copy was held and stay valid in stream order.
            if let Err(e) = unsafe { copy_engine(c, raw) } {
                let list: Vec<String> = copies.iter().map(HeldCopy::describe).collect();
                return Err(format!(
                    "{launch_error}; then {e}; {} copies held on {stream} since earlier Submit/Retrieve calls: {}",
                    copies.len(),
                    list.join(", ")
                ));
            }
        }
        Ok(false)
    }

    /// One launch of the copy kernel for `copies` on `raw` (its context current), writing
    /// timing slot `stamp` unless 0.
    fn launch_copies(
        &self,
        device: u32,
        raw: sys::CUstream,
        copies: &[HeldCopy],
        ordered: bool,
        stamp: u64,
    ) -> Result<(), String> {
        let func = self.devices[device as usize].copy_kernel()?;
        let mut l = batch::launch_of(copies, ordered);
        l.params.stamp = stamp;
        // SAFETY: the copy kernel of this (current) context; every address was checked to
        // lie in a live allocation when its copy was held, and stays valid in stream order
        // (batch.rs, "Ordering"); a stamp slot lives as long as its stream.
        let r = unsafe { l.issue(func, raw) };
        r.map_err(|e| {
            let call = format!(
                "cuLaunchKernel(offload_copy_batch, {} batched copies)",
                copies.len()
            );
            e.named(call).into()
        })
    }

    /// Issues the copies stream `s` (`st`) holds, if any (its context must be current).
    /// Under the stream's batch lock, so that another thread's flush of the same stream
    /// (`flush_dev_cache`, `free_host`) cannot reorder them.
    pub(super) fn issue_held(&self, s: StreamHandle, st: &Stream) -> Result<(), String> {
        self.issue_held_any(s, st).map(drop)
    }

    /// [`CudaPlugin::issue_held`], saying whether there were copies to issue.
    fn issue_held_any(&self, s: StreamHandle, st: &Stream) -> Result<bool, String> {
        if self.batch_limit == 0 {
            return Ok(false);
        }
        let mut b = lock(&st.batch);
        if b.is_empty() {
            return Ok(false);
        }
        self.issue_copies(st, (s, st.device, st.raw()), b.take())
            .map(|()| true)
    }

    /// Issues every stream's held copies that touch `[lo, lo + len)` (before the host
    /// frees that memory). Errors: the first failing issue (the others are still issued).
    pub(super) fn flush_touching(&self, lo: u64, len: u64) -> Result<(), String> {
        if self.batch_limit == 0 {
            return Ok(());
        }
        let streams = self.streams.read();
        let mut first = Ok(());
        for (i, st) in streams.iter().enumerate() {
            if !lock(&st.batch).touches(lo, len) {
                continue;
            }
            let r = st
                .context()
                .bind()
                .map_err(String::from)
                .and_then(|()| self.issue_held(StreamHandle(i as u32), st));
            first = first.and(r);
        }
        first
    }

    /// Issues the copies `stream` holds before a driver call on it.
    pub(super) fn flush(&self, call: PluginCall, stream: StreamHandle) -> Result<(), PluginError> {
        self.flush_issued(call, stream).map(drop)
    }

    /// [`CudaPlugin::flush`], saying whether it issued a batch (with timing, that batch is
    /// then the stream's last unit: `timing.rs`).
    pub(super) fn flush_issued(
        &self,
        call: PluginCall,
        stream: StreamHandle,
    ) -> Result<bool, PluginError> {
        if self.batch_limit == 0 {
            return Ok(false);
        }
        let streams = self.streams.read();
        match streams.get(stream.0 as usize) {
            Some(st) => self.issue_held_any(stream, st).map_err(backend(call)),
            None => Ok(false),
        }
    }

    /// A copy on `stream`: held for the stream's batch if small enough (the batch issued
    /// first when it is full), else the held copies and then the copy on the copy engines.
    ///
    /// # Safety
    /// As for [`copy_engine`]; the caller checked both ranges of `c` against the live
    /// allocations (which keeps them valid in stream order, `batch.rs`, "Ordering").
    pub(super) unsafe fn copy(
        &self,
        call: PluginCall,
        stream: StreamHandle,
        (device, raw): (u32, sys::CUstream),
        c: HeldCopy,
    ) -> Result<(), PluginError> {
        if self.batchable(device, c.bytes) {
            let streams = self.streams.read();
            if let Some(st) = streams.get(stream.0 as usize) {
                let mut b = lock(&st.batch);
                if b.is_full() {
                    self.issue_copies(st, (stream, device, raw), b.take())
                        .map_err(backend(call))?;
                }
                b.push(c);
                return Ok(());
            }
        }
        let adjacent = self.flush_issued(call, stream)?;
        if !self.timing() {
            return copy_engine(&c, raw).map_err(backend(call));
        }
        // Timed on its own (`timing.rs`); a batch the flush issued is the unit before.
        let streams = self.streams.read();
        let Some(st) = streams.get(stream.0 as usize) else {
            return copy_engine(&c, raw).map_err(backend(call));
        };
        let ctx = &self.devices[device as usize].ctx;
        let mark = self.timer.start(&st.timing, (device, ctx, raw), adjacent);
        let mark = mark.map_err(backend(call))?;
        if let Err(e) = copy_engine(&c, raw) {
            self.timer.discard(&st.timing, mark);
            return Err(backend(call)(e));
        }
        self.timer
            .finish(&st.timing, (ctx, raw), (Seqs::one(c.seq), false), mark);
        Ok(())
    }
}
