//! simulator/fits.py's `request_columns`, compiled: what calibrate reads of each put/get
//! request record (and of the DPM calls, for the fast threads), in one pass; its
//! `directory_groups` (the name-server creates by directory, each with its lock's holds)
//! and predict.py's `phase_table` (`phase_columns`). calibrate read
//! the same ~3 k records of the thesis log in a dozen Python passes, one per value (issue
//! 30: most of its ~200 M instructions). `python_request_columns` stays the reference
//! (tests/simulator/test_calibrate.py pins the two equal); each rule below is its line's.
//! Ints within ±2^53 (exact_ints.rs), else OverflowError; a record with a value of
//! another type, TypeError: the Python wrapper lets the reference answer both.

use pyo3::exceptions::{PyKeyError, PyTypeError};
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use crate::estimators::most_open;
use crate::exact_ints::exact;
use crate::fits::NET_MS;
use crate::hashing::FxMap;
use crate::model_summary::{directory_of, lock_holds};

/// `r.get(key)` borrowed, and an int's value read at once: pyo3's get_item and extract
/// take and give owned references and check each step (issue 30: ~265 instructions a
/// read, ~80 k reads a calibrate of the thesis log, a third of request_columns).
/// Err: the lookup's own error (a key's hash that raised).
enum Read<'py> {
    Missing,
    NoneValue,
    Int(i64),
    Other(Bound<'py, PyAny>),
}

fn read<'py>(r: &Bound<'py, PyDict>, key: &Bound<'py, PyString>) -> PyResult<Read<'py>> {
    let py = r.py();
    // SAFETY: the GIL is held (a Python<'py> token exists); the value is borrowed from the
    // dict, which `r` keeps alive, and is read before anything else runs Python code.
    unsafe {
        let v = ffi::PyDict_GetItemWithError(r.as_ptr(), key.as_ptr());
        if v.is_null() {
            return match PyErr::take(py) {
                Some(err) => Err(err),
                None => Ok(Read::Missing),
            };
        }
        if v == ffi::Py_None() {
            return Ok(Read::NoneValue);
        }
        if ffi::PyLong_CheckExact(v) != 0 {
            let mut overflow = 0;
            let n = ffi::PyLong_AsLongLongAndOverflow(v, &mut overflow);
            if overflow == 0 {
                return Ok(Read::Int(n));
            }
        }
        Ok(Read::Other(Bound::from_borrowed_ptr(py, v)))
    }
}

/// An int read: within ±2^53, else OverflowError; another type, pyo3's TypeError.
fn value(v: Read<'_>) -> PyResult<Option<i64>> {
    match v {
        Read::Missing | Read::NoneValue => Ok(None),
        Read::Int(n) => Ok(Some(exact(n)?)),
        Read::Other(v) => Ok(Some(exact(v.extract::<i64>()?)?)),
    }
}

/// `r[key]`: None, or an int within ±2^53; KeyError where it is missing.
fn int(r: &Bound<'_, PyDict>, key: &Bound<'_, PyString>) -> PyResult<Option<i64>> {
    match read(r, key)? {
        Read::Missing => Err(PyKeyError::new_err(key.clone().unbind())),
        v => value(v),
    }
}

/// `r.get(key)`: None where it is missing.
fn int_or_none(r: &Bound<'_, PyDict>, key: &Bound<'_, PyString>) -> PyResult<Option<i64>> {
    value(read(r, key)?)
}

/// `r[key]`, a text or None.
fn text(r: &Bound<'_, PyDict>, key: &Bound<'_, PyString>) -> PyResult<Option<String>> {
    match r.get_item(key)? {
        None => Err(PyKeyError::new_err(key.clone().unbind())),
        Some(v) if v.is_none() => Ok(None),
        Some(v) => Ok(Some(v.extract::<String>()?)),
    }
}

fn needed(v: Option<i64>, what: &str) -> PyResult<i64> {
    v.ok_or_else(|| PyTypeError::new_err(format!("{what} is None")))
}

