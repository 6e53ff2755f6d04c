"""Archived logs into Prometheus: the metric contract as OpenMetrics text with event times.

    from dpmstream.streams.sinks.openmetrics import write_openmetrics
    summary = write_openmetrics(records, pipeline.stats, out, step_s=60)

    sink = OpenMetricsFile(path, stats=lambda: pipeline.stats)   # the same, as a record
    pipeline = Pipeline(on_record=sink.write)                    # sink (fan_out.py) that
    ...; sink.close()                                            # writes at close()

`records`: the request and call records of a replay (any iterable, any order: it is
sorted by event time here). `stats`: the pipeline's final PipelineStats, or None.
`out`: a text file. The file is ready for
`promtool tsdb create-blocks-from openmetrics FILE DIR`.

The metrics are the live ones (streams/metrics.PipelineMetrics: same names, labels,
buckets, label bounding), sampled as they evolve over event time: a record counts at its
`ended` (a call without one at its `started`), and every series gets one sample per step
from its first appearance to the end (except across quiet gaps: a step is sampled only
when an event lies within 5 min before it), at the step boundary (timestamp = the boundary,
holding everything that ended at or before it). Gauges are rebuilt from the records: in
flight from a request's first line to its `ended`, in the slow queue from the put/get's
`returns` to its first processing line (or its answer/end when there is none).
dpmstream_lines_total and dpmstream_evictions_total only exist as totals (stats): they
get one sample, at the last step. dpmstream_event_lag_seconds means nothing for an
archive and is left out.

Size: about (series x buckets) lines per step; for a month of logs prefer step_s=300
(keep it under Prometheus' 5 min lookback, so that series stay continuous).
"""

from __future__ import annotations

import tempfile
from collections import defaultdict
from dataclasses import dataclass, replace

from prometheus_client import CollectorRegistry
from prometheus_client.utils import floatToGoString

from dpmstream.parsers import dome_records
from dpmstream.parsers.records import ms_to_text
from dpmstream.streams.metrics.exporter import PipelineMetrics
from dpmstream.streams.metrics.stats_collector import StatsSnapshot

# A step is sampled while an event lies within this much before it: Prometheus' default
# lookback (5 min), so that queries see every series continuously while the log is busy.
ACTIVE_MS = 5 * 60 * 1000

# Families written at every step / only once at the end / never.
_FINAL_ONLY = {"dpmstream_lines", "dpmstream_evictions"}
_SKIPPED = {"dpmstream_event_lag_seconds"}


@dataclass
class ExportSummary:
    steps: int = 0
    samples: int = 0
    records: int = 0
    skipped: int = 0  # records with no time at all (cannot be placed)
    first_ms: int | None = None
    last_ms: int | None = None


def _event_ms(rec: dict) -> int | None:
    if rec.get("kind") in dome_records.EVENT_TIME:
        return dome_records.event_ms(rec)
    ended = rec.get("ended")
    return ended if ended is not None else rec.get("started")


