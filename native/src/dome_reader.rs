//! A DOME role pattern's plan (parsers/role_reader.py: its literals and its runs of one
//! character class, each followed by a literal or the end) read over a line's bytes
//! without PCRE2 (primitive: depends on no other module).
//!
//! Each run ends where the regex's first choice ends it: a lazy run at the first place
//! its next literal follows, a greedy one at the last, within its class and bounds. When
//! the rest then reads, that is the match PCRE2 returns and its groups' spans. When it
//! does not, and a run before had another place to end (its next literal's first byte is
//! in its class: `.*?'`), the regex may find a later choice: `read` is Unsure and the
//! scanner runs the regex, which stays the authority; with no such run passed, the regex
//! has no other choice either: NoMatch, the regex not run (most lines a role's lead lets
//! through are another role's). Issue 30: the call pattern's lazy `.*?` took ~1,200
//! instructions a line in PCRE2's JIT.

/// One step of a plan: a literal, a run of bytes of `class` (a 256-bit set) between
/// `least` and `most` bytes long, captured as `group` (0: not captured), or where a group
/// of more steps opens or closes.
pub(crate) enum Step {
    Literal(Vec<u8>),
    /// `all`: the class takes every byte; `but`: every byte but that one (`[^']`); `only`:
    /// the run can end in one place alone (Reader::new says).
    Run { class: [u8; 32], all: bool, but: Option<u8>, only: bool, least: usize, most: usize, lazy: bool, group: usize },
    Open(usize),
    Close(usize),
}

/// What `read` found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Read {
    /// The regex's match, its spans in the reader.
    Matched,
    /// The regex does not match either.
    NoMatch,
    /// The regex decides (a run passed had another place to end).
    Unsure,
}

pub(crate) struct Reader {
    steps: Vec<Step>,
    /// The spans of the last line read, by group (None: not set).
    spans: Vec<Option<(usize, usize)>>,
}

// glibc's byte searches (the extension links it): a run of a line's tens of bytes in a
// few instructions, where a loop of Rust took ~8 a byte and made the reader slower than
// PCRE2's JIT (issue 30).
extern "C" {
    fn memchr(s: *const u8, c: i32, n: usize) -> *const u8;
    fn memrchr(s: *const u8, c: i32, n: usize) -> *const u8;
}

/// The index of the first `byte` in `hay`.
fn find_byte(hay: &[u8], byte: u8) -> Option<usize> {
    // SAFETY: the pointer and length of a live slice; the answer is null or inside it.
    let at = unsafe { memchr(hay.as_ptr(), i32::from(byte), hay.len()) };
    (!at.is_null()).then(|| at as usize - hay.as_ptr() as usize)
}

/// The index of the last `byte` in `hay`.
fn rfind_byte(hay: &[u8], byte: u8) -> Option<usize> {
    // SAFETY: as find_byte's.
    let at = unsafe { memrchr(hay.as_ptr(), i32::from(byte), hay.len()) };
    (!at.is_null()).then(|| at as usize - hay.as_ptr() as usize)
}

