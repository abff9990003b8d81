//! Completion flags of the host plugin (event records, synchronize markers) and the
//! bounded spin before blocking that every wait on one takes ([`spin_until`]).
//!
//! Why spin first: a wait that blocks at once sleeps on a futex, and waking a sleeping
//! thread costs the setter a `futex(FUTEX_WAKE)` syscall and the waiter a reschedule,
//! measured 5-50 µs on a shared 2-core VM — against ~1 µs of work per op of a small
//! target region. Task Bench's stencil_1d hands one stream's result to the other stream
//! about twice per timestep, so those wake-ups were almost all of its run time
//! (hostfast report, issue 30). A waiter that checks the flag for a bounded time first
//! sees a set within ~0.1 µs when the setter runs on another core, and costs one core
//! for at most the budget when it does not; after the budget it blocks as before.
//!
//! Memory ordering: [`Flag::set`] stores with `Release` after the setter's work (the
//! op's writes), and every successful check loads with `Acquire`, so a waiter that sees
//! the flag set sees the op's writes (the contract's "an event orders across streams").

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Busy checks before a spinning waiter starts yielding its core (`sched_yield`) between
/// checks: about 1 µs of `spin_loop` hints (`pause` takes up to ~140 cycles on x86-64).
/// Kept short: on a machine with more runnable threads than cores, a waiter that does not
/// yield delays the very thread it waits for.
const BUSY_CHECKS: u32 = 16;

/// Checks `ready` until it returns `true` or `budget` has passed: first [`BUSY_CHECKS`]
/// times with a CPU spin hint between checks, then yielding the core between checks (a
/// thread the waiter waits for may be queued behind it on the same core). Returns
/// whether `ready` returned `true`. A zero `budget` checks once.
///
/// Complexity: at most `budget` of one core's time (plus one scheduler slice when a
/// yield hands the core to another thread).
pub(crate) fn spin_until(budget: Duration, mut ready: impl FnMut() -> bool) -> bool {
    if ready() {
        return true;
    }
    if budget.is_zero() {
        return false;
    }
    for _ in 0..BUSY_CHECKS {
        std::hint::spin_loop();
        if ready() {
            return true;
        }
    }
    let start = Instant::now();
    while start.elapsed() < budget {
        std::thread::yield_now();
        if ready() {
            return true;
        }
    }
    false
}

/// A one-shot completion flag: set once, waited on by any number of threads, each
/// spinning up to the flag's budget ([`spin_until`]) before it blocks on a condvar.
#[derive(Debug, Default)]
pub struct Flag {
    set: AtomicBool,
    /// Waiters blocked (or about to block) on `cv`; `set` takes the lock and notifies
    /// only when there are some, so a set that no one sleeps on is one store and one load.
    sleepers: AtomicU32,
    lock: Mutex<()>,
    cv: Condvar,
    spin: Duration,
}

impl Flag {
    pub fn is_set(&self) -> bool {
        self.set.load(Ordering::Acquire)
    }

    /// A fresh flag whose waiters spin up to `spin` before blocking.
    pub fn new(spin: Duration) -> Arc<Flag> {
        Arc::new(Flag {
            spin,
            ..Flag::default()
        })
    }

    /// Sets the flag and wakes every blocked waiter.
    pub fn set(&self) {
        self.set.store(true, Ordering::SeqCst);
        // A waiter increments `sleepers` before its last check under the lock (both
        // SeqCst): either it sees the store above, or this load sees it and the lock
        // below waits until it sleeps on `cv`.
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            let _g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
            self.cv.notify_all();
        }
    }

    /// Blocks until set: [`spin_then_block`] with the flag's budget, then sleeps on the
    /// condvar.
    pub fn wait(&self) {
        spin_then_block(
            self.spin,
            || self.is_set(),
            || {
                let mut g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
                self.sleepers.fetch_add(1, Ordering::SeqCst);
                while !self.set.load(Ordering::SeqCst) {
                    g = self.cv.wait(g).unwrap_or_else(|p| p.into_inner());
                }
                self.sleepers.fetch_sub(1, Ordering::SeqCst);
            },
        );
    }
}

/// Waits for `ready`: checks it for up to `spin` ([`spin_until`]; not at all, past the
/// first check, while this thread's recent waits outlasted their budget: [`Adaptive`]),
/// then calls `block`, which must return only once what `ready` checks holds (or the
/// caller's own stop condition does). A wait found ready at its first check is not
/// counted in the thread's mean.
pub(crate) fn spin_then_block(
    spin: Duration,
    mut ready: impl FnMut() -> bool,
    block: impl FnOnce(),
) {
    // Already done: says nothing of how long waits take here, so it is not recorded (a
    // run of such waits must not turn spinning back on between long ones).
    if ready() {
        return;
    }
    let start = Instant::now();
    let budget = ADAPTIVE.with(|a| a.budget(spin));
    if !spin_until(budget, ready) {
        block();
    }
    ADAPTIVE.with(|a| a.record(start.elapsed()));
}

