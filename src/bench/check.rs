//! `bench --check`: the CUDA (or any) plugin against the reference interpreter, and
//! fault injection on the CUDA plugin.

use super::saxpy_program;
use crate::exec::{execute, ExecOptions, IssueMode};
use crate::lower::lower;
use crate::model::{ElemType, Init, MapType, ProgramBuilder};
use crate::plugin::Plugin;
use crate::schedule::{schedule, ScheduleOptions, SyncPolicy};
use std::fmt::Write as _;

/// Correctness: a few builder programs on the chosen plugin against the reference
/// interpreter (every built-in kernel, every element type where it applies, each policy).
pub fn check_programs(plugin: &dyn Plugin) -> Result<String, String> {
    use crate::exec::{check, reference};
    let mut out = String::new();
    let mut programs = vec![saxpy_program(8, 4096 * 4 + 12)];
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
            crate::model::Section::new(mm.buf, 0, 256),
            crate::model::Section::new(mm.buf, 256, 256),
            crate::model::Section::new(mm.buf, 512, 256),
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
    for program in &programs {
        let graph = lower(program).map_err(|e| format!("{}: lower: {e}", program.name))?;
        let expected = reference(&graph, &ExecOptions::default())
            .map_err(|e| format!("{}: reference: {e}", program.name))?;
        for policy in SyncPolicy::ALL {
            for streams in [1, 4] {
                let sched = schedule(
                    &graph,
                    &ScheduleOptions {
                        policy,
                        streams_per_device: streams,
                        random_streams: None,
                    },
                );
                for issue in [IssueMode::Serial, IssueMode::PerStream] {
                    let opts = ExecOptions {
                        issue,
                        ..ExecOptions::default()
                    };
                    let rep = execute(&graph, &sched, plugin, &opts).map_err(|e| {
                        format!("{} {policy} {streams} {issue:?}: {e}", program.name)
                    })?;
                    check(&rep.buffers, &expected).map_err(|e| {
                        format!(
                            "{} {policy} {streams} streams, {issue:?} issue, on {}: {e}",
                            program.name,
                            plugin.name()
                        )
                    })?;
                }
            }
        }
        let _ = writeln!(
            out,
            "check {}: {} ops, 3 policies x {{1,4}} streams x {{serial, per-stream}} issue on {}: OK",
            program.name,
            graph.ops.len(),
            plugin.name()
        );
    }
    Ok(out)
}

/// Fault injection on the CUDA plugin (with its per-stream device-block cache): an
/// 8-region saxpy program under minimal sync on 4 randomly assigned streams, failing the
/// k-th call of each kind for k = 1..=6, with serial and with per-stream issue; after every run, allocs == frees (counted by
/// [`crate::plugin::faulty::FaultyPlugin`]) and no device allocation is live. Then the
/// cache's counters. Errors: the first violation.
#[cfg(feature = "cuda")]
pub fn cuda_fault_check() -> Result<String, String> {
    use crate::plugin::cuda::CudaPlugin;
    use crate::plugin::faulty::{FaultKind, FaultyPlugin};
    let program = saxpy_program(8, 4096);
    let graph = lower(&program).map_err(|e| format!("lower: {e}"))?;
    let sched = schedule(
        &graph,
        &ScheduleOptions {
            policy: SyncPolicy::Minimal,
            streams_per_device: 4,
            random_streams: Some(5),
        },
    );
    let (mut runs, mut failed) = (0, 0);
    let (mut hits, mut misses) = (0, 0);
    for (kind, issue) in FaultKind::ALL
        .into_iter()
        .flat_map(|k| [(k, IssueMode::Serial), (k, IssueMode::PerStream)])
    {
        let opts = ExecOptions {
            issue,
            ..ExecOptions::default()
        };
        for k in 1..=6 {
            let p = FaultyPlugin::new(CudaPlugin::new(Default::default())?, kind, k);
            // Twice: the second run allocates from the blocks the first one cached, and
            // must succeed (the fault fires once).
            for run in 0..2 {
                let before = p.injected();
                let r = execute(&graph, &sched, &p, &opts);
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
        "fault check on cuda: {runs} runs ({failed} failed by injection), allocs == frees and 0 live device allocations after each; device-block cache {hits} hits, {misses} misses\n"
    ))
}
