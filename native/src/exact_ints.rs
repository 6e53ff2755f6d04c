//! Where the compiled loops pinned to a Python reference (estimators.rs, fits.rs,
//! segments.rs, steps.rs' binned_steps) agree with it bit for bit: Python's ints never
//! overflow and convert to floats correctly rounded, i64 wraps (no overflow checks in the
//! release build) and `as f64` rounds an int above 2^53. Every int these loops take, and
//! every sum they make, stays within ±2^53 (epoch ms reach 2^41): there the arithmetic
//! of a few such values cannot wrap and each conversion to a float is exact, so both
//! give the same floats. Past it they raise OverflowError, which each Python wrapper
//! catches to let its reference answer.

use pyo3::exceptions::PyOverflowError;
use pyo3::{PyErr, PyResult};

/// The largest magnitude taken: every int up to it is a float exactly.
const EXACT: i64 = 1 << 53;

/// Whether the compiled loops give Python's answer with `v` among their ints.
pub(crate) fn within(v: i64) -> bool {
    (-EXACT..=EXACT).contains(&v)
}

/// The OverflowError that lets the Python reference answer.
pub(crate) fn beyond(v: i64) -> PyErr {
    PyOverflowError::new_err(format!("{v} is beyond 2^53: the Python reference answers"))
}

/// `v`, or OverflowError where the compiled loops would not give Python's answer.
pub(crate) fn exact(v: i64) -> PyResult<i64> {
    if within(v) { Ok(v) } else { Err(beyond(v)) }
}

/// Each of `values` through `exact`.
pub(crate) fn all_exact<'a>(values: impl IntoIterator<Item = &'a i64>) -> PyResult<()> {
    values.into_iter().try_for_each(|&v| exact(v).map(drop))
}

#[cfg(test)]
mod tests {
    use super::within;

    #[test]
    fn ints_within_two_to_the_53_pass_and_past_it_are_refused() {
        assert!(within(1 << 53) && within(-(1 << 53)) && within(0));
        assert!(!within((1 << 53) + 1) && !within(i64::MIN) && !within(i64::MAX));
        // two values within it add up without wrapping, and the sum is tested again
        assert!(!within((1i64 << 53) + (1 << 53)));
    }
}
