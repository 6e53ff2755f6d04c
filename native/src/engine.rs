//! The compiled twin of `parsers/reassembly.py`: the same rules, the same state.
//!
//! `Reassembler` (Python) stays the reference; this engine must give the same records,
//! counters and state for every input (tests/parsers/test_engines_agree.py), and state
//! saved by one restores in the other (the dicts of `take_changes` and `clock_state`
//! have the same keys and values). Comments here name only what differs from the
//! Python: the rules themselves are explained there, function by function.
//!
//! Python is called only where a record or a processing run leaves the engine (emit,
//! runs, on_span); those callbacks may read the engine back (the linker asks for a
//! host's watermark), so the host clocks and the names live in cells of their own, apart
//! from the state a line is changing.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::rc::Rc;

use pyo3::exceptions::{PyKeyError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use crate::block::LineBlock;
use crate::linking::{Ctx, Linker, Meta};
use crate::rec::{deliver, CallRec, Rec, RequestRec};
use crate::window::DigestWindow;
use crate::{FastLines, Scan};

pub type Sym = u32;

/// The multiply-rotate hash rustc uses for its own tables: the keys here are small
/// (ints, interned ids, tokens) and nobody chooses them to collide.
#[derive(Default, Clone, Copy)]
pub struct Fx(u64);

const FX_SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl Fx {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(FX_SEED);
    }
}

impl Hasher for Fx {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().unwrap()));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut buf = [0u8; 8];
            buf[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(buf));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_i64(&mut self, i: i64) {
        self.add(i as u64);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

pub type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<Fx>>;
pub type FxSet<K> = HashSet<K, BuildHasherDefault<Fx>>;

/// The largest duplicate memory (lines): the window's entries hold a ring position in 32 bits.
pub const MAX_DUPLICATE_MEMORY: usize = 1 << 31;

// Names every engine knows by number (Names::new interns them in this order).
const EMPTY: Sym = 0;
const PUT: Sym = 1;
const GET: Sym = 2;
const STATUS_PUT: Sym = 3;
const STATUS_GET: Sym = 4;
const PUTDONE: Sym = 5;
const RELFILES: Sym = 6;
const ABORTREQ: Sym = 7;
const STARTSESS: Sym = 8;
const STARTTRANS: Sym = 9;
const ENDSESS: Sym = 10;
const ENDTRANS: Sym = 11;
const ABORTTRANS: Sym = 12;
const SUCCESS: Sym = 13;
const FAILED: Sym = 14;
const KNOWN: [&str; 15] = [
    "", "put", "get", "getstatus_putreq", "getstatus_getreq", "putdone", "relfiles", "abortreq",
    "startsess", "starttrans", "endsess", "endtrans", "aborttrans", "SUCCESS", "FAILED",
];

const FINISHED_GROUP: usize = 1024;
/// The daemon name of the name-server profile (parsers/linking.py NS_DAEMON).
const NS_DAEMON: &str = "dpns";
/// The daemon name of the DPM profile, whose slow threads make the processing runs.
const DPM_DAEMON: &str = "dpm";
/// linking.py's MAX_LAG_MS: a log further behind than this has stopped, not lagging.
const MAX_LAG_MS: i64 = 60_000;
const MAX_HELD: usize = 8;
const VOTES_AGAINST: u32 = 2;
const RESTART_LOG: usize = 10_000;

/// Interned names (hosts, daemons, functions, ops, states) and their Python strings.
pub struct Names {
    index: FxMap<Box<str>, Sym>,
    texts: Vec<Box<str>>,
    strings: Vec<Option<Py<PyString>>>,
}

impl Names {
    pub(crate) fn new() -> Self {
        let mut names = Names { index: FxMap::default(), texts: Vec::new(), strings: Vec::new() };
        for text in KNOWN {
            names.intern(text);
        }
        names
    }

    pub fn intern(&mut self, text: &str) -> Sym {
        if let Some(&s) = self.index.get(text) {
            return s;
        }
        let s = self.texts.len() as Sym;
        self.index.insert(text.into(), s);
        self.texts.push(text.into());
        self.strings.push(None);
        s
    }

    fn find(&self, text: &str) -> Option<Sym> {
        self.index.get(text).copied()
    }

    pub fn text(&self, s: Sym) -> &str {
        &self.texts[s as usize]
    }

    pub fn py(&mut self, py: Python<'_>, s: Sym) -> PyObject {
        let slot = &mut self.strings[s as usize];
        if slot.is_none() {
            *slot = Some(PyString::intern(py, &self.texts[s as usize]).unbind());
        }
        slot.as_ref().unwrap().clone_ref(py).into_any()
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Role {
    Accept,
    ConnFailure,
    Call,
    Token,
    SlowStart,
    Status,
    Returns,
    Startup,
    File,
    Detail,
    Other,
}

impl Role {
    pub fn from_name(name: &str) -> Option<Role> {
        Some(match name {
            "accept" => Role::Accept,
            "conn_failure" => Role::ConnFailure,
            "call" => Role::Call,
            "token" => Role::Token,
            "slow_start" => Role::SlowStart,
            "status" => Role::Status,
            "returns" => Role::Returns,
            "startup" => Role::Startup,
            "file" => Role::File,
            "detail" => Role::Detail,
            "other" => Role::Other,
            _ => return None,
        })
    }
}

/// One parsed line, borrowing its text (OwnedEv keeps one that must wait).
pub struct Ev<'a> {
    pub ts: i64,
    pub host: Sym,
    pub daemon: Sym,
    pub pid: i64,
    pub tid: i64,
    pub func: Sym,
    pub role: Role,
    pub op: Option<Sym>,
    pub client: Option<&'a str>,
    pub token: Option<&'a str>,
    pub nfiles: Option<i64>,
    pub state: Option<Sym>,
    pub rc: Option<i64>,
    pub surl: Option<&'a str>,
    pub path: Option<&'a str>,
}

struct OwnedEv {
    ts: i64,
    host: Sym,
    daemon: Sym,
    pid: i64,
    tid: i64,
    func: Sym,
    role: Role,
    op: Option<Sym>,
    client: Option<Box<str>>,
    token: Option<Box<str>>,
    nfiles: Option<i64>,
    state: Option<Sym>,
    rc: Option<i64>,
    surl: Option<Box<str>>,
    path: Option<Box<str>>,
}

impl Ev<'_> {
    fn owned(&self) -> OwnedEv {
        OwnedEv {
            ts: self.ts,
            host: self.host,
            daemon: self.daemon,
            pid: self.pid,
            tid: self.tid,
            func: self.func,
            role: self.role,
            op: self.op,
            client: self.client.map(Into::into),
            token: self.token.map(Into::into),
            nfiles: self.nfiles,
            state: self.state,
            rc: self.rc,
            surl: self.surl.map(Into::into),
            path: self.path.map(Into::into),
        }
    }

    /// What recognises a line read twice (Python: hash of the whole Event).
    fn digest(&self) -> u64 {
        let mut h = Fx::default();
        (self.ts, self.host, self.daemon, self.pid, self.tid, self.func, self.role).hash(&mut h);
        (self.op, self.client, self.token, self.nfiles, self.state, self.rc, self.surl, self.path).hash(&mut h);
        // splitmix64's finalizer: every input bit reaches every output bit
        let mut z = h.finish();
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

impl OwnedEv {
    fn view(&self) -> Ev<'_> {
        Ev {
            ts: self.ts,
            host: self.host,
            daemon: self.daemon,
            pid: self.pid,
            tid: self.tid,
            func: self.func,
            role: self.role,
            op: self.op,
            client: self.client.as_deref(),
            token: self.token.as_deref(),
            nfiles: self.nfiles,
            state: self.state,
            rc: self.rc,
            surl: self.surl.as_deref(),
            path: self.path.as_deref(),
        }
    }
}


/// A least-recently-active order: a doubly linked list in a slab, so that moving a key
/// to the back (every line moves its thread and request) costs O(1), not a tree's
/// O(log n) with its allocations. Handles stay valid until their key is removed.
const NIL: u32 = u32::MAX;

struct LruNode<K> {
    key: Option<K>,
    prev: u32,
    next: u32,
}

pub struct Lru<K> {
    nodes: Vec<LruNode<K>>,
    free: Vec<u32>,
    head: u32,
    tail: u32,
}

impl<K> Default for Lru<K> {
    fn default() -> Self {
        Lru { nodes: Vec::new(), free: Vec::new(), head: NIL, tail: NIL }
    }
}

impl<K> Lru<K> {
    fn link_back(&mut self, h: u32) {
        let node = &mut self.nodes[h as usize];
        node.prev = self.tail;
        node.next = NIL;
        if self.tail != NIL {
            self.nodes[self.tail as usize].next = h;
        } else {
            self.head = h;
        }
        self.tail = h;
    }

    fn unlink(&mut self, h: u32) {
        let (prev, next) = {
            let node = &self.nodes[h as usize];
            (node.prev, node.next)
        };
        if prev != NIL {
            self.nodes[prev as usize].next = next;
        } else {
            self.head = next;
        }
        if next != NIL {
            self.nodes[next as usize].prev = prev;
        } else {
            self.tail = prev;
        }
    }

    /// Appends `key` as the most recent; its handle.
    fn push_back(&mut self, key: K) -> u32 {
        let h = match self.free.pop() {
            Some(h) => {
                self.nodes[h as usize].key = Some(key);
                h
            }
            None => {
                self.nodes.push(LruNode { key: Some(key), prev: NIL, next: NIL });
                (self.nodes.len() - 1) as u32
            }
        };
        self.link_back(h);
        h
    }

    fn move_back(&mut self, h: u32) {
        if h == NIL || self.tail == h || self.nodes.get(h as usize).map_or(true, |n| n.key.is_none()) {
            return;
        }
        self.unlink(h);
        self.link_back(h);
    }

    fn remove(&mut self, h: u32) -> Option<K> {
        if h == NIL || self.nodes.get(h as usize).map_or(true, |n| n.key.is_none()) {
            return None;
        }
        self.unlink(h);
        self.free.push(h);
        self.nodes[h as usize].key.take()
    }

    /// The least recent key, with its handle.
    fn first_key_value(&self) -> Option<(u32, &K)> {
        if self.head == NIL {
            return None;
        }
        self.nodes[self.head as usize].key.as_ref().map(|k| (self.head, k))
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Plain,
    Step,
    Proc,
    Late,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Plain => "plain",
            Kind::Step => "step",
            Kind::Proc => "proc",
            Kind::Late => "late",
        }
    }
    fn from_name(name: &str) -> PyResult<Kind> {
        Ok(match name {
            "plain" => Kind::Plain,
            "step" => Kind::Step,
            "proc" => Kind::Proc,
            "late" => Kind::Late,
            _ => return Err(PyValueError::new_err(format!("unknown call kind {name:?}"))),
        })
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Session {
    Sess,
    Trans,
}

impl Session {
    fn name(self) -> &'static str {
        match self {
            Session::Sess => "sess",
            Session::Trans => "trans",
        }
    }
}

type Text = Rc<str>;
type TKey = (Sym, Sym, i64, i64);
type RKey = (Sym, Text);

struct Call {
    op: Sym,
    client: Option<Text>,
    accepted: Option<i64>,
    started: i64,
    kind: Kind,
    token: Option<Text>,
    state: Option<Sym>,
    session: Option<Session>,
    path: Option<Text>,
}

struct Thread {
    daemon: Sym,
    accept: Option<i64>,
    call: Option<Call>,
    sess: bool,
    trans: bool,
    latest: i64,
    at_latest: Vec<u64>, // digests of its lines stamped `latest` (reassembly.py's Thread)
    order: u32, // its handle in its host's activity order (NIL: not in one)
    born: u64,  // when it was created: Python's dict order
}

/// reassembly.py's MAX_SAME_STAMP: lines of one thread and millisecond remembered.
const MAX_SAME_STAMP: usize = 64;

impl Thread {
    /// A line `digest` stamped `ts` was read on the thread.
    fn moved_to(&mut self, ts: i64, digest: u64) {
        if ts != self.latest || self.at_latest.is_empty() {
            self.at_latest.clear();
            self.at_latest.push(digest);
        } else if self.at_latest.len() < MAX_SAME_STAMP {
            self.at_latest.push(digest);
        }
        self.latest = ts;
    }
}

struct Process {
    first: i64,
    last: i64,
    lines: i64,
    tids: BTreeSet<i64>,
    succeeded: bool,
    born: u64,
}

struct HostClock {
    latest: i64,
    held: Option<Vec<OwnedEv>>,
    votes: u32,
}

#[derive(Default)]
struct Request {
    host: Sym,
    token: Option<Text>,
    op: Option<Sym>,
    client: Option<Text>,
    nfiles: Option<i64>,
    accepted: Option<i64>,
    started: Option<i64>,
    request_ret: Option<i64>,
    proc_first: Option<i64>,
    proc_ms: Option<i64>,
    polls: i64,
    poll_ms: i64,
    success_end: Option<i64>,
    done_start: Option<i64>,
    done_ms: Option<i64>,
    closing: Option<Sym>,
    latest: i64,
    queued: bool,
    putdone_first: Option<i64>,
    files: Option<Vec<Text>>,
    order: u32,
}

use crate::schema::{END_REASONS, STATUSES, STAT_NAMES}; // STAT_NAMES[i] is stats[i]
const REQUESTS: usize = 0;
const CALLS: usize = 1;
const EVICTIONS: usize = 2;
const EXPIRED: usize = 3;
const DROPPED_ACCEPTS: usize = 4;
const LATE_LINES: usize = 5;
const STRAY_RETURNS: usize = 6;
const NORETURN_CALLS: usize = 7;
const ORPHANS: usize = 8;
const RESTARTS: usize = 9;
const STRAY_PROCESSES: usize = 10;
const THREAD_EVICTIONS: usize = 11;
const EXPIRED_THREADS: usize = 12;
const EXPIRED_SESSIONS: usize = 13;
const DUPLICATE_LINES: usize = 14;
const FUTURE_LINES: usize = 15;
const CLOCK_STEPS: usize = 16;
// Each index is its counter's place in schema.rs: a reordered STAT_NAMES fails the build.
const _: () = assert!(
    crate::schema::named(&STAT_NAMES, REQUESTS, "requests")
        && crate::schema::named(&STAT_NAMES, CALLS, "calls")
        && crate::schema::named(&STAT_NAMES, EVICTIONS, "evictions")
        && crate::schema::named(&STAT_NAMES, EXPIRED, "expired")
        && crate::schema::named(&STAT_NAMES, DROPPED_ACCEPTS, "dropped_accepts")
        && crate::schema::named(&STAT_NAMES, LATE_LINES, "late_lines")
        && crate::schema::named(&STAT_NAMES, STRAY_RETURNS, "stray_returns")
        && crate::schema::named(&STAT_NAMES, NORETURN_CALLS, "noreturn_calls")
        && crate::schema::named(&STAT_NAMES, ORPHANS, "orphans")
        && crate::schema::named(&STAT_NAMES, RESTARTS, "restarts")
        && crate::schema::named(&STAT_NAMES, STRAY_PROCESSES, "stray_processes")
        && crate::schema::named(&STAT_NAMES, THREAD_EVICTIONS, "thread_evictions")
        && crate::schema::named(&STAT_NAMES, EXPIRED_THREADS, "expired_threads")
        && crate::schema::named(&STAT_NAMES, EXPIRED_SESSIONS, "expired_sessions")
        && crate::schema::named(&STAT_NAMES, DUPLICATE_LINES, "duplicate_lines")
        && crate::schema::named(&STAT_NAMES, FUTURE_LINES, "future_lines")
        && crate::schema::named(&STAT_NAMES, CLOCK_STEPS, "clock_steps"),
    "engine.rs's counter indexes do not match schema::STAT_NAMES"
);

#[derive(Clone, Copy)]
struct Settings {
    timeout_ms: i64,
    max_in_flight: usize,
    allowance_ms: i64,
    finished_memory: usize,
    max_threads: usize,
    grace_ms: i64,
    jump_ms: i64,
}

#[derive(Default)]
struct Changed {
    threads: FxSet<TKey>,
    requests: FxSet<RKey>,
    groups: FxSet<u64>,
}

/// Event time: per host, and per (host, daemon) stream. Read back by callbacks.
#[derive(Default)]
struct Clocks {
    hosts: FxMap<Sym, HostClock>,
    order: Vec<Sym>,
    latest: Option<i64>,
    stream_now: FxMap<(Sym, Sym), i64>,
}

impl Clocks {
    fn insert(&mut self, host: Sym, latest: i64) {
        if self.hosts.insert(host, HostClock { latest, held: None, votes: 0 }).is_none() {
            self.order.push(host);
        }
    }
    fn raise_latest(&mut self, ts: i64) {
        if self.latest.map_or(true, |l| ts > l) {
            self.latest = Some(ts);
        }
    }
}

struct Callbacks {
    emit: PyObject,
    runs: Option<PyObject>,
    on_span: Option<PyObject>,
}

/// The record values chosen at run time (status, end reason), made once; the keys are
/// pyo3 `intern!`s at their call sites.
struct Keys {
    k: FxMap<&'static str, Py<PyString>>,
}

impl Keys {
    fn new(py: Python<'_>) -> Self {
        let mut k = FxMap::default();
        for name in END_REASONS.into_iter().chain(STATUSES) {
            k.insert(name, PyString::intern(py, name).unbind());
        }
        Keys { k }
    }
    fn get<'py>(&self, py: Python<'py>, name: &str) -> &Bound<'py, PyString> {
        self.k[name].bind(py)
    }
}

