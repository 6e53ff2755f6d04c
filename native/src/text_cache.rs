//! A small memory of recently made shared texts (primitive: depends only on hashing.rs
//! and byte_runs.rs).
//!
//! Every call line names its client, and a site has few: making a new `Rc<str>` for each
//! was an allocation and a free a call, about one line in six, and what it left behind
//! sent the allocator down its slow path. A text asked for again is the one made before,
//! shared. Direct-mapped and of fixed size, so a site of many clients costs a bounded
//! memory (a slot's text is replaced by the next one hashed there), never a growing table.

use std::rc::Rc;

use crate::byte_runs::equal;
use crate::hashing;

/// A text shared by the tables and records that hold it.
pub type Text = Rc<str>;

/// Slots: 2^SLOT_BITS, more than the clients of a busy site's head node.
const SLOT_BITS: u32 = 6;
const SLOTS: usize = 1 << SLOT_BITS;

pub(crate) struct TextCache {
    slots: Vec<Option<Rc<str>>>,
}

impl Default for TextCache {
    fn default() -> Self {
        TextCache { slots: vec![None; SLOTS] }
    }
}

impl TextCache {
    /// `text` as a shared text: the one this cache made last time, when it still holds it.
    pub(crate) fn get(&mut self, text: &str) -> Text {
        // The hash's top bits: a multiplicative hash mixes its input into them, not the low ones.
        let slot = &mut self.slots[(hashing::of_text(text) >> (u64::BITS - SLOT_BITS)) as usize];
        match slot {
            Some(held) if equal(held.as_bytes(), text.as_bytes()) => held.clone(),
            _ => {
                let made: Rc<str> = text.into();
                *slot = Some(made.clone());
                made
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{TextCache, SLOTS};
    use std::rc::Rc;

    #[test]
    fn a_text_asked_again_is_the_one_made_before() {
        let mut c = TextCache::default();
        let a = c.get("lxfsra11.cern.ch");
        let b = c.get(&String::from("lxfsra11.cern.ch"));
        assert!(Rc::ptr_eq(&a, &b));
        assert_eq!(&*a, "lxfsra11.cern.ch");
        let other = c.get("lxfsra12.cern.ch");
        assert_eq!(&*other, "lxfsra12.cern.ch");
        assert!(!Rc::ptr_eq(&a, &other));
    }

    #[test]
    fn many_texts_keep_a_fixed_memory_and_each_answer_right() {
        let mut c = TextCache::default();
        let names: Vec<String> = (0..SLOTS * 8).map(|i| format!("host{i}.example.org")).collect();
        for _ in 0..2 {
            for n in &names {
                assert_eq!(&*c.get(n), n.as_str());
            }
        }
        assert_eq!(c.slots.len(), SLOTS);
        assert!(c.slots.iter().all(|s| s.as_ref().is_some_and(|t| names.iter().any(|n| **t == **n))));
        assert_eq!(&*c.get(""), "");
    }
}
