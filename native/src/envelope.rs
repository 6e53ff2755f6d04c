//! The JSON envelope of a raw-lines record (streams/kafka/envelope.py), decoded without
//! Python for the form rsyslog writes: one object of the five members host, path, offset,
//! received and line (any order, each once), strings with JSON's escapes, a non-negative
//! integer offset, and `received` in rsyslog's own RFC 3339 form. Anything else, well
//! formed or not, gives None, and Python's decode_fields (the reference, with its error
//! messages) takes the record: tests/streams/kafka/test_envelope.py holds both to the same
//! results.

use std::borrow::Cow;
use std::cell::RefCell;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString, PyTuple};

use crate::byte_runs::{until, Stops};
use crate::chunk::utf8;

/// Host and path texts recently handed to Python, with their str objects. A partition's
/// records name a handful of files, so nearly every record reuses both strings: no
/// allocation, and the hash the worker's dict lookups need is already in them.
const NAMES_KEPT: usize = 16;

/// envelope.MAX_RECORD_BYTES: a record longer than this is no line of rsyslog's.
const MAX_RECORD_BYTES: usize = 1 << 20;

thread_local! {
    static NAMES: RefCell<Vec<(String, Py<PyString>)>> = const { RefCell::new(Vec::new()) };
}

pub(crate) fn name<'py>(py: Python<'py>, text: &str) -> Bound<'py, PyString> {
    NAMES.with(|names| {
        let mut names = names.borrow_mut();
        if let Some(i) = names.iter().position(|(t, _)| t == text) {
            if i > 0 {
                names.swap(i, i - 1); // the names in use drift to the front
            }
            return names[i.saturating_sub(1)].1.clone_ref(py).into_bound(py);
        }
        let made = PyString::new(py, text);
        if names.len() == NAMES_KEPT {
            names.pop();
        }
        names.push((text.to_owned(), made.clone().unbind()));
        made
    })
}

struct Json<'a> {
    s: &'a [u8],
    at: usize,
}

impl<'a> Json<'a> {
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.s.get(self.at) {
            self.at += 1;
        }
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        self.ws();
        (self.s.get(self.at) == Some(&c)).then(|| self.at += 1)
    }

    /// A string, the opening quote next; None for what JSON or UTF-8 forbids, and for a
    /// lone surrogate (Python keeps those; it decodes such a record itself).
    fn string(&mut self) -> Option<Cow<'a, str>> {
        self.eat(b'"')?;
        let start = self.at;
        self.at += plain_run(&self.s[start..]);
        match *self.s.get(self.at)? {
            b'"' => {
                // no escapes (the common case): the text as it lies in the record
                let text = utf8(&self.s[start..self.at])?;
                self.at += 1;
                return Some(Cow::Borrowed(text));
            }
            b'\\' => {}
            _ => return None, // a control character
        }
        let mut out = std::str::from_utf8(&self.s[start..self.at]).ok()?.to_owned();
        loop {
            match *self.s.get(self.at)? {
                b'"' => {
                    self.at += 1;
                    return Some(Cow::Owned(out));
                }
                b'\\' => {
                    let e = *self.s.get(self.at + 1)?;
                    self.at += 2;
                    out.push(match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let hi = self.hex4()?;
                            if (0xd800..0xdc00).contains(&hi) {
                                if self.s.get(self.at..self.at + 2)? != b"\\u" {
                                    return None;
                                }
                                self.at += 2;
                                let lo = self.hex4()?;
                                if !(0xdc00..0xe000).contains(&lo) {
                                    return None;
                                }
                                char::from_u32(0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00))?
                            } else {
                                char::from_u32(hi)? // a lone low surrogate: None
                            }
                        }
                        _ => return None,
                    });
                }
                c if c < 0x20 => return None,
                _ => {
                    let run = self.at;
                    self.at += plain_run(&self.s[run..]);
                    out.push_str(utf8(&self.s[run..self.at])?);
                }
            }
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let h = std::str::from_utf8(self.s.get(self.at..self.at + 4)?).ok()?;
        if !h.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        self.at += 4;
        u32::from_str_radix(h, 16).ok()
    }

    /// A non-negative integer that fits 63 bits (no sign, fraction or exponent).
    fn offset(&mut self) -> Option<i64> {
        self.ws();
        let start = self.at;
        while self.s.get(self.at).is_some_and(u8::is_ascii_digit) {
            self.at += 1;
        }
        let digits = &self.s[start..self.at];
        if digits.is_empty() || (digits.len() > 1 && digits[0] == b'0') || digits.len() > 18 {
            return None;
        }
        if let Some(b'.' | b'e' | b'E') = self.s.get(self.at) {
            return None;
        }
        std::str::from_utf8(digits).ok()?.parse().ok()
    }
}

