//! Where a run of bytes stops (at the first of one or two bytes, or of white space), and
//! whether a literal stands at a place: the DOME scanner's hand readers' loops
//! (dome_roles.rs, dome_head.rs), 16 bytes at a time with SSE2 on x86_64 (primitive:
//! depends on no other module).
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

/// Where the run of ASCII digits from `from` stops (`from` past the line: `from`): 8
/// bytes a step, the line's last (fewer) a byte at a time. A DOME line's thread id has 15.
#[inline(always)]
pub(crate) fn digits(line: &[u8], mut from: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    while let Some(chunk) = line.get(from..from + 8) {
        let w = u64::from_le_bytes(chunk.try_into().expect("8 bytes")) ^ (ONES * 0x30);
        // a byte is a digit when it is below 10 now: its low 7 bits plus 0x76 (at most
        // 0xf5: no carry into the next byte) reach 0x80 when they are 10 or more, and
        // its own high bit is set when it is 0x80 or more
        let stop = (((w & (ONES * 0x7f)) + ONES * 0x76) | w) & (ONES * 0x80);
        if stop != 0 {
            return from + (stop.trailing_zeros() / 8) as usize;
        }
        from += 8;
    }
    from + line.get(from..).map_or(0, |rest| rest.iter().take_while(|c| c.is_ascii_digit()).count())
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

#[cfg(test)]
mod tests {
    use super::{bytewise, digits, is_space, same, until, Stops};

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
}
