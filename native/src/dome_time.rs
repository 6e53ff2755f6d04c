//! The RFC 3339 stamp of a DOME line -> epoch ms, as `parsers/clock.rfc3339_to_ms` reads
//! it (Python's `datetime.fromisoformat`): `YYYY-MM-DDTHH:MM:SS[.f{1,6}](Z|+HH:MM|+HHMM)`,
//! the fraction truncated to ms, an offset's minutes taken as given (`+02:60` is three
//! hours, as Python takes it) but strictly within a day. Anything else is an error with
//! the reason, and the line is malformed.

fn number(bytes: &[u8]) -> Option<i64> {
    if bytes.is_empty() || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(bytes.iter().fold(0i64, |n, b| n * 10 + i64::from(b - b'0')))
}

fn leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's days_from_civil).
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Epoch ms of an RFC 3339 stamp, and whether it has whole seconds only.
pub fn rfc3339_ms(text: &str) -> Result<(i64, bool), String> {
    let bad = |why: &str| Err(format!("bad RFC 3339 time {text:?}: {why}"));
    let b = text.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' || b[16] != b':' {
        return bad("not YYYY-MM-DDTHH:MM:SS");
    }
    let field = |from: usize, to: usize| number(&b[from..to]);
    let (Some(year), Some(month), Some(day), Some(hour), Some(minute), Some(second)) =
        (field(0, 4), field(5, 7), field(8, 10), field(11, 13), field(14, 16), field(17, 19))
    else {
        return bad("not YYYY-MM-DDTHH:MM:SS");
    };
    if year < 1 {
        return bad("year 0 is out of range");
    }
    if !(1..=12).contains(&month) {
        return bad("month must be in 1..12");
    }
    if day < 1 || day > days_in_month(year, month) {
        return bad("day is out of range for month");
    }
    if hour > 23 || minute > 59 || second > 59 {
        return bad("hour, minute or second out of range");
    }
    let mut at = 19;
    let mut ms = 0;
    let whole = b[19] != b'.';
    if !whole {
        let start = 20;
        let mut end = start;
        while end < b.len() && b[end].is_ascii_digit() {
            end += 1;
        }
        if end == start || end - start > 6 {
            return bad("a fraction of 1 to 6 digits");
        }
        let digits = &b[start..end];
        let mut padded = [b'0'; 3];
        for (i, d) in digits.iter().take(3).enumerate() {
            padded[i] = *d;
        }
        ms = number(&padded).unwrap_or(0);
        at = end;
    }
    let offset_minutes = match &b[at..] {
        b"Z" => 0,
        [sign @ (b'+' | b'-'), rest @ ..] => {
            let (hh, mm) = match rest {
                [h1, h2, b':', m1, m2] | [h1, h2, m1, m2] => ([*h1, *h2], [*m1, *m2]),
                _ => return bad("no offset"),
            };
            let (Some(hh), Some(mm)) = (number(&hh), number(&mm)) else {
                return bad("no offset");
            };
            let minutes = hh * 60 + mm;
            if minutes >= 24 * 60 {
                return bad("offset must be strictly between -24h and 24h");
            }
            if *sign == b'-' { -minutes } else { minutes }
        }
        _ => return bad("no offset"),
    };
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second
        - offset_minutes * 60;
    Ok((seconds * 1000 + ms, whole))
}

/// rfc3339_ms over a stream's stamps, most of which share the stamp before's second and
/// offset and differ in their fraction alone: such a stamp's ms is that second's plus its
/// fraction's, found without reading the date again (~400 instructions a line, issue 30).
#[derive(Default)]
pub struct Rfc3339Reader {
    /// The last stamp read, without its fraction (`YYYY-MM-DDTHH:MM:SS` and the offset),
    /// and the ms of its second; empty before a stamp was read.
    second: Vec<u8>,
    second_ms: i64,
}

/// A stamp's text before its fraction (19 bytes), the fraction's digits if it has one
/// (`.` and 1 to 6 digits: else None, a stamp for rfc3339_ms to refuse), the text after.
fn around_fraction(b: &[u8]) -> Option<(&[u8], Option<&[u8]>, &[u8])> {
    if b.len() < 20 {
        return None;
    }
    let (head, rest) = b.split_at(19);
    if rest[0] != b'.' {
        return Some((head, None, rest));
    }
    let digits = rest[1..].iter().take_while(|c| c.is_ascii_digit()).count();
    (1..=6).contains(&digits).then(|| (head, Some(&rest[1..1 + digits]), &rest[1 + digits..]))
}

/// A fraction's ms: its first three digits, as rfc3339_ms reads them.
fn fraction_ms(digits: Option<&[u8]>) -> i64 {
    let mut padded = [b'0'; 3];
    for (p, d) in padded.iter_mut().zip(digits.unwrap_or_default()) {
        *p = *d;
    }
    number(&padded).unwrap_or(0)
}

impl Rfc3339Reader {
    /// rfc3339_ms(text), the same value or refusal.
    pub fn read(&mut self, text: &str) -> Result<(i64, bool), String> {
        let Some((head, fraction, tail)) = around_fraction(text.as_bytes()) else {
            return rfc3339_ms(text);
        };
        let same = self.second.len() == head.len() + tail.len()
            && self.second[..head.len()] == *head
            && self.second[head.len()..] == *tail;
        if same {
            return Ok((self.second_ms + fraction_ms(fraction), fraction.is_none()));
        }
        let read = rfc3339_ms(text);
        match &read {
            Ok((ms, _)) => {
                self.second.clear();
                self.second.extend_from_slice(head);
                self.second.extend_from_slice(tail);
                self.second_ms = ms - fraction_ms(fraction);
            }
            Err(_) => self.second.clear(),
        }
        read
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reader_gives_what_rfc3339_ms_gives_stamp_after_stamp() {
        let stamps = [
            "2017-05-30T08:44:00.000001+02:00", "2017-05-30T08:44:00.999+02:00", "2017-05-30T08:44:00+02:00",
            "2017-05-30T08:44:00.5+0200", "2017-05-30T08:44:00.5Z", "2017-05-30T08:44:00.1234567Z",
            "2017-05-30T08:44:00.Z", "2017-05-30T08:44:00.25Z", "2017-05-30T08:44:01.25Z", "2017-02-29T08:44:01.25Z",
            "2017-02-29T08:44:01.5Z", "2017-05-30T08:44:01.75-01:30", "2017-05-30T08:44:01.75+24:00",
            "2017-05-30T08:44:01.75+24:00", "2017-05-30T08:44:01", "2017-05-30T08:44:01.1", "2017-05-30T08:44:01.1x",
            "2017-05-30T08:44:01.9x",
        ];
        let mut reader = Rfc3339Reader::default();
        for text in stamps {
            assert_eq!(reader.read(text), rfc3339_ms(text), "{text}");
        }
        assert!(reader.read("2017-05-30T08:44:00.5Z").is_ok() && reader.read("2017-05-30T08:44:00.6Z") == Ok((1_496_133_840_600, false)));
    }

    #[test]
    fn reads_the_three_offset_forms() {
        assert_eq!(rfc3339_ms("1970-01-01T00:00:01.5Z").unwrap(), (1500, false));
        assert_eq!(rfc3339_ms("1970-01-01T02:00:00.123456+02:00").unwrap(), (123, false));
        assert_eq!(rfc3339_ms("1970-01-01T02:00:00+0200").unwrap(), (0, true));
        assert!(rfc3339_ms("2017-02-29T00:00:00Z").is_err());
    }
}
