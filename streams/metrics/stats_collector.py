"""Pipeline stats as metrics, read at scrape time: a prometheus_client custom collector.

    collector = StatsCollector(label_lines, label_host)    # PipelineMetrics makes one
    registry.register(collector)
    collector.publish(StatsSnapshot.of(pipeline.stats), source="p3")   # after each batch
    collector.retire("p3")     # partition revoked: its counters stay, its gauges go

Exposes dpmstream_lines_total{host,daemon,result}, dpmstream_evictions_total{reason},
dpm_requests_in_flight{host}, dpm_slow_queue_depth{host} and
dpmstream_event_lag_seconds{host} (wall clock at the scrape minus the latest event time).

Threads: the pipeline's owner publishes, the HTTP server's thread scrapes. The owner hands
over an immutable snapshot and swaps the one reference to the whole published view;
collect() reads that reference once, so a scrape never sees counters mid-update, nor a
source both retired and still published. Sources (the Kafka worker runs one pipeline per
partition) are summed. Counters never go down: a retired source's counts stay in the
totals, and so do a source's last counts when they go down (its pipeline was replaced).
Label values are bounded when published (in the owner's thread: the bounds keep state),
once per label set of the stats: dpmstream_series_overflow_total{metric="dpmstream_lines_total"}
counts the folded label sets, not the lines in them.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily

EVICTION_REASONS = ("cap", "timeout")   # present from the start: alerts have a series


@dataclass(frozen=True)
class StatsSnapshot:
    """What the metrics read of a pipeline's cumulative stats, at one moment."""

    lines: Mapping[tuple[str, str, str], int] = field(default_factory=dict)
    evictions: int = 0        # requests emitted early: the in-flight cap
    expired: int = 0          # ... and the timeout
    in_flight: Mapping[str, int] = field(default_factory=dict)     # host -> open requests
    slow_queue: Mapping[str, int] = field(default_factory=dict)    # host -> waiting
    latest_event_ms: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, stats) -> "StatsSnapshot":
        """Copies of the public counters of parsers/pipeline.PipelineStats (or alike)."""
        lines = dict(stats.lines)
        latest = dict(stats.latest_event_ms)
        hosts = set(latest) | {key[0] for key in lines}
        return cls(
            lines=lines,
            evictions=_total(stats.evictions),
            expired=_total(stats.expired),
            in_flight=_per_host(getattr(stats, "in_flight_by_host", stats.in_flight), hosts),
            slow_queue=_per_host(getattr(stats, "slow_queue_by_host", stats.slow_queue_depth),
                                 hosts),
            latest_event_ms=latest,
        )


@dataclass(frozen=True)
class _Counts:
    """Labelled counter values; never mutated once built."""

    lines: Mapping[tuple, int] = field(default_factory=dict)
    evictions: Mapping[str, int] = field(default_factory=dict)

    def __add__(self, other: "_Counts") -> "_Counts":
        return _Counts(_sum(self.lines, other.lines), _sum(self.evictions, other.evictions))

    def fell_below(self, before: "_Counts") -> bool:
        return any(self.lines.get(k, 0) < v for k, v in before.lines.items()) or \
            any(self.evictions.get(k, 0) < v for k, v in before.evictions.items())


@dataclass(frozen=True)
class _Source:
    counts: _Counts
    in_flight: Mapping[str, int]
    slow_queue: Mapping[str, int]
    latest_event_ms: Mapping[str, int]


@dataclass(frozen=True)
class _View:
    sources: Mapping[str, _Source] = field(default_factory=dict)
    retired: _Counts = field(default_factory=_Counts)
    hosts: frozenset = frozenset()   # gauge hosts ever seen: 0, not absent, when idle


