//! The run's aggregates gathered in the extension: what streams/sinks/summary.Summary and
//! streams/sinks/directories.DirectoryStats keep, from the same records, by the same rules,
//! in the same order and with the same reservoir sample (CPython's Mersenne Twister seeded
//! as `random.Random(1)`), so that a replay that only summarises runs no Python per record.
//! The Python sinks stay the reference: they load this state when the run ends
//! (streams/sinks/tally.py), and tests/streams/sinks/test_tally.py requires the same
//! summary and directory table from both. A record comes as its dict (`write`, `__call__`)
//! or, from the compiled engine, as the engine's own value (rec.rs: no dict made); the
//! rules are written once, over a `Record` view of either.

use std::hash::Hash;

use pyo3::exceptions::{PyKeyError, PyTypeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use std::cell::RefCell;

use crate::hashing::FxMap;
use crate::names::{Names, Sym};
use crate::rec::{Rec, RequestRec};

// -- random.Random(1), as CPython's _random module runs it --------------------------------
const N: usize = 624;
const M: usize = 397;

pub(crate) struct Mt {
    mt: [u32; N],
    index: usize,
}

impl Mt {
    /// init_by_array([seed]) after init_genrand(19650218): CPython's seeding of a small int.
    pub(crate) fn seeded(seed: u32) -> Mt {
        let mut mt = [0u32; N];
        mt[0] = 19_650_218;
        for i in 1..N {
            mt[i] = 1_812_433_253u32.wrapping_mul(mt[i - 1] ^ (mt[i - 1] >> 30)).wrapping_add(i as u32);
        }
        let (mut i, mut j) = (1usize, 0u32);
        for _ in 0..N {
            mt[i] = (mt[i] ^ (mt[i - 1] ^ (mt[i - 1] >> 30)).wrapping_mul(1_664_525))
                .wrapping_add(seed)
                .wrapping_add(j);
            i += 1;
            j = 0; // the key has one word
            if i >= N {
                mt[0] = mt[N - 1];
                i = 1;
            }
        }
        for _ in 0..N - 1 {
            mt[i] = (mt[i] ^ (mt[i - 1] ^ (mt[i - 1] >> 30)).wrapping_mul(1_566_083_941)).wrapping_sub(i as u32);
            i += 1;
            if i >= N {
                mt[0] = mt[N - 1];
                i = 1;
            }
        }
        mt[0] = 0x8000_0000;
        Mt { mt, index: N }
    }

    /// genrand_uint32's refill, in CPython's three loops: the words whose partner k + M
    /// is ahead, those whose partner wrapped round, and the last with the first (a `% N`
    /// on both indices of every word was most of the Twister's cost in the model's runs).
    fn twist(&mut self) {
        #[inline(always)]
        fn word(upper: u32, lower: u32, partner: u32) -> u32 {
            let y = (upper & 0x8000_0000) | (lower & 0x7fff_ffff);
            partner ^ (y >> 1) ^ (0u32.wrapping_sub(y & 1) & 0x9908_b0df)
        }
        let mt = &mut self.mt;
        for k in 0..N - M {
            mt[k] = word(mt[k], mt[k + 1], mt[k + M]);
        }
        for k in N - M..N - 1 {
            mt[k] = word(mt[k], mt[k + 1], mt[k + M - N]);
        }
        mt[N - 1] = word(mt[N - 1], mt[0], mt[M - 1]);
        self.index = 0;
    }

    pub(crate) fn next_u32(&mut self) -> u32 {
        if self.index >= N {
            self.twist();
        }
        let mut y = self.mt[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// getrandbits(k), 1 <= k <= 64: the low word first, the high word's top bits.
    pub(crate) fn bits(&mut self, k: u32) -> u64 {
        if k <= 32 {
            return u64::from(self.next_u32() >> (32 - k));
        }
        let low = u64::from(self.next_u32());
        let high = u64::from(self.next_u32() >> (64 - k));
        low | (high << 32)
    }

    /// randrange(n), n >= 1: _randbelow_with_getrandbits.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        let k = 64 - n.leading_zeros();
        loop {
            let r = self.bits(k);
            if r < n {
                return r;
            }
        }
    }

    /// Random.getstate()[1]: the 624 words and the index, for Random.setstate.
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let mut words: Vec<u64> = self.mt.iter().map(|&w| u64::from(w)).collect();
        words.push(self.index as u64);
        PyTuple::new(py, words)
    }
}

// -- Series (summary.Series) ------------------------------------------------------------
#[derive(Default)]
pub(crate) struct Series {
    count: u64,
    sum: i128,
    max: Option<i64>,
    values: Vec<i64>,
    rng: Option<Box<Mt>>,
}

impl Series {
    pub(crate) fn add(&mut self, value: i64, reservoir: usize) {
        self.count += 1;
        self.sum += i128::from(value);
        if self.max.map_or(true, |m| value > m) {
            self.max = Some(value);
        }
        if self.values.len() < reservoir {
            push_gently(&mut self.values, value, reservoir);
            return;
        }
        let rng = self.rng.get_or_insert_with(|| Box::new(Mt::seeded(1)));
        let j = rng.below(self.count) as usize;
        if j < reservoir {
            self.values[j] = value;
        }
    }

    /// (count, sum, max, values, random state or None): Series.restored's arguments, the
    /// values as the bytes of an array('q'); the series' memory is freed as it goes.
    pub(crate) fn into_py(self, py: Python<'_>) -> PyResult<Bound<'_, PyTuple>> {
        let rng = match &self.rng {
            Some(r) => r.state(py)?.into_any(),
            None => py.None().into_bound(py),
        };
        (self.count, self.sum, self.max, int64_bytes(py, self.values), rng).into_pyobject(py)
    }
}

/// The bytes of an array('q') holding `values` (machine order), the Vec freed after.
fn int64_bytes(py: Python<'_>, values: Vec<i64>) -> Bound<'_, PyBytes> {
    // SAFETY: i64 has no padding; the slice lives while the bytes are copied.
    let raw = unsafe { std::slice::from_raw_parts(values.as_ptr() as *const u8, values.len() * 8) };
    PyBytes::new(py, raw)
}

/// Vec::push growing by an eighth (as Python's lists and arrays do), never past `cap`:
/// doubling left up to half of a long series' memory unused (16 MiB on a 10 M-line log).
fn push_gently(v: &mut Vec<i64>, value: i64, cap: usize) {
    if v.len() == v.capacity() {
        let more = (v.len() / 8).max(16).min(cap.saturating_sub(v.len()).max(1));
        v.reserve_exact(more);
    }
    v.push(value);
}

/// A dict in insertion order (the Python sinks' dicts are; ties in their sorts keep it).
pub(crate) struct Ordered<K, V> {
    index: FxMap<K, usize>,
    pub(crate) entries: Vec<(K, V)>,
}

impl<K: Hash + Eq + Clone, V: Default> Ordered<K, V> {
    pub(crate) fn new() -> Self {
        Ordered { index: FxMap::default(), entries: Vec::new() }
    }

    pub(crate) fn entry(&mut self, key: K) -> &mut V {
        self.entry_of(&key, K::clone)
    }

    /// entry() by a borrowed key: the owned one is made only for a new entry.
    fn entry_of<Q: ?Sized + Hash + Eq>(&mut self, key: &Q, owned: impl FnOnce(&Q) -> K) -> &mut V
    where
        K: std::borrow::Borrow<Q>,
    {
        let i = match self.index.get(key) {
            Some(&i) => i,
            None => {
                let key = owned(key);
                self.index.insert(key.clone(), self.entries.len());
                self.entries.push((key, V::default()));
                self.entries.len() - 1
            }
        };
        &mut self.entries[i].1
    }
}

/// directories.Directory.
#[derive(Default)]
struct Dir {
    calls: u64,
    ms: i128,
    linked_ms: i128,
    creats: Series,
    starts: Vec<i64>,
    ends: Vec<i64>,
    folded_peak: i64,
    cutoff: Option<i64>,
    fold_at: usize, // 0 until the first creat: then directories.FOLD_AT
}

impl Dir {
    /// Directory._sweep: the most creats open at an instant in [since, before).
    fn sweep(&self, since: Option<i64>, before: Option<i64>) -> i64 {
        let mut starts = self.starts.clone();
        let mut ends = self.ends.clone();
        starts.sort_unstable();
        ends.sort_unstable();
        let (mut peak, mut now, mut closed) = (0i64, 0i64, 0usize);
        for &start in &starts {
            if before.is_some_and(|b| start >= b) {
                break;
            }
            while closed < ends.len() && ends[closed] <= start {
                closed += 1;
                now -= 1;
            }
            now += 1;
            if since.map_or(true, |s| start >= s) {
                peak = peak.max(now);
            }
        }
        peak
    }

    /// Directory.fold: the intervals lying wholly before `cutoff` folded into the peak.
    fn fold(&mut self, cutoff: i64, fold_at: usize) {
        self.folded_peak = self.folded_peak.max(self.sweep(self.cutoff, Some(cutoff)));
        let (starts, ends): (Vec<i64>, Vec<i64>) = self.starts.iter().zip(&self.ends)
            .filter(|(s, e)| (**s).max(**e) >= cutoff).map(|(s, e)| (*s, *e)).unzip();
        self.fold_at = fold_at.max(2 * starts.len());
        self.starts = starts;
        self.ends = ends;
        self.cutoff = Some(cutoff);
    }
}

pub(crate) type Name = u32; // an interned string; NONE is Python's None
pub(crate) const NONE: Name = 0;
const UNKNOWN: Name = Name::MAX;
/// Strings the table knows by their object (held, so that no other takes their address).
const OBJECTS: usize = 8;

/// The tally's names (ops, daemons, statuses) as small numbers, each with its Python
/// string for the state it hands back. A record's name costs a table lookup, not a text
/// hash: the engine's names come as its own numbers (names.rs's Sym), each looked up here
/// once; a Python string seen before (the few statuses, on every record) by its object.
pub(crate) struct NameTable {
    index: FxMap<Box<str>, Name>,
    texts: Vec<Option<Py<PyString>>>,
    pub(crate) truthy: Vec<bool>,
    by_sym: Vec<Name>,
    by_object: Vec<(Py<PyString>, Name)>,
}

impl NameTable {
    pub(crate) fn new() -> Self {
        NameTable { index: FxMap::default(), texts: vec![None], truthy: vec![false], by_sym: Vec::new(), by_object: Vec::new() }
    }

    pub(crate) fn of_text(&mut self, text: &str, string: impl FnOnce() -> Py<PyString>) -> Name {
        if let Some(&n) = self.index.get(text) {
            return n;
        }
        let n = self.texts.len() as Name;
        self.index.insert(text.into(), n);
        self.texts.push(Some(string()));
        self.truthy.push(!text.is_empty());
        n
    }

    /// A name as a record's dict holds it: None or a str (anything else is refused).
    pub(crate) fn of_py(&mut self, v: &Bound<'_, PyAny>) -> PyResult<Name> {
        if v.is_none() {
            return Ok(NONE);
        }
        let s = v.downcast::<PyString>().map_err(|_| PyTypeError::new_err("a record's name is not a str"))?;
        if let Some((_, n)) = self.by_object.iter().find(|(o, _)| o.as_ptr() == s.as_ptr()) {
            return Ok(*n);
        }
        let n = self.of_text(s.to_str()?, || s.clone().unbind());
        if self.by_object.len() < OBJECTS {
            self.by_object.push((s.clone().unbind(), n));
        }
        Ok(n)
    }

    /// A name as the engine holds it.
    fn of_sym(&mut self, py: Python<'_>, names: &RefCell<Names>, sym: Sym) -> Name {
        if let Some(&n) = self.by_sym.get(sym as usize) {
            if n != UNKNOWN {
                return n;
            }
        }
        let n = {
            let mut names = names.borrow_mut();
            let string = names.py(py, sym);
            let string = string.bind(py).downcast::<PyString>().expect("Names::py makes a str").clone().unbind();
            self.of_text(names.text(sym), || string)
        };
        if self.by_sym.len() <= sym as usize {
            self.by_sym.resize(sym as usize + 1, UNKNOWN);
        }
        self.by_sym[sym as usize] = n;
        n
    }

    pub(crate) fn py<'py>(&self, py: Python<'py>, n: Name) -> Bound<'py, PyAny> {
        match &self.texts[n as usize] {
            Some(s) => s.bind(py).clone().into_any(),
            None => py.None().into_bound(py),
        }
    }
}

/// PHASES' index of proc_ms, which DirectoryStats also sums.
const PROC: usize = 3;
/// (record field, phase), in the order the summary renders them.
use crate::schema::{named, PHASES};

const PHASE_FIELDS: [&str; PHASES.len()] = {
    let mut fields = [""; PHASES.len()];
    let mut i = 0;
    while i < PHASES.len() {
        fields[i] = PHASES[i].0;
        i += 1;
    }
    fields
};
// phase_value's arms are PHASES' fields by index: a reordered PHASES fails the build.
const _: () = assert!(
    PHASES.len() == 9
        && named(&PHASE_FIELDS, 0, "auth_ms")
        && named(&PHASE_FIELDS, 1, "request_ms")
        && named(&PHASE_FIELDS, 2, "queue_ms")
        && named(&PHASE_FIELDS, PROC, "proc_ms")
        && named(&PHASE_FIELDS, 4, "poll_ms")
        && named(&PHASE_FIELDS, 5, "ready_wait_ms")
        && named(&PHASE_FIELDS, 6, "transfer_ms")
        && named(&PHASE_FIELDS, 7, "done_ms")
        && named(&PHASE_FIELDS, 8, "total_ms"),
    "tally.rs's phase_value does not match schema::PHASES"
);

/// The engine's request's value of PHASES[i] (by index: no field name compared per record).
fn phase_value(r: &RequestRec, i: usize) -> Option<i64> {
    match i {
        0 => r.auth_ms,
        1 => r.request_ms,
        2 => r.queue_ms,
        PROC => r.proc_ms,
        4 => Some(r.poll_ms),
        5 => r.ready_wait_ms,
        6 => r.transfer_ms,
        7 => r.done_ms,
        8 => r.total_ms,
        _ => None,
    }
}

#[pyclass(module = "dpmstream.parsers._native")]
pub struct Tally {
    reservoir: usize,
    max_dirs: usize,
    fold_ms: i64,    // directories.FOLD_MS
    fold_at: usize,  // directories.FOLD_AT
    ns_daemon: Name, // DirectoryStats' daemon
    creat: Name,
    /// Called with each record after it is tallied (the run's other sinks), or None.
    #[pyo3(get, set)]
    pub(crate) forward: Option<PyObject>,
    /// Records the engine handed over as they are (no dict made): deliver.rs.
    #[pyo3(get)]
    engine_records: u64,
    names: NameTable,
    phase_keys: Vec<Py<PyString>>,
    // Summary
    first_ms: Option<i64>,
    last_ms: Option<i64>,
    statuses: Ordered<(Name, Name), u64>,
    phases: Ordered<(Name, usize), Series>,
    polls: Ordered<Name, Series>,
    calls: Ordered<(Name, Name), Series>,
    call_errors: Ordered<(Name, Name), u64>,
    // DirectoryStats
    proc_ms: i128,
    dirs: Ordered<Box<str>, Dir>,
    dropped_dirs: u64,
}

fn need<'py>(record: &Bound<'py, PyDict>, key: &Bound<'py, PyString>) -> PyResult<Bound<'py, PyAny>> {
    record.get_item(key)?.ok_or_else(|| PyKeyError::new_err(key.clone().unbind()))
}

fn get<'py>(record: &Bound<'py, PyDict>, key: &Bound<'py, PyString>) -> PyResult<Option<Bound<'py, PyAny>>> {
    Ok(record.get_item(key)?.filter(|v| !v.is_none()))
}

fn int(v: Option<Bound<'_, PyAny>>) -> PyResult<Option<i64>> {
    v.map(|v| v.extract::<i64>()).transpose()
}

fn truthy_text(v: &Option<Bound<'_, PyAny>>) -> PyResult<bool> {
    match v {
        None => Ok(false),
        Some(v) => v.is_truthy(),
    }
}

/// The fields the tally reads.
#[derive(Clone, Copy)]
enum Field {
    Accepted,
    Started,
    Ended,
    Op,
    Status,
    Phase(usize),
    Polls,
    Daemon,
    DurationMs,
    Rc,
    Path,
    Token,
}

/// What the tally reads of a record: its dict (the reference: `record.get(...)`,
/// `record[...]`), or the engine's record before any dict is made of it.
trait Record<'py> {
    fn py(&self) -> Python<'py>;
    fn is_request(&self) -> PyResult<bool>;
    /// An int field, None when absent or None (`record.get`).
    fn int(&self, f: Field) -> PyResult<Option<i64>>;
    /// An int field that must be there (`record[...]`).
    fn need_int(&self, f: Field) -> PyResult<i64>;
    /// A name field that must be there (a str, or None), as the tally's number.
    fn name(&self, f: Field, names: &mut NameTable) -> PyResult<Name>;
    /// Whether a text field is there and true (not None, not empty).
    fn has_text(&self, f: Field) -> PyResult<bool>;
    /// A text field has_text found, read as a str (anything else is refused).
    fn with_text<R>(&self, f: Field, read: impl FnOnce(&str) -> R) -> PyResult<R>;
}

