//! The library tile kernels (`gemm`, `syrk`, `trsm`, `potrf`; model::library) on the host
//! plugin and the reference interpreter (the system OpenBLAS): every kernel against a
//! naive column-major reference on small tiles with leading dimensions larger than the
//! rows, f32 and f64, every transpose / side / triangle / diagonal combination; the host
//! plugin equal to the reference bit for bit; shape, leading-dimension and flag errors
//! located (graph file line:column, region name); a non-SPD `potrf` names LAPACK's info
//! (and the region, in the reference interpreter);
//! a plugin without library kernels is refused before anything runs.

mod common;

use common::library::{nan_potrf, not_spd, not_spd_message, shift_diagonal};
use common::{exec_error, host, run_checked};
use offload_sched::exec::{BufferData, IssueMode};
use offload_sched::model::{
    Diag, ElemType, Init, LibraryCall, MapType, ProgramBuilder, Sel, Side, Trans, Uplo,
};
use offload_sched::schedule::ScheduleOptions;
use offload_sched::Plan;

/// Element `(i, j)` of a column-major matrix with leading dimension `ld`.
fn at(ld: usize, i: usize, j: usize) -> usize {
    i + j * ld
}

/// `op(X)(i, j)` of a column-major `x` with leading dimension `ld`.
fn op(x: &[f64], ld: usize, t: Trans, i: usize, j: usize) -> f64 {
    match t {
        Trans::N => x[at(ld, i, j)],
        Trans::T => x[at(ld, j, i)],
    }
}

fn values(d: &BufferData) -> Vec<f64> {
    (0..d.len()).map(|i| d.get_f64(i).unwrap()).collect()
}

/// The program's initial buffer `name` as f64.
fn initial(plan: &Plan, name: &str) -> Vec<f64> {
    let b = plan
        .program()
        .buffers
        .iter()
        .find(|b| b.name == name)
        .unwrap();
    values(&BufferData::init(b))
}

/// The buffers of `plan` after the reference interpreter, checked equal to the host
/// plugin's (serial and per-stream issue, delay jitter), as f64.
fn run(what: &str, plan: &Plan, name: &str) -> Vec<f64> {
    let want = plan
        .reference()
        .unwrap_or_else(|e| panic!("{what}: reference: {}", e.render()));
    for issue in [IssueMode::Serial, IssueMode::PerStream] {
        run_checked(what, plan, &host(1, Some(7)), issue, &want);
    }
    values(want.get(name).unwrap())
}

/// Asserts `got` equals `want` to within `tol` relative to the largest magnitude.
fn close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}");
    let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * scale,
            "{what}: element {i}: got {g}, want {w}"
        );
    }
}

fn tol(ty: ElemType) -> f64 {
    if ty == ElemType::F32 {
        1e-5
    } else {
        1e-13
    }
}

/// One region calling `call` with every buffer mapped tofrom.
fn one(
    name: &str,
    bufs: &[(&str, u64, Init)],
    ty: ElemType,
    call: impl Fn(&[Sel]) -> LibraryCall,
) -> Plan {
    let mut p = ProgramBuilder::new(name);
    let ids: Vec<Sel> = bufs
        .iter()
        .map(|(n, len, init)| Sel::Whole(p.buffer(n, ty, *len, init.clone())))
        .collect();
    let mut r = p.library(name, call(&ids));
    for s in &ids {
        r = r.map(MapType::ToFrom, *s);
    }
    drop(r);
    Plan::new(p.build(), &ScheduleOptions::default()).unwrap()
}

