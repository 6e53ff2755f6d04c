//! The compiled twin of `parsers/dome_lines.DomeLineParser`: one DOME syslog line ->
//! a DomeEvent, or the line's result (malformed, foreign, unmatched) and why, in the
//! same steps and with the same reasons as the Python parser.
//!
//! The profile's own combined regex of each envelope form is compiled here with PCRE2
//! (the group numbers are Python's; both read `\d \s \w` as ASCII, as the profiles are
//! compiled with re.ASCII). RFC 3339 stamps are read here (dome_time; one it refuses goes
//! to Python's rfc3339_to_ms, whose words the reason is); a traditional
//! stamp has no year, so its local minute goes to the stream's EventClock (`minute_ms`,
//! Python) once per minute, and each second of it is that minute's second 0 plus its
//! seconds, as the clock would date it without changing its state; where the clock says
//! a minute is not so (an offset change or a repeated hour inside it, a bad date), each
//! second goes to `to_ms` once: consecutive lines of one second reuse its answer.

use std::borrow::Cow;

use crate::jit::{Located, Pattern};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyType};

use crate::byte_runs::{equal, has_nul};
use crate::dome_event::{is_int_field, DomeEvent, Role, Spare, Val, COUNT};
use crate::dome_head::{HeadReader, Numbers, Spans, GROUPS};
use crate::dome_roles::{RoleReader, Spans as RoleSpans, GROUPS as ROLE_GROUPS};
use crate::dome_time::Rfc3339Reader;
use crate::lead_dispatch::LeadDispatch;

const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
pub const PARSED: usize = 0;
pub const UNMATCHED: usize = 1;
pub const FOREIGN: usize = 2;
pub const MALFORMED: usize = 3;
const RESULTS: [&str; 4] = ["parsed", "unmatched", "foreign", "malformed"];
/// parsers/dome_lines.NOT_A_NUMBER: a number field's text is not digits.
const NOT_A_NUMBER: &str = "a number field that is not a number";

/// A role pattern of the form's alternation: matched alone after the head (`regex`,
/// where the message starts with `lead`), or, for a profile whose patterns refer to
/// groups, read from the head's match (the whole alternation) by its wrapper `group`
/// (compiled_dome.scan_plan says which).
struct Alternative {
    group: usize,
    regex: Option<Pattern>,
    /// For a pattern dome_roles.rs implements, that reader and the spans it read (the
    /// regex then never runs).
    hand: Option<(RoleReader, RoleSpans)>,
    lead: Vec<u8>,
    role: Option<Role>, // None: the catch-all `unmatched`
    fields: Vec<(usize, usize)>, // (FIELD_NAMES index, group)
}

/// A set of bytes: those a place of an envelope's lead may hold.
#[derive(Clone, Copy, Debug, PartialEq)]
struct ByteSet([u64; 4]);

impl ByteSet {
    fn of(bytes: &[u8]) -> Self {
        let mut set = ByteSet([0; 4]);
        for &b in bytes {
            set.0[usize::from(b >> 6)] |= 1 << (b & 63);
        }
        set
    }

    #[inline]
    fn has(&self, b: u8) -> bool {
        self.0[usize::from(b >> 6)] & (1 << (b & 63)) != 0
    }
}

impl Form {
    /// Whether this form's envelope may match at `line`'s start: the line has a byte of
    /// each of the lead's places (compiled_dome.envelope_lead).
    #[inline]
    fn may_start(&self, line: &str) -> bool {
        let line = line.as_bytes();
        line.len() >= self.lead.len() && self.lead.iter().zip(line).all(|(set, &b)| set.has(b))
    }
}

impl Alternative {
    /// Whether this alternative matches `line` from `at` (the head's end): its spans then
    /// in its regex, or in `head`. Inline always: ~1.24 calls a line, whose call and frame
    /// were ~20 instructions a line out of line (issue 30).
    #[inline(always)]
    fn matches(&mut self, head: &Head, line: &str, at: usize) -> bool {
        if let Some((reader, spans)) = &mut self.hand {
            return reader.read(line.as_bytes(), at, spans);
        }
        match &mut self.regex {
            Some(regex) => regex.find_after_lead(&self.lead, line, at),
            None => head.get(self.group).is_some(),
        }
    }
}

/// A form's head (the envelope and message, or the whole alternation): its regex, or, for a
/// pattern dome_head.rs implements, that reader and the spans it read.
struct Head {
    /// Compiled only for a pattern no hand reader reads: one never run cost each scanner
    /// (each source, each profile `profile check` tries) a PCRE2 compile and JIT.
    regex: Option<Pattern>,
    /// The numbers the hand reader read with the head.
    hand: Option<(HeadReader, Spans, Numbers)>,
}

