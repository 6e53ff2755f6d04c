//! Record formatting: the CSV row and the JSON object of parsers/records.py, written
//! without Python per cell. Python's csv module and json.dumps stay the reference
//! (tests/parsers/test_records.py compares them); a value of a type the records never
//! hold (a float, a string with a lone surrogate) makes these return None, and Python
//! formats that record.
//!
//! `CsvBlocks` is the CSV writer of the engine's own records (rec.rs): a record goes from
//! the engine to CSV bytes, buffered into blocks written to the two files, with no dict
//! made (streams/sinks/csv.py hands it to the pipeline; deliver.rs gives it the
//! records). Both ways share the cell rules below, so a record's line is the same bytes
//! whichever way it came.

use std::cell::RefCell;
use std::fmt::Write;

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyBool, PyBytes, PyDict, PyInt, PyList, PyString, PyTuple};

use crate::byte_runs::{word, ONES};
use crate::names::Names;
use crate::rec::{CallRec, Rec, RequestRec};
use crate::schema::{
    named, CALL_COLUMNS, CALL_FIELDS, CALL_MS, REQUEST_COLUMNS, REQUEST_FIELDS, REQUEST_MS,
};

pub(crate) enum Value<'a> {
    None,
    Int(i64),
    Str(&'a str),
}

pub(crate) fn value<'a>(v: &'a Bound<'_, PyAny>) -> Option<Value<'a>> {
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

/// Which of `keys` hold milliseconds (shown as seconds), worked out at compile time.
const fn ms_mask<const N: usize>(keys: &[&str; N], ms: &[&str]) -> [bool; N] {
    let mut out = [false; N];
    let mut i = 0;
    while i < N {
        let mut j = 0;
        while j < ms.len() {
            if named(ms, j, keys[i]) {
                out[i] = true;
            }
            j += 1;
        }
        i += 1;
    }
    out
}

const REQUEST_IS_MS: [bool; REQUEST_FIELDS.len()] = ms_mask(&REQUEST_FIELDS, &REQUEST_MS);
const CALL_IS_MS: [bool; CALL_FIELDS.len()] = ms_mask(&CALL_FIELDS, &CALL_MS);

/// A kind's columns, the record key of each, and which of them hold milliseconds.
type Layout = (&'static [&'static str], &'static [&'static str], &'static [bool], &'static Keys);

/// A layout's record keys as interned Python strs, made once a process: a look-up by a
/// str made from a &str for each cell made and hashed that str anew, ~900 instructions a
/// cell, more than the JSON it wrote (issue 30, the worker's records). Interned, they are
/// the very keys the engine's dicts were written with (rec.rs, intern!).
type Keys = GILOnceCell<Vec<Py<PyString>>>;
static REQUEST_KEYS: Keys = GILOnceCell::new();
static CALL_KEYS: Keys = GILOnceCell::new();

fn columns(kind: &str) -> Layout {
    if kind == "request" {
        (&REQUEST_COLUMNS, &REQUEST_FIELDS, &REQUEST_IS_MS, &REQUEST_KEYS)
    } else {
        (&CALL_COLUMNS, &CALL_FIELDS, &CALL_IS_MS, &CALL_KEYS)
    }
}

/// A dict's cells under `keys` (their interned strs in `interned`), in order; None when
/// one is of a type Python formats.
fn dict_values<'a, 'py: 'a>(record: &Bound<'py, PyDict>, keys: &[&str], interned: &'static Keys,
                            items: &'a mut Vec<Option<Bound<'py, PyAny>>>) -> PyResult<Option<Vec<Value<'a>>>> {
    let py = record.py();
    let interned = interned.get_or_init(py, || keys.iter().map(|k| PyString::intern(py, k).unbind()).collect());
    for key in interned {
        items.push(record.get_item(key.bind(py))?);
    }
    let items: &'a Vec<_> = items;
    // Collected into an Option<Vec>, the cells grew their Vec two or three times a
    // record (no size known up front): ~1,300 instructions a record (issue 30).
    let mut values = Vec::with_capacity(items.len());
    for item in items {
        match item.as_ref().map_or(Some(Value::None), value) {
            Some(v) => values.push(v),
            None => return Ok(None),
        }
    }
    Ok(Some(values))
}

