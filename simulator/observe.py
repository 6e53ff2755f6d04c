"""What each fitted parameter was fitted to, measured the same way on the log and on the
model (issue 29): `dpmstream whatif` prints the two side by side, so that a parameter the
model does not reproduce shows, and fails the run when a median misses by over 10%.

An Observation is a function of (request records, call records) in integer ms, applied
unchanged to the records read from the log and to the model's ground truth at the
current settings. A checked one gives the values whose median is compared: the model
misses when it is more than 10% off the log's median and outside that median's 95%
interval (a directory's few creates have a wide one). `growth` tells whether a queue grows over a run: the p50 of a phase in
the first quarter of the arrivals against the last quarter.
"""

from __future__ import annotations

# Callable from collections.abc, not typing: whatif alone imports typing through this
# module, ~2.5 ms CPU of its start (issue 30).
from collections.abc import Callable
from operator import itemgetter

from dpmstream.parsers.plain import Frozen, Value
from dpmstream.simulator.estimators import max_overlap, median, median_interval, quantile
from dpmstream.simulator.fits import (
    NET_MS, busiest_first, directory_groups, get_gap, lock_holds, proc_interval,
)
from dpmstream.simulator.identities import Namespace

TOLERANCE = 0.10
GROWS = 1.5             # last quarter's p50 at least this times the first's ...
GROWS_BY_MS = 100       # ... and at least this much longer: the queue grows


# Plain classes (parsers/plain.py), not dataclasses: importing dataclasses (inspect, ast,
# dis, tokenize) was ~31 M instructions of whatif's ~1,010 M on the thesis log, for these
# two alone (issue 30). They keep the dataclasses' ways: compared and shown by their
# fields, Observation set once and hashed.

class Observation(Frozen):
    """One thing the calibration was fitted to, measured alike in the log and the model."""

    __slots__ = FIELDS = ("parameter", "what", "measure", "unit", "checked", "compiled")

    def __init__(self, parameter: str, what: str, measure: Callable[[list, list], object],
                 unit: str = "ms", checked: bool = True,
                 compiled: tuple[str, tuple[str, ...]] = ("", ())):
        put = object.__setattr__
        put(self, "parameter", parameter)   # what the calibration set from it
        put(self, "what", what)             # what is observed
        put(self, "measure", measure)       # values (checked), else one number or None
        put(self, "unit", unit)
        put(self, "checked", checked)       # a median: the model must reproduce it within 10%
        # Its twin in the compiled model run (native/src/model_summary.rs `Measure::named`):
        # (kind, directory names).
        put(self, "compiled", compiled)

    def summary(self, measured) -> float | None:
        if not self.checked:
            return measured
        return median(measured) if measured else None


class ObservationLine(Value):
    """An Observation in the log and in the model at the current settings."""

    __slots__ = FIELDS = ("obs", "logged", "modelled", "ok")

    def __init__(self, obs: Observation, logged: float | None, modelled: float | None, ok: bool):
        self.obs, self.logged, self.modelled, self.ok = obs, logged, modelled, ok


def _p50(values) -> list:
    """The values a median is taken of (those known)."""
    return [v for v in values if v is not None]


class Records(list):
    """Records with the views the observations take of them, each made once: some twenty
    observations filter the same requests and creates (see `records`)."""

    __slots__ = ("views",)

    def __init__(self, items=()):
        super().__init__(items)
        self.views = {}


def records(requests, calls) -> tuple[Records, Records]:
    """The records as Records, for `measure_all` and `growth` on the same run."""
    return (requests if isinstance(requests, Records) else Records(requests),
            calls if isinstance(calls, Records) else Records(calls))


def _view(items, key, make):
    """`make()`, kept on Records (read only: every taker shares it)."""
    views = getattr(items, "views", None)
    if views is None:
        return make()
    if key not in views:
        views[key] = make()
    return views[key]


def _reqs(requests, op=None):
    return _view(requests, ("reqs", op), lambda: [
        r for r in requests if r.get("op") in ("put", "get") and (op is None or r["op"] == op)])


def _creats(calls):
    return _view(calls, "creats", lambda: [
        c for c in calls if c.get("daemon") == "dpns" and c.get("op") == "creat"
        and c.get("ended") is not None and c.get("started") is not None])


