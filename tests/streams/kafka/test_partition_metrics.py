"""What a worker reports for a partition's committed batch."""

from __future__ import annotations

import logging

import pytest

from dpmstream.simulator import SimConfig, simulate
from dpmstream.streams.kafka.state import PartitionState
from dpmstream.streams.metrics.exporter import PipelineMetrics
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


def test_records_that_are_not_envelopes_are_logged_once_per_new_count_and_partition(caplog):
    report = PartitionReport()
    parts = {p: PartitionState(p) for p in (0, 1)}
    with caplog.at_level(logging.WARNING, logger="dpmstream.worker"):
        for p in (0, 1, 0):
            parts[p].feed_record(b"h", b"not json")
            report.committed(report.take(parts[p]), [])
        report.committed(report.take(parts[0]), [])           # nothing new: no line
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["partition 0: 1 records that are not line envelopes so far (last: not JSON: JSONDecodeError)",
                     "partition 1: 1 records that are not line envelopes so far (last: not JSON: JSONDecodeError)",
                     "partition 0: 2 records that are not line envelopes so far (last: not JSON: JSONDecodeError)"]


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
