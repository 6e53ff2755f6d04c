//! The engine's counters: each one's index in `State.stats`, pinned at compile time to its
//! place in schema.rs's STAT_NAMES (ReassemblyStats' fields, in order).

use crate::schema::{named, STAT_NAMES};

pub(crate) const REQUESTS: usize = 0;
pub(crate) const CALLS: usize = 1;
pub(crate) const EVICTIONS: usize = 2;
pub(crate) const EXPIRED: usize = 3;
pub(crate) const DROPPED_ACCEPTS: usize = 4;
pub(crate) const LATE_LINES: usize = 5;
pub(crate) const STRAY_RETURNS: usize = 6;
pub(crate) const NORETURN_CALLS: usize = 7;
pub(crate) const ORPHANS: usize = 8;
pub(crate) const RESTARTS: usize = 9;
pub(crate) const STRAY_PROCESSES: usize = 10;
pub(crate) const THREAD_EVICTIONS: usize = 11;
pub(crate) const EXPIRED_THREADS: usize = 12;
pub(crate) const EXPIRED_SESSIONS: usize = 13;
pub(crate) const DUPLICATE_LINES: usize = 14;
pub(crate) const FUTURE_LINES: usize = 15;
pub(crate) const CLOCK_STEPS: usize = 16;
// Each index is its counter's place in schema.rs: a reordered STAT_NAMES fails the build.
const _: () = assert!(
    named(&STAT_NAMES, REQUESTS, "requests")
        && named(&STAT_NAMES, CALLS, "calls")
        && named(&STAT_NAMES, EVICTIONS, "evictions")
        && named(&STAT_NAMES, EXPIRED, "expired")
        && named(&STAT_NAMES, DROPPED_ACCEPTS, "dropped_accepts")
        && named(&STAT_NAMES, LATE_LINES, "late_lines")
        && named(&STAT_NAMES, STRAY_RETURNS, "stray_returns")
        && named(&STAT_NAMES, NORETURN_CALLS, "noreturn_calls")
        && named(&STAT_NAMES, ORPHANS, "orphans")
        && named(&STAT_NAMES, RESTARTS, "restarts")
        && named(&STAT_NAMES, STRAY_PROCESSES, "stray_processes")
        && named(&STAT_NAMES, THREAD_EVICTIONS, "thread_evictions")
        && named(&STAT_NAMES, EXPIRED_THREADS, "expired_threads")
        && named(&STAT_NAMES, EXPIRED_SESSIONS, "expired_sessions")
        && named(&STAT_NAMES, DUPLICATE_LINES, "duplicate_lines")
        && named(&STAT_NAMES, FUTURE_LINES, "future_lines")
        && named(&STAT_NAMES, CLOCK_STEPS, "clock_steps"),
    "counters.rs's indexes do not match schema::STAT_NAMES"
);
