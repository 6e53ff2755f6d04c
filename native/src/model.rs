//! The simulator's model run without logs (simulator/run.py `simulate(cfg, None)`, as
//! simulator/predict.py runs it), compiled: the same event loop, daemon, slow threads,
//! name server and clients, drawing from a twin of CPython's `random.Random` in the same
//! order, so that the same config and seed give exactly the same ground truth. The Python
//! model stays the reference (tests/simulator/test_native_model.py runs both); the
//! config is prepared by simulator/native_model.py, and the run returns its ground
//! truth's records, made by model_truth.rs with truth.py's rules (no Python truth is
//! rebuilt: that was two thirds of a run).
//! Only what predict's calibrated configs use is here: no restart, strays, clock step,
//! log gap, line target or other name-server clients (native_model.py runs those in
//! Python).

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::rc::Rc;

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::hashing::FxMap;
use crate::model_summary::{phase_table, CallView, Measure, ReqView, Summaries};
use crate::model_truth::{idle_before, link, span, NsCall, RequestEnd, RequestSpan, RunSpan};
use crate::names::Names;
use crate::schema::{PHASES, SUCCESS};
use crate::rec::{CallRec, Rec, RequestRec};
use crate::tally::Mt;

// -- random.Random, as CPython 3 runs it ---------------------------------------------------

/// `random.Random(seed)` for a seed in 0..2**32: the Mersenne Twister and gauss's cache.
pub(crate) struct PyRandom {
    mt: Mt,
    gauss_next: Option<f64>,
}

impl PyRandom {
    pub(crate) fn new(seed: u32) -> Self {
        PyRandom { mt: Mt::seeded(seed), gauss_next: None }
    }

    /// random(): 53 bits from two 32-bit outputs.
    pub(crate) fn random(&mut self) -> f64 {
        let a = f64::from(self.mt.next_u32() >> 5);
        let b = f64::from(self.mt.next_u32() >> 6);
        (a * 67_108_864.0 + b) * (1.0 / 9_007_199_254_740_992.0)
    }

    /// gauss(mu, sigma): Box-Muller, the second value kept for the next call.
    pub(crate) fn gauss(&mut self, mu: f64, sigma: f64) -> f64 {
        let z = match self.gauss_next.take() {
            Some(z) => z,
            None => {
                let x2pi = self.random() * std::f64::consts::TAU;
                let g2rad = (-2.0 * (1.0 - self.random()).ln()).sqrt();
                self.gauss_next = Some(x2pi.sin() * g2rad);
                x2pi.cos() * g2rad
            }
        };
        mu + z * sigma
    }

    pub(crate) fn expovariate(&mut self, lambd: f64) -> f64 {
        -(1.0 - self.random()).ln() / lambd
    }

    /// _randbelow(n), n >= 1 (choice, randrange, shuffle use it).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        self.mt.below(n as u64) as usize
    }

    pub(crate) fn randint(&mut self, a: i64, b: i64) -> i64 {
        a + self.mt.below((b - a + 1) as u64) as i64
    }

    pub(crate) fn shuffle<T>(&mut self, x: &mut [T]) {
        for i in (1..x.len()).rev() {
            let j = self.below(i + 1);
            x.swap(i, j);
        }
    }

    /// getrandbits(128): four words, the lowest first.
    pub(crate) fn bits128(&mut self) -> u128 {
        let mut v = 0u128;
        for i in 0..4 {
            v |= u128::from(self.mt.next_u32()) << (32 * i);
        }
        v
    }
}

/// identities.make_uuid: a version 4 UUID's text from getrandbits(128).
fn make_uuid(rng: &mut PyRandom) -> String {
    let clear = !((0xc000u128 << 48) | (0xf000u128 << 64));
    let set = (0x8000u128 << 48) | (4u128 << 76);
    let bits = (rng.bits128() & clear) | set;
    // Python's str(uuid.UUID(int=bits)): 32 lowercase hex digits in groups 8-4-4-4-12,
    // written here digit by digit (format! twice per request was a tenth of a run).
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(36);
    for i in 0..32 {
        if matches!(i, 8 | 12 | 16 | 20) {
            out.push('-');
        }
        out.push(HEX[((bits >> (124 - 4 * i)) & 0xf) as usize] as char);
    }
    out
}

// -- service times (service.py) ------------------------------------------------------------

#[derive(Clone)]
enum Dist {
    LogNormal { median: f64, sigma: f64, min: i64 },
    Empirical(Vec<i64>),
}

impl Dist {
    fn draw(&self, rng: &mut PyRandom) -> i64 {
        match self {
            Dist::LogNormal { median, sigma, min } => {
                let value = if *sigma == 0.0 { *median } else { median * rng.gauss(0.0, *sigma).exp() };
                let value = value.round_ties_even() as i64;
                if value > *min { value } else { *min }
            }
            Dist::Empirical(values) => values[(rng.random() * values.len() as f64) as usize],
        }
    }
}

fn dist(spec: &Bound<'_, PyAny>) -> PyResult<Dist> {
    let kind: String = spec.get_item(0)?.extract()?;
    match kind.as_str() {
        "lognormal" => Ok(Dist::LogNormal {
            median: spec.get_item(1)?.extract()?,
            sigma: spec.get_item(2)?.extract()?,
            min: spec.get_item(3)?.extract()?,
        }),
        // The measured values as an array('q'): copied at once, not read as ~30 k ints
        // for each of a prediction's runs (native_model._dist makes it once per spec).
        "empirical" => Ok(Dist::Empirical(PyBuffer::<i64>::get(&spec.get_item(1)?)?.to_vec(spec.py())?)),
        _ => Err(PyValueError::new_err(format!("unknown distribution {kind:?}"))),
    }
}

struct Service {
    net: Dist,
    auth: Dist,
    put_call: Dist,
    reply: Dist,
    status_call: Dist,
    done_call: Dist,
    abort_call: Dist,
    plain_call: Dist,
    slow_pickup: Dist,
    proc_put_pre: Dist,
    proc_get_pre: Dist,
    proc_post: Dist,
    select: Dist,
    dpns_creat: Dist,
    dpns_statg: Dist,
    dpns_reply: Dist,
    transfer: Dist,
    get_transfer: Dist,
    think: Dist,
    retry: Dist,
}

// -- the model's objects (model.py) --------------------------------------------------------

const BASE: &str = "/dpm/cern.ch/home/dteam/perf";
const MAX_ATTEMPTS: u32 = 20;
const AUTH_FAILURES: usize = 2;
const PUT_FAIL_RC: [i64; 3] = [13, 28, 1015];
const GET_FAIL_RC: [i64; 2] = [2, 13];
const PROC_FAIL_RC: [i64; 2] = [28, 1015];
const EARLY_FAIL_RC: i64 = 22;
const DISKS: usize = 16;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Put,
    Get,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Put,
    Get,
    Status,
    Putdone,
    Relfiles,
    Abortreq,
    Ping,
    Getpools,
}

