use super::*;

#[test]
fn flags_have_lapack_codes_and_graph_file_names() {
    for kind in [
        FlagKind::Trans,
        FlagKind::Uplo,
        FlagKind::Side,
        FlagKind::Diag,
    ] {
        for &f in kind.values() {
            assert_eq!(kind.parse(f.name()), Some(f));
            assert_eq!(kind.of_code(f64::from(f.code())), Some(f));
            assert_eq!(f.kind(), kind);
        }
    }
    assert_eq!(Flag::from(Trans::T).code(), 'T' as i32);
    assert_eq!(Flag::from(Uplo::Lower).code(), 'L' as i32);
    assert_eq!(Flag::from(Side::Right).code(), 'R' as i32);
    assert_eq!(Flag::from(Diag::Unit).code(), 'U' as i32);
    assert_eq!(
        FlagKind::Side.parse("L"),
        None,
        "sides are `left` / `right`"
    );
    assert_eq!(FlagKind::Trans.of_code(78.5), None);
    assert_eq!(FlagKind::Side.choices(), "\"left\" or \"right\"");
}

#[test]
fn signatures_follow_blas_order_with_one_written_tile() {
    let gemm = LibraryKernel::Gemm.sig();
    assert_eq!(
        gemm.param_list(),
        "transa: i32, transb: i32, m: i64, n: i64, k: i64, alpha: T, a: in T*, lda: i64, \
         b: in T*, ldb: i64, beta: T, c: inout T*, ldc: i64"
    );
    assert_eq!(
        LibraryKernel::Trsm.sig().param_list(),
        "side: i32, uplo: i32, transa: i32, diag: i32, m: i64, n: i64, alpha: T, a: in T*, \
         lda: i64, b: inout T*, ldb: i64"
    );
    assert_eq!(
        LibraryKernel::Potrf.sig().param_list(),
        "uplo: i32, n: i64, a: inout T*, lda: i64"
    );
    assert_eq!(LibraryKernel::Syrk.flag_param(1), Some(FlagKind::Trans));
    assert_eq!(LibraryKernel::Syrk.flag_param(2), None);
    assert_eq!(LibraryKernel::of(&gemm), Some(LibraryKernel::Gemm));
}

#[test]
fn decode_and_shape_errors_name_the_parameter() {
    let t = |c: char| f64::from(c as u8);
    // gemm T N 4×3·k=2: A is 2×4 stored (transa = T).
    let args = [t('T'), t('N'), 4.0, 3.0, 2.0, 1.0, 2.0, 2.0, 1.0, 4.0];
    let g = decode(LibraryKernel::Gemm, &args).unwrap();
    assert_eq!((g.m, g.n, g.k, g.ld), (4, 3, 2, [2, 2, 4]));
    assert_eq!(g.tile_shape(0), (2, 4));
    assert_eq!(check_shapes(&g, ElemType::F64, &[8, 6, 12]), Ok(()));
    assert_eq!(
        check_shapes(&g, ElemType::F64, &[7, 6, 12]),
        Err(
            "tile `a` (transa = T) is 2×4 with lda 2: it needs 8 elements, the section has 7"
                .into()
        )
    );
    assert_eq!(
        check_shapes(&g, ElemType::I32, &[8, 6, 12]),
        Err("takes f32 or f64 tiles, got i32".into())
    );
    let mut bad_ld = args;
    bad_ld[9] = 3.0; // ldc 3 < m 4
    let g = decode(LibraryKernel::Gemm, &bad_ld).unwrap();
    let e = check_shapes(&g, ElemType::F32, &[8, 6, 12]).unwrap_err();
    assert!(
        e.starts_with("`ldc` = 3 is less than max(1, rows of `c`) = 4"),
        "{e}"
    );
    let mut bad_flag = args;
    bad_flag[0] = 1.0;
    assert_eq!(
        decode(LibraryKernel::Gemm, &bad_flag).unwrap_err(),
        "parameter `transa` (transpose) takes \"N\" or \"T\", got the code 1"
    );
    let e = decode(LibraryKernel::Potrf, &[t('L'), -1.0, 1.0]).unwrap_err();
    assert!(
        e.starts_with("parameter `n` takes an integer from 0"),
        "{e}"
    );
    // Empty tiles need no storage; their leading dimension is still at least 1.
    let p = decode(LibraryKernel::Potrf, &[t('U'), 0.0, 1.0]).unwrap();
    assert_eq!(check_shapes(&p, ElemType::F32, &[0]), Ok(()));
}

#[test]
fn flop_counts_are_lawn41s() {
    let t = |c: char| f64::from(c as u8);
    let g = decode(
        LibraryKernel::Gemm,
        &[t('N'), t('N'), 2.0, 3.0, 4.0, 1.0, 2.0, 4.0, 1.0, 2.0],
    )
    .unwrap();
    assert_eq!(LibraryKernel::Gemm.flops(&g), 48.0);
    let p = decode(LibraryKernel::Potrf, &[t('L'), 6.0, 6.0]).unwrap();
    assert_eq!(LibraryKernel::Potrf.flops(&p), 72.0 + 18.0 + 1.0);
}

#[test]
fn getrf_takes_m_n_a_lda_and_counts_lawn41_flops() {
    assert_eq!(
        LibraryKernel::Getrf.sig().param_list(),
        "m: i64, n: i64, a: inout T*, lda: i64"
    );
    let g = decode(LibraryKernel::Getrf, &[6.0, 6.0, 6.0]).unwrap();
    // 2n³/3 − n²/2 + 5n/6 at n = 6: 144 − 18 + 5.
    assert_eq!(LibraryKernel::Getrf.flops(&g), 131.0);
    // 4×2 with lda 4 needs 4·1 + 4 = 8 elements; lda 3 < 4 rows is refused.
    let tall = decode(LibraryKernel::Getrf, &[4.0, 2.0, 4.0]).unwrap();
    assert_eq!(tall.tile_shape(0), (4, 2));
    assert_eq!(check_shapes(&tall, ElemType::F32, &[8]), Ok(()));
    assert!(check_shapes(&tall, ElemType::F32, &[7])
        .unwrap_err()
        .contains("needs 8 elements, the section has 7"));
    let bad = decode(LibraryKernel::Getrf, &[4.0, 2.0, 3.0]).unwrap();
    assert!(check_shapes(&bad, ElemType::F32, &[8])
        .unwrap_err()
        .starts_with("`lda` = 3 is less than max(1, rows of `a`) = 4"));
}