struct State {
    set: Settings,
    /// host -> its last counted clock step: (from, to, daemons whose logs showed it)
    host_steps: FxMap<Sym, (i64, i64, Vec<Sym>)>,
    /// Boxed: process() takes a thread out of the map and puts it back on every line,
    /// and moving a pointer is cheaper than moving a thread (a tenth of all copying).
    threads: FxMap<TKey, Box<Thread>>,
    thread_order: FxMap<Sym, Lru<TKey>>,
    thread_order_hosts: Vec<Sym>,
    requests: FxMap<Sym, FxMap<Text, Request>>,
    n_requests: usize,
    request_order: FxMap<Sym, Lru<Text>>,
    request_order_hosts: Vec<Sym>,
    finished: FxMap<Sym, FxMap<Text, u64>>,
    finished_order: VecDeque<RKey>,
    finished_groups: FxMap<u64, Vec<RKey>>,
    group: u64,
    processes: FxMap<(Sym, Sym), FxMap<i64, Process>>,
    process_streams: Vec<(Sym, Sym)>,
    seen: DigestWindow,
    stats: [i64; STAT_NAMES.len()],
    restart_log: VecDeque<(i64, Sym, Sym)>,
    slow_queue_depth: i64,
    changed: Option<Changed>,
    seq: u64,
}

struct Cx<'a, 'py> {
    py: Python<'py>,
    clk: &'a RefCell<Clocks>,
    names: &'a RefCell<Names>,
    cb: &'a Callbacks,
    keys: &'a Keys,
    lk: &'a RefCell<Option<Linker>>,
    allowance_ms: i64,
    ns_daemon: Sym,
    dpm_daemon: Sym,
}

impl Cx<'_, '_> {
    /// The linker, if the engine has one, with what it reads of the engine.
    fn link<R>(&self, f: impl FnOnce(&mut Linker, &Ctx) -> PyResult<R>) -> Option<PyResult<R>> {
        let mut lk = self.lk.try_borrow_mut().ok()?;
        let linker = lk.as_mut()?;
        let clk = self.clk;
        let allowance = self.allowance_ms;
        let linked = [self.dpm_daemon, self.ns_daemon];
        // linking.py's Linker._horizon_base: the host's watermark, held back by a log of
        // the host (DPM or name server) that lags, unless it lags by more than MAX_LAG_MS.
        let watermark = move |host: Sym| {
            let clk = clk.borrow();
            let wm = clk.hosts.get(&host)?.latest - allowance;
            let mut base = wm;
            for daemon in linked {
                if let Some(now) = clk.stream_now.get(&(host, daemon)) {
                    let lag = now - allowance;
                    if wm - lag <= MAX_LAG_MS {
                        base = base.min(lag);
                    }
                }
            }
            Some(base)
        };
        let seen = move |host: Sym, daemon: Sym| clk.borrow().stream_now.contains_key(&(host, daemon));
        let stream_time = move |host: Sym, daemon: Sym| clk.borrow().stream_now.get(&(host, daemon)).copied();
        let ctx = Ctx { py: self.py, names: self.names, watermark: &watermark, seen: &seen, stream_time: &stream_time, allowance_ms: allowance, ns_daemon: self.ns_daemon, dpm_daemon: self.dpm_daemon };
        Some(f(linker, &ctx))
    }
}

fn diff(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if a > b { a - b } else { 0 }),
        _ => None,
    }
}

fn is_request_op(op: Sym) -> bool {
    op == PUT || op == GET
}
fn status_op(op: Sym) -> Option<Sym> {
    match op {
        STATUS_PUT => Some(PUT),
        STATUS_GET => Some(GET),
        _ => None,
    }
}
fn closing_op(op: Sym) -> Option<Option<Sym>> {
    match op {
        PUTDONE => Some(Some(PUT)),
        RELFILES => Some(Some(GET)),
        ABORTREQ => Some(None),
        _ => None,
    }
}
fn is_step_op(op: Sym) -> bool {
    is_request_op(op) || status_op(op).is_some() || closing_op(op).is_some()
}
fn session_open(op: Sym) -> Option<Session> {
    match op {
        STARTSESS => Some(Session::Sess),
        STARTTRANS => Some(Session::Trans),
        _ => None,
    }
}
fn session_close(op: Sym) -> Option<Session> {
    match op {
        ENDSESS => Some(Session::Sess),
        ENDTRANS | ABORTTRANS => Some(Session::Trans),
        _ => None,
    }
}

impl State {
    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    fn mark_thread(&mut self, key: TKey) {
        if let Some(c) = self.changed.as_mut() {
            c.threads.insert(key);
        }
    }
    fn mark_request(&mut self, key: &RKey) {
        if let Some(c) = self.changed.as_mut() {
            c.requests.insert(key.clone());
        }
    }

    fn is_finished(&self, host: Sym, token: &str) -> bool {
        self.finished.get(&host).is_some_and(|m| m.contains_key(token))
    }

    fn request(&mut self, host: Sym, token: &str) -> Option<&mut Request> {
        self.requests.get_mut(&host).and_then(|m| m.get_mut(token))
    }

