"""Fits of the model's parts to request and call records (integer ms), for the
calibration (simulator/calibrate.py): processing runs and fast-thread calls in time, the
name-server lock (hold time, directories), the load's shape (closed loop or open) and
the clients' poll back-off."""

from __future__ import annotations

import bisect
import math
import random
from operator import itemgetter

from dpmstream.parsers import extension
from dpmstream.parsers.linking import directory_of

from dpmstream.simulator.estimators import (
    in_flight_at_arrivals, in_flight_at_start, max_overlap, median,
)

NET_MS = 1                      # the model's one-way network delay (not in any log)
REQUEST_STEPS = ("put", "get")
PLAIN_OPS = ("ping", "getpools")
MIN_SAMPLES = 20


def proc_interval(r: dict):
    """(start, end) of the processing run of a request record, when it has one, or of
    the part of it known for sure: the most runs at once is then a lower bound."""
    proc, queue, request = r["proc_ms"], r["queue_ms"], r["request_ms"]
    if proc is None or queue is None or request is None:
        return None
    put_ret = r["started"] + request
    if queue > 0:
        start = put_ret + queue
        return start, start + proc
    # A queue of 0 may be a slow thread that began before the put's `returns` was
    # logged: the run began between DP092 and `returns`; this part of it ran for sure.
    end = r["started"] + proc
    return put_ret, end if end > put_ret else put_ret


def get_gap(r: dict):
    """A successful get's pause between its SUCCESS answer and its relfiles (with that
    call's authentication), ms: what its total leaves of the other phases (a get has no
    transfer_ms); None when a phase is missing."""
    if r["op"] != "get" or r["status"] != "success" or None in (
            r["total_ms"], r["request_ms"], r["ready_wait_ms"], r["done_ms"]):
        return None
    return r["total_ms"] - (r["auth_ms"] or 0) - r["request_ms"] - r["ready_wait_ms"] - r["done_ms"]


def fast_calls(reqs, dpm_calls) -> list[tuple[int, int]]:
    """(start, end) of the fast-thread calls the records show: each put/get from its
    accept to its `returns`, each closing call (its accept not recorded), each DPM call."""
    out = []
    for r in reqs:
        if r["request_ms"] is not None:
            start = r["accepted"] if r["accepted"] is not None else r["started"]
            out.append((start, r["started"] + r["request_ms"]))
        if r["done_ms"] is not None and r["ended"] is not None:
            out.append((r["ended"] - r["done_ms"], r["ended"]))
    for c in dpm_calls:
        if c["started"] is not None and c["ended"] is not None:
            out.append((c["started"] - (c["auth_ms"] or 0), c["ended"]))
    return out


def lock_fit(creats):
    """(hold times, how the hold was measured) from (start, end) create calls."""
    pairs = in_flight_at_start(creats)
    hold = [d for k, d in pairs if k == 0]
    how = "creates that began with no other create in flight"
    if len(hold) < MIN_SAMPLES:
        # Hardly ever idle: the lock is the bottleneck. Taken as one lock served in turn.
        how = "end - max(start, previous create's end): the lock taken as one queue"
        hold = lock_holds(creats)
    return hold, how


def lock_holds(creats) -> list[int]:
    """The hold times of one lock from its (start, end) create calls: taken in the order
    they ended, each began holding at the later of its start and the previous end. Exact
    for any lock served one at a time that is never idle while a create waits, whatever
    the load (idle, or a queue that never empties)."""
    hold = []
    # (end, start) pairs sort as the creates by (end, start) do, without a key call each.
    ordered = sorted([(end, start) for start, end in creats])
    prev_end = ordered[0][1] if ordered else None     # the first holds from its start
    for end, start in ordered:
        began = start if start > prev_end else prev_end
        hold.append(end - began if end > began else 0)
        prev_end = end
    return hold


class DirectoryLock:
    """One directory's lock as its creates show it."""

    # A plain class, not a dataclass: every report's what-if imports it, and a dataclass
    # compiles its generated methods as its module is imported (issue 30).
    __slots__ = ("name", "creats", "holds")

    def __init__(self, name: str, creats: list, holds: list):
        self.name = name
        self.creats = creats     # (start, end) ms
        self.holds = holds       # ms, lock_holds of its creates

    @property
    def durations(self) -> list[int]:
        return [e - s for s, e in self.creats]

    def utilisation(self) -> float:
        """Offered load: its creates per ms over the log's span times the mean hold."""
        # the ends and starts taken out in C (itemgetter mapped), not by a generator
        span = max(1, max(map(itemgetter(1), self.creats)) - min(map(itemgetter(0), self.creats)))
        return len(self.creats) / span * (sum(self.holds) / len(self.holds))


