//! A DOME role pattern's plan (parsers/role_reader.py: its literals and its runs of one
//! character class, each followed by a literal or the end) read over a line's bytes
//! without PCRE2 (primitive: depends on no other module).
//!
//! Each run ends where the regex's first choice ends it: a lazy run at the first place
//! its next literal follows, a greedy one at the last, within its class and bounds. When
//! the rest then reads, that is the match PCRE2 returns and its groups' spans; when it
//! does not, `read` says false and the scanner runs the regex, which may find a later
//! choice: the regex stays the authority (issue 30: the call pattern's lazy `.*?` took
//! ~1,200 instructions a line in PCRE2's JIT).

/// One step of a plan: a literal, a run of bytes of `class` (a 256-bit set) between
/// `least` and `most` bytes long, captured as `group` (0: not captured), or where a group
/// of more steps opens or closes.
pub(crate) enum Step {
    Literal(Vec<u8>),
    Run { class: [u8; 32], all: bool, least: usize, most: usize, lazy: bool, group: usize },
    Open(usize),
    Close(usize),
}

pub(crate) struct Reader {
    steps: Vec<Step>,
    /// The spans of the last line read, by group (None: not set).
    spans: Vec<Option<(usize, usize)>>,
}

/// White space as the scanner's `\s` reads it (ASCII): what may follow a role's pattern.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

impl Step {
    /// A step as role_reader.py describes it: (kind, literal, class as 32 bytes, least,
    /// most, lazy, group); None for one it does not make.
    pub(crate) fn new(kind: &str, literal: Vec<u8>, class: &[u8], least: usize, most: usize, lazy: bool, group: usize) -> Option<Step> {
        match kind {
            "literal" if !literal.is_empty() => Some(Step::Literal(literal)),
            "run" => {
                let class: [u8; 32] = class.try_into().ok()?;
                Some(Step::Run { all: class.iter().all(|&b| b == 0xff), class, least, most, lazy, group })
            }
            "open" => Some(Step::Open(group)),
            "close" => Some(Step::Close(group)),
            _ => None,
        }
    }

    fn is_mark(&self) -> bool {
        matches!(self, Step::Open(_) | Step::Close(_))
    }
}

/// The step after `i` that reads text (a group's marks aside).
fn next_read(steps: &[Step], i: usize) -> Option<&Step> {
    steps[i + 1..].iter().find(|s| !s.is_mark())
}

impl Reader {
    /// A plan whose runs are each followed by a literal or the end, and whose last run is
    /// greedy (role_reader.py makes no other); None otherwise.
    pub(crate) fn new(steps: Vec<Step>) -> Option<Reader> {
        let mut groups = 0;
        for (i, step) in steps.iter().enumerate() {
            match step {
                Step::Run { lazy, group, .. } => {
                    match next_read(&steps, i) {
                        Some(Step::Run { .. }) => return None,
                        None if *lazy => return None,
                        _ => {}
                    }
                    groups = groups.max(*group + 1);
                }
                Step::Open(group) | Step::Close(group) => groups = groups.max(*group + 1),
                Step::Literal(_) => {}
            }
        }
        Some(Reader { steps, spans: vec![None; groups] })
    }

    /// Group `group`'s span in the last line read.
    pub(crate) fn span(&self, group: usize) -> Option<(usize, usize)> {
        self.spans.get(group).copied().flatten()
    }

