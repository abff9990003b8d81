//! [`MpiTransport`]: ranks as MPI processes (the `mpi` feature; rsmpi over the system
//! MPI, Debian's OpenMPI 4.1).
//!
//! MPI is initialized on a progress thread, with `MPI_THREAD_MULTIPLE` asked and at least
//! `MPI_THREAD_SERIALIZED` required (MPI 4.0 §11.2.1). Two ways to move a message, chosen
//! by [`Mode`]:
//!
//! - **Direct** (the default, [`Mode::Direct`], when MPI gives `MPI_THREAD_MULTIPLE`):
//!   the host lane that sends posts its own `MPI_Isend` of a buffer the transport owns and
//!   tests it once; a send that has not completed then (a message above the eager limit)
//!   goes to the progress thread, which tests it until it completes. A waiting receive
//!   takes its own message: `MPI_Improbe` on its envelope's communicator, source and tag,
//!   then `MPI_Mrecv`, polled for at most [`RECV_SPIN`] (yielding the core between polls)
//!   before it sleeps on the mailbox. A message is taken by exactly one matched probe
//!   (MPI 4.0 §3.8.2), so the receive and the progress thread never both take it. This
//!   saves two thread hand-offs a message (the sender's lane → the progress thread; the
//!   receiver's progress thread, which backs off in [`IDLE_WAIT`] steps, → the receive).
//! - **Through the progress thread** ([`Mode::ProgressThread`], and the fallback when
//!   MPI gives only `MPI_THREAD_SERIALIZED`): the progress thread makes every MPI call of
//!   the process.
//!
//! Either way the progress thread also takes every incoming message with `MPI_Improbe` +
//! `MPI_Mrecv` into a mailbox keyed by envelope, where the host lanes' receives wait
//! (with the progress timeout) once they stop polling; it posts the aborts and tests the
//! sends in flight until they complete. So [`Transport::send`] never blocks on the
//! receiver, and a receive whose message arrived completes whether or not it polls.
//! Debian's OpenMPI is not CUDA-aware: the bytes sent and received are host bytes (the
//! send and receive tasks read and write host buffers).
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
use mpi::ffi;
use mpi::point_to_point::{MatchedReceiveVec, Source};
use mpi::raw::AsRaw;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::Threading;
use std::collections::{HashMap, VecDeque};
use std::mem::MaybeUninit;
use std::os::raw::c_int;
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
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

/// How long a waiting receive polls for its own message ([`Mode::Direct`]) before it
/// sleeps on the mailbox (then the progress thread takes the message, within about
/// [`IDLE_WAIT`] while it backs off). Bounded because a polling receive takes a core from
/// the lanes, streams and BLAS workers of the ranks sharing it: a progress thread that
/// polled for every waiting receive cut `linalg --ranks` weak scaling from 75-77% to
/// 64-67% (benches/README.md, 2026-12-02). 100 µs covers a Task Bench step near its
/// METG on 2 ranks (about twice the task's duration).
pub const RECV_SPIN: Duration = Duration::from_micros(100);

/// Who makes the MPI calls of a message (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The lanes post their sends and take their receives' messages themselves where MPI
    /// gives `MPI_THREAD_MULTIPLE`, the progress thread otherwise.
    Direct,
    /// The progress thread makes every MPI call.
    ProgressThread,
    /// As [`Mode::Direct`], but the progress thread takes no data message: a receive
    /// completes only by taking its message itself (for tests of that path). Refused
    /// without `MPI_THREAD_MULTIPLE`.
    DirectOnly,
}

/// A communicator's raw handle, for the lanes' own MPI calls under
/// `MPI_THREAD_MULTIPLE` (the progress thread owns the communicator and frees it after
/// the run, at [`MpiTransport::finish`]).
#[derive(Clone, Copy)]
struct RawComm(ffi::MPI_Comm);

// SAFETY: under MPI_THREAD_MULTIPLE any thread may use a communicator handle (MPI 4.0
// §11.6); the handle is only read, and only while the progress thread keeps it alive.
unsafe impl Send for RawComm {}
unsafe impl Sync for RawComm {}

enum Cmd {
    Send(Envelope, Vec<u8>),
    /// A send a lane posted itself that had not completed at its first test.
    Track(InFlight),
    Reserve(usize),
    Abort(String),
    Finish,
}

#[derive(Default)]
struct State {
    /// Messages taken by the progress thread, per envelope in arrival order (MPI's
    /// non-overtaking order, MPI 4.0 §3.5: a rank session run again sends the same
    /// envelopes, and a rank a run ahead must not overwrite the run before's).
    mail: HashMap<Envelope, VecDeque<Vec<u8>>>,
    aborted: Option<(u32, String)>,
    reserved: bool,
    failed: Option<String>,
}

