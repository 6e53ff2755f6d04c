//! A DOME record's CSV line without Python per cell: the bytes of
//! `parsers/dome_records.python_csv_line` (the reference; tests/parsers/test_dome_csv.py
//! compares them), by the cell rules of records.rs that the DPM rows use. The kinds, their
//! columns and which hold milliseconds come from dome_records.KINDS at construction, so
//! they stay declared once. A record of an unknown kind or with a cell of a type the
//! records never hold (a bool, a float) gives None: Python formats it.

use std::collections::HashMap;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::records::{push_csv_row, value, Value};

/// A kind's columns (their keys, as Python strings made once) and which hold milliseconds.
struct Layout {
    keys: Vec<Py<PyString>>,
    is_ms: Vec<bool>,
}

/// DOME records (dicts of either engine) to CSV lines: `line(record)`.
#[pyclass(module = "dpmstream.parsers._native", frozen)]
pub struct DomeCsv {
    kinds: HashMap<String, Layout>,
    kind_key: Py<PyString>,
}

#[pymethods]
impl DomeCsv {
    /// `kinds`: dome_records.KINDS, kind -> (columns, the columns in milliseconds).
    #[new]
    fn new(py: Python<'_>, kinds: &Bound<'_, PyDict>) -> PyResult<Self> {
        let mut table = HashMap::new();
        for (kind, layout) in kinds.iter() {
            let (columns, ms): (Vec<String>, Bound<'_, PyAny>) = layout.extract()?;
            let mut is_ms = Vec::with_capacity(columns.len());
            for column in &columns {
                is_ms.push(ms.contains(column)?);
            }
            let keys = columns.iter().map(|c| PyString::intern(py, c).unbind()).collect();
            table.insert(kind.extract::<String>()?, Layout { keys, is_ms });
        }
        Ok(DomeCsv { kinds: table, kind_key: PyString::intern(py, "kind").unbind() })
    }

    /// The record's CSV line (csv's excel dialect, "\r\n"), or None: Python formats it.
    fn line(&self, py: Python<'_>, record: &Bound<'_, PyDict>) -> PyResult<Option<String>> {
        let Some(kind) = record.get_item(self.kind_key.bind(py))? else { return Ok(None) };
        let Ok(kind) = kind.downcast::<PyString>() else { return Ok(None) };
        let Some(layout) = self.kinds.get(kind.to_str()?) else { return Ok(None) };
        let mut items = Vec::with_capacity(layout.keys.len());
        for key in &layout.keys {
            items.push(record.get_item(key.bind(py))?);
        }
        let values: Option<Vec<Value<'_>>> =
            items.iter().map(|item| item.as_ref().map_or(Some(Value::None), value)).collect();
        let Some(values) = values else { return Ok(None) };
        let mut out = String::with_capacity(192);
        Ok(push_csv_row(&mut out, &layout.is_ms, values).then_some(out))
    }
}