/// `n` in decimal, the digits `write!(out, "{n}")` writes, without core::fmt's machinery:
/// formatting the numbers through it was two thirds of what `replay --out` spends writing
/// a record.
pub(crate) fn push_int(out: &mut String, n: i64) {
    if (0..10).contains(&n) {
        // a flag or a one-digit count (every DOME row has two flags): one byte, no copy call
        out.push(char::from(b'0' + n as u8));
        return;
    }
    let mut buf = [0u8; 21]; // a sign and u64::MAX's 20 digits
    let mut at = digits_into(&mut buf, n.unsigned_abs());
    if n < 0 {
        at -= 1;
        buf[at] = b'-';
    }
    push_ascii(out, &buf[at..]);
}

/// "00" to "99": two digits a step, half the divisions of one a step (a DOME call row's
/// thread id has 15 digits and its three stamps 10 each).
const DIGIT_PAIRS: &[u8; 200] = b"\
0001020304050607080910111213141516171819202122232425262728293031323334353637383940414243444546474849\
5051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899";

/// `a`'s decimal digits at the end of `buf`; where they start.
fn digits_into(buf: &mut [u8], mut a: u64) -> usize {
    let mut at = buf.len();
    while a >= 100 {
        let pair = (a % 100) as usize * 2;
        a /= 100;
        at -= 2;
        buf[at..at + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    }
    if a >= 10 {
        at -= 2;
        buf[at..at + 2].copy_from_slice(&DIGIT_PAIRS[a as usize * 2..a as usize * 2 + 2]);
    } else {
        at -= 1;
        buf[at] = b'0' + a as u8;
    }
    at
}

/// ASCII bytes appended at once: a String's push of each digit as a char checked its room
/// and encoded it, every digit of every number of every row (issue 30, `replay --out`).
fn push_ascii(out: &mut String, bytes: &[u8]) {
    debug_assert!(bytes.is_ascii());
    // SAFETY: ASCII bytes are UTF-8 (the callers write digits, a sign and a point).
    out.push_str(unsafe { std::str::from_utf8_unchecked(bytes) });
}

/// ms_to_text: seconds with three decimals, exactly.
fn push_ms(out: &mut String, ms: i64) {
    // sign, up to 17 digits of seconds, the point and three decimals
    let mut buf = [0u8; 22];
    let a = ms.unsigned_abs();
    let frac = a % 1000;
    buf[18] = b'.';
    buf[19] = b'0' + (frac / 100) as u8;
    buf[20] = b'0' + (frac / 10 % 10) as u8;
    buf[21] = b'0' + (frac % 10) as u8;
    let mut at = digits_into(&mut buf[..18], a / 1000);
    if ms < 0 {
        at -= 1;
        buf[at] = b'-';
    }
    push_ascii(out, &buf[at..]);
}

/// Whether `bytes` hold a comma, a quote, a CR or a LF: ASCII, never inside another
/// character's UTF-8 (a search for a set of chars decoded each character first). Eight
/// bytes a step, each byte sought by the has-a-zero-byte test of the word XORed with it,
/// where a byte at a time cost ~5 instructions a byte of every text cell (issue 30).
fn needs_quotes(bytes: &[u8]) -> bool {
    const HIGHS: u64 = ONES << 7;
    // (x - 1) & !x has a byte's high bit set only where x's byte is 0 (or after a
    // borrow from a lower 0 byte): nonzero exactly when x has a 0 byte.
    let hits = |word: u64| {
        [b',', b'"', b'\r', b'\n'].iter().fold(0, |any, &c| {
            let x = word ^ (ONES * u64::from(c));
            any | (x.wrapping_sub(ONES) & !x & HIGHS)
        })
    };
    let word_at = |at: usize| word(bytes, at).expect("8 bytes");
    if bytes.len() < 8 {
        // padded with zero bytes, none of the four
        let mut last = [0u8; 8];
        last[..bytes.len()].copy_from_slice(bytes);
        return hits(u64::from_le_bytes(last)) != 0;
    }
    let mut at = 0;
    while at + 8 < bytes.len() {
        if hits(word_at(at)) != 0 {
            return true;
        }
        at += 8;
    }
    // the last eight bytes, over some already seen: no copy of the rest (a copy call a cell)
    hits(word_at(bytes.len() - 8)) != 0
}

/// One cell as Python's csv writer (excel dialect, QUOTE_MINIMAL) writes it.
fn push_csv_text(out: &mut String, text: &str) {
    if needs_quotes(text.as_bytes()) {
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

/// One CSV row of `values` (the columns' cells, `is_ms` saying which are milliseconds),
/// with csv's "\r\n"; false (nothing to use) for a text where milliseconds belong.
pub(crate) fn push_csv_row<'a>(out: &mut String, is_ms: &[bool], values: impl IntoIterator<Item = Value<'a>>) -> bool {
    for (i, (v, &ms)) in values.into_iter().zip(is_ms).enumerate() {
        if i > 0 {
            out.push(',');
        }
        match (v, ms) {
            (Value::None, _) => {}
            (Value::Int(ms), true) => push_ms(out, ms),
            (Value::Int(n), false) => push_int(out, n),
            (Value::Str(_), true) => return false,
            (Value::Str(s), false) => push_csv_text(out, s),
        }
    }
    out.push_str("\r\n");
    true
}

/// A dict's kind, columns, their units and cells handed to `format`; None (Python
/// formats it) without a str kind or with a cell of a type the records never hold.
fn format_dict(record: &Bound<'_, PyDict>,
               format: impl for<'a> FnOnce(&str, &[&str], &[bool], Vec<Value<'a>>) -> Option<String>)
               -> PyResult<Option<String>> {
    let Some(kind) = record.get_item(intern!(record.py(), "kind"))? else { return Ok(None) };
    let Ok(kind) = kind.extract::<String>() else { return Ok(None) };
    format_kind(record, &kind, format)
}

/// format_dict of a record whose kind is known.
fn format_kind(record: &Bound<'_, PyDict>, kind: &str,
               format: impl for<'a> FnOnce(&str, &[&str], &[bool], Vec<Value<'a>>) -> Option<String>)
               -> PyResult<Option<String>> {
    let (cols, keys, is_ms, interned) = columns(kind);
    let mut items = Vec::with_capacity(keys.len());
    let Some(values) = dict_values(record, keys, interned, &mut items)? else { return Ok(None) };
    Ok(format(kind, cols, is_ms, values))
}

