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
//! (tests/report/test_analysis.py pins the two equal). `HeldSteps` keeps a step function
//! here, for the report to ask these of the log's busy spans without making their steps
//! Python ints.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::exact_ints::{all_exact, exact};
use crate::segments::value;

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

/// Milliseconds within [t0, t1) during which the level was at least `level`, as
/// Steps.time_at_least (the last step holding to t1; its Python the reference).
pub(crate) fn time_at(times: &[i64], levels: &[i64], level: i64, t0: i64, t1: i64) -> i64 {
    let mut total = 0;
    for (i, (&start, &lv)) in times.iter().zip(levels).enumerate() {
        if lv < level {
            continue;
        }
        let end = times.get(i + 1).copied().unwrap_or(t1);
        let (a, b) = (start.max(t0), end.min(t1));
        if b > a {
            total += b - a;
        }
    }
    total
}

/// A step function kept in the extension (BusySpans.held's: the log's busy spans' steps,
/// ~45 k ints on the thesis log that the report made into Python ints for `binned`,
/// `sustained_peak` and `time_at_least` to extract back, issue 30). report/analysis.py's
/// KeptSteps asks it, the Python Steps answering whatever it refuses: an int past 2^53
/// in its steps or the arguments (OverflowError, exact_ints.rs) or one that is no int
/// (TypeError). `times` and `levels` are made as lists when read.
#[pyclass(module = "dpmstream.parsers._native", frozen)]
pub struct HeldSteps {
    times: Vec<i64>,
    levels: Vec<i64>,
}

impl HeldSteps {
    pub(crate) fn new(times: Vec<i64>, levels: Vec<i64>) -> Self {
        HeldSteps { times, levels }
    }

    fn exact(&self, more: &[i64]) -> PyResult<()> {
        all_exact(self.times.iter().chain(&self.levels).chain(more))   // exact_ints.rs
    }
}

#[pymethods]
impl HeldSteps {
    #[getter]
    fn times(&self) -> Vec<i64> {
        self.times.clone()
    }

    #[getter]
    fn levels(&self) -> Vec<i64> {
        self.levels.clone()
    }

    #[getter]
    fn peak(&self) -> i64 {
        self.levels.iter().copied().max().unwrap_or(0)
    }

    /// Steps.binned_areas(edges): each bin's area and highest level.
    fn binned_areas(&self, edges: Vec<i64>) -> PyResult<(Vec<i128>, Vec<i64>)> {
        self.exact(&edges)?;
        Ok(bin_areas(&self.times, &self.levels, &edges))
    }

    /// Steps.sustained_peak(min_ms).
    fn sustained_peak(&self, min_ms: i64) -> PyResult<i64> {
        self.exact(&[min_ms])?;
        Ok(held_peak(&self.times, &self.levels, min_ms))
    }

    /// Steps.time_at_least(level, t0, t1).
    fn time_at_least(&self, level: i64, t0: i64, t1: i64) -> PyResult<i64> {
        self.exact(&[level, t0, t1])?;
        Ok(time_at(&self.times, &self.levels, level, t0, t1))
    }
}

/// report/analysis.py `concurrency(queue_stays(requests))`, kept here as a HeldSteps: each
/// request's wait for a slow thread, from its put/get's returns (started + request_ms) for
/// queue_ms, or to its end where it has no queue_ms nor proc_ms and did not succeed. The
/// Python generator read ~3 k records field by field and made a tuple of each
/// (~10 M instructions of a report on the thesis log, issue 30); it stays the reference
/// (python_queue_steps). A value that is not an int within ±2^53 (TypeError,
/// OverflowError) or a record without its status where it is read (TypeError) is left
/// to it.
#[pyfunction]
pub fn queue_steps(py: Python<'_>, requests: Vec<Bound<'_, PyDict>>) -> PyResult<HeldSteps> {
    let mut stays = Vec::new();
    for r in &requests {
        let (Some(started), Some(request)) =
            (value(r, intern!(py, "started"))?, value(r, intern!(py, "request_ms"))?) else {
            continue;
        };
        let ret = exact(started + request)?;
        if let Some(queue) = value(r, intern!(py, "queue_ms"))? {
            stays.push((ret, exact(ret + queue)?));
        } else if value(r, intern!(py, "proc_ms"))?.is_none() {
            if let Some(ended) = value(r, intern!(py, "ended"))? {
                let status = r.get_item(intern!(py, "status"))?.ok_or_else(|| {
                    pyo3::exceptions::PyTypeError::new_err("no status: the Python reference answers")
                })?;
                if status.ne(intern!(py, "success"))? {
                    stays.push((ret, ended));
                }
            }
        }
    }
    let (times, levels) = steps(&stays);
    Ok(HeldSteps::new(times, levels))
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
    fn the_time_at_a_level_clips_each_step_to_the_window_and_the_last_holds_to_its_end() {
        // 1 from 0, 3 from 10, 2 from 30, 0 from 40, 2 from 50 (to t1)
        let (times, levels) = ([0, 10, 30, 40, 50], [1, 3, 2, 0, 2]);
        assert_eq!(time_at(&times, &levels, 2, 0, 100), 20 + 10 + 50);
        assert_eq!(time_at(&times, &levels, 2, 15, 60), 15 + 10 + 10);
        assert_eq!(time_at(&times, &levels, 3, 0, 5), 0);
        assert_eq!(time_at(&times, &levels, 0, 45, 45), 0);
        assert_eq!(time_at(&[], &[], 0, 0, 10), 0);
    }

    #[test]
    fn an_instant_whose_opens_and_closes_cancel_is_kept() {
        assert_eq!(steps(&[(0, 5), (5, 9)]), (vec![0, 5, 9], vec![1, 1, 0]));
    }
}
