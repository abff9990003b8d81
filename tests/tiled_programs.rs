//! Tiled Cholesky, LU (no pivoting) and GEMM as programs of library tile kernels (model::tiled): built in
//! both data styles (matrix entered once, per-task maps), run on the host plugin under
//! every synchronization policy with delay jitter and random streams, in both issue
//! modes, checked by the scaled residual (model::residual) and against the reference
//! interpreter; graphs/ holds the small ones as graph files (regenerated with
//! `UPDATE_GRAPHS=1`); the small Cholesky's schedule is a snapshot.

mod common;

use common::{host, run_checked};
use offload_sched::exec::{BufferData, IssueMode};
use offload_sched::lower::OpKind;
use offload_sched::model::residual::{
    cholesky_residual, gemm_residual, lu_residual, shifted_matrix, RESIDUAL_BOUND,
};
use offload_sched::model::{
    tiled_cholesky, tiled_cholesky_lookahead, tiled_gemm, tiled_lu, tiled_lu_lookahead,
    try_tiled_cholesky, try_tiled_lu, try_tiled_lu_lookahead, Construct, DataStyle, ElemType,
    MatrixInit, Program, Tiling, TilingError,
};
use offload_sched::schedule::{ScheduleOptions, SyncPolicy};
use offload_sched::Plan;

fn values(d: &BufferData) -> Vec<f64> {
    (0..d.len()).map(|i| d.get_f64(i).unwrap()).collect()
}

fn initial(p: &Program, name: &str) -> Vec<f64> {
    values(&BufferData::init(
        p.buffers.iter().find(|b| b.name == name).unwrap(),
    ))
}

fn tiling(n: u64, tile: u64, ty: ElemType, style: DataStyle) -> Tiling {
    Tiling {
        n,
        tile,
        ty,
        style,
        init: MatrixInit::Random(3),
    }
}

/// Every policy × (fixed streams, random streams) × issue mode, with delay jitter: runs
/// equal to the reference; returns the reference's buffers.
fn run_everywhere(what: &str, program: &Program) -> offload_sched::exec::Buffers {
    let mut want = None;
    for policy in SyncPolicy::ALL {
        for (s, random) in [None, Some(11u64)].into_iter().enumerate() {
            let options = ScheduleOptions {
                policy,
                streams_per_device: 3,
                random_streams: random,
                ..ScheduleOptions::default()
            };
            let plan = Plan::new(program.clone(), &options)
                .unwrap_or_else(|e| panic!("{what}: {}", e.render()));
            let want = want.get_or_insert_with(|| plan.reference().unwrap());
            for issue in [IssueMode::Serial, IssueMode::PerStream] {
                let label = format!("{what} {policy:?} random={random:?} {issue:?}");
                run_checked(&label, &plan, &host(1, Some(5 + s as u64)), issue, want);
            }
        }
    }
    want.expect("at least one policy")
}

#[test]
fn tiled_cholesky_in_both_styles_factors_under_every_policy() {
    for ty in [ElemType::F32, ElemType::F64] {
        for style in [DataStyle::Entered, DataStyle::Mapped] {
            let (n, tile) = (24u64, 6u64);
            let p = tiled_cholesky(&tiling(n, tile, ty, style));
            let what = p.name.clone();
            let got = run_everywhere(&what, &p);
            let a = shifted_matrix(&initial(&p, "A"), n as usize, tile as usize);
            let l = values(got.get("A").unwrap());
            let r = cholesky_residual(&a, &l, n as usize, tile as usize, ty);
            assert!(r < RESIDUAL_BOUND, "{what}: residual {r}");
            // A wrong factor is caught: one element of tile (1, 0) of L off by 0.1.
            let mut wrong = l.clone();
            let off = (tile * tile) as usize; // tile (1, 0)
            wrong[off] += 0.1;
            let bad = cholesky_residual(&a, &wrong, n as usize, tile as usize, ty);
            assert!(bad > RESIDUAL_BOUND, "{what}: perturbed residual {bad}");
        }
    }
}

