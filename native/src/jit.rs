//! One PCRE2 pattern matched through PCRE2's JIT entry point, with the mark of the match
//! (primitive: depends on no other module).
//!
//! The line scanner's combined regex is matched once a line; the `pcre2` crate's
//! `captures_read` goes through pcre2_match, which checks its arguments again on every
//! call before handing over to the JIT code (about 120 instructions a line), and it does
//! not give the name of the `(*MARK)` the match passed, which tells the scanner which
//! alternative matched without a capture group per alternative. This wraps the few
//! calls of pcre2-sys (the same PCRE2 the crate builds) that the scanners need.
//!
//! The DOME scanner's patterns are compiled in UTF mode (a `.` is one character, as
//! Python's). In UTF mode `pcre2_match` validates the whole subject before each match
//! unless told PCRE2_NO_UTF_CHECK (the crate never tells it: unsound on arbitrary bytes),
//! which read each line twice (~1,400 instructions a 200-byte line, issue 30). A `&str`
//! subject (`find_str`) is valid UTF-8 by its type, PCRE2's condition for skipping the
//! check (and for its JIT entry point, which never checks); a byte subject of a UTF
//! pattern goes through `pcre2_match` with the check.

#[cfg(test)]
use std::ffi::CStr;
use std::ptr::NonNull;

use pcre2_sys::{
    pcre2_code_8, pcre2_code_free_8, pcre2_compile_8, pcre2_get_error_message_8, pcre2_get_mark_8,
    pcre2_get_ovector_pointer_8, pcre2_jit_compile_8, pcre2_jit_match_8, pcre2_match_8,
    pcre2_match_data_8, pcre2_match_data_create_from_pattern_8, pcre2_match_data_free_8,
    pcre2_pattern_info_8, PCRE2_DOTALL, PCRE2_ERROR_NOMATCH, PCRE2_INFO_CAPTURECOUNT,
    PCRE2_INFO_FIRSTCODETYPE, PCRE2_INFO_FIRSTCODEUNIT, PCRE2_INFO_LASTCODETYPE, PCRE2_INFO_LASTCODEUNIT,
    PCRE2_JIT_COMPLETE, PCRE2_NO_UTF_CHECK, PCRE2_UNSET,
    PCRE2_UTF,
};

/// A compiled pattern and the match data of its last match.
pub(crate) struct Pattern {
    code: NonNull<pcre2_code_8>,
    data: NonNull<pcre2_match_data_8>,
    ovector: *const usize,
    captures: usize, // groups, group 0 included
    /// Whether the JIT code is there; None: not asked for yet (the first match asks).
    jit: Option<bool>,
    utf: bool,
}

// SAFETY: the pointers are owned by the Pattern alone (freed in Drop) and used only
// through &self / &mut self: moving it to another thread moves them with it.
unsafe impl Send for Pattern {}
unsafe impl Sync for Pattern {}

/// PCRE2's message for an error code.
pub(crate) fn error_text(code: i32) -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer and its length are those of `buf`.
    let n = unsafe { pcre2_get_error_message_8(code, buf.as_mut_ptr(), buf.len()) };
    if n < 0 {
        return format!("PCRE2 error {code}");
    }
    String::from_utf8_lossy(&buf[..n as usize]).into_owned()
}

impl Pattern {
    /// The pattern compiled, or PCRE2's message; JIT-compiled (where PCRE2 can) at its first
    /// match: a scanner holds patterns a given input never runs (the DOME scanner's envelope
    /// and role patterns of the form the input does not use, its journald notice), and
    /// their JIT was ~7 M instructions of a DOME replay's start (issue 30).
    pub(crate) fn new(pattern: &str) -> Result<Self, String> {
        Self::with_options(pattern, false, false)
    }

