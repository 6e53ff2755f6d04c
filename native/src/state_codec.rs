//! The DPM engine's state as Python dicts, the same keys and values as the Python
//! engine's (a state saved by either engine restores in the other): the changes since the
//! last take, the clocks, and the loading of both.

use std::cell::RefCell;
use std::collections::hash_map::Entry;
use std::collections::BTreeSet;
use std::rc::Rc;

use pyo3::exceptions::{PyKeyError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyInt, PyList, PyString, PyTuple};

use crate::hashed_text::{HashedText, Lookup, Probe};
use crate::hashing::FxMap;
use crate::lru::{Lru, NIL};
use crate::names::{Names, Sym};
use crate::records::{push_int, push_json_str};
use crate::state::{Call, Changed, Clocks, Kind, Process, Request, RKey, Session, State, TKey, Text, Thread};

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

/// (threads, requests, groups) changed since the last take, keys as plain tuples.
pub(crate) fn take_changes<'py>(py: Python<'py>, st: &RefCell<State>, names: &RefCell<Names>) -> PyResult<(Bound<'py, PyDict>, Bound<'py, PyDict>, Bound<'py, PyDict>)> {
    let mut st = st.borrow_mut();
    let changed = st.changed.replace(Changed::default()).unwrap_or_default();
    let mut names = names.borrow_mut();
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
        let v = match st.requests.get(host).and_then(|m| m.get(&Probe::new(token) as &dyn Lookup)) {
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

/// The processes, host clocks and streams' times, as the Python engine's clock_state.
pub(crate) fn clock_state<'py>(py: Python<'py>, st: &RefCell<State>, clk: &RefCell<Clocks>, names: &RefCell<Names>) -> PyResult<Bound<'py, PyDict>> {
    let st = st.borrow();
    let clk = clk.borrow();
    let mut names = names.borrow_mut();
    let processes = PyList::empty(py);
    for stream in &st.process_streams {
        let Some(procs) = st.processes.get(stream) else { continue };
        let mut rows: Vec<(&i64, std::cell::Ref<'_, Process>)> = procs.iter().map(|(pid, p)| (pid, p.borrow())).collect();
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
pub(crate) fn restore(st: &RefCell<State>, clk: &RefCell<Clocks>, names: &RefCell<Names>, threads: &Bound<'_, PyDict>, requests: &Bound<'_, PyDict>, clock: Option<&Bound<'_, PyDict>>, finished: Option<&Bound<'_, PyDict>>) -> PyResult<()> {
    let mut st = st.borrow_mut();
    let st = &mut *st;
    let mut clk = clk.borrow_mut();
    let mut names = names.borrow_mut();
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
                let process = Process { first, last, lines, tids: BTreeSet::new(), succeeded: false, born };
                // A process known already is written over in place: its threads share it.
                match st.processes.get_mut(&stream).unwrap().entry(pid) {
                    Entry::Occupied(known) => *known.get().borrow_mut() = process,
                    Entry::Vacant(slot) => {
                        slot.insert(Rc::new(RefCell::new(process)));
                    }
                }
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
                token: opt_text(&item(&c, "token")?)?.map(HashedText::new),
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
        if !st.processes.contains_key(&(host, daemon)) {
            st.processes.insert((host, daemon), FxMap::default());
            st.process_streams.push((host, daemon));
        }
        let born = st.next_seq();
        let process = st.processes.get_mut(&(host, daemon)).unwrap().entry(pid).or_insert_with(|| Process::seen_at(latest, born)).clone();
        process.borrow_mut().tids.insert(tid);
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
            process,
        }));
        if !st.thread_order.contains_key(&host) {
            st.thread_order.insert(host, Lru::default());
            st.thread_order_hosts.push(host);
        }
        let handle = st.thread_order.get_mut(&host).unwrap().push_back(key);
        st.threads.get_mut(&key).unwrap().order = handle;
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
                if st.finished.entry(key.0).or_default().insert(HashedText::new(key.1.clone()), g).is_none() {
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
        st.admit_uncapped(host, HashedText::new(token), req);
        match clk.hosts.get_mut(&rhost) {
            None => clk.insert(rhost, latest),
            Some(c) if latest > c.latest => c.latest = latest,
            Some(_) => {}
        }
        clk.raise_latest(latest);
    }
    Ok(())
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

// -- the changelog's bytes -----------------------------------------------------------------

/// Nesting deeper than this is left to Python (state values nest a few levels).
const STATE_JSON_DEPTH: usize = 32;

/// {key: the bytes of partitions.encode_state(value)} for a checkpoint's changes: the
/// compact JSON `json.JSONEncoder(separators=(",", ":"))` writes (ASCII, `\uXXXX` escapes),
/// None for None. A value holding what state never holds (a float, an int past 64 bits, a
/// key not a string, a subclass, a lone surrogate, deep nesting) is handed to `fallback`
/// (encode_state itself), so every value comes out as those bytes. Python's encoder spent
/// ~100 instructions a byte on these values, a third of a worker's checkpoint.
#[pyfunction]
pub fn state_changes_json<'py>(changes: &Bound<'py, PyDict>, fallback: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
    let py = changes.py();
    let out = PyDict::new(py);
    let mut buf = String::with_capacity(4096);
    for (key, value) in changes.iter() {
        if value.is_none() {
            out.set_item(key, py.None())?;
            continue;
        }
        buf.clear();
        if push_state_json(&mut buf, &value, 0) {
            out.set_item(key, PyBytes::new(py, buf.as_bytes()))?;
        } else {
            out.set_item(key, fallback.call1((value,))?)?;
        }
    }
    Ok(out)
}

