//! `bench --check`: the CUDA (or any) plugin against the reference interpreter, and
//! fault injection on the CUDA plugin.

use offload_sched::exec::IssueMode;
use offload_sched::model::{saxpy_regions, ElemType, Init, MapType, ProgramBuilder};
use offload_sched::plugin::Plugin;
use offload_sched::schedule::{ScheduleOptions, SyncPolicy};
use offload_sched::Plan;
use std::fmt::Write as _;

/// Correctness: a few builder programs on the chosen plugin against the reference
/// interpreter (every built-in kernel, every element type where it applies, each policy).
pub fn check_programs(plugin: &dyn Plugin) -> Result<String, String> {
    use offload_sched::reference::check;
    let mut out = String::new();
    let mut programs = vec![saxpy_regions(8, 4096 * 4 + 12)];
    for ty in [
        ElemType::F32,
        ElemType::F64,
        ElemType::I32,
        ElemType::I64,
        ElemType::U8,
    ] {
        let n = 1000u64;
        let mut p = ProgramBuilder::new(&format!("kernels_{}", ty.name()));
        let a = p.buffer("a", ty, n, Init::Random(1));
        let b = p.buffer("b", ty, n, Init::Random(2));
        let c = p.buffer("c", ty, n, Init::Iota);
        let s = p.buffer("s", ty, 1, Init::Zeros);
        let g = p.buffer("g", ty, 30 * 30, Init::Random(3));
        let h = p.buffer("h", ty, 30 * 30, Init::Zeros);
        let m = p.buffer("m", ty, 16 * 16 * 3, Init::Random(4));
        let tf = MapType::ToFrom;
        p.target("saxpy", "saxpy")
            .num(3.0)
            .arg(a)
            .arg(b)
            .map(tf, a)
            .map(tf, b);
        p.target("scale", "scale").num(2.0).arg(c).map(tf, c);
        p.target("add", "add")
            .arg(a)
            .arg(b)
            .arg(c)
            .map(tf, a)
            .map(tf, b)
            .map(tf, c);
        p.target("triad", "triad")
            .num(1.5)
            .arg(a)
            .arg(c)
            .arg(b)
            .map(tf, a)
            .map(tf, b)
            .map(tf, c);
        p.target("copy", "copy").arg(b).arg(a).map(tf, a).map(tf, b);
        p.target("increment", "increment")
            .arg(c)
            .map(tf, c)
            .launch(3, 32);
        p.target("add_scalar", "add_scalar")
            .arg(a)
            .num(7.0)
            .map(tf, a);
        p.target("reduce", "reduce_sum")
            .arg(c)
            .arg(s)
            .map(tf, c)
            .map(tf, s);
        p.target("jacobi", "jacobi5")
            .num(30.0)
            .num(30.0)
            .arg(g)
            .arg(h)
            .map(tf, g)
            .map(tf, h);
        let mm = p.sec(m);
        let (ma, mb, mc) = (
            offload_sched::model::Section::new(mm.buf, 0, 256),
            offload_sched::model::Section::new(mm.buf, 256, 256),
            offload_sched::model::Section::new(mm.buf, 512, 256),
        );
        p.target("matmul", "matmul_block")
            .num(16.0)
            .arg(ma)
            .arg(mb)
            .arg(mc)
            .map(tf, m);
        p.target("fill", "fill").arg(b).num(5.0).map(tf, b);
        p.target("spin", "spin").num(50.0);
        programs.push(p.build());
    }
    programs.push(batch_edges_program());
    for program in programs {
        let name = program.name.clone();
        let planned =
            Plan::new(program, &ScheduleOptions::default()).map_err(|e| format!("{name}: {e}"))?;
        let expected = planned
            .reference()
            .map_err(|e| format!("{name}: reference: {e}"))?;
        for policy in SyncPolicy::ALL {
            for streams in [1, 4] {
                let plan = planned
                    .reschedule(&ScheduleOptions {
                        policy,
                        streams_per_device: streams,
                        random_streams: None,
                        host_lanes: 1,
                    })
                    .map_err(|e| format!("{name}: {e}"))?;
                for issue in [IssueMode::Serial, IssueMode::PerStream] {
                    let rep = plan
                        .run_with(plugin, issue)
                        .map_err(|e| format!("{name} {policy} {streams} {issue:?}: {e}"))?;
                    check(&rep.buffers, &expected).map_err(|e| {
                        format!(
                            "{name} {policy} {streams} streams, {issue:?} issue, on {}: {e}",
                            plugin.info().name
                        )
                    })?;
                }
            }
        }
        let _ = writeln!(
            out,
            "check {}: {} ops, 3 policies x {{1,4}} streams x {{serial, per-stream}} issue on {}: OK",
            name,
            planned.graph().ops.len(),
            plugin.info().name
        );
    }
    Ok(out)
}

