//! Kernels registered from Rust (`KernelSig::rust(..).body(..)`): run as target-region
//! kernels on the host plugin and as host-task kernels, checked against the reference and
//! by value; generic over the element type; their errors and panics name the kernel; a
//! kernel whose code the plugin cannot run is an error naming it. With the `cuda` feature
//! and a GPU, the same on the CUDA plugin with CUDA C compiled by NVRTC.

mod common;

use common::{exec_error, host, run_checked};
use offload_sched::exec::{ExecError, IssueMode};
use offload_sched::model::{
    Access, Arg, Init, KernelArgs, KernelSig, MapType, ParamKind, ProgramBuilder,
};
use offload_sched::schedule::ScheduleOptions;
use offload_sched::Plan;

const N: u64 = 4096;

/// `y = a*x + y` in f64, as a Rust function.
fn axpy() -> KernelSig {
    KernelSig::rust("axpy_rs")
        .scalar::<f64>()
        .named("a")
        .reads::<f64>()
        .named("x")
        .reads_writes::<f64>()
        .named("y")
        .body(|args: &mut KernelArgs| {
            let a = args.scalar::<f64>(0)?;
            let x = args.input::<f64>(1)?;
            let y = args.output::<f64>(2)?;
            for (y, x) in y.iter_mut().zip(x) {
                *y += a * x;
            }
            Ok(())
        })
}

/// `buf[i] = -buf[i]` for any element type: one generic `inout T*` parameter.
fn negate() -> KernelSig {
    KernelSig::rust("negate")
        .param(ParamKind::Buffer {
            ty: None,
            access: Access::InOut,
        })
        .body(|args: &mut KernelArgs| {
            use offload_sched::model::ElemType;
            match args.ty() {
                ElemType::I32 => args.output::<i32>(0)?.iter_mut().for_each(|v| *v = -*v),
                ElemType::F32 => args.output::<f32>(0)?.iter_mut().for_each(|v| *v = -*v),
                t => return Err(format!("negate takes i32 or f32, not {t}").into()),
            }
            Ok(())
        })
}

#[test]
fn rust_kernels_run_in_target_regions_and_host_tasks() {
    let mut p = ProgramBuilder::new("rust kernels");
    p.kernel(axpy()).kernel(negate());
    let x = p.buf_init::<f64>("x", N, Init::Iota);
    let y = p.buf_init::<f64>("y", N, Init::Fill(1.0));
    let n = p.buf_init::<i32>("n", N, Init::Iota);
    let f = p.buf_init::<f32>("f", N, Init::Fill(0.5));
    // On the device: y = 2x + 1, then negated n and f (two instantiations of negate).
    p.target("axpy", "axpy_rs")
        .num(2.0)
        .arg(x)
        .arg(y)
        .map(MapType::To, x)
        .map(MapType::ToFrom, y)
        .nowait();
    p.target("neg_n", "negate")
        .arg(n)
        .map(MapType::ToFrom, n)
        .nowait();
    p.target("neg_f", "negate")
        .arg(f)
        .map(MapType::ToFrom, f)
        .nowait();
    // On the host, on the results: y = 3x + y = 5x + 1; n negated back.
    let sx = p.sec(x);
    let sy = p.sec(y);
    let sn = p.sec(n);
    p.host_kernel(
        "axpy_host",
        "axpy_rs",
        vec![Arg::Number(3.0), Arg::Buffer(sx), Arg::Buffer(sy)],
    );
    p.host_kernel("neg_host", "negate", vec![Arg::Buffer(sn)]);
    let plan = Plan::new(p.build(), &ScheduleOptions::default()).unwrap();
    let want = plan.reference().unwrap();
    let y_want: Vec<f64> = (0..N).map(|i| 5.0 * i as f64 + 1.0).collect();
    let n_want: Vec<i32> = (0..N as i32).collect();
    assert_eq!(want.as_f64("y").unwrap(), y_want);
    assert_eq!(want.as_i32("n").unwrap(), n_want);
    assert_eq!(want.as_f32("f").unwrap(), vec![-0.5; N as usize]);
    for issue in [IssueMode::Serial, IssueMode::PerStream] {
        for jitter in [None, Some(3)] {
            let what = format!("{issue:?} jitter {jitter:?}");
            let r = run_checked(&what, &plan, &host(1, jitter), issue, &want);
            assert_eq!(r.buffers.as_f64("y").unwrap(), y_want, "{what}");
        }
    }
}

