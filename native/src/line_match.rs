//! The line scanner's match of a profile's pattern: which role alternative a line takes,
//! and where its envelope's and that alternative's groups are (depends on jit.rs and
//! template.rs).
//!
//! Two ways, one answer. `Whole`: the profile's combined pattern (envelope, then every
//! role alternative in order, then the catch-all), one PCRE2 match a line. `Split`
//! (fastpath.split_form): the envelope alone, then only the alternatives whose required
//! literal prefix the message starts with, each its own anchored pattern matched where
//! the envelope ended, in the profile's order, the first that matches taken. That is the
//! combined pattern's own answer: the catch-all `.*` after the alternation always
//! matches, so the combined match never backtracks into the envelope, and an alternative
//! whose prefix the message lacks could not have matched. On the light shape it matched
//! 1,643 instructions a line in PCRE2's JIT (issue 30). Each part of the split form is
//! a template (template.rs: no PCRE2) where fastpath.template_items could lay it out,
//! else its PCRE2 pattern.

use crate::jit::Pattern;
use crate::template::{begins, Template};

/// One part of the split form, matched anchored at a place of the line.
pub(crate) enum Part {
    Pcre(Pattern),
    Template(Template),
}

impl Part {
    /// Ok(matched) or PCRE2's error.
    #[inline]
    fn find_at(&mut self, line: &[u8], start: usize) -> Result<bool, i32> {
        match self {
            Part::Pcre(p) => p.find_at(line, start),
            Part::Template(t) => Ok(t.find_at(line, start)),
        }
    }

    #[inline]
    pub(crate) fn get(&self, group: usize) -> Option<(usize, usize)> {
        match self {
            Part::Pcre(p) => p.get(group),
            Part::Template(t) => t.get(group),
        }
    }
}

/// One role alternative of the split form: the bytes a message must start with for it
/// to match (empty: none known), and its pattern, anchored, with its own group numbers.
pub(crate) struct RolePattern {
    pub(crate) prefix: Box<[u8]>,
    pub(crate) part: Part,
}

pub(crate) enum LineMatch {
    /// The combined pattern; `marked`: the alternatives name themselves by `(*MARK:i)`,
    /// else `wrappers[i]` is alternative i's wrapper group.
    Whole { regex: Pattern, marked: bool, wrappers: Vec<usize> },
    Split { envelope: Part, roles: Vec<RolePattern> },
}

/// Unsigned decimal of a mark's name.
fn mark_index(mark: &[u8]) -> Option<usize> {
    if mark.is_empty() || mark.len() > 9 || !mark.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(mark.iter().fold(0usize, |v, &c| v * 10 + usize::from(c - b'0')))
}

impl LineMatch {
    /// The index of the alternative `line` takes, or None: no match, or PCRE2's error
    /// (Python decides such a line).
    pub(crate) fn find(&mut self, line: &[u8]) -> Option<usize> {
        match self {
            LineMatch::Whole { regex, marked, wrappers } => {
                if regex.find(line) != Ok(true) {
                    return None;
                }
                if !*marked {
                    return wrappers.iter().position(|&g| regex.get(g).is_some());
                }
                let index = mark_index(regex.mark()?)?;
                (index < wrappers.len()).then_some(index)
            }
            LineMatch::Split { envelope, roles } => {
                if envelope.find_at(line, 0) != Ok(true) {
                    return None;
                }
                let (_, start) = envelope.get(0)?;
                let message = &line[start..];
                for (i, role) in roles.iter_mut().enumerate() {
                    if !begins(message, &role.prefix) {
                        continue;
                    }
                    match role.part.find_at(line, start) {
                        Ok(true) => return Some(i),
                        Ok(false) => {}
                        Err(_) => return None,
                    }
                }
                None
            }
        }
    }

    /// Envelope group `group`'s span in the last line found.
    #[inline]
    pub(crate) fn envelope(&self, group: usize) -> Option<(usize, usize)> {
        match self {
            LineMatch::Whole { regex, .. } => regex.get(group),
            LineMatch::Split { envelope, .. } => envelope.get(group),
        }
    }

    /// Group `group` of alternative `alt` (the one the last line found took).
    #[inline]
    pub(crate) fn field(&self, alt: usize, group: usize) -> Option<(usize, usize)> {
        match self {
            LineMatch::Whole { regex, .. } => regex.get(group),
            LineMatch::Split { roles, .. } => roles[alt].part.get(group),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{LineMatch, Part, RolePattern};
    use crate::jit::Pattern;

    fn role(prefix: &str, pattern: &str) -> RolePattern {
        RolePattern { prefix: prefix.as_bytes().into(), part: Part::Pcre(Pattern::anchored(pattern).unwrap()) }
    }

    fn split() -> LineMatch {
        LineMatch::Split {
            envelope: Part::Pcre(Pattern::new(r"(?s)\A(?:(\d+) (\w+): ?)").unwrap()),
            roles: vec![
                role("returns ", r"(?s)(?:returns (-?\d+))\s*\z"),
                role("", r"(?s)(?:\bx(\d))\s*\z"),
                role("ret", r"(?s)(?:ret(\w+))\s*\z"),
                role("", r"(?s)(?:.*)\s*\z"),
            ],
        }
    }

    #[test]
    fn the_first_alternative_in_order_whose_pattern_matches_is_taken() {
        let mut m = split();
        let line = b"12 f: returns -3  ";
        assert_eq!(m.find(line), Some(0));
        assert_eq!((m.envelope(1), m.envelope(2), m.field(0, 1)), (Some((0, 2)), Some((3, 4)), Some((14, 16))));
        // `returns ` is there but its pattern fails: the next alternative whose prefix fits
        assert_eq!(m.find(b"12 f: returnsX"), Some(2));
        assert_eq!(m.field(2, 1), Some((9, 14)));
        assert_eq!(m.find(b"12 f: returns x"), Some(3));
    }

    #[test]
    fn an_alternative_sees_the_envelope_before_it_as_the_whole_pattern_would() {
        let mut m = split();
        // `\b` before `x`: a word boundary after ": " but none after "f:" glued to it
        assert_eq!(m.find(b"12 f: x5"), Some(1));
        assert_eq!(m.find(b"12 fx5"), None, "no envelope: Python decides");
        assert_eq!(m.find(b"12 f:x5"), Some(1), "`:` is no word character either");
    }

    #[test]
    fn an_alternative_matches_only_where_the_envelope_ended() {
        let mut m = split();
        // `returns 4` appears later in the message, not at its start
        assert_eq!(m.find(b"12 f: note: returns 4"), Some(3));
    }
}
