//! The line scanner (`FastLines`): the compiled twin of the common case of
//! `parsers/lines.py`, for replay speed.
//!
//! It handles only the line Python would handle the same way every time: printable
//! ASCII, the native envelope, a second whose epoch time Python has already worked out
//! (and handed in with `remember`). For anything else (a non-ASCII DN, a control byte,
//! an rsyslog prefix, a new second, a malformed line) it returns None and Python's
//! LineParser decides, so the rules for time and bad input live in one place. The
//! profile's own regex is compiled here with PCRE2 (JIT, src/jit.rs), as fastpath.py
//! hands it over: split (fastpath.split_form: the envelope, then each role alternative
//! on its own, tried only where its literal prefix fits, src/line_match.rs), or whole:
//! the portable pattern, whose group numbers are those of Python's compiled pattern, or
//! its marked form (fastpath.marked_form), fewer groups renumbered, the matching
//! alternative named by its `(*MARK)`.

use std::collections::HashMap;

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyType};

use crate::event::{Ev, Role};
use crate::hashing::FxMap;
use crate::jit::Pattern;
use crate::line_match::{LineMatch, Part, RolePattern};
use crate::template::{Item, Template};
use crate::names::{Names, Sym};

const ABSENT: usize = usize::MAX;
/// Distinct func/op/state strings kept as shared Python objects (they repeat endlessly).
const INTERN_LIMIT: usize = 4096;
/// Envelope slots, in ENVELOPE_GROUPS order (parsers/profiles.py).
const MONTH: usize = 0;
const SECOND: usize = 4;
const FRAC: usize = 5;
const PID: usize = 6;
const TID: usize = 7;
const FUNC: usize = 8;
/// Event slots, in EVENT_FIELDS order.
const OP: usize = 0;
const CLIENT: usize = 1;
const TOKEN: usize = 2;
const NFILES: usize = 3;
const STATE: usize = 4;
const RC: usize = 5;
const SURL: usize = 6;
const PATH: usize = 7;
/// Fields an Event carries after the envelope (EVENT_FIELDS), and its whole length.
const FIELDS: usize = 8;
const EVENT_LEN: usize = 7 + FIELDS;

struct Alternative {
    role: Option<Py<PyString>>, // None: the catch-all `unmatched`
    code: Option<Role>,   // the engine's handler; None: unmatched, or a role it lacks
    slots: [usize; FIELDS],
}

/// What scan() made of a line: ask Python, no role, or a role with its numbers.
pub(crate) enum Scan {
    Python,
    Unmatched,
    Parsed { alt: usize, ts: i64, pid: i64, tid: i64, nfiles: Option<i64>, rc: Option<i64> },
}

#[pyclass(module = "dpmstream.parsers._native")]
pub(crate) struct FastLines {
    matcher: LineMatch,
    envelope: [usize; 9],
    alternatives: Vec<Alternative>,
    event_type: Py<PyType>,
    host: PyObject,
    daemon: PyObject,
    unmatched: PyObject,
    seconds: FxMap<u64, i64>,
    /// The last second looked up (key, epoch ms): consecutive lines mostly share it.
    last_second: Option<(u64, i64)>,
    /// The last stamp read, as text: the lines of one second share it, so most lines
    /// skip reading five fields and looking the second up (about 200 instructions).
    last_stamp: StampText,
    max_bytes: usize,
    interned: HashMap<Box<str>, Py<PyString>>,
}

/// The text of a stamp whose second is known: where its five fields were in the line, the
/// bytes from the first to the end of the last, and that second's epoch ms. A line with
/// its fields at the same places over the same bytes has the same second.
#[derive(Default)]
struct StampText {
    spans: [(usize, usize); 5],
    text: Vec<u8>,
    base_ms: Option<i64>,
}

impl StampText {
    /// The covering range of the fields at these places.
    fn range(spans: &[(usize, usize); 5]) -> (usize, usize) {
        let lo = spans.iter().map(|s| s.0).min().unwrap_or(0);
        let hi = spans.iter().map(|s| s.1).max().unwrap_or(0);
        (lo, hi)
    }

    fn lookup(&self, line: &[u8], spans: &[(usize, usize); 5]) -> Option<i64> {
        let base = self.base_ms?;
        if *spans != self.spans {
            return None;
        }
        let (lo, hi) = Self::range(spans);
        (line.get(lo..hi)? == self.text.as_slice()).then_some(base)
    }

