"""streams/sinks/fan_out.py: one record shape for every sink, one fan-out."""

from __future__ import annotations

import pytest

from dpmstream.streams.sinks.fan_out import FanOut


class Kept:
    """A sink that remembers what it was given."""

    def __init__(self, fails_on_close: bool = False):
        self.records, self.flushes, self.closed = [], 0, False
        self.fails_on_close = fails_on_close

    def write(self, record):
        self.records.append(record)

    def flush(self):
        self.flushes += 1

    def close(self):
        self.closed = True
        if self.fails_on_close:
            raise OSError("disk full")


class NoFlush:
    def __init__(self):
        self.records = []

    def write(self, record):
        self.records.append(record)

    def close(self):
        pass


def test_every_record_reaches_every_sink_in_order():
    a, b = Kept(), NoFlush()
    out = FanOut([a, b])
    for i in range(3):
        out.write({"kind": "call", "n": i})
    assert a.records == b.records == [{"kind": "call", "n": i} for i in range(3)]


def test_flush_reaches_the_sinks_that_buffer():
    a, b = Kept(), NoFlush()
    FanOut([a, b]).flush()
    assert a.flushes == 1


def test_a_sink_that_fails_to_close_does_not_keep_the_others_open():
    a, b, c = Kept(), Kept(fails_on_close=True), Kept()
    with pytest.raises(OSError, match="disk full"):
        FanOut([a, b, c]).close()
    assert a.closed and b.closed and c.closed


def test_the_record_sinks_of_replay_and_run_take_the_same_record_through_one_fan_out(tmp_path):
    from prometheus_client import CollectorRegistry

    from dpmstream.parsers.records import CALL_FIELDS
    from dpmstream.streams.metrics.exporter import PipelineMetrics
    from dpmstream.streams.sinks.csv import CsvSink
    from dpmstream.streams.sinks.directories import DirectoriesFile, DirectoryStats
    from dpmstream.streams.sinks.jsonlines import JsonLinesSink
    from dpmstream.streams.sinks.openmetrics import OpenMetricsFile
    from dpmstream.streams.sinks.summary import Summary

    record = dict.fromkeys(CALL_FIELDS)
    record.update(kind="call", host="head01", daemon="dpns", pid=1, thread=2, op="creat",
                  path="/dpm/cern.ch/home/f1", started=1313152303101, ended=1313152303104,
                  duration_ms=3, rc=0)
    summary, metrics = Summary(), PipelineMetrics(CollectorRegistry())
    directories = DirectoryStats(csv_path=tmp_path / "directories.csv")
    out = FanOut([CsvSink(tmp_path / "csv"), JsonLinesSink(tmp_path / "r.jsonl"), summary,
                  directories, DirectoriesFile(tmp_path / "d.json"), metrics,
                  OpenMetricsFile(tmp_path / "om.txt")])
    out.write(record)
    out.flush()
    out.close()
    assert (tmp_path / "csv" / "calls.csv").read_text().count("\n") == 2   # header, record
    assert (tmp_path / "r.jsonl").read_text().count("\n") == 1
    assert summary.calls[("dpns", "creat")].count == 1
    assert "/dpm/cern.ch/home" in (tmp_path / "directories.csv").read_text()
    assert "/dpm/cern.ch/home" in (tmp_path / "d.json").read_text()
    assert metrics.registry.get_sample_value(
        "dpm_call_seconds_count",
        {"host": "head01", "daemon": "dpns", "op": "creat", "result": "ok"}) == 1
    assert "dpm_call_seconds_count" in (tmp_path / "om.txt").read_text()
