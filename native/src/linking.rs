//! The compiled twin of `parsers/linking.py` (its rules and comments are there): the
//! engine hands it records and processing runs directly, with no Python in between.
//!
//! Held records are the engine's own (rec.rs): `state()` gives their dicts, exactly what
//! the Python linker gives, and either restores the other's (restored ones stay dicts).
//! What the rules read of a record (host, token, times, path, client) is kept beside it.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use std::hash::{Hash, Hasher};

use crate::byte_runs;
use crate::deliver::deliver;
use crate::few::Few;
use crate::hashed_text::HashedText;
use crate::hashing::{FxMap, FxSet};
use crate::names::{Names, Sym};
use crate::rec::Rec;

use crate::text_cache::Text;

/// A key of the linker's maps by text (a token or a path of a host): its text carries its
/// hash (hashed_text.rs), as a held item is looked up again only seconds later, when its
/// text is out of cache.
#[derive(Clone)]
struct Key {
    host: Sym,
    text: HashedText,
}

impl Key {
    fn new(host: Sym, text: Text) -> Self {
        Key { host, text: HashedText::new(text) }
    }

    /// The key of a text the engine has hashed already (a request's token).
    fn hashed(host: Sym, text: &HashedText) -> Self {
        Key { host, text: text.clone() }
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        self.host == other.host && self.text == other.text
    }
}

impl Eq for Key {}

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u32(self.host);
        state.write_u64(self.text.hash());
    }
}

/// What is held of a host's path: the runs that name it and the calls on it, in the order
/// they came. One table for both: a call and the run it links to share the path, so they
/// share the entry, one cold line where two tables had two, and one lookup a run or call.
#[derive(Default)]
struct OnPath {
    runs: Few<RunRef>,
    calls: Few<CallRef>,
}

/// A token's runs, and when its first was listed: state() lists them in Python's dict order.
struct TokenRuns {
    seq: u64,
    runs: Few<RunRef>,
}

pub struct Run {
    host: Sym,
    token: Text,
    start: i64,
    end: Option<i64>,
    cut: bool,
    paths: Few<Key>, // distinct
    pending: i64,
    calls: i64,
    ms: i64,
    epoch: i64,             // the steps back its DPM log had taken at its first line ...
    end_epoch: Option<i64>, // ... and at its `returns`
}

impl Run {
    fn open(&self) -> bool {
        self.end.is_none() && !self.cut
    }
}

type RunRef = Rc<RefCell<Run>>;

struct HeldCall {
    record: Rec,
    client: Text, // lower case
    path: Key,    // and its host
    started: i64,
    ended: i64,
    cands: Few<RunRef>,
    epoch: i64, // the steps back its name-server log had taken at its `returns`
}

type CallRef = Rc<RefCell<HeldCall>>;

/// A host's held name-server calls in the order they were held, and how many at the front
/// were found waiting (due, but inside a run still open), with the latest end among them.
/// A call waits until a run of its host ends (its candidates only grow), so release()
/// goes on after those instead of looking at each again on every line; a run's end
/// (run_ended) has them looked at again.
#[derive(Default)]
struct HeldCalls {
    queue: VecDeque<CallRef>,
    waiting: usize,
    waiting_ended: i64,
}

struct HeldRequest {
    record: Rec,
    token: Key,
    ended: Option<i64>,
}

/// What the linker reads of a record the engine made.
pub enum Meta {
    Request { host: Sym, token: Text, ended: Option<i64> },
    Call { host: Sym, daemon: Sym, path: Option<Text>, client: Option<Text>, started: i64, ended: Option<i64> },
}

/// How many distinct name-server clients a linker remembers (linking.py's MAX_CLIENTS_SEEN).
const MAX_CLIENTS_SEEN: usize = 16;