impl Head {
    fn new(pattern: &str) -> PyResult<Head> {
        let hand = HeadReader::of(pattern).map(|r| (r, [None; GROUPS], Numbers::default()));
        let regex = if hand.is_some() { None } else { Some(compile(pattern, true)?) };
        Ok(Head { regex, hand })
    }

    /// Whether the head matches at `line`'s start (its spans then in `get`).
    #[inline]
    fn matches(&mut self, line: &str) -> bool {
        match (&mut self.hand, &mut self.regex) {
            (Some((reader, spans, numbers)), _) => reader.read(line.as_bytes(), spans, numbers).is_some(),
            (None, Some(regex)) => matches(regex, line),
            (None, None) => false, // not made: one or the other
        }
    }

    /// The numbers the hand reader read with the head (none where the regex read it).
    #[inline]
    fn numbers(&self) -> Numbers {
        self.hand.as_ref().map_or(Numbers::default(), |&(_, _, numbers)| numbers)
    }
}

impl Located for Head {
    #[inline(always)]
    fn get(&self, group: usize) -> Option<(usize, usize)> {
        match (&self.hand, &self.regex) {
            (Some((_, spans, _)), _) => spans.get(group).copied().flatten(),
            (None, Some(regex)) => regex.get(group),
            (None, None) => None,
        }
    }
}

/// The spans of one of two matches (a role's regex or the head, the envelope alone or
/// the head), chosen without a call through a vtable per span.
enum Either<'a> {
    Regex(&'a Pattern),
    Head(&'a Head),
    Role(&'a RoleSpans),
}

impl Located for Either<'_> {
    #[inline(always)]
    fn get(&self, group: usize) -> Option<(usize, usize)> {
        match self {
            Either::Regex(regex) => regex.get(group),
            Either::Head(head) => head.get(group),
            Either::Role(spans) => spans.get(group).copied().flatten(),
        }
    }
}

struct Form {
    rfc3339: bool,
    head: Head,
    prefix: Pattern, // the envelope alone
    prefix_tag: usize,
    /// The bytes every match of the envelope has at each of its first places (head and
    /// prefix start with it): a line without them (all of a DPM log's) is not this form's,
    /// known without running either regex (issue 30).
    lead: Vec<ByteSet>,
    g: Groups,
    alternatives: Vec<Alternative>,
    /// The alternatives a message's bytes allow, by their leads (None: too many to
    /// dispatch, each tried in turn).
    dispatch: Option<LeadDispatch>,
}

#[derive(Default)]
struct Groups {
    stamp: [Option<usize>; 6], // traditional: mon day hour minute second; rfc3339: rtime (slot 0)
    host: usize,
    tag: usize,
    pid: usize,
    tid: Option<usize>,
    level: usize,
    error: usize,
}

/// journald's `Suppressed N messages from UNIT` notice, as the profile's `[journald]` names
/// it: journald's idents, the pattern (anchored, matched where the envelope ends) and its
/// `lines` and `program` groups.
struct Journald {
    tags: Vec<String>,
    regex: Pattern,
    lines: usize,
    program: usize,
}

/// `[journald]` as Python describes it: (tags, pattern, lines group, program group).
type JournaldSpec = (Vec<String>, String, usize, usize);

/// An alternative as Python describes it: (role or None, pattern or None, wrapper group,
/// lead, [(field, group)]).
type AlternativeSpec = (Option<String>, Option<String>, usize, Vec<u8>, Vec<(usize, usize)>);
/// A form as Python describes it: (name, head pattern, prefix pattern, prefix's tag group,
/// {group name: index}, alternatives, the envelope's lead: the bytes of each place).
type FormSpec<'py> = (String, String, String, usize, Bound<'py, PyDict>, Vec<AlternativeSpec>, Vec<Vec<u8>>);

#[allow(clippy::large_enum_variant)] // one per line, never stored
pub enum Outcome {
    Parsed(DomeEvent),
    Failed(usize),
}

