//! A table of values found by key, each in a numbered slot of a slab (primitive: depends
//! only on hashing.rs).
//!
//! The engine's threads live here: a line finds its thread by key once, takes it out of
//! its slot while the rules change it and the rest of the state at once, and puts it back
//! by the slot's number, where a map would be searched a second time.

use std::hash::Hash;

use crate::hashing::FxMap;

pub(crate) struct KeyedSlab<K, V> {
    ids: FxMap<K, u32>,
    slots: Vec<Option<V>>,
    free: Vec<u32>,
}

impl<K, V> Default for KeyedSlab<K, V> {
    fn default() -> Self {
        KeyedSlab { ids: FxMap::default(), slots: Vec::new(), free: Vec::new() }
    }
}

impl<K: Hash + Eq + Copy, V> KeyedSlab<K, V> {
    pub(crate) fn len(&self) -> usize {
        self.ids.len()
    }

    /// The slot of `key`'s value.
    pub(crate) fn id(&self, key: &K) -> Option<u32> {
        self.ids.get(key).copied()
    }

    /// `key`'s value: none while it is taken out of its slot.
    pub(crate) fn get(&self, key: &K) -> Option<&V> {
        self.slots[*self.ids.get(key)? as usize].as_ref()
    }

    pub(crate) fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        self.slots[*self.ids.get(key)? as usize].as_mut()
    }

    /// Takes the value of slot `id` out; `put` gives it back. The key stays while it is out.
    pub(crate) fn take(&mut self, id: u32) -> Option<V> {
        self.slots[id as usize].take()
    }

    pub(crate) fn put(&mut self, id: u32, value: V) {
        self.slots[id as usize] = Some(value);
    }

    /// Sets `key`'s value; its slot.
    pub(crate) fn insert(&mut self, key: K, value: V) -> u32 {
        if let Some(&id) = self.ids.get(&key) {
            self.slots[id as usize] = Some(value);
            return id;
        }
        let id = match self.free.pop() {
            Some(id) => {
                self.slots[id as usize] = Some(value);
                id
            }
            None => {
                self.slots.push(Some(value));
                (self.slots.len() - 1) as u32
            }
        };
        self.ids.insert(key, id);
        id
    }

    /// Forgets `key`, and gives its value. A value taken out of its slot is not forgotten
    /// (None): its slot stays its own until `put` gives it back.
    pub(crate) fn remove(&mut self, key: &K) -> Option<V> {
        let id = *self.ids.get(key)?;
        let value = self.slots[id as usize].take()?;
        self.ids.remove(key);
        self.free.push(id);
        Some(value)
    }

    /// The keys, in the order of the map that finds them (as a map of the values would give).
    pub(crate) fn keys(&self) -> impl Iterator<Item = &K> {
        self.ids.keys()
    }

    /// Each key with its value, but those taken out.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.ids.iter().filter_map(|(k, &id)| self.slots[id as usize].as_ref().map(|v| (k, v)))
    }

    pub(crate) fn clear(&mut self) {
        self.ids.clear();
        self.slots.clear();
        self.free.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::KeyedSlab;

    #[test]
    fn a_value_is_found_by_its_key_and_by_its_slot() {
        let mut t: KeyedSlab<(u32, i64), String> = KeyedSlab::default();
        let a = t.insert((1, 10), "a".into());
        let b = t.insert((1, 11), "b".into());
        assert_ne!(a, b);
        assert_eq!(t.id(&(1, 11)), Some(b));
        assert_eq!(t.get(&(1, 10)).map(String::as_str), Some("a"));
        *t.get_mut(&(1, 11)).unwrap() += "!";
        assert_eq!(t.get(&(1, 11)).map(String::as_str), Some("b!"));
        assert_eq!(t.get(&(2, 10)), None);
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn a_value_taken_out_keeps_its_key_and_slot_until_put_back() {
        let mut t: KeyedSlab<u64, String> = KeyedSlab::default();
        let id = t.insert(7, "seven".into());
        let v = t.take(id).unwrap();
        assert_eq!(t.get(&7), None);
        assert_eq!(t.len(), 1);
        assert_eq!(t.iter().count(), 0);
        assert_eq!(t.remove(&7), None);
        assert_eq!(t.insert(8, "eight".into()), id + 1, "the slot of a value out is not free");
        t.put(id, v + "+");
        assert_eq!(t.get(&7).map(String::as_str), Some("seven+"));
        assert_eq!(t.id(&7), Some(id));
    }

    #[test]
    fn a_removed_key_frees_its_slot_for_the_next() {
        let mut t: KeyedSlab<u64, u64> = KeyedSlab::default();
        let first = t.insert(1, 100);
        t.insert(2, 200);
        assert_eq!(t.remove(&1), Some(100));
        assert_eq!(t.remove(&1), None);
        assert_eq!(t.get(&1), None);
        assert_eq!(t.insert(3, 300), first);
        assert_eq!(t.get(&3), Some(&300));
        assert_eq!(t.get(&2), Some(&200));
        let mut keys: Vec<u64> = t.keys().copied().collect();
        keys.sort();
        assert_eq!(keys, [2, 3]);
    }

    #[test]
    fn inserting_a_known_key_replaces_its_value_in_its_slot() {
        let mut t: KeyedSlab<u64, u64> = KeyedSlab::default();
        let id = t.insert(5, 1);
        assert_eq!(t.insert(5, 2), id);
        assert_eq!(t.get(&5), Some(&2));
        assert_eq!(t.len(), 1);
        t.clear();
        assert_eq!(t.len(), 0);
        assert_eq!(t.get(&5), None);
    }
}