/// Copies that the CUDA plugin's small-copy batches must keep in order: unaligned sections
/// of a `u8` buffer (byte-wise copies), a 4-byte aligned `i32` section (4-byte words), a
/// D2H and an H2D of the same host bytes back to back (the second must see the first's
/// result: two increments give +2 only in order), a held small copy followed by a
/// copy-engine-sized one (160 000 bytes, above the 64 KiB batch limit), and one region
/// with three small sections of one buffer.
fn batch_edges_program() -> offload_sched::model::Program {
    use offload_sched::model::Section;
    let mut p = ProgramBuilder::new("batch_edges");
    let odd = p.buffer("odd", ElemType::U8, 4099, Init::Random(7));
    // Declared before `big`: its copies come first in the region "mixed" (copies follow
    // buffer order), so a small copy is held when the copy-engine-sized one arrives.
    let w2 = p.buffer("w2", ElemType::F32, 64, Init::Random(9));
    let big = p.buffer("big", ElemType::I32, 40_000, Init::Random(8));
    let w = p.buffer("w", ElemType::F32, 1000, Init::Iota);
    let mid = Section::new(odd, 3, 1001);
    let (to, from, tf) = (MapType::To, MapType::From, MapType::ToFrom);
    p.enter_data("enter", vec![p.map(to, mid), p.map(to, w)]);
    p.target("inc1", "increment").arg(mid).map(tf, mid);
    p.update("pull", vec![p.map(from, mid)]);
    p.update("push", vec![p.map(to, mid)]);
    p.target("inc2", "increment").arg(mid).map(tf, mid);
    // a small copy held, then a copy-engine-sized one (which issues the batch first)
    p.target("mixed", "add")
        .arg(big)
        .arg(big)
        .arg(big)
        .map(tf, w2)
        .map(tf, big)
        .map(tf, w);
    // 4-byte aligned, not 16: the kernel's 4-byte path
    let q = p.buffer("q", ElemType::I32, 1001, Init::Iota);
    let q_mid = Section::new(q, 1, 999);
    p.target("quad", "increment").arg(q_mid).map(tf, q_mid);
    p.target("scale_w", "scale").num(3.0).arg(w).map(tf, w);
    p.exit_data("exit", vec![p.map(from, mid), p.map(from, w)]);
    let (head, tail) = (Section::new(odd, 0, 3), Section::new(odd, 1004, 3095));
    p.target("pieces", "add")
        .arg(head)
        .arg(head)
        .arg(tail)
        .map(tf, head)
        .map(tf, tail)
        .map(to, Section::new(odd, 2000, 7));
    p.build()
}

