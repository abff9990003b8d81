//! Host plugin behaviour through the `Plugin` trait: copies, kernels, events across
//! streams under delay jitter, reuse of freed device memory, user shared-library kernels
//! and signature checks.

mod common;

use common::{build_so, host};
use offload_sched::model::Access;
use offload_sched::model::{
    builtin_kernel, ElemType, KernelSig, KernelSource, LaunchShape, Param, ParamKind, Scalar,
};
use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
use offload_sched::plugin::{HostPtr, LaunchArg, Plugin, PluginCall, PluginError};

const SHAPE: LaunchShape = LaunchShape {
    teams: 1,
    threads: 1,
};

/// Loads built-in kernel `name` for f32 on device 0.
fn load(p: &impl Plugin, name: &str) -> offload_sched::plugin::KernelHandle {
    p.load_kernel(0, &builtin_kernel(name).unwrap(), ElemType::F32)
        .unwrap()
}

fn write_f32(p: HostPtr, v: &[f32]) {
    // SAFETY: tests allocate `p` with room for `v` and no stream uses it now.
    unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), p.as_ptr() as *mut f32, v.len()) }
}

fn read_f32(p: HostPtr, n: usize) -> Vec<f32> {
    let mut v = vec![0f32; n];
    // SAFETY: as above, after a synchronize.
    unsafe { std::ptr::copy_nonoverlapping(p.as_ptr() as *const f32, v.as_mut_ptr(), n) };
    v
}

fn buf(ptr: offload_sched::plugin::DevicePtr, len: u64, access: Access) -> LaunchArg {
    LaunchArg::Buffer {
        ptr,
        offset: 0,
        len,
        ty: ElemType::F32,
        access,
    }
}

#[test]
fn h2d_kernel_d2h_round_trip() {
    let p = host(1, None);
    let s = p.create_streams(0, 1).unwrap()[0];
    let n = 1000u64;
    let hx = p.alloc_host(n * 4).unwrap();
    let hy = p.alloc_host(n * 4).unwrap();
    write_f32(hx, &(0..n).map(|i| i as f32).collect::<Vec<_>>());
    write_f32(hy, &vec![1.0; n as usize]);
    let dx = p.alloc(s, n * 4).unwrap();
    let dy = p.alloc(s, n * 4).unwrap();
    p.submit(s, dx, hx, n * 4).unwrap();
    p.submit(s, dy, hy, n * 4).unwrap();
    let k = load(&p, "saxpy");
    let args = [
        LaunchArg::Scalar(Scalar::F32(2.0)),
        buf(dx, n, Access::In),
        buf(dy, n, Access::InOut),
    ];
    p.launch(s, k, &args, SHAPE).unwrap();
    // Device memory is separate: the host copy of y is untouched until the D2H.
    p.synchronize(s).unwrap();
    assert_eq!(read_f32(hy, 3), [1.0, 1.0, 1.0]);
    p.retrieve(s, hy, dy, n * 4).unwrap();
    p.free(s, dx).unwrap();
    p.free(s, dy).unwrap();
    p.synchronize(s).unwrap();
    let y = read_f32(hy, n as usize);
    assert!(y
        .iter()
        .enumerate()
        .all(|(i, v)| *v == 2.0 * i as f32 + 1.0));
    assert_eq!(p.live_device_allocs(), 0);
    // Timings: 2 allocs, 2 h2d, launch, d2h, 2 frees = 8 stream calls numbered 0..8.
    let mut seqs: Vec<u64> = p.drain_timings().iter().map(|t| t.seq).collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (0..8).collect::<Vec<_>>());
    assert_eq!(p.next_seq(s), 8);
    p.free_host(hx).unwrap();
    p.free_host(hy).unwrap();
    assert_eq!(p.live_host_allocs(), 0);
}