pub struct Linker {
    pub emit: PyObject,
    pub expect_ns: bool,
    pub detecting: Option<PyObject>,
    aliases: FxSet<String>,
    learn_head: bool,
    heads: FxMap<Sym, String>, // host -> its learned head client (lower case)
    host_names: FxMap<Sym, String>, // host -> its name in lower case, made once (take())
    clients: Vec<String>,      // name-server clients seen, the first few
    ran: bool,                 // whether a processing run was heard of
    delay_ms: i64,
    slack_ms: i64,
    ns_hosts: FxSet<Sym>,
    pub linked: i64,
    pub ambiguous: i64,
    by_path: FxMap<Key, OnPath>,
    runs_by_token: FxMap<Key, TokenRuns>,
    // How many tokens' runs were listed, and the hosts in the order they were first held:
    // state() lists them in Python's dict order.
    seq: u64,
    call_hosts: Vec<Sym>,
    request_hosts: Vec<Sym>,
    calls: FxMap<Sym, HeldCalls>,
    requests: FxMap<Sym, VecDeque<HeldRequest>>,
    // (host, daemon) -> (steps back its log has taken, its latest stamp since the last)
    epochs: FxMap<(Sym, Sym), (i64, i64)>,
}

/// What the linker needs of the engine around it.
pub struct Ctx<'a, 'py> {
    pub py: Python<'py>,
    pub names: &'a RefCell<Names>,
    /// host -> its watermark (latest less the allowance), None before its first line
    pub watermark: &'a dyn Fn(Sym) -> Option<i64>,
    /// whether a line of (host, daemon) was ever read
    pub seen: &'a dyn Fn(Sym, Sym) -> bool,
    /// the current stamp of (host, daemon), None before its first line
    pub stream_time: &'a dyn Fn(Sym, Sym) -> Option<i64>,
    pub allowance_ms: i64,
    pub ns_daemon: Sym,
    pub dpm_daemon: Sym,
}

/// A held record as state() hands it out: never the live dict of a restored record, which
/// gets its links filled in later, while the caller stores what it was given as it is.
fn snapshot<'py>(py: Python<'py>, record: &Rec, names: &RefCell<Names>) -> PyResult<Bound<'py, PyDict>> {
    let dict = record.to_dict(py, names)?;
    match record {
        Rec::Dict(_) => dict.copy(),
        _ => Ok(dict), // built afresh from the engine's own record
    }
}

pub fn surl_path(surl: &str) -> &str {
    // The literals' places in bytes: ASCII, so each is a char boundary of `surl`.
    if let Some(i) = byte_runs::find(surl.as_bytes(), b"?SFN=") {
        return &surl[i + 5..];
    }
    let Some(i) = byte_runs::find(surl.as_bytes(), b"://") else { return surl };
    let rest = &surl[i + 3..];
    match byte_runs::find(rest.as_bytes(), b"/") {
        Some(slash) => &rest[slash..],
        None => "/",
    }
}

/// A name-server call's client in lower case (linking.py's `.lower()`): the text itself,
/// shared, where lowering leaves it as it is (a host name as the name server logs it),
/// rather than a new String per call (an allocation, a copy and a free).
fn lower_case(client: &Text) -> Text {
    if client.bytes().all(|c| c.is_ascii() && !c.is_ascii_uppercase()) {
        client.clone()
    } else {
        client.to_lowercase().into()
    }
}

impl Linker {
    pub fn new(emit: PyObject, aliases: Vec<String>, delay_ms: i64, slack_ms: i64, learn_head: bool) -> Self {
        Linker {
            emit,
            expect_ns: false,
            detecting: None,
            learn_head: learn_head && aliases.is_empty(),
            heads: FxMap::default(),
            host_names: FxMap::default(),
            clients: Vec::new(),
            ran: false,
            aliases: aliases.into_iter().map(|a| a.to_lowercase()).collect(),
            delay_ms,
            slack_ms,
            ns_hosts: FxSet::default(),
            linked: 0,
            ambiguous: 0,
            by_path: FxMap::default(),
            runs_by_token: FxMap::default(),
            seq: 0,
            call_hosts: Vec::new(),
            request_hosts: Vec::new(),
            calls: FxMap::default(),
            requests: FxMap::default(),
            epochs: FxMap::default(),
        }
    }

