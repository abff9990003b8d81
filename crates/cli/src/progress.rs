//! `run`'s progress bar: on stderr, only when stderr is a terminal, drawn once the runs
//! have taken 2 s. It shows the device ops done of the total (over every run of
//! `--repeat`), the run, the region of the op done last, the time elapsed and the ETA.
//!
//! "Done" is the plugin's word: its timings of completed stream work
//! ([`Plugin::drain_timings`]; the host plugin always records them, the CUDA plugin with
//! `--trace`), matched to ops by the `(stream, seq)` the executor reports as it issues
//! each device op ([`Plan::run_observed`], [`exec::ExecOptions::on_issue`]). A poller thread takes the timings
//! as they arrive and hands them back at the executor's teardown (`Watched`), so the
//! report and `--trace` keep every one. The CUDA plugin without `--trace` does not time:
//! the bar counts ops issued then, and says so.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use offload_sched::exec::{IssueMode, OnIssue, Report};
use offload_sched::lower::{OpGraph, OpId};
use offload_sched::plugin::layer::{Hooks, Layered};
use offload_sched::plugin::{Plugin, StreamHandle, Timing};
use offload_sched::{Error, Plan};
use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long runs go before the bar is drawn.
const SHOW_AFTER: Duration = Duration::from_secs(2);
/// How often the poller takes the plugin's timings and redraws.
const POLL: Duration = Duration::from_millis(100);
/// Polls an unmatched timing is kept for (it may arrive before its op's issue is
/// reported); after that it is a call that is not an op (an event record or wait, the
/// allocation before a zero fill) and is dropped.
const KEEP_UNMATCHED: u8 = 3;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The bar over all runs of one `run` command.
pub(crate) struct Progress {
    bar: ProgressBar,
    start: Instant,
    /// Device ops of one run.
    per_run: u64,
    repeat: u32,
}

impl Progress {
    /// A bar for `repeat` runs of `graph`, not drawn yet; `None` when stderr is not a
    /// terminal (nothing is ever written then).
    pub(crate) fn new(graph: &OpGraph, repeat: u32) -> Option<Progress> {
        if !std::io::stderr().is_terminal() {
            return None;
        }
        let per_run = device_ops(graph);
        let bar = ProgressBar::with_draw_target(
            Some(per_run * u64::from(repeat)),
            ProgressDrawTarget::hidden(),
        );
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} {elapsed} [{bar:20}] {pos}/{len} ops {prefix}, ETA {eta} · {wide_msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        Some(Progress {
            bar,
            start: Instant::now(),
            per_run,
            repeat,
        })
    }

    /// Runs `plan` on `plugin` (run `run`, from 0) with the bar following it:
    /// [`Plan::run_observed`] with the issue callback, and the timing poller. `times`: the
    /// plugin records timings (the host plugin; the CUDA plugin asked to), so the bar
    /// counts ops done; else it counts ops issued.
    pub(crate) fn run(
        &self,
        run: u32,
        plan: &Plan,
        plugin: &dyn Plugin,
        times: bool,
        issue: IssueMode,
    ) -> Result<Report, Error> {
        let tracker = Arc::new(Tracker::default());
        let t = Arc::clone(&tracker);
        let on_issue = OnIssue(Arc::new(move |op, stream, seq| t.issued(op, stream, seq)));
        let watched = watch(plugin);
        let (stop, stopped) = mpsc::channel::<()>();
        let report = std::thread::scope(|s| {
            let (watched, tracker) = (&watched, &tracker);
            s.spawn(move || {
                let mut done = Done::default();
                loop {
                    let last = !matches!(
                        stopped.recv_timeout(POLL),
                        Err(mpsc::RecvTimeoutError::Timeout)
                    );
                    done.take(tracker, &poll(watched));
                    self.draw(run, plan.graph(), times, &done, tracker);
                    if last {
                        break;
                    }
                }
            });
            let r = plan.run_observed(watched, issue, Some(on_issue));
            drop(stop);
            r
        });
        report
    }

    /// Updates the bar; draws it from [`SHOW_AFTER`] on. The region shown is that of
    /// the op done last, or before any is done (or without timings) of the op issued
    /// last.
    fn draw(&self, run: u32, graph: &OpGraph, times: bool, done: &Done, tracker: &Tracker) {
        let issued = tracker.last_issued();
        let (count, last, word) = if times {
            (done.count, done.last.map(|(op, _)| op).or(issued), "done")
        } else {
            (
                tracker.issued_count.load(Ordering::Relaxed),
                issued,
                "issued",
            )
        };
        self.bar
            .set_position(u64::from(run) * self.per_run + count.min(self.per_run));
        self.bar.set_prefix(word);
        self.bar
            .set_message(message(run, self.repeat, last.map(|op| region(graph, op))));
        if self.bar.is_hidden() && self.start.elapsed() >= SHOW_AFTER {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
            self.bar.enable_steady_tick(POLL);
        }
    }
}