def creates_by_directory(creats) -> tuple[dict[str, list[tuple[int, int]]], int]:
    """(start, end, path) creates grouped by parent directory, in the order of the calls,
    and how many named no path (they cannot be placed under a lock)."""
    groups: dict[str, list] = {}
    pathless = 0
    for start, end, path in creats:
        if not path:
            pathless += 1
            continue
        groups.setdefault(directory_of(path), []).append((start, end))
    return groups, pathless


def busiest_first(groups: dict[str, list]) -> list[tuple[str, list]]:
    """creates_by_directory's groups, most creates first (then by name)."""
    return sorted(groups.items(), key=lambda g: (-len(g[1]), g[0]))


def directory_locks(creats) -> tuple[list[DirectoryLock], int]:
    """(start, end, path) creates grouped by parent directory, most creates first, and
    how many named no path (they cannot be placed under a lock). Grouped in the
    extension where it is built (native/src/calibrate_columns.rs directory_groups, issue
    30: ~20 M instructions of Python on the thesis log's ~3 k creates);
    python_directory_groups is the reference."""
    groups, pathless = directory_groups(creats)
    return [DirectoryLock(name, calls, holds) for name, calls, holds in groups], pathless


def python_directory_groups(creats) -> tuple[list[tuple[str, list, list]], int]:
    """`directory_groups`: each directory's (name, (start, end) creates in the calls'
    order, their lock_holds), most creates first (then by name), and how many creates
    named no path."""
    groups, pathless = creates_by_directory(creats)
    return [(name, calls, lock_holds(calls)) for name, calls in busiest_first(groups)], pathless


directory_groups = extension.compiled_else("directory_groups", python_directory_groups)


DIR_CANDIDATES = tuple(range(1, 13)) + (15, 20, 25, 30, 40, 50)


def simulated_lock_wait(starts, hold, dirs: int, rng: random.Random) -> float:
    """Mean wait for the lock of creates beginning at `starts` (sorted), each in one of
    `dirs` directories drawn at random, each holding it for a hold time drawn from `hold`,
    served in turn per directory."""
    free_at = [0] * dirs
    total = 0
    n = len(hold)
    for start in starts:
        d = int(rng.random() * dirs)
        begin = max(start, free_at[d])
        free_at[d] = begin + hold[int(rng.random() * n)]
        total += begin - start
    return total / len(starts)


def lock_wait_curve(creats, hold, rng: random.Random) -> list[tuple[int, float]]:
    """(directories, mean lock wait ms) for each candidate count, the creates' own start
    instants replayed against the measured hold times (mean of 3 draws)."""
    starts = sorted(s for s, _ in creats)
    return [(d, sum(simulated_lock_wait(starts, hold, d, rng) for _ in range(3)) / 3)
            for d in DIR_CANDIDATES]


def directories_for(wait: float, curve) -> float | None:
    """The directory count whose simulated wait is nearest the measured one; None when
    the wait is under what 50 directories would give (no contention to tell apart)."""
    if wait <= max(1.0, curve[-1][1]):
        return None
    return float(min(curve, key=lambda c: abs(math.log1p(c[1]) - math.log1p(wait)))[0])


def closed_loop(reqs: list[dict]):
    """Is the load a closed loop (each client keeps N requests going, starting the next as
    one ends), and with how many? Per client, the number of its requests in flight seen
    at its arrivals (the middle 80% of the run): an open load's varies like a Poisson
    count (variance / mean near 1 or more), a closed loop's hardly at all. Returns (the
    clients' median variance / mean, streams per client (requests in flight plus the
    pauses between one's end and the next, on average), think times ms: a client's next
    request less the end of the one before, when within 100 ms)."""
    # Each client's values compiled where the extension is built (native/src/fits.rs,
    # issue 30: ~40 M instructions of Python on the thesis log), python_closed_loop_clients
    # the reference, taking the records the compiled pass cannot read as ints and texts.
    dispersions, streams, thinks = _closed_loop_clients(reqs)
    if not dispersions:
        return math.inf, 1, thinks
    return median(dispersions), int(round(median(streams))), thinks


