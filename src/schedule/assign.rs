//! Stream assignment (colouring): every op of a region on one stream.
//!
//! A region that depends on another prefers that region's stream while the predecessor
//! is still the stream's last region (a chain continues on its stream and needs no
//! event); otherwise it goes to the least loaded stream of its device's pool (fewest ops
//! so far, ties to the lowest index). `random_streams` picks a pool stream at random
//! instead, from a ChaCha8 generator with the given seed.
//!
//! Complexity: `O(V + E + R·S)` for `R` regions and `S` streams per device.

use super::{ScheduleOptions, StreamId, StreamInfo};
use crate::lower::{OpGraph, RegionId};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The stream of every device op.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamAssignment {
    /// All streams of all pools: stream `d * pool + k` is stream `k` of device `d`.
    pub streams: Vec<StreamInfo>,
    /// Stream of each op by op index; `None` for host ops.
    pub op_stream: Vec<Option<StreamId>>,
    /// Streams per device.
    pub pool: u32,
}

/// Assigns a stream to every device op.
///
/// Arguments: the lowered graph and the options (`streams_per_device` is clamped to at
/// least 1). Returns the assignment; never fails.
pub fn assign_streams(graph: &OpGraph, opts: &ScheduleOptions) -> StreamAssignment {
    let pool = opts.streams_per_device.max(1);
    let devices = graph.devices.max(1);
    let streams: Vec<StreamInfo> = (0..devices)
        .flat_map(|d| (0..pool).map(move |_| StreamInfo { device: d }))
        .collect();
    let mut op_stream = vec![None; graph.ops.len()];
    let mut region_stream: Vec<Option<StreamId>> = vec![None; graph.regions.len()];
    let mut tail: Vec<Option<RegionId>> = vec![None; streams.len()];
    let mut load = vec![0u64; streams.len()];
    let mut rng = opts.random_streams.map(ChaCha8Rng::seed_from_u64);
    let mut pred_regions: Vec<RegionId> = Vec::new();

    for (ri, region) in graph.regions.iter().enumerate() {
        if region.kind.is_host() || region.ops.is_empty() {
            continue;
        }
        let rid = RegionId(ri as u32);
        let base = region.device * pool;
        let stream = if let Some(rng) = rng.as_mut() {
            StreamId(base + rng.gen_range(0..pool))
        } else {
            pred_regions.clear();
            for op in region.ops.clone() {
                for p in graph.preds(crate::lower::OpId(op)) {
                    let pr = graph.op(*p).region;
                    if pr != rid {
                        pred_regions.push(pr);
                    }
                }
            }
            pred_regions.sort_unstable_by(|a, b| b.cmp(a));
            pred_regions.dedup();
            let chained = pred_regions.iter().find_map(|pr| {
                let s = region_stream[pr.index()]?;
                (streams[s.index()].device == region.device && tail[s.index()] == Some(*pr))
                    .then_some(s)
            });
            chained.unwrap_or_else(|| {
                let k = (0..pool)
                    .min_by_key(|k| (load[(base + k) as usize], *k))
                    .unwrap_or(0);
                StreamId(base + k)
            })
        };
        region_stream[ri] = Some(stream);
        tail[stream.index()] = Some(rid);
        load[stream.index()] += region.ops.len() as u64;
        for op in region.ops.clone() {
            op_stream[op as usize] = Some(stream);
        }
    }
    StreamAssignment {
        streams,
        op_stream,
        pool,
    }
}
