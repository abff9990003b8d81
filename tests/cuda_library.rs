//! The library tile kernels (`gemm`, `syrk`, `trsm`, `potrf`, `getrf`) on the CUDA plugin (cuBLAS and
//! cuSOLVER) against the host plugin's results (OpenBLAS) on small tiles with leading
//! dimensions larger than the rows, f32 and f64, every transpose / side / triangle /
//! diagonal combination; each program also replayed as CUDA graphs (the calls captured into
//! child graph nodes) and compared bit for bit with stream issue; a tiled Cholesky on four
//! streams under every policy, live and replayed, and a tiled LU (no pivoting) checked by its
//! residual, and a tiled Cholesky with its panel at `priority(1)` on the high-priority
//! stream (`cuStreamCreateWithPriority`); a non-SPD `potrf` reported with LAPACK's info, live (at its region) and
//! replayed; a NaN factor of `potrf` and a zero or NaN pivot of `getrf` reported as the
//! host plugin reports them (the diagonal check of `offload_solver_info`). Run on the GPU machine by `benches/gpu/run.sh linalg`; skips,
//! saying so, without a CUDA driver (and fails where a GPU answers but cuBLAS or cuSOLVER
//! do not load: the plugin then lists no library kernels).

#![cfg(feature = "cuda")]

mod common;

use common::library::{
    getrf_plan, nan_potrf, not_spd, not_spd_message, read_all, shift_diagonal, singular,
    singular_message,
};

use offload_sched::exec::{BufferData, Buffers, IssueMode};
use offload_sched::model::{
    Diag, ElemType, Init, LibraryCall, MapType, ProgramBuilder, Sel, Side, Trans, Uplo,
};
use offload_sched::plugin::cuda::{probe, CudaPlugin, CudaPluginOptions};
use offload_sched::plugin::Plugin;
use offload_sched::schedule::{ScheduleOptions, SyncPolicy};
use offload_sched::{Bindings, Plan, Session};

/// The CUDA plugin, or `None` (and a message) where no CUDA driver or device answers.
fn cuda() -> Option<CudaPlugin> {
    if let Err(why) = probe() {
        eprintln!("skipping the CUDA library-kernel tests: no CUDA driver or device ({why})");
        return None;
    }
    let p = CudaPlugin::new(CudaPluginOptions::default()).expect("CUDA plugin");
    let names = p.info().library_kernels;
    assert_eq!(
        names.len(),
        5,
        "a GPU answers but the CUDA plugin lists library kernels {names:?}: cuBLAS or cuSOLVER did not load"
    );
    Some(p)
}

fn values(d: &BufferData) -> Vec<f64> {
    (0..d.len()).map(|i| d.get_f64(i).unwrap()).collect()
}

fn tol(ty: ElemType) -> f64 {
    if ty == ElemType::F32 {
        2e-5
    } else {
        1e-12
    }
}

/// Every buffer of `got` within `tol` (relative to the buffer's largest magnitude) of
/// `want`.
fn close(what: &str, got: &Buffers, want: &Buffers, tol: f64) {
    for (name, w) in want.iter() {
        let g = got
            .get(name)
            .unwrap_or_else(|| panic!("{what}: no buffer {name}"));
        let (g, w) = (values(g), values(w));
        assert_eq!(g.len(), w.len(), "{what}: {name}");
        let scale = w.iter().fold(1.0f64, |m, v| m.max(v.abs()));
        for (i, (a, b)) in g.iter().zip(&w).enumerate() {
            assert!(
                (a - b).abs() <= tol * scale,
                "{what}: {name}[{i}]: cuda {a}, host {b}"
            );
        }
    }
}

fn bytes(plan: &Plan, b: &Buffers) -> Vec<(String, Vec<u8>)> {
    plan.program()
        .buffers
        .iter()
        .map(|x| (x.name.clone(), b.get(&x.name).unwrap().to_ne_bytes()))
        .collect()
}

/// `plan` on the CUDA plugin with stream issue, against the host plugin within `tol`;
/// then replayed by a session, twice, bit for bit equal to stream issue.
fn check(what: &str, plan: &Plan, gpu: &CudaPlugin, tol: f64) {
    let host = common::host(1, None);
    let want = plan
        .run(&host)
        .unwrap_or_else(|e| panic!("{what}: host: {}", e.render()))
        .buffers;
    let live = plan
        .run(gpu)
        .unwrap_or_else(|e| panic!("{what}: cuda: {}", e.render()))
        .buffers;
    close(what, &live, &want, tol);
    let eager = bytes(plan, &live);
    let mut s = Session::new(plan, gpu).unwrap().with_replay(true);
    for run in 0..2 {
        let r = s
            .run(Bindings::new())
            .unwrap_or_else(|e| panic!("{what}: replayed run {run}: {}", e.render()));
        assert!(r.replay.is_some(), "{what}: run {run} was not replayed");
        assert!(
            read_all(plan, &s) == eager,
            "{what}: replayed run {run} differs from stream issue"
        );
    }
}

