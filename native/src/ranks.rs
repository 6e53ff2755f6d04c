//! parsers/quantiles.py's nearest rank over a series' values (streams/sinks/summary.py's
//! `Series.quantiles`), compiled: the values sorted as i64s, not as Python ints. The
//! report's numbers table and story sort ~25 series of up to ~3 k values each (issue 30:
//! a tally's array('q') was made into a list of Python ints to sort, and back). Python's
//! `sorted_quantiles` stays the reference (tests/streams/sinks/test_summary.py).

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

/// The smallest value with at least q of the values at or below it, as nearest_rank
/// reads it: rank max(1, ceil(q * n - 1e-9)), at most n (None for no values).
pub(crate) fn nearest_rank(ordered: &[i64], q: f64) -> Option<i64> {
    let n = ordered.len();
    if n == 0 {
        return None;
    }
    let rank = ((q * n as f64 - 1e-9).ceil() as i64).max(1) as usize;
    Some(ordered[rank.min(n) - 1])
}

/// `sorted_quantiles(values, qs)`: `values` an array('q') (read as its buffer) or ints
/// within 64 bits; a q that is not finite, or whose rank q * n is not (math.ceil refuses
/// either), or values of another kind are refused with a TypeError, for the reference to
/// answer.
#[pyfunction]
pub fn nearest_ranks(py: Python<'_>, values: &Bound<'_, PyAny>, qs: Vec<f64>) -> PyResult<Vec<Option<i64>>> {
    let mut ordered: Vec<i64> = match PyBuffer::<i64>::get(values) {
        Ok(buffer) => buffer.to_vec(py)?,
        Err(_) => values.extract()?,
    };
    // q * n past f64's range: math.ceil raises OverflowError there, where `as i64` would
    // saturate and answer the largest value.
    let n = ordered.len() as f64;
    if qs.iter().any(|q| !q.is_finite() || !(q * n).is_finite()) {
        return Err(PyTypeError::new_err("a quantile that is not finite, or whose rank is not"));
    }
    ordered.sort_unstable();
    Ok(qs.iter().map(|&q| nearest_rank(&ordered, q)).collect())
}

#[cfg(test)]
mod tests {
    use super::nearest_rank;

    #[test]
    fn the_nearest_rank_is_a_value_seen_with_at_least_q_at_or_below_it() {
        let v: Vec<i64> = (1..=20).collect();
        assert_eq!(nearest_rank(&v, 0.95), Some(19)); // 0.95 * 20 is a hair above 19
        assert_eq!(nearest_rank(&v, 0.5), Some(10));
        assert_eq!(nearest_rank(&v, 0.0), Some(1));
        assert_eq!(nearest_rank(&v, 1.5), Some(20));
        assert_eq!(nearest_rank(&[], 0.5), None);
    }
}