impl Kind {
    fn of(op: Op) -> Kind {
        if op == Op::Put { Kind::Put } else { Kind::Get }
    }
    fn name(self) -> &'static str {
        match self {
            Kind::Put => "put",
            Kind::Get => "get",
            Kind::Status => "status",
            Kind::Putdone => "putdone",
            Kind::Relfiles => "relfiles",
            Kind::Abortreq => "abortreq",
            Kind::Ping => "ping",
            Kind::Getpools => "getpools",
        }
    }
    fn plain(self) -> bool {
        matches!(self, Kind::Ping | Kind::Getpools)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    New,
    Queued,
    Active,
    Success,
    Failed,
    Aborted,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Abandon {
    No,
    AfterRequest,
    AfterReady,
}

struct Stream {
    client: usize,
    one_shot: bool,
    op: Op,
    abort: bool,
    abandon: Abandon,
    backoff: i64,
}

struct Conn {
    stream: usize,
    kind: Kind,
    req: Option<usize>,
    attempt: u32,
    accepted: Option<i64>,
}

/// A request and its RequestTruth (truth.py), fields as printed instants.
struct Req {
    token: String,
    op: Op,
    client: usize,
    paths: Vec<String>,
    state: State,
    accepted: Option<i64>,
    started: i64,
    put_ret: Option<i64>,
    first_run: Option<i64>,
    proc: Option<i64>,
    polls: i64,
    poll_ms: i64,
    first_success: Option<i64>,
    first_done_open: Option<i64>,
    done_open: Option<i64>,
    done_ret: Option<i64>,
    status: Option<&'static str>,
    ended: Option<i64>,
    last_line: i64,
    closed: bool,
    runs: Vec<usize>,
}

impl Req {
    fn line(&mut self, printed: i64) {
        if !self.closed && printed > self.last_line {
            self.last_line = printed;
        }
    }
    fn close(&mut self, status: &'static str, printed: i64) {
        if !self.closed {
            self.status = Some(status);
            self.ended = Some(printed);
            self.closed = true;
        }
    }
}

struct Run {
    request: usize,
    start: i64,
    end: Option<i64>,
    true_start: i64,
}

struct Call {
    dpns: bool,
    pid: i64,
    thread: i64,
    op: &'static str,
    client: usize, // an index into Model::hosts
    accepted: Option<i64>,
    started: i64,
    ended: Option<i64>,
    rc: Option<i64>,
    path: Option<String>,
    run: Option<usize>,
    true_start: i64,
}

#[derive(Clone, Copy)]
enum Reply {
    Request(i64, Option<usize>),
    Status(State),
    Rc,
}

/// A name-server call waiting or running: (op, path, the answer's event, its run).
struct Job {
    creat: bool,
    path: String,
    callback: Box<Event>,
    run: Option<usize>,
}

struct NsItem {
    tid: i64,
    job: Job,
    call: usize,
}

/// Every scheduled step: the Python model's (callback, args).
enum Event {
    Cycle { stream: usize, op: Option<Op> },
    Connect { conn: usize },
    OnReply { conn: usize, result: Reply },
    OnFail { conn: usize },
    Send { stream: usize, kind: Kind, req: Option<usize>, attempt: u32 },
    Authenticated { tid: i64, conn: usize },
    RequestReturns { tid: i64, conn: usize, req: usize, rc: i64 },
    Enqueue { tid: i64, conn: usize, req: usize },
    SyncGetFile { tid: i64, conn: usize, req: usize, i: usize },
    SyncGetSelected { tid: i64, conn: usize, req: usize, i: usize },
    StatusAnswer { tid: i64, conn: usize, opened: i64 },
    ClosingReturns { tid: i64, conn: usize, opened: i64 },
    PlainReturns { tid: i64, conn: usize, call: usize },
    SlowStart { tid: i64, req: usize },
    SlowFile { tid: i64, req: usize, i: usize, run_start: i64 },
    SlowAnswered { tid: i64, req: usize, i: usize, run_start: i64 },
    SlowSelected { tid: i64, req: usize, i: usize, run_start: i64 },
    SlowEnd { tid: i64, req: usize, run_start: i64 },
    // Boxed, as in NsFinish: every Event is as large as its largest variant, and the
    // scheduler's heap moves Events on each push and pop.
    NsCreated { dir: String, item: Box<NsItem> },
    NsFinish { tid: i64, item: Box<NsItem> },
    Arrive,
}

/// The scheduler's entry: the order (instant, sequence) and the slot of `Model::events`
/// its event waits in, as one number, so that the heap compares one u128 and moves 16
/// bytes on each step of a push or pop (the tuple's comparison and its 24 bytes were
/// most of the scheduler's cost): the instant with its sign bit flipped (it then orders as
/// an unsigned number), then the sequence, then the slot. The sequence is unique, so the
/// slot below it never decides an order.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Scheduled(u128);

impl Scheduled {
    fn new(when: i64, seq: u64, slot: u32) -> Scheduled {
        // Past 2^32 steps the sequence would spill into the instant: a run of ~10^8
        // requests, far beyond what a model run holds in memory; refused, not misordered.
        assert!(seq < 1 << 32, "more than 2^32 scheduled steps");
        let instant = u128::from((when as u64) ^ (1 << 63));
        Scheduled(instant << 64 | u128::from(seq) << 32 | u128::from(slot))
    }
    fn when(self) -> i64 {
        ((self.0 >> 64) as u64 ^ (1 << 63)) as i64
    }
    fn slot(self) -> u32 {
        self.0 as u32
    }
}

/// The event queue: pops the earliest (instant, sequence) first, as the Python model's
/// heap of (when, seq, ...) does. Many steps are scheduled at the current instant (a
/// delay of 0: the reply, the slow thread's pick-up, the disk selection); they wait in
/// `now`, a FIFO, not in the heap (its push and pop were a third of a run). The FIFO
/// holds one instant's entries in the order scheduled, so its front is its least
/// (instant, sequence); a pop takes the lesser of the two fronts, which keeps the heap's
/// order whatever the instants scheduled.
#[derive(Default)]
struct Scheduler {
    heap: BinaryHeap<Reverse<Scheduled>>,
    now: VecDeque<Scheduled>,
}

impl Scheduler {
    /// Schedule `item`; `now`: the model's clock.
    fn push(&mut self, item: Scheduled, now: i64) {
        let same_instant = self.now.back().map_or(item.when() == now, |last| last.when() == item.when());
        if same_instant {
            self.now.push_back(item);
        } else {
            self.heap.push(Reverse(item));
        }
    }

    /// Whether the heap's top comes before the FIFO's front (both there).
    fn heap_first(&self) -> bool {
        match (self.heap.peek(), self.now.front()) {
            (Some(Reverse(top)), Some(front)) => top < front,
            (top, _) => top.is_some(),
        }
    }

    fn peek_when(&self) -> Option<i64> {
        if self.heap_first() { self.heap.peek().map(|s| s.0.when()) } else { self.now.front().map(|s| s.when()) }
    }

    fn pop(&mut self) -> Option<Scheduled> {
        if self.heap_first() { self.heap.pop().map(|s| s.0) } else { self.now.pop_front() }
    }
}

struct Cfg {
    get_fraction: f64,
    abort_rate: f64,
    abandon_rate: f64,
    plain_rate: f64,
    auth_fail_rate: f64,
    put_fail_rate: f64,
    proc_fail_rate: f64,
    files: usize,
    backlog: usize,
    sync_get: bool,
    accept_lines: bool,
    pid: i64,
    dpns_pid: i64,
    poll_first_ms: i64,
    poll_factor: f64,
    poll_max_ms: i64,
    budget: Option<u64>,
    same_dir: bool,
    dirs: Option<i64>,
}

struct Model {
    cfg: Cfg,
    svc: Service,
    rng: PyRandom,
    now: i64,
    queue: Scheduler,
    events: Vec<Option<Event>>, // the scheduled events, by slot
    free_slots: Vec<u32>,
    seq: u64,
    hosts: Vec<String>, // the clients' hosts, then the head as the name server names it
    shorts: Vec<String>,
    head: usize,
    streams: Vec<Stream>,
    conns: Vec<Conn>,
    reqs: Vec<Req>,
    runs: Vec<Run>,
    calls: Vec<Call>,
    // the daemon
    free_fast: BinaryHeap<Reverse<i64>>,
    backlog: VecDeque<usize>,
    refused: u64,
    auth_failures: u64,
    // the slow threads
    free_slow: BinaryHeap<Reverse<i64>>,
    slow_queue: VecDeque<usize>,
    // the name server
    ns_free: BinaryHeap<Reverse<i64>>,
    ns_waiting: VecDeque<Job>,
    // Looked up by directory, never walked: the Fx hash (siphash was ~4 % of a run).
    ns_locks: FxMap<String, VecDeque<NsItem>>,
    ns_holds: FxMap<String, Dist>,
    max_lock_waiters: usize,
    // the namespace
    ns_seq: u64,
    weighted: Vec<String>,
    bag_counts: Option<Vec<usize>>,
    bag: Vec<usize>,
    written: Vec<String>,
    // the logs: lines counted, the latest instant printed
    dpm_lines: u64,
    dpns_lines: u64,
    max_printed: Option<i64>,
    started_cycles: u64,
    // open loop
    rate_lambda: Option<f64>,
}

impl Model {
    fn after(&mut self, delay: i64, event: Event) {
        self.at(self.now + delay, event);
    }

    fn at(&mut self, when: i64, event: Event) {
        let slot = match self.free_slots.pop() {
            Some(slot) => {
                self.events[slot as usize] = Some(event);
                slot
            }
            None => {
                self.events.push(Some(event));
                (self.events.len() - 1) as u32
            }
        };
        self.queue.push(Scheduled::new(when, self.seq, slot), self.now);
        self.seq += 1;
    }

    fn printed(&mut self) -> i64 {
        let now = self.now;
        if self.max_printed.is_none_or(|m| now > m) {
            self.max_printed = Some(now);
        }
        now
    }

    /// A DPM log line: counted, its instant printed.
    fn line(&mut self) -> i64 {
        self.dpm_lines += 1;
        self.printed()
    }

    fn req_line(&mut self, req: usize) -> i64 {
        let printed = self.line();
        self.reqs[req].line(printed);
        printed
    }

    fn ns_line(&mut self) -> i64 {
        self.dpns_lines += 1;
        self.printed()
    }

    fn run(&mut self, until: Option<i64>) {
        while let Some(when) = self.queue.peek_when() {
            if let Some(until) = until {
                if when > until {
                    self.now = until;
                    break;
                }
            }
            let item = self.queue.pop().unwrap();
            self.now = item.when();
            let event = self.events[item.slot() as usize].take().expect("a scheduled event");
            self.free_slots.push(item.slot());
            self.fire(event);
        }
    }

    fn fire(&mut self, event: Event) {
        match event {
            Event::Cycle { stream, op } => {
                self.cycle(stream, op);
            }
            Event::Connect { conn } => self.connect(conn),
            Event::OnReply { conn, result } => self.on_reply(conn, result),
            Event::OnFail { conn } => self.on_fail(conn),
            Event::Send { stream, kind, req, attempt } => self.send(stream, kind, req, attempt),
            Event::Authenticated { tid, conn } => self.authenticated(tid, conn),
            Event::RequestReturns { tid, conn, req, rc } => self.request_returns(tid, conn, req, rc),
            Event::Enqueue { tid, conn, req } => {
                self.submit(req);
                let d = self.svc.reply.draw(&mut self.rng);
                self.after(d, Event::RequestReturns { tid, conn, req, rc: 0 });
            }
            Event::SyncGetFile { tid, conn, req, i } => self.sync_get_file(tid, conn, req, i),
            Event::SyncGetSelected { tid, conn, req, i } => {
                self.rng.below(DISKS);
                self.req_line(req);
                self.sync_get_file(tid, conn, req, i + 1);
            }
            Event::StatusAnswer { tid, conn, opened } => self.status_answer(tid, conn, opened),
            Event::ClosingReturns { tid, conn, opened } => self.closing_returns(tid, conn, opened),
            Event::PlainReturns { tid, conn, call } => {
                let printed = self.line();
                self.calls[call].ended = Some(printed);
                self.calls[call].rc = Some(0);
                self.reply(tid, conn, Reply::Rc);
            }
            Event::SlowStart { tid, req } => self.slow_start(tid, req),
            Event::SlowFile { tid, req, i, run_start } => self.slow_file(tid, req, i, run_start),
            Event::SlowAnswered { tid, req, i, run_start } => {
                let d = self.svc.select.draw(&mut self.rng);
                self.after(d, Event::SlowSelected { tid, req, i, run_start });
            }
            Event::SlowSelected { tid, req, i, run_start } => {
                self.rng.below(DISKS);
                self.req_line(req);
                self.slow_file(tid, req, i + 1, run_start);
            }
            Event::SlowEnd { tid, req, run_start } => self.slow_end(tid, req, run_start),
            Event::NsCreated { dir, item } => {
                self.ns_line();
                self.ns_finish(item.tid, *item, Some(dir));
            }
            Event::NsFinish { tid, item } => self.ns_finish(tid, *item, None),
            Event::Arrive => {
                let client = self.rng.below(self.shorts.len());
                let stream = self.new_stream(client, true);
                if self.cycle(stream, None) {
                    self.schedule_arrival();
                }
            }
        }
    }

    // -- clients (clients.py) ----------------------------------------------------------

    fn new_stream(&mut self, client: usize, one_shot: bool) -> usize {
        self.streams.push(Stream {
            client,
            one_shot,
            op: Op::Put,
            abort: false,
            abandon: Abandon::No,
            backoff: self.cfg.poll_first_ms,
        });
        self.streams.len() - 1
    }

    fn schedule_arrival(&mut self) {
        let lambd = self.rate_lambda.unwrap();
        let gap = self.rng.expovariate(lambd).round_ties_even() as i64;
        self.after(gap, Event::Arrive);
    }

    fn cycle(&mut self, stream: usize, op: Option<Op>) -> bool {
        if let Some(budget) = self.cfg.budget {
            if self.started_cycles >= budget {
                return false;
            }
        }
        self.started_cycles += 1;
        let drawn = if self.rng.random() < self.cfg.get_fraction { Op::Get } else { Op::Put };
        let s_op = op.unwrap_or(drawn);
        let abort = self.rng.random() < self.cfg.abort_rate;
        let mut abandon = Abandon::No;
        if self.rng.random() < self.cfg.abandon_rate {
            abandon = if self.rng.below(2) == 0 { Abandon::AfterRequest } else { Abandon::AfterReady };
        }
        let s = &mut self.streams[stream];
        s.op = s_op;
        s.abort = abort;
        s.abandon = abandon;
        if self.rng.random() < self.cfg.plain_rate {
            let kind = if self.rng.below(2) == 0 { Kind::Ping } else { Kind::Getpools };
            self.send(stream, kind, None, 1);
        } else {
            self.send(stream, Kind::of(s_op), None, 1);
        }
        true
    }

    fn send(&mut self, stream: usize, kind: Kind, req: Option<usize>, attempt: u32) {
        let d = self.svc.net.draw(&mut self.rng);
        self.conns.push(Conn { stream, kind, req, attempt, accepted: None });
        let conn = self.conns.len() - 1;
        self.after(d, Event::Connect { conn });
    }

    fn later_send(&mut self, stream: usize, delay: i64, kind: Kind, req: Option<usize>) {
        self.after(delay, Event::Send { stream, kind, req, attempt: 1 });
    }

    fn next(&mut self, stream: usize) {
        if !self.streams[stream].one_shot {
            let d = self.svc.think.draw(&mut self.rng);
            self.after(d, Event::Cycle { stream, op: None });
        }
    }

    fn on_reply(&mut self, conn: usize, result: Reply) {
        let (kind, stream, creq) = (self.conns[conn].kind, self.conns[conn].stream, self.conns[conn].req);
        if kind.plain() {
            let op = self.streams[stream].op;
            self.send(stream, Kind::of(op), None, 1);
            return;
        }
        match kind {
            Kind::Put | Kind::Get => {
                let (rc, req) = match result {
                    Reply::Request(rc, req) => (rc, req),
                    _ => unreachable!("a put/get answers (rc, request)"),
                };
                if rc != 0 || self.streams[stream].abandon == Abandon::AfterRequest {
                    self.next(stream);
                    return;
                }
                let first = self.cfg.poll_first_ms;
                self.streams[stream].backoff = first;
                self.later_send(stream, first, Kind::Status, req);
            }
            Kind::Status => {
                let req = creq.unwrap();
                let state = match result {
                    Reply::Status(state) => state,
                    _ => unreachable!("a status call answers a state"),
                };
                match state {
                    State::Success => {
                        if self.streams[stream].abandon == Abandon::AfterReady {
                            self.next(stream);
                            return;
                        }
                        let put = self.reqs[req].op == Op::Put;
                        let closing = if put { Kind::Putdone } else { Kind::Relfiles };
                        let pause = if put {
                            self.svc.transfer.draw(&mut self.rng)
                        } else {
                            self.svc.get_transfer.draw(&mut self.rng)
                        };
                        self.later_send(stream, pause, closing, Some(req));
                    }
                    State::Queued | State::Active => {
                        if self.streams[stream].abort {
                            self.send(stream, Kind::Abortreq, Some(req), 1);
                        } else {
                            let s = &self.streams[stream];
                            let grown = (s.backoff as f64 * self.cfg.poll_factor).round_ties_even() as i64;
                            let backoff = grown.min(self.cfg.poll_max_ms);
                            self.streams[stream].backoff = backoff;
                            self.later_send(stream, backoff, Kind::Status, Some(req));
                        }
                    }
                    _ => self.next(stream),
                }
            }
            _ => self.next(stream),
        }
    }

    fn on_fail(&mut self, conn: usize) {
        let (kind, stream, req, attempt) = {
            let c = &self.conns[conn];
            (c.kind, c.stream, c.req, c.attempt)
        };
        if attempt >= MAX_ATTEMPTS {
            self.next(stream);
            return;
        }
        let delay = self.svc.retry.draw(&mut self.rng);
        if kind.plain() {
            let op = self.streams[stream].op;
            self.after(delay, Event::Send { stream, kind: Kind::of(op), req: None, attempt: 1 });
        } else {
            self.after(delay, Event::Send { stream, kind, req, attempt: attempt + 1 });
        }
    }

    // -- the daemon (daemon.py) --------------------------------------------------------

    fn connect(&mut self, conn: usize) {
        if let Some(Reverse(tid)) = self.free_fast.pop() {
            self.accept(tid, conn);
            return;
        }
        if self.backlog.len() < self.cfg.backlog {
            self.backlog.push_back(conn);
            return;
        }
        self.refused += 1;
        self.fail(conn);
    }

    fn accept(&mut self, tid: i64, conn: usize) {
        self.conns[conn].accepted = None;
        if self.cfg.accept_lines {
            let printed = self.line();
            self.conns[conn].accepted = Some(printed);
        }
        let d = self.svc.auth.draw(&mut self.rng);
        self.after(d, Event::Authenticated { tid, conn });
    }

    fn authenticated(&mut self, tid: i64, conn: usize) {
        if self.rng.random() < self.cfg.auth_fail_rate {
            self.rng.below(AUTH_FAILURES);
            self.line();
            self.auth_failures += 1;
            self.release(tid);
            self.fail(conn);
            return;
        }
        match self.conns[conn].kind {
            Kind::Put | Kind::Get => self.serve_request(tid, conn),
            Kind::Status => self.serve_status(tid, conn),
            Kind::Putdone | Kind::Relfiles | Kind::Abortreq => self.serve_closing(tid, conn),
            Kind::Ping | Kind::Getpools => self.serve_plain(tid, conn),
        }
    }

    fn release(&mut self, tid: i64) {
        self.free_fast.push(Reverse(tid));
        if !self.backlog.is_empty() {
            let Reverse(t) = self.free_fast.pop().unwrap();
            let c = self.backlog.pop_front().unwrap();
            self.accept(t, c);
        }
    }

    fn reply(&mut self, tid: i64, conn: usize, result: Reply) {
        self.release(tid);
        let d = self.svc.net.draw(&mut self.rng);
        self.after(d, Event::OnReply { conn, result });
    }

    fn fail(&mut self, conn: usize) {
        let d = self.svc.net.draw(&mut self.rng);
        self.after(d, Event::OnFail { conn });
    }

    fn new_call(&mut self, dpns: bool, tid: i64, op: &'static str, client: usize,
                accepted: Option<i64>, started: i64) -> usize {
        self.calls.push(Call {
            dpns,
            pid: if dpns { self.cfg.dpns_pid } else { self.cfg.pid },
            thread: tid,
            op,
            client,
            accepted,
            started,
            ended: None,
            rc: None,
            path: None,
            run: None,
            true_start: self.now,
        });
        self.calls.len() - 1
    }

    fn serve_request(&mut self, tid: i64, conn: usize) {
        let kind = self.conns[conn].kind;
        let op = if kind == Kind::Put { Op::Put } else { Op::Get };
        let client = self.streams[self.conns[conn].stream].client;
        let accepted = self.conns[conn].accepted;
        let opened = self.line();
        let fail = self.rng.random();
        if fail < self.cfg.put_fail_rate / 2.0 {
            let call = self.new_call(false, tid, kind.name(), client, accepted, opened);
            let printed = self.line();
            self.calls[call].ended = Some(printed);
            self.calls[call].rc = Some(EARLY_FAIL_RC);
            self.reply(tid, conn, Reply::Request(EARLY_FAIL_RC, None));
            return;
        }
        let n = self.cfg.files;
        let paths: Vec<String> = (0..n)
            .map(|_| if op == Op::Put { self.new_path(client) } else { self.existing_path() })
            .collect();
        let token = make_uuid(&mut self.rng);
        for _ in 0..n {
            // The files' guids: only the logs print them, and a model run writes none; their
            // draws are kept (the same random sequence as truth.py's), their text not made.
            self.rng.bits128();
        }
        self.reqs.push(Req {
            token,
            op,
            client,
            paths,
            state: State::New,
            accepted,
            started: opened,
            put_ret: None,
            first_run: None,
            proc: None,
            polls: 0,
            poll_ms: 0,
            first_success: None,
            first_done_open: None,
            done_open: None,
            done_ret: None,
            status: None,
            ended: None,
            last_line: opened,
            closed: false,
            runs: Vec::new(),
        });
        let req = self.reqs.len() - 1;
        for _ in 0..=n {
            self.req_line(req);
        }
        let delay = self.svc.put_call.draw(&mut self.rng);
        if fail < self.cfg.put_fail_rate {
            let rc = if op == Op::Put {
                PUT_FAIL_RC[self.rng.below(PUT_FAIL_RC.len())]
            } else {
                GET_FAIL_RC[self.rng.below(GET_FAIL_RC.len())]
            };
            self.after(delay, Event::RequestReturns { tid, conn, req, rc });
        } else if op == Op::Get && self.cfg.sync_get {
            self.after(delay, Event::SyncGetFile { tid, conn, req, i: 0 });
        } else {
            self.after(delay, Event::Enqueue { tid, conn, req });
        }
    }

    fn request_returns(&mut self, tid: i64, conn: usize, req: usize, rc: i64) {
        let printed = self.req_line(req);
        let r = &mut self.reqs[req];
        if !r.closed {
            r.put_ret = Some(printed);
            if rc != 0 {
                r.close("failed", printed);
            }
        }
        self.reply(tid, conn, Reply::Request(rc, Some(req)));
    }

    fn sync_get_file(&mut self, tid: i64, conn: usize, req: usize, i: usize) {
        if i == self.reqs[req].paths.len() {
            self.reqs[req].state = State::Success;
            let d = self.svc.reply.draw(&mut self.rng);
            self.after(d, Event::RequestReturns { tid, conn, req, rc: 0 });
            return;
        }
        let path = self.reqs[req].paths[i].clone();
        self.ns_call(false, path, Event::SyncGetSelected { tid, conn, req, i }, None);
    }

    fn serve_status(&mut self, tid: i64, conn: usize) {
        let req = self.conns[conn].req.unwrap();
        let opened = self.req_line(req);
        self.req_line(req);
        let d = self.svc.status_call.draw(&mut self.rng);
        self.after(d, Event::StatusAnswer { tid, conn, opened });
    }

    fn status_answer(&mut self, tid: i64, conn: usize, opened: i64) {
        let req = self.conns[conn].req.unwrap();
        let state = self.reqs[req].state;
        self.req_line(req);
        let printed = self.req_line(req);
        let r = &mut self.reqs[req];
        if !r.closed {
            r.polls += 1;
            r.poll_ms += (printed - opened).max(0);
            if state == State::Success && r.first_success.is_none() {
                r.first_success = Some(printed);
            } else if state == State::Failed {
                r.close("failed", printed);
            }
        }
        self.reply(tid, conn, Reply::Status(state));
    }

    fn serve_closing(&mut self, tid: i64, conn: usize) {
        let (req, kind) = (self.conns[conn].req.unwrap(), self.conns[conn].kind);
        let opened = self.req_line(req);
        self.req_line(req);
        if kind != Kind::Abortreq {
            for _ in 0..self.reqs[req].paths.len() {
                self.req_line(req);
            }
        }
        let r = &mut self.reqs[req];
        if kind == Kind::Putdone && !r.closed && r.first_done_open.is_none() {
            r.first_done_open = Some(opened);
        }
        let d = if kind == Kind::Abortreq {
            self.svc.abort_call.draw(&mut self.rng)
        } else {
            self.svc.done_call.draw(&mut self.rng)
        };
        self.after(d, Event::ClosingReturns { tid, conn, opened });
    }

    fn closing_returns(&mut self, tid: i64, conn: usize, opened: i64) {
        let (req, kind) = (self.conns[conn].req.unwrap(), self.conns[conn].kind);
        let abort = kind == Kind::Abortreq;
        if !abort {
            // done_fail_rate's draw: its rc 22 shows in the log only (no truth or client reads it)
            self.rng.random();
        }
        if abort {
            self.reqs[req].state = State::Aborted;
        }
        let printed = self.req_line(req);
        let r = &mut self.reqs[req];
        if !r.closed {
            r.done_open = Some(opened);
            r.done_ret = Some(printed);
            r.close(if abort { "aborted" } else { "success" }, printed);
        }
        self.reply(tid, conn, Reply::Rc);
    }

    fn serve_plain(&mut self, tid: i64, conn: usize) {
        let (kind, accepted) = (self.conns[conn].kind, self.conns[conn].accepted);
        let client = self.streams[self.conns[conn].stream].client;
        let opened = self.line();
        let call = self.new_call(false, tid, kind.name(), client, accepted, opened);
        let d = self.svc.plain_call.draw(&mut self.rng);
        self.after(d, Event::PlainReturns { tid, conn, call });
    }

    // -- the slow threads (slowpool.py) ------------------------------------------------

    fn submit(&mut self, req: usize) {
        self.reqs[req].state = State::Queued;
        self.slow_queue.push_back(req);
        self.dispatch();
    }

    fn dispatch(&mut self) {
        while !self.free_slow.is_empty() && !self.slow_queue.is_empty() {
            let req = self.slow_queue.pop_front().unwrap();
            if self.reqs[req].state != State::Queued {
                continue;
            }
            let Reverse(tid) = self.free_slow.pop().unwrap();
            self.reqs[req].state = State::Active;
            let d = self.svc.slow_pickup.draw(&mut self.rng);
            self.after(d, Event::SlowStart { tid, req });
        }
    }

    fn slow_release(&mut self, tid: i64) {
        self.free_slow.push(Reverse(tid));
        self.dispatch();
    }

    fn slow_start(&mut self, tid: i64, req: usize) {
        if self.reqs[req].state == State::Aborted {
            self.slow_release(tid);
            return;
        }
        let printed = self.req_line(req);
        let r = &mut self.reqs[req];
        if !r.closed && r.first_run.is_none() {
            r.first_run = Some(printed);
        }
        self.runs.push(Run { request: req, start: printed, end: None, true_start: self.now });
        let run = self.runs.len() - 1;
        self.reqs[req].runs.push(run);
        let d = if self.reqs[req].op == Op::Put {
            self.svc.proc_put_pre.draw(&mut self.rng)
        } else {
            self.svc.proc_get_pre.draw(&mut self.rng)
        };
        self.after(d, Event::SlowFile { tid, req, i: 0, run_start: printed });
    }

    fn slow_file(&mut self, tid: i64, req: usize, i: usize, run_start: i64) {
        if i == self.reqs[req].paths.len() {
            let d = self.svc.proc_post.draw(&mut self.rng);
            self.after(d, Event::SlowEnd { tid, req, run_start });
            return;
        }
        let creat = self.reqs[req].op == Op::Put;
        let path = self.reqs[req].paths[i].clone();
        let run = self.run_of(req, run_start);
        self.ns_call(creat, path, Event::SlowAnswered { tid, req, i, run_start }, Some(run));
    }

    fn run_of(&self, req: usize, run_start: i64) -> usize {
        *self.reqs[req].runs.iter().rev().find(|&&r| self.runs[r].start == run_start).unwrap()
    }

    fn slow_end(&mut self, tid: i64, req: usize, run_start: i64) {
        let rc = if self.rng.random() < self.cfg.proc_fail_rate {
            PROC_FAIL_RC[self.rng.below(PROC_FAIL_RC.len())]
        } else {
            0
        };
        let printed = self.req_line(req);
        if !self.reqs[req].closed {
            self.reqs[req].proc = Some((printed - run_start).max(0));
            let run = self.run_of(req, run_start);
            self.runs[run].end = Some(printed);
        }
        let r = &mut self.reqs[req];
        if r.state == State::Active {
            r.state = if rc == 0 { State::Success } else { State::Failed };
            if rc == 0 && r.op == Op::Put {
                let paths = r.paths.clone();
                self.written.extend(paths);
            }
        }
        self.slow_release(tid);
    }

    // -- the name server (dpns.py) -----------------------------------------------------

    fn ns_call(&mut self, creat: bool, path: String, callback: Event, run: Option<usize>) {
        let job = Job { creat, path, callback: Box::new(callback), run };
        if let Some(Reverse(tid)) = self.ns_free.pop() {
            self.ns_start(tid, job);
        } else {
            self.ns_waiting.push_back(job);
        }
    }

    fn ns_start(&mut self, tid: i64, job: Job) {
        let opened = self.ns_line();
        let op = if job.creat { "creat" } else { "statg" };
        let call = self.new_call(true, tid, op, self.head, None, opened);
        self.calls[call].path = Some(job.path.clone());
        self.calls[call].run = job.run;
        self.ns_line();
        if job.creat {
            let dir = directory(&job.path).to_string();
            self.ns_lock(dir, NsItem { tid, job, call });
        } else {
            let d = self.svc.dpns_statg.draw(&mut self.rng);
            self.after(d, Event::NsFinish { tid, item: Box::new(NsItem { tid, job, call }) });
        }
    }

    fn ns_lock(&mut self, dir: String, item: NsItem) {
        match self.ns_locks.get_mut(&dir) {
            None => {
                self.ns_locks.insert(dir.clone(), VecDeque::new());
                let d = self.ns_hold(&dir);
                self.after(d, Event::NsCreated { dir, item: Box::new(item) });
            }
            Some(waiters) => {
                waiters.push_back(item);
                self.max_lock_waiters = self.max_lock_waiters.max(waiters.len());
            }
        }
    }

    fn ns_hold(&mut self, dir: &str) -> i64 {
        match self.ns_holds.get(dir) {
            Some(dist) => dist.draw(&mut self.rng),
            None => self.svc.dpns_creat.draw(&mut self.rng),
        }
    }

    fn ns_finish(&mut self, tid: i64, item: NsItem, dir: Option<String>) {
        let printed = self.ns_line();
        self.calls[item.call].ended = Some(printed);
        self.calls[item.call].rc = Some(0);
        if let Some(dir) = dir {
            let next = self.ns_locks.get_mut(&dir).unwrap().pop_front();
            match next {
                Some(next) => {
                    let d = self.ns_hold(&dir);
                    self.after(d, Event::NsCreated { dir, item: Box::new(next) });
                }
                None => {
                    self.ns_locks.remove(&dir);
                }
            }
        }
        self.ns_free.push(Reverse(tid));
        if let Some(job) = self.ns_waiting.pop_front() {
            let Reverse(t) = self.ns_free.pop().unwrap();
            self.ns_start(t, job);
        }
        let d = self.svc.dpns_reply.draw(&mut self.rng);
        self.after(d, *item.job.callback);
    }

    // -- the namespace (identities.py) -------------------------------------------------

    fn new_path(&mut self, client: usize) -> String {
        self.ns_seq += 1;
        let seq = self.ns_seq;
        if let Some(counts) = &self.bag_counts {
            if self.bag.is_empty() {
                let mut bag: Vec<usize> =
                    counts.iter().enumerate().flat_map(|(k, &n)| std::iter::repeat_n(k, n)).collect();
                self.rng.shuffle(&mut bag);
                self.bag = bag;
            }
            let k = self.bag.pop().unwrap();
            return file_path(&[&self.weighted[k]], seq);
        }
        let dir = match self.cfg.dirs {
            Some(dirs) => format!("d{:05}", seq as i64 % dirs),
            None if self.cfg.same_dir => "shared".to_string(),
            None => self.shorts[client].clone(),
        };
        file_path(&[BASE, "/", &dir], seq)
    }

    fn existing_path(&mut self) -> String {
        if !self.written.is_empty() {
            let i = self.rng.below(self.written.len());
            return self.written[i].clone();
        }
        self.ns_seq += 1;
        format!("{BASE}/data/g{:07}", self.ns_seq)
    }
}

/// `parts` joined, then "/f" and `seq` in 7 digits or more: format!'s "{dir}/f{seq:07}",
/// written directly (format! was ~1,200 instructions a path, ~4 % of a model run).
fn file_path(parts: &[&str], seq: u64) -> String {
    let mut digits = [b'0'; 20];
    let (mut at, mut n) = (digits.len(), seq);
    while n > 0 || at > digits.len() - 7 {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
    }
    let mut out = String::with_capacity(parts.iter().map(|p| p.len()).sum::<usize>() + 2 + digits.len() - at);
    parts.iter().for_each(|p| out.push_str(p));
    out.push_str("/f");
    out.push_str(std::str::from_utf8(&digits[at..]).expect("ASCII digits"));
    out
}

fn directory(path: &str) -> &str {
    path.rsplit_once('/').map_or(path, |(dir, _)| dir)
}

// -- the binding ---------------------------------------------------------------------------

fn item<'py, T: FromPyObject<'py>>(spec: &Bound<'py, PyDict>, key: &str) -> PyResult<T> {
    spec.get_item(key)?
        .ok_or_else(|| PyValueError::new_err(format!("model spec without {key:?}")))?
        .extract()
}

fn service(spec: &Bound<'_, PyDict>) -> PyResult<Service> {
    let d = |name: &str| -> PyResult<Dist> {
        let value = spec.get_item(name)?.ok_or_else(|| PyValueError::new_err(format!("no service time {name:?}")))?;
        dist(&value)
    };
    Ok(Service {
        net: d("net")?,
        auth: d("auth")?,
        put_call: d("put_call")?,
        reply: d("reply")?,
        status_call: d("status_call")?,
        done_call: d("done_call")?,
        abort_call: d("abort_call")?,
        plain_call: d("plain_call")?,
        slow_pickup: d("slow_pickup")?,
        proc_put_pre: d("proc_put_pre")?,
        proc_get_pre: d("proc_get_pre")?,
        proc_post: d("proc_post")?,
        select: d("select")?,
        dpns_creat: d("dpns_creat")?,
        dpns_statg: d("dpns_statg")?,
        dpns_reply: d("dpns_reply")?,
        transfer: d("transfer")?,
        get_transfer: d("get_transfer")?,
        think: d("think")?,
        retry: d("retry")?,
    })
}

fn threads(from: i64, count: i64) -> BinaryHeap<Reverse<i64>> {
    (from..from + count).map(Reverse).collect()
}

/// Run the model that simulator/native_model.py `spec` describes (a dict of plain values);
/// returns (request records, call records, counts): its ground truth's records.
#[pyfunction]
pub fn run_model<'py>(py: Python<'py>, spec: &Bound<'py, PyDict>) -> PyResult<Bound<'py, PyTuple>> {
    let (m, reader_host) = run_spec(spec)?;
    output(py, &m, &reader_host)
}

/// Run the model as `run_model` does and return what predict.py keeps of the run
/// (model_summary.rs), not its records: (requests, phase table, growth, the summary of
/// each observation). `observations`: (kind, directory names) per observe.Observation,
/// by its `native` field.
#[pyfunction]
pub fn run_model_summary<'py>(py: Python<'py>, spec: &Bound<'py, PyDict>,
                              observations: Vec<(String, Vec<String>)>) -> PyResult<Bound<'py, PyTuple>> {
    let measures = observations.into_iter().map(|(kind, names)| {
        Measure::named(&kind, names).ok_or_else(|| PyValueError::new_err(format!("no compiled observation {kind:?}")))
    }).collect::<PyResult<Vec<Measure>>>()?;
    let (m, reader_host) = run_spec(spec)?;
    summary_output(py, &m, &reader_host, &measures)
}

