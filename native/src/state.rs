//! What the DPM engine holds (the domain's data, no rules): threads and their open calls,
//! requests, processes, the per-host clocks, the changes since the last state taken, and
//! the settings. reassembly.rs changes it line by line; state_codec.rs saves and loads it.

use std::cell::RefCell;
use std::collections::{BTreeSet, VecDeque};
use std::rc::Rc;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::event::OwnedEv;
use crate::hashed_text::HashedText;
use crate::hashing::{FxMap, FxSet};
use crate::keyed_slab::KeyedSlab;
use crate::lru::Lru;
use crate::names::Sym;
use crate::schema::STAT_NAMES;
use crate::text_cache::TextCache;
use crate::window::DigestWindow;

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Plain,
    Step,
    Proc,
    Late,
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Plain => "plain",
            Kind::Step => "step",
            Kind::Proc => "proc",
            Kind::Late => "late",
        }
    }
    pub(crate) fn from_name(name: &str) -> PyResult<Kind> {
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
pub(crate) enum Session {
    Sess,
    Trans,
}

impl Session {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Session::Sess => "sess",
            Session::Trans => "trans",
        }
    }
}

pub(crate) use crate::text_cache::Text;
pub(crate) type TKey = (Sym, Sym, i64, i64);
pub(crate) type RKey = (Sym, Text);

pub(crate) struct Call {
    pub(crate) op: Sym,
    pub(crate) client: Option<Text>,
    pub(crate) accepted: Option<i64>,
    pub(crate) started: i64,
    pub(crate) kind: Kind,
    /// Its request's token: the key the request's table holds (the same text), so a line
    /// of the call finds the request without reading the text, out of cache by then.
    pub(crate) token: Option<HashedText>,
    pub(crate) state: Option<Sym>,
    pub(crate) session: Option<Session>,
    pub(crate) path: Option<Text>,
}

pub(crate) struct Thread {
    pub(crate) daemon: Sym,
    pub(crate) accept: Option<i64>,
    pub(crate) call: Option<Call>,
    pub(crate) sess: bool,
    pub(crate) trans: bool,
    pub(crate) latest: i64,
    pub(crate) at_latest: Vec<u64>, // digests of its lines stamped `latest` (reassembly.py's Thread)
    pub(crate) order: u32, // its handle in its host's activity order (NIL: not in one)
    pub(crate) born: u64,  // when it was created: Python's dict order
    /// Its process, as `State::processes` holds it: each line counts itself there without
    /// searching the two maps. A process outlives its threads (it is removed only with none).
    pub(crate) process: ProcRef,
}

/// reassembly.py's MAX_SAME_STAMP: lines of one thread and millisecond remembered.
pub(crate) const MAX_SAME_STAMP: usize = 64;

impl Thread {
    /// A thread in no activity order (the cap dropped it, or a stand-in).
    pub(crate) fn detached(daemon: Sym, ts: i64, process: ProcRef) -> Box<Thread> {
        Thread::new(daemon, ts, crate::lru::NIL, 0, process)
    }

    /// A thread with no call, no session and no accept yet, last seen at `ts`.
    pub(crate) fn new(daemon: Sym, ts: i64, order: u32, born: u64, process: ProcRef) -> Box<Thread> {
        Box::new(Thread { daemon, accept: None, call: None, sess: false, trans: false, latest: ts, at_latest: Vec::new(), order, born, process })
    }

    /// A line `digest` stamped `ts` was read on the thread.
    pub(crate) fn moved_to(&mut self, ts: i64, digest: u64) {
        if ts != self.latest || self.at_latest.is_empty() {
            self.at_latest.clear();
            self.at_latest.push(digest);
        } else if self.at_latest.len() < MAX_SAME_STAMP {
            self.at_latest.push(digest);
        }
        self.latest = ts;
    }
}

pub(crate) struct Process {
    pub(crate) first: i64,
    pub(crate) last: i64,
    pub(crate) lines: i64,
    pub(crate) tids: BTreeSet<i64>,
    pub(crate) succeeded: bool,
    pub(crate) born: u64,
}

/// A process shared by the table of processes and each of its threads.
pub(crate) type ProcRef = Rc<RefCell<Process>>;

impl Process {
    /// A process first seen at `ts`, with no lines counted and no threads.
    pub(crate) fn seen_at(ts: i64, born: u64) -> ProcRef {
        Rc::new(RefCell::new(Process { first: ts, last: ts, lines: 0, tids: BTreeSet::new(), succeeded: false, born }))
    }
}

pub(crate) struct HostClock {
    pub(crate) latest: i64,
    pub(crate) held: Option<Vec<OwnedEv>>,
    pub(crate) votes: u32,
}

