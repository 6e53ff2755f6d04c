//! An insertion-ordered map (Python's dict), for the DOME tables whose order shows in the
//! records: each host's clock (advance() sweeps hosts in that order), process ids,
//! filesystem states. A primitive of the DOME engine: it uses only the tables' hasher.

use crate::hashing::FxMap;

/// A map that keeps its keys in insertion order (Python's dict), for the tables whose
/// order shows in the records (clocks: advance() sweeps hosts in that order).
#[derive(Default, Clone)]
pub struct Ordered<K, V> {
    pub rows: Vec<(K, V)>,
    index: FxMap<K, usize>,
}

impl<K: std::hash::Hash + Eq + Clone, V: Copy> Ordered<K, V> {
    pub fn get<Q>(&self, key: &Q) -> Option<V>
    where
        K: std::borrow::Borrow<Q>,
        Q: std::hash::Hash + Eq + ?Sized,
    {
        self.index.get(key).map(|&i| self.rows[i].1)
    }
    pub fn set(&mut self, key: K, value: V) {
        match self.index.get(&key) {
            Some(&i) => self.rows[i].1 = value,
            None => {
                self.index.insert(key.clone(), self.rows.len());
                self.rows.push((key, value));
            }
        }
    }
    pub fn values(&self) -> impl Iterator<Item = V> + '_ {
        self.rows.iter().map(|(_, v)| *v)
    }
}

pub type Clocks = Ordered<String, i64>;
