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
struct SlowExit(offload_sched::plugin::host::HostPlugin);

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

mod slow_exit {
    use super::{touch, SlowExit};
    use offload_sched::model::{ElemType, KernelSig, LaunchShape};
    use offload_sched::plugin::*;
    impl Plugin for SlowExit {
        fn name(&self) -> String {
            self.0.name()
        }
        fn device_count(&self) -> u32 {
            self.0.device_count()
        }
        fn create_streams(&self, d: u32, n: u32) -> Result<Vec<StreamHandle>, PluginError> {
            self.0.create_streams(d, n)
        }
        fn alloc(&self, s: StreamHandle, bytes: u64) -> Result<DevicePtr, PluginError> {
            touch();
            self.0.alloc(s, bytes)
        }
        fn fill_zero(&self, s: StreamHandle, p: DevicePtr, bytes: u64) -> Result<(), PluginError> {
            touch();
            self.0.fill_zero(s, p, bytes)
        }
        fn free(&self, s: StreamHandle, p: DevicePtr) -> Result<(), PluginError> {
            touch();
            self.0.free(s, p)
        }
        fn alloc_host(&self, bytes: u64) -> Result<HostPtr, PluginError> {
            self.0.alloc_host(bytes)
        }
        fn free_host(&self, p: HostPtr) -> Result<(), PluginError> {
            self.0.free_host(p)
        }
        fn submit(
            &self,
            s: StreamHandle,
            dst: DevicePtr,
            src: HostPtr,
            bytes: u64,
        ) -> Result<(), PluginError> {
            touch();
            self.0.submit(s, dst, src, bytes)
        }
        fn retrieve(
            &self,
            s: StreamHandle,
            dst: HostPtr,
            src: DevicePtr,
            bytes: u64,
        ) -> Result<(), PluginError> {
            touch();
            self.0.retrieve(s, dst, src, bytes)
        }
        fn load_kernel(
            &self,
            d: u32,
            sig: &KernelSig,
            ty: ElemType,
        ) -> Result<KernelHandle, PluginError> {
            self.0.load_kernel(d, sig, ty)
        }
        fn launch(
            &self,
            s: StreamHandle,
            k: KernelHandle,
            args: &[LaunchArg],
            shape: LaunchShape,
        ) -> Result<(), PluginError> {
            touch();
            self.0.launch(s, k, args, shape)
        }
        fn create_event(&self, d: u32) -> Result<EventHandle, PluginError> {
            self.0.create_event(d)
        }
        fn destroy_event(&self, e: EventHandle) -> Result<(), PluginError> {
            self.0.destroy_event(e)
        }
        fn record_event(&self, s: StreamHandle, e: EventHandle) -> Result<(), PluginError> {
            touch();
            self.0.record_event(s, e)
        }
        fn wait_event(&self, s: StreamHandle, e: EventHandle) -> Result<(), PluginError> {
            touch();
            self.0.wait_event(s, e)
        }
        fn synchronize(&self, s: StreamHandle) -> Result<(), PluginError> {
            self.0.synchronize(s)
        }
        fn synchronize_event(&self, e: EventHandle) -> Result<(), PluginError> {
            self.0.synchronize_event(e)
        }
        fn drain_timings(&self) -> Vec<Timing> {
            self.0.drain_timings()
        }
        fn next_seq(&self, s: StreamHandle) -> u64 {
            self.0.next_seq(s)
        }
        fn parallel_issue(&self) -> bool {
            self.0.parallel_issue()
        }
        fn computes(&self) -> bool {
            self.0.computes()
        }
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
    let plugin = SlowExit(HostPlugin::new(HostPluginOptions::default()));
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
