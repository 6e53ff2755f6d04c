//! `profile check`'s per-line work for each DPM profile, over a block of lines without
//! Python (`ProfileLines`, all of a check's profiles in one pass: `tally_profiles`):
//! which envelope form, whose function, which role, each line's thread for the cut
//! watch. The compiled twin of ProfileTally.add
//! (dpmstream/commands/profile_check.py), which stays the reference
//! (DPMSTREAM_PURE_PYTHON=1; tests/commands/test_profile_check_compiled.py).
//!
//! What it leaves to Python, in the order of the lines (`steps`): runs of the daemon's
//! own lines to feed the reassembly as a chunk, each ending where the cut watch looks at
//! the reassembler (after a token or slow-thread line: `WATCH`), and lines it does not
//! judge (not printable ASCII, too long: `PYTHON`, all of add() runs on them); and apart
//! (`shapes`), the shapes of the unmatched lines and the own lines of a catch-all role,
//! masked here by parsers/shapes.py's patterns (printable ASCII only: where Python's and
//! PCRE2's \d \w \s \b agree), counted per shape. `dome_lines` is the same for a DOME profile (DomeTally.add), through the
//! profile's own scanner. The profile's regexes are its own (the portable PCRE2 forms parsers/fastpath.py
//! builds the line scanner from), so the roles are the same by construction.

use pcre2::bytes::{Regex, RegexBuilder};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};

use crate::block::LineBlock;
use crate::hashing::FxMap;
use crate::chunk::{utf8, Chunk};
use crate::dome_scan::{DomeLine, DomeScanner, Outcome, FOREIGN as DOME_FOREIGN, MALFORMED as DOME_MALFORMED};
use crate::hashing::FxSet;
use crate::jit::{error_text, Located, Pattern};
use crate::lcgdm_head;
use crate::line_watch::{LineWatch, Quiet, TokenGaps};
use crate::scan::printable_ascii;

const ABSENT: usize = usize::MAX;
/// Steps: a run of own lines [a, b) to feed; the same whose last line is watched after;
/// a line Python reads whole.
const RUN: u8 = 0;
const WATCH: u8 = 1;
const PYTHON: u8 = 2;
/// WATCH of a line whose pattern has a token field: the watch notes the token too.
const WATCH_TOKEN: u8 = 3;

/// A role pattern: alone (`regex`, matched from the envelope's end where the message
/// starts with `lead`: fastpath.role_plan), or a wrapper `group` of the form's one regex.
struct Alt {
    regex: Option<Pattern>,
    lead: Vec<u8>,
    group: usize,
    role: Option<usize>, // index into `roles`; None: the catch-all `unmatched`
    token: usize,        // the token field's group (in `regex` if alone), or ABSENT
    /// The pattern alone as any profile may spell it (same_match), or None (not alone, or
    /// it refers to a group); and its place in the line's Memo during a tally (ABSENT:
    /// no other profile of the tally has it).
    same: Option<String>,
    memo: usize,
}

/// A pattern alone with its groups' names made alike: `(?P<a4_token>` of one profile's
/// alternation is `(?P<a6_token>` of another's (fastpath.role_plan numbers the wrappers
/// in each profile's order), the same match either way, the same groups by position.
/// None where the pattern may refer to a group by name or number (its meaning could then
/// differ where the spelling is alike).
fn same_match(pattern: &str) -> Option<String> {
    if ["(?P=", "\\k", "\\g", "(?&", "(?R", "(?P>"].iter().any(|r| pattern.contains(r))
        || pattern.bytes().zip(pattern.bytes().skip(1)).any(|(a, b)| a == b'\\' && b.is_ascii_digit())
    {
        return None;
    }
    let mut out = String::with_capacity(pattern.len());
    let mut rest = pattern;
    while let Some(at) = rest.find("(?P<a") {
        out.push_str(&rest[..at + 5]);
        rest = rest[at + 5..].trim_start_matches(|c: char| c.is_ascii_digit());
    }
    out.push_str(rest);
    Some(out)
}

/// A Memo entry: (line + 1, envelope's end, matched, the token's span).
type MemoEntry = (usize, usize, bool, Option<(usize, usize)>);

/// The results of the patterns alone that more than one profile of a tally has (Alt's
/// `memo`), on the line being read: the bundled DPM profiles share their accept,
/// connection failure, returns and startup patterns, which matched each such line once
/// for each profile (~80,000 PCRE2 runs of the thesis log, issue 30). An entry holds
/// for the line `line` (its index in the block, +1: 0 is none) and the envelope's end
/// `at` it was matched from: whether it matched, and its token's span.
#[derive(Default)]
struct Memo {
    entries: Vec<MemoEntry>,
    line: usize,
}

