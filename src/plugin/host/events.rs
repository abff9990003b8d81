//! Events of the host plugin: completion flags ([`super::flag::Flag`], spinning up to
//! [`super::HostPluginOptions::wait_spin`] before blocking). A record
//! enqueues "set a fresh flag"; a wait captures the event's current flag when issued and
//! enqueues "block until set", so a missing wait gives a race and, usually, a wrong
//! answer. A wait on an event never recorded is a no-op, as `cuStreamWaitEvent` on a
//! fresh event. A host wait on an event (`synchronize_event`) takes the current flag and
//! blocks until it is set, then reports the recording stream's first failure, if any.

use super::stream::{Flag, Shared, Work};
use super::{lock, HostPlugin};
use crate::plugin::{EventHandle, PluginCall, PluginError, StreamHandle, Timing};
use std::sync::Arc;
use std::time::Instant;

#[derive(Default)]
/// One live event: its device, and the flag of its latest record.
pub(super) struct EventState {
    device: u32,
    /// The flag of the most recent record; `None` before the first.
    current: Option<Arc<Flag>>,
    /// The stream of the most recent record and its failure state (sticky errors that
    /// `synchronize_event` reports).
    recorded_on: Option<(StreamHandle, Arc<Shared>)>,
}

impl HostPlugin {
    /// The flag of `e` for a record (`new`: a fresh flag, on a stream of the event's
    /// device) or a wait (the current flag; `None` before the first record).
    fn event_flag(
        &self,
        call: PluginCall,
        device: u32,
        e: EventHandle,
        new: Option<(StreamHandle, &Arc<Shared>)>,
    ) -> Result<Option<Arc<Flag>>, PluginError> {
        let mut events = lock(&self.events);
        let ev = events
            .get_mut(e.0 as usize)
            .and_then(|e| e.as_mut())
            .ok_or_else(|| PluginError::InvalidHandle {
                call,
                what: format!("{e}"),
            })?;
        // A record must be on a stream of the event's device; a wait may be on any device
        // (cuStreamWaitEvent: "hEvent may be from a different context or device than
        // hStream"), which cross-device edges of a schedule need.
        if let Some((stream, shared)) = new {
            if ev.device != device {
                return Err(PluginError::InvalidHandle {
                    call,
                    what: format!("{e} (of device {}, used on device {device})", ev.device),
                });
            }
            ev.current = Some(Flag::new(self.spin));
            ev.recorded_on = Some((stream, shared.clone()));
        }
        Ok(ev.current.clone())
    }

    /// [`crate::plugin::Plugin::create_event`]: a free event slot of `device`.
    pub(super) fn new_event(&self, device: u32) -> Result<EventHandle, PluginError> {
        self.check_device(PluginCall::CreateEvent, device)?;
        let mut events = lock(&self.events);
        let state = Some(EventState {
            device,
            current: None,
            recorded_on: None,
        });
        if let Some(i) = events.iter().position(|e| e.is_none()) {
            events[i] = state;
            return Ok(EventHandle(i as u32));
        }
        events.push(state);
        Ok(EventHandle(events.len() as u32 - 1))
    }

    /// [`crate::plugin::Plugin::destroy_event`]: frees the slot; flags already captured by
    /// issued waits stay valid.
    pub(super) fn free_event(&self, event: EventHandle) -> Result<(), PluginError> {
        let mut events = lock(&self.events);
        match events.get_mut(event.0 as usize) {
            Some(e @ Some(_)) => {
                *e = None;
                Ok(())
            }
            _ => Err(PluginError::InvalidHandle {
                call: PluginCall::DestroyEvent,
                what: format!("{event}"),
            }),
        }
    }

    /// [`crate::plugin::Plugin::record_event`]: enqueues "set a fresh flag" on `stream`.
    pub(super) fn enqueue_record(
        &self,
        stream: StreamHandle,
        event: EventHandle,
    ) -> Result<(), PluginError> {
        let call = PluginCall::RecordEvent;
        self.with_stream(call, stream, |st, send, _| {
            let device = st.device;
            let flag = self.event_flag(call, device, event, Some((stream, &st.shared)))?;
            match flag {
                Some(f) => send(Work::Signal(f)),
                None => Ok(()),
            }
        })
    }

    /// [`crate::plugin::Plugin::wait_event`]: enqueues "block until the current flag is
    /// set" on `stream`.
    pub(super) fn enqueue_wait(
        &self,
        stream: StreamHandle,
        event: EventHandle,
    ) -> Result<(), PluginError> {
        let call = PluginCall::WaitEvent;
        self.with_stream(call, stream, |st, send, seq| {
            let device = st.device;
            match self.event_flag(call, device, event, None)? {
                Some(f) => send(Work::Wait(f)),
                None => {
                    // Never recorded: a no-op (cuStreamWaitEvent on a fresh event).
                    let t = Instant::now();
                    lock(&self.timings).push(Timing {
                        stream,
                        seq,
                        start: t,
                        end: t,
                        batch: 0,
                    });
                    Ok(())
                }
            }
        })
    }

    /// [`crate::plugin::Plugin::synchronize_event`]: blocks until the flag of the event's
    /// latest record is set (at once if never recorded), then reports the recording
    /// stream's first unreported failure (taken, as `synchronize` does).
    pub(super) fn wait_event_flag(&self, event: EventHandle) -> Result<(), PluginError> {
        let call = PluginCall::SynchronizeEvent;
        let (flag, recorded_on) = {
            let events = lock(&self.events);
            let ev = events
                .get(event.0 as usize)
                .and_then(|e| e.as_ref())
                .ok_or_else(|| PluginError::InvalidHandle {
                    call,
                    what: format!("{event}"),
                })?;
            (ev.current.clone(), ev.recorded_on.clone())
        };
        let (Some(flag), Some((stream, shared))) = (flag, recorded_on) else {
            return Ok(()); // never recorded: complete (cuEventSynchronize)
        };
        tracing::debug!(target: "offload_sched::plugin", event = event.0, "synchronize event: waiting");
        flag.wait();
        tracing::debug!(target: "offload_sched::plugin", event = event.0, "synchronize event: done");
        shared.report(call, stream)
    }
}
