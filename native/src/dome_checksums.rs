//! The checksum waits, `parsers/dome_checksums.ChecksumWaits` rule for rule: a stage over
//! the call records the DOME engine emits, so that on the compiled engine its records come
//! out of the extension already made, each call followed by the waits it ends, with no
//! Python per record. No Python here: dome_engine.rs runs it after the reassembly,
//! dome_snapshot.rs is its state codec (ChecksumWaits.snapshot()'s shape, so that either
//! engine restores the other's).
//!
//! The Python module's docstring says the rules (docs/dome.md, "Checksum waits"): a run of
//! one (head, caller, remote client)'s `dome_chksum` calls answered 202, ended by an answer
//! other than 202 (unless two pollers overlap), or by the key's silence for the timeout.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::dome_clocks::{advance_clocks, Clocks};
use crate::dome_records::{CallRecord, ChecksumRecord, Record, Text};
use crate::hashing::FxMap;
use crate::lru::Lru;

const COMMAND: &str = "dome_chksum";
const QUEUED: i64 = 202;
// Python's CADENCE_SLACK_MS: a whole-second stamp moves an interval by up to a second.
const CADENCE_SLACK_MS: i64 = 1_000;
pub const DONE: &str = "done";
pub const FAILED: &str = "failed";
pub const TIMEOUT: &str = "timeout";
pub const INPUT_END: &str = "input_end";
pub const EVICTED: &str = "evicted";

crate::dome_stats::counters!(ChecksumStats;
    polls, cut_polls, unattributed_polls, answers_without_wait, waits, overlaps, timeouts, evictions,
);

/// (head, caller, remote client): at level 1 the LFN is only in the request body. Its texts
/// are the call records' own, shared: a run's key is copied into its deadlines and order.
pub type Key = (Text, Text, Option<Text>);

/// An open run: OpenRun's fields (its `seq` orders runs of one start and the deadlines).
#[derive(Clone, Debug, PartialEq)]
pub struct Run {
    pub seq: i64,
    pub head: Text,
    pub caller: Text,
    pub client: Option<Text>,
    pub start: i64,
    pub last_start: i64,
    pub last_end: i64,
    pub polls: i64,
    pub endings: i64,
    pub code: Option<i64>,
    pub ended: bool,
    pub overlap: bool,
    pub whole: bool,
}

impl Run {
    fn key(&self) -> Key {
        (self.head.clone(), self.caller.clone(), self.client.clone())
    }
}

pub struct ChecksumWaits {
    pub timeout_ms: i64,
    pub poll_interval_ms: i64,
    pub max_open: usize,
    pub allowance_ms: i64,
    pub stats: ChecksumStats,
    pub clocks: Clocks,
    pub seq: i64,
    /// key -> (its run, its handle in `order`)
    open: FxMap<Key, (Run, u32)>,
    /// the open keys, least recently active first (Python's OrderedDict order)
    order: Lru<Key>,
    /// host -> (deadline, seq, key) due first; stale ones skipped (Python's heaps)
    deadlines: FxMap<Text, BinaryHeap<Reverse<(i64, i64, Key)>>>,
    /// sweep's deadlines due, kept empty between sweeps (no allocation a sweep)
    due: Vec<(i64, i64, Key)>,
}

impl ChecksumWaits {
    /// The settings as ChecksumWaits takes them (the Python class checks them).
    pub fn new(timeout_ms: i64, poll_interval_ms: i64, max_open: usize, allowance_ms: i64) -> Self {
        ChecksumWaits {
            timeout_ms, poll_interval_ms, max_open: max_open.max(1), allowance_ms,
            stats: ChecksumStats::default(), clocks: Clocks::default(), seq: 0,
            open: FxMap::default(), order: Lru::default(), deadlines: FxMap::default(), due: Vec::new(),
        }
    }