/// The CSV line of a record (with csv's "\r\n"), or None: Python formats it.
#[pyfunction]
pub fn record_csv_line(record: &Bound<'_, PyDict>) -> PyResult<Option<String>> {
    format_dict(record, |_, _, is_ms, values| {
        let mut out = String::with_capacity(256);
        push_csv_row(&mut out, is_ms, values).then_some(out)
    })
}

pub(crate) fn push_json_str(out: &mut String, s: &str, ascii: bool) {
    // Printable ASCII but a quote and a backslash (nearly every text) is written as it
    // is, either way: not a char at a time.
    if s.bytes().all(|b| matches!(b, b' '..=b'~') && b != b'"' && b != b'\\') {
        out.push('"');
        out.push_str(s);
        out.push('"');
        return;
    }
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

/// Below this many milliseconds (4e12 s < 2^42 s) the float nearest ms / 1000 is less than
/// half a millisecond from it (its spacing is 2^-11 s at most), so no decimal of three
/// places or fewer but ms / 1000 itself reads back as that float, and none with more
/// places is shorter: Python's repr of it is the exact decimal (push_ms's digits, its
/// trailing zeros dropped, ".0" kept for whole seconds).
const EXACT_SECONDS_MS: u64 = 4_000_000_000_000_000;

/// Python's repr of ms / 1000.0 (to_json_dict's seconds): the shortest digits that read
/// back as the same float, which Rust prints too; Python adds ".0" to whole numbers and
/// writes exponents outside 1e-4 .. 1e16, which milliseconds never reach below. Below
/// EXACT_SECONDS_MS the decimal is written from the integer (core::fmt's float printing
/// took ~660 instructions a value; a request record has ten).
fn push_seconds(out: &mut String, ms: i64) -> bool {
    if ms.unsigned_abs() < EXACT_SECONDS_MS {
        push_ms(out, ms);
        let mut end = out.len();
        while out.as_bytes()[end - 1] == b'0' {
            end -= 1;
        }
        // "1.500" -> "1.5", "2.000" -> "2.0": the point stays, a digit after it too
        out.truncate(if out.as_bytes()[end - 1] == b'.' { end + 1 } else { end });
        return true;
    }
    push_float_seconds(out, ms)
}

/// ms / 1000.0 printed as a float (Rust's shortest round-trip digits, Python's ".0").
fn push_float_seconds(out: &mut String, ms: i64) -> bool {
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

/// The JSON object of `values` (kind first, then the columns); false for a value Python
/// formats.
fn push_json_object<'a>(out: &mut String, kind: &str, cols: &[&str], is_ms: &[bool],
                        values: impl IntoIterator<Item = Value<'a>>, ascii: bool) -> bool {
    out.push_str("{\"kind\":");
    push_json_str(out, kind, ascii);
    for ((col, v), &ms) in cols.iter().zip(values).zip(is_ms) {
        out.push_str(",\"");
        out.push_str(col);
        out.push_str("\":");
        match (v, ms) {
            (Value::None, _) => out.push_str("null"),
            (Value::Int(ms), true) => {
                if !push_seconds(out, ms) {
                    return false;
                }
            }
            (Value::Int(n), false) => push_int(out, n),
            (Value::Str(_), true) => return false,
            (Value::Str(s), false) => push_json_str(out, s, ascii),
        }
    }
    out.push('}');
    true
}

/// json.dumps(to_json_dict(record), separators=(",", ":"), ensure_ascii=ascii), or None.
#[pyfunction]
#[pyo3(signature = (record, ensure_ascii))]
pub fn record_json(record: &Bound<'_, PyDict>, ensure_ascii: bool) -> PyResult<Option<String>> {
    format_dict(record, |kind, cols, is_ms, values| json_object(kind, cols, is_ms, values, ensure_ascii))
}

fn json_object<'a>(kind: &str, cols: &[&str], is_ms: &[bool], values: Vec<Value<'a>>, ascii: bool) -> Option<String> {
    // a request's object is ~440 bytes, more with a long client DN: room for it at once
    let mut out = String::with_capacity(640);
    push_json_object(&mut out, kind, cols, is_ms, values, ascii).then_some(out)
}

