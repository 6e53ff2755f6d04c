//! A record receiver for `profile check`'s cut watch (`RequestEnds`): of each finished
//! record it hands on only what CutWatch.on_record reads (parsers/fit.py): a request's
//! token and whether it was seen whole (started, ended by a line), through
//! `on_end(token, whole)`; a call record, nothing. deliver.rs gives it the Rust value, so
//! no dict is made: the thesis log's ~6,100 records cost ~62 M instructions as dicts
//! handed to Python (issue 30). A dict (the Python engine's records, one restored from
//! saved state) goes to `on_dict`, CutWatch.on_record itself, the reference.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::rec::Rec;
use crate::schema::BY_LINE;

#[pyclass(module = "dpmstream.parsers._native", frozen)]
pub(crate) struct RequestEnds {
    on_end: PyObject,
    on_dict: PyObject,
}

impl RequestEnds {
    /// A finished record, as deliver() hands it over.
    pub(crate) fn take(&self, py: Python<'_>, rec: &Rec) -> PyResult<()> {
        match rec {
            Rec::Request(r) => {
                let whole = r.started.is_some() && r.end_reason.bind(py).to_str()? == BY_LINE;
                self.on_end.call1(py, (r.token.as_deref(), whole))?;
            }
            Rec::Call(_) => {}
            Rec::Dict(d) => {
                self.on_dict.call1(py, (d.bind(py),))?;
            }
        }
        Ok(())
    }
}

#[pymethods]
impl RequestEnds {
    #[new]
    fn new(on_end: PyObject, on_dict: PyObject) -> Self {
        RequestEnds { on_end, on_dict }
    }

    /// A record as a dict (the Python engine's): to `on_dict`.
    fn __call__(&self, py: Python<'_>, record: &Bound<'_, PyDict>) -> PyResult<()> {
        self.on_dict.call1(py, (record,))?;
        Ok(())
    }
}
