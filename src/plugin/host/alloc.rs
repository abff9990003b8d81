//! Device allocation of the host plugin: stream-ordered `alloc` and `free`, and the
//! per-stream block reuse cache (free lists by size class, capped per device) that the
//! module docs of [`super`] describe, with its statistics ([`DeviceCacheStats`]). A block
//! freed on one stream goes back out on that stream at once (stream order), and on
//! another stream of its device once it has settled (its free and every op of the old
//! allocation completed), so memory freed by one stream feeds the others' allocations.

use super::stream::Work;
use super::{lock, HostPlugin};
use crate::plugin::{size_class, DevicePtr, PluginCall, PluginError, StreamHandle, Timing};
use crate::runtime::memory::Block;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// What the host plugin's free lists hold and did, from
/// [`HostPlugin::device_cache_stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceCacheStats {
    /// Blocks on the free lists of all streams.
    pub blocks: usize,
    /// Their bytes (size-class capacities), over all devices.
    pub bytes: u64,
    /// Allocations served from a free list so far.
    pub hits: u64,
    /// Allocations that made a fresh block while reuse was on.
    pub misses: u64,
    /// Of the hits, blocks freed on another stream of the device (settled: every op of
    /// the old allocation, its free included, had completed).
    pub cross_stream_hits: u64,
}

/// Whether a cached block may go to an alloc on another stream than the one that freed
/// it: nothing but the free list holds it, so the free's work item and every op item of
/// the old allocation have run and dropped their references (`Arc::get_mut`: its
/// `Acquire` makes their writes visible). Reuse across streams under the plugin
/// contract's rule 4 ([`crate::plugin`]): the free has completed before the new
/// allocation's zeroing is issued, which orders every later op of the other stream behind
/// it — CUDA's `CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC` (memory whose free has
/// completed may go to any stream).
fn settled(b: &mut Arc<Block>) -> bool {
    Arc::get_mut(b).is_some()
}

impl HostPlugin {
    /// The free lists' contents and hit counts (see the module docs).
    pub fn device_cache_stats(&self) -> DeviceCacheStats {
        let streams = self.streams.read().unwrap_or_else(|p| p.into_inner());
        DeviceCacheStats {
            blocks: streams
                .iter()
                .map(|st| lock(&st.cache).values().map(Vec::len).sum::<usize>())
                .sum(),
            bytes: self
                .cached_bytes
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .sum(),
            hits: self.cache_hits.load(Ordering::Relaxed),
            misses: self.cache_misses.load(Ordering::Relaxed),
            cross_stream_hits: self.cache_cross_hits.load(Ordering::Relaxed),
        }
    }

    /// [`crate::plugin::Plugin::alloc`]: one stream-ordered allocation; if it fails for
    /// want of memory, the device's cached blocks go back to the allocator and it is tried
    /// once more.
    pub(super) fn alloc_device(
        &self,
        stream: StreamHandle,
        bytes: u64,
    ) -> Result<DevicePtr, PluginError> {
        let r = self.alloc_once(stream, bytes);
        if let Err(PluginError::OutOfMemory { .. }) = r {
            // Give the device's cached blocks back to the allocator and try once more.
            let device = self
                .streams
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .get(stream.0 as usize)
                .map(|st| st.device);
            if device.is_some_and(|d| self.release_device_cache(d) > 0) {
                return self.alloc_once(stream, bytes);
            }
        }
        r
    }

    /// Drops the free lists of every stream of `device`; returns how many blocks they
    /// held. Ops still holding a block keep it alive until they finish.
    fn release_device_cache(&self, device: u32) -> usize {
        let streams = self.streams.read().unwrap_or_else(|p| p.into_inner());
        let mut released = 0;
        for st in streams.iter().filter(|st| st.device == device) {
            let lists = std::mem::take(&mut *lock(&st.cache));
            for (class, blocks) in lists {
                released += blocks.len();
                self.cached_bytes[device as usize]
                    .fetch_sub(class * blocks.len() as u64, Ordering::Relaxed);
            }
        }
        released
    }