#[test]
fn gemm_every_transpose_pair_matches_the_naive_product() {
    let (m, n, k) = (5usize, 4usize, 3usize);
    for ty in [ElemType::F32, ElemType::F64] {
        for ta in [Trans::N, Trans::T] {
            for tb in [Trans::N, Trans::T] {
                let (ar, ac) = if ta == Trans::N { (m, k) } else { (k, m) };
                let (br, bc) = if tb == Trans::N { (k, n) } else { (n, k) };
                let (lda, ldb, ldc) = (ar + 2, br + 1, m + 3);
                let what = format!("gemm {ta:?}{tb:?} {ty}");
                let plan = one(
                    "gemm",
                    &[
                        ("a", (lda * ac) as u64, Init::Random(1)),
                        ("b", (ldb * bc) as u64, Init::Random(2)),
                        ("c", (ldc * n) as u64, Init::Random(3)),
                    ],
                    ty,
                    |s| LibraryCall::Gemm {
                        transa: ta,
                        transb: tb,
                        m: m as u64,
                        n: n as u64,
                        k: k as u64,
                        alpha: 1.5,
                        a: s[0],
                        lda: lda as u64,
                        b: s[1],
                        ldb: ldb as u64,
                        beta: -0.5,
                        c: s[2],
                        ldc: ldc as u64,
                    },
                );
                let (a, b, c0) = (
                    initial(&plan, "a"),
                    initial(&plan, "b"),
                    initial(&plan, "c"),
                );
                let mut want = c0.clone();
                for i in 0..m {
                    for j in 0..n {
                        let dot: f64 = (0..k)
                            .map(|l| op(&a, lda, ta, i, l) * op(&b, ldb, tb, l, j))
                            .sum();
                        want[at(ldc, i, j)] = 1.5 * dot - 0.5 * c0[at(ldc, i, j)];
                    }
                }
                // Rows m..ldc of each column are padding: untouched.
                close(&what, &run(&what, &plan, "c"), &want, tol(ty));
            }
        }
    }
}

#[test]
fn syrk_both_triangles_and_transposes_touch_only_their_triangle() {
    let (n, k) = (4usize, 3usize);
    for ty in [ElemType::F32, ElemType::F64] {
        for uplo in [Uplo::Lower, Uplo::Upper] {
            for trans in [Trans::N, Trans::T] {
                let (ar, ac) = if trans == Trans::N { (n, k) } else { (k, n) };
                let (lda, ldc) = (ar + 1, n + 2);
                let what = format!("syrk {uplo:?} {trans:?} {ty}");
                let plan = one(
                    "syrk",
                    &[
                        ("a", (lda * ac) as u64, Init::Random(4)),
                        ("c", (ldc * n) as u64, Init::Random(5)),
                    ],
                    ty,
                    |s| LibraryCall::Syrk {
                        uplo,
                        trans,
                        n: n as u64,
                        k: k as u64,
                        alpha: -1.0,
                        a: s[0],
                        lda: lda as u64,
                        beta: 2.0,
                        c: s[1],
                        ldc: ldc as u64,
                    },
                );
                let (a, c0) = (initial(&plan, "a"), initial(&plan, "c"));
                let mut want = c0.clone();
                for i in 0..n {
                    for j in 0..n {
                        let in_tri = match uplo {
                            Uplo::Lower => i >= j,
                            Uplo::Upper => i <= j,
                        };
                        if !in_tri {
                            continue;
                        }
                        // op(A)·op(A)ᵀ with op(A) n×k.
                        let dot: f64 = (0..k)
                            .map(|l| op(&a, lda, trans, i, l) * op(&a, lda, trans, j, l))
                            .sum();
                        want[at(ldc, i, j)] = -dot + 2.0 * c0[at(ldc, i, j)];
                    }
                }
                close(&what, &run(&what, &plan, "c"), &want, tol(ty));
            }
        }
    }
}