// Not unsendable: its fields are Send and Sync (Py handles, owned data), so it is freed on
// whatever thread a collection runs (see DomeCore's SAFETY note).
#[pyclass(module = "dpmstream.parsers._native")]
pub struct DomeScanner {
    forms: Vec<Form>,
    tags: Vec<String>,
    journald: Option<Journald>,
    to_ms: PyObject,
    minute_ms: PyObject,
    rfc3339_to_ms: PyObject,
    max_bytes: usize,
    max_digits: usize,
    /// The last traditional second dated, and its ms.
    last_second: Option<([i64; 5], i64)>,
    /// The last (month, day, hour, minute) asked of the clock's minute_ms, and its answer:
    /// its second 0's ms, or None (its seconds go to to_ms). Asking the clock once a
    /// second cost ~250 instructions a line more on a traditional site (issue 30).
    last_minute: Option<([i64; 4], Option<i64>)>,
    /// The text of that second's stamp (`May 30 08:44:00`): a line whose stamp reads the
    /// same has that second, found without reading its parts again.
    last_stamp: String,
    /// RFC 3339 stamps, read knowing the stamp before's second.
    rfc3339: Rfc3339Reader,
    /// The text fields' Strings scan_into set aside, by field (DomeEvent::declare).
    spare: Spare,
    #[pyo3(get)]
    result: &'static str,
    /// Why the last line failed: most reasons are fixed words, held without a copy (each
    /// DPM line `profile check` shows a DOME profile fails with one: a String a line
    /// made and dropped, issue 30).
    reason: Cow<'static, str>,
    counts: [u64; 4],
    event_type: Py<PyType>,
}

// Inline always: ~6 calls a parsed line, each ~29 instructions as a call of its own
// (issue 30).
#[inline(always)]
fn span<'a>(line: &'a str, locs: &impl Located, group: usize) -> Option<&'a str> {
    locs.get(group).map(|(s, e)| &line[s..e])
}

/// Whether `pattern` matches `line` (its spans then in `pattern`); an error of PCRE2's (a
/// limit) is no match, as the Python parser's `re` has none.
fn matches(pattern: &mut Pattern, line: &str) -> bool {
    pattern.find_str(line) == Ok(true)
}

/// The patterns are read in UTF mode (a `.` is one character, as Python's).
fn compile(pattern: &str, dotall: bool) -> PyResult<Pattern> {
    Pattern::with_options(pattern, true, dotall)
        .map_err(|e| PyValueError::new_err(format!("PCRE2 cannot compile a DOME pattern: {e}")))
}

#[inline]
fn ascii_number(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    // The common case (a field's digits, 18 at most: no overflow) in one pass, without
    // trim and parse: ~10 numbers a line (stamp, pid, tid, level, fields).
    if b.is_empty() || b.len() > 18 {
        return other_number(text);
    }
    let mut n = 0i64;
    for &d in b {
        let digit = d.wrapping_sub(b'0');
        if digit > 9 {
            return other_number(text);
        }
        n = n * 10 + i64::from(digit);
    }
    Some(n)
}

/// A number with white space about it, or too long for ascii_number's loop.
#[cold]
fn other_number(text: &str) -> Option<i64> {
    let t = text.trim();
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse().ok()
}

impl DomeScanner {
    fn fail(&mut self, result: usize, reason: impl Into<Cow<'static, str>>) -> usize {
        self.result = RESULTS[result];
        self.reason = reason.into();
        self.counts[result] += 1;
        result
    }

    fn repr(py: Python<'_>, text: &str) -> String {
        PyString::new(py, text).repr().map(|r| r.to_string()).unwrap_or_else(|_| format!("'{text}'"))
    }

    /// The steps of DomeLineParser.parse, in its order: the line's event, or why not.
    pub fn scan(&mut self, py: Python<'_>, raw: &str) -> PyResult<Outcome> {
        if self.no_envelope(raw) {
            return Ok(Outcome::Failed(MALFORMED));
        }
        let mut ev = DomeEvent::empty();
        Ok(match self.scan_into(py, raw, &mut ev)? {
            PARSED => Outcome::Parsed(ev),
            result => Outcome::Failed(result),
        })
    }

    /// Whether no form's envelope may start `raw` (every line of a DPM log, for each DOME
    /// profile `profile check` tries): then failed as scan_into fails it, by its own
    /// tests (not too long, no NUL, no form may start: malformed, no syslog envelope),
    /// with no event made, moved and dropped for nothing (~45 % of such a scan).
    pub fn no_envelope(&mut self, raw: &str) -> bool {
        let line = raw.trim_end_matches(['\r', '\n']);
        if line.len() <= self.max_bytes && !self.forms.iter().any(|f| f.may_start(line)) && !has_nul(line.as_bytes()) {
            self.fail(MALFORMED, "no syslog envelope");
            return true;
        }
        false
    }

