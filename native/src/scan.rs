//! The line scanner (`FastLines`): the compiled twin of the common case of
//! `parsers/lines.py`, for replay speed.
//!
//! It handles only the line Python would handle the same way every time: printable
//! ASCII, the native envelope, a second whose epoch time Python has already worked out
//! (and handed in with `remember`); or, as the twin of the rsyslog form, the same behind
//! a prefix whose receive time Python read that second under (`remember_in`, Prefix).
//! For anything else (a non-ASCII DN, a control byte, a new second or offset, a routed
//! tag, a malformed line) it returns None and Python's LineParser decides, so the rules
//! for time and bad input live in one place. The
//! profile's own combined regex is compiled here with PCRE2 (JIT, src/jit.rs), as
//! fastpath.py hands it over: the portable pattern, whose group numbers are those of
//! Python's compiled pattern, or its marked form (fastpath.marked_form), fewer groups
//! renumbered, the matching alternative named by its `(*MARK)`.

use std::collections::HashMap;

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyType};

use crate::event::{Ev, Role};
use crate::hashing::FxMap;
use crate::jit::Pattern;
use crate::lcgdm_head;
use crate::lcgdm_head::Numbers;
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
    group: usize, // its wrapper group; unused when the pattern is marked
    role: Option<Py<PyString>>, // None: the catch-all `unmatched`
    code: Option<Role>,   // the engine's handler; None: unmatched, or a role it lacks
    slots: [usize; FIELDS],
}

/// What scan() made of a line: ask Python, no role, or a role with its numbers; or, for
/// the rsyslog twin, a line its prefix's tag routes to another daemon: `other_tags`' k-th
/// (Prefix.routes says which twin reads it).
pub(crate) enum Scan {
    Python,
    Unmatched,
    Routed(usize),
    Parsed { alt: usize, ts: i64, pid: i64, tid: i64, nfiles: Option<i64>, rc: Option<i64> },
}

#[pyclass(module = "dpmstream.parsers._native")]
pub(crate) struct FastLines {
    regex: Pattern,
    /// Each alternative closes with `(*MARK:i)`, i its index here, and has no wrapper
    /// group (fastpath.py's marked form): the mark tells which one matched.
    marked: bool,
    /// The envelope is lcgdm_head's, read by hand: `regex` is then the marked pattern's
    /// alternation alone, matched where the envelope ends (`\G`), its groups renumbered.
    hand_head: bool,
    /// With the envelope read by hand: per first byte of the message, the pattern to
    /// match there (0: `regex`; k: `first.patterns[k - 1]`), and the one that matched last.
    first: FirstByte,
    envelope: [usize; 9],
    /// The envelope's spans in the line scan() took last (ENVELOPE_GROUPS order).
    head: lcgdm_head::Spans,
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
    /// Set for the twin of the rsyslog-wrapped form (lines.py's `_rsyslog`): None, the native.
    rsyslog: Option<Prefix>,
}

/// What the rsyslog form's twin checks beyond the pattern, so that it takes only lines
/// LineParser.parse_python would read the same way every time: the native form does not
/// match (Python tries it first), the tag routes nowhere else, and the prefix's receive
/// time shares its year, month and stated offset (`context`) with the line Python worked
/// out the seconds under (remember_in): then the year, the offset and so each stamp's
/// epoch ms are the same, and Python's clock state (the offset last stated) does not move.
struct Prefix {
    rtime: usize,
    host: usize,
    tag: usize,
    other_tags: Vec<Box<[u8]>>,
    native_head: Pattern,
    /// native_head is lcgdm_head's envelope: read by hand, which refuses exactly the lines
    /// PCRE2 does, and an rsyslog line at its first bytes (a JIT match a line, saved).
    native_by_hand: bool,
    context: Vec<u8>,
    /// The parser's own host: feed_lines takes a line only when its prefix names it.
    own_host: Vec<u8>,
    /// Per tag of `other_tags`, the rsyslog twin of the parser Python routes its lines to
    /// (Source._routed's, handed in by `route` once both twins are built): feed_lines has
    /// it read them, as LineParser.parse of that parser would, with no Python per line.
    routes: Vec<Option<Py<FastLines>>>,
}