/// Per thread: a running mean of how long its waits took (those not done at their first
/// check), weight 1/4 to the latest. While the mean exceeds twice the budget (a stream
/// waiting on another stream's long kernels) the thread does not spin: it sleeps at once,
/// so spinning never takes CPU from the work it waits for (on a loaded machine, and
/// where the scheduler gives a process's threads one share, as Linux autogroup does, a
/// spinning waiter competes with its own process's kernels). Short waits bring the mean
/// down and spinning back. The idea of glibc's adaptive mutexes
/// (`PTHREAD_MUTEX_ADAPTIVE_NP`: spin as long as recent acquisitions took), by time.
struct Adaptive {
    mean_ns: std::cell::Cell<u64>,
}

impl Adaptive {
    fn budget(&self, spin: Duration) -> Duration {
        let limit = spin.saturating_mul(2).as_nanos();
        if u128::from(self.mean_ns.get()) > limit {
            Duration::ZERO
        } else {
            spin
        }
    }

    /// Records how long a wait took.
    fn record(&self, took: Duration) {
        let t = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        let m = self.mean_ns.get();
        self.mean_ns.set(m - m / 4 + t / 4);
    }
}

thread_local! {
    static ADAPTIVE: Adaptive = const { Adaptive { mean_ns: std::cell::Cell::new(0) } };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn a_blocked_waiter_is_woken_by_set() {
        // No spin: the waiter blocks at once and must be woken by the condvar.
        let f = Flag::new(Duration::ZERO);
        let g = f.clone();
        let t = std::thread::spawn(move || g.wait());
        std::thread::sleep(Duration::from_millis(5));
        assert!(!f.is_set());
        f.set();
        t.join().unwrap();
        assert!(f.is_set());
    }

    #[test]
    fn a_spinning_waiter_sees_the_set_and_the_setters_writes() {
        // A long budget: the waiters see the set while spinning (or, if descheduled past
        // it, after blocking), and every one reads the value written before the set.
        for spin in [
            Duration::from_secs(1),
            Duration::from_micros(1),
            Duration::ZERO,
        ] {
            let f = Flag::new(spin);
            let data = Arc::new(AtomicU64::new(0));
            let waiters: Vec<_> = (0..3)
                .map(|_| {
                    let (f, data) = (f.clone(), data.clone());
                    std::thread::spawn(move || {
                        f.wait();
                        data.load(Ordering::Relaxed)
                    })
                })
                .collect();
            std::thread::sleep(Duration::from_millis(2));
            data.store(42, Ordering::Relaxed);
            f.set();
            for w in waiters {
                assert_eq!(w.join().unwrap(), 42, "spin {spin:?}");
            }
        }
    }

    #[test]
    fn wait_on_a_set_flag_returns_and_set_is_idempotent() {
        let f = Flag::new(Duration::ZERO);
        f.set();
        f.set();
        f.wait();
        assert!(f.is_set());
    }

    #[test]
    fn a_thread_stops_spinning_while_its_waits_are_long_and_resumes_after_short_ones() {
        let a = Adaptive {
            mean_ns: std::cell::Cell::new(0),
        };
        let spin = Duration::from_micros(50);
        assert_eq!(a.budget(spin), spin);
        // Waits of 1 ms: the mean passes 100 µs after the first (250 µs).
        a.record(Duration::from_millis(1));
        assert_eq!(a.mean_ns.get(), 250_000);
        assert_eq!(a.budget(spin), Duration::ZERO);
        a.record(Duration::from_millis(1));
        assert_eq!(a.budget(spin), Duration::ZERO);
        // Short waits bring it back under 100 µs: 437.5 → 328 → 246 → 185 → 138 → 104 → 78 µs.
        for k in 0..5 {
            a.record(Duration::ZERO);
            assert_eq!(
                a.budget(spin),
                Duration::ZERO,
                "after {} short waits",
                k + 1
            );
        }
        a.record(Duration::ZERO);
        assert_eq!(a.budget(spin), spin);
    }

    #[test]
    fn spin_until_reports_readiness_and_gives_up_after_its_budget() {
        assert!(spin_until(Duration::ZERO, || true));
        assert!(!spin_until(Duration::ZERO, || false));
        let mut calls = 0;
        assert!(spin_until(Duration::from_secs(5), || {
            calls += 1;
            calls == 1000
        }));
        assert_eq!(calls, 1000);
        let mut checks = 0u64;
        let t = Instant::now();
        assert!(!spin_until(Duration::from_millis(2), || {
            checks += 1;
            false
        }));
        assert!(t.elapsed() >= Duration::from_millis(2));
        assert!(checks > u64::from(BUSY_CHECKS), "{checks} checks");
    }
}
