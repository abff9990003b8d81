//! [`MpiTransport`]: ranks as MPI processes (the `mpi` feature; rsmpi over the system
//! MPI, Debian's OpenMPI 4.1).
//!
//! One progress thread makes every MPI call of the process (MPI is initialized there, with
//! `MPI_THREAD_MULTIPLE` asked and at least `MPI_THREAD_SERIALIZED` required, MPI 4.0
//! §11.2.1): it posts each send as an `MPI_Isend` of a buffer it owns, tests them until
//! they complete, and takes every incoming message with `MPI_Improbe` + `MPI_Mrecv` into a
//! mailbox keyed by envelope, where the host lanes' receives wait (with the progress
//! timeout). So [`Transport::send`] never blocks on the receiver and GPU or lane threads
//! never call MPI. Debian's OpenMPI is not CUDA-aware: the bytes sent and received are
//! host bytes (the send and receive tasks read and write host buffers).
//!
//! Envelopes (see [`super::transfer`]): message `seq` of a pair goes with tag
//! `seq mod 32768` on data communicator `seq / 32768` (32767 is the least `MPI_TAG_UB`
//! MPI allows, MPI 4.0 §3.2.3), so tags never exceed the bound on any MPI; the
//! communicators (duplicates of `MPI_COMM_WORLD`) are made collectively by
//! [`MpiTransport::reserve`] from the plan's largest `seq`, before any message. An abort
//! goes to every other rank on a control communicator of its own.

use super::transfer::Envelope;
use super::transport::{Transport, TransportError};
use crossbeam_channel::{unbounded, Receiver, Sender};
use mpi::collective::CommunicatorCollectives;
use mpi::point_to_point::{Destination, MatchedReceiveVec, Source};
use mpi::request::{Request, StaticScope};
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::Threading;
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Tags per data communicator: `MPI_TAG_UB` ≥ 32767 on every MPI (MPI 4.0 §3.2.3).
pub const TAGS_PER_COMM: u64 = 32768;

/// How long the progress thread polls in-flight sends before it yields the core once.
const SEND_BURST: Duration = Duration::from_micros(500);

/// Idle passes (nothing sent, received or waited for) the progress thread polls
/// before it backs off.
const IDLE_SPINS: u32 = 1000;

/// How long the progress thread blocks on its command channel per pass while it backs
/// off (a command ends the wait at once): incoming messages are taken at least this
/// often.
const IDLE_WAIT: Duration = Duration::from_micros(50);

enum Cmd {
    Send(Envelope, Vec<u8>),
    Reserve(usize),
    Abort(String),
    Finish,
}

#[derive(Default)]
struct State {
    mail: HashMap<Envelope, Vec<u8>>,
    aborted: Option<(u32, String)>,
    reserved: bool,
    failed: Option<String>,
}

