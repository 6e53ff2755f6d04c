//! A DOME record's CSV line without Python per cell: the bytes of
//! `parsers/dome_records.python_csv_line` (the reference; tests/parsers/test_dome_csv.py
//! compares them), by the cell rules of records.rs that the DPM rows use. The kinds, their
//! columns and which hold milliseconds come from dome_records.KINDS at construction, so
//! they stay declared once. A record of an unknown kind or with a cell of a type the
//! records never hold (a bool, a float) gives None: Python formats it.
//!
//! `DomeCsvBlocks` is the writer of the DOME files (streams/sinks/csv.py): the compiled
//! engine's records (dome_records.rs's Record, handed on by the DomeSummaryTally: no dict
//! made) and dicts alike, formatted by the same rules into a block per kind, written a
//! block at a time, so a file's rows keep the order they came in whichever way.

use std::collections::HashMap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::dome_event::Val;
use crate::hashing::FxMap;
use crate::dome_records::{Record, KINDS, KIND_NAMES};
use crate::records::{push_csv_row, value, Value};

/// A kind's columns (their keys, as Python strings made once) and which hold milliseconds.
struct Layout {
    columns: Vec<String>,
    keys: Vec<Py<PyString>>,
    is_ms: Vec<bool>,
}

/// The kinds' layouts, from dome_records.KINDS.
struct Layouts {
    kinds: HashMap<String, Layout>,
    kind_key: Py<PyString>,
}

impl Layouts {
    fn new(py: Python<'_>, kinds: &Bound<'_, PyDict>) -> PyResult<Self> {
        let mut table = HashMap::new();
        for (kind, layout) in kinds.iter() {
            let (columns, ms): (Vec<String>, Bound<'_, PyAny>) = layout.extract()?;
            let mut is_ms = Vec::with_capacity(columns.len());
            for column in &columns {
                is_ms.push(ms.contains(column)?);
            }
            let keys = columns.iter().map(|c| PyString::intern(py, c).unbind()).collect();
            table.insert(kind.extract::<String>()?, Layout { columns, keys, is_ms });
        }
        Ok(Layouts { kinds: table, kind_key: PyString::intern(py, "kind").unbind() })
    }

    /// A dict's kind and CSV line, or None: Python formats it.
    fn dict_line(&self, py: Python<'_>, record: &Bound<'_, PyDict>) -> PyResult<Option<(String, String)>> {
        let Some(kind) = record.get_item(self.kind_key.bind(py))? else { return Ok(None) };
        let Ok(kind) = kind.downcast::<PyString>() else { return Ok(None) };
        let kind = kind.to_str()?;
        let Some(layout) = self.kinds.get(kind) else { return Ok(None) };
        let mut items = Vec::with_capacity(layout.keys.len());
        for key in &layout.keys {
            items.push(record.get_item(key.bind(py))?);
        }
        let values: Option<Vec<Value<'_>>> =
            items.iter().map(|item| item.as_ref().map_or(Some(Value::None), value)).collect();
        let Some(values) = values else { return Ok(None) };
        let mut out = String::with_capacity(192);
        Ok(push_csv_row(&mut out, &layout.is_ms, values).then_some((kind.to_string(), out)))
    }
}

/// DOME records (dicts of either engine) to CSV lines: `line(record)`.
#[pyclass(module = "dpmstream.parsers._native", frozen)]
pub struct DomeCsv {
    layouts: Layouts,
}

#[pymethods]
impl DomeCsv {
    /// `kinds`: dome_records.KINDS, kind -> (columns, the columns in milliseconds).
    #[new]
    fn new(py: Python<'_>, kinds: &Bound<'_, PyDict>) -> PyResult<Self> {
        Ok(DomeCsv { layouts: Layouts::new(py, kinds)? })
    }

