//! The head of a DOME line (the syslog envelope, then dmlite's `{TID}[LVL] dmlite `
//! prefix: a form's `head` in parsers/dome_profiles.py), read by hand for the DOME scanner
//! (dome_scan.rs).
//!
//! PCRE2's JIT code spent ~1,140 instructions a line on this head (the month's
//! alternation, the optional pid and day digit: issue 30). A head pattern is read here
//! only when its text is exactly one this module implements (an ENVELOPES form's, then a
//! MESSAGES prefix, as pcre2_pattern wraps them), and gives what PCRE2 gives for it: the
//! same spans, the same lines refused (a test pins the two equal on lines made to stray
//! from each form at every place). Each pattern reads one way only: where PCRE2 could
//! backtrack (the day's optional digit, a run's length, the optional pid or offset colon),
//! the other reading fails at once on the byte that made the first one fail, so the first
//! reading that holds is the match.

use crate::byte_runs::{self, same, until, Stops};

/// The bundled profiles' envelopes (regex_profiles/dmlite-dome*.toml), with their group
/// count: traditional (mon day hour minute second host tag pid), RFC 3339 (rtime host
/// tag pid).
const ENVELOPES: [(Envelope, &str, usize); 2] = [
    (
        Envelope::Traditional,
        r"(?P<mon>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) (?P<day>[ \d]?\d) (?P<hour>\d\d):(?P<minute>\d\d):(?P<second>\d\d) (?P<host>\S+) (?P<tag>[^\s\[:]+)(?:\[(?P<pid>\d+)\])?: ",
        8,
    ),
    (
        Envelope::Rfc3339,
        r"(?P<rtime>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,6})?(?:Z|[+-]\d\d:?\d\d)) (?P<host>\S+) (?P<tag>[^\s\[:]+)(?:\[(?P<pid>\d+)\])?: ",
        4,
    ),
];

/// The bundled profiles' dmlite prefixes, with their group count: with the thread (tid
/// level error, dmlite >= 0.8.4) and without (level error).
const MESSAGES: [(Message, &str, usize); 2] = [
    (Message::Thread, r"\{(?P<tid>\d+)\}(?:\[(?P<level>\d)\]|(?P<error>!!!)) dmlite ", 3),
    (Message::NoThread, r"(?:\[(?P<level>\d)\] |(?P<error>(?=dmlite \S+ !! )))dmlite ", 2),
];

#[derive(Clone, Copy, Debug)]
enum Envelope {
    Traditional,
    Rfc3339,
}

#[derive(Clone, Copy, Debug)]
enum Message {
    Thread,
    NoThread,
}

/// Room for every group of the longest head (0: the whole match).
pub(crate) const GROUPS: usize = 12;

/// A head's group spans by PCRE2's group number (as Python's: the patterns number alike).
pub(crate) type Spans = [Option<(usize, usize)>; GROUPS];

/// The reader of one implemented head pattern.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HeadReader {
    envelope: Envelope,
    message: Message,
    /// The message's first group's number (the envelope's groups come first).
    message_group: usize,
}

/// The numbers a head's reader reads where it finds their digits, which the scanner read
/// again from the spans, a slice and a number reading each (~115 instructions a line,
/// issue 30): None where not read here (no such group in the line or the pattern, or more
/// digits than THREAD_DIGITS: the scanner reads those from the spans, as any field's).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Numbers {
    pub(crate) tid: Option<i64>,
    pub(crate) pid: Option<i64>,
    pub(crate) level: Option<i64>,
}

/// The number of the `n` digits from `from` (already found digits), where it fits.
#[inline(always)]
fn number(line: &[u8], from: usize, n: usize) -> Option<i64> {
    (n <= THREAD_DIGITS).then(|| byte_runs::digits_value(line, from, from + n) as i64)
}

/// The length of the run of digits from `from`.
#[inline(always)]
fn digits(line: &[u8], from: usize) -> usize {
    byte_runs::digits(line, from) - from
}

