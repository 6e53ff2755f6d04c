//! A list kept inline while it holds at most one item (primitive: depends on no other module).
//!
//! The linker holds lists that nearly always have one item (a token's runs, a path's runs
//! and calls, a call's candidate runs, a run's paths), each held for seconds: a Vec of one
//! is an allocation and a free, and, read again at release, one more line out of cache
//! behind the one that holds it. One item lives in the list itself; a second moves them to
//! a Vec, in their order.

use std::ops::Deref;

#[derive(Clone, Default)]
pub(crate) enum Few<T> {
    #[default]
    Empty,
    One(T),
    Many(Vec<T>),
}

impl<T> Few<T> {
    pub(crate) fn push(&mut self, item: T) {
        match std::mem::take(self) {
            Few::Empty => *self = Few::One(item),
            Few::One(first) => *self = Few::Many(vec![first, item]),
            Few::Many(mut items) => {
                items.push(item);
                *self = Few::Many(items);
            }
        }
    }

    /// Takes out the item at `i`, the others keeping their order (Vec::remove).
    pub(crate) fn remove(&mut self, i: usize) -> T {
        match std::mem::take(self) {
            Few::One(item) if i == 0 => item,
            Few::Many(mut items) => {
                let item = items.remove(i);
                *self = Few::Many(items);
                item
            }
            _ => panic!("Few::remove: index {i} out of range"),
        }
    }
}

impl<T> Deref for Few<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        match self {
            Few::Empty => &[],
            Few::One(item) => std::slice::from_ref(item),
            Few::Many(items) => items,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Few;

    #[test]
    fn items_keep_the_order_they_were_pushed_in_as_a_vec_would() {
        let mut few = Few::default();
        let mut vec = Vec::new();
        for i in 0..5 {
            few.push(i);
            vec.push(i);
            assert_eq!(&*few, &vec[..]);
        }
    }

    #[test]
    fn one_item_is_held_inline() {
        let mut few = Few::default();
        few.push(7);
        assert!(matches!(few, Few::One(7)));
        few.push(8);
        assert!(matches!(few, Few::Many(_)));
    }

    #[test]
    fn remove_takes_out_one_item_and_keeps_the_others_in_order() {
        let mut few = Few::default();
        for i in 0..4 {
            few.push(i);
        }
        assert_eq!(few.remove(1), 1);
        assert_eq!(&*few, &[0, 2, 3]);
        let mut one = Few::default();
        one.push("a");
        assert_eq!(one.remove(0), "a");
        assert!(one.is_empty());
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn remove_past_the_end_panics_as_vec_remove_does() {
        let mut few: Few<i32> = Few::default();
        few.remove(0);
    }
}
