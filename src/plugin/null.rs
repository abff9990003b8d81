//! [`NullPlugin`]: a plugin that does no device work (in the style of wgpu-hal's `empty`
//! backend), for measuring what the executor itself costs per op.
//!
//! Every stream call returns at once: `alloc` hands out fake, never-reused device
//! addresses (a bump counter, 256-byte aligned), copies and launches are accepted without
//! touching memory, events and `synchronize` return `Ok` immediately. Host memory is real
//! (zeroed heap blocks), because the executor initialises and snapshots the host buffers.
//!
//! It keeps the contract trivially (nothing runs, so nothing can run out of order) and
//! checks only what costs nothing: stream and kernel handles are in range. Device
//! addresses are not checked. It counts live device allocations (allocs − frees) so a
//! test can see that the executor freed everything.
//!
//! Graphs (`crate::plugin::graph`) are kept (their edges, for the replay proof) and a
//! launch does nothing, so a replayed run measures the replay path's own cost.
//!
//! Stream calls take no lock (atomics only); `alloc_host`/`free_host`, `create_streams`
//! and `load_kernel` (setup calls) take a mutex.

use crate::model::{ElemType, KernelSig, LaunchShape};
use crate::plugin::{
    DeviceMemory, DevicePtr, EventHandle, GraphDesc, GraphHandle, HostPtr, KernelHandle, LaunchArg,
    MemoryInfo, Plugin, PluginCall, PluginError, PluginInfo, StreamHandle, Timing,
};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

/// First fake device address (so 0 is never handed out).
/// A graph's edges, `(from, to)` node indices.
type Edges = Vec<(u32, u32)>;

const DEV_BASE: u64 = 0x1_0000_0000;
/// The first high-priority stream's handle: a range of its own, so that the pool of
/// [`Plugin::create_streams`] can grow without meeting it.
const PRIORITY_BASE: u32 = 1 << 31;

/// Host blocks are handed out 64-byte aligned (the contract's minimum).
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug)]
struct Line([u8; 64]);

/// The null plugin (see the module docs). One device.
#[derive(Debug)]
pub struct NullPlugin {
    streams: AtomicU32,
    /// High-priority streams made (handles [`PRIORITY_BASE`] + i).
    priority_streams: AtomicU32,
    kernels: Mutex<Vec<(u32, KernelSig, ElemType)>>,
    kernel_count: AtomicU32,
    events: AtomicU32,
    next_dev: AtomicU64,
    live_dev: AtomicI64,
    /// Live host blocks: address → block (kept alive here; freed by `free_host`).
    host: Mutex<BTreeMap<u64, Box<[Line]>>>,
    /// Edges of each instantiated graph (`None`: destroyed).
    graphs: Mutex<Vec<Option<Edges>>>,
}

impl Default for NullPlugin {
    fn default() -> Self {
        NullPlugin::new()
    }
}

impl NullPlugin {
    pub fn new() -> NullPlugin {
        NullPlugin {
            streams: AtomicU32::new(0),
            priority_streams: AtomicU32::new(0),
            kernels: Mutex::new(Vec::new()),
            kernel_count: AtomicU32::new(0),
            events: AtomicU32::new(0),
            next_dev: AtomicU64::new(DEV_BASE),
            live_dev: AtomicI64::new(0),
            host: Mutex::new(BTreeMap::new()),
            graphs: Mutex::new(Vec::new()),
        }
    }

    /// Device allocations made and not yet freed (for leak checks).
    pub fn live_device_allocs(&self) -> i64 {
        self.live_dev.load(Ordering::Relaxed)
    }

    /// Host blocks allocated and not yet freed.
    pub fn live_host_allocs(&self) -> usize {
        self.host.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    #[inline]
    fn check_stream(&self, call: PluginCall, s: StreamHandle) -> Result<(), PluginError> {
        let live = match s.0.checked_sub(PRIORITY_BASE) {
            Some(i) => i < self.priority_streams.load(Ordering::Relaxed),
            None => s.0 < self.streams.load(Ordering::Relaxed),
        };
        if live {
            Ok(())
        } else {
            Err(PluginError::InvalidHandle {
                call,
                what: format!("{s}"),
            })
        }
    }
}

impl Plugin for NullPlugin {
    /// One device with no memory behind its addresses; copies and launches touch no
    /// memory, so results are never the program's (`computes` false). Graphs are kept
    /// and launched as nothing; application memory is taken as it is (nothing here
    /// touches host memory); peer copies and every library kernel are accepted (and
    /// run as nothing). No timing.
    fn info(&self) -> PluginInfo {
        PluginInfo {
            graphs: true,
            app_memory: true,
            peer_copies: true,
            library_kernels: crate::model::LibraryKernel::all_names(),
            ..PluginInfo::new("null", 1, DeviceMemory::None)
        }
    }