/// What prefix_known made of an rsyslog line: the twin reads it, Python does, or it is a
/// routed tag's (the k-th of other_tags).
enum Known {
    Yes,
    No,
    Routed(usize),
}

/// The part of an rsyslog receive time its stamp's reading depends on: the year and month
/// (lines.py's prefix_year: the stamp's year is the nearest to them) and the stated
/// offset (`Z` or `+hh:mm`, rfc3339_offset_minutes). Cut here alone, both from the line
/// scanned (prefix_known) and from the receive time Python hands to remember_in; None:
/// too short to say.
fn context_parts(rtime: &[u8]) -> Option<(&[u8], &[u8])> {
    let tail = if matches!(rtime.last(), Some(b'Z' | b'z')) { 1 } else { 6 };
    if rtime.len() < 7 + tail {
        return None;
    }
    Some((&rtime[..7], &rtime[rtime.len() - tail..]))
}

/// Whether the context cut as (`ym`, `offset`) is `known` (Prefix.context, both joined).
fn is_context(known: &[u8], ym: &[u8], offset: &[u8]) -> bool {
    known.len() == ym.len() + offset.len() && known[..ym.len()] == *ym && known[ym.len()..] == *offset
}

/// The marked alternation split by the message's first byte: each pattern holds the
/// alternatives (their branches as they are, marks and groups included, in their order)
/// that can start with that byte, the rest left out. PCRE2's JIT code tries every
/// alternative in turn, ~20 instructions for each that fails at its first byte: a
/// `returns` line tried ten before its own. An alternative's first byte is PCRE2's first
/// code unit of its body (a letter: either case); one without is in every pattern. At
/// most MAX_FIRST_PATTERNS patterns (each compiled and JIT-compiled at start-up, ~0.2 M
/// instructions): a profile whose roles open with more bytes keeps one pattern.
const MAX_FIRST_PATTERNS: usize = 16;

#[derive(Default)]
struct FirstByte {
    patterns: Vec<Pattern>,
    index: Vec<u8>, // 256 entries, or none: `regex` for every byte
    last: usize,
}

