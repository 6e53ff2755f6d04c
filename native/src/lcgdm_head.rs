//! The native envelope of the LCGDM daemons' lines (DPM, DPNS, SRM: the `native` envelope
//! of regex_profiles/lcgdm-*.toml), read by hand for the line scanner (scan.rs).
//!
//! PCRE2's JIT code spent about 700 instructions a line on this envelope alone (issue 30),
//! a third of the scanner's match, where reading its fields by hand takes a tenth of that.
//! It is used only for a profile whose envelope is exactly PATTERN, and gives exactly what
//! PCRE2 gives for `\A(?:PATTERN)`: the same spans, the same lines refused (a test pins
//! the two equal on lines made to stray from the form at every place). That is the whole
//! match the profile's combined pattern takes: its catch-all alternative `(?s).*` matches
//! whatever follows, so PCRE2 never backtracks into the envelope for another reading.

/// The envelope this reads (group numbers 1 to 9: ENVELOPE_GROUPS' order).
const PATTERN: &str = r"(?P<month>\d\d)/(?P<day>\d\d) (?P<hour>\d\d):(?P<minute>\d\d):(?P<second>\d\d)(?:\.(?P<frac>\d{1,6}))? +(?P<pid>\d+)(?:,(?P<tid>\d+))? (?P<func>[^\s:]+): ?";

/// PATTERN as a profile's envelope is compiled (fastpath.py): DOTALL, anchored at the
/// line's start. A pattern that is (or opens with) this text is read by hand.
pub(crate) fn anchored() -> String {
    format!(r"(?s)\A(?:{PATTERN})")
}

/// Spans of the envelope's groups, in ENVELOPE_GROUPS order (frac and tid may be absent).
pub(crate) type Spans = [Option<(usize, usize)>; 9];

/// The classes of a byte the envelope tells apart, one bit each (CLASS).
const DIGIT: u8 = 1;
const SPACE: u8 = 2;
/// PCRE2's `\s` (no UCP: tab, LF, VT, FF, CR, space) and `:`: the bytes that end `[^\s:]+`.
const NOT_FUNC: u8 = 4;

/// Each byte's classes: a run of a class is then one load and one test a byte.
static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut c = b'0';
    while c <= b'9' {
        t[c as usize] = DIGIT;
        c += 1;
    }
    t[b' ' as usize] = SPACE | NOT_FUNC;
    let ends = [b'\t', b'\n', 0x0b, 0x0c, b'\r', b':'];
    let mut i = 0;
    while i < ends.len() {
        t[ends[i] as usize] = NOT_FUNC;
        i += 1;
    }
    t
};

/// Where the run of bytes from `from` that have `class` ends (`from` itself: none).
#[inline(always)]
fn run_end(line: &[u8], from: usize, class: u8) -> usize {
    let mut p = from;
    while p < line.len() && CLASS[line[p] as usize] & class != 0 {
        p += 1;
    }
    p
}

/// Where the run of bytes from `from` that lack `class` ends.
#[inline(always)]
fn run_end_without(line: &[u8], from: usize, class: u8) -> usize {
    let mut p = from;
    while p < line.len() && CLASS[line[p] as usize] & class == 0 {
        p += 1;
    }
    p
}

/// Whether 8 bytes read little-endian are the digits and separators `form` asks for, each
/// of its bytes a digit place (`0`) or the byte itself. A byte is a digit when its high
/// nibble is 3 and adding 6 leaves it 3 (0x30-0x39): a word's two tests, not eight bytes'
/// sixteen. Adding 6 to each byte carries into the next only from a byte >= 0xfa, which
/// the first test has already refused.
#[inline(always)]
const fn fixed_ok(word: u64, form: &[u8; 8]) -> bool {
    let mut digits = 0u64; // 0xff at each digit place
    let mut literal = 0u64; // the separators, at their places
    let mut i = 0;
    while i < 8 {
        if form[i] == b'0' {
            digits |= 0xff << (8 * i);
        } else {
            literal |= (form[i] as u64) << (8 * i);
        }
        i += 1;
    }
    let nibbles = 0xf0f0_f0f0_f0f0_f0f0u64 & digits;
    let threes = 0x3030_3030_3030_3030u64 & digits;
    word & (nibbles | !digits) == threes | literal && word.wrapping_add(0x0606_0606_0606_0606) & nibbles == threes
}