    /// The record's CSV line (csv's excel dialect, "\r\n"), or None: Python formats it.
    fn line(&self, py: Python<'_>, record: &Bound<'_, PyDict>) -> PyResult<Option<String>> {
        Ok(self.layouts.dict_line(py, record)?.map(|(_, line)| line))
    }
}

// -- the engine's records, straight to CSV ------------------------------------------------

/// The columns `push_record_csv` writes a record's cells in, by Record::kind_index: a
/// DomeCsvBlocks is made only where dome_records.KINDS names the same (its `new` checks).
const RECORD_COLUMNS: [&[&str]; KINDS] = [
    &["host", "pid", "tid", "role", "command", "http_code", "caller", "remote_client", "start", "end",
      "duration", "cut", "whole_seconds"],
    &["head", "lfn", "put_time", "put_code", "server", "fs", "pfn", "size", "putdone_disk_time",
      "putdone_head_time", "putdone_code", "put_to_putdone", "status", "end_reason", "ended", "whole_seconds"],
    &["time", "host", "fs", "phys", "free"],
    &["time", "host", "server", "fs", "event", "transition"],
    &["time", "host", "program", "lines"],
    &["head", "caller", "remote_client", "start", "end", "wait", "polls", "outcome", "http_code", "endings",
      "overlap", "whole_seconds"],
];

fn text(t: Option<&str>) -> Value<'_> {
    t.map_or(Value::None, Value::Str)
}

fn int(n: Option<i64>) -> Value<'static> {
    n.map_or(Value::None, Value::Int)
}

/// A flag as its dict holds it (0 or 1).
fn flag(b: bool) -> Value<'static> {
    Value::Int(i64::from(b))
}

fn val(v: &Option<Val>) -> Value<'_> {
    match v {
        None => Value::None,
        Some(Val::Int(i)) => Value::Int(*i),
        Some(Val::Str(s)) => Value::Str(s),
    }
}

/// The record's row in RECORD_COLUMNS's order (the values its dict holds: dome_records.rs).
fn push_record_csv(out: &mut String, is_ms: &[bool], rec: &Record) -> bool {
    match rec {
        Record::Call(c) => push_csv_row(out, is_ms, [
            Value::Str(&c.host), Value::Int(c.pid), Value::Int(c.tid), text(c.role.as_deref()),
            text(c.command.as_deref()), int(c.http_code), text(c.caller.as_deref()),
            text(c.remote_client.as_deref()), Value::Int(c.start), int(c.end), int(c.duration), flag(c.cut),
            flag(c.whole_seconds),
        ]),
        Record::Put(p) => push_csv_row(out, is_ms, [
            Value::Str(&p.head), text(p.lfn.as_deref()), Value::Int(p.put_time), int(p.put_code),
            text(p.server.as_deref()), text(p.fs.as_deref()), text(p.pfn.as_deref()), int(p.size),
            int(p.putdone_disk_time), int(p.putdone_head_time), int(p.putdone_code), int(p.put_to_putdone),
            Value::Str(p.status), Value::Str(p.end_reason), Value::Int(p.ended), flag(p.whole_seconds),
        ]),
        Record::Capacity { time, host, fs, phys, free } => push_csv_row(out, is_ms, [
            Value::Int(*time), Value::Str(host), val(fs), val(phys), val(free),
        ]),
        Record::FsEvent { time, host, server, fs, enabled, transition } => push_csv_row(out, is_ms, [
            Value::Int(*time), Value::Str(host), val(server), val(fs),
            Value::Str(if *enabled { "enabled" } else { "disabled" }), flag(*transition),
        ]),
        Record::JournaldGap { time, host, program, lines } => push_csv_row(out, is_ms, [
            Value::Int(*time), Value::Str(host), Value::Str(program), Value::Int(*lines),
        ]),
        Record::Checksum(c) => push_csv_row(out, is_ms, [
            Value::Str(&c.head), Value::Str(&c.caller), text(c.remote_client.as_deref()), Value::Int(c.start),
            Value::Int(c.end), Value::Int(c.wait), Value::Int(c.polls), Value::Str(c.outcome), int(c.http_code),
            Value::Int(c.endings), flag(c.overlap), flag(c.whole_seconds),
        ]),
    }
}

/// One kind's file (`open(kind)`, which writes its header) and the rows not yet written.
struct KindFile {
    file: PyObject,
    pending: String,
}

/// DOME records into one file per kind, as CSV text a block at a time: the engine's
/// records formatted here (no dict: dome_engine.rs hands them on), a dict by the same
/// rules, or by `fallback(record)` (python_csv_line) where those leave it to Python.
/// `open(kind)` gives a kind's text file (newline="") at its first row; `flush()` hands
/// the blocks to the files.
#[pyclass(module = "dpmstream.parsers._native")]
pub struct DomeCsvBlocks {
    layouts: Layouts,
    /// By Record::kind_index: which columns hold milliseconds.
    record_is_ms: Vec<Vec<bool>>,
    /// The kinds' files in the order opened, found by kind (`by_name`) or, for the
    /// engine's records, by Record::kind_index (`by_record`: no hashing of the kind's name
    /// twice a record).
    files: Vec<KindFile>,
    by_name: FxMap<String, usize>,
    by_record: [Option<usize>; KINDS],
    open: PyObject,
    fallback: PyObject,
    block_bytes: usize,
    /// Records the engine handed over as they are (no dict made).
    #[pyo3(get)]
    engine_records: u64,
}

