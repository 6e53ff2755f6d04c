//! report/analysis.py `concurrency`, compiled: how many [start, end) intervals are open
//! at each instant where the count changes, as the step function's (times, levels). The
//! report runs it on every call span of the fast threads (~17 k on the thesis log) and on
//! the slow threads' runs, the queue stays and the name server's calls: a dict update per
//! instant in Python. The Python function stays the reference (no extension, or
//! DPMSTREAM_PURE_PYTHON=1); tests/report/test_concurrency.py pins the two equal.

use pyo3::prelude::*;

/// (times, levels): each instant an interval opens or closes, ascending (an instant whose
/// opens and closes cancel kept, as the Python dict keeps its key), and the count of open
/// intervals from it on. An interval that does not end after it starts counts nowhere.
pub(crate) fn steps(intervals: &[(i64, i64)]) -> (Vec<i64>, Vec<i64>) {
    let mut deltas: Vec<(i64, i64)> = Vec::with_capacity(2 * intervals.len());
    for &(a, b) in intervals {
        if b > a {
            deltas.push((a, 1));
            deltas.push((b, -1));
        }
    }
    deltas.sort_unstable_by_key(|d| d.0);
    let (mut times, mut levels) = (Vec::new(), Vec::new());
    let mut level = 0;
    for (k, &(t, d)) in deltas.iter().enumerate() {
        level += d;
        if deltas.get(k + 1).is_none_or(|next| next.0 != t) {
            times.push(t);
            levels.push(level);
        }
    }
    (times, levels)
}

/// `concurrency(intervals)`'s steps for a list of (start, end) ints.
#[pyfunction]
pub fn concurrency_steps(intervals: Vec<(i64, i64)>) -> (Vec<i64>, Vec<i64>) {
    steps(&intervals)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_changes_at_each_open_and_close_and_an_empty_interval_counts_nowhere() {
        let (times, levels) = steps(&[(0, 10), (5, 10), (10, 12), (3, 3), (7, 2)]);
        assert_eq!(times, vec![0, 5, 10, 12]);
        assert_eq!(levels, vec![1, 2, 1, 0]);
    }

    #[test]
    fn an_instant_whose_opens_and_closes_cancel_is_kept() {
        assert_eq!(steps(&[(0, 5), (5, 9)]), (vec![0, 5, 9], vec![1, 1, 0]));
    }
}
