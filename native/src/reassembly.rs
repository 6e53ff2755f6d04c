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
//!
//! The data it changes is in state.rs, the counters' indexes in counters.rs; py_engine.rs is
//! the Python class around it, state_codec.rs its state as Python dicts.

use std::cell::RefCell;
use std::collections::VecDeque;

use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};

use crate::busy_spans::BusySpans;
use crate::counters::*;
use crate::deliver::deliver;
use crate::event::{Ev, OwnedEv, Role};
use crate::hashed_text::{HashedText, Lookup, Probe};
use crate::hashing::{FxMap, FxSet};
use crate::linking::{Ctx, Linker, Meta};
use crate::lru::Lru;
use crate::names::{
    Names, Sym, ABORTREQ, ABORTTRANS, EMPTY, ENDSESS, ENDTRANS, GET, PUT, PUTDONE, RELFILES,
    STARTSESS, STARTTRANS, STATE_FAILED, STATE_SUCCESS, STATUS_GET, STATUS_PUT,
};
use crate::rec::{CallRec, Rec, RequestRec};
use crate::schema::{
    ABORTED, BY_EVICTION, BY_INPUT_END, BY_LINE, BY_TIMEOUT, END_REASONS, FAILED, INCOMPLETE,
    STATUSES, SUCCESS,
};
use crate::state::{Call, Clocks, HostClock, Kind, Process, Request, RKey, Session, State, TKey, Text, Thread};

const FINISHED_GROUP: usize = 1024;
/// The daemon name of the name-server profile (parsers/linking.py NS_DAEMON).
pub(crate) const NS_DAEMON: &str = "dpns";
/// The daemon name of the DPM profile, whose slow threads make the processing runs.
pub(crate) const DPM_DAEMON: &str = "dpm";
/// linking.py's MAX_LAG_MS: a log further behind than this has stopped, not lagging.
const MAX_LAG_MS: i64 = 60_000;
const MAX_HELD: usize = 8;
const VOTES_AGAINST: u32 = 2;
const RESTART_LOG: usize = 10_000;

pub(crate) struct Callbacks {
    pub(crate) emit: PyObject,
    pub(crate) runs: Option<PyObject>,
    pub(crate) on_span: Option<PyObject>,
}

/// The record values chosen at run time (status, end reason), made once; the keys are
/// pyo3 `intern!`s at their call sites.
pub(crate) struct Keys {
    pub(crate) k: FxMap<&'static str, Py<PyString>>,
}

