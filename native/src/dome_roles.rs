//! The role patterns of the bundled DOME profiles (regex_profiles/dmlite-dome*.toml,
//! `[roles]`) read by hand for the DOME scanner (dome_scan.rs), where a role's pattern is
//! exactly one this module implements; any other (a site's own wording) stays PCRE2's.
//!
//! PCRE2's JIT code spent ~1,200 instructions a line on these patterns, ~2,170 on a
//! `call` line, whose two `.*?` step a character at a time (issue 30). Each pattern here
//! is a list of steps (literal text, a run of a byte class, `.*?` or `.*`), read as PCRE2
//! reads it: a class run never gives back a byte (the step after it starts with a byte
//! outside the class, or is the end), so the only choices are a `.*?` or `.*`'s length,
//! tried in PCRE2's order (shortest or longest first, at each place its next literal
//! stands) until the rest holds. Each role's reader is code made from its list by a macro
//! (`walk!`), not a loop over it: the loop cost ~650 instructions a DOME line, ~280 the
//! code (issue 30). A test pins the spans and refusals to PCRE2's on lines made to stray
//! from each role's at every place.
//!
//! The scanner matches a role as `\G(?:PATTERN)\s*\z` from the head's end, in UTF mode
//! without UCP: `\s \d \w` are ASCII, and a byte past ASCII is in `\S`, `[^']` and
//! `[^:']` and in no other class here, so a run is counted in bytes.

use crate::byte_runs::{digits, is_space, same, until, Stops};

/// Byte classes of the role patterns: one bit each in CLASSES.
const DIGIT: u8 = 1; // \d
const NOT_SPACE: u8 = 2; // \S
const WORD: u8 = 4; // \w
const UPPER: u8 = 8; // [A-Z]
const NOT_QUOTE: u8 = 16; // [^']
const NOT_COLON_QUOTE: u8 = 32; // [^:']
const SPACE: u8 = 64; // \s: tab, LF, VT, FF, CR, space

/// The classes of each byte.
static CLASSES: [u8; 256] = classes();

const fn classes() -> [u8; 256] {
    let mut table = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let c = i as u8;
        let space = matches!(c, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ');
        let mut bits = if space { SPACE } else { NOT_SPACE };
        if c.is_ascii_digit() {
            bits |= DIGIT;
        }
        if c.is_ascii_alphanumeric() || c == b'_' {
            bits |= WORD;
        }
        if c.is_ascii_uppercase() {
            bits |= UPPER;
        }
        if c != b'\'' {
            bits |= NOT_QUOTE;
            if c != b':' {
                bits |= NOT_COLON_QUOTE;
            }
        }
        table[i] = bits;
        i += 1;
    }
    table
}

