//! The compiled DOME engine's state as `DomeReassembler.snapshot()` shapes it (plain
//! lists and dicts, JSON-able), and back: a snapshot either engine wrote restores in
//! the other (parsers/dome_reassembly.py, parsers/dome_calls.py, parsers/dome_puts.py
//! state() / load_state()); and the checksum stage's (dome_checksums.rs) as
//! `parsers/dome_checksums.ChecksumWaits.snapshot()` shapes it.

use std::cmp::Reverse;

use pyo3::exceptions::{PyKeyError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use pyo3::IntoPyObjectExt;

use crate::dome_calls::OpenCall;
use crate::dome_checksums::{ChecksumStats, ChecksumWaits, Run};
use crate::hashing::FxSet;
use crate::dome_state::DomeState;
use crate::dome_clocks::{HostIds, NO_CLOCK};
use crate::dome_event::DomeEvent;
use crate::dome_puts::{name_key, name_parts, NameKey, OpenPut, PutChanges, PutTable, Thread, WaitItem};
use crate::dome_stats::DomeStats;
use crate::dome_records::Text;

macro_rules! row {
    ($py:expr; $($v:expr),* $(,)?) => {
        PyList::new($py, [$(($v).into_py_any($py)?),*])?
    };
}

fn item<'py>(d: &Bound<'py, PyDict>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    d.get_item(name)?.ok_or_else(|| PyKeyError::new_err(name.to_string()))
}

/// Item i of a snapshot row (a list after JSON, a list or tuple before).
fn at<'py, T: FromPyObject<'py>>(row: &Bound<'py, PyAny>, i: usize) -> PyResult<T> {
    row.get_item(i)?.extract()
}

/// Item i of a snapshot row, a text or None, as a shared Text.
fn opt_text(row: &Bound<'_, PyAny>, i: usize) -> PyResult<Option<Text>> {
    Ok(at::<Option<String>>(row, i)?.map(Text::from))
}

fn side(text: &str) -> &'static str {
    if text == "disk" { "disk" } else { "head" }
}

pub fn snapshot<'py>(py: Python<'py>, st: &DomeState) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    hosts_state(py, st, &d)?;
    let calls = PyDict::new(py);
    for (host, h) in st.calls.open.iter() {
        if h.calls.is_empty() {
            continue;
        }
        let rows = PyList::empty(py);
        for ((pid, tid), c) in h.in_order() {
            rows.append(call_row(py, pid, tid, c)?)?;
        }
        calls.set_item(st.hosts.name(*host), rows)?;
    }
    d.set_item("calls", calls)?;
    d.set_item("puts", puts_state(py, &st.puts, &st.hosts)?)?;
    Ok(d)
}

fn call_row<'py>(py: Python<'py>, pid: i64, tid: i64, c: &OpenCall) -> PyResult<Bound<'py, PyList>> {
    Ok(row![py; pid, tid, c.start, c.latest, c.framed, c.command.as_deref(), c.role.as_deref(), c.caller.as_deref(),
             c.remote.as_deref(), c.whole])
}

fn put_row<'py>(py: Python<'py>, hosts: &HostIds, p: &OpenPut) -> PyResult<Bound<'py, PyList>> {
    let threads = PyList::empty(py);
    for (h, pid, tid) in &p.threads {
        threads.append(row![py; hosts.name(*h), pid, tid])?;
    }
    Ok(row![py; p.seq, &p.head, p.pid, &p.lfn, p.put_time, p.latest, p.put_code, &p.server, &p.fs,
             p.sel_sec, p.count, &p.pfn, p.size, p.disk_time, p.head_time, p.disk_code, p.head_code,
             p.error, p.whole, threads])
}

/// The clocks, roles, pids, filesystem states and counters: bounded by hosts, processes
/// and filesystems.
fn hosts_state<'py>(py: Python<'py>, st: &DomeState, d: &Bound<'py, PyDict>) -> PyResult<()> {
    let clocks = PyDict::new(py);
    for (h, ms) in &st.clocks.rows {
        clocks.set_item(st.hosts.name(*h), ms)?;
    }
    d.set_item("clocks", clocks)?;
    let roles = PyDict::new(py);
    for (h, role) in st.roles.iter() {
        roles.set_item(st.hosts.name(*h), role)?;
    }
    d.set_item("roles", roles)?;
    let pids = PyList::empty(py);
    for ((h, prog), pid) in &st.pids.rows {
        pids.append(row![py; st.hosts.name(*h), prog, pid])?;
    }
    d.set_item("pids", pids)?;
    let fs = PyList::empty(py);
    for ((server, f), on) in &st.fs_enabled.rows {
        fs.append(row![py; server, f, on])?;
    }
    d.set_item("fs_enabled", fs)?;
    let stats = PyDict::new(py);
    for (name, value) in DomeStats::NAMES.iter().zip(st.stats.values()) {
        stats.set_item(*name, value)?;
    }
    d.set_item("stats", stats)?;
    Ok(())
}

