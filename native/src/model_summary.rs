//! What predict.py keeps of a compiled model run (model.rs), computed from the ground
//! truth's values so that the run hands Python a summary, not ~6,000 record dicts (issue
//! 30): predict.phase_table (each op's phase values, sorted), observe.growth (a queue's
//! p50 in the first and last quarter of the arrivals) and the summary of each of
//! observe.py's observations (the median a checked one compares, or the number an
//! unchecked one shows). The Python functions stay the reference (the Python model's runs
//! and the log's records go through them); tests/simulator/test_model_summary.py pins the
//! two equal. Floats are made by the same operations in the same order as in Python (an
//! int difference exact, then one conversion), so the values are the same bits.
//! Plain values only: model.rs turns them into Python's.

use crate::estimators::most_open;   // estimators.max_overlap
use crate::fits::NET_MS;
use crate::hashing::FxMap;


/// A request record's values that the summaries read (model.rs makes it beside the dict).
pub(crate) struct ReqView {
    pub is_get: bool,
    pub success: bool,
    pub started: i64,
    /// The phases in schema.PHASES' order: auth, request, queue, proc, poll, ready_wait,
    /// transfer, done, total.
    pub phases: [Option<i64>; 9],
    pub polls: i64,
    pub ns_ms: Option<i64>,
    pub ns_calls: Option<i64>,
}

const AUTH: usize = 0;
const REQUEST: usize = 1;
const QUEUE: usize = 2;
const PROC: usize = 3;
const POLL: usize = 4;
const READY_WAIT: usize = 5;
const TRANSFER: usize = 6;
const DONE: usize = 7;
const TOTAL: usize = 8;

/// A call record's values that the observations read.
pub(crate) struct CallView<'a> {
    pub dpns: bool,
    pub op: &'a str,
    pub started: i64,
    pub ended: Option<i64>,
    pub path: Option<&'a str>,
}

/// observe.observations, one kind per measure function (`Observation.native`).
pub(crate) enum Measure {
    Arrivals,
    GetShare,
    Phase(usize),          // a phase's p50 over the put/get requests (auth, request, transfer)
    PollEach,              // poll_ms / polls
    DoneOfSuccesses,
    GetGap,
    OwnWork(bool),         // is_get
    Statg,
    PooledHold,
    CreatesWaitHold,
    LockHold(Vec<String>),
    LockShare(Vec<String>),
    LockWait(Vec<String>),
    MostRuns,
    Polls,
}

impl Measure {
    /// The measure observe.py names `kind` (with the directory names of a lock's ones).
    pub(crate) fn named(kind: &str, names: Vec<String>) -> Option<Measure> {
        Some(match kind {
            "arrivals" => Measure::Arrivals,
            "get share" => Measure::GetShare,
            "auth" => Measure::Phase(AUTH),
            "request" => Measure::Phase(REQUEST),
            "transfer" => Measure::Phase(TRANSFER),
            "poll each" => Measure::PollEach,
            "done of successes" => Measure::DoneOfSuccesses,
            "get gap" => Measure::GetGap,
            "own work put" => Measure::OwnWork(false),
            "own work get" => Measure::OwnWork(true),
            "statg" => Measure::Statg,
            "pooled hold" => Measure::PooledHold,
            "creates wait hold" => Measure::CreatesWaitHold,
            "lock hold" => Measure::LockHold(names),
            "lock share" => Measure::LockShare(names),
            "lock wait" => Measure::LockWait(names),
            "most runs" => Measure::MostRuns,
            "polls" => Measure::Polls,
            _ => return None,
        })
    }
}

/// estimators._interpolated on sorted ints: the int difference exact, then a float.
fn interpolated(ordered: &[i64], q: f64) -> f64 {
    let n = ordered.len();
    let pos = q * (n - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = (lo + 1).min(n - 1);
    ordered[lo] as f64 + (ordered[hi] - ordered[lo]) as f64 * (pos - lo as f64)
}

fn interpolated_f(ordered: &[f64], q: f64) -> f64 {
    let n = ordered.len();
    let pos = q * (n - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = (lo + 1).min(n - 1);
    ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo as f64)
}

/// estimators.median of ints, None for none (Observation.summary of a checked one).
fn median(mut values: Vec<i64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_unstable();
    Some(interpolated(&values, 0.5))
}

fn median_f(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_unstable_by(f64::total_cmp);
    Some(interpolated_f(&values, 0.5))
}

/// fits.lock_holds: in the order the creates ended, each held from the later of its
/// start and the previous end (calibrate_columns.rs' directory_groups takes it too).
pub(crate) fn lock_holds(creats: &[(i64, i64)]) -> Vec<i64> {
    let mut ordered: Vec<(i64, i64)> = creats.iter().map(|&(s, e)| (e, s)).collect();
    ordered.sort_unstable();
    let mut prev_end = ordered.first().map_or(0, |&(_, s)| s);
    ordered.iter().map(|&(end, start)| {
        let began = if start > prev_end { start } else { prev_end };
        prev_end = end;
        if end > began { end - began } else { 0 }
    }).collect()
}

/// parsers/linking.directory_of.
pub(crate) fn directory_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) => "/",
        Some(i) => &path[..i],
        None => path,
    }
}

