//! The busy intervals of each kind of DPM thread, gathered as the engine reads each
//! call's returns (report/spans.py's `BusySpans`, compiled): the report's timeline and
//! slow-thread pool read them. Set as the engine's `on_span`, the engine pushes each span
//! here with no call into Python (the thesis log has ~23 k of them), and the report takes
//! them once, already cut to its window. `whatif` reads the fast threads' ids from it
//! (the threads that served a DPM call: calibrate's fast-thread count).

use std::collections::BTreeSet;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::steps::{steps, HeldSteps};

type Spans = Vec<(i64, i64)>;

#[pyclass(module = "dpmstream.parsers._native")]
pub struct BusySpans {
    fast_daemon: String,
    ns_daemons: Vec<String>,
    slow: Spans, // the fast daemon's processing runs ("proc_*" calls)
    fast: Spans, // the fast daemon's other calls, status polls included
    ns: Spans,   // the name server's calls
    fast_threads: BTreeSet<i64>, // the thread ids of `fast`'s calls (those known: >= 0)
}

impl BusySpans {
    /// One span, as `on_span(host, daemon, pid, tid, kind, started, ended)` gives it.
    pub(crate) fn add(&mut self, daemon: &str, proc_run: bool, tid: i64, started: i64, ended: i64) {
        if daemon == self.fast_daemon {
            if proc_run {
                self.slow.push((started, ended));
            } else {
                self.fast.push((started, ended));
                if tid >= 0 {
                    self.fast_threads.insert(tid);
                }
            }
        } else if self.ns_daemons.iter().any(|d| d == daemon) {
            self.ns.push((started, ended));
        }
    }
}

/// The spans that overlap [since, until] (either end open when None).
fn overlapping(spans: &Spans, since: Option<i64>, until: Option<i64>) -> Spans {
    spans.iter().copied()
        .filter(|&(a, b)| since.is_none_or(|s| b >= s) && until.is_none_or(|u| a <= u))
        .collect()
}

#[pymethods]
impl BusySpans {
    #[new]
    fn new(fast_daemon: String, ns_daemons: Vec<String>) -> Self {
        BusySpans { fast_daemon, ns_daemons, slow: Vec::new(), fast: Vec::new(), ns: Vec::new(),
                    fast_threads: BTreeSet::new() }
    }

    /// The Python engine's callback (the compiled engine calls `add` itself).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (_host, daemon, _pid, tid, kind, started, ended))]
    fn __call__(&mut self, _host: &Bound<'_, PyAny>, daemon: &str, _pid: &Bound<'_, PyAny>,
                tid: Option<i64>, kind: &str, started: i64, ended: i64) {
        self.add(daemon, kind == "proc", tid.unwrap_or(-1), started, ended);
    }

    /// The ids of the fast daemon's threads that served a call (not a processing run),
    /// ascending.
    fn fast_thread_ids(&self) -> Vec<i64> {
        self.fast_threads.iter().copied().collect()
    }

    /// {"slow": [(start, end), ...], "fast": [...], "ns": [...]}: the spans overlapping
    /// [since, until], in the order they ended.
    #[pyo3(signature = (since=None, until=None))]
    fn windowed<'py>(&self, py: Python<'py>, since: Option<i64>, until: Option<i64>)
                     -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        for (kind, spans) in self.kinds() {
            out.set_item(kind, overlapping(spans, since, until))?;
        }
        Ok(out)
    }

    /// {"slow": (times, levels, count, busy_ms), "fast": ..., "ns": ...}: what the report
    /// reads of `windowed`'s spans, made here (report/spans.py's `busy`, the reference):
    /// their concurrency steps, how many they are and their lengths summed. The ~17 k
    /// fast-thread spans of the thesis log were made into Python tuples for
    /// `concurrency_steps` to extract them back (~25 M instructions of the report, issue 30).
    #[pyo3(signature = (since=None, until=None))]
    fn busy<'py>(&self, py: Python<'py>, since: Option<i64>, until: Option<i64>)
                 -> PyResult<Bound<'py, PyDict>> {
        self.each_kind(py, since, until, |times, levels, count, ms| {
            Ok((times, levels, count, ms).into_pyobject(py)?.into_any())
        })
    }

    /// `busy`, each kind's steps kept here as a HeldSteps (steps.rs), not made Python lists:
    /// the report asks them for its bins, the sustained peak and the time at it (the ~45 k
    /// ints of the thesis log's steps, issue 30). report/spans.py's `held` the reference.
    #[pyo3(signature = (since=None, until=None))]
    fn held<'py>(&self, py: Python<'py>, since: Option<i64>, until: Option<i64>)
                 -> PyResult<Bound<'py, PyDict>> {
        self.each_kind(py, since, until, |times, levels, count, ms| {
            Ok((HeldSteps::new(times, levels), count, ms).into_pyobject(py)?.into_any())
        })
    }
}

impl BusySpans {
    /// {kind: made(times, levels, count, busy_ms)} of the spans overlapping the window.
    fn each_kind<'py>(&self, py: Python<'py>, since: Option<i64>, until: Option<i64>,
                      made: impl Fn(Vec<i64>, Vec<i64>, usize, i64) -> PyResult<Bound<'py, PyAny>>)
                      -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        for (kind, spans) in self.kinds() {
            let kept = overlapping(spans, since, until);
            let (times, levels) = steps(&kept);
            out.set_item(kind, made(times, levels, kept.len(), busy_ms(&kept))?)?;
        }
        Ok(out)
    }

    /// Each kind's spans, in the order the Python twin's dict holds them.
    fn kinds(&self) -> [(&'static str, &Spans); 3] {
        [("slow", &self.slow), ("fast", &self.fast), ("ns", &self.ns)]
    }
}

/// The spans' lengths summed (ends minus starts, as the Python sums them: a span that
/// ends before it starts takes its length off).
fn busy_ms(spans: &Spans) -> i64 {
    spans.iter().map(|&(a, b)| b - a).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_go_by_daemon_and_kind_and_a_window_keeps_those_overlapping_it() {
        let mut s = BusySpans::new("dpm".into(), vec!["dpns".into(), "lfc".into()]);
        s.add("dpm", true, 3, 10, 20);
        s.add("dpm", false, 7, 5, 6);
        s.add("dpm", false, -1, 6, 7); // a call whose thread is not known
        s.add("lfc", false, 4, 30, 40);
        s.add("srm", false, 5, 1, 2); // neither kind of thread: not kept
        assert_eq!((s.slow.clone(), s.fast.clone(), s.ns.clone()),
                   (vec![(10, 20)], vec![(5, 6), (6, 7)], vec![(30, 40)]));
        assert_eq!(s.fast_thread_ids(), vec![7]);
        assert_eq!(overlapping(&s.slow, Some(20), Some(10)), vec![(10, 20)]); // ends touch
        assert_eq!(overlapping(&s.slow, Some(21), None), vec![]);
        assert_eq!(overlapping(&s.slow, None, Some(9)), vec![]);
        assert_eq!(busy_ms(&vec![(5, 6), (6, 9), (10, 8)]), 2);
    }
}
