//! The limits every program is held to, by the file loader and by the lowering alike
//! (so a builder program and a graph file are refused the same way). They live in the
//! model, the first layer, so that neither the loader nor the lowering depends on the
//! other for them.

/// Largest buffer: 64 GiB. Checked before anything is allocated.
pub const MAX_BUFFER_BYTES: u64 = 64 << 30;
/// Largest total of all buffers: 256 GiB.
pub const MAX_TOTAL_BYTES: u64 = 256 << 30;
/// Largest `devices`.
pub const MAX_DEVICES: i64 = 1024;
/// Deepest nesting of `target_data` and `taskgraph` constructs: 64 levels accepted (a top-level one is
/// level 1), the 65th refused; the file loader and `lower` apply the same limit.
pub const MAX_DEPTH: usize = 64;