#[test]
fn tiled_lu_in_both_styles_factors_under_every_policy() {
    for ty in [ElemType::F32, ElemType::F64] {
        for style in [DataStyle::Entered, DataStyle::Mapped] {
            let (n, tile) = (24u64, 6u64);
            let p = tiled_lu(&tiling(n, tile, ty, style));
            let what = p.name.clone();
            let got = run_everywhere(&what, &p);
            let a = shifted_matrix(&initial(&p, "A"), n as usize, tile as usize);
            let lu = values(got.get("A").unwrap());
            let r = lu_residual(&a, &lu, n as usize, tile as usize, ty);
            assert!(r < RESIDUAL_BOUND, "{what}: residual {r}");
            // A wrong factor is caught: one element of U in tile (0, 1) off by 0.1.
            let mut wrong = lu.clone();
            wrong[(n / tile * tile * tile) as usize] += 0.1;
            let bad = lu_residual(&a, &wrong, n as usize, tile as usize, ty);
            assert!(bad > RESIDUAL_BOUND, "{what}: perturbed residual {bad}");
        }
    }
}

#[test]
fn tiled_gemm_in_both_styles_multiplies_under_every_policy() {
    for ty in [ElemType::F32, ElemType::F64] {
        for style in [DataStyle::Entered, DataStyle::Mapped] {
            let (n, tile) = (16u64, 8u64);
            let p = tiled_gemm(&tiling(n, tile, ty, style));
            let what = p.name.clone();
            let got = run_everywhere(&what, &p);
            let (a, b) = (initial(&p, "A"), initial(&p, "B"));
            let c = values(got.get("C").unwrap());
            let r = gemm_residual(&a, &b, &c, n as usize, tile as usize, ty);
            assert!(r < RESIDUAL_BOUND, "{what}: residual {r}");
            let mut wrong = c.clone();
            wrong[5] += 1e-2;
            let bad = gemm_residual(&a, &b, &wrong, n as usize, tile as usize, ty);
            assert!(bad > RESIDUAL_BOUND, "{what}: perturbed residual {bad}");
        }
    }
}

#[test]
fn tiled_programs_have_the_expected_regions_and_data_motion() {
    let t = tiling(12, 3, ElemType::F64, DataStyle::Entered);
    let p = tiled_cholesky(&t);
    let names: Vec<String> = p
        .body
        .iter()
        .filter_map(|c| match c {
            Construct::Target(r) if !r.name.starts_with("shift_") => Some(r.name.clone()),
            _ => None,
        })
        .collect();
    // nt = 4: 4 potrf, 6 trsm, 6 syrk, 4 gemm.
    let count = |k: &str| names.iter().filter(|n| n.starts_with(k)).count();
    assert_eq!(
        [
            count("potrf_"),
            count("trsm_"),
            count("syrk_"),
            count("gemm_")
        ],
        [4, 6, 6, 4]
    );
    assert_eq!(names.first().map(String::as_str), Some("potrf_0"));
    // Entered: one H2D of A and one D2H (plus the ones vector's H2D); mapped: per tile.
    let plan = Plan::new(p, &ScheduleOptions::default()).unwrap();
    let copies = |plan: &Plan| {
        let g = plan.graph();
        let count = |f: fn(&OpKind) -> bool| g.op_ids().filter(|&o| f(&g.op(o).kind)).count();
        (
            count(|k| matches!(k, OpKind::H2D { .. })),
            count(|k| matches!(k, OpKind::D2H { .. })),
        )
    };
    assert_eq!(copies(&plan), (2, 1));
    let mapped = Plan::new(
        tiled_cholesky(&Tiling {
            style: DataStyle::Mapped,
            ..t
        }),
        &ScheduleOptions::default(),
    )
    .unwrap();
    let (h2d, d2h) = copies(&mapped);
    assert!(h2d > 2 && d2h > 1, "mapped: {h2d} H2D, {d2h} D2H");
}

/// The region edges of `p`'s lowered graph, by region name.
fn region_edges(p: &Program) -> std::collections::BTreeSet<(String, String)> {
    let plan = Plan::new(p.clone(), &ScheduleOptions::default()).unwrap();
    let g = plan.graph();
    let name = |o| g.regions[g.op(o).region.0 as usize].name.clone();
    g.op_ids()
        .flat_map(|o| g.preds(o).iter().map(move |&p| (p, o)))
        .map(|(p, o)| (name(p), name(o)))
        .filter(|(a, b)| a != b)
        .collect()
}

