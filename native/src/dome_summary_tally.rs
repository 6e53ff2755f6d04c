//! The DOME section of the summary gathered in the extension: what
//! streams/sinks/dome_summary.DomeSummary keeps, from the same records, by the same rules
//! and with the same reservoir samples (tally.rs's Series), so that a DOME replay that only
//! summarises runs no Python per record to sum them. DomeSummary stays the reference: it
//! loads this state when the run ends (streams/sinks/tally.py), and
//! tests/streams/sinks/test_dome_summary_tally.py requires the same state and rendered summary
//! from both. A record comes as its dict (the tally called with it: the checksum stage's, or any
//! driver's) or as the compiled engine's own value (dome_records.rs's Record: no dict
//! made); each is read into a `Facts` and the rules are written once, over those.

use pyo3::exceptions::{PyKeyError, PyTypeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use crate::byte_runs::equal;
use crate::dome_event::Val;
use crate::dome_records::{Record, Text};
use crate::hashing::FxMap;
use crate::tally::{tally_and_forward, Name, NameTable, Ordered, Series, NONE};

/// A key's part as a record holds it: None, an int or a str (a capacity's `fs`, `phys`
/// and `free` are the profile's fields: a str, or an int where the profile reads one).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
enum Atom {
    #[default]
    None,
    Int(i64),
    Text(Name),
}

/// What DomeSummary.write reads of a record, by kind.
enum Facts {
    Call { start: Option<i64>, end: Option<i64>, role: Name, command: Name, http_code: Option<i64>, whole: bool, duration: Option<i64> },
    Put { put_time: Option<i64>, ended: Option<i64>, status: Name, end_reason: Name, put_to_putdone: Option<i64>, whole: bool },
    Checksum { start: Option<i64>, end: Option<i64>, outcome: Name, overlap: bool, whole: bool, wait: Option<i64> },
    Capacity { time: Option<i64>, host: Atom, fs: Atom, phys: Atom, free: Atom },
    FsEvent { time: Option<i64>, server: Atom, fs: Atom, event: Name, transition: bool },
    JournaldGap { time: Option<i64>, host: Atom, lines: i64 },
    Other, // a kind the summary does not read
}

/// The code classes, by class_index.
const CLASSES: [&str; 5] = ["2xx", "3xx", "4xx", "5xx", "none"];

/// dome_records.code_class's place in CLASSES: 2xx..5xx, or none (a cut call, a code
/// outside 200..599).
fn class_index(code: Option<i64>) -> usize {
    match code {
        Some(c @ 200..=599) => (c / 100 - 2) as usize,
        _ => 4,
    }
}

/// dome_records.code_class.
#[cfg(test)]
fn code_class(code: Option<i64>) -> &'static str {
    CLASSES[class_index(code)]
}

/// Slots of the memory of the engine's shared texts (a call's role and command: a site
/// has few of each).
const SHARED_SLOTS: usize = 64;

#[derive(Default)]
struct Capacity {
    time: Option<i64>,
    phys: Atom,
    free: Atom,
}

#[pyclass(module = "dpmstream.parsers._native")]
pub struct DomeSummaryTally {
    reservoir: usize,
    /// Called with each record after it is tallied (the run's other sinks), or None.
    #[pyo3(get, set)]
    pub(crate) forward: Option<PyObject>,
    /// Records the engine handed over as they are (no dict made).
    #[pyo3(get)]
    engine_records: u64,
    names: NameTable,
    known_commands: FxMap<Box<str>, ()>,
    other_command: Name,
    unknown_role: Name,
    timed_outcomes: Vec<Name>,
    /// A command's name -> its label (the name, or other_command), found once per name.
    command_labels: Vec<Option<Name>>,
    /// CLASSES' names, each found at its first call.
    class_names: [Option<Name>; CLASSES.len()],
    /// The engine's shared texts (Text) seen last, by their address, with their names: a
    /// text at the same address with the same bytes has its name found with no hash of
    /// them and no table probe (two texts a call record). A copy, not the Rc (which would
    /// make the tally !Send); compared, as a freed text's address may be another's later.
    shared: Vec<Option<(usize, Box<str>, Name)>>,
    first_ms: Option<i64>,
    last_ms: Option<i64>,
    calls: Ordered<(Name, Name, Name), u64>,
    call_seconds: Ordered<(Name, Name), Series>,
    whole_second_calls: u64,
    puts: Ordered<(Name, Name), u64>,
    put_to_putdone: Series,
    put_to_putdone_whole: Series,
    checksums: Ordered<Name, u64>,
    checksum_wait: Series,
    checksum_wait_whole: Series,
    capacity: Ordered<(Atom, Atom), Capacity>,
    fs_events: Ordered<(Atom, Atom, Name), u64>,
    suppressed: Ordered<Atom, i64>,
}

