//! Host waits on events, not whole streams (issue 15 point 9): a host op that needs an
//! op followed on its stream by device work it does not need waits on an event recorded
//! right after that op (`cuEventSynchronize`), not for everything issued to the stream.
//!
//! Written against the public API only (schedule text, reports, user kernels), so the
//! same file runs on a build from before the change and fails there.

mod common;

use common::{build_so, host, plan, plan_without_spin};
use offload_sched::exec::IssueMode;
use offload_sched::model::{
    Arg, ElemType, Init, KernelSig, KernelSource, MapType, Param, ParamKind, ProgramBuilder,
};
use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
use offload_sched::schedule::ScheduleOptions;
use offload_sched::Plan;

/// The host lines of a schedule's text (after `host:`, before the summary).
fn host_lines(text: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| *l != "host:")
        .skip(1)
        .take_while(|l| !l.starts_with("summary:"))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// D04: the host task #7 (fill, rewrites H) needs only the H2D #2 of the nowait region,
/// not its kernel #3 and D2H #4; the taskwait then waits for the rest. Run on the host
/// plugin (serial and per-stream issue, with delay jitter) it gives the reference's
/// values: the device got H's old contents.
#[test]
fn d04_host_task_waits_on_an_event_after_the_h2d() {
    let plan = plan("case_d04.toml");
    let text = plan.schedule().to_string();
    assert_eq!(
        host_lines(&text),
        [
            "wait e0 (after #2)",
            "#7 host fill region \"overwrite\"",
            "wait s0 (after #6)",
            "#8 taskwait region \"tw\"",
            "#9 end region \"end\"",
        ],
        "{text}"
    );
    assert!(
        text.contains("  #2     h2d      H[0:1048576] 4 MiB       region \"copy\"\n  record e0\n")
    );
    let want = plan.reference().unwrap();
    for seed in 0..10 {
        for issue in [IssueMode::Serial, IssueMode::PerStream] {
            let p = host(1, Some(seed));
            let r = common::run_checked("d04", &plan, &p, issue, &want);
            assert_eq!(r.counts.host_waits, 2);
            assert_eq!(r.counts.events_recorded, 1);
            let out = r.as_f32("out").unwrap();
            assert!(out.iter().enumerate().all(|(i, v)| *v == i as f32));
        }
    }
}

/// The measurement graph of benches/gpu/run.sh `hostwait`: the same shape with a kernel
/// that spins after the H2D. Under minimal the host task waits on the event after the
/// H2D; the baselines wait for the whole stream. Runs (spins off) match the reference.
#[test]
fn host_write_during_kernel_waits_for_the_h2d_only() {
    let plan = plan("host_write_during_kernel.toml");
    let text = plan.schedule().to_string();
    assert_eq!(
        host_lines(&text)[..2],
        ["wait e0 (after #1)", "#4 host fill region \"overwrite\""],
        "{text}"
    );
    let quick = plan_without_spin("host_write_during_kernel.toml");
    let want = quick.reference().unwrap();
    let r = common::run_checked(
        "host_write_during_kernel",
        &quick,
        &host(1, None),
        IssueMode::Serial,
        &want,
    );
    assert!(r.as_f32("H").unwrap().iter().all(|v| *v == -1.0));
}

/// A device kernel that waits (up to 10 s) for a flag which only the host task sets, and
/// the host task itself: both from one shared library, so they share the flag. The kernel
/// writes 1 to `out[0]` if it saw the flag (and clears it), 0 if it gave up.
const HANDSHAKE: &str = r#"
#include <stdint.h>
#include <time.h>
static int flag;
void rewrite_and_signal(float* h, int64_t n) {
    for (int64_t i = 0; i < n; i++) h[i] = -1.0f;
    __atomic_store_n(&flag, 1, __ATOMIC_SEQ_CST);
}
void await_host(int32_t* out, int64_t n) {
    struct timespec t = {0, 1000 * 1000};
    int seen = 0;
    for (int i = 0; i < 10000 && !seen; i++) {
        seen = __atomic_exchange_n(&flag, 0, __ATOMIC_SEQ_CST);
        if (!seen) nanosleep(&t, 0);
    }
    if (n > 0) out[0] = seen;
}
"#;

fn user_kernel(name: &str, param: &str, kind: &str) -> KernelSig {
    KernelSig {
        name: name.into(),
        params: vec![Param {
            name: param.into(),
            kind: ParamKind::parse(kind).unwrap(),
        }],
        source: KernelSource::User {
            library: Some("libhandshake.so".into()),
            cuda: None,
            symbol: name.into(),
        },
    }
}

/// D04's shape where the kernel behind the H2D runs until the host task has run: a
/// nowait region maps `to: H` and `from: out` and launches `await_host(out)`; the next
/// host task rewrites H and sets the flag the kernel waits for; then a taskwait. The
/// host task needs only the H2D, so it runs while the kernel waits, and the kernel sees
/// the flag. A host wait for the whole stream (the kernel included) would make the
/// kernel give up after 10 s and write 0. No timing is asserted: the kernel's result
/// says which came first.
#[test]
fn the_host_task_runs_while_the_kernel_after_the_h2d_still_runs() {
    let dir = tempfile::tempdir().unwrap();
    build_so(dir.path(), "handshake", HANDSHAKE).expect("cc failed");
    let mut p = ProgramBuilder::new("handshake");
    p.kernel(user_kernel("await_host", "out", "out i32*"));
    p.kernel(user_kernel("rewrite_and_signal", "h", "out f32*"));
    let h = p.buffer("H", ElemType::F32, 1 << 16, Init::Iota);
    let out = p.buffer("out", ElemType::I32, 1, Init::Zeros);
    p.target("wait for the host", "await_host")
        .arg(out)
        .map(MapType::To, h)
        .map(MapType::From, out)
        .nowait();
    let whole = p.sec(h);
    p.host_kernel("rewrite", "rewrite_and_signal", vec![Arg::Buffer(whole)]);
    p.taskwait();
    let plan = Plan::new(p.build(), &ScheduleOptions::default())
        .unwrap()
        .with_kernel_dir(dir.path());
    let plugin = HostPlugin::new(HostPluginOptions {
        library_dir: Some(dir.path().to_path_buf()),
        ..HostPluginOptions::default()
    });
    for issue in [IssueMode::Serial, IssueMode::PerStream] {
        let r = plan
            .run_with(&plugin, issue)
            .unwrap_or_else(|e| panic!("{}", e.render()));
        assert_eq!(
            r.as_i32("out").unwrap(),
            [1],
            "{issue:?}: the kernel gave up waiting for the host task\n{}",
            plan.schedule()
        );
        assert!(r.as_f32("H").unwrap().iter().all(|v| *v == -1.0));
        assert_eq!(plugin.live_device_allocs(), 0);
    }
}
