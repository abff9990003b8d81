//! examples/cholesky.rs runs here (CI runs every test): the application's own matrix in,
//! its factor back, checked by the example's residual and here against a naive
//! Cholesky of the same matrix.

#[path = "../examples/cholesky.rs"]
mod example;

#[test]
fn the_example_factors_the_applications_matrix() {
    example::main().unwrap();
    let (n, tile) = (12, 4);
    let a: Vec<f64> = (0..n * n)
        .map(|k| (k % n, k / n))
        .map(|(i, j)| 1.0 / (1 + i + j) as f64 + if i == j { n as f64 } else { 0.0 })
        .collect();
    let l = example::factor(&a, n, tile).unwrap();
    // Naive column Cholesky (Golub & Van Loan, Algorithm 4.2.1).
    let mut want = vec![0.0f64; n * n];
    for j in 0..n {
        let d = a[j + j * n] - (0..j).map(|k| want[j + k * n].powi(2)).sum::<f64>();
        want[j + j * n] = d.sqrt();
        for i in j + 1..n {
            let s = a[i + j * n]
                - (0..j)
                    .map(|k| want[i + k * n] * want[j + k * n])
                    .sum::<f64>();
            want[i + j * n] = s / want[j + j * n];
        }
    }
    for (k, (g, w)) in l.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-12 * w.abs().max(1.0),
            "element {k}: {g} vs {w}"
        );
    }
}

#[test]
fn the_example_refuses_a_bad_tiling_with_the_rule_it_breaks() {
    let a = vec![1.0f64; 100];
    assert_eq!(
        example::factor(&a, 10, 4).unwrap_err(),
        "tiling n 10 tile 4: n must be a multiple of tile (whole tiles only: 10 = 2 × 4 + 2)"
    );
    assert_eq!(
        example::factor(&a, 10, 0).unwrap_err(),
        "tiling n 10 tile 0: n and tile must both be positive"
    );
    assert_eq!(
        example::factor(&a[..99], 10, 5).unwrap_err(),
        "the matrix has 99 elements, not n² = 100"
    );
}