/// A record's dict, read as DomeSummary.write reads it (`record[...]`: a missing key is
/// a KeyError, a value of the wrong type a TypeError).
struct DictReader<'a, 'py> {
    d: &'a Bound<'py, PyDict>,
}

impl<'py> DictReader<'_, 'py> {
    fn need(&self, key: &Bound<'py, PyString>) -> PyResult<Bound<'py, PyAny>> {
        self.d.get_item(key)?.ok_or_else(|| PyKeyError::new_err(key.clone().unbind()))
    }
    fn int(&self, key: &Bound<'py, PyString>) -> PyResult<Option<i64>> {
        let v = self.need(key)?;
        if v.is_none() {
            return Ok(None);
        }
        v.extract::<i64>().map(Some)
    }
    fn truthy(&self, key: &Bound<'py, PyString>) -> PyResult<bool> {
        self.need(key)?.is_truthy()
    }
    fn name(&self, key: &Bound<'py, PyString>, names: &mut NameTable) -> PyResult<Name> {
        names.of_py(&self.need(key)?)
    }
    fn atom(&self, key: &Bound<'py, PyString>, names: &mut NameTable) -> PyResult<Atom> {
        atom_of_py(&self.need(key)?, names)
    }
}

fn atom_of_py(v: &Bound<'_, PyAny>, names: &mut NameTable) -> PyResult<Atom> {
    if v.is_none() {
        Ok(Atom::None)
    } else if v.is_instance_of::<PyString>() {
        Ok(Atom::Text(names.of_py(v)?))
    } else if let Ok(i) = v.extract::<i64>() {
        Ok(Atom::Int(i))
    } else {
        Err(PyTypeError::new_err("a DOME record's key is not None, an int or a str"))
    }
}

impl DomeSummaryTally {
    fn text(&mut self, py: Python<'_>, text: &str) -> Name {
        self.names.of_text(text, || PyString::new(py, text).unbind())
    }

    /// The name of an engine's shared text (or None).
    fn shared_text(&mut self, py: Python<'_>, text: Option<&Text>) -> Name {
        let Some(t) = text else { return NONE };
        let address = t.as_ptr() as usize;
        // an Rc<str>'s text is 8-byte aligned (after its two counts): the bits above those
        let slot = (address >> 3) % SHARED_SLOTS;
        if let Some((held_at, held, name)) = &self.shared[slot] {
            if *held_at == address && equal(held.as_bytes(), t.as_bytes()) {
                return *name;
            }
        }
        let name = self.text(py, t);
        self.shared[slot] = Some((address, Box::from(&**t), name));
        name
    }

    fn class_name(&mut self, py: Python<'_>, code: Option<i64>) -> Name {
        let at = class_index(code);
        match self.class_names[at] {
            Some(name) => name,
            None => {
                let name = self.text(py, CLASSES[at]);
                self.class_names[at] = Some(name);
                name
            }
        }
    }

    fn atom(&mut self, py: Python<'_>, v: &Option<Val>) -> Atom {
        match v {
            None => Atom::None,
            Some(Val::Int(i)) => Atom::Int(*i),
            Some(Val::Str(s)) => Atom::Text(self.text(py, s)),
        }
    }