    /// `records` (the reassembler's), each followed by the waits it ends: with_checksums.
    /// Most chunks end no wait: their records are handed back where they are, where each
    /// was moved into a new list (a record is ~200 bytes, a copy call each).
    pub fn pair(&mut self, records: Vec<Record>) -> Vec<Record> {
        // the waits ended, each with the place of the call that ended it
        let mut after: Vec<(usize, Record)> = Vec::new();
        let mut ended = Vec::new();
        for (at, record) in records.iter().enumerate() {
            if let Record::Call(call) = record {
                self.call(call, &mut ended);
                after.extend(ended.drain(..).map(|r| (at, r)));
            }
        }
        if after.is_empty() {
            return records;
        }
        let mut out = Vec::with_capacity(records.len() + after.len());
        let mut after = after.into_iter().peekable();
        for (at, record) in records.into_iter().enumerate() {
            out.push(record);
            while let Some((_, wait)) = after.next_if(|(by, _)| *by == at) {
                out.push(wait);
            }
        }
        out
    }

    /// ChecksumWaits._call: most calls are no poll and end no run; their host's clock moves
    /// and the host is swept only when one of its deadlines is due.
    pub fn call(&mut self, record: &CallRecord, out: &mut Vec<Record>) {
        let host = &*record.host;
        let seen = record.end.unwrap_or(record.start);
        let clock = match self.clocks.get(host) {
            Some(c) if seen <= c => c,
            _ => {
                self.clocks.set_ref(host, seen);
                seen
            }
        };
        if record.command.as_deref() == Some(COMMAND) {
            self.poll(record, out);
            self.sweep(host, out);
        } else if self.due(host, clock - self.allowance_ms) {
            self.sweep(host, out);
        }
    }

    /// Every head's event time is at least now_ms: runs silent past the timeout end.
    pub fn advance(&mut self, now_ms: i64, out: &mut Vec<Record>) {
        advance_clocks(self, |w| &mut w.clocks, now_ms, |w, host| w.sweep(host, out));
    }

    /// The end of input: every open run, by start (`timeout` if its key was silent for
    /// the timeout by its head's last call, else `input_end`, unless it ended).
    pub fn finish(&mut self, out: &mut Vec<Record>) {
        let mut runs: Vec<(i64, i64, Key)> = self.open.values().map(|(r, _)| (r.start, r.seq, r.key())).collect();
        runs.sort_unstable_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        for (_, _, key) in runs {
            let run = &self.open[&key].0;
            let outcome = if run.ended {
                answered(run)
            } else if self.clocks.get(&*run.head).unwrap_or(run.last_end) >= run.last_end + self.timeout_ms {
                TIMEOUT
            } else {
                INPUT_END
            };
            self.emit(&key, outcome, out);
        }
        self.deadlines.clear();
    }

