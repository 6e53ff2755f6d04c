"""A record sink (fan_out.py) for the terminal summary of a run: per op and phase, count, quantiles and share of the
op's total time, the time range the records cover, and the counts of lines that were not
parsed, evicted or late.

Values are kept exactly up to RESERVOIR per series, then sampled uniformly (reservoir
sampling with a fixed seed), so a month of logs still summarises in bounded memory.
"""

from __future__ import annotations

import random
from array import array
from bisect import bisect_right
from collections import Counter, defaultdict
from datetime import datetime, timedelta, timezone, tzinfo

from dpmstream.parsers import extension
from dpmstream.parsers.clock import offset_name
from dpmstream.parsers.quantiles import nearest_rank
from dpmstream.parsers.records import PHASES, STATUSES, ms_to_text

RESERVOIR = 200_000
QUANTILES = (0.50, 0.95, 0.99)


def int64_array(raw: bytes) -> array:
    """An array('q') of the machine-order 64-bit ints in `raw`."""
    values = array("q")
    values.frombytes(raw)
    return values


def drained(items: list):
    """Each item of `items`, its slot emptied as it is handed out: a tally's state holds
    every series as bytes, and loading them into arrays while the list still held all of
    those bytes doubled the run's peak memory at its end (docs/sizing.md)."""
    for i, item in enumerate(items):
        items[i] = None
        yield item


class Series:
    __slots__ = ("count", "max", "sum", "values", "_rng")

    def __init__(self):
        self.count = 0
        self.sum = 0          # exact, over every value (not the sample): shares need it
        self.max = None
        self.values: list | array = []  # an array('q') when restored from a tally
        self._rng = None

    def add(self, value: int) -> None:
        self.count += 1
        self.sum += value
        if self.max is None or value > self.max:
            self.max = value
        if len(self.values) < RESERVOIR:
            self.values.append(value)
            return
        if self._rng is None:
            self._rng = random.Random(1)
        j = self._rng.randrange(self.count)
        if j < RESERVOIR:
            self.values[j] = value

    def extend(self, values) -> None:
        """add() of each of `values` in turn; those the reservoir still has room for are
        counted, summed and kept in C (the report makes series of thousands of values:
        a Python call each was most of series_of's cost, issue 30). Values are ints, as
        add() takes them, so the sum is the same whatever the order of additions."""
        values = list(values)
        head = values[:max(RESERVOIR - len(self.values), 0)]
        if head:
            self.count += len(head)
            self.sum = sum(head, self.sum)
            top = max(head)   # the first of the largest, as add() keeps
            if self.max is None or top > self.max:
                self.max = top
            self.values.extend(head)
        for value in values[len(head):]:
            self.add(value)

    @classmethod
    def restored(cls, count: int, total: int, top: int | None, values: bytes,
                 rng_state: tuple | None) -> Series:
        """A series from another's figures (the extension's tally, native/src/tally.rs):
        values the bytes of an array('q') (8 bytes a value where a list of ints takes up
        to 40), rng_state Random.getstate()'s internal state, so sampling goes on as it
        would have."""
        series = cls()
        series.count, series.sum, series.max = count, total, top
        series.values = int64_array(values)
        if rng_state is not None:
            series._rng = random.Random()
            series._rng.setstate((3, rng_state, None))
        return series

    @property
    def sampled(self) -> bool:
        return self.count > len(self.values)

    def quantile(self, q: float) -> int:
        """The quantile of parsers/quantiles.py (nearest rank) over the values kept."""
        return self.quantiles((q,))[0]

    def quantiles(self, qs) -> list:
        """The quantiles `qs` of the values kept, from one sorted copy that is not kept: a
        copy kept per series (a list of ints, up to 40 bytes a value) held five times the
        summary's values at the end of a run once all were rendered (docs/sizing.md).
        Sorted as 64-bit ints in the extension where it is built (sorted_quantiles the
        reference)."""
        return _sorted_quantiles(self.values, list(qs))


