//! report/analysis.py `concurrency`, compiled: how many [start, end) intervals are open
//! at each instant where the count changes, as the step function's (times, levels). The
//! report runs it on every call span of the fast threads (~17 k on the thesis log) and on
//! the slow threads' runs, the queue stays and the name server's calls: a dict update per
//! instant in Python. The Python function stays the reference (no extension, or
//! DPMSTREAM_PURE_PYTHON=1); tests/report/test_concurrency.py pins the two equal.
//! `binned_steps` is `Steps.binned`'s sums: each bin's exact area under the step function
//! and its highest level (a multiplication and a subtraction of Python ints per step, the
//! times being epoch ms); Python divides each area by its bin's width, as before, so the
//! means are the same floats. Steps.python_binned stays its reference
//! (tests/report/test_analysis.py pins the two equal).

use pyo3::prelude::*;

use crate::exact_ints::all_exact;

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

/// Per bin [edges[k], edges[k + 1]): the area under the steps (level[i] holds from
/// times[i] to times[i + 1], the last to the bin's end) and the highest level that holds
/// for some time in it, as Steps.python_binned sums them (times increase strictly).
pub(crate) fn bin_areas(times: &[i64], levels: &[i64], edges: &[i64]) -> (Vec<i128>, Vec<i64>) {
    let n = times.len();
    let (mut areas, mut peaks) = (Vec::new(), Vec::new());
    for bin in edges.windows(2) {
        let (a, b) = (bin[0], bin[1]);
        let first = times.partition_point(|&t| t <= a).saturating_sub(1);
        // steps first..end - 1 start before b (Python: bisect_left(times, b, first))
        let end = first.min(n) + times[first.min(n)..].partition_point(|&t| t < b);
        let (mut area, mut peak) = (0i128, 0i64);
        // The first and the last step may stick out of the bin; those between lie whole
        // inside it.
        if end > first {
            let outer: &[usize] = if end - 1 == first { &[first][..] } else { &[first, end - 1][..] };
            for &i in outer {
                let lo = if times[i] > a { times[i] } else { a };
                let hi = if i + 1 < n && times[i + 1] < b { times[i + 1] } else { b };
                if hi > lo {
                    area += i128::from(levels[i]) * i128::from(hi - lo);
                    peak = peak.max(levels[i]);
                }
            }
        }
        if end > first + 2 {
            for i in first + 1..end - 1 {
                area += i128::from(levels[i]) * i128::from(times[i + 1] - times[i]);
                peak = peak.max(levels[i]);
            }
        }
        areas.push(area);
        peaks.push(peak);
    }
    (areas, peaks)
}

/// `Steps.binned`'s (areas, peaks) for the steps' times and levels and the bins' edges.
#[pyfunction]
pub fn binned_steps(times: Vec<i64>, levels: Vec<i64>, edges: Vec<i64>) -> PyResult<(Vec<i128>, Vec<i64>)> {
    all_exact(times.iter().chain(&levels).chain(&edges))?;   // exact_ints.rs
    Ok(bin_areas(&times, &levels, &edges))
}

/// The highest level held for at least `min_ms` at a stretch, as Steps.sustained_peak
/// (its Python the reference): a level holds from its step to the first later step below
/// it, or to the last step's time; one pass, a stack of the steps nothing later is below
/// yet. In Python a few steps of the interpreter per step (~5.5 k slow-thread steps on the
/// thesis log, issue 30).
pub(crate) fn held_peak(times: &[i64], levels: &[i64], min_ms: i64) -> i64 {
    let (mut best, mut open) = (0, Vec::<usize>::new());
    for (k, &level) in levels.iter().enumerate() {
        while let Some(&i) = open.last() {
            if levels[i] <= level {
                break;
            }
            open.pop();
            if levels[i] > best && times[k] - times[i] >= min_ms {
                best = levels[i];
            }
        }
        open.push(k);
    }
    // The rest hold to the last step's time; the last step itself for no time.
    if let Some((_, rest)) = open.split_last() {
        let last = times[times.len() - 1];
        for &i in rest {
            if levels[i] > best && last - times[i] >= min_ms {
                best = levels[i];
            }
        }
    }
    best
}

/// `Steps.sustained_peak(min_ms)` for the steps' times and levels. Steps whose lists differ
/// in length are refused with a TypeError, for the Python reference to answer as it does.
#[pyfunction]
pub fn sustained_peak(times: Vec<i64>, levels: Vec<i64>, min_ms: i64) -> PyResult<i64> {
    if times.len() != levels.len() {
        return Err(pyo3::exceptions::PyTypeError::new_err("times and levels differ in length"));
    }
    all_exact(times.iter().chain(&levels).chain([&min_ms]))?;   // exact_ints.rs
    Ok(held_peak(&times, &levels, min_ms))
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
    fn a_bin_sums_the_steps_inside_it_and_the_parts_of_those_that_stick_out() {
        // 1 from 0 to 5, 2 from 5 to 10, 0 from 10: bins [0, 4), [4, 12), [12, 20)
        let (areas, peaks) = bin_areas(&[0, 5, 10], &[1, 2, 0], &[0, 4, 12, 20]);
        assert_eq!(areas, vec![4, 1 + 2 * 5, 0]);
        assert_eq!(peaks, vec![1, 2, 0]);
        assert_eq!(bin_areas(&[], &[], &[0, 10]), (vec![0], vec![0]));
    }

    #[test]
    fn a_level_counts_once_held_long_enough_until_a_lower_step_or_the_last() {
        // 2 holds 0..100, 5 holds 10..30, 3 holds 10..100 (a higher level sits on it)
        let (times, levels) = ([0, 10, 30, 100, 140], [2, 5, 3, 1, 0]);
        assert_eq!(held_peak(&times, &levels, 50), 3);
        assert_eq!(held_peak(&times, &levels, 20), 5);
        assert_eq!(held_peak(&times, &levels, 200), 0);
        assert_eq!(held_peak(&[], &[], 50), 0);
        assert_eq!(held_peak(&[0, 60], &[4, 4], 50), 4); // held to the last step's time
    }

    #[test]
    fn an_instant_whose_opens_and_closes_cancel_is_kept() {
        assert_eq!(steps(&[(0, 5), (5, 9)]), (vec![0, 5, 9], vec![1, 1, 0]));
    }
}