/// The bar is removed (if it was drawn) when `run` is done with it, whether the runs
/// succeeded or not: before the summary or the error is printed.
impl Drop for Progress {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

/// Ops a run issues to device streams (host tasks, taskwaits and the end are not
/// counted: they do no device work).
fn device_ops(graph: &OpGraph) -> u64 {
    graph.ops.iter().filter(|o| !o.kind.is_host()).count() as u64
}

fn region(graph: &OpGraph, op: OpId) -> &str {
    &graph.region_of(op).name
}

/// The end of the bar's line (cut to the terminal's width): `run 2/5 · region "r7"`.
fn message(run: u32, repeat: u32, region: Option<&str>) -> String {
    let mut m = Vec::new();
    if repeat > 1 {
        m.push(format!("run {}/{repeat}", run + 1));
    }
    if let Some(r) = region {
        m.push(format!("region \"{r}\""));
    }
    m.join(" · ")
}

/// What one run has issued, written by the issue callback (from every issuing thread).
#[derive(Default)]
struct Tracker {
    /// `(stream, seq)` of each issued device op.
    by_call: Mutex<HashMap<(StreamHandle, u64), OpId>>,
    issued_count: AtomicU64,
    /// The op issued last, plus one (0: none yet).
    last_issued: AtomicU32,
}

impl Tracker {
    fn issued(&self, op: OpId, stream: StreamHandle, seq: u64) {
        lock(&self.by_call).insert((stream, seq), op);
        self.issued_count.fetch_add(1, Ordering::Relaxed);
        self.last_issued.store(op.0 + 1, Ordering::Relaxed);
    }

    fn last_issued(&self) -> Option<OpId> {
        match self.last_issued.load(Ordering::Relaxed) {
            0 => None,
            n => Some(OpId(n - 1)),
        }
    }
}

/// The poller's count of ops done.
#[derive(Default)]
struct Done {
    count: u64,
    /// The op that ended last, and when.
    last: Option<(OpId, Instant)>,
    /// Timings not matched to an op yet, with the polls they have waited.
    unmatched: Vec<(Timing, u8)>,
}

impl Done {
    /// Counts the ops among `fresh` timings (and earlier unmatched ones) that `tracker`
    /// knows.
    fn take(&mut self, tracker: &Tracker, fresh: &[Timing]) {
        self.unmatched.extend(fresh.iter().map(|t| (*t, 0)));
        if self.unmatched.is_empty() {
            return;
        }
        let by_call = lock(&tracker.by_call);
        let (count, last) = (&mut self.count, &mut self.last);
        self.unmatched.retain_mut(|(t, age)| {
            if let Some(&op) = by_call.get(&(t.stream, t.seq)) {
                *count += 1;
                if last.is_none_or(|(_, end)| t.end >= end) {
                    *last = Some((op, t.end));
                }
                return false;
            }
            *age += 1;
            *age < KEEP_UNMATCHED
        });
    }
}

/// The run's plugin, with the timings the poller took kept for the executor: the
/// forwarding layer with the [`Stash`] hooks (every call forwarded as it is).
type Watched<'a> = Layered<&'a dyn Plugin, Stash>;

/// `plugin` watched.
fn watch(plugin: &dyn Plugin) -> Watched<'_> {
    Layered::wrap(plugin, Stash::default())
}

/// Every timing [`poll`] took, until the executor drains them.
#[derive(Default)]
struct Stash(Mutex<Vec<Timing>>);

impl Hooks for Stash {
    /// The timings the poller took, then the plugin's newer ones.
    fn timings(&self, drained: Vec<Timing>) -> Vec<Timing> {
        let mut all = std::mem::take(&mut *lock(&self.0));
        all.extend(drained);
        all
    }
}

/// The timings recorded since the last poll (also kept for the executor).
fn poll(w: &Watched<'_>) -> Vec<Timing> {
    let mut stash = lock(&w.hooks().0);
    let fresh = w.inner().drain_timings();
    stash.extend_from_slice(&fresh);
    fresh
}

#[cfg(test)]
mod tests {
    use super::*;
    use offload_sched::exec::{self, ExecOptions};
    use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
    use offload_sched::schedule::ScheduleOptions;

    #[test]
    fn messages() {
        assert_eq!(message(0, 1, Some("r7")), "region \"r7\"");
        assert_eq!(message(1, 5, Some("tw")), "run 2/5 · region \"tw\"");
        assert_eq!(message(0, 3, None), "run 1/3");
        assert_eq!(message(0, 1, None), "");
    }

