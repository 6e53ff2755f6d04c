//! The DOME records the compiled engine emits, and their Python form: the dicts of
//! `parsers/dome_reassembly` (keys in the same order, `kind` first), so that sinks and
//! tests cannot tell the engines apart.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::dome_event::Val;
use crate::hashing::FxMap;
pub use crate::text_cache::Text;

/// What the records' dicts are made of, kept over a run (DomeCore holds one):
/// - their texts as Python strings, each made once: a run's records repeat a few hosts,
///   roles, commands and client DNs, so a record's dict takes the string made for the
///   record before rather than a new copy (no allocation, and its hash already known to
///   the dicts and Counters that key on it). Bounded: at MAX_STRINGS texts it starts afresh.
/// - per kind, a dict of its keys in their order, copied for each record of the kind
///   (a copy of a dict is one block; a new dict grew twice to take a call's 14 keys),
///   each of whose values the record then sets.
#[derive(Default)]
pub struct RecordCache {
    strings: FxMap<String, Py<PyString>>,
    templates: [Option<Py<PyDict>>; KINDS],
}

const MAX_STRINGS: usize = 4096;
pub(crate) const KINDS: usize = 6;

impl RecordCache {
    pub fn get<'py>(&mut self, py: Python<'py>, text: &str) -> Bound<'py, PyString> {
        if let Some(s) = self.strings.get(text) {
            return s.bind(py).clone();
        }
        if self.strings.len() >= MAX_STRINGS {
            self.strings.clear();
        }
        let s = PyString::new(py, text);
        self.strings.insert(text.to_string(), s.clone().unbind());
        s
    }

    fn opt<'py>(&mut self, py: Python<'py>, text: Option<&str>) -> Option<Bound<'py, PyString>> {
        text.map(|t| self.get(py, t))
    }
}

/// A call's record: its texts shared with the call table's (Text: a site's calls repeat a
/// few hosts, roles, commands and clients, and a String each was an allocation and a free
/// per text of every call).
pub struct CallRecord {
    pub host: Text,
    pub pid: i64,
    pub tid: i64,
    pub role: Option<Text>,
    pub command: Option<Text>,
    pub http_code: Option<i64>,
    pub caller: Option<Text>,
    pub remote_client: Option<Text>,
    pub start: i64,
    pub end: Option<i64>,
    pub duration: Option<i64>,
    pub cut: bool,
    pub whole_seconds: bool,
}

pub struct PutRecord {
    pub head: String,
    pub lfn: Option<String>,
    pub put_time: i64,
    pub put_code: Option<i64>,
    pub server: Option<String>,
    pub fs: Option<String>,
    pub pfn: Option<String>,
    pub size: Option<i64>,
    pub putdone_code: Option<i64>,
    pub putdone_disk_time: Option<i64>,
    pub putdone_head_time: Option<i64>,
    pub put_to_putdone: Option<i64>,
    pub status: &'static str,
    pub end_reason: &'static str,
    pub ended: i64,
    pub whole_seconds: bool,
}

/// A checksum wait (dome_checksums.rs), parsers/dome_checksums.py's `dome_checksum` record.
pub struct ChecksumRecord {
    pub head: Text,
    pub caller: Text,
    pub remote_client: Option<Text>,
    pub start: i64,
    pub end: i64,
    pub wait: i64,
    pub polls: i64,
    pub outcome: &'static str,
    pub http_code: Option<i64>,
    pub endings: i64,
    pub overlap: bool,
    pub whole_seconds: bool,
}

pub enum Record {
    Call(CallRecord),
    Put(PutRecord),
    Capacity { time: i64, host: String, fs: Option<Val>, phys: Option<Val>, free: Option<Val> },
    FsEvent { time: i64, host: String, server: Option<Val>, fs: Option<Val>, enabled: bool, transition: bool },
    JournaldGap { time: i64, host: String, program: String, lines: i64 },
    Checksum(ChecksumRecord),
}

/// The kinds' names, by Record::kind_index.
pub(crate) const KIND_NAMES: [&str; KINDS] =
    ["dome_call", "dome_put", "dome_capacity", "dome_fs_event", "dome_journald_gap", "dome_checksum"];

impl Record {
    pub(crate) fn kind_index(&self) -> usize {
        match self {
            Record::Call(_) => 0,
            Record::Put(_) => 1,
            Record::Capacity { .. } => 2,
            Record::FsEvent { .. } => 3,
            Record::JournaldGap { .. } => 4,
            Record::Checksum(_) => 5,
        }
    }

