//! Pure parts of the CUDA plugin's op timing (`timing.rs`, whose docs give the rule and
//! why): where a timed unit starts, the `seq`s a unit covers, and the arithmetic of the
//! copy kernel's stamps. Tested without a GPU.

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

/// One calibration's bound on `%globaltimer` at the clock origin (ns): a stamp-only
/// copy kernel ended at `end_ns` and the event recorded right after it completed
/// `since_ms` after the origin, so the timer read at most `end_ns − since` there (the
/// event completes after the kernel's end, within about a µs). `None` for a slot the
/// kernel did not write (0).
pub(super) fn clock_origin(end_ns: u64, since_ms: f64) -> Option<i64> {
    (end_ns > 0).then(|| end_ns as i64 - (since_ms * 1e6).round() as i64)
}

/// A stamped batch's start and end in ms after the clock origin, from its slot's words
/// `[start, end]` (`%globaltimer`, ns) and the timer's value at the origin. `None` for a
/// slot not (fully) written: a word 0, or the end before the start.
pub(super) fn stamp_span([start, end]: [u64; 2], origin_ns: i64) -> Option<(f64, f64)> {
    if start == 0 || end < start {
        return None;
    }
    let ms = |ns: u64| (ns as i64 - origin_ns) as f64 / 1e6;
    Some((ms(start), ms(end)))
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
    fn calibration_bounds_and_stamp_spans_are_in_ms_after_the_origin() {
        // The kernel ended at 5 000 000 ns; the event after it completed 2.5 ms after the
        // origin: the timer read at most 2 500 000 ns at the origin.
        assert_eq!(clock_origin(5_000_000, 2.5), Some(2_500_000));
        assert_eq!(clock_origin(0, 2.5), None, "slot not written");
        // The largest bound of several is the tightest.
        let best = [clock_origin(5_000_000, 2.5), clock_origin(9_000_900, 6.5)]
            .into_iter()
            .max()
            .flatten();
        assert_eq!(best, Some(2_500_900));
        // A batch from 3 500 000 to 3 504 000 ns: 1.0 to 1.004 ms after that origin.
        let (a, b) = stamp_span([3_500_000, 3_504_000], 2_500_000).unwrap();
        assert!(
            (a - 1.0).abs() < 1e-12 && (b - 1.004).abs() < 1e-12,
            "{a} {b}"
        );
        assert_eq!(
            stamp_span([0, 3_504_000], 2_500_000),
            None,
            "start not written"
        );
        assert_eq!(
            stamp_span([3_504_000, 0], 2_500_000),
            None,
            "end not written"
        );
        assert_eq!(
            stamp_span([3_504_000, 3_500_000], 0),
            None,
            "end before start"
        );
        // Before the origin (a stamp taken while calibrating): negative, kept as is.
        assert_eq!(
            stamp_span([1_000_000, 1_000_000], 2_000_000),
            Some((-1.0, -1.0))
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
