//! What runs of one schedule on one plugin keep between runs ([`Resources`], a
//! [`crate::Session`]'s), and the application memory bound to one run
//! ([`HostBinding`]).
//!
//! A one-shot [`super::execute`] makes fresh resources and releases them at its end; a
//! session keeps them: streams and loaded kernels are set up by the first run, plugin
//! events go back to a per-device pool after each run, and each buffer's plugin host
//! memory (the contents of an unbound buffer, or the pinned staging of a bound one) is
//! allocated once and reused.

use super::HostKernels;
use crate::model::ElemType;
use crate::plugin::{EventHandle, HostPtr, KernelHandle, Plugin, PluginError};
use crate::runtime::ffi::KernelLibrary;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Resources of runs of one schedule on one plugin (see the module docs).
pub(crate) struct Resources {
    /// Streams created and kernels loaded (done by the first run).
    pub(super) ready: bool,
    /// Plugin stream of each logical stream.
    pub(super) streams: Vec<Option<crate::plugin::StreamHandle>>,
    /// Per op, the plugin kernel of a device `Kernel` op.
    pub(super) op_kernel: Vec<Option<KernelHandle>>,
    pub(super) kernels: BTreeMap<(u32, String, ElemType), KernelHandle>,
    pub(super) host_lib: KernelLibrary,
    pub(super) host_kernels: HostKernels,
    /// Free plugin events per device (index = device).
    pub(super) event_pool: Vec<Vec<EventHandle>>,
    /// Every plugin event created (destroyed by [`Resources::release`]).
    pub(super) created_events: Vec<EventHandle>,
    /// Plugin host memory of each buffer and its size in bytes: an unbound buffer's
    /// contents, or a staged binding's pinned copy.
    pub(super) host: Vec<Option<(HostPtr, u64)>>,
    /// A started run ([`super::start`]) has not been finished: if its handle was
    /// leaked, the next run synchronizes every stream before touching host memory.
    pub(crate) in_flight: bool,
    /// Replay graphs and their device memory (a session that replays; built by its
    /// first run).
    pub(super) replay: Option<super::Replayed>,
}

impl Resources {
    /// Nothing made yet, for a graph of `ops` ops and `buffers` buffers; relative
    /// user-kernel paths resolve against `kernel_dir`.
    pub(crate) fn new(ops: usize, buffers: usize, kernel_dir: Option<PathBuf>) -> Resources {
        Resources {
            ready: false,
            streams: Vec::new(),
            op_kernel: vec![None; ops],
            kernels: BTreeMap::new(),
            host_lib: KernelLibrary::new(kernel_dir),
            host_kernels: BTreeMap::new(),
            event_pool: Vec::new(),
            created_events: Vec::new(),
            host: vec![None; buffers],
            in_flight: false,
            replay: None,
        }
    }

    /// The plugin host memory kept for buffer `i` and its size in bytes.
    pub(crate) fn host_of(&self, i: usize) -> Option<(HostPtr, u64)> {
        self.host.get(i).copied().flatten()
    }

    /// After a started run whose handle was leaked (never finished): waits for every
    /// stream, so the next run does not touch host memory that run's ops still use. Its
    /// device allocations stay allocated (leaked with the handle). Errors are logged.
    pub(crate) fn settle(&mut self, plugin: &dyn Plugin) {
        if !std::mem::take(&mut self.in_flight) {
            return;
        }
        for h in self.streams.iter().flatten() {
            if let Err(e) = plugin.synchronize(*h) {
                tracing::warn!(target: "offload_sched::exec", error = %e, "synchronize after a leaked run");
            }
        }
    }

    /// Destroys the events and frees the host memory made (the caller has synchronized
    /// every stream). Every call is made; the first error is returned, named by `what`.
    pub(crate) fn release(
        &mut self,
        plugin: &dyn Plugin,
        names: &[String],
    ) -> Result<(), (String, PluginError)> {
        let mut first = None;
        if let Some(super::Replayed::Ready(mut r)) = self.replay.take() {
            if let Err(e) = r.release(plugin) {
                first = Some(e);
            }
        }
        for ev in std::mem::take(&mut self.created_events) {
            if let Err(e) = plugin.destroy_event(ev) {
                first.get_or_insert((format!("destroy {ev}"), e));
            }
        }
        self.event_pool.clear();
        for (i, p) in self.host.iter_mut().enumerate() {
            if let Some((ptr, _)) = p.take() {
                if let Err(e) = plugin.free_host(ptr) {
                    let name = names.get(i).map(String::as_str).unwrap_or("?");
                    first.get_or_insert((format!("free host buffer \"{name}\""), e));
                }
            }
        }
        first.map_or(Ok(()), Err)
    }
}

/// Application memory bound to one buffer for one run.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) enum HostBinding {
    /// Not bound: the run starts from the buffer's declared initial contents, in plugin
    /// host memory the run (or session) owns.
    #[default]
    Unbound,
    /// `bytes` bytes of application memory at `ptr`: the run starts from them and, when
    /// `writable`, leaves its results there. Used in place when the plugin takes it
    /// ([`Plugin::register_host`]) and `stage` is false; otherwise copied into pinned
    /// staging before the run and back after it (when `writable` and the run succeeded).
    App {
        ptr: *mut u8,
        bytes: u64,
        writable: bool,
        stage: bool,
    },
    /// Plugin host memory the application holds ([`crate::PinnedBuf`]): used in place.
    Plugin { ptr: HostPtr },
}