impl HeadReader {
    /// The reader of `pattern` (the head as the scanner is given it: `\A(?:(?:ENVELOPE)
    /// (?:MESSAGE))`), or None: not a pattern implemented here, the regex reads it.
    pub(crate) fn of(pattern: &str) -> Option<HeadReader> {
        for (envelope, e, groups) in ENVELOPES {
            for (message, m, _) in MESSAGES {
                if pattern == format!(r"\A(?:(?:{e})(?:{m}))") {
                    return Some(HeadReader { envelope, message, message_group: groups + 1 });
                }
            }
        }
        None
    }

    /// Where the head ends, its groups' spans written to `spans`, and to `numbers` the
    /// thread id's, the pid's and the level's (see Numbers); None: PCRE2 finds no match
    /// (`spans` and `numbers` then hold no meaning).
    #[inline]
    pub(crate) fn read(&self, line: &[u8], spans: &mut Spans, numbers: &mut Numbers) -> Option<usize> {
        // each group of the pattern is written below, Some or None: no other is read
        let p = match self.envelope {
            Envelope::Traditional => traditional(line, spans)?,
            Envelope::Rfc3339 => rfc3339(line, spans)?,
        };
        // host, tag and pid: the envelope's last groups
        let p = origin(line, p, spans, self.message_group - 3, &mut numbers.pid)?;
        let end = match self.message {
            Message::Thread => thread(line, p, spans, self.message_group, numbers)?,
            Message::NoThread => {
                numbers.tid = None;
                no_thread(line, p, spans, self.message_group, &mut numbers.level)?
            }
        };
        spans[0] = Some((0, end));
        Some(end)
    }
}

/// Each byte of a word's 8 (the first the lowest) where `YYYY-MM-` has a digit: its high
/// bit; where it has a dash: all its bits.
const DIGITS_YYYY_MM: u64 = 0x0080_8000_8080_8080;
const DASHES_YYYY_MM: u64 = 0xff00_00ff_0000_0000;

/// Whether a word's 8 bytes read `HH:MM:SS` (two digits, a colon...), checked at once
/// where a byte at a time through an iterator was a call, ~86 instructions a traditional
/// stamp and ~180 an RFC 3339 one (issue 30).
#[inline(always)]
fn hh_mm_ss(w: u64) -> bool {
    const DIGITS: u64 = 0x8080_0080_8000_8080;
    const COLONS: u64 = 0x0000_ff00_00ff_0000;
    byte_runs::non_digits(w) & DIGITS == 0 && w & COLONS == u64::from_le_bytes(*b"\0\0:\0\0:\0\0")
}

/// `(mon) (day) (hh):(mm):(ss) `: where the host starts.
#[inline(always)]
fn traditional(line: &[u8], spans: &mut Spans) -> Option<usize> {
    let &[a, b, c, b' ', ..] = line else { return None };
    let month = matches!(&[a, b, c],
        b"Jan" | b"Feb" | b"Mar" | b"Apr" | b"May" | b"Jun" | b"Jul" | b"Aug" | b"Sep" | b"Oct" | b"Nov" | b"Dec");
    if !month {
        return None;
    }
    // `[ \d]?\d `: two places if the second is a digit (then a space), else one (a digit,
    // then a space): the one reading that can hold
    let day_end = match (line.get(4), line.get(5)) {
        (Some(&a), Some(&b)) if (a == b' ' || a.is_ascii_digit()) && b.is_ascii_digit() => 6,
        (Some(&a), _) if a.is_ascii_digit() => 5,
        _ => return None,
    };
    let clock = line.get(day_end..day_end + 10)?;
    if !(clock[0] == b' ' && clock[9] == b' ' && byte_runs::word(line, day_end + 1).is_some_and(hh_mm_ss)) {
        return None;
    }
    spans[1] = Some((0, 3));
    spans[2] = Some((4, day_end));
    for (g, from) in [(3, day_end + 1), (4, day_end + 4), (5, day_end + 7)] {
        spans[g] = Some((from, from + 2));
    }
    Some(day_end + 10)
}

