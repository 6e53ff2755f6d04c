"""What the records say about where the time goes: pure computations, no I/O, no plotting.

Records are the pipeline's dicts (parsers/records.py): times and durations in integer
milliseconds, None where a step did not happen. Everything here is derived from the
records alone, and says so where the records cannot tell (see `Gaps`).
"""

from __future__ import annotations

import bisect
from itertools import accumulate, repeat
from operator import itemgetter, mul, sub
from collections import Counter, defaultdict

from dpmstream.parsers import extension
from dpmstream.parsers.records import PHASES, STATUSES
from dpmstream.streams.sinks.summary import Series

# concurrency's step function compiled (native/src/steps.rs); the Python below is the reference
_compiled_steps = extension.compiled("concurrency_steps")

# The stacked breakdown of a request's time, in the order the steps happen. They do not
# overlap, and for every request they add up to total_ms ("between" takes the rest).
SEGMENTS = (
    ("auth", "authentication"),
    ("request", "put/get call"),
    ("queue", "waiting for a slow thread"),
    ("proc_ns", "processing: name server"),
    ("proc", "processing"),
    ("after_proc", "after processing: until the client's next poll"),
    ("transfer", "transfer"),
    ("done", "putdone/relfiles/abortreq"),
    ("between", "between steps (client side)"),
)
SEGMENT_LABELS = dict(SEGMENTS)

# Record fields shown as distributions, with the words the summary uses for them.
PHASE_FIELDS = (
    ("auth_ms", "authentication"), ("request_ms", "the put/get call"),
    ("queue_ms", "waiting for a slow thread"), ("proc_ms", "slow-thread processing"),
    ("poll_ms", "status polls"), ("ready_wait_ms", "waiting until ready"),
    ("transfer_ms", "the transfer"), ("done_ms", "the closing call"),
)
PHASE_WORDS = dict(PHASE_FIELDS)
# Phases that are parts of others (ready_wait contains queue and proc, polls overlap the
# wait): never the headline "dominant" phase.
CONTAINERS = frozenset(("ready_wait_ms", "poll_ms"))
NS_DAEMONS = frozenset(("dpns", "lfc"))
FAST_DAEMON = "dpm"


# -- the per-op breakdown -----------------------------------------------------------------

def segments_of(r: dict) -> dict[str, int] | None:
    """A request's total_ms cut into SEGMENTS (ms), or None when it has no total."""
    parts = _segment_parts(r)
    return None if parts is None else dict(zip(SEGMENT_NAMES, parts))


SEGMENT_NAMES = tuple(name for name, _ in SEGMENTS)


def _segment_parts(r: dict) -> tuple[int, ...] | None:
    """segments_of's values in SEGMENTS' order (breakdowns sums them per op). It runs once
    a request: clamps by conditional expressions rather than min() and max() (a builtin
    call parses its arguments each time) and what is left of the total kept as it goes
    (issue 30: 50.7 -> 35.3 M instructions over the thesis log's 2,994 requests)."""
    total = r.get("total_ms")
    if total is None:
        return None
    queue = r.get("queue_ms") or 0
    if queue < 0:    # never negative from an engine (parsers/schema.py)
        queue = 0
    proc = r.get("proc_ms") or 0
    ns = r.get("ns_ms")
    proc_ns = (ns if ns < proc else proc) if ns is not None and ns > 0 else 0
    ready = r.get("ready_wait_ms")
    after = ready - queue - proc if ready is not None else 0
    if after < 0:
        after = 0
    wanted = (r.get("auth_ms") or 0, r.get("request_ms") or 0, queue, proc_ns,
              proc - proc_ns, after, r.get("transfer_ms") or 0, r.get("done_ms") or 0)
    out, left = [], total   # left: what the parts so far leave of the total
    for value in wanted:
        part = value if value < left else left
        if part < 0:
            part = 0
        out.append(part)
        left -= part
    out.append(left if left > 0 else 0)
    return tuple(out)