/// A program running `kernel` once in a target region `r` on `x` (64 f32, `tofrom`):
/// `x` is its one argument, or its two when `twice`.
fn one_region(kernel: KernelSig, twice: bool) -> Plan {
    let mut p = ProgramBuilder::new("one");
    let name = kernel.name.clone();
    p.kernel(kernel);
    let x = p.buf_init::<f32>("x", 64, Init::Iota);
    let mut r = p.target("r", &name).arg(x);
    if twice {
        r = r.arg(x);
    }
    drop(r.map(MapType::ToFrom, x));
    Plan::new(p.build(), &ScheduleOptions::default()).unwrap()
}

#[test]
fn a_failing_or_panicking_rust_kernel_stops_the_run_naming_it() {
    let fails = KernelSig::rust("fails")
        .reads_writes::<f32>()
        .body(|_: &mut KernelArgs| Err("no luck".into()));
    let panics = KernelSig::rust("panics")
        .reads_writes::<f32>()
        .body(|_: &mut KernelArgs| panic!("out of ideas"));
    // The same memory as input and output: refused, never two aliasing slices.
    let aliases = KernelSig::rust("aliases")
        .reads::<f32>()
        .writes::<f32>()
        .body(|args: &mut KernelArgs| {
            let x = args.input::<f32>(0)?;
            let y = args.output::<f32>(1)?;
            y.copy_from_slice(x);
            Ok(())
        });
    let cases = [
        (one_region(fails, false), "kernel \"fails\" failed: no luck"),
        (
            one_region(panics, false),
            "kernel \"panics\" panicked: out of ideas",
        ),
        (
            one_region(aliases, true),
            "kernel \"aliases\" failed: parameter 1 (`arg1`) of kernel \"aliases\" overlaps \
             parameter 0 (`arg0`) of kernel \"aliases\", already viewed shared in this call",
        ),
    ];
    for (plan, message) in &cases {
        let e = exec_error(plan.reference().unwrap_err()).to_string();
        assert!(e.contains(message), "reference: {e}");
        for issue in [IssueMode::Serial, IssueMode::PerStream] {
            let plugin = host(1, None);
            let e = exec_error(plan.run_with(&plugin, issue).unwrap_err());
            // Asynchronous on the plugin's stream, as on a GPU: found by the next host
            // wait on that stream, and reported at the kernel's op and region (the host
            // plugin names the failing call; issue 25 point 8), with its message.
            let ExecError::Op { region, what, .. } = &e else {
                panic!("{issue:?}: not at an op: {e}");
            };
            assert_eq!(region, "r", "{issue:?}: {e}");
            assert!(what.starts_with("kernel"), "{issue:?}: {what}");
            let e = e.to_string();
            assert!(e.contains(message), "{issue:?}: {e}");
            assert!(
                e.contains("asynchronous failure on stream"),
                "{issue:?}: {e}"
            );
            assert_eq!(plugin.live_device_allocs(), 0, "{e}");
            assert_eq!(plugin.live_host_allocs(), 0, "{e}");
            // A later run on this plugin fails again with the kernel's own message (the
            // kernel fails again; the first failure was reported once and cleared).
            let e = plan.run_with(&plugin, issue).unwrap_err().to_string();
            assert!(e.contains(message), "{issue:?}, again: {e}");
        }
    }
}