fn plan_of(p: ProgramBuilder) -> Plan {
    Plan::new(p.build(), &ScheduleOptions::default()).unwrap()
}

#[test]
fn gemm_and_syrk_match_the_host_plugin_and_replay_bit_for_bit() {
    let Some(gpu) = cuda() else { return };
    let (m, n, k) = (37u64, 29u64, 23u64);
    for ty in [ElemType::F32, ElemType::F64] {
        for ta in [Trans::N, Trans::T] {
            for tb in [Trans::N, Trans::T] {
                let (ar, ac) = if ta == Trans::N { (m, k) } else { (k, m) };
                let (br, bc) = if tb == Trans::N { (k, n) } else { (n, k) };
                let (lda, ldb, ldc) = (ar + 2, br + 1, m + 3);
                let mut p = ProgramBuilder::new("gemm");
                let a = p.buffer("a", ty, lda * ac, Init::Random(1));
                let b = p.buffer("b", ty, ldb * bc, Init::Random(2));
                let c = p.buffer("c", ty, ldc * n, Init::Random(3));
                p.library(
                    "gemm",
                    LibraryCall::Gemm {
                        transa: ta,
                        transb: tb,
                        m,
                        n,
                        k,
                        alpha: 1.5,
                        a: Sel::Whole(a),
                        lda,
                        b: Sel::Whole(b),
                        ldb,
                        beta: -0.5,
                        c: Sel::Whole(c),
                        ldc,
                    },
                )
                .map(MapType::To, a)
                .map(MapType::To, b)
                .map(MapType::ToFrom, c);
                check(
                    &format!("gemm {ta:?}{tb:?} {ty}"),
                    &plan_of(p),
                    &gpu,
                    tol(ty),
                );
            }
        }
        for uplo in [Uplo::Lower, Uplo::Upper] {
            for trans in [Trans::N, Trans::T] {
                let (n, k) = (31u64, 17u64);
                let (ar, ac) = if trans == Trans::N { (n, k) } else { (k, n) };
                let (lda, ldc) = (ar + 1, n + 2);
                let mut p = ProgramBuilder::new("syrk");
                let a = p.buffer("a", ty, lda * ac, Init::Random(4));
                let c = p.buffer("c", ty, ldc * n, Init::Random(5));
                p.library(
                    "syrk",
                    LibraryCall::Syrk {
                        uplo,
                        trans,
                        n,
                        k,
                        alpha: -1.0,
                        a: Sel::Whole(a),
                        lda,
                        beta: 2.0,
                        c: Sel::Whole(c),
                        ldc,
                    },
                )
                .map(MapType::To, a)
                .map(MapType::ToFrom, c);
                check(
                    &format!("syrk {uplo:?} {trans:?} {ty}"),
                    &plan_of(p),
                    &gpu,
                    tol(ty),
                );
            }
        }
    }
}

#[test]
fn trsm_and_potrf_match_the_host_plugin_and_replay_bit_for_bit() {
    let Some(gpu) = cuda() else { return };
    let (m, n) = (19u64, 13u64);
    for ty in [ElemType::F32, ElemType::F64] {
        for side in [Side::Left, Side::Right] {
            for uplo in [Uplo::Lower, Uplo::Upper] {
                for transa in [Trans::N, Trans::T] {
                    for diag in [Diag::NonUnit, Diag::Unit] {
                        let ka = if side == Side::Left { m } else { n };
                        let (lda, ldb) = (ka + 1, m + 2);
                        let mut p = ProgramBuilder::new("trsm");
                        let a = p.buffer("a", ty, lda * ka, Init::Random(6));
                        let b = p.buffer("b", ty, ldb * n, Init::Random(7));
                        let ones = p.buffer("ones", ty, ka, Init::Fill(1.0));
                        shift_diagonal(&mut p, a, ones, ka, lda, ka as f64);
                        p.library(
                            "trsm",
                            LibraryCall::Trsm {
                                side,
                                uplo,
                                transa,
                                diag,
                                m,
                                n,
                                alpha: 2.0,
                                a: Sel::Whole(a),
                                lda,
                                b: Sel::Whole(b),
                                ldb,
                            },
                        )
                        .map(MapType::To, a)
                        .map(MapType::ToFrom, b);
                        let what = format!("trsm {side:?} {uplo:?} {transa:?} {diag:?} {ty}");
                        check(&what, &plan_of(p), &gpu, 100.0 * tol(ty));
                    }
                }
            }
        }
        for uplo in [Uplo::Lower, Uplo::Upper] {
            let (n, lda) = (33u64, 35u64);
            let mut p = ProgramBuilder::new("potrf");
            let a = p.buffer("a", ty, lda * n, Init::Random(8));
            let ones = p.buffer("ones", ty, n, Init::Fill(1.0));
            shift_diagonal(&mut p, a, ones, n, lda, n as f64);
            p.library(
                "potrf",
                LibraryCall::Potrf {
                    uplo,
                    n,
                    a: Sel::Whole(a),
                    lda,
                },
            )
            .map(MapType::ToFrom, a);
            check(
                &format!("potrf {uplo:?} {ty}"),
                &plan_of(p),
                &gpu,
                100.0 * tol(ty),
            );
        }
    }
}