def _ceil_step(ms: int, step_ms: int) -> int:
    return -(-ms // step_ms)


def _gauge_events(rec: dict) -> list[tuple[int, str, int]]:
    """(time ms, gauge, +1/-1) for a request's in-flight and slow-queue intervals."""
    if rec.get("kind") != "request":
        return []
    begin = rec.get("accepted") if rec.get("accepted") is not None else rec.get("started")
    end = rec.get("ended")
    if begin is None or end is None:
        return []  # an orphan: its beginning is not in the archive
    events = [(begin, "in_flight", 1), (end, "in_flight", -1)]
    started, request_ms = rec.get("started"), rec.get("request_ms")
    if started is not None and request_ms is not None:
        queued = started + request_ms
        if rec.get("queue_ms") is not None:
            left = queued + max(rec["queue_ms"], 0)
        elif rec.get("ready_wait_ms") is not None:  # no processing logged (sync get)
            left = queued + max(rec["ready_wait_ms"], 0)
        else:
            left = max(end, queued)
        events += [(queued, "slow_queue", 1), (left, "slow_queue", -1)]
    return events


def _active_steps(times: list[int], step_ms: int) -> list[int]:
    """Steps to sample: those with an event in the lookback before them. An archive's
    quiet gaps (a night, a missing file) then cost nothing, and series go stale across
    them like a scrape target that is away, instead of one sample a step for months."""
    if not times:
        return []
    times = sorted(times)
    steps: list[int] = []
    for t in times:
        lo = _ceil_step(t, step_ms)
        hi = _ceil_step(t + ACTIVE_MS, step_ms) - 1
        if steps and lo <= steps[-1]:
            lo = steps[-1] + 1
        steps.extend(range(lo, max(hi, lo - 1) + 1))
    # the first step must exist even when the lookback is shorter than a step
    return steps or [_ceil_step(times[0], step_ms)]


def _labels_text(labels: dict) -> str:
    if not labels:
        return ""
    parts = []
    for key, value in labels.items():
        value = str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
        parts.append(f'{key}="{value}"')
    return "{" + ",".join(parts) + "}"


class _FamilyFiles:
    """One temporary file per metric family, so that each family's samples end up
    contiguous in the output (OpenMetrics), each series in time order."""

    def __init__(self) -> None:
        self.files: dict[str, object] = {}
        self.headers: dict[str, tuple[str, str]] = {}  # family -> (type, help)

    def write(self, registry: CollectorRegistry, ts_text: str, families: set | None,
              skip: set) -> int:
        n = 0
        for family in registry.collect():
            if family.name in skip or (families is not None and family.name not in families):
                continue
            fh = self.files.get(family.name)
            for sample in family.samples:
                if sample.name.endswith("_created"):
                    continue
                if fh is None:
                    fh = self.files[family.name] = tempfile.TemporaryFile("w+", encoding="utf-8")
                    self.headers[family.name] = (family.type, family.documentation)
                fh.write(f"{sample.name}{_labels_text(sample.labels)} "
                         f"{floatToGoString(sample.value)} {ts_text}\n")
                n += 1
        return n

    def copy_to(self, out) -> None:
        for name, fh in self.files.items():
            mtype, help_text = self.headers[name]
            help_text = help_text.replace("\\", "\\\\").replace("\n", "\\n")
            out.write(f"# TYPE {name} {mtype}\n# HELP {name} {help_text}\n")
            fh.seek(0)
            while True:
                chunk = fh.read(1 << 20)
                if not chunk:
                    break
                out.write(chunk)
            fh.close()
        out.write("# EOF\n")


def write_openmetrics(records, stats, out, step_s: int = 60) -> ExportSummary:
    """Write `records` (and the final `stats`) to `out` as OpenMetrics with event-time
    timestamps, one sample per series per `step_s` seconds. Returns what was written."""
    if step_s <= 0:
        raise ValueError("step_s must be positive")
    step_ms = int(step_s * 1000)
    summary = ExportSummary()
    metrics = PipelineMetrics(CollectorRegistry())

    timed: list[tuple[int, int, dict]] = []
    gauge_events: list[tuple[int, str, int, str]] = []
    for i, rec in enumerate(records):
        t = _event_ms(rec)
        if t is None:
            summary.skipped += 1
            continue
        timed.append((t, i, rec))
        host = rec.get("host")
        gauge_events.extend((when, gauge, delta, host) for when, gauge, delta in _gauge_events(rec))
    summary.records = len(timed)
    timed.sort(key=lambda item: (item[0], item[1]))
    gauge_events.sort(key=lambda e: e[0])

    families = _FamilyFiles()
    if not timed:
        families.copy_to(out)
        return summary

    levels: dict[str, dict[str, int]] = {"in_flight": defaultdict(int), "slow_queue": defaultdict(int)}
    ri = gi = 0
    steps = _active_steps([t for t, _, _ in timed] + [e[0] for e in gauge_events], step_ms)
    last_step = steps[-1]
    for step in steps:
        boundary = step * step_ms
        while ri < len(timed) and timed[ri][0] <= boundary:
            metrics.write(timed[ri][2])
            ri += 1
        while gi < len(gauge_events) and gauge_events[gi][0] <= boundary:
            when, gauge, delta, host = gauge_events[gi]
            levels[gauge][host] += delta
            gi += 1
        final = step == last_step
        # The gauges are the event-time levels; the final stats add the line and
        # eviction totals (their end-of-input gauges are not event time).
        end = StatsSnapshot.of(stats) if final and stats is not None else StatsSnapshot()
        metrics.stats.publish(replace(end, in_flight=dict(levels["in_flight"]),
                                      slow_queue=dict(levels["slow_queue"]), latest_event_ms={}))
        summary.samples += families.write(
            metrics.registry, ms_to_text(boundary), None,
            _SKIPPED if final else _SKIPPED | _FINAL_ONLY)
        summary.steps += 1
    first_step = steps[0]
    summary.first_ms = first_step * step_ms
    summary.last_ms = last_step * step_ms
    families.copy_to(out)
    return summary


class OpenMetricsFile:
    """A record sink that keeps the records and writes them with write_openmetrics() to
    `path` at close(), with the stats `stats()` returns then (the pipeline's, finished)."""

    def __init__(self, path, stats=lambda: None, step_s: int = 60) -> None:
        self.path, self._stats, self.step_s = path, stats, step_s
        self._records: list[dict] = []

    def write(self, record: dict) -> None:
        self._records.append(record)

    def close(self) -> None:
        with open(self.path, "w", encoding="utf-8") as out:
            write_openmetrics(self._records, self._stats(), out, self.step_s)
        self._records = []