/// The names of `p`'s target regions in program order.
fn region_order(p: &Program) -> Vec<String> {
    p.body
        .iter()
        .filter_map(|c| match c {
            Construct::Target(r) => Some(r.name.clone()),
            _ => None,
        })
        .collect()
}

/// Look-ahead reorders the program (panel k + 1 ahead of step k's other updates) and
/// keeps the dependences; the factors stay within the residual bound.
#[test]
fn lookahead_moves_the_next_panel_forward_and_keeps_the_task_graph() {
    let t = tiling(30, 6, ElemType::F64, DataStyle::Entered);
    for (base, la1, la2) in [
        (
            tiled_cholesky(&t),
            tiled_cholesky_lookahead(&t, 1),
            tiled_cholesky_lookahead(&t, 2),
        ),
        (
            tiled_lu(&t),
            tiled_lu_lookahead(&t, 1),
            tiled_lu_lookahead(&t, 2),
        ),
    ] {
        let what = base.name.clone();
        let lu = what.starts_with("lu");
        let first = if lu { "getrf_1" } else { "potrf_1" };
        let pos = |p: &Program, r: &str| region_order(p).iter().position(|n| n == r).unwrap();
        // Step 0's update of tile (4, 3) feeds panel 3: after panel 1 with look-ahead 1
        // and 2, before it in the written order.
        assert!(pos(&base, first) > pos(&base, "gemm_4_3_0"), "{what}");
        assert!(pos(&la1, first) < pos(&la1, "gemm_4_3_0"), "{what} la1");
        assert!(pos(&la2, first) < pos(&la2, "gemm_4_3_0"), "{what} la2");
        // The update of tile (2, 1) feeds panel 1 and stays ahead of it.
        let feed = "gemm_2_1_0";
        assert!(pos(&la1, first) > pos(&la1, feed), "{what} la1");
        // Look-ahead 2 keeps step 0's update of column 2 ahead of panel 1; 1 does not.
        let col2 = "gemm_3_2_0";
        assert!(pos(&la2, first) > pos(&la2, col2), "{what} la2");
        assert!(pos(&la1, first) < pos(&la1, col2), "{what} la1");
        assert_eq!(region_edges(&base), region_edges(&la1), "{what} la1");
        assert_eq!(region_edges(&base), region_edges(&la2), "{what} la2");
        assert_eq!(la1.name, format!("{what}_la1"));
        let got = run_everywhere(&la1.name, &la1);
        let a = shifted_matrix(&initial(&la1, "A"), 30, 6);
        let f = values(got.get("A").unwrap());
        let r = match lu {
            true => lu_residual(&a, &f, 30, 6, ElemType::F64),
            false => cholesky_residual(&a, &f, 30, 6, ElemType::F64),
        };
        assert!(r < RESIDUAL_BOUND, "{what} la1: residual {r}");
    }
}

/// (file stem, header comment, program) of each tiled program in graphs/.
fn graph_files() -> Vec<(&'static str, &'static str, Program)> {
    let t = |n, tile, ty, style| Tiling {
        n,
        tile,
        ty,
        style,
        init: MatrixInit::Random(1),
    };
    vec![
        (
            "cholesky_entered",
            "# tiled_cholesky(n 12, tile 4, f64, entered): right-looking tiled Cholesky of a 3x3-tile\n\
             # SPD matrix (model::tiled): A entered once, regions present; shift_k makes A SPD.\n",
            tiled_cholesky(&t(12, 4, ElemType::F64, DataStyle::Entered)),
        ),
        (
            "cholesky_mapped",
            "# tiled_cholesky(n 12, tile 4, f64, mapped): the same factorization with per-region\n\
             # map(to:) / map(tofrom:) of each region's tiles, as OpenMP tasks write it.\n",
            tiled_cholesky(&t(12, 4, ElemType::F64, DataStyle::Mapped)),
        ),
        (
            "lu_entered",
            "# tiled_lu(n 12, tile 4, f64, entered): right-looking tiled LU without pivoting of a\n\
             # 3x3-tile diagonally dominant matrix (model::tiled_lu), as StarPU's lu_implicit.\n",
            tiled_lu(&t(12, 4, ElemType::F64, DataStyle::Entered)),
        ),
        (
            "lu_mapped",
            "# tiled_lu(n 12, tile 4, f64, mapped): the same LU with per-region map(to:) /\n\
             # map(tofrom:) of each region's tiles.\n",
            tiled_lu(&t(12, 4, ElemType::F64, DataStyle::Mapped)),
        ),
        (
            "gemm_tiled",
            "# tiled_gemm(n 8, tile 4, f32, mapped): C = A B on 2x2 tiles, a chain of gemm regions\n\
             # per C tile (model::tiled).\n",
            tiled_gemm(&t(8, 4, ElemType::F32, DataStyle::Mapped)),
        ),
    ]
}

