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

/// The length of the run of bytes from `from` that are `ok`.
#[inline(always)]
fn run(line: &[u8], from: usize, ok: impl Fn(u8) -> bool) -> usize {
    line.get(from..).map_or(0, |rest| rest.iter().take_while(|&&c| ok(c)).count())
}

/// Where the message starts, the envelope's groups written to `spans`; None: PCRE2 finds
/// no match (`spans` then holds no meaning).
pub(crate) fn read(line: &[u8], spans: &mut Spans) -> Option<usize> {
    let at = |i: usize, c: u8| line.get(i) == Some(&c);
    // MM/DD HH:MM:SS: fixed places
    let fixed = line.get(..14)?;
    let digit = |i: usize| fixed[i].wrapping_sub(b'0') < 10;
    let places = fixed[2] == b'/' && fixed[5] == b' ' && fixed[8] == b':' && fixed[11] == b':';
    if !(places && [0, 1, 3, 4, 6, 7, 9, 10, 12, 13].into_iter().all(digit)) {
        return None;
    }
    *spans = [None; 9];
    for (i, from) in [0usize, 3, 6, 9, 12].into_iter().enumerate() {
        spans[i] = Some((from, from + 2));
    }
    let mut p = 14;
    // `(?:\.(\d{1,6}))? +`: fewer digits leave a digit where a space must follow, and no
    // fraction leaves the dot: only all of 1 to 6 digits reads
    if at(p, b'.') {
        let n = run(line, p + 1, |c| c.is_ascii_digit());
        if n == 0 || n > 6 {
            return None;
        }
        spans[5] = Some((p + 1, p + 1 + n));
        p += 1 + n;
    }
    // ` +(\d+)`: all the spaces (fewer leave a space where a digit must be), all the digits
    let spaces = run(line, p, |c| c == b' ');
    if spaces == 0 {
        return None;
    }
    p += spaces;
    let n = run(line, p, |c| c.is_ascii_digit());
    if n == 0 {
        return None;
    }
    spans[6] = Some((p, p + n));
    p += n;
    // `(?:,(\d+))? `: a comma must start the thread (a space must follow the pid otherwise)
    if at(p, b',') {
        let n = run(line, p + 1, |c| c.is_ascii_digit());
        if n == 0 {
            return None;
        }
        spans[7] = Some((p + 1, p + 1 + n));
        p += 1 + n;
    }
    if !at(p, b' ') {
        return None;
    }
    p += 1;
    // `([^\s:]+): ?`: \s is PCRE2's (no UCP): tab, LF, VT, FF, CR and space
    let n = run(line, p, |c| !matches!(c, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ' | b':'));
    if n == 0 || !at(p + n, b':') {
        return None;
    }
    spans[8] = Some((p, p + n));
    p += n + 1;
    if at(p, b' ') {
        p += 1;
    }
    Some(p)
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
        let bytes = [b'0', b'9', b'/', b' ', b':', b'.', b',', b'\t', b'\n', 0x0b, 0x0c, b'\r', b'a', 0x85, 0xa0, 0];
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