    #[test]
    fn timings_count_the_ops_they_match_once_and_drop_other_calls() {
        let t = Tracker::default();
        let s = StreamHandle(3);
        let now = Instant::now();
        let at = |seq, ms| Timing {
            stream: s,
            seq,
            start: now,
            end: now + Duration::from_millis(ms),
            batch: 0,
        };
        t.issued(OpId(7), s, 0);
        t.issued(OpId(8), s, 2);
        let mut d = Done::default();
        // seq 1 is an event record: never matched. seq 2 ends last.
        d.take(&t, &[at(0, 5), at(1, 6), at(2, 9)]);
        assert_eq!((d.count, d.last.map(|x| x.0)), (2, Some(OpId(8))));
        // A timing that comes before its op's issue is reported is counted later...
        d.take(&t, &[at(3, 10)]);
        assert_eq!(d.count, 2);
        t.issued(OpId(9), s, 3);
        d.take(&t, &[]);
        assert_eq!((d.count, d.last.map(|x| x.0)), (3, Some(OpId(9))));
        // ...and calls that are no op are dropped after a few polls.
        for _ in 0..KEEP_UNMATCHED {
            d.take(&t, &[]);
        }
        assert!(d.unmatched.is_empty());
        assert_eq!(t.last_issued(), Some(OpId(9)));
    }

    #[test]
    fn a_watched_run_counts_every_device_op_and_keeps_the_timings_for_the_report() {
        let plan = Plan::new(
            offload_sched::model::saxpy_regions(6, 256),
            &ScheduleOptions::default(),
        )
        .unwrap();
        let host = HostPlugin::new(HostPluginOptions::default());
        let tracker = Arc::new(Tracker::default());
        let t = Arc::clone(&tracker);
        let opts = ExecOptions {
            on_issue: Some(OnIssue(Arc::new(move |op, s, seq| t.issued(op, s, seq)))),
            ..ExecOptions::default()
        };
        let watched = watch(&host);
        let report = exec::execute(plan.graph(), plan.schedule(), &watched, &opts).unwrap();
        // Every device op was issued and timed; the poller (here: after the run) finds
        // none left, since the executor drained them all through `Watched`.
        let ops = device_ops(plan.graph());
        assert_eq!(tracker.issued_count.load(Ordering::Relaxed), ops);
        let timed = report
            .ops
            .iter()
            .filter(|o| o.stream.is_some() && o.timed)
            .count() as u64;
        assert_eq!(timed, ops);
        // Timings a poll takes are handed to the executor's drain too.
        let h = watched.create_streams(0, 1).unwrap()[0];
        let p = watched.alloc(h, 64).unwrap();
        watched.synchronize(h).unwrap();
        let polled = poll(&watched);
        assert_eq!(polled.len(), 1);
        watched.free(h, p).unwrap();
        watched.synchronize(h).unwrap();
        let drained = watched.drain_timings();
        assert_eq!(drained.len(), 2);
        assert_eq!(drained[0], polled[0]);
        assert!(watched.drain_timings().is_empty());
    }

    #[test]
    fn a_watched_plugin_replays_taskgraphs_and_copies_between_devices_like_its_inner_one() {
        use offload_sched::model::{MapType, ProgramBuilder};
        // A taskgraph plan replays (its graphs go through the wrapper).
        let mut p = ProgramBuilder::new("tg");
        let x = p.buf::<i32>("x", 64);
        p.taskgraph("t", 3, |p| {
            p.target("bump", "increment").arg(x).map(MapType::ToFrom, x);
        });
        let plan = Plan::new(p.build(), &ScheduleOptions::default()).unwrap();
        let host = HostPlugin::new(HostPluginOptions::default());
        let watched = watch(&host);
        let r = exec::execute(
            plan.graph(),
            plan.schedule(),
            &watched,
            &ExecOptions::default(),
        )
        .unwrap();
        assert_eq!(r.replay.map(|st| st.segments), Some(3));
        assert_eq!(r.buffers.as_i32("x").unwrap(), &[3; 64][..]);
        // A read on device 0 of what device 1 wrote is a peer copy.
        let mut p = ProgramBuilder::new("peer");
        p.devices(2);
        let x = p.buf_init::<f32>("x", 64, offload_sched::model::Init::Iota);
        let y = p.buf::<f32>("y", 64);
        let to_x = vec![p.map(MapType::To, x)];
        p.enter_data("in1", to_x).device(1);
        p.target("double1", "scale").num(2.0).arg(x).device(1);
        p.target("copy0", "copy")
            .arg(x)
            .arg(y)
            .map(MapType::To, x)
            .map(MapType::From, y);
        let from_x = vec![p.map(MapType::From, x)];
        p.exit_data("out1", from_x).device(1);
        let plan = Plan::new(p.build(), &ScheduleOptions::default()).unwrap();
        let host = HostPlugin::new(HostPluginOptions {
            devices: 2,
            ..HostPluginOptions::default()
        });
        let watched = watch(&host);
        let want = exec::execute(
            plan.graph(),
            plan.schedule(),
            &host,
            &ExecOptions::default(),
        )
        .unwrap();
        let got = exec::execute(
            plan.graph(),
            plan.schedule(),
            &watched,
            &ExecOptions::default(),
        )
        .unwrap();
        assert_eq!(got.bytes_peer, 64 * 4);
        assert_eq!(got.buffers.as_f32("y"), want.buffers.as_f32("y"));
        assert_eq!(got.buffers.as_f32("y").unwrap()[3], 6.0);
    }
}
