//! The interner: hosts, daemons, functions, ops and states as small numbers (`Sym`), each
//! text kept once with its Python string made on first use.

use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::hashing::FxMap;

pub type Sym = u32;

// Names every engine knows by number (Names::new interns them in this order).
pub(crate) const EMPTY: Sym = 0;
pub(crate) const PUT: Sym = 1;
pub(crate) const GET: Sym = 2;
pub(crate) const STATUS_PUT: Sym = 3;
pub(crate) const STATUS_GET: Sym = 4;
pub(crate) const PUTDONE: Sym = 5;
pub(crate) const RELFILES: Sym = 6;
pub(crate) const ABORTREQ: Sym = 7;
pub(crate) const STARTSESS: Sym = 8;
pub(crate) const STARTTRANS: Sym = 9;
pub(crate) const ENDSESS: Sym = 10;
pub(crate) const ENDTRANS: Sym = 11;
pub(crate) const ABORTTRANS: Sym = 12;
pub(crate) const STATE_SUCCESS: Sym = 13;
pub(crate) const STATE_FAILED: Sym = 14;
const KNOWN: [&str; 15] = [
    "", "put", "get", "getstatus_putreq", "getstatus_getreq", "putdone", "relfiles", "abortreq",
    "startsess", "starttrans", "endsess", "endtrans", "aborttrans", "SUCCESS", "FAILED",
];

/// Interned names (hosts, daemons, functions, ops, states) and their Python strings.
pub struct Names {
    index: FxMap<Box<str>, Sym>,
    texts: Vec<Box<str>>,
    strings: Vec<Option<Py<PyString>>>,
    /// op -> "proc_" + op (reassembly's processing-run call op), made once per op.
    proc_ops: FxMap<Option<Sym>, Sym>,
}

impl Names {
    pub(crate) fn new() -> Self {
        let mut names = Names { index: FxMap::default(), texts: Vec::new(), strings: Vec::new(), proc_ops: FxMap::default() };
        for text in KNOWN {
            names.intern(text);
        }
        names
    }

    pub fn intern(&mut self, text: &str) -> Sym {
        if let Some(&s) = self.index.get(text) {
            return s;
        }
        let s = self.texts.len() as Sym;
        self.index.insert(text.into(), s);
        self.texts.push(text.into());
        self.strings.push(None);
        s
    }

    /// The op of a processing run of `op` (none: "proc_"), as reassembly.py names it.
    pub(crate) fn proc_op(&mut self, op: Option<Sym>) -> Sym {
        if let Some(&s) = self.proc_ops.get(&op) {
            return s;
        }
        let text = format!("proc_{}", op.map_or("", |o| self.text(o)));
        let s = self.intern(&text);
        self.proc_ops.insert(op, s);
        s
    }

    pub(crate) fn find(&self, text: &str) -> Option<Sym> {
        self.index.get(text).copied()
    }

    pub fn text(&self, s: Sym) -> &str {
        &self.texts[s as usize]
    }

    pub fn py(&mut self, py: Python<'_>, s: Sym) -> PyObject {
        let slot = &mut self.strings[s as usize];
        if slot.is_none() {
            *slot = Some(PyString::intern(py, &self.texts[s as usize]).unbind());
        }
        slot.as_ref().unwrap().clone_ref(py).into_any()
    }
}
