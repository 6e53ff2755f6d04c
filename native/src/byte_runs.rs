//! Where a run of bytes stops (at the first of one or two bytes, or of white space),
//! whether a literal stands at a place, and where one is first: the DOME scanner's hand
//! readers' loops (dome_roles.rs, dome_head.rs) and a SURL's path (linking.rs), 16 bytes
//! at a time with SSE2 on x86_64 (primitive: depends on no other module).
//!
//! A byte at a time, with a table or a closure per byte, these loops cost ~6
//! instructions a byte, more than PCRE2's JIT code spent on the same patterns (issue
//! 30); libc's memcmp, called for each literal, ~30 a call.

/// The bytes a run stops at: `a`, `b` (the same byte for one), with `space` PCRE2's `\s`
/// without UCP (tab, LF, VT, FF, CR, space), with `control` every byte below 0x20.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stops {
    a: u8,
    b: u8,
    space: bool,
    control: bool,
}

impl Stops {
    pub(crate) const fn byte(a: u8) -> Stops {
        Stops { a, b: a, space: false, control: false }
    }

    pub(crate) const fn bytes(a: u8, b: u8) -> Stops {
        Stops { a, b, space: false, control: false }
    }

    /// White space, and `a` and `b`.
    pub(crate) const fn space_or(a: u8, b: u8) -> Stops {
        Stops { a, b, space: true, control: false }
    }

    /// Where a JSON string's plain text stops: a quote, a backslash, a control character.
    pub(crate) const fn json_text() -> Stops {
        Stops { a: b'"', b: b'\\', space: false, control: true }
    }

    #[inline(always)]
    fn has(self, c: u8) -> bool {
        c == self.a || c == self.b || (self.space && is_space(c)) || (self.control && c < 0x20)
    }
}

/// PCRE2's `\s` without UCP.
#[inline(always)]
pub(crate) fn is_space(c: u8) -> bool {
    c == b' ' || c.wrapping_sub(b'\t') < 5
}

/// Where the run from `from` stops: the place of the first byte of `stops` at or after
/// `from`, or the line's end.
#[inline(always)]
pub(crate) fn until(line: &[u8], from: usize, stops: Stops) -> usize {
    #[cfg(target_arch = "x86_64")]
    if line.len() >= 16 {
        // SAFETY: SSE2 is part of x86_64; the loads stay inside `line` (its length >= 16)
        return unsafe { sse2::until(line, from, stops) };
    }
    bytewise(line, from, stops)
}

/// until() a byte at a time.
#[inline(always)]
fn bytewise(line: &[u8], from: usize, stops: Stops) -> usize {
    line.get(from..).and_then(|rest| rest.iter().position(|&c| stops.has(c))).map_or(line.len(), |n| from + n)
}

#[cfg(target_arch = "x86_64")]
mod sse2 {
    use super::Stops;
    use std::arch::x86_64::*;