    // -- input -----------------------------------------------------------------------
    fn feed(&mut self, cx: &Cx, ev: &Ev) -> PyResult<()> {
        enum Next {
            Process,
            Accept,
            Held(bool, Option<Vec<OwnedEv>>),
            Wait,
        }
        let (ts, host) = (ev.ts, ev.host);
        let next = {
            let mut clk = cx.clk.borrow_mut();
            let clk = &mut *clk;
            let (next, raise) = match clk.hosts.get_mut(&host) {
                None => (Next::Accept, None),
                Some(clock) if clock.held.is_some() => {
                    let (go, released) = self.judge_held(clock, ev);
                    (Next::Held(go, released), None)
                }
                Some(clock) if ts > clock.latest => {
                    if ts > clock.latest + self.set.jump_ms {
                        clock.held = Some(vec![ev.owned()]); // far ahead: wait for a verdict
                        clock.votes = 0;
                        (Next::Wait, None)
                    } else {
                        clock.latest = ts;
                        (Next::Process, Some(ts))
                    }
                }
                Some(_) => (Next::Accept, None),
            };
            if matches!(next, Next::Accept) && !clk.hosts.contains_key(&host) {
                clk.insert(host, ts);
                clk.raise_latest(ts);
            }
            if let Some(ts) = raise {
                clk.raise_latest(ts);
            }
            next
        };
        match next {
            Next::Process => self.process(cx, ev),
            Next::Accept => self.accept_event(cx, ev),
            Next::Held(go, released) => {
                for old in released.iter().flatten() {
                    self.accept_event(cx, &old.view())?;
                }
                if go {
                    self.accept_event(cx, ev)
                } else {
                    Ok(())
                }
            }
            Next::Wait => Ok(()),
        }
    }

    /// A line while far-ahead lines are held: (process it now?, lines released).
    fn judge_held(&mut self, clock: &mut HostClock, ev: &Ev) -> (bool, Option<Vec<OwnedEv>>) {
        let ts = ev.ts;
        let first = clock.held.as_ref().unwrap()[0].ts;
        if ts >= first - self.set.allowance_ms {
            return (true, clock.held.take());
        }
        if ts > clock.latest + self.set.jump_ms {
            let held = clock.held.as_mut().unwrap();
            held.push(ev.owned());
            if held.len() >= MAX_HELD {
                return (false, clock.held.take());
            }
            return (false, None);
        }
        clock.votes += 1;
        if clock.votes >= VOTES_AGAINST {
            self.stats[FUTURE_LINES] += clock.held.as_ref().unwrap().len() as i64;
            clock.held = None;
        }
        (true, None)
    }

    fn accept_event(&mut self, cx: &Cx, ev: &Ev) -> PyResult<()> {
        {
            let mut clk = cx.clk.borrow_mut();
            let clk = &mut *clk;
            let clock = clk.hosts.get_mut(&ev.host).expect("a clock for every host fed");
            if ev.ts > clock.latest {
                clock.latest = ev.ts;
                clk.raise_latest(ev.ts);
            }
        }
        self.process(cx, ev)
    }

    /// reassembly.py's _same_step: a daemon's step back from `old` to `new` is the host's
    /// last counted step seen in this daemon's log.
    fn same_step(&mut self, host: Sym, daemon: Sym, old: i64, new: i64) -> bool {
        let allowance = self.set.allowance_ms;
        if let Some(last) = self.host_steps.get_mut(&host) {
            if !last.2.contains(&daemon) && new < last.0 - allowance && old > last.1 + allowance {
                last.2.push(daemon);
                return true;
            }
        }
        self.host_steps.insert(host, (old, new, vec![daemon]));
        false
    }

    fn process(&mut self, cx: &Cx, ev: &Ev) -> PyResult<()> {
        let (ts, host, daemon, pid, tid) = (ev.ts, ev.host, ev.daemon, ev.pid, ev.tid);
        let key: TKey = (host, daemon, pid, tid);
        let digest = ev.digest();
        if !self.seen.insert(digest) {
            // The same line again, not moving its thread on: input read twice.
            if let Some(th) = self.threads.get(&key) {
                // Of the thread's latest stamp, only a line that stamp already gave.
                if ts < th.latest || (ts == th.latest && ts.rem_euclid(1000) != 0 && th.at_latest.contains(&digest)) {
                    self.stats[DUPLICATE_LINES] += 1;
                    return Ok(());
                }
            }
        }
        {
            let mut clk = cx.clk.borrow_mut();
            let allowance = self.set.allowance_ms;
            match clk.stream_now.get_mut(&(host, daemon)) {
                None => {
                    clk.stream_now.insert((host, daemon), ts);
                }
                Some(now) if ts > *now => *now = ts,
                Some(now) if ts < *now - allowance => {
                    if !self.same_step(host, daemon, *now, ts) {
                        self.stats[CLOCK_STEPS] += 1;
                    }
                    *now = ts;
                }
                Some(_) => {}
            }
        }
        let mut th = match self.threads.remove(&key) {
            Some(th) => {
                self.thread_order.get_mut(&host).unwrap().move_back(th.order);
                th
            }
            None => {
                self.new_thread(cx, key, daemon, ts)?;
                // The cap may have dropped the new thread itself: it is then handled detached.
                match self.threads.remove(&key) {
                    Some(th) => th,
                    None => Box::new(Thread { daemon, accept: None, call: None, sess: false, trans: false, latest: ts, at_latest: Vec::new(), order: NIL, born: 0 }),
                }
            }
        };
        let attached = th.order != NIL;
        th.moved_to(ts, digest);
        let proc = self
            .processes
            .entry((host, daemon))
            .or_default()
            .entry(pid)
            .or_insert_with(|| Process { first: ts, last: ts, lines: 0, tids: BTreeSet::new(), succeeded: false, born: 0 });
        proc.lines += 1;
        if ts > proc.last {
            proc.last = ts;
        }
        let result = match ev.role {
            Role::Accept => self.on_accept(ev, &mut th),
            Role::ConnFailure => self.on_conn_failure(ev, &mut th),
            Role::Call => self.on_call(cx, ev, &mut th, key),
            Role::Token => self.on_token(cx, ev, &mut th),
            Role::SlowStart => self.on_slow_start(cx, ev, &mut th, key),
            Role::Status => self.on_status(ev, &mut th),
            Role::Returns => self.on_returns(cx, ev, &mut th, key),
            Role::Startup => self.on_startup(cx, ev, &mut th, key),
            Role::File => self.on_file(ev, &mut th),
            Role::Detail => self.on_detail(ev, &mut th),
            Role::Other => Ok(self.on_line(ev, &mut th)),
        };
        if attached {
            self.threads.insert(key, th);
        }
        let rkey = result?;
        if self.changed.is_some() {
            self.mark_thread(key);
            if let Some(rkey) = rkey {
                self.mark_request(&rkey);
            }
        }
        Ok(())
    }

    fn new_thread(&mut self, cx: &Cx, key: TKey, daemon: Sym, ts: i64) -> PyResult<()> {
        let (host, _, pid, tid) = key;
        if !self.processes.contains_key(&(host, daemon)) {
            self.processes.insert((host, daemon), FxMap::default());
            self.process_streams.push((host, daemon));
        }
        let seq = self.next_seq();
        let procs = self.processes.get_mut(&(host, daemon)).unwrap();
        let proc = procs
            .entry(pid)
            .or_insert_with(|| Process { first: ts, last: ts, lines: 0, tids: BTreeSet::new(), succeeded: false, born: seq });
        proc.tids.insert(tid);
        if !self.thread_order.contains_key(&host) {
            self.thread_order.insert(host, Lru::default());
            self.thread_order_hosts.push(host);
        }
        let order = self.thread_order.get_mut(&host).unwrap().push_back(key);
        self.threads.insert(key, Box::new(Thread { daemon, accept: None, call: None, sess: false, trans: false, latest: ts, at_latest: Vec::new(), order, born: seq }));
        if self.threads.len() > self.set.max_threads {
            self.evict_thread(cx)?;
        }
        Ok(())
    }

    fn least_recent_thread(&self) -> Option<TKey> {
        let mut oldest: Option<(TKey, i64)> = None;
        for host in &self.thread_order_hosts {
            if let Some((_, key)) = self.thread_order.get(host).and_then(|o| o.first_key_value()) {
                let latest = self.threads.get(key).map_or(i64::MIN, |t| t.latest);
                if oldest.map_or(true, |(_, l)| latest < l) {
                    oldest = Some((*key, latest));
                }
            }
        }
        oldest.map(|(k, _)| k)
    }

    fn evict_thread(&mut self, cx: &Cx) -> PyResult<()> {
        if let Some(key) = self.least_recent_thread() {
            self.stats[THREAD_EVICTIONS] += 1;
            self.drop_thread(cx, key)?;
        }
        Ok(())
    }

    fn drop_thread(&mut self, cx: &Cx, key: TKey) -> PyResult<()> {
        let Some(mut th) = self.threads.remove(&key) else {
            return Ok(());
        };
        if let Some(order) = self.thread_order.get_mut(&key.0) {
            order.remove(th.order);
        }
        let mut result = Ok(());
        if th.call.is_some() {
            result = self.close_noreturn(cx, key, &mut th);
        }
        if th.accept.is_some() {
            self.stats[DROPPED_ACCEPTS] += 1;
        }
        if th.sess || th.trans {
            self.stats[EXPIRED_SESSIONS] += 1;
        }
        if let Some(proc) = self.processes.get_mut(&(key.0, key.1)).and_then(|p| p.get_mut(&key.2)) {
            proc.tids.remove(&key.3);
        }
        self.mark_thread(key);
        result
    }

    // -- roles -----------------------------------------------------------------------
    fn on_accept(&mut self, ev: &Ev, th: &mut Thread) -> PyResult<Option<RKey>> {
        if th.accept.is_some() {
            self.stats[DROPPED_ACCEPTS] += 1;
        }
        th.accept = Some(ev.ts);
        Ok(None)
    }

    fn on_conn_failure(&mut self, ev: &Ev, th: &mut Thread) -> PyResult<Option<RKey>> {
        if th.accept.is_some() {
            self.stats[DROPPED_ACCEPTS] += 1;
            th.accept = None;
        }
        Ok(self.on_line(ev, th))
    }

    fn on_startup(&mut self, cx: &Cx, ev: &Ev, th: &mut Thread, key: TKey) -> PyResult<Option<RKey>> {
        let (host, daemon, pid, tid) = key;
        let lines = self.processes[&(host, daemon)][&pid].lines;
        if lines > 1 {
            let others: Vec<i64> = self.processes[&(host, daemon)][&pid].tids.iter().copied().filter(|&t| t != tid).collect();
            for other in others {
                self.drop_thread(cx, (host, daemon, pid, other))?;
            }
            self.stats[RESTARTS] += 1;
            self.log_restart(ev.ts, host, daemon);
            let proc = self.processes.get_mut(&(host, daemon)).unwrap().get_mut(&pid).unwrap();
            proc.first = ev.ts;
            proc.lines = 1;
        }
        Ok(self.on_line(ev, th))
    }

    fn log_restart(&mut self, ts: i64, host: Sym, daemon: Sym) {
        if self.restart_log.len() >= RESTART_LOG {
            self.restart_log.pop_front();
        }
        self.restart_log.push_back((ts, host, daemon));
    }