    fn atom_py<'py>(&self, py: Python<'py>, a: Atom) -> PyResult<Bound<'py, PyAny>> {
        Ok(match a {
            Atom::None => py.None().into_bound(py),
            Atom::Int(i) => i.into_pyobject(py)?.into_any(),
            Atom::Text(n) => self.names.py(py, n),
        })
    }

    /// The facts of a record's dict.
    fn dict_facts(&mut self, d: &Bound<'_, PyDict>) -> PyResult<Facts> {
        let py = d.py();
        let r = DictReader { d };
        let names = &mut self.names;
        let kind = r.need(intern!(py, "kind"))?;
        let Ok(kind) = kind.downcast::<PyString>() else { return Ok(Facts::Other) };
        Ok(match kind.to_str()? {
            "dome_call" => {
                let whole = r.truthy(intern!(py, "whole_seconds"))?;
                Facts::Call {
                    start: r.int(intern!(py, "start"))?,
                    end: r.int(intern!(py, "end"))?,
                    role: r.name(intern!(py, "role"), names)?,
                    command: r.name(intern!(py, "command"), names)?,
                    http_code: r.int(intern!(py, "http_code"))?,
                    whole,
                    // read only where the summary reads it (not of a whole-second call)
                    duration: if whole { None } else { r.int(intern!(py, "duration"))? },
                }
            }
            "dome_put" => Facts::Put {
                put_time: r.int(intern!(py, "put_time"))?,
                ended: r.int(intern!(py, "ended"))?,
                status: r.name(intern!(py, "status"), names)?,
                end_reason: r.name(intern!(py, "end_reason"), names)?,
                put_to_putdone: r.int(intern!(py, "put_to_putdone"))?,
                whole: r.truthy(intern!(py, "whole_seconds"))?,
            },
            "dome_checksum" => Facts::Checksum {
                start: r.int(intern!(py, "start"))?,
                end: r.int(intern!(py, "end"))?,
                outcome: r.name(intern!(py, "outcome"), names)?,
                overlap: r.truthy(intern!(py, "overlap"))?,
                whole: r.truthy(intern!(py, "whole_seconds"))?,
                wait: r.int(intern!(py, "wait"))?,
            },
            "dome_capacity" => Facts::Capacity {
                time: r.int(intern!(py, "time"))?,
                host: r.atom(intern!(py, "host"), names)?,
                fs: r.atom(intern!(py, "fs"), names)?,
                phys: r.atom(intern!(py, "phys"), names)?,
                free: r.atom(intern!(py, "free"), names)?,
            },
            "dome_fs_event" => Facts::FsEvent {
                time: r.int(intern!(py, "time"))?,
                server: r.atom(intern!(py, "server"), names)?,
                fs: r.atom(intern!(py, "fs"), names)?,
                event: r.name(intern!(py, "event"), names)?,
                transition: r.truthy(intern!(py, "transition"))?,
            },
            "dome_journald_gap" => Facts::JournaldGap {
                time: r.int(intern!(py, "time"))?,
                host: r.atom(intern!(py, "host"), names)?,
                lines: r.int(intern!(py, "lines"))?.ok_or_else(|| PyTypeError::new_err("a journald gap's lines is None"))?,
            },
            _ => Facts::Other,
        })
    }

    /// The facts of the engine's record (the values its dict would hold: dome_records.rs).
    fn rec_facts(&mut self, py: Python<'_>, rec: &Record) -> Facts {
        match rec {
            Record::Call(c) => Facts::Call {
                start: Some(c.start),
                end: c.end,
                role: self.shared_text(py, c.role.as_ref()),
                command: self.shared_text(py, c.command.as_ref()),
                http_code: c.http_code,
                whole: c.whole_seconds,
                duration: c.duration,
            },
            Record::Put(p) => Facts::Put {
                put_time: Some(p.put_time),
                ended: Some(p.ended),
                status: self.text(py, p.status),
                end_reason: self.text(py, p.end_reason),
                put_to_putdone: p.put_to_putdone,
                whole: p.whole_seconds,
            },
            Record::Capacity { time, host, fs, phys, free } => {
                let host = Atom::Text(self.text(py, host));
                Facts::Capacity { time: Some(*time), host, fs: self.atom(py, fs), phys: self.atom(py, phys), free: self.atom(py, free) }
            }
            Record::FsEvent { time, server, fs, enabled, transition, .. } => Facts::FsEvent {
                time: Some(*time),
                server: self.atom(py, server),
                fs: self.atom(py, fs),
                event: self.text(py, if *enabled { "enabled" } else { "disabled" }),
                transition: *transition,
            },
            Record::JournaldGap { time, host, lines, .. } => {
                Facts::JournaldGap { time: Some(*time), host: Atom::Text(self.text(py, host)), lines: *lines }
            }
            Record::Checksum(c) => Facts::Checksum {
                start: Some(c.start),
                end: Some(c.end),
                outcome: self.text(py, c.outcome),
                overlap: c.overlap,
                whole: c.whole_seconds,
                wait: Some(c.wait),
            },
        }
    }

    fn cover(&mut self, t: Option<i64>) {
        if let Some(t) = t {
            if self.first_ms.is_none_or(|f| t < f) {
                self.first_ms = Some(t);
            }
            if self.last_ms.is_none_or(|l| t > l) {
                self.last_ms = Some(t);
            }
        }
    }

    /// command_label: the command's name if it is a known one, else other_command.
    fn command_label(&mut self, py: Python<'_>, command: Name) -> PyResult<Name> {
        if let Some(Some(label)) = self.command_labels.get(command as usize) {
            return Ok(*label);
        }
        let label = if command == NONE {
            self.other_command
        } else {
            let text = self.names.py(py, command);
            let text = text.downcast::<PyString>()?.to_str()?;
            if self.known_commands.contains_key(text) { command } else { self.other_command }
        };
        if self.command_labels.len() <= command as usize {
            self.command_labels.resize(command as usize + 1, None);
        }
        self.command_labels[command as usize] = Some(label);
        Ok(label)
    }

    /// DomeSummary.write.
    fn tally(&mut self, py: Python<'_>, facts: Facts) -> PyResult<()> {
        let reservoir = self.reservoir;
        match facts {
            Facts::Call { start, end, role, command, http_code, whole, duration } => {
                self.cover(start);
                self.cover(end);
                let role = if self.names.truthy[role as usize] { role } else { self.unknown_role };
                let command = self.command_label(py, command)?;
                let class = self.class_name(py, http_code);
                *self.calls.entry((role, command, class)) += 1;
                if whole {
                    self.whole_second_calls += 1;
                } else if let Some(d) = duration {
                    self.call_seconds.entry((role, command)).add(d, reservoir);
                }
            }
            Facts::Put { put_time, ended, status, end_reason, put_to_putdone, whole } => {
                self.cover(put_time);
                self.cover(ended);
                *self.puts.entry((status, end_reason)) += 1;
                if let Some(v) = put_to_putdone {
                    let series = if whole { &mut self.put_to_putdone_whole } else { &mut self.put_to_putdone };
                    series.add(v, reservoir);
                }
            }
            Facts::Checksum { start, end, outcome, overlap, whole, wait } => {
                self.cover(start);
                self.cover(end);
                *self.checksums.entry(outcome) += 1;
                if self.timed_outcomes.contains(&outcome) && !overlap {
                    let wait = wait.ok_or_else(|| PyTypeError::new_err("a timed checksum wait's wait is None"))?;
                    let series = if whole { &mut self.checksum_wait_whole } else { &mut self.checksum_wait };
                    series.add(wait, reservoir);
                }
            }
            Facts::Capacity { time, host, fs, phys, free } => {
                self.cover(time);
                *self.capacity.entry((host, fs)) = Capacity { time, phys, free };
            }
            Facts::FsEvent { time, server, fs, event, transition } => {
                self.cover(time);
                if transition {
                    *self.fs_events.entry((server, fs, event)) += 1;
                }
            }
            Facts::JournaldGap { time, host, lines } => {
                self.cover(time);
                *self.suppressed.entry(host) += lines;
            }
            Facts::Other => {}
        }
        Ok(())
    }

    fn tally_dict(&mut self, record: &Bound<'_, PyDict>) -> PyResult<()> {
        let facts = self.dict_facts(record)?;
        self.tally(record.py(), facts)
    }

    /// A record the compiled DOME engine hands over: its own value, tallied as its dict
    /// would be.
    pub(crate) fn tally_record(&mut self, py: Python<'_>, rec: &Record) -> PyResult<()> {
        self.engine_records += 1;
        let facts = self.rec_facts(py, rec);
        self.tally(py, facts)
    }
}