    fn store(&mut self, line: &[u8], spans: [(usize, usize); 5], base_ms: i64) {
        let (lo, hi) = Self::range(&spans);
        self.spans = spans;
        self.text.clear();
        self.text.extend_from_slice(&line[lo..hi]);
        self.base_ms = Some(base_ms);
    }
}

fn slot(index: i64) -> usize {
    if index < 0 {
        ABSENT
    } else {
        index as usize
    }
}

/// Unsigned decimal of ASCII digits only (what Python's int() would also accept).
fn digits(text: &str) -> Option<u64> {
    if text.is_empty() || text.len() > 18 {
        return None;
    }
    let mut value = 0u64;
    for c in text.bytes() {
        if !c.is_ascii_digit() {
            return None;
        }
        value = value * 10 + u64::from(c - b'0');
    }
    Some(value)
}

fn signed(text: &str) -> Option<i64> {
    match text.strip_prefix('-') {
        Some(rest) => digits(rest).map(|v| -(v as i64)),
        None => digits(text).map(|v| v as i64),
    }
}

/// The key Python's LineParser.second_key gives the same stamp.
fn second_key(parts: [u64; 5]) -> Option<u64> {
    let mut key = 0u64;
    for part in parts {
        if part >= 100 {
            return None;
        }
        key = key * 100 + part;
    }
    Some(key)
}

/// A compiled pattern with the groups Python counted (`groups`, group 0 not counted).
fn counted(pattern: Result<Pattern, String>, groups: usize) -> PyResult<Pattern> {
    let regex = pattern.map_err(PyValueError::new_err)?;
    // captures_len counts group 0; Python's `groups` does not.
    if regex.captures_len() != groups + 1 {
        return Err(PyValueError::new_err(format!(
            "group count differs: PCRE2 {}, Python {}",
            regex.captures_len() - 1,
            groups
        )));
    }
    Ok(regex)
}

/// A template item as fastpath.template_items hands it over: (kind, bytes, a, b).
type RawItem = (u8, Vec<u8>, usize, usize);

/// kind 0: literal `bytes`; 1: a class of the bytes `bytes`, a to b of them (b past
/// any line's length: no bound); 2/3: group a opens/closes; 4: the next a items
/// are optional, taken when the byte there is one of `bytes`.
fn template(raw: Vec<RawItem>, groups: usize, to_end: bool) -> PyResult<Part> {
    let set = |bytes: &[u8]| {
        let mut s = [false; 256];
        for &c in bytes {
            s[usize::from(c)] = true;
        }
        s
    };
    let mut items = Vec::with_capacity(raw.len());
    for (kind, bytes, a, b) in raw {
        items.push(match kind {
            0 => Item::Literal(bytes.into()),
            1 => {
                let set = set(&bytes);
                Item::Class { every: set.iter().all(|&b| b), set, min: a, max: b }
            }
            2 => Item::Open(a),
            3 => Item::Close(a),
            4 => Item::Optional { first: set(&bytes), len: a },
            _ => return Err(PyValueError::new_err(format!("no template item of kind {kind}"))),
        });
    }
    Template::new(items, groups, to_end).map(Part::Template).map_err(PyValueError::new_err)
}

unsafe fn new_int(value: i64) -> *mut ffi::PyObject {
    ffi::PyLong_FromLongLong(value)
}

unsafe fn new_none() -> *mut ffi::PyObject {
    let none = ffi::Py_None();
    ffi::Py_INCREF(none);
    none
}

unsafe fn new_str(text: &str) -> *mut ffi::PyObject {
    ffi::PyUnicode_FromStringAndSize(text.as_ptr().cast(), text.len() as ffi::Py_ssize_t)
}

/// Printable ASCII and tab only: 16 bytes a step without a branch per byte (vectorised).
pub(crate) fn printable_ascii(bytes: &[u8]) -> bool {
    let ok = |c: u8| c.wrapping_sub(0x20) < 0x5f || c == b'\t';
    let mut chunks = bytes.chunks_exact(16);
    for chunk in &mut chunks {
        if !chunk.iter().fold(true, |all, &c| all & ok(c)) {
            return false;
        }
    }
    chunks.remainder().iter().all(|&c| ok(c))
}

impl FastLines {
    /// The epoch ms Python worked out for this second, if it has.
    fn second_ms(&mut self, key: u64) -> Option<i64> {
        if let Some((k, ms)) = self.last_second {
            if k == key {
                return Some(ms);
            }
        }
        let ms = self.seconds.get(&key).copied()?;
        self.last_second = Some((key, ms));
        Some(ms)
    }

