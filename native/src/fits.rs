//! simulator/fits.py's `closed_loop` per client and `fit_backoff`, compiled: how many of a
//! client's requests are in flight at each of its arrivals (their dispersion), how many
//! streams it keeps going, and the think times between one request's end and the next's
//! start; and the clients' poll schedule that best explains each request's polls and
//! ready_wait (784 schedules scored). calibrate runs them on every request of the log
//! (issue 30: ~40 M and ~31 M instructions of Python on the thesis log's 3 k requests).
//! The medians over the clients stay in Python, and the Python functions stay the
//! references (tests/simulator/test_calibrate.py and test_fit_backoff.py pin the two
//! equal). The arithmetic is Python's in its order: sums left to right, ints divided or
//! added as floats, ** 2 by libm's pow, round() to the nearest, ties to even.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hint::black_box;

use pyo3::exceptions::PyKeyError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::exact_ints::{beyond, exact, within};
use crate::hashing::FxMap;

/// fits.NET_MS, the model's one-way network delay (model_summary.rs takes it off each
/// linked name-server call).
pub(crate) const NET_MS: i64 = 1;
/// A request starting this soon (ms) after one of its client's ended took over its stream.
const THINK_MS: i64 = 100;

/// One client's (dispersion, streams) from its (arrival, end) spans, and its think times
/// appended to `thinks`, as closed_loop's loop body makes them.
/// Its spans' times within ±2^53; Err(v) where a value it makes is not (exact_ints.rs).
pub(crate) fn client_loop(spans: &mut [(i64, i64)], thinks: &mut Vec<i64>) -> Result<(f64, i64), i64> {
    spans.sort_unstable();
    let n = spans.len();
    // estimators.in_flight_at_arrivals: the spans open at each arrival, itself included
    let mut ends_open: BinaryHeap<Reverse<i64>> = BinaryHeap::new();
    let mut counts = Vec::with_capacity(n);
    for &(start, end) in spans.iter() {
        while ends_open.peek().is_some_and(|&Reverse(e)| e <= start) {
            ends_open.pop();
        }
        ends_open.push(Reverse(end));
        counts.push(ends_open.len() as i64);
    }
    let a = n / 10;
    let b = (a + 1).max(n * 9 / 10).min(n);
    let middle = &counts[a..b];
    let len = middle.len() as f64;
    let mean = middle.iter().sum::<i64>() as f64 / len;
    // libm's pow of the magnitude, as Python's float ** calls it (not folded to a product)
    let two = black_box(2.0f64);
    let squares = middle.iter().fold(0.0f64, |s, &c| s + (c as f64 - mean).abs().powf(two));
    let dispersion = squares / len / mean;
    let mut ends: Vec<i64> = spans.iter().map(|&(_, e)| e).collect();
    ends.sort_unstable();
    let mut used = vec![false; n];
    let mut gaps = Vec::new();
    for &(at, _) in spans.iter() {
        let mut i = ends.partition_point(|&e| e <= at) as isize - 1;
        while i >= 0 && used[i as usize] {
            i -= 1;
        }
        if i >= 0 && at - ends[i as usize] <= THINK_MS {
            let end = ends[i as usize];
            used[i as usize] = true;
            gaps.push((end, at));
            let think = at - end - 2 * NET_MS;
            thinks.push(if think > 0 { think } else { 0 });
        }
    }
    let (lo, hi) = (spans[n / 10].0, spans[(n - 1).min(n * 9 / 10)].0);
    let streams = if hi > lo {
        // each clipped span within 2^54 and the running sum kept within 2^53: no wrap, and
        // both ints of the division are floats exactly, as Python's int division rounds
        let mut busy = 0i64;
        for d in spans.iter().chain(gaps.iter())
            .map(|&(s, e)| (if e < hi { e } else { hi }) - (if s > lo { s } else { lo }))
            .filter(|&d| d > 0) {
            busy += d;
            if !within(busy) {
                return Err(busy);
            }
        }
        if !within(hi - lo) {
            return Err(hi - lo);
        }
        (busy as f64 / (hi - lo) as f64).round_ties_even() as i64
    } else {
        mean.round_ties_even() as i64
    };
    Ok((dispersion, streams.max(1)))
}