    /// Whether the plan reads `line` from `at` to its end (white space may follow), the
    /// spans then those of the regex's match; false: the regex decides.
    pub(crate) fn read(&mut self, line: &[u8], at: usize) -> bool {
        self.spans.iter_mut().for_each(|s| *s = None);
        let mut p = at;
        for (i, step) in self.steps.iter().enumerate() {
            match step {
                Step::Literal(lit) => {
                    if !line[p..].starts_with(lit) {
                        return false;
                    }
                    p += lit.len();
                }
                Step::Run { class, all, least, most, lazy, group } => {
                    let limit = line.len().min(p.saturating_add(*most));
                    let longest = if *all {
                        limit
                    } else {
                        let run = line[p..limit].iter().position(|&b| class[(b >> 3) as usize] & (1 << (b & 7)) == 0);
                        run.map_or(limit, |n| p + n)
                    };
                    let shortest = p + least;
                    if longest < shortest {
                        return false;
                    }
                    let end = match next_read(&self.steps, i) {
                        Some(Step::Literal(next)) => {
                            let fits = |q: &usize| line.get(*q) == next.first() && line[*q..].starts_with(next);
                            let found = if *lazy {
                                (shortest..=longest).find(fits)
                            } else {
                                (shortest..=longest).rev().find(fits)
                            };
                            match found {
                                Some(q) => q,
                                None => return false,
                            }
                        }
                        _ => longest,
                    };
                    if *group > 0 {
                        self.spans[*group] = Some((p, end));
                    }
                    p = end;
                }
                Step::Open(group) => self.spans[*group] = Some((p, p)),
                Step::Close(group) => {
                    if let Some(span) = &mut self.spans[*group] {
                        span.1 = p;
                    }
                }
            }
        }
        line[p..].iter().all(|&b| is_space(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(bytes: &[u8], non_ascii: bool) -> Vec<u8> {
        let mut c = vec![0u8; 32];
        for &b in bytes {
            c[(b >> 3) as usize] |= 1 << (b & 7);
        }
        if non_ascii {
            c[16..].fill(0xff);
        }
        c
    }

    fn any() -> Vec<u8> {
        vec![0xff; 32]
    }

    fn not_quote() -> Vec<u8> {
        class(&(0u8..128).filter(|&b| b != b'\'').collect::<Vec<_>>(), true)
    }

    fn lit(s: &str) -> Step {
        Step::new("literal", s.as_bytes().to_vec(), &[], 0, 0, false, 0).unwrap()
    }

    fn run(c: Vec<u8>, least: usize, most: usize, lazy: bool, group: usize) -> Step {
        Step::new("run", Vec::new(), &c, least, most, lazy, group).unwrap()
    }

    /// `(a: '(.*?)' b: '([^']*)')`, the shape of the call pattern in its role's group 3.
    fn call() -> Reader {
        Reader::new(vec![
            Step::Open(3), lit("a: '"), run(any(), 0, usize::MAX, true, 1), lit("' b: '"),
            run(not_quote(), 0, usize::MAX, false, 2), lit("'"), Step::Close(3),
        ])
        .unwrap()
    }

    #[test]
    fn a_lazy_run_ends_at_the_first_place_its_literal_follows() {
        let mut r = call();
        let line = "x a: 'dn' with' b: 'h'  ";
        assert!(r.read(line.as_bytes(), 2));
        let (s, e) = r.span(1).unwrap();
        assert_eq!(&line[s..e], "dn' with");
        let (s, e) = r.span(2).unwrap();
        assert_eq!(&line[s..e], "h");
        assert_eq!(r.span(3), Some((2, line.len() - 2)));
    }

    #[test]
    fn a_line_the_first_choice_does_not_read_is_left_to_the_regex() {
        // The regex would take the second `' b: '` (its group 1 `x' b: 'y`): the reader says no.
        let mut r = call();
        assert!(!r.read(b"a: 'x' b: 'y' b: 'z'", 0));
        assert!(!r.read(b"a: 'x' b: 'y' tail", 0));
        assert!(!r.read(b"b: 'x' b: 'y'", 0));
    }

    #[test]
    fn a_greedy_run_ends_at_the_last_place_its_literal_follows() {
        let mut r = Reader::new(vec![lit("lfn: '"), run(any(), 0, usize::MAX, false, 1), lit("'")]).unwrap();
        let line = "lfn: 'a'b'";
        assert!(r.read(line.as_bytes(), 0));
        assert_eq!(r.span(1), Some((6, 9)));
    }

    #[test]
    fn a_run_keeps_to_its_class_and_bounds() {
        let digits = class(b"0123456789", false);
        let mut r = Reader::new(vec![lit("code: "), run(digits, 3, 3, false, 1)]).unwrap();
        assert!(r.read(b"code: 200", 0));
        assert!(r.read(b"code: 200 \t", 0));
        assert!(!r.read(b"code: 2000", 0));
        assert!(!r.read(b"code: 20", 0));
        assert!(!r.read(b"code: 2x0", 0));
    }

    #[test]
    fn a_plan_with_a_choice_it_cannot_make_is_refused() {
        assert!(Reader::new(vec![run(any(), 0, usize::MAX, false, 0), run(any(), 0, usize::MAX, false, 0)]).is_none());
        assert!(Reader::new(vec![run(any(), 0, usize::MAX, false, 0), Step::Open(1), run(any(), 0, usize::MAX, false, 0)]).is_none());
        assert!(Reader::new(vec![lit("a"), run(any(), 0, usize::MAX, true, 0), Step::Close(1)]).is_none());
        assert!(Step::new("run", Vec::new(), &[0; 5], 0, 1, false, 0).is_none());
        assert!(Step::new("literal", Vec::new(), &[], 0, 0, false, 0).is_none());
    }

    #[test]
    fn non_ascii_text_is_read_in_a_class_that_takes_it() {
        let mut r = call();
        let line = "a: 'é/CN=ü' b: 'ö'";
        assert!(r.read(line.as_bytes(), 0));
        let (s, e) = r.span(1).unwrap();
        assert_eq!(&line[s..e], "é/CN=ü");
    }
}
