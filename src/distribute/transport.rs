//! How ranks exchange messages: the [`Transport`] contract, and [`ChannelTransport`], an
//! in-process transport that runs every rank as a thread of one process (for tests and
//! for checking a distribution without MPI), with optional delivery jitter.

use super::transfer::Envelope;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Why a message could not be sent or received.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TransportError {
    /// No message arrived within the progress timeout.
    #[error("no message {envelope} arrived within {secs} s (progress timeout)")]
    Timeout { envelope: Envelope, secs: f64 },
    /// Another rank failed and ended the run.
    #[error("rank {rank} failed: {message}")]
    Aborted { rank: u32, message: String },
    /// The message has another size than the receive expects.
    #[error("message {envelope} has {got} bytes, the receive expects {expected}")]
    Size {
        envelope: Envelope,
        expected: u64,
        got: u64,
    },
    /// The MPI library reported an error.
    #[error("MPI: {0}")]
    Mpi(String),
    /// The receive gave up because its caller asked it to (`stop` in
    /// [`Transport::recv`]: this rank's run failed elsewhere).
    #[error("receive of {envelope} stopped: this rank's run failed")]
    Stopped { envelope: Envelope },
}

/// Moves messages between ranks.
///
/// Contract (what the verifier's deadlock model assumes, [`super::verify`]):
/// - [`Transport::send`] never blocks on the receiver: it returns once the transport owns
///   the bytes (an `MPI_Isend` of a buffer the transport owns, posted by the caller or by
///   a progress thread; a progress thread completes it if the caller's own test did not).
/// - A message that has arrived is taken whether or not its receive is polling for it
///   (a progress thread takes every incoming message into a mailbox); a receive may
///   also take its own message, for a bounded time, to save the hand-off.
/// - [`Transport::recv`] blocks until the message with that envelope has arrived, then
///   returns its bytes; it fails after the transport's progress timeout, as soon as
///   some rank called [`Transport::abort`], or within `STOP_POLL` (10 ms) of its `stop`
///   returning true.
/// - Messages are matched by their whole [`Envelope`], never by arrival order.
/// - All methods may be called from any thread (host lanes of one rank).
pub trait Transport: Send + Sync {
    /// This process's rank.
    fn rank(&self) -> u32;
    /// Number of ranks.
    fn ranks(&self) -> u32;
    /// Sends `data` (host bytes) to `envelope.to`.
    fn send(&self, envelope: Envelope, data: Vec<u8>) -> Result<(), TransportError>;
    /// Receives the message `envelope` of `bytes` bytes; gives up with
    /// [`TransportError::Stopped`] once `stop()` is true (checked at least every
    /// `STOP_POLL` (10 ms) while it waits).
    fn recv(
        &self,
        envelope: Envelope,
        bytes: u64,
        stop: &dyn Fn() -> bool,
    ) -> Result<Vec<u8>, TransportError>;
    /// Ends the run on every rank: their waiting and later receives fail with
    /// [`TransportError::Aborted`] naming this rank and `message`.
    fn abort(&self, message: &str);
}

/// How often a waiting [`Transport::recv`] checks its `stop`: a rank whose run failed
/// while a receive waited for a message no rank will send ends within this, not after
/// the progress timeout.
pub const STOP_POLL: Duration = Duration::from_millis(10);

/// What all ranks of a [`ChannelTransport`] share.
struct Hub {
    state: Mutex<HubState>,
    cv: Condvar,
    timeout: Duration,
    jitter_us: u64,
}

#[derive(Default)]
struct HubState {
    /// Delivered or in-flight messages: envelope → (deliver at, bytes), in send order.
    /// Messages of one envelope are received in the order they were sent (MPI's
    /// non-overtaking rule, MPI 4.0 §3.5): a rank session run again sends the same
    /// envelopes, and a rank a run ahead must not overwrite the run before's.
    mail: HashMap<Envelope, VecDeque<(Instant, Vec<u8>)>>,
    aborted: Option<(u32, String)>,
    rng: Option<ChaCha8Rng>,
}

/// One rank's end of an in-process transport: ranks are threads of one process, a send
/// puts the bytes in the receiver's mailbox (after a random delay of up to `jitter_us`
/// µs when jitter is on, so tests see messages arrive late and out of order).
#[derive(Clone)]
pub struct ChannelTransport {
    hub: Arc<Hub>,
    rank: u32,
    ranks: u32,
}

impl ChannelTransport {
    /// The ends of `ranks` connected ranks (index = rank), receives failing after
    /// `timeout`; `jitter` = `Some((seed, max_us))` delays each message by a random
    /// 0..=max_us µs drawn from `seed`.
    pub fn connected(
        ranks: u32,
        timeout: Duration,
        jitter: Option<(u64, u64)>,
    ) -> Vec<ChannelTransport> {
        let hub = Arc::new(Hub {
            state: Mutex::new(HubState {
                rng: jitter.map(|(seed, _)| ChaCha8Rng::seed_from_u64(seed)),
                ..HubState::default()
            }),
            cv: Condvar::new(),
            timeout,
            jitter_us: jitter.map_or(0, |(_, us)| us),
        });
        (0..ranks)
            .map(|rank| ChannelTransport {
                hub: hub.clone(),
                rank,
                ranks,
            })
            .collect()
    }