    /// The open runs, least recently active first (the snapshot's order).
    pub fn runs(&self) -> impl Iterator<Item = &Run> + '_ {
        self.order.iter().map(|key| &self.open[key].0)
    }

    /// A run of a snapshot, as the most recently active (from_snapshot's way).
    pub fn restore_run(&mut self, run: Run) {
        let key = run.key();
        if let Some((_, h)) = self.open.remove(&key) {
            self.order.remove(h);
        }
        let h = self.order.push_back(key.clone());
        self.schedule(run.last_end + self.timeout_ms, run.seq, key.clone());
        self.open.insert(key, (run, h));
    }

    fn poll(&mut self, record: &CallRecord, out: &mut Vec<Record>) {
        let Some(code) = record.http_code else {
            self.stats.cut_polls += 1;
            return;
        };
        let Some(caller) = &record.caller else {
            self.stats.unattributed_polls += 1;
            return;
        };
        let key: Key = (record.host.clone(), caller.clone(), record.remote_client.clone());
        let mut is_open = false;
        if let Some((run, _)) = self.open.get(&key) {
            if record.start > run.last_end + self.timeout_ms {
                self.close(&key, out); // silent for the timeout: whatever comes now is a new wait
            } else {
                is_open = true;
            }
        }
        if !is_open {
            if code != QUEUED {
                self.stats.answers_without_wait += 1;
                return;
            }
            if self.open.len() >= self.max_open {
                self.stats.evictions += 1;
                let first = self.order.first_key_value().map(|(_, k)| k.clone());
                if let Some(first) = first {
                    self.emit(&first, EVICTED, out);
                }
            }
            self.seq += 1;
            let run = Run {
                seq: self.seq, head: record.host.clone(), caller: caller.clone(),
                client: record.remote_client.clone(), start: record.start, last_start: record.start,
                last_end: record.start, polls: 0, endings: 0, code: None, ended: false, overlap: false,
                whole: false,
            };
            let h = self.order.push_back(key.clone());
            self.open.insert(key.clone(), (run, h));
        }
        let slack = self.poll_interval_ms - CADENCE_SLACK_MS;
        let (run, h) = self.open.get_mut(&key).expect("the run just found or opened");
        if is_open && record.start - run.last_start < slack {
            run.overlap = true;
        }
        self.stats.polls += 1;
        run.polls += 1;
        run.last_start = record.start;
        // A call with a code has its end (Python's max would fail on none).
        run.last_end = run.last_end.max(record.end.unwrap_or(record.start));
        run.whole = run.whole || record.whole_seconds;
        run.ended = code != QUEUED;
        if run.ended {
            run.endings += 1;
            run.code = Some(code);
            if !run.overlap {
                let outcome = answered(run);
                self.emit(&key, outcome, out);
                return;
            }
        }
        let (h, deadline, seq) = (*h, run.last_end + self.timeout_ms, run.seq);
        self.order.move_back(h);
        self.schedule(deadline, seq, key);
    }

    /// The run `key` (of number `seq`) is due at `deadline`, unless it moves before.
    fn schedule(&mut self, deadline: i64, seq: i64, key: Key) {
        let heap = match self.deadlines.get_mut(&*key.0) {
            Some(heap) => heap,
            None => self.deadlines.entry(key.0.clone()).or_default(),
        };
        heap.push(Reverse((deadline, seq, key)));
    }

    /// Whether the host's first deadline is before `watermark` (a sweep would pop it).
    fn due(&self, host: &str, watermark: i64) -> bool {
        self.deadlines.get(host).and_then(|heap| heap.peek()).is_some_and(|Reverse(d)| d.0 < watermark)
    }

    /// Runs of the host whose key was silent past the timeout, by the host's watermark.
    fn sweep(&mut self, host: &str, out: &mut Vec<Record>) {
        let Some(clock) = self.clocks.get(host) else { return };
        let watermark = clock - self.allowance_ms;
        let Some(heap) = self.deadlines.get_mut(host) else { return };
        // The due deadlines taken at once, the host looked up once (it was twice a deadline):
        // closing a run moves no deadline, so they are the ones popped one by one.
        let mut due = std::mem::take(&mut self.due);
        while let Some(Reverse(first)) = heap.peek() {
            if first.0 >= watermark {
                break;
            }
            due.push(heap.pop().expect("peeked").0);
        }
        for (deadline, seq, key) in due.drain(..) {
            let live = self.open.get(&key).is_some_and(|(r, _)| r.seq == seq && r.last_end + self.timeout_ms == deadline);
            if live {
                self.close(&key, out);
            }
        }
        self.due = due;
    }

    fn close(&mut self, key: &Key, out: &mut Vec<Record>) {
        let run = &self.open[key].0;
        let outcome = if run.ended { answered(run) } else { TIMEOUT };
        self.emit(key, outcome, out);
    }

    fn emit(&mut self, key: &Key, outcome: &'static str, out: &mut Vec<Record>) {
        let Some((run, h)) = self.open.remove(key) else { return };
        self.order.remove(h);
        self.stats.waits += 1;
        self.stats.overlaps += i64::from(run.overlap);
        self.stats.timeouts += i64::from(outcome == TIMEOUT);
        out.push(Record::Checksum(ChecksumRecord {
            wait: run.last_end - run.start,
            http_code: if outcome == DONE || outcome == FAILED { run.code } else { None },
            head: run.head, caller: run.caller, remote_client: run.client, start: run.start,
            end: run.last_end, polls: run.polls, outcome, endings: run.endings, overlap: run.overlap,
            whole_seconds: run.whole,
        }));
    }
}