/// Fault injection on the CUDA plugin (with its per-stream device-block cache, with and
/// without copy batching): an 8-region saxpy program under minimal sync on 4 randomly
/// assigned streams, failing the k-th call of each kind for k = 1..=6, with serial and
/// with per-stream issue; after every run, allocs == frees (counted by
/// [`offload_sched::plugin::faulty::FaultyPlugin`]) and no device allocation is live. Then the
/// cache's counters. Errors: the first violation.
#[cfg(feature = "cuda")]
pub fn cuda_fault_check() -> Result<String, String> {
    use offload_sched::plugin::cuda::{CudaPlugin, CudaPluginOptions};
    use offload_sched::plugin::faulty::{FaultyPlugin, RUN_CALLS};
    let plan = Plan::new(
        saxpy_regions(8, 4096),
        &ScheduleOptions {
            policy: SyncPolicy::Minimal,
            streams_per_device: 4,
            random_streams: Some(5),
            host_lanes: 1,
        },
    )
    .map_err(|e| e.to_string())?;
    let (mut runs, mut failed) = (0, 0);
    let (mut hits, mut misses) = (0, 0);
    // With copy batching (the default) and without it (every copy a copy-engine call).
    let configs = [
        CudaPluginOptions::default(),
        CudaPluginOptions {
            batch_copy_max_bytes: 0,
            ..Default::default()
        },
    ];
    for (config, kind, issue) in configs.iter().flat_map(|c| {
        RUN_CALLS
            .into_iter()
            .flat_map(move |k| [(c, k, IssueMode::Serial), (c, k, IssueMode::PerStream)])
    }) {
        for k in 1..=6 {
            let p = FaultyPlugin::new(CudaPlugin::new(config.clone())?, kind, k);
            // Twice: the second run allocates from the blocks the first one cached, and
            // must succeed (the fault fires once).
            for run in 0..2 {
                let before = p.injected();
                let r = plan.run_with(&p, issue);
                runs += 1;
                let fired = p.injected() && !before;
                if r.is_err() {
                    failed += 1;
                }
                if r.is_err() != fired {
                    return Err(format!(
                        "fault {kind:?} k={k} {issue:?} issue, run {run}: {} but the fault {}",
                        match &r {
                            Ok(_) => "Ok".to_string(),
                            Err(e) => format!("error {e}"),
                        },
                        if fired { "fired" } else { "did not fire" }
                    ));
                }
                if p.allocs() != p.frees() || p.inner().live_device_allocs() != 0 {
                    return Err(format!(
                        "fault {kind:?} k={k}: {} allocs, {} frees, {} live device allocations",
                        p.allocs(),
                        p.frees(),
                        p.inner().live_device_allocs()
                    ));
                }
            }
            let (_, h, m) = p.inner().device_cache_stats();
            hits += h;
            misses += m;
        }
    }
    Ok(format!(
        "fault check on cuda (with and without copy batching): {runs} runs ({failed} failed by injection), allocs == frees and 0 live device allocations after each; device-block cache {hits} hits, {misses} misses\n"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_edges_puts_the_copies_it_is_for_back_to_back() {
        let plan = Plan::new(
            batch_edges_program(),
            &ScheduleOptions {
                policy: SyncPolicy::Minimal,
                streams_per_device: 1,
                random_streams: None,
                host_lanes: 1,
            },
        )
        .unwrap();
        let sched = plan.schedule();
        // On one stream, with one host wait at the very end: the pull D2H and the push
        // H2D of odd[3:1001] are consecutive ops, so the CUDA plugin's batch holds the D2H
        // when the H2D of the same host bytes arrives.
        let text = sched.to_string();
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        let pull = lines
            .iter()
            .position(|l| l.contains("d2h") && l.ends_with("region \"pull\""))
            .expect("pull D2H");
        assert!(
            lines[pull].contains("odd[3:1001] 1001 B"),
            "{}",
            lines[pull]
        );
        assert!(
            lines[pull + 1].contains("h2d") && lines[pull + 1].contains("odd[3:1001]"),
            "{}",
            lines[pull + 1]
        );
        assert!(lines[pull + 1].ends_with("region \"push\""));
        // The small H2D of w2 is held when the copy-engine H2D of big comes.
        let w2 = lines
            .iter()
            .position(|l| l.contains("h2d") && l.contains("w2[0:64] 256 B"))
            .expect("H2D of w2");
        assert!(
            lines[w2 + 1].contains("h2d") && lines[w2 + 1].contains("big[0:40000] 156.2 KiB"),
            "{}",
            lines[w2 + 1]
        );
        assert_eq!(sched.host_waits().count(), 1);
    }
}
