//! The `bench dag` shapes (`model::{blocked_matmul, fanout_shared, wavefront}`): their
//! small instances are the graph files `graphs/{matmul_small, fanout_shared,
//! wavefront}.toml` (regenerate with `UPDATE_GRAPHS=1 cargo test -p offload-sched-bench --test dag_shapes`),
//! and facts that hold whatever the stream colouring: op counts per kind, regions, one
//! host wait (every region is `nowait`, one `taskwait`), verified schedules under every
//! policy, and host-plugin results equal to the host reference.

use offload_sched::exec;
use offload_sched::lower::{LowerOptions, OpGraph};
use offload_sched::model::{blocked_matmul, fanout_shared, wavefront, Program};
use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
use offload_sched::reference;
use offload_sched::schedule::{ScheduleOptions, SyncPolicy};
use offload_sched::Plan;
use offload_sched_bench::MatmulReference;
use std::path::PathBuf;

fn graph_path(stem: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join(format!("graphs/{stem}.toml"))
}

/// The program planned under the default options (minimal, 4 streams, transfer elision).
fn plan(p: Program) -> Plan {
    Plan::new(p, &ScheduleOptions::default()).unwrap()
}

/// The plan lowered with transfer elision off: the copies the mapping rules name, the
/// shape each generator writes (every region maps its own copies).
fn no_elide(p: &Plan) -> Plan {
    p.relower(&LowerOptions::no_elide()).unwrap()
}

/// (file stem, header comment, program) of each checked-in shape.
fn shapes() -> Vec<(&'static str, &'static str, Program)> {
    vec![
        (
            "matmul_small",
            "# blocked_matmul(64, 16): LLVM's bug49334 shape (model::blocked_matmul), 4x4 blocks of\n\
             # 16x16 f32 per matrix, 64 nowait regions C(i,j) += A(i,k) B(k,j), then taskwait.\n",
            blocked_matmul(64, 16),
        ),
        (
            "fanout_shared",
            "# fanout_shared(16, 256 KiB, 4 KiB): 16 independent nowait regions each mapping the\n\
             # same read-only table to: and their own output from: (model::fanout_shared).\n",
            fanout_shared(16, 256 << 10, 4096),
        ),
        (
            "wavefront",
            "# wavefront(4, 4 KiB): 4x4 blocks, W(i,j) from W(i-1,j) and W(i,j-1) through nowait\n\
             # regions with depend clauses (model::wavefront); W(i,j) = C(i+j, i).\n",
            wavefront(4, 4096),
        ),
    ]
}

#[test]
fn graph_files_are_the_generators_output() {
    for (stem, header, program) in shapes() {
        let path = graph_path(stem);
        let text = format!(
            "{header}# Generated: UPDATE_GRAPHS=1 cargo test --test dag_shapes\n{}",
            offload_sched::file::to_toml(&program)
        );
        if std::env::var_os("UPDATE_GRAPHS").is_some() {
            std::fs::write(&path, &text).unwrap();
        }
        let (_, loaded) = offload_sched::file::load(&path)
            .unwrap_or_else(|e| panic!("{}: {}", path.display(), e.render()));
        assert!(
            offload_sched::file::same_program(&loaded, &program),
            "{} differs from its generator (UPDATE_GRAPHS=1 rewrites it)",
            path.display()
        );
    }
}

/// Ops per kind: alloc, h2d, kernel, d2h, free, taskwait, end.
fn kinds(g: &OpGraph) -> [usize; 7] {
    let names = ["alloc", "h2d", "kernel", "d2h", "free", "taskwait", "end"];
    let mut n = [0; 7];
    for op in &g.ops {
        let k = names.iter().position(|x| *x == op.kind.name()).unwrap();
        n[k] += 1;
    }
    n
}

