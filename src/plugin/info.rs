//! What a plugin can do, as data ([`PluginInfo`], from [`super::Plugin::info`]): asked
//! once, never probed by trying a call or reading a name.

use std::collections::BTreeSet;

/// What a plugin's device addresses stand for ([`PluginInfo::device_memory`]): what the
/// host memory estimate counts ([`crate::estimate`]) and what a device allocation
/// costs the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeviceMemory {
    /// Host RAM of this process: the host plugin keeps each emulated device's memory in
    /// heap blocks, so device allocations count against the machine's memory.
    HostRam,
    /// Memory of a GPU (CUDA: `cuMemAllocAsync`), not host RAM; running out of it is an
    /// error of the run ([`PluginError::OutOfMemory`](super::PluginError::OutOfMemory)), not something the host estimate
    /// counts.
    Gpu,
    /// Nothing behind the addresses (the null plugin: fake addresses, no work).
    None,
}

impl DeviceMemory {
    /// Whether device allocations take host RAM ([`DeviceMemory::HostRam`]).
    pub fn is_host_ram(self) -> bool {
        self == DeviceMemory::HostRam
    }
}

/// The memory of one device at one moment ([`Plugin::memory_info`](super::Plugin::memory_info)),
/// in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryInfo {
    /// Bytes free now (CUDA `cuMemGetInfo`'s `free`: what other processes and this one's
    /// pools do not hold).
    pub free: u64,
    /// Bytes of the device in all (`cuMemGetInfo`'s `total`).
    pub total: u64,
    /// Bytes of `free` the plugin itself may come to hold beyond the live bytes a device
    /// memory cap counts (the CUDA plugin: its block cache of freed device blocks,
    /// [`PluginInfo::device_cache_bytes`]; the host plugin: 0, its cap does not count
    /// cached blocks): a default cap leaves them out ([`crate::Plan::for_plugin`]).
    pub reserve: u64,
}

/// What a plugin is and can do, as data ([`Plugin::info`](super::Plugin::info)), in the manner of wgpu-hal's
/// `ExposedAdapter { info, features, capabilities }`: asked once, never probed. The
/// executor, the memory estimate, replay and the session decide from it (issue threads,
/// whether device memory is host RAM, whether to build graphs, to register application
/// memory, to collect timings, whether a schedule's peer copies can run); nothing reads
/// the name or tries a call to see whether it is supported.
///
/// `#[non_exhaustive]`: a backend outside this crate makes one with
/// [`PluginInfo::new`] (every optional capability off) and sets the public fields it has.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PluginInfo {
    /// A short name for reports and messages: `host`, `cuda`, `null`, `faulty(host)`.
    /// Only displayed, never parsed.
    pub name: String,
    /// Number of devices, numbered `0..devices` (`__tgt_rtl_number_of_devices`).
    pub devices: u32,
    /// What device memory is (see [`DeviceMemory`]).
    pub device_memory: DeviceMemory,
    /// Whether issuing different streams' calls from different host threads at once
    /// pays: true where a stream call costs µs of host time (CUDA's copies and launches
    /// in the driver), false where calls only enqueue. The executor's
    /// [`crate::exec::IssueMode::Auto`] issues with one thread per group of streams
    /// joined by events ([`crate::exec::IssueMode::PerGroup`]) only where it is true.
    pub parallel_issue: bool,
    /// Whether copies and kernels really move and compute data, so results can be
    /// checked: false for the null plugin, which only measures what issuing costs.
    pub computes: bool,
    /// Whether the plugin takes application memory in place
    /// ([`Plugin::register_host`](super::Plugin::register_host), like `cuMemHostRegister`): the executor registers a
    /// bound buffer only where this is true and otherwise stages it through
    /// [`Plugin::alloc_host`](super::Plugin::alloc_host) memory.
    pub app_memory: bool,
    /// Whether the plugin replays graphs ([`Plugin::graph_instantiate`](super::Plugin::graph_instantiate) and the other
    /// `graph_*` calls; `graph` has the semantics). Where false the executor issues
    /// the same work to streams ([`crate::replay::Unsupported::Plugin`]) and never makes
    /// a graph call.
    pub graphs: bool,
    /// Whether the plugin times its stream work: [`Plugin::drain_timings`](super::Plugin::drain_timings) returns the
    /// timings of completed work and [`Plugin::next_seq`](super::Plugin::next_seq) numbers the calls. Where false
    /// `drain_timings` returns nothing (and `next_seq` 0, unless the plugin numbers its calls
    /// anyway to name a failing one, as the CUDA plugin does), and the executor reports issue times.
    pub timing: bool,
    /// Whether [`Plugin::copy_peer`](super::Plugin::copy_peer) copies between devices (CUDA `cuMemcpyPeerAsync`).
    /// A schedule with a peer copy is refused before anything runs on a plugin without.
    pub peer_copies: bool,
    /// The library kernels (vendor BLAS / LAPACK tile kernels: [`crate::model::library`],
    /// [design notes](crate::design) "Library kernels and real work") the plugin runs, by
    /// name (`gemm`, `syrk`, `trsm`, `potrf`, `getrf`; contract rule 8): all of them on the host
    /// and null plugins, and on CUDA where cuBLAS and cuSOLVER load (none otherwise).
    pub library_kernels: BTreeSet<String>,
    /// Whether the plugin has the send / receive calls of [design notes](crate::design) "Beyond one host"
    /// (ranks exchanging data). False for every plugin today.
    pub send_recv: bool,
    /// Per device, the most bytes of freed device memory the plugin keeps for reuse (its
    /// free lists), in bytes; 0: none. Where device memory is host RAM the host memory
    /// estimate counts it ([`crate::estimate::device_cache_bytes`]).
    pub device_cache_bytes: u64,
}

impl PluginInfo {
    /// This info as a wrapper of the plugin reports it: the same capabilities, the name
    /// `wrapper(name)` (`faulty(host)`), for reports only (nothing reads names).
    pub fn wrapped(self, wrapper: &str) -> PluginInfo {
        PluginInfo {
            name: format!("{wrapper}({})", self.name),
            ..self
        }
    }

    /// The info of a plugin named `name` with `devices` devices whose memory is
    /// `device_memory`, and no optional capability: [`PluginInfo::computes`] is true
    /// unless `device_memory` is [`DeviceMemory::None`]; parallel issue, application
    /// memory, graphs, timing, peer copies and send / receive are off; no library kernels,
    /// no device cache.
    /// Set the public fields for what the backend has.
    pub fn new(name: impl Into<String>, devices: u32, device_memory: DeviceMemory) -> PluginInfo {
        PluginInfo {
            name: name.into(),
            devices,
            device_memory,
            parallel_issue: false,
            computes: device_memory != DeviceMemory::None,
            app_memory: false,
            graphs: false,
            timing: false,
            peer_copies: false,
            library_kernels: BTreeSet::new(),
            send_recv: false,
            device_cache_bytes: 0,
        }
    }
}