// -- the worker's output messages ----------------------------------------------------------

/// The worker's messages of `records` (streams/kafka/record_topics.output_message, the
/// reference): for a request, (requests_topic, its token's bytes, its JSON's bytes); for a
/// call, (calls_topic, its host's bytes, its JSON's bytes); None for any other record (a
/// DOME kind, not a dict), a missing token or host (output_message raises KeyError), a key
/// that is neither a str nor None, or a value record_json leaves to Python: Python builds
/// those. One call a batch: a record's message made in Python cost ~1.5 us (issue 30).
#[pyfunction]
pub fn record_messages<'py>(records: &Bound<'py, PyList>, requests_topic: &Bound<'py, PyString>,
                            calls_topic: &Bound<'py, PyString>) -> PyResult<Bound<'py, PyList>> {
    let py = records.py();
    let messages = records.iter().map(|record| {
        Ok(match record.downcast_exact::<PyDict>() {
            Ok(record) => record_message(record, requests_topic, calls_topic)?.map(Bound::into_any),
            Err(_) => None,
        })
    });
    PyList::new(py, messages.collect::<PyResult<Vec<_>>>()?)
}

fn record_message<'py>(record: &Bound<'py, PyDict>, requests_topic: &Bound<'py, PyString>,
                       calls_topic: &Bound<'py, PyString>) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let py = record.py();
    let Some(kind) = record.get_item(intern!(py, "kind"))? else { return Ok(None) };
    let Ok(kind) = kind.downcast_exact::<PyString>() else { return Ok(None) };
    let Ok(kind) = kind.to_str() else { return Ok(None) };
    let (topic, key_name) = match kind {
        "request" => (requests_topic, intern!(py, "token")),
        "call" => (calls_topic, intern!(py, "host")),
        _ => return Ok(None),
    };
    let Some(key) = record.get_item(key_name)? else { return Ok(None) };
    // `(key or "").encode()`: None is the empty key; any other value but a str is Python's
    let key: &[u8] = if key.is_none() {
        b""
    } else {
        match key.downcast_exact::<PyString>().map(|k| k.to_str()) {
            Ok(Ok(k)) => k.as_bytes(),
            _ => return Ok(None),
        }
    };
    let json = |kind: &str, cols: &[&str], is_ms: &[bool], values: Vec<Value<'_>>| json_object(kind, cols, is_ms, values, true);
    let Some(value) = format_kind(record, kind, json)? else { return Ok(None) };
    let message = PyTuple::new(py, [topic.as_any().clone(), PyBytes::new(py, key).into_any(),
                                    PyBytes::new(py, value.as_bytes()).into_any()])?;
    Ok(Some(message))
}