struct DictRecord<'a, 'py> {
    d: &'a Bound<'py, PyDict>,
    phase_keys: &'a [Py<PyString>],
}

impl<'py> DictRecord<'_, 'py> {
    fn key(&self, f: Field) -> Bound<'py, PyString> {
        let py = self.d.py();
        match f {
            Field::Accepted => intern!(py, "accepted").clone(),
            Field::Started => intern!(py, "started").clone(),
            Field::Ended => intern!(py, "ended").clone(),
            Field::Op => intern!(py, "op").clone(),
            Field::Status => intern!(py, "status").clone(),
            Field::Phase(i) => self.phase_keys[i].bind(py).clone(),
            Field::Polls => intern!(py, "polls").clone(),
            Field::Daemon => intern!(py, "daemon").clone(),
            Field::DurationMs => intern!(py, "duration_ms").clone(),
            Field::Rc => intern!(py, "rc").clone(),
            Field::Path => intern!(py, "path").clone(),
            Field::Token => intern!(py, "token").clone(),
        }
    }
}

impl<'py> Record<'py> for DictRecord<'_, 'py> {
    fn py(&self) -> Python<'py> {
        self.d.py()
    }
    fn is_request(&self) -> PyResult<bool> {
        let py = self.d.py();
        need(self.d, intern!(py, "kind"))?.eq(intern!(py, "request"))
    }
    fn int(&self, f: Field) -> PyResult<Option<i64>> {
        int(get(self.d, &self.key(f))?)
    }
    fn need_int(&self, f: Field) -> PyResult<i64> {
        need(self.d, &self.key(f))?.extract()
    }
    fn name(&self, f: Field, names: &mut NameTable) -> PyResult<Name> {
        names.of_py(&need(self.d, &self.key(f))?)
    }
    fn has_text(&self, f: Field) -> PyResult<bool> {
        truthy_text(&get(self.d, &self.key(f))?)
    }
    fn with_text<R>(&self, f: Field, read: impl FnOnce(&str) -> R) -> PyResult<R> {
        let v = need(self.d, &self.key(f))?;
        let s = v.downcast::<PyString>().map_err(|_| PyTypeError::new_err(format!("a record's {} is not a str", field_name(f))))?;
        Ok(read(s.to_str()?))
    }
}