def _directory_groups(calls) -> list[tuple[str, list, list]]:
    """fits.directory_groups of the creates (compiled where built): each directory's
    name, (started, ended) creates in the order of the calls and lock_holds, busiest
    first."""
    return _view(calls, "directory groups", lambda: directory_groups(
        [(c["started"], c["ended"], c.get("path")) for c in _creats(calls)])[0])


def _creats_by_directory(calls) -> dict[str, list[tuple[int, int]]]:
    """directory -> (started, ended) of its creates, in the order of the calls (the
    directories busiest first)."""
    return _view(calls, "creats by directory", lambda: {
        name: creats for name, creats, _ in _directory_groups(calls)})


def _own_work(op):
    def measure(requests, calls):
        return _p50(r["proc_ms"] - r["ns_ms"] - NET_MS * r["ns_calls"] for r in _reqs(requests, op)
                    if r["proc_ms"] is not None and r.get("ns_ms") is not None and r.get("ns_calls"))
    return measure


def _arrival_rate(requests, calls):
    stamps = [r["started"] for r in _reqs(requests) if r["started"] is not None]
    if len(stamps) < 2:
        return None
    return len(stamps) / max(1e-3, (max(stamps) - min(stamps)) / 1000)


def _holds_by_directory(calls) -> dict[str, list[int]]:
    """directory -> lock_holds of its creates (the pooled hold and each lock's share them)."""
    return _view(calls, "holds by directory", lambda: {
        name: holds for name, _, holds in _directory_groups(calls)})


def _pooled_hold(requests, calls):
    # Each directory's own queue, in fits.directory_locks' order.
    holds = _holds_by_directory(calls)
    groups = busiest_first(_creats_by_directory(calls))
    return _p50(h for name, _ in groups for h in holds[name])


def _directory(names: tuple[str, ...], what: str):
    """The creates under one directory (the log's name or the model's for it): their
    holds (values), their share of all creates, or their wait + hold p50."""
    def measure(requests, calls):
        creats = _creats(calls)
        by_directory = _creats_by_directory(calls)
        # Which name a create came under does not matter: holds sort, the rest count.
        present = [name for name in dict.fromkeys(names) if name in by_directory]
        if what == "hold":
            if len(present) == 1:      # one queue: its holds as the pooled hold took them
                return _holds_by_directory(calls)[present[0]]
            return lock_holds([pair for name in present for pair in by_directory[name]])
        mine = [pair for name in present for pair in by_directory[name]]
        if what == "share":
            return len(mine) / len(creats) if creats else None
        return median([e - s for s, e in mine]) if mine else None
    return measure


def _most_runs(requests, calls):
    intervals = [iv for iv in (proc_interval(r) for r in _reqs(requests)) if iv is not None]
    return float(max_overlap(intervals)) if intervals else None


