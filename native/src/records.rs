//! Record formatting: the CSV row and the JSON object of parsers/records.py, written
//! without Python per cell. Python's csv module and json.dumps stay the reference
//! (tests/parsers/test_records.py compares them); a value of a type the records never
//! hold (a float, a string with a lone surrogate) makes these return None, and Python
//! formats that record.

use std::fmt::Write;

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyString};

use crate::schema::{CALL_COLUMNS, CALL_FIELDS, CALL_MS, REQUEST_COLUMNS, REQUEST_FIELDS, REQUEST_MS};

enum Value<'a> {
    None,
    Int(i64),
    Str(&'a str),
}

fn value<'a>(v: &'a Bound<'_, PyAny>) -> Option<Value<'a>> {
    if v.is_none() {
        return Some(Value::None);
    }
    if v.is_instance_of::<PyBool>() {
        return None;
    }
    if v.is_instance_of::<PyInt>() {
        return v.extract::<i64>().ok().map(Value::Int);
    }
    if let Ok(s) = v.downcast::<PyString>() {
        return s.to_str().ok().map(Value::Str);
    }
    None
}

/// A kind's columns, the record key of each, and the keys holding milliseconds.
type Layout = (&'static [&'static str], &'static [&'static str], &'static [&'static str]);

fn columns(kind: &str) -> Layout {
    if kind == "request" {
        (&REQUEST_COLUMNS, &REQUEST_FIELDS, &REQUEST_MS)
    } else {
        (&CALL_COLUMNS, &CALL_FIELDS, &CALL_MS)
    }
}

/// ms_to_text: seconds with three decimals, exactly.
fn push_ms(out: &mut String, ms: i64) {
    let sign = if ms < 0 { "-" } else { "" };
    let a = ms.unsigned_abs();
    let _ = write!(out, "{sign}{}.{:03}", a / 1000, a % 1000);
}

/// One cell as Python's csv writer (excel dialect, QUOTE_MINIMAL) writes it.
fn push_csv_text(out: &mut String, text: &str) {
    if text.contains([',', '"', '\r', '\n']) {
        out.push('"');
        for c in text.chars() {
            if c == '"' {
                out.push('"');
            }
            out.push(c);
        }
        out.push('"');
    } else {
        out.push_str(text);
    }
}

/// The CSV line of a record (with csv's "\r\n"), or None: Python formats it.
#[pyfunction]
pub fn record_csv_line(record: &Bound<'_, PyDict>) -> PyResult<Option<String>> {
    let Some(kind) = record.get_item("kind")? else { return Ok(None) };
    let Ok(kind) = kind.extract::<String>() else { return Ok(None) };
    let (_, keys, ms_keys) = columns(&kind);
    let mut out = String::with_capacity(256);
    for (i, key) in keys.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let item = record.get_item(*key)?;
        let Some(v) = item.as_ref().map_or(Some(Value::None), value) else { return Ok(None) };
        match (v, ms_keys.contains(key)) {
            (Value::None, _) => {}
            (Value::Int(ms), true) => push_ms(&mut out, ms),
            (Value::Int(n), false) => {
                let _ = write!(out, "{n}");
            }
            (Value::Str(_), true) => return Ok(None),
            (Value::Str(s), false) => push_csv_text(&mut out, s),
        }
    }
    out.push_str("\r\n");
    Ok(Some(out))
}

fn push_json_str(out: &mut String, s: &str, ascii: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if ascii && (c as u32) > 0x7e => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{:04x}", unit);
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Python's repr of ms / 1000.0 (to_json_dict's seconds): the shortest digits that read
/// back as the same float, which Rust prints too; Python adds ".0" to whole numbers and
/// writes exponents outside 1e-4 .. 1e16, which milliseconds never reach below.
fn push_seconds(out: &mut String, ms: i64) -> bool {
    let secs = ms as f64 / 1000.0;
    if !secs.is_finite() || secs.abs() >= 1e16 {
        return false;
    }
    let start = out.len();
    let _ = write!(out, "{secs}");
    if !out[start..].contains('.') {
        out.push_str(".0");
    }
    true
}

/// json.dumps(to_json_dict(record), separators=(",", ":"), ensure_ascii=ascii), or None.
#[pyfunction]
#[pyo3(signature = (record, ensure_ascii))]
pub fn record_json(record: &Bound<'_, PyDict>, ensure_ascii: bool) -> PyResult<Option<String>> {
    let Some(kind) = record.get_item("kind")? else { return Ok(None) };
    let Ok(kind) = kind.extract::<String>() else { return Ok(None) };
    let (cols, keys, ms_keys) = columns(&kind);
    let mut out = String::with_capacity(384);
    out.push_str("{\"kind\":");
    push_json_str(&mut out, &kind, ensure_ascii);
    for (col, key) in cols.iter().zip(keys) {
        out.push_str(",\"");
        out.push_str(col);
        out.push_str("\":");
        let item = record.get_item(*key)?;
        let Some(v) = item.as_ref().map_or(Some(Value::None), value) else { return Ok(None) };
        match (v, ms_keys.contains(key)) {
            (Value::None, _) => out.push_str("null"),
            (Value::Int(ms), true) => {
                if !push_seconds(&mut out, ms) {
                    return Ok(None);
                }
            }
            (Value::Int(n), false) => {
                let _ = write!(out, "{n}");
            }
            (Value::Str(_), true) => return Ok(None),
            (Value::Str(s), false) => push_json_str(&mut out, s, ensure_ascii),
        }
    }
    out.push('}');
    Ok(Some(out))
}
