//! The verifier's model of CUDA stream semantics as vector clocks.
//!
//! A clock has one entry per stream and one per host lane after them: entry `t` = how
//! many ops of stream (or lane) `t` (in issue order) are known complete. Each stream and
//! each lane has the clock its next op starts with ("known"; a lane's also what the host
//! waits it ran taught it), the issuing thread ("host") has the clock of what it knows
//! complete, and each recorded event keeps the clock its stream had when it was
//! recorded. Sources: CUDA Runtime API §6.4
//! "Stream Management" (in-order streams, `cuStreamSynchronize`) and §6.5 "Event
//! Management" (`cuEventRecord`, `cuStreamWaitEvent`).

use super::NONE;

/// `a := a ⊔ b`, entry by entry. `O(S)`.
pub(super) fn join(a: &mut [u32], b: &[u32]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x = (*x).max(*y);
    }
}

/// The clocks of one schedule's streams, host and events, and each device op's position
/// on its stream. `O(S² + V + events)` memory for `S` streams and `V` ops.
pub(super) struct Clocks {
    /// Clock width: the number of streams, at least 1.
    s: usize,
    /// Row `t` (`s` entries): what is complete before the next op issued on stream `t`
    /// starts.
    known: Vec<u32>,
    /// What the host knows complete.
    pub(super) host: Vec<u32>,
    /// Ops issued so far on each stream.
    count: Vec<u32>,
    /// Position on its stream of each device op (index = op index); [`NONE`] until issued.
    pos: Vec<u32>,
    /// Per event: the clock it captured, once recorded.
    event: Vec<Option<Vec<u32>>>,
    /// Per event: waited on by some stream or the host.
    pub(super) waited: Vec<bool>,
}

impl Clocks {
    /// Everything at zero: nothing issued, nothing known, no event recorded.
    pub(super) fn new(streams: usize, ops: usize, events: usize) -> Clocks {
        let s = streams.max(1);
        Clocks {
            s,
            known: vec![0; s * s],
            host: vec![0; s],
            count: vec![0; s],
            pos: vec![NONE; ops],
            event: vec![None; events],
            waited: vec![false; events],
        }
    }

    /// The clock width `S`.
    pub(super) fn width(&self) -> usize {
        self.s
    }

    /// The clock the next op on stream `t` starts with (without the host's). `t < S`.
    pub(super) fn known(&self, t: usize) -> &[u32] {
        &self.known[t * self.s..(t + 1) * self.s]
    }

    fn known_mut(&mut self, t: usize) -> &mut [u32] {
        &mut self.known[t * self.s..(t + 1) * self.s]
    }

    /// Into `out`: the clock an op issued now starts with: on stream `t`, what that stream
    /// knows joined with what the host knows (the host issues it after everything it
    /// waited for); on the host (`None`), what the host knows. `O(S)`.
    pub(super) fn start(&self, stream: Option<usize>, out: &mut [u32]) {
        match stream {
            Some(t) => {
                out.copy_from_slice(self.known(t));
                join(out, &self.host);
            }
            None => out.copy_from_slice(&self.host),
        }
    }

    /// Whether clock `c` covers device op `op` on stream `t`: it was issued and its
    /// stream's prefix up to and including it is complete in `c`. `O(1)`.
    pub(super) fn covers(&self, c: &[u32], op: usize, t: usize) -> bool {
        self.pos[op] != NONE && c[t] > self.pos[op]
    }

    /// Issues device op `op` on stream `t`, which starts with clock `start`: it takes the
    /// stream's next position, and the stream's next op starts after it (in-order
    /// streams). `O(S)`.
    pub(super) fn issue(&mut self, op: usize, t: usize, start: &[u32]) {
        self.pos[op] = self.count[t];
        self.count[t] += 1;
        let count = self.count[t];
        let row = self.known_mut(t);
        row.copy_from_slice(start);
        row[t] = count;
    }

    /// `cuEventRecord(event, t)`: the event captures what stream `t` knows. Returns
    /// whether it had been recorded before (then the new record replaces the old). `O(S)`.
    pub(super) fn record(&mut self, event: usize, t: usize) -> bool {
        let twice = self.event[event].is_some();
        self.event[event] = Some(self.known(t).to_vec());
        twice
    }

