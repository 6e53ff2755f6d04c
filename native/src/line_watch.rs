//! The lines of a feed after which a caller looks at the reassembler (`LineWatch`): after
//! each, `Core.feed_lines` hands a hook the engine's latest event time and orphan count
//! from inside its loop. `profile check`'s cut watch (parsers/fit.py, CutWatch) looks after
//! every token and slow-thread line, about one line in five of a DPM log: fed as runs
//! ending at each, the ~20,000 runs of the thesis log cost ~376 M instructions of Python
//! and calls, a fifth of the check (issue 30). Python's reference is
//! Source._feed_watched (parsers/pipeline.py): the same calls, the lines fed in runs.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// Watched lines of a block, in order, and the hook called after each as
/// `hook(k, latest, orphans)`: k the line's place in `points`, or -1 once, after the
/// first line that gives the engine an event time (`timed`: the caller had one before).
#[pyclass(module = "dpmstream.parsers._native")]
pub(crate) struct LineWatch {
    points: Vec<usize>,
    next: usize,
    #[pyo3(get)]
    timed: bool,
    hook: PyObject,
}

impl LineWatch {
    /// Whether `after(line, ..)` calls the hook: the loop reads the engine for no other line.
    #[inline]
    pub(crate) fn wants(&self, line: usize) -> bool {
        !self.timed || self.points.get(self.next) == Some(&line)
    }
}

#[pymethods]
impl LineWatch {
    #[new]
    #[pyo3(signature = (points, hook, timed=false))]
    fn new(points: Vec<usize>, hook: PyObject, timed: bool) -> PyResult<Self> {
        if points.windows(2).any(|w| w[0] >= w[1]) {
            return Err(PyValueError::new_err("watched lines must be in ascending order"));
        }
        Ok(LineWatch { points, next: 0, timed, hook })
    }

    /// Line `line` was fed, and the engine's latest event time is now `latest` (None:
    /// none yet), its orphan count `orphans`. Called for each line fed, in order (the
    /// extension's loop, or Python for a line it fed); a watched line passed over is an
    /// error, not a look skipped.
    #[pyo3(signature = (line, latest, orphans))]
    pub(crate) fn after(&mut self, py: Python<'_>, line: usize, latest: Option<i64>, orphans: i64) -> PyResult<()> {
        if !self.timed && latest.is_some() {
            self.timed = true;
            self.hook.call1(py, (-1i64, latest, orphans))?;
        }
        match self.points.get(self.next) {
            Some(&at) if at == line => {
                self.next += 1;
                self.hook.call1(py, (self.next - 1, latest, orphans))?;
            }
            Some(&at) if at < line => {
                return Err(PyValueError::new_err(format!("watched line {at} was fed unwatched (line {line} now)")));
            }
            _ => {}
        }
        Ok(())
    }

    /// The next line watched, or None: all were.
    #[getter]
    fn next_point(&self) -> Option<usize> {
        self.points.get(self.next).copied()
    }
}