impl DomeCsvBlocks {
    /// The kind's file's place in `files`, opened (its header written) at the kind's first row.
    fn slot(&mut self, py: Python<'_>, kind: &str) -> PyResult<usize> {
        if let Some(&at) = self.by_name.get(kind) {
            return Ok(at);
        }
        let file = self.open.call1(py, (kind,))?;
        self.files.push(KindFile { file, pending: String::new() });
        self.by_name.insert(kind.to_string(), self.files.len() - 1);
        Ok(self.files.len() - 1)
    }

    /// The kind's block to its file once it has grown to block_bytes (or `all`).
    fn write_block(py: Python<'_>, f: &mut KindFile, at_least: usize) -> PyResult<()> {
        if f.pending.is_empty() || f.pending.len() < at_least {
            return Ok(());
        }
        let block = PyString::new(py, &f.pending);
        f.pending.clear();
        f.file.call_method1(py, "write", (block,))?;
        Ok(())
    }

    fn write_dict(&mut self, py: Python<'_>, record: &Bound<'_, PyDict>) -> PyResult<()> {
        let (kind, line) = match self.layouts.dict_line(py, record)? {
            Some(kind_line) => kind_line,
            None => {
                let kind = record.get_item("kind")?.ok_or_else(|| PyValueError::new_err("a DOME record with no kind"))?;
                let line = self.fallback.call1(py, (record,))?;
                (kind.extract::<String>()?, line.bind(py).downcast::<PyString>()?.to_str()?.to_string())
            }
        };
        let at = self.slot(py, &kind)?;
        let f = &mut self.files[at];
        f.pending.push_str(&line);
        Self::write_block(py, f, self.block_bytes)
    }

    /// A record from the compiled DOME engine (dome_engine.rs).
    pub(crate) fn write_record(&mut self, py: Python<'_>, rec: &Record) -> PyResult<()> {
        let index = rec.kind_index();
        let at = match self.by_record[index] {
            Some(at) => at,
            None => {
                let at = self.slot(py, KIND_NAMES[index])?;
                self.by_record[index] = Some(at);
                at
            }
        };
        let f = &mut self.files[at];
        let done = push_record_csv(&mut f.pending, &self.record_is_ms[index], rec);
        debug_assert!(done, "the engine's records hold no text where milliseconds belong");
        self.engine_records += 1;
        Self::write_block(py, f, self.block_bytes)
    }
}

#[pymethods]
impl DomeCsvBlocks {
    /// `kinds`: dome_records.KINDS; `open(kind)`: the kind's file, its header written;
    /// `fallback(record)`: Python's line of a dict these rules leave to it.
    #[new]
    #[pyo3(signature = (kinds, open, fallback, block_bytes=1 << 16))]
    fn new(py: Python<'_>, kinds: &Bound<'_, PyDict>, open: PyObject, fallback: PyObject, block_bytes: usize)
           -> PyResult<Self> {
        let layouts = Layouts::new(py, kinds)?;
        let mut record_is_ms = Vec::with_capacity(KINDS);
        for (name, columns) in KIND_NAMES.iter().zip(RECORD_COLUMNS) {
            match layouts.kinds.get(*name) {
                Some(layout) if layout.columns == columns => record_is_ms.push(layout.is_ms.clone()),
                _ => return Err(PyValueError::new_err(format!(
                    "{name}: its columns are not those the compiled engine's records are written in"))),
            }
        }
        Ok(DomeCsvBlocks { layouts, record_is_ms, files: Vec::new(), by_name: FxMap::default(),
                           by_record: [None; KINDS], open, fallback, block_bytes: block_bytes.max(1),
                           engine_records: 0 })
    }

    /// A record as its dict (the CSV sink's write).
    fn __call__(&mut self, py: Python<'_>, record: &Bound<'_, PyDict>) -> PyResult<()> {
        self.write_dict(py, record)
    }

    /// The blocks written so far handed to the files (which may still buffer them).
    fn flush(&mut self, py: Python<'_>) -> PyResult<()> {
        for f in &mut self.files {
            Self::write_block(py, f, 0)?;
        }
        Ok(())
    }
}
