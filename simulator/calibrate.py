"""Calibrate the simulator on a log's records (issue 15): a SimConfig that replays the
log's load through the model, and what was estimated, with its uncertainty.

Pure: it takes the request and call records the replay core emits (times in integer
ms, parsers/records.py) and returns a Calibration; nothing here reads files.

What the records give, and how each knob of the model is set from them:
- load: a closed loop (each client host keeps as many requests going as it was seen to,
  starting the next a think time after one ends) when each client's count of requests
  in flight hardly varies; otherwise each put/get (and each put/get refused before it
  had a token) is replayed at its own instant (its accept line, else its DP092), on its
  own client host;
- service times: resampled from the measured durations (auth, the put/get call, a
  status call, putdone/relfiles, abortreq, ping/getpools, name-server statg);
- the name-server lock: a create that starts while no other create is in flight waits
  for no lock, so its duration is the lock's hold time; how many locks (directories)
  share the creates: the count under which the creates' own start instants, each holding
  a lock for a measured hold time, wait as long on average as they did;
- a slow thread's own work: processing time less the name-server call, quantile by
  quantile (the two are taken as rising together, which is what a lock queue does);
- clients: the poll back-off (first delay, factor, cap) that best explains each
  request's number of polls and its ready_wait; the transfer, less the putdone's
  authentication;
- threads: slow threads = the most processing runs seen at once (a lower bound, exact
  once requests queued); fast threads = the larger of the highest thread id + 1 on DPM
  calls and the most put/get, closing and plain calls seen at once; name-server threads
  = the highest thread id + 1 on its calls (all lower bounds: request steps carry no
  thread id in the records, status calls no times of their own).
The statistics are in estimators.py, the fits of each part in fits.py.
What no record shows (the listen backlog, refused connections, network delay, failed
authentications) keeps the model's default, and the estimates say so.
"""

from __future__ import annotations

import bisect
import math
import random
from datetime import datetime, timezone

from dpmstream.simulator.config import SimConfig
from dpmstream.simulator.estimators import (
    mean_interval, sorted_median, sorted_median_interval, subtract_quantiles,
    wilson_interval,
)
from dpmstream.simulator.fits import (
    MIN_SAMPLES, NET_MS, call_columns, closed_loop, directories_for, directory_locks,
    fit_backoff, lock_fit, lock_wait_curve, request_columns,
)
from dpmstream.simulator.service import Dist, Empirical, ServiceTimes

ZERO = Dist(0.0, 0.0)
SPREAD_DIRS = 1_000_000         # every file in a directory of its own
MODEL_DIRS = 500                # directories modelled each with its share and hold, at most
LINKED_SHARE = 0.8              # runs whose name-server calls are linked, for per-request own work
DEFAULT_FTHREADS = 20           # NB_FTHREADS of a DPM installed with its defaults
DEFAULT_DPNS_THREADS = 20       # NB_THREADS of a DPNS installed with its defaults
SHOWN_DIRS = 8                  # directories listed one by one in the estimates
BACKOFF_SAMPLES = 5000          # requests the poll back-off is fitted on, at most


# Estimate, Calibration and LockFit are plain classes, not dataclasses: every report's
# what-if imports them, and a dataclass compiles its generated methods as its module is
# imported (issue 30).

class Estimate:
    """One estimated value, with its 95% interval where it has one and how it was read."""

    __slots__ = ("name", "value", "low", "high", "unit", "how", "n")

    def __init__(self, name: str, value: float, low: float | None = None,
                 high: float | None = None, unit: str = "s", how: str = "", n: int = 0):
        self.name, self.value = name, value
        self.low, self.high = low, high     # 95% interval
        self.unit, self.how, self.n = unit, how, n


class Calibration:
    """calibrate's answer: the SimConfig and how each of its values was estimated."""

    __slots__ = ("config", "estimates", "warnings", "lock_contention", "resolution_ms",
                 "load", "directories")

    def __init__(self, config: SimConfig, estimates: list[Estimate], warnings: list[str],
                 lock_contention: bool, resolution_ms: int, load: str, directories: list):
        self.config, self.estimates, self.warnings = config, estimates, warnings
        self.lock_contention, self.resolution_ms = lock_contention, resolution_ms
        self.load = load                 # "replay": the arrivals as logged; "closed": client streams
        self.directories = directories   # the log's directories, in dir_shares' order