impl Alt {
    /// Whether the message at `at` starts with the lead (the first byte compared first,
    /// where most leads differ, without a memcmp call): inline in the loop over a form's
    /// alternatives, the rest of a match out of it.
    #[inline(always)]
    fn lead_fits(&self, line: &[u8], at: usize) -> bool {
        if self.regex.is_none() {
            return true;
        }
        let rest = &line[at..];
        self.lead.first().is_none_or(|b| rest.first() == Some(b)) && rest.starts_with(&self.lead)
    }

    /// matches() of a line whose message starts with the lead (lead_fits), through the
    /// memo where another profile has the same pattern alone.
    fn matches_shared(&mut self, head: &Head, line: &[u8], at: usize, memo: &mut Memo) -> bool {
        let Some(regex) = self.regex.as_mut() else {
            return head.get(self.group).is_some();
        };
        // SAFETY: printable ASCII (tally checks each line first): valid UTF-8.
        let text = unsafe { std::str::from_utf8_unchecked(line) };
        if self.memo == ABSENT {
            return regex.find_str_at(text, at) == Ok(true);
        }
        let (seen, from, matched, _) = memo.entries[self.memo];
        if seen == memo.line && from == at {
            return matched;
        }
        let matched = regex.find_str_at(text, at) == Ok(true);
        let token = if matched { regex.get(self.token) } else { None };
        memo.entries[self.memo] = (memo.line, at, matched, token);
        matched
    }

    /// spans() of a match matches_shared found: the token's span from the memo where the
    /// match may be another profile's.
    fn spans_shared<'a>(&self, head: &Head, line: &'a [u8], at: usize, memo: &Memo) -> (usize, Option<&'a [u8]>) {
        if self.memo == ABSENT || self.token == ABSENT {
            return self.spans(head, line, at);
        }
        (at, memo.entries[self.memo].3.map(|(a, b)| &line[a..b]))
    }

    /// Where the message begins (the text shaped) and the token's span.
    fn spans<'a>(&self, head: &Head, line: &'a [u8], at: usize) -> (usize, Option<&'a [u8]>) {
        match &self.regex {
            Some(regex) => (at, span(regex, line, self.token)),
            None => (head.get(self.group).map_or(at, |(a, _)| a), span(head, line, self.token)),
        }
    }
}

/// Where a form's envelope is read: its regex, or, for the LCGDM native envelope alone
/// (`\A(?:` lcgdm_head::PATTERN `)`, the head of all three bundled DPM profiles), by
/// hand (lcgdm_head.rs: the same spans and the same lines refused as PCRE2's, pinned by
/// its test). PCRE2's JIT spent ~990 instructions a line on this envelope, once for
/// each profile (issue 30).
struct Head {
    regex: Pattern,
    hand: bool,
    spans: lcgdm_head::Spans, // the hand read's groups 1 to 9
    end: usize,               // and where its match ended
}

impl Head {
    fn new(pattern: &str) -> PyResult<Self> {
        let regex = Pattern::new(pattern).map_err(PyValueError::new_err)?;
        let hand = pattern == lcgdm_head::anchored();
        Ok(Head { regex, hand, spans: [None; 9], end: 0 })
    }

    /// Whether the envelope matches at the line's start (its spans then held here); the
    /// hand read taken from `shared` where another profile made it on this line.
    fn find(&mut self, line: &[u8], shared: &mut SharedLine) -> bool {
        if !self.hand {
            return self.regex.find(line) == Ok(true);
        }
        let SharedLine { read, spans, .. } = shared;
        match *read.get_or_insert_with(|| lcgdm_head::read(line, spans)) {
            Some(end) => {
                self.spans = *spans;
                self.end = end;
                true
            }
            None => false,
        }
    }

    /// Group `i`'s span in the last match, the pattern's numbering (0: the whole match).
    #[inline]
    fn get(&self, i: usize) -> Option<(usize, usize)> {
        match (self.hand, i) {
            (false, _) => self.regex.get(i),
            (true, 0) => Some((0, self.end)),
            (true, i) => self.spans.get(i - 1).copied().flatten(),
        }
    }
}

