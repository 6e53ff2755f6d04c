//! One DOME line as the compiled DOME engine holds it: the twin of
//! `parsers/dome_lines.DomeEvent` (ts, host, program, pid, tid, level, error, role,
//! fields, whole_seconds), with the role a number and the fields in a fixed array.
//! Converts from and to the Python NamedTuple, so that events parsed by either parser
//! feed either engine, and a waiting putdone in a snapshot reads as `list(event)`.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::byte_runs::equal;
use crate::schema::named;

/// Roles, in `parsers/dome_profiles.ROLES` order.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Role {
    Accept,
    Call,
    Command,
    Returns,
    Put,
    PutSelected,
    PutdoneDisk,
    PutdoneForward,
    PutdoneHead,
    PutdoneSize,
    PutdoneError,
    ChksumFailed,
    QueueTimeout,
    Capacity,
    FsCount,
    FsEnabled,
    FsDisabled,
    Startup,
    Other,
    /// journald's `Suppressed N messages from UNIT` (dome_profiles.SUPPRESSED): no
    /// profile role, after them.
    JournaldSuppressed,
}

pub const ROLE_NAMES: [&str; 20] = [
    "accept", "call", "command", "returns", "put", "put_selected", "putdone_disk",
    "putdone_forward", "putdone_head", "putdone_size", "putdone_error", "chksum_failed",
    "queue_timeout", "capacity", "fs_count", "fs_enabled", "fs_disabled", "startup", "other",
    "journald_suppressed",
];
const ROLES: [Role; 20] = [
    Role::Accept, Role::Call, Role::Command, Role::Returns, Role::Put, Role::PutSelected,
    Role::PutdoneDisk, Role::PutdoneForward, Role::PutdoneHead, Role::PutdoneSize,
    Role::PutdoneError, Role::ChksumFailed, Role::QueueTimeout, Role::Capacity, Role::FsCount,
    Role::FsEnabled, Role::FsDisabled, Role::Startup, Role::Other, Role::JournaldSuppressed,
];

impl Role {
    pub fn from_name(name: &str) -> Option<Role> {
        ROLE_NAMES.iter().position(|n| *n == name).map(|i| ROLES[i])
    }
    pub fn name(self) -> &'static str {
        ROLE_NAMES[self as usize]
    }
    /// Roles that say the host is a head node (parsers/dome_reassembly.HEAD_ROLES).
    pub fn says_head(self) -> bool {
        matches!(self, Role::Put | Role::PutSelected | Role::PutdoneHead | Role::PutdoneSize
            | Role::PutdoneError | Role::FsEnabled | Role::FsDisabled)
    }
    /// ... a disk node (DISK_ROLES).
    pub fn says_disk(self) -> bool {
        matches!(self, Role::PutdoneDisk | Role::PutdoneForward | Role::Capacity | Role::FsCount)
    }
    /// The lines that frame a call.
    pub fn frames(self) -> bool {
        matches!(self, Role::Accept | Role::Call | Role::Command | Role::Returns)
    }
}

/// Role fields, in `parsers/dome_profiles.ROLE_GROUPS` order.
pub const FIELD_NAMES: [&str; 20] = [
    "client_dn", "client_host", "remote_dn", "remote_host", "method", "op", "query", "code",
    "lfn", "server", "fs", "pfn", "size", "matchings", "reason", "key", "timeout",
    "phys", "free", "count",
];
pub const CLIENT_HOST: usize = 1;
pub const REMOTE_HOST: usize = 3;
pub const OP: usize = 5;
pub const QUERY: usize = 6;
pub const CODE: usize = 7;
pub const LFN: usize = 8;
pub const SERVER: usize = 9;
pub const FS: usize = 10;
pub const PFN: usize = 11;
pub const SIZE: usize = 12;
pub const PHYS: usize = 17;
pub const FREE: usize = 18;
pub const COUNT: usize = 19;

/// Fields read as integers (parsers/dome_lines.INT_FIELDS).
const INT_FIELD_NAMES: [&str; 7] = ["code", "size", "matchings", "timeout", "phys", "free", "count"];