/// The model of `spec`, run to its end, and the host its reader is told.
fn run_spec<'py>(spec: &Bound<'py, PyDict>) -> PyResult<(Model, String)> {
    let svc_spec: Bound<'py, PyDict> = item(spec, "service")?;
    let hosts: Vec<String> = item(spec, "hosts")?;
    let shorts: Vec<String> = item(spec, "shorts")?;
    let head_host: String = item(spec, "ns_head")?;
    let weighted: Vec<String> = item(spec, "weighted")?;
    let mut ns_holds = FxMap::default();
    let holds: Vec<Bound<'py, PyAny>> = item(spec, "holds")?;
    for (dir, hold) in weighted.iter().zip(holds.iter()) {
        ns_holds.insert(dir.clone(), dist(hold)?);
    }
    let start: i64 = item(spec, "start_ms")?;
    let fthreads: i64 = item(spec, "fthreads")?;
    let sthreads: i64 = item(spec, "sthreads")?;
    let mut all_hosts = hosts.clone();
    all_hosts.push(head_host);
    let cfg = Cfg {
        get_fraction: item(spec, "get_fraction")?,
        abort_rate: item(spec, "abort_rate")?,
        abandon_rate: item(spec, "abandon_rate")?,
        plain_rate: item(spec, "plain_rate")?,
        auth_fail_rate: item(spec, "auth_fail_rate")?,
        put_fail_rate: item(spec, "put_fail_rate")?,
        proc_fail_rate: item(spec, "proc_fail_rate")?,
        files: item(spec, "files")?,
        backlog: item(spec, "backlog")?,
        sync_get: item(spec, "sync_get")?,
        accept_lines: item(spec, "accept_lines")?,
        pid: item(spec, "pid")?,
        dpns_pid: item(spec, "dpns_pid")?,
        poll_first_ms: item(spec, "poll_first_ms")?,
        poll_factor: item(spec, "poll_factor")?,
        poll_max_ms: item(spec, "poll_max_ms")?,
        budget: item(spec, "budget")?,
        same_dir: item(spec, "same_dir")?,
        dirs: item(spec, "dirs")?,
    };
    let mut m = Model {
        svc: service(&svc_spec)?,
        rng: PyRandom::new(item(spec, "seed")?),
        now: start,
        queue: Scheduler::default(),
        events: Vec::new(),
        free_slots: Vec::new(),
        seq: 0,
        head: hosts.len(),
        hosts: all_hosts,
        shorts,
        streams: Vec::new(),
        conns: Vec::new(),
        reqs: Vec::new(),
        runs: Vec::new(),
        calls: Vec::new(),
        free_fast: threads(0, fthreads),
        backlog: VecDeque::new(),
        refused: 0,
        auth_failures: 0,
        free_slow: threads(fthreads, sthreads),
        slow_queue: VecDeque::new(),
        ns_free: threads(0, item(spec, "dpns_threads")?),
        ns_waiting: VecDeque::new(),
        ns_locks: FxMap::default(),
        ns_holds,
        max_lock_waiters: 0,
        ns_seq: 0,
        weighted,
        bag_counts: item(spec, "bag_counts")?,
        bag: Vec::new(),
        written: Vec::new(),
        dpm_lines: 0,
        dpns_lines: 0,
        max_printed: None,
        started_cycles: 0,
        rate_lambda: item(spec, "rate_lambda")?,
        cfg,
    };
    m.line(); // the daemon's `started`
    let arrivals: Option<Vec<(i64, String, usize)>> = item(spec, "arrivals")?;
    let concurrency: usize = item(spec, "concurrency")?;
    if let Some(arrivals) = arrivals {
        for (offset, op, client) in arrivals {
            let stream = m.new_stream(client % m.shorts.len(), true);
            let op = if op == "get" { Op::Get } else { Op::Put };
            m.at(start + offset, Event::Cycle { stream, op: Some(op) });
        }
    } else if m.rate_lambda.is_some() {
        m.schedule_arrival();
    } else {
        for client in 0..m.shorts.len() {
            for _ in 0..concurrency {
                let delay = m.rng.randint(0, 999);
                let stream = m.new_stream(client, false);
                m.after(delay, Event::Cycle { stream, op: None });
            }
        }
    }
    let until: Option<i64> = item(spec, "until")?;
    m.run(until);
    Ok((m, item(spec, "host")?))
}

