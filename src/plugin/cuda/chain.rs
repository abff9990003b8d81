//! Pure parts of the CUDA plugin's op timing (`timing.rs`, whose docs give the rule and
//! why): where a timed unit starts, and the `seq`s a unit covers. Tested without a GPU.

use super::batch::MAX_COPIES;

/// How a unit starts ([`start_rule`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Start {
    /// On the end mark of the stream's previous unit (no record).
    Chained,
    /// On a new mark.
    Fresh,
}

/// Where a unit starts: `open`, nothing was issued to the stream since its last unit;
/// `adjacent`, this unit is issued by the same plugin call right after that unit;
/// `pending`, asks the driver whether that unit's end mark is still pending (called
/// only when neither decides: at most once).
pub(super) fn start_rule(open: bool, adjacent: bool, pending: impl FnOnce() -> bool) -> Start {
    match (open, adjacent) {
        (false, _) => Start::Fresh,
        (true, true) => Start::Chained,
        (true, false) if pending() => Start::Chained,
        _ => Start::Fresh,
    }
}

/// The stream `seq`s a unit covers, inline: one for a kernel or an engine copy, every
/// copy's for a batch (at most [`MAX_COPIES`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Seqs {
    n: u8,
    seq: [u64; MAX_COPIES],
}

impl Seqs {
    pub(super) fn one(seq: u64) -> Seqs {
        let mut s = Seqs::default();
        s.push(seq);
        s
    }

    /// Adds `seq`; panics past [`MAX_COPIES`] (a batch never holds more).
    pub(super) fn push(&mut self, seq: u64) {
        self.seq[self.n as usize] = seq;
        self.n += 1;
    }

    /// How many calls.
    pub(super) fn len(&self) -> usize {
        self.n as usize
    }

    pub(super) fn as_slice(&self) -> &[u64] {
        &self.seq[..self.n as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// The rule's answer and how many times it asked the driver.
    fn decide(open: bool, adjacent: bool, pending: bool) -> (Start, u32) {
        let asked = Cell::new(0);
        let s = start_rule(open, adjacent, || {
            asked.set(asked.get() + 1);
            pending
        });
        (s, asked.get())
    }

    #[test]
    fn a_unit_chains_only_on_a_busy_or_adjacent_previous_unit_asking_at_most_once() {
        // Something else went to the stream (or nothing was timed yet): fresh, no query.
        assert_eq!(decide(false, false, true), (Start::Fresh, 0));
        assert_eq!(decide(false, true, true), (Start::Fresh, 0));
        // Right after the batch its own call issued: chained without a query.
        assert_eq!(decide(true, true, false), (Start::Chained, 0));
        // Otherwise one query: still pending, chained; completed (ran dry), fresh.
        assert_eq!(decide(true, false, true), (Start::Chained, 1));
        assert_eq!(decide(true, false, false), (Start::Fresh, 1));
    }

    #[test]
    fn seqs_hold_one_call_or_a_full_batch_in_order() {
        assert_eq!(Seqs::one(7).as_slice(), &[7]);
        assert_eq!(Seqs::one(7).len(), 1);
        let mut s = Seqs::default();
        assert!(s.as_slice().is_empty());
        for k in 0..MAX_COPIES as u64 {
            s.push(10 + 2 * k);
        }
        assert_eq!(s.len(), MAX_COPIES);
        assert_eq!(s.as_slice()[..3], [10, 12, 14]);
        assert_eq!(
            s.as_slice()[MAX_COPIES - 1],
            10 + 2 * (MAX_COPIES as u64 - 1)
        );
    }

    #[test]
    #[should_panic]
    fn a_ninth_seq_does_not_fit() {
        let mut s = Seqs::default();
        for k in 0..=MAX_COPIES as u64 {
            s.push(k);
        }
    }
}