    /// scan() into `ev`, a buffer the caller keeps from line to line (feed_chunk): the
    /// result (PARSED: `ev` is the line's event; else `ev` holds no line's, and `result`
    /// and `reason` say why). Its host, program and text fields are written over the
    /// line before's, in the room their Strings have: no allocation for most lines.
    pub fn scan_into(&mut self, py: Python<'_>, raw: &str, ev: &mut DomeEvent) -> PyResult<usize> {
        let line = raw.trim_end_matches(['\r', '\n']);
        if line.len() > self.max_bytes {
            return Ok(self.fail(MALFORMED, format!("line longer than {} bytes", self.max_bytes)));
        }
        // 64 bytes a step: str::contains went through core's memchr, ~220 instructions a
        // DOME line (issue 30)
        if has_nul(line.as_bytes()) {
            return Ok(self.fail(MALFORMED, "binary data (NUL byte)"));
        }
        let mut matched = None;
        for (i, form) in self.forms.iter_mut().enumerate() {
            if form.may_start(line) && form.head.matches(line) {
                matched = Some(i);
                break;
            }
        }
        let Some(fi) = matched else {
            return self.not_dmlite(py, line, ev);
        };
        let form = &mut self.forms[fi];
        // The tag's bytes against the profile's tags, and the event's program the tag that
        // matched: its text is sliced from the line (a str::get call) only for a foreign
        // line's reason.
        let tag = form.head.get(form.g.tag).and_then(|(s, e)| line.as_bytes().get(s..e)).unwrap_or(b"");
        let Some(ti) = self.tags.iter().position(|t| equal(t.as_bytes(), tag)) else {
            let why = format!("program {}", Self::repr(py, span(line, &form.head, form.g.tag).unwrap_or("")));
            return Ok(self.fail(FOREIGN, why));
        };
        let (head, at) = (&form.head, form.head.get(0).map_or(0, |(_, e)| e));
        // in the alternation's order, skipping only those whose lead the message lacks
        let alternatives = &mut form.alternatives;
        let ai = match &form.dispatch {
            Some(dispatch) => {
                let mut candidates = dispatch.candidates(line.as_bytes(), at);
                loop {
                    if candidates == 0 {
                        break None;
                    }
                    let i = candidates.trailing_zeros() as usize;
                    candidates &= candidates - 1;
                    if alternatives[i].matches(head, line, at) {
                        break Some(i);
                    }
                }
            }
            None => alternatives.iter_mut().position(|a| a.matches(head, line, at)),
        };
        let Some(ai) = ai else {
            return Ok(self.fail(UNMATCHED, "no role"));
        };
        let form = &self.forms[fi];
        let (head, alt) = (&form.head, &form.alternatives[ai]);
        let locs = match (&alt.hand, &alt.regex) {
            (Some((_, spans)), _) => Either::Role(spans),
            (None, Some(regex)) => Either::Regex(regex),
            (None, None) => Either::Head(head),
        };
        let Some(role) = alt.role else {
            return Ok(self.fail(UNMATCHED, "no role"));
        };
        let Some(pid_span) = head.get(form.g.pid) else {
            return Ok(self.fail(MALFORMED, "a dmlite line without the program's pid"));
        };
        // lengths from the spans: a number the head's reader read needs no slice of its text
        let length = |span: Option<(usize, usize)>| span.map_or(0, |(s, e)| e - s);
        let tid_span = form.g.tid.and_then(|g| head.get(g));
        let mut longest = length(Some(pid_span)).max(length(tid_span));
        for &(field, group) in &alt.fields {
            if is_int_field(field) {
                longest = longest.max(length(locs.get(group)));
            }
        }
        if longest > self.max_digits {
            let why = format!("a number longer than {} digits", self.max_digits);
            return Ok(self.fail(MALFORMED, why));
        }
        // A site's profile may capture more than digits where a number belongs: such a
        // line is malformed (counted), as DomeLineParser has it.
        let number = |span: Option<(usize, usize)>| span.map_or(Some(-1), |(s, e)| ascii_number(&line[s..e]));
        let read = head.numbers();
        let (Some(pid), Some(tid), Some(level)) = (
            read.pid.or_else(|| number(Some(pid_span))),
            read.tid.or_else(|| number(tid_span)),
            read.level.or_else(|| number(head.get(form.g.level))),
        ) else {
            return Ok(self.fail(MALFORMED, NOT_A_NUMBER));
        };
        let spare = &mut self.spare;
        ev.declare(alt.fields.iter().fold(0u32, |bits, &(field, _)| bits | 1 << field), spare);
        let mut numbers = true;
        for &(field, group) in &alt.fields {
            match span(line, &locs, group) {
                None => ev.set_none(field, spare),
                Some(text) if is_int_field(field) => {
                    let n = ascii_number(text);
                    numbers &= n.is_some();
                    ev.fields[field] = Some(Val::Int(n.unwrap_or(0)));
                }
                Some(text) => ev.set_text(field, text, spare),
            }
        }
        if !numbers {
            return Ok(self.fail(MALFORMED, NOT_A_NUMBER));
        }
        (ev.pid, ev.tid, ev.level) = (pid, tid, level);
        ev.error = head.get(form.g.error).is_some();
        ev.role = role;
        ev.set_origin(span(line, head, form.g.host).unwrap_or(""), &self.tags[ti]);
        (ev.ts, ev.whole_seconds) = match self.stamp(py, fi, false, line)? {
            Ok(v) => v,
            Err(why) => return Ok(self.fail(MALFORMED, why)),
        };
        self.result = RESULTS[PARSED];
        // as DomeLineParser: `reason` keeps the last failure's
        self.counts[PARSED] += 1;
        Ok(PARSED)
    }

