//! The compiled DOME reassembler: `parsers/dome_reassembly.DomeReassembler` rule for rule
//! (the per-host clocks and watermarks, the host's role, process lives, the handlers of
//! each role, capacity and filesystem events), over the call table (dome_calls) and the
//! put table (dome_puts). Fed events one by one (`feed`, an event of either parser) or a
//! stream's lines at once (`feed_chunk`, parsed by a DomeScanner with no Python per line).

use std::collections::HashMap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::dome_calls::{role_of_query, CallTable};
use crate::dome_event::{DomeEvent, Role, Val, COUNT, FS, PHYS, FREE, QUERY, SERVER};
use crate::dome_puts::PutTable;
use crate::dome_records::Record;
use crate::block::LineBlock;
use crate::dome_scan::{DomeLine, DomeScanner, Outcome, FOREIGN, UNMATCHED};
use crate::dome_stats::DomeStats;
use crate::chunk::Chunk;
use crate::schema::{BUDGET, DONE, LIMIT, MALFORMED, SLOW};

/// Why feed_chunk stopped, beyond engine.rs's reasons: lines[next - 1] was malformed.

/// A map that keeps its keys in insertion order (Python's dict), for the tables whose
/// order shows in the records (clocks: advance() sweeps hosts in that order).
#[derive(Default, Clone)]
pub struct Ordered<K, V> {
    pub rows: Vec<(K, V)>,
    index: HashMap<K, usize>,
}

impl<K: std::hash::Hash + Eq + Clone, V: Copy> Ordered<K, V> {
    pub fn get<Q>(&self, key: &Q) -> Option<V>
    where
        K: std::borrow::Borrow<Q>,
        Q: std::hash::Hash + Eq + ?Sized,
    {
        self.index.get(key).map(|&i| self.rows[i].1)
    }
    pub fn set(&mut self, key: K, value: V) {
        match self.index.get(&key) {
            Some(&i) => self.rows[i].1 = value,
            None => {
                self.index.insert(key.clone(), self.rows.len());
                self.rows.push((key, value));
            }
        }
    }
    pub fn values(&self) -> impl Iterator<Item = V> + '_ {
        self.rows.iter().map(|(_, v)| *v)
    }
}

pub type Clocks = Ordered<String, i64>;

pub struct DomeState {
    pub timeout_ms: i64,
    pub allowance_ms: i64,
    pub stats: DomeStats,
    pub clocks: Clocks,
    pub roles: HashMap<String, String>,
    pub role_order: Vec<String>,
    pub pids: Ordered<(String, String), i64>,
    pub fs_enabled: Ordered<(Option<String>, Option<String>), bool>,
    pub calls: CallTable,
    pub puts: PutTable,
}

impl DomeState {
    pub fn new(timeout_ms: i64, max_calls: usize, max_puts: usize, allowance_ms: i64) -> Self {
        DomeState {
            timeout_ms,
            allowance_ms,
            stats: DomeStats::default(),
            clocks: Ordered::default(),
            roles: HashMap::new(),
            role_order: Vec::new(),
            pids: Ordered::default(),
            fs_enabled: Ordered::default(),
            calls: CallTable::new(max_calls),
            puts: PutTable::new(max_puts, timeout_ms),
        }
    }

    pub fn set_role(&mut self, host: &str, role: &str) {
        if !self.roles.contains_key(host) {
            self.role_order.push(host.to_string());
        }
        self.roles.insert(host.to_string(), role.to_string());
    }

