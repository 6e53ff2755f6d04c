//! The DOME records the compiled engine emits, and their Python form: the dicts of
//! `parsers/dome_reassembly` (keys in the same order, `kind` first), so that sinks and
//! tests cannot tell the engines apart.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::dome_event::Val;

pub struct CallRecord {
    pub host: String,
    pub pid: i64,
    pub tid: i64,
    pub role: Option<String>,
    pub command: Option<String>,
    pub http_code: Option<i64>,
    pub caller: Option<String>,
    pub remote_client: Option<String>,
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

pub enum Record {
    Call(CallRecord),
    Put(PutRecord),
    Capacity { time: i64, host: String, fs: Option<Val>, phys: Option<Val>, free: Option<Val> },
    FsEvent { time: i64, host: String, server: Option<Val>, fs: Option<Val>, enabled: bool, transition: bool },
    JournaldGap { time: i64, host: String, program: String, lines: i64 },
}

impl Record {
    pub fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        match self {
            Record::Call(c) => {
                d.set_item("kind", "dome_call")?;
                d.set_item("host", &c.host)?;
                d.set_item("pid", c.pid)?;
                d.set_item("tid", c.tid)?;
                d.set_item("role", &c.role)?;
                d.set_item("command", &c.command)?;
                d.set_item("http_code", c.http_code)?;
                d.set_item("caller", &c.caller)?;
                d.set_item("remote_client", &c.remote_client)?;
                d.set_item("start", c.start)?;
                d.set_item("end", c.end)?;
                d.set_item("duration", c.duration)?;
                d.set_item("cut", i64::from(c.cut))?;
                d.set_item("whole_seconds", i64::from(c.whole_seconds))?;
            }
            Record::Put(p) => {
                d.set_item("kind", "dome_put")?;
                d.set_item("head", &p.head)?;
                d.set_item("lfn", &p.lfn)?;
                d.set_item("put_time", p.put_time)?;
                d.set_item("put_code", p.put_code)?;
                d.set_item("server", &p.server)?;
                d.set_item("fs", &p.fs)?;
                d.set_item("pfn", &p.pfn)?;
                d.set_item("size", p.size)?;
                d.set_item("putdone_code", p.putdone_code)?;
                d.set_item("putdone_disk_time", p.putdone_disk_time)?;
                d.set_item("putdone_head_time", p.putdone_head_time)?;
                d.set_item("put_to_putdone", p.put_to_putdone)?;
                d.set_item("status", p.status)?;
                d.set_item("end_reason", p.end_reason)?;
                d.set_item("ended", p.ended)?;
                d.set_item("whole_seconds", i64::from(p.whole_seconds))?;
            }
            Record::Capacity { time, host, fs, phys, free } => {
                d.set_item("kind", "dome_capacity")?;
                d.set_item("time", time)?;
                d.set_item("host", host)?;
                d.set_item("fs", Val::py(fs, py)?)?;
                d.set_item("phys", Val::py(phys, py)?)?;
                d.set_item("free", Val::py(free, py)?)?;
            }
            Record::FsEvent { time, host, server, fs, enabled, transition } => {
                d.set_item("kind", "dome_fs_event")?;
                d.set_item("time", time)?;
                d.set_item("host", host)?;
                d.set_item("server", Val::py(server, py)?)?;
                d.set_item("fs", Val::py(fs, py)?)?;
                d.set_item("event", if *enabled { "enabled" } else { "disabled" })?;
                d.set_item("transition", i64::from(*transition))?;
            }
            Record::JournaldGap { time, host, program, lines } => {
                d.set_item("kind", "dome_journald_gap")?;
                d.set_item("time", time)?;
                d.set_item("host", host)?;
                d.set_item("program", program)?;
                d.set_item("lines", lines)?;
            }
        }
        Ok(d)
    }
}