/// `(YYYY-MM-DDTHH:MM:SS[.f{1,6}](Z|±HH[:]MM)) `: where the host starts.
#[inline(always)]
fn rfc3339(line: &[u8], spans: &mut Spans) -> Option<usize> {
    let fixed = line.get(..19)?;
    let date = byte_runs::word(fixed, 0).is_some_and(|w| {
        byte_runs::non_digits(w) & DIGITS_YYYY_MM == 0 && w & DASHES_YYYY_MM == u64::from_le_bytes(*b"\0\0\0\0-\0\0-")
    });
    let day = fixed[8].is_ascii_digit() && fixed[9].is_ascii_digit() && fixed[10] == b'T';
    if !(date && day && byte_runs::word(fixed, 11).is_some_and(hh_mm_ss)) {
        return None;
    }
    let mut p = 19;
    // fewer digits leave a digit where the zone must start, none leaves the dot
    if line.get(p) == Some(&b'.') {
        let n = digits(line, p + 1);
        if n == 0 || n > 6 {
            return None;
        }
        p += 1 + n;
    }
    match line.get(p).copied() {
        Some(b'Z') => p += 1,
        Some(b'+' | b'-') => {
            let two = |at: usize| line.get(at..at + 2).is_some_and(|d| d[0].is_ascii_digit() && d[1].is_ascii_digit());
            if !two(p + 1) {
                return None;
            }
            // `:?` takes a colon if there is one; without it a digit would have to be there
            p += if line.get(p + 3) == Some(&b':') { 4 } else { 3 };
            if !two(p) {
                return None;
            }
            p += 2;
        }
        _ => return None,
    }
    spans[1] = Some((0, p));
    (line.get(p) == Some(&b' ')).then_some(p + 1)
}

/// `(host) (tag)([pid])?: ` from `p`, host at group `g` (the pid's number to `pid`): where
/// the message starts. A shorter host or tag leaves a byte of it where a space, `[` or `:`
/// must be.
#[inline(always)]
fn origin(line: &[u8], mut p: usize, spans: &mut Spans, g: usize, pid: &mut Option<i64>) -> Option<usize> {
    let n = until(line, p, Stops::space_or(b' ', b' ')) - p;
    if n == 0 || line.get(p + n) != Some(&b' ') {
        return None;
    }
    spans[g] = Some((p, p + n));
    p += n + 1;
    let n = until(line, p, Stops::space_or(b'[', b':')) - p;
    if n == 0 {
        return None;
    }
    spans[g + 1] = Some((p, p + n));
    p += n;
    // without the pid a `[` stands where the colon must
    spans[g + 2] = None;
    *pid = None;
    if line.get(p) == Some(&b'[') {
        let n = digits(line, p + 1);
        if n == 0 || line.get(p + 1 + n) != Some(&b']') {
            return None;
        }
        spans[g + 2] = Some((p + 1, p + 1 + n));
        *pid = number(line, p + 1, n);
        p += n + 2;
    }
    same(line, p, b": ").then_some(p + 2)
}

/// The most digits of a thread id read to its number here (no overflow); a longer one is
/// left to the scanner's number reading, as any field's.
pub(crate) const THREAD_DIGITS: usize = 18;

/// `{(tid)}([(level)]|(!!!)) dmlite ` from `p`, tid at group `g` (its number and the
/// level's in `numbers`, read here where their digits were just found): where the head
/// ends.
#[inline(always)]
fn thread(line: &[u8], mut p: usize, spans: &mut Spans, g: usize, numbers: &mut Numbers) -> Option<usize> {
    if line.get(p) != Some(&b'{') {
        return None;
    }
    let n = digits(line, p + 1);
    if n == 0 || line.get(p + 1 + n) != Some(&b'}') {
        return None;
    }
    spans[g] = Some((p + 1, p + 1 + n));
    numbers.tid = number(line, p + 1, n);
    p += n + 2;
    let mark = line.get(p..p + 3)?;
    if mark[0] == b'[' && mark[1].is_ascii_digit() && mark[2] == b']' {
        (spans[g + 1], spans[g + 2]) = (Some((p + 1, p + 2)), None);
        numbers.level = Some(i64::from(mark[1] - b'0'));
    } else if mark == &b"!!!"[..] {
        (spans[g + 1], spans[g + 2]) = (None, Some((p, p + 3)));
        numbers.level = None;
    } else {
        return None;
    }
    p += 3;
    same(line, p, b" dmlite ").then_some(p + 8)
}