    fn on_call(&mut self, cx: &Cx, ev: &Ev, th: &mut Thread, key: TKey) -> PyResult<Option<RKey>> {
        if th.call.is_some() {
            self.close_noreturn(cx, key, th)?;
        }
        let op = match ev.op {
            Some(op) if op != EMPTY => op,
            _ => ev.func,
        };
        let session = session_open(op).or(if th.trans {
            Some(Session::Trans)
        } else if th.sess {
            Some(Session::Sess)
        } else {
            None
        });
        th.call = Some(Call {
            op,
            client: ev.client.map(Into::into),
            accepted: th.accept,
            started: ev.ts,
            kind: if is_step_op(op) { Kind::Step } else { Kind::Plain },
            token: None,
            state: None,
            session,
            path: None,
        });
        th.accept = None;
        Ok(None)
    }

    fn on_token(&mut self, cx: &Cx, ev: &Ev, th: &mut Thread) -> PyResult<Option<RKey>> {
        let Some(call) = th.call.as_mut() else {
            return Ok(None);
        };
        if call.kind != Kind::Step || call.token.is_some() {
            return Ok(None);
        }
        let Some(token) = ev.token else {
            return Ok(None);
        };
        let host = ev.host;
        let token: Text = token.into();
        call.token = Some(token.clone());
        if is_request_op(call.op) {
            if self.is_finished(host, &token) {
                call.kind = Kind::Late;
                self.stats[LATE_LINES] += 1;
                return Ok(None);
            }
            let (op, client, accepted, started) = (call.op, call.client.clone(), call.accepted, call.started);
            match self.request(host, &token).map(|r| r.started.is_none()) {
                None => {
                    self.admit(cx, host, token.clone(), Request { host, token: Some(token.clone()), ..Default::default() })?;
                }
                Some(orphan) => {
                    if orphan {
                        self.stats[ORPHANS] -= 1; // its put/get showed up after all
                    }
                }
            }
            let Some(req) = self.request(host, &token) else {
                return Ok(None); // the cap let it go at once
            };
            req.op = Some(op);
            req.client = client;
            req.nfiles = ev.nfiles;
            req.accepted = accepted;
            req.started = Some(started);
            if req.proc_first.is_none() && req.success_end.is_none() && !req.queued {
                req.queued = true;
                self.slow_queue_depth += 1;
            }
        } else {
            let implied = status_op(call.op).or(closing_op(call.op).flatten());
            let (op, started) = (call.op, call.started);
            if !self.find(cx, host, &token, implied)? {
                th.call.as_mut().unwrap().kind = Kind::Late;
                return Ok(None);
            }
            let req = self.request(host, &token).unwrap();
            if op == PUTDONE && req.putdone_first.is_none() {
                req.putdone_first = Some(started);
            }
        }
        self.touch(host, &token, ev.ts);
        Ok(Some((host, token)))
    }

    fn on_slow_start(&mut self, cx: &Cx, ev: &Ev, th: &mut Thread, key: TKey) -> PyResult<Option<RKey>> {
        if th.call.is_some() {
            self.close_noreturn(cx, key, th)?;
        }
        let host = ev.host;
        let token: Option<Text> = ev.token.map(Into::into);
        let found = match &token {
            Some(t) => self.find(cx, host, t, ev.op)?,
            None => false,
        };
        let op = {
            let mut names = cx.names.borrow_mut();
            let suffix = match ev.op {
                Some(o) => names.text(o).to_string(),
                None => String::new(),
            };
            names.intern(&format!("proc_{suffix}"))
        };
        th.call = Some(Call {
            op,
            client: None,
            accepted: None,
            started: ev.ts,
            kind: if found { Kind::Proc } else { Kind::Late },
            token: token.clone(),
            state: None,
            session: None,
            path: None,
        });
        if !found {
            return Ok(None);
        }
        let token = token.unwrap();
        let req = self.request(host, &token).unwrap();
        if req.proc_first.is_none() {
            req.proc_first = Some(ev.ts);
        }
        let files: Vec<Text> = req.files.clone().unwrap_or_default();
        let linked = cx.link(|lk, lcx| {
            lk.run_started(lcx, host, &token, ev.ts, &files);
            Ok(())
        });
        if let Some(result) = linked {
            result?;
        } else if let Some(runs) = &cx.cb.runs {
            let py = cx.py;
            let host_py = cx.names.borrow_mut().py(py, host);
            let files = PyTuple::new(py, files.iter().map(|f| &**f))?;
            runs.call_method1(py, "run_started", (host_py, &*token, ev.ts, files))?;
        }
        let req = self.request(host, &token).unwrap();
        if req.queued {
            req.queued = false;
            self.slow_queue_depth -= 1;
        }
        self.touch(host, &token, ev.ts);
        Ok(Some((host, token)))
    }

    fn on_file(&mut self, ev: &Ev, th: &mut Thread) -> PyResult<Option<RKey>> {
        if let (Some(surl), Some(call)) = (ev.surl, th.call.as_ref()) {
            if call.kind == Kind::Step && is_request_op(call.op) {
                if let Some(token) = call.token.clone() {
                    if let Some(req) = self.request(ev.host, &token) {
                        req.files.get_or_insert_with(Vec::new).push(surl.into());
                    }
                }
            }
        }
        Ok(self.on_line(ev, th))
    }

    fn on_detail(&mut self, ev: &Ev, th: &mut Thread) -> PyResult<Option<RKey>> {
        if let (Some(path), Some(call)) = (ev.path, th.call.as_mut()) {
            if call.kind == Kind::Plain && call.path.is_none() {
                call.path = Some(path.into());
            }
        }
        Ok(self.on_line(ev, th))
    }

    fn on_status(&mut self, ev: &Ev, th: &mut Thread) -> PyResult<Option<RKey>> {
        if let Some(call) = th.call.as_mut() {
            call.state = ev.state;
        }
        Ok(self.on_line(ev, th))
    }

    fn on_line(&mut self, ev: &Ev, th: &mut Thread) -> Option<RKey> {
        let call = th.call.as_ref()?;
        let token = call.token.clone()?;
        if call.kind == Kind::Late {
            self.stats[LATE_LINES] += 1;
            return None;
        }
        if self.request(ev.host, &token).is_some() {
            self.touch(ev.host, &token, ev.ts);
            return Some((ev.host, token));
        }
        None
    }

    fn on_returns(&mut self, cx: &Cx, ev: &Ev, th: &mut Thread, key: TKey) -> PyResult<Option<RKey>> {
        let Some(call) = th.call.take() else {
            self.stats[STRAY_RETURNS] += 1;
            return Ok(None);
        };
        let (ts, rc, host) = (ev.ts, ev.rc, ev.host);
        if let Some(on_span) = &cx.cb.on_span {
            let py = cx.py;
            let (h, d, is_proc) = {
                let mut names = cx.names.borrow_mut();
                let is_proc = names.text(call.op).starts_with("proc_");
                (names.py(py, key.0), names.py(py, key.1), is_proc)
            };
            let kind = if is_proc { "proc" } else { "call" };
            on_span.call1(py, (h, d, key.2, key.3, kind, call.started, ts))?;
        }
        if call.kind == Kind::Plain || (call.kind == Kind::Step && call.token.is_none()) {
            self.emit_call(cx, key, th, &call, Some(ts), rc)?;
            return Ok(None);
        }
        if call.kind == Kind::Late {
            self.stats[LATE_LINES] += 1;
            return Ok(None);
        }
        let token = call.token.clone().unwrap();
        if self.request(host, &token).is_none() {
            self.stats[LATE_LINES] += 1;
            if call.kind == Kind::Proc {
                self.run_ended(cx, host, &token, call.started, None)?;
            }
            return Ok(None);
        }
        self.touch(host, &token, ts);
        let op = call.op;
        if call.kind == Kind::Proc {
            self.request(host, &token).unwrap().proc_ms = diff(Some(ts), Some(call.started));
            self.run_ended(cx, host, &token, call.started, Some(ts))?;
        } else if is_request_op(op) {
            self.request(host, &token).unwrap().request_ret = Some(ts);
            if rc != Some(0) {
                self.finish_request(cx, host, &token, "failed", ts)?;
            }
        } else if status_op(op).is_some() {
            let req = self.request(host, &token).unwrap();
            req.polls += 1;
            req.poll_ms += diff(Some(ts), Some(call.started)).unwrap_or(0);
            if call.state == Some(SUCCESS) {
                if req.success_end.is_none() {
                    req.success_end = Some(ts);
                }
                if req.queued {
                    req.queued = false;
                    self.slow_queue_depth -= 1;
                }
            } else if call.state == Some(FAILED) {
                self.finish_request(cx, host, &token, "failed", ts)?;
            }
        } else {
            let req = self.request(host, &token).unwrap();
            req.done_start = Some(call.started);
            req.done_ms = diff(Some(ts), Some(call.started));
            req.closing = Some(op);
            let status = if op == ABORTREQ { "aborted" } else { "success" };
            self.finish_request(cx, host, &token, status, ts)?;
        }
        Ok(Some((host, token)))
    }

    fn run_ended(&self, cx: &Cx, host: Sym, token: &str, started: i64, ended: Option<i64>) -> PyResult<()> {
        let token_text: Text = token.into();
        if let Some(result) = cx.link(|lk, ctx| lk.run_ended(ctx, host, &token_text, started, ended)) {
            return result;
        }
        if let Some(runs) = &cx.cb.runs {
            let host_py = cx.names.borrow_mut().py(cx.py, host);
            runs.call_method1(cx.py, "run_ended", (host_py, token, started, ended))?;
        }
        Ok(())
    }

    // -- requests --------------------------------------------------------------------
    /// A new open request; the cap then emits the least recently active (Python: _admit).
    fn admit(&mut self, cx: &Cx, host: Sym, token: Text, req: Request) -> PyResult<()> {
        self.admit_uncapped(host, token, req);
        while self.n_requests > self.set.max_in_flight {
            let Some((host, token)) = self.least_recent_request() else { break };
            let req = self.forget(host, &token).unwrap();
            self.stats[EVICTIONS] += 1;
            self.expire(cx, host, token, req, "evicted")?;
        }
        Ok(())
    }

    fn admit_uncapped(&mut self, host: Sym, token: Text, mut req: Request) {
        if !self.request_order.contains_key(&host) {
            self.request_order.insert(host, Lru::default());
            self.request_order_hosts.push(host);
        }
        req.order = self.request_order.get_mut(&host).unwrap().push_back(token.clone());
        self.requests.entry(host).or_default().insert(token, req);
        self.n_requests += 1;
    }

    fn least_recent_request(&self) -> Option<RKey> {
        let mut oldest: Option<(RKey, i64)> = None;
        for host in &self.request_order_hosts {
            if let Some((_, token)) = self.request_order.get(host).and_then(|o| o.first_key_value()) {
                let latest = self.requests[host][token].latest;
                if oldest.as_ref().map_or(true, |(_, l)| latest < *l) {
                    oldest = Some(((*host, token.clone()), latest));
                }
            }
        }
        oldest.map(|(k, _)| k)
    }

    fn forget(&mut self, host: Sym, token: &str) -> Option<Request> {
        let req = self.requests.get_mut(&host)?.remove(token)?;
        self.n_requests -= 1;
        if let Some(order) = self.request_order.get_mut(&host) {
            order.remove(req.order);
        }
        Some(req)
    }

