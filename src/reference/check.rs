//! Comparing a run's buffers with the reference interpreter's.
//!
//! Integers must be bit-identical. Floats `a` (actual) and `b` (expected) match when both
//! are NaN, or both are the same infinity, or both are finite and `a == b` (zeros of
//! either sign) or `|a - b| <= 1e-6 * max(|a|, |b|)` (relative error against the larger
//! magnitude; so a nonzero value never matches 0). A NaN or an infinity matches nothing
//! else: the relative test alone would let `inf` pass for any finite value
//! (`inf <= 1e-6 * inf`). Both runs use the same kernels, so in practice floats
//! are identical too; the tolerance admits a CUDA plugin's fused multiply-adds.

use crate::exec::buffers::{BufferData, Buffers};
use crate::model::ElemType;
use thiserror::Error;

/// Relative tolerance for floats.
pub const REL_TOL: f64 = 1e-6;

/// The first difference found.
#[derive(Clone, Debug, PartialEq, Error)]
#[non_exhaustive]
pub enum CheckError {
    #[error("buffer \"{name}\" is missing from the {side} buffers")]
    Missing { name: String, side: &'static str },
    #[error("buffer \"{name}\": type {actual} differs from the expected {expected}")]
    Type {
        name: String,
        actual: ElemType,
        expected: ElemType,
    },
    #[error("buffer \"{name}\": {actual} elements, expected {expected}")]
    Length {
        name: String,
        actual: usize,
        expected: usize,
    },
    #[error("buffer \"{name}\"[{index}] = {actual}, expected {expected}")]
    Value {
        name: String,
        index: usize,
        /// The values as printed (`f32`/`f64` with full precision).
        actual: String,
        expected: String,
    },
}

/// True if two floats match under the rule in the module docs.
pub fn floats_match(a: f64, b: f64) -> bool {
    floats_match_tol(a, b, REL_TOL)
}

/// [`floats_match`] with relative tolerance `rel_tol` instead of [`REL_TOL`].
pub fn floats_match_tol(a: f64, b: f64, rel_tol: f64) -> bool {
    if a.is_nan() || b.is_nan() {
        return a.is_nan() && b.is_nan();
    }
    if a.is_infinite() || b.is_infinite() {
        return a == b;
    }
    a == b || (a - b).abs() <= rel_tol * a.abs().max(b.abs())
}

/// Checks every buffer of `actual` against `expected` (and that neither has extra
/// buffers). Returns the first difference in buffer order, then index order.
///
/// Complexity: `O(total elements)`.
pub fn check(actual: &Buffers, expected: &Buffers) -> Result<(), CheckError> {
    check_tol(actual, expected, REL_TOL)
}

/// [`check`] with relative float tolerance `rel_tol` (e.g. `1e-5` for results of a GPU
/// whose kernels sum in another order); integers stay bit-exact.
pub fn check_tol(actual: &Buffers, expected: &Buffers, rel_tol: f64) -> Result<(), CheckError> {
    for (name, e) in expected.iter() {
        let a = actual.get(name).ok_or_else(|| CheckError::Missing {
            name: name.to_string(),
            side: "actual",
        })?;
        check_one(name, a, e, rel_tol)?;
    }
    for (name, _) in actual.iter() {
        if expected.get(name).is_none() {
            return Err(CheckError::Missing {
                name: name.to_string(),
                side: "expected",
            });
        }
    }
    Ok(())
}

fn check_one(name: &str, a: &BufferData, e: &BufferData, rel_tol: f64) -> Result<(), CheckError> {
    if a.ty() != e.ty() {
        return Err(CheckError::Type {
            name: name.into(),
            actual: a.ty(),
            expected: e.ty(),
        });
    }
    if a.len() != e.len() {
        return Err(CheckError::Length {
            name: name.into(),
            actual: a.len(),
            expected: e.len(),
        });
    }
    fn first<T: PartialEq + Copy>(
        name: &str,
        a: &[T],
        e: &[T],
        same: impl Fn(&T, &T) -> bool,
    ) -> Result<(), CheckError>
    where
        crate::model::Num<T>: std::fmt::Display,
    {
        match a.iter().zip(e).position(|(x, y)| !same(x, y)) {
            None => Ok(()),
            Some(i) => Err(CheckError::Value {
                name: name.into(),
                index: i,
                actual: crate::model::Num(a[i]).to_string(),
                expected: crate::model::Num(e[i]).to_string(),
            }),
        }
    }
    match (a, e) {
        (BufferData::F32(a), BufferData::F32(e)) => first(name, a, e, |x, y| {
            floats_match_tol(*x as f64, *y as f64, rel_tol)
        }),
        (BufferData::F64(a), BufferData::F64(e)) => {
            first(name, a, e, |x, y| floats_match_tol(*x, *y, rel_tol))
        }
        (BufferData::I32(a), BufferData::I32(e)) => first(name, a, e, |x, y| x == y),
        (BufferData::I64(a), BufferData::I64(e)) => first(name, a, e, |x, y| x == y),
        (BufferData::U8(a), BufferData::U8(e)) => first(name, a, e, |x, y| x == y),
        _ => Ok(()), // types were compared above
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_tolerance_and_messages() {
        assert!(floats_match(1.0, 1.0 + 1e-7));
        assert!(!floats_match(1.0, 1.0 + 1e-5));
        assert!(floats_match(0.0, -0.0));
        assert!(!floats_match(0.0, 1e-300));
        assert!(floats_match(f64::NAN, f64::NAN));
        let a = Buffers::new(vec![("y".into(), BufferData::I32(vec![1, 2, 3]))]);
        let b = Buffers::new(vec![("y".into(), BufferData::I32(vec![1, 2, 4]))]);
        let e = check(&a, &b).unwrap_err();
        assert_eq!(e.to_string(), "buffer \"y\"[2] = 3, expected 4");
        assert_eq!(check(&a, &a), Ok(()));
        let c = Buffers::new(vec![("y".into(), BufferData::F32(vec![1.0, 2.0, 3.0]))]);
        assert!(matches!(check(&c, &b), Err(CheckError::Type { .. })));
        let d = Buffers::new(vec![("y".into(), BufferData::F32(vec![1.0, 2.0, 3.00002]))]);
        assert!(check(&d, &c).is_err());
        assert_eq!(check_tol(&d, &c, 1e-5), Ok(()));
        let i = Buffers::new(vec![("y".into(), BufferData::I32(vec![1, 2, 5]))]);
        assert!(check_tol(&i, &a, 0.5).is_err(), "integers stay exact");
    }

    /// The check can fail for every float class: finite, ±0, ±inf, NaN, each against
    /// every other class, at any tolerance; and each class matches itself.
    #[test]
    fn every_float_class_matches_only_itself() {
        let (inf, nan) = (f64::INFINITY, f64::NAN);
        let classes = [1.0, -3.0, 0.0, inf, -inf, nan];
        for (i, &a) in classes.iter().enumerate() {
            for (j, &b) in classes.iter().enumerate() {
                for tol in [1e-6, 0.5, 1e300] {
                    let same = i == j;
                    // Finite values may match each other within a huge tolerance.
                    let finite = a.is_finite() && b.is_finite();
                    if same || !finite {
                        assert_eq!(floats_match_tol(a, b, tol), same, "{a} vs {b}, tol {tol}");
                    }
                }
            }
        }
        // The reproducer of the false pass: expected [1, 2, -3], actual [inf, -inf, inf].
        let e = Buffers::new(vec![("y".into(), BufferData::F32(vec![1.0, 2.0, -3.0]))]);
        let a = Buffers::new(vec![(
            "y".into(),
            BufferData::F32(vec![f32::INFINITY, f32::NEG_INFINITY, f32::INFINITY]),
        )]);
        assert_eq!(
            check(&a, &e).unwrap_err().to_string(),
            "buffer \"y\"[0] = inf, expected 1"
        );
        let f64s = |v: Vec<f64>| Buffers::new(vec![("y".into(), BufferData::F64(v))]);
        assert!(check(&f64s(vec![nan]), &f64s(vec![1.0])).is_err());
        assert!(check(&f64s(vec![1.0]), &f64s(vec![nan])).is_err());
        assert!(check(&f64s(vec![inf]), &f64s(vec![nan])).is_err());
        assert_eq!(
            check(&f64s(vec![nan, -inf]), &f64s(vec![nan, -inf])),
            Ok(())
        );
    }
}
