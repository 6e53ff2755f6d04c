"""streams/metrics/stats_collector.py: pipeline stats read at scrape time from the snapshot
published last, summed over sources, counters never going down."""

from __future__ import annotations

from types import SimpleNamespace

from prometheus_client import CollectorRegistry

from dpmstream.parsers.pipeline import Pipeline
from dpmstream.streams.metrics.stats_collector import StatsCollector, StatsSnapshot

T0 = 1313152303101


def collector(clock_ms=lambda: T0):
    c = StatsCollector(label_lines=lambda key: key, label_host=lambda host: host, clock_ms=clock_ms)
    registry = CollectorRegistry()
    registry.register(c)
    return c, registry


def lines(registry, host="h1", daemon="dpm", result="parsed"):
    return registry.get_sample_value("dpmstream_lines_total",
                                     {"host": host, "daemon": daemon, "result": result})


def test_a_scrape_reads_the_published_snapshot_not_the_live_stats():
    live = SimpleNamespace(lines={("h1", "dpm", "parsed"): 10}, evictions=0, expired=0,
                           in_flight={"h1": 2}, slow_queue_depth={}, latest_event_ms={"h1": T0})
    c, registry = collector()
    c.publish(StatsSnapshot.of(live))
    live.lines[("h1", "dpm", "parsed")] = 99     # the pipeline runs on, unpublished
    live.in_flight["h1"] = 7
    assert lines(registry) == 10
    assert registry.get_sample_value("dpm_requests_in_flight", {"host": "h1"}) == 2


def test_sources_are_summed_and_a_retired_one_keeps_its_counts_but_not_its_gauges():
    c, registry = collector()
    c.publish(StatsSnapshot(lines={("h1", "dpm", "parsed"): 10}, evictions=2,
                            in_flight={"h1": 3}), source="p0")
    c.publish(StatsSnapshot(lines={("h1", "dpm", "parsed"): 5}, in_flight={"h1": 1}), source="p1")
    assert lines(registry) == 15
    assert registry.get_sample_value("dpm_requests_in_flight", {"host": "h1"}) == 4
    c.retire("p0")
    assert lines(registry) == 15
    assert registry.get_sample_value("dpmstream_evictions_total", {"reason": "cap"}) == 2
    assert registry.get_sample_value("dpm_requests_in_flight", {"host": "h1"}) == 1
    c.retire("p1")
    assert registry.get_sample_value("dpm_requests_in_flight", {"host": "h1"}) == 0


def test_the_event_lag_grows_with_the_wall_clock_between_publishes():
    now = [T0 + 1000]
    c, registry = collector(clock_ms=lambda: now[0])
    c.publish(StatsSnapshot(latest_event_ms={"h1": T0}))
    assert registry.get_sample_value("dpmstream_event_lag_seconds", {"host": "h1"}) == 1.0
    now[0] += 9000                     # the pipeline is stuck: no new publish
    assert registry.get_sample_value("dpmstream_event_lag_seconds", {"host": "h1"}) == 10.0


def test_label_values_are_bounded_once_per_label_set_in_the_publishing_thread():
    calls = []
    c = StatsCollector(label_lines=lambda key: calls.append(key) or ("other",) + key[1:],
                       label_host=lambda host: host)
    for n in (1, 2, 3):
        c.publish(StatsSnapshot(lines={("h1", "dpm", "parsed"): n, ("h2", "dpm", "parsed"): n}))
    assert calls == [("h1", "dpm", "parsed"), ("h2", "dpm", "parsed")]
    (family,) = [f for f in c.collect() if f.name == "dpmstream_lines"]
    assert [(s.labels["host"], s.value) for s in family.samples if s.name.endswith("_total")] \
        == [("other", 6)]


def test_a_snapshot_of_a_pipeline_counts_its_open_requests_per_host():
    snap = StatsSnapshot.of(Pipeline(lambda record: None).stats)
    assert snap == StatsSnapshot()
