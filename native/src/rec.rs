//! The engine's finished records as Rust values, made into the dicts of
//! `parsers/reassembly.py` only when Python receives them.
//!
//! A replay that prints only its summary hands every record to the extension's Tally
//! (`tally.rs`): there the dict was built, read back field by field and dropped, for
//! nothing. `deliver` (deliver.rs) gives the Tally the record itself and anyone else its
//! dict, built here in one place, with the keys in the order Python's records have them.

use std::cell::RefCell;
use std::rc::Rc;

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyDict, PyString};

use crate::names::{Names, Sym};

use crate::text_cache::Text;

pub struct RequestRec {
    pub host: Sym,
    pub token: Option<Text>,
    pub op: Option<Sym>,
    pub client: Option<Text>,
    pub nfiles: Option<i64>,
    pub status: Py<PyString>,
    pub accepted: Option<i64>,
    pub started: Option<i64>,
    pub ended: Option<i64>,
    pub auth_ms: Option<i64>,
    pub request_ms: Option<i64>,
    pub queue_ms: Option<i64>,
    pub proc_ms: Option<i64>,
    pub polls: i64,
    pub poll_ms: i64,
    pub ready_wait_ms: Option<i64>,
    pub transfer_ms: Option<i64>,
    pub done_ms: Option<i64>,
    pub total_ms: Option<i64>,
    pub end_reason: Py<PyString>,
    /// (ns_calls, ns_ms) once the linker has decided them; absent keys before.
    pub ns: Option<(Option<i64>, Option<i64>)>,
}

pub struct CallRec {
    pub host: Sym,
    pub daemon: Sym,
    pub pid: i64,
    pub thread: Option<i64>,
    pub op: Sym,
    pub client: Option<Text>,
    pub started: i64,
    pub ended: Option<i64>,
    pub duration_ms: Option<i64>,
    pub rc: Option<i64>,
    pub auth_ms: Option<i64>,
    pub session: Option<&'static str>,
    pub token: Option<Text>,
    pub path: Option<Text>,
}

pub enum Rec {
    Request(Box<RequestRec>),
    Call(Box<CallRec>),
    /// A record restored from saved state: a dict already.
    Dict(Py<PyDict>),
}

impl Rec {
    /// The linker found the call's request (linking.py sets record["token"]).
    pub fn set_token(&mut self, py: Python<'_>, token: &Text) -> PyResult<()> {
        match self {
            Rec::Call(c) => c.token = Some(token.clone()),
            Rec::Request(r) => r.token = Some(token.clone()),
            Rec::Dict(d) => d.bind(py).set_item(intern!(py, "token"), &**token)?,
        }
        Ok(())
    }

    /// The request's name-server calls and time (None, None: the log had none to read).
    pub fn set_ns(&mut self, py: Python<'_>, calls: Option<i64>, ms: Option<i64>) -> PyResult<()> {
        match self {
            Rec::Request(r) => r.ns = Some((calls, ms)),
            Rec::Call(_) => unreachable!("only requests carry name-server totals"),
            Rec::Dict(d) => {
                let d = d.bind(py);
                d.set_item(intern!(py, "ns_calls"), calls)?;
                d.set_item(intern!(py, "ns_ms"), ms)?;
            }
        }
        Ok(())
    }

    /// The record as Python has it (a new dict; a restored one is shared as it was).
    pub fn to_dict<'py>(&self, py: Python<'py>, names: &RefCell<Names>) -> PyResult<Bound<'py, PyDict>> {
        match self {
            Rec::Dict(dict) => Ok(dict.bind(py).clone()),
            Rec::Request(r) => request_dict(py, r, &mut names.borrow_mut()),
            Rec::Call(c) => call_dict(py, c, &mut names.borrow_mut()),
        }
    }
}

/// The dicts made so far, one of each shape (a request before the linker decides its
/// name-server totals, one after, a call), their values cleared: a new record's dict is a
/// copy of its shape's, which CPython clones at once with every key in place, where a
/// fresh dict grows and rehashes three times on the way to twenty keys and inserts each.
/// The writers below then replace every value, in the same order: the keys and their
/// order stay theirs (issue 30: the dicts were a tenth of `whatif`, whose model runs
/// return some 40,000 records).
static REQUEST_SHAPE: GILOnceCell<Py<PyDict>> = GILOnceCell::new();
static DECIDED_REQUEST_SHAPE: GILOnceCell<Py<PyDict>> = GILOnceCell::new();
static CALL_SHAPE: GILOnceCell<Py<PyDict>> = GILOnceCell::new();

/// A dict of `shape`'s keys to write a record into, or a new dict for the first one.
fn blank<'py>(py: Python<'py>, shape: &GILOnceCell<Py<PyDict>>) -> PyResult<Bound<'py, PyDict>> {
    match shape.get(py) {
        Some(d) => d.bind(py).copy(),
        None => Ok(PyDict::new(py)),
    }
}

/// Keep `written`'s keys as its shape's, once: the values become None (nothing held).
fn keep_shape<'py>(py: Python<'py>, shape: &GILOnceCell<Py<PyDict>>, written: &Bound<'py, PyDict>) -> PyResult<()> {
    if shape.get(py).is_none() {
        let d = written.copy()?;
        for key in written.keys() {
            d.set_item(key, py.None())?;
        }
        let _ = shape.set(py, d.unbind());
    }
    Ok(())
}