#[test]
fn a_kernel_failure_is_reported_once_and_the_next_run_on_the_plugin_is_clean() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    // Fails on its first call only; adds 1 otherwise.
    let failed = Arc::new(AtomicBool::new(false));
    let seen = failed.clone();
    let flaky =
        KernelSig::rust("flaky")
            .reads_writes::<f32>()
            .body(move |args: &mut KernelArgs| {
                if !seen.swap(true, Ordering::SeqCst) {
                    return Err("first call fails".into());
                }
                for v in args.output::<f32>(0)? {
                    *v += 1.0;
                }
                Ok(())
            });
    let plan = one_region(flaky, false);
    // Also with the host plugin's streams inline (the op runs on the issuing thread): the
    // failure is still reported at the kernel, once.
    let inline = || {
        offload_sched::plugin::host::HostPlugin::new(
            offload_sched::plugin::host::HostPluginOptions {
                inline_streams: true,
                ..Default::default()
            },
        )
    };
    for (issue, plugin) in [
        (IssueMode::Serial, host(1, None)),
        (IssueMode::PerStream, host(1, None)),
        (IssueMode::Serial, inline()),
        (IssueMode::PerStream, inline()),
    ] {
        failed.store(false, Ordering::SeqCst);
        let e = plan.run_with(&plugin, issue).unwrap_err().to_string();
        assert!(e.contains("first call fails"), "{issue:?}: {e}");
        // The same plugin, the next run: no stale error, the right values.
        let r = plan.run_with(&plugin, issue).unwrap();
        let x = r.buffers.as_f32("x").unwrap();
        assert!(
            x.iter().enumerate().all(|(i, &v)| v == i as f32 + 1.0),
            "{issue:?}"
        );
        assert_eq!(plugin.live_device_allocs(), 0);
    }
}

#[test]
fn a_kernel_with_only_cuda_code_is_refused_by_the_host_plugin_naming_it() {
    let src = r#"extern "C" __global__ void scale_cu(float* x, long n) {}"#;
    let k = KernelSig::cuda_source("scale_cu", src)
        .reads_writes::<f32>()
        .build();
    let plan = one_region(k, false);
    let plugin = host(1, None);
    let e = plan.run(&plugin).unwrap_err().to_string();
    assert!(
        e.contains("kernel \"scale_cu\" has no host code (only CUDA code)"),
        "{e}"
    );
    assert_eq!(plugin.live_device_allocs(), 0);
    assert_eq!(plugin.live_host_allocs(), 0);
    let e = plan.reference().unwrap_err().to_string();
    assert!(e.contains("kernel \"scale_cu\" has no host code"), "{e}");
}

#[test]
fn registered_kernels_check_their_calls_like_declared_ones() {
    let mut p = ProgramBuilder::new("bad call");
    p.kernel(axpy());
    let x = p.buf::<f32>("x", 8);
    p.target("r", "axpy_rs")
        .num(1.0)
        .arg(x)
        .arg(x)
        .map(MapType::ToFrom, x);
    let e = Plan::new(p.build(), &ScheduleOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("parameter `x` wants f64 elements, buffer `x` holds f32"),
        "{e}"
    );
}

/// CUDA plugin, when built with the `cuda` feature and a GPU is there: CUDA C registered
/// as text is compiled by NVRTC and runs; a kernel with only a Rust body is refused,
/// naming it.
#[cfg(feature = "cuda")]
#[test]
fn cuda_plugin_runs_registered_cuda_c_and_refuses_rust_only_kernels() {
    use offload_sched::plugin::cuda::{probe, CudaPlugin, CudaPluginOptions};
    if let Err(why) = probe() {
        eprintln!("skipped: no CUDA device ({why})");
        return;
    }
    let plugin = CudaPlugin::new(CudaPluginOptions::default()).unwrap();
    let src = r#"
        extern "C" __global__ void twice_f32(float* x, long long n) {
            long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
            if (i < n) x[i] = 2.0f * x[i];
        }"#;
    let both = KernelSig::cuda_source("twice", src)
        .reads_writes::<f32>()
        .body(|args: &mut KernelArgs| {
            args.output::<f32>(0)?.iter_mut().for_each(|v| *v *= 2.0);
            Ok(())
        });
    let plan = one_region(both, false);
    let want = plan.reference().unwrap();
    assert_eq!(want.as_f32("x").unwrap()[5], 10.0);
    // Compiled once (per process, source and architecture), run many times.
    let x = plan.buffer::<f32>("x").unwrap();
    let mut session = offload_sched::Session::new(&plan, &plugin).unwrap();
    for _ in 0..3 {
        session.run(offload_sched::Bindings::new()).unwrap();
        assert_eq!(Some(session.read(x).unwrap()), want.as_f32("x"));
    }
    drop(session);
    assert_eq!(
        plan.run(&plugin).unwrap().buffers.as_f32("x"),
        want.as_f32("x")
    );
    let rust_only = one_region(negate(), false);
    let e = rust_only.run(&plugin).unwrap_err().to_string();
    assert!(
        e.contains("kernel \"negate\": is a Rust function only"),
        "{e}"
    );
}

