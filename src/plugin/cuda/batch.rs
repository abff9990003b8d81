//! Small-copy batches of the CUDA plugin: the copies of at most
//! [`super::CudaPluginOptions::batch_copy_max_bytes`] that a stream receives one after the
//! other are held back and issued as **one** launch of the built-in `offload_copy_batch`
//! kernel (`builtins.cu`), which moves them on the SMs, reading and writing the pinned
//! host memory through unified addressing.
//!
//! Why: measured on the H200 (`benches/gpu/copy_probe.cu`, benches/README-gpu.md run 14),
//! 64 regions of 2 H2D + saxpy + 1 D2H at 4 KiB on 4 streams take 7.2-8.3 µs/region on
//! the GPU alone when the copy engines move them (`cuMemcpy*Async`: 192 small DMA
//! transfers serialize on the copy engines at 2.4-2.8 µs each) and 1.2 µs when one
//! kernel per region moves its copies (unordered, 16-byte aligned); and every driver call
//! costs the host 2.5-4 µs there, so one launch instead of two or three copies also
//! shortens issue. Larger copies stay on the copy engines, which reach the PCIe bandwidth
//! and leave the SMs to kernels.
//!
//! Ordering: a batch holds copies in stream order and is issued, on the same stream,
//! before any other driver call on that stream that could touch or order memory (launch,
//! event record or wait, synchronize, `cuMemFreeAsync`), and before the host frees pinned
//! memory a held copy uses, so everything that the stream order put after a copy still
//! runs after it. Allocs pass a held batch: a new allocation cannot alias memory a held
//! copy uses (held copies use live blocks; a block freed to the driver was flushed
//! first), and a block-cache alloc or free makes no driver call (see `DevCache`) — a
//! cached block is handed out again only on the same stream, so its next use is either a
//! copy (which joins the batch after the held ones) or a kernel or event (which issues
//! the batch first). Within a batch the copies run
//! concurrently, one block row each, unless one of them overlaps an earlier one (write
//! after write, read after write, write after read — common, since the block cache hands
//! a region's freed block to the next region): then the batch is *ordered*, one thread
//! block runs the copies one after the other with a fence and a barrier between them.
//!
//! Timing (option `timing`, for traces) keeps batching on: a batch is timed as one unit,
//! the copy kernel writing its own start and end into a timing slot (`Params::stamp`),
//! launched where the ordering rules above issue it anyway; every copy of the batch gets
//! the unit's times and the batch's size (`timing.rs`). A kernel issues the held copies
//! first, so a kernel's time never includes a batch's.

#[cfg(feature = "cuda")]
use super::driver::{result, sys, DriverError};
#[cfg(feature = "cuda")]
use std::ffi::c_void;

/// Copies per batch (the kernel's `CopyBatch` arrays).
pub(super) const MAX_COPIES: usize = 8;

/// Threads per block of the copy kernel: one block row per copy when the copies are
/// independent ([`THREADS`]), one block for all of them when the batch is ordered
/// ([`THREADS_ORDERED`]).
pub(super) const THREADS: u32 = 256;
pub(super) const THREADS_ORDERED: u32 = 1024;

/// Blocks per copy at most (grid-stride beyond): 64 × 256 threads × 16 bytes = 256 KiB
/// per sweep.
const MAX_BLOCKS: u64 = 64;

/// One held copy: addresses in the unified address space, size in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct HeldCopy {
    pub dst: u64,
    pub src: u64,
    pub bytes: u64,
    /// H2D (`true`) or D2H.
    pub to_device: bool,
    /// The stream `seq` of the Submit/Retrieve call that made it: with timing, a batch's
    /// timing covers the `seq`s of its copies (`timing.rs`).
    pub seq: u64,
}

/// Whether a copy of `bytes` bytes is held for a batch when the limit is `limit` bytes
/// (0: batching off). Empty copies are never held (they move nothing).
pub(super) fn holds(limit: u64, bytes: u64) -> bool {
    limit > 0 && bytes > 0 && bytes <= limit
}