def python_segment_sums(requests: list[dict]) -> dict:
    """{op: (requests, total_ms, the nine segments' sums, poll_ms, polls)} of the requests
    with a total_ms, op "?" for none: breakdowns' sums, the reference of
    native/src/segments.rs. Each op's requests and segments gathered first, then summed a
    column at a time by sum() in C (issue 30: a list built per request was a third of the
    report's story on the thesis log), each column in the requests' order."""
    rows: dict[str, tuple[list, list]] = {}   # op -> (its requests, their segments)
    for r in requests:
        parts = _segment_parts(r)
        if parts is None:
            continue
        op = r["op"] or "?"
        of_op = rows.get(op)
        if of_op is None:
            of_op = rows[op] = ([], [])
        of_op[0].append(r)
        of_op[1].append(parts)
    return {op: (len(of_op), sum(map(itemgetter("total_ms"), of_op)), list(map(sum, zip(*parts))),
                 summed(of_op, "poll_ms"), summed(of_op, "polls"))
            for op, (of_op, parts) in rows.items()}


# breakdowns' sums compiled where the extension is built (issue 30: ~8 k instructions of
# Python a request for its parts, then ~19 M of the report grouping and summing them per
# op); records it cannot read as ints within ±2^53 (native/src/exact_ints.rs) go the
# Python way.
_segment_sums = extension.compiled_else("segment_sums", python_segment_sums)


# Breakdown and Steps are plain classes, not dataclasses: every report imports them, and a
# dataclass compiles its generated methods as its module is imported (issue 30).

class Breakdown:
    """One op's requests: their summed total_ms cut into SEGMENTS, and their polls."""

    __slots__ = ("op", "requests", "total_ms", "segments", "poll_ms", "polls")

    def __init__(self, op: str, requests: int = 0, total_ms: int = 0,
                 segments: dict | None = None, poll_ms: int = 0, polls: int = 0):
        self.op, self.requests, self.total_ms = op, requests, total_ms
        self.segments = {k: 0 for k, _ in SEGMENTS} if segments is None else segments
        self.poll_ms = poll_ms     # fast-thread time in status polls (overlaps the wait)
        self.polls = polls

    def share(self, segment: str) -> float:
        return self.segments[segment] / self.total_ms if self.total_ms > 0 else 0.0

    def mean_s(self, segment: str) -> float:
        return self.segments[segment] / self.requests / 1000 if self.requests else 0.0


def breakdowns(requests: list[dict]) -> dict[str, Breakdown]:
    """Each op's Breakdown (ops in order), from _segment_sums."""
    out: dict[str, Breakdown] = {}
    sums = _segment_sums(requests)
    for op in sorted(sums):
        count, total_ms, segments, poll_ms, polls = sums[op]
        out[op] = Breakdown(op, requests=count, total_ms=total_ms,
                            segments=dict(zip(SEGMENT_NAMES, segments)), poll_ms=poll_ms, polls=polls)
    return out


def phase_shares(requests: list[dict], op: str, tallied=None) -> dict[str, float] | None:
    """Each of PHASE_FIELDS summed over the op's summed total_ms (the replay table's share
    column); None when the op has no time. Each field's values are read and summed in C
    (summed; issue 30: a Python step per request and field was ~30 M instructions of the
    report on the thesis log). `tallied`: a streams/sinks/summary.Summary that tallied
    these very requests (report/story.py's tallied): each sum is its series' exact sum
    (issue 30: the summing again was ~12 M instructions of a report of the thesis log)."""
    if tallied is None:
        of_op = [r for r in requests if r["op"] == op]
        sums = {k: summed(of_op, k) for k in SHARE_FIELDS}
    else:
        sums = {k: tallied_sum(tallied, op, k) for k in SHARE_FIELDS}
    total = sums.pop("total_ms")
    return {k: v / total for k, v in sums.items()} if total > 0 else None


SHARE_FIELDS = (*PHASE_WORDS, "total_ms")
PHASE_OF_FIELD = dict(PHASES)   # a record field -> its phase in a Summary


def tallied_series(tallied, op: str, fieldname: str) -> Series | None:
    """The op's series of `fieldname` in the Summary `tallied` (None if it has none): every
    value the requests of the op have, where the series is not sampled."""
    return tallied.phases.get((op, PHASE_OF_FIELD[fieldname]))


def tallied_sum(tallied, op: str, fieldname: str) -> int:
    series = tallied_series(tallied, op, fieldname)
    return series.sum if series is not None else 0


