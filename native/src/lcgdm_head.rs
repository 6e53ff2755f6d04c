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

/// The numbers of an envelope read (read_numbers), as the line scanner (scan.rs) takes
/// them from the spans of a pattern's match: the reader has found where they are, so they
/// are summed from known digits, never looked at again for what they are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Numbers {
    /// MMDDhhmmss as one decimal: LineParser.second_key's key of the stamp.
    pub key: u64,
    /// The fraction's first three digits, zeros after the last (0 without a fraction).
    pub ms: i64,
    /// None: more digits than 18 (more than Python's fast path takes; it decides).
    pub pid: Option<u64>,
    /// -1: no thread; None: more digits than 18.
    pub tid: Option<i64>,
}

/// The value of a run of ASCII digits (the caller knows they are), None past 18 of them
/// (a u64 holds any 18; the scanner leaves longer numbers to Python).
#[inline(always)]
pub(crate) fn value(digits: &[u8]) -> Option<u64> {
    (digits.len() <= 18).then(|| digits.iter().fold(0u64, |v, &c| v * 10 + u64::from(c - b'0')))
}

/// A byte of `[^\s:]`: PCRE2's `\s` without UCP is tab, LF, VT, FF, CR (9 to 13) and space.
#[inline(always)]
fn in_func(c: u8) -> bool {
    !(c == b':' || crate::byte_runs::is_space(c))
}

/// The classes of the line's first 64 bytes, bit i for byte i (none past the line's end):
/// the envelope (48 bytes in the common line) is read from these, each run of a class one
/// count of trailing zeros, where a byte at a time cost ~6 instructions a byte.
struct Classes {
    digit: u64,
    space: u64,
    func: u64,
}

impl Classes {
    fn of(line: &[u8]) -> Classes {
        let mut padded = [0u8; 64];
        let block: &[u8; 64] = match line.get(..64) {
            Some(head) => head.try_into().expect("64 bytes"),
            None => {
                padded[..line.len()].copy_from_slice(line);
                &padded
            }
        };
        let (d, s, f) = bits(block);
        let within = if line.len() >= 64 { u64::MAX } else { (1u64 << line.len()) - 1 };
        Classes { digit: d & within, space: s & within, func: f & within }
    }
}

/// The digits, spaces and `[^\s:]` bytes of `block`, as bits. SSE2 (every x86-64 has it):
/// a few compares of 16 bytes at once and their top bits read at once; the compiler's own
/// code for the byte-by-byte loop (`bits_by_byte`, which other machines run) took ~1,700
/// instructions a line.
#[cfg(target_arch = "x86_64")]
#[inline]
fn bits(block: &[u8; 64]) -> (u64, u64, u64) {
    use std::arch::x86_64::*;
    let (mut d, mut s, mut f) = (0u64, 0u64, 0u64);
    // SAFETY: SSE2 is part of x86-64; each load reads 16 of the block's 64 bytes.
    unsafe {
        let within = |v: __m128i, lo: u8, span: u8| {
            // lo <= byte <= lo + span, unsigned: the byte less lo is its own minimum with span
            let t = _mm_sub_epi8(v, _mm_set1_epi8(lo as i8));
            _mm_cmpeq_epi8(_mm_min_epu8(t, _mm_set1_epi8(span as i8)), t)
        };
        let bits16 = |m: __m128i| u64::from(_mm_movemask_epi8(m) as u16);
        for k in 0..4 {
            let v = _mm_loadu_si128(block.as_ptr().add(16 * k).cast::<__m128i>());
            let space = _mm_cmpeq_epi8(v, _mm_set1_epi8(b' ' as i8));
            let colon = _mm_cmpeq_epi8(v, _mm_set1_epi8(b':' as i8));
            let not_func = _mm_or_si128(_mm_or_si128(space, colon), within(v, b'\t', 4));
            d |= bits16(within(v, b'0', 9)) << (16 * k);
            s |= bits16(space) << (16 * k);
            f |= (!bits16(not_func) & 0xffff) << (16 * k);
        }
    }
    (d, s, f)
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn bits(block: &[u8; 64]) -> (u64, u64, u64) {
    bits_by_byte(block)
}

/// bits, byte by byte: the reference the SSE2 form is tested against.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn bits_by_byte(block: &[u8; 64]) -> (u64, u64, u64) {
    let (mut d, mut s, mut f) = (0u64, 0u64, 0u64);
    for (i, &c) in block.iter().enumerate() {
        d |= u64::from(c.is_ascii_digit()) << i;
        s |= u64::from(c == b' ') << i;
        f |= u64::from(in_func(c)) << i;
    }
    (d, s, f)
}