    /// A cached block of size class `class` for an alloc on `stream`, if any: from
    /// `stream`'s own free list first (any block there: stream order puts the new
    /// allocation's zeroing after the free that listed it), else from another stream of
    /// the same device, a block nothing else holds any more (see [`settled`]). Returns
    /// the block and whether it came from another stream.
    fn take_cached(&self, stream: StreamHandle, class: u64) -> Option<(Arc<Block>, bool)> {
        let streams = self.streams.read().unwrap_or_else(|p| p.into_inner());
        let own = streams.get(stream.0 as usize)?;
        if let Some(b) = lock(&own.cache).get_mut(&class).and_then(Vec::pop) {
            return Some((b, false));
        }
        streams
            .iter()
            .enumerate()
            .filter(|(i, st)| *i != stream.0 as usize && st.device == own.device)
            .find_map(|(_, st)| {
                let mut lists = lock(&st.cache);
                let list = lists.get_mut(&class)?;
                let at = list.iter_mut().position(settled)?;
                Some((list.swap_remove(at), true))
            })
    }

    /// The most live device bytes `device` held at once so far (allocated, not yet
    /// freed, as [`super::HostPluginOptions::device_memory`] counts them); 0 for a device
    /// the plugin lacks.
    pub fn peak_device_bytes(&self, device: u32) -> u64 {
        self.peak_bytes
            .get(device as usize)
            .map_or(0, |p| p.load(Ordering::Relaxed))
    }

    /// [`crate::plugin::Plugin::memory_info`]: with a cap
    /// ([`super::HostPluginOptions::device_memory`]), the cap as the total and the cap
    /// less the live bytes as free; `None` without one (the device is the machine's
    /// memory, which the host estimate checks instead).
    pub(super) fn memory_of(
        &self,
        device: u32,
    ) -> Result<Option<crate::plugin::MemoryInfo>, PluginError> {
        let Some(live) = self.live_bytes.get(device as usize) else {
            return Err(PluginError::NoDevice {
                call: PluginCall::MemoryInfo,
                device,
                count: self.live_bytes.len() as u32,
            });
        };
        Ok(self
            .opts
            .device_memory
            .map(|cap| crate::plugin::MemoryInfo {
                free: cap.saturating_sub(live.load(Ordering::Relaxed)),
                total: cap,
                reserve: 0,
            }))
    }