/// `request_columns(reqs, dpm_calls)`: fits.python_request_columns' dict.
#[pyfunction]
pub fn request_columns<'py>(py: Python<'py>, reqs: Vec<Bound<'py, PyDict>>,
                            dpm_calls: Vec<Bound<'py, PyDict>>) -> PyResult<Bound<'py, PyDict>> {
    let mut hosts: FxMap<String, usize> = FxMap::default();
    let mut host_names: Vec<String> = Vec::new();
    // (at, a put: "get" sorts first, host, op)
    let mut arrivals: Vec<(i64, bool, usize, Bound<'py, PyAny>)> = Vec::with_capacity(reqs.len());
    let mut nfiles: Vec<i64> = Vec::with_capacity(reqs.len());
    let (mut auth, mut request, mut put_request, mut per_poll) = (vec![], vec![], vec![], vec![]);
    let (mut done_success, mut done_aborted, mut transfer, mut gap) = (vec![], vec![], vec![], vec![]);
    let (mut proc_put, mut proc_get, mut own_put, mut own_get) = (vec![], vec![], vec![], vec![]);
    let mut samples: Vec<(i64, i64)> = vec![];
    let mut intervals: Vec<(i64, i64)> = vec![];
    let mut fast: Vec<(i64, i64)> = vec![];
    let (mut ended_n, mut gets, mut failed_early, mut procs, mut proc_failed) = (0i64, 0i64, 0i64, 0i64, 0i64);
    let (mut aborted, mut incomplete, mut sync_gets, mut queued) = (0i64, 0i64, 0i64, 0i64);
    let (mut whole_seconds, mut accepted_any) = (true, false);
    for r in &reqs {
        let op_obj = r.get_item(intern!(py, "op"))?.ok_or_else(|| PyKeyError::new_err("op"))?;
        let op = op_obj.extract::<String>()?;
        let is_get = op == "get";
        if !is_get && op != "put" {
            return Err(PyTypeError::new_err("a request that is not a put or a get"));
        }
        let status = text(r, intern!(py, "status"))?;
        let status = status.as_deref();
        let started = needed(int(r, intern!(py, "started"))?, "started")?;
        let proc = int(r, intern!(py, "proc_ms"))?;
        whole_seconds = whole_seconds && started.rem_euclid(1000) == 0;
        let accepted = int(r, intern!(py, "accepted"))?;
        let at = match accepted {
            Some(a) => { accepted_any = true; a }
            None => started,
        };
        let client = text(r, intern!(py, "client"))?.filter(|c| !c.is_empty())
            .unwrap_or_else(|| "?".to_string());
        let host = match hosts.get(&client) {
            Some(&k) => k,
            None => {
                hosts.insert(client.clone(), host_names.len());
                host_names.push(client);
                host_names.len() - 1
            }
        };
        arrivals.push((at, !is_get, host, op_obj));
        let ended = int(r, intern!(py, "ended"))?;
        if ended.is_some() {
            ended_n += 1;
        }
        let files = int(r, intern!(py, "nfiles"))?.filter(|&f| f != 0).unwrap_or(1);
        nfiles.push(files);
        let polls = int(r, intern!(py, "polls"))?.unwrap_or(0);
        let queue = int(r, intern!(py, "queue_ms"))?;
        if is_get {
            gets += 1;
            if proc.is_none() && status == Some("success") {
                sync_gets += 1;
            }
        }
        if status == Some("failed") && queue.is_none() && proc.is_none() && polls == 0 {
            failed_early += 1;
        }
        if let Some(p) = proc {
            procs += 1;
            if status == Some("failed") {
                proc_failed += 1;
            }
            (if is_get { &mut proc_get } else { &mut proc_put }).push(p);
            if let Some(ns) = int_or_none(r, intern!(py, "ns_ms"))? {
                let ns_calls = int_or_none(r, intern!(py, "ns_calls"))?;
                if ns_calls.unwrap_or(0) >= files {
                    let own = p - ns - NET_MS * needed(ns_calls, "ns_calls")?;
                    (if is_get { &mut own_get } else { &mut own_put }).push(own.max(1));
                }
            }
        }
        match status {
            Some("aborted") => aborted += 1,
            Some("incomplete") => incomplete += 1,
            _ => {}
        }
        let auth_ms = int(r, intern!(py, "auth_ms"))?;
        if let Some(a) = auth_ms {
            auth.push(a);
        }
        let request_ms = int(r, intern!(py, "request_ms"))?;
        if let Some(q) = request_ms {
            request.push(q);
            if !is_get {
                put_request.push(q);
            }
            fast.push((at, started + q));
        }
        let ready_wait = int(r, intern!(py, "ready_wait_ms"))?;
        if polls != 0 {
            let poll_ms = needed(int(r, intern!(py, "poll_ms"))?, "poll_ms")?;
            per_poll.push((poll_ms as f64 / polls as f64).round_ties_even() as i64);
            if let Some(w) = ready_wait {
                if polls <= 40 {
                    samples.push((polls, w));
                }
            }
        }
        let done = int(r, intern!(py, "done_ms"))?;
        if let Some(d) = done {
            match status {
                Some("success") => done_success.push(d),
                Some("aborted") => done_aborted.push(d),
                _ => {}
            }
            if let Some(e) = ended {
                fast.push((e - d, e));
            }
        }
        if let Some(t) = int(r, intern!(py, "transfer_ms"))? {
            transfer.push(t);
        }
        // fits.get_gap
        if is_get && status == Some("success") {
            let total = int(r, intern!(py, "total_ms"))?;
            if let (Some(t), Some(q), Some(w), Some(d)) = (total, request_ms, ready_wait, done) {
                gap.push(t - auth_ms.unwrap_or(0) - q - w - d);
            }
        }
        // fits.proc_interval
        if let (Some(p), Some(qu), Some(q)) = (proc, queue, request_ms) {
            let put_ret = started + q;
            intervals.push(if qu > 0 {
                (put_ret + qu, put_ret + qu + p)
            } else {
                let end = started + p;
                (put_ret, if end > put_ret { end } else { put_ret })
            });
        }
        if queue.unwrap_or(0) > 10 {
            queued += 1;
        }
    }
    // fits.fast_calls' DPM calls
    for c in &dpm_calls {
        if let (Some(s), Some(e)) = (int(c, intern!(py, "started"))?, int(c, intern!(py, "ended"))?) {
            fast.push((s - int(c, intern!(py, "auth_ms"))?.unwrap_or(0), e));
        }
    }
    // sorted as Python sorts the (at, op, host) tuples ("get" before "put"); equal keys
    // are equal tuples, so the unstable sort gives the same list
    arrivals.sort_unstable_by_key(|&(at, put, host, _)| (at, put, host));
    // fits.SORTED_COLUMNS
    for column in [&mut nfiles, &mut auth, &mut request, &mut put_request, &mut per_poll,
                   &mut done_success, &mut done_aborted, &mut own_put, &mut own_get] {
        column.sort_unstable();
    }
    let out = PyDict::new(py);
    for (name, values) in [("auth", auth), ("request", request), ("put_request", put_request),
                           ("per_poll", per_poll), ("done_success", done_success),
                           ("done_aborted", done_aborted), ("proc_put", proc_put),
                           ("proc_get", proc_get), ("own_put", own_put), ("own_get", own_get),
                           ("transfer", transfer), ("gap", gap)] {
        out.set_item(name, values)?;
    }
    out.set_item("samples", samples)?;
    for (name, count) in [("ended", ended_n), ("gets", gets), ("failed_early", failed_early),
                          ("procs", procs), ("proc_failed", proc_failed), ("aborted", aborted),
                          ("incomplete", incomplete), ("sync_gets", sync_gets), ("queued", queued)] {
        out.set_item(name, count)?;
    }
    out.set_item("whole_seconds", whole_seconds)?;
    out.set_item("accepted", accepted_any)?;
    out.set_item("arrivals", arrivals.into_iter().map(|(at, _, host, op)| (at, op, host))
        .collect::<Vec<_>>())?;
    out.set_item("hosts", host_names)?;
    out.set_item("files", nfiles.get(nfiles.len() / 2).copied().unwrap_or(1))?;
    out.set_item("intervals", intervals.len())?;
    out.set_item("proc_overlap", most_open(&intervals))?;
    out.set_item("fast_overlap", most_open(&fast))?;
    Ok(out)
}

/// `phase_table(records)` of simulator/predict.py for `fields`, its PHASES' (field, phase)
/// pairs: (op, phase) -> the sorted values, puts' then gets', each in PHASES' order (a
/// phase no record of the op has is left out). The report's fit check reads the log's ~3 k
/// requests so (issue 30: ~25 M instructions of Python, maps and sorts, on the thesis log).
#[pyfunction]
pub fn phase_columns<'py>(py: Python<'py>, records: Vec<Bound<'py, PyDict>>,
                          fields: Vec<(Bound<'py, PyString>, Bound<'py, PyString>)>)
                          -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    for op in ["put", "get"] {
        let mut columns: Vec<Vec<i64>> = vec![Vec::new(); fields.len()];
        for r in &records {
            let mine = match r.get_item(intern!(py, "op"))? {
                Some(v) => v.downcast::<PyString>().is_ok_and(|s| s.to_str().is_ok_and(|s| s == op)),
                None => false,
            };
            if !mine {
                continue;
            }
            for ((field, _), column) in fields.iter().zip(columns.iter_mut()) {
                if let Some(v) = r.get_item(field)? {
                    if !v.is_none() {
                        column.push(v.extract::<i64>()?);
                    }
                }
            }
        }
        for ((_, phase), mut column) in fields.iter().zip(columns) {
            if !column.is_empty() {
                column.sort_unstable();
                out.set_item((op, phase), column)?;
            }
        }
    }
    Ok(out)
}