#[test]
fn trsm_every_side_triangle_transpose_and_diagonal_solves() {
    let (m, n) = (4usize, 3usize);
    for ty in [ElemType::F32, ElemType::F64] {
        for side in [Side::Left, Side::Right] {
            for uplo in [Uplo::Lower, Uplo::Upper] {
                for transa in [Trans::N, Trans::T] {
                    for diag in [Diag::NonUnit, Diag::Unit] {
                        let ka = if side == Side::Left { m } else { n };
                        let (lda, ldb) = (ka + 1, m + 2);
                        let what = format!("trsm {side:?} {uplo:?} {transa:?} {diag:?} {ty}");
                        let plan = trsm_plan(ty, side, uplo, transa, diag, m, n, lda, ldb);
                        let (a0, b0) = (initial(&plan, "a"), initial(&plan, "b"));
                        // The triangular matrix as the kernel sees it: the `uplo`
                        // triangle, the diagonal +ka (see trsm_plan) or 1 when unit.
                        let tri = |i: usize, j: usize| -> f64 {
                            let in_tri = match uplo {
                                Uplo::Lower => i >= j,
                                Uplo::Upper => i <= j,
                            };
                            if i == j {
                                if diag == Diag::Unit {
                                    1.0
                                } else {
                                    a0[at(lda, i, i)] + ka as f64
                                }
                            } else if in_tri {
                                a0[at(lda, i, j)]
                            } else {
                                0.0
                            }
                        };
                        let opa = |i: usize, j: usize| match transa {
                            Trans::N => tri(i, j),
                            Trans::T => tri(j, i),
                        };
                        let x = run(&what, &plan, "b");
                        // Check op(A)·X = α·B (left) or X·op(A) = α·B (right), α = 2.
                        let mut prod = b0.clone();
                        for i in 0..m {
                            for j in 0..n {
                                prod[at(ldb, i, j)] = match side {
                                    Side::Left => {
                                        (0..m).map(|l| opa(i, l) * x[at(ldb, l, j)]).sum()
                                    }
                                    Side::Right => {
                                        (0..n).map(|l| x[at(ldb, i, l)] * opa(l, j)).sum()
                                    }
                                };
                            }
                        }
                        let mut want = b0.clone();
                        for j in 0..n {
                            for i in 0..m {
                                want[at(ldb, i, j)] *= 2.0;
                            }
                        }
                        close(&what, &prod, &want, 100.0 * tol(ty));
                        // Padding rows of B untouched.
                        for j in 0..n {
                            for i in m..ldb {
                                assert_eq!(x[at(ldb, i, j)], b0[at(ldb, i, j)], "{what}");
                            }
                        }
                    }
                }
            }
        }
    }
}

/// `B ← 2·op(A)⁻¹·B` (or `2·B·op(A)⁻¹`) with `A` random plus `ka` on its diagonal (well
/// conditioned), the diagonal shift made by a first `gemm` region that views the diagonal
/// as a 1×ka matrix with leading dimension `lda + 1`.
#[allow(clippy::too_many_arguments)]
fn trsm_plan(
    ty: ElemType,
    side: Side,
    uplo: Uplo,
    transa: Trans,
    diag: Diag,
    m: usize,
    n: usize,
    lda: usize,
    ldb: usize,
) -> Plan {
    let ka = if side == Side::Left { m } else { n };
    let mut p = ProgramBuilder::new("trsm");
    let a = p.buffer("a", ty, (lda * ka) as u64, Init::Random(6));
    let b = p.buffer("b", ty, (ldb * n) as u64, Init::Random(7));
    let ones = p.buffer("ones", ty, ka as u64, Init::Fill(1.0));
    shift_diagonal(&mut p, a, ones, ka as u64, lda as u64, ka as f64);
    p.library(
        "trsm",
        LibraryCall::Trsm {
            side,
            uplo,
            transa,
            diag,
            m: m as u64,
            n: n as u64,
            alpha: 2.0,
            a: Sel::Whole(a),
            lda: lda as u64,
            b: Sel::Whole(b),
            ldb: ldb as u64,
        },
    )
    .map(MapType::To, a)
    .map(MapType::ToFrom, b);
    Plan::new(p.build(), &ScheduleOptions::default()).unwrap()
}

#[test]
fn potrf_both_triangles_factor_and_leave_the_other_triangle() {
    let n = 5usize;
    let lda = n + 2;
    for ty in [ElemType::F32, ElemType::F64] {
        for uplo in [Uplo::Lower, Uplo::Upper] {
            let what = format!("potrf {uplo:?} {ty}");
            let mut p = ProgramBuilder::new("potrf");
            let a = p.buffer("a", ty, (lda * n) as u64, Init::Random(8));
            let ones = p.buffer("ones", ty, n as u64, Init::Fill(1.0));
            shift_diagonal(&mut p, a, ones, n as u64, lda as u64, n as f64);
            p.library(
                "potrf",
                LibraryCall::Potrf {
                    uplo,
                    n: n as u64,
                    a: Sel::Whole(a),
                    lda: lda as u64,
                },
            )
            .map(MapType::ToFrom, a);
            let plan = Plan::new(p.build(), &ScheduleOptions::default()).unwrap();
            let a0 = initial(&plan, "a");
            let f = run(&what, &plan, "a");
            // The symmetric matrix of the `uplo` triangle (diagonal shifted by n).
            let sym = |i: usize, j: usize| {
                let (r, c) = match uplo {
                    Uplo::Lower => (i.max(j), i.min(j)),
                    Uplo::Upper => (i.min(j), i.max(j)),
                };
                a0[at(lda, r, c)] + if i == j { n as f64 } else { 0.0 }
            };
            // The factor: L (lower) or U (upper) from the triangle written.
            let fac = |i: usize, j: usize| -> f64 {
                let keep = match uplo {
                    Uplo::Lower => i >= j,
                    Uplo::Upper => i <= j,
                };
                if keep {
                    f[at(lda, i, j)]
                } else {
                    0.0
                }
            };
            let (mut got, mut want) = (Vec::new(), Vec::new());
            for i in 0..n {
                for j in 0..n {
                    let v: f64 = (0..n)
                        .map(|l| match uplo {
                            Uplo::Lower => fac(i, l) * fac(j, l),
                            Uplo::Upper => fac(l, i) * fac(l, j),
                        })
                        .sum();
                    got.push(v);
                    want.push(sym(i, j));
                    let other = match uplo {
                        Uplo::Lower => i < j,
                        Uplo::Upper => i > j,
                    };
                    if other {
                        assert_eq!(f[at(lda, i, j)], a0[at(lda, i, j)], "{what}: ({i},{j})");
                    }
                }
            }
            close(&what, &got, &want, 10.0 * tol(ty));
        }
    }
}

