//! A profile pattern of the simple kind matched without PCRE2 (primitive: depends on no
//! other module): literals, character classes with counts, groups, optional groups, as
//! fastpath.template_items lays them out.
//!
//! It matches each class as far as it can and never gives back (possessive). That is the
//! regex's own answer only where giving back could never help, which template_items
//! checks before handing a pattern over: every class of variable count and every
//! optional group shares no character with what may follow it. Such a pattern is matched
//! in one pass over the text with no backtracking state: PCRE2's JIT spent ~900
//! instructions a line on the DPM envelope alone (issue 30).

/// One step of a template.
pub(crate) enum Item {
    /// These bytes, exactly.
    Literal(Box<[u8]>),
    /// Between min and max bytes of the set, as many as there are; `every`: the set
    /// holds every byte (`.` with DOTALL), so the bytes need no reading.
    Class { set: [bool; 256], min: usize, max: usize, every: bool },
    /// Group `n` opens / closes here.
    Open(usize),
    Close(usize),
    /// The next `len` items, taken when the byte here can start them (`first`), else
    /// skipped with their groups unset.
    Optional { first: [bool; 256], len: usize },
}

pub(crate) struct Template {
    items: Vec<Item>,
    /// What must come after the items: `\s*\z` (a role's pattern), or anything (the
    /// envelope, whose message the roles read).
    to_end: bool,
    /// Per group (0: the whole match), its span in the last match; (MAX, MAX) unset.
    spans: Vec<(usize, usize)>,
}

const UNSET: (usize, usize) = (usize::MAX, usize::MAX);

/// Whether `hay` starts with `needle`: a loop, not a call to memcmp, for the few bytes
/// of a literal or a prefix (the call cost more than the comparison).
#[inline]
pub(crate) fn begins(hay: &[u8], needle: &[u8]) -> bool {
    hay.len() >= needle.len() && hay.iter().zip(needle).all(|(a, b)| a == b)
}

/// PCRE2's `\s` (what `\s*\z` skips).
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

impl Template {
    /// items: as laid out by fastpath.template_items; groups: capture groups, group 0 not
    /// counted. An item naming a group past `groups`, or an optional run past the end,
    /// is refused.
    pub(crate) fn new(items: Vec<Item>, groups: usize, to_end: bool) -> Result<Self, String> {
        for (i, item) in items.iter().enumerate() {
            match item {
                Item::Open(n) | Item::Close(n) if *n == 0 || *n > groups => {
                    return Err(format!("template item {i}: no group {n}"))
                }
                Item::Optional { len, .. } if i + 1 + len > items.len() => {
                    return Err(format!("template item {i}: optional run past the end"))
                }
                Item::Class { min, max, .. } if min > max => {
                    return Err(format!("template item {i}: count {min} > {max}"))
                }
                _ => {}
            }
        }
        Ok(Template { items, to_end, spans: vec![UNSET; groups + 1] })
    }

    /// Matches `line` from byte `start`: whether it matched (the groups then set).
    pub(crate) fn find_at(&mut self, line: &[u8], start: usize) -> bool {
        self.spans.fill(UNSET);
        let mut pos = start;
        let mut i = 0;
        while i < self.items.len() {
            match &self.items[i] {
                Item::Literal(text) => {
                    if !begins(&line[pos..], text) {
                        return false;
                    }
                    pos += text.len();
                }
                Item::Class { set, min, max, every } => {
                    let rest = &line[pos..];
                    let limit = rest.len().min(*max);
                    let taken = if *every {
                        limit
                    } else {
                        rest[..limit].iter().position(|&c| !set[usize::from(c)]).unwrap_or(limit)
                    };
                    if taken < *min {
                        return false;
                    }
                    pos += taken;
                }
                Item::Open(n) => self.spans[*n].0 = pos,
                Item::Close(n) => self.spans[*n].1 = pos,
                Item::Optional { first, len } => {
                    if !line.get(pos).is_some_and(|&c| first[usize::from(c)]) {
                        i += len;
                    }
                }
            }
            i += 1;
        }
        if self.to_end {
            while line.get(pos).is_some_and(|&c| is_space(c)) {
                pos += 1;
            }
            if pos != line.len() {
                return false;
            }
        }
        self.spans[0] = (start, pos);
        true
    }

    /// Group `i`'s span in the last match, None if it did not take part.
    #[inline]
    pub(crate) fn get(&self, i: usize) -> Option<(usize, usize)> {
        let span = *self.spans.get(i)?;
        (span.0 != usize::MAX && span.1 != usize::MAX).then_some(span)
    }
}

#[cfg(test)]
mod tests {
    use super::{Item, Template};

    fn set(bytes: &[u8]) -> [bool; 256] {
        let mut s = [false; 256];
        for &c in bytes {
            s[usize::from(c)] = true;
        }
        s
    }

    fn digits() -> [bool; 256] {
        set(b"0123456789")
    }

    /// `(\d+)(?:,(\d+))? ` then `\s*\z` when to_end
    fn pid_tid(to_end: bool) -> Template {
        let items = vec![
            Item::Open(1),
            Item::Class { set: digits(), min: 1, max: usize::MAX, every: false },
            Item::Close(1),
            Item::Optional { first: set(b","), len: 4 },
            Item::Literal((*b",").into()),
            Item::Open(2),
            Item::Class { set: digits(), min: 1, max: 3, every: false },
            Item::Close(2),
            Item::Literal((*b" ").into()),
        ];
        Template::new(items, 2, to_end).unwrap()
    }

    #[test]
    fn it_reads_counted_classes_and_an_optional_group_with_its_group() {
        let mut t = pid_tid(false);
        assert!(t.find_at(b"x 123,45 rest", 2));
        assert_eq!((t.get(0), t.get(1), t.get(2)), (Some((2, 9)), Some((2, 5)), Some((6, 8))));
        assert!(t.find_at(b"123 rest", 0));
        assert_eq!((t.get(1), t.get(2)), (Some((0, 3)), None), "the skipped group is unset");
        assert!(!t.find_at(b"123,4567 ", 0), "four digits where three at most may be");
        assert!(!t.find_at(b"123, ", 0), "an optional group begun must end");
        assert!(!t.find_at(b"", 0));
        assert_eq!(t.get(9), None);
    }

    #[test]
    fn to_the_end_it_allows_white_space_only() {
        let mut t = pid_tid(true);
        assert!(t.find_at(b"12,3  \t", 0));
        assert_eq!(t.get(0), Some((0, 7)));
        assert!(!t.find_at(b"12,3 x", 0));
    }

    #[test]
    fn a_group_or_run_out_of_bounds_is_refused() {
        assert!(Template::new(vec![Item::Open(2)], 1, false).is_err());
        assert!(Template::new(vec![Item::Optional { first: set(b"a"), len: 1 }], 0, false).is_err());
        assert!(Template::new(vec![Item::Class { set: digits(), min: 2, max: 1, every: false }], 0, false).is_err());
    }
}