/// What the profiles share of the line they are at (`tally_profiles`): its LCGDM
/// envelope, read by hand once for all whose form's head it is (all three bundled DPM
/// profiles: each read it apart, ~360 instructions a line each, issue 30): where it
/// ended (None: no match), or not read yet; and the last message of it shaped: where it
/// began and its shape in Shapes (a message most profiles leave unmatched alike, hashed
/// once, not once a profile).
#[derive(Default)]
struct SharedLine {
    read: Option<Option<usize>>,
    spans: lcgdm_head::Spans,
    shaped: Option<(usize, usize)>,
}

impl Located for Head {
    #[inline]
    fn get(&self, i: usize) -> Option<(usize, usize)> {
        Head::get(self, i)
    }
}

/// An envelope form: its regex through PCRE2's JIT entry point (jit.rs: the `pcre2`
/// crate's captures_read goes through pcre2_match, which checks its arguments again on
/// each of the profiles' matches of every line), holding the spans of its last match.
struct Form {
    regex: Head,
    func: usize,
    host: usize,
    pid: usize,
    tid: usize,
    alts: Vec<Alt>,
}

/// Distinct messages whose shape is remembered (then forgotten all at once).
const SHAPES_REMEMBERED: usize = 1 << 16;

/// parsers/shapes.shape of printable ASCII messages, shared by a check's profiles: the
/// message a profile leaves unmatched mostly is another profile's too (the same
/// envelope), so each is masked once (shape()'s own cache, over the lines Python's
/// check took one at a time, did the same).
#[pyclass(module = "dpmstream.parsers._native")]
pub(crate) struct Shapes {
    masks: Vec<Mask>, // parsers/shapes.py's MASKS, in its order
    chars: usize,
    /// message -> its shape's index in `known`: a line of a known message hashes it once
    /// (a map of the shapes themselves took a second lookup to hand one out borrowed)
    memo: FxMap<Box<[u8]>, usize>,
    known: Vec<String>,
    spare: Vec<u8>, // the buffer a mask writes into, kept between messages
}

/// One of MASKS: its regex, matched through PCRE2's JIT entry point (jit.rs), the text
/// put in place of each match, and the bytes every match of it holds: a message without
/// them is passed over without a search. Through the `pcre2` crate each of the eight
/// searches of a message went through pcre2_match's checks and a fresh buffer, whether
/// or not it matched (~10,000 instructions a new message, ~270 M of the thesis log's
/// check, issue 30).
struct Mask {
    regex: Pattern,
    mask: Vec<u8>,
    needs: Vec<u8>,
}

impl Mask {
    /// `text` with each match masked, as Python's re.sub and the crate's find_iter take
    /// them (an empty match never next to the last one), into `out`; false (and `out`
    /// left as it was) where nothing matched.
    fn substitute(&mut self, text: &[u8], out: &mut Vec<u8>) -> PyResult<bool> {
        if !self.needs.iter().all(|b| text.contains(b)) {
            return Ok(false);
        }
        let (mut from, mut last_match, mut copied, mut any) = (0, None, 0, false);
        while from <= text.len() {
            match self.regex.find_at(text, from) {
                Ok(true) => {}
                Ok(false) => break,
                Err(code) => return Err(PyValueError::new_err(error_text(code))),
            }
            let (start, end) = self.regex.get(0).expect("a match spans group 0");
            from = if start == end { end + 1 } else { end };
            if start == end && last_match == Some(end) {
                continue;
            }
            last_match = Some(end);
            if !any {
                out.clear();
                any = true;
            }
            out.extend_from_slice(&text[copied..start]);
            out.extend_from_slice(&self.mask);
            copied = end;
        }
        if any {
            out.extend_from_slice(&text[copied..]);
        }
        Ok(any)
    }
}

impl Shapes {
    /// parsers/shapes.shape of a printable ASCII message: cut, masked in order, cut.
    fn mask(&mut self, message: &[u8]) -> PyResult<String> {
        let mut text = message[..message.len().min(self.chars * 4)].to_vec();
        let mut out = std::mem::take(&mut self.spare);
        for mask in &mut self.masks {
            if mask.substitute(&text, &mut out)? {
                std::mem::swap(&mut text, &mut out);
            }
        }
        self.spare = out;
        text.truncate(self.chars);
        // ASCII in, ASCII masks: valid UTF-8.
        Ok(String::from_utf8_lossy(&text).into_owned())
    }

    /// The shape's index in `known`, valid until the next message is shaped (which may
    /// forget them all): a line of a known message allocates nothing.
    fn index(&mut self, message: &[u8]) -> PyResult<usize> {
        let message = &message[..message.len().min(self.chars * 4)];
        if let Some(&k) = self.memo.get(message) {
            return Ok(k);
        }
        let shape = self.mask(message)?;
        if self.memo.len() >= SHAPES_REMEMBERED {
            self.memo.clear();
            self.known.clear();
        }
        self.memo.insert(message.into(), self.known.len());
        self.known.push(shape);
        Ok(self.known.len() - 1)
    }
}