/// Where the run of bytes from `from` whose bits are set in `bits` (a Classes mask) ends:
/// past the first 64 bytes, `ok` tells byte by byte.
#[inline(always)]
fn run_end(line: &[u8], bits: u64, from: usize, ok: impl Fn(u8) -> bool) -> usize {
    if from < 64 {
        let end = from + (!(bits >> from)).trailing_zeros() as usize;
        if end < 64 {
            return end;
        }
    }
    let mut p = from.max(64);
    while p < line.len() && ok(line[p]) {
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
    read_into(line, spans, None)
}

/// read, and the envelope's numbers written to `numbers` (no meaning on None).
pub(crate) fn read_numbers(line: &[u8], spans: &mut Spans, numbers: &mut Numbers) -> Option<usize> {
    read_into(line, spans, Some(numbers))
}

/// read's one body: inlined into each, so the reader that wants no numbers sums none.
#[inline(always)]
fn read_into(line: &[u8], spans: &mut Spans, numbers: Option<&mut Numbers>) -> Option<usize> {
    // MM/DD HH:MM:SS: fixed places, as two overlapping words (bytes 0-7 and 6-13)
    let fixed = line.get(..14)?;
    let word = |from: usize| u64::from_le_bytes(fixed[from..from + 8].try_into().expect("8 bytes"));
    if !(fixed_ok(word(0), b"00/00 00") & fixed_ok(word(6), b"00:00:00")) {
        return None;
    }
    let at = |i: usize, c: u8| line.get(i) == Some(&c);
    let classes = Classes::of(line);
    let mut p = 14;
    // `(?:\.(\d{1,6}))? +`: fewer digits leave a digit where a space must follow, and no
    // fraction leaves the dot: only all of 1 to 6 digits reads
    let frac = if at(p, b'.') {
        let end = run_end(line, classes.digit, p + 1, |c| c.is_ascii_digit());
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
    let spaces = run_end(line, classes.space, p, |c| c == b' ');
    if spaces == p {
        return None;
    }
    let pid_end = run_end(line, classes.digit, spaces, |c| c.is_ascii_digit());
    if pid_end == spaces {
        return None;
    }
    p = pid_end;
    // `(?:,(\d+))? `: a comma must start the thread (a space must follow the pid otherwise)
    let tid = if at(p, b',') {
        let end = run_end(line, classes.digit, p + 1, |c| c.is_ascii_digit());
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
    let func_end = run_end(line, classes.func, func, in_func);
    if func_end == func || !at(func_end, b':') {
        return None;
    }
    if let Some(n) = numbers {
        let d = |i: usize| u64::from(fixed[i] - b'0');
        let two = |i: usize| d(i) * 10 + d(i + 1);
        n.key = (((two(0) * 100 + two(3)) * 100 + two(6)) * 100 + two(9)) * 100 + two(12);
        n.ms = frac.map_or(0, |(a, end)| {
            let f = |i: usize| if a + i < end { i64::from(line[a + i] - b'0') } else { 0 };
            f(0) * 100 + f(1) * 10 + f(2)
        });
        n.pid = value(&line[spaces..pid_end]);
        n.tid = match tid {
            None => Some(-1),
            Some((a, b)) => value(&line[a..b]).map(|v| v as i64),
        };
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
pub(crate) mod tests {
    use super::{anchored, bits, bits_by_byte, read};
    use crate::jit::Pattern;

    /// Lines of the envelope's form, then each with one byte changed, dropped or doubled at
    /// every place, from bytes that matter to it: what PCRE2 makes of each is the answer.
    pub(crate) fn strays() -> Vec<Vec<u8>> {
        // The last four carry the envelope past its first 64 bytes (read a byte at a time
        // there): a long function name, spaces, pid and thread, and one ending at byte 64.
        let forms: [&[u8]; 12] = [
            b"08/12 14:31:40.003 12345,0 dpm_serv: [137.138.40.12] request accepted",
            b"08/12 14:31:40 12345 dpm_serv: started",
            b"08/12 14:31:40.123456   9876,12 Cns_srv_creat:returns 0",
            b"08/12 14:31:40.1 1 f:",
            b"08/12 14:31:40.1234567 1 f: x",
            b"08/12 14:31:40.5 1,2 f\x85\xa0g: \t x",
            b"12/31 23:59:59 7 a::b",
            b"01/01 00:00:00.000 1,1 dpm_srv_put:  returns 0 ",
            b"08/12 14:31:40.003 12345,0 Cns_srv_a_function_name_longer_than_the_first_block: x",
            b"08/12 14:31:40                                                  12345,7 f: x",
            b"08/12 14:31:40 1234567890123456789012345678901234567,123456789012345678 f: x",
            b"08/12 14:31:40.123456 12345,123 dpm_srv_getreqsummary_000000abc:",
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
    fn each_byte_value_anywhere_in_a_block_has_the_bits_of_its_classes() {
        for at in 0..64 {
            for c in 0..=255u8 {
                let mut block = [b'x'; 64];
                block[at] = c;
                assert_eq!(bits(&block), bits_by_byte(&block), "byte {c:#04x} at {at}");
            }
        }
        let mut mixed = [0u8; 64];
        for (i, b) in mixed.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(37).wrapping_add(5);
        }
        assert_eq!(bits(&mixed), bits_by_byte(&mixed));
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
