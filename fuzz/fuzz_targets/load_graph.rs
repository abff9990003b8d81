//! Bytes → graph file parse; on success, lower, schedule under every policy and verify.
//! Nothing may panic, and every schedule of a program that lowers must verify.
#![no_main]

use libfuzzer_sys::fuzz_target;
use offload_sched::file::{parse, SourceFile};
use offload_sched::schedule::{schedule, ScheduleOptions, SyncPolicy};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let src = SourceFile::new("fuzz.toml", text);
    let Ok(program) = parse(&src) else {
        return;
    };
    let Ok(graph) = offload_sched::lower::lower(&program) else {
        return;
    };
    for policy in SyncPolicy::ALL {
        let opts = ScheduleOptions {
            policy,
            ..Default::default()
        };
        let sched = schedule(&graph, &opts);
        if let Err(e) = offload_sched::verify::verify(&graph, &sched) {
            panic!("schedule under {policy} does not verify: {e}");
        }
    }
});