impl Keys {
    pub(crate) fn new(py: Python<'_>) -> Self {
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

pub(crate) struct Cx<'a, 'py> {
    pub(crate) py: Python<'py>,
    pub(crate) clk: &'a RefCell<Clocks>,
    pub(crate) names: &'a RefCell<Names>,
    pub(crate) cb: &'a Callbacks,
    pub(crate) keys: &'a Keys,
    pub(crate) lk: &'a RefCell<Option<Linker>>,
    pub(crate) allowance_ms: i64,
    pub(crate) ns_daemon: Sym,
    pub(crate) dpm_daemon: Sym,
}

impl Cx<'_, '_> {
    /// The linker, if the engine has one, with what it reads of the engine.
    pub(crate) fn link<R>(&self, f: impl FnOnce(&mut Linker, &Ctx) -> PyResult<R>) -> Option<PyResult<R>> {
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
    pub(crate) fn next_seq(&mut self) -> u64 {
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

    fn is_finished(&self, host: Sym, token: &HashedText) -> bool {
        self.finished.get(&host).is_some_and(|m| m.contains_key(token))
    }

    fn request(&mut self, host: Sym, token: &HashedText) -> Option<&mut Request> {
        self.requests.get_mut(&host).and_then(|m| m.get_mut(token))
    }

    /// The key of a request a line changed, when changes are taken (made only then: the
    /// token's text is out of cache by the time most lines of its calls come).
    fn changed_request(&self, host: Sym, token: &HashedText) -> Option<RKey> {
        self.changed.as_ref().map(|_| (host, token.text().clone()))
    }

    // -- input -----------------------------------------------------------------------
    pub(crate) fn feed(&mut self, cx: &Cx, ev: &Ev) -> PyResult<()> {
        enum Next {
            Process,
            Held(bool, Option<Vec<OwnedEv>>),
            Wait,
        }
        let (ts, host) = (ev.ts, ev.host);
        let next = {
            let mut clk = cx.clk.borrow_mut();
            let clk = &mut *clk;
            // A line at or behind its host's clock moves no clock: processed at once
            // (accept_event's clock update would change nothing).
            let (next, raise) = match clk.hosts.get_mut(&host) {
                None => {
                    clk.insert(host, ts);
                    (Next::Process, Some(ts))
                }
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
                Some(_) => (Next::Process, None),
            };
            if let Some(ts) = raise {
                clk.raise_latest(ts);
            }
            next
        };
        match next {
            Next::Process => self.process(cx, ev),
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
        if !self.seen.insert(digest, (host, daemon), ts) {
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
        // The line's thread and its slot (None: the cap dropped the new thread itself,
        // which is then handled detached).
        let (slot, mut th) = match self.threads.id(&key) {
            Some(id) => {
                let th = self.threads.take(id).expect("a thread is out of its slot only while its line is handled");
                self.thread_order.get_mut(&host).unwrap().move_back(th.order);
                (Some(id), th)
            }
            None => match self.new_thread(cx, key, daemon, ts)? {
                Some(id) => (Some(id), self.threads.take(id).expect("the new thread is in its slot")),
                None => (None, Thread::detached(daemon, ts, self.processes[&(host, daemon)][&pid].clone())),
            },
        };
        th.moved_to(ts, digest);
        {
            let mut proc = th.process.borrow_mut();
            proc.lines += 1;
            if ts > proc.last {
                proc.last = ts;
            }
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
        if let Some(id) = slot {
            // No rule drops the thread of the line it handles (on_startup drops the others).
            self.threads.put(id, th);
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

    /// A new thread for `key`: its slot, None when the cap dropped it at once.
    fn new_thread(&mut self, cx: &Cx, key: TKey, daemon: Sym, ts: i64) -> PyResult<Option<u32>> {
        let (host, _, pid, tid) = key;
        if !self.processes.contains_key(&(host, daemon)) {
            self.processes.insert((host, daemon), FxMap::default());
            self.process_streams.push((host, daemon));
        }
        let seq = self.next_seq();
        let procs = self.processes.get_mut(&(host, daemon)).unwrap();
        let proc = procs.entry(pid).or_insert_with(|| Process::seen_at(ts, seq)).clone();
        proc.borrow_mut().tids.insert(tid);
        if !self.thread_order.contains_key(&host) {
            self.thread_order.insert(host, Lru::default());
            self.thread_order_hosts.push(host);
        }
        let order = self.thread_order.get_mut(&host).unwrap().push_back(key);
        self.threads.insert(key, Thread::new(daemon, ts, order, seq, proc));
        if self.threads.len() > self.set.max_threads {
            self.evict_thread(cx)?;
        }
        Ok(self.threads.id(&key))
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
        if let Some(proc) = self.processes.get(&(key.0, key.1)).and_then(|p| p.get(&key.2)) {
            proc.borrow_mut().tids.remove(&key.3);
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
        let lines = self.processes[&(host, daemon)][&pid].borrow().lines;
        if lines > 1 {
            let others: Vec<i64> = self.processes[&(host, daemon)][&pid].borrow().tids.iter().copied().filter(|&t| t != tid).collect();
            for other in others {
                self.drop_thread(cx, (host, daemon, pid, other))?;
            }
            self.stats[RESTARTS] += 1;
            self.log_restart(ev.ts, host, daemon);
            let mut proc = self.processes[&(host, daemon)][&pid].borrow_mut();
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
            client: ev.client.map(|c| self.clients.get(c)),
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
        let token = self.open_token(host, token);
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
                    self.admit(cx, host, token.clone(), Request { host, token: Some(token.text().clone()), ..Default::default() })?;
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
            let req = self.touch(host, &token, ev.ts).unwrap();
            if op == PUTDONE && req.putdone_first.is_none() {
                req.putdone_first = Some(started);
            }
            return Ok(self.changed_request(host, &token));
        }
        self.touch(host, &token, ev.ts);
        Ok(self.changed_request(host, &token))
    }

    fn on_slow_start(&mut self, cx: &Cx, ev: &Ev, th: &mut Thread, key: TKey) -> PyResult<Option<RKey>> {
        if th.call.is_some() {
            self.close_noreturn(cx, key, th)?;
        }
        let host = ev.host;
        let token: Option<HashedText> = ev.token.map(|t| self.open_token(host, t));
        let found = match &token {
            Some(t) => self.find(cx, host, t, ev.op)?,
            None => false,
        };
        let op = cx.names.borrow_mut().proc_op(ev.op);
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
        // Read where the request holds them: a copy was an allocation, and a count up and
        // down on each file's text, for the few microseconds of run_started.
        let files: &[Text] = req.files.as_deref().unwrap_or_default();
        let linked = cx.link(|lk, lcx| {
            lk.run_started(lcx, host, &token, ev.ts, files);
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
        Ok(self.changed_request(host, &token))
    }

    fn on_file(&mut self, ev: &Ev, th: &mut Thread) -> PyResult<Option<RKey>> {
        if let (Some(surl), Some(call)) = (ev.surl, th.call.as_ref()) {
            if call.kind == Kind::Step && is_request_op(call.op) {
                if let Some(token) = &call.token {
                    if let Some(req) = self.request(ev.host, token) {
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
        let token = call.token.as_ref()?;
        if call.kind == Kind::Late {
            self.stats[LATE_LINES] += 1;
            return None;
        }
        self.touch(ev.host, token, ev.ts)?;
        self.changed_request(ev.host, token)
    }

    fn on_returns(&mut self, cx: &Cx, ev: &Ev, th: &mut Thread, key: TKey) -> PyResult<Option<RKey>> {
        let Some(call) = th.call.take() else {
            self.stats[STRAY_RETURNS] += 1;
            return Ok(None);
        };
        let (ts, rc, host) = (ev.ts, ev.rc, ev.host);
        if let Some(on_span) = &cx.cb.on_span {
            let py = cx.py;
            // The report's BusySpans takes the span here, with no call into Python.
            if let Ok(spans) = on_span.downcast_bound::<BusySpans>(py) {
                let names = cx.names.borrow();
                let is_proc = names.text(call.op).starts_with("proc_");
                spans.borrow_mut().add(names.text(key.1), is_proc, key.3, call.started, ts);
            } else {
                let (h, d, is_proc) = {
                    let mut names = cx.names.borrow_mut();
                    let is_proc = names.text(call.op).starts_with("proc_");
                    (names.py(py, key.0), names.py(py, key.1), is_proc)
                };
                let kind = if is_proc { "proc" } else { "call" };
                on_span.call1(py, (h, d, key.2, key.3, kind, call.started, ts))?;
            }
        }
        if call.kind == Kind::Plain || (call.kind == Kind::Step && call.token.is_none()) {
            self.emit_call(cx, key, th, &call, Some(ts), rc)?;
            return Ok(None);
        }
        if call.kind == Kind::Late {
            self.stats[LATE_LINES] += 1;
            return Ok(None);
        }
        let token = call.token.unwrap();
        let Some(req) = self.touch(host, &token, ts) else {
            self.stats[LATE_LINES] += 1;
            if call.kind == Kind::Proc {
                self.run_ended(cx, host, &token, call.started, None)?;
            }
            return Ok(None);
        };
        let op = call.op;
        if call.kind == Kind::Proc {
            req.proc_ms = diff(Some(ts), Some(call.started));
            self.run_ended(cx, host, &token, call.started, Some(ts))?;
        } else if is_request_op(op) {
            req.request_ret = Some(ts);
            if rc != Some(0) {
                self.finish_request(cx, host, &token, FAILED, ts)?;
            }
        } else if status_op(op).is_some() {
            req.polls += 1;
            req.poll_ms += diff(Some(ts), Some(call.started)).unwrap_or(0);
            if call.state == Some(STATE_SUCCESS) {
                if req.success_end.is_none() {
                    req.success_end = Some(ts);
                }
                if req.queued {
                    req.queued = false;
                    self.slow_queue_depth -= 1;
                }
            } else if call.state == Some(STATE_FAILED) {
                self.finish_request(cx, host, &token, FAILED, ts)?;
            }
        } else {
            req.done_start = Some(call.started);
            req.done_ms = diff(Some(ts), Some(call.started));
            req.closing = Some(op);
            let status = if op == ABORTREQ { ABORTED } else { SUCCESS };
            self.finish_request(cx, host, &token, status, ts)?;
        }
        Ok(self.changed_request(host, &token))
    }

    fn run_ended(&self, cx: &Cx, host: Sym, token: &HashedText, started: i64, ended: Option<i64>) -> PyResult<()> {
        if let Some(result) = cx.link(|lk, ctx| lk.run_ended(ctx, host, token, started, ended)) {
            return result;
        }
        if let Some(runs) = &cx.cb.runs {
            let host_py = cx.names.borrow_mut().py(cx.py, host);
            runs.call_method1(cx.py, "run_ended", (host_py, &**token, started, ended))?;
        }
        Ok(())
    }

    // -- requests --------------------------------------------------------------------
    /// A new open request; the cap then emits the least recently active (Python: _admit).
    fn admit(&mut self, cx: &Cx, host: Sym, token: HashedText, req: Request) -> PyResult<()> {
        self.admit_uncapped(host, token, req);
        while self.n_requests > self.set.max_in_flight {
            let Some((host, token)) = self.least_recent_request() else { break };
            let req = self.forget(host, &token).unwrap();
            self.stats[EVICTIONS] += 1;
            self.expire(cx, host, token, req, BY_EVICTION)?;
        }
        Ok(())
    }

    pub(crate) fn admit_uncapped(&mut self, host: Sym, token: HashedText, mut req: Request) {
        if !self.request_order.contains_key(&host) {
            self.request_order.insert(host, Lru::default());
            self.request_order_hosts.push(host);
        }
        req.order = self.request_order.get_mut(&host).unwrap().push_back(token.clone());
        self.requests.entry(host).or_default().insert(token, req);
        self.n_requests += 1;
    }

    fn least_recent_request(&self) -> Option<(Sym, HashedText)> {
        let mut oldest: Option<((Sym, HashedText), i64)> = None;
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

    fn forget(&mut self, host: Sym, token: &HashedText) -> Option<Request> {
        let req = self.requests.get_mut(&host)?.remove(token)?;
        self.n_requests -= 1;
        if let Some(order) = self.request_order.get_mut(&host) {
            order.remove(req.order);
        }
        Some(req)
    }

    /// The open request of a token (true), an orphan admitted if never seen (true), or
    /// false when it has ended.
    fn find(&mut self, cx: &Cx, host: Sym, token: &HashedText, op: Option<Sym>) -> PyResult<bool> {
        if self.request(host, token).is_some() {
            return Ok(true);
        }
        if self.is_finished(host, token) {
            self.stats[LATE_LINES] += 1;
            return Ok(false);
        }
        self.stats[ORPHANS] += 1;
        self.admit(cx, host, token.clone(), Request { host, token: Some(token.text().clone()), op, ..Default::default() })?;
        Ok(self.request(host, token).is_some())
    }

    /// The open request of a token, made the most recently active at `ts`; None when
    /// it has none (then nothing changes). One lookup for what the rules ask most.
    fn touch(&mut self, host: Sym, token: &HashedText, ts: i64) -> Option<&mut Request> {
        let req = self.requests.get_mut(&host)?.get_mut(token)?;
        if ts > req.latest {
            req.latest = ts;
        }
        self.request_order.get_mut(&host).unwrap().move_back(req.order);
        Some(req)
    }

    /// A line's token: an open request's key, shared (a line naming it then allocates
    /// none, and the request's later lines find it by the Rc), else a new text, hashed
    /// once either way.
    fn open_token(&self, host: Sym, token: &str) -> HashedText {
        let probe = Probe::new(token);
        match self.requests.get(&host).and_then(|m| m.get_key_value(&probe as &dyn Lookup)) {
            Some((t, _)) => t.clone(),
            None => HashedText::with_hash(token.into(), probe.hash),
        }
    }

    fn finish_request(&mut self, cx: &Cx, host: Sym, token: &HashedText, status: &str, ended: i64) -> PyResult<()> {
        let mut req = self.forget(host, token).unwrap();
        if req.queued {
            req.queued = false;
            self.slow_queue_depth -= 1;
        }
        self.remember_finished(host, token);
        let record = self.request_record(cx, &req, status, Some(ended), BY_LINE);
        let rkey = (host, token.text().clone());
        self.mark_request(&rkey);
        self.emit(cx, record, Meta::Request { host, token: rkey.1, ended: Some(ended) })
    }

    fn remember_finished(&mut self, host: Sym, token: &HashedText) {
        let rkey: RKey = (host, token.text().clone());
        let group = self.group;
        let members = self.finished_groups.entry(group).or_default();
        members.push(rkey.clone());
        let full = members.len() >= FINISHED_GROUP;
        let known = self.finished.entry(host).or_default().insert(token.clone(), group).is_some();
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
            let old_group = self.finished.get_mut(&host).unwrap().remove(&HashedText::new(token.clone())).unwrap();
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

    fn expire(&mut self, cx: &Cx, host: Sym, token: HashedText, mut req: Request, reason: &str) -> PyResult<()> {
        if req.queued {
            req.queued = false;
            self.slow_queue_depth -= 1;
        }
        self.remember_finished(host, &token);
        let rkey = (host, token.text().clone());
        let ended = if req.op == Some(GET) && req.success_end.is_some() { req.success_end } else { Some(req.latest) };
        let status = if req.op == Some(GET) && req.success_end.is_some() { SUCCESS } else { INCOMPLETE };
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
            let mut by_first: Vec<(i64, i64, i64, u64)> = procs.iter().map(|(&pid, p)| {
                let p = p.borrow();
                (pid, p.first, p.last, p.born)
            }).collect();
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
                let newest_proc = self.processes[&stream][&newest].clone();
                let newest_succeeded = newest_proc.borrow().succeeded;
                if alive.front() == Some(&pid) && !newest_succeeded {
                    let mut newest_proc = newest_proc.borrow_mut();
                    newest_proc.succeeded = true;
                    let first = newest_proc.first;
                    self.stats[RESTARTS] += 1;
                    self.log_restart(first, host, daemon);
                } else {
                    self.stats[STRAY_PROCESSES] += 1;
                }
                let tids: Vec<i64> = self.processes[&stream][&pid].borrow().tids.iter().copied().collect();
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
            procs.retain(|_, p| {
                let p = p.borrow();
                !(p.last < horizon && p.tids.is_empty())
            });
        }
    }

    // -- event time ------------------------------------------------------------------
    pub(crate) fn advance(&mut self, cx: &Cx) -> PyResult<()> {
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
                self.expire(cx, host, token, req, BY_TIMEOUT)?;
            }
            loop {
                let Some((_, key)) = self.thread_order.get(&host).and_then(|o| o.first_key_value()) else { break };
                let key = *key;
                if self.threads.get(&key).expect("a thread in its host's order is in the table").latest >= horizon {
                    break;
                }
                self.stats[EXPIRED_THREADS] += 1;
                self.drop_thread(cx, key)?;
            }
        }
        self.expire_processes(&horizons);
        self.retire_processes(cx, self.set.grace_ms, false)
    }

    pub(crate) fn finish(&mut self, cx: &Cx) -> PyResult<()> {
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
                self.expire(cx, host, token, req, BY_INPUT_END)?;
            }
        }
        Ok(())
    }
}
