//! Inputs at the limits the fuzz targets (`fuzz/`) lean on, so a regression there fails
//! `cargo test` without fuzzing. The 10-minute libFuzzer runs found no crash; these are
//! hand-made edge cases of the same two entry points.

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
