//! The least-recently-active order of threads and requests (primitive: no other module).

/// No node: the handle of a key in no order.
pub(crate) const NIL: u32 = u32::MAX;

/// A key's place in an activity order: its handle in the Lru, and the tick of its last
/// move (a table's ticks rise with each move, so places sort in activity order: the
/// changes a checkpoint takes are listed that way).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Place {
    pub tick: u64,
    pub h: u32,
}

struct LruNode<K> {
    key: Option<K>,
    prev: u32,
    next: u32,
}

/// A least-recently-active order: a doubly linked list in a slab, so that moving a key
/// to the back (every line moves its thread and request) costs O(1), not a tree's
/// O(log n) with its allocations. Handles stay valid until their key is removed.
pub struct Lru<K> {
    nodes: Vec<LruNode<K>>,
    free: Vec<u32>,
    head: u32,
    tail: u32,
}

impl<K> Default for Lru<K> {
    fn default() -> Self {
        Lru { nodes: Vec::new(), free: Vec::new(), head: NIL, tail: NIL }
    }
}

impl<K> Lru<K> {
    fn link_back(&mut self, h: u32) {
        let node = &mut self.nodes[h as usize];
        node.prev = self.tail;
        node.next = NIL;
        if self.tail != NIL {
            self.nodes[self.tail as usize].next = h;
        } else {
            self.head = h;
        }
        self.tail = h;
    }

    fn unlink(&mut self, h: u32) {
        let (prev, next) = {
            let node = &self.nodes[h as usize];
            (node.prev, node.next)
        };
        if prev != NIL {
            self.nodes[prev as usize].next = next;
        } else {
            self.head = next;
        }
        if next != NIL {
            self.nodes[next as usize].prev = prev;
        } else {
            self.tail = prev;
        }
    }

    /// Appends `key` as the most recent; its handle.
    pub(crate) fn push_back(&mut self, key: K) -> u32 {
        let h = match self.free.pop() {
            Some(h) => {
                self.nodes[h as usize].key = Some(key);
                h
            }
            None => {
                self.nodes.push(LruNode { key: Some(key), prev: NIL, next: NIL });
                (self.nodes.len() - 1) as u32
            }
        };
        self.link_back(h);
        h
    }

    pub(crate) fn move_back(&mut self, h: u32) {
        if h == NIL || self.tail == h || self.nodes.get(h as usize).map_or(true, |n| n.key.is_none()) {
            return;
        }
        self.unlink(h);
        self.link_back(h);
    }

    pub(crate) fn remove(&mut self, h: u32) -> Option<K> {
        if h == NIL || self.nodes.get(h as usize).map_or(true, |n| n.key.is_none()) {
            return None;
        }
        self.unlink(h);
        self.free.push(h);
        self.nodes[h as usize].key.take()
    }

    /// The keys, least recent first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &K> + '_ {
        let mut h = self.head;
        std::iter::from_fn(move || {
            let node = self.nodes.get(h as usize)?;
            h = node.next;
            node.key.as_ref()
        })
    }

    /// The key of handle `h`, to change what it carries beside the key itself (not what
    /// it is keyed by: the order goes by handles, never by the key's value).
    pub(crate) fn get_mut(&mut self, h: u32) -> Option<&mut K> {
        self.nodes.get_mut(h as usize).and_then(|n| n.key.as_mut())
    }

    /// The least recent key, with its handle.
    pub(crate) fn first_key_value(&self) -> Option<(u32, &K)> {
        if self.head == NIL {
            return None;
        }
        self.nodes[self.head as usize].key.as_ref().map(|k| (self.head, k))
    }
}

#[cfg(test)]
mod tests {
    use super::{Lru, NIL};

    /// The order as a list, the reference: move = take out, append.
    fn check(lru: &Lru<u64>, model: &[(u32, u64)]) {
        let keys: Vec<u64> = lru.iter().copied().collect();
        let want: Vec<u64> = model.iter().map(|&(_, k)| k).collect();
        assert_eq!(keys, want);
        assert_eq!(lru.first_key_value().map(|(h, &k)| (h, k)), model.first().copied());
    }

    #[test]
    fn it_keeps_the_order_of_a_list_under_pushes_moves_and_removals() {
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for keys in [1usize, 3, 40, 600] {
            let mut lru: Lru<u64> = Lru::default();
            let mut model: Vec<(u32, u64)> = Vec::new();
            let mut key = 0u64;
            for step in 0..20_000 {
                let r = next();
                let at = |n: usize| (r >> 8) as usize % n;
                match r % 8 {
                    0 | 1 if model.len() < keys => {
                        key += 1;
                        let h = lru.push_back(key);
                        model.push((h, key));
                    }
                    2 if !model.is_empty() => {
                        let (h, k) = model.remove(at(model.len()));
                        assert_eq!(lru.remove(h), Some(k));
                        assert_eq!(lru.remove(h), None, "a removed handle removes nothing");
                        lru.move_back(h); // and moves nothing
                    }
                    3 => {
                        // the least recent, as an expiry or eviction takes it
                        if let Some((h, k)) = model.first().copied() {
                            model.remove(0);
                            assert_eq!(lru.remove(h), Some(k));
                        }
                    }
                    _ if !model.is_empty() => {
                        let entry = model.remove(at(model.len()));
                        model.push(entry);
                        lru.move_back(entry.0);
                    }
                    _ => lru.move_back(NIL),
                }
                if step % 97 == 0 || keys < 4 {
                    check(&lru, &model);
                }
            }
            check(&lru, &model);
        }
    }
}