    fn drain_timings(&self) -> Vec<Timing> {
        Vec::new()
    }

    fn next_seq(&self, _stream: StreamHandle) -> u64 {
        0
    }

    fn graph_instantiate(&self, desc: &GraphDesc) -> Result<GraphHandle, PluginError> {
        let mut g = self.graphs.lock().unwrap_or_else(|p| p.into_inner());
        g.push(Some(desc.edges.clone()));
        Ok(GraphHandle(g.len() as u32 - 1))
    }
    fn graph_edges(&self, graph: GraphHandle) -> Result<Vec<(u32, u32)>, PluginError> {
        let g = self.graphs.lock().unwrap_or_else(|p| p.into_inner());
        match g.get(graph.0 as usize) {
            Some(Some(e)) => Ok(e.clone()),
            _ => Err(PluginError::InvalidHandle {
                call: PluginCall::GraphEdges,
                what: graph.to_string(),
            }),
        }
    }
    fn graph_set_host(
        &self,
        _graph: GraphHandle,
        _node: u32,
        _host: HostPtr,
    ) -> Result<(), PluginError> {
        Ok(())
    }
    fn graph_launch(&self, graph: GraphHandle, stream: StreamHandle) -> Result<(), PluginError> {
        self.check_stream(PluginCall::GraphLaunch, stream)?;
        let g = self.graphs.lock().unwrap_or_else(|p| p.into_inner());
        match g.get(graph.0 as usize) {
            Some(Some(_)) => Ok(()),
            _ => Err(PluginError::InvalidHandle {
                call: PluginCall::GraphLaunch,
                what: graph.to_string(),
            }),
        }
    }
    fn graph_destroy(&self, graph: GraphHandle) -> Result<(), PluginError> {
        let mut g = self.graphs.lock().unwrap_or_else(|p| p.into_inner());
        match g.get_mut(graph.0 as usize) {
            Some(e @ Some(_)) => {
                *e = None;
                Ok(())
            }
            _ => Err(PluginError::InvalidHandle {
                call: PluginCall::GraphDestroy,
                what: graph.to_string(),
            }),
        }
    }

    /// No memory of its own to report: `None` for device 0.
    fn memory_info(&self, device: u32) -> Result<Option<MemoryInfo>, PluginError> {
        match device {
            0 => Ok(None),
            _ => Err(PluginError::NoDevice {
                call: PluginCall::MemoryInfo,
                device,
                count: 1,
            }),
        }
    }

    fn create_streams(&self, device: u32, count: u32) -> Result<Vec<StreamHandle>, PluginError> {
        if device != 0 {
            return Err(PluginError::NoDevice {
                call: PluginCall::CreateStreams,
                device,
                count: 1,
            });
        }
        self.streams.fetch_max(count, Ordering::Relaxed);
        Ok((0..count).map(StreamHandle).collect())
    }

    /// Streams of a range of their own (no work runs: the priority changes nothing).
    fn create_priority_streams(
        &self,
        device: u32,
        count: u32,
    ) -> Result<Vec<StreamHandle>, PluginError> {
        if device != 0 {
            return Err(PluginError::NoDevice {
                call: PluginCall::CreatePriorityStreams,
                device,
                count: 1,
            });
        }
        let count = count.min(PRIORITY_BASE);
        self.priority_streams.fetch_max(count, Ordering::Relaxed);
        Ok((0..count)
            .map(|i| StreamHandle(PRIORITY_BASE + i))
            .collect())
    }

    fn alloc(&self, stream: StreamHandle, bytes: u64) -> Result<DevicePtr, PluginError> {
        self.check_stream(PluginCall::Alloc, stream)?;
        let step = bytes.max(1).div_ceil(256).saturating_mul(256);
        let p = self.next_dev.fetch_add(step, Ordering::Relaxed);
        self.live_dev.fetch_add(1, Ordering::Relaxed);
        Ok(DevicePtr(p))
    }

    fn fill_zero(
        &self,
        stream: StreamHandle,
        _ptr: DevicePtr,
        _bytes: u64,
    ) -> Result<(), PluginError> {
        self.check_stream(PluginCall::FillZero, stream)
    }