    /// linking.py's Linker._observe: the steps back the host's (DPM, name-server) logs
    /// have taken.
    fn observe(&mut self, cx: &Ctx, host: Sym) -> (i64, i64) {
        let mut out = [None, None];
        for (i, daemon) in [cx.dpm_daemon, cx.ns_daemon].into_iter().enumerate() {
            let now = (cx.stream_time)(host, daemon);
            let epoch = match (self.epochs.get(&(host, daemon)).copied(), now) {
                (None, None) => None,
                (None, Some(now)) => {
                    let most = self.epochs.iter().filter(|((h, _), _)| *h == host).map(|(_, e)| e.0).max().unwrap_or(0);
                    self.epochs.insert((host, daemon), (most, now));
                    Some(most)
                }
                (Some((epoch, latest)), Some(now)) => {
                    if now < latest - cx.allowance_ms {
                        self.epochs.insert((host, daemon), (epoch + 1, now));
                        Some(epoch + 1)
                    } else {
                        if now > latest {
                            self.epochs.insert((host, daemon), (epoch, now));
                        }
                        Some(epoch)
                    }
                }
                (Some((epoch, _)), None) => Some(epoch),
            };
            out[i] = epoch;
        }
        let [dpm, ns] = out;
        (dpm.or(ns).unwrap_or(0), ns.or(dpm).unwrap_or(0))
    }

    fn list_run(&mut self, token: Key, run: RunRef) {
        let seq = &mut self.seq;
        self.runs_by_token
            .entry(token)
            .or_insert_with(|| {
                *seq += 1;
                TokenRuns { seq: *seq, runs: Few::Empty }
            })
            .runs
            .push(run);
    }

    fn calls_of(&mut self, host: Sym) -> &mut VecDeque<CallRef> {
        if !self.calls.contains_key(&host) {
            self.call_hosts.push(host);
        }
        &mut self.calls.entry(host).or_default().queue
    }

    fn requests_of(&mut self, host: Sym) -> &mut VecDeque<HeldRequest> {
        if !self.requests.contains_key(&host) {
            self.request_hosts.push(host);
        }
        self.requests.entry(host).or_default()
    }

    fn ns_read(&mut self, cx: &Ctx, host: Sym) -> bool {
        if self.ns_hosts.contains(&host) {
            return true;
        }
        if (cx.seen)(host, cx.ns_daemon) {
            self.ns_hosts.insert(host);
            return true;
        }
        false
    }

    fn detecting(&self, cx: &Ctx, host: Sym) -> PyResult<bool> {
        match &self.detecting {
            None => Ok(false),
            Some(f) => {
                let name = cx.names.borrow_mut().py(cx.py, host);
                f.call1(cx.py, (name,))?.extract(cx.py)
            }
        }
    }

    /// Whether `client` (lower case) is the head node `host` as the name server sees it;
    /// with `learning`, also any client while the host's head client is to be learned.
    fn head_client(&self, cx: &Ctx, host: Sym, client: &str, learning: bool) -> bool {
        let is_host = match self.host_names.get(&host) {
            Some(name) => client == name,
            None => client == cx.names.borrow().text(host).to_lowercase(),
        };
        if is_host || self.aliases.contains(client) {
            return true;
        }
        match self.heads.get(&host) {
            Some(head) => client == head,
            // Learning holds calls only where runs may come: the host's DPM log is read.
            None => learning && self.learn_head && (cx.seen)(host, cx.dpm_daemon),
        }
    }

    pub fn unlinked_clients(&self) -> Vec<String> {
        if self.linked != 0 || !self.ran {
            return Vec::new();
        }
        let mut out = self.clients.clone();
        out.sort();
        out
    }

    fn emit(&self, cx: &Ctx, record: &Rec) -> PyResult<()> {
        deliver(cx.py, &self.emit, record, cx.names)
    }

