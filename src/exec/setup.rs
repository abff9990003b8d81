//! A run's setup: streams and kernels (once per [`Resources`](super::Resources)), then
//! each buffer's host memory for this run (application memory in place, or plugin host
//! memory initialised or staged).

use super::{buffers, hostmem, kernel_sig, resolve_kernel_paths, Exec, ExecError, HostBinding};
use crate::lower::OpKind;
use crate::plugin::HostPtr;
use crate::schedule::Step;
use std::collections::BTreeMap;

impl Exec<'_> {
    /// Streams and kernels (the first run of a session or a one-shot run), then the host
    /// buffers: unbound ones initialised, bound ones registered or staged.
    pub(super) fn setup(&mut self) -> Result<(), ExecError> {
        let timing = self.core.info.timing;
        if timing {
            // Timings of earlier work (another run's) are not this run's.
            let _ = self.core.plugin.drain_timings();
        }
        if !self.res.ready {
            self.make_streams()?;
            self.load_kernels()?;
            self.res.ready = true;
        }
        self.core.streams.clone_from(&self.res.streams);
        self.core.op_kernel.clone_from(&self.res.op_kernel);
        // The plugin's call numbers go on across runs on its streams (a session's next
        // run, another plan on the same plugin), and it names failing calls by them
        // ([`PluginError::Async`]'s `seq`) whether it times its work or not (the CUDA
        // plugin does both): start each lane at the stream's next number.
        for (l, h) in self.core.streams.iter().enumerate() {
            if let Some(h) = h {
                self.lanes[l].seq = self.core.plugin.next_seq(*h);
            }
        }
        for i in 0..self.core.graph.buffers.len() {
            self.host_buffer(i)?;
        }
        if self.groups.is_some() || self.host_lanes {
            // One plugin event per schedule event, for the whole run: a pooled event
            // could be re-recorded by one stream's thread before another stream's thread
            // has issued its wait on the earlier record (or, with host lanes, before a
            // lane has run its host wait on it).
            for step in &self.core.sched.steps {
                if let Step::Record { event, stream } = *step {
                    self.event_for(event, stream)?;
                }
            }
        }
        self.setup_us = self.core.now_us();
        Ok(())
    }

    /// Plugin streams for the logical streams the schedule uses ([`used_streams`]), per
    /// device the first that many of the plugin's pool; a stream nothing names gets none
    /// (on the host plugin every stream is a worker thread: a region on one of 1 024
    /// devices starts one thread, not one per stream of every device).
    pub(super) fn make_streams(&mut self) -> Result<(), ExecError> {
        let core = &self.core;
        let used = used_streams(core.sched);
        // By (device, high priority): a high-priority stream comes from the plugin's
        // high-priority pool (`create_priority_streams`).
        let mut by_device: BTreeMap<(u32, bool), Vec<usize>> = BTreeMap::new();
        for (i, s) in core.sched.streams.iter().enumerate() {
            if used[i] {
                by_device
                    .entry((s.device, s.high_priority))
                    .or_default()
                    .push(i);
            }
        }
        self.res.streams = vec![None; core.sched.streams.len()];
        for (&(device, high), logical) in &by_device {
            let n = logical.len() as u32;
            let handles = match high {
                true => core.plugin.create_priority_streams(device, n),
                false => core.plugin.create_streams(device, n),
            }
            .map_err(|source| ExecError::Step {
                what: format!(
                    "create {} {}streams on device {device}",
                    logical.len(),
                    if high { "high-priority " } else { "" }
                ),
                source,
            })?;
            for (l, h) in logical.iter().zip(handles) {
                self.res.streams[*l] = Some(h);
            }
        }
        Ok(())
    }

    pub(super) fn load_kernels(&mut self) -> Result<(), ExecError> {
        let core = &self.core;
        let res = &mut *self.res;
        res.op_kernel = vec![None; core.graph.ops.len()];
        for id in core.graph.op_ids() {
            let op = core.graph.op(id);
            match &op.kind {
                OpKind::Kernel(call) => {
                    let key = (op.device, call.kernel.clone(), call.ty);
                    if let Some(&h) = res.kernels.get(&key) {
                        res.op_kernel[id.index()] = Some(h);
                        continue;
                    }
                    let sig = kernel_sig(core.graph, &call.kernel).ok_or_else(|| {
                        core.invalid(id, format!("unknown kernel \"{}\"", call.kernel))
                    })?;
                    let sig = resolve_kernel_paths(sig, self.kernel_dir.as_deref());
                    let h = core
                        .plugin
                        .load_kernel(op.device, &sig, call.ty)
                        .map_err(|e| core.op_err(id, e))?;
                    res.kernels.insert(key, h);
                    res.op_kernel[id.index()] = Some(h);
                }
                OpKind::HostTask {
                    call: Some(call), ..
                } => {
                    let key = (call.kernel.clone(), call.ty);
                    if res.host_kernels.contains_key(&key) {
                        continue;
                    }
                    let sig = kernel_sig(core.graph, &call.kernel).ok_or_else(|| {
                        core.invalid(id, format!("unknown kernel \"{}\"", call.kernel))
                    })?;
                    let k = res.host_lib.resolve(&sig, call.ty).map_err(|source| {
                        ExecError::HostKernel {
                            op: id,
                            what: core.graph.describe(id),
                            region: core.region(id),
                            source,
                        }
                    })?;
                    res.host_kernels.insert(key, k);
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The host memory of buffer `i` for this run: application memory used in place,
    /// or plugin host memory (kept in the resources) filled with the buffer's initial
    /// contents or a copy of the bound memory.
    pub(super) fn host_buffer(&mut self, i: usize) -> Result<(), ExecError> {
        let core = &mut self.core;
        let b = &core.graph.buffers[i];
        let bind = self.binds.get(i).copied().unwrap_or_default();
        let step_err = |what: String| move |source| ExecError::Step { what, source };
        match bind {
            HostBinding::Plugin { ptr } => {
                core.host[i] = Some(ptr);
                return Ok(());
            }
            HostBinding::App {
                ptr, bytes, stage, ..
            } if !stage => {
                let at = HostPtr(ptr as usize as u64);
                let direct = core.info.app_memory
                    && core
                        .plugin
                        .register_host(at, bytes)
                        .map_err(step_err(format!("register host buffer \"{}\"", b.name)))?;
                if direct {
                    self.registered.push(at);
                    core.host[i] = Some(at);
                    return Ok(());
                }
            }
            _ => {}
        }
        let ptr = match self.res.host[i] {
            Some((ptr, bytes)) if bytes == b.bytes() => ptr,
            old => {
                if let Some((ptr, _)) = old {
                    self.res.host[i] = None;
                    core.plugin
                        .free_host(ptr)
                        .map_err(step_err(format!("free host buffer \"{}\"", b.name)))?;
                }
                let ptr = core
                    .plugin
                    .alloc_host(b.bytes())
                    .map_err(step_err(format!("alloc host buffer \"{}\"", b.name)))?;
                self.res.host[i] = Some((ptr, b.bytes()));
                ptr
            }
        };
        core.host[i] = Some(ptr);
        match bind {
            HostBinding::App { ptr: app, .. } => {
                // SAFETY: `app` is valid for `b.bytes()` bytes (the binding was checked
                // against the buffer's type and length) and borrowed for the run; `ptr`
                // is plugin host memory of that size no stream is using (every stream
                // was synchronized at the end of the previous run).
                unsafe { std::ptr::copy_nonoverlapping(app, ptr.as_ptr(), b.bytes() as usize) };
            }
            _ => {
                let mut at = 0u64;
                buffers::init_bytes(b, |chunk| {
                    // SAFETY: `ptr` holds `b.bytes()` bytes and no stream uses it yet;
                    // the chunks are consecutive and add up to `b.bytes()` (`init_bytes`
                    // yields exactly the buffer's native-endian bytes).
                    unsafe { hostmem::write(ptr.offset(at), chunk) };
                    at += chunk.len() as u64;
                });
            }
        }
        Ok(())
    }
}

/// Per logical stream of `sched`: whether an op is on it or a step names it (a record, an
/// event wait, a host wait). A device-wide host wait names no stream: the device's
/// streams that carry nothing have nothing to wait for. `O(V + K)`.
pub(super) fn used_streams(sched: &crate::schedule::Schedule) -> Vec<bool> {
    let mut used = vec![false; sched.streams.len()];
    let named = sched.steps.iter().filter_map(|st| match *st {
        Step::Record { stream, .. } | Step::Wait { stream, .. } | Step::HostWait { stream } => {
            Some(stream)
        }
        _ => None,
    });
    for s in sched.op_stream.iter().flatten().copied().chain(named) {
        if let Some(u) = used.get_mut(s.index()) {
            *u = true;
        }
    }
    used
}