/// CUDA plugin graphs, when built with the `cuda` feature and a GPU is there: a diamond
/// (zero y, submit x → saxpy y = 2x + y → retrieve y; retrieve x after the submit; both
/// retrieves after the saxpy's inputs) instantiated, launched, rebound to other pinned
/// buffers with `graph_set_host` and launched again; its edges read back from the driver
/// are exactly the desc's; a cycle, unpinned host memory and a non-copy node are clean
/// errors. With copy-kernel nodes (small copies, the default), memcpy nodes (option off)
/// and large copies (memcpy nodes either way).
#[cfg(feature = "cuda")]
#[test]
fn cuda_plugin_graphs_replay_rebind_and_read_back_their_edges() {
    use offload_sched::model::{builtin_kernel, ElemType, LaunchShape, Scalar};
    use offload_sched::plugin::cuda::{probe, CudaPlugin, CudaPluginOptions};
    use offload_sched::plugin::{
        GraphDesc, GraphNode, HostPtr, LaunchArg, Plugin, PluginCall, PluginError,
    };
    use std::collections::BTreeSet;
    if let Err(why) = probe() {
        eprintln!("skipped: no CUDA device ({why})");
        return;
    }
    fn write(p: HostPtr, v: &[f32]) {
        // SAFETY: `p` is pinned memory of at least `v.len()` floats no stream uses now.
        unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), p.as_ptr() as *mut f32, v.len()) }
    }
    fn read(p: HostPtr, n: usize) -> Vec<f32> {
        let mut v = vec![0f32; n];
        // SAFETY: as above, after a synchronize.
        unsafe { std::ptr::copy_nonoverlapping(p.as_ptr() as *const f32, v.as_mut_ptr(), n) };
        v
    }
    let configs = [
        ("copy kernels", CudaPluginOptions::default(), 4096u64),
        (
            "memcpy nodes",
            CudaPluginOptions {
                graph_copy_kernels: false,
                ..Default::default()
            },
            4096,
        ),
        ("large copies", CudaPluginOptions::default(), 1 << 16),
    ];
    for (name, opts, n) in configs {
        let p = CudaPlugin::new(opts).unwrap();
        let bytes = n * 4;
        let s = p.create_streams(0, 1).unwrap()[0];
        let saxpy = p
            .load_kernel(0, &builtin_kernel("saxpy").unwrap(), ElemType::F32)
            .unwrap();
        let (dx, dy) = (p.alloc(s, bytes).unwrap(), p.alloc(s, bytes).unwrap());
        let h: Vec<HostPtr> = (0..7).map(|_| p.alloc_host(bytes).unwrap()).collect();
        let (hx, hy, hx_back, hx2, hy2, hx2_back, hz) = (h[0], h[1], h[2], h[3], h[4], h[5], h[6]);
        let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let x2: Vec<f32> = (0..n).map(|i| 1000.0 - i as f32).collect();
        write(hx, &x);
        write(hx2, &x2);
        let buf = |ptr, access| LaunchArg::Buffer {
            ptr,
            offset: 0,
            len: n,
            ty: ElemType::F32,
            access,
        };
        use offload_sched::model::Access;
        let desc = GraphDesc {
            device: 0,
            nodes: vec![
                GraphNode::FillZero { ptr: dy, bytes },
                GraphNode::Submit {
                    dst: dx,
                    src: hx,
                    bytes,
                },
                GraphNode::Launch {
                    kernel: saxpy,
                    args: vec![
                        LaunchArg::Scalar(Scalar::F32(2.0)),
                        buf(dx, Access::In),
                        buf(dy, Access::InOut),
                    ],
                    shape: LaunchShape {
                        teams: 16,
                        threads: 128,
                    },
                },
                GraphNode::Retrieve {
                    dst: hx_back,
                    src: dx,
                    bytes,
                },
                GraphNode::Retrieve {
                    dst: hy,
                    src: dy,
                    bytes,
                },
            ],
            edges: vec![(0, 2), (1, 2), (1, 3), (2, 4), (3, 4)],
        };
        assert!(p.info().graphs, "the CUDA plugin has graphs");
        let g = p.graph_instantiate(&desc).unwrap();
        let edges: BTreeSet<_> = p.graph_edges(g).unwrap().into_iter().collect();
        let want: BTreeSet<_> = desc.edges.iter().copied().collect();
        assert_eq!(edges, want, "{name}: edges read back from the driver");

        p.graph_launch(g, s).unwrap();
        p.synchronize(s).unwrap();
        let twice = |v: &[f32]| v.iter().map(|a| 2.0 * a).collect::<Vec<_>>();
        assert_eq!(read(hy, n as usize), twice(&x), "{name}: first launch, y");
        assert_eq!(read(hx_back, n as usize), x, "{name}: first launch, x back");

        // Rebind the submit's source and both retrieves' destinations.
        p.graph_set_host(g, 1, hx2).unwrap();
        p.graph_set_host(g, 3, hx2_back).unwrap();
        p.graph_set_host(g, 4, hy2).unwrap();
        // A small copy held on the stream before the launch must run before it (the
        // graph overwrites dx), and a retrieve after it must see the graph's result.
        write(hz, &vec![-1.0; n as usize]);
        p.submit(s, dx, hz, bytes).unwrap();
        p.graph_launch(g, s).unwrap();
        p.retrieve(s, hz, dx, bytes).unwrap();
        p.synchronize(s).unwrap();
        assert_eq!(read(hy2, n as usize), twice(&x2), "{name}: rebound, y");
        assert_eq!(read(hx2_back, n as usize), x2, "{name}: rebound, x back");
        assert_eq!(
            read(hz, n as usize),
            x2,
            "{name}: stream order around the launch"
        );
        assert_eq!(
            read(hy, n as usize),
            twice(&x),
            "{name}: old buffers untouched"
        );

        // Clean errors; the graph is unchanged by a refused update.
        let unpinned = vec![0f32; n as usize];
        let bad = HostPtr(unpinned.as_ptr() as u64);
        let e = p.graph_set_host(g, 1, bad).unwrap_err();
        assert!(
            matches!(
                e,
                PluginError::InvalidPointer {
                    call: PluginCall::GraphUpdate,
                    ..
                }
            ),
            "{name}: {e}"
        );
        let e = p.graph_set_host(g, 2, hx).unwrap_err();
        assert!(
            matches!(e, PluginError::InvalidHandle { .. }) && e.to_string().contains("not a copy"),
            "{name}: {e}"
        );
        let mut cyclic = desc.clone();
        cyclic.edges.push((4, 1));
        let e = p.graph_instantiate(&cyclic).unwrap_err();
        assert_eq!(e.call(), PluginCall::GraphInstantiate, "{name}: {e}");
        assert!(e.to_string().contains("cycle"), "{name}: {e}");
        let mut unpinned_desc = desc.clone();
        unpinned_desc.nodes[1] = unpinned_desc.nodes[1].with_host(bad);
        let e = p.graph_instantiate(&unpinned_desc).unwrap_err();
        assert!(
            matches!(e, PluginError::InvalidPointer { .. }),
            "{name}: {e}"
        );
        p.graph_launch(g, s).unwrap();
        p.synchronize(s).unwrap();
        assert_eq!(
            read(hy2, n as usize),
            twice(&x2),
            "{name}: after refused updates"
        );

        p.graph_destroy(g).unwrap();
        assert!(
            p.graph_launch(g, s).is_err(),
            "{name}: launch after destroy"
        );
        assert!(p.graph_destroy(g).is_err(), "{name}: destroyed twice");
        // A graph left alive is destroyed with the plugin.
        p.graph_instantiate(&desc).unwrap();
        p.free(s, dx).unwrap();
        p.free(s, dy).unwrap();
        p.synchronize(s).unwrap();
        for b in h {
            p.free_host(b).unwrap();
        }
    }
}