    // -- from the reassembler --------------------------------------------------------
    pub fn take(&mut self, cx: &Ctx, record: Rec, meta: Meta) -> PyResult<()> {
        let host = match &meta {
            Meta::Request { host, .. } | Meta::Call { host, .. } => *host,
        };
        let ns_epoch = self.observe(cx, host).1;
        let host = match meta {
            Meta::Request { host, token, ended } => {
                let queued = self.requests.get(&host).is_some_and(|q| !q.is_empty());
                let token = Key::new(host, token);
                if !(self.expect_ns || self.ns_read(cx, host) || self.detecting(cx, host)? || queued) {
                    return self.complete(cx, record, &token);
                }
                self.requests_of(host).push_back(HeldRequest { record, token, ended });
                host
            }
            Meta::Call { host, daemon, path, client, started, ended } => {
                let linkable = match (&path, ended) {
                    (Some(p), Some(ended)) if daemon == cx.ns_daemon && !p.is_empty() => {
                        let client = client.as_ref().map_or_else(|| Text::from(""), lower_case);
                        if self.clients.len() < MAX_CLIENTS_SEEN && !self.clients.iter().any(|c| **c == *client) {
                            self.clients.push(client.to_string());
                        }
                        if !self.host_names.contains_key(&host) {
                            self.host_names.insert(host, cx.names.borrow().text(host).to_lowercase());
                        }
                        self.head_client(cx, host, &client, true).then_some((ended, client))
                    }
                    _ => None,
                };
                match linkable {
                    Some((ended, client)) => self.hold_call(record, client, Key::new(host, path.unwrap()), started, ended, ns_epoch),
                    None => self.emit(cx, &record)?,
                }
                host
            }
        };
        self.release(cx, host, false)
    }

    pub fn run_started(&mut self, cx: &Ctx, host: Sym, token: &HashedText, start: i64, surls: &[Text]) {
        let epoch = self.observe(cx, host).0;
        let mut paths: Few<Key> = Few::Empty;
        for s in surls {
            let p = surl_path(s);
            if !paths.iter().any(|q| &*q.text == p) {
                paths.push(Key::new(host, p.into()));
            }
        }
        let run = Rc::new(RefCell::new(Run { host, token: token.text().clone(), start, end: None, cut: false, paths: Few::Empty, pending: 0, calls: 0, ms: 0, epoch, end_epoch: None }));
        self.ran = true;
        self.list_run(Key::hashed(host, token), run.clone());
        let lo = start - self.slack_ms;
        for path in paths.iter() {
            let entry = self.by_path.entry(path.clone());
            // The run keeps the table's own key (a call's, if one came first): complete()'s
            // lookup then finds it by the Rc, without reading the text, out of cache by then.
            run.borrow_mut().paths.push(entry.key().clone());
            let on = entry.or_default();
            for h in on.calls.iter() {
                let mut h = h.borrow_mut();
                // A call read before this run's log stepped back is from before the step.
                if h.started >= lo && h.epoch >= epoch {
                    h.cands.push(run.clone());
                    run.borrow_mut().pending += 1;
                }
            }
            on.runs.push(run.clone());
        }
    }

    pub fn run_ended(&mut self, cx: &Ctx, host: Sym, token: &HashedText, start: i64, end: Option<i64>) -> PyResult<()> {
        let epoch = self.observe(cx, host).0;
        if let Some(runs) = self.runs_by_token.get(&Key::hashed(host, token)) {
            for run in runs.runs.iter() {
                let mut r = run.borrow_mut();
                if r.start == start && r.open() {
                    if let Some(calls) = self.calls.get_mut(&host) {
                        calls.waiting = 0; // the calls inside it may be due now
                    }
                    match end {
                        None => r.cut = true,
                        Some(e) => {
                            r.end = Some(e);
                            r.end_epoch = Some(epoch);
                        }
                    }
                    break;
                }
            }
        }
        self.release(cx, host, false)
    }

    // -- time ------------------------------------------------------------------------
    /// The hosts holding records, in name order (as linking.py's _held_hosts): the order
    /// their records come out in when several are released at once, never a map's.
    fn held_hosts(&self, cx: &Ctx) -> Vec<Sym> {
        let mut hosts: Vec<Sym> = self.requests.keys().copied().collect();
        for h in self.calls.keys() {
            if !hosts.contains(h) {
                hosts.push(*h);
            }
        }
        let names = cx.names.borrow();
        hosts.sort_by(|a, b| names.text(*a).cmp(names.text(*b)));
        hosts
    }

