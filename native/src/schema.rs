//! The record schema of parsers/schema.py, as the compiled code uses it: the columns, the
//! record key of each and which hold milliseconds (records.rs), the counters
//! (counters.rs), the record values chosen at run time and the feed's stop codes
//! (reassembly.rs, py_engine.rs), the phases (tally.rs). Python's is the declaration: when
//! the module loads, schema_check.rs hands this copy, and the keys the record builders of
//! rec.rs really write, to parsers/schema.check_compiled, which fails the import naming
//! every difference.

/// The columns' names, as the CSV header and the JSON objects show them.
pub const REQUEST_COLUMNS: [&str; 22] = [
    "host", "token", "op", "client", "nfiles", "status", "accepted", "started", "ended", "auth_s",
    "request_s", "queue_s", "proc_s", "polls", "poll_s", "ready_wait_s", "transfer_s", "done_s",
    "total_s", "end_reason", "ns_calls", "ns_s",
];
/// The record key of each column, in the same order (a duration is held in milliseconds
/// under `*_ms` and shown in seconds under `*_s`).
pub const REQUEST_FIELDS: [&str; 22] = [
    "host", "token", "op", "client", "nfiles", "status", "accepted", "started", "ended", "auth_ms",
    "request_ms", "queue_ms", "proc_ms", "polls", "poll_ms", "ready_wait_ms", "transfer_ms",
    "done_ms", "total_ms", "end_reason", "ns_calls", "ns_ms",
];
/// The record keys holding milliseconds.
pub const REQUEST_MS: [&str; 13] = [
    "accepted", "started", "ended", "auth_ms", "request_ms", "queue_ms", "proc_ms", "poll_ms",
    "ready_wait_ms", "transfer_ms", "done_ms", "total_ms", "ns_ms",
];
pub const CALL_COLUMNS: [&str; 13] = [
    "host", "daemon", "pid", "thread", "op", "client", "started", "ended", "duration_s", "rc",
    "auth_s", "session", "token",
];
pub const CALL_FIELDS: [&str; 13] = [
    "host", "daemon", "pid", "thread", "op", "client", "started", "ended", "duration_ms", "rc",
    "auth_ms", "session", "token",
];
pub const CALL_MS: [&str; 4] = ["started", "ended", "duration_ms", "auth_ms"];

/// Request phases exported as metrics and summed by the summary: (record key, phase).
pub const PHASES: [(&str, &str); 9] = [
    ("auth_ms", "auth"), ("request_ms", "request"), ("queue_ms", "queue"), ("proc_ms", "proc"),
    ("poll_ms", "poll"), ("ready_wait_ms", "ready_wait"), ("transfer_ms", "transfer"),
    ("done_ms", "done"), ("total_ms", "total"),
];

/// ReassemblyStats' fields, in order (counters.rs names each one's index).
pub const STAT_NAMES: [&str; 17] = [
    "requests", "calls", "evictions", "expired", "dropped_accepts", "late_lines", "stray_returns",
    "noreturn_calls", "orphans", "restarts", "stray_processes", "thread_evictions",
    "expired_threads", "expired_sessions", "duplicate_lines", "future_lines", "clock_steps",
];
/// Whether `names[i]` is `name` (at compile time: counters.rs pins its indexes).
pub const fn named(names: &[&str], i: usize, name: &str) -> bool {
    if i >= names.len() {
        return false;
    }
    let (a, b) = (names[i].as_bytes(), name.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut k = 0;
    while k < a.len() {
        if a[k] != b[k] {
            return false;
        }
        k += 1;
    }
    true
}

/// LinkStats' fields: the order of Core.link_stats()'s tuple.
pub const LINK_STAT_NAMES: [&str; 2] = ["ns_calls_linked", "ns_calls_ambiguous"];

/// A request record's `status`; the engine writes these names, never the literals.
pub const SUCCESS: &str = "success";
pub const FAILED: &str = "failed";
pub const ABORTED: &str = "aborted";
pub const INCOMPLETE: &str = "incomplete";
pub const STATUSES: [&str; 4] = [SUCCESS, FAILED, ABORTED, INCOMPLETE];
/// A request record's `end_reason` (schema.py's BY_* names): its closing line, the
/// event-time timeout, the in-flight cap, the end of the input.
pub const BY_LINE: &str = "line";
pub const BY_TIMEOUT: &str = "timeout";
pub const BY_EVICTION: &str = "evicted";
pub const BY_INPUT_END: &str = "input_end";
pub const END_REASONS: [&str; 4] = [BY_LINE, BY_TIMEOUT, BY_EVICTION, BY_INPUT_END];

/// Why Core.feed_lines stopped, by the code it returns (its index here; schema.py's
/// FEED_STOPS): the lines ended, a line needs Python, the source passed its limit in
/// event time, the line budget before an event-time sweep is spent; and the DOME engine's
/// feed_chunk only: the line before the stop was malformed (its source keeps it as an
/// example).
pub const FEED_STOPS: [&str; 5] = ["done", "slow", "limit", "budget", "malformed"];
pub const DONE: u8 = 0;
pub const SLOW: u8 = 1;
pub const LIMIT: u8 = 2;
pub const BUDGET: u8 = 3;
pub const MALFORMED: u8 = 4;
const _: () = assert!(
    named(&FEED_STOPS, DONE as usize, "done")
        && named(&FEED_STOPS, SLOW as usize, "slow")
        && named(&FEED_STOPS, LIMIT as usize, "limit")
        && named(&FEED_STOPS, BUDGET as usize, "budget")
        && named(&FEED_STOPS, MALFORMED as usize, "malformed"),
    "schema.rs's stop codes do not match FEED_STOPS"
);