// -- the engine's records, straight to CSV ------------------------------------------------

/// The columns the engine's records are read in below, pinned to schema.rs at compile
/// time: a column added, renamed or moved there stops the build here.
const REQUEST_ORDER: [&str; 22] = [
    "host", "token", "op", "client", "nfiles", "status", "accepted", "started", "ended", "auth_s",
    "request_s", "queue_s", "proc_s", "polls", "poll_s", "ready_wait_s", "transfer_s", "done_s",
    "total_s", "end_reason", "ns_calls", "ns_s",
];
const CALL_ORDER: [&str; 13] = [
    "host", "daemon", "pid", "thread", "op", "client", "started", "ended", "duration_s", "rc",
    "auth_s", "session", "token",
];

const fn same_columns<const N: usize>(a: &[&str; N], b: &[&str; N]) -> bool {
    let mut i = 0;
    while i < N {
        if !named(a, i, b[i]) {
            return false;
        }
        i += 1;
    }
    true
}

const _: () = assert!(same_columns(&REQUEST_ORDER, &REQUEST_COLUMNS));
const _: () = assert!(same_columns(&CALL_ORDER, &CALL_COLUMNS));

fn text(t: Option<&str>) -> Value<'_> {
    t.map_or(Value::None, Value::Str)
}

fn int(n: Option<i64>) -> Value<'static> {
    n.map_or(Value::None, Value::Int)
}

/// A request's cells in REQUEST_ORDER (absent name-server totals: empty cells, as the
/// dict without those keys gives).
fn push_request_csv(out: &mut String, py: Python<'_>, r: &RequestRec, names: &Names) -> PyResult<bool> {
    let status = r.status.bind(py).to_str()?;
    let end_reason = r.end_reason.bind(py).to_str()?;
    let (ns_calls, ns_ms) = r.ns.unwrap_or((None, None));
    let values = [
        Value::Str(names.text(r.host)), text(r.token.as_deref()), text(r.op.map(|o| names.text(o))),
        text(r.client.as_deref()), int(r.nfiles), Value::Str(status), int(r.accepted),
        int(r.started), int(r.ended), int(r.auth_ms), int(r.request_ms), int(r.queue_ms),
        int(r.proc_ms), Value::Int(r.polls), Value::Int(r.poll_ms), int(r.ready_wait_ms),
        int(r.transfer_ms), int(r.done_ms), int(r.total_ms), Value::Str(end_reason), int(ns_calls),
        int(ns_ms),
    ];
    Ok(push_csv_row(out, &REQUEST_IS_MS, values))
}

/// A call's cells in CALL_ORDER.
fn push_call_csv(out: &mut String, c: &CallRec, names: &Names) -> bool {
    let values = [
        Value::Str(names.text(c.host)), Value::Str(names.text(c.daemon)), Value::Int(c.pid),
        int(c.thread), Value::Str(names.text(c.op)), text(c.client.as_deref()),
        Value::Int(c.started), int(c.ended), int(c.duration_ms), int(c.rc), int(c.auth_ms),
        text(c.session), text(c.token.as_deref()),
    ];
    push_csv_row(out, &CALL_IS_MS, values)
}

/// Records into DIR/requests.csv and DIR/calls.csv as CSV bytes, a block at a time: the
/// engine's records formatted here (no dict), a dict (a record restored from saved state,
/// or one a Python caller hands in) by the same rules, or by `fallback(record)` (Python's
/// csv_line) where those leave it to Python. Whatever way a record came, the lines of a
/// file keep the order they were written in. `flush()` hands the blocks to the files.
#[pyclass(module = "dpmstream.parsers._native")]
pub struct CsvBlocks {
    /// requests, calls: binary files (`write(bytes)`)
    files: [PyObject; 2],
    fallback: PyObject,
    pending: [String; 2],
    block_bytes: usize,
    /// Records the engine handed over as they are (no dict made).
    #[pyo3(get)]
    engine_records: u64,
}