/// `directory_groups(creats)` of fits.py: (start, end, path) creates grouped by parent
/// directory, most creates first (then by name), each (name, its (start, end) creates in
/// the calls' order, their lock_holds), and how many named no path.
#[pyfunction]
pub fn directory_groups(creats: Vec<(i64, i64, Option<String>)>)
                        -> PyResult<(Vec<(String, Vec<(i64, i64)>, Vec<i64>)>, usize)> {
    let mut index: FxMap<String, usize> = FxMap::default();
    let mut groups: Vec<(String, Vec<(i64, i64)>)> = Vec::new();
    let mut pathless = 0;
    for (start, end, path) in creats {
        let path = match path {
            Some(p) if !p.is_empty() => p,
            _ => {
                pathless += 1;
                continue;
            }
        };
        let span = (exact(start)?, exact(end)?);
        let dir = directory_of(&path);
        match index.get(dir) {
            Some(&k) => groups[k].1.push(span),
            None => {
                index.insert(dir.to_string(), groups.len());
                groups.push((dir.to_string(), vec![span]));
            }
        }
    }
    // busiest_first: a stable sort, as Python's sorted
    groups.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then_with(|| a.0.cmp(&b.0)));
    Ok((groups.into_iter().map(|(name, spans)| {
        let holds = lock_holds(&spans);
        (name, spans, holds)
    }).collect(), pathless))
}