/// How many bytes from the start of `s` are plain string content: up to the first quote,
/// backslash or control character (or the end), 16 bytes a step (byte_runs).
fn plain_run(s: &[u8]) -> usize {
    until(s, 0, Stops::json_text())
}

/// A str of `text`: ASCII text (nearly every log line) copied into a new compact ASCII
/// str as it lies, without PyString::new's UTF-8 decoding of it again.
pub(crate) fn new_str<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyString>> {
    if !text.is_ascii() {
        return Ok(PyString::new(py, text));
    }
    // SAFETY: PyUnicode_New(n, 127) makes a compact ASCII str of n one-byte characters
    // (its terminating NUL set) that only this reference holds; the n bytes copied into
    // it are ASCII, as its kind requires.
    unsafe {
        let obj = Bound::from_owned_ptr_or_err(py, ffi::PyUnicode_New(text.len() as ffi::Py_ssize_t, 127))?;
        std::ptr::copy_nonoverlapping(text.as_ptr(), ffi::PyUnicode_DATA(obj.as_ptr()).cast::<u8>(), text.len());
        Ok(obj.downcast_into_unchecked())
    }
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's days_from_civil).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// The last `received` read in full whose second was valid: its text (bytes 0..19 are the
/// second, 20..26 its fraction, 26.. the offset) and the ms of that second. A burst of
/// lines shares a second, so most records compare two short runs of bytes and read only
/// the fraction: ~200 instructions a record less than reading the date and offset again
/// (envelope.received_to_ms keeps the same shortcut in Python).
struct LastSecond {
    text: [u8; 32],
    len: usize,
    ms: i64,
}

thread_local! {
    static LAST_SECOND: RefCell<LastSecond> = const { RefCell::new(LastSecond { text: [0; 32], len: 0, ms: 0 }) };
}

/// received_text_ms with the last second remembered (LastSecond): the same answers.
fn received_ms(t: &str) -> Option<i64> {
    let b = t.as_bytes();
    let fraction = |b: &[u8]| -> Option<i64> {
        let digits = b.get(20..26)?;
        digits.iter().all(u8::is_ascii_digit).then(|| digits[..3].iter().fold(0i64, |n, &c| n * 10 + i64::from(c - b'0')))
    };
    let known = LAST_SECOND.with(|last| {
        let last = last.borrow();
        let seen = &last.text[..last.len];
        (last.len == b.len() && last.len > 26 && seen[..20] == b[..20] && seen[26..] == b[26..]).then_some(last.ms)
    });
    if let Some(second_ms) = known {
        return Some(second_ms + fraction(b)?);
    }
    let ms = received_text_ms(t)?;
    LAST_SECOND.with(|last| {
        let mut last = last.borrow_mut();
        last.text[..b.len()].copy_from_slice(b); // 27 or 32 bytes: received_text_ms took it
        last.len = b.len();
        last.ms = ms - fraction(b).expect("received_text_ms read these digits");
    });
    Some(ms)
}

/// envelope.received_to_ms for rsyslog's form only, 'YYYY-MM-DDThh:mm:ss.ffffff' and 'Z'
/// or '+hh:mm' / '-hh:mm' (ms truncated, as Python's); None for any other text.
fn received_text_ms(t: &str) -> Option<i64> {
    let b = t.as_bytes();
    if !(b.len() == 27 || b.len() == 32) {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<i64> {
        let part = b.get(from..to)?;
        part.iter().all(u8::is_ascii_digit).then(|| part.iter().fold(0i64, |n, &c| n * 10 + i64::from(c - b'0')))
    };
    let at = |i: usize, c: u8| b[i] == c;
    if !(at(4, b'-') && at(7, b'-') && at(10, b'T') && at(13, b':') && at(16, b':') && at(19, b'.')) {
        return None;
    }
    let (y, mo, d, h, mi, s) = (num(0, 4)?, num(5, 7)?, num(8, 10)?, num(11, 13)?, num(14, 16)?, num(17, 19)?);
    let frac_ms = num(20, 23)?;
    num(23, 26)?;
    if y < 1 || !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || s > 59 {
        return None;
    }
    let offset = if b.len() == 27 {
        if !(at(26, b'Z') || at(26, b'z')) {
            return None;
        }
        0
    } else {
        let sign = match b[26] {
            b'+' => 1,
            b'-' => -1,
            _ => return None,
        };
        if !at(29, b':') {
            return None;
        }
        let (oh, om) = (num(27, 29)?, num(30, 32)?);
        if oh > 23 || om > 59 {
            return None;
        }
        sign * (oh * 3600 + om * 60)
    };
    let seconds = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s - offset;
    Some(seconds * 1000 + frac_ms)
}

/// An envelope in rsyslog's form, decoded: received_ms as envelope.received_to_ms gives it,
/// the line without its trailing CR and LF (as decode_fields strips them).
pub(crate) struct Decoded<'a> {
    pub host: Cow<'a, str>,
    pub path: Cow<'a, str>,
    pub offset: i64,
    pub received_ms: Option<i64>,
    pub line: Cow<'a, str>,
}

/// The envelope of one record value in rsyslog's form; None: Python decodes this one.
pub(crate) fn decoded_fields(raw: &[u8]) -> Option<Decoded<'_>> {
    if raw.len() > MAX_RECORD_BYTES {
        return None; // Python refuses it, unparsed (too_large)
    }
    let (host, path, offset, received, line) = members(raw)?;
    let received_ms = match received {
        None => None,
        Some(text) => Some(received_ms(&text)?),
    };
    let line = match line {
        Cow::Borrowed(text) => Cow::Borrowed(text.trim_end_matches(['\r', '\n'])),
        Cow::Owned(mut text) => {
            text.truncate(text.trim_end_matches(['\r', '\n']).len());
            Cow::Owned(text)
        }
    };
    Some(Decoded { host, path, offset, received_ms, line })
}