#[test]
fn events_order_two_streams_under_jitter() {
    for seed in 0..20 {
        let p = host(1, Some(seed));
        let ss = p.create_streams(0, 2).unwrap();
        let (a, b) = (ss[0], ss[1]);
        let n = 256u64;
        let h = p.alloc_host(n * 4).unwrap();
        let dx = p.alloc(a, n * 4).unwrap();
        let dy = p.alloc(a, n * 4).unwrap();
        let fill = load(&p, "fill");
        let inc = load(&p, "increment");
        let copy = load(&p, "copy");
        // Stream a: x = 5, then x += 1 three times; record e.
        p.launch(
            a,
            fill,
            &[buf(dx, n, Access::Out), LaunchArg::Scalar(Scalar::F32(5.0))],
            SHAPE,
        )
        .unwrap();
        for _ in 0..3 {
            p.launch(a, inc, &[buf(dx, n, Access::InOut)], SHAPE)
                .unwrap();
        }
        let e = p.create_event(0).unwrap();
        p.record_event(a, e).unwrap();
        // Stream b waits for e, then copies x into y and brings y home.
        p.wait_event(b, e).unwrap();
        p.launch(
            b,
            copy,
            &[buf(dx, n, Access::In), buf(dy, n, Access::Out)],
            SHAPE,
        )
        .unwrap();
        p.retrieve(b, h, dy, n * 4).unwrap();
        // Re-recording the (pooled) event after the wait was issued does not affect it.
        p.record_event(b, e).unwrap();
        p.synchronize(b).unwrap();
        assert_eq!(
            read_f32(h, n as usize),
            vec![8.0; n as usize],
            "seed {seed}"
        );
        p.synchronize(a).unwrap();
        p.destroy_event(e).unwrap();
    }
}

#[test]
fn a_host_wait_on_an_event_sees_what_the_record_captured() {
    for seed in 0..10 {
        let p = host(1, Some(seed));
        let s = p.create_streams(0, 1).unwrap()[0];
        let n = 256u64;
        let h = p.alloc_host(n * 4).unwrap();
        let dx = p.alloc(s, n * 4).unwrap();
        let fill = load(&p, "fill");
        let e = p.create_event(0).unwrap();
        // Never recorded: complete at once (cuEventSynchronize).
        p.synchronize_event(e).unwrap();
        p.launch(
            s,
            fill,
            &[buf(dx, n, Access::Out), LaunchArg::Scalar(Scalar::F32(3.0))],
            SHAPE,
        )
        .unwrap();
        p.retrieve(s, h, dx, n * 4).unwrap();
        p.record_event(s, e).unwrap();
        // Work after the record is not waited for (nor does it block the host wait).
        p.launch(
            s,
            fill,
            &[buf(dx, n, Access::Out), LaunchArg::Scalar(Scalar::F32(4.0))],
            SHAPE,
        )
        .unwrap();
        p.synchronize_event(e).unwrap();
        assert_eq!(
            read_f32(h, n as usize),
            vec![3.0; n as usize],
            "seed {seed}"
        );
        p.free(s, dx).unwrap();
        p.synchronize(s).unwrap();
        p.destroy_event(e).unwrap();
        assert_eq!(
            p.synchronize_event(e),
            Err(PluginError::InvalidHandle {
                call: PluginCall::SynchronizeEvent,
                what: format!("{e}"),
            })
        );
        p.free_host(h).unwrap();
    }
}

#[test]
fn missing_wait_gives_a_wrong_answer() {
    // Stream a is busy for 30 ms before it fills x; stream b copies x without waiting, so
    // it sees the zeroed device memory, as a GPU would (or worse).
    let p = host(1, None);
    let ss = p.create_streams(0, 2).unwrap();
    let (a, b) = (ss[0], ss[1]);
    let h = p.alloc_host(16).unwrap();
    let dx = p.alloc(a, 16).unwrap();
    let dy = p.alloc(a, 16).unwrap();
    p.synchronize(a).unwrap();
    let spin = load(&p, "spin");
    let fill = load(&p, "fill");
    let copy = load(&p, "copy");
    p.launch(a, spin, &[LaunchArg::Scalar(Scalar::F64(30_000.0))], SHAPE)
        .unwrap();
    p.launch(
        a,
        fill,
        &[buf(dx, 4, Access::Out), LaunchArg::Scalar(Scalar::F32(7.0))],
        SHAPE,
    )
    .unwrap();
    p.launch(
        b,
        copy,
        &[buf(dx, 4, Access::In), buf(dy, 4, Access::Out)],
        SHAPE,
    )
    .unwrap();
    p.retrieve(b, h, dy, 16).unwrap();
    p.synchronize(b).unwrap();
    assert_eq!(read_f32(h, 4), [0.0; 4]);
    p.synchronize(a).unwrap();
}