/// The reference interpreter (the `--check` baseline) and host tasks name the region and
/// LAPACK's info. On a plugin stream the failure is asynchronous (contract rule 5): the
/// next host wait reports it naming the kernel, LAPACK's info and the stream, not yet the
/// region (the executor has no map from a stream failure to its op).
#[test]
fn a_matrix_that_is_not_positive_definite_fails_with_lapacks_info() {
    // diag(1, 1, -1, 1): the leading minor of order 3 is not positive definite.
    for ty in [ElemType::F32, ElemType::F64] {
        let plan = not_spd(ty);
        let lapack = not_spd_message(ty);
        let e = exec_error(plan.reference().unwrap_err()).to_string();
        assert!(e.contains("region \"factor\""), "reference: {e}");
        assert!(e.contains(&lapack), "reference: {e}");
        for issue in [IssueMode::Serial, IssueMode::PerStream] {
            let plugin = host(1, None);
            let e = plan.run_with(&plugin, issue).unwrap_err().to_string();
            assert!(e.contains(&lapack), "{issue:?}: {e}");
            assert!(e.contains("kernel \"potrf\" failed"), "{issue:?}: {e}");
            // Asynchronous on the plugin's stream, reported at the failing op and its
            // region (the host plugin names the failing call).
            assert!(e.contains("in region \"factor\""), "{issue:?}: {e}");
            assert_eq!(plugin.live_device_allocs(), 0, "{e}");
        }
    }
}

/// A graph file of one `potrf`/`gemm` region on 4×4 tiles with `args` and `kernel`.
fn graph(kernel: &str, args: &str) -> String {
    format!(
        "name = \"t\"\n\
         [[buffer]]\nname = \"A\"\ntype = \"f64\"\nlen = 16\ninit = \"zeros\"\n\
         [[buffer]]\nname = \"B\"\ntype = \"f64\"\nlen = 16\ninit = \"zeros\"\n\
         [[body]]\ntarget = \"r\"\nkernel = \"{kernel}\"\nargs = {args}\nmap = [\"tofrom: A\", \"to: B\"]\n"
    )
}