#[pymethods]
impl DomeSummaryTally {
    /// `known_commands`: dome_records.KNOWN_COMMANDS, `other_command` the label of the
    /// rest; `unknown_role` the label of a call with no role; `timed_outcomes` the
    /// checksum outcomes whose waits are timed.
    #[new]
    #[pyo3(signature = (reservoir, known_commands, other_command, unknown_role, timed_outcomes, forward=None))]
    fn new(py: Python<'_>, reservoir: usize, known_commands: Vec<String>, other_command: &str, unknown_role: &str,
           timed_outcomes: Vec<String>, forward: Option<PyObject>) -> Self {
        let mut names = NameTable::new();
        let mut name = |text: &str| names.of_text(text, || PyString::new(py, text).unbind());
        let other_command = name(other_command);
        let unknown_role = name(unknown_role);
        let timed_outcomes: Vec<Name> = timed_outcomes.iter().map(|t| name(t.as_str())).collect();
        DomeSummaryTally {
            reservoir,
            forward,
            engine_records: 0,
            names,
            known_commands: known_commands.into_iter().map(|c| (c.into_boxed_str(), ())).collect(),
            other_command,
            unknown_role,
            timed_outcomes,
            command_labels: Vec::new(),
            class_names: [None; CLASSES.len()],
            shared: vec![None; SHARED_SLOTS],
            first_ms: None,
            last_ms: None,
            calls: Ordered::new(),
            call_seconds: Ordered::new(),
            whole_second_calls: 0,
            puts: Ordered::new(),
            put_to_putdone: Series::default(),
            put_to_putdone_whole: Series::default(),
            checksums: Ordered::new(),
            checksum_wait: Series::default(),
            checksum_wait_whole: Series::default(),
            capacity: Ordered::new(),
            fs_events: Ordered::new(),
            suppressed: Ordered::new(),
        }
    }