class StatsCollector:
    def __init__(self, label_lines: Callable[[tuple], tuple], label_host: Callable[[str], str],
                 clock_ms: Callable[[], float] = lambda: time.time() * 1000) -> None:
        """label_lines((host, daemon, result)) and label_host(host): the bounded label
        values (called in the publishing thread only); clock_ms: wall time, for the lag."""
        self._label_lines = label_lines
        self._label_host = label_host
        self._line_labels: dict[tuple, tuple] = {}   # raw key -> labels: bounded once
        self._clock_ms = clock_ms
        self._created = clock_ms() / 1000.0
        self._view = _View()

    # -- the owner's side -------------------------------------------------------------

    def publish(self, snapshot: StatsSnapshot, source: str = "") -> None:
        lines: Counter = Counter()
        for key, n in snapshot.lines.items():
            labels = self._line_labels.get(key)
            if labels is None:
                labels = self._line_labels[key] = self._label_lines(key)
            lines[labels] += n
        counts = _Counts(dict(lines), {"cap": snapshot.evictions, "timeout": snapshot.expired})
        published = _Source(counts, self._by_host(snapshot.in_flight),
                            self._by_host(snapshot.slow_queue),
                            self._by_host(snapshot.latest_event_ms, max))
        view = self._view
        retired = view.retired
        before = view.sources.get(source)
        if before is not None and counts.fell_below(before.counts):
            retired = retired + before.counts   # a new pipeline under the same name
        self._view = _View({**view.sources, source: published}, retired,
                           view.hosts | published.in_flight.keys() | published.slow_queue.keys())

    def retire(self, source: str) -> None:
        """`source` is gone: its counters stay in the totals, its gauges go."""
        view = self._view
        if source in view.sources:
            sources = dict(view.sources)
            gone = sources.pop(source)
            self._view = _View(sources, view.retired + gone.counts, view.hosts)

    def _by_host(self, values: Mapping[str, int], combine=lambda a, b: a + b) -> dict:
        out: dict[str, int] = {}
        for host, v in values.items():
            if v is None:
                continue
            label = self._label_host(host)
            out[label] = combine(out[label], v) if label in out else v
        return out

    # -- the scrape's side ------------------------------------------------------------

    def describe(self):
        return list(self._families(_View(), now_ms=0.0))

    def collect(self):
        return self._families(self._view, now_ms=self._clock_ms())

    def _families(self, view: _View, now_ms: float):
        total = view.retired
        in_flight = dict.fromkeys(view.hosts, 0)
        slow = dict.fromkeys(view.hosts, 0)
        latest: dict[str, int] = {}
        for src in view.sources.values():
            total = total + src.counts
            for host, v in src.in_flight.items():
                in_flight[host] += v
            for host, v in src.slow_queue.items():
                slow[host] += v
            for host, ms in src.latest_event_ms.items():
                latest[host] = max(ms, latest.get(host, ms))

        lines = CounterMetricFamily("dpmstream_lines", "Log lines read, by parse result",
                                    labels=["host", "daemon", "result"])
        for labels, n in sorted(total.lines.items()):
            lines.add_metric(list(labels), n, created=self._created)
        yield lines
        evictions = CounterMetricFamily(
            "dpmstream_evictions", "Requests emitted before their end was seen",
            labels=["reason"])
        for reason in EVICTION_REASONS:
            evictions.add_metric([reason], total.evictions.get(reason, 0), created=self._created)
        yield evictions
        yield _gauge("dpm_requests_in_flight", "Requests open in the reassembler", in_flight)
        yield _gauge("dpm_slow_queue_depth", "Requests waiting for a slow thread", slow)
        yield _gauge("dpmstream_event_lag_seconds",
                     "Wall clock now minus the latest event time seen",
                     {host: (now_ms - ms) / 1000.0 for host, ms in latest.items()})


def _gauge(name: str, documentation: str, values: Mapping[str, float]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, documentation, labels=["host"])
    for host, v in sorted(values.items()):
        family.add_metric([host], v)
    return family


def _sum(a: Mapping, b: Mapping) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def _total(value) -> int:
    if isinstance(value, Mapping):
        return sum(value.values())
    return int(value or 0)


def _per_host(value, hosts: set) -> dict:
    """A gauge's value per host. A pipeline that counts for all its hosts together (one
    int) is attributed to its host when it has one, else to host "all"."""
    if isinstance(value, Mapping):
        return {h: int(v) for h, v in value.items()}
    if not hosts:
        return {}
    return {next(iter(hosts)) if len(hosts) == 1 else "all": int(value or 0)}