    /// The rank that aborted the run first and its message, if any rank did.
    pub fn first_abort(&self) -> Option<(u32, String)> {
        self.lock().aborted.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HubState> {
        self.hub
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl Transport for ChannelTransport {
    fn rank(&self) -> u32 {
        self.rank
    }

    fn ranks(&self) -> u32 {
        self.ranks
    }

    fn send(&self, envelope: Envelope, data: Vec<u8>) -> Result<(), TransportError> {
        let mut st = self.lock();
        let delay = match st.rng.as_mut() {
            Some(rng) => Duration::from_micros(rng.gen_range(0..=self.hub.jitter_us)),
            None => Duration::ZERO,
        };
        let at = Instant::now() + delay;
        st.mail.entry(envelope).or_default().push_back((at, data));
        drop(st);
        self.hub.cv.notify_all();
        Ok(())
    }

    fn recv(
        &self,
        envelope: Envelope,
        bytes: u64,
        stop: &dyn Fn() -> bool,
    ) -> Result<Vec<u8>, TransportError> {
        let deadline = Instant::now() + self.hub.timeout;
        let mut st = self.lock();
        loop {
            if let Some((rank, message)) = &st.aborted {
                return Err(TransportError::Aborted {
                    rank: *rank,
                    message: message.clone(),
                });
            }
            let now = Instant::now();
            let ready = st.mail.get(&envelope).and_then(|q| q.front()).map(|m| m.0);
            if ready.is_some_and(|at| at <= now) {
                let queue = st.mail.get_mut(&envelope).expect("present");
                let (_, data) = queue.pop_front().expect("present");
                if queue.is_empty() {
                    st.mail.remove(&envelope);
                }
                if data.len() as u64 != bytes {
                    return Err(TransportError::Size {
                        envelope,
                        expected: bytes,
                        got: data.len() as u64,
                    });
                }
                return Ok(data);
            }
            if stop() {
                return Err(TransportError::Stopped { envelope });
            }
            if now >= deadline {
                return Err(TransportError::Timeout {
                    envelope,
                    secs: self.hub.timeout.as_secs_f64(),
                });
            }
            let until = ready.map_or(deadline, |at| at.min(deadline));
            st = self
                .hub
                .cv
                .wait_timeout(st, (until - now).min(STOP_POLL))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    fn abort(&self, message: &str) {
        let mut st = self.lock();
        if st.aborted.is_none() {
            st.aborted = Some((self.rank, message.to_string()));
        }
        drop(st);
        self.hub.cv.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(seq: u64) -> Envelope {
        Envelope {
            from: 0,
            to: 1,
            seq,
        }
    }

    #[test]
    fn messages_match_by_envelope_not_order() {
        let t = ChannelTransport::connected(2, Duration::from_secs(5), Some((7, 300)));
        t[0].send(env(0), vec![1]).unwrap();
        t[0].send(env(1), vec![2, 3]).unwrap();
        assert_eq!(t[1].recv(env(1), 2, &|| false).unwrap(), [2, 3]);
        assert_eq!(t[1].recv(env(0), 1, &|| false).unwrap(), [1]);
    }

    #[test]
    fn size_timeout_and_abort_are_errors() {
        let t = ChannelTransport::connected(2, Duration::from_millis(20), None);
        t[0].send(env(0), vec![1, 2]).unwrap();
        assert!(matches!(
            t[1].recv(env(0), 4, &|| false),
            Err(TransportError::Size {
                expected: 4,
                got: 2,
                ..
            })
        ));
        assert!(matches!(
            t[1].recv(env(9), 1, &|| false),
            Err(TransportError::Timeout { .. })
        ));
        t[0].abort("op #3 failed");
        assert_eq!(
            t[1].recv(env(1), 1, &|| false).unwrap_err().to_string(),
            "rank 0 failed: op #3 failed"
        );
    }

    #[test]
    fn a_receive_stops_when_asked_before_the_progress_timeout() {
        let t = ChannelTransport::connected(2, Duration::from_secs(3600), None);
        let asked = std::sync::atomic::AtomicU32::new(0);
        // `stop` turns true at its third check: the receive waits, checks again, stops.
        let stop = || asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst) >= 2;
        assert_eq!(
            t[1].recv(env(0), 1, &stop),
            Err(TransportError::Stopped { envelope: env(0) })
        );
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 3);
        // A message that is there is taken before `stop` is asked.
        t[0].send(env(1), vec![5]).unwrap();
        assert_eq!(t[1].recv(env(1), 1, &|| true).unwrap(), [5]);
    }
}
