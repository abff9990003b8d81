//! Programs and readers shared by the library-kernel tests (tests/library_kernels.rs on
//! the host, tests/cuda_library.rs on CUDA) and the replay tests.

use offload_sched::exec::BufferData;
use offload_sched::model::{
    BufferId, ElemType, Init, LibraryCall, MapType, ProgramBuilder, Sel, Trans, Uplo,
};
use offload_sched::schedule::ScheduleOptions;
use offload_sched::{Plan, Session};

/// Every buffer of the plan after the session's last run, by name, as native bytes.
pub fn read_all(plan: &Plan, s: &Session<'_>) -> Vec<(String, Vec<u8>)> {
    fn read<T: offload_sched::model::Elem>(plan: &Plan, s: &Session<'_>, name: &str) -> Vec<T> {
        s.read(plan.buffer::<T>(name).unwrap()).unwrap().to_vec()
    }
    plan.program()
        .buffers
        .iter()
        .map(|b| {
            let n = b.name.as_str();
            let data = match b.ty {
                ElemType::F32 => BufferData::F32(read(plan, s, n)),
                ElemType::F64 => BufferData::F64(read(plan, s, n)),
                ElemType::I32 => BufferData::I32(read(plan, s, n)),
                ElemType::I64 => BufferData::I64(read(plan, s, n)),
                ElemType::U8 => BufferData::U8(read(plan, s, n)),
            };
            (b.name.clone(), data.to_ne_bytes())
        })
        .collect()
}

/// A region `shift_<a>` adding `v` to the diagonal of the `n × n` tile `a` (leading
/// dimension `ld`): `gemm` on its diagonal seen as a 1×n matrix with leading dimension
/// `ld + 1`, `C ← v·1·onesᵀ + C` (`ones` holds at least `n` ones).
pub fn shift_diagonal(
    p: &mut ProgramBuilder,
    a: BufferId,
    ones: BufferId,
    n: u64,
    ld: u64,
    v: f64,
) {
    let one = p.sec(offload_sched::model::Section::new(ones, 0, 1));
    p.library(
        &format!("shift_{}", a.0),
        LibraryCall::Gemm {
            transa: Trans::N,
            transb: Trans::N,
            m: 1,
            n,
            k: 1,
            alpha: v,
            a: Sel::Part(one),
            lda: 1,
            b: Sel::Whole(ones),
            ldb: 1,
            beta: 1.0,
            c: Sel::Whole(a),
            ldc: ld + 1,
        },
    )
    .map(MapType::To, ones)
    .map(MapType::ToFrom, a);
}

/// `potrf` (region "factor") of diag(1, 1, -1, 1) in `ty`: its leading minor of order 3
/// is not positive definite (LAPACK info = 3).
pub fn not_spd(ty: ElemType) -> Plan {
    poisoned_potrf(ty, 2 * 4 + 2, -1.0)
}

/// `potrf` (region "factor") of the 4×4 identity with a NaN at A(2, 1), off the
/// diagonal, in `ty`: L(2, 1) = NaN, so L(2, 2) is the first NaN on the factor's
/// diagonal (OpenBLAS returns info 0 there; reference LAPACK info = 3).
pub fn nan_potrf(ty: ElemType) -> Plan {
    poisoned_potrf(ty, 2 + 4, f64::NAN)
}

/// `potrf` (region "factor") of the 4×4 identity in `ty` whose element `cell`
/// (column-major index) a region "poison" first multiplies by `value`.
fn poisoned_potrf(ty: ElemType, cell: u64, value: f64) -> Plan {
    let n = 4u64;
    let mut p = ProgramBuilder::new("poisoned potrf");
    let a = p.buffer("a", ty, n * n, Init::Zeros);
    let ones = p.buffer("ones", ty, n, Init::Fill(1.0));
    shift_diagonal(&mut p, a, ones, n, n, 1.0);
    let cell = p.sec(offload_sched::model::Section::new(a, cell, 1));
    p.target("poison", "scale")
        .num(value)
        .arg(cell)
        .map(MapType::ToFrom, cell);
    p.library(
        "factor",
        LibraryCall::Potrf {
            uplo: Uplo::Lower,
            n,
            a: Sel::Whole(a),
            lda: n,
        },
    )
    .map(MapType::ToFrom, a);
    Plan::new(p.build(), &ScheduleOptions::default()).unwrap()
}

/// `getrf` (region "factor") of an `m × n` matrix with leading dimension `lda` in `ty`,
/// random from `seed` plus `max(m, n)` on the diagonal (diagonally dominant: no pivot
/// is needed).
pub fn getrf_plan(ty: ElemType, (m, n, lda): (u64, u64, u64), seed: u64) -> Plan {
    let mut p = ProgramBuilder::new("getrf");
    let a = p.buffer("a", ty, lda * (n - 1) + m, Init::Random(seed));
    let k = m.min(n);
    let ones = p.buffer("ones", ty, k, Init::Fill(1.0));
    shift_diagonal(&mut p, a, ones, k, lda, m.max(n) as f64);
    p.library(
        "factor",
        LibraryCall::Getrf {
            m,
            n,
            a: Sel::Whole(a),
            lda,
        },
    )
    .map(MapType::ToFrom, a);
    Plan::new(p.build(), &ScheduleOptions::default()).unwrap()
}

/// The message a failed `potrf` of [`not_spd`] gives.
pub fn not_spd_message(ty: ElemType) -> String {
    let prefix = if ty == ElemType::F32 { 's' } else { 'd' };
    format!(
        "{prefix}potrf: the matrix is not positive definite (LAPACK info = 3: the leading \
         minor of order 3 is not positive definite)"
    )
}

/// `getrf` (region "factor") of diag(1, 1, 0, 1) + the 1 at A(3, 2), in `ty`: no
/// pivoting meets the zero pivot U(3, 3) (LAPACK info = 3). With `poison`, A(2, 2) is
/// NaN instead: the pivot U(3, 3) is not finite (info = 3).
pub fn singular(ty: ElemType, poison: bool) -> Plan {
    let n = 4u64;
    let mut p = ProgramBuilder::new("singular");
    let a = p.buffer("a", ty, n * n, Init::Zeros);
    let ones = p.buffer("ones", ty, n, Init::Fill(1.0));
    shift_diagonal(&mut p, a, ones, n, n, 1.0);
    let third = p.sec(offload_sched::model::Section::new(a, 2 * n + 2, 1));
    p.target("zero", "scale")
        .num(if poison { f64::NAN } else { 0.0 })
        .arg(third)
        .map(MapType::ToFrom, third);
    let below = p.sec(offload_sched::model::Section::new(a, 2 * n + 3, 1));
    p.target("below", "fill")
        .arg(below)
        .num(1.0)
        .map(MapType::ToFrom, below);
    p.library(
        "factor",
        LibraryCall::Getrf {
            m: n,
            n,
            a: Sel::Whole(a),
            lda: n,
        },
    )
    .map(MapType::ToFrom, a);
    Plan::new(p.build(), &ScheduleOptions::default()).unwrap()
}

/// The message a failed `getrf` of [`singular`] gives.
pub fn singular_message(ty: ElemType, poison: bool) -> String {
    let p = if ty == ElemType::F32 { 's' } else { 'd' };
    if poison {
        format!("{p}getrf (no pivoting): non-finite pivot U(3,3) (info = 3, LAPACK's numbering)")
    } else {
        format!("{p}getrf (no pivoting): zero pivot U(3,3) (LAPACK info = 3)")
    }
}