    /// The open request of a token (true), an orphan admitted if never seen (true), or
    /// false when it has ended.
    fn find(&mut self, cx: &Cx, host: Sym, token: &Text, op: Option<Sym>) -> PyResult<bool> {
        if self.request(host, token).is_some() {
            return Ok(true);
        }
        if self.is_finished(host, token) {
            self.stats[LATE_LINES] += 1;
            return Ok(false);
        }
        self.stats[ORPHANS] += 1;
        self.admit(cx, host, token.clone(), Request { host, token: Some(token.clone()), op, ..Default::default() })?;
        Ok(self.request(host, token).is_some())
    }

    fn touch(&mut self, host: Sym, token: &str, ts: i64) {
        let Some(req) = self.requests.get_mut(&host).and_then(|m| m.get_mut(token)) else {
            return;
        };
        if ts > req.latest {
            req.latest = ts;
        }
        self.request_order.get_mut(&host).unwrap().move_back(req.order);
    }

    fn finish_request(&mut self, cx: &Cx, host: Sym, token: &Text, status: &str, ended: i64) -> PyResult<()> {
        let mut req = self.forget(host, token).unwrap();
        if req.queued {
            req.queued = false;
            self.slow_queue_depth -= 1;
        }
        let rkey = (host, token.clone());
        self.remember_finished(rkey.clone());
        let record = self.request_record(cx, &req, status, Some(ended), "line");
        self.mark_request(&rkey);
        self.emit(cx, record, Meta::Request { host, token: token.clone(), ended: Some(ended) })
    }

    fn remember_finished(&mut self, rkey: RKey) {
        let group = self.group;
        let members = self.finished_groups.entry(group).or_default();
        members.push(rkey.clone());
        let full = members.len() >= FINISHED_GROUP;
        let known = self.finished.entry(rkey.0).or_default().insert(rkey.1.clone(), group).is_some();
        if !known {
            self.finished_order.push_back(rkey);
        }
        if full {
            self.group += 1;
        }
        if let Some(c) = self.changed.as_mut() {
            c.groups.insert(group);
        }
        if self.finished_order.len() > self.set.finished_memory {
            let (host, token) = self.finished_order.pop_front().unwrap();
            let old_group = self.finished.get_mut(&host).unwrap().remove(&token).unwrap();
            let members = self.finished_groups.get_mut(&old_group).unwrap();
            if let Some(i) = members.iter().position(|(h, t)| *h == host && *t == token) {
                members.remove(i);
            }
            if members.is_empty() {
                self.finished_groups.remove(&old_group);
            }
            if let Some(c) = self.changed.as_mut() {
                c.groups.insert(old_group);
            }
        }
    }

    fn expire(&mut self, cx: &Cx, host: Sym, token: Text, mut req: Request, reason: &str) -> PyResult<()> {
        if req.queued {
            req.queued = false;
            self.slow_queue_depth -= 1;
        }
        let rkey = (host, token);
        self.remember_finished(rkey.clone());
        let ended = if req.op == Some(GET) && req.success_end.is_some() { req.success_end } else { Some(req.latest) };
        let status = if req.op == Some(GET) && req.success_end.is_some() { "success" } else { "incomplete" };
        let record = self.request_record(cx, &req, status, ended, reason);
        self.mark_request(&rkey);
        self.emit(cx, record, Meta::Request { host: rkey.0, token: rkey.1, ended })
    }

    /// A record out: to the linker when the engine has one, else to Python's emit.
    fn emit(&self, cx: &Cx, record: Rec, meta: Meta) -> PyResult<()> {
        let mut record = Some(record);
        let mut meta = Some(meta);
        if let Some(result) = cx.link(|lk, ctx| lk.take(ctx, record.take().unwrap(), meta.take().unwrap())) {
            return result;
        }
        deliver(cx.py, &cx.cb.emit, &record.unwrap(), cx.names)
    }

    fn request_record(&mut self, cx: &Cx, req: &Request, status: &str, ended: Option<i64>, reason: &str) -> Rec {
        self.stats[REQUESTS] += 1;
        let py = cx.py;
        let key = |n: &str| cx.keys.get(py, n).clone().unbind();
        let start = req.accepted.or(req.started);
        let transfer = if req.closing == Some(PUTDONE) { diff(req.putdone_first, req.success_end) } else { None };
        Rec::Request(Box::new(RequestRec {
            host: req.host,
            token: req.token.clone(),
            op: req.op,
            client: req.client.clone(),
            nfiles: req.nfiles,
            status: key(status),
            accepted: req.accepted,
            started: req.started,
            ended,
            auth_ms: diff(req.started, req.accepted),
            request_ms: diff(req.request_ret, req.started),
            queue_ms: diff(req.proc_first, req.request_ret),
            proc_ms: req.proc_ms,
            polls: req.polls,
            poll_ms: req.poll_ms,
            ready_wait_ms: diff(req.success_end, req.request_ret),
            transfer_ms: transfer,
            done_ms: req.done_ms,
            total_ms: diff(ended, start),
            end_reason: key(reason),
            ns: None,
        }))
    }

    // -- calls -----------------------------------------------------------------------
    fn emit_call(&mut self, cx: &Cx, key: TKey, th: &mut Thread, call: &Call, ended: Option<i64>, rc: Option<i64>) -> PyResult<()> {
        if rc == Some(0) {
            match session_open(call.op) {
                Some(Session::Sess) => th.sess = true,
                Some(Session::Trans) => th.trans = true,
                None => {}
            }
        }
        match session_close(call.op) {
            Some(Session::Sess) => th.sess = false,
            Some(Session::Trans) => th.trans = false,
            None => {}
        }
        self.stats[CALLS] += 1;
        let (host, daemon, pid, tid) = key;
        let record = Rec::Call(Box::new(CallRec {
            host,
            daemon,
            pid,
            thread: if tid >= 0 { Some(tid) } else { None },
            op: call.op,
            client: call.client.clone(),
            started: call.started,
            ended,
            duration_ms: diff(ended, Some(call.started)),
            rc,
            auth_ms: diff(Some(call.started), call.accepted),
            session: call.session.map(Session::name),
            token: None,
            path: call.path.clone(),
        }));
        let meta = Meta::Call { host, daemon, path: call.path.clone(), client: call.client.clone(), started: call.started, ended };
        self.emit(cx, record, meta)
    }

    fn close_noreturn(&mut self, cx: &Cx, key: TKey, th: &mut Thread) -> PyResult<()> {
        let Some(call) = th.call.take() else {
            return Ok(());
        };
        self.stats[NORETURN_CALLS] += 1;
        if call.kind == Kind::Plain || (call.kind == Kind::Step && call.token.is_none()) {
            self.emit_call(cx, key, th, &call, None, None)?;
        } else if call.kind == Kind::Proc {
            if let Some(token) = &call.token {
                self.run_ended(cx, key.0, token, call.started, None)?;
            }
        }
        Ok(())
    }

    // -- processes -------------------------------------------------------------------
    fn retire_processes(&mut self, cx: &Cx, grace_ms: i64, at_end: bool) -> PyResult<()> {
        for stream in self.process_streams.clone() {
            let (host, daemon) = stream;
            let Some(procs) = self.processes.get(&stream) else { continue };
            if procs.len() < 2 {
                continue;
            }
            let mut by_first: Vec<(i64, i64, i64, u64)> = procs.iter().map(|(&pid, p)| (pid, p.first, p.last, p.born)).collect();
            by_first.sort_by_key(|&(_, first, _, born)| (first, born));
            let mut newer_last: Option<i64> = None;
            let mut retired = Vec::new();
            for i in (0..by_first.len() - 1).rev() {
                let (pid, _, last, _) = by_first[i];
                let (_, later_first, later_last, _) = by_first[i + 1];
                newer_last = Some(newer_last.map_or(later_last, |n| n.max(later_last)));
                if newer_last.unwrap() > last + grace_ms || (at_end && later_first > last) {
                    retired.push(pid);
                }
            }
            if retired.is_empty() {
                continue;
            }
            let newest = by_first.last().unwrap().0;
            let mut alive: VecDeque<i64> = by_first.iter().map(|p| p.0).collect();
            let mut gone: FxSet<i64> = FxSet::default();
            let lasts: FxMap<i64, i64> = by_first.iter().map(|p| (p.0, p.2)).collect();
            retired.sort_by_key(|pid| lasts[pid]); // stable, as Python's sorted()
            for pid in retired {
                while alive.front().is_some_and(|p| gone.contains(p)) {
                    alive.pop_front();
                }
                let procs = self.processes.get_mut(&stream).unwrap();
                let newest_succeeded = procs[&newest].succeeded;
                if alive.front() == Some(&pid) && !newest_succeeded {
                    let newest_proc = procs.get_mut(&newest).unwrap();
                    newest_proc.succeeded = true;
                    let first = newest_proc.first;
                    self.stats[RESTARTS] += 1;
                    self.log_restart(first, host, daemon);
                } else {
                    self.stats[STRAY_PROCESSES] += 1;
                }
                let tids: Vec<i64> = self.processes[&stream][&pid].tids.iter().copied().collect();
                for tid in tids {
                    self.drop_thread(cx, (host, daemon, pid, tid))?;
                }
                self.processes.get_mut(&stream).unwrap().remove(&pid);
                gone.insert(pid);
            }
        }
        Ok(())
    }

    fn expire_processes(&mut self, horizons: &FxMap<Sym, i64>) {
        for ((host, _), procs) in self.processes.iter_mut() {
            let Some(&horizon) = horizons.get(host) else { continue };
            procs.retain(|_, p| !(p.last < horizon && p.tids.is_empty()));
        }
    }

    // -- event time ------------------------------------------------------------------
    fn advance(&mut self, cx: &Cx) -> PyResult<()> {
        let hosts: Vec<(Sym, i64)> = {
            let clk = cx.clk.borrow();
            clk.order.iter().map(|h| (*h, clk.hosts[h].latest)).collect()
        };
        let mut horizons = FxMap::default();
        for (host, latest) in hosts {
            let horizon = latest - self.set.allowance_ms - self.set.timeout_ms;
            horizons.insert(host, horizon);
            loop {
                let Some((_, token)) = self.request_order.get(&host).and_then(|o| o.first_key_value()) else { break };
                let token = token.clone();
                if self.requests[&host][&token].latest >= horizon {
                    break;
                }
                let req = self.forget(host, &token).unwrap();
                self.stats[EXPIRED] += 1;
                self.expire(cx, host, token, req, "timeout")?;
            }
            loop {
                let Some((_, key)) = self.thread_order.get(&host).and_then(|o| o.first_key_value()) else { break };
                let key = *key;
                if self.threads[&key].latest >= horizon {
                    break;
                }
                self.stats[EXPIRED_THREADS] += 1;
                self.drop_thread(cx, key)?;
            }
        }
        self.expire_processes(&horizons);
        self.retire_processes(cx, self.set.grace_ms, false)
    }