/// A finished run's ground truth by model_truth.rs (truth.py's rules), in the records'
/// order: each request with its end, the linked name-server calls and ms, each call's
/// request, and the calls' order.
struct Truth {
    requests: Vec<(usize, RequestEnd)>,
    /// (ns_calls, ns_ms) per request, when the run logged DPNS lines.
    ns: Option<(Vec<i64>, Vec<i64>)>,
    token_of: Vec<Option<usize>>,
    calls: Vec<usize>,
}

fn truth(m: &Model, reader_host: &str) -> Truth {
    let dpns: Vec<usize> = (0..m.calls.len()).filter(|&c| m.calls[c].dpns).collect();
    let paths: Vec<&[String]> = m.reqs.iter().map(|r| r.paths.as_slice()).collect();
    let runs: Vec<RunSpan> = m.runs.iter().map(|r| RunSpan {
        request: r.request, start: r.start, end: r.end, true_start: r.true_start,
    }).collect();
    let ns_calls: Vec<NsCall> = dpns.iter().map(|&c| {
        let call = &m.calls[c];
        NsCall {
            started: call.started, ended: call.ended, path: call.path.as_deref().unwrap_or(""),
            client: &m.hosts[call.client], run: call.run, true_start: call.true_start,
        }
    }).collect();
    let links = link(m.reqs.len(), &paths, &runs, &ns_calls, reader_host);
    let mut token_of: Vec<Option<usize>> = vec![None; m.calls.len()];
    for (k, &c) in dpns.iter().enumerate() {
        token_of[c] = links.request_of[k];
    }
    let idle = idle_before(m.max_printed);
    // Sorted by (started, token), as truth.py's request_records.
    let mut order: Vec<usize> = (0..m.reqs.len()).collect();
    order.sort_by(|&a, &b| (m.reqs[a].started, &m.reqs[a].token).cmp(&(m.reqs[b].started, &m.reqs[b].token)));
    let requests = order.into_iter().map(|q| {
        let r = &m.reqs[q];
        (q, RequestSpan {
            is_get: r.op == Op::Get, accepted: r.accepted, started: r.started, put_ret: r.put_ret,
            first_run: r.first_run, first_success: r.first_success,
            first_done_open: r.first_done_open, done_open: r.done_open, done_ret: r.done_ret,
            status: r.status, ended: r.ended, last_line: r.last_line, closed: r.closed,
        }.end(idle))
    }).collect();
    // Sorted by (started, host, pid, thread): the host is the reader's for every call.
    let mut calls: Vec<usize> = (0..m.calls.len()).collect();
    calls.sort_by_key(|&c| (m.calls[c].started, m.calls[c].pid, m.calls[c].thread));
    let ns = (m.dpns_lines > 0).then_some((links.ns_calls, links.ns_ms));
    Truth { requests, ns, token_of, calls }
}

