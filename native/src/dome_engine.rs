//! The compiled DOME reassembler's Python class: the state and rules of dome_state.rs
//! (`parsers/dome_reassembly.DomeReassembler` rule for rule), fed events one by one
//! (`feed`, an event of either parser) or a stream's lines at once (`feed_chunk`, parsed
//! by a DomeScanner with no Python per line); its state through dome_snapshot.rs. Once
//! asked (`pair_checksums`), it runs the checksum stage (dome_checksums.rs) after the
//! reassembly: its records come out each followed by the checksum waits it ends. Its
//! records come back as dicts, or, with a `receiver`, go to it instead: to a DomeSummaryTally
//! (and on to a DomeCsvBlocks) as the engine's own values (no dict made), to anything else
//! as their dicts.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::dome_checksums::ChecksumWaits;
use crate::dome_csv::DomeCsvBlocks;
use crate::dome_event::DomeEvent;
use crate::dome_records::{Record, RecordCache};
use crate::dome_state::DomeState;
use crate::block::LineBlock;
use crate::dome_scan::{DomeLine, DomeScanner, FOREIGN, PARSED, UNMATCHED};
use crate::dome_stats::DomeStats;
use crate::dome_summary_tally::DomeSummaryTally;
use crate::chunk::{utf8, Chunk};
use crate::schema::{BUDGET, DONE, LIMIT, MALFORMED, SLOW};

/// The extension's DOME reassembler (parsers/compiled_dome.py wraps it).
#[pyclass(module = "dpmstream.parsers._native", subclass)]
pub struct DomeCore {
    pub st: DomeState,
    cache: RecordCache,
    /// Where the records go instead of the lists returned (which are then empty), or None.
    #[pyo3(get, set)]
    receiver: Option<PyObject>,
    checksums: Option<ChecksumWaits>,
    /// The records the last chunk gave: the next chunk's vector is made that large, where
    /// one grown from empty was copied over at each doubling (~35 instructions a record).
    records_hint: usize,
}

// SAFETY: as Core's (py_engine.rs): every method, and its drop, runs with the GIL held, so
// no two threads touch its Rc counts and cells at once. A worker's partition of DOME nodes
// is freed by a collection on whatever thread allocates (its consumer's own); marked
// unsendable, the engine was then leaked there with an error instead of freed.
unsafe impl Send for DomeCore {}
unsafe impl Sync for DomeCore {}

impl DomeCore {
    fn paired(&self) -> PyResult<&ChecksumWaits> {
        self.checksums.as_ref().ok_or_else(|| PyValueError::new_err("no checksum stage here: pair_checksums() first"))
    }

    /// The reassembly's records, each followed by the checksum waits it ends (when the
    /// stage runs here), as Python dicts.
    fn records<'py>(&mut self, py: Python<'py>, out: Vec<Record>) -> PyResult<Bound<'py, PyList>> {
        let out = match self.checksums.as_mut() {
            Some(waits) => waits.pair(out),
            None => out,
        };
        self.dicts(py, &out)
    }

    fn dicts<'py>(&mut self, py: Python<'py>, out: &[Record]) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        match &self.receiver {
            None => {
                for r in out {
                    list.append(r.to_py(py, &mut self.cache)?)?;
                }
            }
            Some(receiver) => {
                let receiver = receiver.clone_ref(py);
                for r in out {
                    self.deliver(py, &receiver, r)?;
                }
            }
        }
        Ok(list)
    }

    /// A record to `receiver`: a DomeSummaryTally's own (then on to its `forward`, if any),
    /// a DomeCsvBlocks's own (the CSV files: no dict made), anything else's as its dict.
    fn deliver(&mut self, py: Python<'_>, receiver: &PyObject, r: &Record) -> PyResult<()> {
        let target = receiver.bind(py);
        if let Ok(tally) = target.downcast::<DomeSummaryTally>() {
            let forward = {
                let mut tally = tally.try_borrow_mut()?;
                tally.tally_record(py, r)?;
                tally.forward.as_ref().map(|f| f.clone_ref(py))
            };
            return match forward {
                Some(forward) => self.deliver(py, &forward, r),
                None => Ok(()),
            };
        }
        if let Ok(blocks) = target.downcast::<DomeCsvBlocks>() {
            return blocks.try_borrow_mut()?.write_record(py, r);
        }
        target.call1((r.to_py(py, &mut self.cache)?,))?;
        Ok(())
    }
}

#[pymethods]
impl DomeCore {
    #[new]
    #[pyo3(signature = (timeout_ms=3_600_000, max_calls=100_000, max_puts=1_000_000, allowance_ms=2_000))]
    fn new(timeout_ms: i64, max_calls: usize, max_puts: usize, allowance_ms: i64) -> PyResult<Self> {
        if max_calls == 0 || max_puts == 0 {
            return Err(PyValueError::new_err("max_calls and max_puts must be at least 1"));
        }
        Ok(DomeCore {
            st: DomeState::new(timeout_ms, max_calls, max_puts, allowance_ms),
            cache: RecordCache::default(),
            receiver: None,
            checksums: None,
            records_hint: 0,
        })
    }