/// One step of a role pattern; `g`: the group whose span it is (0: none).
#[derive(Clone, Copy, Debug)]
#[allow(dead_code)] // data the tests read; the readers are code made from its tokens (roles!)
enum Step {
    /// Literal text.
    Lit(&'static [u8]),
    /// A run of `class` bytes, `min` to `max` long (greedy, never giving back).
    Run { class: u8, min: usize, max: usize, g: usize },
    /// `.*?`: the shortest text after which the rest holds (the next step is a Lit).
    Lazy { g: usize },
    /// `.*`: the longest text after which the rest holds (the next step is a Lit, or the end).
    Greedy { g: usize },
}

use Step::{Greedy, Lazy, Lit, Run};

const ANY: usize = usize::MAX;

const fn run(class: u8, min: usize, g: usize) -> Step {
    Run { class, min, max: ANY, g }
}

/// Where a run of `class` bytes (at most `max`) from `at` stops.
#[inline(always)]
fn run_end(line: &[u8], at: usize, class: u8, max: usize) -> usize {
    match stops(class) {
        Some(stops) => until(line, at, stops),
        // 8 bytes a step: a byte at a time through an iterator was ~8 instructions a digit
        // (ipcfd, keepConnection, bodyitems, matchings, size)
        None if class == DIGIT && max == ANY => digits(line, at),
        None => {
            let rest = &line[at..];
            let n = rest.iter().take(max).position(|&c| CLASSES[usize::from(c)] & class == 0);
            at + n.unwrap_or(rest.len().min(max))
        }
    }
}

/// `\s*\z` from `at`: `at`, or None.
#[inline(always)]
fn ends(line: &[u8], at: usize) -> Option<usize> {
    let n = line[at..].iter().take_while(|&&c| is_space(c)).count();
    (at + n == line.len()).then_some(at)
}

/// The code reading a list of steps from `$at` in `$line`, then `\s*\z` (an expression:
/// where the steps' text ends, or None), each step's own code with its literal and class
/// constants: no `match` on a step read from memory, no loop over a list. A `.*?` (`.*`)
/// tries the rest at each place its next literal stands, nearest (farthest) first. Each
/// step in the list is followed by a comma.
macro_rules! walk {
    ($line:ident, $at:ident, $spans:ident;) => {
        ends($line, $at)
    };
    ($line:ident, $at:ident, $spans:ident; Lit($text:expr), $($rest:tt)*) => {{
        const TEXT: &[u8] = $text;
        if same($line, $at, TEXT) {
            let $at = $at + TEXT.len();
            walk!($line, $at, $spans; $($rest)*)
        } else {
            None
        }
    }};
    ($line:ident, $at:ident, $spans:ident; run($class:expr, $min:expr, $g:expr), $($rest:tt)*) => {
        walk!($line, $at, $spans; Run { class: $class, min: $min, max: ANY, g: $g }, $($rest)*)
    };
    ($line:ident, $at:ident, $spans:ident; Run { class: $class:expr, min: $min:expr, max: $max:expr, g: $g:expr }, $($rest:tt)*) => {{
        let end = run_end($line, $at, $class, $max);
        if end - $at < $min {
            None
        } else {
            $spans[$g] = Some(($at, end));
            let $at = end;
            walk!($line, $at, $spans; $($rest)*)
        }
    }};
    ($line:ident, $at:ident, $spans:ident; Lazy { g: $g:expr }, Lit($text:expr), $($rest:tt)*) => {{
        const TEXT: &[u8] = $text;
        // each place the literal stands, nearest first
        let mut p = $at;
        loop {
            p = until($line, p, Stops::byte(TEXT[0]));
            if p + TEXT.len() > $line.len() {
                break None;
            }
            if same($line, p, TEXT) {
                $spans[$g] = Some(($at, p));
                let end = {
                    let $at = p + TEXT.len();
                    walk!($line, $at, $spans; $($rest)*)
                };
                if end.is_some() {
                    break end;
                }
            }
            p += 1;
        }
    }};
    // `.*` to the end leaves `\s*\z` nothing to do
    ($line:ident, $at:ident, $spans:ident; Greedy { g: $g:expr },) => {{
        $spans[$g] = Some(($at, $line.len()));
        Some($line.len())
    }};
    ($line:ident, $at:ident, $spans:ident; Greedy { g: $g:expr }, Lit($text:expr), $($rest:tt)*) => {{
        const TEXT: &[u8] = $text;
        // each place the literal stands, farthest first
        let mut found = None;
        if let Some(last) = $line.len().checked_sub(TEXT.len()) {
            let mut p = last + 1;
            while p > $at {
                p -= 1;
                if $line[p] == TEXT[0] && same($line, p, TEXT) {
                    $spans[$g] = Some(($at, p));
                    let end = {
                        let $at = p + TEXT.len();
                        walk!($line, $at, $spans; $($rest)*)
                    };
                    if end.is_some() {
                        found = end;
                        break;
                    }
                }
            }
        }
        found
    }};
}

/// ROLES from each role's (pattern, [steps], groups): its steps as data (which the tests
/// hold to their premises) and its reader, made from the same steps by `walk!`.
macro_rules! roles {
    ($(($pattern:expr, &[$($name:ident $args:tt),* $(,)?], $groups:expr $(,)?)),* $(,)?) => {
        const ROLES: &[(&str, &[Step], usize, Read)] = &[$(
            ($pattern, &[$($name $args),*], $groups, {
                #[allow(unused_comparisons)] // a run of at least 0 bytes
                fn read(line: &[u8], at: usize, spans: &mut Own) -> Option<usize> {
                    walk!(line, at, spans; $($name $args,)*)
                }
                read
            }),
        )*];
    };
}

// The implemented role patterns (as the profiles write them), their steps and groups, and
// the reader of each made from the same steps (`roles!`).
roles! {
    (
        r"dome workerFunc : Accepted connection, ipcfd: \d+, keepConnection: \d+",
        &[Lit(b"dome workerFunc : Accepted connection, ipcfd: "), run(DIGIT, 1, 0), Lit(b", keepConnection: "),
          run(DIGIT, 1, 0)],
        0,
    ),
    (
        r"dome workerFunc : clientdn: '(?P<client_dn>.*?)' clienthost: '(?P<client_host>[^']*)' remoteclient: '(?P<remote_dn>.*?)' remoteclienthost: '(?P<remote_host>[^']*)'",
        &[Lit(b"dome workerFunc : clientdn: '"), Lazy { g: 1 }, Lit(b"' clienthost: '"), run(NOT_QUOTE, 0, 2),
          Lit(b"' remoteclient: '"), Lazy { g: 3 }, Lit(b"' remoteclienthost: '"), run(NOT_QUOTE, 0, 4), Lit(b"'")],
        4,
    ),
    (
        r"dome workerFunc : req:(?P<method>[A-Z]+) cmd:(?P<op>\w+) query:(?P<query>\S*) bodyitems: \d+",
        &[Lit(b"dome workerFunc : req:"), run(UPPER, 1, 1), Lit(b" cmd:"), run(WORD, 1, 2), Lit(b" query:"),
          run(NOT_SPACE, 0, 3), Lit(b" bodyitems: "), run(DIGIT, 1, 0)],
        3,
    ),
    (
        r"\S+ SendSimpleResp : Exiting: code: (?P<code>\d{3})",
        &[run(NOT_SPACE, 1, 0), Lit(b" SendSimpleResp : Exiting: code: "), Run { class: DIGIT, min: 3, max: 3, g: 1 }],
        1,
    ),
    (
        r"dome dome_put : Entering\. lfn: '(?P<lfn>.*)' addreplica: \d+ pool: '[^']*' host: '[^']*' fs: '[^']*'",
        &[Lit(b"dome dome_put : Entering. lfn: '"), Greedy { g: 1 }, Lit(b"' addreplica: "), run(DIGIT, 1, 0),
          Lit(b" pool: '"), run(NOT_QUOTE, 0, 0), Lit(b"' host: '"), run(NOT_QUOTE, 0, 0), Lit(b"' fs: '"),
          run(NOT_QUOTE, 0, 0), Lit(b"'")],
        1,
    ),
    (
        r"dome dome_put : Selected fs: '(?P<server>[^:']+):(?P<fs>\S+) from (?P<matchings>\d+) matchings for lfn: '(?P<lfn>.*)'",
        &[Lit(b"dome dome_put : Selected fs: '"), run(NOT_COLON_QUOTE, 1, 1), Lit(b":"), run(NOT_SPACE, 1, 2),
          Lit(b" from "), run(DIGIT, 1, 3), Lit(b" matchings for lfn: '"), Greedy { g: 4 }, Lit(b"'")],
        4,
    ),
    (
        r"dome dome_putdone_disk :  server: '(?P<server>[^']*)' pfn: '(?P<pfn>[^']*)'  size: (?P<size>\d+) cksumt: '[^']*' cksumv: '[^']*'",
        &[Lit(b"dome dome_putdone_disk :  server: '"), run(NOT_QUOTE, 0, 1), Lit(b"' pfn: '"), run(NOT_QUOTE, 0, 2), Lit(b"'  size: "), run(DIGIT, 1, 3),
          Lit(b" cksumt: '"), run(NOT_QUOTE, 0, 0), Lit(b"' cksumv: '"), run(NOT_QUOTE, 0, 0), Lit(b"'")],
        3,
    ),
    (
        r"dome dome_putdone_disk :  Forwarding to headnode\. server: '(?P<server>[^']*)' pfn: '(?P<pfn>[^']*)'  size: (?P<size>\d+) cksumt: '[^']*' cksumv: '[^']*'",
        &[Lit(b"dome dome_putdone_disk :  Forwarding to headnode. server: '"), run(NOT_QUOTE, 0, 1),
          Lit(b"' pfn: '"), run(NOT_QUOTE, 0, 2), Lit(b"'  size: "), run(DIGIT, 1, 3),
          Lit(b" cksumt: '"), run(NOT_QUOTE, 0, 0), Lit(b"' cksumv: '"), run(NOT_QUOTE, 0, 0), Lit(b"'")],
        3,
    ),
    (
        r"dome dome_putdone_head :  server: '(?P<server>[^']*)' pfn: '(?P<pfn>[^']*)'  size: (?P<size>\d+) cksumt: '[^']*' cksumv: '[^']*'",
        &[Lit(b"dome dome_putdone_head :  server: '"), run(NOT_QUOTE, 0, 1), Lit(b"' pfn: '"), run(NOT_QUOTE, 0, 2), Lit(b"'  size: "), run(DIGIT, 1, 3),
          Lit(b" cksumt: '"), run(NOT_QUOTE, 0, 0), Lit(b"' cksumv: '"), run(NOT_QUOTE, 0, 0), Lit(b"'")],
        3,
    ),
    (
        r"dome dome_putdone_head :  Final size:   (?P<size>\d+)",
        &[Lit(b"dome dome_putdone_head :  Final size:   "), run(DIGIT, 1, 1)],
        1,
    ),
    (r"\S+ \S+ : .*", &[run(NOT_SPACE, 1, 0), Lit(b" "), run(NOT_SPACE, 1, 0), Lit(b" : "), Greedy { g: 0 }], 0),
    (r"\S+ : .*", &[run(NOT_SPACE, 1, 0), Lit(b" : "), Greedy { g: 0 }], 0),
    (
        r"\S+ !! \S+ : .*",
        &[run(NOT_SPACE, 1, 0), Lit(b" !! "), run(NOT_SPACE, 1, 0), Lit(b" : "), Greedy { g: 0 }],
        0,
    ),
}

/// Room for every group of the implemented patterns as the scanner is given them: 0 the
/// whole match, 1 the role's wrapper, then the pattern's own.
pub(crate) const GROUPS: usize = 6;

/// A role match's group spans by PCRE2's group number.
pub(crate) type Spans = [Option<(usize, usize)>; GROUPS];

/// A role's own groups' spans (its 1... at 0...), as a reader writes them.
type Own = [Option<(usize, usize)>; GROUPS - 1];

/// A role's reader: where its steps' text ends (white space to the line's end after it),
/// or None.
type Read = fn(&[u8], usize, &mut Own) -> Option<usize>;

/// The reader of one implemented role pattern.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RoleReader {
    read: Read,
}

