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

/// Names of up to SHORT bytes are found first by their bytes read as one u128, in a
/// direct-mapped table of SHORT_SLOTS: a line's function, op and state are short and few,
/// and the scanner asks for two or three a line (through the map, ~125 instructions each:
/// the text hashed, the table probed, the text compared). A slot holds the whole name
/// (bytes and length), so a hit is exact; a miss goes to the map and takes the slot. Its
/// size is fixed: names that share a slot only take turns.
const SHORT: usize = 16;
const SHORT_SLOTS: usize = 256;

#[derive(Clone, Copy)]
struct ShortSlot {
    bytes: u128,
    len: u8, // u8::MAX: empty
    sym: Sym,
}

/// A name of at most SHORT bytes as one number (zero-padded: with its length, exact).
fn short_key(text: &str) -> Option<u128> {
    let b = text.as_bytes();
    if b.len() > SHORT {
        return None;
    }
    let mut buf = [0u8; SHORT];
    buf[..b.len()].copy_from_slice(b);
    Some(u128::from_le_bytes(buf))
}

fn short_slot(key: u128, len: usize) -> usize {
    let folded = (key as u64) ^ ((key >> 64) as u64).rotate_left(29) ^ len as u64;
    (folded.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - SHORT_SLOTS.trailing_zeros())) as usize
}

/// Interned names (hosts, daemons, functions, ops, states) and their Python strings.
pub struct Names {
    short: Box<[ShortSlot; SHORT_SLOTS]>,
    index: FxMap<Box<str>, Sym>,
    texts: Vec<Box<str>>,
    strings: Vec<Option<Py<PyString>>>,
    /// op -> "proc_" + op (reassembly's processing-run call op), made once per op.
    proc_ops: FxMap<Option<Sym>, Sym>,
}

impl Names {
    pub(crate) fn new() -> Self {
        let mut names = Names {
            short: Box::new([ShortSlot { bytes: 0, len: u8::MAX, sym: 0 }; SHORT_SLOTS]),
            index: FxMap::default(), texts: Vec::new(), strings: Vec::new(), proc_ops: FxMap::default() };
        for text in KNOWN {
            names.intern(text);
        }
        names
    }

    pub fn intern(&mut self, text: &str) -> Sym {
        let Some(key) = short_key(text) else {
            return self.intern_in_map(text);
        };
        let slot = short_slot(key, text.len());
        let known = self.short[slot];
        if known.bytes == key && usize::from(known.len) == text.len() {
            return known.sym;
        }
        let sym = self.intern_in_map(text);
        self.short[slot] = ShortSlot { bytes: key, len: text.len() as u8, sym };
        sym
    }

    fn intern_in_map(&mut self, text: &str) -> Sym {
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

#[cfg(test)]
mod tests {
    use super::{Names, SHORT, SHORT_SLOTS};

    #[test]
    fn a_name_is_one_number_however_it_is_found() {
        let mut names = Names::new();
        // short and long names, names that differ only in length or in their padding,
        // and more short names than the table has slots (they take turns in them)
        let mut texts: Vec<String> = vec!["".into(), "a".into(), "a\0".into(), "put".into(), "x".repeat(SHORT), "x".repeat(SHORT + 1)];
        texts.extend((0..SHORT_SLOTS * 4).map(|i| format!("n{i}")));
        let first: Vec<u32> = texts.iter().map(|t| names.intern(t)).collect();
        for _ in 0..3 {
            for (t, &sym) in texts.iter().zip(&first) {
                assert_eq!(names.intern(t), sym, "{t:?}");
                assert_eq!(names.text(sym), t);
            }
        }
        let mut distinct = first.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), texts.len());
        assert_eq!(names.intern("put"), super::PUT);
    }
}
