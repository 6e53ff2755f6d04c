//! The ground truth's records of a compiled model run (model.rs), by simulator/truth.py's
//! rules, so that predict.py receives the records and rebuilds no Python truth (that
//! rebuild was two thirds of a model run, issue 30). truth.py stays the reference: the
//! Python model runs it, and tests/simulator/test_native_model.py pins the two runs'
//! records equal. Only what the compiled model makes is handled: every DPNS line is in
//! the log (no gap: a call is seen as it ran) and every name-server call comes from the
//! head node (no other clients), which native_model.py's `unsupported` guarantees.
//! Plain values only: model.rs turns them into the records' dicts.

use crate::hashing::FxMap;

/// truth.py's defaults (docs/record-rules.md, "Timeout"; parsers/linking.py).
const TIMEOUT_MS: i64 = 3_600_000;
const ALLOWANCE_MS: i64 = 2_000;
const LINK_SLACK_MS: i64 = 5;
const HELD_RUN_MS: i64 = 10_000;

/// truth.py `span`: a duration between two printed instants, never below 0.
pub(crate) fn span(later: Option<i64>, earlier: Option<i64>) -> Option<i64> {
    match (later, earlier) {
        (Some(l), Some(e)) => Some(if l > e { l - e } else { 0 }),
        _ => None,
    }
}

/// A processing run as the linker needs it: its request, first line, `returns`, true start.
pub(crate) struct RunSpan {
    pub request: usize,
    pub start: i64,
    pub end: Option<i64>,
    pub true_start: i64,
}

impl RunSpan {
    fn holds(&self, started: i64, ended: i64) -> bool {
        self.end.is_some_and(|end| started >= self.start - LINK_SLACK_MS && ended <= end + LINK_SLACK_MS)
    }
    fn held_together(&self, call_true_start: i64) -> bool {
        (call_true_start - self.true_start).abs() <= HELD_RUN_MS
    }
}

/// A name-server call as the linker needs it.
pub(crate) struct NsCall<'a> {
    pub started: i64,
    pub ended: Option<i64>,
    pub path: &'a str,
    pub client: &'a str,
    pub run: Option<usize>,
    pub true_start: i64,
}

/// What the linking gives: per request, its linked calls and their ms; per call (in the
/// order given), the request it is linked to.
pub(crate) struct Links {
    pub ns_calls: Vec<i64>,
    pub ns_ms: Vec<i64>,
    pub request_of: Vec<Option<usize>>,
}

/// truth.py `Truth._link` on a run whose DPNS log has no gap (each call seen as it ran).
/// `paths[q]`: request q's paths; `reader_host`: the host the reader is told.
pub(crate) fn link(requests: usize, paths: &[&[String]], runs: &[RunSpan], calls: &[NsCall],
                   reader_host: &str) -> Links {
    let mut by_path: FxMap<&str, Vec<usize>> = FxMap::default();   // looked up, never walked
    for (k, run) in runs.iter().enumerate() {
        if run.end.is_none() {
            continue;
        }
        let mine = paths[run.request];
        for (i, path) in mine.iter().enumerate() {
            if !mine[..i].contains(path) {   // a run's paths are a set in truth.py
                by_path.entry(path.as_str()).or_default().push(k);
            }
        }
    }
    let mut fits: Vec<(usize, usize)> = Vec::new();
    for (c, call) in calls.iter().enumerate() {
        let Some(ended) = call.ended else { continue };
        let candidates = by_path.get(call.path).map(Vec::as_slice).unwrap_or(&[]);
        let fits_call = |r: &RunSpan| r.holds(call.started, ended) && r.held_together(call.true_start);
        match call.run {
            None => {
                // Another client's call: inside one request's runs by chance?
                let mut inside = candidates.iter().filter(|&&r| fits_call(&runs[r]));
                if let Some(&first) = inside.next() {
                    let request = runs[first].request;
                    if inside.all(|&r| runs[r].request == request) {
                        fits.push((c, first));
                    }
                }
            }
            Some(k) => {
                let run = &runs[k];
                if !run.holds(call.started, ended) {
                    continue;
                }
                let ambiguous = candidates.iter().any(|&r| {
                    r != k && runs[r].request != run.request && fits_call(&runs[r])
                });
                if !ambiguous {
                    fits.push((c, k));
                }
            }
        }
    }
    // The head node as the name server names it: the reader's host, else the client of
    // the first call that links (the earliest `returns`, then open; the first such).
    let mut first: Option<usize> = None;
    for &(c, _) in &fits {
        let key = |c: usize| (calls[c].ended, calls[c].started);
        if first.is_none_or(|f| key(c) < key(f)) {
            first = Some(c);
        }
    }
    let reader = reader_host.to_lowercase();
    let learned = first.map(|c| calls[c].client.to_lowercase());
    let mut links = Links {
        ns_calls: vec![0; requests],
        ns_ms: vec![0; requests],
        request_of: vec![None; calls.len()],
    };
    for (c, k) in fits {
        let client = calls[c].client.to_lowercase();
        if client != reader && Some(&client) != learned.as_ref() {
            continue;
        }
        let request = runs[k].request;
        links.request_of[c] = Some(request);
        links.ns_calls[request] += 1;
        links.ns_ms[request] += calls[c].ended.unwrap_or(0) - calls[c].started;
    }
    links
}