/// `([(level)] |(?=dmlite \S+ !! ))dmlite ` from `p`, level at group `g` (its number to
/// `level`): where the head ends. A line starting `[` cannot be the error's (the lookahead
/// wants `d` there).
#[inline(always)]
fn no_thread(line: &[u8], mut p: usize, spans: &mut Spans, g: usize, level: &mut Option<i64>) -> Option<usize> {
    if line.get(p) == Some(&b'[') {
        let mark = line.get(p..p + 4)?;
        if !(mark[1].is_ascii_digit() && mark[2] == b']' && mark[3] == b' ') {
            return None;
        }
        (spans[g], spans[g + 1]) = (Some((p + 1, p + 2)), None);
        *level = Some(i64::from(mark[1] - b'0'));
        p += 4;
    } else {
        // the lookahead's `\S+` ends where the run does (shorter, no space follows it)
        let at = p + 7;
        let n = until(line, at, Stops::space_or(b' ', b' ')).max(at) - at;
        if n == 0 || !same(line, at + n, b" !! ") {
            return None;
        }
        (spans[g], spans[g + 1]) = (None, Some((p, p)));
        *level = None;
    }
    same(line, p, b"dmlite ").then_some(p + 7)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::{HeadReader, Numbers, Spans, ENVELOPES, GROUPS, MESSAGES, THREAD_DIGITS};
    use crate::jit::Pattern;

    /// Lines of each head's form, as text.
    fn forms(traditional: bool, thread: bool) -> Vec<String> {
        let stamps: &[&str] = if traditional {
            &["May 30 08:44:05", "Jun  1 00:00:00", "Dec 9 23:59:59", "Jan 31 12:00:60"]
        } else {
            &["2024-05-30T08:44:05.123456+02:00", "2024-05-30T08:44:05Z", "2024-05-30T08:44:05.1-0200",
              "2024-05-30T08:44:05+0200", "2024-05-30T08:44:05.1234567Z"]
        };
        let origins = ["dpmhead01 dome[2345]: ", "h httpd: ", "dpm-héad.cern.ch xrootd[1]: ", "h\u{a0}x ta\u{85}g[77]: ",
                       // a pid of more digits than THREAD_DIGITS (read as a field's number)
                       "h d[1234567890123456789]: "];
        let messages: &[&str] = if thread {
            &["{140737}[1] dmlite dome workerFunc : req:GET cmd:dome_getspaceinfo", "{1}!!! dmlite domex : y",
              "{12}[0] dmlite ", "{3}[12] dmlite x",
              // a thread id of THREAD_DIGITS digits, one of more (read as a field's number)
              "{140230412875520123}[2] dmlite x", "{1402304128755201234}[2] dmlite x"]
        } else {
            &["[1] dmlite dome workerFunc : x", "dmlite dome !! dome_putdone_head : Replica", "dmlite é !! x",
              "[1]  dmlite x", "dmlite a  !! b"]
        };
        let mut out = Vec::new();
        for (i, stamp) in stamps.iter().enumerate() {
            for (j, origin) in origins.iter().enumerate() {
                // every stamp and origin once, each with every message
                if i == 0 || j == 0 {
                    for message in messages {
                        out.push(format!("{stamp} {origin}{message}"));
                    }
                }
            }
        }
        out
    }

    /// Each form, then each with one character changed, dropped or doubled at every place,
    /// from characters that matter to these patterns.
    fn strays(traditional: bool, thread: bool) -> Vec<String> {
        let chars = ['0', '9', ' ', '\t', '\n', '\x0b', '\x0c', '\r', ':', '[', ']', '{', '}', '!', '-', '+', '.',
                     'T', 'Z', 'a', 'd', '\u{85}', '\u{a0}', '\u{2028}', 'é'];
        near(&forms(traditional, thread), &chars)
    }

    /// Each of `forms`, then each with one of `chars` in place of one of its characters or
    /// put in before it, each with one character dropped, and every length of it: the
    /// lines a hand reader is pinned to PCRE2 on (here and in dome_roles.rs).
    pub(crate) fn near(forms: &[impl AsRef<str>], chars: &[char]) -> Vec<String> {
        let mut out = Vec::new();
        for form in forms {
            let form: Vec<char> = form.as_ref().chars().collect();
            out.push(form.iter().collect());
            for i in 0..=form.len() {
                for &c in chars {
                    if i < form.len() {
                        let mut changed = form.clone();
                        changed[i] = c;
                        out.push(changed.iter().collect());
                    }
                    let mut put = form.clone();
                    put.insert(i, c);
                    out.push(put.iter().collect());
                }
                if i < form.len() {
                    let mut dropped = form.clone();
                    dropped.remove(i);
                    out.push(dropped.iter().collect());
                }
            }
            out.extend((0..form.len()).map(|n| form[..n].iter().collect()));
        }
        out
    }

    #[test]
    fn each_head_read_by_hand_is_what_pcre2_reads_on_every_line_near_its_form() {
        for (ei, (_, envelope, egroups)) in ENVELOPES.iter().enumerate() {
            for (mi, (_, message, mgroups)) in MESSAGES.iter().enumerate() {
                // as parsers/compiled_dome.pcre2_pattern wraps dome_profiles' head
                let pattern = format!(r"\A(?:(?:{envelope})(?:{message}))");
                let reader = HeadReader::of(&pattern).expect("an implemented head");
                let mut regex = Pattern::with_options(&pattern, true, true).unwrap();
                let groups = regex.captures_len();
                assert_eq!(groups, 1 + egroups + mgroups);
                assert!(groups <= GROUPS);
                let (mut matched, mut refused) = (0, 0);
                // one buffer for every line, as the scanner's: a read writes each of the
                // pattern's groups (the others stay None), whatever the line before left
                let mut spans: Spans = [None; GROUPS];
                spans[..groups].fill(Some((usize::MAX, 0)));
                let mut numbers = Numbers { tid: Some(-7), pid: Some(-7), level: Some(-7) };
                // the pid the envelope's last group; the message's groups after it
                let (pid_group, level_group) = (*egroups, if mi == 0 { 2 + egroups } else { 1 + egroups });
                let tid_group = (mi == 0).then_some(1 + egroups);
                for line in strays(ei == 0, mi == 0) {
                    let want = match regex.find_str(&line) {
                        Ok(true) => Some((0..GROUPS).map(|g| regex.get(g)).collect::<Vec<_>>()),
                        Ok(false) => None,
                        Err(e) => panic!("PCRE2 error {e}"),
                    };
                    let got = reader.read(line.as_bytes(), &mut spans, &mut numbers).map(|end| {
                        assert_eq!(spans[0], Some((0, end)));
                        // each number is its group's digits', where the group took part and they fit
                        let number = |group: Option<usize>| {
                            let digits = group.and_then(|g| spans[g]).map(|(a, b)| &line[a..b]);
                            digits.filter(|d| d.len() <= THREAD_DIGITS).map(|d| d.parse::<i64>().unwrap())
                        };
                        let want = Numbers { tid: number(tid_group), pid: number(Some(pid_group)),
                                             level: number(Some(level_group)) };
                        assert_eq!(numbers, want, "{line:?}");
                        spans.to_vec()
                    });
                    assert_eq!(got, want, "{pattern} on {line:?}");
                    if want.is_some() {
                        matched += 1;
                    } else {
                        refused += 1;
                    }
                }
                assert!(matched > 100 && refused > 1000, "both outcomes tried: {matched} matched, {refused} refused");
            }
        }
    }

    #[test]
    fn a_head_pattern_not_exactly_implemented_is_left_to_the_regex() {
        let (_, envelope, _) = ENVELOPES[0];
        let (_, message, _) = MESSAGES[0];
        assert!(HeadReader::of(&format!(r"\A(?:(?:{envelope})(?:{message}))")).is_some());
        let other = envelope.replace(r"(?P<host>\S+)", r"(?P<host>\w+)");
        assert!(HeadReader::of(&format!(r"\A(?:(?:{other})(?:{message}))")).is_none());
        assert!(HeadReader::of(&format!(r"\A(?:(?:{envelope})(?:{message}x))")).is_none());
        assert!(HeadReader::of(envelope).is_none());
    }
}