fn int(record: &Bound<'_, PyDict>, key: &Bound<'_, PyString>) -> PyResult<Option<i64>> {
    match record.get_item(key)? {
        None => Err(PyKeyError::new_err(key.clone().unbind())),
        Some(v) if v.is_none() => Ok(None),
        Some(v) => Ok(Some(exact(v.extract::<i64>()?)?)),
    }
}

/// closed_loop's per-client values for request records: (each client's dispersion, each
/// client's streams, in the order the clients first appear, and the think times).
#[pyfunction]
pub fn closed_loop_clients(py: Python<'_>, reqs: Vec<Bound<'_, PyDict>>)
                           -> PyResult<(Vec<f64>, Vec<i64>, Vec<i64>)> {
    let mut index: FxMap<Option<String>, usize> = FxMap::default();
    let mut by_client: Vec<Vec<(i64, i64)>> = Vec::new();
    for r in &reqs {
        let accepted = int(r, intern!(py, "accepted"))?;
        let at = match accepted { Some(a) => Some(a), None => int(r, intern!(py, "started"))? };
        let Some(end) = int(r, intern!(py, "ended"))? else { continue };
        let at = at.ok_or_else(|| pyo3::exceptions::PyTypeError::new_err("a request with no start"))?;
        let client = match r.get_item(intern!(py, "client"))? {
            None => return Err(PyKeyError::new_err("client")),
            Some(c) if c.is_none() => None,
            Some(c) => Some(c.extract::<String>()?),
        };
        let k = *index.entry(client).or_insert_with(|| {
            by_client.push(Vec::new());
            by_client.len() - 1
        });
        by_client[k].push((at, if end > at { end } else { at }));
    }
    let (mut dispersions, mut streams, mut thinks) = (Vec::new(), Vec::new(), Vec::new());
    for spans in by_client.iter_mut() {
        let (d, s) = client_loop(spans, &mut thinks).map_err(beyond)?;
        dispersions.push(d);
        streams.push(s);
    }
    Ok((dispersions, streams, thinks))
}

/// fit_backoff's candidate schedules, in its order (ties go to the first scored).
const FIRSTS: [i64; 16] = [25, 50, 75, 100, 125, 150, 200, 250, 300, 400, 500, 750, 1000, 1500, 2000, 3000];
const FACTORS: [f64; 7] = [1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0];
const CAPS: [i64; 7] = [60000, 16000, 8000, 4000, 2000, 1000, 500];

/// The requests answered on one poll: their sorted waits and the waits' prefix sums.
struct Answered {
    polls: usize,
    waits: Vec<i64>,
    prefix: Vec<i64>,
}

impl Answered {
    /// The summed |x - wait| over the waits (fits._AbsoluteErrors.total).
    fn total(&self, x: f64) -> f64 {
        let below = self.waits.partition_point(|&w| (w as f64) <= x);
        x * (2 * below as i64 - self.waits.len() as i64) as f64 + *self.prefix.last().unwrap() as f64
            - (2 * self.prefix[below]) as f64
    }
}