    /// The common line, read without Python: printable ASCII (where Python's and PCRE2's
    /// \d \w \s agree exactly), the native envelope, a second Python already converted.
    pub(crate) fn scan(&mut self, bytes: &[u8]) -> Scan {
        if bytes.len() > self.max_bytes || !printable_ascii(bytes) {
            return Scan::Python;
        }
        // SAFETY: printable ASCII and tab only, checked just above: valid UTF-8.
        let text = unsafe { std::str::from_utf8_unchecked(bytes) };
        let Some(alt) = self.matcher.find(bytes) else {
            return Scan::Python;
        };
        let mut spans = [(0usize, 0usize); 5];
        for (i, span) in spans.iter_mut().enumerate() {
            match self.matcher.envelope(self.envelope[MONTH + i]) {
                Some(s) => *span = s,
                None => return Scan::Python,
            }
        }
        let base = match self.last_stamp.lookup(bytes, &spans) {
            Some(base) => base,
            None => {
                let mut stamp = [0u64; 5];
                for (part, &(a, b)) in stamp.iter_mut().zip(&spans) {
                    // Two digits each, as Python remembers them: one key per stamp text.
                    match Some(&text[a..b]).filter(|t| t.len() == 2).and_then(digits) {
                        Some(v) => *part = v,
                        None => return Scan::Python,
                    }
                }
                let Some(base) = second_key(stamp).and_then(|k| self.second_ms(k)) else {
                    return Scan::Python;
                };
                self.last_stamp.store(bytes, spans, base);
                base
            }
        };
        let mut ms = 0i64;
        if let Some(frac) = self.env_text(text, self.envelope[FRAC]) {
            if !frac.is_empty() {
                let f = frac.as_bytes();
                for i in 0..3 {
                    let d = match f.get(i) {
                        Some(c) if c.is_ascii_digit() => i64::from(c - b'0'),
                        Some(_) => return Scan::Python,
                        None => 0,
                    };
                    ms = ms * 10 + d;
                }
            }
        }
        if self.alternatives[alt].role.is_none() {
            return Scan::Unmatched;
        }
        let Some(pid) = self.env_text(text, self.envelope[PID]).and_then(digits) else {
            return Scan::Python;
        };
        let tid = match self.env_text(text, self.envelope[TID]) {
            None => -1,
            Some(t) => match digits(t) {
                Some(v) => v as i64,
                None => return Scan::Python,
            },
        };
        let slots = self.alternatives[alt].slots;
        let nfiles = match self.field_text(text, alt, slots[NFILES]) {
            None => None,
            Some(t) => match digits(t) {
                Some(v) => Some(v as i64),
                None => return Scan::Python,
            },
        };
        let rc = match self.field_text(text, alt, slots[RC]) {
            None => None,
            Some(t) => match signed(t) {
                Some(v) => Some(v),
                None => return Scan::Python,
            },
        };
        Scan::Parsed { alt, ts: base + ms, pid: pid as i64, tid, nfiles, rc }
    }

