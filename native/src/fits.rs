//! simulator/fits.py's `closed_loop` per client, compiled: how many of a client's requests
//! are in flight at each of its arrivals (their dispersion), how many streams it keeps
//! going, and the think times between one request's end and the next's start. calibrate
//! runs it on every request of the log (issue 30: ~40 M instructions of Python on the
//! thesis log's 3 k requests). The medians over the clients stay in Python, and the Python
//! per-client pass stays the reference (tests/simulator/test_calibrate.py pins the two
//! equal). The arithmetic is Python's in its order: sums left to right, ints divided as
//! floats, ** 2 by libm's pow, round() to the nearest, ties to even.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hint::black_box;

use pyo3::exceptions::PyKeyError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::hashing::FxMap;

/// fits.NET_MS, the model's one-way network delay.
const NET_MS: i64 = 1;
/// A request starting this soon (ms) after one of its client's ended took over its stream.
const THINK_MS: i64 = 100;

/// One client's (dispersion, streams) from its (arrival, end) spans, and its think times
/// appended to `thinks`, as closed_loop's loop body makes them.
pub(crate) fn client_loop(spans: &mut [(i64, i64)], thinks: &mut Vec<i64>) -> (f64, i64) {
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
        let busy: i64 = spans.iter().chain(gaps.iter())
            .map(|&(s, e)| (if e < hi { e } else { hi }) - (if s > lo { s } else { lo }))
            .filter(|&d| d > 0)
            .sum();
        (busy as f64 / (hi - lo) as f64).round_ties_even() as i64
    } else {
        mean.round_ties_even() as i64
    };
    (dispersion, streams.max(1))
}

fn int(record: &Bound<'_, PyDict>, key: &Bound<'_, PyString>) -> PyResult<Option<i64>> {
    match record.get_item(key)? {
        None => Err(PyKeyError::new_err(key.clone().unbind())),
        Some(v) if v.is_none() => Ok(None),
        Some(v) => Ok(Some(v.extract::<i64>()?)),
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
        let (d, s) = client_loop(spans, &mut thinks);
        dispersions.push(d);
        streams.push(s);
    }
    Ok((dispersions, streams, thinks))
}

#[cfg(test)]
mod tests {
    use super::client_loop;

    #[test]
    fn a_client_keeping_two_requests_going_has_two_streams_and_its_think_times() {
        // two streams of back-to-back requests, each next one 5 ms after the last ended
        let mut spans: Vec<(i64, i64)> = (0..20).flat_map(|k| [(k * 105, k * 105 + 100),
                                                              (k * 105 + 50, k * 105 + 150)]).collect();
        let mut thinks = Vec::new();
        let (dispersion, streams) = client_loop(&mut spans, &mut thinks);
        assert_eq!(streams, 2);
        assert!(dispersion < 0.25, "{dispersion}");
        assert!(thinks.iter().all(|&t| t == 3), "{thinks:?}");
    }
}