/// fit_backoff(samples, per_call_ms): (first, factor, cap, median absolute error, capped),
/// or None for samples it does not take (none, a poll count below 1, waits or their sums,
/// doubled, beyond ±2^53: exact_ints.rs).
pub(crate) fn backoff(samples: &[(i64, i64)], per_call: f64) -> Option<(i64, f64, i64, f64, bool)> {
    let top = samples.iter().map(|&(n, _)| n).max()?;
    if samples.iter().any(|&(n, wait)| n < 1 || !within(wait)) {
        return None;
    }
    let top = top as usize;
    let mut groups: Vec<Answered> = Vec::new();   // in the order their poll counts appear
    for &(n, wait) in samples {
        match groups.iter_mut().find(|g| g.polls == n as usize) {
            Some(g) => g.waits.push(wait),
            None => groups.push(Answered { polls: n as usize, waits: vec![wait], prefix: Vec::new() }),
        }
    }
    for g in groups.iter_mut() {
        g.waits.sort_unstable();
        g.prefix = Vec::with_capacity(g.waits.len() + 1);
        let mut sum = 0i64;
        g.prefix.push(sum);
        for &w in &g.waits {
            sum += w;   // within 2^53 and 2^53 more: no wrap
            if !within(2 * sum) {   // total() takes twice a prefix as a float
                return None;
            }
            g.prefix.push(sum);
        }
    }
    let mut best: Option<(f64, i64, f64, i64, Vec<f64>, bool)> = None;
    let mut sums: Vec<f64> = Vec::with_capacity(top + 1);
    for &first in FIRSTS.iter() {
        for &factor in FACTORS.iter() {
            for &cap in CAPS.iter() {
                if cap < first {
                    continue;
                }
                sums.clear();
                sums.push(0.0);
                let (mut gap, mut total, mut capped) = (first, 0.0f64, false);
                for j in 0..top {
                    total += gap as f64 + per_call;
                    sums.push(total);
                    let grown = (gap as f64 * factor).round_ties_even() as i64;
                    capped = capped || (grown > cap && j + 2 <= top);   // gap j + 1 is used
                    gap = if grown < cap { grown } else { cap };
                }
                let score = groups.iter().fold(0.0f64, |s, g| s + g.total(sums[g.polls]))
                    / samples.len() as f64;
                if best.as_ref().is_none_or(|b| score < b.0) {
                    best = Some((score, first, factor, cap, sums.clone(), capped));
                }
            }
        }
    }
    let (_, first, factor, cap, sums, capped) = best?;
    let mut errors: Vec<f64> = samples.iter().map(|&(n, w)| (sums[n as usize] - w as f64).abs()).collect();
    errors.sort_unstable_by(|a, b| a.total_cmp(b));
    Some((first, factor, cap, errors[errors.len() / 2], capped))
}

/// `fit_backoff(samples, per_call_ms)` for (polls, ready_wait) ints; None where the Python
/// function is to answer (no sample, a poll count below 1, ints past ±2^53).
#[pyfunction]
pub fn fit_backoff(samples: Vec<(i64, i64)>, per_call_ms: f64) -> Option<(i64, f64, i64, f64, bool)> {
    backoff(&samples, per_call_ms)
}

#[cfg(test)]
mod tests {
    use super::{backoff, client_loop};

    #[test]
    fn requests_polled_on_the_models_default_schedule_give_it_back() {
        // 125 ms, x2, capped at 4 s, with 20 ms a call: the k-th poll answers after
        // the sum of the first k gaps and calls
        let (mut waits, mut gap, mut t) = (Vec::new(), 125i64, 0i64);
        for k in 1..=10 {
            t += gap + 20;
            waits.push((k, t));
            gap = (gap * 2).min(4000);
        }
        let (first, factor, cap, mae, capped) = backoff(&waits, 20.0).unwrap();
        assert_eq!((first, factor, cap, mae, capped), (125, 2.0, 4000, 0.0, true));
        assert_eq!(backoff(&[], 20.0), None);
    }

    #[test]
    fn a_client_keeping_two_requests_going_has_two_streams_and_its_think_times() {
        // two streams of back-to-back requests, each next one 5 ms after the last ended
        let mut spans: Vec<(i64, i64)> = (0..20).flat_map(|k| [(k * 105, k * 105 + 100),
                                                              (k * 105 + 50, k * 105 + 150)]).collect();
        let mut thinks = Vec::new();
        let (dispersion, streams) = client_loop(&mut spans, &mut thinks).unwrap();
        assert_eq!(streams, 2);
        assert!(dispersion < 0.25, "{dispersion}");
        assert!(thinks.iter().all(|&t| t == 3), "{thinks:?}");
    }
}