def observations(directories: list[str], shown: int) -> list[Observation]:
    """The observations of a calibration whose lock per directory k is `directories[k]`."""
    out = [
        Observation("arrivals", "put/get requests per s", _arrival_rate, "/s", checked=False,
                    compiled=("arrivals", ())),
        Observation("get share", "share of gets", lambda rq, c: (
            sum(1 for r in _reqs(rq) if r["op"] == "get") / max(1, len(_reqs(rq)))),
            "share", checked=False, compiled=("get share", ())),
        Observation("auth", "auth_s p50", lambda rq, c: _p50(r["auth_ms"] for r in _reqs(rq)),
                    compiled=("auth", ())),
        Observation("put/get call", "request_s p50",
                    lambda rq, c: _p50(r["request_ms"] for r in _reqs(rq)), compiled=("request", ())),
        Observation("status call", "poll_s / polls p50", lambda rq, c: _p50(
            r["poll_ms"] / r["polls"] for r in _reqs(rq) if r["polls"]), compiled=("poll each", ())),
        Observation("putdone/relfiles", "done_s p50 of successes", lambda rq, c: _p50(
            r["done_ms"] for r in _reqs(rq) if r["status"] == "success"),
            compiled=("done of successes", ())),
        Observation("transfer", "transfer_s p50", lambda rq, c: _p50(r["transfer_ms"] for r in _reqs(rq)),
                    compiled=("transfer", ())),
        Observation("get: SUCCESS -> relfiles", "total - the other phases p50 of gets",
                    lambda rq, c: _p50(map(get_gap, _reqs(rq, "get"))), compiled=("get gap", ())),
        Observation("proc_put own work", "proc_s - ns_s p50 of puts", _own_work("put"),
                    compiled=("own work put", ())),
        Observation("proc_get own work", "proc_s - ns_s p50 of gets", _own_work("get"),
                    compiled=("own work get", ())),
        Observation("ns statg", "statg duration p50", lambda rq, c: _p50(
            x["duration_ms"] for x in c if x.get("daemon") == "dpns" and x.get("op") == "statg"),
            compiled=("statg", ())),
        Observation("ns creat lock hold", "hold p50, each directory's own queue", _pooled_hold,
                    compiled=("pooled hold", ())),
    ]
    out.append(Observation("directories' locks", "creates' wait + hold p50, all directories",
                           lambda rq, c: [x["ended"] - x["started"] for x in _creats(c)],
                           compiled=("creates wait hold", ())))
    for k, name in enumerate(directories[:shown]):
        names = (name, Namespace.weighted_dir(k))
        out.append(Observation(f"lock {name}", "its creates' hold p50", _directory(names, "hold"),
                               compiled=("lock hold", names)))
        out.append(Observation(f"lock {name}", "its share of the creates",
                               _directory(names, "share"), "share", checked=False,
                               compiled=("lock share", names)))
        # Its wait alone swings with the few creates one directory has: shown, and
        # checked over all directories above.
        out.append(Observation(f"lock {name}", "its creates' wait + hold p50",
                               _directory(names, "wait"), checked=False,
                               compiled=("lock wait", names)))
    out += [
        Observation("slow threads", "most processing runs at once", _most_runs, "threads",
                    checked=False, compiled=("most runs", ())),
        Observation("poll back-off", "polls per request p50", lambda rq, c: _p50(
            r["polls"] for r in _reqs(rq) if r["ready_wait_ms"] is not None), "polls",
            compiled=("polls", ())),
    ]
    return out


def measure_all(obs: list[Observation], requests, calls) -> list:
    requests, calls = records(requests, calls)
    return [o.measure(requests, calls) for o in obs]


def summaries(obs: list[Observation], requests, calls) -> list:
    """Each observation's summary on the records (what a model run is compared by)."""
    return [o.summary(v) for o, v in zip(obs, measure_all(obs, requests, calls))]


def compare(obs: list[Observation], logged: list, modelled_by_seed: list[list],
            floor_ms: float) -> list[ObservationLine]:
    """Each observation on the log beside the model's (the median over its seeds of
    each run's `summaries`); a checked one is ok within 10% (or `floor_ms`), or inside
    the 95% interval of the log's median."""
    lines = []
    for i, o in enumerate(obs):
        seeds = [seed[i] for seed in modelled_by_seed if seed[i] is not None]
        modelled = median(seeds) if seeds else None
        # A checked one's values sorted once for its median and its interval, which each
        # sort what they get: a sorted list sorts in one pass (issue 30).
        measured = sorted(logged[i]) if o.checked and logged[i] else logged[i]
        value = o.summary(measured)
        ok = True
        if o.checked and value is not None:
            floor = floor_ms if o.unit == "ms" else 0.0
            low, high = median_interval(measured)
            ok = modelled is not None and (
                abs(modelled - value) <= max(TOLERANCE * abs(value), floor)
                or (low is not None and low <= modelled <= high))
        lines.append(ObservationLine(o, value, modelled, ok))
    return lines


def growth(requests: list[dict], calls: list[dict]) -> dict[str, tuple[float, float]]:
    """Per queue-bearing phase, (p50 in the first quarter of the arrivals, p50 in the
    last), ms: a queue that grows over the run shows as a last quarter far above the first."""
    reqs = sorted((r for r in _reqs(requests) if r["started"] is not None), key=itemgetter("started"))
    out = {}
    for field in ("queue_ms", "proc_ms"):
        phase = field[:-3]
        values = [v for r in reqs if (v := r[field]) is not None]
        if len(values) >= 8:
            q = len(values) // 4
            out[phase] = (quantile(values[:q], 0.5), quantile(values[-q:], 0.5))
    creats = sorted((c["started"], c["ended"] - c["started"]) for c in _creats(calls))
    if len(creats) >= 8:
        q = len(creats) // 4
        out["ns creat"] = (quantile([d for _, d in creats[:q]], 0.5),
                           quantile([d for _, d in creats[-q:]], 0.5))
    return out


def grows(first: float, last: float) -> bool:
    return last >= GROWS * first and last - first >= GROWS_BY_MS