impl HeldCopy {
    /// Whether this copy touches `[lo, lo + len)` (as source or destination).
    pub(super) fn touches(&self, lo: u64, len: u64) -> bool {
        overlap(self.dst, self.bytes, lo, len) || overlap(self.src, self.bytes, lo, len)
    }

    /// `H2D 4096 B 0x… → 0x…`, for error messages.
    pub(super) fn describe(&self) -> String {
        let dir = if self.to_device { "H2D" } else { "D2H" };
        format!("{dir} {} B {:#x} → {:#x}", self.bytes, self.src, self.dst)
    }
}

fn overlap(a: u64, an: u64, b: u64, bn: u64) -> bool {
    an > 0 && bn > 0 && a < b.saturating_add(bn) && b < a.saturating_add(an)
}

/// Whether `c` writes what `h` reads or writes, or reads what `h` writes.
fn conflicts(c: &HeldCopy, h: &HeldCopy) -> bool {
    overlap(c.dst, c.bytes, h.dst, h.bytes)
        || overlap(c.dst, c.bytes, h.src, h.bytes)
        || overlap(c.src, c.bytes, h.dst, h.bytes)
}

/// The copies one stream holds, in stream order.
#[derive(Debug, Default)]
pub(super) struct Batch {
    copies: Vec<HeldCopy>,
    /// A held copy conflicts with an earlier one: run them in order.
    ordered: bool,
}

impl Batch {
    /// Whether the held copies must be issued before another joins (the batch is full).
    pub(super) fn is_full(&self) -> bool {
        self.copies.len() >= MAX_COPIES
    }

    /// Holds `c` after the held copies; the batch becomes ordered if `c` conflicts with
    /// one of them. Panics if full (issue it first: [`Batch::is_full`]).
    pub(super) fn push(&mut self, c: HeldCopy) {
        assert!(!self.is_full(), "copy batch full");
        self.ordered |= self.copies.iter().any(|h| conflicts(&c, h));
        self.copies.push(c);
    }

    pub(super) fn is_empty(&self) -> bool {
        self.copies.is_empty()
    }

    /// Whether a held copy touches `[lo, lo + len)`.
    pub(super) fn touches(&self, lo: u64, len: u64) -> bool {
        self.copies.iter().any(|c| c.touches(lo, len))
    }

    /// The held copies and whether they must run in order, leaving the batch empty.
    pub(super) fn take(&mut self) -> (Vec<HeldCopy>, bool) {
        let ordered = std::mem::take(&mut self.ordered);
        (std::mem::take(&mut self.copies), ordered)
    }
}

/// The copy kernel's parameter, laid out as `struct CopyBatch` in `builtins.cu`: copy `k`
/// (`k < count`) moves `bytes[k]` bytes from `src[k]` to `dst[k]`; with `ordered != 0`
/// one block runs them in order, else block row `k` runs copy `k`; with `stamp != 0`
/// the kernel writes its start and end (`%globaltimer`, ns) into the timing slot at that
/// device address (`timing.rs`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Params {
    pub dst: [u64; MAX_COPIES],
    pub src: [u64; MAX_COPIES],
    pub bytes: [u64; MAX_COPIES],
    pub count: u64,
    pub ordered: u64,
    pub stamp: u64,
}

/// A launch of the copy kernel: its parameter, grid `(x, y)` and threads per block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Launch {
    pub params: Params,
    pub grid: (u32, u32),
    pub threads: u32,
}

/// The words the kernel moves for `c`: 16-byte words when both addresses and the size
/// are multiples of 16, else 4-byte words when they are multiples of 4, else bytes (as
/// `k_copy_one` in `builtins.cu` chooses).
fn words_of(c: &HeldCopy) -> u64 {
    let a = c.dst | c.src | c.bytes;
    if a.is_multiple_of(16) {
        c.bytes / 16
    } else if a.is_multiple_of(4) {
        c.bytes / 4
    } else {
        c.bytes
    }
}

impl Launch {
    /// A launch that copies nothing and only writes timing slot `stamp` (the clock
    /// calibration of `timing.rs`).
    pub(super) fn stamp_only(stamp: u64) -> Launch {
        Launch {
            params: Params {
                stamp,
                ..Params::default()
            },
            grid: (1, 1),
            threads: 32,
        }
    }

