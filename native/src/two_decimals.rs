//! report/svg.py `nums`, compiled: a path template's "%.2f" numbers written as svg.num()
//! writes each ("12.50" -> "12.5", "12.00" -> "12"). The scatter and the timeline write
//! ~9 k coordinates a report; in Python each went through "%.2f" (dtoa) and the whole
//! text through ten `str.replace` scans (~30 M instructions, issue 30). Python's "%.2f"
//! is exact: the decimal nearest the float's binary value, a tie to the even digit;
//! `hundredths` rounds the same way in integers (tests/report/test_figures.py checks the
//! two on random and edge values, bench/RESULTS.md session 29 (figs29) on 8 M). svg.python_nums stays the reference: a template with any other "%"
//! conversion, a value that is no real number, or one that is not finite (which the
//! reference refuses with its own ValueError) is refused here with a TypeError, for it
//! to answer.

use std::fmt::Write;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

/// `v` as "%.2f" writes it, less the ending svg.num() drops, appended to `out`; -0.0 as
/// 0.0 (the reference adds 0.0 to each value, so "0" and not "-0").
pub(crate) fn push_num(out: &mut String, v: f64) {
    let v = v + 0.0;
    match hundredths(v.abs()) {
        Some(h) => {
            if v < 0.0 {
                out.push('-'); // "%.2f" keeps the sign of a value that rounds to 0: "-0.00"
            }
            push_digits(out, h / 100);
            let cents = h % 100;
            if cents != 0 {
                out.push('.');
                out.push(char::from(b'0' + (cents / 10) as u8));
                if cents % 10 != 0 {
                    out.push(char::from(b'0' + (cents % 10) as u8));
                }
            }
        }
        None => {
            // Past 2^53 every float is a whole number: core's exact formatting, "%.2f"'s
            // text, its ".00" dropped.
            let start = out.len();
            let _ = write!(out, "{v:.2}");
            out.truncate(out.len() - 3);
            debug_assert!(out.len() > start);
        }
    }
}

/// `a` (finite, >= 0, below 2^53) times 100 rounded to an integer as "%.2f" rounds it:
/// exactly, on the float's binary value m * 2^-s, a tie to the even integer; None from
/// 2^53 on. core's `{:.2}` gives the same digits (its exact mode) for ~800 instructions
/// a number, this for a few dozen.
fn hundredths(a: f64) -> Option<u64> {
    if a >= 9_007_199_254_740_992.0 {
        return None;
    }
    let bits = a.to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as i64;
    let fraction = bits & ((1 << 52) - 1);
    // a = m * 2^-s, m < 2^53 (s >= 0 below 2^53: the exponent is at most 52)
    let (m, s) = if exponent == 0 { (fraction, 1074) } else { (fraction | (1 << 52), 1075 - exponent) };
    let n = m * 100; // < 2^60
    if s >= 61 {
        return Some(0); // n < 2^60 <= half of 2^s: below a half
    }
    let (q, r, half) = (n >> s, n & ((1u64 << s) - 1), if s == 0 { 0 } else { 1u64 << (s - 1) });
    Some(if s > 0 && (r > half || (r == half && q & 1 == 1)) { q + 1 } else { q })
}

/// `n`'s decimal digits appended to `out`.
fn push_digits(out: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    // Only ASCII digits were written.
    out.push_str(std::str::from_utf8(&digits[at..]).unwrap_or_default());
}

/// `template` % `values` with each "%.2f" written by push_num and each "%%" as "%"; None
/// where the template holds another conversion or the values are too few or too many.
pub(crate) fn fill(template: &str, values: &[f64]) -> Option<String> {
    let mut out = String::with_capacity(template.len() + 4 * values.len());
    let mut next = values.iter();
    let mut rest = template;
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        if rest.starts_with("%.2f") {
            push_num(&mut out, *next.next()?);
            rest = &rest[4..];
        } else if rest.starts_with("%%") {
            out.push('%');
            rest = &rest[2..];
        } else {
            return None;
        }
    }
    out.push_str(rest);
    if next.next().is_some() { None } else { Some(out) }
}

/// svg.nums(template, values) for finite real values.
#[pyfunction]
pub fn two_decimals(template: &str, values: &Bound<'_, PyAny>) -> PyResult<String> {
    let mut floats = Vec::new();
    for v in values.try_iter()? {
        let v: f64 = v?.extract()?;
        if !v.is_finite() {
            return Err(PyTypeError::new_err("not a finite coordinate: the Python reference answers"));
        }
        floats.push(v);
    }
    fill(template, &floats)
        .ok_or_else(|| PyTypeError::new_err("not a template of %.2f numbers: the Python reference answers"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(v: f64) -> String {
        let mut s = String::new();
        push_num(&mut s, v);
        s
    }

    #[test]
    fn a_number_keeps_two_decimals_at_most_and_none_that_end_it_in_zero() {
        assert_eq!(one(12.0), "12");
        assert_eq!(one(12.5), "12.5");
        assert_eq!(one(12.25), "12.25");
        assert_eq!(one(-0.0), "0");
        assert_eq!(one(-0.001), "-0");
        assert_eq!(one(0.125), "0.12"); // an exact tie goes to the even digit
        assert_eq!(one(0.375), "0.38");
        assert_eq!(one(2.675), "2.67"); // 2.67499999... in binary
        assert_eq!(one(99.995), "100");
        assert_eq!(one(0.005), "0.01"); // 0.005000000000000000104 in binary
        assert_eq!(one(5e-324), "0");
        assert_eq!(one(9007199254740991.0), "9007199254740991");
        assert_eq!(one(-9007199254740992.0), "-9007199254740992"); // core's formatting
        assert_eq!(one(1e300), format!("{:.0}", 1e300));
    }

    #[test]
    fn a_template_takes_one_value_per_conversion_and_refuses_others() {
        assert_eq!(fill("M%.2f %.2fh0 %%", &[1.5, 2.0]).as_deref(), Some("M1.5 2h0 %"));
        assert_eq!(fill("M%.2f %.2f", &[1.0]), None);
        assert_eq!(fill("M%.2f", &[1.0, 2.0]), None);
        assert_eq!(fill("M%d", &[1.0]), None);
        assert_eq!(fill("", &[]).as_deref(), Some(""));
    }
}