/// Right-looking tiled Cholesky (lower) of an `nb × nb` matrix of `t × t` tiles, one
/// buffer per tile of the lower triangle (diagonal shifted by `nb·t`: SPD), a region per
/// tile call (StarPU's `cholesky_implicit` order).
fn tiled_cholesky(ty: ElemType, nb: usize, t: u64) -> ProgramBuilder {
    let mut p = ProgramBuilder::new("tiled cholesky");
    let mut tile = vec![vec![None; nb]; nb];
    for (i, row) in tile.iter_mut().enumerate() {
        for (j, slot) in row.iter_mut().enumerate().take(i + 1) {
            *slot = Some(p.buffer(
                &format!("a{i}{j}"),
                ty,
                t * t,
                Init::Random((i * nb + j) as u64),
            ));
        }
    }
    let a = |i: usize, j: usize| tile[i][j].expect("lower tile");
    let ones = p.buffer("ones", ty, t, Init::Fill(1.0));
    for i in 0..nb {
        shift_diagonal(&mut p, a(i, i), ones, t, t, (nb as u64 * t) as f64);
    }
    for k in 0..nb {
        p.library(
            &format!("potrf{k}"),
            LibraryCall::Potrf {
                uplo: Uplo::Lower,
                n: t,
                a: Sel::Whole(a(k, k)),
                lda: t,
            },
        )
        .map(MapType::ToFrom, a(k, k));
        for i in k + 1..nb {
            p.library(
                &format!("trsm{i}{k}"),
                LibraryCall::Trsm {
                    side: Side::Right,
                    uplo: Uplo::Lower,
                    transa: Trans::T,
                    diag: Diag::NonUnit,
                    m: t,
                    n: t,
                    alpha: 1.0,
                    a: Sel::Whole(a(k, k)),
                    lda: t,
                    b: Sel::Whole(a(i, k)),
                    ldb: t,
                },
            )
            .map(MapType::To, a(k, k))
            .map(MapType::ToFrom, a(i, k));
        }
        for i in k + 1..nb {
            p.library(
                &format!("syrk{i}{k}"),
                LibraryCall::Syrk {
                    uplo: Uplo::Lower,
                    trans: Trans::N,
                    n: t,
                    k: t,
                    alpha: -1.0,
                    a: Sel::Whole(a(i, k)),
                    lda: t,
                    beta: 1.0,
                    c: Sel::Whole(a(i, i)),
                    ldc: t,
                },
            )
            .map(MapType::To, a(i, k))
            .map(MapType::ToFrom, a(i, i));
            for j in k + 1..i {
                p.library(
                    &format!("gemm{i}{j}{k}"),
                    LibraryCall::Gemm {
                        transa: Trans::N,
                        transb: Trans::T,
                        m: t,
                        n: t,
                        k: t,
                        alpha: -1.0,
                        a: Sel::Whole(a(i, k)),
                        lda: t,
                        b: Sel::Whole(a(j, k)),
                        ldb: t,
                        beta: 1.0,
                        c: Sel::Whole(a(i, j)),
                        ldc: t,
                    },
                )
                .map(MapType::To, a(i, k))
                .map(MapType::To, a(j, k))
                .map(MapType::ToFrom, a(i, j));
            }
        }
    }
    p
}