fn file_error(kernel: &str, args: &str) -> String {
    use offload_sched::file::SourceFile;
    let src = SourceFile::new("t.toml", graph(kernel, args));
    match Plan::from_source(src, &ScheduleOptions::default()) {
        Ok(_) => panic!("{kernel} {args}: accepted"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn graph_file_shape_flag_and_leading_dimension_errors_are_located() {
    let ok = graph("potrf", "[\"L\", 4, \"A\", 4]");
    let src = offload_sched::file::SourceFile::new("t.toml", ok);
    Plan::from_source(src, &ScheduleOptions::default()).unwrap();
    let cases = [
        // Each at the argument it is about. The section is shorter than the 4×4 tile
        // with lda 4.
        (
            "potrf",
            "[\"L\", 4, \"A[0:12]\", 4]",
            "t.toml:15:17: kernel `potrf` in target \"r\": tile `a` is 4×4 with lda 4: it needs 16 elements, the section has 12",
        ),
        // lda below the rows.
        (
            "potrf",
            "[\"L\", 4, \"A\", 3]",
            "t.toml:15:22: kernel `potrf` in target \"r\": `lda` = 3 is less than max(1, rows of `a`) = 4",
        ),
        // gemm: op(B) = Bᵀ is k×n = 4×2, so B is 2×4 stored, ldb 1 < 2.
        (
            "gemm",
            "[\"N\", \"T\", 4, 2, 4, 1.0, \"B\", 4, \"B[0:8]\", 1, 0.0, \"A\", 4]",
            "t.toml:15:51: kernel `gemm` in target \"r\": `ldb` = 1 is less than max(1, rows of `b`) = 2",
        ),
        // The written tile overlaps a read one.
        (
            "gemm",
            "[\"N\", \"N\", 2, 2, 2, 1.0, \"A[0:4]\", 2, \"B[0:4]\", 2, 0.0, \"A[2:4]\", 2]",
            "t.toml:15:64: kernel `gemm` in target \"r\": writes tile `c`, which overlaps tile `a` of the same call",
        ),
    ];
    for (kernel, args, want) in cases {
        let e = file_error(kernel, args);
        assert!(e.starts_with("t.toml:"), "{args}: {e}");
        assert!(e.contains(want), "{args}: {e}");
    }
    // A flag that is not one of its kind's names: at the argument.
    let e = file_error("potrf", "[\"lower\", 4, \"A\", 4]");
    assert!(
        e.starts_with("t.toml:15:9:")
            && e.contains("argument 1 (`uplo`, the triangle) of kernel `potrf`")
            && e.contains("must be \"L\" or \"U\""),
        "{e}"
    );
    let e = file_error(
        "trsm",
        "[\"L\", \"L\", \"N\", \"N\", 4, 4, 1.0, \"B\", 4, \"A\", 4]",
    );
    assert!(
        e.contains("(`side`, the side)") && e.contains("\"left\" or \"right\""),
        "{e}"
    );
    // A number where a flag goes.
    let e = file_error("potrf", "[76, 4, \"A\", 4]");
    assert!(e.contains("must be \"L\" or \"U\""), "{e}");
    // Element types: i32 tiles.
    let text = graph("potrf", "[\"L\", 4, \"A\", 4]").replacen("f64", "i32", 2);
    let src = offload_sched::file::SourceFile::new("t.toml", text);
    let e = Plan::from_source(src, &ScheduleOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("takes f32 or f64 tiles, got i32"), "{e}");
}

#[test]
fn builder_shape_errors_name_the_region() {
    let mut p = ProgramBuilder::new("b");
    let a = p.buffer("a", ElemType::F32, 30, Init::Zeros);
    p.library(
        "too_short",
        LibraryCall::Syrk {
            uplo: Uplo::Lower,
            trans: Trans::T,
            n: 5,
            k: 6,
            alpha: 1.0,
            a: Sel::Part(offload_sched::model::Section::new(a, 0, 29)),
            lda: 6,
            beta: 0.0,
            c: Sel::Part(offload_sched::model::Section::new(a, 0, 0)),
            ldc: 5,
        },
    )
    .map(MapType::ToFrom, a);
    let e = Plan::new(p.build(), &ScheduleOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert_eq!(
        e,
        "b: region \"too_short\": kernel `syrk` tile `a` (trans = T) is 6×5 with lda 6: it needs 30 elements, the section has 29"
    );
}

#[test]
fn a_plugin_without_library_kernels_is_refused_before_anything_runs() {
    use offload_sched::plugin::layer::{Hooks, Layered};
    use offload_sched::plugin::{Plugin, PluginCall, PluginError, PluginInfo};
    use std::sync::atomic::{AtomicUsize, Ordering};
    /// Lists no library kernels; counts the calls that reach it.
    struct NoLibrary(AtomicUsize);
    impl Hooks for NoLibrary {
        fn info(&self, inner: PluginInfo) -> PluginInfo {
            let mut info = inner.wrapped("nolib");
            info.library_kernels.clear();
            info
        }
        fn before(&self, _: PluginCall) -> Result<(), PluginError> {
            self.0.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
    }
    let src =
        offload_sched::file::SourceFile::new("t.toml", graph("potrf", "[\"L\", 4, \"A\", 4]"));
    let plan = Plan::from_source(src, &ScheduleOptions::default()).unwrap();
    let inner = host(1, None);
    let plugin = Layered::wrap(&inner as &dyn Plugin, NoLibrary(AtomicUsize::new(0)));
    let e = plan.run(&plugin).unwrap_err().to_string();
    assert!(
        e.contains("in region \"r\" calls library kernel `potrf`; the nolib(host) plugin does not run it (its library kernels: none)"),
        "{e}"
    );
    assert_eq!(
        plugin.hooks().0.load(Ordering::Relaxed),
        0,
        "nothing reached the plugin"
    );
}

/// Finding s12-1: LAPACK's blocked `dpotrf` call of `dtrsm` on two tiles of one 8×8
/// matrix (lda 8), `a = A(0:4, 0:4)` at 0 and `b = A(4:8, 0:4)` at 4: their address
/// ranges overlap, their elements do not. Runs on the host plugin (and the reference)
/// and matches a naive solve of `X·Aᵀ = B`.
#[test]
fn trsm_on_disjoint_tiles_of_one_matrix_runs_and_solves() {
    let text = "name = \"trsm_lda_disjoint\"\n\
        [[buffer]]\nname = \"A\"\ntype = \"f64\"\nlen = 64\ninit = { random = 5 }\n\
        [[body]]\ntarget = \"t\"\nkernel = \"trsm\"\n\
        args = [\"right\", \"L\", \"T\", \"N\", 4, 4, 1, \"A[0:28]\", 8, \"A[4:28]\", 8]\n\
        map = [\"tofrom: A\"]\n";
    let src = offload_sched::file::SourceFile::new("trsm_lda_disjoint.toml", text);
    let plan =
        Plan::from_source(src, &ScheduleOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let a0 = initial(&plan, "A");
    let l = |i: usize, j: usize| a0[at(8, i, j)];
    for i in 0..4 {
        assert!(l(i, i).abs() > 1e-3, "seed 5 gives a usable diagonal");
    }
    let mut want = a0.clone();
    // Row r of X: A(0:4,0:4)·xᵀ = bᵀ, forward substitution (A lower, non-unit).
    for r in 0..4 {
        let mut x = [0.0f64; 4];
        for j in 0..4 {
            let s: f64 = (0..j).map(|k| l(j, k) * x[k]).sum();
            x[j] = (a0[at(8, 4 + r, j)] - s) / l(j, j);
            want[at(8, 4 + r, j)] = x[j];
        }
    }
    let got = run("trsm disjoint", &plan, "A");
    close("trsm disjoint", &got, &want, 1e-12);
    assert_ne!(got, a0, "the solve changed b");
}

/// Finding s12-4: OpenBLAS's `potrf` returns info 0 on a NaN matrix; the host plugin and
/// the reference check the factor's diagonal. The identity with a NaN at A(2, 1) (off the
/// diagonal): L(2, 1) = NaN, so L(2, 2) is the first NaN on the diagonal.
#[test]
fn a_nan_in_the_matrix_fails_potrf_at_the_first_nan_on_the_diagonal() {
    for ty in [ElemType::F32, ElemType::F64] {
        let plan = nan_potrf(ty);
        let prefix = if ty == ElemType::F32 { 's' } else { 'd' };
        let want = format!(
            "{prefix}potrf: the matrix is not positive definite (NaN on the diagonal of the \
             factor at index 2; reference LAPACK returns info = 3)"
        );
        let e = exec_error(plan.reference().unwrap_err()).to_string();
        assert!(
            e.contains("region \"factor\"") && e.contains(&want),
            "reference: {e}"
        );
        let plugin = host(1, None);
        let e = plan
            .run_with(&plugin, IssueMode::Serial)
            .unwrap_err()
            .to_string();
        assert!(e.contains(&want), "{e}");
        assert!(e.contains("in region \"factor\""), "{e}");
    }
    // The tester's all-NaN matrix: the first diagonal element.
    let text =
        graph("potrf", "[\"L\", 4, \"A\", 4]").replace("init = \"zeros\"", "init = { fill = nan }");
    let src = offload_sched::file::SourceFile::new("t.toml", text);
    let plan = Plan::from_source(src, &ScheduleOptions::default()).unwrap();
    let e = plan
        .run_with(&host(1, None), IssueMode::Serial)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("NaN on the diagonal of the factor at index 0"),
        "{e}"
    );
}
