//! PCRE2 for the DOME scanner, matched without PCRE2's UTF-8 check on every line.
//!
//! The scanner's patterns are compiled in UTF mode (a `.` is one character, as Python's),
//! and in UTF mode `pcre2_match` validates the whole subject before each match unless told
//! PCRE2_NO_UTF_CHECK; the pcre2 crate never tells it (it would be unsound on arbitrary
//! bytes), so each line was read twice: ~1,400 instructions a 200-byte line, 6 % of a
//! DOME replay (callgrind, issue 30). Here the subject is a `&str`, valid UTF-8 by its
//! type, which is exactly PCRE2's condition for skipping the check. Same compile options
//! as the crate's RegexBuilder with utf, dotall as asked and jit_if_available: the JIT
//! when PCRE2 has one, else its interpreter.

use std::os::raw::c_int;
use std::ptr;

use crate::jit::error_text;

use pcre2_sys::{
    pcre2_code_8, pcre2_code_free_8, pcre2_compile_8, pcre2_get_ovector_count_8,
    pcre2_get_ovector_pointer_8, pcre2_jit_compile_8, pcre2_match_8, pcre2_match_data_8,
    pcre2_match_data_create_from_pattern_8, pcre2_match_data_free_8, PCRE2_DOTALL, PCRE2_JIT_COMPLETE,
    PCRE2_NO_UTF_CHECK, PCRE2_UTF,
};

/// A compiled pattern (owned; freed on drop).
pub struct Regex {
    code: *mut pcre2_code_8,
}

/// A match's capture spans (PCRE2 match data sized for the pattern; freed on drop).
pub struct CaptureLocations {
    data: *mut pcre2_match_data_8,
}

/// The pattern in UTF mode (and DOTALL if asked), JIT-compiled where PCRE2 can.
pub fn compile(pattern: &str, dotall: bool) -> Result<Regex, String> {
    let options = PCRE2_UTF | if dotall { PCRE2_DOTALL } else { 0 };
    let (mut code, mut offset): (c_int, usize) = (0, 0);
    // SAFETY: the pattern's pointer and length are a live &str; the out-parameters are ours.
    let compiled = unsafe {
        pcre2_compile_8(pattern.as_ptr(), pattern.len(), options, &mut code, &mut offset, ptr::null_mut())
    };
    if compiled.is_null() {
        return Err(format!("{} at offset {offset}", error_text(code)));
    }
    // SAFETY: a code PCRE2 just compiled. A pattern the JIT refuses runs interpreted (as the
    // crate's jit_if_available), so its answer is not an error.
    unsafe { pcre2_jit_compile_8(compiled, PCRE2_JIT_COMPLETE) };
    Ok(Regex { code: compiled })
}

impl Regex {
    /// Match data for this pattern, all its groups.
    pub fn capture_locations(&self) -> CaptureLocations {
        // SAFETY: a live code; a null general context means PCRE2's malloc.
        let data = unsafe { pcre2_match_data_create_from_pattern_8(self.code, ptr::null_mut()) };
        assert!(!data.is_null(), "PCRE2 could not allocate match data");
        CaptureLocations { data }
    }

    /// Whether the pattern matches `subject` from its start (where the pattern anchors
    /// it); the spans in `locs` after a match. An error of PCRE2's (a limit) is no match,
    /// as the crate's callers here read `Ok(Some(_))` only.
    pub fn captures_read(&self, locs: &mut CaptureLocations, subject: &str) -> bool {
        // SAFETY: `subject` is valid UTF-8 (a &str), PCRE2_NO_UTF_CHECK's condition; the
        // match data was made from this pattern, so it holds all its groups.
        let rc = unsafe {
            pcre2_match_8(self.code, subject.as_ptr(), subject.len(), 0, PCRE2_NO_UTF_CHECK, locs.data, ptr::null_mut())
        };
        rc > 0
    }
}

impl CaptureLocations {
    /// Group `i`'s (start, end) byte offsets in the last subject matched, if it took part.
    pub fn get(&self, i: usize) -> Option<(usize, usize)> {
        // SAFETY: live match data; the ovector has `count` pairs.
        unsafe {
            if i >= pcre2_get_ovector_count_8(self.data) as usize {
                return None;
            }
            let ov = pcre2_get_ovector_pointer_8(self.data);
            let (s, e) = (*ov.add(2 * i), *ov.add(2 * i + 1));
            // PCRE2_UNSET (all ones) for a group that did not take part
            (s != usize::MAX && e != usize::MAX).then_some((s, e))
        }
    }
}

impl Drop for Regex {
    fn drop(&mut self) {
        // SAFETY: ours, freed once.
        unsafe { pcre2_code_free_8(self.code) }
    }
}

impl Drop for CaptureLocations {
    fn drop(&mut self) {
        // SAFETY: ours, freed once.
        unsafe { pcre2_match_data_free_8(self.data) }
    }
}
