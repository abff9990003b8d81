//! Dependency tracking (in progress).