    /// As `new`, in UTF mode (`.` one character, subjects UTF-8) and with `.` matching a
    /// newline too (DOTALL) where asked.
    pub(crate) fn with_options(pattern: &str, utf: bool, dotall: bool) -> Result<Self, String> {
        let options = if utf { PCRE2_UTF } else { 0 } | if dotall { PCRE2_DOTALL } else { 0 };
        let (mut err, mut offset) = (0i32, 0usize);
        // SAFETY: pointer and length of a live str; the error outputs are locals.
        let code = unsafe {
            pcre2_compile_8(pattern.as_ptr(), pattern.len(), options, &mut err, &mut offset, std::ptr::null_mut())
        };
        let Some(code) = NonNull::new(code) else {
            return Err(format!("{} at offset {offset}", error_text(err)));
        };
        // SAFETY: code is a live compiled pattern (freed below or by Drop).
        unsafe {
            let mut count: u32 = 0;
            let info = pcre2_pattern_info_8(code.as_ptr(), PCRE2_INFO_CAPTURECOUNT, (&mut count as *mut u32).cast());
            let data = NonNull::new(pcre2_match_data_create_from_pattern_8(code.as_ptr(), std::ptr::null_mut()));
            let (Some(data), 0) = (data, info) else {
                if let Some(d) = data {
                    pcre2_match_data_free_8(d.as_ptr());
                }
                pcre2_code_free_8(code.as_ptr());
                return Err("PCRE2 could not make match data".into());
            };
            let ovector = pcre2_get_ovector_pointer_8(data.as_ptr());
            Ok(Pattern { code, data, ovector, captures: count as usize + 1, jit: None, utf })
        }
    }

    /// Groups, group 0 (the whole match) included.
    pub(crate) fn captures_len(&self) -> usize {
        self.captures
    }

    /// Matches `subject` from its start: Ok(true) matched, Ok(false) did not, Err a PCRE2
    /// error (such as the JIT stack's limit, or invalid UTF-8 for a UTF pattern) with its
    /// code.
    pub(crate) fn find(&mut self, subject: &[u8]) -> Result<bool, i32> {
        self.find_at(subject, 0)
    }

    /// As `find`, searching from byte `start` (at most the length: else PCRE2's error) on;
    /// the spans are the subject's.
    pub(crate) fn find_at(&mut self, subject: &[u8], start: usize) -> Result<bool, i32> {
        if start > subject.len() {
            // the JIT entry point does not check the offset: it would read past the subject
            return Err(pcre2_sys::PCRE2_ERROR_BADOFFSET);
        }
        self.run(subject, start, !self.utf)
    }

    /// As `find`, on text: valid UTF-8 by its type, so a UTF pattern skips PCRE2's check.
    pub(crate) fn find_str(&mut self, subject: &str) -> Result<bool, i32> {
        self.run(subject.as_bytes(), 0, true)
    }

    /// As `find_str`, from byte `start` (a character boundary at most the length: else
    /// PCRE2's error), with the text before it still there for lookbehinds; the spans are
    /// the subject's. A pattern starting `\G` is anchored there.
    pub(crate) fn find_str_at(&mut self, subject: &str, start: usize) -> Result<bool, i32> {
        if !subject.is_char_boundary(start) {
            return Err(pcre2_sys::PCRE2_ERROR_BADOFFSET);
        }
        self.run(subject.as_bytes(), start, true)
    }

    /// Whether this role pattern (`\G`-anchored) matches `line` from `at` (a character
    /// boundary), run only where the text there starts with `lead`, the literal every
    /// match of it starts with (parsers/regex_lead.py): the lead's first byte compared
    /// first, where most leads differ, without a memcmp call. The DPM and DOME scanners'
    /// step for each role pattern matched alone (profile_tally.rs, dome_scan.rs).
    #[inline]
    pub(crate) fn find_after_lead(&mut self, lead: &[u8], line: &str, at: usize) -> bool {
        let rest = &line.as_bytes()[at..];
        lead.first().is_none_or(|b| rest.first() == Some(b)) && rest.starts_with(lead)
            && self.find_str_at(line, at) == Ok(true)
    }

    /// `valid`: the subject is known valid for the pattern's mode (always so outside UTF
    /// mode), so neither PCRE2's check nor pcre2_match's is needed: the JIT's entry point.
    fn run(&mut self, subject: &[u8], start: usize, valid: bool) -> Result<bool, i32> {
        static ONE: [u8; 1] = [0]; // an empty subject still gets a pointer PCRE2 may read
        let ptr = if subject.is_empty() { ONE.as_ptr() } else { subject.as_ptr() };
        let options = if valid && self.utf { PCRE2_NO_UTF_CHECK } else { 0 };
        let jit = match self.jit {
            Some(jit) => jit,
            None => *self.jit.insert(self.jit_compile()),
        };
        // SAFETY: subject pointer and length are those of a live slice; code and data are
        // live, and data was made for code; the JIT entry point (which checks nothing) and
        // PCRE2_NO_UTF_CHECK only for a subject valid in the pattern's mode.
        let rc = unsafe {
            if jit && valid {
                pcre2_jit_match_8(self.code.as_ptr(), ptr, subject.len(), start, 0, self.data.as_ptr(), std::ptr::null_mut())
            } else {
                pcre2_match_8(self.code.as_ptr(), ptr, subject.len(), start, options, self.data.as_ptr(), std::ptr::null_mut())
            }
        };
        match rc {
            rc if rc >= 0 => Ok(true),
            PCRE2_ERROR_NOMATCH => Ok(false),
            rc => Err(rc),
        }
    }