/// The first (lazy) or last place in `line[from..=to]` where `lit` starts.
fn find_literal(line: &[u8], from: usize, to: usize, lit: &[u8], first: bool) -> Option<usize> {
    // The places left to try: lo..hi (a literal does not start at the line's end).
    let (mut lo, mut hi) = (from, (to + 1).min(line.len()));
    while lo < hi {
        let q = if first {
            lo + find_byte(&line[lo..hi], lit[0])?
        } else {
            lo + rfind_byte(&line[lo..hi], lit[0])?
        };
        if line[q..].starts_with(lit) {
            return Some(q);
        }
        if first {
            lo = q + 1;
        } else {
            hi = q;
        }
    }
    None
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
                let outside: Vec<u8> = (0..=255u8).filter(|&b| class[(b >> 3) as usize] & (1 << (b & 7)) == 0).collect();
                let but = if outside.len() == 1 { Some(outside[0]) } else { None };
                Some(Step::Run { all: outside.is_empty(), but, only: false, class, least, most, lazy, group })
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
    pub(crate) fn new(mut steps: Vec<Step>) -> Option<Reader> {
        let mut groups = 0;
        for i in 0..steps.len() {
            // A run ends in one place alone when the byte that may follow it is not in its
            // class: its next literal's first, or at the end, white space.
            let takes = |class: &[u8; 32], b: u8| class[(b >> 3) as usize] & (1 << (b & 7)) != 0;
            let only = match (&steps[i], next_read(&steps, i)) {
                (Step::Run { .. }, Some(Step::Run { .. })) => return None,
                (Step::Run { lazy: true, .. }, None) => return None,
                (Step::Run { class, .. }, Some(Step::Literal(next))) => !takes(class, next[0]),
                (Step::Run { class, .. }, None) => !(0..=255u8).any(|b| is_space(b) && takes(class, b)),
                _ => false,
            };
            match &mut steps[i] {
                Step::Run { group, only: one, .. } => {
                    *one = only;
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
    /// spans then those of the regex's match; or whether the regex cannot either.
    pub(crate) fn read(&mut self, line: &[u8], at: usize) -> Read {
        self.spans.iter_mut().for_each(|s| *s = None);
        let mut p = at;
        // A run passed that could have ended elsewhere: a failure after it is Unsure.
        let mut chose = false;
        let fail = |chose: bool| if chose { Read::Unsure } else { Read::NoMatch };
        for (i, step) in self.steps.iter().enumerate() {
            match step {
                Step::Literal(lit) => {
                    if !line[p..].starts_with(lit) {
                        return fail(chose);
                    }
                    p += lit.len();
                }
                Step::Run { class, all, but, only, least, most, lazy, group } => {
                    let limit = line.len().min(p.saturating_add(*most));
                    let longest = match (all, but) {
                        (true, _) => limit,
                        (_, Some(stop)) => find_byte(&line[p..limit], *stop).map_or(limit, |n| p + n),
                        _ => {
                            let run = line[p..limit].iter().position(|&b| class[(b >> 3) as usize] & (1 << (b & 7)) == 0);
                            run.map_or(limit, |n| p + n)
                        }
                    };
                    let shortest = p + least;
                    if longest < shortest {
                        return fail(chose);
                    }
                    let end = match next_read(&self.steps, i) {
                        Some(Step::Literal(next)) => match find_literal(line, shortest, longest, next, *lazy) {
                            Some(q) => q,
                            None => return fail(chose),
                        },
                        _ => longest,
                    };
                    chose |= !only;
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
        if line[p..].iter().all(|&b| is_space(b)) {
            Read::Matched
        } else {
            fail(chose)
        }
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

    fn text<'a>(r: &Reader, line: &'a str, group: usize) -> &'a str {
        let (s, e) = r.span(group).unwrap();
        &line[s..e]
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
        // (line, where the message starts, groups 1, 2, 3); non-ASCII text in the classes
        // that take it.
        let cases = [
            ("x a: 'dn' with' b: 'h'  ", 2, ["dn' with", "h", "a: 'dn' with' b: 'h'"]),
            ("a: 'é/CN=ü' b: 'ö'", 0, ["é/CN=ü", "ö", "a: 'é/CN=ü' b: 'ö'"]),
        ];
        let mut r = call();
        for (line, at, groups) in cases {
            assert_eq!(r.read(line.as_bytes(), at), Read::Matched);
            assert_eq!([text(&r, line, 1), text(&r, line, 2), text(&r, line, 3)], groups);
        }
    }

    #[test]
    fn a_line_the_first_choice_does_not_read_is_left_to_the_regex() {
        // The regex would take the second `' b: '` (its group 1 `x' b: 'y`): the reader says no.
        let mut r = call();
        assert_eq!(r.read(b"a: 'x' b: 'y' b: 'z'", 0), Read::Unsure);
        assert_eq!(r.read(b"a: 'x' b: 'y' tail", 0), Read::Unsure);
        // Failing before any run that could end elsewhere: the regex fails as well.
        assert_eq!(r.read(b"b: 'x' b: 'y'", 0), Read::NoMatch);
        assert_eq!(r.read(b"a: 'x y", 0), Read::NoMatch);
    }

    #[test]
    fn a_greedy_run_ends_at_the_last_place_its_literal_follows() {
        let mut r = Reader::new(vec![lit("lfn: '"), run(any(), 0, usize::MAX, false, 1), lit("'")]).unwrap();
        let line = "lfn: 'a'b'";
        assert_eq!(r.read(line.as_bytes(), 0), Read::Matched);
        assert_eq!(r.span(1), Some((6, 9)));
    }

    #[test]
    fn a_run_keeps_to_its_class_and_bounds() {
        let digits = class(b"0123456789", false);
        let mut r = Reader::new(vec![lit("code: "), run(digits, 3, 3, false, 1)]).unwrap();
        assert_eq!(r.read(b"code: 200", 0), Read::Matched);
        assert_eq!(r.read(b"code: 200 \t", 0), Read::Matched);
        // A run of digits ends in one place: the regex has no other choice.
        for line in [&b"code: 2000"[..], b"code: 20", b"code: 2x0"] {
            assert_eq!(r.read(line, 0), Read::NoMatch);
        }
    }

    #[test]
    fn a_plan_with_a_choice_it_cannot_make_is_refused() {
        assert!(Reader::new(vec![run(any(), 0, usize::MAX, false, 0), run(any(), 0, usize::MAX, false, 0)]).is_none());
        assert!(Reader::new(vec![run(any(), 0, usize::MAX, false, 0), Step::Open(1), run(any(), 0, usize::MAX, false, 0)]).is_none());
        assert!(Reader::new(vec![lit("a"), run(any(), 0, usize::MAX, true, 0), Step::Close(1)]).is_none());
        assert!(Step::new("run", Vec::new(), &[0; 5], 0, 1, false, 0).is_none());
        assert!(Step::new("literal", Vec::new(), &[], 0, 0, false, 0).is_none());
    }
}