struct EngineRecord<'a, 'py> {
    py: Python<'py>,
    rec: &'a Rec,
    names: &'a RefCell<Names>,
}

impl<'py> EngineRecord<'_, 'py> {
    fn missing(&self, f: Field) -> PyErr {
        PyKeyError::new_err(format!("the engine's record has no field {}", field_name(f)))
    }
}

fn field_name(f: Field) -> &'static str {
    match f {
        Field::Accepted => "accepted",
        Field::Started => "started",
        Field::Ended => "ended",
        Field::Op => "op",
        Field::Status => "status",
        Field::Phase(i) => PHASES[i].0,
        Field::Polls => "polls",
        Field::Daemon => "daemon",
        Field::DurationMs => "duration_ms",
        Field::Rc => "rc",
        Field::Path => "path",
        Field::Token => "token",
    }
}

impl<'py> Record<'py> for EngineRecord<'_, 'py> {
    fn py(&self) -> Python<'py> {
        self.py
    }
    fn is_request(&self) -> PyResult<bool> {
        Ok(matches!(self.rec, Rec::Request(_)))
    }
    fn int(&self, f: Field) -> PyResult<Option<i64>> {
        Ok(match (self.rec, f) {
            (Rec::Request(r), Field::Accepted) => r.accepted,
            (Rec::Request(r), Field::Started) => r.started,
            (Rec::Request(r), Field::Ended) => r.ended,
            (Rec::Request(r), Field::Polls) => Some(r.polls),
            (Rec::Request(r), Field::Phase(i)) => phase_value(r, i),
            (Rec::Call(c), Field::Started) => Some(c.started),
            (Rec::Call(c), Field::Ended) => c.ended,
            (Rec::Call(c), Field::DurationMs) => c.duration_ms,
            (Rec::Call(c), Field::Rc) => c.rc,
            _ => None, // absent from that kind of record (a call has no `accepted`)
        })
    }
    fn need_int(&self, f: Field) -> PyResult<i64> {
        self.int(f)?.ok_or_else(|| self.missing(f))
    }
    fn name(&self, f: Field, names: &mut NameTable) -> PyResult<Name> {
        let sym = match (self.rec, f) {
            (Rec::Request(r), Field::Op) => r.op,
            (Rec::Request(r), Field::Status) => return names.of_py(r.status.bind(self.py)),
            (Rec::Call(c), Field::Op) => Some(c.op),
            (Rec::Call(c), Field::Daemon) => Some(c.daemon),
            _ => return Err(self.missing(f)),
        };
        Ok(match sym {
            Some(s) => names.of_sym(self.py, self.names, s),
            None => NONE,
        })
    }
    fn has_text(&self, f: Field) -> PyResult<bool> {
        Ok(self.text(f).is_some_and(|t| !t.is_empty()))
    }
    fn with_text<R>(&self, f: Field, read: impl FnOnce(&str) -> R) -> PyResult<R> {
        self.text(f).map(read).ok_or_else(|| self.missing(f))
    }
}