#[test]
fn graph_files_are_the_generators_output_and_factor() {
    for (stem, header, program) in graph_files() {
        let path = common::graph_path(&format!("{stem}.toml"));
        let text = format!(
            "{header}# Generated: UPDATE_GRAPHS=1 cargo test --release --test tiled_programs\n{}",
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
        // The file's plan computes what the residual accepts.
        let plan = common::plan(&format!("{stem}.toml"));
        let want = plan.reference().unwrap();
        let got = run_checked(stem, &plan, &host(1, Some(9)), IssueMode::Serial, &want);
        let r = if stem.starts_with("cholesky") || stem.starts_with("lu") {
            let a = shifted_matrix(&initial(&program, "A"), 12, 4);
            let f = values(got.buffers.get("A").unwrap());
            match stem.starts_with("lu") {
                true => lu_residual(&a, &f, 12, 4, ElemType::F64),
                false => cholesky_residual(&a, &f, 12, 4, ElemType::F64),
            }
        } else {
            let (a, b) = (initial(&program, "A"), initial(&program, "B"));
            let c = values(got.buffers.get("C").unwrap());
            gemm_residual(&a, &b, &c, 8, 4, ElemType::F32)
        };
        assert!(r < RESIDUAL_BOUND, "{stem}: residual {r}");
    }
}

/// An embedder's own n and tile: every refusal is an `Err` naming the value and the rule
/// (from `Tiling::new`, or the `try_` builders for a struct literal), and converts into the
/// crate's `Error` with the same message.
#[test]
fn an_embedders_bad_tiling_is_an_error_not_a_panic() {
    fn plan(n: u64, tile: u64, ty: ElemType) -> Result<Plan, offload_sched::Error> {
        let t = Tiling::new(n, tile, ty, DataStyle::Mapped, MatrixInit::Given)?;
        Plan::new(try_tiled_cholesky(&t)?, &ScheduleOptions::default())
    }
    let msg = |n, tile, ty| plan(n, tile, ty).err().unwrap().to_string();
    assert_eq!(
        msg(1000, 300, ElemType::F64),
        "tiling n 1000 tile 300: n must be a multiple of tile (whole tiles only: \
         1000 = 3 × 300 + 100)"
    );
    assert_eq!(
        msg(0, 0, ElemType::F32),
        "tiling n 0 tile 0: n and tile must both be positive"
    );
    assert_eq!(
        msg(8, 4, ElemType::U8),
        "tiling element type u8: tiled programs take f32 or f64 (the BLAS/LAPACK s and d \
         kernels), not u8"
    );
    assert_eq!(
        msg(1 << 20, 1 << 10, ElemType::F32),
        "tiling n 1048576: the n × n matrix of f32 is 1048576² × 4 bytes = 4398046511104 \
         bytes, over the 64 GiB limit for one buffer"
    );
    assert!(plan(8, 4, ElemType::F64).is_ok());
    // A struct literal reaches the try_ builders unchecked; they refuse it the same way.
    let literal = Tiling {
        tile: 5,
        ..tiling(12, 4, ElemType::F64, DataStyle::Entered)
    };
    let want = TilingError::NotMultiple { n: 12, tile: 5 };
    assert_eq!(try_tiled_lu(&literal).err(), Some(want));
    assert_eq!(try_tiled_lu_lookahead(&literal, 2).err(), Some(want));
}