impl CsvBlocks {
    fn push(&mut self, py: Python<'_>, which: usize) -> PyResult<()> {
        if self.pending[which].len() >= self.block_bytes {
            self.write_block(py, which)?;
        }
        Ok(())
    }

    fn write_block(&mut self, py: Python<'_>, which: usize) -> PyResult<()> {
        if !self.pending[which].is_empty() {
            let block = PyBytes::new(py, self.pending[which].as_bytes());
            self.pending[which].clear();
            self.files[which].call_method1(py, "write", (block,))?;
        }
        Ok(())
    }

    fn write_dict(&mut self, py: Python<'_>, record: &Bound<'_, PyDict>) -> PyResult<()> {
        let kind = record.get_item("kind")?;
        let which = match &kind {
            Some(k) if k.eq("request")? => 0,
            _ => 1, // csv_line's rule: anything not a request is a call's row
        };
        match record_csv_line(record)? {
            Some(line) => self.pending[which].push_str(&line),
            None => {
                let line = self.fallback.call1(py, (record,))?;
                self.pending[which].push_str(line.bind(py).downcast::<PyString>()?.to_str()?);
            }
        }
        self.push(py, which)
    }

    /// A record from the engine (deliver.rs).
    pub(crate) fn write_rec(&mut self, py: Python<'_>, rec: &Rec, names: &RefCell<Names>) -> PyResult<()> {
        let names = names.borrow();
        let (which, done) = match rec {
            Rec::Dict(d) => return self.write_dict(py, d.bind(py)),
            Rec::Request(r) => (0, push_request_csv(&mut self.pending[0], py, r, &names)?),
            Rec::Call(c) => (1, push_call_csv(&mut self.pending[1], c, &names)),
        };
        debug_assert!(done, "the engine's records hold no text where milliseconds belong");
        self.engine_records += 1;
        self.push(py, which)
    }
}

#[pymethods]
impl CsvBlocks {
    #[new]
    #[pyo3(signature = (requests, calls, fallback, block_bytes=1 << 16))]
    fn new(requests: PyObject, calls: PyObject, fallback: PyObject, block_bytes: usize) -> Self {
        CsvBlocks {
            files: [requests, calls],
            fallback,
            pending: [String::with_capacity(block_bytes + 512), String::with_capacity(block_bytes + 512)],
            block_bytes: block_bytes.max(1),
            engine_records: 0,
        }
    }

    /// A record as its dict (a pipeline's on_record, the CSV sink's write).
    fn __call__(&mut self, py: Python<'_>, record: &Bound<'_, PyDict>) -> PyResult<()> {
        self.write_dict(py, record)
    }