    fn finish(&mut self, cx: &Cx) -> PyResult<()> {
        let order: Vec<Sym> = cx.clk.borrow().order.clone();
        for host in order {
            let (held, votes) = {
                let mut clk = cx.clk.borrow_mut();
                let clock = clk.hosts.get_mut(&host).unwrap();
                (clock.held.take(), clock.votes)
            };
            match held {
                Some(held) if !held.is_empty() && votes > 0 => self.stats[FUTURE_LINES] += held.len() as i64,
                Some(held) => {
                    for ev in &held {
                        self.accept_event(cx, &ev.view())?;
                    }
                }
                None => {}
            }
        }
        self.retire_processes(cx, self.set.grace_ms, true)?;
        let mut keys: Vec<(u64, TKey)> = self.threads.iter().map(|(k, t)| (t.born, *k)).collect();
        keys.sort_unstable();
        for (_, key) in keys {
            let mut th = self.threads.remove(&key).unwrap();
            let result = if th.call.is_some() { self.close_noreturn(cx, key, &mut th) } else { Ok(()) };
            self.threads.insert(key, th);
            result?;
        }
        self.threads.clear();
        self.thread_order.clear();
        self.thread_order_hosts.clear();
        for host in self.request_order_hosts.clone() {
            loop {
                let Some((_, token)) = self.request_order.get(&host).and_then(|o| o.first_key_value()) else { break };
                let token = token.clone();
                let req = self.forget(host, &token).unwrap();
                self.expire(cx, host, token, req, "input_end")?;
            }
        }
        Ok(())
    }
}

/// The lines feed_lines takes: a block over one read buffer (replay's plain files), or a
/// list of bytes or str (everything else).
enum Chunk<'a, 'py> {
    Block(&'a LineBlock, &'a [u8]),
    List(&'a Bound<'py, PyList>),
}

impl<'py> Chunk<'_, 'py> {
    fn len(&self) -> usize {
        match self {
            Chunk::Block(b, _) => b.len(),
            Chunk::List(l) => l.len(),
        }
    }

    /// Line i's bytes, and the list item that holds them (None in a block, whose buffer
    /// outlives the call): the caller keeps it while it uses the bytes, since records it
    /// emits meanwhile run Python. None for a line neither bytes nor UTF-8 text (Python's).
    fn line(&self, i: usize) -> PyResult<Option<(&'static [u8], Option<Bound<'py, PyAny>>)>> {
        let (ptr, len, item) = match self {
            Chunk::Block(b, data) => {
                let raw = b.line(data, i);
                (raw.as_ptr(), raw.len(), None)
            }
            Chunk::List(l) => {
                let item = l.get_item(i)?;
                let raw = if let Ok(b) = item.downcast::<PyBytes>() {
                    b.as_bytes()
                } else if let Ok(Ok(t)) = item.downcast::<PyString>().map(|s| s.to_str()) {
                    t.as_bytes()
                } else {
                    return Ok(None);
                };
                (raw.as_ptr(), raw.len(), Some(item))
            }
        };
        // SAFETY: the bytes live as long as what holds them: the block (for the call) or
        // the item returned beside them, which the caller keeps while it uses them.
        Ok(Some((unsafe { std::slice::from_raw_parts(ptr, len) }, item)))
    }
}

/// The compiled reassembler (wrapped by parsers/compiled_reassembly.py).
#[pyclass(module = "dpmstream.parsers._fastlines", subclass)]
pub struct Core {
    st: RefCell<State>,
    clk: RefCell<Clocks>,
    names: RefCell<Names>,
    cb: RefCell<Callbacks>,
    keys: Keys,
    allowance_ms: i64, // read by callbacks while the state is borrowed
    lk: RefCell<Option<Linker>>,
}

// SAFETY: the parts that are neither Send nor Sync (Rc counts, RefCells) are reached only
// through Core's methods, and every one of them runs with the GIL held (they are Python
// methods; Python 3.11 has no free-threaded build), as does its drop: no two threads ever
// touch them at once. Python's cyclic GC may free a pipeline on any thread that allocates
// (a Kafka client's own thread); marked unsendable, the object was then leaked with an
// error instead of freed.
unsafe impl Send for Core {}
unsafe impl Sync for Core {}

fn opt_text(v: &Bound<'_, PyAny>) -> PyResult<Option<Text>> {
    if v.is_none() {
        Ok(None)
    } else {
        Ok(Some(v.extract::<String>()?.into()))
    }
}

fn item<'py>(d: &Bound<'py, PyDict>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    d.get_item(name)?.ok_or_else(|| PyKeyError::new_err(name.to_string()))
}

impl Core {
    fn with<R>(&self, py: Python<'_>, f: impl FnOnce(&mut State, &Cx<'_, '_>) -> PyResult<R>) -> PyResult<R> {
        let cb = {
            let cb = self.cb.borrow();
            Callbacks { emit: cb.emit.clone_ref(py), runs: cb.runs.as_ref().map(|r| r.clone_ref(py)), on_span: cb.on_span.as_ref().map(|r| r.clone_ref(py)) }
        };
        let ns_daemon = self.names.borrow_mut().intern(NS_DAEMON);
        let dpm_daemon = self.names.borrow_mut().intern(DPM_DAEMON);
        let cx = Cx { py, clk: &self.clk, names: &self.names, cb: &cb, keys: &self.keys, lk: &self.lk, allowance_ms: self.allowance_ms, ns_daemon, dpm_daemon };
        let mut st = self.st.try_borrow_mut().map_err(|_| PyValueError::new_err("the reassembler was fed from inside one of its own callbacks"))?;
        f(&mut st, &cx)
    }

    fn ev_of_tuple<'a>(&self, t: &'a Bound<'_, PyTuple>, texts: &'a mut [Option<String>; 4]) -> PyResult<Ev<'a>> {
        let get = |i: usize| t.get_item(i);
        let mut names = self.names.borrow_mut();
        let role_name: String = get(6)?.extract()?;
        let role = Role::from_name(&role_name).ok_or_else(|| PyKeyError::new_err(role_name.clone()))?;
        let sym = |v: Bound<'_, PyAny>, names: &mut Names| -> PyResult<Option<Sym>> {
            if v.is_none() { Ok(None) } else { Ok(Some(names.intern(&v.extract::<String>()?))) }
        };
        let host = names.intern(&get(1)?.extract::<String>()?);
        let daemon = names.intern(&get(2)?.extract::<String>()?);
        let func = names.intern(&get(5)?.extract::<String>()?);
        let op = sym(get(7)?, &mut names)?;
        let state = sym(get(11)?, &mut names)?;
        for (slot, i) in texts.iter_mut().zip([8usize, 9, 13, 14]) {
            let v = get(i)?;
            *slot = if v.is_none() { None } else { Some(v.extract::<String>()?) };
        }
        let texts: &'a [Option<String>; 4] = texts;
        let [client, token, surl, path] = texts;
        Ok(Ev {
            ts: get(0)?.extract()?,
            host,
            daemon,
            pid: get(3)?.extract()?,
            tid: get(4)?.extract()?,
            func,
            role,
            op,
            client: client.as_deref(),
            token: token.as_deref(),
            nfiles: get(10)?.extract()?,
            state,
            rc: get(12)?.extract()?,
            surl: surl.as_deref(),
            path: path.as_deref(),
        })
    }
}

/// Why feed_lines stopped: the list ended, a line needs Python, the source passed its
/// limit in event time.
const DONE: u8 = 0;
const SLOW: u8 = 1;
const LIMIT: u8 = 2;
const BUDGET: u8 = 3;

#[pymethods]
impl Core {
    #[new]
    #[pyo3(signature = (emit, timeout_ms=3_600_000, max_in_flight=1_000_000, allowance_ms=2_000, finished_memory=100_000, max_threads=100_000, grace_ms=60_000, jump_ms=300_000, duplicate_memory=1 << 17))]
    #[allow(clippy::too_many_arguments)]
    fn new(py: Python<'_>, emit: PyObject, timeout_ms: i64, max_in_flight: usize, allowance_ms: i64, finished_memory: usize, max_threads: usize, grace_ms: i64, jump_ms: i64, duplicate_memory: usize) -> PyResult<Self> {
        if !(1..=MAX_DUPLICATE_MEMORY).contains(&duplicate_memory) {
            return Err(PyValueError::new_err(format!("duplicate memory must be 1 to {MAX_DUPLICATE_MEMORY} lines, not {duplicate_memory}")));
        }
        let set = Settings { timeout_ms, max_in_flight, allowance_ms, finished_memory, max_threads, grace_ms, jump_ms };
        Ok(Core {
            st: RefCell::new(State {
                set,
                threads: FxMap::default(),
                thread_order: FxMap::default(),
                thread_order_hosts: Vec::new(),
                requests: FxMap::default(),
                n_requests: 0,
                request_order: FxMap::default(),
                request_order_hosts: Vec::new(),
                finished: FxMap::default(),
                finished_order: VecDeque::new(),
                finished_groups: FxMap::default(),
                group: 0,
                processes: FxMap::default(),
                process_streams: Vec::new(),
                seen: DigestWindow::new(duplicate_memory),
                stats: [0; STAT_NAMES.len()],
                restart_log: VecDeque::new(),
                slow_queue_depth: 0,
                changed: None,
                seq: 0,
                host_steps: FxMap::default(),
            }),
            clk: RefCell::new(Clocks::default()),
            names: RefCell::new(Names::new()),
            cb: RefCell::new(Callbacks { emit, runs: None, on_span: None }),
            keys: Keys::new(py),
            allowance_ms,
            lk: RefCell::new(None),
        })
    }

    // -- callbacks and settings --------------------------------------------------------
    #[getter]
    fn get_emit(&self, py: Python<'_>) -> PyObject {
        self.cb.borrow().emit.clone_ref(py)
    }
    #[setter]
    fn set_emit(&self, emit: PyObject) {
        self.cb.borrow_mut().emit = emit;
    }
    #[getter]
    fn get_runs(&self, py: Python<'_>) -> Option<PyObject> {
        self.cb.borrow().runs.as_ref().map(|r| r.clone_ref(py))
    }
    #[setter]
    fn set_runs(&self, py: Python<'_>, runs: PyObject) {
        self.cb.borrow_mut().runs = if runs.is_none(py) { None } else { Some(runs) };
    }
    #[getter]
    fn get_on_span(&self, py: Python<'_>) -> Option<PyObject> {
        self.cb.borrow().on_span.as_ref().map(|r| r.clone_ref(py))
    }
    #[setter]
    fn set_on_span(&self, py: Python<'_>, on_span: PyObject) {
        self.cb.borrow_mut().on_span = if on_span.is_none(py) { None } else { Some(on_span) };
    }
    #[getter]
    fn get_finished_memory(&self) -> usize {
        self.st.borrow().set.finished_memory
    }
    #[setter]
    fn set_finished_memory(&self, n: usize) {
        self.st.borrow_mut().set.finished_memory = n;
    }

    // -- input -----------------------------------------------------------------------
    /// One Event (parsers/events.py), as Reassembler.feed takes it.
    fn feed(&self, py: Python<'_>, ev: &Bound<'_, PyTuple>) -> PyResult<()> {
        let mut texts: [Option<String>; 4] = Default::default();
        let ev = self.ev_of_tuple(ev, &mut texts)?;
        self.with(py, |st, cx| {
            st.feed(cx, &ev)
        })
    }