    pub fn advance(&mut self, cx: &Ctx) -> PyResult<()> {
        for host in self.held_hosts(cx) {
            self.release(cx, host, false)?;
        }
        Ok(())
    }

    pub fn finish(&mut self, cx: &Ctx) -> PyResult<()> {
        for host in self.held_hosts(cx) {
            self.release(cx, host, true)?;
        }
        Ok(())
    }

    pub fn held(&self) -> usize {
        self.calls.values().map(|c| c.queue.len()).sum::<usize>() + self.requests.values().map(VecDeque::len).sum::<usize>()
    }

    // -- calls -----------------------------------------------------------------------
    fn hold_call(&mut self, record: Rec, client: Text, path: Key, started: i64, ended: i64, epoch: i64) {
        let slack = self.slack_ms;
        let host = path.host;
        let mut cands = Few::Empty;
        let entry = self.by_path.entry(path);
        // The call keeps the table's own key (its run's, as a rule): decide()'s lookup then
        // finds it by the Rc, without reading the text, out of cache by then.
        let path = entry.key().clone();
        let on = entry.or_default();
        for run in on.runs.iter() {
            let mut r = run.borrow_mut();
            if r.cut || r.start - slack > started || r.epoch > epoch {
                continue;
            }
            if r.end.is_some_and(|e| ended > e + slack || r.end_epoch != Some(epoch)) {
                continue;
            }
            r.pending += 1;
            cands.push(run.clone());
        }
        let held = Rc::new(RefCell::new(HeldCall { record, client, path, started, ended, cands, epoch }));
        on.calls.push(held.clone());
        self.calls_of(host).push_back(held);
    }

    fn decide(&mut self, cx: &Ctx, held: &CallRef) -> PyResult<()> {
        let linked_to = {
            let h = held.borrow();
            let slack = self.slack_ms;
            let mut inside: Vec<&RunRef> = Vec::new();
            for run in h.cands.iter() {
                let mut r = run.borrow_mut();
                r.pending -= 1;
                if r.end.is_some_and(|e| !r.cut && h.ended <= e + slack) && r.end_epoch == Some(h.epoch) {
                    inside.push(run);
                }
            }
            if inside.len() == 1 {
                if self.learn_head && !self.heads.contains_key(&h.path.host) {
                    self.heads.insert(h.path.host, h.client.to_string()); // the first call that links names the head
                } else if !self.head_client(cx, h.path.host, &h.client, false) {
                    inside.clear(); // another client (a disk node): inside the run by chance
                }
            }
            if inside.len() == 1 {
                let mut r = inside[0].borrow_mut();
                r.calls += 1;
                r.ms += h.ended - h.started;
                Some(r.token.clone())
            } else {
                if !inside.is_empty() {
                    self.ambiguous += 1;
                }
                None
            }
        };
        if let Some(token) = linked_to {
            held.borrow_mut().record.set_token(cx.py, &token)?;
            self.linked += 1;
        }
        let h = held.borrow();
        if let Some(on) = self.by_path.get_mut(&h.path) {
            if let Some(i) = on.calls.iter().position(|c| Rc::ptr_eq(c, held)) {
                on.calls.remove(i);
            }
            if on.calls.is_empty() && on.runs.is_empty() {
                self.by_path.remove(&h.path);
            }
        }
        self.emit(cx, &h.record)
    }

