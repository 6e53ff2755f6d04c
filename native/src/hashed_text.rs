//! A shared text that carries its hash, made once (primitive: depends only on hashing.rs
//! and text_cache.rs).
//!
//! A token or a path is a table's key for seconds: a line names it, later lines of the
//! same call, run or request look it up again, by then out of cache. A key that carries
//! its hash is hashed again without reading its text (a growing table's rehash too), and
//! is compared without reading it where both sides hold the very same text (the same
//! `Rc`): what the later look-ups nearly always are. The text itself is read once, when
//! a line's bytes are matched against the table (`Probe`).

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::rc::Rc;

use crate::hashing;
use crate::text_cache::Text;

#[derive(Clone)]
pub(crate) struct HashedText {
    hash: u64,
    text: Text,
}

impl HashedText {
    pub(crate) fn new(text: Text) -> Self {
        HashedText { hash: hashing::of_text(&text), text }
    }

    /// `text`'s hash, as `new` makes it (a line's text, before any `Rc` is made for it).
    pub(crate) fn hash_of(text: &str) -> u64 {
        hashing::of_text(text)
    }

    /// A text and the hash `hash_of` gave for it.
    pub(crate) fn with_hash(text: Text, hash: u64) -> Self {
        debug_assert_eq!(hash, hashing::of_text(&text));
        HashedText { hash, text }
    }

    pub(crate) fn text(&self) -> &Text {
        &self.text
    }

    pub(crate) fn hash(&self) -> u64 {
        self.hash
    }
}

impl Deref for HashedText {
    type Target = str;

    fn deref(&self) -> &str {
        &self.text
    }
}

impl PartialEq for HashedText {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && (Rc::ptr_eq(&self.text, &other.text) || self.text == other.text)
    }
}

impl Eq for HashedText {}

impl Hash for HashedText {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

/// A line's text and its hash, to find the `HashedText` a table holds for it without
/// making one (a table of `HashedText` is searched with `&Probe as &dyn Lookup`).
pub(crate) struct Probe<'a> {
    pub(crate) hash: u64,
    pub(crate) text: &'a str,
}

impl<'a> Probe<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Probe { hash: HashedText::hash_of(text), text }
    }
}

/// What a table of `HashedText` is searched by: a key it holds, or a line's `Probe`.
pub(crate) trait Lookup {
    fn hash(&self) -> u64;
    fn text(&self) -> &str;
}

impl Lookup for HashedText {
    fn hash(&self) -> u64 {
        self.hash
    }
    fn text(&self) -> &str {
        &self.text
    }
}

impl Lookup for Probe<'_> {
    fn hash(&self) -> u64 {
        self.hash
    }
    fn text(&self) -> &str {
        self.text
    }
}

impl<'a> Borrow<dyn Lookup + 'a> for HashedText {
    fn borrow(&self) -> &(dyn Lookup + 'a) {
        self
    }
}

impl PartialEq for dyn Lookup + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.hash() == other.hash() && self.text() == other.text()
    }
}

impl Eq for dyn Lookup + '_ {}

impl Hash for dyn Lookup + '_ {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(Lookup::hash(self));
    }
}

#[cfg(test)]
mod tests {
    use super::{HashedText, Lookup, Probe};
    use crate::hashing::FxMap;
    use crate::text_cache::Text;
    use std::rc::Rc;

    #[test]
    fn a_line_finds_the_key_its_text_made_and_no_other() {
        let mut m: FxMap<HashedText, u32> = FxMap::default();
        let tokens: Vec<String> = (0..500).map(|i| format!("4986f3a6-948b-42b1-9910-{i:012}")).collect();
        for (i, t) in tokens.iter().enumerate() {
            m.insert(HashedText::new(Text::from(t.as_str())), i as u32);
        }
        for (i, t) in tokens.iter().enumerate() {
            let line = t.clone(); // another copy of the bytes, as a line holds them
            let (key, &v) = m.get_key_value(&Probe::new(&line) as &dyn Lookup).expect("found by its bytes");
            assert_eq!(v, i as u32);
            assert_eq!(&**key.text(), t.as_str());
            // the key found, and one made anew from the same bytes, find it again
            assert_eq!(m.get(key), Some(&v));
            assert_eq!(m.get(&HashedText::new(Text::from(line.as_str()))), Some(&v));
        }
        assert!(m.get(&Probe::new("4986f3a6-948b-42b1-9910-999999999999") as &dyn Lookup).is_none());
        assert!(m.get(&Probe::new("") as &dyn Lookup).is_none());
    }

    #[test]
    fn equal_texts_are_equal_keys_whether_shared_or_not() {
        let a = HashedText::new(Text::from("tok"));
        let shared = a.clone();
        let copy = HashedText::new(Text::from("tok"));
        assert!(Rc::ptr_eq(a.text(), shared.text()));
        assert!(a == shared && a == copy);
        assert!(a != HashedText::new(Text::from("tol")));
        assert_eq!(a.hash(), HashedText::hash_of("tok"));
        assert!(HashedText::with_hash(Text::from("tok"), a.hash()) == a);
    }
}
