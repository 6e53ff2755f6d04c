"""The words at the top of the report: a summary and the top observations, computed from
the records (never canned). Pure: records and counts in, sentences out.

Every number here uses the replay's definitions, so the page and `dpmstream replay`
agree: counts per op and status, nearest-rank medians (streams/summary.Series) shown as
the replay shows seconds, and a phase's share = its summed time over the op's summed
total_ms (the replay table's share column).
"""

from __future__ import annotations

from collections import Counter
from itertools import repeat
from operator import itemgetter

from dpmstream.parsers.records import STATUSES, ms_to_text
from dpmstream.report import analysis as A
from dpmstream.streams.sinks.summary import moment

# A wait for a slow thread longer than this means the pool was full at that moment.
QUEUED_MS = 100
# Share of requests that must have waited that long before the report calls the pool full.
QUEUED_SHARE = 0.01


# Plain classes, not dataclasses: every report imports them, and a dataclass compiles its
# generated methods as its module is imported (~0.2-0.8 ms CPU each on a cold start,
# issue 30); nothing compares or prints these.

class Observation:
    """One observation in words, scored, with the figure that backs it."""

    __slots__ = ("score", "text", "figure")

    def __init__(self, score: float, text: str, figure: str):
        self.score = score       # how much it matters, 0..1; the top three are shown
        self.text = text
        self.figure = figure     # the id of the figure that backs it


class Story:
    """The page's words and what they were computed from."""

    __slots__ = ("t0", "t1", "summary", "observations", "slow_pool", "slow_full_share",
                 "breakdowns", "slow", "queue", "ns_latency")

    def __init__(self, t0: int, t1: int):
        self.t0, self.t1 = t0, t1
        self.summary: list[str] = []
        self.observations: list[Observation] = []
        self.slow_pool = 0
        self.slow_full_share: float | None = None
        # What the words were computed from, kept for the figures (report/build.py) so
        # that the page computes each once: the per-op breakdown, the busy slow threads
        # and queue depth over time, and the name server's latency per op.
        self.breakdowns: dict = {}
        self.slow: A.Steps | None = None
        self.queue: A.Steps | None = None
        self.ns_latency: dict = {}


def clock(ms: int, zone, with_date: bool = False) -> str:
    return moment(ms, zone).strftime("%Y-%m-%d %H:%M" if with_date else "%H:%M")


def span_text(t0: int, t1: int, zone) -> str:
    """The span in words, each time labelled as time_range_text labels it (the
    abbreviation valid at that instant: once when both ends share it)."""
    a, b = moment(t0, zone), moment(t1, zone)
    form = "%H:%M:%S" if t1 - t0 < 3_600_000 else "%H:%M"   # minutes alone blur a short window
    if a.tzname() != b.tzname():
        return (f"{a:%Y-%m-%d} {a.strftime(form)} {a.tzname()} and "
                f"{b:%Y-%m-%d} {b.strftime(form)} {b.tzname()}")
    if a.date() == b.date():
        return f"{a.strftime(form)} and {b.strftime(form)} on {a:%Y-%m-%d} ({b.tzname()})"
    return f"{a:%Y-%m-%d} {a.strftime(form)} and {b:%Y-%m-%d} {b.strftime(form)} ({b.tzname()})"


def pct(x: float) -> str:
    return f"{round(x * 100)}%"


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def time_span(data) -> tuple[int, int] | None:
    """The one range every sentence and figure of the page covers (docs/report.md): the
    data's span, from the first record's start to the last record's end, within the window
    asked for. An admin's utilisation is over the time the log has data, not over the
    empty minutes of a wide window."""
    # Read a column at a time in C (issue 30: a Python call and step a record).
    starts = A.starts_of(data.requests) + list(map(itemgetter("started"), data.calls))
    ends = A.columns(data.requests, ("ended",))[0] + A.columns(data.calls, ("ended",))[0]
    starts = [t for t in starts if t is not None]
    ends = [t for t in ends if t is not None] or starts
    if not starts:
        return None
    t0, t1 = min(starts), max(ends)
    if data.since is not None:
        t0 = max(t0, data.since)
    if data.until is not None:
        t1 = min(t1, data.until)
    return t0, max(t1, t0 + 1)