def summed(records: list[dict], fieldname: str) -> int:
    """The sum of the records' values of `fieldname` where they have one, in their order,
    read and added in C (map, filter, sum) rather than a Python step per record
    (dict.get mapped over the key repeated: a methodcaller makes a bound method a call).
    filter(None) drops the zeros with the Nones, which adds the same: it tests each value
    in C, where a partial(is_not, None) was a call a value (issue 30)."""
    return sum(filter(None, map(dict.get, records, repeat(fieldname))))


def series_of(values) -> Series:
    s = Series()
    s.extend(values)
    return s


def dominant_phase(requests: list[dict], op: str, tallied=None) -> tuple[str, float] | None:
    shares = phase_shares(requests, op, tallied)
    if shares is None:
        return None
    best = None
    for fieldname, _ in PHASE_FIELDS:
        if fieldname in CONTAINERS:
            continue
        if best is None or shares[fieldname] > best[1]:
            best = (fieldname, shares[fieldname])
    return best


# -- activity over time -------------------------------------------------------------------

SUSTAINED_MS = 50   # how long a level must hold to count as the pool's size


class Steps:
    """A step function: level[i] holds from times[i] to times[i + 1]; times increase
    strictly (concurrency's are the distinct moments a count changes)."""

    __slots__ = ("times", "levels")

    def __init__(self, times: list[int], levels: list[int]):
        self.times, self.levels = times, levels

    def __eq__(self, other) -> bool:   # the compiled steps pinned to the Python ones
        if not isinstance(other, Steps):
            return NotImplemented
        return (self.times, self.levels) == (other.times, other.levels)

    __hash__ = None   # mutable, as a dataclass with eq

    def __repr__(self) -> str:
        return f"Steps(times={self.times!r}, levels={self.levels!r})"

    @property
    def peak(self) -> int:
        return max(self.levels, default=0)

    def sustained_peak(self, min_ms: int = SUSTAINED_MS) -> int:
        """The highest level held for at least `min_ms` at a stretch. Records place a
        slow-thread run to the millisecond and clamp a queue time that would be negative
        to 0, so one run may seem to overlap the next on its thread for a few ms.
        Compiled where the extension is built (python_sustained_peak the reference)."""
        return _sustained_peak(self.times, self.levels, min_ms)

    def time_at_least(self, level: int, t0: int, t1: int) -> int:
        """Milliseconds within [t0, t1) during which the level was >= `level`. Each step
        is clipped by conditional expressions, not min() and max() (issue 30: a builtin
        call parses its arguments each time; the thesis log's 5.5 k slow-thread steps)."""
        total = 0
        times = self.times
        ends = times[1:]
        ends.append(t1)   # the last step holds to t1
        for start, end, lv in zip(times, ends, self.levels):
            if lv < level:
                continue
            a = start if start > t0 else t0
            b = end if end < t1 else t1
            if b > a:
                total += b - a
        return total

    def binned(self, edges: list[int]) -> tuple[list[float], list[int]]:
        """Time-weighted mean and maximum level per bin [edges[k], edges[k + 1]): each
        bin's exact area and peak (binned_areas), the area divided by the width here, so
        the means are python_binned's floats."""
        return _per_width(self.binned_areas(edges), edges)

    def binned_areas(self, edges: list[int]) -> tuple[list[int], list[int]]:
        """Each bin's exact area (level x ms) and peak level (compiled where built:
        _binned_areas)."""
        return _binned_areas(self.times, self.levels, edges)

    def python_binned(self, edges: list[int]) -> tuple[list[float], list[int]]:
        """`binned` in Python, the reference."""
        return _per_width(python_binned_areas(self.times, self.levels, edges), edges)


class KeptSteps(Steps):
    """Steps the extension keeps (report/spans.py `held`: the log's busy spans' steps, a
    native/src/steps.rs HeldSteps), asked there for the bins, the sustained peak and the
    time at a level: the thesis log's ~45 k step ints were made Python ints for these to
    read them back (issue 30). `times` and `levels` are made as lists when read; what the
    extension refuses (ints past 2^53, or not ints) the Python Steps answers."""

    __slots__ = ("kept",)

    def __init__(self, kept):
        self.kept = kept

    times = property(lambda self: self.kept.times)
    levels = property(lambda self: self.kept.levels)
    peak = property(lambda self: self.kept.peak)

    def _asked(self, name: str, *args):
        try:
            return getattr(self.kept, name)(*args)
        except (TypeError, OverflowError):
            return getattr(Steps, name)(self, *args)

    def binned_areas(self, edges: list[int]) -> tuple[list[int], list[int]]:
        return self._asked("binned_areas", edges)

    def sustained_peak(self, min_ms: int = SUSTAINED_MS) -> int:
        return self._asked("sustained_peak", min_ms)

    def time_at_least(self, level: int, t0: int, t1: int) -> int:
        return self._asked("time_at_least", level, t0, t1)