    /// PCRE2's JIT compile of the code: whether it made JIT code (else pcre2_match
    /// interprets it).
    #[cold]
    fn jit_compile(&self) -> bool {
        // SAFETY: code is a live compiled pattern; its JIT code is freed with it.
        unsafe { pcre2_jit_compile_8(self.code.as_ptr(), PCRE2_JIT_COMPLETE) == 0 }
    }

    /// Bytes every match holds: the first code unit of every match and the last one every
    /// match has, where PCRE2 found them in the pattern (and checks for them itself before
    /// it searches, inside pcre2_match). A subject without one of them has no match. ASCII
    /// punctuation, digits and spaces only: a letter may stand for its other case.
    pub(crate) fn required_bytes(&self) -> Vec<u8> {
        let info = |what: u32| {
            let mut value: u32 = 0;
            // SAFETY: code is live; these four items write one u32.
            let rc = unsafe { pcre2_pattern_info_8(self.code.as_ptr(), what, (&mut value as *mut u32).cast()) };
            (rc == 0).then_some(value)
        };
        [(PCRE2_INFO_FIRSTCODETYPE, PCRE2_INFO_FIRSTCODEUNIT), (PCRE2_INFO_LASTCODETYPE, PCRE2_INFO_LASTCODEUNIT)]
            .into_iter()
            .filter(|&(kind, _)| info(kind) == Some(1))
            .filter_map(|(_, unit)| info(unit).and_then(|u| u8::try_from(u).ok()))
            .filter(|b| b.is_ascii() && !b.is_ascii_alphabetic())
            .collect()
    }

    /// The byte every match of `pattern` starts with, where PCRE2 finds one in it (its
    /// first code unit, compiled without JIT, never matched); None: none, or a pattern it
    /// refuses. A letter may stand for its other case (a caseless part).
    pub(crate) fn first_byte(pattern: &str) -> Option<u8> {
        let (mut err, mut offset) = (0i32, 0usize);
        // SAFETY: pointer and length of a live str; the error outputs are locals.
        let code = unsafe { pcre2_compile_8(pattern.as_ptr(), pattern.len(), 0, &mut err, &mut offset, std::ptr::null_mut()) };
        let code = NonNull::new(code)?;
        let info = |what: u32| {
            let mut value: u32 = 0;
            // SAFETY: code is live; these two items write one u32.
            let rc = unsafe { pcre2_pattern_info_8(code.as_ptr(), what, (&mut value as *mut u32).cast()) };
            (rc == 0).then_some(value)
        };
        let first = (info(PCRE2_INFO_FIRSTCODETYPE) == Some(1)).then(|| info(PCRE2_INFO_FIRSTCODEUNIT)).flatten();
        // SAFETY: made above, freed once, here.
        unsafe { pcre2_code_free_8(code.as_ptr()) };
        first.and_then(|u| u8::try_from(u).ok())
    }

    /// Group `i`'s span in the last successful match, None if it did not take part.
    #[inline]
    pub(crate) fn get(&self, i: usize) -> Option<(usize, usize)> {
        if i >= self.captures {
            return None;
        }
        // SAFETY: the ovector holds 2 * captures entries (match data from the pattern).
        let (a, b) = unsafe { (*self.ovector.add(2 * i), *self.ovector.add(2 * i + 1)) };
        if a == PCRE2_UNSET || b == PCRE2_UNSET {
            return None;
        }
        Some((a, b))
    }

    /// The name of the last `(*MARK:name)` the last successful match passed, if any: the
    /// tests' reading of the mark, that mark_number's is checked against.
    #[cfg(test)]
    pub(crate) fn mark(&self) -> Option<&[u8]> {
        // SAFETY: data is live; a non-null mark is a NUL-terminated name inside the
        // compiled pattern, which lives as long as self.
        unsafe {
            let m = pcre2_get_mark_8(self.data.as_ptr());
            (!m.is_null()).then(|| CStr::from_ptr(m.cast()).to_bytes())
        }
    }
}