/// The counts of a run beside its records or its summary.
fn counts<'py>(py: Python<'py>, m: &Model) -> PyResult<Bound<'py, PyDict>> {
    let counts = PyDict::new(py);
    counts.set_item("dpm_lines", m.dpm_lines)?;
    counts.set_item("dpns_lines", m.dpns_lines)?;
    counts.set_item("max_printed", m.max_printed)?;
    counts.set_item("end_ms", m.now)?;
    counts.set_item("refused", m.refused)?;
    counts.set_item("auth_failures", m.auth_failures)?;
    counts.set_item("cycles", m.started_cycles)?;
    counts.set_item("max_lock_waiters", m.max_lock_waiters)?;
    Ok(counts)
}

/// What predict.py keeps of the run (model_summary.rs, the twin of its Python):
/// (requests, [((op, phase), sorted values)], {phase: (first, last)}, [summary], counts).
fn summary_output<'py>(py: Python<'py>, m: &Model, reader_host: &str, measures: &[Measure])
                       -> PyResult<Bound<'py, PyTuple>> {
    let t = truth(m, reader_host);
    let reqs: Vec<ReqView> = t.requests.iter().map(|(q, end)| {
        let r = &m.reqs[*q];
        ReqView {
            is_get: r.op == Op::Get,
            success: end.status == SUCCESS,
            started: r.started,
            phases: [end.auth_ms, end.request_ms, end.queue_ms, r.proc, Some(r.poll_ms),
                     end.ready_wait_ms, end.transfer_ms, end.done_ms, end.total_ms],
            polls: r.polls,
            ns_calls: t.ns.as_ref().map(|ns| ns.0[*q]),
            ns_ms: t.ns.as_ref().map(|ns| ns.1[*q]),
        }
    }).collect();
    let calls: Vec<CallView> = t.calls.iter().map(|&c| {
        let call = &m.calls[c];
        CallView { dpns: call.dpns, op: call.op, started: call.started, ended: call.ended,
                   path: call.path.as_deref() }
    }).collect();
    let runs = Summaries::new(&reqs, &calls);
    let table = PyList::empty(py);
    for (is_get, phase, values) in phase_table(&reqs) {
        let key = (if is_get { "get" } else { "put" }, PHASES[phase].1);
        table.append((key, values))?;
    }
    let growth = PyDict::new(py);
    for (phase, pair) in runs.growth() {
        growth.set_item(phase, pair)?;
    }
    let observed: Vec<Option<f64>> = measures.iter().map(|o| runs.summary(o)).collect();
    (reqs.len(), table, growth, observed, counts(py, m)?).into_pyobject(py)
}