fn request_dict<'py>(py: Python<'py>, r: &RequestRec, names: &mut Names) -> PyResult<Bound<'py, PyDict>> {
    let shape = if r.ns.is_some() { &DECIDED_REQUEST_SHAPE } else { &REQUEST_SHAPE };
    let d = blank(py, shape)?;
    d.set_item(intern!(py, "kind"), intern!(py, "request"))?;
    d.set_item(intern!(py, "host"), names.py(py, r.host))?;
    d.set_item(intern!(py, "token"), r.token.as_deref())?;
    d.set_item(intern!(py, "op"), r.op.map(|o| names.py(py, o)))?;
    d.set_item(intern!(py, "client"), r.client.as_deref())?;
    d.set_item(intern!(py, "nfiles"), r.nfiles)?;
    d.set_item(intern!(py, "status"), r.status.bind(py))?;
    d.set_item(intern!(py, "accepted"), r.accepted)?;
    d.set_item(intern!(py, "started"), r.started)?;
    d.set_item(intern!(py, "ended"), r.ended)?;
    d.set_item(intern!(py, "auth_ms"), r.auth_ms)?;
    d.set_item(intern!(py, "request_ms"), r.request_ms)?;
    d.set_item(intern!(py, "queue_ms"), r.queue_ms)?;
    d.set_item(intern!(py, "proc_ms"), r.proc_ms)?;
    d.set_item(intern!(py, "polls"), r.polls)?;
    d.set_item(intern!(py, "poll_ms"), r.poll_ms)?;
    d.set_item(intern!(py, "ready_wait_ms"), r.ready_wait_ms)?;
    d.set_item(intern!(py, "transfer_ms"), r.transfer_ms)?;
    d.set_item(intern!(py, "done_ms"), r.done_ms)?;
    d.set_item(intern!(py, "total_ms"), r.total_ms)?;
    d.set_item(intern!(py, "end_reason"), r.end_reason.bind(py))?;
    if let Some((calls, ms)) = r.ns {
        d.set_item(intern!(py, "ns_calls"), calls)?;
        d.set_item(intern!(py, "ns_ms"), ms)?;
    }
    keep_shape(py, shape, &d)?;
    Ok(d)
}

fn call_dict<'py>(py: Python<'py>, c: &CallRec, names: &mut Names) -> PyResult<Bound<'py, PyDict>> {
    let d = blank(py, &CALL_SHAPE)?;
    d.set_item(intern!(py, "kind"), intern!(py, "call"))?;
    d.set_item(intern!(py, "host"), names.py(py, c.host))?;
    d.set_item(intern!(py, "daemon"), names.py(py, c.daemon))?;
    d.set_item(intern!(py, "pid"), c.pid)?;
    d.set_item(intern!(py, "thread"), c.thread)?;
    d.set_item(intern!(py, "op"), names.py(py, c.op))?;
    d.set_item(intern!(py, "client"), c.client.as_deref())?;
    d.set_item(intern!(py, "started"), c.started)?;
    d.set_item(intern!(py, "ended"), c.ended)?;
    d.set_item(intern!(py, "duration_ms"), c.duration_ms)?;
    d.set_item(intern!(py, "rc"), c.rc)?;
    d.set_item(intern!(py, "auth_ms"), c.auth_ms)?;
    d.set_item(intern!(py, "session"), c.session)?;
    d.set_item(intern!(py, "token"), c.token.as_deref())?;
    d.set_item(intern!(py, "path"), c.path.as_deref())?;
    keep_shape(py, &CALL_SHAPE, &d)?;
    Ok(d)
}

/// The keys `to_dict` writes, in order: of a request the linker has decided, and of a
/// call (schema.rs hands them to parsers/schema.check_compiled as the module loads).
pub fn written_keys(py: Python<'_>) -> PyResult<(Vec<String>, Vec<String>)> {
    let names = RefCell::new(Names::new());
    let sym = names.borrow_mut().intern("x");
    let text: Text = Rc::from("x");
    let word = || PyString::new(py, "x").unbind();
    let request = Rec::Request(Box::new(RequestRec {
        host: sym, token: Some(text.clone()), op: Some(sym), client: Some(text.clone()),
        nfiles: Some(1), status: word(), accepted: Some(1), started: Some(1), ended: Some(1),
        auth_ms: Some(0), request_ms: Some(0), queue_ms: Some(0), proc_ms: Some(0), polls: 0,
        poll_ms: 0, ready_wait_ms: Some(0), transfer_ms: Some(0), done_ms: Some(0),
        total_ms: Some(0), end_reason: word(), ns: Some((Some(0), Some(0))),
    }));
    let call = Rec::Call(Box::new(CallRec {
        host: sym, daemon: sym, pid: 1, thread: Some(1), op: sym, client: Some(text.clone()),
        started: 1, ended: Some(1), duration_ms: Some(0), rc: Some(0), auth_ms: Some(0),
        session: Some("sess"), token: Some(text.clone()), path: Some(text),
    }));
    let keys = |rec: &Rec| -> PyResult<Vec<String>> {
        rec.to_dict(py, &names)?.keys().iter().map(|k| k.extract::<String>()).collect()
    };
    Ok((keys(&request)?, keys(&call)?))
}