fn puts_state<'py>(py: Python<'py>, t: &PutTable, hosts: &HostIds) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let open = PyList::empty(py);
    for p in t.in_order() {
        open.append(put_row(py, hosts, p)?)?;
    }
    d.set_item("open", open)?;
    for (name, heap) in [("deadlines", &t.deadlines), ("settling", &t.settling)] {
        let mut rows: Vec<(i64, i64)> = heap.iter().map(|Reverse(r)| *r).filter(|r| t.open.contains_key(&r.1)).collect();
        rows.sort();
        let list = PyList::empty(py);
        for (at, seq) in rows {
            list.append(row![py; at, seq])?;
        }
        d.set_item(name, list)?;
    }
    let list = PyList::empty(py);
    for ((h, pid, tid), seq) in &t.put_threads {
        if t.open.contains_key(seq) {
            list.append(row![py; hosts.name(*h), pid, tid, seq])?;
        }
    }
    d.set_item("put_threads", list)?;
    let list = PyList::empty(py);
    for ((h, pid, tid), (seq, s)) in &t.done_threads {
        if t.open.contains_key(seq) {
            list.append(row![py; hosts.name(*h), pid, tid, seq, *s])?;
        }
    }
    d.set_item("done_threads", list)?;
    let list = PyList::empty(py);
    for ((h, pid, lfn), seqs) in &t.unselected {
        list.append(row![py; h, pid, lfn, seqs.clone()])?;
    }
    d.set_item("unselected", list)?;
    let list = PyList::empty(py);
    for (key, seqs) in &t.by_name {
        let (server, base) = name_parts(key);
        list.append(row![py; server, base, seqs.clone()])?;
    }
    d.set_item("by_name", list)?;
    puts_rest(py, t, hosts, &d)?;
    Ok(d)
}

/// The put table's counts, offsets, waiting putdones and heads: bounded by processes,
/// hosts and the allowance, not by traffic. Their hosts by name, as the snapshot names them.
fn puts_rest<'py>(py: Python<'py>, t: &PutTable, hosts: &HostIds, d: &Bound<'py, PyDict>) -> PyResult<()> {
    d.set_item("seq", t.seq)?;
    for (name, map) in [("selected_count", &t.selected_count), ("offset", &t.offset)] {
        // Sorted by name: a map has no order, and the same state must give the same rest.
        let mut rows: Vec<_> = map.iter().map(|((h, pid), n)| (hosts.name(*h), pid, n)).collect();
        rows.sort();
        let list = PyList::empty(py);
        for (h, pid, n) in rows {
            list.append(row![py; h, pid, n])?;
        }
        d.set_item(name, list)?;
    }
    let list = PyList::empty(py);
    for (key, id) in &t.waiting_order {
        let item = &t.items[id];
        if item.waiting {
            let (server, base) = name_parts(key);
            list.append(row![py; server, base, item.ev.to_list(py)?, item.side])?;
        }
    }
    d.set_item("waiting", list)?;
    let mut heads: Vec<&str> = t.heads.iter().map(|h| hosts.name(*h)).collect();
    heads.sort();
    d.set_item("heads", heads)?;
    Ok(())
}

/// Start tracking changes (take_changes): everything open now counts as changed.
pub fn track_changes(st: &mut DomeState) {
    let mut calls = FxSet::default();
    for (host, h) in st.calls.open.iter() {
        calls.extend(h.calls.keys().map(|k| (*host, *k)));
    }
    st.calls.changed = Some(calls);
    let t = &st.puts;
    st.puts.changes = Some(PutChanges {
        puts: t.open.keys().map(|s| (*s, true)).collect(),
        unselected: t.unselected.keys().cloned().collect(),
        by_name: t.by_name.keys().cloned().collect(),
    });
}