/// (host, path, offset, received_ms, line) of an envelope in rsyslog's form, as
/// envelope.decode_fields gives them; None: Python decodes this one.
#[pyfunction]
pub fn decode_envelope<'py>(raw: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let py = raw.py();
    let Ok(raw) = raw.downcast::<PyBytes>() else {
        return Ok(None);
    };
    let Some(Decoded { host, path, offset, received_ms, line }) = decoded_fields(raw.as_bytes()) else {
        return Ok(None);
    };
    let (host, path) = (name(py, &host), name(py, &path));
    Ok(Some((host, path, offset, received_ms, line).into_pyobject(py)?))
}

/// The envelope's members.
#[derive(Clone, Copy)]
enum Member {
    Host,
    Path,
    Offset,
    Received,
    Line,
}

/// The members' names as rsyslog writes them, quotes included (no escapes in them).
const MEMBER_KEYS: [(&[u8], Member); 5] = [
    (b"\"host\"", Member::Host),
    (b"\"path\"", Member::Path),
    (b"\"offset\"", Member::Offset),
    (b"\"received\"", Member::Received),
    (b"\"line\"", Member::Line),
];

/// The member of a name read as a string (escapes and all): MEMBER_KEYS' names unquoted.
fn member_named(name: &str) -> Option<Member> {
    let quoted = |key: &[u8]| &key[1..key.len() - 1] == name.as_bytes();
    MEMBER_KEYS.iter().find(|(key, _)| quoted(key)).map(|&(_, member)| member)
}

impl Json<'_> {
    /// The member whose name comes next, spelt plainly (the common case: no escape in it),
    /// the name passed; None for any other name, left to string() and nothing passed.
    fn known_key(&mut self) -> Option<Member> {
        self.ws();
        let rest = &self.s[self.at..];
        let (key, member) = MEMBER_KEYS.iter().find(|(key, _)| rest.starts_with(key))?;
        self.at += key.len();
        Some(*member)
    }
}

type Members<'a> = (Cow<'a, str>, Cow<'a, str>, i64, Option<Cow<'a, str>>, Cow<'a, str>);