    /// The stamp of form `fi`'s envelope as its head (or, `prefix`, its envelope alone)
    /// matched it: (ms, whole seconds), or Err(reason) for a malformed line. Inline, the
    /// case of most traditional lines (the second of the line before), the rest out of
    /// line: a call with the slow paths' frame cost ~50 instructions a line (issue 30).
    #[inline(always)]
    fn stamp(&mut self, py: Python<'_>, fi: usize, prefix: bool, line: &str) -> PyResult<Result<(i64, bool), String>> {
        if let Some((_, ms)) = self.last_second {
            if !self.forms[fi].rfc3339 {
                // its bytes: a str slice's boundary checks are for the slow path's copy
                let text = self.stamp_span(fi, prefix).and_then(|(s, e)| line.as_bytes().get(s..e)).unwrap_or(b"");
                if !text.is_empty() && equal(text, self.last_stamp.as_bytes()) {
                    return Ok(Ok((ms, true)));
                }
            }
        }
        self.any_stamp(py, fi, prefix, line)
    }

    /// Where a traditional stamp stands, from the month's first byte to the second's last
    /// (None if the form's match lacks them).
    #[inline(always)]
    fn stamp_span(&self, fi: usize, prefix: bool) -> Option<(usize, usize)> {
        let form = &self.forms[fi];
        let locs = if prefix { Either::Regex(&form.prefix) } else { Either::Head(&form.head) };
        match (form.g.stamp[0].and_then(|g| locs.get(g)), form.g.stamp[4].and_then(|g| locs.get(g))) {
            (Some((start, _)), Some((_, end))) if start <= end => Some((start, end)),
            _ => None,
        }
    }