/// Verifies all three policies, checks one host wait under per-region and minimal, runs
/// minimal and per-op on the host plugin and returns their buffers.
fn schedules_verify_and_run(planned: &Plan) -> Vec<exec::Buffers> {
    let g = planned.graph();
    let plugin = HostPlugin::new(HostPluginOptions::default());
    let mut out = Vec::new();
    for policy in [
        SyncPolicy::PerOp,
        SyncPolicy::PerRegion,
        SyncPolicy::Minimal,
    ] {
        for random_streams in [None, Some(7)] {
            // Verified by the plan.
            let plan = planned
                .reschedule(&ScheduleOptions {
                    policy,
                    streams_per_device: 4,
                    random_streams,
                    host_lanes: 1,
                })
                .unwrap_or_else(|e| panic!("{} {policy}: {}", g.name, e.render()));
            let s = plan.schedule();
            if policy != SyncPolicy::PerOp {
                assert_eq!(s.host_waits().count(), 1, "{} {policy}", g.name);
            }
            if policy != SyncPolicy::PerRegion {
                let r = plan.run(&plugin).unwrap();
                out.push(r.buffers);
            }
        }
    }
    out
}

#[test]
fn matmul_small_counts_and_host_result() {
    let p = blocked_matmul(64, 16);
    let planned = plan(p.clone());
    let g = planned.graph();
    assert_eq!(g.device_regions(), 64);
    assert_eq!(p.buffers.len(), 3 * 16);
    // Per region: 3 maps → 3 allocs and frees, A and B and C in, C out.
    let off = no_elide(&planned);
    assert_eq!(kinds(off.graph()), [192, 192, 64, 64, 192, 1, 1]);
    // With elision: each of the 48 tiles allocated, copied in and freed once, each of
    // the 16 C tiles copied back once (at the end).
    assert_eq!(kinds(g), [48, 48, 64, 16, 48, 1, 1]);
    let reference = MatmulReference::new(&p, 64, 16).unwrap();
    for b in schedules_verify_and_run(&planned)
        .into_iter()
        .chain(schedules_verify_and_run(&off))
    {
        reference.check(&b).unwrap();
    }
    // The sequential reference interpreter (the host kernels in program order) agrees
    // with the independent dense reference.
    reference.check(&planned.reference().unwrap()).unwrap();
}

#[test]
fn fanout_shared_counts_and_host_result() {
    let p = fanout_shared(16, 256 << 10, 4096);
    let planned = plan(p);
    let g = planned.graph();
    assert_eq!(g.device_regions(), 16);
    // Every region maps the table afresh: 16 table copies of 256 KiB, 16 outputs back.
    let off = no_elide(&planned);
    assert_eq!(kinds(off.graph()), [32, 16, 16, 16, 32, 1, 1]);
    // With elision the table is copied once and kept for the 15 later regions.
    assert_eq!(kinds(g), [17, 1, 16, 16, 17, 1, 1]);
    let h2d: u64 = off
        .graph()
        .ops
        .iter()
        .filter_map(|o| match &o.kind {
            offload_sched::lower::OpKind::H2D { section, .. } => Some(section.len * 4),
            _ => None,
        })
        .sum();
    assert_eq!(h2d, 16 * (256 << 10));
    assert_eq!(g.bytes_moved().h2d, 256 << 10);
    assert_eq!(g.bytes_moved().elided_h2d, 15 * (256 << 10));
    let want = planned.reference().unwrap();
    // out{r}[i] = (r + 2) · i
    assert_eq!(want.as_f32("out3").unwrap()[..3], [0.0, 5.0, 10.0]);
    assert_eq!(want.as_f32("out15").unwrap()[1023], 17.0 * 1023.0);
    for b in schedules_verify_and_run(&planned) {
        reference::check(&b, &want).unwrap();
    }
}

#[test]
fn wavefront_counts_and_host_result() {
    let p = wavefront(4, 4096);
    let planned = plan(p);
    let g = planned.graph();
    assert_eq!(g.device_regions(), 16);
    // Corner: 1 map; 6 edge blocks: 2; 9 interior blocks: 3. Inputs in, own block out.
    let off = no_elide(&planned);
    assert_eq!(
        kinds(off.graph()),
        [1 + 12 + 27, 6 + 18, 16, 16, 1 + 12 + 27, 1, 1]
    );
    // With elision every block is allocated once: its own region's copy (clean after
    // its D2H) is kept and is the input of its neighbours, so nothing is copied in.
    assert_eq!(kinds(g), [16, 0, 16, 16, 16, 1, 1]);
    let want = planned.reference().unwrap();
    // W(i,j) = C(i+j, i)
    for (name, v) in [
        ("W_0_0", 1.0),
        ("W_0_3", 1.0),
        ("W_2_2", 6.0),
        ("W_3_3", 20.0),
    ] {
        let w = want.as_f64(name).unwrap();
        assert_eq!(w.len(), 512);
        assert!(w.iter().all(|&x| x == v), "{name}: {}", w[0]);
    }
    for b in schedules_verify_and_run(&planned) {
        reference::check(&b, &want).unwrap();
    }
}