fn answered(run: &Run) -> &'static str {
    if run.code == Some(200) { DONE } else { FAILED }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(host: &str, command: &str, code: Option<i64>, start: i64, end: i64) -> CallRecord {
        CallRecord {
            host: host.into(), pid: 1, tid: 1, role: Some("head".into()), command: Some(command.into()),
            http_code: code, caller: Some("fe01".into()), remote_client: Some("client".into()),
            start, end: Some(end), duration: Some(end - start), cut: false, whole_seconds: false,
        }
    }

    fn waits(out: &[Record]) -> Vec<(&'static str, i64, i64)> {
        out.iter()
            .filter_map(|r| match r {
                Record::Checksum(c) => Some((c.outcome, c.wait, c.polls)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_run_of_202s_ended_by_a_200_is_one_done_wait_from_the_first_start_to_the_last_end() {
        let mut w = ChecksumWaits::new(30_000, 5_000, 10, 2_000);
        let mut out = Vec::new();
        for (i, code) in [202, 202, 200].into_iter().enumerate() {
            let t = 1_000 + 5_000 * i as i64;
            w.call(&call("head", COMMAND, Some(code), t, t + 10), &mut out);
        }
        assert_eq!(waits(&out), vec![(DONE, 10_010, 3)]);
        assert_eq!((w.stats.polls, w.stats.waits), (3, 1));
    }

    #[test]
    fn a_key_silent_for_the_timeout_ends_its_run_when_the_heads_clock_passes_it() {
        let mut w = ChecksumWaits::new(30_000, 5_000, 10, 2_000);
        let mut out = Vec::new();
        w.call(&call("head", COMMAND, Some(202), 0, 5), &mut out);
        w.call(&call("head", "dome_access", Some(200), 31_000, 31_001), &mut out);
        assert!(out.is_empty(), "not past deadline + allowance yet");
        w.call(&call("head", "dome_access", Some(200), 32_010, 32_011), &mut out);
        assert_eq!(waits(&out), vec![(TIMEOUT, 5, 1)]);
        assert_eq!(w.stats.timeouts, 1);
    }

    /// The kinds of `out` in order: 'c' a call (with its start), 'w' a wait.
    fn shape(out: &[Record]) -> Vec<(char, i64)> {
        out.iter()
            .map(|r| match r {
                Record::Call(c) => ('c', c.start),
                Record::Checksum(c) => ('w', c.start),
                _ => ('?', 0),
            })
            .collect()
    }

    #[test]
    fn each_wait_follows_the_call_that_ended_it_and_a_chunk_that_ends_none_comes_back_as_it_was() {
        let mut w = ChecksumWaits::new(30_000, 5_000, 10, 2_000);
        let none = w.pair(vec![Record::Call(call("head", COMMAND, Some(202), 0, 5)),
                               Record::Call(call("head", "dome_access", Some(200), 1, 2))]);
        assert_eq!(shape(&none), vec![('c', 0), ('c', 1)]);
        let mut other = call("head", COMMAND, Some(202), 3_000, 3_005);
        other.caller = Some("fe02".into());
        let mut other_done = call("head", COMMAND, Some(200), 8_000, 8_005);
        other_done.caller = Some("fe02".into());
        let paired = w.pair(vec![
            Record::Call(other), Record::Call(call("head", COMMAND, Some(200), 5_000, 5_010)),
            Record::Call(call("head", "dome_access", Some(200), 6_000, 6_001)), Record::Call(other_done),
            // past the first's timeout: it ends nothing (its run ended), the runs are gone
            Record::Call(call("head", "dome_access", Some(200), 60_000, 60_001)),
        ]);
        assert_eq!(shape(&paired), vec![('c', 3_000), ('c', 5_000), ('w', 0), ('c', 6_000), ('c', 8_000), ('w', 3_000),
                                        ('c', 60_000)]);
    }

    #[test]
    fn the_least_recently_active_run_is_evicted_at_the_cap() {
        let mut w = ChecksumWaits::new(30_000, 5_000, 1, 2_000);
        let mut out = Vec::new();
        let mut other = call("head", COMMAND, Some(202), 10, 20);
        other.caller = Some("fe02".into());
        w.call(&call("head", COMMAND, Some(202), 0, 5), &mut out);
        w.call(&other, &mut out);
        assert_eq!(waits(&out), vec![(EVICTED, 5, 1)]);
        assert_eq!((w.stats.evictions, w.runs().count()), (1, 1));
    }
}