/// Laid out as declared (repr(C)), what every line of its calls reads first: its table
/// holds it inline behind its key (~300 bytes an entry), and `touch` reads the key, then
/// `latest` and `order`; placed first they are on the key's cache line or the next, where
/// Rust's own order put them at the entry's far end, a cold line more a line.
#[derive(Default)]
#[repr(C)]
pub(crate) struct Request {
    pub(crate) latest: i64,
    pub(crate) order: u32,
    pub(crate) host: Sym,
    pub(crate) token: Option<Text>,
    pub(crate) op: Option<Sym>,
    pub(crate) client: Option<Text>,
    pub(crate) nfiles: Option<i64>,
    pub(crate) accepted: Option<i64>,
    pub(crate) started: Option<i64>,
    pub(crate) request_ret: Option<i64>,
    pub(crate) proc_first: Option<i64>,
    pub(crate) proc_ms: Option<i64>,
    pub(crate) polls: i64,
    pub(crate) poll_ms: i64,
    pub(crate) success_end: Option<i64>,
    pub(crate) done_start: Option<i64>,
    pub(crate) done_ms: Option<i64>,
    pub(crate) closing: Option<Sym>,
    pub(crate) queued: bool,
    pub(crate) putdone_first: Option<i64>,
    pub(crate) files: Option<Vec<Text>>,
}

#[derive(Clone, Copy)]
pub(crate) struct Settings {
    pub(crate) timeout_ms: i64,
    pub(crate) max_in_flight: usize,
    pub(crate) allowance_ms: i64,
    pub(crate) finished_memory: usize,
    pub(crate) max_threads: usize,
    pub(crate) grace_ms: i64,
    pub(crate) jump_ms: i64,
}

#[derive(Default)]
pub(crate) struct Changed {
    pub(crate) threads: FxSet<TKey>,
    pub(crate) requests: FxSet<RKey>,
    pub(crate) groups: FxSet<u64>,
}

/// Event time: per host, and per (host, daemon) stream. Read back by callbacks.
#[derive(Default)]
pub(crate) struct Clocks {
    pub(crate) hosts: FxMap<Sym, HostClock>,
    pub(crate) order: Vec<Sym>,
    pub(crate) latest: Option<i64>,
    pub(crate) stream_now: FxMap<(Sym, Sym), i64>,
}

impl Clocks {
    pub(crate) fn insert(&mut self, host: Sym, latest: i64) {
        if self.hosts.insert(host, HostClock { latest, held: None, votes: 0 }).is_none() {
            self.order.push(host);
        }
    }
    pub(crate) fn raise_latest(&mut self, ts: i64) {
        if self.latest.map_or(true, |l| ts > l) {
            self.latest = Some(ts);
        }
    }
}

pub(crate) struct State {
    pub(crate) set: Settings,
    /// host -> its last counted clock step: (from, to, daemons whose logs showed it)
    pub(crate) host_steps: FxMap<Sym, (i64, i64, Vec<Sym>)>,
    /// process() takes a line's thread out of its slot while it handles the line (the
    /// rules change the thread and the rest of the state at once) and puts it back by the
    /// slot's number. Boxed: moving a pointer is cheaper than moving a thread.
    pub(crate) threads: KeyedSlab<TKey, Box<Thread>>,
    pub(crate) thread_order: FxMap<Sym, Lru<TKey>>,
    pub(crate) thread_order_hosts: Vec<Sym>,
    pub(crate) requests: FxMap<Sym, FxMap<HashedText, Request>>,
    pub(crate) n_requests: usize,
    pub(crate) request_order: FxMap<Sym, Lru<HashedText>>,
    pub(crate) request_order_hosts: Vec<Sym>,
    pub(crate) finished: FxMap<Sym, FxMap<HashedText, u64>>,
    pub(crate) finished_order: VecDeque<RKey>,
    pub(crate) finished_groups: FxMap<u64, Vec<RKey>>,
    pub(crate) group: u64,
    pub(crate) processes: FxMap<(Sym, Sym), FxMap<i64, ProcRef>>,
    pub(crate) process_streams: Vec<(Sym, Sym)>,
    pub(crate) seen: DigestWindow,
    pub(crate) stats: [i64; STAT_NAMES.len()],
    pub(crate) restart_log: VecDeque<(i64, Sym, Sym)>,
    pub(crate) slow_queue_depth: i64,
    pub(crate) changed: Option<Changed>,
    pub(crate) seq: u64,
    /// The calls' clients, shared: a call line then allocates no text for its client.
    pub(crate) clients: TextCache,
}