/// Group spans of the last match, by group number (0: the whole match): a Pattern's, or a
/// reader's that takes a pattern's place (profile_tally.rs, dome_scan.rs).
pub(crate) trait Located {
    fn get(&self, group: usize) -> Option<(usize, usize)>;
}

impl Located for Pattern {
    #[inline]
    fn get(&self, group: usize) -> Option<(usize, usize)> {
        Pattern::get(self, group)
    }
}

impl Pattern {
    /// The number a `(*MARK:n)` the last successful match passed names (decimal digits,
    /// at most 9), None without a mark or with another name: read in place, with no
    /// strlen or UTF-8 check (~100 instructions a line the line scanner spent on `mark`).
    pub(crate) fn mark_number(&self) -> Option<usize> {
        // SAFETY: data is live; a non-null mark is a NUL-terminated name inside the
        // compiled pattern, read up to its NUL (or the tenth byte) only.
        unsafe {
            let mut at = pcre2_get_mark_8(self.data.as_ptr());
            if at.is_null() {
                return None;
            }
            let (mut value, mut digits) = (0usize, 0);
            while *at != 0 {
                let c = *at;
                if !c.is_ascii_digit() || digits == 9 {
                    return None;
                }
                value = value * 10 + usize::from(c - b'0');
                digits += 1;
                at = at.add(1);
            }
            (digits > 0).then_some(value)
        }
    }
}