impl RoleReader {
    /// The reader of `pattern`, a role's as the scanner is given it (parsers/profiles.
    /// role_patterns wraps it in a group `a<i>` and names its groups `a<i>_NAME`;
    /// compiled_dome.scan_plan reads it from the head's end: `\G(?:(?P<a<i>>PATTERN))\s*\z`),
    /// or None: not a pattern implemented here, the regex reads it.
    pub(crate) fn of(pattern: &str) -> Option<RoleReader> {
        let rest = pattern.strip_prefix(r"\G(?:(?P<a")?;
        let i = &rest[..rest.bytes().take_while(u8::is_ascii_digit).count()];
        let inner = rest[i.len()..].strip_prefix('>')?.strip_suffix(r"))\s*\z")?;
        if i.is_empty() {
            return None;
        }
        // the profile's own text: its groups' names without the wrapper's prefix
        let inner = inner.replace(&format!("(?P<a{i}_"), "(?P<");
        ROLES.iter().find(|(text, _, _, _)| *text == inner).map(|&(_, _, _, read)| RoleReader { read })
    }

    /// Whether the pattern matches `line` from `at` to its end (trailing white space
    /// aside), its groups' spans then in `spans` (else they hold no meaning).
    #[inline]
    pub(crate) fn read(&self, line: &[u8], at: usize, spans: &mut Spans) -> bool {
        // the pattern's own groups (its 1... at 2...) written in place: each on every
        // reading that holds; its 0 (a step's span of no group) at the wrapper's 1, set last
        let own: &mut Own = (&mut spans[1..]).try_into().expect("GROUPS - 1");
        let Some(end) = (self.read)(line, at, own) else {
            return false;
        };
        spans[0] = Some((at, line.len()));
        spans[1] = Some((at, end));
        true
    }
}

