//! The one forwarding layer: [`Layered`] is a [`Plugin`] that forwards every call to an
//! inner plugin through [`Hooks`], in the manner of wgpu-hal's dynamic layer (one place
//! forwards every call, so a wrapper states only what it adds). Fault injection
//! ([`super::faulty::FaultyPlugin`]), the CLI's progress bar and test wrappers are hooks
//! on it; nothing else forwards plugin calls.
//!
//! Per call, for every call of [`PluginCall`] (generated from the one list of calls,
//! `plugin_calls!` in [`crate::plugin`], so a new call is forwarded without a change
//! here):
//! 1. [`Hooks::before`]: `Err` refuses the call; nothing is forwarded, so nothing is
//!    enqueued, as contract rule 5 requires of a failed call. It may also panic (a
//!    misbehaving plugin).
//! 2. the inner plugin's call;
//! 3. [`Hooks::after`] with the outcome (for counting or observing).
//!
//! The three calls outside [`PluginCall`] (they cannot fail) have their own hooks:
//! [`Plugin::info`] through [`Hooks::info`] (e.g. a new name, `faulty(host)`),
//! [`Plugin::drain_timings`] through [`Hooks::timings`], and [`Plugin::next_seq`] is
//! forwarded as it is.
//!
//! The inner plugin is anything that dereferences to one: an owned `Box<P>`, a borrowed
//! `&dyn Plugin`, an `Arc<dyn Plugin>`.

use super::{
    DevicePtr, ElemType, EventHandle, GraphDesc, GraphHandle, HostPtr, KernelHandle, KernelSig,
    LaunchArg, LaunchShape, MemoryInfo, Plugin, PluginCall, PluginError, PluginInfo, StreamHandle,
    Timing,
};
use std::ops::Deref;

/// What a wrapper adds to the calls [`Layered`] forwards. Every hook has a default that
/// adds nothing, so a wrapper implements only what it changes. Called from whatever
/// thread makes the call (contract rule 6: several at once), so hooks are `Sync`.
pub trait Hooks: Send + Sync {
    /// The layer's [`PluginInfo`] from the inner plugin's (called once per
    /// [`Plugin::info`] call, not per op). Default: the inner one unchanged.
    fn info(&self, inner: PluginInfo) -> PluginInfo {
        inner
    }

    /// Before `call` is forwarded. `Err(e)`: the call returns `e` and is not forwarded
    /// (nothing enqueued; [`Hooks::after`] is not called). May panic (the panic reaches
    /// the caller, as a panicking plugin's would). Default: `Ok(())`.
    fn before(&self, call: PluginCall) -> Result<(), PluginError> {
        let _ = call;
        Ok(())
    }

    /// After a forwarded `call` returned: `Ok(())` or its error. Default: nothing.
    fn after(&self, call: PluginCall, result: Result<(), &PluginError>) {
        let _ = (call, result);
    }

    /// What the layer's [`Plugin::drain_timings`] returns, from what the inner plugin's
    /// returned (a wrapper that drains the inner plugin itself meanwhile hands its
    /// timings back here). Default: `drained` unchanged.
    fn timings(&self, drained: Vec<Timing>) -> Vec<Timing> {
        drained
    }
}

/// No hooks: [`Layered`] forwards every call unchanged.
impl Hooks for () {}

/// A plugin that forwards every call to `inner` through the hooks `H` (see the module
/// docs). Keeps the contract exactly as `inner` keeps it, less what a hook refuses.
#[derive(Debug)]
pub struct Layered<I, H> {
    inner: I,
    hooks: H,
}

impl<I, H> Layered<I, H>
where
    I: Deref,
    I::Target: Plugin,
    H: Hooks,
{
    /// `inner` with `hooks` on every call.
    pub fn wrap(inner: I, hooks: H) -> Layered<I, H> {
        Layered { inner, hooks }
    }

    /// The wrapped plugin (calls made on it directly bypass the hooks).
    pub fn inner(&self) -> &I::Target {
        &self.inner
    }

    /// The hooks.
    pub fn hooks(&self) -> &H {
        &self.hooks
    }

    /// `before`, the inner call `f`, `after`.
    #[inline]
    fn call<T>(
        &self,
        call: PluginCall,
        f: impl FnOnce(&I::Target) -> Result<T, PluginError>,
    ) -> Result<T, PluginError> {
        self.hooks.before(call)?;
        let r = f(&self.inner);
        self.hooks.after(call, r.as_ref().map(|_| ()));
        r
    }
}

