//! Bytes moved by a lowered program ([`BytesMoved`], issue 28 point 3): the one figure
//! every report prints (the `run` summary, the `schedule` header, the DOT region view,
//! the trace's counters, the bench tables), so they all read the same numbers.

use super::{ElidedBytes, OpGraph, OpKind};
use crate::model::human_bytes;
use std::fmt;

/// The bytes one run of an [`OpGraph`] copies, and the bytes transfer elision saved
/// ([`super::LowerOptions::elide`]), all in bytes (not elements).
///
/// `h2d + elided_h2d` and `d2h + d2h_dropped` are what OpenMP's mapping rules name (the
/// graph lowered with `elide: false`, as libomptarget copies): an elided H2D is never
/// issued, a dropped D2H neither; a deferred D2H is issued, later (it counts in `d2h`
/// and again in `d2h_deferred`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BytesMoved {
    /// Host → device copies (`H2D` ops).
    pub h2d: u64,
    /// Device → host copies (`D2H` ops, write-backs of deferred copies included).
    pub d2h: u64,
    /// Device → device copies (`PeerCopy` ops).
    pub peer: u64,
    /// H2D left out: a kept device copy already held the bytes ([`ElidedBytes::h2d`]).
    pub elided_h2d: u64,
    /// D2H never issued: a later D2H of the same bytes replaced it before anything read
    /// them ([`ElidedBytes::d2h`]).
    pub d2h_dropped: u64,
    /// D2H issued later than the mapping rules put them ([`ElidedBytes::d2h_deferred`]);
    /// part of `d2h`.
    pub d2h_deferred: u64,
    /// Kept device copies freed before their next use ([`ElidedBytes::evicted`]): that
    /// use copies them in again.
    pub evicted: u64,
    /// H2D issued ahead of need ([`ElidedBytes::prefetched`]); part of `h2d`.
    pub prefetched: u64,
}

impl BytesMoved {
    /// The figures of `g`: its copy ops' bytes ([`OpGraph::op_bytes`]) and its
    /// [`OpGraph::elided_bytes`]. `O(V + elided)` for `V` ops.
    pub fn of(g: &OpGraph) -> BytesMoved {
        let mut m = BytesMoved::from(g.elided_bytes());
        for id in g.op_ids() {
            match g.op(id).kind {
                OpKind::H2D { .. } => m.h2d += g.op_bytes(id),
                OpKind::D2H { .. } => m.d2h += g.op_bytes(id),
                OpKind::PeerCopy { .. } => m.peer += g.op_bytes(id),
                _ => {}
            }
        }
        m
    }

    /// H2D and D2H bytes the mapping rules name (`h2d + elided_h2d`, `d2h +
    /// d2h_dropped`): what the same program moves with elision off.
    pub fn unelided(&self) -> (u64, u64) {
        (self.h2d + self.elided_h2d, self.d2h + self.d2h_dropped)
    }
}

impl OpGraph {
    /// [`BytesMoved::of`] this graph.
    pub fn bytes_moved(&self) -> BytesMoved {
        BytesMoved::of(self)
    }
}

impl From<ElidedBytes> for BytesMoved {
    /// The elided figures alone (copies 0).
    fn from(e: ElidedBytes) -> BytesMoved {
        BytesMoved {
            elided_h2d: e.h2d,
            d2h_dropped: e.d2h,
            d2h_deferred: e.d2h_deferred,
            evicted: e.evicted,
            prefetched: e.prefetched,
            ..BytesMoved::default()
        }
    }
}

impl fmt::Display for BytesMoved {
    /// `H2D 768 KiB, D2H 256 KiB, peer 0 B; elided H2D 11.2 MiB, D2H 3.8 MiB dropped,
    /// 256 KiB deferred; evicted 0 B, prefetched 0 B` (every field, always, in
    /// [`human_bytes`] units).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let h = human_bytes;
        write!(
            f,
            "H2D {}, D2H {}, peer {}; elided H2D {}, D2H {} dropped, {} deferred; \
             evicted {}, prefetched {}",
            h(self.h2d),
            h(self.d2h),
            h(self.peer),
            h(self.elided_h2d),
            h(self.d2h_dropped),
            h(self.d2h_deferred),
            h(self.evicted),
            h(self.prefetched)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_names_every_figure() {
        let m = BytesMoved {
            h2d: 768 << 10,
            d2h: 256 << 10,
            peer: 0,
            elided_h2d: (12 << 20) - (768 << 10),
            d2h_dropped: (4 << 20) - (256 << 10),
            d2h_deferred: 256 << 10,
            evicted: 1024,
            prefetched: 3,
        };
        assert_eq!(
            m.to_string(),
            "H2D 768 KiB, D2H 256 KiB, peer 0 B; elided H2D 11.2 MiB, D2H 3.8 MiB dropped, \
             256 KiB deferred; evicted 1 KiB, prefetched 3 B"
        );
        assert_eq!(m.unelided(), (12 << 20, 4 << 20));
    }
}