    pub fn feed(&mut self, ev: &DomeEvent, out: &mut Vec<Record>) {
        self.stats.lines += 1;
        if self.clocks.get(ev.host.as_str()).is_none_or(|c| ev.ts > c) {
            self.clocks.set(ev.host.clone(), ev.ts);
        }
        if ev.role == Role::JournaldSuppressed {
            // journald's notice: no process's line, a record of the gap.
            let lines = Val::int(ev.field(COUNT)).unwrap_or(0);
            self.stats.journald_suppressed_lines += lines;
            out.push(Record::JournaldGap { time: ev.ts, host: ev.host.clone(), program: ev.program.clone(), lines });
            self.sweep(&ev.host, out);
            return;
        }
        self.learn_role(ev);
        self.process_life(ev, out);
        if matches!(ev.role, Role::Accept | Role::Call) && ev.tid >= 0 {
            self.puts.thread_reopened(ev);
        }
        let st = &mut self.stats;
        match ev.role {
            Role::Put => self.puts.entering(ev, st, out),
            Role::PutSelected => self.puts.selected(ev, st, out),
            Role::Returns if ev.tid >= 0 => self.puts.returns(ev, st, out),
            Role::PutdoneDisk => self.puts.putdone(ev, "disk", st),
            Role::PutdoneHead => self.puts.putdone(ev, "head", st),
            Role::PutdoneError => self.puts.putdone_error(ev, st),
            Role::Capacity => {
                st.capacity += 1;
                out.push(Record::Capacity {
                    time: ev.ts, host: ev.host.clone(), fs: ev.field(FS).clone(),
                    phys: ev.field(PHYS).clone(), free: ev.field(FREE).clone(),
                });
            }
            Role::FsEnabled | Role::FsDisabled => {
                let key = (ev.text(SERVER).map(str::to_string), ev.text(FS).map(str::to_string));
                let enabled = ev.role == Role::FsEnabled;
                st.fs_events += 1;
                out.push(Record::FsEvent {
                    time: ev.ts, host: ev.host.clone(), server: ev.field(SERVER).clone(), fs: ev.field(FS).clone(),
                    enabled, transition: self.fs_enabled.get(&key).unwrap_or(true) != enabled,
                });
                self.fs_enabled.set(key, enabled);
            }
            _ => {}
        }
        if ev.tid >= 0 {
            self.calls.line(ev, &self.roles, &mut self.stats, out);
        } else if ev.role.frames() {
            self.stats.unframed_lines += 1;
        }
        self.sweep(&ev.host, out);
    }

    pub fn advance(&mut self, now_ms: i64, out: &mut Vec<Record>) {
        for i in 0..self.clocks.rows.len() {
            if self.clocks.rows[i].1 < now_ms {
                self.clocks.rows[i].1 = now_ms;
            }
            let host = self.clocks.rows[i].0.clone();
            self.sweep(&host, out);
        }
    }

    pub fn finish(&mut self, out: &mut Vec<Record>) {
        self.calls.finish(&self.roles, &mut self.stats, out);
        self.puts.finish(&self.clocks, &mut self.stats, out);
    }

    fn learn_role(&mut self, ev: &DomeEvent) {
        let role = if ev.role == Role::Command {
            role_of_query(ev.text(QUERY))
        } else if ev.role.says_head() {
            Some("head")
        } else if ev.role.says_disk() {
            Some("disk")
        } else {
            None
        };
        if let Some(role) = role {
            self.set_role(&ev.host, role);
        }
    }

    fn process_life(&mut self, ev: &DomeEvent, out: &mut Vec<Record>) {
        let key = (ev.host.clone(), ev.program.clone());
        let before = self.pids.get(&key);
        self.pids.set(key, ev.pid);
        if ev.role == Role::Startup {
            if before.is_some() {
                self.stats.process_deaths += 1;
            }
            self.calls.end_process(&ev.host, None, &self.roles, &mut self.stats, out);
            self.puts.process_started(&ev.host, ev.pid);
        } else if before.is_some_and(|b| b != ev.pid) {
            self.stats.process_deaths += 1;
            self.calls.end_process(&ev.host, Some(ev.pid), &self.roles, &mut self.stats, out);
        }
    }

    fn sweep(&mut self, host: &str, out: &mut Vec<Record>) {
        let Some(clock) = self.clocks.get(host) else { return };
        let horizon = clock - self.allowance_ms - self.timeout_ms;
        self.calls.expire(host, horizon, &self.roles, &mut self.stats, out);
        self.puts.expire(&self.clocks, self.allowance_ms, &mut self.stats, out);
    }
}

/// The extension's DOME reassembler (parsers/compiled_dome.py wraps it).
#[pyclass(module = "dpmstream.parsers._native", subclass, unsendable)]
pub struct DomeCore {
    pub st: DomeState,
}

fn records<'py>(py: Python<'py>, out: &[Record]) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for r in out {
        list.append(r.to_py(py)?)?;
    }
    Ok(list)
}

#[pymethods]
impl DomeCore {
    #[new]
    #[pyo3(signature = (timeout_ms=3_600_000, max_calls=100_000, max_puts=1_000_000, allowance_ms=2_000))]
    fn new(timeout_ms: i64, max_calls: usize, max_puts: usize, allowance_ms: i64) -> PyResult<Self> {
        if max_calls == 0 || max_puts == 0 {
            return Err(PyValueError::new_err("max_calls and max_puts must be at least 1"));
        }
        Ok(DomeCore { st: DomeState::new(timeout_ms, max_calls, max_puts, allowance_ms) })
    }