    /// The mask of the bytes of `v` in `stops`.
    #[inline(always)]
    unsafe fn hits(v: __m128i, stops: Stops) -> u32 {
        let mut m = _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8(stops.a as i8)),
                                 _mm_cmpeq_epi8(v, _mm_set1_epi8(stops.b as i8)));
        if stops.space {
            // tab to CR: c - 9 is 0 to 4, no more after subtracting 4 with saturation
            let tab = _mm_subs_epu8(_mm_sub_epi8(v, _mm_set1_epi8(9)), _mm_set1_epi8(4));
            m = _mm_or_si128(m, _mm_or_si128(_mm_cmpeq_epi8(tab, _mm_setzero_si128()),
                                             _mm_cmpeq_epi8(v, _mm_set1_epi8(b' ' as i8))));
        }
        if stops.control {
            // below 0x20: the byte is its own minimum with 0x1f (unsigned)
            m = _mm_or_si128(m, _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v));
        }
        _mm_movemask_epi8(m) as u32
    }

    /// has_nul() for a line of 16 bytes or more: four loads' least bytes compared once
    /// a step, the rest 16 at a time, the last (fewer) in the line's last 16.
    #[inline(always)]
    pub(super) unsafe fn has_nul(line: &[u8]) -> bool {
        let (p, n, zero) = (line.as_ptr(), line.len(), _mm_setzero_si128());
        let at = |i: usize| _mm_loadu_si128(p.add(i).cast());
        let mut i = 0;
        while i + 64 <= n {
            let least = _mm_min_epu8(_mm_min_epu8(at(i), at(i + 16)), _mm_min_epu8(at(i + 32), at(i + 48)));
            if _mm_movemask_epi8(_mm_cmpeq_epi8(least, zero)) != 0 {
                return true;
            }
            i += 64;
        }
        while i + 16 <= n {
            if _mm_movemask_epi8(_mm_cmpeq_epi8(at(i), zero)) != 0 {
                return true;
            }
            i += 16;
        }
        i < n && _mm_movemask_epi8(_mm_cmpeq_epi8(at(n - 16), zero)) != 0
    }

    /// until() for a line of 16 bytes or more: 16 bytes a step, the last (fewer) bytes
    /// read in the line's last 16.
    #[inline(always)]
    pub(super) unsafe fn until(line: &[u8], mut from: usize, stops: Stops) -> usize {
        let p = line.as_ptr();
        while from + 16 <= line.len() {
            let m = hits(_mm_loadu_si128(p.add(from).cast()), stops);
            if m != 0 {
                return from + m.trailing_zeros() as usize;
            }
            from += 16;
        }
        if from >= line.len() {
            return line.len();
        }
        let last = line.len() - 16;
        let m = hits(_mm_loadu_si128(p.add(last).cast()), stops) >> (from - last);
        if m != 0 { from + m.trailing_zeros() as usize } else { line.len() }
    }
}

/// A one in each byte of a word (word()): times a byte, that byte in each.
pub(crate) const ONES: u64 = 0x0101_0101_0101_0101;

