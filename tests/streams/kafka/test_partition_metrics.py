"""What a worker reports for a partition's committed batch."""

from __future__ import annotations

import logging

import pytest

from dpmstream.simulator import SimConfig, simulate
from dpmstream.streams.kafka.state import PartitionState
from dpmstream.streams.metrics.exporter import PipelineMetrics
from dpmstream.streams.kafka.log_pace import Pace
from dpmstream.streams.kafka.partition_metrics import PartitionReport
from tests.worker_helpers import envelopes

HOST = "dpmhead01"


@pytest.fixture(scope="module")
def recs(tmp_path_factory):
    sim = simulate(SimConfig(requests=60, seed=3), tmp_path_factory.mktemp("sim") / "s")
    return envelopes(sim.log_path, HOST, "/var/log/dpm/log")


def sample(metrics, name, **labels):
    value = metrics.registry.get_sample_value(name, labels)
    return 0 if value is None else value


def fed(partition, recs):
    part = PartitionState(partition)
    for key, value in recs:
        part.feed_record(key, value)
    return part


def test_a_committed_batch_counts_its_records_lines_and_duplicates(recs):
    metrics = PipelineMetrics()
    report = PartitionReport(metrics)
    part = fed(0, recs + recs[:25])            # 25 lines delivered twice
    records, _changes = part.checkpoint()
    report.committed(report.take(part), records)
    assert report.duplicates == 25 and not part.duplicates   # counted once, then cleared
    assert sample(metrics, "dpmstream_duplicate_lines_total", host=HOST) == 25
    assert sample(metrics, "dpmstream_lines_total", host=HOST, daemon="dpm",
                  result="parsed") == part.stats.lines[(HOST, "dpm", "parsed")] > 0
    requests = [r for r in records if r["kind"] == "request"]
    assert requests and sum(
        sample(metrics, "dpm_request_phase_seconds_count", host=HOST, op=op, phase="total",
               status=status)
        for op in ("put", "get") for status in ("success", "failed")) == len(requests)


def test_records_skipped_as_bad_are_logged_with_their_place_at_most_once_per_reason_and_interval(caplog):
    now = [0.0]
    report = PartitionReport(topic="dpm.lines", pace=Pace(10.0, clock=lambda: now[0]))
    parts = {p: PartitionState(p) for p in (0, 1)}
    with caplog.at_level(logging.WARNING, logger="dpmstream.worker"):
        for offset in (5, 6, 7):
            parts[0].feed_record(b"h", b"not json", offset)
        parts[0].feed_record(b"h", None, 8)
        report.committed(report.take(parts[0]), [])
        parts[1].feed_record(b"h", b"{", 40)                  # the same reason, 1 s later
        now[0] = 1.0
        report.committed(report.take(parts[1]), [])
        report.committed(report.take(parts[0]), [])           # nothing new: no line
        now[0] = 11.0
        parts[1].feed_record(b"h", b"[", 41)
        report.committed(report.take(parts[1]), [])
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "bad record skipped: dpm.lines partition 0 offset 5: not_json (not JSON: JSONDecodeError)",
        "bad record skipped: dpm.lines partition 0 offset 8: no_value (empty record (no value))",
        "bad record skipped: dpm.lines partition 1 offset 41: not_json (not JSON: JSONDecodeError); "
        "3 more not_json records skipped unlogged before it"]
    assert report.bad_records == 6


def test_bad_records_are_counted_by_reason_every_reason_present_from_the_start():
    metrics = PipelineMetrics()
    report = PartitionReport(metrics)
    part = PartitionState(0)
    for value in (b"{", b"{", b"[[1]]", None):
        part.feed_record(b"h", value)
    report.committed(report.take(part), [])
    assert sample(metrics, "dpmstream_bad_records_total", reason="not_json") == 2
    assert sample(metrics, "dpmstream_bad_records_total", reason="not_object") == 1
    assert sample(metrics, "dpmstream_bad_records_total", reason="no_value") == 1
    assert metrics.registry.get_sample_value("dpmstream_bad_records_total",
                                             {"reason": "offset_jump"}) == 0


def test_a_forgotten_partition_leaves_its_counters_and_zeroes_its_gauges(recs):
    metrics = PipelineMetrics()
    report = PartitionReport(metrics)
    part = fed(0, recs[: len(recs) // 2])      # requests still open
    report.committed(report.take(part), part.checkpoint()[0])
    parsed = sample(metrics, "dpmstream_lines_total", host=HOST, daemon="dpm", result="parsed")
    assert sample(metrics, "dpm_requests_in_flight", host=HOST) > 0
    report.forget([0])
    assert sample(metrics, "dpm_requests_in_flight", host=HOST) == 0
    assert sample(metrics, "dpmstream_lines_total", host=HOST, daemon="dpm",
                  result="parsed") == parsed