impl FirstByte {
    /// The split of `alternation` (`(?|B0|...|Bn-1)TAIL`, branch i `(?:(?:BODY)(*MARK:i))`,
    /// as fastpath.marked_form writes them) into patterns `(?s)\G(?|...)TAIL`: none where
    /// it is not written so or no byte leaves an alternative out.
    fn split(alternation: &str, n: usize) -> FirstByte {
        let none = FirstByte::default();
        let Some(rest) = alternation.strip_prefix("(?|") else { return none };
        if n > 64 || n == 0 {
            return none;
        }
        let (mut branches, mut firsts, mut pos) = (Vec::with_capacity(n), Vec::with_capacity(n), 0);
        for i in 0..n {
            let mark = format!("(*MARK:{i}))");
            let Some(at) = rest[pos..].find(&mark) else { return none };
            let end = pos + at + mark.len();
            let branch = &rest[pos..end];
            let Some(body) = branch.strip_prefix("(?:(?:").and_then(|b| b.strip_suffix(&format!("){mark}"))) else {
                return none;
            };
            if body.contains("(*") {
                return none; // a verb of its own: not a branch marked_form wrote
            }
            branches.push(branch);
            firsts.push(Pattern::first_byte(&format!("(?s)(?:{body})")));
            pos = end;
            if i + 1 < n {
                if rest.get(end..end + 1) != Some("|") {
                    return none;
                }
                pos += 1;
            }
        }
        let tail = &rest[pos..];
        if !tail.starts_with(')') {
            return none;
        }
        let all = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
        let (mut masks, mut index) = (Vec::<u64>::new(), vec![0u8; 256]);
        for byte in 0..=255u8 {
            let mask = (0..n)
                .filter(|&i| firsts[i].map_or(true, |f| f.eq_ignore_ascii_case(&byte)))
                .fold(0u64, |m, i| m | 1 << i);
            if mask == all {
                continue;
            }
            let k = masks.iter().position(|&m| m == mask).unwrap_or_else(|| {
                masks.push(mask);
                masks.len() - 1
            });
            index[usize::from(byte)] = (k + 1) as u8;
        }
        if masks.is_empty() || masks.len() > MAX_FIRST_PATTERNS {
            return none;
        }
        let mut patterns = Vec::with_capacity(masks.len());
        for mask in masks {
            let kept: Vec<&str> = (0..n).filter(|i| mask >> i & 1 == 1).map(|i| branches[i]).collect();
            match Pattern::new(&format!(r"(?s)\G(?|{}{tail}", kept.join("|"))) {
                Ok(p) => patterns.push(p),
                Err(_) => return none,
            }
        }
        FirstByte { patterns, index, last: 0 }
    }
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

/// Unsigned decimal of ASCII digits only (what Python's int() would also accept), at
/// most 18 of them.
fn digits(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    lcgdm_head::value(text.as_bytes())
}

fn signed(text: &str) -> Option<i64> {
    match text.strip_prefix('-') {
        Some(rest) => digits(rest).map(|v| -(v as i64)),
        None => digits(text).map(|v| v as i64),
    }
}

/// The key of a stamp from its five fields in a pattern's match: two digits each, as
/// Python remembers them (one key per stamp text).
fn stamp_key(text: &str, spans: &[(usize, usize); 5]) -> Option<u64> {
    let mut stamp = [0u64; 5];
    for (part, &(a, b)) in stamp.iter_mut().zip(spans) {
        *part = Some(&text[a..b]).filter(|t| t.len() == 2).and_then(digits)?;
    }
    second_key(stamp)
}

/// The envelope's numbers from a pattern's spans (the envelope lcgdm_head does not read),
/// all but the stamp's key (left 0: stamp_key, or the stamp text seen last, gives the
/// second). None: a fraction that is not digits.
fn span_numbers(text: &str, head: &lcgdm_head::Spans) -> Option<Numbers> {
    let field = |i: usize| head[i].map(|(a, b)| &text[a..b]);
    let mut ms = 0i64;
    if let Some(frac) = field(FRAC).filter(|f| !f.is_empty()) {
        let f = frac.as_bytes();
        for i in 0..3 {
            let d = match f.get(i) {
                Some(c) if c.is_ascii_digit() => i64::from(c - b'0'),
                Some(_) => return None,
                None => 0,
            };
            ms = ms * 10 + d;
        }
    }
    let pid = field(PID).and_then(digits);
    let tid = match field(TID) {
        None => Some(-1),
        Some(t) => digits(t).map(|v| v as i64),
    };
    Some(Numbers { key: 0, ms, pid, tid })
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

/// Printable ASCII and tab only: 16 bytes a step without a branch per byte (vectorised),
/// the last bytes of a line of 16 or more as its last 16 again (one step, where byte by
/// byte they cost ~10 instructions each).
pub(crate) fn printable_ascii(bytes: &[u8]) -> bool {
    let ok = |c: u8| c.wrapping_sub(0x20) < 0x5f || c == b'\t';
    let all = |chunk: &[u8; 16]| chunk.iter().fold(true, |all, &c| all & ok(c));
    let Some(tail) = bytes.len().checked_sub(16) else {
        return bytes.iter().all(|&c| ok(c));
    };
    let mut chunks = bytes.chunks_exact(16);
    for chunk in &mut chunks {
        if !all(chunk.try_into().expect("chunks of 16")) {
            return false;
        }
    }
    chunks.remainder().is_empty() || all(bytes[tail..].try_into().expect("the last 16"))
}

impl FastLines {
    /// Whether an rsyslog line (the twin's pattern matched it) is one Python would read
    /// as the seconds remembered say: see Prefix.
    /// A routed tag is told apart where Python tells it (parse_python: the native form
    /// tried first, then the tag, before any reading of time).
    fn prefix_known(&mut self, bytes: &[u8]) -> Known {
        let regex = &self.regex;
        let Some(prefix) = self.rsyslog.as_mut() else {
            return Known::Yes;
        };
        let native = if prefix.native_by_hand {
            lcgdm_head::read(bytes, &mut [None; 9]).is_some()
        } else {
            prefix.native_head.find(bytes) != Ok(false)
        };
        if native {
            return Known::No;
        }
        if prefix.tag != ABSENT {
            if let Some((a, b)) = regex.get(prefix.tag) {
                if let Some(k) = prefix.other_tags.iter().position(|t| **t == bytes[a..b]) {
                    return Known::Routed(k);
                }
            }
        }
        let Some((a, b)) = (prefix.rtime != ABSENT).then(|| regex.get(prefix.rtime)).flatten() else {
            return Known::No;
        };
        let Some((ym, offset)) = context_parts(&bytes[a..b]) else {
            return Known::No;
        };
        if is_context(&prefix.context, ym, offset) {
            Known::Yes
        } else {
            Known::No
        }
    }

    /// The twin that reads the lines of `other_tags`' k-th tag, once Python handed it in.
    pub(crate) fn route_of(&self, k: usize) -> Option<&Py<FastLines>> {
        self.rsyslog.as_ref()?.routes.get(k)?.as_ref()
    }

    /// Whether the line scan() took last names a host of its own in its rsyslog prefix
    /// (not the parser's): its event is not the one feed_lines would make.
    pub(crate) fn names_another_host(&self, line: &[u8]) -> bool {
        self.rsyslog.as_ref().is_some_and(|p| {
            self.regex.get(p.host).is_none_or(|(a, b)| line[a..b] != *p.own_host)
        })
    }

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
        let (alt, base, numbers) = if self.hand_head {
            // The reader sums the numbers it found; the stamp's key is the second's.
            let mut numbers = Numbers::default();
            let Some(end) = lcgdm_head::read_numbers(bytes, &mut self.head, &mut numbers) else {
                return Scan::Python;
            };
            let k = self.first.index.get(bytes.get(end).map_or(256, |&b| usize::from(b))).map_or(0, |&k| usize::from(k));
            let regex = if k == 0 { &mut self.regex } else { &mut self.first.patterns[k - 1] };
            if regex.find_str_at(text, end) != Ok(true) {
                return Scan::Python;
            }
            self.first.last = k;
            let Some(alt) = self.matched_alternative() else {
                return Scan::Python;
            };
            let Some(base) = self.second_ms(numbers.key) else {
                return Scan::Python;
            };
            (alt, base, numbers)
        } else {
            if self.regex.find(bytes) != Ok(true) {
                return Scan::Python;
            }
            for (span, &group) in self.head.iter_mut().zip(&self.envelope) {
                *span = if group == ABSENT { None } else { self.regex.get(group) };
            }
            if self.rsyslog.is_some() {
                match self.prefix_known(bytes) {
                    Known::Yes => {}
                    Known::No => return Scan::Python,
                    Known::Routed(k) => return Scan::Routed(k),
                }
            }
            let Some(alt) = self.matched_alternative() else {
                return Scan::Python;
            };
            let mut spans = [(0usize, 0usize); 5];
            for (i, span) in spans.iter_mut().enumerate() {
                match self.head[MONTH + i] {
                    Some(s) => *span = s,
                    None => return Scan::Python,
                }
            }
            let base = match self.last_stamp.lookup(bytes, &spans) {
                Some(base) => base,
                None => {
                    let Some(base) = stamp_key(text, &spans).and_then(|k| self.second_ms(k)) else {
                        return Scan::Python;
                    };
                    self.last_stamp.store(bytes, spans, base);
                    base
                }
            };
            let Some(numbers) = span_numbers(text, &self.head) else {
                return Scan::Python;
            };
            (alt, base, numbers)
        };
        if self.alternatives[alt].role.is_none() {
            return Scan::Unmatched;
        }
        let (Some(pid), Some(tid)) = (numbers.pid, numbers.tid) else {
            return Scan::Python;
        };
        let slots = self.alternatives[alt].slots;
        let nfiles = match self.span_text(text, slots[NFILES]) {
            None => None,
            Some(t) => match digits(t) {
                Some(v) => Some(v as i64),
                None => return Scan::Python,
            },
        };
        let rc = match self.span_text(text, slots[RC]) {
            None => None,
            Some(t) => match signed(t) {
                Some(v) => Some(v),
                None => return Scan::Python,
            },
        };
        Scan::Parsed { alt, ts: base + numbers.ms, pid: pid as i64, tid, nfiles, rc }
    }

    /// The engine's event of a line scan() parsed (None: a role the engine lacks).
    /// Inlined into feed_lines' step (py_engine.rs, feed_scanned): called, it cost ~60
    /// instructions a line more (the event built in one frame and copied to another).
    #[inline(always)]
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
            func: names.intern(self.head_text(text, FUNC).unwrap_or("")),
            role,
            op: self.span_text(text, slots[OP]).map(|t| names.intern(t)),
            client: self.span_text(text, slots[CLIENT]),
            token: self.span_text(text, slots[TOKEN]),
            nfiles,
            state: self.span_text(text, slots[STATE]).map(|t| names.intern(t)),
            rc,
            surl: self.span_text(text, slots[SURL]),
            path: self.span_text(text, slots[PATH]),
        })
    }

    pub(crate) fn host_daemon<'py>(&self, py: Python<'py>) -> (Bound<'py, PyAny>, Bound<'py, PyAny>) {
        (self.host.bind(py).clone(), self.daemon.bind(py).clone())
    }

    /// The text of envelope field `field` (ENVELOPE_GROUPS' index) in the line scanned last.
    #[inline(always)]
    fn head_text<'a>(&self, line: &'a str, field: usize) -> Option<&'a str> {
        self.head[field].map(|(a, b)| &line[a..b])
    }

    /// Inlined: a line's event reads six of these from the pattern that matched.
    #[inline(always)]
    fn span_text<'a>(&self, line: &'a str, group: usize) -> Option<&'a str> {
        if group == ABSENT {
            return None;
        }
        self.matched().get(group).map(|(a, b)| &line[a..b])
    }

    /// The pattern that took the last line.
    #[inline(always)]
    fn matched(&self) -> &Pattern {
        match self.first.last {
            0 => &self.regex,
            k => &self.first.patterns[k - 1],
        }
    }

    /// The index of the alternative the last match took: by its mark, or by its wrapper group.
    fn matched_alternative(&self) -> Option<usize> {
        if !self.marked {
            return self.alternatives.iter().position(|a| self.regex.get(a.group).is_some());
        }
        let index = self.matched().mark_number()?;
        (index < self.alternatives.len()).then_some(index)
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
    /// marked: the alternatives close with `(*MARK:i)` instead (wrapper groups unused).
    #[new]
    /// rsyslog: for the rsyslog form's twin, (rtime, host and tag group (-1: none), the
    /// program tags routed to other profiles, the native form's envelope alone): see Prefix.
    #[pyo3(signature = (pattern, groups, envelope, alternatives, event_type, host, daemon, unmatched, max_chars, marked=false, rsyslog=None))]
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
        rsyslog: Option<(i64, i64, i64, Vec<String>, String)>,
    ) -> PyResult<Self> {
        // The marked pattern opening with lcgdm_head's envelope (groups 1 to 9) has its
        // alternation matched alone, where the envelope read by hand ends: its groups are
        // numbered 9 lower, the alternatives' slots with them.
        let hand_prefix = lcgdm_head::anchored();
        let hand_head = marked
            && rsyslog.is_none()
            && pattern.starts_with(&hand_prefix)
            && pattern[hand_prefix.len()..].starts_with("(?|")
            && envelope.iter().copied().eq(1..=9i64);
        let shift = if hand_head { 9 } else { 0 };
        let regex = if hand_head {
            Pattern::new(&format!(r"(?s)\G{}", &pattern[hand_prefix.len()..]))
        } else {
            Pattern::new(pattern)
        }
        .map_err(PyValueError::new_err)?;
        // captures_len counts group 0; Python's `groups` does not.
        if regex.captures_len() + shift != groups + 1 {
            return Err(PyValueError::new_err(format!(
                "group count differs: PCRE2 {}, Python {}",
                regex.captures_len() + shift - 1,
                groups
            )));
        }
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
        for (group, role, fields) in alternatives {
            if fields.len() != FIELDS {
                return Err(PyValueError::new_err(format!("an alternative needs {FIELDS} field slots")));
            }
            let mut slots = [ABSENT; FIELDS];
            for (i, g) in fields.into_iter().enumerate() {
                slots[i] = match slot(g) {
                    ABSENT => ABSENT,
                    g if g > shift => g - shift,
                    _ => return Err(PyValueError::new_err("an alternative's field is an envelope group")),
                };
            }
            alts.push(Alternative {
                group: slot(group),
                code: role.as_deref().and_then(Role::from_name),
                role: role.map(|r| PyString::intern(py, &r).unbind()),
                slots,
            });
        }
        let rsyslog = match rsyslog {
            None => None,
            Some((rtime, host_group, tag, other_tags, native_head)) => {
                if slot(rtime) == ABSENT || slot(host_group) == ABSENT {
                    return Err(PyValueError::new_err("an rsyslog form needs its rtime and host groups"));
                }
                Some(Prefix {
                    routes: other_tags.iter().map(|_| None).collect(),
                    rtime: slot(rtime),
                    host: slot(host_group),
                    tag: slot(tag),
                    other_tags: other_tags.into_iter().map(|t| t.into_bytes().into_boxed_slice()).collect(),
                    native_head: Pattern::new(&native_head).map_err(PyValueError::new_err)?,
                    native_by_hand: native_head == hand_prefix,
                    context: Vec::new(),
                    own_host: host.extract::<String>(py)?.into_bytes(),
                })
            }
        };
        Ok(FastLines {
            rsyslog,
            regex,
            marked,
            hand_head,
            first: if hand_head { FirstByte::split(&pattern[hand_prefix.len()..], alts.len()) } else { FirstByte::default() },
            envelope: env,
            head: [None; 9],
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
            Scan::Python | Scan::Routed(_) => return Ok(py.None()),
            Scan::Unmatched => return Ok(self.unmatched.clone_ref(py)),
            Scan::Parsed { alt, ts, pid, tid, nfiles, rc } => (alt, ts, pid, tid, nfiles, rc),
        };
        let slots = self.alternatives[alt_index].slots;
        let func = self.head_text(text, FUNC).unwrap_or("");
        let op = self.span_text(text, slots[OP]);
        let client = self.span_text(text, slots[CLIENT]);
        let token = self.span_text(text, slots[TOKEN]);
        let state = self.span_text(text, slots[STATE]);
        let surl = self.span_text(text, slots[SURL]);
        let path = self.span_text(text, slots[PATH]);
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
                match self.rsyslog.as_ref().map(|p| p.host) {
                    // the prefix's host (its group took part: prefix_known read the match)
                    Some(group) => match self.regex.get(group) {
                        Some((a, b)) => self.interned(py, &text[a..b]),
                        None => new_str(""),
                    },
                    None => self.host.clone_ref(py).into_ptr(),
                },
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
        if let Some(prefix) = self.rsyslog.as_mut() {
            prefix.context.clear();
        }
    }

    /// remember() for the rsyslog form's twin: the second of a line whose prefix's receive
    /// time is `rtime`; the seconds remembered under another context (context_parts) are
    /// forgotten. A time too short to have a context remembers nothing: prefix_known takes
    /// no line of it.
    fn remember_in(&mut self, rtime: &str, key: u64, base_ms: i64) -> PyResult<()> {
        let Some(prefix) = self.rsyslog.as_ref() else {
            return Err(PyValueError::new_err("remember_in is for the rsyslog form's twin"));
        };
        let Some((ym, offset)) = context_parts(rtime.as_bytes()) else {
            return Ok(());
        };
        if !is_context(&prefix.context, ym, offset) {
            let context = [ym, offset].concat();
            self.forget();
            if let Some(prefix) = self.rsyslog.as_mut() {
                prefix.context = context;
            }
        }
        self.remember(key, base_ms);
        Ok(())
    }

    /// The rsyslog twin's lines feed_lines takes from now on: those whose prefix names
    /// `host` (its events' host then). parse() takes any host's, as before.
    fn point_at(&mut self, py: Python<'_>, host: PyObject) -> PyResult<()> {
        let text = host.extract::<String>(py)?.into_bytes();
        let Some(prefix) = self.rsyslog.as_mut() else {
            return Err(PyValueError::new_err("point_at is for the rsyslog form's twin"));
        };
        prefix.own_host = text;
        self.host = host;
        Ok(())
    }

    /// The lines whose prefix's tag is `tag` (one of other_tags) are read by `twin`, the
    /// rsyslog twin of the parser Python routes them to, in feed_lines from now on.
    fn route(&mut self, py: Python<'_>, tag: &str, twin: Py<FastLines>) -> PyResult<()> {
        // (a twin routed to itself is already borrowed here: refused too)
        if twin.bind(py).try_borrow().map_or(true, |t| t.rsyslog.is_none()) {
            return Err(PyValueError::new_err("a route goes to another rsyslog form's twin"));
        }
        let Some(prefix) = self.rsyslog.as_mut() else {
            return Err(PyValueError::new_err("route is for the rsyslog form's twin"));
        };
        let Some(k) = prefix.other_tags.iter().position(|t| **t == *tag.as_bytes()) else {
            return Err(PyValueError::new_err(format!("{tag:?} is no tag routed elsewhere")));
        };
        prefix.routes[k] = Some(twin);
        Ok(())
    }

    /// Whether the envelope is read by hand (lcgdm_head.rs) rather than by the pattern.
    #[getter]
    fn reads_envelope_by_hand(&self) -> bool {
        self.hand_head
    }

    fn __len__(&self) -> usize {
        self.seconds.len()
    }
}