    /// A traditional stamp's text, from the month's first byte to the second's last ("" if
    /// the form's match lacks them).
    #[inline(always)]
    fn stamp_text<'a>(&self, fi: usize, prefix: bool, line: &'a str) -> &'a str {
        self.stamp_span(fi, prefix).map_or("", |(start, end)| &line[start..end])
    }

    /// stamp() of any line.
    #[inline(never)]
    fn any_stamp(&mut self, py: Python<'_>, fi: usize, prefix: bool, line: &str) -> PyResult<Result<(i64, bool), String>> {
        let form = &self.forms[fi];
        let locs = if prefix { Either::Regex(&form.prefix) } else { Either::Head(&form.head) };
        if form.rfc3339 {
            let rtime = span(line, &locs, form.g.stamp[0].unwrap_or(0)).unwrap_or("");
            return Ok(match self.rfc3339.read(rtime) {
                Ok(v) => Ok(v),
                Err(_) => self.python_rfc3339(py, rtime)?,
            });
        }
        // most lines share the line before's second
        let text = self.stamp_text(fi, prefix, line);
        if let Some((_, ms)) = self.last_second {
            if !text.is_empty() && equal(text.as_bytes(), self.last_stamp.as_bytes()) {
                return Ok(Ok((ms, true)));
            }
        }
        let mut parts = [""; 5];
        for (part, g) in parts.iter_mut().zip(&form.g.stamp[..5]) {
            *part = g.and_then(|g| span(line, &locs, g)).unwrap_or("");
        }
        let ms = self.traditional_ms(py, &parts)?;
        if ms.is_ok() {   // last_second is this stamp's now
            self.last_stamp.clear();
            self.last_stamp.push_str(text);
        }
        Ok(ms.map(|ms| (ms, true)))
    }

    /// A traditional stamp's ms through the stream's EventClock; Err(reason) when the
    /// clock refuses the date (a ValueError, ClockError included: the line is malformed).
    fn traditional_ms(&mut self, py: Python<'_>, parts: &[&str]) -> PyResult<Result<i64, String>> {
        let month = MONTHS.iter().position(|m| *m == parts[0]).map_or(0, |i| i as i64 + 1);
        let mut key = [month, 0, 0, 0, 0];
        for i in 1..5 {
            key[i] = ascii_number(parts[i]).unwrap_or(0);
        }
        if let Some((last, ms)) = self.last_second {
            if last == key {
                return Ok(Ok(ms));
            }
        }
        if let Some(base) = self.minute_base(py, &key)? {
            let ms = base + key[4] * 1000;
            self.last_second = Some((key, ms));
            return Ok(Ok(ms));
        }
        match self.to_ms.call1(py, (key[0], key[1], key[2], key[3], key[4], 0)) {
            Ok(v) => {
                let ms: i64 = v.extract(py)?;
                self.last_second = Some((key, ms));
                Ok(Ok(ms))
            }
            Err(e) if e.is_instance_of::<PyValueError>(py) => {
                self.last_second = None;
                Ok(Err(e.value(py).str()?.to_string()))
            }
            Err(e) => Err(e),
        }
    }

    /// The ms of the second 0 of `key`'s minute, when the clock's minute_ms says each of
    /// its seconds is that plus its seconds; None: ask to_ms for this second (a second
    /// past 59, or a minute the clock dates otherwise or refuses: to_ms then gives its
    /// words for the line).
    fn minute_base(&mut self, py: Python<'_>, key: &[i64; 5]) -> PyResult<Option<i64>> {
        if !(0..=59).contains(&key[4]) {
            return Ok(None);
        }
        let minute = [key[0], key[1], key[2], key[3]];
        if let Some((last, base)) = self.last_minute {
            if last == minute {
                return Ok(base);
            }
        }
        let base = match self.minute_ms.call1(py, (key[0], key[1], key[2], key[3])) {
            Ok(v) => v.extract::<Option<i64>>(py)?,
            Err(e) if e.is_instance_of::<PyValueError>(py) => None,
            Err(e) => return Err(e),
        };
        self.last_minute = Some((minute, base));
        Ok(base)
    }

    /// A stamp dome_time refused: Python's reading decides (its reason, the reference's
    /// words; or its value, should it take what dome_time does not).
    fn python_rfc3339(&self, py: Python<'_>, rtime: &str) -> PyResult<Result<(i64, bool), String>> {
        match self.rfc3339_to_ms.call1(py, (rtime,)) {
            Ok(v) => Ok(Ok((v.extract(py)?, rtime.len() < 20 || rtime.as_bytes()[19] != b'.'))),
            Err(e) if e.is_instance_of::<PyValueError>(py) => Ok(Err(e.value(py).str()?.to_string())),
            Err(e) => Err(e),
        }
    }

    fn not_dmlite(&mut self, py: Python<'_>, line: &str, ev: &mut DomeEvent) -> PyResult<usize> {
        for i in 0..self.forms.len() {
            let form = &mut self.forms[i];
            if form.may_start(line) && matches(&mut form.prefix, line) {
                let tag = span(line, &form.prefix, form.prefix_tag).unwrap_or("");
                if self.journald.as_ref().is_some_and(|j| j.tags.iter().any(|t| t == tag)) {
                    return self.suppressed(py, i, tag, line, ev);
                }
                let why = if self.tags.iter().any(|t| t == tag) {
                    Cow::Borrowed("not a dmlite message")
                } else {
                    Cow::Owned(format!("program {}", Self::repr(py, tag)))
                };
                return Ok(self.fail(FOREIGN, why));
            }
        }
        Ok(self.fail(MALFORMED, "no syslog envelope"))
    }

    /// journald's line (DomeLineParser._suppressed): `Suppressed N messages from UNIT` for
    /// a unit of the profile's programs is an event (program the unit's, pid -1, COUNT
    /// N); any other journald line is foreign.
    fn suppressed(&mut self, py: Python<'_>, fi: usize, tag: &str, line: &str, ev: &mut DomeEvent) -> PyResult<usize> {
        let form = &self.forms[fi];
        let end = form.prefix.get(0).map_or(0, |(_, e)| e);
        let host = span(line, &form.prefix, form.g.host).unwrap_or("");
        let rest = &line[end..];
        let Some(j) = self.journald.as_mut() else {
            return Ok(self.fail(FOREIGN, format!("program {}", Self::repr(py, tag))));
        };
        // The locations hold a match's spans only after it matched.
        let matched = matches(&mut j.regex, rest);
        let (program, lines) = if matched {
            (span(rest, &j.regex, j.program), span(rest, &j.regex, j.lines).unwrap_or(""))
        } else {
            (None, "")
        };
        let Some(program) = program.filter(|p| self.tags.iter().any(|t| t == p)) else {
            return Ok(self.fail(FOREIGN, format!("program {}", Self::repr(py, tag))));
        };
        if lines.len() > self.max_digits {
            let why = format!("a number longer than {} digits", self.max_digits);
            return Ok(self.fail(MALFORMED, why));
        }
        let count = ascii_number(lines).unwrap_or(0);
        let (ts, whole) = match self.stamp(py, fi, true, line)? {
            Ok(v) => v,
            Err(why) => return Ok(self.fail(MALFORMED, why)),
        };
        ev.declare(1 << COUNT, &mut self.spare);
        ev.fields[COUNT] = Some(Val::Int(count));
        (ev.ts, ev.whole_seconds) = (ts, whole);
        ev.set_origin(host, program);
        (ev.pid, ev.tid, ev.level, ev.error, ev.role) = (-1, -1, -1, false, Role::JournaldSuppressed);
        self.result = RESULTS[PARSED];
        self.counts[PARSED] += 1;
        Ok(PARSED)
    }

    pub fn event_type(&self, py: Python<'_>) -> Py<PyType> {
        self.event_type.clone_ref(py)
    }

    /// A parsed line's event as Python is handed it.
    pub fn line(&self, py: Python<'_>, ev: DomeEvent) -> DomeLine {
        DomeLine { ev, event_type: self.event_type(py) }
    }
}