/// What changed since the last take, in the shape of parsers/dome_reassembly.py's
/// take_changes(): the calls and puts changed (None: gone; the rest in activity order,
/// each put with its index items and whether it moved), the index keys changed, and
/// the bounded rest whole. Its cost follows the changes, not what is open.
pub fn take_changes<'py>(py: Python<'py>, st: &mut DomeState) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let changed = st.calls.changed.replace(FxSet::default()).unwrap_or_default();
    let calls = PyList::empty(py);
    let mut present = Vec::new();
    for (host, key) in changed {
        let name = st.hosts.name(host);
        match st.calls.open.get_ref(&host).and_then(|h| h.calls.get(&key)) {
            Some((stamp, _)) => present.push((*stamp, name, key, host)),
            None => calls.append(row![py; name, key.0, key.1, py.None()])?,
        }
    }
    present.sort();
    for (_, name, key, host) in present {
        let call = &st.calls.open.get_ref(&host).expect("a call present").calls[&key].1;
        calls.append(row![py; name, key.0, key.1, call_row(py, key.0, key.1, call)?])?;
    }
    d.set_item("calls", calls)?;
    let t = &mut st.puts;
    let changes = t.changes.replace(PutChanges::default()).unwrap_or_default();
    let t = &*t;
    let hosts = &st.hosts;
    let puts = PyList::empty(py);
    let mut present = Vec::new();
    for (seq, moved) in changes.puts {
        match t.open.get(&seq) {
            Some((stamp, _)) => present.push((*stamp, seq, moved)),
            None => puts.append(row![py; seq, py.None(), py.None(), false])?,
        }
    }
    present.sort();
    for (_, seq, moved) in present {
        let p = &t.open[&seq].1;
        puts.append(row![py; seq, put_row(py, hosts, p)?, put_items(py, t, hosts, p)?, moved])?;
    }
    d.set_item("puts", puts)?;
    let list = PyList::empty(py);
    for key in changes.unselected {
        let seqs = t.unselected.get(&key).cloned();
        list.append(row![py; &key.0, key.1, &key.2, seqs])?;
    }
    d.set_item("unselected", list)?;
    let list = PyList::empty(py);
    for key in changes.by_name {
        let seqs = t.by_name.get(&key).cloned();
        let (server, base) = name_parts(&key);
        list.append(row![py; server, base, seqs])?;
    }
    d.set_item("by_name", list)?;
    let rest = PyDict::new(py);
    hosts_state(py, st, &rest)?;
    puts_rest(py, &st.puts, &st.hosts, &rest)?;
    d.set_item("rest", rest)?;
    Ok(d)
}

/// A put's items in the indices by seq, as puts_state lists them: its deadline, its
/// settling disk Exiting times, its dome_put thread and its putdone threads.
fn put_items<'py>(py: Python<'py>, t: &PutTable, hosts: &HostIds, p: &OpenPut) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("deadlines", PyList::new(py, [row![py; p.deadline, p.seq]])?)?;
    if !p.settled.is_empty() {
        let mut times = p.settled.clone();
        times.sort();
        let list = PyList::empty(py);
        for at in times {
            list.append(row![py; at, p.seq])?;
        }
        d.set_item("settling", list)?;
    }
    if let Some(th) = p.thread.as_ref().filter(|th| t.put_threads.get(*th) == Some(&p.seq)) {
        d.set_item("put_threads", PyList::new(py, [row![py; hosts.name(th.0), th.1, th.2, p.seq]])?)?;
    }
    let list = PyList::empty(py);
    let mut seen: Vec<&Thread> = Vec::new();
    for th in &p.threads {
        if seen.contains(&th) {
            continue;
        }
        seen.push(th);
        if let Some((seq, side)) = t.done_threads.get(th) {
            if *seq == p.seq {
                list.append(row![py; hosts.name(th.0), th.1, th.2, p.seq, *side])?;
            }
        }
    }
    if !list.is_empty() {
        d.set_item("done_threads", list)?;
    }
    Ok(d)
}