/// `v` as json.dumps writes it (see state_changes_json); false for a value left to Python
/// (what `out` holds then is of no use).
fn push_state_json(out: &mut String, v: &Bound<'_, PyAny>, depth: usize) -> bool {
    if v.is_none() {
        out.push_str("null");
    } else if let Ok(s) = v.downcast_exact::<PyString>() {
        let Ok(s) = s.to_str() else { return false }; // a lone surrogate
        push_ascii_json_str(out, s);
    } else if let Ok(n) = v.downcast_exact::<PyInt>() {
        let Ok(n) = n.extract::<i64>() else { return false };
        push_int(out, n);
    } else if let Ok(b) = v.downcast_exact::<PyBool>() {
        out.push_str(if b.is_true() { "true" } else { "false" });
    } else if depth >= STATE_JSON_DEPTH {
        return false;
    } else if let Ok(items) = v.downcast_exact::<PyList>() {
        return push_state_array(out, items.iter(), depth);
    } else if let Ok(items) = v.downcast_exact::<PyTuple>() {
        return push_state_array(out, items.iter(), depth);
    } else if let Ok(d) = v.downcast_exact::<PyDict>() {
        out.push('{');
        for (i, (key, item)) in d.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let Ok(key) = key.downcast_exact::<PyString>() else { return false };
            let Ok(key) = key.to_str() else { return false };
            push_ascii_json_str(out, key);
            out.push(':');
            if !push_state_json(out, &item, depth + 1) {
                return false;
            }
        }
        out.push('}');
    } else {
        return false;
    }
    true
}

/// A list's or a tuple's items as a JSON array (see push_state_json).
fn push_state_array<'py>(out: &mut String, items: impl Iterator<Item = Bound<'py, PyAny>>, depth: usize) -> bool {
    out.push('[');
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push(',');
        }
        if !push_state_json(out, &item, depth + 1) {
            return false;
        }
    }
    out.push(']');
    true
}

/// A JSON string with ensure_ascii's escapes; most state texts (names, tokens, paths) need
/// none and are copied whole.
fn push_ascii_json_str(out: &mut String, s: &str) {
    if s.bytes().all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\') {
        out.reserve(s.len() + 2);
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        push_json_str(out, s, true);
    }
}