    // -- release -----------------------------------------------------------------------
    fn release(&mut self, cx: &Ctx, host: Sym, fin: bool) -> PyResult<()> {
        let horizon = if fin {
            None
        } else {
            match (cx.watermark)(host) {
                None => return Ok(()),
                Some(wm) => Some(wm - self.delay_ms),
            }
        };
        loop {
            let Some(calls) = self.calls.get_mut(&host) else { break };
            let held = match horizon {
                None => {
                    calls.waiting = 0;
                    calls.queue.pop_front()
                }
                Some(horizon) => {
                    // linking.py's pass looks at the waiting ones first: it stops at the
                    // first due after the horizon, else goes on after them.
                    if calls.waiting > 0 && calls.waiting_ended > horizon {
                        break;
                    }
                    let Some(held) = calls.queue.get(calls.waiting) else { break };
                    let h = held.borrow();
                    if h.ended > horizon {
                        break;
                    }
                    if h.cands.iter().any(|r| r.borrow().open()) {
                        calls.waiting_ended = if calls.waiting == 0 { h.ended } else { calls.waiting_ended.max(h.ended) };
                        calls.waiting += 1;
                        continue;
                    }
                    drop(h);
                    calls.queue.remove(calls.waiting)
                }
            };
            let Some(held) = held else { break };
            self.decide(cx, &held)?;
        }
        let has_requests = self.requests.get(&host).is_some_and(|q| !q.is_empty());
        if horizon.is_some() && has_requests && self.detecting(cx, host)? {
            return Ok(());
        }
        loop {
            let Some(front) = self.requests.get(&host).and_then(|q| q.front()) else { break };
            if let Some(horizon) = horizon {
                // Due no earlier than its own end: the token's runs (cold by now) need not be
                // looked up on each line while it is not.
                if front.ended.is_some_and(|e| e > horizon) {
                    break;
                }
                let runs = self.runs_by_token.get(&front.token).map_or(&[][..], |t| &t.runs[..]);
                let mut due = front.ended.unwrap_or(0);
                for r in runs {
                    if let Some(e) = r.borrow().end {
                        due = due.max(e + self.slack_ms);
                    }
                }
                if due > horizon || runs.iter().any(|r| {
                    let r = r.borrow();
                    r.open() || r.pending != 0
                }) {
                    break;
                }
            }
            let held = self.requests.get_mut(&host).unwrap().pop_front().unwrap();
            self.complete(cx, held.record, &held.token)?;
        }
        Ok(())
    }

    /// The request of `token` goes out with its runs' calls: its runs are forgotten, taken
    /// out of the token's list (not a copy of it made first).
    fn complete(&mut self, cx: &Ctx, mut record: Rec, token: &Key) -> PyResult<()> {
        let host = token.host;
        let runs = self.runs_by_token.remove(token).map(|t| t.runs).unwrap_or_default();
        for run in runs.iter() {
            for path in run.borrow().paths.iter() {
                if let Some(on) = self.by_path.get_mut(path) {
                    if let Some(i) = on.runs.iter().position(|r| Rc::ptr_eq(r, run)) {
                        on.runs.remove(i);
                    }
                    if on.runs.is_empty() && on.calls.is_empty() {
                        self.by_path.remove(path);
                    }
                }
            }
        }
        if self.expect_ns || self.ns_read(cx, host) {
            let (mut calls, mut ms) = (0i64, 0i64);
            for r in runs.iter() {
                let r = r.borrow();
                if r.end.is_some() {
                    calls += r.calls;
                    ms += r.ms;
                }
            }
            record.set_ns(cx.py, Some(calls), Some(ms))?;
        } else {
            record.set_ns(cx.py, None, None)?;
        }
        self.emit(cx, &record)
    }

