//! dpmstream's compiled core, the Python extension `dpmstream.parsers._native`: the DPM
//! line scanner and reassembly engine with its name-server linker, the DOME scanner and
//! engine, and the compiled edges (line blocks, the rsyslog envelope, CSV and JSON
//! records, the summary's tally). The Python modules stay the reference.
//!
//! The modules are layered, each using only those of the layers before it and of its
//! own (tests/test_native_layering.py checks the `crate::` uses have no cycle; the DOME
//! modules are listed in docs/architecture.md, which draws the map):
//! - primitives: hashing (the tables' hasher), hashed_text (a shared text carrying its hash), jit (a PCRE2 pattern through its JIT entry), names (the interner), lru (activity
//!   order), window (the duplicate memory), schema (parsers/schema.py's copy);
//! - the DPM domain's data: event (a parsed line), scan (the line scanner), state (what
//!   the engine holds), counters, rec (finished records),
//!   busy_spans (the threads' busy intervals the report reads);
//! - compiled edges: block, chunk, envelope (and envelope_batch), records (CSV and JSON), tally,
//!   request_ends (what profile check's cut watch reads of the records),
//!   ranks (the summary's quantiles, nearest rank),
//!   steps (the report's concurrency step functions, their sums per bin and sustained peak), segments
//!   (a request's stacked segments on the report's page), two_decimals (the page's
//!   coordinates as svg.nums writes them);
//! - the DPM engine: deliver (where a record goes), linking, reassembly (the rules);
//! - the DOME modules (dome_*);
//! - the simulator's model run: model (simulator/native_model.py's `run_model`), with
//!   model_truth (its records' rules) and model_summary (what predict keeps of a run);
//!   estimators (the calibration's most-open count and quantile subtraction), fits
//!   (its closed-loop test per client and the clients' poll back-off) and calibrate_columns
//!   (what it reads of each request record, in one pass, its name-server locks by
//!   directory, and predict's phase table);
//! - bindings: py_engine (the `Core` Python class), line_watch (the lines after which
//!   its feed hands a caller the engine's time and orphans), profile_tally (`profile check`'s
//!   per-line work, over the DPM profile's patterns and the DOME scanner), state_codec (its state as dicts),
//!   schema_check (schema.rs checked against Python's as the module loads), and this
//!   file, which only registers the classes and functions.

mod block;
mod busy_spans;
mod byte_runs;
mod calibrate_columns;
mod chunk;
mod counters;
mod deliver;
mod dome_calls;
mod dome_checksums;
mod dome_clocks;
mod dome_csv;
mod dome_engine;
mod dome_event;
mod dome_head;
mod dome_roles;
mod dome_puts;
mod dome_records;
mod dome_scan;
mod dome_snapshot;
mod dome_state;
mod dome_stats;
mod dome_summary_tally;
mod dome_time;
mod envelope;
mod envelope_batch;
mod estimators;
mod event;
mod exact_ints;
mod few;
mod fits;
mod hashed_text;
mod hashing;
mod jit;
mod keyed_slab;
mod lcgdm_head;
mod lead_dispatch;
mod line_watch;
mod linking;
mod lru;
mod model;
mod model_summary;
mod model_truth;
mod names;
mod profile_tally;
mod py_engine;
mod ranks;
mod reassembly;
mod rec;
mod records;
mod request_ends;
mod scan;
mod schema;
mod schema_check;
mod state;
mod state_codec;
mod segments;
mod steps;
mod two_decimals;
mod tally;
mod text_cache;
mod window;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    schema_check::check(m)?; // built from parsers/schema.py's record schema, or no import
    m.add_class::<scan::FastLines>()?;
    m.add_class::<py_engine::Core>()?;
    m.add_class::<line_watch::LineWatch>()?;
    m.add_class::<line_watch::TokenGaps>()?;
    m.add_class::<request_ends::RequestEnds>()?;
    m.add_class::<tally::Tally>()?;
    m.add_class::<busy_spans::BusySpans>()?;
    m.add_class::<steps::HeldSteps>()?;
    m.add_class::<records::CsvBlocks>()?;
    m.add_class::<block::LineBlock>()?;
    m.add_class::<block::LineSplitter>()?;
    m.add_class::<dome_scan::DomeScanner>()?;
    m.add_class::<dome_scan::DomeLine>()?;
    m.add_class::<dome_engine::DomeCore>()?;
    m.add_class::<profile_tally::ProfileLines>()?;
    m.add_class::<profile_tally::LineTally>()?;
    m.add_class::<profile_tally::Shapes>()?;
    m.add_class::<dome_csv::DomeCsv>()?;
    m.add_class::<dome_csv::DomeCsvBlocks>()?;
    m.add_class::<dome_summary_tally::DomeSummaryTally>()?;
    m.add_function(wrap_pyfunction!(records::record_csv_line, m)?)?;
    m.add_function(wrap_pyfunction!(envelope::decode_envelope, m)?)?;
    m.add_function(wrap_pyfunction!(envelope_batch::plan_batch, m)?)?;
    m.add_function(wrap_pyfunction!(records::record_json, m)?)?;
    m.add_function(wrap_pyfunction!(records::record_messages, m)?)?;
    m.add_function(wrap_pyfunction!(state_codec::state_changes_json, m)?)?;
    m.add_function(wrap_pyfunction!(profile_tally::dome_lines, m)?)?;
    m.add_function(wrap_pyfunction!(profile_tally::tally_profiles, m)?)?;
    m.add_function(wrap_pyfunction!(model::run_model, m)?)?;
    m.add_function(wrap_pyfunction!(model::run_model_summary, m)?)?;
    m.add_function(wrap_pyfunction!(steps::concurrency_steps, m)?)?;
    m.add_function(wrap_pyfunction!(steps::binned_steps, m)?)?;
    m.add_function(wrap_pyfunction!(steps::sustained_peak, m)?)?;
    m.add_function(wrap_pyfunction!(steps::queue_steps, m)?)?;
    m.add_function(wrap_pyfunction!(two_decimals::two_decimals, m)?)?;
    m.add_function(wrap_pyfunction!(ranks::nearest_ranks, m)?)?;
    m.add_function(wrap_pyfunction!(segments::segment_sums, m)?)?;
    m.add_function(wrap_pyfunction!(estimators::max_overlap, m)?)?;
    m.add_function(wrap_pyfunction!(estimators::subtract_quantiles, m)?)?;
    m.add_function(wrap_pyfunction!(fits::closed_loop_clients, m)?)?;
    m.add_function(wrap_pyfunction!(fits::fit_backoff, m)?)?;
    m.add_function(wrap_pyfunction!(calibrate_columns::request_columns, m)?)?;
    m.add_function(wrap_pyfunction!(calibrate_columns::phase_columns, m)?)?;
    m.add_function(wrap_pyfunction!(calibrate_columns::directory_groups, m)?)?;
    m.add_function(wrap_pyfunction!(calibrate_columns::call_columns, m)?)?;
    Ok(())
}