    /// Tally a record, then hand it to `forward` (a pipeline's on_dome_record; None: no
    /// more).
    fn __call__(slf: &Bound<'_, Self>, record: &Bound<'_, PyDict>) -> PyResult<()> {
        tally_and_forward(slf, record, |me| {
            me.tally_dict(record)?;
            Ok(me.forward.as_ref().map(|f| f.clone_ref(record.py())))
        })
    }

    /// DomeSummary's state, taken (the tally keeps none of it), for DomeSummary.load:
    /// first_ms, last_ms, whole_second_calls, and (key, value) lists in insertion order of
    /// calls, call_seconds, puts, checksums, capacity ((host, fs), (time, phys, free)),
    /// fs_events and suppressed; series as Series.restored's arguments.
    fn take_state<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        let name = |me: &Self, n: Name| me.names.py(py, n);
        out.set_item("first_ms", self.first_ms.take())?;
        out.set_item("last_ms", self.last_ms.take())?;
        out.set_item("whole_second_calls", std::mem::take(&mut self.whole_second_calls))?;
        let calls = PyList::empty(py);
        for ((role, command, class), n) in std::mem::replace(&mut self.calls, Ordered::new()).entries {
            calls.append(((name(self, role), name(self, command), name(self, class)), n))?;
        }
        let call_seconds = PyList::empty(py);
        for ((role, command), s) in std::mem::replace(&mut self.call_seconds, Ordered::new()).entries {
            call_seconds.append(((name(self, role), name(self, command)), s.into_py(py)?))?;
        }
        let puts = PyList::empty(py);
        for ((status, reason), n) in std::mem::replace(&mut self.puts, Ordered::new()).entries {
            puts.append(((name(self, status), name(self, reason)), n))?;
        }
        let checksums = PyList::empty(py);
        for (outcome, n) in std::mem::replace(&mut self.checksums, Ordered::new()).entries {
            checksums.append((name(self, outcome), n))?;
        }
        let capacity = PyList::empty(py);
        for ((host, fs), c) in std::mem::replace(&mut self.capacity, Ordered::new()).entries {
            capacity.append(((self.atom_py(py, host)?, self.atom_py(py, fs)?),
                             (c.time, self.atom_py(py, c.phys)?, self.atom_py(py, c.free)?)))?;
        }
        let fs_events = PyList::empty(py);
        for ((server, fs, event), n) in std::mem::replace(&mut self.fs_events, Ordered::new()).entries {
            fs_events.append(((self.atom_py(py, server)?, self.atom_py(py, fs)?, name(self, event)), n))?;
        }
        let suppressed = PyList::empty(py);
        for (host, n) in std::mem::replace(&mut self.suppressed, Ordered::new()).entries {
            suppressed.append((self.atom_py(py, host)?, n))?;
        }
        out.set_item("calls", calls)?;
        out.set_item("call_seconds", call_seconds)?;
        out.set_item("puts", puts)?;
        for (key, series) in [("put_to_putdone", &mut self.put_to_putdone), ("put_to_putdone_whole", &mut self.put_to_putdone_whole),
                              ("checksum_wait", &mut self.checksum_wait), ("checksum_wait_whole", &mut self.checksum_wait_whole)] {
            out.set_item(key, std::mem::take(series).into_py(py)?)?;
        }
        out.set_item("checksums", checksums)?;
        out.set_item("capacity", capacity)?;
        out.set_item("fs_events", fs_events)?;
        out.set_item("suppressed", suppressed)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::code_class;

    #[test]
    fn a_code_outside_200_to_599_or_none_is_class_none() {
        assert_eq!([code_class(None), code_class(Some(199)), code_class(Some(600)), code_class(Some(-1))], ["none"; 4]);
        assert_eq!([code_class(Some(200)), code_class(Some(399)), code_class(Some(404)), code_class(Some(599))],
                   ["2xx", "3xx", "4xx", "5xx"]);
    }
}