#[cfg(test)]
mod tests {
    use super::{context_parts, is_context, printable_ascii, span_numbers, stamp_key};
    use crate::jit::Pattern;
    use crate::lcgdm_head::{self, tests::strays, Numbers};

    #[test]
    fn the_numbers_read_with_the_envelope_are_those_of_pcre2s_spans_on_every_line_near_its_form() {
        let mut regex = Pattern::new(&lcgdm_head::anchored()).unwrap();
        let (mut read, mut long) = (0, 0);
        for line in strays() {
            let (mut spans, mut got) = ([None; 9], Numbers::default());
            let ended = lcgdm_head::read_numbers(&line, &mut spans, &mut got);
            if regex.find(&line) != Ok(true) {
                assert_eq!(ended, None);
                continue;
            }
            assert!(ended.is_some());
            // The fallback path's reading of PCRE2's spans is the answer (of the lines
            // scan() takes: those of bytes not UTF-8 never come here).
            let Ok(text) = std::str::from_utf8(&line) else {
                continue;
            };
            let head: lcgdm_head::Spans = std::array::from_fn(|g| regex.get(g + 1));
            let stamp = std::array::from_fn(|i| head[i].unwrap());
            let mut want = span_numbers(text, &head).unwrap();
            want.key = stamp_key(text, &stamp).unwrap();
            assert_eq!(got, want, "{text:?}");
            read += 1;
            long += usize::from(want.pid.is_none() || want.tid.is_none());
        }
        assert!(read > 500 && long > 10, "{read} read, {long} with a number too long");
    }