#[test]
fn generators_scale_as_documented() {
    // bench dag's defaults: 16³ matmul regions, 16 fan-out, 16² wavefront.
    let matmul = plan(blocked_matmul(256, 16));
    assert_eq!(matmul.graph().device_regions(), 4096);
    assert_eq!(kinds(matmul.graph())[2], 4096);
    let wave = plan(wavefront(16, 4096));
    assert_eq!(kinds(wave.graph())[2], 256);
    // Exact binomials in f64 up to n = 29: C(30, 15) at (15, 15).
    let w = wave.reference().unwrap();
    assert_eq!(w.as_f64("W_15_15").unwrap()[0], 155117520.0);
}

/// The colouring on the checked-in shapes (default options: minimal, 4 streams), with the
/// event counts their snapshots hold, lowered without elision (the mapping rules'
/// copies): independent chains (matmul: 16 chains of 4 regions) and regions that only
/// share a read-only input (fan-out) need no event and spread over the whole pool; the
/// 4×4 wavefront (at most 4 blocks ready at once, most anti-diagonals narrower) fits 3
/// streams, its blocks waiting for a neighbour on another stream 11 times; with elision
/// its readers of kept blocks follow the producer's H2D, not its kernel
/// (`schedule/region_dag.rs`), so it spreads over all 4 streams with 18 events. With elision
/// (the default) a kept copy is shared by the regions that read it: its H2D on one
/// stream, its readers on others, each other stream waiting once for it (matmul: a kept
/// A or B tile joins chains; fan-out: the one copy of the table), and the frees at the
/// end wait for the last readers.
#[test]
fn shape_schedules_event_counts() {
    for (stem, elided, copies) in [
        ("matmul_small", (4, 67), (4, 0)),
        ("fanout_shared", (4, 4), (4, 0)),
        ("wavefront", (4, 18), (4, 11)),
    ] {
        let planned = Plan::from_file(graph_path(stem), &ScheduleOptions::default()).unwrap();
        for (plan, want) in [(no_elide(&planned), copies), (planned, elided)] {
            let s = plan.schedule();
            assert_eq!(
                (s.used_streams(), s.events, s.host_waits().count()),
                (want.0, want.1, 1),
                "{stem} {:?}",
                plan.lower_options()
            );
        }
    }
    // At full size, without elision: fewer events than the 255 blocks that have a
    // producer (each waits for at most one neighbour on another stream; some for none).
    // With elision a block reads its two neighbours' kept copies where they are, and
    // each kept copy's free waits for its last reader: more events, no copy in.
    let wave = plan(wavefront(16, 4096));
    let events = no_elide(&wave).schedule().events;
    assert!(events < 255, "{events}");
    assert_eq!(wave.schedule().events, 364);
    assert_eq!(wave.graph().bytes_moved().h2d, 0);
    // The full-size matmul: 256 independent chains of 16 regions, no event without
    // elision.
    let matmul = plan(blocked_matmul(256, 16));
    let s = no_elide(&matmul).schedule().clone();
    assert_eq!((s.used_streams(), s.events), (4, 0));
    // With elision the A and B tiles are copied once and read by 16 chains each: 1059
    // events (at most one per kept tile and reading stream, transitively reduced)
    // instead of 11.25 MiB of 1 KiB copies. (1023 before the colouring's kept placement
    // and the lowering's depend-by-own-op rule; wavefront 337 then.)
    let s = matmul.schedule();
    assert_eq!((s.used_streams(), s.events), (4, 1059));
}
