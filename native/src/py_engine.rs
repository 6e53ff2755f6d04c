//! The compiled reassembler as a Python class (`Core`, wrapped by
//! parsers/compiled_reassembly.py): its settings and callbacks, `feed` (one Event) and
//! `feed_lines` (a source's lines parsed by its FastLines with no Python per line), the
//! linker inside it, what Python reads back, and its state (state_codec.rs). The rules
//! are reassembly.rs's; this module only binds them.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};

use pyo3::exceptions::{PyKeyError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::block::LineBlock;
use crate::chunk::Chunk;
use crate::counters::{DUPLICATE_LINES, ORPHANS};
use crate::event::{Ev, Role};
use crate::hashing::FxMap;
use crate::keyed_slab::KeyedSlab;
use crate::line_watch::LineWatch;
use crate::linking::Linker;
use crate::names::{Names, Sym};
use crate::reassembly::{Callbacks, Cx, Keys, DPM_DAEMON, NS_DAEMON};
use crate::scan::{FastLines, Scan};
use crate::schema::{BUDGET, DONE, LIMIT, SLOW, STAT_NAMES};
use crate::state::{Changed, Clocks, Settings, State};
use crate::state_codec;
use crate::text_cache::TextCache;
use crate::window::{DigestWindow, MAX_DUPLICATE_MEMORY};

/// The compiled reassembler (wrapped by parsers/compiled_reassembly.py).
#[pyclass(module = "dpmstream.parsers._native", subclass)]
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

/// The engine's event of a line `twin` scanned (Scan::Parsed), fed to the state; false,
/// nothing fed: a role the engine lacks (the line is Python's). Inlined: the hot loop's
/// own step, for the daemon's lines and the routed ones.
#[inline(always)]
fn feed_scanned(st: &mut State, cx: &Cx<'_, '_>, twin: &FastLines, bytes: &[u8], host: Sym, daemon: Sym,
                parsed: (usize, i64, i64, i64, Option<i64>, Option<i64>)) -> PyResult<bool> {
    // SAFETY: scan() took it: printable ASCII.
    let text = unsafe { std::str::from_utf8_unchecked(bytes) };
    let ev = {
        let mut names = cx.names.borrow_mut();
        twin.event(&mut names, text, host, daemon, parsed)
    };
    let Some(ev) = ev else { return Ok(false) };
    st.feed(cx, &ev)?;
    Ok(true)
}

/// A routed daemon's twin as one feed_lines call uses it, and what it read there.
struct Route<'py> {
    twin: Bound<'py, FastLines>,
    host: Sym,
    daemon: Sym,
    daemon_py: Bound<'py, PyAny>,
    parsed: usize,
    unmatched: usize,
    /// The latest time of its parsed lines.
    latest: i64,
}