def sorted_quantiles(values, qs: list) -> list:
    """nearest_rank of each of `qs` over `values` (a list of ints or an array('q')), from
    one sorted copy: the reference of native/src/ranks.rs. An array('q') is sorted into
    another, 8 bytes a value."""
    ordered = sorted(values)
    if isinstance(values, array):
        ordered = array(values.typecode, ordered)
    return [nearest_rank(ordered, q) for q in qs]


# Compiled where the extension is built (issue 30: the report sorts ~25 series of up to
# ~3 k values on the thesis log as Python ints, an array('q') made into a list and back).
_sorted_quantiles = extension.compiled_else("nearest_ranks", sorted_quantiles)


class Summary:
    def __init__(self):
        self.phases: dict[tuple[str, str], Series] = defaultdict(Series)
        self.statuses: Counter = Counter()
        self.calls: dict[tuple[str, str], Series] = defaultdict(Series)
        self.call_errors: Counter = Counter()
        self.polls: dict[str, Series] = defaultdict(Series)
        self.first_ms: int | None = None   # earliest time a record names
        self.last_ms: int | None = None    # latest end a record names
        # The DOME records' section (imported here: dome_summary builds on this module).
        from dpmstream.streams.sinks.dome_summary import DOME_KINDS, DomeSummary
        self.dome, self._dome_kinds = DomeSummary(), DOME_KINDS

    def write(self, record: dict) -> None:
        if record["kind"] in self._dome_kinds:
            self.write_dome(record)
            return
        self._cover(record.get("accepted"), record.get("started"), record.get("ended"))
        if record["kind"] == "request":
            op = record["op"] or "?"
            self.statuses[(op, record["status"])] += 1
            for field, phase in PHASES:
                value = record.get(field)
                if value is not None:
                    self.phases[(op, phase)].add(value)
            self.polls[op].add(record["polls"])
        else:
            key = (record["daemon"], record["op"])
            if record["duration_ms"] is not None:
                self.calls[key].add(record["duration_ms"])
            if record["rc"] != 0:
                self.call_errors[key] += 1

    def write_dome(self, record: dict) -> None:
        """write() of a DOME record (parsers/dome_records.py): what a driver whose DOME
        records come apart from its DPM ones calls, without write()'s test of the kind."""
        dome = self.dome
        dome.write(record)
        if dome.first_ms is not None:   # both set once one is
            self._cover(dome.first_ms, dome.last_ms)

    def load_dome(self, state: dict) -> None:
        """Take the figures a DomeTally gathered from a run's DOME records
        (DomeSummary.load): the same as write_dome() given each of those records."""
        dome = self.dome
        dome.load(state)
        if dome.first_ms is not None:
            self._cover(dome.first_ms, dome.last_ms)

    def close(self) -> None:
        """Nothing to release: render() reads the summary after the run."""

    def load(self, state: dict) -> None:
        """Take the figures a Tally gathered from a run's records (Tally.take_summary_state()):
        the same as write() given each of those records. The state's lists are consumed
        (emptied as they are read), so that each series' bytes go as its array is made."""
        # Joined with, not put in place of, the times DOME records gave (write_dome): a
        # DOME-only run's tally names none, and its range must still be printed.
        self._cover(state["first_ms"], state["last_ms"])
        self.statuses = Counter(dict(state["statuses"]))
        for target, series in ((self.phases, state["phases"]), (self.polls, state["polls"]),
                               (self.calls, state["calls"])):
            target.clear()
            target.update((key, Series.restored(*args)) for key, args in drained(series))
        self.call_errors = Counter(dict(state["call_errors"]))

    def _cover(self, *times) -> None:
        for t in times:
            if t is None:
                continue
            if self.first_ms is None or t < self.first_ms:
                self.first_ms = t
            if self.last_ms is None or t > self.last_ms:
                self.last_ms = t

    def share(self, op: str, phase: str) -> float | None:
        """The phase's summed time over the op's summed total time (polls overlap the wait)."""
        series, total = self.phases.get((op, phase)), self.phases.get((op, "total"))
        if not series or not total or total.sum <= 0:
            return None
        return series.sum / total.sum

    def render(self, stats=None, max_call_ops: int = 15, zone: tzinfo | None = None) -> str:
        out: list[str] = []
        ops = sorted({op for op, _ in self.statuses})
        if self.first_ms is not None:
            out.append(f"Records from {time_range_text(self.first_ms, self.last_ms, zone)}")
            out.append("")
        if ops:
            out.append("Requests")
            out.append(f"  {'op':<5} {'total':>8} " + " ".join(f"{s:>10}" for s in STATUSES))
            for op in ops:
                counts = [self.statuses[(op, s)] for s in STATUSES]
                out.append(f"  {op:<5} {sum(counts):>8} " + " ".join(f"{c:>10}" for c in counts))
            out.append("")
            out.append("Request phases (seconds)")
            out.append(_table_header("op", "phase", share=True))
            for op in ops:
                for _, phase in PHASES:
                    series = self.phases.get((op, phase))
                    if series:
                        out.append(_table_row(op, phase, series) + _share_cell(self.share(op, phase)))
                polls = self.polls.get(op)
                if polls:
                    p50, p95, p99 = polls.quantiles(QUANTILES)
                    out.append(f"  {op:<5} {'polls/request':<14} {polls.count:>8}"
                               f" {p50:>9} {p95:>9} {p99:>9} {polls.max:>9}")
            out.append("  (share: the phase's summed time over the op's summed total time;"
                       " queue, proc and poll lie within ready_wait, so the shares add up"
                       " past 100%)")
            out.append("")
        if self.calls:
            out.append("Calls (seconds)")
            out.append(_table_header("daemon", "op") + f" {'errors':>8}")
            busiest = sorted(self.calls.items(), key=lambda kv: -kv[1].count)[:max_call_ops]
            for (daemon, op), series in busiest:
                out.append(_table_row(daemon, op, series) + f" {self.call_errors[(daemon, op)]:>8}")
            if len(self.calls) > max_call_ops:
                out.append(f"  ... and {len(self.calls) - max_call_ops} more ops")
            out.append("")
        dome = self.dome.render(getattr(stats, "dome", None))
        if dome:
            out.append(dome)
        if stats is not None:
            out.extend(_stats_lines(stats))
        if any(s.sampled for s in (*self.phases.values(), *self.calls.values())):
            out.append(f"(quantiles of series over {RESERVOIR} values are from a uniform sample)")
        return "\n".join(out).rstrip() + "\n"