impl Drop for Pattern {
    fn drop(&mut self) {
        // SAFETY: both were made in new() and are freed once, here.
        unsafe {
            pcre2_match_data_free_8(self.data.as_ptr());
            pcre2_code_free_8(self.code.as_ptr());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Pattern;

    #[test]
    fn it_gives_the_groups_and_the_mark_of_the_branch_that_matched() {
        let mut p = Pattern::new(r"\A(\d+) (?|(?:(*MARK:0)a(x)?)|(?:(*MARK:1)b(y))|(?:(*MARK:2).*))\z").unwrap();
        assert_eq!(p.captures_len(), 3);
        assert_eq!(p.find(b"12 by"), Ok(true));
        assert_eq!((p.get(1), p.get(2), p.mark()), (Some((0, 2)), Some((4, 5)), Some(&b"1"[..])));
        assert_eq!(p.mark_number(), Some(1));
        assert_eq!(p.find(b"7 a"), Ok(true));
        assert_eq!((p.get(2), p.mark()), (None, Some(&b"0"[..])));
        assert_eq!(p.find(b"7 zz"), Ok(true));
        assert_eq!((p.mark(), p.mark_number()), (Some(&b"2"[..]), Some(2)));
        assert_eq!(p.find(b"x"), Ok(false));
        assert_eq!(p.find(b""), Ok(false));
        assert_eq!(p.get(9), None);
    }

    #[test]
    fn a_mark_closing_a_branch_is_that_branchs_even_where_an_earlier_branch_passed_its_own_and_failed_later() {
        // fastpath.marked_form puts each alternative's mark after its body: a branch that
        // passed its mark and then failed (here at `\z`) must not leave it behind
        let mut p = Pattern::new(r"\A(?|(?:a(x)?(*MARK:0))|(?:a(y)(*MARK:1))|(?:.*(*MARK:2)))\z").unwrap();
        for (line, mark, group) in [(&b"ax"[..], 0, Some((1, 2))), (b"a", 0, None), (b"ay", 1, Some((1, 2))), (b"az", 2, None), (b"", 2, None)] {
            assert_eq!(p.find(line), Ok(true));
            assert_eq!((p.mark_number(), p.get(1)), (Some(mark), group), "{line:?}");
        }
    }

    #[test]
    fn the_first_byte_is_the_one_every_match_starts_with() {
        assert_eq!(Pattern::first_byte(r"(?s)(?:returns (-?\d+))"), Some(b'r'));
        assert_eq!(Pattern::first_byte(r"(?s)(?:\[[^\]]*\] x|\[y)"), Some(b'['));
        assert_eq!(Pattern::first_byte(r"(?s)(?:(?i)returns)").map(|b| b.to_ascii_lowercase()), Some(b'r'));
        for none in [r"(?s)(?:.*)", r"(?s)(?:a|b)", r"(?s)(?:x?y)", r"(?s)(?:)", r"(?s)(?:\d+)", "(?s)(?:("] {
            assert_eq!(Pattern::first_byte(none), None, "{none}");
        }
    }

    #[test]
    fn a_mark_that_is_no_number_or_no_mark_gives_no_number() {
        let mut p = Pattern::new(r"\A(?:(*MARK:12)a|(*MARK:x1)b|(*MARK:1234567890)c|d)\z").unwrap();
        let numbers: Vec<_> = [b"a", b"b", b"c", b"d"]
            .iter()
            .map(|s| {
                assert_eq!(p.find(&s[..]), Ok(true));
                p.mark_number()
            })
            .collect();
        assert_eq!(numbers, [Some(12), None, None, None]);
    }

    #[test]
    fn a_utf_pattern_reads_characters_and_refuses_invalid_bytes() {
        let mut p = Pattern::with_options(r"\A(.)x.\z", true, true).unwrap();
        assert_eq!(p.find_str("éx\n"), Ok(true));
        assert_eq!(p.get(1), Some((0, 2)));
        assert_eq!(p.find("éx\n".as_bytes()), Ok(true));
        assert!(p.find(b"\xffx\n").is_err(), "invalid UTF-8 is PCRE2's error, not a match");
        let mut bytes = Pattern::with_options(r"\A(.)x.\z", false, true).unwrap();
        assert_eq!(bytes.find("éx\n".as_bytes()), Ok(false));
    }

    #[test]
    fn a_match_from_an_offset_is_anchored_there_by_g_and_sees_the_text_before() {
        let mut p = Pattern::with_options(r"\G(?<= )(b+)\z", true, false).unwrap();
        assert_eq!(p.find_str_at("aé bb", 4), Ok(true));
        assert_eq!(p.get(1), Some((4, 6)), "spans are the subject's");
        assert_eq!(p.find_str_at("aé bb", 5), Ok(false), "the lookbehind reads the text before the offset");
        assert_eq!(p.find_str_at("a bxb", 2), Ok(false), "anchored at the offset, not searching on");
        assert!(p.find_str_at("aé bb", 2).is_err(), "inside a character");
        assert!(p.find_str_at("ab", 3).is_err(), "past the end");
    }

    #[test]
    fn the_required_bytes_are_those_every_match_holds_and_no_letter() {
        let required = |p: &str| Pattern::new(p).unwrap().required_bytes();
        assert_eq!(required(r"\(\d+(?:,\d+)+\)"), b"()");
        assert_eq!(required(r"(?:/[A-Za-z]+=[^/]*?)+(?= \(\d|$)"), b"/=");
        assert_eq!(required(r"\b\d+\b"), b"", "no byte is in every match");
        assert_eq!(required(r"a|b"), b"");
        assert_eq!(required(r"=x"), b"=", "a letter may be caseless: left out");
    }

    #[test]
    fn a_search_from_an_offset_finds_the_next_match_and_its_spans_in_the_subject() {
        let mut p = Pattern::new(r"\d+").unwrap();
        assert_eq!(p.find_at(b"a1 22 b", 2), Ok(true));
        assert_eq!(p.get(0), Some((3, 5)));
        assert_eq!(p.find_at(b"a1 22 b", 5), Ok(false));
        assert_eq!(p.find_at(b"a1", 2), Ok(false), "at the end: no match, no error");
        assert!(p.find_at(b"a1", 3).is_err(), "past the end");
    }

    #[test]
    fn its_jit_code_is_made_at_its_first_match_and_not_before() {
        // a scanner's patterns an input never runs cost no JIT compile (issue 30)
        let mut p = Pattern::with_options(r"\A(a+)b", true, false).unwrap();
        assert_eq!(p.jit, None, "compiled, not yet JIT-compiled");
        assert_eq!(p.find_str("aab"), Ok(true), "the first match, through the new JIT code");
        // Some(true) where PCRE2 has a JIT for this machine, Some(false) where not (it
        // matches through pcre2_match then): either way, tried at the first match
        assert!(p.jit.is_some(), "JIT-compiled (or found unavailable) at the first match");
        assert_eq!(p.get(1), Some((0, 2)));
        assert_eq!(p.find_str("ab"), Ok(true));
        assert_eq!(p.get(1), Some((0, 1)));
        let mut bytes = Pattern::with_options(r"a(b)", true, false).unwrap();
        assert_eq!(bytes.find_at(b"xab", 1), Ok(true), "the first match through pcre2_match's entry");
        assert!(bytes.jit.is_some());
        assert_eq!(bytes.get(1), Some((2, 3)));
    }

    #[test]
    fn a_pattern_pcre2_cannot_compile_is_an_error_naming_the_place() {
        let err = Pattern::new(r"a(b").err().unwrap();
        assert!(err.contains("offset"), "{err}");
    }
}