    /// One event: a DomeLine of the compiled scanner, or a Python DomeEvent.
    fn feed<'py>(&mut self, py: Python<'py>, ev: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        let mut out = Vec::new();
        if let Ok(line) = ev.downcast::<DomeLine>() {
            self.st.feed(&line.get().ev, &mut out);
        } else {
            self.st.feed(&DomeEvent::from_py(ev)?, &mut out);
        }
        records(py, &out)
    }

    /// One stream's lines, lines[start:] (a LineBlock, or a list of bytes or str),
    /// parsed by `scanner` and fed in order with no Python per line, as Source.feed_chunk
    /// takes them (parsers/pipeline.py): until the lines end, a line needs Python (not
    /// UTF-8, not bytes or str: SLOW, lines[next] is left to the caller), a line was
    /// malformed (MALFORMED: lines[next - 1], the scanner's `result` and `reason` say
    /// why, for the caller to remember), the latest stamp read passes `limit` (LIMIT), or
    /// `budget` lines were taken (BUDGET: an event-time sweep is due). `latest`: the
    /// stream's latest stamp before these lines.
    /// Returns (next, unmatched, foreign, [(host, parsed, latest stamp)] in the order the
    /// hosts first came, latest stamp, why, records).
    #[pyo3(signature = (scanner, lines, start, limit, budget, latest))]
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn feed_chunk<'py>(&mut self, py: Python<'py>, scanner: &Bound<'py, DomeScanner>, lines: &Bound<'py, PyAny>,
                       start: usize, limit: Option<i64>, budget: usize, latest: i64)
                       -> PyResult<(usize, usize, usize, Vec<(String, usize, i64)>, i64, u8, Bound<'py, PyList>)> {
        let chunk = match lines.downcast::<LineBlock>() {
            Ok(b) => Chunk::Block(b.get(), b.get().data(py)),
            Err(_) => Chunk::List(lines.downcast::<PyList>()?),
        };
        let mut scanner = scanner.borrow_mut();
        let (mut unmatched, mut foreign, mut latest) = (0usize, 0usize, latest);
        let mut hosts: Vec<(String, usize, i64)> = Vec::new();
        let mut out = Vec::new();
        let (n, mut i) = (chunk.len(), start);
        let why = loop {
            if i >= n {
                break DONE;
            }
            let Some((raw, _holder)) = chunk.line(i)? else { break SLOW };
            // Not UTF-8: Python decodes it with replacement characters, and counts it.
            let Ok(text) = std::str::from_utf8(raw) else { break SLOW };
            let outcome = scanner.scan(py, text)?;
            i += 1;
            match outcome {
                Outcome::Parsed(ev) => {
                    match hosts.iter_mut().find(|h| h.0 == ev.host) {
                        Some(h) => {
                            h.1 += 1;
                            h.2 = h.2.max(ev.ts);
                        }
                        None => hosts.push((ev.host.clone(), 1, ev.ts)),
                    }
                    latest = latest.max(ev.ts);
                    self.st.feed(&ev, &mut out);
                }
                Outcome::Failed(UNMATCHED) => unmatched += 1,
                Outcome::Failed(FOREIGN) => foreign += 1,
                Outcome::Failed(_) => break MALFORMED,
            }
            if limit.is_some_and(|l| latest > l) {
                break LIMIT;
            }
            if i - start >= budget {
                break BUDGET;
            }
        };
        Ok((i, unmatched, foreign, hosts, latest, why, records(py, &out)?))
    }

    fn advance<'py>(&mut self, py: Python<'py>, now_ms: i64) -> PyResult<Bound<'py, PyList>> {
        let mut out = Vec::new();
        self.st.advance(now_ms, &mut out);
        records(py, &out)
    }

    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let mut out = Vec::new();
        self.st.finish(&mut out);
        records(py, &out)
    }

    fn stats_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (name, value) in DomeStats::NAMES.iter().zip(self.st.stats.values()) {
            d.set_item(*name, value)?;
        }
        Ok(d)
    }

    #[getter]
    fn timeout_ms(&self) -> i64 {
        self.st.timeout_ms
    }

    #[getter]
    fn allowance_ms(&self) -> i64 {
        self.st.allowance_ms
    }

    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        crate::dome_snapshot::snapshot(py, &self.st)
    }

    /// From now on take_changes() gives what changed (the first time: all that is open).
    fn track_changes(&mut self) {
        crate::dome_snapshot::track_changes(&mut self.st);
    }

    /// What changed since the last take (parsers/dome_reassembly.DomeReassembler's shape).
    fn take_changes<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        crate::dome_snapshot::take_changes(py, &mut self.st)
    }

    /// Take the state of a snapshot (either engine's), replacing what it holds.
    fn restore(&mut self, state: &Bound<'_, PyDict>) -> PyResult<()> {
        crate::dome_snapshot::restore(&mut self.st, state)
    }
}
