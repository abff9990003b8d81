//! Stream workers of the host plugin: one thread per stream, fed by a crossbeam channel,
//! running [`Item`]s strictly in order. Events and synchronize markers are [`Flag`]s
//! (Mutex + Condvar): a waiting worker or host thread sleeps on the condvar, never spins.
//!
//! Deadlock freedom: a `Wait` item always refers to a flag whose `Signal` item was
//! enqueued before it (the plugin captures the event's current flag when the wait is
//! issued), so by induction on issue order every waited-on flag is eventually set.
//! Workers catch panics of an item and keep running, so a flag is never left unset.

use crate::plugin::{StreamHandle, Timing};
use crate::runtime::ffi::{HostKernel, RawArg};
use crate::runtime::memory::Block;
use crossbeam_channel::Receiver;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// A one-shot completion flag.
#[derive(Debug, Default)]
pub struct Flag {
    done: Mutex<bool>,
    cv: Condvar,
}

impl Flag {
    pub fn new() -> Arc<Flag> {
        Arc::new(Flag::default())
    }

    pub fn set(&self) {
        let mut d = self.done.lock().unwrap_or_else(|p| p.into_inner());
        *d = true;
        self.cv.notify_all();
    }

    /// Blocks until set.
    pub fn wait(&self) {
        let mut d = self.done.lock().unwrap_or_else(|p| p.into_inner());
        while !*d {
            d = self.cv.wait(d).unwrap_or_else(|p| p.into_inner());
        }
    }