def tell(data) -> Story | None:
    span = time_span(data)
    if span is None:
        return None
    t0, t1 = span
    story = Story(t0, t1)
    requests, zone = data.requests, data.zone
    ops = sorted({r["op"] or "?" for r in requests})
    between = span_text(t0, t1, zone)

    # 1. what was read (each count from one pass in C, not one pass per op and status)
    if requests:
        by_op = Counter(map(itemgetter("op"), requests))
        by_status = Counter(map(itemgetter("status"), requests))
        per_op = ", ".join(plural(by_op[op], op) for op in ops)
        statuses = [(s, by_status[s]) for s in STATUSES]
        not_ok = [f"{n:,} {s}" for s, n in statuses if n and s != "success"]
        story.summary.append(
            f"{plural(len(requests), 'request')} ({per_op}) between {between}: "
            + (f"{statuses[0][1]:,} succeeded, " + ", ".join(not_ok) if not_ok
               else "all succeeded") + ".")
    else:
        story.summary.append(f"No put or get requests between {between}; "
                             f"{plural(len(data.calls), 'other call')}.")

    # 2. where each op's time goes
    story.breakdowns = A.breakdowns(requests)
    tallied = _tallied(data)
    for op in ops:
        of_op = [r for r in requests if r["op"] == op]
        top = A.dominant_phase(of_op, op, tallied)
        totals = _series(tallied, op, "total_ms", of_op)
        if top is None or not totals.count:
            continue
        fieldname, share = top
        median = totals.quantile(0.5)
        words = A.PHASE_WORDS[fieldname]
        story.summary.append(f"{words[0].upper() + words[1:]} is {pct(share)} of a {op}'s "
                             f"time (median {op} {ms_to_text(median)} s).")
        phase_median = _series(tallied, op, fieldname, of_op).quantile(0.5)
        story.observations.append(Observation(
            share, f"The largest part of a {op} is {words}: {pct(share)} of its time over "
                   f"{plural(totals.count, op)}; the median is {ms_to_text(phase_median)} s of "
                   f"a {ms_to_text(median)} s {op}.", "fig-phases"))
        after = story.breakdowns.get(op)
        if after is not None and after.share("after_proc") >= 0.05:
            story.observations.append(Observation(
                after.share("after_proc"),
                f"Once processed, a {op} waited {after.mean_s('after_proc'):.2f} s on average "
                f"for the client's next status poll to learn it was ready: "
                f"{pct(after.share('after_proc'))} of its time, which the clients' poll intervals set, "
                f"not the head node.", "fig-phases"))

        both = [(n, p) for n, p in zip(*A.columns(of_op, ("ns_ms", "proc_ms")))
                if n is not None and p]
        if both and sum(p for _, p in both) > 0:   # records that link name-server calls
            story.summary.append(
                f"Name-server calls are {pct(sum(n for n, _ in both) / sum(p for _, p in both))} "
                f"of a {op}'s slow-thread processing.")

    # 3. the slow threads
    runs = data.spans["slow"] if data.spans else A.busy(A.slow_runs(requests))
    story.slow = slow = runs.steps
    story.queue = A.queue_concurrency(requests)
    if runs.count:
        story.slow_pool = pool = slow.sustained_peak()
        queued = [r for r in requests if (r.get("queue_ms") or 0) > QUEUED_MS]
        full_ms = slow.time_at_least(pool, t0, t1)
        story.slow_full_share = full_ms / (t1 - t0)
        depth = story.queue.peak
        if len(queued) >= QUEUED_SHARE * len(requests):
            story.summary.append(
                f"All {pool} slow threads were busy {pct(story.slow_full_share)} of the "
                f"time between {between}; up to {plural(depth, 'request')} waited for one.")
            story.observations.append(Observation(
                min(1.0, story.slow_full_share + 0.2),
                f"The slow-thread pool ({pool} threads, the most busy at once for {A.SUSTAINED_MS} ms or more) was "
                f"full {pct(story.slow_full_share)} of the time and "
                f"{pct(len(queued) / len(requests))} of requests waited more than "
                f"{QUEUED_MS / 1000:g} s for a thread.", "fig-timeline"))
        else:
            story.summary.append(
                f"At most {pool} slow threads were busy at once: requests seldom waited "
                f"for one ({plural(len(queued), 'request')} over {QUEUED_MS / 1000:g} s).")

    # 4. observations that only some data support
    story.observations += _client_observation(requests)
    story.observations += _poll_observation(requests, ops)
    story.ns_latency = A.ns_latency(data.calls)
    story.observations += _ns_observation(story.ns_latency)
    story.observations += _failure_observation(requests)
    story.observations += _health_observations(data, zone)
    story.observations.sort(key=lambda o: -o.score)
    story.observations = story.observations[:3]
    return story