pub fn restore(st: &mut DomeState, state: &Bound<'_, PyDict>) -> PyResult<()> {
    let mut fresh = DomeState::new(st.timeout_ms, st.calls.max_open, st.puts.max_open, st.allowance_ms);
    for (h, ms) in item(state, "clocks")?.downcast::<PyDict>()?.iter() {
        let h = fresh.hosts.id(&h.extract::<String>()?);
        fresh.clocks.set(h, ms.extract()?);
    }
    fresh.clock_bound = fresh.clocks.values().max().unwrap_or(NO_CLOCK);
    for (h, role) in item(state, "roles")?.downcast::<PyDict>()?.iter() {
        let h = fresh.hosts.id(&h.extract::<String>()?);
        fresh.set_role(h, &role.extract::<String>()?);
    }
    for r in item(state, "pids")?.try_iter()? {
        let r = r?;
        let h = fresh.hosts.id(&at::<String>(&r, 0)?);
        fresh.pids.set((h, at(&r, 1)?), at(&r, 2)?);
    }
    for r in item(state, "fs_enabled")?.try_iter()? {
        let r = r?;
        fresh.fs_enabled.set((at(&r, 0)?, at(&r, 1)?), r.get_item(2)?.is_truthy()?);
    }
    for (name, value) in item(state, "stats")?.downcast::<PyDict>()?.iter() {
        fresh.stats.set(&name.extract::<String>()?, value.extract()?);
    }
    for (host, rows) in item(state, "calls")?.downcast::<PyDict>()?.iter() {
        let name: String = host.extract()?;
        let host = fresh.hosts.id(&name);
        for r in rows.try_iter()? {
            let r = r?;
            let call = OpenCall {
                start: r.get_item(2)?.extract()?,
                latest: r.get_item(3)?.extract()?,
                framed: r.get_item(4)?.is_truthy()?,
                command: opt_text(&r, 5)?,
                role: opt_text(&r, 6)?,
                caller: opt_text(&r, 7)?,
                remote: opt_text(&r, 8)?,
                whole: r.get_item(9)?.is_truthy()?,
            };
            fresh.calls.insert(host, &name, (r.get_item(0)?.extract()?, r.get_item(1)?.extract()?), call);
        }
    }
    restore_puts(&mut fresh.puts, &mut fresh.hosts, item(state, "puts")?.downcast::<PyDict>()?)?;
    *st = fresh;
    Ok(())
}

/// A snapshot row's (server, basename) as the put table's name.
fn name_row(row: &Bound<'_, PyAny>) -> PyResult<NameKey> {
    let (server, base): (Option<String>, String) = (at(row, 0)?, at(row, 1)?);
    name_key(server.as_deref(), &base).ok_or_else(|| PyValueError::new_err(format!("a put's name is no basename: {base:?}")))
}

/// A snapshot row's (host, pid, TID) as the table's Thread.
fn thread(hosts: &mut HostIds, row: &Bound<'_, PyAny>) -> PyResult<Thread> {
    Ok((hosts.id(&at::<String>(row, 0)?), at(row, 1)?, at(row, 2)?))
}

fn restore_puts(t: &mut PutTable, hosts: &mut HostIds, s: &Bound<'_, PyDict>) -> PyResult<()> {
    t.seq = item(s, "seq")?.extract()?;
    for r in item(s, "open")?.try_iter()? {
        let r = r?;
        let g = |i: usize| r.get_item(i);
        let mut threads = Vec::new();
        for th in g(19)?.try_iter()? {
            let th = th?;
            threads.push(thread(hosts, &th)?);
        }
        let head: String = g(1)?.extract()?;
        t.place(OpenPut {
            seq: g(0)?.extract()?, host: hosts.id(&head), head, pid: g(2)?.extract()?, lfn: g(3)?.extract()?,
            put_time: g(4)?.extract()?, latest: g(5)?.extract()?, put_code: g(6)?.extract()?,
            server: g(7)?.extract()?, fs: g(8)?.extract()?, sel_sec: g(9)?.extract()?, count: g(10)?.extract()?,
            pfn: g(11)?.extract()?, size: g(12)?.extract()?, disk_time: g(13)?.extract()?,
            head_time: g(14)?.extract()?, disk_code: g(15)?.extract()?, head_code: g(16)?.extract()?,
            error: g(17)?.is_truthy()?, whole: g(18)?.is_truthy()?, threads, deadline: 0, settled: Vec::new(),
            thread: None,
        });
    }
    for r in item(s, "deadlines")?.try_iter()? {
        let r = r?;
        let (deadline, seq): (i64, i64) = (at(&r, 0)?, at(&r, 1)?);
        if let Some((_, p)) = t.open.get_mut(&seq) {
            p.deadline = deadline;
        }
        t.deadlines.push(Reverse((deadline, seq)));
    }
    for r in item(s, "settling")?.try_iter()? {
        let r = r?;
        let (returned, seq): (i64, i64) = (at(&r, 0)?, at(&r, 1)?);
        if let Some((_, p)) = t.open.get_mut(&seq) {
            p.settled.push(returned);
        }
        t.settling.push(Reverse((returned, seq)));
    }
    for r in item(s, "put_threads")?.try_iter()? {
        let r = r?;
        let (thread, seq): (Thread, i64) = (thread(hosts, &r)?, at(&r, 3)?);
        if let Some((_, p)) = t.open.get_mut(&seq) {
            p.thread = Some(thread);
        }
        t.put_threads.insert(thread, seq);
    }
    for r in item(s, "done_threads")?.try_iter()? {
        let r = r?;
        let sd: String = at(&r, 4)?;
        let thread = thread(hosts, &r)?;
        t.done_threads.insert(thread, (at(&r, 3)?, side(&sd)));
    }
    for r in item(s, "unselected")?.try_iter()? {
        let r = r?;
        t.unselected.insert((at(&r, 0)?, at(&r, 1)?, at(&r, 2)?), at(&r, 3)?);
    }
    for r in item(s, "by_name")?.try_iter()? {
        let r = r?;
        t.by_name.insert(name_row(&r)?, at(&r, 2)?);
    }
    let pfns: Vec<(String, i64)> = t.in_order().filter_map(|p| p.pfn.clone().map(|f| (f, p.seq))).collect();
    t.by_pfn.extend(pfns);
    for r in item(s, "selected_count")?.try_iter()? {
        let r = r?;
        t.selected_count.insert((hosts.id(&at::<String>(&r, 0)?), at(&r, 1)?), at(&r, 2)?);
    }
    for r in item(s, "offset")?.try_iter()? {
        let r = r?;
        t.offset.insert((hosts.id(&at::<String>(&r, 0)?), at(&r, 1)?), at(&r, 2)?);
    }
    for r in item(s, "waiting")?.try_iter()? {
        let r = r?;
        let key = name_row(&r)?;
        let ev = DomeEvent::from_py(&r.get_item(2)?)?;
        let sd = side(&r.get_item(3)?.extract::<String>()?);
        let id = t.next_item;
        t.next_item += 1;
        let host = hosts.id(&ev.host);
        t.items.insert(id, WaitItem { ev, host, side: sd, waiting: true });
        t.waiting.entry(key.clone()).or_default().push(id);
        t.waiting_order.push_back((key, id));
    }
    for h in item(s, "heads")?.try_iter()? {
        t.heads.insert(hosts.id(&h?.extract::<String>()?));
    }
    Ok(())
}

