//! The imported program's buffers: one per file, its length at the size scale, and
//! whether it stays resident on the device (mapped by the enclosing `target data`) and
//! with which map type (see the module docs of [`super`]).

use super::dag::TaskDag;
use super::parse::{join, RawWorkflow};
use super::MAX_BUFFER_BYTES;
use crate::import::ImportError;
use crate::model::MapType;

/// Map type of each file in the enclosing `target data`; `None`: not resident. A file is
/// resident when one task produces it and another consumes it; its map has `to` when
/// its first user in `dag.order` reads it, `from` when its last user writes it, and is
/// `alloc` otherwise.
///
/// Complexity: `O(F + R)` for `F` files and `R` file references.
pub(super) fn resident_map_types(dag: &TaskDag) -> Vec<Option<MapType>> {
    let mut position = vec![0usize; dag.order.len()];
    for (pos, &t) in dag.order.iter().enumerate() {
        position[t] = pos;
    }
    let mut resident = vec![None; dag.producers.len()];
    for (f, (producers, consumers)) in dag.producers.iter().zip(&dag.consumers).enumerate() {
        let shared = producers.iter().any(|p| consumers.iter().any(|c| c != p));
        if !shared {
            continue;
        }
        let users = producers.iter().chain(consumers.iter());
        let first = users.clone().min_by_key(|&&t| position[t]).copied();
        let last = users.max_by_key(|&&t| position[t]).copied();
        let to = first.is_some_and(|t| dag.inputs[t].binary_search(&f).is_ok());
        let from = last.is_some_and(|t| dag.outputs[t].binary_search(&f).is_ok());
        resident[f] = Some(match (to, from) {
            (true, true) => MapType::ToFrom,
            (true, false) => MapType::To,
            (false, true) => MapType::From,
            (false, false) => MapType::Alloc,
        });
    }
    resident
}

/// Buffer length per file in bytes: `max(1, round(sizeInBytes × size_scale))`.
///
/// Errors: [`ImportError::TooLarge`] for the first file over [`MAX_BUFFER_BYTES`] (or not
/// finite) after scaling.
pub(super) fn buffer_lengths(
    wf: &RawWorkflow,
    size_scale: f64,
    source_name: &str,
) -> Result<Vec<u64>, ImportError> {
    let mut buffer_len = Vec::with_capacity(wf.files.len());
    for f in &wf.files {
        let scaled = (f.bytes * size_scale).round();
        if !scaled.is_finite() || scaled > MAX_BUFFER_BYTES as f64 {
            return Err(ImportError::TooLarge {
                source_name: source_name.to_string(),
                path: join(&f.path, "sizeInBytes"),
                file: f.id.clone(),
                bytes: scaled,
                limit: MAX_BUFFER_BYTES,
            });
        }
        buffer_len.push((scaled as u64).max(1));
    }
    Ok(buffer_len)
}