/// Where the message starts, the envelope's groups written to `spans`; None: PCRE2 finds
/// no match (`spans` then holds no meaning).
pub(crate) fn read(line: &[u8], spans: &mut Spans) -> Option<usize> {
    // MM/DD HH:MM:SS: fixed places, as two overlapping words (bytes 0-7 and 6-13)
    let fixed = line.get(..14)?;
    let word = |from: usize| u64::from_le_bytes(fixed[from..from + 8].try_into().expect("8 bytes"));
    if !(fixed_ok(word(0), b"00/00 00") & fixed_ok(word(6), b"00:00:00")) {
        return None;
    }
    let at = |i: usize, c: u8| line.get(i) == Some(&c);
    let mut p = 14;
    // `(?:\.(\d{1,6}))? +`: fewer digits leave a digit where a space must follow, and no
    // fraction leaves the dot: only all of 1 to 6 digits reads
    let frac = if at(p, b'.') {
        let end = run_end(line, p + 1, DIGIT);
        if end == p + 1 || end > p + 7 {
            return None;
        }
        let span = (p + 1, end);
        p = end;
        Some(span)
    } else {
        None
    };
    // ` +(\d+)`: all the spaces (fewer leave a space where a digit must be), all the digits
    let spaces = run_end(line, p, SPACE);
    if spaces == p {
        return None;
    }
    let pid_end = run_end(line, spaces, DIGIT);
    if pid_end == spaces {
        return None;
    }
    p = pid_end;
    // `(?:,(\d+))? `: a comma must start the thread (a space must follow the pid otherwise)
    let tid = if at(p, b',') {
        let end = run_end(line, p + 1, DIGIT);
        if end == p + 1 {
            return None;
        }
        let span = (p + 1, end);
        p = end;
        Some(span)
    } else {
        None
    };
    if !at(p, b' ') {
        return None;
    }
    // `([^\s:]+): ?`
    let func = p + 1;
    let func_end = run_end_without(line, func, NOT_FUNC);
    if func_end == func || !at(func_end, b':') {
        return None;
    }
    *spans = [
        Some((0, 2)),
        Some((3, 5)),
        Some((6, 8)),
        Some((9, 11)),
        Some((12, 14)),
        frac,
        Some((spaces, pid_end)),
        tid,
        Some((func, func_end)),
    ];
    p = func_end + 1;
    Some(if at(p, b' ') { p + 1 } else { p })
}

#[cfg(test)]
mod tests {
    use super::{anchored, read};
    use crate::jit::Pattern;

    /// Lines of the envelope's form, then each with one byte changed, dropped or doubled at
    /// every place, from bytes that matter to it: what PCRE2 makes of each is the answer.
    fn strays() -> Vec<Vec<u8>> {
        let forms: [&[u8]; 8] = [
            b"08/12 14:31:40.003 12345,0 dpm_serv: [137.138.40.12] request accepted",
            b"08/12 14:31:40 12345 dpm_serv: started",
            b"08/12 14:31:40.123456   9876,12 Cns_srv_creat:returns 0",
            b"08/12 14:31:40.1 1 f:",
            b"08/12 14:31:40.1234567 1 f: x",
            b"08/12 14:31:40.5 1,2 f\x85\xa0g: \t x",
            b"12/31 23:59:59 7 a::b",
            b"01/01 00:00:00.000 1,1 dpm_srv_put:  returns 0 ",
        ];
        let bytes = [b'0', b'9', b'/', b' ', b':', b'.', b',', b'\t', b'\n', 0x0b, 0x0c, b'\r', b'a', 0x85, 0xa0, 0xfa, 0xff, 0];
        let mut out: Vec<Vec<u8>> = Vec::new();
        for form in forms {
            out.push(form.to_vec());
            for i in 0..=form.len() {
                for &b in &bytes {
                    let mut changed = form.to_vec();
                    if i < form.len() {
                        changed[i] = b;
                        out.push(changed);
                    }
                    let mut put = form.to_vec();
                    put.insert(i, b);
                    out.push(put);
                }
                if i < form.len() {
                    let mut dropped = form.to_vec();
                    dropped.remove(i);
                    out.push(dropped);
                }
            }
        }
        out.extend([b"".to_vec(), b"08/12".to_vec(), b"08/12 14:31:40.".to_vec()]);
        out
    }

    #[test]
    fn the_envelope_read_by_hand_is_what_pcre2_reads_on_every_line_near_its_form() {
        let mut regex = Pattern::new(&anchored()).unwrap();
        assert_eq!(regex.captures_len(), 10);
        let (mut matched, mut refused) = (0, 0);
        for line in strays() {
            let want = match regex.find(&line) {
                Ok(true) => Some(((1..10).map(|g| regex.get(g)).collect::<Vec<_>>(), regex.get(0).unwrap().1)),
                Ok(false) => None,
                Err(e) => panic!("PCRE2 error {e}"),
            };
            let mut spans = [None; 9];
            let got = read(&line, &mut spans).map(|end| (spans.to_vec(), end));
            assert_eq!(got, want, "{:?}", String::from_utf8_lossy(&line));
            if want.is_some() {
                matched += 1;
            } else {
                refused += 1;
            }
        }
        assert!(matched > 500 && refused > 500, "both outcomes tried: {matched} matched, {refused} refused");
    }
}