fn members(s: &[u8]) -> Option<Members<'_>> {
    let mut j = Json { s, at: 0 };
    j.eat(b'{')?;
    let (mut host, mut path, mut offset, mut received, mut line) = (None, None, None, None, None);
    loop {
        let member = match j.known_key() {
            Some(member) => member,
            None => member_named(&j.string()?)?,
        };
        j.eat(b':')?;
        let slot_taken = match member {
            Member::Host => host.replace(j.string()?).is_some(),
            Member::Path => path.replace(j.string()?).is_some(),
            Member::Received => received.replace(j.string()?).is_some(),
            Member::Line => line.replace(j.string()?).is_some(),
            Member::Offset => offset.replace(j.offset()?).is_some(),
        };
        if slot_taken {
            return None; // a member twice: JSON parsers disagree on which wins
        }
        j.ws();
        match j.s.get(j.at)? {
            b',' => j.at += 1,
            b'}' => {
                j.at += 1;
                break;
            }
            _ => return None,
        }
    }
    j.ws();
    if j.at != s.len() {
        return None;
    }
    // envelope.MAX_HOST_CHARS and MAX_PATH_CHARS (in characters): longer, Python refuses it
    let (host, path) = (
        host.filter(|h| !h.is_empty() && (h.len() <= 253 || h.chars().count() <= 253))?,
        path.filter(|p| !p.is_empty() && (p.len() <= 4096 || p.chars().count() <= 4096))?,
    );
    Some((host, path, offset?, received, line?))
}

#[cfg(test)]
mod tests {
    use super::{days_from_civil, plain_run, received_ms, received_text_ms};

    #[test]
    fn a_plain_run_ends_at_the_first_quote_backslash_or_control_character_wherever_it_lies() {
        let naive = |s: &[u8]| s.iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20).unwrap_or(s.len());
        let stops: [u8; 6] = [b'"', b'\\', 0, 0x1f, b'\n', b'\t'];
        let fillers: [u8; 6] = [b'a', b' ', 0x20, 0x7f, 0x80, 0xff]; // 0x20 and up are plain
        for len in 0..40 {
            for &fill in &fillers {
                let plain = vec![fill; len];
                assert_eq!(plain_run(&plain), len);
                for at in 0..len {
                    for &stop in &stops {
                        let mut s = plain.clone();
                        s[at] = stop;
                        assert_eq!(plain_run(&s), naive(&s), "{s:?}");
                        assert_eq!(plain_run(&s), at);
                    }
                }
            }
        }
        let line = "08/12 14:31:43.118 dpm: put \u{e9}t\u{e9} \"token\" ok".as_bytes();
        assert_eq!(plain_run(line), naive(line));
    }

    #[test]
    fn civil_days_count_from_the_epoch_across_leap_years() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
    }

    #[test]
    fn a_remembered_second_gives_the_same_times_as_reading_each_text_in_full() {
        let texts = [
            "2011-08-12T14:31:43.118402+02:00",
            "2011-08-12T14:31:43.999999+02:00", // the same second
            "2011-08-12T14:31:43.000000+02:00",
            "2011-08-12T14:31:43.1184x2+02:00", // the same second, a bad fraction
            "2011-08-12T14:31:43.118402+02:00",
            "2011-08-12T14:31:43.118402+01:00", // another offset
            "2011-08-12T14:31:43.118402-01:00",
            "2011-08-12T14:31:44.118402-01:00", // the next second
            "2011-08-12T12:31:44.118999Z",
            "2011-08-12T12:31:44.118999z",
            "2011-08-12T12:31:44.5Z",
            "2011-02-29T12:31:43.118999Z", // no such day: never remembered
            "2011-02-29T12:31:43.000000Z",
            "2011-08-12T14:31:43.118402+02:60",
            "2011-08-12T14:31:43.118402+02:00",
            "2011-08-12T14:31:43,118402+02:00",
            "2011-08-12T14:31:43.118402+02:00Z",
        ];
        for text in texts {
            assert_eq!(received_ms(text), received_text_ms(text), "{text}");
        }
    }

    #[test]
    fn rsyslog_times_are_read_to_the_millisecond_with_their_offset() {
        // python: rfc3339_to_ms("2011-08-12T14:31:43.118402+02:00") == 1313152303118
        assert_eq!(received_ms("2011-08-12T14:31:43.118402+02:00"), Some(1_313_152_303_118));
        assert_eq!(received_ms("2011-08-12T12:31:43.118999Z"), Some(1_313_152_303_118));
        assert_eq!(received_ms("2011-02-29T12:31:43.118999Z"), None);
        assert_eq!(received_ms("2011-08-12 12:31:43.118999Z"), None);
    }
}