    // -- state, as parsers/linking.py writes it ------------------------------------------
    pub fn state<'py>(&mut self, cx: &Ctx<'_, 'py>, hosts: &[Sym]) -> PyResult<Option<Bound<'py, PyDict>>> {
        let py = cx.py;
        let mut index: Vec<(RunRef, usize)> = Vec::new();
        let run_rows = PyList::empty(py);
        let mut groups: Vec<&TokenRuns> = self.runs_by_token.values().collect();
        groups.sort_unstable_by_key(|g| g.seq);
        for group in groups {
            for run in group.runs.iter() {
                let r = run.borrow();
                let mut paths: Vec<&str> = r.paths.iter().map(|p| &*p.text).collect();
                paths.sort_unstable();
                let host = cx.names.borrow_mut().py(py, r.host);
                let row = (host, &*r.token, r.start, r.end, r.cut, PyList::new(py, paths)?, r.calls, r.ms, r.epoch, r.end_epoch);
                index.push((run.clone(), run_rows.len()));
                run_rows.append(row)?;
            }
        }
        let calls = PyList::empty(py);
        for host in &self.call_hosts {
            for held in &self.calls[host].queue {
                let h = held.borrow();
                let cands: Vec<usize> = h.cands.iter().filter_map(|c| index.iter().find(|(r, _)| Rc::ptr_eq(r, c)).map(|(_, i)| *i)).collect();
                let row: [PyObject; 4] = [snapshot(py, &h.record, cx.names)?.into_any().unbind(), PyString::new(py, &h.path.text).into_any().unbind(), PyList::new(py, cands)?.into_any().unbind(), h.epoch.into_pyobject(py)?.into_any().unbind()];
                calls.append(PyList::new(py, row)?)?;
            }
        }
        let requests = PyList::empty(py);
        for host in &self.request_hosts {
            for held in &self.requests[host] {
                requests.append(snapshot(py, &held.record, cx.names)?)?;
            }
        }
        for host in hosts {
            self.ns_read(cx, *host);
        }
        if run_rows.is_empty() && calls.is_empty() && requests.is_empty() && self.ns_hosts.is_empty() && self.heads.is_empty() {
            return Ok(None);
        }
        let mut ns: Vec<String> = self.ns_hosts.iter().map(|h| cx.names.borrow().text(*h).to_string()).collect();
        ns.sort();
        let d = PyDict::new(py);
        d.set_item("runs", run_rows)?;
        d.set_item("calls", calls)?;
        d.set_item("requests", requests)?;
        d.set_item("ns_hosts", ns)?;
        let mut heads: Vec<(String, &str)> = self.heads.iter().map(|(h, c)| (cx.names.borrow().text(*h).to_string(), c.as_str())).collect();
        heads.sort();
        let by_host = PyDict::new(py);
        for (host, client) in heads {
            by_host.set_item(host, client)?;
        }
        d.set_item("heads", by_host)?;
        if self.epochs.values().any(|e| e.0 != 0) {
            // a log stepped back
            let names = cx.names.borrow();
            let mut rows: Vec<(String, String, i64, i64)> = self.epochs.iter().map(|((h, dm), e)| (names.text(*h).to_string(), names.text(*dm).to_string(), e.0, e.1)).collect();
            rows.sort();
            let epochs = PyList::empty(py);
            for row in rows {
                epochs.append(PyList::new(py, [row.0.into_pyobject(py)?.into_any(), row.1.into_pyobject(py)?.into_any(), row.2.into_pyobject(py)?.into_any(), row.3.into_pyobject(py)?.into_any()])?)?;
            }
            d.set_item("epochs", epochs)?;
        }
        Ok(Some(d))
    }

