//! An insertion-ordered map (Python's dict), for the DOME tables whose order shows in the
//! records: each host's clock (advance() sweeps hosts in that order), process ids,
//! filesystem states. A primitive of the DOME engine: it uses only the tables' hasher.

use std::borrow::Borrow;
use std::cell::Cell;
use std::hash::Hash;

use crate::hashing::FxMap;

/// A map that keeps its keys in insertion order (Python's dict), for the tables whose
/// order shows in the records (clocks: advance() sweeps hosts in that order).
///
/// It remembers the two rows it found last and looks there first: a stream's lines come
/// in runs of one host (feed_chunk takes one stream at a time), and a line of a disk
/// node looks up its own clock and the head's (the put table's sweep), so most look-ups
/// are one of the last two again, and a hit costs a compare instead of a hash.
#[derive(Default, Clone)]
pub struct Ordered<K, V> {
    pub rows: Vec<(K, V)>,
    index: FxMap<K, usize>,
    last: Cell<usize>,
    before_last: Cell<usize>,
}

impl<K: Hash + Eq + Clone, V: Copy> Ordered<K, V> {
    /// The row of `key`, if it has one.
    fn row<Q>(&self, key: &Q) -> Option<usize>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        for i in [self.last.get(), self.before_last.get()] {
            if let Some((k, _)) = self.rows.get(i) {
                if k.borrow() == key {
                    return Some(i);
                }
            }
        }
        let i = *self.index.get(key)?;
        self.remember(i);
        Some(i)
    }

    fn remember(&self, i: usize) {
        self.before_last.set(self.last.get());
        self.last.set(i);
    }

    pub fn get<Q>(&self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.row(key).map(|i| self.rows[i].1)
    }

    pub fn set(&mut self, key: K, value: V) {
        match self.row(&key) {
            Some(i) => self.rows[i].1 = value,
            None => self.insert(key, value),
        }
    }

    /// set() without a copy of a key the map holds already: `key` is made only for a new row.
    pub fn set_ref<Q>(&mut self, key: &Q, value: V)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        match self.row(key) {
            Some(i) => self.rows[i].1 = value,
            None => self.insert(key.to_owned(), value),
        }
    }

    /// The value of the row `is_key` picks among the last row found and `key`'s, set to
    /// `value`; the value before, if it had one. `make_key` is called only for a new row
    /// or when the last row found is another key's (for keys with no borrowed form).
    pub fn replace_with(&mut self, is_key: impl Fn(&K) -> bool, make_key: impl FnOnce() -> K, value: V) -> Option<V> {
        let i = match self.rows.get(self.last.get()) {
            Some((k, _)) if is_key(k) => Some(self.last.get()),
            _ => {
                let key = make_key();
                match self.row(&key) {
                    Some(i) => Some(i),
                    None => {
                        self.insert(key, value);
                        return None;
                    }
                }
            }
        };
        i.map(|i| std::mem::replace(&mut self.rows[i].1, value))
    }

    fn insert(&mut self, key: K, value: V) {
        self.index.insert(key.clone(), self.rows.len());
        self.remember(self.rows.len());
        self.rows.push((key, value));
    }

    pub fn values(&self) -> impl Iterator<Item = V> + '_ {
        self.rows.iter().map(|(_, v)| *v)
    }
}

pub type Clocks = Ordered<String, i64>;

/// parsers/dome_reassembly.advance_clocks: in the hosts' order, each host's clock of
/// `state` (`clocks` picks them) raised to at least now_ms, then `sweep(state, host)`,
/// before the next host's is raised (a sweep may read the other hosts' clocks).
pub fn advance_clocks<S>(state: &mut S, clocks: fn(&mut S) -> &mut Clocks, now_ms: i64,
                         mut sweep: impl FnMut(&mut S, &str)) {
    for i in 0..clocks(state).rows.len() {
        let row = &mut clocks(state).rows[i];
        if row.1 < now_ms {
            row.1 = now_ms;
        }
        let host = row.0.clone();
        sweep(state, &host);
    }
}