    /// `cuStreamWaitEvent(t, event)`: stream `t` learns what the event captured. Returns
    /// the captured clock, or `None` (nothing learned) when the event is not recorded yet.
    /// `O(S)`.
    pub(super) fn wait(&mut self, event: usize, t: usize) -> Option<Vec<u32>> {
        let c = self.event[event].clone()?;
        self.waited[event] = true;
        join(self.known_mut(t), &c);
        Some(c)
    }

    /// `cuEventSynchronize(event)`: the waiter — the host lane of row `lane`, or the
    /// issuing thread (`None`) — learns what the event captured. Returns the captured
    /// clock, or `None` (nothing learned) when the event is not recorded yet. Counts as a
    /// use of the event ([`Clocks::waited`]). `O(S)`.
    pub(super) fn host_wait_event(
        &mut self,
        event: usize,
        lane: Option<usize>,
    ) -> Option<Vec<u32>> {
        let c = self.event[event].clone()?;
        self.waited[event] = true;
        self.learn(lane, &c);
        Some(c)
    }

    /// The host lane of row `lane` (or the issuing thread, `None`) learns clock `c`.
    /// `O(S)`.
    pub(super) fn learn(&mut self, lane: Option<usize>, c: &[u32]) {
        match lane {
            Some(t) => join(self.known_mut(t), c),
            None => join(&mut self.host, c),
        }
    }

    /// Whether `event` was recorded. `O(1)`.
    pub(super) fn recorded(&self, event: usize) -> bool {
        self.event[event].is_some()
    }

    /// `cuStreamSynchronize(t)` / `cuCtxSynchronize` over `streams`: the waiter (the host
    /// lane of row `lane`, or the issuing thread) learns what those streams know.
    /// Returns the clock learned. `O(S·|streams|)`.
    pub(super) fn host_wait(
        &mut self,
        streams: impl IntoIterator<Item = usize>,
        lane: Option<usize>,
    ) -> Vec<u32> {
        let mut c = vec![0; self.s];
        for t in streams {
            join(&mut c, self.known(t));
        }
        self.learn(lane, &c);
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_on_one_stream_are_ordered_and_others_only_through_an_event() {
        let mut c = Clocks::new(2, 3, 1);
        let mut start = vec![0; 2];
        c.start(Some(0), &mut start);
        c.issue(0, 0, &start);
        c.start(Some(0), &mut start);
        assert!(c.covers(&start, 0, 0), "in-order stream");
        c.start(Some(1), &mut start);
        assert!(!c.covers(&start, 0, 0), "another stream knows nothing yet");
        assert!(!c.record(0, 0));
        assert_eq!(c.wait(0, 1), Some(vec![1, 0]));
        c.start(Some(1), &mut start);
        assert!(c.covers(&start, 0, 0), "after the wait");
        assert!(c.record(0, 0), "second record");
    }

    #[test]
    fn a_wait_before_the_record_learns_nothing() {
        let mut c = Clocks::new(2, 1, 1);
        assert!(!c.recorded(0));
        assert_eq!(c.wait(0, 1), None);
        assert!(!c.waited[0]);
    }

    #[test]
    fn a_host_wait_on_an_event_learns_what_the_record_captured() {
        let mut c = Clocks::new(1, 2, 1);
        let mut start = vec![0; 1];
        assert_eq!(
            c.host_wait_event(0, None),
            None,
            "not recorded: nothing learned"
        );
        assert!(!c.waited[0]);
        c.start(Some(0), &mut start);
        c.issue(0, 0, &start);
        c.record(0, 0);
        c.start(Some(0), &mut start);
        c.issue(1, 0, &start);
        assert_eq!(c.host_wait_event(0, None), Some(vec![1]));
        assert!(c.waited[0], "a use of the event");
        c.start(None, &mut start);
        assert!(c.covers(&start, 0, 0));
        assert!(!c.covers(&start, 1, 0), "issued after the record");
    }

    #[test]
    fn the_host_learns_only_the_streams_it_waits_for() {
        let mut c = Clocks::new(2, 2, 0);
        let mut start = vec![0; 2];
        c.start(Some(0), &mut start);
        c.issue(0, 0, &start);
        c.start(Some(1), &mut start);
        c.issue(1, 1, &start);
        assert_eq!(c.host_wait([1], None), vec![0, 1]);
        c.start(None, &mut start);
        assert!(!c.covers(&start, 0, 0));
        assert!(c.covers(&start, 1, 1));
        // A later op on s0 starts after what the host knows.
        c.start(Some(0), &mut start);
        assert!(c.covers(&start, 1, 1));
    }
}