#[test]
fn a_free_not_ordered_after_another_streams_use_shows_through_reuse() {
    // Stream b reads x behind a 50 ms spin. Stream a frees x, allocates again (the same
    // block, from a's free list: reuse needs no order between the free and the alloc)
    // and fills the new allocation with 9. Without the event b → a before the free, b's
    // late read sees the 9s instead of x's 7s, as on a GPU; with it, b reads 7s.
    for ordered in [false, true] {
        let p = host(1, None);
        let ss = p.create_streams(0, 2).unwrap();
        let (a, b) = (ss[0], ss[1]);
        let h = p.alloc_host(16).unwrap();
        let y = p.alloc(b, 16).unwrap();
        let x = p.alloc(a, 16).unwrap();
        let spin = load(&p, "spin");
        let fill = load(&p, "fill");
        let copy = load(&p, "copy");
        let fill_with = |d, v| {
            let args = [buf(d, 4, Access::Out), LaunchArg::Scalar(Scalar::F32(v))];
            p.launch(a, fill, &args, SHAPE).unwrap();
        };
        fill_with(x, 7.0);
        let (filled, read) = (p.create_event(0).unwrap(), p.create_event(0).unwrap());
        p.record_event(a, filled).unwrap();
        p.wait_event(b, filled).unwrap();
        p.launch(b, spin, &[LaunchArg::Scalar(Scalar::F64(50_000.0))], SHAPE)
            .unwrap();
        let args = [buf(x, 4, Access::In), buf(y, 4, Access::Out)];
        p.launch(b, copy, &args, SHAPE).unwrap();
        p.retrieve(b, h, y, 16).unwrap();
        p.record_event(b, read).unwrap();
        if ordered {
            p.wait_event(a, read).unwrap();
        }
        p.free(a, x).unwrap();
        let x2 = p.alloc(a, 16).unwrap();
        assert_eq!(x2, x, "the block freed on a is reused on a");
        fill_with(x2, 9.0);
        p.synchronize(b).unwrap();
        let want = if ordered { 7.0 } else { 9.0 };
        assert_eq!(read_f32(h, 4), [want; 4], "ordered: {ordered}");
        p.synchronize(a).unwrap();
        p.free(a, x2).unwrap();
        p.free(b, y).unwrap();
        p.synchronize(a).unwrap();
        p.synchronize(b).unwrap();
        assert_eq!(p.live_device_allocs(), 0);
        assert_eq!(p.device_cache_stats().hits, 1);
    }
}