def python_sustained_peak(times: list[int], levels: list[int], min_ms: int) -> int:
    """`Steps.sustained_peak` in Python, the reference of native/src/steps.rs.

    A level holds from its step to the first later step below it (or to the last
    step's time): each step's stretch ends where a stack of the steps not yet
    below pops it, in one pass (issue 30: walking forward from each step went over
    most of the steps again for each level of a pool busy most of the time)."""
    best, open_steps = 0, []   # open_steps: indices whose level nothing later is below yet
    for k, lv in enumerate(levels):
        while open_steps and levels[open_steps[-1]] > lv:
            i = open_steps.pop()
            if levels[i] > best and times[k] - times[i] >= min_ms:
                best = levels[i]
        open_steps.append(k)
    # The rest hold to the last step's time; the last step itself (open_steps[-1])
    # for no time.
    for i in open_steps[:-1]:
        if levels[i] > best and times[-1] - times[i] >= min_ms:
            best = levels[i]
    return best


# The stack walk compiled where the extension is built (issue 30: a few steps of Python per
# step, ~5.5 k slow-thread steps on the thesis log).
_sustained_peak = extension.compiled_else("sustained_peak", python_sustained_peak)


def _per_width(areas_peaks, edges: list[int]) -> tuple[list[float], list[int]]:
    areas, peaks = areas_peaks
    return [area / (b - a) for area, a, b in zip(areas, edges, edges[1:])], peaks


def python_binned_areas(times: list[int], levels: list[int],
                        edges: list[int]) -> tuple[list[int], list[int]]:
    """Each bin's area (level x ms) and peak level: the reference of native/src/steps.rs.
    The steps whole inside a bin are multiplied and summed in C (map, sum: exact
    integers), so a bin costs a few steps of Python whatever the number of steps in it
    (issue 30: the fast threads' steps are one per call and poll); each step is read by
    its own bin alone, where running totals over every step cost ~18% more."""
    areas, peaks = [], []
    n = len(times)
    for a, b in zip(edges, edges[1:]):
        first = max(bisect.bisect_right(times, a) - 1, 0)
        end = bisect.bisect_left(times, b, first)   # steps first..end - 1 start before b
        area, peak = 0, 0
        # The first and the last step may stick out of the bin; those between lie
        # whole inside it (times increase strictly).
        for i in {first, end - 1} if end > first else ():
            lo = times[i] if times[i] > a else a
            hi = times[i + 1] if i + 1 < n and times[i + 1] < b else b
            if hi > lo:
                area += levels[i] * (hi - lo)
                peak = max(peak, levels[i])
        if end - first > 2:
            inside = levels[first + 1:end - 1]
            area += sum(map(mul, inside,
                            map(sub, times[first + 2:end], times[first + 1:end - 1])))
            peak = max(peak, max(inside))
        areas.append(area)
        peaks.append(peak)
    return areas, peaks


# Steps.binned's sums compiled where the extension is built (issue 30: a multiplication
# and a subtraction of epoch-ms ints per step, ~47 M instructions of the report on the
# thesis log).
_binned_areas = extension.compiled_else("binned_steps", python_binned_areas)


def concurrency(intervals) -> Steps:
    """How many of the [start, end) intervals are open at each moment (in the extension
    where it is built: ~17 k fast-thread spans on the thesis log)."""
    if _compiled_steps is not None:
        return Steps(*_compiled_steps(intervals if isinstance(intervals, list) else list(intervals)))
    return python_concurrency(intervals)


