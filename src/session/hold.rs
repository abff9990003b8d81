//! [`Hold`]: a value a session uses, borrowed from the application or shared with it.

use std::ops::Deref;
use std::sync::Arc;

/// A plan or plugin as a [`crate::Session`] (or a [`crate::PinnedBuf`]) holds it:
/// borrowed for `'p` ([`crate::Session::new`]) or shared through an [`Arc`]
/// ([`crate::Session::shared`], where `'p` is `'static` and the holder keeps the value
/// alive). Either way it derefs to the value; cloning a shared one clones the `Arc`.
pub(crate) enum Hold<'p, T: ?Sized> {
    Borrowed(&'p T),
    Shared(Arc<T>),
}

impl<T: ?Sized> Deref for Hold<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        match self {
            Hold::Borrowed(r) => r,
            Hold::Shared(a) => a,
        }
    }
}

impl<T: ?Sized> Clone for Hold<'_, T> {
    fn clone(&self) -> Self {
        match self {
            Hold::Borrowed(r) => Hold::Borrowed(r),
            Hold::Shared(a) => Hold::Shared(Arc::clone(a)),
        }
    }
}
