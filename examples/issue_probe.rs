//! Probe of host-side issue strategies for the hand-written saxpy regions on the GPU:
//! `cargo build --release --features cuda --example issue_probe`, then on the GPU
//! `issue_probe [reps]`. Prints µs per region (median) per variant and size.
use offload_sched::plugin::cuda::raw::{self, Issue};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() -> Result<(), String> {
    let reps: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(50);
    for round in 0..3 {
        for &b in &[4096u64, 1 << 20] {
            for &streams in &[4usize, 8] {
                for &pre in &[true, false] {
                    let serial = median(raw::saxpy_regions(64, b, streams, false, pre, 3, reps)?);
                    let mut line =
                        format!("round {round} bytes={b} streams={streams} prealloc={pre} serial={serial:.2}");
                    for how in [Issue::Threads, Issue::Graph, Issue::Batch] {
                        match raw::saxpy_regions_by(how, 64, b, streams, pre, 3, reps) {
                            Ok((t, setup)) => {
                                line += &format!(" {how:?}={:.2}", median(t));
                                if how == Issue::Graph {
                                    line += &format!(" (setup {setup:.0} us)");
                                }
                            }
                            Err(e) => line += &format!(" {how:?}=ERR({e})"),
                        }
                    }
                    println!("{line}");
                }
            }
        }
    }
    Ok(())
}