/// The ground truth's records (model_truth.rs: truth.py's rules), as truth.py's
/// `request_records(latest)` and `call_records()` give them: the same dicts, the same order.
fn output<'py>(py: Python<'py>, m: &Model, reader_host: &str) -> PyResult<Bound<'py, PyTuple>> {
    let t = truth(m, reader_host);
    // The dicts as the engine's records are made (rec.rs): one writer of the records' keys.
    let names = RefCell::new(Names::new());
    let (host, put, get, dpm, dpns_daemon) = {
        let mut n = names.borrow_mut();
        (n.intern(reader_host), n.intern("put"), n.intern("get"), n.intern("dpm"), n.intern("dpns"))
    };
    let clients: Vec<Rc<str>> = m.hosts.iter().map(|h| Rc::from(h.as_str())).collect();
    let tokens: Vec<Rc<str>> = m.reqs.iter().map(|r| Rc::from(r.token.as_str())).collect();

    // A status and an end reason are one of a few words: each made a Python string once
    // per run, not interned again for every record (a lookup in the interned table each).
    let mut words: Vec<(&'static str, Py<PyString>)> = Vec::new();
    let mut word = |w: &'static str| -> Py<PyString> {
        match words.iter().find(|(k, _)| *k == w) {
            Some((_, s)) => s.clone_ref(py),
            None => {
                let s = PyString::intern(py, w).unbind();
                words.push((w, s.clone_ref(py)));
                s
            }
        }
    };
    let requests = PyList::empty(py);
    for (q, end) in t.requests {
        let r = &m.reqs[q];
        let rec = Rec::Request(Box::new(RequestRec {
            host,
            token: Some(tokens[q].clone()),
            op: Some(if r.op == Op::Put { put } else { get }),
            client: Some(clients[r.client].clone()),
            nfiles: Some(r.paths.len() as i64),
            status: word(end.status),
            accepted: r.accepted,
            started: Some(r.started),
            ended: Some(end.ended),
            auth_ms: end.auth_ms,
            request_ms: end.request_ms,
            queue_ms: end.queue_ms,
            proc_ms: r.proc,
            polls: r.polls,
            poll_ms: r.poll_ms,
            ready_wait_ms: end.ready_wait_ms,
            transfer_ms: end.transfer_ms,
            done_ms: end.done_ms,
            total_ms: end.total_ms,
            end_reason: word(end.end_reason),
            ns: Some(match &t.ns {
                Some((ns_calls, ns_ms)) => (Some(ns_calls[q]), Some(ns_ms[q])),
                None => (None, None),
            }),
        }));
        requests.append(rec.to_dict(py, &names)?)?;
    }

    let calls = PyList::empty(py);
    for c in t.calls {
        let call = &m.calls[c];
        let op = names.borrow_mut().intern(call.op);
        let rec = Rec::Call(Box::new(CallRec {
            host,
            daemon: if call.dpns { dpns_daemon } else { dpm },
            pid: call.pid,
            thread: Some(call.thread),
            op,
            client: Some(clients[call.client].clone()),
            started: call.started,
            ended: call.ended,
            duration_ms: span(call.ended, Some(call.started)),
            rc: call.rc,
            auth_ms: span(Some(call.started), call.accepted),
            session: None,
            token: t.token_of[c].map(|q| tokens[q].clone()),
            path: call.path.as_deref().map(Rc::from),
        }));
        calls.append(rec.to_dict(py, &names)?)?;
    }
    (requests, calls, counts(py, m)?).into_pyobject(py)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scheduler_entry_is_its_order_and_a_slot() {
        assert_eq!(std::mem::size_of::<Scheduled>(), 16);
        assert!(std::mem::size_of::<Event>() > 16);
        let entry = Scheduled::new(-5, 7, u32::MAX);
        assert_eq!((entry.when(), entry.slot()), (-5, u32::MAX));
        assert_eq!(Scheduled::new(i64::MAX, 0, 0).when(), i64::MAX);
    }

    #[test]
    fn a_file_path_is_what_format_writes_with_seven_digits_or_more() {
        for seq in [0, 7, 1_234_567, 12_345_678, u64::MAX] {
            assert_eq!(file_path(&[BASE, "/", "d00003"], seq), format!("{BASE}/d00003/f{seq:07}"));
            assert_eq!(file_path(&["/w"], seq), format!("/w/f{seq:07}"));
        }
    }

    #[test]
    fn the_scheduler_pops_by_instant_then_sequence() {
        // Instants before and after the clock, ties among them, steps at the clock's
        // instant (the FIFO) among steps in the heap: popped as (when, seq) sorted.
        let whens = [10, 3, 10, -4, 10, 3, 7, 10, i64::MIN, 10, 3, i64::MAX, 10];
        for clock in [10, 3, 0] {
            let mut queue = Scheduler::default();
            for (seq, &when) in whens.iter().enumerate() {
                queue.push(Scheduled::new(when, seq as u64, 100 + seq as u32), clock);
            }
            let mut order: Vec<(i64, u32)> = Vec::new();
            while let Some(when) = queue.peek_when() {
                let item = queue.pop().unwrap();
                assert_eq!(item.when(), when);
                order.push((when, item.slot()));
            }
            let mut expected: Vec<(i64, u32)> = whens.iter().enumerate().map(|(seq, &w)| (w, 100 + seq as u32)).collect();
            expected.sort();
            assert_eq!(order, expected, "clock at {clock}");
        }
    }

    #[test]
    fn the_scheduler_keeps_a_heaps_order_as_the_clock_moves() {
        // A run's pattern: each pop moves the clock and schedules 1-2 steps at delays of
        // -1 to 3 (0 often: into the FIFO; -1 in the past), checked against a sorted set.
        let mut rng = PyRandom::new(7);
        let mut queue = Scheduler::default();
        let mut reference = std::collections::BTreeSet::new();
        let (mut clock, mut seq, mut popped) = (0i64, 0u64, 0);
        let mut schedule = |queue: &mut Scheduler, reference: &mut std::collections::BTreeSet<(i64, u64)>,
                            when: i64, clock: i64| {
            queue.push(Scheduled::new(when, seq, seq as u32), clock);
            reference.insert((when, seq));
            seq += 1;
        };
        for _ in 0..20 {
            let when = rng.randint(0, 5);
            schedule(&mut queue, &mut reference, when, clock);
        }
        while let Some(when) = queue.peek_when() {
            let item = queue.pop().unwrap();
            let expected = reference.pop_first().unwrap();
            assert_eq!((item.when(), u64::from(item.slot())), expected);
            assert_eq!(when, expected.0);
            clock = when;
            popped += 1;
            if popped < 5_000 {
                for _ in 0..rng.randint(1, 2) {
                    let delay = [0, 0, 0, 1, 2, 3, -1][rng.below(7)];
                    schedule(&mut queue, &mut reference, clock + delay, clock);
                }
            }
        }
        assert!(reference.is_empty() && popped > 5_000, "{popped} popped");
    }

    #[test]
    fn random_matches_cpython_for_seed_1() {
        // random.Random(1).random(), then .getrandbits(128) & v4 as uuid text
        let mut rng = PyRandom::new(1);
        assert_eq!(rng.random(), 0.13436424411240122);
        assert_eq!(rng.random(), 0.8474337369372327);
    }
}
