//! Clock columns: the vector clocks of sync insertion ([`super::sync`]) and of the
//! verifier ([`crate::verify`]) have one entry per stream that carries work, not one per
//! stream of every device's pool. A program placed over 1024 devices with 128 streams
//! each has 131 072 streams; one region uses one of them, and clocks `S` wide over all
//! of them would take `S²` entries (64 GiB) where one entry does. Columns are in stream
//! order, so "the lowest stream" means the same in columns as in streams.

use super::StreamId;

/// "No column": a stream that carries no work.
const NONE: u32 = u32::MAX;

/// The streams that carry work, numbered densely in stream order.
#[derive(Clone, Debug, Default)]
pub(crate) struct Columns {
    /// Per stream (index = stream id): its column, or [`NONE`].
    col: Vec<u32>,
    /// Per column: its stream.
    stream: Vec<StreamId>,
}

impl Columns {
    /// The columns of `used` among `streams` streams (ids at or past `streams` are
    /// ignored: a malformed schedule's, which the verifier reports apart).
    /// `O(streams + |used|)`.
    pub(crate) fn new(streams: usize, used: impl IntoIterator<Item = StreamId>) -> Columns {
        let mut col = vec![NONE; streams];
        for s in used {
            if let Some(c) = col.get_mut(s.index()) {
                *c = 0;
            }
        }
        let mut stream = Vec::new();
        for (i, c) in col.iter_mut().enumerate() {
            if *c != NONE {
                *c = stream.len() as u32;
                stream.push(StreamId(i as u32));
            }
        }
        Columns { col, stream }
    }

    /// Number of columns: the clock width (at least 1, so a schedule without device work
    /// still has clocks to compare).
    pub(crate) fn width(&self) -> usize {
        self.stream.len().max(1)
    }

    /// The column of stream `s`, if it carries work. `O(1)`.
    pub(crate) fn col(&self, s: StreamId) -> Option<usize> {
        match self.col.get(s.index()) {
            Some(&c) if c != NONE => Some(c as usize),
            _ => None,
        }
    }

    /// The stream of column `c` (`c < width()`; column 0 of a schedule without device
    /// work is `s0`). `O(1)`.
    pub(crate) fn stream(&self, c: usize) -> StreamId {
        self.stream.get(c).copied().unwrap_or(StreamId(c as u32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_number_the_used_streams_in_order() {
        let c = Columns::new(8, [StreamId(5), StreamId(2), StreamId(5), StreamId(9)]);
        assert_eq!(c.width(), 2);
        assert_eq!(c.col(StreamId(2)), Some(0));
        assert_eq!(c.col(StreamId(5)), Some(1));
        assert_eq!(c.col(StreamId(3)), None);
        assert_eq!(c.col(StreamId(9)), None, "out of range");
        assert_eq!(c.stream(1), StreamId(5));
        assert_eq!(Columns::new(4, []).width(), 1);
    }
}
