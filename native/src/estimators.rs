//! simulator/estimators.py's `max_overlap` and `subtract_quantiles`, compiled: the most
//! intervals open at once (a sort of the starts and of the ends, then one walk) and a
//! distribution less another quantile by quantile. calibrate runs them on every request
//! of the log (issue 30: ~50 M instructions of Python on the thesis log's 3 k requests);
//! the Python functions stay the reference (tests/simulator/test_estimators.py pins the
//! two equal). The arithmetic is Python's, in its order: an int converted to a float
//! where Python converts it, and round() to the nearest, ties to even.

use pyo3::prelude::*;

use crate::exact_ints::{all_exact, exact};

/// The most intervals [start, end) open at one instant: just after a start, the starts so
/// far less the ends at or before it (an end at the same instant closes first).
pub(crate) fn most_open(intervals: &[(i64, i64)]) -> i64 {
    let mut starts: Vec<i64> = intervals.iter().map(|&(s, _)| s).collect();
    let mut ends: Vec<i64> = intervals.iter().map(|&(_, e)| e).collect();
    starts.sort_unstable();
    ends.sort_unstable();
    let (mut most, mut closed) = (0i64, 0usize);
    for (k, &start) in starts.iter().enumerate() {
        while closed < ends.len() && ends[closed] <= start {
            closed += 1;
        }
        let open = (k + 1) as i64 - closed as i64;
        if open > most {
            most = open;
        }
    }
    most
}

/// total - part, quantile by quantile: the i-th of n ordered totals less the part's
/// quantile at the level (i + 0.5) / n (linear interpolation) and `offset`, never below
/// `floor`.
pub(crate) fn less_quantiles(total: &[i64], part: &[i64], offset: i64, floor: i64) -> Vec<i64> {
    let mut ordered = total.to_vec();
    ordered.sort_unstable();
    if part.is_empty() {
        return ordered.iter().map(|&v| (v - offset).max(floor)).collect();
    }
    let mut part_sorted = part.to_vec();
    part_sorted.sort_unstable();
    let n = ordered.len() as f64;
    let top = part_sorted.len() - 1;
    ordered.iter().enumerate().map(|(i, &v)| {
        let pos = (i as f64 + 0.5) / n * top as f64;
        let lo = pos.floor() as usize;
        let hi = if lo < top { lo + 1 } else { top };
        let below = part_sorted[lo];
        let quantile = below as f64 + (part_sorted[hi] - below) as f64 * (pos - lo as f64);
        let value = ((v as f64 - quantile) - offset as f64).round_ties_even() as i64;
        value.max(floor)
    }).collect()
}

/// `max_overlap(intervals)` for a list of (start, end) ints.
#[pyfunction]
pub fn max_overlap(intervals: Vec<(i64, i64)>) -> i64 {
    most_open(&intervals)
}

/// `subtract_quantiles(total, part, offset, floor)` for lists of ints (within ±2^53:
/// exact_ints.rs).
#[pyfunction]
pub fn subtract_quantiles(total: Vec<i64>, part: Vec<i64>, offset: i64, floor: i64) -> PyResult<Vec<i64>> {
    all_exact(total.iter().chain(&part))?;
    Ok(less_quantiles(&total, &part, exact(offset)?, exact(floor)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_intervals_are_open_at_once_and_one_ending_as_another_starts_is_not() {
        assert_eq!(most_open(&[(0, 10), (1, 9), (2, 8)]), 3);
        assert_eq!(most_open(&[(0, 10), (5, 15), (10, 20)]), 2);
        assert_eq!(most_open(&[]), 0);
    }

    #[test]
    fn each_total_loses_the_parts_quantile_at_its_own_level() {
        // n = 2 totals: levels 0.25 and 0.75 of the part [0, 100] -> 25 and 75
        assert_eq!(less_quantiles(&[200, 100], &[100, 0], 1, 0), vec![74, 124]);
        assert_eq!(less_quantiles(&[30, 10, 20], &[], 5, 8), vec![8, 15, 25]);
    }
}