#[pymethods]
impl Shapes {
    /// masks: (pattern, mask) in the order applied; chars: a shape's length at most.
    #[new]
    fn new(masks: Vec<(String, String)>, chars: usize) -> PyResult<Self> {
        let masks = masks
            .into_iter()
            .map(|(pattern, mask)| {
                let regex = Pattern::new(&pattern).map_err(PyValueError::new_err)?;
                Ok(Mask { needs: regex.required_bytes(), regex, mask: mask.into_bytes() })
            })
            .collect::<PyResult<Vec<_>>>()?;
        Ok(Shapes { masks, chars, memo: FxMap::default(), known: Vec::new(), spare: Vec::new() })
    }

    /// The shape of a printable ASCII message (a test's handle on the rule).
    fn of(&mut self, message: &str) -> PyResult<String> {
        let k = self.index(message.as_bytes())?;
        Ok(self.known[k].clone())
    }
}

/// Distinct function names whose match is remembered (then forgotten all at once).
const FUNCS_REMEMBERED: usize = 1 << 12;

/// A thread as the cut watch keys it: (host, pid, tid) as the line spells them, each
/// written as its presence, length and bytes (one key, one allocation, and none to look
/// a known thread up: three boxed fields made three allocations a framing line, ~400
/// instructions).
fn thread_key(key: &mut Vec<u8>, host: Option<&[u8]>, pid: &[u8], tid: Option<&[u8]>) {
    key.clear();
    for part in [host, Some(pid), tid] {
        match part {
            Some(bytes) => {
                key.push(1);
                key.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
                key.extend_from_slice(bytes);
            }
            None => key.push(0),
        }
    }
}

#[pyclass(module = "dpmstream.parsers._native")]
pub(crate) struct ProfileLines {
    forms: Vec<Form>,
    func: Regex,
    roles: usize,
    catch_all: Vec<bool>, // per role: a catch-all (its own lines' shapes are Python's)
    watched: Vec<bool>,   // per role: the cut watch looks at the reassembler after it
    framing: Vec<u8>,     // per role: 1 opens a call, 2 returns, 0 neither
    max_bytes: usize,
    shapes: Py<Shapes>,
    /// The function names seen, each with whether `func` matches it: a log has few, and
    /// the match of each line's costs more than the lookup (forgotten all at once when full).
    own_funcs: FxMap<Box<[u8]>, bool>,
    threads: FxSet<Box<[u8]>>, // thread_key's
    key: Vec<u8>,              // the key being written
    #[pyo3(get)]
    returns_at_thread_start: u64,
    /// Whether the lines no role matched are shaped (else only counted, LineTally's
    /// `unmatched`): profile check prints only some profiles' (profile_check._Shaping)
    #[pyo3(get, set)]
    shape_unmatched: bool,
}

fn compile(pattern: &str) -> PyResult<Regex> {
    RegexBuilder::new()
        .jit_if_available(true)
        .build(pattern)
        .map_err(|e| PyValueError::new_err(e.to_string()))
}

fn slot(index: i64) -> usize {
    if index < 0 {
        ABSENT
    } else {
        index as usize
    }
}

fn span<'a>(locs: &impl Located, line: &'a [u8], group: usize) -> Option<&'a [u8]> {
    if group == ABSENT {
        return None;
    }
    locs.get(group).map(|(a, b)| &line[a..b])
}

/// The per-block counts, and what Python does with the block's lines.
#[pyclass(module = "dpmstream.parsers._native", frozen)]
pub(crate) struct LineTally {
    #[pyo3(get)]
    malformed: u64,
    #[pyo3(get)]
    foreign: u64,
    #[pyo3(get)]
    own: u64,
    /// lines whose envelope matched and no role did (shaped or not)
    #[pyo3(get)]
    unmatched: u64,
    /// per role (the order the constructor was given): lines matched, own lines matched
    #[pyo3(get)]
    roles: Vec<u64>,
    #[pyo3(get)]
    own_roles: Vec<u64>,
    /// (kind, first line, end, the watched line's role, its token or None)
    #[pyo3(get)]
    steps: Vec<(u8, usize, usize, usize, Option<String>)>,
    /// The shapes of the block's unmatched lines and own lines of a catch-all role, one
    /// per (role or None, shape) in the order they first came: (first line, role, its
    /// text `func: shape`, the message's shape alone, lines).
    #[pyo3(get)]
    shapes: Vec<(usize, Option<usize>, String, String, u64)>,
}

