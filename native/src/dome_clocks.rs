//! An insertion-ordered map (Python's dict), for the DOME tables whose order shows in the
//! records: each host's clock (advance() sweeps hosts in that order), process ids,
//! filesystem states; and for the per-host tables a line looks its host up in (the open
//! calls), for its cheap look-up of the host of the line before; and the DOME state's
//! hosts numbered (HostIds), which those tables key a host by. A primitive of the DOME
//! engine: it uses only the tables' hasher.

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
#[derive(Clone)]
pub struct Ordered<K, V> {
    pub rows: Vec<(K, V)>,
    index: FxMap<K, usize>,
    last: Cell<usize>,
    before_last: Cell<usize>,
}

// By hand: derived, it would ask a Default of V (a host's calls have none, they hold its name).
impl<K, V> Default for Ordered<K, V> {
    fn default() -> Self {
        Ordered { rows: Vec::new(), index: FxMap::default(), last: Cell::new(0), before_last: Cell::new(0) }
    }
}

impl<K: Hash + Eq + Clone, V> Ordered<K, V> {
    /// The row of `key`, if it has one. The last row found is checked here, inline (most
    /// look-ups, a compare), the rest out of line.
    #[inline]
    fn row<Q>(&self, key: &Q) -> Option<usize>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let last = self.last.get();
        match self.rows.get(last) {
            Some((k, _)) if k.borrow() == key => Some(last),
            _ => self.row_not_last(key),
        }
    }

    #[inline(never)]
    fn row_not_last<Q>(&self, key: &Q) -> Option<usize>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let i = self.before_last.get();
        if let Some((k, _)) = self.rows.get(i) {
            if k.borrow() == key {
                return Some(i);
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

    fn insert(&mut self, key: K, value: V) {
        self.index.insert(key.clone(), self.rows.len());
        self.remember(self.rows.len());
        self.rows.push((key, value));
    }

    pub fn get_ref<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.row(key).map(|i| &self.rows[i].1)
    }

    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.row(key).map(|i| &mut self.rows[i].1)
    }

    /// The value of `key`, a new row of `make()`'s first if it has none (`key` copied then only).
    pub fn get_or_insert_with<Q>(&mut self, key: &Q, make: impl FnOnce() -> V) -> &mut V
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let i = self.row_or_insert_with(key, make);
        &mut self.rows[i].1
    }

    /// The index in `rows` of `key`'s row, a new one of `make()`'s if it has none: rows
    /// are never removed, so it stays the key's (a caller's several uses, one look-up).
    pub fn row_or_insert_with<Q>(&mut self, key: &Q, make: impl FnOnce() -> V) -> usize
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        match self.row(key) {
            Some(i) => i,
            None => {
                self.insert(key.to_owned(), make());
                self.rows.len() - 1
            }
        }
    }

    /// The rows in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.rows.iter().map(|(k, v)| (k, v))
    }
}

impl<K: Hash + Eq + Clone, V: Copy> Ordered<K, V> {
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

    pub fn values(&self) -> impl Iterator<Item = V> + '_ {
        self.rows.iter().map(|(_, v)| *v)
    }
}

/// host -> its clock: the checksum stage's by name, the DOME state's by HostId.
pub type Clocks<K = String> = Ordered<K, i64>;

/// A host's number in the DOME state's HostIds.
pub type HostId = u32;

/// The DOME state's hosts, numbered in the order first met (rows are never removed): its
/// tables are keyed by the number, so a line's host is hashed and compared as a string
/// once (most lines are of the host of the line before: one compare), not in each table.
#[derive(Default)]
pub struct HostIds(Ordered<String, ()>);

impl HostIds {
    /// The number of host `name` (a new one for a host not met before).
    pub fn id(&mut self, name: &str) -> HostId {
        self.0.row_or_insert_with(name, || ()) as HostId
    }

    pub fn name(&self, id: HostId) -> &str {
        &self.0.rows[id as usize].0
    }
}

/// The clock of a host with none yet, as the rules read it (Python's default).
pub const NO_CLOCK: i64 = i64::MIN / 2;

/// parsers/dome_reassembly.advance_clocks: in the hosts' order, each host's clock of
/// `state` (`clocks` picks them) raised to at least now_ms, then `sweep(state, host)`,
/// before the next host's is raised (a sweep may read the other hosts' clocks).
pub fn advance_clocks<S, K: Hash + Eq + Clone>(state: &mut S, clocks: fn(&mut S) -> &mut Clocks<K>, now_ms: i64,
                                                mut sweep: impl FnMut(&mut S, &K)) {
    for i in 0..clocks(state).rows.len() {
        let row = &mut clocks(state).rows[i];
        if row.1 < now_ms {
            row.1 = now_ms;
        }
        let host = row.0.clone();
        sweep(state, &host);
    }
}

#[cfg(test)]
mod tests {
    use super::{HostIds, Ordered};

    #[test]
    fn a_host_is_numbered_once_in_the_order_first_met() {
        let mut hosts = HostIds::default();
        assert_eq!((hosts.id("head"), hosts.id("disk1"), hosts.id("head"), hosts.id("disk2")), (0, 1, 0, 2));
        assert_eq!((hosts.name(0), hosts.name(2)), ("head", "disk2"));
    }

    #[test]
    fn a_row_keeps_its_index_and_the_rows_their_first_insertion_order() {
        let mut hosts: Ordered<String, Vec<i64>> = Ordered::default();
        let head = hosts.row_or_insert_with("head", Vec::new);
        let disk = hosts.row_or_insert_with("disk", Vec::new);
        hosts.rows[head].1.push(1);
        // found again (the last row, the one before it, and by hash past both): the same row
        assert_eq!(hosts.row_or_insert_with("disk", Vec::new), disk);
        assert_eq!(hosts.row_or_insert_with("head", Vec::new), head);
        hosts.row_or_insert_with("other", Vec::new);
        hosts.row_or_insert_with("third", Vec::new);
        assert_eq!(hosts.row_or_insert_with("head", || vec![9]), head);
        hosts.get_mut("disk").unwrap().push(2);
        assert_eq!(hosts.get_ref("head"), Some(&vec![1]));
        assert_eq!(hosts.get_ref("disk"), Some(&vec![2]));
        assert_eq!(hosts.get_ref("none"), None);
        let order: Vec<&str> = hosts.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(order, ["head", "disk", "other", "third"]);
    }
}
