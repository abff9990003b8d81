//! The library tile kernel `getrf` (LU without pivoting; model::library, runtime/getrf.rs)
//! on the host plugin and the reference interpreter: L·U equal to the matrix (naive
//! product) on small tiles with leading dimensions larger than the rows, square, tall and
//! wide, below and above the recursion's base case, f32 and f64; the host plugin equal to
//! the reference bit for bit; a zero or NaN pivot fails naming the region and LAPACK's
//! info, located at the region when the program came from a graph file; shape errors
//! located in graph files, at the argument.

mod common;

use common::library::{getrf_plan, singular, singular_message};
use common::{exec_error, host, run_checked};
use offload_sched::exec::{BufferData, IssueMode};
use offload_sched::model::ElemType;
use offload_sched::schedule::ScheduleOptions;
use offload_sched::Plan;

fn values(d: &BufferData) -> Vec<f64> {
    (0..d.len()).map(|i| d.get_f64(i).unwrap()).collect()
}

#[test]
fn getrf_factors_square_tall_and_wide_tiles_without_pivoting() {
    for ty in [ElemType::F32, ElemType::F64] {
        // 5×5 (unblocked), 40×40 and 37×21 (recursive: over 16 columns), 6×20 (wide).
        for (m, n, lda) in [(5u64, 5u64, 7u64), (40, 40, 41), (37, 21, 40), (6, 20, 9)] {
            let what = format!("getrf {m}×{n} lda {lda} {ty}");
            let plan = getrf_plan(ty, (m, n, lda), 21);
            let want = plan.reference().unwrap();
            for issue in [IssueMode::Serial, IssueMode::PerStream] {
                run_checked(&what, &plan, &host(1, Some(4)), issue, &want);
            }
            let f = values(want.get("a").unwrap());
            let b = plan
                .program()
                .buffers
                .iter()
                .find(|b| b.name == "a")
                .unwrap();
            let mut a0 = values(&BufferData::init(b));
            let (m, n, lda) = (m as usize, n as usize, lda as usize);
            let k = m.min(n);
            for d in 0..k {
                a0[d + d * lda] += m.max(n) as f64;
            }
            let l = |i: usize, j: usize| match i.cmp(&j) {
                std::cmp::Ordering::Greater => f[i + j * lda],
                std::cmp::Ordering::Equal => 1.0,
                std::cmp::Ordering::Less => 0.0,
            };
            let u = |i: usize, j: usize| if i <= j { f[i + j * lda] } else { 0.0 };
            let scale = a0.iter().fold(0.0f64, |s, v| s.max(v.abs()));
            let tol = if ty == ElemType::F32 { 1e-5 } else { 1e-13 } * (k as f64) * scale;
            for j in 0..n {
                for i in 0..m {
                    let lu: f64 = (0..k).map(|p| l(i, p) * u(p, j)).sum();
                    let want = a0[i + j * lda];
                    assert!(
                        (lu - want).abs() <= tol,
                        "{what}: (L·U)({i},{j}) = {lu}, A = {want}"
                    );
                }
                // The rows between m and lda are not touched.
                for i in m..lda.min(f.len() - j * lda) {
                    assert_eq!(f[i + j * lda], a0[i + j * lda], "{what}: pad ({i},{j})");
                }
            }
        }
    }
}

/// The reference interpreter and the host plugin name the region, the zero or NaN
/// pivot and LAPACK's info; the plugin's failure is reported at its op's region and
/// frees the device memory.
#[test]
fn a_zero_or_nan_pivot_fails_getrf_with_its_index_as_lapacks_info() {
    for ty in [ElemType::F32, ElemType::F64] {
        for poison in [false, true] {
            let plan = singular(ty, poison);
            let want = singular_message(ty, poison);
            let e = exec_error(plan.reference().unwrap_err()).to_string();
            assert!(e.contains("region \"factor\""), "reference: {e}");
            assert!(e.contains(&want), "reference: {e}");
            for issue in [IssueMode::Serial, IssueMode::PerStream] {
                let plugin = host(1, None);
                let e = plan.run_with(&plugin, issue).unwrap_err().to_string();
                assert!(e.contains(&want), "{issue:?}: {e}");
                assert!(e.contains("kernel \"getrf\" failed"), "{issue:?}: {e}");
                assert!(e.contains("in region \"factor\""), "{issue:?}: {e}");
                assert_eq!(plugin.live_device_allocs(), 0, "{e}");
            }
        }
    }
}

