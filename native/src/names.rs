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

/// The direct-mapped table of short names (pure Rust: testable without Python).
struct ShortTable {
    slots: Box<[ShortSlot; SHORT_SLOTS]>,
}

impl ShortTable {
    fn new() -> Self {
        ShortTable { slots: Box::new([ShortSlot { bytes: 0, len: u8::MAX, sym: 0 }; SHORT_SLOTS]) }
    }

    /// The name's number if its slot holds exactly this name.
    fn find(&self, key: u128, len: usize) -> Option<Sym> {
        let known = self.slots[short_slot(key, len)];
        (known.bytes == key && usize::from(known.len) == len).then_some(known.sym)
    }

    /// The slot of this name now holds it (whoever held it before).
    fn remember(&mut self, key: u128, len: usize, sym: Sym) {
        self.slots[short_slot(key, len)] = ShortSlot { bytes: key, len: len as u8, sym };
    }
}

/// Interned names (hosts, daemons, functions, ops, states) and their Python strings.
pub struct Names {
    short: ShortTable,
    index: FxMap<Box<str>, Sym>,
    texts: Vec<Box<str>>,
    strings: Vec<Option<Py<PyString>>>,
    /// op -> "proc_" + op (reassembly's processing-run call op), made once per op.
    proc_ops: FxMap<Option<Sym>, Sym>,
}

impl Names {
    pub(crate) fn new() -> Self {
        let mut names = Names {
            short: ShortTable::new(),
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
        if let Some(sym) = self.short.find(key, text.len()) {
            return sym;
        }
        let sym = self.intern_in_map(text);
        self.short.remember(key, text.len(), sym);
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
    // Names itself holds Python strings, and its drop (even on an unwinding path) needs
    // libpython, which the extension-module test binary does not link: the short table, the
    // part with a rule of its own, is tested alone against a plain map as the reference.
    use super::{short_key, ShortTable, Sym, SHORT, SHORT_SLOTS};
    use std::collections::HashMap;

    #[test]
    fn a_short_name_is_found_as_the_number_it_was_given_or_not_at_all() {
        let mut table = ShortTable::new();
        let mut reference: HashMap<String, Sym> = HashMap::new();
        // names that differ only in length or in their zero padding, the longest short
        // name, and more names than the table has slots (they take turns in them)
        let mut texts: Vec<String> = vec!["".into(), "a".into(), "a\0".into(), "put".into(), "x".repeat(SHORT)];
        texts.extend((0..SHORT_SLOTS * 4).map(|i| format!("n{i}")));
        assert!(short_key(&"x".repeat(SHORT + 1)).is_none(), "a longer name goes to the map");
        let mut hits = 0;
        for round in 0..3 {
            for t in &texts {
                let key = short_key(t).unwrap();
                let fresh = reference.len() as Sym;
                let sym = *reference.entry(t.clone()).or_insert(fresh);
                match table.find(key, t.len()) {
                    Some(found) => {
                        assert_eq!(found, sym, "{t:?} found as another name's number");
                        hits += usize::from(round > 0);
                    }
                    None => table.remember(key, t.len(), sym),
                }
            }
        }
        assert!(hits > 0, "the table found no name again: the exactness above was never tried");
        // a name just remembered is found, whatever shared its slot before
        for t in &texts {
            let key = short_key(t).unwrap();
            table.remember(key, t.len(), reference[t]);
            assert_eq!(table.find(key, t.len()), Some(reference[t]));
        }
    }
}