#[test]
fn bad_pointers_devices_and_handles_are_errors() {
    let p = host(2, None);
    assert_eq!(p.info().devices, 2);
    let s0 = p.create_streams(0, 1).unwrap()[0];
    let s1 = p.create_streams(1, 1).unwrap()[0];
    assert_eq!(
        p.create_streams(0, 1).unwrap(),
        vec![s0],
        "the pool is created once"
    );
    assert!(matches!(
        p.create_streams(2, 1),
        Err(PluginError::NoDevice { device: 2, .. })
    ));
    let h = p.alloc_host(64).unwrap();
    let d = p.alloc(s0, 64).unwrap();
    // Past the end of the allocation.
    let e = p.submit(s0, d.offset(8), h, 64).unwrap_err();
    assert_eq!(e.call(), PluginCall::Submit);
    assert!(matches!(
        e,
        PluginError::InvalidPointer {
            space: "device",
            ..
        }
    ));
    // Device 0 memory is not addressable from device 1's stream.
    assert!(p.submit(s1, d, h, 64).is_err());
    // A freed address cannot be used by later calls.
    p.free(s0, d).unwrap();
    let e = p.retrieve(s0, h, d, 4).unwrap_err();
    assert_eq!(e.call(), PluginCall::Retrieve);
    assert!(p.free(s0, d).is_err());
    let ev = p.create_event(0).unwrap();
    assert!(matches!(
        p.record_event(s1, ev),
        Err(PluginError::InvalidHandle { .. })
    ));
    p.destroy_event(ev).unwrap();
    assert!(p.destroy_event(ev).is_err());
    // Waiting on a never-recorded event is a no-op.
    let ev2 = p.create_event(0).unwrap();
    p.wait_event(s0, ev2).unwrap();
    p.synchronize(s0).unwrap();
    p.free_host(h).unwrap();
    assert!(p.free_host(h).is_err());
}

#[test]
fn dropping_the_plugin_finishes_work_and_joins_workers() {
    let p = host(1, Some(3));
    let ss = p.create_streams(0, 4).unwrap();
    let spin = load(&p, "spin");
    for s in &ss {
        let d = p.alloc(*s, 1024).unwrap();
        p.launch(*s, spin, &[LaunchArg::Scalar(Scalar::F64(2000.0))], SHAPE)
            .unwrap();
        p.free(*s, d).unwrap();
    }
    let t = std::time::Instant::now();
    drop(p);
    // Every worker ran its 2 ms spin before exiting.
    assert!(t.elapsed().as_micros() >= 2000);
}

const USER_LIB: &str = r#"
#include <stdint.h>
void axpb_f64(double a, const double* x, int64_t nx, double* y, int64_t ny, double b) {
    int64_t n = nx < ny ? nx : ny;
    for (int64_t i = 0; i < n; i++) y[i] = a * x[i] + b;
}
"#;

fn axpb_sig(library: String) -> KernelSig {
    let p = |name: &str, k: &str| Param {
        name: name.into(),
        kind: ParamKind::parse(k).unwrap(),
    };
    KernelSig {
        name: "axpb".into(),
        params: vec![
            p("a", "f64"),
            p("x", "in f64*"),
            p("y", "out f64*"),
            p("b", "f64"),
        ],
        source: KernelSource::User {
            library: Some(library),
            cuda: None,
            symbol: "axpb_f64".into(),
        },
    }
}