class Busy:
    """Intervals of one kind as the report reads them: `steps`, how many are open at each
    moment (concurrency's); `count`, how many there are; `ms`, their lengths summed."""

    __slots__ = ("steps", "count", "ms")

    def __init__(self, steps, count: int, ms: int):
        """`steps`: a Steps, or the extension's HeldSteps (read through KeptSteps)."""
        self.steps = steps if isinstance(steps, Steps) else KeptSteps(steps)
        self.count, self.ms = count, ms


def busy(intervals) -> Busy:
    """The [start, end) intervals' Busy (the log's spans come as one from the extension:
    report/spans.py's `busy`)."""
    intervals = intervals if isinstance(intervals, list) else list(intervals)
    steps = concurrency(intervals)
    # Summed in C (issue 30: a Python step for each of the ~17 k fast-thread spans).
    ms = sum(map(itemgetter(1), intervals)) - sum(map(itemgetter(0), intervals))
    return Busy(steps, len(intervals), ms)


def python_concurrency(intervals) -> Steps:
    """`concurrency` in Python, the reference."""
    deltas: dict[int, int] = {}   # a plain dict: a Counter's += is several times slower
    step = deltas.get
    for a, b in intervals:
        if b > a:
            deltas[a] = step(a, 0) + 1
            deltas[b] = step(b, 0) - 1
    times = sorted(deltas)
    return Steps(times, list(accumulate(deltas[t] for t in times)))


def slow_runs(requests: list[dict]):
    """Slow-thread processing runs: the put/get's returns + queue_ms, for proc_ms.

    After a daemon restart a request may be processed twice; the records keep the run
    that returned (proc_ms) and the first run's start (queue_ms), so such a run is placed
    at the first start."""
    for r in requests:
        if None in (r.get("started"), r.get("request_ms"), r.get("queue_ms"), r.get("proc_ms")):
            continue
        start = r["started"] + r["request_ms"] + r["queue_ms"]
        yield start, start + r["proc_ms"]


def fast_calls(requests: list[dict], calls: list[dict]):
    """Fast-thread calls the records place in time: every put/get, every closing call
    that returned, and every other DPM call. Status polls are missing: the records
    carry their number and summed time, not when each ran."""
    for r in requests:
        if r.get("started") is not None and r.get("request_ms") is not None:
            yield r["started"], r["started"] + r["request_ms"]
        if r.get("done_ms") is not None and r.get("ended") is not None and r["status"] in ("success", "aborted"):
            yield r["ended"] - r["done_ms"], r["ended"]
    for c in calls:
        if c["daemon"] == FAST_DAEMON and c.get("started") is not None and c.get("ended") is not None:
            yield c["started"], c["ended"]


def ns_calls(calls: list[dict]):
    """Name-server calls, each holding one of its threads from first line to returns."""
    for c in calls:
        if c["daemon"] in NS_DAEMONS and c.get("started") is not None and c.get("ended") is not None:
            yield c["started"], c["ended"]


def queue_stays(requests: list[dict]):
    """From the put/get's returns to the first slow-thread line (or the end, if none)."""
    for r in requests:
        if r.get("started") is None or r.get("request_ms") is None:
            continue
        ret = r["started"] + r["request_ms"]
        if r.get("queue_ms") is not None:
            yield ret, ret + r["queue_ms"]
        elif r.get("proc_ms") is None and r.get("ended") is not None and r["status"] != "success":
            yield ret, r["ended"]


def python_queue_steps(requests: list[dict]) -> Steps:
    """The slow-thread queue's concurrency: the reference of native/src/steps.rs
    `queue_steps`."""
    return concurrency(queue_stays(requests))


# In the extension where built, the steps kept there (issue 30: the generator's Python
# per request and a tuple of each stay, ~10 M instructions of a report on the thesis log).
_queue_steps = extension.compiled_else("queue_steps", python_queue_steps)


def queue_concurrency(requests: list[dict]) -> Steps:
    """How many requests wait for a slow thread at each moment (queue_stays'
    concurrency)."""
    steps = _queue_steps(requests)
    return steps if isinstance(steps, Steps) else KeptSteps(steps)


def columns(records: list[dict], fieldnames) -> list[list]:
    """Each of `fieldnames` as a column: the records' values in their order, None where a
    record has none, read in C (dict.get mapped)."""
    return [list(map(dict.get, records, repeat(name))) for name in fieldnames]


NICE_BINS_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800,
               21600, 43200, 86400)