def _table_header(a: str, b: str, share: bool = False) -> str:
    return (f"  {a:<5} {b:<14} {'count':>8} {'p50':>9} {'p95':>9} {'p99':>9} {'max':>9}"
            + (f" {'share':>6}" if share else ""))


def _share_cell(share: float | None) -> str:
    return f" {'':>6}" if share is None else f" {share * 100:>5.1f}%"


def label_zone(sources) -> tzinfo:
    """The zone every time label is shown in (docs/report.md, "Time labels"): the one
    the stamps are read in: --tz when given; else the UTC offsets the rsyslog prefixes
    stated (StatedOffsets), of the first source that read any; else the profile's zone
    ("local" is this machine's), of the first source whose profile is known; else UTC."""
    parsers = [src.parser for src in sources if src.parser is not None]
    if not parsers:
        return timezone.utc
    if not parsers[0].clock.zone_given:
        for parser in parsers:
            if parser.stated_offsets:
                return StatedOffsets(parser.stated_offsets)
    return parsers[0].clock.zone


_NAIVE_EPOCH = datetime(1970, 1, 1)
_MS = timedelta(milliseconds=1)


class StatedOffsets(tzinfo):
    """The UTC offsets a log's rsyslog prefixes stated, each from the instant its first
    line was read in it: an instant is labelled in the offset its lines were read in
    (`+02:00` in summer, `+01:00` in winter), since no zone name was given."""

    def __init__(self, changes: list[tuple[int, int]]):
        # The parser's own list (LineParser.stated_offsets), which grows as lines are
        # read: a zone chosen at the first record still labels a change read later.
        self._changes = changes
        self._seen = -1

    def _table(self) -> tuple[list[int], list[int], list[timezone]]:
        if self._seen != len(self._changes):
            changes = sorted(self._changes)
            self._seen = len(changes)
            self._starts = [ms for ms, _ in changes]
            self._local_starts = [ms + minutes * 60_000 for ms, minutes in changes]
            self._fixed = [timezone(timedelta(minutes=m), offset_name(m)) for _, m in changes]
        return self._starts, self._local_starts, self._fixed

    def fromutc(self, dt: datetime) -> datetime:
        naive = dt.replace(tzinfo=None)
        starts, _, fixed = self._table()
        zone = fixed[max(bisect_right(starts, (naive - _NAIVE_EPOCH) // _MS) - 1, 0)]
        return (naive + zone.utcoffset(None)).replace(tzinfo=zone)

    def _local(self, dt: datetime | None) -> timezone:
        _, local_starts, fixed = self._table()
        if dt is None:
            return fixed[-1]
        ms = (dt.replace(tzinfo=None) - _NAIVE_EPOCH) // _MS
        return fixed[max(bisect_right(local_starts, ms) - 1, 0)]

    def utcoffset(self, dt):
        return self._local(dt).utcoffset(None)

    def tzname(self, dt):
        return self._local(dt).tzname(None)

    def dst(self, dt):
        return None

    def __repr__(self) -> str:
        return f"StatedOffsets({self._changes!r})"


def moment(ms: int, zone: tzinfo | None) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=zone or timezone.utc)


def moment_text(ms: int, zone: tzinfo | None) -> str:
    """`2011-08-12 14:31:43 CEST`: one time with the abbreviation valid at that instant."""
    t = moment(ms, zone)
    return f"{t:%Y-%m-%d %H:%M:%S} {t.tzname() or ''}".rstrip()


def time_range_text(first_ms: int, last_ms: int, zone: tzinfo | None = None) -> str:
    """`2011-08-12 14:31:43 to 14:40:02 CEST`: the date once when both ends share it, the
    abbreviation once when both ends share it, else each end's own (CET to CEST)."""
    a, b = moment(first_ms, zone), moment(last_ms, zone)
    end = b.strftime("%H:%M:%S") if a.date() == b.date() else b.strftime("%Y-%m-%d %H:%M:%S")
    start = f"{a:%Y-%m-%d %H:%M:%S}"
    if a.tzname() != b.tzname():
        start += f" {a.tzname()}"
    return f"{start} to {end} {b.tzname() or ''}".rstrip()


def _table_row(a: str, b: str, series: Series) -> str:
    q = [ms_to_text(x) for x in series.quantiles(QUANTILES)]
    return (f"  {a:<5} {b:<14} {series.count:>8} {q[0]:>9} {q[1]:>9} {q[2]:>9}"
            f" {ms_to_text(series.max):>9}")


def _stats_lines(stats) -> list[str]:
    r = stats.reassembly
    parsed, unmatched, malformed = (stats.total(x) for x in ("parsed", "unmatched", "malformed"))
    lines = [
        "Lines",
        f"  parsed {parsed}, unmatched {unmatched}, malformed {malformed}"
        f", not UTF-8 {stats.decode_errors}",
        f"  requests in flight {stats.in_flight}, evicted (cap) {r.evictions}"
        f", timed out {r.expired}, late lines {r.late_lines}, orphans {r.orphans}",
        f"  calls without returns {r.noreturn_calls}, stray returns {r.stray_returns}"
        f", dropped accepts {r.dropped_accepts}, daemon restarts {r.restarts}",
        f"  lines of other programs {stats.total('foreign')}, read twice {r.duplicate_lines}"
        f", far ahead (set aside) {r.future_lines}, clock steps back {r.clock_steps}"
        f", stray processes {r.stray_processes}",
        f"  threads evicted (cap) {r.thread_evictions}, silent threads forgotten"
        f" {r.expired_threads}, sessions cut {r.expired_sessions}",
    ]
    link = getattr(stats, "linking", None)
    if link is not None and (link.ns_calls_linked or link.ns_calls_ambiguous):
        lines.append(f"  name-server calls linked to a request {link.ns_calls_linked}"
                     f", ambiguous (in two requests' runs) {link.ns_calls_ambiguous}")
    if stats.bad_examples:
        lines.append("  first bad lines:")
        for source, line_no, reason, excerpt in list(stats.bad_examples)[:5]:
            lines.append(f"    {source}:{line_no}: {reason}: {excerpt[:100]}")
    return lines

