//! Code registered from Rust, for the embedded API: host steps as closures ([`HostFn`],
//! made by [`ProgramBuilder::host_fn`](super::ProgramBuilder::host_fn)).
//!
//! A closure lives in the program model and travels with it, through lowering into the op
//! graph and into a [`crate::Plan`]. It is shared, not copied: cloning a program clones an
//! `Arc`, and two programs compare equal only when they hold the very same closures
//! (`PartialEq` by pointer; `Debug` prints `<closure>`). Graph files cannot hold it:
//! [`crate::file::to_toml`] writes a host closure's task as a plain host task (its
//! sections).

use super::typed::ProgramTag;
use crate::runtime::views::{panic_message, BoxError, HostCtx, HostFnError, ViewError};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, PoisonError};

/// The body of a host step: called with views of the task's declared sections.
type HostBody = dyn FnMut(&mut HostCtx<'_>) -> Result<(), BoxError> + Send;

/// A host step's closure ([`ProgramBuilder::host_fn`](super::ProgramBuilder::host_fn)),
/// shareable between clones of a program and between threads.
///
/// Concurrency contract: calls are serialized by a mutex (the closure is `FnMut`); a run
/// calls it once per run of its task, from the executor's host thread, and the reference
/// interpreter once per reference run. A closure that panicked is still called by later
/// runs (the mutex's poison is cleared): its state is whatever the panic left. A closure
/// that runs (or takes the reference of) a plan holding itself deadlocks.
#[derive(Clone)]
pub struct HostFn {
    body: Arc<Mutex<Box<HostBody>>>,
    program: ProgramTag,
}

impl HostFn {
    /// Wraps `f` as a host step of the program tagged `program` (typed handles the
    /// closure uses must be of it).
    pub fn new<F>(program: ProgramTag, f: F) -> HostFn
    where
        F: FnMut(&mut HostCtx<'_>) -> Result<(), BoxError> + Send + 'static,
    {
        HostFn {
            body: Arc::new(Mutex::new(Box::new(f))),
            program,
        }
    }

    /// The program the closure was built for.
    pub fn program(&self) -> ProgramTag {
        self.program
    }

    /// Calls the closure with `ctx`, catching a panic.
    ///
    /// Errors: [`HostFnError::View`] when it returns a [`ViewError`] (through `?`),
    /// [`HostFnError::Failed`] for any other error, [`HostFnError::Panicked`].
    pub(crate) fn call(&self, ctx: &mut HostCtx<'_>) -> Result<(), HostFnError> {
        let mut f = self.body.lock().unwrap_or_else(PoisonError::into_inner);
        match catch_unwind(AssertUnwindSafe(|| (*f)(ctx))) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(match e.downcast::<ViewError>() {
                Ok(v) => HostFnError::View(*v),
                Err(e) => HostFnError::Failed(e),
            }),
            Err(payload) => Err(HostFnError::Panicked(panic_message(&*payload))),
        }
    }
}

impl fmt::Debug for HostFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<closure>")
    }
}

impl PartialEq for HostFn {
    /// The same closure (not an equal one: closures cannot be compared).
    fn eq(&self, other: &HostFn) -> bool {
        Arc::ptr_eq(&self.body, &other.body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Program;

    #[test]
    fn host_fns_compare_by_identity_and_report_errors_and_panics() {
        let tag = ProgramTag::fresh();
        let ok = HostFn::new(tag, |_| Ok(()));
        assert_eq!(ok, ok.clone());
        assert_ne!(ok, HostFn::new(tag, |_| Ok(())));
        assert_eq!(format!("{ok:?}"), "<closure>");
        assert!(ok.program().same(tag));
        let call = |f: &HostFn| {
            // SAFETY: no sections are declared, so no memory is viewed.
            let mut ctx = unsafe { HostCtx::new("t", &[], Some(tag), &[], &[], |_| None) };
            f.call(&mut ctx)
        };
        assert!(call(&ok).is_ok());
        let failing = HostFn::new(tag, |_| Err("no".into()));
        assert!(matches!(call(&failing), Err(HostFnError::Failed(e)) if e.to_string() == "no"));
        let refused = HostFn::new(tag, |ctx| {
            ctx.read::<f32>(crate::model::BufferId(3))?;
            Ok(())
        });
        assert!(matches!(
            call(&refused),
            Err(HostFnError::View(ViewError::UnknownBuffer { id: 3 }))
        ));
        let n = std::sync::atomic::AtomicUsize::new(0);
        let n = Arc::new(n);
        let counter = n.clone();
        let panics = HostFn::new(tag, move |_| {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            panic!("at {}", 42)
        });
        for _ in 0..2 {
            // Called again after a panic: the poisoned lock is taken over.
            assert!(matches!(call(&panics), Err(HostFnError::Panicked(m)) if m == "at 42"));
        }
        assert_eq!(n.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    #[test]
    fn programs_and_op_graphs_with_closures_stay_clone_send_sync() {
        fn shareable<T: Clone + Send + Sync>() {}
        shareable::<Program>();
        shareable::<crate::lower::OpGraph>();
        shareable::<crate::Plan>();
        shareable::<HostFn>();
    }
}
