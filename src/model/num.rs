//! Numbers in messages: ordinary magnitudes as Rust prints them (`2.5`, `1000`,
//! `0.001`), huge and tiny ones in scientific notation (`1e308`, `5e-324`) instead of
//! hundreds of digits. Used wherever a number from a graph file, a WfCommons file, an
//! option or a buffer is echoed to the user.

use std::fmt;

/// Magnitudes at or above this print in scientific notation.
pub const SCI_AT_OR_ABOVE: f64 = 1e16;
/// Non-zero magnitudes below this print in scientific notation.
pub const SCI_BELOW: f64 = 1e-5;

/// A value as a message shows it: floats whose magnitude is at least
/// `SCI_AT_OR_ABOVE` (1e16) or below `SCI_BELOW` (1e-5) (not 0) in Rust's `{:e}` form (shortest
/// digits that read back to the same value: `1e308`, `-1.5e-7`), every other value
/// (integers, ordinary floats, `NaN`, `inf`) as `{}` prints it. At most about 25
/// characters for any float.
///
/// ```
/// use offload_sched::model::Num;
/// assert_eq!(Num(1e308).to_string(), "1e308");
/// assert_eq!(Num(-2.5e-7_f32).to_string(), "-2.5e-7");
/// assert_eq!(Num(1234.5).to_string(), "1234.5");
/// assert_eq!(Num(f64::INFINITY).to_string(), "inf");
/// assert_eq!(Num(-7i32).to_string(), "-7");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Num<T>(pub T);

macro_rules! float {
    ($($t:ty),*) => {$(
        impl fmt::Display for Num<$t> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let x = self.0;
                let m = (x as f64).abs();
                if x.is_finite() && m != 0.0 && !(SCI_BELOW..SCI_AT_OR_ABOVE).contains(&m) {
                    write!(f, "{x:e}")
                } else {
                    write!(f, "{x}")
                }
            }
        }
    )*};
}
float!(f32, f64);

macro_rules! int {
    ($($t:ty),*) => {$(
        impl fmt::Display for Num<$t> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    )*};
}
int!(u8, i32, i64, u32, u64, usize);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_values_print_as_today() {
        for x in [
            0.0,
            -0.0,
            1.0,
            2.5,
            -3.0,
            1000.0,
            0.001,
            1e-5,
            123456789.25,
            9.9e15,
        ] {
            assert_eq!(Num(x).to_string(), x.to_string(), "{x}");
        }
        assert_eq!(Num(f64::NAN).to_string(), "NaN");
        assert_eq!(Num(f64::NEG_INFINITY).to_string(), "-inf");
        assert_eq!(Num(0.1f32).to_string(), "0.1");
        assert_eq!(Num(u64::MAX).to_string(), "18446744073709551615");
    }

    #[test]
    fn huge_and_tiny_values_print_in_scientific_notation() {
        assert_eq!(Num(1e16).to_string(), "1e16");
        assert_eq!(Num(1e308).to_string(), "1e308");
        assert_eq!(Num(f64::MAX).to_string(), "1.7976931348623157e308");
        assert_eq!(Num(-1e300).to_string(), "-1e300");
        assert_eq!(Num(9.999e-6).to_string(), "9.999e-6");
        assert_eq!(Num(5e-324).to_string(), "5e-324");
        assert_eq!(Num(f32::MAX).to_string(), "3.4028235e38");
        assert_eq!(Num(1e-45f32).to_string(), "1e-45");
        // Never longer than 25 characters.
        for x in [
            f64::MAX,
            f64::MIN,
            f64::MIN_POSITIVE,
            -5e-324,
            1.2345678901234567e200,
        ] {
            assert!(Num(x).to_string().len() <= 25, "{}", Num(x));
        }
    }
}