def python_closed_loop_clients(reqs: list[dict]):
    """closed_loop's per-client pass in Python, the reference: (each client's dispersion,
    each client's streams, in the order the clients first appear, the think times)."""
    by_client: dict[str, list] = {}
    for r in reqs:
        at = r["accepted"] if r["accepted"] is not None else r["started"]
        end = r["ended"]
        if end is not None:   # max() by a conditional expression here and below (issue 30)
            by_client.setdefault(r["client"], []).append((at, end if end > at else at))
    dispersions, streams, thinks = [], [], []
    for spans in by_client.values():
        spans.sort()
        counts = in_flight_at_arrivals(spans)
        middle = counts[len(counts) // 10: max(len(counts) // 10 + 1, len(counts) * 9 // 10)]
        mean = sum(middle) / len(middle)
        # floats summed left to right by a loop, not sum(): from Python 3.12 sum() of
        # floats is compensated, and fits.rs (pinned equal to this) adds as the loop does
        squares = 0.0
        for c in middle:
            squares += (c - mean) ** 2
        dispersions.append(squares / len(middle) / mean)
        ends = sorted(end for _, end in spans)
        used = [False] * len(ends)
        gaps = []
        for at, _ in spans:
            i = bisect.bisect_right(ends, at) - 1
            while i >= 0 and used[i]:
                i -= 1
            if i >= 0 and at - ends[i] <= 100:
                used[i] = True
                gaps.append((ends[i], at))
                think = at - ends[i] - 2 * NET_MS
                thinks.append(think if think > 0 else 0)
        # Streams: requests in flight plus streams between two requests, averaged over
        # the middle 80% of the client's arrivals (away from the start and the drain).
        lo, hi = spans[len(spans) // 10][0], spans[min(len(spans) - 1, len(spans) * 9 // 10)][0]
        if hi > lo:
            # Each span clipped to [lo, hi] by conditional expressions: min() and max()
            # called per span were most of this function's cost (issue 30).
            busy = sum(d for s, e in spans + gaps
                       if (d := (e if e < hi else hi) - (s if s > lo else lo)) > 0)
            streams.append(max(1, int(round(busy / (hi - lo)))))
        else:
            streams.append(max(1, int(round(mean))))
    return dispersions, streams, thinks


_closed_loop_clients = extension.compiled_else("closed_loop_clients", python_closed_loop_clients)


def fit_backoff(samples, per_call_ms: float):
    """The poll schedule (first delay ms, factor, cap ms) under which a request answered
    on its n-th poll has the ready_wait measured; samples are (n, ready_wait ms).
    Returns (first, factor, cap, median absolute error ms, whether the cap was reached
    within the most polls seen). A cap never reached cannot be told from a larger one:
    the largest (the growth going on) is taken.

    A schedule's score is the mean absolute error over the samples. The samples are
    grouped by their number of polls (at most a few dozen groups), so that each of the
    784 schedules costs a bisection per group instead of a pass over every sample.
    In the extension where it is built (native/src/fits.rs, issue 30: ~31 M instructions
    of Python on the thesis log), for int samples; python_fit_backoff is the reference."""
    found = _fit_backoff(samples, per_call_ms)
    # None: samples the compiled fit does not take (see native/src/fits.rs)
    return found if found is not None else python_fit_backoff(samples, per_call_ms)


def python_fit_backoff(samples, per_call_ms: float):
    """`fit_backoff` in Python, the reference."""
    firsts = (25, 50, 75, 100, 125, 150, 200, 250, 300, 400, 500, 750, 1000, 1500, 2000, 3000)
    factors = (1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0)
    caps = (60000, 16000, 8000, 4000, 2000, 1000, 500)      # ties go to the largest
    top = max(n for n, _ in samples)
    groups = [_AbsoluteErrors(n, waits) for n, waits in _waits_by_polls(samples).items()]
    best = None
    for first in firsts:
        for factor in factors:
            for cap in caps:
                if cap < first:
                    continue
                sums, gap, total, capped = [0.0], float(first), 0.0, False
                for _ in range(top):
                    total += gap + per_call_ms
                    sums.append(total)
                    # round() of a float is an int; the cap by a conditional expression:
                    # a builtin call more per step of 784 schedules was a third of the fit
                    # (issue 30).
                    grown = round(gap * factor)
                    capped = capped or (grown > cap and len(sums) <= top)   # gap j+1 is used
                    gap = grown if grown < cap else cap
                score = 0.0   # a loop, not sum(): as in python_closed_loop_clients
                for g in groups:
                    score += g.total(sums[g.polls])
                score /= len(samples)
                if best is None or score < best[0]:
                    best = (score, first, factor, cap, sums, capped)
    _, first, factor, cap, sums, capped = best
    errors = sorted(abs(sums[n] - w) for n, w in samples)
    return first, factor, cap, errors[len(errors) // 2], capped


_fit_backoff = extension.compiled_else("fit_backoff", python_fit_backoff)


def _waits_by_polls(samples) -> dict[int, list]:
    groups: dict[int, list] = {}
    for n, wait in samples:
        groups.setdefault(n, []).append(wait)
    return groups


class _AbsoluteErrors:
    """The ready_waits of the requests answered on one poll: the summed |x - wait| over
    them for any x, from their prefix sums (sorted waits below x count x - wait, the
    rest wait - x)."""

    def __init__(self, polls: int, waits: list):
        self.polls = polls
        self.waits = sorted(waits)
        self.prefix = [0]
        for wait in self.waits:
            self.prefix.append(self.prefix[-1] + wait)

    def total(self, x: float) -> float:
        below = bisect.bisect_right(self.waits, x)
        return (x * (2 * below - len(self.waits)) + self.prefix[-1] - 2 * self.prefix[below])


# request_columns' lists given sorted (calibrate's service times and own work).
SORTED_COLUMNS = ("auth", "request", "put_request", "per_poll", "done_success", "done_aborted",
                  "own_put", "own_get")


def python_request_columns(reqs: list[dict], dpm_calls: list[dict]) -> dict:
    """What calibrate reads of each put/get request record (and of the DPM calls, for the
    fast threads), in one pass per record instead of one per value: the reference of
    `request_columns` (native/src/calibrate_columns.rs, issue 30: ~a dozen Python passes
    over the same records were most of calibrate's ~200 M instructions on the thesis
    log). The lists keep the records' order but SORTED_COLUMNS', which are sorted: calibrate
    takes their medians and resamples them (sorted in Rust they cost calibrate no sort).

    whole_seconds: every start on a whole second; arrivals: (accept else DP092, op,
    client host's index), sorted (calibrate adds the few early ones and sorts again, in one
    pass), with hosts, the client names (None or "" as "?") by first
    appearance; accepted: whether any request had its accept line; ended, gets, failed_early, procs, proc_failed, aborted, incomplete,
    sync_gets (gets with no processing run that succeeded), queued (> 10 ms): counts;
    files: the median nfiles (0 or None as 1); auth, request, put_request, per_poll,
    done_success, done_aborted, transfer, gap (get_gap): the values known;
    proc_put/proc_get: the processing times; own_put/own_get: the own work of the runs
    with their name-server calls linked; samples: (polls, ready_wait) of at most 40
    polls; intervals: the processing runs known (proc_interval); proc_overlap and
    fast_overlap: the most processing runs, and fast_calls, at once."""
    hosts: dict[str, int] = {}
    arrivals, nfiles = [], []
    cols: dict[str, list] = {name: [] for name in (
        "auth", "request", "put_request", "per_poll", "done_success", "done_aborted",
        "proc_put", "proc_get", "own_put", "own_get", "samples", "transfer", "gap")}
    counts = dict.fromkeys(("ended", "gets", "failed_early", "procs", "proc_failed", "aborted",
                            "incomplete", "sync_gets", "queued"), 0)
    whole_seconds, accepted = True, False
    intervals = []
    for r in reqs:
        op, status, started, proc = r["op"], r["status"], r["started"], r["proc_ms"]
        whole_seconds = whole_seconds and started % 1000 == 0
        at = started
        if r["accepted"] is not None:
            at, accepted = r["accepted"], True
        arrivals.append((at, op, hosts.setdefault(r["client"] or "?", len(hosts))))
        if r["ended"] is not None:
            counts["ended"] += 1
        nfiles.append(r["nfiles"] or 1)
        polls = r["polls"]
        if op == "get":
            counts["gets"] += 1
            if proc is None and status == "success":
                counts["sync_gets"] += 1
        if status == "failed" and r["queue_ms"] is None and proc is None and not polls:
            counts["failed_early"] += 1
        if proc is not None:
            counts["procs"] += 1
            counts["proc_failed"] += status == "failed"
            cols["proc_" + op].append(proc)
            if r.get("ns_ms") is not None and (r.get("ns_calls") or 0) >= (r["nfiles"] or 1):
                cols["own_" + op].append(max(1, proc - r["ns_ms"] - NET_MS * r["ns_calls"]))
        counts["aborted"] += status == "aborted"
        counts["incomplete"] += status == "incomplete"
        if r["auth_ms"] is not None:
            cols["auth"].append(r["auth_ms"])
        if r["request_ms"] is not None:
            cols["request"].append(r["request_ms"])
            if op == "put":
                cols["put_request"].append(r["request_ms"])
        if polls:
            cols["per_poll"].append(int(round(r["poll_ms"] / polls)))
            if r["ready_wait_ms"] is not None and polls <= 40:
                cols["samples"].append((polls, r["ready_wait_ms"]))
        if r["done_ms"] is not None and status in ("success", "aborted"):
            cols["done_" + status].append(r["done_ms"])
        if r["transfer_ms"] is not None:
            cols["transfer"].append(r["transfer_ms"])
        gap = get_gap(r)
        if gap is not None:
            cols["gap"].append(gap)
        interval = proc_interval(r)
        if interval is not None:
            intervals.append(interval)
        counts["queued"] += (r["queue_ms"] or 0) > 10
    nfiles.sort()
    arrivals.sort()
    for name in SORTED_COLUMNS:
        cols[name].sort()
    return dict(cols, **counts, whole_seconds=whole_seconds, accepted=accepted, arrivals=arrivals,
                hosts=list(hosts), files=nfiles[len(nfiles) // 2] if nfiles else 1,
                intervals=len(intervals), proc_overlap=max_overlap(intervals),
                fast_overlap=max_overlap(fast_calls(reqs, dpm_calls)))


request_columns = extension.compiled_else("request_columns", python_request_columns)


def python_call_columns(requests: list[dict], calls: list[dict]) -> dict:
    """What calibrate takes of the records besides request_columns' values, one pass over
    the requests and one over the calls: the reference of `call_columns`
    (native/src/calibrate_columns.rs, issue 30: eight Python filters over the same ~3 k
    requests and ~3 k calls were ~20 M instructions of calibrate on the thesis log).

    reqs: the put/get requests with their DP092 (started not None); dpm: the DPM calls;
    early: each DPM put/get with a start (refused before its token) as (its instant,
    started less its auth, op, client, None or "" as "?"); plain: how many DPM
    ping/getpools, plain_ms: their known durations, sorted; the name-server calls with a
    duration: statg, their statg durations sorted; creates: (started, ended, path or None)
    of their creates that ended; ns_threads: how many have a thread id (>= 0), ns_ids and
    fast_ids: the highest thread id + 1 on them and on the DPM calls (0: none)."""
    reqs = [r for r in requests if r.get("op") in REQUEST_STEPS and r.get("started") is not None]
    dpm, early, plain_ms, statg, creates = [], [], [], [], []
    plain = ns_threads = 0
    fast_ids = ns_ids = 0
    for c in calls:
        daemon = c.get("daemon")
        if daemon == "dpm":
            dpm.append(c)
            op = c["op"]
            if op in REQUEST_STEPS and c["started"] is not None:
                early.append((c["started"] - (c["auth_ms"] or 0), op, c["client"] or "?"))
            elif op in PLAIN_OPS:
                plain += 1
                if c["duration_ms"] is not None:
                    plain_ms.append(c["duration_ms"])
            thread = c.get("thread")
            if thread is not None and thread >= 0 and thread + 1 > fast_ids:
                fast_ids = thread + 1
        elif daemon == "dpns" and c.get("duration_ms") is not None:
            if c["op"] == "statg":
                statg.append(c["duration_ms"])
            elif c["op"] == "creat" and c["ended"] is not None:
                creates.append((c["started"], c["ended"], c.get("path")))
            thread = c.get("thread")
            if thread is not None and thread >= 0:
                ns_threads += 1
                if thread + 1 > ns_ids:
                    ns_ids = thread + 1
    plain_ms.sort()
    statg.sort()
    return {"reqs": reqs, "dpm": dpm, "early": early, "plain": plain, "plain_ms": plain_ms,
            "statg": statg, "creates": creates, "fast_ids": fast_ids, "ns_ids": ns_ids,
            "ns_threads": ns_threads}


call_columns = extension.compiled_else("call_columns", python_call_columns)