    pub fn restore(&mut self, cx: &Ctx, state: &Bound<'_, PyDict>) -> PyResult<()> {
        let mut names = cx.names.borrow_mut();
        if let Some(ns) = state.get_item("ns_hosts")? {
            for h in ns.try_iter()? {
                let h: String = h?.extract()?;
                self.ns_hosts.insert(names.intern(&h));
            }
        }
        if let Some(heads) = state.get_item("heads")? {
            for (host, client) in heads.downcast::<PyDict>()?.iter() {
                let host: String = host.extract()?;
                self.heads.insert(names.intern(&host), client.extract()?);
            }
        }
        if let Some(rows) = state.get_item("epochs")? {
            for row in rows.try_iter()? {
                let row = row?;
                let host: String = row.get_item(0)?.extract()?;
                let daemon: String = row.get_item(1)?.extract()?;
                let key = (names.intern(&host), names.intern(&daemon));
                self.epochs.insert(key, (row.get_item(2)?.extract()?, row.get_item(3)?.extract()?));
            }
        }
        let mut runs: Vec<RunRef> = Vec::new();
        if let Some(rows) = state.get_item("runs")? {
            for row in rows.try_iter()? {
                let row = row?;
                let host: String = row.get_item(0)?.extract()?;
                let token: String = row.get_item(1)?.extract()?;
                let paths: Vec<String> = row.get_item(5)?.extract()?;
                let host = names.intern(&host);
                let token: Text = token.into();
                let mut distinct: Few<Key> = Few::Empty;
                for p in paths {
                    if !distinct.iter().any(|q| *q.text == *p) {
                        distinct.push(Key::new(host, p.into()));
                    }
                }
                let run = Rc::new(RefCell::new(Run {
                    host,
                    token: token.clone(),
                    start: row.get_item(2)?.extract()?,
                    end: row.get_item(3)?.extract()?,
                    cut: row.get_item(4)?.extract()?,
                    paths: distinct.clone(),
                    pending: 0,
                    calls: row.get_item(6)?.extract()?,
                    ms: row.get_item(7)?.extract()?,
                    epoch: 0,
                    end_epoch: None,
                }));
                {
                    // Saved before logs' clock steps were counted: none counted (epochs 0).
                    let mut r = run.borrow_mut();
                    if row.len()? >= 10 {
                        r.epoch = row.get_item(8)?.extract()?;
                        r.end_epoch = row.get_item(9)?.extract()?;
                    } else if r.end.is_some() {
                        r.end_epoch = Some(0);
                    }
                }
                self.list_run(Key::new(host, token), run.clone());
                // Cut runs too, as before the save: completing the request removes them.
                for p in distinct.iter() {
                    self.by_path.entry(p.clone()).or_default().runs.push(run.clone());
                }
                runs.push(run);
            }
        }
        if let Some(rows) = state.get_item("calls")? {
            for row in rows.try_iter()? {
                let row = row?;
                // A copy: the caller's state stays as it was while this one gets its token.
                let record = row.get_item(0)?.downcast_into::<PyDict>()?.copy()?;
                let path: String = row.get_item(1)?.extract()?;
                let cand_ix: Vec<usize> = row.get_item(2)?.extract()?;
                let epoch: i64 = if row.len()? >= 4 { row.get_item(3)?.extract()? } else { 0 };
                let host_name: String = record.get_item("host")?.map(|v| v.extract()).transpose()?.unwrap_or_default();
                let host = names.intern(&host_name);
                let started: i64 = record.get_item("started")?.map(|v| v.extract()).transpose()?.unwrap_or(0);
                let ended: i64 = record.get_item("ended")?.map(|v| v.extract()).transpose()?.unwrap_or(0);
                let mut cands = Few::Empty;
                for i in cand_ix {
                    if let Some(run) = runs.get(i) {
                        run.borrow_mut().pending += 1;
                        cands.push(run.clone());
                    }
                }
                let client: Text = record.get_item("client")?.map(|v| v.extract::<Option<String>>()).transpose()?.flatten().unwrap_or_default().to_lowercase().into();
                let path = Key::new(host, path.into());
                let held = Rc::new(RefCell::new(HeldCall { record: Rec::Dict(record.unbind()), client, path: path.clone(), started, ended, cands, epoch }));
                self.calls_of(host).push_back(held.clone());
                self.by_path.entry(path).or_default().calls.push(held);
            }
        }
        if let Some(rows) = state.get_item("requests")? {
            for record in rows.try_iter()? {
                let record = record?.downcast_into::<PyDict>()?.copy()?;
                let host_name: String = record.get_item("host")?.map(|v| v.extract()).transpose()?.unwrap_or_default();
                let token: String = record.get_item("token")?.map(|v| v.extract()).transpose()?.unwrap_or_default();
                let ended: Option<i64> = record.get_item("ended")?.map(|v| v.extract()).transpose()?.flatten();
                let host = names.intern(&host_name);
                self.requests_of(host).push_back(HeldRequest { record: Rec::Dict(record.unbind()), token: Key::new(host, token.into()), ended });
            }
        }
        Ok(())
    }
}