def bin_edges(t0: int, t1: int, max_bins: int = 90) -> list[int]:
    span = max(t1 - t0, 1)
    width = next((s * 1000 for s in NICE_BINS_S if span / (s * 1000) <= max_bins), 86_400_000)
    start = t0 - t0 % width
    edges = [start]
    while edges[-1] < t1:
        edges.append(edges[-1] + width)
    if len(edges) < 2:
        edges.append(start + width)
    return edges


def counts_by_bin(times, edges: list[int]) -> list[int]:
    """How many of `times` fall in each bin [edges[k], edges[k + 1]). Each time's bin
    found and counted in C (bisect mapped, a Counter; issue 30)."""
    found = Counter(map(bisect.bisect_right, repeat(edges), times))   # bin k counts as k + 1
    return [found[k] for k in range(1, len(edges))]


def rate_by_status(requests: list[dict], edges: list[int]) -> dict[str, list[float]]:
    width_s = (edges[1] - edges[0]) / 1000
    # The requests' end times by status in one pass over them, not one per status.
    ended: dict[str, list[int]] = {status: [] for status in STATUSES}
    for r in requests:
        t = r.get("ended")
        if t is not None and r["status"] in ended:
            ended[r["status"]].append(t)
    out = {}
    for status in STATUSES:
        counts = counts_by_bin(ended[status], edges)
        if any(counts):
            out[status] = [c / width_s for c in counts]
    return out


def polls_by_bin(requests: list[dict], edges: list[int]) -> dict[str, list[float | None]]:
    """Mean polls per request, by the request's start, per op."""
    n_bins = len(edges) - 1
    sums: dict[str, list[int]] = defaultdict(lambda: [0] * n_bins)
    ns: dict[str, list[int]] = defaultdict(lambda: [0] * n_bins)
    # Each request's start, op and polls read a column at a time in C (issue 30).
    for t, op, polls in zip(starts_of(requests), map(itemgetter("op"), requests),
                            map(dict.get, requests, repeat("polls"))):
        if t is None:
            continue
        k = bisect.bisect_right(edges, t) - 1
        if 0 <= k < n_bins:
            op = op or "?"
            sums[op][k] += polls or 0
            ns[op][k] += 1
    return {op: [s / n if n else None for s, n in zip(sums[op], ns[op])] for op in sorted(sums)}


def start_of(r: dict) -> int | None:
    """The first of accepted, started, ended the record has (a request's start as the
    page places it). Written out, not a loop over the keys: it runs for every request in
    several passes of the page (issue 30)."""
    t = r.get("accepted")
    if t is None:
        t = r.get("started")
        if t is None:
            t = r.get("ended")
    return t


def starts_of(requests: list[dict]) -> list[int | None]:
    """start_of of each request, in order: their accepted times read in C (dict.get
    mapped), start_of called only for a request without one (issue 30: a Python call a
    request, in the span, the scatter and the polls)."""
    starts = list(map(dict.get, requests, repeat("accepted")))
    if None in starts:
        starts = [start_of(r) if t is None else t for t, r in zip(starts, requests)]
    return starts


# -- name server ------------------------------------------------------------------------

def ns_latency(calls: list[dict], max_ops: int = 12) -> dict[str, list[int]]:
    """Durations (ms) of name-server calls per op, the busiest ops first."""
    by_op: dict[str, list[int]] = defaultdict(list)
    for c in calls:
        if c["daemon"] in NS_DAEMONS and c.get("duration_ms") is not None:
            by_op[c["op"]].append(c["duration_ms"])
    busiest = sorted(by_op.items(), key=lambda kv: -len(kv[1]))[:max_ops]
    return dict(busiest)


# -- restarts -----------------------------------------------------------------------------

def restarts_from_calls(calls: list[dict]) -> list[tuple[int, str]]:
    """(time, daemon) of each new pid of a daemon, from call records alone (when the
    replay's own counters are not at hand): the first call of the new pid."""
    seen: dict[tuple, int] = {}
    out = []
    for c in sorted((c for c in calls if c.get("started") is not None and c.get("pid") is not None),
                    key=lambda c: c["started"]):
        key = (c["host"], c["daemon"])
        if key in seen and seen[key] != c["pid"]:
            out.append((c["started"], c["daemon"]))
        seen[key] = c["pid"]
    return out
