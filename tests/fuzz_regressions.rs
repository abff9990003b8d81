//! Inputs at the limits the fuzz targets (`fuzz/`) lean on, so a regression there fails
//! `cargo test` without fuzzing, and one regression test per crash a fuzz run found.
//! `load_graph` and `import_wfcommons` found none in 10 minutes each (the tests of those
//! two entry points are hand-made edge cases); `build_run` found one (issuing threads
//! still exiting after `execute` returned).

use offload_sched::file::SourceFile;
use offload_sched::import::{import_wfcommons, WfOptions};
use offload_sched::schedule::{ScheduleOptions, SyncPolicy};
use offload_sched::{Error, Plan};

/// The `load_graph` target: parse, and on success lower, schedule and verify (a plan
/// under every policy). A parse or lowering error is `false`; a schedule that does not
/// verify panics.
fn load_graph(text: &str) -> bool {
    let plan = match Plan::from_source(SourceFile::new("fuzz.toml", text), &Default::default()) {
        Ok(plan) => plan,
        Err(Error::File(_) | Error::Lower { .. }) => return false,
        Err(e) => panic!("{}", e.render()),
    };
    for policy in SyncPolicy::ALL {
        let o = ScheduleOptions {
            policy,
            ..Default::default()
        };
        plan.reschedule(&o)
            .unwrap_or_else(|e| panic!("{}", e.render()));
    }
    true
}

fn import(text: &str) -> bool {
    let o = WfOptions {
        time_scale: 1e-3,
        size_scale: 1e-3,
    };
    import_wfcommons(text, "fuzz.json", &o).is_ok()
}

#[test]
fn deeply_nested_target_data_is_an_error_not_a_stack_overflow() {
    let mut t = String::from("name = \"x\"\n[[buffer]]\nname = \"a\"\ntype = \"u8\"\nlen = 1\n");
    let mut key = String::from("body");
    for i in 0..2000 {
        t += &format!("[[{key}]]\ntarget_data = \"d{i}\"\nmap = [\"a\"]\n");
        key += ".body";
    }
    assert!(!load_graph(&t));
}

#[test]
fn absurd_numbers_are_errors() {
    for len in ["1e300", "-0", "9223372036854775807", "nan", "inf"] {
        let t = format!("name = \"x\"\n[[buffer]]\nname = \"a\"\ntype = \"f64\"\nlen = {len}\n");
        assert!(!load_graph(&t), "len = {len}");
    }
    let t = "name = \"x\"\n[[buffer]]\nname = \"a\"\ntype = \"f64\"\nlen = 4\n[[body]]\ntarget = \"r\"\nkernel = \"fill\"\nargs = [\"a[18446744073709551615:1]\", 1.0]\nmap = [\"a\"]\n";
    assert!(!load_graph(t));
}

#[test]
fn json_edge_cases_do_not_panic() {
    let deep = "[".repeat(100_000);
    for j in [
        "",
        "null",
        &deep,
        "{\"workflow\": {\"specification\": {\"tasks\": [{\"id\": \"a\", \"parents\": [\"a\"]}], \"files\": []}}}",
        "{\"workflow\": {\"specification\": {\"tasks\": [], \"files\": [{\"id\": \"f\", \"sizeInBytes\": 1e308}]}}}",
        "{\"workflow\": {\"specification\": {\"tasks\": [], \"files\": [{\"id\": \"f\", \"sizeInBytes\": -1}]}}}",
    ] {
        let _ = import(j);
    }
}

/// A host plugin whose stream calls, when made from one of `execute`'s issuing threads,
/// give that thread a thread-local whose destructor (run as the thread exits) takes
/// 20 ms: the window in which `execute` could return with the thread still exiting.
type SlowExit = offload_sched::plugin::layer::Layered<
    Box<offload_sched::plugin::host::HostPlugin>,
    TouchOnStreamCalls,
>;

static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static EXITED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

struct ExitGuard;

impl Drop for ExitGuard {
    fn drop(&mut self) {
        std::thread::sleep(std::time::Duration::from_millis(20));
        EXITED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

thread_local! {
    static GUARD: std::cell::OnceCell<ExitGuard> = const { std::cell::OnceCell::new() };
}

fn touch() {
    let issuing = std::thread::current()
        .name()
        .is_some_and(|n| n.starts_with("offload-issue"));
    if issuing {
        GUARD.with(|g| {
            g.get_or_init(|| {
                STARTED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                ExitGuard
            });
        });
    }
}

/// The hooks of [`SlowExit`]: every stream call touches the thread's guard first.
struct TouchOnStreamCalls;

impl offload_sched::plugin::layer::Hooks for TouchOnStreamCalls {
    fn before(
        &self,
        call: offload_sched::plugin::PluginCall,
    ) -> Result<(), offload_sched::plugin::PluginError> {
        if call.kind() == offload_sched::plugin::CallKind::Stream {
            touch();
        }
        Ok(())
    }
}

/// `build_run` found (LeakSanitizer: a thread's TLS-destructor record reported leaked):
/// `execute` with per-stream or per-group issue could return while its issuing threads
/// were still exiting (scoped threads never joined by handle are detached; the scope
/// waits for their closures only, not for their thread-local destructors). `execute`
/// must return only after every issuing thread is gone, destructors included.
#[test]
fn execute_returns_after_its_issuing_threads_are_gone() {
    use offload_sched::exec::IssueMode;
    use offload_sched::model::{ElemType, Init, MapType, ProgramBuilder};
    use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
    use offload_sched::reference::check;
    use std::sync::atomic::Ordering::SeqCst;
    let mut p = ProgramBuilder::new("threads");
    for i in 0..4 {
        let b = p.buffer(&format!("b{i}"), ElemType::I32, 8, Init::Iota);
        p.target(&format!("r{i}"), "increment")
            .arg(b)
            .map(MapType::ToFrom, b)
            .nowait();
    }
    let plan = Plan::new(p.build(), &ScheduleOptions::default()).unwrap();
    let want = plan.reference().unwrap();
    let plugin: SlowExit = offload_sched::plugin::layer::Layered::wrap(
        Box::new(HostPlugin::new(HostPluginOptions::default())),
        TouchOnStreamCalls,
    );
    for issue in [IssueMode::PerStream, IssueMode::PerGroup] {
        let r = plan.run_with(&plugin, issue).unwrap();
        assert!(
            r.issue_threads >= 2,
            "{issue:?}: {} threads",
            r.issue_threads
        );
        check(&r.buffers, &want).unwrap();
        let (started, exited) = (STARTED.load(SeqCst), EXITED.load(SeqCst));
        assert!(
            started >= 2,
            "{issue:?}: the issuing threads called the plugin"
        );
        assert_eq!(
            exited, started,
            "{issue:?}: execute returned before its issuing threads finished exiting"
        );
    }
}