#[test]
fn a_tiled_cholesky_on_four_streams_matches_live_and_replayed_under_every_policy() {
    let Some(gpu) = cuda() else { return };
    for ty in [ElemType::F32, ElemType::F64] {
        for policy in SyncPolicy::ALL {
            for random in [None, Some(3)] {
                let opts = ScheduleOptions {
                    policy,
                    streams_per_device: 4,
                    random_streams: random,
                    ..ScheduleOptions::default()
                };
                let plan = Plan::new(tiled_cholesky(ty, 4, 48).build(), &opts).unwrap();
                let what = format!("tiled cholesky {ty} {policy} random {random:?}");
                check(&what, &plan, &gpu, 1000.0 * tol(ty));
            }
        }
    }
}

/// Live, the failure is reported at the failing op and its region, under both issue modes
/// and with the plugin timing its work or not (the plugin names the `potrf`'s stream call
/// either way); replayed, at the host wait that found it (a captured call names no stream
/// call), with LAPACK's info all the same.
#[test]
fn a_matrix_that_is_not_positive_definite_names_lapacks_info_live_and_replayed() {
    let Some(gpu) = cuda() else { return };
    let timed = CudaPlugin::new(CudaPluginOptions {
        timing: true,
        ..CudaPluginOptions::default()
    })
    .expect("CUDA plugin with timing");
    for ty in [ElemType::F32, ElemType::F64] {
        let plan = not_spd(ty);
        let lapack = format!("kernel \"potrf\" failed: {}", not_spd_message(ty));
        for (plugin, timing) in [(&gpu, "untimed"), (&timed, "timed")] {
            for issue in [IssueMode::Serial, IssueMode::PerStream] {
                let e = plan.run_with(plugin, issue).unwrap_err().render();
                assert!(e.contains(&lapack), "live, {timing}, {issue:?}: {e}");
                assert!(
                    e.contains("in region \"factor\""),
                    "live, {timing}, {issue:?}: {e}"
                );
            }
        }
        // A second run of the session reports the same op (the plugin's call numbers go
        // on across runs; the executor starts from them).
        let mut s = Session::new(&plan, &gpu).unwrap();
        for run in 0..2 {
            let e = s.run(Bindings::new()).unwrap_err().render();
            assert!(e.contains("in region \"factor\""), "session run {run}: {e}");
        }
        let mut s = Session::new(&plan, &gpu).unwrap().with_replay(true);
        let e = s.run(Bindings::new()).unwrap_err().render();
        assert!(e.contains(&lapack), "replayed: {e}");
        // Reported once: the plugin runs a good program afterwards.
        let good = plan_of(tiled_cholesky(ty, 2, 8));
        good.run(&gpu)
            .unwrap_or_else(|e| panic!("after the failure: {}", e.render()));
    }
}

/// `getrf` (no pivoting) of square, tall and wide tiles with leading dimensions over the
/// rows, diagonally dominant, against the host plugin, live and replayed.
#[test]
fn getrf_matches_the_host_plugin_and_replays_bit_for_bit() {
    let Some(gpu) = cuda() else { return };
    for ty in [ElemType::F32, ElemType::F64] {
        for (m, n, lda) in [(37u64, 37u64, 40u64), (45, 21, 47), (6, 20, 9)] {
            let what = format!("getrf {m}×{n} lda {lda} {ty}");
            check(
                &what,
                &getrf_plan(ty, (m, n, lda), 5),
                &gpu,
                100.0 * tol(ty),
            );
        }
    }
}

/// model::tiled_lu (4×4 tiles of 48, both data styles) on four streams under every
/// policy, live and replayed, its scaled residual below the bound.
#[test]
fn a_tiled_lu_on_four_streams_factors_live_and_replayed_under_every_policy() {
    use offload_sched::model::residual::{lu_residual, shifted_matrix, RESIDUAL_BOUND};
    use offload_sched::model::{tiled_lu, DataStyle, MatrixInit, Tiling};
    let Some(gpu) = cuda() else { return };
    let (n, tile) = (192u64, 48u64);
    for ty in [ElemType::F32, ElemType::F64] {
        for style in [DataStyle::Entered, DataStyle::Mapped] {
            let program = tiled_lu(&Tiling {
                n,
                tile,
                ty,
                style,
                init: MatrixInit::Random(2),
            });
            let buf = program.buffers.iter().find(|b| b.name == "A").unwrap();
            let a = shifted_matrix(&values(&BufferData::init(buf)), n as usize, tile as usize);
            for policy in SyncPolicy::ALL {
                let opts = ScheduleOptions {
                    policy,
                    streams_per_device: 4,
                    random_streams: Some(3),
                    ..ScheduleOptions::default()
                };
                let plan = Plan::new(program.clone(), &opts).unwrap();
                let what = format!("{} {policy}", program.name);
                check(&what, &plan, &gpu, 1000.0 * tol(ty));
                let got = plan.run(&gpu).unwrap().buffers;
                let r = lu_residual(&a, &values(got.get("A").unwrap()), 192, 48, ty);
                assert!(r < RESIDUAL_BOUND, "{what}: residual {r}");
            }
        }
    }
}