    /// Launches the copy kernel `func` with this launch on `raw`.
    #[cfg(feature = "cuda")]
    ///
    /// # Safety
    /// `func` is the built-in `offload_copy_batch` of the current context, `raw` a live
    /// stream of it; every address in the parameter (copies and stamp slot) lies in a live
    /// allocation and stays valid until the kernel has run.
    pub(super) unsafe fn issue(
        &mut self,
        func: sys::CUfunction,
        raw: sys::CUstream,
    ) -> Result<(), DriverError> {
        let mut args = [&mut self.params as *mut Params as *mut c_void];
        // SAFETY: one parameter, a `CopyBatch` by value, laid out as `Params` (repr(C),
        // same fields); the caller vouches for the addresses; `self.params` outlives the
        // call (the driver copies it).
        result::launch_kernel(
            func,
            (self.grid.0, self.grid.1, 1),
            (self.threads, 1, 1),
            0,
            raw,
            args.as_mut_ptr(),
        )
    }
}

/// The launch for `copies` (1 to [`MAX_COPIES`] of them; panics otherwise, which a
/// [`Batch`] never holds), in order or not.
pub(super) fn launch_of(copies: &[HeldCopy], ordered: bool) -> Launch {
    assert!(!copies.is_empty() && copies.len() <= MAX_COPIES);
    let mut p = Params {
        count: copies.len() as u64,
        ordered: ordered as u64,
        ..Params::default()
    };
    for (k, c) in copies.iter().enumerate() {
        p.dst[k] = c.dst;
        p.src[k] = c.src;
        p.bytes[k] = c.bytes;
    }
    if ordered {
        return Launch {
            params: p,
            grid: (1, 1),
            threads: THREADS_ORDERED,
        };
    }
    let words = copies.iter().map(words_of).max().unwrap_or(0);
    let blocks = words.div_ceil(THREADS as u64).clamp(1, MAX_BLOCKS);
    Launch {
        params: p,
        grid: (blocks as u32, copies.len() as u32),
        threads: THREADS,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h2d(dst: u64, src: u64, bytes: u64) -> HeldCopy {
        HeldCopy {
            dst,
            src,
            bytes,
            to_device: true,
            seq: 0,
        }
    }

    #[test]
    fn disjoint_copies_share_an_unordered_batch_until_it_is_full() {
        let mut b = Batch::default();
        for k in 0..MAX_COPIES as u64 {
            assert!(!b.is_full(), "copy {k}");
            b.push(h2d(0x1000 + k * 0x100, 0x9000 + k * 0x100, 0x100));
        }
        assert!(b.is_full());
        let (copies, ordered) = b.take();
        assert_eq!(copies.len(), MAX_COPIES);
        assert!(!ordered);
        assert!(b.is_empty() && !b.is_full());
    }

    fn ordered_after(held: HeldCopy, c: HeldCopy) -> bool {
        let mut b = Batch::default();
        b.push(held);
        b.push(c);
        let (copies, ordered) = b.take();
        assert_eq!(copies, vec![held, c], "stream order kept");
        ordered
    }

    #[test]
    fn a_copy_overlapping_a_held_one_orders_the_batch() {
        // held: device [0x1000, 0x1100) <- host [0x9000, 0x9100)
        let held = h2d(0x1000, 0x9000, 0x100);
        // write after write: into the same device bytes
        assert!(ordered_after(held, h2d(0x10f0, 0xa000, 0x20)));
        // write after read: into the host bytes the held copy reads
        let war = HeldCopy {
            dst: 0x90ff,
            src: 0x3000,
            bytes: 1,
            to_device: false,
            seq: 0,
        };
        assert!(ordered_after(held, war));
        // read after write: from the device bytes the held copy writes
        let raw = HeldCopy {
            dst: 0xb000,
            src: 0x1080,
            bytes: 0x10,
            to_device: false,
            seq: 0,
        };
        assert!(ordered_after(held, raw));
        // adjacent, not overlapping; reading what the held copy also reads; zero bytes
        assert!(!ordered_after(held, h2d(0x1100, 0x9000, 0x100)));
        assert!(!ordered_after(held, h2d(0x1000, 0x9000, 0)));
        // the order flag is reset by take
        let mut b = Batch::default();
        b.push(held);
        b.push(h2d(0x1000, 0xa000, 0x100));
        assert!(b.take().1);
        b.push(held);
        assert!(!b.take().1);
    }

    #[test]
    #[should_panic(expected = "copy batch full")]
    fn pushing_into_a_full_batch_panics() {
        let mut b = Batch::default();
        for k in 0..=MAX_COPIES as u64 {
            b.push(h2d(k * 0x100, 0x9000 + k * 0x100, 0x100));
        }
    }

    #[test]
    fn only_non_empty_copies_up_to_a_non_zero_limit_are_held() {
        assert!(holds(64 << 10, 1) && holds(64 << 10, 64 << 10));
        assert!(!holds(64 << 10, (64 << 10) + 1));
        assert!(!holds(64 << 10, 0), "an empty copy moves nothing");
        assert!(!holds(0, 0) && !holds(0, 4096), "limit 0: batching off");
    }

    #[test]
    fn a_batch_knows_the_host_and_device_bytes_it_touches() {
        let mut b = Batch::default();
        b.push(h2d(0x1000, 0x9000, 0x100));
        assert!(b.touches(0x9000, 1) && b.touches(0x10ff, 1) && b.touches(0, 0x1001));
        assert!(!b.touches(0x9100, 0x100) && !b.touches(0x1100, 4) && !b.touches(0x9000, 0));
        assert_eq!(b.take().0[0].describe(), "H2D 256 B 0x9000 → 0x1000");
    }

    #[test]
    fn the_kernel_source_has_the_same_batch_size() {
        let cu = include_str!("builtins.cu");
        for field in ["dst", "src", "bytes"] {
            assert!(
                cu.contains(&format!("u64 {field}[{MAX_COPIES}];")),
                "struct CopyBatch in builtins.cu: {field}[{MAX_COPIES}]"
            );
        }
        assert!(cu.contains(&format!("k < b.count && k < {MAX_COPIES}")));
        assert!(
            cu.contains("  u64 ordered;\n  u64 stamp;\n};"),
            "stamp after ordered"
        );
    }

    #[test]
    fn launch_covers_the_largest_copy_in_the_kernels_word_size() {
        let l = launch_of(&[h2d(0x100, 0x200, 4096), h2d(0x300, 0x400, 100)], false);
        assert_eq!(l.grid, (1, 2), "4 KiB = 256 words of 16 bytes = one block");
        assert_eq!(l.threads, THREADS);
        let p = l.params;
        assert_eq!(
            (p.dst[1], p.src[1], p.bytes[1], p.count),
            (0x300, 0x400, 100, 2)
        );
        assert_eq!((p.bytes[2], p.ordered), (0, 0));
        assert_eq!(launch_of(&[h2d(0, 0x10, 64 << 10)], false).grid, (16, 1));
        // 4-byte aligned: 64 KiB = 16384 words = 64 blocks; unaligned: bytes, capped
        assert_eq!(launch_of(&[h2d(4, 0x10, 64 << 10)], false).grid, (64, 1));
        assert_eq!(launch_of(&[h2d(1, 2, 4096)], false).grid, (16, 1));
        assert_eq!(
            launch_of(&[h2d(0, 0x10, 64 << 20)], false).grid,
            (MAX_BLOCKS as u32, 1)
        );
        let o = launch_of(&[h2d(1, 2, 64 << 10), h2d(1, 5, 8)], true);
        assert_eq!((o.grid, o.threads), ((1, 1), THREADS_ORDERED));
        assert_eq!((o.params.count, o.params.ordered), (2, 1));
        assert_eq!(std::mem::size_of::<Params>(), 8 * (3 * MAX_COPIES + 3));
        assert_eq!(
            l.params.stamp, 0,
            "batches are not stamped unless timing asks"
        );
        let s = Launch::stamp_only(0x7000);
        assert_eq!(
            (s.params.count, s.params.stamp, s.grid),
            (0, 0x7000, (1, 1))
        );
    }
}