    /// Counts `bytes` more live on `device`, refused over the cap.
    fn reserve(&self, call: PluginCall, device: usize, bytes: u64) -> Result<(), PluginError> {
        let cap = self.opts.device_memory.unwrap_or(u64::MAX);
        let live = &self.live_bytes[device];
        let before = live
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| {
                l.checked_add(bytes).filter(|&n| n <= cap)
            })
            .map_err(|l| PluginError::OverDeviceMemory {
                call,
                device: device as u32,
                bytes,
                live: l,
                cap,
            })?;
        self.peak_bytes[device].fetch_max(before + bytes, Ordering::Relaxed);
        Ok(())
    }

    /// One stream-ordered allocation, from a free list if one has a block of the size
    /// class ([`HostPlugin::take_cached`]; see the module docs of [`super`]), else a
    /// fresh block.
    fn alloc_once(&self, stream: StreamHandle, bytes: u64) -> Result<DevicePtr, PluginError> {
        let call = PluginCall::Alloc;
        let limit = self.opts.device_cache_bytes;
        let class = size_class(bytes);
        let cached = match limit > 0 {
            true => self.take_cached(stream, class),
            false => None,
        };
        self.with_stream(call, stream, |st, send, seq| {
            let device = st.device as usize;
            if let Err(e) = self.reserve(call, device, bytes) {
                if let Some((b, _)) = cached {
                    lock(&st.cache).entry(class).or_default().push(b);
                }
                return Err(e);
            }
            let r = self.alloc_in(st, send, seq, stream, bytes, cached);
            if r.is_err() {
                self.live_bytes[device].fetch_sub(bytes, Ordering::Relaxed);
            }
            r
        })
    }

    /// [`HostPlugin::alloc_once`]'s work once the bytes are counted.
    fn alloc_in(
        &self,
        st: &super::stream::Stream,
        send: &dyn Fn(Work) -> Result<(), PluginError>,
        seq: u64,
        stream: StreamHandle,
        bytes: u64,
        cached: Option<(Arc<Block>, bool)>,
    ) -> Result<DevicePtr, PluginError> {
        let call = PluginCall::Alloc;
        let limit = self.opts.device_cache_bytes;
        let class = size_class(bytes);
        {
            let device = st.device as usize;
            if limit > 0 {
                if let Some((b, cross)) = cached {
                    // Fresh memory in stream order: zeroed after every op issued to this
                    // stream before (rule 1), and after every op of the old allocation
                    // (its free's stream's, or settled: nothing holds the block).
                    let zero = Work::Zero {
                        block: b.clone(),
                        off: 0,
                        bytes,
                        byte: self.opts.poison.unwrap_or(0),
                    };
                    if let Err(e) = send(zero) {
                        lock(&st.cache).entry(class).or_default().push(b);
                        return Err(e);
                    }
                    self.cached_bytes[device].fetch_sub(class, Ordering::Relaxed);
                    self.cache_hits.fetch_add(1, Ordering::Relaxed);
                    if cross {
                        self.cache_cross_hits.fetch_add(1, Ordering::Relaxed);
                    }
                    let ptr = DevicePtr(b.addr());
                    lock(&self.device_mem[device]).insert(b, bytes);
                    return Ok(ptr);
                }
                self.cache_misses.fetch_add(1, Ordering::Relaxed);
            }
            let t = Instant::now();
            // With reuse on, blocks have their class's capacity, so that every block on a
            // list fits every request of its class.
            let cap = if limit > 0 { class } else { bytes };
            let b = Block::new(cap).ok_or(PluginError::OutOfMemory { call, bytes })?;
            if let Some(byte) = self.opts.poison {
                // SAFETY: the block is not shared yet: no op can touch it.
                unsafe { b.fill(0, cap, byte) };
            }
            let ptr = DevicePtr(b.addr());
            lock(&self.device_mem[device]).insert(Arc::new(b), bytes);
            // A fresh block is made (zeroed) at issue time, so it is complete at once.
            lock(&self.timings).push(Timing {
                stream,
                seq,
                start: t,
                end: Instant::now(),
                batch: 0,
            });
            Ok(ptr)
        }
    }

    /// [`crate::plugin::Plugin::free`]: removes the allocation from the device's table and
    /// enqueues its release on `stream`; the block goes onto `stream`'s free list if the
    /// device's cap allows.
    pub(super) fn free_device(
        &self,
        stream: StreamHandle,
        ptr: DevicePtr,
    ) -> Result<(), PluginError> {
        let call = PluginCall::Free;
        let limit = self.opts.device_cache_bytes;
        self.with_stream(call, stream, |st, send, _| {
            let device = st.device as usize;
            let mut table = lock(&self.device_mem[device]);
            let (b, len) = table.remove(ptr.0).ok_or(PluginError::InvalidPointer {
                call,
                space: "device",
                ptr: ptr.0,
                bytes: 0,
            })?;
            if let Err(e) = send(Work::Free(b.clone())) {
                table.insert(b, len);
                return Err(e);
            }
            drop(table);
            self.live_bytes[device].fetch_sub(len, Ordering::Relaxed);
            // Onto this stream's free list if the device's cap allows: an alloc on this
            // stream may take it at once (stream order puts its zeroing after the free);
            // another stream only once it has settled (`take_cached`).
            let class = size_class(len);
            if limit > 0 && b.len() == class {
                let reserved = self.cached_bytes[device]
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
                        (c.saturating_add(class) <= limit).then_some(c + class)
                    })
                    .is_ok();
                if reserved {
                    lock(&st.cache).entry(class).or_default().push(b);
                }
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::stream::{Flag, Item};
    use super::super::HostPluginOptions;
    use super::*;
    use crate::model::{builtin_kernel, Access, ElemType, LaunchShape, Scalar};
    use crate::plugin::{HostPtr, KernelHandle, LaunchArg, Plugin};

    const SHAPE: LaunchShape = LaunchShape {
        teams: 1,
        threads: 1,
    };
    /// Four f32, the allocation every test uses (size class 512).
    const N: u64 = 4;
    const BYTES: u64 = N * 4;

    impl HostPlugin {
        /// Holds `s` until the returned flag is set by the test: an event wait released
        /// later, from the host.
        fn hold(&self, s: StreamHandle) -> Arc<Flag> {
            let gate = Flag::new(std::time::Duration::ZERO);
            let streams = self.streams.read().unwrap();
            let item = Item {
                seq: None,
                work: Work::Wait(gate.clone()),
            };
            streams[s.0 as usize].tx.send(item).unwrap();
            gate
        }
    }

    fn plugin(cache: u64) -> HostPlugin {
        HostPlugin::new(HostPluginOptions {
            device_cache_bytes: cache,
            ..HostPluginOptions::default()
        })
    }

    fn buf(ptr: DevicePtr, access: Access) -> LaunchArg {
        LaunchArg::Buffer {
            ptr,
            offset: 0,
            len: N,
            ty: ElemType::F32,
            access,
        }
    }

    fn kernel(p: &HostPlugin, name: &str) -> KernelHandle {
        p.load_kernel(0, &builtin_kernel(name).unwrap(), ElemType::F32)
            .unwrap()
    }

    fn fill(p: &HostPlugin, s: StreamHandle, d: DevicePtr, v: f32) {
        let args = [buf(d, Access::Out), LaunchArg::Scalar(Scalar::F32(v))];
        p.launch(s, kernel(p, "fill"), &args, SHAPE).unwrap();
    }

    fn read(p: &HostPlugin, h: HostPtr) -> Vec<f32> {
        let _ = p;
        let mut v = vec![0f32; N as usize];
        // SAFETY: `h` holds N f32 and the streams that wrote it were synchronized.
        unsafe { std::ptr::copy_nonoverlapping(h.as_ptr() as *const f32, v.as_mut_ptr(), v.len()) };
        v
    }

    #[test]
    fn a_block_freed_on_a_stream_is_reused_there_and_reads_as_zeros() {
        let p = plugin(1 << 30);
        let s = p.create_streams(0, 1).unwrap()[0];
        let h = p.alloc_host(BYTES).unwrap();
        let d1 = p.alloc(s, BYTES).unwrap();
        fill(&p, s, d1, 7.0);
        p.free(s, d1).unwrap();
        // Another size of the same class (512 bytes) gets the same block at once.
        let d2 = p.alloc(s, BYTES + 4).unwrap();
        assert_eq!(d2, d1, "reused on the freeing stream");
        // No H2D: the kernel reads the new allocation as fresh zeros, not the old 7s.
        p.launch(s, kernel(&p, "increment"), &[buf(d2, Access::InOut)], SHAPE)
            .unwrap();
        p.retrieve(s, h, d2, BYTES).unwrap();
        p.synchronize(s).unwrap();
        assert_eq!(read(&p, h), [1.0; N as usize]);
        // A block of another class is not taken for it.
        p.free(s, d2).unwrap();
        let big = p.alloc(s, 4096).unwrap();
        assert_ne!(big, d1);
        let stats = p.device_cache_stats();
        assert_eq!((stats.blocks, stats.bytes), (1, 512));
        assert_eq!((stats.hits, stats.misses), (1, 2));
        p.free(s, big).unwrap();
        p.synchronize(s).unwrap();
        assert_eq!(p.live_device_allocs(), 0, "cached blocks are not live");
        // Timings: every stream call still gets one, zeroing work included.
        let mut seqs: Vec<u64> = p.drain_timings().iter().map(|t| t.seq).collect();
        seqs.sort_unstable();
        assert_eq!(seqs, (0..p.next_seq(s)).collect::<Vec<_>>());
        p.free_host(h).unwrap();
    }

    #[test]
    fn a_block_freed_on_one_stream_goes_to_another_only_once_settled() {
        let p = plugin(1 << 30);
        let ss = p.create_streams(0, 2).unwrap();
        let (s1, s2) = (ss[0], ss[1]);
        let h = p.alloc_host(BYTES).unwrap();
        // s1 is held: its free of d1 cannot have run when s2 allocates.
        let gate = p.hold(s1);
        let d1 = p.alloc(s1, BYTES).unwrap();
        fill(&p, s1, d1, 7.0);
        p.free(s1, d1).unwrap();
        let d2 = p.alloc(s2, BYTES).unwrap();
        assert_ne!(d2, d1, "s1's free has not run: s2 gets a fresh block");
        assert_eq!(p.device_cache_stats().blocks, 1);
        // Once the free has run (and the fill before it), s2 may take the block; it reads
        // as fresh zeros, not the old 7s.
        gate.set();
        p.synchronize(s1).unwrap();
        let d3 = p.alloc(s2, BYTES).unwrap();
        assert_eq!(d3, d1, "settled: reused across streams");
        p.launch(
            s2,
            kernel(&p, "increment"),
            &[buf(d3, Access::InOut)],
            SHAPE,
        )
        .unwrap();
        p.retrieve(s2, h, d3, BYTES).unwrap();
        p.synchronize(s2).unwrap();
        assert_eq!(read(&p, h), [1.0; N as usize]);
        let stats = p.device_cache_stats();
        assert_eq!(
            (stats.hits, stats.cross_stream_hits, stats.blocks),
            (1, 1, 0)
        );
        // Its own stream first: freed on s2, taken back by s2 at once.
        p.free(s2, d2).unwrap();
        assert_eq!(p.alloc(s2, BYTES).unwrap(), d2);
        // Devices have their own lists (each stream belongs to one device).
        let q = HostPlugin::new(HostPluginOptions {
            devices: 2,
            ..HostPluginOptions::default()
        });
        let a = q.create_streams(0, 1).unwrap()[0];
        let b = q.create_streams(1, 1).unwrap()[0];
        let da = q.alloc(a, BYTES).unwrap();
        q.free(a, da).unwrap();
        q.synchronize(a).unwrap();
        assert_ne!(q.alloc(b, BYTES).unwrap(), da);
        p.free_host(h).unwrap();
    }

    /// Old allocation `x` on s1 (filled with 7), used by s2 behind a gate the host opens
    /// later, while s1 frees `x`, allocates (gets the same block) and writes the new
    /// allocation. `ordered`: s2 records an event after its use and s1 waits on it before
    /// the free (the edge the schedule must have); otherwise the edge is missing.
    /// Returns (what s2 read from the old allocation, what s1 read from the new one).
    fn old_reader_vs_new_writer(p: &HostPlugin, ordered: bool) -> (Vec<f32>, Vec<f32>) {
        let ss = p.create_streams(0, 2).unwrap();
        let (s1, s2) = (ss[0], ss[1]);
        let (h_old, h_new) = (p.alloc_host(BYTES).unwrap(), p.alloc_host(BYTES).unwrap());
        let y = p.alloc(s2, BYTES).unwrap();
        let x = p.alloc(s1, BYTES).unwrap();
        fill(p, s1, x, 7.0);
        let (e1, done) = (p.create_event(0).unwrap(), p.create_event(0).unwrap());
        p.record_event(s1, e1).unwrap();
        p.wait_event(s2, e1).unwrap();
        let gate = p.hold(s2);
        let copy = [buf(x, Access::In), buf(y, Access::Out)];
        p.launch(s2, kernel(p, "copy"), &copy, SHAPE).unwrap();
        p.retrieve(s2, h_old, y, BYTES).unwrap();
        p.record_event(s2, done).unwrap();
        if ordered {
            p.wait_event(s1, done).unwrap();
        }
        p.free(s1, x).unwrap();
        let x2 = p.alloc(s1, BYTES).unwrap();
        fill(p, s1, x2, 9.0);
        p.retrieve(s1, h_new, x2, BYTES).unwrap();
        if !ordered {
            // s1 is not held by anything: let it write the new allocation first.
            p.synchronize(s1).unwrap();
        }
        gate.set();
        p.synchronize(s1).unwrap();
        p.synchronize(s2).unwrap();
        let seen = (read(p, h_old), read(p, h_new));
        p.free(s1, x2).unwrap();
        p.free(s2, y).unwrap();
        p.synchronize(s1).unwrap();
        p.synchronize(s2).unwrap();
        p.free_host(h_old).unwrap();
        p.free_host(h_new).unwrap();
        seen
    }

    /// As above, but s2's late op of the old allocation writes it (`increment`), and s1
    /// reads the new allocation (fresh zeros) after an event s2 records after that op.
    /// `ordered`: s1 also waits on that event before the free. Returns what s1 read.
    fn old_writer_vs_new_reader(p: &HostPlugin, ordered: bool) -> Vec<f32> {
        let ss = p.create_streams(0, 2).unwrap();
        let (s1, s2) = (ss[0], ss[1]);
        let h = p.alloc_host(BYTES).unwrap();
        let x = p.alloc(s1, BYTES).unwrap();
        fill(p, s1, x, 7.0);
        let (e1, e2) = (p.create_event(0).unwrap(), p.create_event(0).unwrap());
        p.record_event(s1, e1).unwrap();
        p.wait_event(s2, e1).unwrap();
        let gate = p.hold(s2);
        p.launch(s2, kernel(p, "increment"), &[buf(x, Access::InOut)], SHAPE)
            .unwrap();
        p.record_event(s2, e2).unwrap();
        if ordered {
            p.wait_event(s1, e2).unwrap();
        }
        p.free(s1, x).unwrap();
        let x2 = p.alloc(s1, BYTES).unwrap();
        if !ordered {
            // The new allocation's zeroing runs now, before the late increment.
            p.synchronize(s1).unwrap();
        }
        p.wait_event(s1, e2).unwrap();
        p.retrieve(s1, h, x2, BYTES).unwrap();
        gate.set();
        p.synchronize(s1).unwrap();
        p.synchronize(s2).unwrap();
        let seen = read(p, h);
        p.free(s1, x2).unwrap();
        p.synchronize(s1).unwrap();
        p.free_host(h).unwrap();
        seen
    }

    #[test]
    fn a_missing_edge_before_a_free_gives_a_wrong_answer_and_the_event_fixes_it() {
        // Missing edge: the old op reads the new allocation's 9s instead of its own 7s.
        let p = plugin(1 << 30);
        assert_eq!(
            old_reader_vs_new_writer(&p, false),
            (vec![9.0; 4], vec![9.0; 4])
        );
        assert_eq!(p.device_cache_stats().hits, 1);
        assert_eq!(p.live_device_allocs(), 0);
        // With the event: right values, and still a reuse.
        let p = plugin(1 << 30);
        assert_eq!(
            old_reader_vs_new_writer(&p, true),
            (vec![7.0; 4], vec![9.0; 4])
        );
        assert_eq!(p.device_cache_stats().hits, 1);
        // Missing edge: the old op's increment lands in the new allocation (1, not 0).
        let p = plugin(1 << 30);
        assert_eq!(old_writer_vs_new_reader(&p, false), vec![1.0; 4]);
        let p = plugin(1 << 30);
        assert_eq!(old_writer_vs_new_reader(&p, true), vec![0.0; 4]);
        assert_eq!(p.device_cache_stats().hits, 1);
    }

    #[test]
    fn with_reuse_off_the_missing_edge_goes_unseen() {
        // Fresh blocks every time: the old allocation stays intact (held by its ops), so
        // the wrong schedule gives the right values — what reuse is there to catch.
        let p = plugin(0);
        assert_eq!(
            old_reader_vs_new_writer(&p, false),
            (vec![7.0; 4], vec![9.0; 4])
        );
        let p = plugin(0);
        assert_eq!(old_writer_vs_new_reader(&p, false), vec![0.0; 4]);
        assert_eq!(p.device_cache_stats(), DeviceCacheStats::default());
        assert_eq!(p.live_device_allocs(), 0);
    }

    #[test]
    fn the_cap_bounds_cached_bytes_per_device() {
        // Room for two 512-byte blocks: the third free releases its block.
        let p = plugin(1024);
        let s = p.create_streams(0, 1).unwrap()[0];
        let ds: Vec<DevicePtr> = (0..3).map(|_| p.alloc(s, BYTES).unwrap()).collect();
        for d in &ds {
            p.free(s, *d).unwrap();
        }
        let stats = p.device_cache_stats();
        assert_eq!((stats.blocks, stats.bytes), (2, 1024));
        let again: Vec<DevicePtr> = (0..3).map(|_| p.alloc(s, BYTES).unwrap()).collect();
        let stats = p.device_cache_stats();
        assert_eq!((stats.blocks, stats.bytes), (0, 0));
        assert_eq!((stats.hits, stats.misses), (2, 4));
        // The two cached blocks came back (last freed first); the third is new memory.
        assert_eq!(&again[..2], &[ds[1], ds[0]]);
        // A block larger than the whole cap is never cached.
        let big = p.alloc(s, 4096).unwrap();
        p.free(s, big).unwrap();
        assert_eq!(p.device_cache_stats().blocks, 0);
        for d in again {
            p.free(s, d).unwrap();
        }
        p.synchronize(s).unwrap();
        assert_eq!(p.device_cache_stats().blocks, 2);
        assert_eq!(p.live_device_allocs(), 0);
    }

    #[test]
    fn an_allocation_is_checked_against_its_length_not_its_class() {
        let p = plugin(1 << 30);
        let s = p.create_streams(0, 1).unwrap()[0];
        let h = p.alloc_host(512).unwrap();
        let d = p.alloc(s, 100).unwrap();
        assert!(p.submit(s, d, h, 100).is_ok());
        assert!(matches!(
            p.submit(s, d, h, 101),
            Err(PluginError::InvalidPointer { .. })
        ));
        p.free(s, d).unwrap();
        let d2 = p.alloc(s, 200).unwrap();
        assert_eq!(d2, d);
        assert!(p.submit(s, d2, h, 200).is_ok());
        assert!(p.submit(s, d2, h, 201).is_err());
        p.synchronize(s).unwrap();
    }
}