/// The forwarding of every call of the list (`plugin_calls!`), generated.
macro_rules! forward_layered {
    ($(
        $(#[$attr:meta])*
        $variant:ident $label:literal $kind:ident
        fn $name:ident(&self $(, $arg:ident: $ty:ty)* $(,)?) -> Result<$ok:ty, PluginError>;
    )*) => {
        impl<I, H> Plugin for Layered<I, H>
        where
            I: Deref + Send + Sync,
            I::Target: Plugin,
            H: Hooks,
        {
            fn info(&self) -> PluginInfo {
                self.hooks.info(self.inner.info())
            }

            fn drain_timings(&self) -> Vec<Timing> {
                self.hooks.timings(self.inner.drain_timings())
            }

            fn next_seq(&self, stream: StreamHandle) -> u64 {
                self.inner.next_seq(stream)
            }

            $(
                fn $name(&self $(, $arg: $ty)*) -> Result<$ok, PluginError> {
                    self.call(PluginCall::$variant, |p| p.$name($($arg),*))
                }
            )*
        }
    };
}

plugin_calls!(forward_layered);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::null::NullPlugin;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Mutex;

    /// Refuses every `free`, logs every other call with its outcome.
    #[derive(Default)]
    struct Log {
        seen: Mutex<Vec<(PluginCall, bool)>>,
        refused: AtomicU64,
    }

    impl Hooks for Log {
        fn info(&self, inner: PluginInfo) -> PluginInfo {
            inner.wrapped("log")
        }
        fn before(&self, call: PluginCall) -> Result<(), PluginError> {
            if call == PluginCall::Free {
                self.refused.fetch_add(1, Ordering::Relaxed);
                return Err(PluginError::Backend {
                    call,
                    message: "refused".into(),
                });
            }
            Ok(())
        }
        fn after(&self, call: PluginCall, result: Result<(), &PluginError>) {
            self.seen.lock().unwrap().push((call, result.is_ok()));
        }
    }

    #[test]
    fn every_call_goes_through_the_hooks_and_a_refused_one_is_not_forwarded() {
        let p = Layered::wrap(Box::new(NullPlugin::new()), Log::default());
        assert_eq!(p.info().name, "log(null)");
        assert_eq!(p.info().devices, 1);
        let s = p.create_streams(0, 1).unwrap()[0];
        let a = p.alloc(s, 64).unwrap();
        assert!(p.alloc(StreamHandle(9), 64).is_err());
        let e = p.free(s, a).unwrap_err();
        assert_eq!(e.to_string(), "free: refused");
        // Not forwarded: the null plugin still counts the allocation live.
        assert_eq!(p.inner().live_device_allocs(), 1);
        assert_eq!(p.hooks().refused.load(Ordering::Relaxed), 1);
        assert_eq!(
            *p.hooks().seen.lock().unwrap(),
            [
                (PluginCall::CreateStreams, true),
                (PluginCall::Alloc, true),
                (PluginCall::Alloc, false),
            ]
        );
    }

    #[test]
    fn a_borrowed_plugin_can_be_layered_and_the_unit_hooks_change_nothing() {
        let null = NullPlugin::new();
        let p = Layered::wrap(&null as &dyn Plugin, ());
        assert_eq!(p.info(), null.info());
        let s = p.create_streams(0, 2).unwrap();
        assert_eq!(s.len(), 2);
        assert!(p.drain_timings().is_empty());
    }

    #[test]
    fn calls_are_listed_once_in_trait_order_with_their_message_names() {
        for (i, c) in PluginCall::ALL.into_iter().enumerate() {
            assert_eq!(c as usize, i);
        }
        assert_eq!(PluginCall::COUNT, 27);
        assert_eq!(PluginCall::Submit.to_string(), "h2d");
        assert_eq!(PluginCall::GraphUpdate.name(), "graph update");
        assert_eq!(PluginCall::Launch.kind(), crate::plugin::CallKind::Stream);
        assert_eq!(PluginCall::Query.kind(), crate::plugin::CallKind::HostWait);
    }
}