/// The 8 bytes of `line` from `at` as one word, the first the lowest (None: fewer there).
#[inline(always)]
pub(crate) fn word(line: &[u8], at: usize) -> Option<u64> {
    line.get(at..at + 8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
}

/// The high bit of each byte of `w` (a word()) that is not an ASCII digit.
#[inline(always)]
pub(crate) fn non_digits(w: u64) -> u64 {
    let w = w ^ (ONES * 0x30);
    // a byte is a digit when it is below 10 now: its low 7 bits plus 0x76 (at most
    // 0xf5: no carry into the next byte) reach 0x80 when they are 10 or more, and
    // its own high bit is set when it is 0x80 or more
    (((w & (ONES * 0x7f)) + ONES * 0x76) | w) & (ONES * 0x80)
}

/// Where the run of ASCII digits from `from` stops (`from` past the line: `from`): 8
/// bytes a step, the line's last (fewer) a byte at a time. A DOME line's thread id has 15.
#[inline(always)]
pub(crate) fn digits(line: &[u8], mut from: usize) -> usize {
    while let Some(w) = word(line, from) {
        let stop = non_digits(w);
        if stop != 0 {
            return from + (stop.trailing_zeros() / 8) as usize;
        }
        from += 8;
    }
    from + line.get(from..).map_or(0, |rest| rest.iter().take_while(|c| c.is_ascii_digit()).count())
}

/// The place of the first `text` (not empty) in `line`: its first byte's places tried
/// in turn, found 16 bytes a step. str::find built a two-way searcher for each call
/// (~210 instructions before a byte was read): a SURL's `?SFN=` and `://` (linking.rs).
pub(crate) fn find(line: &[u8], text: &[u8]) -> Option<usize> {
    let (&first, _) = text.split_first()?;
    let mut from = 0;
    loop {
        let at = until(line, from, Stops::byte(first));
        if at + text.len() > line.len() {
            return None;
        }
        if same(line, at, text) {
            return Some(at);
        }
        from = at + 1;
    }
}

/// The number of 8 digits' values (0 to 9 a byte, the first digit the lowest byte): pairs,
/// then fours, then the eight summed in place, 3 multiplications for what a byte at a
/// time took 8.
#[inline(always)]
fn eight_digits(w: u64) -> u64 {
    let w = (w * 10 + (w >> 8)) & 0x00ff_00ff_00ff_00ff;
    let w = (w * 100 + (w >> 16)) & 0x0000_ffff_0000_ffff;
    (w * 10_000 + (w >> 32)) & 0xffff_ffff
}

/// The number the ASCII digits `line[start..end]` spell (the caller found them digits, at
/// most 19: no overflow), 8 digits a step where a byte at a time cost ~8 instructions a
/// digit (a DOME line's thread id has 15, issue 30). The first, fewer than 8, are read
/// in the word ending with them (the bytes before them taken as zeros), where there is one.
#[inline(always)]
pub(crate) fn digits_value(line: &[u8], start: usize, end: usize) -> u64 {
    let zeros = ONES * 0x30;
    let head = (end - start) % 8;
    let mut v = 0;
    if head > 0 {
        v = match (start + head).checked_sub(8).and_then(|at| word(line, at)) {
            Some(w) => {
                let keep = u64::MAX << (8 * (8 - head));
                eight_digits(((w & keep) | (zeros & !keep)) - zeros)
            }
            None => line[start..start + head].iter().fold(0, |v, &d| v * 10 + u64::from(d - b'0')),
        };
    }
    let mut at = start + head;
    while at < end {
        v = v * 100_000_000 + eight_digits(word(line, at).expect("8 digits") - zeros);
        at += 8;
    }
    v
}

/// Whether `line` holds a NUL byte: 64 bytes a step (their least byte, one compare), where
/// until() for it took 16 a step, ~100 instructions a DOME line (issue 30).
#[inline(always)]
pub(crate) fn has_nul(line: &[u8]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if line.len() >= 16 {
        // SAFETY: SSE2 is part of x86_64; the loads stay inside `line` (its length >= 16)
        return unsafe { sse2::has_nul(line) };
    }
    line.contains(&0)
}

/// Whether `text` stands in `line` at `at`: 8 bytes a step (the last 8 first: where the
/// literals of one place differ most), without a call.
#[inline(always)]
pub(crate) fn same(line: &[u8], at: usize, text: &[u8]) -> bool {
    let n = text.len();
    let Some(s) = line.get(at..at + n) else { return false };
    if n < 8 {
        return s.iter().zip(text).all(|(a, b)| a == b);
    }
    let word = |b: &[u8], i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
    if word(s, n - 8) != word(text, n - 8) {
        return false;
    }
    let mut i = 0;
    while i + 8 < n {
        if word(s, i) != word(text, i) {
            return false;
        }
        i += 8;
    }
    true
}

/// Whether texts `a` and `b` are equal, as `a == b`, but inline: `==` on slices calls
/// libc's memcmp, a call each for the few short texts a DOME line compares with the line
/// before's (host, program, stamp: ~6% of a DOME replay's CPU time went to memcmp,
/// issue 30).
#[inline(always)]
pub(crate) fn equal(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && same(a, 0, b)
}

#[cfg(test)]
mod tests {
    use super::{bytewise, digits, digits_value, equal, find, has_nul, is_space, same, until, Stops};

    #[test]
    fn a_run_of_digits_stops_at_the_first_other_byte() {
        for len in 0..30 {
            for at in 0..=len {
                for c in 0..=255u8 {
                    let mut line = vec![b'7'; len];
                    if at < len {
                        line[at] = c;
                    }
                    for from in 0..=len + 1 {
                        let want = from + line.get(from..).map_or(0, |r| r.iter().take_while(|c| c.is_ascii_digit()).count());
                        assert_eq!(digits(&line, from), want, "{line:?} {from}");
                    }
                }
            }
        }
    }

    #[test]
    fn digits_spell_the_number_a_digit_at_a_time_would() {
        // every count of digits up to 19, each digit at every place, after 0 to 9 other
        // bytes (fewer than a word before the first: read a byte at a time)
        for before in 0..10 {
            for len in 1..=19usize {
                for place in 0..len {
                    for d in b'0'..=b'9' {
                        let mut line = vec![b' '; before];
                        line.extend((0..len).map(|i| if i == place { d } else { b"9876543210"[i % 10] }));
                        let want = line[before..].iter().fold(0u64, |v, &c| v * 10 + u64::from(c - b'0'));
                        assert_eq!(digits_value(&line, before, before + len), want, "{line:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_nul_is_found_wherever_it_stands() {
        for len in 0..200 {
            for fill in [b'a', 0x01, 0xff, 0x80] {
                let clean = vec![fill; len];
                assert!(!has_nul(&clean));
                for at in 0..len {
                    let mut line = clean.clone();
                    line[at] = 0;
                    assert!(has_nul(&line), "{len} {at}");
                }
            }
        }
    }

    #[test]
    fn a_run_stops_where_a_byte_at_a_time_it_would() {
        let sets = [Stops::byte(b'\''), Stops::bytes(b'\'', b':'), Stops::space_or(b'[', b':'), Stops::space_or(b' ', b' '),
                    Stops::json_text()];
        let fill = [b'a', 0x80, 0xff, b'\x08', b'\x0e', b'!', b'\x1f', b'0', b' ', 0x7f];
        let stops = [b'\'', b':', b'[', b' ', b'\t', b'\n', 0x0b, 0x0c, b'\r', b'"', b'\\', 0, 0x1f, 0x20, 0x9f];
        for len in 0..40 {
            for &f in &fill {
                for at in 0..=len {
                    for &s in &stops {
                        let mut line = vec![f; len];
                        if at < len {
                            line[at] = s;
                        }
                        for set in sets {
                            for from in 0..=len {
                                assert_eq!(until(&line, from, set), bytewise(&line, from, set), "{line:?} {from} {set:?}");
                            }
                        }
                    }
                }
            }
        }
        assert!((0..=255u8).all(|c| is_space(c) == matches!(c, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ')));
    }

    #[test]
    fn a_literal_stands_where_its_bytes_are() {
        let line = b"dome workerFunc : clientdn: '/DC=org' clienthost: 'x'";
        for at in 0..=line.len() + 1 {
            for len in 0..=line.len() {
                let text = &line[line.len().min(at % 7)..][..len.min(line.len() - line.len().min(at % 7))];
                let want = line.get(at..at + text.len()) == Some(text);
                assert_eq!(same(line, at, text), want, "{at} {text:?}");
                let mut other = text.to_vec();
                for i in 0..other.len() {
                    other[i] ^= 1;
                    assert_eq!(same(line, at, &other), line.get(at..at + other.len()) == Some(&other[..]));
                    other[i] ^= 1;
                }
            }
        }
    }

    #[test]
    fn texts_are_equal_where_slice_equality_says_so() {
        let texts: [&[u8]; 9] = [b"", b"d", b"dome", b"domf", b"dpmhead01", b"dpmhead02", b"dpmhead01.example.org",
                                 b"dpmhead01.example.orh", b"epmhead01.example.org"];
        for a in texts {
            for b in texts {
                assert_eq!(equal(a, b), a == b, "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn a_literal_is_found_where_str_find_finds_it() {
        let needles: [&[u8]; 4] = [b"?SFN=", b"://", b"?", b"ab?SFN=ab?SFN"];
        let parts: [&[u8]; 8] = [b"?", b"?SFN", b"?SFN=", b":/", b"://", b"s", b"/dpm/x/0123456789abcdef", b"SFN="];
        let mut tried = 0;
        // every string of up to 4 parts: near misses, and lines past 16 bytes (read 16 a step)
        let mut lines: Vec<Vec<u8>> = vec![Vec::new()];
        for _ in 0..4 {
            let longer: Vec<Vec<u8>> = lines.iter().flat_map(|l| parts.iter().map(move |p| [l.as_slice(), p].concat())).collect();
            lines.extend(longer);
        }
        for line in &lines {
            let text = std::str::from_utf8(line).unwrap();
            for needle in needles {
                assert_eq!(find(line, needle), text.find(std::str::from_utf8(needle).unwrap()), "{text:?} {needle:?}");
                tried += 1;
            }
        }
        assert_eq!(find(b"abc", b""), None, "an empty literal is refused");
        assert!(tried > 10_000, "{tried}");
    }
}