#[test]
fn getrf_shape_errors_in_graph_files_are_located() {
    let graph = |args: &str| {
        format!(
            "name = \"t\"\n\
             [[buffer]]\nname = \"A\"\ntype = \"f32\"\nlen = 16\ninit = \"zeros\"\n\
             [[body]]\ntarget = \"r\"\nkernel = \"getrf\"\nargs = {args}\nmap = [\"tofrom: A\"]\n"
        )
    };
    let plan = |args: &str| {
        let src = offload_sched::file::SourceFile::new("t.toml", graph(args));
        Plan::from_source(src, &ScheduleOptions::default())
    };
    plan("[4, 4, \"A\", 4]").unwrap();
    for (args, want) in [
        (
            "[4, 4, \"A[0:12]\", 4]",
            "t.toml:10:15: kernel `getrf` in target \"r\": tile `a` is 4×4 with lda 4: it needs 16 elements, the section has 12",
        ),
        (
            "[4, 4, \"A\", 3]",
            "t.toml:10:20: kernel `getrf` in target \"r\": `lda` = 3 is less than max(1, rows of `a`) = 4",
        ),
        (
            "[4, 4.5, \"A\", 4]",
            "t.toml:10:12: argument 2 (`n: i64`) of kernel `getrf` in target \"r\" is 4.5",
        ),
    ] {
        let e = match plan(args) {
            Ok(_) => panic!("{args}: accepted"),
            Err(e) => e.to_string(),
        };
        assert!(e.starts_with("t.toml:") && e.contains(want), "{args}: {e}");
    }
}

/// A `getrf` with a zero pivot and a `potrf` of a matrix that is not positive definite,
/// from a graph file: the run error (LAPACK `info > 0`, on the host plugin and in the
/// reference interpreter) names the op and region and is located at the region's
/// construct (`target = "r"`, line 8 column 10), as lowering errors are.
#[test]
fn library_failures_of_a_graph_file_are_located_at_the_region() {
    for (kernel, args, fill, lapack) in [
        (
            "getrf",
            "[2, 2, \"A\", 2]",
            0.0,
            "dgetrf (no pivoting): zero pivot U(1,1) (LAPACK info = 1)",
        ),
        (
            "potrf",
            "[\"L\", 2, \"A\", 2]",
            -1.0,
            "dpotrf: the matrix is not positive definite (LAPACK info = 1",
        ),
    ] {
        let text = format!(
            "name = \"t\"\n\
             [[buffer]]\nname = \"A\"\ntype = \"f64\"\nlen = 4\ninit = {{ fill = {fill:?} }}\n\
             [[body]]\ntarget = \"r\"\nkernel = \"{kernel}\"\nargs = {args}\nmap = [\"tofrom: A\"]\n"
        );
        let src = offload_sched::file::SourceFile::new("t.toml", text);
        let plan = Plan::from_source(src, &ScheduleOptions::default()).unwrap();
        let mut errors = vec![("reference", plan.reference().unwrap_err())];
        for issue in [IssueMode::Serial, IssueMode::PerStream] {
            let e = plan.run_with(&host(1, None), issue).unwrap_err();
            errors.push((
                if issue == IssueMode::Serial {
                    "serial"
                } else {
                    "per-stream"
                },
                e,
            ));
        }
        for (how, e) in errors {
            let line = e.to_string();
            assert!(
                line.starts_with("t.toml:8:10: op #"),
                "{kernel} {how}: {line}"
            );
            assert!(
                line.contains(&format!("(kernel {kernel}) in region \"r\""))
                    && line.contains(lapack),
                "{kernel} {how}: {line}"
            );
            let shown = e.render();
            assert!(
                shown.starts_with("t.toml:8:10: error: op #")
                    && shown.contains("\n8 | target = \"r\"\n  |          ^^^\n"),
                "{kernel} {how}: {shown}"
            );
        }
    }
}