def _tallied(data):
    """The dataset's summary where it tallied these very requests (every Dataset that
    report/sources.py reads: each request and call kept is tallied, in the window), else
    None (a dataset made by hand): its per-op sums and unsampled series are then the
    story's, read rather than made from the requests again (issue 30)."""
    summary = data.summary
    return summary if sum(summary.statuses.values()) == len(data.requests) else None


def _series(tallied, op: str, fieldname: str, of_op: list):
    """The op's values of `fieldname` as a Series (streams/sinks/summary.py): the summary's
    when it tallied them and kept every one, else made from the op's requests."""
    series = A.tallied_series(tallied, op, fieldname) if tallied is not None else None
    if series is not None and not series.sampled:
        return series
    if series is None and tallied is not None:
        return A.series_of(())   # no request of the op has the value
    return A.series_of(v for v in map(dict.get, of_op, repeat(fieldname)) if v is not None)


def _client_observation(requests) -> list[Observation]:
    by_client: dict[str, list[int]] = {}
    for client, total in zip(*A.columns(requests, ("client", "total_ms"))):
        if client and total is not None:
            by_client.setdefault(client, []).append(total)
    busy = {c: A.series_of(v).quantile(0.5) for c, v in by_client.items() if len(v) >= 10}
    if len(busy) < 2:
        return []
    slowest = max(busy, key=busy.get)
    fastest = min(busy, key=busy.get)
    if busy[fastest] <= 0 or busy[slowest] < 1.25 * busy[fastest]:
        return []
    ratio = busy[slowest] / busy[fastest]
    return [Observation(min(0.9, (ratio - 1) / 2),
                        f"Requests from {slowest} took {ms_to_text(busy[slowest])} s at the "
                        f"median, {ratio:.1f} times those from {fastest} "
                        f"({ms_to_text(busy[fastest])} s).", "fig-scatter")]


def _poll_observation(requests, ops) -> list[Observation]:
    out = []
    for op in ops:
        polls = [n for o, n in zip(map(itemgetter("op"), requests),
                                   map(dict.get, requests, repeat("polls")))
                 if o == op and n is not None]
        if not polls:
            continue
        s = A.series_of(polls)
        median = s.quantile(0.5)
        if median >= 2:
            out.append(Observation(min(0.5, median / 20),
                                   f"A {op} was polled {median} times at the median "
                                   f"(p95 {s.quantile(0.95)}): each poll is a call on a fast "
                                   f"thread.", "fig-timeline"))
    return out


def _ns_observation(latency: dict[str, list[int]]) -> list[Observation]:
    if not latency:
        return []
    p95 = {op: A.series_of(v).quantile(0.95) for op, v in latency.items() if len(v) >= 10}
    if not p95:
        return []
    op = max(p95, key=p95.get)
    return [Observation(min(0.7, p95[op] / 1000),
                        f"The name server's slowest frequent call is {op}: p95 "
                        f"{ms_to_text(p95[op])} s over {plural(len(latency[op]), 'call')}.",
                        "fig-ns")]


def _failure_observation(requests) -> list[Observation]:
    if not requests:
        return []
    by_status = Counter(map(itemgetter("status"), requests))
    bad = len(requests) - by_status["success"]
    if not bad:
        return []
    share = bad / len(requests)
    kinds = ", ".join(f"{n:,} {s}" for s in STATUSES[1:] if (n := by_status[s]))
    return [Observation(min(1.0, 5 * share),
                        f"{pct(share) if share >= 0.01 else 'Under 1%'} of requests did not "
                        f"succeed ({kinds}).", "fig-timeline")]


def _health_observations(data, zone) -> list[Observation]:
    out = []
    if data.restarts:
        when = ", ".join(clock(t, zone) for t, _ in data.restarts[:5])
        out.append(Observation(0.95, f"A daemon restarted {plural(len(data.restarts), 'time')} "
                                     f"(at {when}): calls open then never returned.",
                               "fig-timeline"))
    bad = sum(n for _, n in data.unparsed)
    if bad and data.lines:
        share = bad / max(1, sum(v for k, v in data.lines.items() if k != "not UTF-8"))
        out.append(Observation(min(1.0, 20 * share),
                               f"{plural(bad, 'line')} ({share * 100:.2g}% of the log) could "
                               f"not be parsed: check `dpmstream profile check`.",
                               "fig-timeline"))
    return out