struct Shared {
    state: Mutex<State>,
    cv: Condvar,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// This process's end of an MPI run (see the module docs).
pub struct MpiTransport {
    rank: u32,
    ranks: u32,
    timeout: Duration,
    shared: Arc<Shared>,
    cmd: Sender<Cmd>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl MpiTransport {
    /// Initializes MPI on a new progress thread; receives fail after `timeout`.
    ///
    /// Errors: [`TransportError::Mpi`] when MPI was initialized already or gives less
    /// than `MPI_THREAD_SERIALIZED`.
    pub fn start(timeout: Duration) -> Result<MpiTransport, TransportError> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
        });
        let (cmd, rx) = unbounded();
        let (ready_tx, ready_rx) = unbounded();
        let sh = shared.clone();
        let thread = std::thread::Builder::new()
            .name("mpi-progress".into())
            .spawn(move || progress(rx, sh, ready_tx))
            .map_err(|e| TransportError::Mpi(format!("progress thread: {e}")))?;
        let (rank, ranks) = ready_rx
            .recv()
            .map_err(|_| TransportError::Mpi("the progress thread ended".into()))??;
        Ok(MpiTransport {
            rank,
            ranks,
            timeout,
            shared,
            cmd,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Makes the data communicators for sequence numbers up to `max_seq` (collective:
    /// every rank calls it with the same value, before its first send or receive).
    pub fn reserve(&self, max_seq: u64) {
        let comms = (max_seq / TAGS_PER_COMM + 1) as usize;
        let _ = self.cmd.send(Cmd::Reserve(comms));
        let mut st = self.shared.lock();
        while !st.reserved && st.failed.is_none() {
            st = self
                .shared
                .cv
                .wait(st)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Ends the run: waits (up to the timeout) for this rank's sends to complete, meets
    /// every rank at a barrier and finalizes MPI. Call it once, after a run that did not
    /// fail; after a failure the process exits without it (MPI cannot finalize with
    /// messages no one will receive).
    pub fn finish(&self) {
        let _ = self.cmd.send(Cmd::Finish);
        if let Some(t) = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            let _ = t.join();
        }
    }
}

impl Transport for MpiTransport {
    fn rank(&self) -> u32 {
        self.rank
    }

    fn ranks(&self) -> u32 {
        self.ranks
    }

    fn send(&self, envelope: Envelope, data: Vec<u8>) -> Result<(), TransportError> {
        self.cmd
            .send(Cmd::Send(envelope, data))
            .map_err(|_| TransportError::Mpi("the progress thread ended".into()))
    }

    fn recv(
        &self,
        envelope: Envelope,
        bytes: u64,
        stop: &dyn Fn() -> bool,
    ) -> Result<Vec<u8>, TransportError> {
        let deadline = Instant::now() + self.timeout;
        let mut st = self.shared.lock();
        loop {
            if let Some((rank, message)) = &st.aborted {
                return Err(TransportError::Aborted {
                    rank: *rank,
                    message: message.clone(),
                });
            }
            if let Some(m) = &st.failed {
                return Err(TransportError::Mpi(m.clone()));
            }
            if let Some(data) = st.mail.remove(&envelope) {
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
            let now = Instant::now();
            if now >= deadline {
                return Err(TransportError::Timeout {
                    envelope,
                    secs: self.timeout.as_secs_f64(),
                });
            }
            st = self
                .shared
                .cv
                .wait_timeout(st, (deadline - now).min(super::transport::STOP_POLL))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    fn abort(&self, message: &str) {
        {
            let mut st = self.shared.lock();
            if st.aborted.is_none() {
                st.aborted = Some((self.rank, message.to_string()));
            }
        }
        self.shared.cv.notify_all();
        let _ = self.cmd.send(Cmd::Abort(message.to_string()));
        // Give the abort messages a bounded time to leave before the caller exits.
        let until = Instant::now() + Duration::from_secs(2);
        while !self.cmd.is_empty() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A send in flight: its request and the buffer MPI reads, leaked until it completes.
struct InFlight {
    request: Request<'static, [u8], StaticScope>,
    buffer: *mut [u8],
}

/// The progress thread's body (see the module docs).
fn progress(
    rx: Receiver<Cmd>,
    shared: Arc<Shared>,
    ready: Sender<Result<(u32, u32), TransportError>>,
) {
    let Some((universe, threading)) = mpi::initialize_with_threading(Threading::Multiple) else {
        let _ = ready.send(Err(TransportError::Mpi(
            "MPI is initialized already".into(),
        )));
        return;
    };
    if threading < Threading::Serialized {
        let _ = ready.send(Err(TransportError::Mpi(format!(
            "MPI gives {threading:?} thread support, at least Serialized is needed"
        ))));
        return;
    }
    let world = universe.world();
    let me = world.rank();
    let _ = ready.send(Ok((me as u32, world.size() as u32)));
    let control: SimpleCommunicator = world.duplicate();
    let mut comms: Vec<SimpleCommunicator> = Vec::new();
    let mut inflight: Vec<InFlight> = Vec::new();
    let mut finish: Option<Instant> = None;
    let mut idle = 0u32;
    // A command taken while backing off, handled at the top of the next pass.
    let mut pending: Option<Cmd> = None;
    // When this thread started polling in-flight sends without yielding.
    let mut burst: Option<Instant> = None;
    loop {
        let mut busy = false;
        while let Some(cmd) = pending.take().or_else(|| rx.try_recv().ok()) {
            busy = true;
            match cmd {
                Cmd::Reserve(n) => {
                    while comms.len() < n {
                        comms.push(world.duplicate());
                    }
                    shared.lock().reserved = true;
                    shared.cv.notify_all();
                }
                Cmd::Send(env, data) => {
                    let epoch = (env.seq / TAGS_PER_COMM) as usize;
                    let tag = (env.seq % TAGS_PER_COMM) as i32;
                    let Some(comm) = comms.get(epoch) else {
                        shared.lock().failed =
                            Some(format!("send {env}: no communicator reserved for its tag"));
                        shared.cv.notify_all();
                        continue;
                    };
                    inflight.push(isend(comm, env.to as i32, tag, data));
                }
                Cmd::Abort(message) => {
                    for r in (0..world.size()).filter(|&r| r != me) {
                        inflight.push(isend(&control, r, 0, message.clone().into_bytes()));
                    }
                }
                Cmd::Finish => finish = Some(Instant::now()),
            }
        }
        inflight = inflight
            .into_iter()
            .filter_map(|f| match f.request.test() {
                Ok(_) => {
                    // SAFETY: the request completed, so MPI no longer reads the buffer;
                    // it came from `Box::leak` in `isend` and is freed once, here.
                    drop(unsafe { Box::from_raw(f.buffer) });
                    busy = true;
                    None
                }
                Err(request) => Some(InFlight { request, ..f }),
            })
            .collect();
        for (epoch, comm) in comms.iter().enumerate() {
            while let Some((msg, status)) = comm.any_process().immediate_matched_probe() {
                let (data, st) = (msg, status).matched_receive_vec::<u8>();
                let env = Envelope {
                    from: st.source_rank() as u32,
                    to: me as u32,
                    seq: epoch as u64 * TAGS_PER_COMM + st.tag() as u64,
                };
                shared.lock().mail.insert(env, data);
                shared.cv.notify_all();
                busy = true;
            }
        }
        while let Some((msg, status)) = control.any_process().immediate_matched_probe() {
            let (data, st) = (msg, status).matched_receive_vec::<u8>();
            let mut s = shared.lock();
            if s.aborted.is_none() {
                s.aborted = Some((
                    st.source_rank() as u32,
                    String::from_utf8_lossy(&data).into(),
                ));
            }
            drop(s);
            shared.cv.notify_all();
        }
        if let Some(at) = finish {
            if inflight.is_empty() {
                world.barrier();
                break;
            }
            if at.elapsed() > Duration::from_secs(60) {
                // Sends no one receives: leave them (and MPI) to the process's exit.
                std::mem::forget(inflight);
                std::mem::forget(universe);
                return;
            }
        }
        // While a send is in flight, poll without giving the core away: a message above
        // the eager limit moves in fragments (OpenMPI's vader: 32 KiB each, 32 for a
        // 1 MiB tile), each pushed by one of this thread's `MPI_Test` calls, and a
        // `yield_now` or sleep between two calls lets every other runnable thread run
        // first (milliseconds on a loaded host: a 1 MiB tile took 100-300 ms to arrive,
        // which the ranks' send → receive chains paid in series). The burst is bounded
        // (a receiver that is not running cannot take the fragments anyway). Otherwise
        // spin briefly for latency, then back off so an idle rank leaves the cores to
        // the lanes and streams.
        if !inflight.is_empty() {
            let at = *burst.get_or_insert_with(Instant::now);
            if at.elapsed() < SEND_BURST {
                continue;
            }
        }
        burst = None;
        idle = if busy || !inflight.is_empty() {
            0
        } else {
            idle.saturating_add(1)
        };
        // Poll on for a while after the last work (yielding the core between polls, so
        // the lanes and streams of this rank and the other ranks on the same cores
        // run), then back off in steps of `IDLE_WAIT`, woken at once by a new command
        // (a send), so an idle rank leaves the cores to the lanes and streams without
        // delaying its sends. A waiting receive does not restart the polling: with the
        // receives on a lane of their own one nearly always waits, and a progress
        // thread polling for it took the BLAS workers' cores (weak scaling 64-67%
        // against 75-77% without, 2026-12-02, load 2-2.9, benches/README.md).
        if idle <= IDLE_SPINS {
            std::thread::yield_now();
        } else if let Ok(cmd) = rx.recv_timeout(IDLE_WAIT) {
            pending = Some(cmd);
        }
    }
    // Communicators are freed before MPI_Finalize (the universe's drop).
    drop(comms);
    drop(control);
    drop(universe);
}

/// Posts an `MPI_Isend` of `data` to `to` with `tag` on `comm`.
fn isend(comm: &SimpleCommunicator, to: i32, tag: i32, data: Vec<u8>) -> InFlight {
    let buffer: &'static mut [u8] = Box::leak(data.into_boxed_slice());
    let ptr: *mut [u8] = buffer;
    // SAFETY: `ptr` comes from the leaked box just above and stays valid until the
    // request completes (`progress` frees it then, never earlier).
    let view: &'static [u8] = unsafe { &*ptr };
    let request = comm
        .process_at_rank(to)
        .immediate_send_with_tag(StaticScope, view, tag);
    InFlight {
        request,
        buffer: ptr,
    }
}