/// A parsed line held by the compiled engine (fed to CompiledDomeReassembler.feed
/// without going through Python's types); `ts` for merging nodes by event time, the
/// envelope's values and role to route or count it, `event()` the Python DomeEvent.
#[pyclass(module = "dpmstream.parsers._native", frozen)]
pub struct DomeLine {
    pub ev: DomeEvent,
    event_type: Py<PyType>,
}

#[pymethods]
impl DomeLine {
    #[getter]
    fn ts(&self) -> i64 {
        self.ev.ts
    }

    #[getter]
    fn host(&self) -> &str {
        &self.ev.host
    }

    #[getter]
    fn program(&self) -> &str {
        &self.ev.program
    }

    #[getter]
    fn pid(&self) -> i64 {
        self.ev.pid
    }

    #[getter]
    fn tid(&self) -> i64 {
        self.ev.tid
    }

    #[getter]
    fn role(&self) -> &'static str {
        self.ev.role.name()
    }

    #[getter]
    fn whole_seconds(&self) -> bool {
        self.ev.whole_seconds
    }

    /// The Python DomeEvent of this line (what the Python engine takes).
    fn event(&self, py: Python<'_>) -> PyResult<PyObject> {
        let items = self.ev.to_list(py)?;
        Ok(self.event_type.bind(py).call1(pyo3::types::PyTuple::new(py, items.iter())?)?.unbind())
    }
}