impl<'py> Route<'py> {
    fn new(py: Python<'py>, twin: Py<FastLines>, names: &mut Names) -> PyResult<Self> {
        let twin = twin.into_bound(py);
        let (host_py, daemon_py) = twin.borrow().host_daemon(py);
        let host = names.intern(host_py.downcast::<PyString>()?.to_str()?);
        let daemon = names.intern(daemon_py.downcast::<PyString>()?.to_str()?);
        Ok(Route { twin, host, daemon, daemon_py, parsed: 0, unmatched: 0, latest: -1 })
    }
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
                threads: KeyedSlab::default(),
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
                clients: TextCache::default(),
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
    /// lines were taken (BUDGET: an event-time sweep is due). An rsyslog line the parser's
    /// prefix routes to another daemon is read by that daemon's twin (FastLines.route)
    /// where the parser has one, as Python reads it after routing; else it is SLOW.
    /// Returns (next, parsed, unmatched, latest event time parsed or -1, why, routed):
    /// routed is None when no route was taken, else per route taken (its daemon, lines
    /// parsed, unmatched, their latest time): Source._count_routed counts them as its
    /// line-by-line path would have.
    /// `watch` (line_watch.rs): after each line but the last this call reads, its hook
    /// sees the engine where it wants to; the caller calls it for that last line once it
    /// has counted the call and swept (BUDGET), as after a run of lines ending there.
    #[pyo3(signature = (parser, lines, start, limit, budget, watch=None))]
    #[allow(clippy::type_complexity, clippy::too_many_arguments)]
    fn feed_lines(&self, py: Python<'_>, parser: &Bound<'_, FastLines>, lines: &Bound<'_, PyAny>, start: usize, limit: Option<i64>, budget: usize, watch: Option<&Bound<'_, LineWatch>>) -> PyResult<(usize, usize, usize, i64, u8, Option<Vec<(PyObject, usize, usize, i64)>>)> {
        let chunk = match lines.downcast::<LineBlock>() {
            Ok(b) => Chunk::Block(b.get()),
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
        let mut routes: Vec<Option<Route<'_>>> = Vec::new();
        let mut watch = watch.map(|w| w.try_borrow_mut()).transpose()?;
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
                    Scan::Routed(k) => {
                        if routes.len() <= k {
                            routes.resize_with(k + 1, || None);
                        }
                        if routes[k].is_none() {
                            let Some(twin) = parser.route_of(k) else { return Ok(SLOW) };
                            routes[k] = Some(Route::new(py, twin.clone_ref(py), &mut cx.names.borrow_mut())?);
                        }
                        let route = routes[k].as_mut().expect("made just above");
                        let mut twin = route.twin.borrow_mut();
                        match twin.scan(bytes) {
                            Scan::Unmatched => route.unmatched += 1,
                            Scan::Parsed { .. } if twin.names_another_host(bytes) => return Ok(SLOW),
                            Scan::Parsed { alt, ts, pid, tid, nfiles, rc } => {
                                if !feed_scanned(st, cx, &twin, bytes, route.host, route.daemon, (alt, ts, pid, tid, nfiles, rc))? {
                                    return Ok(SLOW);
                                }
                                route.parsed += 1;
                                route.latest = route.latest.max(ts);
                            }
                            Scan::Python | Scan::Routed(_) => return Ok(SLOW),
                        }
                    }
                    Scan::Parsed { .. } if parser.names_another_host(bytes) => return Ok(SLOW),
                    Scan::Parsed { alt, ts, pid, tid, nfiles, rc } => {
                        if !feed_scanned(st, cx, &parser, bytes, host, daemon, (alt, ts, pid, tid, nfiles, rc))? {
                            return Ok(SLOW);
                        }
                        parsed += 1;
                        latest = latest.max(ts);
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
                if let Some(w) = watch.as_mut().filter(|w| i < n && w.wants(i - 1)) {
                    let latest = cx.clk.borrow().latest;
                    w.after(py, i - 1, latest, st.stats[ORPHANS])?;
                }
            }
            Ok(DONE)
        })?;
        let routed = routes.iter().any(Option::is_some).then(|| {
            routes.into_iter().flatten().map(|r| (r.daemon_py.unbind(), r.parsed, r.unmatched, r.latest)).collect()
        });
        Ok((i, parsed, unmatched, latest, why, routed))
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

    /// One counter of stats_dict() by name, without the dict (a caller reading it after
    /// each of many lines: `profile check`'s orphans).
    fn stat(&self, name: &str) -> PyResult<i64> {
        let i = STAT_NAMES.iter().position(|n| *n == name).ok_or_else(|| PyKeyError::new_err(name.to_string()))?;
        Ok(self.st.borrow().stats[i])
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
        state_codec::take_changes(py, &self.st, &self.names)
    }

    fn clock_state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        state_codec::clock_state(py, &self.st, &self.clk, &self.names)
    }

    /// Loads state saved by take_changes/clock_state of either engine (keys as tuples).
    #[pyo3(signature = (threads, requests, clock=None, finished=None))]
    fn restore(&self, threads: &Bound<'_, PyDict>, requests: &Bound<'_, PyDict>, clock: Option<&Bound<'_, PyDict>>, finished: Option<&Bound<'_, PyDict>>) -> PyResult<()> {
        state_codec::restore(&self.st, &self.clk, &self.names, threads, requests, clock, finished)
    }
}