#[pymethods]
impl LineTally {
    /// What Python does with the block's lines, in order: (whether it reads the line
    /// whole, first line, end): a PYTHON step, or a stretch of adjacent own lines to feed
    /// (the runs and watched runs of `steps` that meet, merged), as
    /// ProfileTally.add_tallied took them from `steps`, a tuple a run made in Python.
    #[getter]
    fn feeds(&self) -> Vec<(bool, usize, usize)> {
        let mut out: Vec<(bool, usize, usize)> = Vec::new();
        for &(kind, start, end, _, _) in &self.steps {
            if let Some(last) = out.last_mut().filter(|last| kind != PYTHON && !last.0 && last.2 == start) {
                last.2 = end;
            } else {
                out.push((kind == PYTHON, start, end));
            }
        }
        out
    }

    /// The quiet LineWatch (line_watch.rs) of the block's watched lines: it notes their
    /// tokens in `gaps` and calls `hook(k, latest, orphans)` where the orphan count moved
    /// from `known` after a line of one of `orphan_roles` (or -1 once, `timed` false).
    #[pyo3(signature = (hook, timed, gaps, known, orphan_roles))]
    fn watch(&self, hook: PyObject, timed: bool, gaps: Py<TokenGaps>, known: i64, orphan_roles: Vec<usize>) -> LineWatch {
        let watched = self.steps.iter().filter(|s| s.0 == WATCH || s.0 == WATCH_TOKEN);
        let (mut points, mut tokens, mut orphan) = (Vec::new(), Vec::new(), Vec::new());
        for (kind, _, end, role, token) in watched {
            points.push(end - 1);
            tokens.push((*kind == WATCH_TOKEN).then(|| token.clone()));
            orphan.push(orphan_roles.contains(role));
        }
        LineWatch::quiet(points, hook, timed, Quiet { tokens, orphan, gaps, known })
    }
}

impl ProfileLines {
    fn frame(&mut self, line: &[u8], form: usize, role: usize) {
        let kind = self.framing[role];
        if kind == 0 {
            return;
        }
        let (f, form) = (&self.forms[form].regex, &self.forms[form]);
        let pid = span(f, line, form.pid).unwrap_or(b"");
        thread_key(&mut self.key, span(f, line, form.host), pid, span(f, line, form.tid));
        self.note(kind == 2);
    }

    /// The thread in `key` opened a call (or returned).
    fn note(&mut self, returns: bool) {
        if !self.threads.contains(self.key.as_slice()) {
            self.threads.insert(self.key.as_slice().into());
            if returns {
                self.returns_at_thread_start += 1;
            }
        }
    }