    /// The record's dict, from `cache` (its kind's keys, the texts of calls and puts).
    /// Every key of the kind is set for every record: a copy of the kind's first dict has
    /// the keys in their order, and no value of that record is left.
    pub fn to_py<'py>(&self, py: Python<'py>, cache: &mut RecordCache) -> PyResult<Bound<'py, PyDict>> {
        let kind = self.kind_index();
        let d = match &cache.templates[kind] {
            Some(template) => template.bind(py).copy()?,
            None => PyDict::new(py),
        };
        self.fill(py, &d, cache)?;
        if cache.templates[kind].is_none() {
            cache.templates[kind] = Some(d.copy()?.unbind());
        }
        Ok(d)
    }

    fn fill<'py>(&self, py: Python<'py>, d: &Bound<'py, PyDict>, cache: &mut RecordCache) -> PyResult<()> {
        match self {
            Record::Call(c) => {
                d.set_item(intern!(py, "kind"), intern!(py, "dome_call"))?;
                d.set_item(intern!(py, "host"), cache.get(py, &c.host))?;
                d.set_item(intern!(py, "pid"), c.pid)?;
                d.set_item(intern!(py, "tid"), c.tid)?;
                d.set_item(intern!(py, "role"), cache.opt(py, c.role.as_deref()))?;
                d.set_item(intern!(py, "command"), cache.opt(py, c.command.as_deref()))?;
                d.set_item(intern!(py, "http_code"), c.http_code)?;
                d.set_item(intern!(py, "caller"), cache.opt(py, c.caller.as_deref()))?;
                d.set_item(intern!(py, "remote_client"), cache.opt(py, c.remote_client.as_deref()))?;
                d.set_item(intern!(py, "start"), c.start)?;
                d.set_item(intern!(py, "end"), c.end)?;
                d.set_item(intern!(py, "duration"), c.duration)?;
                d.set_item(intern!(py, "cut"), i64::from(c.cut))?;
                d.set_item(intern!(py, "whole_seconds"), i64::from(c.whole_seconds))?;
            }
            Record::Put(p) => {
                d.set_item(intern!(py, "kind"), intern!(py, "dome_put"))?;
                d.set_item(intern!(py, "head"), cache.get(py, &p.head))?;
                d.set_item(intern!(py, "lfn"), &p.lfn)?;
                d.set_item(intern!(py, "put_time"), p.put_time)?;
                d.set_item(intern!(py, "put_code"), p.put_code)?;
                d.set_item(intern!(py, "server"), cache.opt(py, p.server.as_deref()))?;
                d.set_item(intern!(py, "fs"), cache.opt(py, p.fs.as_deref()))?;
                d.set_item(intern!(py, "pfn"), &p.pfn)?;
                d.set_item(intern!(py, "size"), p.size)?;
                d.set_item(intern!(py, "putdone_code"), p.putdone_code)?;
                d.set_item(intern!(py, "putdone_disk_time"), p.putdone_disk_time)?;
                d.set_item(intern!(py, "putdone_head_time"), p.putdone_head_time)?;
                d.set_item(intern!(py, "put_to_putdone"), p.put_to_putdone)?;
                d.set_item(intern!(py, "status"), cache.get(py, p.status))?;
                d.set_item(intern!(py, "end_reason"), cache.get(py, p.end_reason))?;
                d.set_item(intern!(py, "ended"), p.ended)?;
                d.set_item(intern!(py, "whole_seconds"), i64::from(p.whole_seconds))?;
            }
            Record::Capacity { time, host, fs, phys, free } => {
                d.set_item(intern!(py, "kind"), intern!(py, "dome_capacity"))?;
                d.set_item(intern!(py, "time"), time)?;
                d.set_item(intern!(py, "host"), host)?;
                d.set_item(intern!(py, "fs"), Val::py(fs, py)?)?;
                d.set_item(intern!(py, "phys"), Val::py(phys, py)?)?;
                d.set_item(intern!(py, "free"), Val::py(free, py)?)?;
            }
            Record::FsEvent { time, host, server, fs, enabled, transition } => {
                d.set_item(intern!(py, "kind"), intern!(py, "dome_fs_event"))?;
                d.set_item(intern!(py, "time"), time)?;
                d.set_item(intern!(py, "host"), host)?;
                d.set_item(intern!(py, "server"), Val::py(server, py)?)?;
                d.set_item(intern!(py, "fs"), Val::py(fs, py)?)?;
                d.set_item(intern!(py, "event"), if *enabled { intern!(py, "enabled") } else { intern!(py, "disabled") })?;
                d.set_item(intern!(py, "transition"), i64::from(*transition))?;
            }
            Record::JournaldGap { time, host, program, lines } => {
                d.set_item(intern!(py, "kind"), intern!(py, "dome_journald_gap"))?;
                d.set_item(intern!(py, "time"), time)?;
                d.set_item(intern!(py, "host"), host)?;
                d.set_item(intern!(py, "program"), program)?;
                d.set_item(intern!(py, "lines"), lines)?;
            }
            Record::Checksum(c) => {
                d.set_item(intern!(py, "kind"), intern!(py, "dome_checksum"))?;
                d.set_item(intern!(py, "head"), cache.get(py, &c.head))?;
                d.set_item(intern!(py, "caller"), cache.get(py, &c.caller))?;
                d.set_item(intern!(py, "remote_client"), cache.opt(py, c.remote_client.as_deref()))?;
                d.set_item(intern!(py, "start"), c.start)?;
                d.set_item(intern!(py, "end"), c.end)?;
                d.set_item(intern!(py, "wait"), c.wait)?;
                d.set_item(intern!(py, "polls"), c.polls)?;
                d.set_item(intern!(py, "outcome"), cache.get(py, c.outcome))?;
                d.set_item(intern!(py, "http_code"), c.http_code)?;
                d.set_item(intern!(py, "endings"), c.endings)?;
                d.set_item(intern!(py, "overlap"), i64::from(c.overlap))?;
                d.set_item(intern!(py, "whole_seconds"), i64::from(c.whole_seconds))?;
            }
        }
        Ok(())
    }
}
