//! report/analysis.py `_segment_parts`, compiled: each request record's total_ms cut into
//! the page's stacked segments (authentication, the put/get call, the queue, processing's
//! name-server part and the rest, the wait for the next poll, the transfer, the closing
//! call, and what is left between them), summed per op for `breakdowns`: ~8 k
//! instructions of Python a request (issue 30). The Python functions stay the reference
//! (tests/report/test_analysis.py pins the two equal).

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::exact_ints::exact;

/// A record's int value of `key`, None where it has none (absent or None); within ±2^53
/// (exact_ints.rs), else OverflowError.
pub(crate) fn value(record: &Bound<'_, PyDict>, key: &Bound<'_, PyString>) -> PyResult<Option<i64>> {
    match record.get_item(key)? {
        Some(v) if !v.is_none() => Ok(Some(exact(v.extract::<i64>()?)?)),
        _ => Ok(None),
    }
}

/// `_segment_parts`' nine values from the record's durations (None: no total_ms): each
/// step clamped to what the steps before it leave of the total, never below 0.
pub(crate) fn parts(total: i64, auth: i64, request: i64, queue: i64, proc: i64, ns: Option<i64>,
                    ready: Option<i64>, transfer: i64, done: i64) -> [i64; 9] {
    let queue = if queue < 0 { 0 } else { queue };
    let proc_ns = match ns {
        Some(ns) if ns > 0 => if ns < proc { ns } else { proc },
        _ => 0,
    };
    let after = match ready { Some(ready) => ready - queue - proc, None => 0 };
    let after = if after < 0 { 0 } else { after };
    let wanted = [auth, request, queue, proc_ns, proc - proc_ns, after, transfer, done];
    let mut out = [0i64; 9];
    let mut left = total;
    for (k, v) in wanted.into_iter().enumerate() {
        let part = if v < left { v } else { left };
        let part = if part < 0 { 0 } else { part };
        out[k] = part;
        left -= part;
    }
    out[8] = if left > 0 { left } else { 0 };
    out
}

/// One op's sums: its requests (those with a total_ms), their total_ms, each of the
/// nine parts, poll_ms and polls. i128: the sums of ints within ±2^53 cannot wrap.
type Sums = (usize, i128, [i128; 9], i128, i128);

/// report/analysis.py `breakdowns`' sums, per op (a record's op, "?" where it is None or
/// empty): of the requests with a total_ms, how many, their total_ms summed, each of
/// `_segment_parts`' nine values summed, and poll_ms and polls summed where present.
/// The Python grouped ~3 k requests' parts as tuples and summed them per op (~19 M
/// instructions of the report on the thesis log, issue 30); python_segment_sums stays
/// the reference. A value that is not an int within ±2^53 is refused (TypeError,
/// OverflowError) for it to answer.
#[pyfunction]
pub fn segment_sums<'py>(py: Python<'py>, records: Vec<Bound<'py, PyDict>>)
                         -> PyResult<Bound<'py, PyDict>> {
    let ops = PyDict::new(py); // op -> its index in `sums`
    let mut sums: Vec<Sums> = Vec::new();
    let unnamed = intern!(py, "?").clone().into_any();
    for r in &records {
        let Some(total) = value(r, intern!(py, "total_ms"))? else {
            continue;
        };
        let or0 = |key: &Bound<'_, PyString>| value(r, key).map(|v| v.unwrap_or(0));
        let p = parts(total, or0(intern!(py, "auth_ms"))?, or0(intern!(py, "request_ms"))?,
                      or0(intern!(py, "queue_ms"))?, or0(intern!(py, "proc_ms"))?,
                      value(r, intern!(py, "ns_ms"))?, value(r, intern!(py, "ready_wait_ms"))?,
                      or0(intern!(py, "transfer_ms"))?, or0(intern!(py, "done_ms"))?);
        let op = r.as_any().get_item(intern!(py, "op"))?; // r["op"]: a KeyError as in Python
        let op = if op.is_truthy()? { op } else { unnamed.clone() };
        let at = match ops.get_item(&op)? {
            Some(at) => at.extract::<usize>()?,
            None => {
                ops.set_item(&op, sums.len())?;
                sums.push((0, 0, [0; 9], 0, 0));
                sums.len() - 1
            }
        };
        let of_op = &mut sums[at];
        of_op.0 += 1;
        of_op.1 += i128::from(total);
        for (sum, part) in of_op.2.iter_mut().zip(p) {
            *sum += i128::from(part);
        }
        of_op.3 += i128::from(or0(intern!(py, "poll_ms"))?);
        of_op.4 += i128::from(or0(intern!(py, "polls"))?);
    }
    let out = PyDict::new(py);
    for (op, at) in ops.iter() {
        out.set_item(op, sums[at.extract::<usize>()?])?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::parts;

    #[test]
    fn the_parts_add_up_to_the_total_and_each_is_clamped_to_what_is_left() {
        // auth 10, request 5, queue 30, proc 100 of which ns 40, ready 200: after 70
        assert_eq!(parts(1000, 10, 5, 30, 100, Some(40), Some(200), 300, 20),
                   [10, 5, 30, 40, 60, 70, 300, 20, 465]);
        // a total shorter than its steps: the later ones get what is left, then nothing
        assert_eq!(parts(50, 10, 5, 30, 100, None, None, 0, 0), [10, 5, 30, 0, 5, 0, 0, 0, 0]);
        // a negative queue counts as none; a name-server time over proc is cut to it
        assert_eq!(parts(500, 0, 0, -5, 100, Some(400), None, 0, 0), [0, 0, 0, 100, 0, 0, 0, 0, 400]);
    }
}