/// INT_FIELD_NAMES as a bit per FIELD_NAMES index, made once: compared by name, the
/// scanner's two questions per field of a line cost ~100 instructions a line (issue 30).
const INT_FIELDS: u32 = {
    let (mut bits, mut i) = (0u32, 0);
    while i < FIELD_NAMES.len() {
        let mut j = 0;
        while j < INT_FIELD_NAMES.len() {
            if named(&FIELD_NAMES, i, INT_FIELD_NAMES[j]) {
                bits |= 1 << i;
            }
            j += 1;
        }
        i += 1;
    }
    bits
};

#[inline]
pub fn is_int_field(index: usize) -> bool {
    index < FIELD_NAMES.len() && INT_FIELDS >> index & 1 != 0
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Val {
    Int(i64),
    Str(String),
}

impl Val {
    pub fn int(v: &Option<Val>) -> Option<i64> {
        match v {
            Some(Val::Int(i)) => Some(*i),
            _ => None,
        }
    }
    pub fn text(v: &Option<Val>) -> Option<&str> {
        match v {
            Some(Val::Str(s)) => Some(s.as_str()),
            _ => None,
        }
    }
    pub fn py(v: &Option<Val>, py: Python<'_>) -> PyResult<PyObject> {
        Ok(match v {
            None => py.None(),
            Some(Val::Int(i)) => i.into_pyobject(py)?.into_any().unbind(),
            Some(Val::Str(s)) => s.into_pyobject(py)?.into_any().unbind(),
        })
    }
    fn from_py(v: &Bound<'_, PyAny>) -> PyResult<Option<Val>> {
        if v.is_none() {
            Ok(None)
        } else if let Ok(i) = v.extract::<i64>() {
            Ok(Some(Val::Int(i)))
        } else {
            Ok(Some(Val::Str(v.extract::<String>()?)))
        }
    }
}

/// Strings set aside by field, for an event filled line after line (DomeEvent::declare):
/// a line of another role takes them again rather than allocating its own.
pub type Spare = [String; 20];

#[derive(Clone, Debug)]
pub struct DomeEvent {
    pub ts: i64,
    pub host: String,
    pub program: String,
    pub pid: i64,
    pub tid: i64,
    pub level: i64,
    pub error: bool,
    pub role: Role,
    /// The role pattern's groups: `present` has bit i for FIELD_NAMES[i] (a declared group,
    /// None when it did not take part), `fields[i]` its value.
    pub present: u32,
    pub fields: [Option<Val>; 20],
    pub whole_seconds: bool,
    /// The host is the one this event held before (set_origin's: the line before's, for
    /// an event a scanner fills line after line): its tables' rows need no look-up by name.
    pub same_host: bool,
}

impl DomeEvent {
    /// An event with nothing in it yet: the buffer a scanner fills line after line
    /// (DomeScanner::scan_into), its Strings' room reused rather than allocated per line.
    pub fn empty() -> DomeEvent {
        DomeEvent {
            ts: 0, host: String::new(), program: String::new(), pid: 0, tid: -1, level: -1, error: false,
            role: Role::Other, present: 0, fields: Default::default(), whole_seconds: false, same_host: false,
        }
    }

    /// The role pattern's fields are `present` now: the fields of no declared group
    /// become None (a field not in `present` is always None), those of one keep their
    /// value until set_text, set_none or an Int gives them this line's. A text field's
    /// String goes to `spare[field]`, for set_text to fill again.
    pub fn declare(&mut self, present: u32, spare: &mut Spare) {
        let mut gone = self.present & !present;
        while gone != 0 {
            self.set_none(gone.trailing_zeros() as usize, spare);
            gone &= gone - 1;
        }
        self.present = present;
    }

    /// The line's host and program, written over the line before's in their room (most
    /// lines have the line before's: nothing to copy then).
    pub fn set_origin(&mut self, host: &str, program: &str) {
        self.same_host = equal(self.host.as_bytes(), host.as_bytes());
        if !self.same_host {
            self.host.clear();
            self.host.push_str(host);
        }
        if !equal(self.program.as_bytes(), program.as_bytes()) {
            self.program.clear();
            self.program.push_str(program);
        }
    }

    /// Field `index` is None (its String, if it held one, to `spare`).
    pub fn set_none(&mut self, index: usize, spare: &mut Spare) {
        if let Some(Val::Str(s)) = self.fields[index].take() {
            spare[index] = s;
        }
    }

    /// Field `index` is `text`, in the room of the String it holds or of `spare`'s.
    pub fn set_text(&mut self, index: usize, text: &str, spare: &mut Spare) {
        match &mut self.fields[index] {
            Some(Val::Str(s)) => {
                s.clear();
                s.push_str(text);
            }
            slot => {
                let mut s = std::mem::take(&mut spare[index]);
                s.clear();
                s.push_str(text);
                *slot = Some(Val::Str(s));
            }
        }
    }

    pub fn field(&self, index: usize) -> &Option<Val> {
        &self.fields[index]
    }
    pub fn text(&self, index: usize) -> Option<&str> {
        Val::text(&self.fields[index])
    }

    /// From a Python DomeEvent (or any sequence of its ten items: a snapshot's list).
    pub fn from_py(ev: &Bound<'_, PyAny>) -> PyResult<DomeEvent> {
        let role_name: String = ev.get_item(7)?.extract()?;
        let role = Role::from_name(&role_name).unwrap_or(Role::Other);
        let fields_obj = ev.get_item(8)?;
        let dict = fields_obj.downcast::<PyDict>()?;
        let mut fields: [Option<Val>; 20] = Default::default();
        let mut present = 0u32;
        for (name, value) in dict.iter() {
            let name: String = name.extract()?;
            if let Some(i) = FIELD_NAMES.iter().position(|n| *n == name) {
                present |= 1 << i;
                fields[i] = Val::from_py(&value)?;
            }
        }
        Ok(DomeEvent {
            ts: ev.get_item(0)?.extract()?,
            host: ev.get_item(1)?.extract()?,
            program: ev.get_item(2)?.extract()?,
            pid: ev.get_item(3)?.extract()?,
            tid: ev.get_item(4)?.extract()?,
            level: ev.get_item(5)?.extract()?,
            error: ev.get_item(6)?.is_truthy()?,
            role,
            present,
            fields,
            whole_seconds: ev.get_item(9)?.is_truthy()?,
            same_host: false,
        })
    }

    /// The fields as the Python event's dict: the declared groups, in declaration order
    /// of FIELD_NAMES (dict equality does not depend on it).
    pub fn fields_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (i, name) in FIELD_NAMES.iter().enumerate() {
            if self.present & (1 << i) != 0 {
                d.set_item(*name, Val::py(&self.fields[i], py)?)?;
            }
        }
        Ok(d)
    }

    /// `list(event)` of the Python event.
    pub fn to_list<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items: Vec<PyObject> = vec![
            self.ts.into_pyobject(py)?.into_any().unbind(),
            self.host.as_str().into_pyobject(py)?.into_any().unbind(),
            self.program.as_str().into_pyobject(py)?.into_any().unbind(),
            self.pid.into_pyobject(py)?.into_any().unbind(),
            self.tid.into_pyobject(py)?.into_any().unbind(),
            self.level.into_pyobject(py)?.into_any().unbind(),
            pyo3::types::PyBool::new(py, self.error).to_owned().into_any().unbind(),
            self.role.name().into_pyobject(py)?.into_any().unbind(),
            self.fields_dict(py)?.into_any().unbind(),
            pyo3::types::PyBool::new(py, self.whole_seconds).to_owned().into_any().unbind(),
        ];
        PyList::new(py, items)
    }
}

#[cfg(test)]
mod tests {
    use super::{is_int_field, FIELD_NAMES, INT_FIELDS, INT_FIELD_NAMES};

    #[test]
    fn the_int_fields_are_those_named() {
        assert_eq!(INT_FIELDS.count_ones() as usize, INT_FIELD_NAMES.len(), "each a field of FIELD_NAMES");
        for (i, name) in FIELD_NAMES.iter().enumerate() {
            assert_eq!(is_int_field(i), INT_FIELD_NAMES.contains(name), "{name}");
        }
    }
}