    pub fn is_set(&self) -> bool {
        *self.done.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Kernel arguments with raw pointers into blocks the same item keeps alive.
#[derive(Debug)]
pub struct LaunchArgs(pub Vec<RawArg>);
// SAFETY: every pointer in the arguments points into a `Block` held by the same
// `Work::Launch` (its `blocks`), so it stays valid wherever the item is run.
unsafe impl Send for LaunchArgs {}

/// What a stream item does.
#[derive(Debug)]
pub enum Work {
    /// Copies `bytes` bytes between two blocks (H2D: host → device, D2H: device → host).
    Copy {
        dst: Arc<Block>,
        dst_off: u64,
        src: Arc<Block>,
        src_off: u64,
        bytes: u64,
    },
    Launch {
        kernel: Arc<HostKernel>,
        args: LaunchArgs,
        /// Keeps every block the arguments point into alive.
        blocks: Vec<Arc<Block>>,
    },
    /// Stream-ordered free: drops this item's reference here (the last one unless the
    /// block went to the stream's free list, or an op of another stream still holds it).
    Free(Arc<Block>),
    /// Stream-ordered zeroing of `bytes` bytes from `off`: re-initialises a block handed
    /// out again by the free list (so the new allocation reads as fresh memory to the ops
    /// behind it on this stream), and [`crate::plugin::Plugin::fill_zero`].
    Zero {
        block: Arc<Block>,
        off: u64,
        bytes: u64,
        /// The byte written: 0, or the poison of [`super::HostPluginOptions::poison`].
        byte: u8,
    },
    /// Sets a flag (event record, synchronize marker).
    Signal(Arc<Flag>),
    /// Blocks this stream until the flag is set (event wait).
    Wait(Arc<Flag>),
}

/// One enqueued op.
#[derive(Debug)]
pub struct Item {
    /// Sequence number of the stream call (see [`Timing::seq`]); `None` for internal
    /// markers (synchronize).
    pub seq: Option<u64>,
    pub work: Work,
}

/// State a worker shares with the plugin.
#[derive(Debug, Default)]
pub struct Shared {
    /// The first failure of this stream's work (sticky).
    pub error: Mutex<Option<String>>,
}

/// The worker loop: runs items until the channel closes (the plugin is dropped).
pub fn run_worker(
    handle: StreamHandle,
    rx: Receiver<Item>,
    shared: Arc<Shared>,
    timings: Arc<Mutex<Vec<Timing>>>,
    jitter: Option<u64>,
) {
    let mut rng = jitter.map(|seed| {
        ChaCha8Rng::seed_from_u64(
            seed ^ (u64::from(handle.0) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        )
    });
    while let Ok(item) = rx.recv() {
        if let Some(rng) = rng.as_mut() {
            // Delay jitter: 0-200 µs before each op, to shake out missing edges.
            std::thread::sleep(Duration::from_micros(rng.gen_range(0..=200)));
        }
        let what = item.work.name();
        // Logging stays outside the op but may not kill the worker (a subscriber can
        // panic on a closed stderr): the completion signal below must always run.
        let _ = catch_unwind(|| {
            tracing::debug!(target: "offload_sched::plugin", stream = handle.0, seq = ?item.seq, what, "start");
        });
        let start = Instant::now();
        let result = catch_unwind(AssertUnwindSafe(|| run(item.work)));
        let end = Instant::now();
        let failure = match result {
            Ok(Ok(())) => None,
            Ok(Err(msg)) => Some(format!("{what} failed: {msg}")),
            Err(p) => {
                let msg = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "panic".to_string());
                Some(format!("{what} panicked: {msg}"))
            }
        };
        if let Some(f) = failure {
            let mut e = shared.error.lock().unwrap_or_else(|p| p.into_inner());
            e.get_or_insert(f);
        }
        let _ = catch_unwind(|| {
            tracing::debug!(target: "offload_sched::plugin", stream = handle.0, seq = ?item.seq, what,
                us = end.duration_since(start).as_secs_f64() * 1e6, "done");
        });
        if let Some(seq) = item.seq {
            timings
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(Timing {
                    stream: handle,
                    seq,
                    start,
                    end,
                });
        }
    }
}

impl Work {
    fn name(&self) -> &'static str {
        match self {
            Work::Copy { .. } => "copy",
            Work::Launch { .. } => "launch",
            Work::Free(_) => "free",
            Work::Zero { .. } => "zero",
            Work::Signal(_) => "signal",
            Work::Wait(_) => "wait",
        }
    }
}

fn run(work: Work) -> Result<(), String> {
    match work {
        Work::Copy {
            dst,
            dst_off,
            src,
            src_off,
            bytes,
        } => {
            // SAFETY: the plugin checked both ranges lie inside their blocks when the op
            // was issued, and the blocks are kept alive by this item. `copy` tolerates
            // overlap (it cannot occur between two distinct blocks anyway).
            unsafe {
                std::ptr::copy(
                    src.ptr().add(src_off as usize),
                    dst.ptr().add(dst_off as usize),
                    bytes as usize,
                )
            }
        }
        Work::Launch {
            kernel,
            args,
            blocks,
        } => {
            // SAFETY: the arguments were checked against the signature and their ranges
            // against live blocks at issue time; `blocks` keeps those alive.
            let r = unsafe { kernel.call(&args.0) };
            drop(blocks);
            return r.map_err(|e| e.to_string());
        }
        Work::Free(b) => drop(b),
        // SAFETY: the block is kept alive by this item and `zero` clamps to its capacity.
        // Ops ordered before the free that cached it have completed (stream order, and
        // the schedule's events for other streams); ops of the new allocation are issued
        // after this one. An op of the old allocation the schedule failed to order before
        // the free may race with it — a wrong value, as on a GPU, never a use-after-free.
        Work::Zero {
            block,
            off,
            bytes,
            byte,
        } => unsafe { block.fill(off, bytes, byte) },
        Work::Signal(f) => f.set(),
        Work::Wait(f) => f.wait(),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_wakes_waiter() {
        let f = Flag::new();
        let g = f.clone();
        let t = std::thread::spawn(move || g.wait());
        std::thread::sleep(Duration::from_millis(5));
        assert!(!f.is_set());
        f.set();
        t.join().unwrap();
        assert!(f.is_set());
    }
}