impl EngineRecord<'_, '_> {
    fn text(&self, f: Field) -> Option<&str> {
        match (self.rec, f) {
            (Rec::Call(c), Field::Path) => c.path.as_deref(),
            (Rec::Call(c), Field::Token) => c.token.as_deref(),
            (Rec::Request(r), Field::Token) => r.token.as_deref(),
            _ => None,
        }
    }
}

/// linking.directory_of: the path up to its last slash, "/" for a top-level entry.
fn directory_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) => "/",
        Some(i) => &path[..i],
        None => path,
    }
}

impl Tally {
    fn py_name<'py>(&self, py: Python<'py>, n: Name) -> Bound<'py, PyAny> {
        self.names.py(py, n)
    }

    fn cover(&mut self, t: Option<i64>) {
        if let Some(t) = t {
            if self.first_ms.map_or(true, |f| t < f) {
                self.first_ms = Some(t);
            }
            if self.last_ms.map_or(true, |l| t > l) {
                self.last_ms = Some(t);
            }
        }
    }

    /// Summary.write and DirectoryStats.write, one after the other.
    fn tally<'py>(&mut self, record: &impl Record<'py>) -> PyResult<()> {
        let py = record.py();
        let ended = record.int(Field::Ended)?;
        for t in [record.int(Field::Accepted)?, record.int(Field::Started)?, ended] {
            self.cover(t);
        }
        let reservoir = self.reservoir;
        if record.is_request()? {
            let op = record.name(Field::Op, &mut self.names)?;
            let op = if self.names.truthy[op as usize] { op } else { self.names.of_text("?", || intern!(py, "?").clone().unbind()) };
            let status = record.name(Field::Status, &mut self.names)?;
            *self.statuses.entry((op, status)) += 1;
            for i in 0..PHASES.len() {
                if let Some(v) = record.int(Field::Phase(i))? {
                    self.phases.entry((op, i)).add(v, reservoir);
                    if i == PROC {
                        self.proc_ms += i128::from(v); // DirectoryStats' proc time
                    }
                }
            }
            let polls = record.need_int(Field::Polls)?;
            self.polls.entry(op).add(polls, reservoir);
            return Ok(());
        }
        let key = (record.name(Field::Daemon, &mut self.names)?, record.name(Field::Op, &mut self.names)?);
        if let Some(d) = record.int(Field::DurationMs)? {
            self.calls.entry(key).add(d, reservoir);
        }
        let rc = record.int(Field::Rc)?;
        if rc != Some(0) {
            *self.call_errors.entry(key) += 1;
        }
        self.directory(record, key, ended)
    }

    fn directory<'py>(&mut self, record: &impl Record<'py>, (daemon, op): (Name, Name), ended: Option<i64>) -> PyResult<()> {
        if daemon != self.ns_daemon || !record.has_text(Field::Path)? {
            return Ok(());
        }
        let Some(ended) = ended else {
            return Ok(());
        };
        let started = record.need_int(Field::Started)?;
        let linked = record.has_text(Field::Token)?;
        let creat = op == self.creat;
        record.with_text(Field::Path, |path| self.add_to_directory(directory_of(path), started, ended, linked, creat))
    }

    fn add_to_directory(&mut self, name: &str, started: i64, ended: i64, linked: bool, creat: bool) {
        if !self.dirs.index.contains_key(name) && self.dirs.entries.len() >= self.max_dirs + self.max_dirs / 10 {
            self.shrink();
        }
        let ms = ended.saturating_sub(started).max(0);
        let (reservoir, fold_ms, fold_at) = (self.reservoir, self.fold_ms, self.fold_at);
        let d = self.dirs.entry_of(name, |n: &str| Box::from(n));
        d.calls += 1;
        d.ms += i128::from(ms);
        if linked {
            d.linked_ms += i128::from(ms);
        }
        if creat {
            d.creats.add(ms, reservoir);
            push_gently(&mut d.starts, started, usize::MAX);
            push_gently(&mut d.ends, ended, usize::MAX);
            if d.starts.len() >= d.fold_at.max(fold_at) {
                let latest = d.ends.iter().copied().max().unwrap_or(ended);
                d.fold(latest.saturating_sub(fold_ms), fold_at);
            }
        }
    }

    fn tally_dict(&mut self, record: &Bound<'_, PyDict>) -> PyResult<()> {
        let keys = std::mem::take(&mut self.phase_keys);
        let result = self.tally(&DictRecord { d: record, phase_keys: &keys });
        self.phase_keys = keys;
        result
    }

    /// A record the engine hands over (rec.rs): its own value tallied as its dict would be,
    /// or a restored record's dict.
    pub(crate) fn tally_rec(&mut self, py: Python<'_>, rec: &Rec, names: &RefCell<Names>) -> PyResult<()> {
        match rec {
            Rec::Dict(d) => self.tally_dict(d.bind(py)),
            _ => {
                self.engine_records += 1;
                self.tally(&EngineRecord { py, rec, names })
            }
        }
    }

    /// DirectoryStats._shrink: the max_dirs costliest stay (a stable sort: ties keep order).
    fn shrink(&mut self) {
        let mut entries = std::mem::take(&mut self.dirs.entries);
        entries.sort_by_key(|(_, d)| std::cmp::Reverse(d.ms));
        self.dropped_dirs += entries.len().saturating_sub(self.max_dirs) as u64;
        entries.truncate(self.max_dirs);
        self.dirs.index = entries.iter().enumerate().map(|(i, (k, _))| (k.clone(), i)).collect();
        self.dirs.entries = entries;
    }
}