def _dist_estimate(name: str, values, how: str) -> Estimate:
    """The median of a measured distribution with its 95% interval, in seconds. Sorted
    once here (one pass where `values` come sorted, as most do), the median and its
    interval read off it (issue 30: three sorts of each service time were ~8% of
    calibrate)."""
    ordered = sorted(values)
    return _sorted_estimate(name, ordered, how, len(values))


def _sorted_estimate(name: str, ordered: list, how: str, n: int) -> Estimate:
    """`_dist_estimate` of values already sorted, over `n` values."""
    low, high = sorted_median_interval(ordered)
    return Estimate(name, sorted_median(ordered) / 1000, None if low is None else low / 1000,
                    None if high is None else high / 1000, "s", how, n)


def _at_least_1(ordered: list) -> list:
    """Each of `ordered` (sorted) as max(1, value), in place: the values up to 1 are its
    first ones (a max() call per value was ~2 M instructions a pass on the thesis log's
    creates, issue 30)."""
    k = bisect.bisect_right(ordered, 1)
    if k:
        ordered[:k] = [1] * k
    return ordered


LOADS = ("auto", "replay", "closed")
CLOSED_DISPERSION = 0.25


def calibrate(requests: list[dict], calls: list[dict], seed: int = 1,
              load: str = "auto", fast_thread_ids=()) -> Calibration:
    """A SimConfig running these records' load through the model, and the estimates.

    load: "replay" replays each request at its logged instant (an open load: it comes
    whatever the head node does); "closed" runs each client as the number of concurrent
    request streams it kept going, each starting its next request as one ends (a load
    that comes faster when the head node answers faster, like FTS or the thesis's test
    clients); "auto" takes "closed" when each client's in-flight count hardly varies
    (CLOSED_DISPERSION). fast_thread_ids: the thread of every call the DPM's fast threads
    served, when the reader saw them (the records keep none for status calls)."""
    if load not in LOADS:
        raise ValueError(f"load must be one of {', '.join(LOADS)}, not {load!r}")
    # The requests and calls calibrate reads, filtered in one pass (fits.call_columns, compiled).
    calls_col = call_columns(requests, calls)
    reqs = calls_col["reqs"]
    if not reqs:
        raise ValueError("no put or get request with its DP092 in the input: nothing to calibrate on")
    rng = random.Random(seed)
    est: list[Estimate] = []
    warn: list[str] = []
    dpm_calls = calls_col["dpm"]

    # Every value read of the requests in one pass (fits.request_columns, compiled).
    col = request_columns(reqs, dpm_calls)
    resolution = 1000 if col["whole_seconds"] else 1

    # Load: each request, and each put/get refused before its token, at its instant.
    hosts: dict[str, int] = dict(zip(col["hosts"], range(len(col["hosts"]))))
    arrivals = col["arrivals"]
    early = calls_col["early"]
    for at, op, client in early:
        arrivals.append((at, op, hosts.setdefault(client, len(hosts))))
    arrivals.sort()
    t0 = arrivals[0][0] - 1000
    span_s = (arrivals[-1][0] - arrivals[0][0]) / 1000
    # a list made into a tuple: a generator's step each was ~1 M instructions more (issue 30)
    replay = tuple([(at - t0 - NET_MS, op, client) for at, op, client in arrivals])
    est.append(Estimate("arrivals", len(replay), unit="requests",
                        how=f"over {span_s:.1f} s ({len(replay) / max(span_s, 1e-3):.1f}/s), "
                            f"{len(hosts)} client hosts", n=len(replay)))
    dispersion, streams, thinks = closed_loop(reqs)
    closed = dispersion <= CLOSED_DISPERSION if load == "auto" else load == "closed"
    est.append(Estimate("in flight per client, var/mean", dispersion, unit="ratio",
                        how="at its arrivals (Poisson: 1); load modelled as "
                            + (f"a closed loop: {len(hosts)} clients x {streams} streams"
                               if closed else "open: the arrivals replayed at their instants")
                            + ("" if load == "auto" else f" (--load {load})"), n=col["ended"]))

    # Mix and outcomes.
    gets = col["gets"]
    n = len(reqs)
    get_fraction = gets / n
    files = col["files"]
    put_fail = (col["failed_early"] + len(early)) / (n + len(early))
    proc_fail = col["proc_failed"] / col["procs"] if col["procs"] else 0.0
    abort = col["aborted"] / n
    abandon = col["incomplete"] / n
    plain_rate = min(1.0, calls_col["plain"] / n)
    sync_get = gets > 0 and col["sync_gets"] > gets / 2
    for name, value in (("get share", get_fraction), ("put/get refused", put_fail),
                        ("processing failed", proc_fail), ("aborted", abort),
                        ("abandoned (incomplete)", abandon), ("ping/getpools per request", plain_rate)):
        k = round(value * n)
        low, high = wilson_interval(k, n)
        est.append(Estimate(name, value, low, high, "share", "count / requests (Wilson 95%)", n))
    est.append(Estimate("files per request", files, unit="files", how="median nfiles", n=n))
    if sync_get:
        est.append(Estimate("DPM_USE_SYNCGET", 1, unit="", how="most successful gets had no processing run"))

    # Service times.
    svc = {}
    def measured(name, field_name, values, how, fallback_note) -> list:
        """`values`, known and sorted (request_columns sorts its own, fits.SORTED_COLUMNS),
        as the service time `field_name`."""
        if len(values) >= 1:
            svc[field_name] = Empirical(tuple(values))
            est.append(_sorted_estimate(name, values, how, len(values)))
            if len(values) < MIN_SAMPLES:
                warn.append(f"{name}: only {len(values)} values measured")
        else:
            est.append(Estimate(name, getattr(ServiceTimes(), field_name).median_ms / 1000,
                                how=f"not in this log: {fallback_note}"))
        return values
    auth = measured("auth", "auth", col["auth"], "DP092 - accept of put/get",
                    "the model's default")
    # One call time for both in the model: a put's (a synchronous get's also resolves
    # its files in the fast thread, which the model adds).
    of_puts = sync_get and gets < n
    measured("put/get call", "put_call", col["put_request" if of_puts else "request"],
             "request_s" + (" of puts" if of_puts else ""), "default")
    svc["reply"] = ZERO
    per_poll = measured("status call", "status_call", col["per_poll"],
                        "poll_s / polls per request", "default")
    measured("putdone/relfiles", "done_call", col["done_success"], "done_s", "default")
    measured("abortreq", "abort_call", col["done_aborted"], "done_s", "default")
    measured("ping/getpools", "plain_call", calls_col["plain_ms"], "call duration", "default")
    statg = calls_col["statg"]
    measured("ns statg", "dpns_statg", statg, "DPNS call duration", "default")

    # The name-server lock: one per directory, each read from its own creates.
    creates = calls_col["creates"]
    lock = _calibrate_locks(creates, svc, est, warn, rng)

    # A slow thread's own work: processing less the name-server calls and their answers,
    # request by request where the calls are linked to it (ns_s), else quantile by quantile.
    for op, pre_field, ns_values in (("put", "proc_put_pre", [e - s for s, e, _ in creates]),
                                     ("get", "proc_get_pre", statg)):
        recs, linked = col["proc_" + op], col["own_" + op]
        if not recs:
            continue
        if len(linked) >= LINKED_SHARE * len(recs):
            own = tuple(linked)
            how = "proc_s less its own linked name-server calls (ns_s), request by request"
        else:
            own = subtract_quantiles(recs, ns_values,
                                     offset=NET_MS if ns_values else 0, floor=1)
            how = "proc_s less the name-server call, quantile by quantile (calls not linked)"
            if ns_values:
                warn.append(f"only {len(linked)} of {len(recs)} {op} runs have their name-server "
                            f"calls linked (is --host the name the name server sees, or give "
                            f"--head-alias?): their own work is taken quantile by quantile")
        svc[pre_field] = Empirical(own)
        est.append(_dist_estimate(f"proc_{op} own work", own, how))
    svc["proc_post"] = ZERO
    svc["select"] = ZERO
    svc["slow_pickup"] = ZERO

    # Clients: the poll schedule and the transfer.
    status_med = sorted_median(per_poll) if per_poll else 2
    auth_med = sorted_median(auth) if auth else 20
    per_call = auth_med + status_med + 2 * NET_MS
    samples = col["samples"]
    first, factor, cap = 125, 2.0, 4000
    if len(samples) > BACKOFF_SAMPLES:
        samples = random.Random(seed).sample(samples, BACKOFF_SAMPLES)
    if len(samples) >= 5:
        first, factor, cap, mae, capped = fit_backoff(samples, per_call)
        top = max(k for k, _ in samples)
        limit = (f"at most {cap} ms apart" if capped else
                 f"no cap reached in {top} polls (taken to grow on, up to {cap} ms)")
        est.append(Estimate("poll back-off", first / 1000, unit="s",
                            how=f"first poll {first} ms after the reply, x{factor:g} each time, "
                                f"{limit}; median error of ready_wait {mae:.0f} ms",
                            n=len(samples)))
        if not capped:
            warn.append(f"the clients' poll back-off was never seen past {top} polls: a "
                        f"what-if with longer waits assumes its growth goes on")
    else:
        warn.append("too few requests answered SUCCESS after polling: the model's default "
                    "back-off (125 ms, x2, at most 4 s) is kept")
    transfers = col["transfer"]
    if transfers:
        own_transfer = subtract_quantiles(transfers, auth, offset=2 * NET_MS, floor=1)
        svc["transfer"] = Empirical(own_transfer)
        est.append(_dist_estimate("transfer", own_transfer,
                                  "transfer_s less the putdone's authentication"))
    # A get has no transfer_s: its pause before relfiles is what its total leaves.
    gaps = col["gap"]
    if gaps:
        own_gap = subtract_quantiles(gaps, auth, offset=2 * NET_MS, floor=1)
        svc["get_transfer"] = Empirical(own_gap)
        est.append(_dist_estimate("get: SUCCESS -> relfiles", own_gap,
                                  "total_s - auth - request - ready_wait - done, less the "
                                  "relfiles' authentication"))
    elif transfers:
        svc["get_transfer"] = svc["transfer"]

    # Threads.
    intervals = col["intervals"]
    sthreads = max(1, col["proc_overlap"]) if intervals else 20
    queued = col["queued"]
    est.append(Estimate("slow threads", sthreads, unit="threads",
                        how=f"most processing runs at once ({queued} of {n} requests waited > 10 ms "
                            f"for one: {'exact' if queued > n / 20 else 'a lower bound'})"))
    if not intervals:
        warn.append("no processing run measured: slow threads default to 20")
    by_ids = calls_col["fast_ids"]
    if fast_thread_ids:           # every fast-thread call, status calls included
        by_ids = max(by_ids, max(fast_thread_ids) + 1)
    busy = col["fast_overlap"]
    # The ids seen bound the pool from below only: a pool the log never filled is taken at
    # least as large as the DPM default, else a what-if with more calls starves it.
    fthreads = max(by_ids, busy, DEFAULT_FTHREADS)
    est.append(Estimate("fast threads", fthreads, unit="threads",
                        how=(f"the larger of the highest thread id + 1 seen on the fast "
                             f"threads ({by_ids}"
                             + (", status calls included" if fast_thread_ids else
                                ", of plain calls only: status calls are not in the records")
                             + f") and the most put/get, closing and plain calls at once "
                               f"({busy}), at least the DPM default {DEFAULT_FTHREADS}; "
                               f"--current-fthreads sets it")))
    # The ids seen bound the pool from below only: a pool the log never filled is taken at
    # least as large as the DPNS default, else a what-if with more callers starves it.
    dpns_threads = max(calls_col["ns_ids"], DEFAULT_DPNS_THREADS)
    est.append(Estimate("name-server threads", dpns_threads, unit="threads",
                        how=(f"the highest thread id + 1 of {calls_col['ns_threads']} DPNS calls "
                             f"({calls_col['ns_ids']}: a lower bound), at least "
                             f"the DPNS default {DEFAULT_DPNS_THREADS}")))
    est.append(Estimate("listen backlog", 50, unit="connections",
                        how="not in any log (refused connections leave no line): the model's default"))

    base = ServiceTimes()
    service = ServiceTimes(**{name: svc.get(name, getattr(base, name))
                              for name in ServiceTimes.FIELDS})
    start = datetime.fromtimestamp(t0 / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    if closed and thinks:
        ordered = sorted(thinks)
        svc_think = Empirical(tuple(ordered))
        est.append(_sorted_estimate("client think time", ordered,
                                    "a client's next request less the end of its last", len(ordered)))
        service = service.replace(think=svc_think)
    config = SimConfig(
        clients=len(hosts), arrivals=None if closed else replay,
        concurrency=max(1, streams), requests=len(replay) if closed else None, files=files, get_fraction=get_fraction,
        plain_rate=plain_rate, fthreads=fthreads, sthreads=sthreads, dpns_threads=dpns_threads,
        sync_get=sync_get, accept_lines=col["accepted"],
        put_fail_rate=put_fail, proc_fail_rate=proc_fail, abort_rate=abort,
        abandon_rate=abandon, done_fail_rate=0.0, seed=seed, start=start, tz="UTC",
        jitter_rate=0.0, poll_first_ms=first, poll_factor=factor, poll_max_ms=cap,
        service=service.replace(dpns_creat_dirs=lock.holds), dirs=lock.dirs,
        dir_shares=lock.shares,
    )
    config.validate()
    return Calibration(config, est, warn, lock.contention, resolution,
                       "closed" if closed else "replay", lock.directories)


class LockFit:
    """The name-server lock as calibrated: the SimConfig and ServiceTimes values it sets."""

    __slots__ = ("dirs", "shares", "holds", "directories", "contention")

    def __init__(self, dirs: int | None = None, contention: bool = False):
        self.dirs = dirs                         # SimConfig.dirs
        self.shares: tuple | None = None         # SimConfig.dir_shares
        self.holds: tuple = ()                   # ServiceTimes.dpns_creat_dirs
        self.directories: list = []
        self.contention = contention


NO_LOCK_ASSUMED = ("the prediction then assumes no lock: a put's processing is taken whole "
                   "as measured, whatever the number of slow threads running at once (a "
                   "what-if adding slow threads where a lock is the bottleneck is optimistic)")


def _calibrate_locks(creat_calls, svc: dict, est: list, warn: list, rng) -> LockFit:
    """A lock per directory named by the creates' paths, each with its own hold time read
    from its own queue (fits.lock_holds) and its share of the creates; creat_calls:
    (started, ended, path) of each create that ended."""
    if not creat_calls:
        svc["dpns_creat"] = ZERO
        warn.append("the name-server lock cannot be calibrated: no create in the input (no "
                    "DPNS log given?), so no path names a directory; " + NO_LOCK_ASSUMED)
        est.append(Estimate("ns creat lock", math.nan, unit="",
                            how="not calibrated: no name-server create in the input"))
        return LockFit(dirs=SPREAD_DIRS)
    locks, pathless = directory_locks(creat_calls)
    if not locks:
        warn.append("the name-server creates name no path (no NS098 line?): the lock cannot "
                    "be calibrated per directory; the prediction assumes the creates share "
                    "the number of locks that best explains their waits (one queue's hold)")
        return _single_queue_lock([(start, end) for start, end, _ in creat_calls],
                                  svc, est, rng)
    if pathless:
        warn.append(f"{pathless} of {len(creat_calls)} name-server creates named no path: "
                    f"left out of the lock fit")
    # Each lock's holds sorted once: the pooled hold merges them, each lock's own hold and
    # its median read them (issue 30).
    holds = [sorted(lock.holds) for lock in locks]
    pooled = _at_least_1(sorted([h for ordered in holds for h in ordered]))
    svc["dpns_creat"] = Empirical(tuple(pooled))
    est.append(_sorted_estimate("ns creat lock hold", pooled,
                                f"over {len(locks)} directories, each create's hold from its own "
                                f"directory's queue: end - max(start, previous end there)",
                                len(pooled)))
    # and their durations, for the pooled estimate (merged) and each lock's median
    lock_durations = [sorted(lock.durations) for lock in locks]
    durations = sorted([d for each in lock_durations for d in each])
    est.append(_sorted_estimate("ns creat (wait + hold)", durations, "DPNS call duration",
                                len(durations)))
    rho = [lock.utilisation() for lock in locks]
    fit = LockFit(contention=max(rho) >= 0.5)
    if len(locks) <= MODEL_DIRS:
        fit.shares = tuple(float(len(lock.creats)) for lock in locks)
        fit.holds = tuple(Empirical(tuple(_at_least_1(list(ordered))))
                          if len(ordered) >= MIN_SAMPLES else svc["dpns_creat"]
                          for ordered in holds)
        fit.directories = [lock.name for lock in locks]
        how = "each modelled with its share of the creates and its own hold"
    else:
        fit.dirs = len(locks)
        how = (f"more than {MODEL_DIRS}: modelled as {len(locks)} directories taken in turn, "
               f"all with the pooled hold")
    est.append(Estimate("directories with creates", len(locks), unit="dirs", how=how,
                        n=len(creat_calls)))
    for lock, load, ordered, each in list(zip(locks, rho, holds, lock_durations))[:SHOWN_DIRS]:
        low, high = sorted_median_interval(ordered)
        est.append(Estimate(f"lock {lock.name}", sorted_median(ordered) / 1000,
                            None if low is None else low / 1000,
                            None if high is None else high / 1000, "s",
                            f"hold p50 from its own queue; {len(lock.creats)} creates "
                            f"({len(lock.creats) / len(creat_calls):.0%}), wait + hold p50 "
                            f"{sorted_median(each):.0f} ms, offered load {load:.2f}",
                            len(lock.holds)))
    if len(locks) > SHOWN_DIRS:
        est.append(Estimate("other directories", len(locks) - SHOWN_DIRS, unit="dirs",
                            how=f"offered load at most {max(rho[SHOWN_DIRS:]):.2f}"))
    for lock, load in zip(locks, rho):
        if load >= 1.0:
            warn.append(f"directory {lock.name}: creates came faster than its lock serves "
                        f"them (offered load {load:.2f}): its queue grew while they did")
    return fit


def _single_queue_lock(creats, svc: dict, est: list, rng) -> LockFit:
    """Creates with no path: the hold as if one queue served them all, and the number of
    directories under which their start instants wait as long as they did."""
    hold, how = lock_fit(creats)
    mean_hold = sum(hold) / len(hold) if hold else 0.0
    if hold:
        svc["dpns_creat"] = Empirical(tuple(sorted(max(1, h) for h in hold)))
        est.append(_dist_estimate("ns creat lock hold", hold, how))
    durations = [e - s for s, e in creats]
    est.append(_dist_estimate("ns creat (wait + hold)", durations, "DPNS call duration"))
    wait = sum(durations) / len(durations) - mean_hold
    curve = lock_wait_curve(creats, hold or [1], rng)
    dirs_found = directories_for(wait, curve)
    low = high = None
    if len(durations) >= MIN_SAMPLES:
        w_low, w_high = mean_interval(durations)
        more, fewer = directories_for(w_low - mean_hold, curve), directories_for(w_high - mean_hold, curve)
        low = fewer if fewer is not None else math.inf
        high = more if more is not None else math.inf
    curve_text = ", ".join(f"{d}: {w:.0f}" for d, w in curve if d in (1, 2, 3, 5, 10, 50))
    if dirs_found is None:
        est.append(Estimate("directories sharing creates", math.inf, low, high, "dirs",
                            f"no contention: creates waited {wait:.1f} ms on average "
                            f"(ms of wait by directories: {curve_text})", len(creats)))
        return LockFit(dirs=SPREAD_DIRS)
    est.append(Estimate("directories sharing creates", dirs_found, low, high, "dirs",
                        f"creates waited {wait:.1f} ms on average; their start instants "
                        f"against the hold give (ms of wait by directories) {curve_text}",
                        len(creats)))
    return LockFit(dirs=max(1, int(round(dirs_found))), contention=True)