    /// Line `i` of the block into `pass`: `line` without its line break, None where
    /// Python reads it whole (not bytes or text, or not printable ASCII); `shared`, what
    /// the profiles before this one read of it.
    fn line(&mut self, py: Python<'_>, pass: &mut Pass, shared: &mut SharedLine, memo: &mut Memo, i: usize, line: Option<&[u8]>) -> PyResult<()> {
        let Some(line) = line.filter(|l| l.len() <= self.max_bytes) else {
            pass.close(i);
            pass.t.steps.push((PYTHON, i, i + 1, 0, None));
            return Ok(());
        };
        let Some(fi) = self.forms.iter_mut().position(|form| form.regex.find(line, shared)) else {
            pass.t.malformed += 1;
            pass.close(i);
            return Ok(());
        };
        let form = &mut self.forms[fi];
        let at = form.regex.get(0).map_or(0, |(_, e)| e);
        let alt = form.alts.iter_mut().position(|a| a.lead_fits(line, at) && a.matches_shared(&form.regex, line, at, memo));
        let form = &self.forms[fi];
        let func = span(&form.regex, line, form.func).unwrap_or(b"");
        let own = match self.own_funcs.get(func) {
            Some(&own) => own,
            None => {
                let own = matches!(self.func.is_match(func), Ok(true));
                if self.own_funcs.len() >= FUNCS_REMEMBERED {
                    self.own_funcs.clear();
                }
                self.own_funcs.insert(func.into(), own);
                own
            }
        };
        // where the role's pattern (or `unmatched`) begins: the message shaped
        let (role, has_token, token, message) = match alt.map(|k| &form.alts[k]) {
            Some(a) => {
                let (message, token) = a.spans_shared(&form.regex, line, at, memo);
                (a.role, a.token != ABSENT, token, message)
            }
            None => (None, false, None, at),
        };
        if role.is_none() {
            pass.t.unmatched += 1;
        }
        if (role.is_none() && self.shape_unmatched) || (own && role.is_some_and(|r| self.catch_all[r])) {
            let mut shapes = self.shapes.bind(py).borrow_mut();
            // the shape just made or looked up (no other since) is still Shapes' own
            let k = match shared.shaped {
                Some((at, k)) if at == message => k,
                _ => shapes.index(&line[message..])?,
            };
            shared.shaped = Some((message, k));
            let shape = shapes.known[k].as_str();
            let text = &mut pass.text;
            text.clear();
            // SAFETY: printable ASCII, checked by the caller.
            text.push_str(unsafe { std::str::from_utf8_unchecked(func) });
            text.push_str(": ");
            text.push_str(shape);
            let of_role = &mut pass.shaped[role.map_or(0, |r| r + 1)];
            match of_role.get(text.as_str()) {
                Some(&k) => pass.t.shapes[k].4 += 1,
                None => {
                    pass.t.shapes.push((i, role, text.clone(), shape.to_owned(), 1));
                    of_role.insert(text.clone(), pass.t.shapes.len() - 1);
                }
            }
        }
        if !own {
            pass.close(i);
            if let Some(r) = role {
                pass.t.foreign += 1;
                pass.t.roles[r] += 1;
            }
            return Ok(());
        }
        pass.t.own += 1;
        let Some(r) = role else {
            pass.run.get_or_insert(i);
            return Ok(());
        };
        pass.t.roles[r] += 1;
        pass.t.own_roles[r] += 1;
        self.frame(line, fi, r);
        if self.watched[r] || has_token {
            // SAFETY: printable ASCII, checked by the caller.
            let token = token.map(|b| unsafe { std::str::from_utf8_unchecked(b) }.to_owned());
            let start = pass.run.take().unwrap_or(i);
            pass.t.steps.push((if has_token { WATCH_TOKEN } else { WATCH }, start, i + 1, r, token));
        } else {
            pass.run.get_or_insert(i);
        }
        Ok(())
    }
}

/// One profile's tally of a block as it goes.
struct Pass {
    t: LineTally,
    /// `func: shape` -> its index in t.shapes, per role (0: unmatched, r + 1: role r),
    /// looked up by the text built in `text` (no allocation for a shape seen before)
    shaped: Vec<FxMap<String, usize>>,
    text: String,
    run: Option<usize>, // where the current run of own lines began
}

impl Pass {
    fn new(roles: usize) -> Self {
        let t = LineTally {
            malformed: 0,
            foreign: 0,
            own: 0,
            unmatched: 0,
            roles: vec![0; roles],
            own_roles: vec![0; roles],
            steps: Vec::new(),
            shapes: Vec::new(),
        };
        Pass { t, shaped: vec![FxMap::default(); roles + 1], text: String::new(), run: None }
    }

    /// The run of own lines open, if any, ends before line `at`.
    fn close(&mut self, at: usize) {
        if let Some(a) = self.run.take() {
            self.t.steps.push((RUN, a, at, 0, None));
        }
    }
}