/// A tally's __call__: the record's dict tallied by `tally`, which gives the tally's
/// `forward`, then handed to that, if any, with the tally no longer borrowed (a forward
/// may read it).
pub(crate) fn tally_and_forward<T>(slf: &Bound<'_, T>, record: &Bound<'_, PyDict>,
                                   tally: impl FnOnce(&mut T) -> PyResult<Option<PyObject>>) -> PyResult<()>
where
    T: pyo3::PyClass<Frozen = pyo3::pyclass::boolean_struct::False>,
{
    let forward = tally(&mut slf.borrow_mut())?;
    if let Some(f) = forward {
        f.call1(slf.py(), (record,))?;
    }
    Ok(())
}

#[pymethods]
impl Tally {
    #[new]
    #[pyo3(signature = (reservoir, max_dirs, ns_daemon, fold_ms, fold_at, forward=None))]
    fn new(py: Python<'_>, reservoir: usize, max_dirs: usize, ns_daemon: String, fold_ms: i64, fold_at: usize, forward: Option<PyObject>) -> Self {
        let mut names = NameTable::new();
        let ns_daemon = names.of_text(&ns_daemon, || PyString::new(py, &ns_daemon).unbind());
        let creat = names.of_text("creat", || intern!(py, "creat").clone().unbind());
        Tally {
            fold_ms,
            fold_at,
            phase_keys: PHASES.iter().map(|(field, _)| PyString::intern(py, field).unbind()).collect(),
            reservoir,
            max_dirs,
            ns_daemon,
            creat,
            forward,
            engine_records: 0,
            names,
            first_ms: None,
            last_ms: None,
            statuses: Ordered::new(),
            phases: Ordered::new(),
            polls: Ordered::new(),
            calls: Ordered::new(),
            call_errors: Ordered::new(),
            proc_ms: 0,
            dirs: Ordered::new(),
            dropped_dirs: 0,
        }
    }