/// The checksum stage's state as `ChecksumWaits.snapshot()` shapes it: seq, clocks, stats,
/// and the open runs, least recently active first, as OpenRun's slots in order.
pub fn checksums_snapshot<'py>(py: Python<'py>, w: &ChecksumWaits) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("seq", w.seq)?;
    let clocks = PyDict::new(py);
    for (h, ms) in &w.clocks.rows {
        clocks.set_item(h, ms)?;
    }
    d.set_item("clocks", clocks)?;
    let stats = PyDict::new(py);
    for (name, value) in ChecksumStats::NAMES.iter().zip(w.stats.values()) {
        stats.set_item(*name, value)?;
    }
    d.set_item("stats", stats)?;
    let open = PyList::empty(py);
    for r in w.runs() {
        open.append(row![py; r.seq, &*r.head, &*r.caller, r.client.as_deref(), r.start, r.last_start, r.last_end,
                         r.polls, r.endings, r.code, r.ended, r.overlap, r.whole])?;
    }
    d.set_item("open", open)?;
    Ok(d)
}

/// Take a checksum stage's snapshot (either engine's) into `w`, which holds nothing yet.
pub fn checksums_restore(w: &mut ChecksumWaits, state: &Bound<'_, PyDict>) -> PyResult<()> {
    w.seq = item(state, "seq")?.extract()?;
    for (h, ms) in item(state, "clocks")?.downcast::<PyDict>()?.iter() {
        w.clocks.set(h.extract()?, ms.extract()?);
    }
    for (name, value) in item(state, "stats")?.downcast::<PyDict>()?.iter() {
        w.stats.set(&name.extract::<String>()?, value.extract()?);
    }
    for r in item(state, "open")?.try_iter()? {
        let r = r?;
        w.restore_run(Run {
            seq: at(&r, 0)?, head: at::<String>(&r, 1)?.into(), caller: at::<String>(&r, 2)?.into(),
            client: at::<Option<String>>(&r, 3)?.map(Into::into), start: at(&r, 4)?,
            last_start: at(&r, 5)?, last_end: at(&r, 6)?, polls: at(&r, 7)?, endings: at(&r, 8)?,
            code: at(&r, 9)?, ended: r.get_item(10)?.is_truthy()?, overlap: r.get_item(11)?.is_truthy()?,
            whole: r.get_item(12)?.is_truthy()?,
        });
    }
    Ok(())
}