    fn free(&self, stream: StreamHandle, _ptr: DevicePtr) -> Result<(), PluginError> {
        self.check_stream(PluginCall::Free, stream)?;
        self.live_dev.fetch_sub(1, Ordering::Relaxed);
        Ok(())
    }

    fn alloc_host(&self, bytes: u64) -> Result<HostPtr, PluginError> {
        let oom = PluginError::OutOfMemory {
            call: PluginCall::AllocHost,
            bytes,
        };
        let lines = usize::try_from(bytes.max(1).div_ceil(64)).map_err(|_| oom.clone())?;
        // Fallible: a size the allocator refuses is an error, not an abort.
        let mut block: Vec<Line> = crate::runtime::memory::try_vec(lines).ok_or(oom)?;
        block.resize(lines, Line([0; 64]));
        let block = block.into_boxed_slice();
        let p = block.as_ptr() as usize as u64;
        self.host
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(p, block);
        Ok(HostPtr(p))
    }

    /// Nothing runs, so every stream is always done.
    fn query(&self, _stream: StreamHandle) -> Result<bool, PluginError> {
        Ok(true)
    }

    /// Application memory is taken as it is: nothing here touches host memory.
    fn register_host(&self, _ptr: HostPtr, _bytes: u64) -> Result<bool, PluginError> {
        Ok(true)
    }

    fn unregister_host(&self, _ptr: HostPtr) -> Result<(), PluginError> {
        Ok(())
    }

    fn free_host(&self, ptr: HostPtr) -> Result<(), PluginError> {
        self.host
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&ptr.0)
            .map(drop)
            .ok_or(PluginError::InvalidPointer {
                call: PluginCall::FreeHost,
                space: "host",
                ptr: ptr.0,
                bytes: 0,
            })
    }

    fn submit(
        &self,
        stream: StreamHandle,
        _dst: DevicePtr,
        _src: HostPtr,
        _bytes: u64,
    ) -> Result<(), PluginError> {
        self.check_stream(PluginCall::Submit, stream)
    }

    fn retrieve(
        &self,
        stream: StreamHandle,
        _dst: HostPtr,
        _src: DevicePtr,
        _bytes: u64,
    ) -> Result<(), PluginError> {
        self.check_stream(PluginCall::Retrieve, stream)
    }

    /// Checks the stream and does nothing (the null plugin has no memory).
    fn copy_peer(
        &self,
        stream: StreamHandle,
        _dst: DevicePtr,
        _dst_device: u32,
        _src: DevicePtr,
        _src_device: u32,
        _bytes: u64,
    ) -> Result<(), PluginError> {
        self.check_stream(PluginCall::CopyPeer, stream)
    }

    fn load_kernel(
        &self,
        device: u32,
        sig: &KernelSig,
        ty: ElemType,
    ) -> Result<KernelHandle, PluginError> {
        if device != 0 {
            return Err(PluginError::NoDevice {
                call: PluginCall::LoadKernel,
                device,
                count: 1,
            });
        }
        let mut k = self.kernels.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = k
            .iter()
            .position(|(d, s, t)| *d == device && s == sig && *t == ty)
        {
            return Ok(KernelHandle(i as u32));
        }
        k.push((device, sig.clone(), ty));
        self.kernel_count.store(k.len() as u32, Ordering::Relaxed);
        Ok(KernelHandle(k.len() as u32 - 1))
    }

    fn launch(
        &self,
        stream: StreamHandle,
        kernel: KernelHandle,
        _args: &[LaunchArg],
        _shape: LaunchShape,
    ) -> Result<(), PluginError> {
        self.check_stream(PluginCall::Launch, stream)?;
        if kernel.0 >= self.kernel_count.load(Ordering::Relaxed) {
            return Err(PluginError::InvalidHandle {
                call: PluginCall::Launch,
                what: format!("kernel {}", kernel.0),
            });
        }
        Ok(())
    }

    fn create_event(&self, device: u32) -> Result<EventHandle, PluginError> {
        if device != 0 {
            return Err(PluginError::NoDevice {
                call: PluginCall::CreateEvent,
                device,
                count: 1,
            });
        }
        Ok(EventHandle(self.events.fetch_add(1, Ordering::Relaxed)))
    }

    fn destroy_event(&self, _event: EventHandle) -> Result<(), PluginError> {
        Ok(())
    }