struct Shared {
    state: Mutex<State>,
    cv: Condvar,
    /// The data communicators, set at [`MpiTransport::reserve`] when the lanes call MPI
    /// themselves ([`Mode::Direct`] with `MPI_THREAD_MULTIPLE`).
    direct: OnceLock<Vec<RawComm>>,
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
    /// Initializes MPI on a new progress thread, in [`Mode::Direct`]; receives fail
    /// after `timeout`.
    ///
    /// Errors: [`TransportError::Mpi`] when MPI was initialized already or gives less
    /// than `MPI_THREAD_SERIALIZED`.
    pub fn start(timeout: Duration) -> Result<MpiTransport, TransportError> {
        Self::start_with(timeout, Mode::Direct)
    }

    /// As [`MpiTransport::start`], with the given [`Mode`].
    ///
    /// Errors: as [`MpiTransport::start`]; [`Mode::DirectOnly`] also without
    /// `MPI_THREAD_MULTIPLE`.
    pub fn start_with(timeout: Duration, mode: Mode) -> Result<MpiTransport, TransportError> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
            direct: OnceLock::new(),
        });
        let (cmd, rx) = unbounded();
        let (ready_tx, ready_rx) = unbounded();
        let sh = shared.clone();
        let thread = std::thread::Builder::new()
            .name("mpi-progress".into())
            .spawn(move || progress(rx, sh, ready_tx, mode))
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
        let gone = |_| TransportError::Mpi("the progress thread ended".into());
        let Some(comms) = self.shared.direct.get() else {
            return self.cmd.send(Cmd::Send(envelope, data)).map_err(gone);
        };
        let (epoch, tag) = place(envelope.seq);
        let comm = comms.get(epoch).ok_or_else(|| {
            TransportError::Mpi(format!(
                "send {envelope}: no communicator reserved for its tag"
            ))
        })?;
        let mut f = isend(*comm, envelope.to as c_int, tag, data);
        // An eager message (OpenMPI's vader: up to 4 KiB) is complete once posted.
        if f.test() {
            return Ok(());
        }
        self.cmd.send(Cmd::Track(f)).map_err(gone)
    }

    fn recv(
        &self,
        envelope: Envelope,
        bytes: u64,
        stop: &dyn Fn() -> bool,
    ) -> Result<Vec<u8>, TransportError> {
        let started = Instant::now();
        let deadline = started + self.timeout;
        let direct = self.shared.direct.get().and_then(|comms| {
            let (epoch, tag) = place(envelope.seq);
            comms.get(epoch).map(|c| (*c, tag))
        });
        let size = |data: Vec<u8>| {
            if data.len() as u64 != bytes {
                return Err(TransportError::Size {
                    envelope,
                    expected: bytes,
                    got: data.len() as u64,
                });
            }
            Ok(data)
        };
        loop {
            // Under the lock the progress thread holds from its probe to its mailbox
            // insert: the mailbox first (an earlier message of this envelope the progress
            // thread took), then our own probe, so messages of one envelope come out in
            // MPI's order.
            let st = self.shared.lock();
            if let Some((comm, tag)) = direct.filter(|_| !st.mail.contains_key(&envelope)) {
                if let Some(data) = probe_receive(comm, envelope.from as c_int, tag) {
                    return size(data);
                }
            }
            if let Some((rank, message)) = &st.aborted {
                return Err(TransportError::Aborted {
                    rank: *rank,
                    message: message.clone(),
                });
            }
            if let Some(m) = &st.failed {
                return Err(TransportError::Mpi(m.clone()));
            }
            let mut st = st;
            if let Some(queue) = st.mail.get_mut(&envelope) {
                let data = queue.pop_front().unwrap_or_default();
                if queue.is_empty() {
                    st.mail.remove(&envelope);
                }
                return size(data);
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
            if direct.is_some() && now - started < RECV_SPIN {
                drop(st);
                std::thread::yield_now();
                continue;
            }
            drop(
                self.shared
                    .cv
                    .wait_timeout(st, (deadline - now).min(super::transport::STOP_POLL))
                    .unwrap_or_else(PoisonError::into_inner),
            );
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
    request: ffi::MPI_Request,
    buffer: *mut [u8],
}

// SAFETY: the request and the buffer belong to this value alone; under
// MPI_THREAD_MULTIPLE the thread that tests a request need not be the one that posted
// it (MPI 4.0 §11.6), and the buffer is a leaked box, freed once by `test`.
unsafe impl Send for InFlight {}

impl InFlight {
    /// `MPI_Test`s the send; once it completed, frees its buffer and returns true.
    fn test(&mut self) -> bool {
        let mut flag: c_int = 0;
        // SAFETY: the request is a live one `isend` posted and no test has completed
        // yet (a completed one is dropped by every caller).
        unsafe { ffi::MPI_Test(&mut self.request, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
        if flag != 0 {
            // SAFETY: the request completed, so MPI no longer reads the buffer; it came
            // from `Box::leak` in `isend` and is freed once, here.
            drop(unsafe { Box::from_raw(self.buffer) });
        }
        flag != 0
    }
}

/// The data communicator (index) and tag of sequence number `seq` (module docs).
fn place(seq: u64) -> (usize, c_int) {
    (
        (seq / TAGS_PER_COMM) as usize,
        (seq % TAGS_PER_COMM) as c_int,
    )
}

/// Posts an `MPI_Isend` of `data` to `to` with `tag` on `comm`.
fn isend(comm: RawComm, to: c_int, tag: c_int, data: Vec<u8>) -> InFlight {
    let buffer: *mut [u8] = Box::leak(data.into_boxed_slice());
    let mut request = MaybeUninit::<ffi::MPI_Request>::uninit();
    // SAFETY: the buffer stays valid until the request completes (`InFlight::test`
    // frees it then, never earlier); its length fits a c_int (a tile is far below 2 GiB);
    // the communicator is alive (see `RawComm`).
    unsafe {
        ffi::MPI_Isend(
            buffer as *const u8 as *const std::ffi::c_void,
            buffer.len() as c_int,
            ffi::RSMPI_UINT8_T,
            to,
            tag,
            comm.0,
            request.as_mut_ptr(),
        );
        InFlight {
            request: request.assume_init(),
            buffer,
        }
    }
}

/// Takes the message from `from` with `tag` on `comm` if it has arrived
/// (`MPI_Improbe` + `MPI_Mrecv`: a message one matched probe took is no other's).
fn probe_receive(comm: RawComm, from: c_int, tag: c_int) -> Option<Vec<u8>> {
    let mut flag: c_int = 0;
    let mut message = MaybeUninit::<ffi::MPI_Message>::uninit();
    let mut status = MaybeUninit::<ffi::MPI_Status>::uninit();
    // SAFETY: out-parameters of MPI_Improbe, read only once it set `flag`; the
    // communicator is alive (see `RawComm`); the receive buffer has the probed count.
    unsafe {
        ffi::MPI_Improbe(
            from,
            tag,
            comm.0,
            &mut flag,
            message.as_mut_ptr(),
            status.as_mut_ptr(),
        );
        if flag == 0 {
            return None;
        }
        let (mut message, status) = (message.assume_init(), status.assume_init());
        let mut count: c_int = 0;
        ffi::MPI_Get_count(&status, ffi::RSMPI_UINT8_T, &mut count);
        let mut data = vec![0u8; count.max(0) as usize];
        ffi::MPI_Mrecv(
            data.as_mut_ptr().cast(),
            count,
            ffi::RSMPI_UINT8_T,
            &mut message,
            ffi::RSMPI_STATUS_IGNORE,
        );
        Some(data)
    }
}

/// The progress thread's body (see the module docs).
fn progress(
    rx: Receiver<Cmd>,
    shared: Arc<Shared>,
    ready: Sender<Result<(u32, u32), TransportError>>,
    mode: Mode,
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
    let multiple = threading == Threading::Multiple;
    if mode == Mode::DirectOnly && !multiple {
        let _ = ready.send(Err(TransportError::Mpi(format!(
            "MPI gives {threading:?} thread support, Mode::DirectOnly needs Multiple"
        ))));
        return;
    }
    let direct = multiple && mode != Mode::ProgressThread;
    // Whether this thread takes incoming data messages into the mailbox.
    let intake = mode != Mode::DirectOnly;
    let world = universe.world();
    let me = world.rank();
    let _ = ready.send(Ok((me as u32, world.size() as u32)));
    let control: SimpleCommunicator = world.duplicate();
    let control_raw = RawComm(control.as_raw());
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
                    if direct {
                        let raw = comms.iter().map(|c| RawComm(c.as_raw())).collect();
                        let _ = shared.direct.set(raw);
                    }
                    shared.lock().reserved = true;
                    shared.cv.notify_all();
                }
                Cmd::Send(env, data) => {
                    let (epoch, tag) = place(env.seq);
                    let Some(comm) = comms.get(epoch) else {
                        shared.lock().failed =
                            Some(format!("send {env}: no communicator reserved for its tag"));
                        shared.cv.notify_all();
                        continue;
                    };
                    inflight.push(isend(RawComm(comm.as_raw()), env.to as c_int, tag, data));
                }
                Cmd::Track(f) => inflight.push(f),
                Cmd::Abort(message) => {
                    for r in (0..world.size()).filter(|&r| r != me) {
                        inflight.push(isend(control_raw, r, 0, message.clone().into_bytes()));
                    }
                }
                Cmd::Finish => finish = Some(Instant::now()),
            }
        }
        inflight.retain_mut(|f| {
            let done = f.test();
            busy |= done;
            !done
        });
        for (epoch, comm) in comms.iter().enumerate().filter(|_| intake) {
            // The lock from the probe to the insert: a receive taking its own message
            // looks at the mailbox first under it (see `recv`).
            let mut mail = shared.lock();
            while let Some((msg, status)) = comm.any_process().immediate_matched_probe() {
                let (data, st) = (msg, status).matched_receive_vec::<u8>();
                let env = Envelope {
                    from: st.source_rank() as u32,
                    to: me as u32,
                    seq: epoch as u64 * TAGS_PER_COMM + st.tag() as u64,
                };
                mail.mail.entry(env).or_default().push_back(data);
                busy = true;
            }
            drop(mail);
            if busy {
                shared.cv.notify_all();
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