    /// The engine's event of a line scan() parsed (None: a role the engine lacks).
    pub(crate) fn event<'a>(
        &self,
        names: &mut Names,
        text: &'a str,
        host: Sym,
        daemon: Sym,
        parsed: (usize, i64, i64, i64, Option<i64>, Option<i64>),
    ) -> Option<Ev<'a>> {
        let (alt, ts, pid, tid, nfiles, rc) = parsed;
        let a = &self.alternatives[alt];
        let role = a.code?;
        let slots = a.slots;
        Some(Ev {
            ts,
            host,
            daemon,
            pid,
            tid,
            func: names.intern(self.env_text(text, self.envelope[FUNC]).unwrap_or("")),
            role,
            op: self.field_text(text, alt, slots[OP]).map(|t| names.intern(t)),
            client: self.field_text(text, alt, slots[CLIENT]),
            token: self.field_text(text, alt, slots[TOKEN]),
            nfiles,
            state: self.field_text(text, alt, slots[STATE]).map(|t| names.intern(t)),
            rc,
            surl: self.field_text(text, alt, slots[SURL]),
            path: self.field_text(text, alt, slots[PATH]),
        })
    }

    pub(crate) fn host_daemon<'py>(&self, py: Python<'py>) -> (Bound<'py, PyAny>, Bound<'py, PyAny>) {
        (self.host.bind(py).clone(), self.daemon.bind(py).clone())
    }

    /// The text of envelope group `group` in the last line scanned.
    fn env_text<'a>(&self, line: &'a str, group: usize) -> Option<&'a str> {
        if group == ABSENT {
            return None;
        }
        self.matcher.envelope(group).map(|(a, b)| &line[a..b])
    }

    /// The text of group `group` of alternative `alt`, the one the last line scanned took.
    fn field_text<'a>(&self, line: &'a str, alt: usize, group: usize) -> Option<&'a str> {
        if group == ABSENT {
            return None;
        }
        self.matcher.field(alt, group).map(|(a, b)| &line[a..b])
    }

    /// A new reference to a shared Python string equal to `text`.
    unsafe fn interned(&mut self, py: Python<'_>, text: &str) -> *mut ffi::PyObject {
        if let Some(s) = self.interned.get(text) {
            return s.clone_ref(py).into_ptr();
        }
        let s = PyString::new(py, text).unbind();
        if self.interned.len() < INTERN_LIMIT {
            self.interned.insert(text.into(), s.clone_ref(py));
        }
        s.into_ptr()
    }

    unsafe fn opt_interned(&mut self, py: Python<'_>, text: Option<&str>) -> *mut ffi::PyObject {
        match text {
            Some(t) => self.interned(py, t),
            None => new_none(),
        }
    }
}