/// fits.proc_interval.
fn proc_interval(r: &ReqView) -> Option<(i64, i64)> {
    let (proc, queue, request) = (r.phases[PROC]?, r.phases[QUEUE]?, r.phases[REQUEST]?);
    let put_ret = r.started + request;
    if queue > 0 {
        let start = put_ret + queue;
        return Some((start, start + proc));
    }
    let end = r.started + proc;
    Some((put_ret, if end > put_ret { end } else { put_ret }))
}

/// fits.get_gap.
fn get_gap(r: &ReqView) -> Option<i64> {
    if !r.is_get || !r.success {
        return None;
    }
    let p = &r.phases;
    Some(p[TOTAL]? - p[AUTH].unwrap_or(0) - p[REQUEST]? - p[READY_WAIT]? - p[DONE]?)
}

/// A run's records with the views the observations share (observe.Records' views).
pub(crate) struct Summaries<'a> {
    reqs: &'a [ReqView],
    creats: Vec<(i64, i64)>,
    by_directory: Vec<(&'a str, Vec<(i64, i64)>)>,
    holds: Vec<Vec<i64>>,
    statg: Vec<i64>,
}

impl<'a> Summaries<'a> {
    pub(crate) fn new(reqs: &'a [ReqView], calls: &'a [CallView<'a>]) -> Self {
        let mut creats = Vec::new();
        let mut by_directory: Vec<(&str, Vec<(i64, i64)>)> = Vec::new();
        let mut index: FxMap<&str, usize> = FxMap::default();   // looked up, never walked
        let mut statg = Vec::new();
        for c in calls.iter().filter(|c| c.dpns) {
            if c.op == "statg" {
                if let Some(ended) = c.ended {
                    statg.push(if ended > c.started { ended - c.started } else { 0 });
                }
            }
            let (true, Some(ended)) = (c.op == "creat", c.ended) else { continue };
            creats.push((c.started, ended));
            let Some(path) = c.path.filter(|p| !p.is_empty()) else { continue };
            let dir = directory_of(path);
            let k = *index.entry(dir).or_insert_with(|| {
                by_directory.push((dir, Vec::new()));
                by_directory.len() - 1
            });
            by_directory[k].1.push((c.started, ended));
        }
        let holds = by_directory.iter().map(|(_, pairs)| lock_holds(pairs)).collect();
        Summaries { reqs, creats, by_directory, holds, statg }
    }

    fn present(&self, names: &[String]) -> Vec<usize> {
        let mut out: Vec<usize> = Vec::new();
        for name in names {
            if let Some(k) = self.by_directory.iter().position(|(d, _)| d == name) {
                if !out.contains(&k) {
                    out.push(k);
                }
            }
        }
        out
    }

    fn mine(&self, present: &[usize]) -> Vec<(i64, i64)> {
        present.iter().flat_map(|&k| self.by_directory[k].1.iter().copied()).collect()
    }

    fn phase_p50(&self, phase: usize, keep: impl Fn(&ReqView) -> bool) -> Option<f64> {
        median(self.reqs.iter().filter(|r| keep(r)).filter_map(|r| r.phases[phase]).collect())
    }

    /// Observation.summary(Observation.measure(...)) of `m`.
    pub(crate) fn summary(&self, m: &Measure) -> Option<f64> {
        let reqs = self.reqs;
        match m {
            Measure::Arrivals => {
                if reqs.len() < 2 {
                    return None;
                }
                let lo = reqs.iter().map(|r| r.started).min()?;
                let hi = reqs.iter().map(|r| r.started).max()?;
                let seconds = (hi - lo) as f64 / 1000.0;
                Some(reqs.len() as f64 / if seconds > 1e-3 { seconds } else { 1e-3 })
            }
            Measure::GetShare => {
                let gets = reqs.iter().filter(|r| r.is_get).count();
                Some(gets as f64 / reqs.len().max(1) as f64)
            }
            Measure::Phase(p) => self.phase_p50(*p, |_| true),
            Measure::PollEach => median_f(reqs.iter().filter(|r| r.polls != 0)
                .map(|r| r.phases[POLL].unwrap_or(0) as f64 / r.polls as f64).collect()),
            Measure::DoneOfSuccesses => self.phase_p50(DONE, |r| r.success),
            Measure::GetGap => median(reqs.iter().filter_map(get_gap).collect()),
            Measure::OwnWork(is_get) => median(reqs.iter().filter(|r| r.is_get == *is_get)
                .filter_map(|r| match (r.phases[PROC], r.ns_ms, r.ns_calls) {
                    (Some(proc), Some(ns), Some(calls)) if calls != 0 => Some(proc - ns - NET_MS * calls),
                    _ => None,
                }).collect()),
            Measure::Statg => median(self.statg.clone()),
            Measure::PooledHold => median(self.holds.concat()),
            Measure::CreatesWaitHold => median(self.creats.iter().map(|&(s, e)| e - s).collect()),
            Measure::LockHold(names) => {
                let present = self.present(names);
                if present.len() == 1 {
                    return median(self.holds[present[0]].clone());
                }
                median(lock_holds(&self.mine(&present)))
            }
            Measure::LockShare(names) => {
                let mine = self.mine(&self.present(names));
                if self.creats.is_empty() {
                    return None;
                }
                Some(mine.len() as f64 / self.creats.len() as f64)
            }
            Measure::LockWait(names) => {
                median(self.mine(&self.present(names)).iter().map(|&(s, e)| e - s).collect())
            }
            Measure::MostRuns => {
                let intervals: Vec<(i64, i64)> = reqs.iter().filter_map(proc_interval).collect();
                if intervals.is_empty() {
                    return None;
                }
                Some(most_open(&intervals) as f64)
            }
            Measure::Polls => median(reqs.iter().filter(|r| r.phases[READY_WAIT].is_some())
                .map(|r| r.polls).collect()),
        }
    }

    /// observe.growth: per queue-bearing phase, (p50 of the first quarter, of the last).
    pub(crate) fn growth(&self) -> Vec<(&'static str, (f64, f64))> {
        let mut order: Vec<&ReqView> = self.reqs.iter().collect();
        order.sort_by_key(|r| r.started);      // stable, as sorted(key=started)
        let mut out = Vec::new();
        for (phase, name) in [(QUEUE, "queue"), (PROC, "proc")] {
            let values: Vec<i64> = order.iter().filter_map(|r| r.phases[phase]).collect();
            if values.len() >= 8 {
                out.push((name, quarters(&values)));
            }
        }
        let mut creats: Vec<(i64, i64)> = self.creats.iter().map(|&(s, e)| (s, e - s)).collect();
        if creats.len() >= 8 {
            creats.sort_unstable();
            let durations: Vec<i64> = creats.iter().map(|c| c.1).collect();
            out.push(("ns creat", quarters(&durations)));
        }
        out
    }
}

/// (p50 of the first quarter of `values`, p50 of the last), in their order.
fn quarters(values: &[i64]) -> (f64, f64) {
    let q = values.len() / 4;
    let first = median(values[..q].to_vec()).unwrap_or(f64::NAN);
    let last = median(values[values.len() - q..].to_vec()).unwrap_or(f64::NAN);
    (first, last)
}

/// predict.phase_table with each list sorted: (is_get, phase index, values), puts first,
/// the phases in schema.PHASES' order, a phase no request of the op has left out.
pub(crate) fn phase_table(reqs: &[ReqView]) -> Vec<(bool, usize, Vec<i64>)> {
    let mut out = Vec::new();
    for is_get in [false, true] {
        for phase in 0..9 {
            let mut values: Vec<i64> = reqs.iter().filter(|r| r.is_get == is_get)
                .filter_map(|r| r.phases[phase]).collect();
            if !values.is_empty() {
                values.sort_unstable();
                out.push((is_get, phase, values));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_phase_indexes_are_the_schemas() {
        let named: Vec<&str> = crate::schema::PHASES.iter().map(|p| p.1).collect();
        let mine = [(AUTH, "auth"), (REQUEST, "request"), (QUEUE, "queue"), (PROC, "proc"),
                    (POLL, "poll"), (READY_WAIT, "ready_wait"), (TRANSFER, "transfer"),
                    (DONE, "done"), (TOTAL, "total")];
        assert!(mine.iter().all(|&(i, name)| named[i] == name));
    }

    #[test]
    fn interpolation_is_pythons_between_order_statistics() {
        assert_eq!(interpolated(&[1, 2, 3, 10], 0.5), 2.5);
        assert_eq!(median(vec![7]), Some(7.0));
        assert_eq!(median(vec![]), None);
    }

    #[test]
    fn lock_holds_take_each_create_from_the_later_of_its_start_and_the_previous_end() {
        assert_eq!(lock_holds(&[(0, 10), (5, 12), (20, 21)]), vec![10, 2, 1]);
    }

    #[test]
    fn a_path_directory_is_its_parent_or_the_root() {
        assert_eq!((directory_of("/a/b"), directory_of("/a"), directory_of("x")), ("/a", "/", "x"));
    }

    #[test]
    fn the_most_runs_at_once_closes_an_end_before_a_start_at_the_same_instant() {
        assert_eq!(most_open(&[(0, 10), (10, 20), (5, 15)]), 2);
    }
}