#[test]
fn user_shared_library_kernel_and_signature_check() {
    let dir = tempfile::tempdir().unwrap();
    let so = build_so(dir.path(), "axpb", USER_LIB).expect("a C compiler (cc) is needed");
    // Relative paths resolve against the library dir (the graph file's folder).
    let p = HostPlugin::new(HostPluginOptions {
        library_dir: Some(dir.path().to_path_buf()),
        ..HostPluginOptions::default()
    });
    let s = p.create_streams(0, 1).unwrap()[0];
    let sig = axpb_sig("libaxpb.so".into());
    let k = p.load_kernel(0, &sig, ElemType::F64).unwrap();
    assert_eq!(
        p.load_kernel(0, &sig, ElemType::F64).unwrap(),
        k,
        "loaded once"
    );
    let n = 8u64;
    let h = p.alloc_host(n * 8).unwrap();
    let dx = p.alloc(s, n * 8).unwrap();
    let dy = p.alloc(s, n * 8).unwrap();
    let xs: Vec<f64> = (0..n).map(|i| i as f64).collect();
    // SAFETY: `h` holds n f64.
    unsafe { std::ptr::copy_nonoverlapping(xs.as_ptr(), h.as_ptr() as *mut f64, n as usize) };
    p.submit(s, dx, h, n * 8).unwrap();
    let f64buf = |ptr, access| LaunchArg::Buffer {
        ptr,
        offset: 0,
        len: n,
        ty: ElemType::F64,
        access,
    };
    let args = [
        LaunchArg::Scalar(Scalar::F64(3.0)),
        f64buf(dx, Access::In),
        f64buf(dy, Access::Out),
        LaunchArg::Scalar(Scalar::F64(0.5)),
    ];
    p.launch(s, k, &args, SHAPE).unwrap();
    p.retrieve(s, h, dy, n * 8).unwrap();
    p.synchronize(s).unwrap();
    let mut ys = vec![0f64; n as usize];
    // SAFETY: synchronized; `h` holds n f64.
    unsafe { std::ptr::copy_nonoverlapping(h.as_ptr() as *const f64, ys.as_mut_ptr(), n as usize) };
    assert_eq!(ys, xs.iter().map(|x| 3.0 * x + 0.5).collect::<Vec<_>>());

    // A mismatching argument type is rejected before anything runs.
    let mut bad = args;
    bad[0] = LaunchArg::Scalar(Scalar::F32(3.0));
    let e = p.launch(s, k, &bad, SHAPE).unwrap_err();
    assert!(matches!(e, PluginError::Signature { .. }), "{e}");
    assert!(e.to_string().contains("\"a\" is declared f64"), "{e}");
    // Too few arguments, and an f32 buffer for an f64 parameter.
    assert!(p.launch(s, k, &args[..3], SHAPE).is_err());
    let mut bad = args;
    bad[1] = LaunchArg::Buffer {
        ptr: dx,
        offset: 0,
        len: n,
        ty: ElemType::F32,
        access: Access::In,
    };
    let e = p.launch(s, k, &bad, SHAPE).unwrap_err();
    assert!(e.to_string().contains("given a f32 buffer"), "{e}");
    assert_eq!(p.next_seq(s), 5, "rejected launches enqueue nothing");

    // Missing symbol / library.
    let mut missing = axpb_sig(so.display().to_string());
    missing.source = KernelSource::User {
        library: Some(so.display().to_string()),
        cuda: None,
        symbol: "nope".into(),
    };
    let e = p.load_kernel(0, &missing, ElemType::F64).unwrap_err();
    assert!(matches!(e, PluginError::KernelLoad { .. }), "{e}");
    let e = p
        .load_kernel(0, &axpb_sig("/nonexistent/libx.so".into()), ElemType::F64)
        .unwrap_err();
    assert!(e.to_string().contains("cannot load library"), "{e}");
}

/// A plan from a graph file loads a target region's user kernel from the file's folder
/// even on a plugin given no library folder: the executor resolves the relative path
/// with the plan's kernel folder before the plugin sees it.
#[test]
fn plan_from_file_finds_its_user_library_on_a_default_plugin() {
    let dir = tempfile::tempdir().unwrap();
    build_so(dir.path(), "axpb", USER_LIB).expect("a C compiler (cc) is needed");
    let graph = dir.path().join("g.toml");
    std::fs::write(
        &graph,
        r#"name = "user"
[[kernel]]
name = "axpb"
params = ["a: f64", "x: in f64*", "y: out f64*", "b: f64"]
library = "libaxpb.so"
symbol = "axpb_f64"

[[buffer]]
name = "x"
type = "f64"
len = 8
init = "iota"

[[buffer]]
name = "y"
type = "f64"
len = 8
init = "zeros"

[[body]]
target = "r"
kernel = "axpb"
args = [3.0, "x", "y", 0.5]
map = ["to: x", "from: y"]
"#,
    )
    .unwrap();
    let plan = offload_sched::Plan::from_file(&graph, &Default::default())
        .unwrap_or_else(|e| panic!("{}", e.render()));
    let want: Vec<f64> = (0..8).map(|i| 3.0 * i as f64 + 0.5).collect();
    assert_eq!(plan.reference().unwrap().as_f64("y").unwrap(), &want[..]);
    let report = plan
        .run(&HostPlugin::new(HostPluginOptions::default()))
        .unwrap_or_else(|e| panic!("{}", e.render()));
    assert_eq!(report.buffers.as_f64("y").unwrap(), &want[..]);
}