/// The bytes a run of `class` stops at, for the classes whose runs are long (a quoted
/// text, a path): found 16 bytes at a time.
#[inline(always)]
fn stops(class: u8) -> Option<Stops> {
    match class {
        NOT_QUOTE => Some(Stops::byte(b'\'')),
        NOT_COLON_QUOTE => Some(Stops::bytes(b'\'', b':')),
        NOT_SPACE => Some(Stops::space_or(b' ', b' ')),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{RoleReader, Spans, Step, CLASSES, GROUPS, ROLES, SPACE};
    use crate::dome_head::tests::near;
    use crate::jit::Pattern;
    use crate::lead_dispatch::LeadDispatch;

    /// The dmlite prefix a role's text follows in a line (the scanner reads from its end).
    const PREFIX: &str = "{140737}[1] dmlite ";

    /// Messages of every implemented role, some with the text a `.*?` or `.*` must grow
    /// past (its next literal standing more than once), some past ASCII.
    const MESSAGES: &[&str] = &[
        "dome workerFunc : Accepted connection, ipcfd: 10, keepConnection: 1",
        "dome workerFunc : clientdn: '/DC=org/CN=d2' clienthost: 'd2.org' remoteclient: '/DC=ch/CN=u7' remoteclienthost: '192.0.2.17'",
        "dome workerFunc : clientdn: 'a' clienthost: 'b' clienthost: 'c' remoteclient: 'd' remoteclienthost: 'e' remoteclienthost: 'f'",
        "dome workerFunc : clientdn: '' clienthost: '' remoteclient: 'é' remoteclient: '' remoteclienthost: ''  \t",
        "dome workerFunc : req:POST cmd:dome_put query:/domehead/command/dome_put bodyitems: 3",
        "dome workerFunc : req:GET cmd:dome_getspaceinfo query: bodyitems: 0 ",
        "dome SendSimpleResp : Exiting: code: 200",
        "x/é SendSimpleResp : Exiting: code: 5000",
        "dome dome_put : Entering. lfn: '/dpm/x/f.root' addreplica: 0 pool: '' host: '' fs: ''",
        "dome dome_put : Entering. lfn: 'a' addreplica: 1 pool: 'p' host: 'h' fs: 'f' addreplica: 2 pool: '' host: '' fs: ''",
        "dome dome_put : Selected fs: 'dpmdisk01.example.org:/srv/fs1 from 3 matchings for lfn: '/dpm/x/f.root'",
        "dome dome_put : Selected fs: 'h:/f from 12 matchings for lfn: 'a'b' '\x0b",
        "dome dome_putdone_disk :  server: 'd1' pfn: '/srv/fs1/f'  size: 1048576 cksumt: 'adler32' cksumv: '0a1b2c3d'",
        "dome dome_putdone_disk :  Forwarding to headnode. server: 'd1' pfn: '/f'  size: 0 cksumt: '' cksumv: ''",
        "dome dome_putdone_head :  server: 'd1.example.org' pfn: '/srv/fs1/é'  size: 7 cksumt: 'a' cksumv: 'b'",
        "dome dome_putdone_head :  Final size:   1048576",
        "dome workerFunc : anything 'x' : y",
        "domedome_putdone_head : Invalid status for replica 'a:b'",
        "dome !! dome_putdone_head : Replica not found 'x:y'",
        "a : ",
    ];

    /// `part` as the scanner is given a profile's role pattern, the `i`th of its roles
    /// (parsers/profiles.role_patterns, compiled_dome.scan_plan).
    fn wrapped(part: &str, i: usize) -> String {
        format!(r"\G(?:(?P<a{i}>{}))\s*\z", part.replace("(?P<", &format!("(?P<a{i}_")))
    }

    /// Each message, then each with one character changed, dropped or put in at every
    /// place, from characters that matter to these patterns, and every length of it.
    fn strays() -> Vec<String> {
        let chars = ['0', '9', ' ', '\t', '\x0b', '\r', ':', '\'', '.', '!', 'A', 'Z', 'a', '_', '/', '\u{85}',
                     '\u{a0}', 'é'];
        near(MESSAGES, &chars)
    }

    #[test]
    fn each_role_read_by_hand_is_what_pcre2_reads_on_every_line_near_a_role_line() {
        let lines = strays();
        for (part, _, groups, _) in ROLES {
            let pattern = wrapped(part, 7);
            let reader = RoleReader::of(&pattern).expect("an implemented role");
            let mut regex = Pattern::with_options(&pattern, true, true).unwrap();
            let groups = 2 + groups;
            assert_eq!(regex.captures_len(), groups);
            assert!(groups <= GROUPS);
            let (mut matched, mut refused) = (0, 0);
            let mut spans: Spans = [Some((usize::MAX, 0)); GROUPS];
            for message in &lines {
                let line = format!("{PREFIX}{message}");
                let want = match regex.find_str_at(&line, PREFIX.len()) {
                    Ok(true) => Some((0..groups).map(|g| regex.get(g)).collect::<Vec<_>>()),
                    Ok(false) => None,
                    Err(e) => panic!("PCRE2 error {e}"),
                };
                let got = reader.read(line.as_bytes(), PREFIX.len(), &mut spans).then(|| spans[..groups].to_vec());
                assert_eq!(got, want, "{part} on {line:?}");
                if want.is_some() {
                    matched += 1;
                } else {
                    refused += 1;
                }
            }
            assert!(matched > 20 && refused > 1000, "{part}: both outcomes tried: {matched} matched, {refused} refused");
        }
    }

    /// The reading's premises: a `.*?` or `.*` is followed by a literal starting with an
    /// ASCII byte (a place it stands is a character's start; `.*` may end the pattern),
    /// and a run by a literal starting with a byte outside its class, or by the end with
    /// no white space in its class: then a run giving back a byte could not let the rest
    /// match, and reading it whole is PCRE2's reading.
    #[test]
    fn every_choice_in_a_role_is_a_grown_or_shrunk_any_run() {
        for (part, steps, _, _) in ROLES {
            for (i, step) in steps.iter().enumerate() {
                let next = steps.get(i + 1);
                match step {
                    Step::Lit(text) => assert!(!text.is_empty(), "{part}"),
                    Step::Lazy { .. } => assert!(matches!(next, Some(Step::Lit(t)) if t[0].is_ascii()), "{part}"),
                    Step::Greedy { .. } => {
                        assert!(next.is_none() || matches!(next, Some(Step::Lit(t)) if t[0].is_ascii()), "{part}")
                    }
                    Step::Run { class, min, max, .. } => {
                        assert!(min <= max, "{part}");
                        let stops = match next {
                            Some(Step::Lit(t)) => CLASSES[usize::from(t[0])] & class == 0,
                            None => (0..=255u8).all(|c| CLASSES[usize::from(c)] & SPACE == 0 || CLASSES[usize::from(c)] & class == 0),
                            _ => false,
                        };
                        assert!(stops || min == max, "{part}: step {i}");
                    }
                }
            }
        }
    }

    /// The scanner tries only the roles the dispatch leaves (lead_dispatch.rs): on every
    /// line near a role line the first of them PCRE2 matches is the first of all roles,
    /// in their order, that it matches.
    #[test]
    fn the_roles_a_dispatch_by_their_leads_leaves_find_the_role_that_trying_all_finds() {
        // each role's lead: its first literal (a `\S+` first has none)
        let leads: Vec<&[u8]> =
            ROLES.iter().map(|(_, steps, _, _)| if let Step::Lit(text) = steps[0] { text } else { b"" }).collect();
        let dispatch = LeadDispatch::of(&leads).expect("fewer roles than MAX");
        let mut regexes: Vec<Pattern> =
            ROLES.iter().enumerate().map(|(i, (part, _, _, _))| Pattern::with_options(&wrapped(part, i), true, true).unwrap()).collect();
        let (mut lines, mut tried) = (0, 0);
        for message in strays() {
            let line = format!("{PREFIX}{message}");
            let mut matches = |i: usize| regexes[i].find_str_at(&line, PREFIX.len()).expect("no PCRE2 error");
            let first = (0..ROLES.len()).find(|&i| matches(i));
            let mask = dispatch.candidates(line.as_bytes(), PREFIX.len());
            let dispatched = (0..ROLES.len()).filter(|&i| mask & 1 << i != 0).find(|&i| matches(i));
            assert_eq!(dispatched, first, "{line:?}");
            (lines, tried) = (lines + 1, tried + mask.count_ones() as usize);
        }
        assert!(tried * 2 < lines * ROLES.len(), "the dispatch leaves most roles untried: {tried} of {}", lines * ROLES.len());
    }

    #[test]
    fn a_role_pattern_not_exactly_implemented_is_left_to_the_regex() {
        let (part, _, _, _) = ROLES[1];
        for i in [0, 1, 12] {
            assert!(RoleReader::of(&wrapped(part, i)).is_some());
        }
        assert!(RoleReader::of(&wrapped(&format!("{part}x"), 1)).is_none());
        assert!(RoleReader::of(&wrapped(&part.replace("[^']*", "[^']+"), 1)).is_none());
        assert!(RoleReader::of(&wrapped(part, 1).replace("a1_client_dn", "a2_client_dn")).is_none());
        assert!(RoleReader::of(part).is_none());
        assert!(RoleReader::of(&format!(r"\G(?:{part})\s*\z")).is_none());
        assert!(RoleReader::of(&wrapped(part, 1).replace(r"\s*\z", r"\z")).is_none());
    }
}