    /// The blocks written so far handed to the files (which may still buffer them).
    fn flush(&mut self, py: Python<'_>) -> PyResult<()> {
        self.write_block(py, 0)?;
        self.write_block(py, 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EDGES: [i64; 14] = [0, 1, -1, 9, 10, 999, 1000, 1001, -1500, 1_313_143_200_000,
                              -1_313_143_200_001, 99_999_999_999, i64::MAX, i64::MIN];

    #[test]
    fn integers_are_written_as_rust_formats_them() {
        for n in EDGES {
            let mut out = String::new();
            push_int(&mut out, n);
            assert_eq!(out, format!("{n}"));
        }
    }

    #[test]
    fn a_text_is_quoted_where_it_holds_a_comma_a_quote_or_a_line_break() {
        for (text, want) in [
            ("plain", "plain"), ("", ""), ("a,b", "\"a,b\""), ("say \"hi\"", "\"say \"\"hi\"\"\""),
            ("cr\rhere", "\"cr\rhere\""), ("lf\nhere", "\"lf\nhere\""), ("\u{e9}t\u{e9}", "\u{e9}t\u{e9}"),
            ("/C=CH/CN=J\u{fc}rg, \u{2603}", "\"/C=CH/CN=J\u{fc}rg, \u{2603}\""),
        ] {
            let mut out = String::new();
            push_csv_text(&mut out, text);
            assert_eq!(out, want, "{text:?}");
        }
    }

    /// Every number to 10^5 and each power of ten and its neighbours, of both signs: each
    /// count of digits, odd and even (written two at a time), and the one-digit fast path.
    fn numbers() -> Vec<i64> {
        let mut all: Vec<i64> = (-1_000..=100_000).collect();
        let mut p: i64 = 1;
        for _ in 0..19 {
            p *= if p > i64::MAX / 10 { 1 } else { 10 };
            all.extend([p - 1, p, p + 1, -p, 1_000_000_000_000_007 % p + p]);
        }
        all.extend(EDGES);
        all
    }

    #[test]
    fn every_count_of_digits_is_written_as_rust_formats_it() {
        for n in numbers() {
            let mut out = String::from("x");
            push_int(&mut out, n);
            assert_eq!(out, format!("x{n}"));
            let mut out = String::new();
            push_ms(&mut out, n);
            let a = n.unsigned_abs();
            assert_eq!(out, format!("{}{}.{:03}", if n < 0 { "-" } else { "" }, a / 1000, a % 1000));
        }
    }

    #[test]
    fn a_long_text_is_quoted_wherever_its_special_byte_stands() {
        let base = "/DC=ch/DC=cern/OU=Organic Units/CN=dpmtest/CN=\u{e9}t\u{e9}";
        let mut out = String::new();
        push_csv_text(&mut out, base);
        assert_eq!(out, base);
        for special in [',', '"', '\r', '\n'] {
            for at in 0..base.len() {
                if !base.is_char_boundary(at) {
                    continue;
                }
                let text = format!("{}{special}{}", &base[..at], &base[at..]);
                let mut out = String::new();
                push_csv_text(&mut out, &text);
                assert_eq!(out, format!("\"{}\"", text.replace('"', "\"\"")), "{text:?}");
            }
        }
    }

    #[test]
    fn only_the_four_csv_bytes_quote_a_text_whatever_the_character() {
        for c in (0..0x800).filter_map(char::from_u32) {
            for at in 0..9 {
                let text = format!("{}{c}{}", &"abcdefgh"[..at], &"ijklmnopq"[at..]);
                for short in 1..text.len().min(9) {
                    // each length under a word, with the character in it or cut off
                    let cut = &text.as_bytes()[..short];
                    let want = cut.iter().any(|b| matches!(b, b',' | b'"' | b'\r' | b'\n'));
                    assert_eq!(needs_quotes(cut), want, "{cut:?}");
                }
                let special = matches!(c, ',' | '"' | '\r' | '\n');
                assert_eq!(needs_quotes(text.as_bytes()), special, "{text:?}");
            }
        }
    }

    #[test]
    fn milliseconds_are_seconds_with_three_decimals_exactly() {
        for ms in EDGES {
            let mut out = String::new();
            push_ms(&mut out, ms);
            let a = ms.unsigned_abs();
            let sign = if ms < 0 { "-" } else { "" };
            assert_eq!(out, format!("{sign}{}.{:03}", a / 1000, a % 1000));
        }
        let mut out = String::new();
        push_ms(&mut out, -5);
        assert_eq!(out, "-0.005");
    }

    /// push_seconds's decimal from the integer is the float's shortest round-trip digits
    /// (core::fmt's, Python's repr), wherever it is used: every value to 300 s, the edges,
    /// the powers of ten and their neighbours, and spread values up to its bound.
    #[test]
    fn seconds_from_the_integer_are_the_floats_shortest_digits() {
        let bound = EXACT_SECONDS_MS as i64;
        let mut values: Vec<i64> = (-2_000..300_000).collect();
        values.extend(EDGES.iter().copied().filter(|ms| ms.unsigned_abs() < EXACT_SECONDS_MS));
        values.extend([bound - 1, -(bound - 1), bound - 1000, bound - 999]);
        let mut p = 1i64;
        while p < bound {
            values.extend([p - 1, p, p + 1, 7 * p - 1, -p]);
            p *= 10;
        }
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..300_000 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            let v = (x >> 11) as i64 % bound;   // spread over every magnitude below the bound
            values.extend([v, v >> (x % 50)]);
        }
        for ms in values {
            let (mut exact, mut float) = (String::new(), String::new());
            assert!(push_seconds(&mut exact, ms));
            assert!(push_float_seconds(&mut float, ms));
            assert_eq!(exact, float, "{ms} ms");
        }
    }
}