/// The instants of a request that its record follows from (truth.py RequestTruth).
pub(crate) struct RequestSpan {
    pub is_get: bool,
    pub accepted: Option<i64>,
    pub started: i64,
    pub put_ret: Option<i64>,
    pub first_run: Option<i64>,
    pub first_success: Option<i64>,
    pub first_done_open: Option<i64>,
    pub done_open: Option<i64>,
    pub done_ret: Option<i64>,
    pub status: Option<&'static str>,
    pub ended: Option<i64>,
    pub last_line: i64,
    pub closed: bool,
}

/// What truth.py's `RequestTruth.record` computes: status, end, the phases' ms.
#[derive(Debug, PartialEq)]
pub(crate) struct RequestEnd {
    pub status: &'static str,
    pub ended: i64,
    pub end_reason: &'static str,
    pub auth_ms: Option<i64>,
    pub request_ms: Option<i64>,
    pub queue_ms: Option<i64>,
    pub ready_wait_ms: Option<i64>,
    pub transfer_ms: Option<i64>,
    pub done_ms: Option<i64>,
    pub total_ms: Option<i64>,
}

/// The instant before which an idle request was emitted by the timeout, from the latest
/// instant printed (truth.py `request_records`).
pub(crate) fn idle_before(latest: Option<i64>) -> Option<i64> {
    latest.map(|t| t - ALLOWANCE_MS - TIMEOUT_MS)
}

impl RequestSpan {
    pub(crate) fn end(&self, idle_before: Option<i64>) -> RequestEnd {
        let (status, ended) = match (self.closed, self.status, self.ended) {
            (true, Some(status), Some(ended)) => (status, ended),
            _ => match self.first_success {
                Some(t) if self.is_get => ("success", t),            // rule 5
                _ => ("incomplete", self.last_line),                   // rule 6
            },
        };
        let end_reason = if self.closed {
            "line"
        } else if idle_before.is_some_and(|t| self.last_line < t) {
            "timeout"
        } else {
            "input_end"
        };
        let origin = self.accepted.unwrap_or(self.started);
        RequestEnd {
            status,
            ended,
            end_reason,
            auth_ms: span(Some(self.started), self.accepted),
            request_ms: span(self.put_ret, Some(self.started)),
            queue_ms: span(self.first_run, self.put_ret),
            ready_wait_ms: span(self.first_success, self.put_ret),
            transfer_ms: if self.is_get { None } else { span(self.first_done_open, self.first_success) },
            done_ms: span(self.done_ret, self.done_open),
            total_ms: span(Some(ended), Some(origin)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(request: usize, start: i64, end: Option<i64>) -> RunSpan {
        RunSpan { request, start, end, true_start: start }
    }

    fn call<'a>(path: &'a str, started: i64, ended: i64, run: Option<usize>) -> NsCall<'a> {
        NsCall { started, ended: Some(ended), path, client: "head", run, true_start: started }
    }

    #[test]
    fn a_call_inside_its_run_links_and_counts_its_ms() {
        let paths = [vec!["/a".to_string()]];
        let paths: Vec<&[String]> = paths.iter().map(Vec::as_slice).collect();
        let links = link(1, &paths, &[run(0, 100, Some(200))], &[call("/a", 110, 150, Some(0))], "HEAD");
        assert_eq!((links.ns_calls, links.ns_ms, links.request_of), (vec![1], vec![40], vec![Some(0)]));
    }

    #[test]
    fn a_call_outside_its_run_or_shared_with_another_requests_run_stays_unlinked() {
        let paths = [vec!["/a".to_string()], vec!["/a".to_string()]];
        let paths: Vec<&[String]> = paths.iter().map(Vec::as_slice).collect();
        let runs = [run(0, 100, Some(200)), run(1, 90, Some(300))];
        let calls = [call("/a", 110, 150, Some(0)), call("/a", 250, 260, Some(0))];
        let links = link(2, &paths, &runs, &calls, "head");
        assert_eq!(links.request_of, vec![None, None]);
        assert_eq!(links.ns_calls, vec![0, 0]);
    }

    #[test]
    fn a_call_of_another_host_than_the_learned_head_is_not_linked() {
        let paths = [vec!["/a".to_string()]];
        let paths: Vec<&[String]> = paths.iter().map(Vec::as_slice).collect();
        let runs = [run(0, 100, Some(200))];
        let mut other = call("/a", 105, 107, Some(0));
        other.client = "disk01";
        let calls = [call("/a", 110, 120, Some(0)), other];
        // The first call to link (earliest returns) is the disk node's: it names the head.
        let links = link(1, &paths, &runs, &calls, "reader");
        assert_eq!(links.request_of, vec![None, Some(0)]);
    }

    #[test]
    fn a_request_ends_by_its_line_by_first_success_or_as_incomplete() {
        let base = RequestSpan {
            is_get: true, accepted: Some(5), started: 10, put_ret: Some(20), first_run: None,
            first_success: Some(50), first_done_open: None, done_open: None, done_ret: None,
            status: None, ended: None, last_line: 60, closed: false,
        };
        let end = base.end(None);
        assert_eq!((end.status, end.ended, end.end_reason, end.total_ms), ("success", 50, "input_end", Some(45)));
        let put = RequestSpan { is_get: false, ..base };
        let end = put.end(Some(61));
        assert_eq!((end.status, end.ended, end.end_reason), ("incomplete", 60, "timeout"));
        let closed = RequestSpan { status: Some("failed"), ended: Some(55), closed: true, ..put };
        let end = closed.end(Some(61));
        assert_eq!((end.status, end.ended, end.end_reason, end.auth_ms), ("failed", 55, "line", Some(5)));
    }
}