#[pymethods]
impl DomeScanner {
    /// forms: per envelope form in parsers/dome_profiles.FORMS order, (name, head pattern,
    /// prefix pattern, prefix's tag group, {group name: index}, [(role or None, pattern or
    /// None, wrapper group, lead, [(field index, group)])]: compiled_dome.scan_plan, the
    /// bytes of each of the envelope's first places: compiled_dome.envelope_lead); the
    /// patterns in PCRE2 syntax, anchored (a role's at its start offset, `\G`); the
    /// prefix `\A(?:envelope)` and the head starting with that envelope.
    #[new]
    /// journald: the profile's `[journald]` (tags, pattern in PCRE2 syntax, anchored,
    /// lines group, program group), or None.
    #[pyo3(signature = (forms, tags, journald, to_ms, minute_ms, rfc3339_to_ms, event_type, max_bytes, max_digits))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        forms: Vec<FormSpec<'_>>,
        tags: Vec<String>,
        journald: Option<JournaldSpec>,
        to_ms: PyObject,
        minute_ms: PyObject,
        rfc3339_to_ms: PyObject,
        event_type: Bound<'_, PyType>,
        max_bytes: usize,
        max_digits: usize,
    ) -> PyResult<Self> {
        let mut compiled = Vec::new();
        for (name, pattern, prefix, prefix_tag, groups, alternatives, lead) in forms {
            let rfc3339 = name == "rfc3339";
            let head = Head::new(&pattern)?;
            let lead = lead.iter().map(|bytes| ByteSet::of(bytes)).collect();
            let prefix = compile(&prefix, false)?;
            let get = |n: &str| -> PyResult<Option<usize>> {
                groups.get_item(n)?.map(|v| v.extract::<usize>()).transpose()
            };
            let need = |n: &str| -> PyResult<usize> {
                get(n)?.ok_or_else(|| PyValueError::new_err(format!("form {name} lacks group {n}")))
            };
            let mut g = Groups { host: need("host")?, tag: need("tag")?, pid: need("pid")?, tid: get("tid")?,
                                 level: need("level")?, error: need("error")?, ..Default::default() };
            if rfc3339 {
                g.stamp[0] = Some(need("rtime")?);
            } else {
                for (i, n) in ["mon", "day", "hour", "minute", "second"].iter().enumerate() {
                    g.stamp[i] = Some(need(n)?);
                }
            }
            let alternatives = alternatives
                .into_iter()
                .map(|(role, pattern, group, lead, fields)| {
                    let hand = pattern.as_deref().and_then(RoleReader::of).map(|r| (r, [None; ROLE_GROUPS]));
                    // as the head's: no regex where the hand reader reads it
                    let pattern = if hand.is_some() { None } else { pattern };
                    Ok(Alternative {
                        group,
                        hand,
                        regex: pattern.map(|p| compile(&p, true)).transpose()?,
                        lead,
                        role: role.as_deref().map(|r| Role::from_name(r).unwrap_or(Role::Other)),
                        fields,
                    })
                })
                .collect::<PyResult<Vec<Alternative>>>()?;
            let leads: Vec<&[u8]> = alternatives.iter().map(|a| a.lead.as_slice()).collect();
            let dispatch = LeadDispatch::of(&leads);
            compiled.push(Form {
                rfc3339,
                head,
                prefix,
                prefix_tag,
                lead,
                g,
                alternatives,
                dispatch,
            });
        }
        let journald = match journald {
            Some((tags, pattern, lines, program)) => {
                let regex = compile(&pattern, false)?;
                Some(Journald { tags, regex, lines, program })
            }
            None => None,
        };
        Ok(DomeScanner {
            forms: compiled,
            tags,
            journald,
            to_ms,
            minute_ms,
            rfc3339_to_ms,
            max_bytes,
            max_digits,
            last_second: None,
            last_minute: None,
            last_stamp: String::new(),
            rfc3339: Rfc3339Reader::default(),
            spare: Default::default(),
            result: RESULTS[PARSED],
            reason: Cow::Borrowed(""),
            counts: [0; 4],
            event_type: event_type.unbind(),
        })
    }

    /// The line's event as the compiled engine holds it, or None (result and reason set).
    fn parse(&mut self, py: Python<'_>, line: &Bound<'_, PyString>) -> PyResult<Option<DomeLine>> {
        let text = line.to_string_lossy();
        Ok(match self.scan(py, &text)? {
            Outcome::Parsed(ev) => Some(self.line(py, ev)),
            Outcome::Failed(_) => None,
        })
    }

    #[getter]
    fn reason(&self) -> &str {
        &self.reason
    }

    /// Lines by result so far: parsed, unmatched, foreign, malformed.
    fn counts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (name, n) in RESULTS.iter().zip(self.counts) {
            d.set_item(*name, n)?;
        }
        Ok(d)
    }

    /// Whether each form's head (parsers/dome_profiles.FORMS order) is read by hand
    /// (dome_head.rs) rather than by its pattern.
    #[getter]
    fn heads_read_by_hand(&self) -> Vec<bool> {
        self.forms.iter().map(|f| f.head.hand.is_some()).collect()
    }

    /// Whether each role pattern of each form (in scan_plan's order) is read by hand
    /// (dome_roles.rs) rather than by its pattern.
    #[getter]
    fn roles_read_by_hand(&self) -> Vec<Vec<bool>> {
        self.forms.iter().map(|f| f.alternatives.iter().map(|a| a.hand.is_some()).collect()).collect()
    }

    /// The stream's clock moved (restored, or its year changed outside): ask it again.
    fn forget(&mut self) {
        self.last_second = None;
        self.last_minute = None;
    }
}