#[pymethods]
impl FastLines {
    /// pattern: the profile's combined native regex in `regex` syntax, with Python's
    /// group numbering; envelope: group per ENVELOPE_GROUPS entry (-1: absent);
    /// alternatives: (wrapper group, role or None for unmatched, group per EVENT_FIELDS);
    /// marked: the alternatives open with `(*MARK:i)` instead (wrapper groups unused);
    /// roles: the split form instead (fastpath.split_form): `pattern` is the envelope
    /// alone and `groups` its groups, and per alternative (its literal prefix, its own
    /// pattern, matched anchored where the envelope ends, its groups), which its field
    /// slots number (wrapper groups unused).
    #[new]
    /// Each part of the split form (its envelope: `envelope_items`) may come as a template
    /// too (fastpath.template_items, src/template.rs), then matched without PCRE2.
    #[pyo3(signature = (pattern, groups, envelope, alternatives, event_type, host, daemon, unmatched, max_chars, marked=false, roles=None, envelope_items=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        pattern: &str,
        groups: usize,
        envelope: Vec<i64>,
        alternatives: Vec<(i64, Option<String>, Vec<i64>)>,
        event_type: Bound<'_, PyType>,
        host: PyObject,
        daemon: PyObject,
        unmatched: PyObject,
        max_chars: usize,
        marked: bool,
        roles: Option<Vec<(Vec<u8>, String, usize, Option<Vec<RawItem>>)>>,
        envelope_items: Option<Vec<RawItem>>,
    ) -> PyResult<Self> {
        let regex = counted(Pattern::new(pattern), groups)?;
        if envelope.len() != 9 {
            return Err(PyValueError::new_err("envelope needs 9 slots"));
        }
        let mut env = [ABSENT; 9];
        for (i, g) in envelope.into_iter().enumerate() {
            env[i] = slot(g);
        }
        if env[MONTH..=SECOND].contains(&ABSENT) || env[PID] == ABSENT || env[FUNC] == ABSENT {
            return Err(PyValueError::new_err("envelope lacks a stamp, pid or func group"));
        }
        let mut alts = Vec::with_capacity(alternatives.len());
        let mut wrappers = Vec::with_capacity(alternatives.len());
        for (group, role, fields) in alternatives {
            if fields.len() != FIELDS {
                return Err(PyValueError::new_err(format!("an alternative needs {FIELDS} field slots")));
            }
            let mut slots = [ABSENT; FIELDS];
            for (i, g) in fields.into_iter().enumerate() {
                slots[i] = slot(g);
            }
            wrappers.push(slot(group));
            alts.push(Alternative {
                code: role.as_deref().and_then(Role::from_name),
                role: role.map(|r| PyString::intern(py, &r).unbind()),
                slots,
            });
        }
        let matcher = match roles {
            None => LineMatch::Whole { regex, marked, wrappers },
            Some(roles) => {
                if roles.len() != alts.len() {
                    return Err(PyValueError::new_err("the split form needs a pattern per alternative"));
                }
                let mut patterns = Vec::with_capacity(roles.len());
                for (prefix, role, groups, items) in roles {
                    let part = match items {
                        Some(items) => template(items, groups, true)?,
                        None => Part::Pcre(counted(Pattern::anchored(&role), groups)?),
                    };
                    patterns.push(RolePattern { prefix: prefix.into(), part });
                }
                let envelope = match envelope_items {
                    Some(items) => template(items, groups, false)?,
                    None => Part::Pcre(regex),
                };
                LineMatch::Split { envelope, roles: patterns }
            }
        };
        Ok(FastLines {
            matcher,
            envelope: env,
            alternatives: alts,
            event_type: event_type.unbind(),
            host,
            daemon,
            unmatched,
            seconds: FxMap::default(),
            last_second: None,
            last_stamp: StampText::default(),
            max_bytes: max_chars,
            interned: HashMap::new(),
        })
    }

    /// The Event of `line`, `unmatched` for a line of no role, or None: ask Python.
    fn parse(&mut self, py: Python<'_>, line: &Bound<'_, PyString>) -> PyResult<PyObject> {
        let Ok(text) = line.to_str() else {
            return Ok(py.None());
        };
        let (alt_index, ts, pid, tid, nfiles, rc) = match self.scan(text.as_bytes()) {
            Scan::Python => return Ok(py.None()),
            Scan::Unmatched => return Ok(self.unmatched.clone_ref(py)),
            Scan::Parsed { alt, ts, pid, tid, nfiles, rc } => (alt, ts, pid, tid, nfiles, rc),
        };
        let slots = self.alternatives[alt_index].slots;
        let func = self.env_text(text, self.envelope[FUNC]).unwrap_or("");
        let op = self.field_text(text, alt_index, slots[OP]);
        let client = self.field_text(text, alt_index, slots[CLIENT]);
        let token = self.field_text(text, alt_index, slots[TOKEN]);
        let state = self.field_text(text, alt_index, slots[STATE]);
        let surl = self.field_text(text, alt_index, slots[SURL]);
        let path = self.field_text(text, alt_index, slots[PATH]);
        // An Event (a NamedTuple: a tuple subclass) built the way tuple.__new__ builds one.
        unsafe {
            let tp = self.event_type.as_ptr().cast::<ffi::PyTypeObject>();
            let alloc = (*tp).tp_alloc.unwrap_or(ffi::PyType_GenericAlloc);
            let ev = alloc(tp, EVENT_LEN as ffi::Py_ssize_t);
            if ev.is_null() {
                return Err(PyErr::fetch(py));
            }
            let items: [*mut ffi::PyObject; EVENT_LEN] = [
                new_int(ts),
                self.host.clone_ref(py).into_ptr(),
                self.daemon.clone_ref(py).into_ptr(),
                new_int(pid),
                new_int(tid),
                self.interned(py, func),
                self.alternatives[alt_index].role.as_ref().map_or_else(|| new_none(), |r| r.clone_ref(py).into_ptr()),
                self.opt_interned(py, op),
                client.map_or_else(|| new_none(), |t| new_str(t)),
                token.map_or_else(|| new_none(), |t| new_str(t)),
                nfiles.map_or_else(|| new_none(), |v| new_int(v)),
                self.opt_interned(py, state),
                rc.map_or_else(|| new_none(), |v| new_int(v)),
                surl.map_or_else(|| new_none(), |t| new_str(t)),
                path.map_or_else(|| new_none(), |t| new_str(t)),
            ];
            let mut failed = false;
            for (i, item) in items.into_iter().enumerate() {
                failed |= item.is_null();
                ffi::PyTuple_SET_ITEM(ev, i as ffi::Py_ssize_t, item);
            }
            if failed {
                // Out of memory: the tuple's dealloc releases what was made (NULLs skipped).
                ffi::Py_DECREF(ev);
                return Err(PyErr::fetch(py));
            }
            Ok(PyObject::from_owned_ptr(py, ev))
        }
    }

    /// Python worked out the epoch ms of a whole second (LineParser.second_key).
    fn remember(&mut self, key: u64, base_ms: i64) {
        self.seconds.insert(key, base_ms);
        self.last_second = None;
        self.last_stamp = StampText::default();
    }

    /// The clock's year moved, or the cache is full: every second is worked out again.
    fn forget(&mut self) {
        self.seconds.clear();
        self.last_second = None;
        self.last_stamp = StampText::default();
    }

    fn __len__(&self) -> usize {
        self.seconds.len()
    }
}