    fn record_event(&self, stream: StreamHandle, _event: EventHandle) -> Result<(), PluginError> {
        self.check_stream(PluginCall::RecordEvent, stream)
    }

    fn wait_event(&self, stream: StreamHandle, _event: EventHandle) -> Result<(), PluginError> {
        self.check_stream(PluginCall::WaitEvent, stream)
    }

    fn synchronize(&self, stream: StreamHandle) -> Result<(), PluginError> {
        self.check_stream(PluginCall::Synchronize, stream)
    }

    /// Nothing runs, so every event is complete; the handle must have been created.
    fn synchronize_event(&self, event: EventHandle) -> Result<(), PluginError> {
        if event.0 < self.events.load(Ordering::Relaxed) {
            Ok(())
        } else {
            Err(PluginError::InvalidHandle {
                call: PluginCall::SynchronizeEvent,
                what: format!("{event}"),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::{execute, ExecOptions};
    use crate::lower::lower;
    use crate::reference::{check, reference};
    use crate::schedule::{schedule, ScheduleOptions, SyncPolicy};

    #[test]
    fn runs_saxpy_regions_and_frees_everything() {
        let program = crate::model::saxpy_regions(8, 4096);
        let graph = lower(&program).unwrap();
        let p = NullPlugin::new();
        for policy in SyncPolicy::ALL {
            for streams in [1, 4] {
                let sched = schedule(
                    &graph,
                    &ScheduleOptions {
                        policy,
                        streams_per_device: streams,
                        random_streams: None,
                        host_lanes: 1,
                    },
                );
                let rep = execute(&graph, &sched, &p, &ExecOptions::default()).unwrap();
                assert_eq!(rep.plugin, "null");
                assert_eq!(rep.counts.device_ops, 8 * 8, "{policy} {streams}");
                assert_eq!(rep.bytes_h2d, 8 * 2 * 4096);
                assert_eq!(rep.bytes_d2h, 8 * 4096);
                assert_eq!(p.live_device_allocs(), 0);
                assert_eq!(p.live_host_allocs(), 0);
                // No kernel ran: y keeps its initial value (1.0), x its own (0.5).
                assert_eq!(rep.as_f32("y3").unwrap()[0], 1.0);
                assert_eq!(rep.as_f32("x0").unwrap()[1023], 0.5);
            }
        }
        // ... which the check against the reference interpreter catches.
        let expected = reference(&graph, &ExecOptions::default()).unwrap();
        let sched = schedule(&graph, &ScheduleOptions::default());
        let rep = execute(&graph, &sched, &p, &ExecOptions::default()).unwrap();
        assert!(check(&rep.buffers, &expected).is_err());
    }

    /// The high-priority pool: handles of a range of their own, live for stream calls,
    /// the same on a later call, refused on a device the plugin lacks.
    #[test]
    fn priority_streams_are_a_pool_of_their_own() {
        let p = NullPlugin::new();
        let pool = p.create_streams(0, 3).unwrap();
        let high = p.create_priority_streams(0, 2).unwrap();
        assert_eq!(high, [StreamHandle(1 << 31), StreamHandle((1 << 31) + 1)]);
        assert!(high.iter().all(|h| !pool.contains(h)));
        assert!(p.alloc(high[1], 8).is_ok());
        assert!(p.alloc(StreamHandle((1 << 31) + 2), 8).is_err());
        assert_eq!(p.create_priority_streams(0, 1).unwrap(), high[..1]);
        assert!(matches!(
            p.create_priority_streams(1, 1),
            Err(PluginError::NoDevice {
                call: PluginCall::CreatePriorityStreams,
                ..
            })
        ));
    }

    #[test]
    fn rejects_unknown_handles() {
        let p = NullPlugin::new();
        assert!(matches!(
            p.alloc(StreamHandle(0), 8),
            Err(PluginError::InvalidHandle { .. })
        ));
        let s = p.create_streams(0, 2).unwrap();
        assert_eq!(s, vec![StreamHandle(0), StreamHandle(1)]);
        let a = p.alloc(s[1], 100).unwrap();
        let b = p.alloc(s[1], 1).unwrap();
        assert_eq!(b.0 - a.0, 256);
        assert!(p
            .launch(
                s[0],
                KernelHandle(0),
                &[],
                LaunchShape {
                    teams: 1,
                    threads: 1
                }
            )
            .is_err());
        assert!(p.create_streams(1, 1).is_err());
        assert!(p.free_host(HostPtr(64)).is_err());
    }
}
