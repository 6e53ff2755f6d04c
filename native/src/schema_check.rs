//! The load-time check of schema.rs against parsers/schema.py: `schema()` gives this
//! copy, with the keys rec.rs's record builders really write, in the shape of Python's
//! `schema.declared()`, and `check` hands it to `parsers/schema.check_compiled`.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::rec::written_keys;
use crate::schema::*;

/// This schema, and the record keys rec.rs writes, as parsers/schema.declared() gives
/// Python's (`_native.schema()`, for the tests).
#[pyfunction]
pub fn schema(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("request_columns", REQUEST_COLUMNS.to_vec())?;
    d.set_item("request_fields", REQUEST_FIELDS.to_vec())?;
    d.set_item("request_ms_fields", REQUEST_MS.to_vec())?;
    d.set_item("call_columns", CALL_COLUMNS.to_vec())?;
    d.set_item("call_fields", CALL_FIELDS.to_vec())?;
    d.set_item("call_ms_fields", CALL_MS.to_vec())?;
    let (request_keys, call_keys) = written_keys(py)?;
    d.set_item("request_keys", request_keys)?;
    d.set_item("call_keys", call_keys)?;
    d.set_item("phases", PHASES.to_vec())?;
    d.set_item("statuses", STATUSES.to_vec())?;
    d.set_item("end_reasons", END_REASONS.to_vec())?;
    d.set_item("feed_stops", FEED_STOPS.to_vec())?;
    d.set_item("counters", STAT_NAMES.to_vec())?;
    d.set_item("link_counters", LINK_STAT_NAMES.to_vec())?;
    Ok(d)
}

/// As the module loads: parsers/schema.check_compiled(schema()) raises SchemaMismatch
/// (not an ImportError, so nothing falls back to Python unnoticed) on any difference.
pub fn check(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_function(wrap_pyfunction!(schema, m)?)?;
    py.import("dpmstream.parsers.schema")?.call_method1("check_compiled", (schema(py)?,))?;
    Ok(())
}