/// The Memo of a tally of `profiles`: a place in it for each pattern alone (with its
/// token group) that more than one of them has, set in their Alts' `memo`.
fn share_patterns(profiles: &mut [PyRefMut<'_, ProfileLines>]) -> Memo {
    let mut count: FxMap<(String, usize), (usize, usize)> = FxMap::default(); // -> (profiles, place)
    for (k, p) in profiles.iter().enumerate() {
        for alt in p.forms.iter().flat_map(|f| &f.alts) {
            if let Some(same) = &alt.same {
                let entry = count.entry((same.clone(), alt.token)).or_insert((0, k));
                if entry.1 != k || entry.0 == 0 {
                    entry.0 += 1;
                    entry.1 = k;
                }
            }
        }
    }
    let mut places: FxMap<(String, usize), usize> = FxMap::default();
    for p in profiles.iter_mut() {
        for alt in p.forms.iter_mut().flat_map(|f| &mut f.alts) {
            alt.memo = ABSENT;
            let Some(same) = &alt.same else { continue };
            let key = (same.clone(), alt.token);
            if count.get(&key).is_some_and(|&(n, _)| n > 1) {
                let next = places.len();
                alt.memo = *places.entry(key).or_insert(next);
            }
        }
    }
    Memo { entries: vec![(0, 0, false, None); places.len()], line: 0 }
}

/// Lines `start` to `end` of `lines` (a LineBlock or a list of bytes), tallied for each
/// profile in `profiles`: each line read, cut and checked once, its LCGDM envelope read
/// once for the profiles whose head it is, then each profile's work on it in turn.
#[pyfunction]
#[pyo3(signature = (profiles, lines, end, start=0))]
pub(crate) fn tally_profiles(
    py: Python<'_>,
    profiles: Vec<Bound<'_, ProfileLines>>,
    lines: &Bound<'_, PyAny>,
    end: usize,
    start: usize,
) -> PyResult<Vec<LineTally>> {
    let chunk = match lines.downcast::<LineBlock>() {
        Ok(b) => Chunk::Block(b.get()),
        Err(_) => Chunk::List(lines.downcast::<PyList>()?),
    };
    let mut profiles = profiles.iter().map(|p| p.try_borrow_mut()).collect::<Result<Vec<_>, _>>()?;
    let mut passes: Vec<Pass> = profiles.iter().map(|p| Pass::new(p.roles)).collect();
    let mut memo = share_patterns(&mut profiles);
    let end = end.min(chunk.len());
    for i in start..end {
        let read = chunk.line(i)?;
        let line = read.as_ref().map(|(raw, _holder)| {
            let mut n = raw.len();
            while n > 0 && (raw[n - 1] == b'\n' || raw[n - 1] == b'\r') {
                n -= 1;
            }
            &raw[..n]
        });
        let line = line.filter(|l| printable_ascii(l));
        let mut shared = SharedLine::default();
        memo.line = i + 1;
        for (profile, pass) in profiles.iter_mut().zip(&mut passes) {
            profile.line(py, pass, &mut shared, &mut memo, i, line)?;
        }
    }
    Ok(passes
        .into_iter()
        .map(|mut pass| {
            pass.close(end);
            pass.t
        })
        .collect())
}

#[pymethods]
impl ProfileLines {
    /// forms: per envelope form (native, then rsyslog), (pattern, func group, host group,
    /// pid group, tid group, alternatives): the envelope alone and its role patterns
    /// alone, or its one portable pattern and the wrapper groups in it
    /// (fastpath.role_plan); an alternative is (its pattern alone or None, lead, wrapper
    /// group, role index or None for unmatched, token group); groups -1 where absent. func: the
    /// profile's function pattern (anchored both ends here). roles: how many role names
    /// the indices run over; catch_all, watched, opening, returns: role indices.
    #[new]
    #[pyo3(signature = (forms, func, roles, catch_all, watched, opening, returns, max_bytes, shapes))]
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn new(
        forms: Vec<(String, i64, i64, i64, i64, Vec<(Option<String>, Vec<u8>, i64, Option<usize>, i64)>)>,
        func: &str,
        roles: usize,
        catch_all: Vec<usize>,
        watched: Vec<usize>,
        opening: Vec<usize>,
        returns: Vec<usize>,
        max_bytes: usize,
        shapes: Py<Shapes>,
    ) -> PyResult<Self> {
        let mut compiled = Vec::with_capacity(forms.len());
        for (pattern, func_group, host, pid, tid, alts) in forms {
            let regex = Head::new(&pattern)?;
            let alts = alts
                .into_iter()
                .map(|(alone, lead, group, role, token)| {
                    let same = alone.as_deref().and_then(same_match);
                    let regex = alone.map(|p| Pattern::new(&p).map_err(PyValueError::new_err)).transpose()?;
                    Ok(Alt { regex, lead, group: slot(group), role, token: slot(token), same, memo: ABSENT })
                })
                .collect::<PyResult<Vec<_>>>()?;
            if alts.iter().any(|a| (a.regex.is_none() && a.group == ABSENT) || a.role.is_some_and(|r| r >= roles)) {
                return Err(PyValueError::new_err("an alternative needs its group and a known role"));
            }
            compiled.push(Form { regex, func: slot(func_group), host: slot(host), pid: slot(pid), tid: slot(tid), alts });
        }
        let flags = |of: &[usize]| (0..roles).map(|r| of.contains(&r)).collect::<Vec<_>>();
        let framing = (0..roles).map(|r| if returns.contains(&r) { 2 } else { u8::from(opening.contains(&r)) }).collect();
        Ok(ProfileLines {
            forms: compiled,
            func: compile(&format!(r"(?s)\A(?:{func}\z)"))?,
            roles,
            catch_all: flags(&catch_all),
            watched: flags(&watched),
            framing,
            max_bytes,
            shapes,
            own_funcs: FxMap::default(),
            threads: FxSet::default(),
            key: Vec::new(),
            returns_at_thread_start: 0,
            shape_unmatched: true,
        })
    }

    /// A line Python read (a PYTHON step) opened a call (or returned) on this thread.
    #[pyo3(signature = (host, pid, tid, returns))]
    fn note_thread(&mut self, host: Option<&Bound<'_, PyString>>, pid: &str, tid: Option<&str>, returns: bool) -> PyResult<()> {
        let host = match host {
            Some(h) => Some(h.to_str()?.as_bytes()),
            None => None,
        };
        thread_key(&mut self.key, host, pid.as_bytes(), tid.map(str::as_bytes));
        self.note(returns);
        Ok(())
    }
}

/// A DOME line a block left to Python (`dome_lines`): parsed (its event), unmatched (its
/// shape), or not read here (not UTF-8: DomeTally.add decodes and parses it).
const DOME_PARSED: u8 = 0;
const DOME_UNMATCHED: u8 = 1;
const DOME_PYTHON: u8 = 2;

/// The first `end` lines of `lines` through a DOME profile's scanner (the one its
/// parser reads with), as DomeTally.add parses them one by one: the lines of other
/// programs and those without a syslog envelope (all of a DPM log's) only counted here,
/// (foreign, malformed); the others, in order, as (index, kind, event or None).
#[pyfunction]
#[allow(clippy::type_complexity)]
pub(crate) fn dome_lines(
    py: Python<'_>,
    scanner: &Bound<'_, DomeScanner>,
    lines: &Bound<'_, PyAny>,
    end: usize,
) -> PyResult<(u64, u64, Vec<(usize, u8, Option<DomeLine>)>)> {
    let chunk = match lines.downcast::<LineBlock>() {
        Ok(b) => Chunk::Block(b.get()),
        Err(_) => Chunk::List(lines.downcast::<PyList>()?),
    };
    let mut scanner = scanner.borrow_mut();
    let (mut foreign, mut malformed, mut left) = (0u64, 0u64, Vec::new());
    for i in 0..end.min(chunk.len()) {
        let text = match chunk.line(i)? {
            // ASCII, most lines, checked 16 bytes a step (chunk.rs): std's from_utf8 read
            // them a word at a time (~30 M instructions of the thesis log's check)
            Some((raw, _holder)) => utf8(raw),
            None => None,
        };
        let Some(text) = text else {
            left.push((i, DOME_PYTHON, None));
            continue;
        };
        if scanner.no_envelope(text) {  // scan()'s verdict, without moving its Outcome
            malformed += 1;
            continue;
        }
        match scanner.scan(py, text)? {
            Outcome::Parsed(ev) => left.push((i, DOME_PARSED, Some(scanner.line(py, ev)))),
            Outcome::Failed(DOME_FOREIGN) => foreign += 1,
            Outcome::Failed(DOME_MALFORMED) => malformed += 1,
            Outcome::Failed(_) => left.push((i, DOME_UNMATCHED, None)),
        }
    }
    Ok((foreign, malformed, left))
}

#[cfg(test)]
mod tests {
    use super::same_match;

    #[test]
    fn a_pattern_alone_is_the_same_whatever_its_wrappers_number() {
        let a = same_match(r"(?s)\G(?:(?P<a4>DP098 - (?P<a4_op>\w+) (?P<a4_token>[0-9a-f-]+)))\s*\z");
        let b = same_match(r"(?s)\G(?:(?P<a12>DP098 - (?P<a12_op>\w+) (?P<a12_token>[0-9a-f-]+)))\s*\z");
        assert!(a.is_some());
        assert_eq!(a, b);
        // another group's name, or other text, is another pattern
        let c = same_match(r"(?s)\G(?:(?P<a4>DP098 - (?P<a4_op>\w+) (?P<a4_nfiles>[0-9a-f-]+)))\s*\z");
        assert_ne!(a, c);
        assert_ne!(same_match(r"(?P<a1>returns (?P<a1_rc>-?\d+))"), same_match(r"(?P<a1>returns (?P<a1_rc>\d+))"));
    }

    #[test]
    fn a_pattern_referring_to_a_group_is_shared_by_none() {
        for refers in [r"(?P<a1>(\w) \1)", r"(?P<a1>(?P<a1_x>\w) (?P=a1_x))", r"(?P<a1>\k<a1_x>)", r"(?P<a1>\g1)", r"(?P<a1>(?R))"] {
            assert_eq!(same_match(refers), None, "{refers}");
        }
    }
}