/// The diagonal check on CUDA: a NaN off the diagonal of `potrf`'s matrix reaches the
/// factor's diagonal (cuSOLVER's info stays 0) and a zero or NaN pivot stops `getrf`,
/// with the host plugin's words, live at the region and replayed.
#[test]
fn a_nan_factor_and_a_zero_or_nan_pivot_fail_as_on_the_host_live_and_replayed() {
    let Some(gpu) = cuda() else { return };
    for ty in [ElemType::F32, ElemType::F64] {
        let prefix = if ty == ElemType::F32 { 's' } else { 'd' };
        // cuSOLVER 13 on the H200 stops at the NaN pivot itself (info = 3, run 22); where
        // its info stays 0, the plugin's diagonal check says the host plugin's words,
        // with the same info. Either way: an error at the region with info = 3.
        let nan =
            format!("kernel \"potrf\" failed: {prefix}potrf: the matrix is not positive definite");
        let cases = [
            (nan_potrf(ty), nan),
            (singular(ty, false), singular_message(ty, false)),
            (singular(ty, true), singular_message(ty, true)),
        ];
        for (plan, want) in cases {
            for issue in [IssueMode::Serial, IssueMode::PerStream] {
                let e = plan.run_with(&gpu, issue).unwrap_err().render();
                assert!(e.contains(&want), "live, {issue:?}: {e}");
                assert!(e.contains("info = 3"), "live, {issue:?}: {e}");
                assert!(e.contains("in region \"factor\""), "live, {issue:?}: {e}");
            }
            let mut s = Session::new(&plan, &gpu).unwrap().with_replay(true);
            let e = s.run(Bindings::new()).unwrap_err().render();
            assert!(e.contains(&want), "replayed: {e}");
        }
        let good = plan_of(tiled_cholesky(ty, 2, 8));
        good.run(&gpu)
            .unwrap_or_else(|e| panic!("after the failures: {}", e.render()));
    }
}

/// OpenMP `priority(n)` on CUDA: the high-priority pool (`cuStreamCreateWithPriority`)
/// never shares a stream with the default pool and gives the same streams again; a
/// tiled Cholesky whose panel runs on the high-priority stream matches the host plugin
/// and factors (residual), live and replayed, under every policy.
#[test]
fn a_tiled_cholesky_with_a_priority_panel_factors_live_and_replayed() {
    use offload_sched::model::residual::{cholesky_residual, shifted_matrix, RESIDUAL_BOUND};
    use offload_sched::model::{tiled_cholesky_priority, DataStyle, MatrixInit, Tiling};
    let Some(gpu) = cuda() else { return };
    let pool = gpu.create_streams(0, 4).unwrap();
    let high = gpu.create_priority_streams(0, 2).unwrap();
    assert!(high.iter().all(|h| !pool.contains(h)), "{pool:?} {high:?}");
    assert_eq!(gpu.create_priority_streams(0, 1).unwrap(), high[..1]);
    let (n, tile, ty) = (192u64, 48u64, ElemType::F64);
    for lookahead in [0, 1] {
        let t = Tiling {
            n,
            tile,
            ty,
            style: DataStyle::Entered,
            init: MatrixInit::Random(2),
        };
        let program = tiled_cholesky_priority(&t, lookahead, 1);
        let buf = program.buffers.iter().find(|b| b.name == "A").unwrap();
        let a = shifted_matrix(&values(&BufferData::init(buf)), n as usize, tile as usize);
        for policy in SyncPolicy::ALL {
            let opts = ScheduleOptions {
                policy,
                streams_per_device: 4,
                ..ScheduleOptions::default()
            };
            let plan = Plan::new(program.clone(), &opts).unwrap();
            assert!(plan.schedule().streams[4].high_priority);
            let what = format!("{} {policy}", program.name);
            check(&what, &plan, &gpu, 1000.0 * tol(ty));
            let got = plan.run(&gpu).unwrap().buffers;
            let r = cholesky_residual(&a, &values(got.get("A").unwrap()), 192, 48, ty);
            assert!(r < RESIDUAL_BOUND, "{what}: residual {r}");
        }
    }
}