    /// One event: a DomeLine of the compiled scanner, or a Python DomeEvent.
    fn feed<'py>(&mut self, py: Python<'py>, ev: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        let mut out = Vec::new();
        if let Ok(line) = ev.downcast::<DomeLine>() {
            self.st.feed(&line.get().ev, &mut out);
        } else {
            self.st.feed(&DomeEvent::from_py(ev)?, &mut out);
        }
        self.records(py, out)
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
            Ok(b) => Chunk::Block(b.get()),
            Err(_) => Chunk::List(lines.downcast::<PyList>()?),
        };
        let mut scanner = scanner.borrow_mut();
        let (mut unmatched, mut foreign, mut latest) = (0usize, 0usize, latest);
        let mut hosts: Vec<(String, usize, i64)> = Vec::new();
        // The last parsed line's row of `hosts` and number in the state (usize::MAX: no
        // line yet): a line of the same host (most) takes both without a look-up by name.
        // `ev.same_host` compares with the last line scan_into gave a host, which is that
        // line: the one line it gives a host and then refuses (its stamp) ends this loop.
        let (mut row, mut host) = (usize::MAX, 0);
        let mut out = Vec::with_capacity(self.records_hint);
        // One event for all the lines: scan_into writes each over the one before.
        let mut ev = DomeEvent::empty();
        let (n, mut i) = (chunk.len(), start);
        let why = loop {
            if i >= n {
                break DONE;
            }
            let Some((raw, _holder)) = chunk.line(i)? else { break SLOW };
            // Not UTF-8: Python decodes it with replacement characters, and counts it.
            let Some(text) = utf8(raw) else { break SLOW };
            let result = scanner.scan_into(py, text, &mut ev)?;
            i += 1;
            match result {
                PARSED => {
                    if !(ev.same_host && row != usize::MAX) {
                        row = match hosts.iter().position(|h| h.0 == ev.host) {
                            Some(r) => r,
                            None => {
                                hosts.push((ev.host.clone(), 0, ev.ts));
                                hosts.len() - 1
                            }
                        };
                        host = self.st.hosts.id(&ev.host);
                    }
                    let h = &mut hosts[row];
                    h.1 += 1;
                    h.2 = h.2.max(ev.ts);
                    latest = latest.max(ev.ts);
                    self.st.feed_host(host, &ev, &mut out);
                }
                UNMATCHED => unmatched += 1,
                FOREIGN => foreign += 1,
                _ => break MALFORMED,
            }
            if limit.is_some_and(|l| latest > l) {
                break LIMIT;
            }
            if i - start >= budget {
                break BUDGET;
            }
        };
        self.records_hint = out.len();
        Ok((i, unmatched, foreign, hosts, latest, why, self.records(py, out)?))
    }

    fn advance<'py>(&mut self, py: Python<'py>, now_ms: i64) -> PyResult<Bound<'py, PyList>> {
        let mut out = Vec::new();
        self.st.advance(now_ms, &mut out);
        // with_checksums(the reassembler's advance) + the stage's advance, as WithChecksumWaits
        let out = match self.checksums.as_mut() {
            Some(waits) => {
                let mut paired = waits.pair(out);
                waits.advance(now_ms, &mut paired);
                paired
            }
            None => out,
        };
        self.dicts(py, &out)
    }

    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let mut out = Vec::new();
        self.st.finish(&mut out);
        let out = match self.checksums.as_mut() {
            Some(waits) => {
                let mut paired = waits.pair(out);
                waits.finish(&mut paired);
                paired
            }
            None => out,
        };
        self.dicts(py, &out)
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

    /// From now on run the checksum stage here (parsers/dome_checksums.ChecksumWaits's
    /// settings, which that class checks), from `state` (a ChecksumWaits snapshot of
    /// either engine): records come out each followed by the waits it ends, and advance
    /// and finish end the stage's runs too, after the reassembler's records.
    #[pyo3(signature = (timeout_ms, poll_interval_ms, max_open, allowance_ms, state=None))]
    fn pair_checksums(&mut self, timeout_ms: i64, poll_interval_ms: i64, max_open: usize, allowance_ms: i64,
                      state: Option<&Bound<'_, PyDict>>) -> PyResult<()> {
        let mut waits = ChecksumWaits::new(timeout_ms, poll_interval_ms, max_open, allowance_ms);
        if let Some(state) = state {
            crate::dome_snapshot::checksums_restore(&mut waits, state)?;
        }
        self.checksums = Some(waits);
        Ok(())
    }

    /// The checksum stage's counters (ChecksumStats by name and order).
    fn checksum_stats_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let waits = self.paired()?;
        for (name, value) in crate::dome_checksums::ChecksumStats::NAMES.iter().zip(waits.stats.values()) {
            d.set_item(*name, value)?;
        }
        Ok(d)
    }

    /// The checksum stage's state, as ChecksumWaits.snapshot() shapes it.
    fn checksum_snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        crate::dome_snapshot::checksums_snapshot(py, self.paired()?)
    }
}