    /// Lines of one source, from lines[start], parsed by `parser` (its FastLines) and
    /// reassembled here, until the list ends, a line needs Python (SLOW: lines[next] is
    /// left to the caller), the source's stream time passes `limit` (LIMIT), or `budget`
    /// lines were taken (BUDGET: an event-time sweep is due).
    /// Returns (next, parsed, unmatched, latest event time parsed or -1, why).
    #[pyo3(signature = (parser, lines, start, limit, budget))]
    fn feed_lines(&self, py: Python<'_>, parser: &Bound<'_, FastLines>, lines: &Bound<'_, PyAny>, start: usize, limit: Option<i64>, budget: usize) -> PyResult<(usize, usize, usize, i64, u8)> {
        let chunk = match lines.downcast::<LineBlock>() {
            Ok(b) => Chunk::Block(b.get(), b.get().data(py)),
            Err(_) => Chunk::List(lines.downcast::<PyList>()?),
        };
        let mut parser = parser.borrow_mut();
        let (host_py, daemon_py) = parser.host_daemon(py);
        let (host, daemon) = {
            let mut names = self.names.borrow_mut();
            (names.intern(host_py.downcast::<PyString>()?.to_str()?), names.intern(daemon_py.downcast::<PyString>()?.to_str()?))
        };
        let n = chunk.len();
        let (mut parsed, mut unmatched, mut latest) = (0usize, 0usize, -1i64);
        let mut i = start;
        let why = self.with(py, |st, cx| {
            while i < n {
                let Some((raw, _holder)) = chunk.line(i)? else { return Ok(SLOW) };
                let mut end = raw.len();
                while end > 0 && (raw[end - 1] == b'\n' || raw[end - 1] == b'\r') {
                    end -= 1;
                }
                let bytes = &raw[..end];
                match parser.scan(bytes) {
                    Scan::Python => return Ok(SLOW),
                    Scan::Unmatched => unmatched += 1,
                    Scan::Parsed { alt, ts, pid, tid, nfiles, rc } => {
                        // SAFETY: scan() took it: printable ASCII.
                        let text = unsafe { std::str::from_utf8_unchecked(bytes) };
                        let ev = {
                            let mut names = cx.names.borrow_mut();
                            parser.event(&mut names, text, host, daemon, (alt, ts, pid, tid, nfiles, rc))
                        };
                        let Some(ev) = ev else { return Ok(SLOW) };
                        parsed += 1;
                        if ts > latest {
                            latest = ts;
                        }
                        st.feed(cx, &ev)?;
                    }
                }
                i += 1;
                if let Some(limit) = limit {
                    if cx.clk.borrow().stream_now.get(&(host, daemon)).is_some_and(|&now| now > limit) {
                        return Ok(LIMIT);
                    }
                }
                if i - start >= budget {
                    return Ok(BUDGET);
                }
            }
            Ok(DONE)
        })?;
        Ok((i, parsed, unmatched, latest, why))
    }