/// A text among `wanted`: Python's `value in ("put", "get")` for a value read (another
/// type, None or no value: not among them).
fn text_in(v: &Read<'_>, wanted: &[&str]) -> bool {
    match v {
        Read::Other(v) => v.downcast::<PyString>().ok()
            .and_then(|s| s.to_str().ok())
            .is_some_and(|s| wanted.contains(&s)),
        _ => false,
    }
}

/// `r[key]`, whatever it holds; KeyError where it is missing.
fn item<'py>(r: &Bound<'py, PyDict>, key: &Bound<'py, PyString>) -> PyResult<Bound<'py, PyAny>> {
    r.get_item(key)?.ok_or_else(|| PyKeyError::new_err(key.clone().unbind()))
}

/// `call_columns(requests, calls)`: fits.python_call_columns' dict, the requests and calls
/// calibrate reads filtered in one pass each.
#[pyfunction]
pub fn call_columns<'py>(py: Python<'py>, requests: Vec<Bound<'py, PyDict>>,
                         calls: Vec<Bound<'py, PyDict>>) -> PyResult<Bound<'py, PyDict>> {
    const REQUEST_STEPS: [&str; 2] = ["put", "get"];
    let reqs = PyList::empty(py);
    for r in &requests {
        if text_in(&read(r, intern!(py, "op"))?, &REQUEST_STEPS)
            && !matches!(read(r, intern!(py, "started"))?, Read::Missing | Read::NoneValue) {
            reqs.append(r)?;
        }
    }
    let dpm = PyList::empty(py);
    let mut early: Vec<(i64, Bound<'py, PyAny>, Bound<'py, PyAny>)> = Vec::new();
    let (mut plain_ms, mut statg): (Vec<i64>, Vec<i64>) = (Vec::new(), Vec::new());
    let mut creates: Vec<(Bound<'py, PyAny>, Bound<'py, PyAny>, Option<Bound<'py, PyAny>>)> = Vec::new();
    let (mut plain, mut ns_threads, mut fast_ids, mut ns_ids) = (0i64, 0i64, 0i64, 0i64);
    for c in &calls {
        let daemon = read(c, intern!(py, "daemon"))?;
        if text_in(&daemon, &["dpm"]) {
            dpm.append(c)?;
            let op = item(c, intern!(py, "op"))?;
            let step = text_in(&Read::Other(op.clone()), &REQUEST_STEPS);
            if step {
                if let Some(started) = int(c, intern!(py, "started"))? {
                    let at = started - int(c, intern!(py, "auth_ms"))?.unwrap_or(0);
                    // `c["client"] or "?"`
                    let client = item(c, intern!(py, "client"))?;
                    let client = if client.is_truthy()? { client } else { intern!(py, "?").clone().into_any() };
                    early.push((at, op, client));
                }
            } else if text_in(&Read::Other(op), &["ping", "getpools"]) {
                plain += 1;
                if let Some(d) = int(c, intern!(py, "duration_ms"))? {
                    plain_ms.push(d);
                }
            }
            if let Some(t) = int_or_none(c, intern!(py, "thread"))? {
                if t >= 0 && t + 1 > fast_ids {
                    fast_ids = t + 1;
                }
            }
        } else if text_in(&daemon, &["dpns"])
            && !matches!(read(c, intern!(py, "duration_ms"))?, Read::Missing | Read::NoneValue) {
            let op = Read::Other(item(c, intern!(py, "op"))?);
            if text_in(&op, &["statg"]) {
                statg.push(needed(int(c, intern!(py, "duration_ms"))?, "duration_ms")?);
            } else if text_in(&op, &["creat"]) {
                let ended = item(c, intern!(py, "ended"))?;
                if !ended.is_none() {
                    creates.push((item(c, intern!(py, "started"))?, ended,
                                  c.get_item(intern!(py, "path"))?));
                }
            }
            if let Some(t) = int_or_none(c, intern!(py, "thread"))? {
                if t >= 0 {
                    ns_threads += 1;
                    if t + 1 > ns_ids {
                        ns_ids = t + 1;
                    }
                }
            }
        }
    }
    plain_ms.sort_unstable();
    statg.sort_unstable();
    let out = PyDict::new(py);
    for (name, count) in [("plain", plain), ("fast_ids", fast_ids), ("ns_ids", ns_ids),
                          ("ns_threads", ns_threads)] {
        out.set_item(name, count)?;
    }
    for (name, values) in [("plain_ms", plain_ms), ("statg", statg)] {
        out.set_item(name, values)?;
    }
    out.set_item("reqs", reqs)?;
    out.set_item("dpm", dpm)?;
    out.set_item("early", early)?;
    out.set_item("creates", creates)?;
    Ok(out)
}