    #[test]
    fn a_control_or_non_ascii_byte_anywhere_in_a_line_of_any_length_is_found() {
        for len in 0..50 {
            let line = vec![b'a'; len];
            assert!(printable_ascii(&line), "{len}");
            for at in 0..len {
                for bad in [0u8, 0x1f, 0x7f, 0x80, 0xff] {
                    let mut odd = line.clone();
                    odd[at] = bad;
                    assert!(!printable_ascii(&odd), "{len} {at} {bad}");
                }
                let mut tab = line.clone();
                tab[at] = b'\t';
                assert!(printable_ascii(&tab), "a tab is allowed: {len} {at}");
            }
        }
    }

    #[test]
    fn the_context_of_a_receive_time_is_its_year_month_and_offset() {
        let parts = |t: &str| context_parts(t.as_bytes()).map(|(ym, off)| [ym, off].concat());
        assert_eq!(parts("2011-08-12T14:31:43.118402+02:00").as_deref(), Some(&b"2011-08+02:00"[..]));
        assert_eq!(parts("2011-08-12T14:31:43Z").as_deref(), Some(&b"2011-08Z"[..]));
        assert_eq!(parts("2011-08-12T14:31:43z").as_deref(), Some(&b"2011-08z"[..]));
        assert_eq!(parts("2011-08-12T14:31:43-04:30").as_deref(), Some(&b"2011-08-04:30"[..]));
        assert_eq!(parts("2011Z"), None);
        assert_eq!(parts("2011-08"), None);
    }

    #[test]
    fn a_context_is_known_only_when_both_its_parts_are_the_ones_kept() {
        let known = b"2011-08+02:00";
        assert!(is_context(known, b"2011-08", b"+02:00"));
        assert!(!is_context(known, b"2011-09", b"+02:00"));
        assert!(!is_context(known, b"2011-08", b"+01:00"));
        assert!(!is_context(known, b"2011-08", b"Z"));
        assert!(!is_context(b"", b"2011-08", b"Z"));
    }
}
