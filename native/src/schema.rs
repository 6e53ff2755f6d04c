//! The record schema of parsers/schema.py, as the compiled code uses it: the columns, the
//! record key of each and which hold milliseconds (records.rs), the counters and the record values chosen at
//! run time (engine.rs), the phases (tally.rs). Python's is the declaration: when the module loads, `check`
//! hands this copy, and the keys the record builders of rec.rs really write, to
//! parsers/schema.check_compiled, which fails the import naming every difference.

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The columns' names, as the CSV header and the JSON objects show them.
pub const REQUEST_COLUMNS: [&str; 22] = [
    "host", "token", "op", "client", "nfiles", "status", "accepted", "started", "ended", "auth_s",
    "request_s", "queue_s", "proc_s", "polls", "poll_s", "ready_wait_s", "transfer_s", "done_s",
    "total_s", "end_reason", "ns_calls", "ns_s",
];
/// The record key of each column, in the same order (a duration is held in milliseconds
/// under `*_ms` and shown in seconds under `*_s`).
pub const REQUEST_FIELDS: [&str; 22] = [
    "host", "token", "op", "client", "nfiles", "status", "accepted", "started", "ended", "auth_ms",
    "request_ms", "queue_ms", "proc_ms", "polls", "poll_ms", "ready_wait_ms", "transfer_ms",
    "done_ms", "total_ms", "end_reason", "ns_calls", "ns_ms",
];
/// The record keys holding milliseconds.
pub const REQUEST_MS: [&str; 13] = [
    "accepted", "started", "ended", "auth_ms", "request_ms", "queue_ms", "proc_ms", "poll_ms",
    "ready_wait_ms", "transfer_ms", "done_ms", "total_ms", "ns_ms",
];
pub const CALL_COLUMNS: [&str; 13] = [
    "host", "daemon", "pid", "thread", "op", "client", "started", "ended", "duration_s", "rc",
    "auth_s", "session", "token",
];
pub const CALL_FIELDS: [&str; 13] = [
    "host", "daemon", "pid", "thread", "op", "client", "started", "ended", "duration_ms", "rc",
    "auth_ms", "session", "token",
];
pub const CALL_MS: [&str; 4] = ["started", "ended", "duration_ms", "auth_ms"];

/// Request phases exported as metrics and summed by the summary: (record key, phase).
pub const PHASES: [(&str, &str); 9] = [
    ("auth_ms", "auth"), ("request_ms", "request"), ("queue_ms", "queue"), ("proc_ms", "proc"),
    ("poll_ms", "poll"), ("ready_wait_ms", "ready_wait"), ("transfer_ms", "transfer"),
    ("done_ms", "done"), ("total_ms", "total"),
];

/// ReassemblyStats' fields, in order (engine.rs indexes them by the constants below them).
pub const STAT_NAMES: [&str; 17] = [
    "requests", "calls", "evictions", "expired", "dropped_accepts", "late_lines", "stray_returns",
    "noreturn_calls", "orphans", "restarts", "stray_processes", "thread_evictions",
    "expired_threads", "expired_sessions", "duplicate_lines", "future_lines", "clock_steps",
];
/// Whether `names[i]` is `name` (at compile time: engine.rs pins its counter indexes).
pub const fn named(names: &[&str], i: usize, name: &str) -> bool {
    if i >= names.len() {
        return false;
    }
    let (a, b) = (names[i].as_bytes(), name.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut k = 0;
    while k < a.len() {
        if a[k] != b[k] {
            return false;
        }
        k += 1;
    }
    true
}

/// LinkStats' fields: the order of Core.link_stats()'s tuple.
pub const LINK_STAT_NAMES: [&str; 2] = ["ns_calls_linked", "ns_calls_ambiguous"];

pub const STATUSES: [&str; 4] = ["success", "failed", "aborted", "incomplete"];
pub const END_REASONS: [&str; 4] = ["line", "timeout", "evicted", "input_end"];

/// This schema, and the record keys rec.rs writes, as parsers/schema.declared() gives
/// Python's (`_fastlines.schema()`, for the tests).
#[pyfunction]
pub fn schema(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("request_columns", REQUEST_COLUMNS.to_vec())?;
    d.set_item("request_fields", REQUEST_FIELDS.to_vec())?;
    d.set_item("request_ms_fields", REQUEST_MS.to_vec())?;
    d.set_item("call_columns", CALL_COLUMNS.to_vec())?;
    d.set_item("call_fields", CALL_FIELDS.to_vec())?;
    d.set_item("call_ms_fields", CALL_MS.to_vec())?;
    let (request_keys, call_keys) = crate::rec::written_keys(py)?;
    d.set_item("request_keys", request_keys)?;
    d.set_item("call_keys", call_keys)?;
    d.set_item("phases", PHASES.to_vec())?;
    d.set_item("statuses", STATUSES.to_vec())?;
    d.set_item("end_reasons", END_REASONS.to_vec())?;
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