    fn advance(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |st, cx| st.advance(cx))
    }

    fn finish(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |st, cx| st.finish(cx))
    }

    // -- the name-server linker inside the engine (parsers/linking.py's twin) -----------
    /// From now on records and processing runs go to the linker, and what it lets out to
    /// `emit`.
    #[pyo3(signature = (emit, aliases, delay_ms=3000, slack_ms=5, learn_head=true))]
    fn attach_linker(&self, emit: PyObject, aliases: Vec<String>, delay_ms: i64, slack_ms: i64, learn_head: bool) {
        *self.lk.borrow_mut() = Some(Linker::new(emit, aliases, delay_ms, slack_ms, learn_head));
    }

    #[getter]
    fn get_link_expect_ns(&self) -> bool {
        self.lk.borrow().as_ref().is_some_and(|l| l.expect_ns)
    }
    #[setter]
    fn set_link_expect_ns(&self, value: bool) {
        if let Some(l) = self.lk.borrow_mut().as_mut() {
            l.expect_ns = value;
        }
    }
    #[setter]
    fn set_link_detecting(&self, py: Python<'_>, f: PyObject) {
        if let Some(l) = self.lk.borrow_mut().as_mut() {
            l.detecting = if f.is_none(py) { None } else { Some(f) };
        }
    }

    /// (calls linked, calls ambiguous)
    fn link_stats(&self) -> (i64, i64) {
        self.lk.borrow().as_ref().map_or((0, 0), |l| (l.linked, l.ambiguous))
    }

    fn link_held(&self) -> usize {
        self.lk.borrow().as_ref().map_or(0, |l| l.held())
    }

    /// The name-server clients seen when no call linked (linking.py's unlinked_clients).
    fn link_unlinked_clients(&self) -> Vec<String> {
        self.lk.borrow().as_ref().map_or_else(Vec::new, |l| l.unlinked_clients())
    }

    fn link_advance(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |_, cx| cx.link(|lk, ctx| lk.advance(ctx)).unwrap_or(Ok(())))
    }

    fn link_finish(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |_, cx| cx.link(|lk, ctx| lk.finish(ctx)).unwrap_or(Ok(())))
    }

    fn link_state(&self, py: Python<'_>) -> PyResult<Option<PyObject>> {
        let hosts: Vec<Sym> = self.clk.borrow().order.clone();
        self.with(py, |_, cx| {
            cx.link(|lk, ctx| Ok(lk.state(ctx, &hosts)?.map(|d| d.into_any().unbind()))).unwrap_or(Ok(None))
        })
    }

    fn link_restore(&self, py: Python<'_>, state: &Bound<'_, PyDict>) -> PyResult<()> {
        self.with(py, |_, cx| cx.link(|lk, ctx| lk.restore(ctx, state)).unwrap_or(Ok(())))
    }

    // -- reading -----------------------------------------------------------------------
    #[pyo3(signature = (host=None))]
    fn watermark(&self, host: Option<&str>) -> PyResult<Option<i64>> {
        let clk = self.clk.borrow();
        let latest = match host {
            None => clk.latest,
            Some(h) => {
                let sym = self.names.borrow().find(h);
                match sym.and_then(|s| clk.hosts.get(&s)) {
                    Some(c) => Some(c.latest),
                    None => return Err(PyKeyError::new_err(h.to_string())),
                }
            }
        };
        Ok(latest.map(|l| l - self.allowance_ms))
    }

    fn stream_time(&self, host: &str, daemon: &str) -> Option<i64> {
        let names = self.names.borrow();
        let (h, d) = (names.find(host)?, names.find(daemon)?);
        self.clk.borrow().stream_now.get(&(h, d)).copied()
    }

    fn seen_daemon(&self, host: &str, daemon: &str) -> bool {
        self.stream_time(host, daemon).is_some()
    }

    fn hosts(&self) -> Vec<String> {
        let names = self.names.borrow();
        self.clk.borrow().order.iter().map(|h| names.text(*h).to_string()).collect()
    }

    #[getter]
    fn latest(&self) -> Option<i64> {
        self.clk.borrow().latest
    }

    #[getter]
    fn in_flight(&self) -> usize {
        self.st.borrow().n_requests
    }

    #[getter]
    fn slow_queue_depth(&self) -> i64 {
        self.st.borrow().slow_queue_depth
    }

    fn in_flight_by_host(&self) -> HashMap<String, usize> {
        let st = self.st.borrow();
        let names = self.names.borrow();
        st.requests.iter().filter(|(_, m)| !m.is_empty()).map(|(h, m)| (names.text(*h).to_string(), m.len())).collect()
    }

    fn slow_queue_by_host(&self) -> HashMap<String, usize> {
        let st = self.st.borrow();
        let names = self.names.borrow();
        let mut out = HashMap::new();
        for (h, m) in &st.requests {
            let n = m.values().filter(|r| r.queued).count();
            if n > 0 {
                out.insert(names.text(*h).to_string(), n);
            }
        }
        out
    }

    fn thread_keys_raw(&self) -> Vec<(String, String, i64, i64)> {
        let st = self.st.borrow();
        let names = self.names.borrow();
        st.threads.keys().map(|k| (names.text(k.0).to_string(), names.text(k.1).to_string(), k.2, k.3)).collect()
    }

    #[getter]
    fn remembered_ended(&self) -> usize {
        self.st.borrow().finished_order.len()
    }

    fn count_duplicates(&self, n: i64) {
        self.st.borrow_mut().stats[DUPLICATE_LINES] += n;
    }

    fn stats_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let st = self.st.borrow();
        let d = PyDict::new(py);
        for (name, value) in STAT_NAMES.iter().zip(st.stats.iter()) {
            d.set_item(*name, *value)?;
        }
        Ok(d)
    }

    fn restarts(&self) -> Vec<(i64, String, String)> {
        let st = self.st.borrow();
        let names = self.names.borrow();
        st.restart_log.iter().map(|(t, h, d)| (*t, names.text(*h).to_string(), names.text(*d).to_string())).collect()
    }

    // -- state ------------------------------------------------------------------------
    #[getter]
    fn tracking(&self) -> bool {
        self.st.borrow().changed.is_some()
    }

    fn track_changes(&self) {
        self.st.borrow_mut().changed = Some(Changed::default());
    }

    /// (threads, requests, groups) changed since the last take, keys as plain tuples.
    fn take_changes_raw<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyDict>, Bound<'py, PyDict>, Bound<'py, PyDict>)> {
        let mut st = self.st.borrow_mut();
        let changed = st.changed.replace(Changed::default()).unwrap_or_default();
        let mut names = self.names.borrow_mut();
        let threads = PyDict::new(py);
        for key in &changed.threads {
            let k = (names.py(py, key.0), names.py(py, key.1), key.2, key.3);
            let v = match st.threads.get(key) {
                None => py.None().into_bound(py),
                Some(th) => thread_state(py, &mut names, th)?.into_any(),
            };
            threads.set_item(k, v)?;
        }
        let requests = PyDict::new(py);
        for (host, token) in &changed.requests {
            let k = (names.py(py, *host), &**token);
            let v = match st.requests.get(host).and_then(|m| m.get(token)) {
                None => py.None().into_bound(py),
                Some(req) => request_state(py, &mut names, req)?.into_any(),
            };
            requests.set_item(k, v)?;
        }
        let groups = PyDict::new(py);
        for g in &changed.groups {
            match st.finished_groups.get(g) {
                None => groups.set_item(*g, py.None())?,
                Some(members) => {
                    let list = PyList::empty(py);
                    for (h, t) in members {
                        list.append((names.py(py, *h), &**t))?;
                    }
                    groups.set_item(*g, list)?;
                }
            }
        }
        drop(names);
        let _ = &mut st;
        Ok((threads, requests, groups))
    }

    fn clock_state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let st = self.st.borrow();
        let clk = self.clk.borrow();
        let mut names = self.names.borrow_mut();
        let processes = PyList::empty(py);
        for stream in &st.process_streams {
            let Some(procs) = st.processes.get(stream) else { continue };
            let mut rows: Vec<(&i64, &Process)> = procs.iter().collect();
            rows.sort_by_key(|(_, p)| p.born);
            for (pid, p) in rows {
                let row = PyList::new(py, [names.py(py, stream.0), names.py(py, stream.1), pid.into_pyobject(py)?.into_any().unbind(), p.first.into_pyobject(py)?.into_any().unbind(), p.last.into_pyobject(py)?.into_any().unbind(), p.lines.into_pyobject(py)?.into_any().unbind()])?;
                processes.append(row)?;
            }
        }
        let hosts = PyList::empty(py);
        for h in &clk.order {
            let row = PyList::new(py, [names.py(py, *h), clk.hosts[h].latest.into_pyobject(py)?.into_any().unbind()])?;
            hosts.append(row)?;
        }
        // Each (host, daemon) stream's current stamp, sorted as the Python engine sorts
        // them: a restored engine dates, steps and links as one that never stopped.
        let mut now: Vec<(String, String, i64)> = clk.stream_now.iter()
            .map(|((h, d), ts)| (names.text(*h).to_string(), names.text(*d).to_string(), *ts)).collect();
        now.sort();
        let streams = PyList::empty(py);
        for (h, d, ts) in now {  // lists, as the Python engine's rows (and JSON's) are
            let row = PyList::new(py, [h.into_pyobject(py)?.into_any().unbind(), d.into_pyobject(py)?.into_any().unbind(), ts.into_pyobject(py)?.into_any().unbind()])?;
            streams.append(row)?;
        }
        let d = PyDict::new(py);
        d.set_item("processes", processes)?;
        d.set_item("hosts", hosts)?;
        d.set_item("streams", streams)?;
        Ok(d)
    }

    /// Loads state saved by take_changes/clock_state of either engine (keys as tuples).
    #[pyo3(signature = (threads, requests, clock=None, finished=None))]
    fn restore(&self, threads: &Bound<'_, PyDict>, requests: &Bound<'_, PyDict>, clock: Option<&Bound<'_, PyDict>>, finished: Option<&Bound<'_, PyDict>>) -> PyResult<()> {
        let mut st = self.st.borrow_mut();
        let st = &mut *st;
        let mut clk = self.clk.borrow_mut();
        let mut names = self.names.borrow_mut();
        if let Some(clock) = clock {
            if let Some(rows) = clock.get_item("processes")? {
                for row in rows.try_iter()? {
                    let (host, daemon, pid, first, last, lines): (String, String, i64, i64, i64, i64) = row?.extract()?;
                    let stream = (names.intern(&host), names.intern(&daemon));
                    if !st.processes.contains_key(&stream) {
                        st.processes.insert(stream, FxMap::default());
                        st.process_streams.push(stream);
                    }
                    let born = st.next_seq();
                    st.processes.get_mut(&stream).unwrap().insert(pid, Process { first, last, lines, tids: BTreeSet::new(), succeeded: false, born });
                }
            }
            if let Some(rows) = clock.get_item("hosts")? {
                for row in rows.try_iter()? {
                    let (host, latest): (String, i64) = row?.extract()?;
                    let h = names.intern(&host);
                    clk.insert(h, latest);
                    clk.hosts.get_mut(&h).unwrap().latest = latest;
                    clk.raise_latest(latest);
                }
            }
            if let Some(rows) = clock.get_item("streams")? {  // absent in older states
                for row in rows.try_iter()? {
                    let (host, daemon, ts): (String, String, i64) = row?.extract()?;
                    let key = (names.intern(&host), names.intern(&daemon));
                    clk.stream_now.insert(key, ts);
                }
            }
        }
        let mut rows: Vec<(TKey, Bound<'_, PyDict>, i64)> = Vec::new();
        for (k, v) in threads.iter() {
            let (host, daemon, pid, tid): (String, String, i64, i64) = k.extract()?;
            let v = v.downcast_into::<PyDict>()?;
            let latest: i64 = item(&v, "latest")?.extract()?;
            rows.push(((names.intern(&host), names.intern(&daemon), pid, tid), v, latest));
        }
        rows.sort_by_key(|r| r.2);
        for (key, v, latest) in rows {
            let (host, daemon, pid, tid) = key;
            let seq = st.next_seq();
            let call = v.get_item("call")?;
            let call = if call.as_ref().map_or(true, |c| c.is_none()) {
                None
            } else {
                let c = call.unwrap().downcast_into::<PyDict>()?;
                let op: String = item(&c, "op")?.extract()?;
                let state = item(&c, "state")?;
                let session: Option<String> = item(&c, "session")?.extract()?;
                Some(Call {
                    op: names.intern(&op),
                    client: opt_text(&item(&c, "client")?)?,
                    accepted: item(&c, "accepted")?.extract()?,
                    started: item(&c, "started")?.extract()?,
                    kind: Kind::from_name(&item(&c, "kind")?.extract::<String>()?)?,
                    token: opt_text(&item(&c, "token")?)?,
                    state: if state.is_none() { None } else { Some(names.intern(&state.extract::<String>()?)) },
                    session: match session.as_deref() {
                        None => None,
                        Some("sess") => Some(Session::Sess),
                        Some("trans") => Some(Session::Trans),
                        Some(other) => return Err(PyValueError::new_err(format!("unknown session {other:?}"))),
                    },
                    path: opt_text(&item(&c, "path")?)?,
                })
            };
            let th_daemon: String = item(&v, "daemon")?.extract()?;
            st.threads.insert(key, Box::new(Thread {
                daemon: names.intern(&th_daemon),
                accept: item(&v, "accept")?.extract()?,
                call,
                sess: item(&v, "sess")?.extract()?,
                trans: item(&v, "trans")?.extract()?,
                latest,
                at_latest: Vec::new(),
                order: NIL,
                born: seq,
            }));
            if !st.thread_order.contains_key(&host) {
                st.thread_order.insert(host, Lru::default());
                st.thread_order_hosts.push(host);
            }
            let handle = st.thread_order.get_mut(&host).unwrap().push_back(key);
            st.threads.get_mut(&key).unwrap().order = handle;
            if !st.processes.contains_key(&(host, daemon)) {
                st.processes.insert((host, daemon), FxMap::default());
                st.process_streams.push((host, daemon));
            }
            let born = st.next_seq();
            st.processes.get_mut(&(host, daemon)).unwrap().entry(pid).or_insert_with(|| Process { first: latest, last: latest, lines: 0, tids: BTreeSet::new(), succeeded: false, born }).tids.insert(tid);
        }
        if let Some(finished) = finished {
            let mut groups: Vec<(u64, Bound<'_, PyAny>)> = Vec::new();
            for (g, members) in finished.iter() {
                groups.push((g.extract()?, members));
            }
            groups.sort_by_key(|g| g.0);
            for (g, members) in groups {
                let mut list = Vec::new();
                for m in members.try_iter()? {
                    let (host, token): (String, String) = m?.extract()?;
                    let key: RKey = (names.intern(&host), token.into());
                    list.push(key.clone());
                    if st.finished.entry(key.0).or_default().insert(key.1.clone(), g).is_none() {
                        st.finished_order.push_back(key);
                    }
                }
                st.finished_groups.insert(g, list);
                st.group = g + 1;
            }
        }
        let mut rows: Vec<(Sym, Text, Bound<'_, PyDict>, i64)> = Vec::new();
        for (k, v) in requests.iter() {
            let (host, token): (String, String) = k.extract()?;
            let v = v.downcast_into::<PyDict>()?;
            let latest: i64 = item(&v, "latest")?.extract()?;
            rows.push((names.intern(&host), token.into(), v, latest));
        }
        rows.sort_by_key(|r| r.3);
        for (host, token, v, latest) in rows {
            let sym_of = |name: &str, names: &mut Names| -> PyResult<Option<Sym>> {
                let x = item(&v, name)?;
                if x.is_none() { Ok(None) } else { Ok(Some(names.intern(&x.extract::<String>()?))) }
            };
            let files = item(&v, "files")?;
            let files = if files.is_none() {
                None
            } else {
                let mut out = Vec::new();
                for f in files.try_iter()? {
                    out.push(Text::from(f?.extract::<String>()?));
                }
                Some(out)
            };
            let req_host: String = item(&v, "host")?.extract()?;
            let req = Request {
                host: names.intern(&req_host),
                token: opt_text(&item(&v, "token")?)?,
                op: sym_of("op", &mut names)?,
                client: opt_text(&item(&v, "client")?)?,
                nfiles: item(&v, "nfiles")?.extract()?,
                accepted: item(&v, "accepted")?.extract()?,
                started: item(&v, "started")?.extract()?,
                request_ret: item(&v, "request_ret")?.extract()?,
                proc_first: item(&v, "proc_first")?.extract()?,
                proc_ms: item(&v, "proc_ms")?.extract()?,
                polls: item(&v, "polls")?.extract()?,
                poll_ms: item(&v, "poll_ms")?.extract()?,
                success_end: item(&v, "success_end")?.extract()?,
                done_start: item(&v, "done_start")?.extract()?,
                done_ms: item(&v, "done_ms")?.extract()?,
                closing: sym_of("closing", &mut names)?,
                latest,
                queued: item(&v, "queued")?.extract()?,
                putdone_first: item(&v, "putdone_first")?.extract()?,
                files,
                order: NIL,
            };
            if req.queued {
                st.slow_queue_depth += 1;
            }
            let rhost = req.host;
            st.admit_uncapped(host, token, req);
            match clk.hosts.get_mut(&rhost) {
                None => clk.insert(rhost, latest),
                Some(c) if latest > c.latest => c.latest = latest,
                Some(_) => {}
            }
            clk.raise_latest(latest);
        }
        Ok(())
    }
}


fn thread_state<'py>(py: Python<'py>, names: &mut Names, th: &Thread) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("daemon", names.py(py, th.daemon))?;
    d.set_item("accept", th.accept)?;
    d.set_item("sess", th.sess)?;
    d.set_item("trans", th.trans)?;
    d.set_item("latest", th.latest)?;
    match &th.call {
        None => d.set_item("call", py.None())?,
        Some(c) => {
            let cd = PyDict::new(py);
            cd.set_item("op", names.py(py, c.op))?;
            cd.set_item("client", c.client.as_deref())?;
            cd.set_item("accepted", c.accepted)?;
            cd.set_item("started", c.started)?;
            cd.set_item("kind", c.kind.name())?;
            cd.set_item("token", c.token.as_deref())?;
            cd.set_item("state", c.state.map(|s| names.py(py, s)))?;
            cd.set_item("session", c.session.map(Session::name))?;
            cd.set_item("path", c.path.as_deref())?;
            d.set_item("call", cd)?;
        }
    }
    Ok(d)
}

fn request_state<'py>(py: Python<'py>, names: &mut Names, r: &Request) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("host", names.py(py, r.host))?;
    d.set_item("token", r.token.as_deref())?;
    d.set_item("op", r.op.map(|s| names.py(py, s)))?;
    d.set_item("client", r.client.as_deref())?;
    d.set_item("nfiles", r.nfiles)?;
    d.set_item("accepted", r.accepted)?;
    d.set_item("started", r.started)?;
    d.set_item("request_ret", r.request_ret)?;
    d.set_item("proc_first", r.proc_first)?;
    d.set_item("proc_ms", r.proc_ms)?;
    d.set_item("polls", r.polls)?;
    d.set_item("poll_ms", r.poll_ms)?;
    d.set_item("success_end", r.success_end)?;
    d.set_item("done_start", r.done_start)?;
    d.set_item("done_ms", r.done_ms)?;
    d.set_item("closing", r.closing.map(|s| names.py(py, s)))?;
    d.set_item("latest", r.latest)?;
    d.set_item("queued", r.queued)?;
    d.set_item("putdone_first", r.putdone_first)?;
    match &r.files {
        None => d.set_item("files", py.None())?,
        Some(f) => d.set_item("files", PyList::new(py, f.iter().map(|s| &**s))?)?,
    }
    Ok(d)
}
