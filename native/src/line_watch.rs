//! The lines of a feed after which a caller looks at the reassembler (`LineWatch`): after
//! each, `Core.feed_lines` hands a hook the engine's latest event time and orphan count
//! from inside its loop. `profile check`'s cut watch (parsers/fit.py, CutWatch) looks after
//! every token and slow-thread line, about one line in five of a DPM log: fed as runs
//! ending at each, the ~20,000 runs of the thesis log cost ~376 M instructions of Python
//! and calls, a fifth of the check (issue 30). Python's reference is
//! Source._feed_watched (parsers/pipeline.py): the same calls, the lines fed in runs.
//!
//! A watch made of a tally's steps (`LineTally.watch`, profile_tally.rs) is quiet: it
//! notes each token line's time in the cut watch's `TokenGaps` itself and calls the hook
//! only where the orphan count moved after a line of an orphan role (and once, timed):
//! the hook and CutWatch.on_token ran in Python for each of the thesis log's ~20,000
//! token lines, ~70 M instructions of its check, the orphans moving on a few (issue 30).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::hashing::FxMap;

/// CutWatch's token gaps (parsers/fit.py, TokenGaps, the reference): per open request's
/// token, its latest token line's time and its longest gap; of the requests seen whole,
/// how many and their longest gap. A token is a str or None, as Python's dict keys them.
#[pyclass(module = "dpmstream.parsers._native")]
#[derive(Default)]
pub(crate) struct TokenGaps {
    open: FxMap<String, (i64, i64)>,
    open_none: Option<(i64, i64)>, // the token None's (a map keyed by String cannot hold it)
    #[pyo3(get)]
    whole: u64,
    #[pyo3(get)]
    max_gap: i64,
}

impl TokenGaps {
    /// A token line of `token` at event time `ts` (None: no time yet, not counted); a
    /// known token allocates nothing.
    fn note_str(&mut self, token: Option<&str>, ts: Option<i64>) {
        let Some(ts) = ts else { return };
        let state = match token {
            Some(token) => match self.open.get_mut(token) {
                Some(state) => state,
                None => {
                    self.open.insert(token.to_owned(), (ts, 0));
                    return;
                }
            },
            None => self.open_none.get_or_insert((ts, 0)),
        };
        state.1 = state.1.max(ts - state.0);
        state.0 = ts;
    }
}

#[pymethods]
impl TokenGaps {
    #[new]
    fn new() -> Self {
        TokenGaps::default()
    }

    /// A token line of `token` at event time `ts` (None: no time yet, not counted).
    #[pyo3(signature = (token, ts))]
    fn note(&mut self, token: Option<&str>, ts: Option<i64>) {
        self.note_str(token, ts);
    }

    /// The request of `token` is over (`whole`: seen from its put/get to an end by a line).
    #[pyo3(signature = (token, whole))]
    fn end(&mut self, token: Option<&str>, whole: bool) {
        let state = match token {
            Some(token) => self.open.remove(token),
            None => self.open_none.take(),
        };
        if let Some((_, gap)) = state {
            if whole {
                self.whole += 1;
                self.max_gap = self.max_gap.max(gap);
            }
        }
    }
}

/// What a quiet watch does at its points itself: per point, its token (Some: a token
/// line, its token or None) and whether its role can move the orphan count; the gaps it
/// notes tokens in; the orphan count the hook last saw (the caller sets it where lines
/// it fed itself moved the count).
pub(crate) struct Quiet {
    pub(crate) tokens: Vec<Option<Option<String>>>,
    pub(crate) orphan: Vec<bool>,
    pub(crate) gaps: Py<TokenGaps>,
    pub(crate) known: i64,
}

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
    quiet: Option<Quiet>,
}

impl LineWatch {
    /// A quiet watch (the module's doc): `quiet` per point of `points`.
    pub(crate) fn quiet(points: Vec<usize>, hook: PyObject, timed: bool, quiet: Quiet) -> Self {
        LineWatch { points, next: 0, timed, hook, quiet: Some(quiet) }
    }

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
        Ok(LineWatch { points, next: 0, timed, hook, quiet: None })
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
                let k = self.next;
                self.next += 1;
                let Some(q) = self.quiet.as_mut() else {
                    self.hook.call1(py, (k, latest, orphans))?;
                    return Ok(());
                };
                if q.orphan[k] && orphans != q.known {
                    q.known = orphans;
                    self.hook.call1(py, (k, latest, orphans))?;
                }
                if let Some(token) = &q.tokens[k] {
                    q.gaps.borrow_mut(py).note_str(token.as_deref(), latest);
                }
            }
            Some(&at) if at < line => {
                return Err(PyValueError::new_err(format!("watched line {at} was fed unwatched (line {line} now)")));
            }
            _ => {}
        }
        Ok(())
    }

    /// The orphan count the hook of a quiet watch last saw (None: not quiet).
    #[getter]
    fn known(&self) -> Option<i64> {
        self.quiet.as_ref().map(|q| q.known)
    }

    #[setter]
    fn set_known(&mut self, orphans: i64) -> PyResult<()> {
        match self.quiet.as_mut() {
            Some(q) => {
                q.known = orphans;
                Ok(())
            }
            None => Err(PyValueError::new_err("only a quiet watch knows the orphans")),
        }
    }

    /// The next line watched, or None: all were.
    #[getter]
    fn next_point(&self) -> Option<usize> {
        self.points.get(self.next).copied()
    }
}