    /// Tally a record (and no more).
    fn write(&mut self, record: &Bound<'_, PyDict>) -> PyResult<()> {
        self.tally_dict(record)
    }

    /// Tally a record, then hand it to `forward` (a pipeline's on_record).
    fn __call__(slf: &Bound<'_, Self>, record: &Bound<'_, PyDict>) -> PyResult<()> {
        tally_and_forward(slf, record, |me| {
            me.tally_dict(record)?;
            Ok(me.forward.as_ref().map(|f| f.clone_ref(record.py())))
        })
    }

    /// Summary's state, taken (the tally keeps none of it): first_ms, last_ms, and
    /// (key, value) lists in insertion order of statuses, phases, polls, calls and
    /// call_errors, series as Series.restored's arguments. Taken rather than copied: a long
    /// run's series are tens of megabytes, and a copy beside them set the peak memory.
    fn take_summary_state<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        out.set_item("first_ms", self.first_ms.take())?;
        out.set_item("last_ms", self.last_ms.take())?;
        let pair = |me: &Self, a: Name, b: Name| (me.py_name(py, a), me.py_name(py, b));
        let statuses = PyList::empty(py);
        for ((op, status), n) in std::mem::replace(&mut self.statuses, Ordered::new()).entries {
            statuses.append((pair(self, op, status), n))?;
        }
        let phases = PyList::empty(py);
        for ((op, i), s) in std::mem::replace(&mut self.phases, Ordered::new()).entries {
            phases.append(((self.py_name(py, op), PHASES[i].1), s.into_py(py)?))?;
        }
        let polls = PyList::empty(py);
        for (op, s) in std::mem::replace(&mut self.polls, Ordered::new()).entries {
            polls.append((self.py_name(py, op), s.into_py(py)?))?;
        }
        let calls = PyList::empty(py);
        for ((daemon, op), s) in std::mem::replace(&mut self.calls, Ordered::new()).entries {
            calls.append((pair(self, daemon, op), s.into_py(py)?))?;
        }
        let errors = PyList::empty(py);
        for ((daemon, op), n) in std::mem::replace(&mut self.call_errors, Ordered::new()).entries {
            errors.append((pair(self, daemon, op), n))?;
        }
        out.set_item("statuses", statuses)?;
        out.set_item("phases", phases)?;
        out.set_item("polls", polls)?;
        out.set_item("calls", calls)?;
        out.set_item("call_errors", errors)?;
        Ok(out)
    }

    /// DirectoryStats' state, taken: proc_ms, dropped_dirs, and per directory in insertion
    /// order (name, calls, ms, linked_ms, creats as Series.restored's arguments, and the
    /// bytes of array('q')s of the creats' starts and ends, the peak folded, its cutoff
    /// or None, and the count of intervals at which the next fold is made).
    fn take_directories_state<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        out.set_item("proc_ms", std::mem::take(&mut self.proc_ms))?;
        out.set_item("dropped_dirs", std::mem::take(&mut self.dropped_dirs))?;
        let dirs = PyList::empty(py);
        for (name, d) in std::mem::replace(&mut self.dirs, Ordered::new()).entries {
            let fold_at = d.fold_at.max(self.fold_at);
            dirs.append((&*name, d.calls, d.ms, d.linked_ms, d.creats.into_py(py)?,
                         int64_bytes(py, d.starts), int64_bytes(py, d.ends), d.folded_peak,
                         d.cutoff, fold_at))?;
        }
        out.set_item("dirs", dirs)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::Mt;

    #[test]
    fn the_twister_seeded_with_one_gives_cpythons_first_words() {
        // random.Random(1).getrandbits(32), three times, in CPython 3.11
        let mut mt = Mt::seeded(1);
        assert_eq!([mt.next_u32(), mt.next_u32(), mt.next_u32()], [577_090_037, 2_444_712_010, 3_639_700_191]);
    }

    #[test]
    fn the_twister_refills_as_cpython_does_past_its_first_624_words() {
        // random.Random(seed).getrandbits(32) in CPython 3.11: the last word of a refill,
        // the first of the next, and so on over three refills (each of twist's loops).
        let mut mt = Mt::seeded(1);
        let words: Vec<u32> = (0..624 * 3 + 5).map(|_| mt.next_u32()).collect();
        assert_eq!([words[623], words[624], words[1247], words[1248], words[1876]],
                   [802_355_090, 1_360_367_077, 1_721_233_950, 1_032_912_167, 2_060_669_701]);
        let mut mt = Mt::seeded(u32::MAX);
        assert_eq!((0..1300).map(|_| mt.next_u32()).last(), Some(2_787_731_301));
    }

    #[test]
    fn the_proc_phase_is_the_one_directory_stats_sums() {
        assert_eq!(super::PHASES[super::PROC].0, "proc_ms");
    }

    #[test]
    fn wide_draws_take_the_low_word_first_as_cpython_does() {
        // r = random.Random(1); r.getrandbits(40), r.getrandbits(64), r.randrange(10**12)
        let mut mt = Mt::seeded(1);
        assert_eq!(mt.bits(40), 623_347_347_957);
        assert_eq!(mt.bits(64), 14_799_178_230_035_213_023);
        assert_eq!(mt.below(1_000_000_000_000), 71_999_863_748);
    }
}
