//! Bytes → WfCommons import. Nothing may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use offload_sched::import::{import_wfcommons, WfOptions};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let opts = WfOptions {
        time_scale: 1e-3,
        size_scale: 1e-3,
    };
    let _ = import_wfcommons(text, "fuzz.json", &opts);
});
