"""Hostile records on the lines topic, through the real worker and a real broker: each is
counted by reason, logged once with its place, skipped and committed past; no other line
is lost or doubled, and a restart does not meet it again (issue 26)."""

from __future__ import annotations

import json
import logging
import re
import urllib.request

import pytest

from dpmstream.streams.kafka import state as state_module
from dpmstream.streams.metrics.exporter import PipelineMetrics, serve
from tests.streams.kafka.test_worker import host_records, run_worker, sample, topics, worker_output
from tests.worker_helpers import as_json, canonical, committed_offsets, core_records, produce

pytestmark = pytest.mark.services

DPM = "/var/log/dpm/log"


@pytest.fixture(scope="module")
def sims(tmp_path_factory):
    from dpmstream.simulator import SimConfig, simulate
    base = tmp_path_factory.mktemp("hostile-sims")
    return {"head01": simulate(SimConfig(requests=150, seed=5), base / "a"),
            "head02": simulate(SimConfig(requests=100, seed=6, get_fraction=0.3), base / "b")}


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def envelope_with(**members) -> bytes:
    base = {"host": "head02", "path": DPM, "offset": 1, "received": "2011-08-12T14:00:00.000000Z",
            "line": "08/12 14:00:00.000 1,1 dpm: x"}
    return json.dumps({**base, **members}).encode()


# (key, value, reason): what a hostile producer put on the lines topic.
HOSTILE = [
    (b"head02", b'{"host":"head02","path":"/var/log/dpm/log","offset":' + nested(1100) + b"}",
     "too_deep"),                                                   # the 2.2 KB poison record
    (b"head02", nested(1100), "too_deep"),
    (b"head02", b"{not json", "not_json"),
    (b"head02", b'{"host":"head\xff02","path":"/p","offset":1,"line":"x"}', "not_utf8"),
    (b"head02", None, "no_value"),
    (None, b"", "no_value"),
    (b"head02", b"[1, 2]", "not_object"),
    (b"head02", b"null", "not_object"),
    (b"head02", envelope_with(host=None), "bad_host"),
    (b"head02", envelope_with(host="h" * 100_000), "bad_host"),
    (b"head02", b'{"host":"\\ud800","path":"/p","offset":1,"line":"x"}', "bad_host"),
    (b"head02", envelope_with(path=7), "bad_path"),
    (b"head02", envelope_with(offset=-1), "bad_offset"),
    (b"head02", envelope_with(offset=1.5), "bad_offset"),
    (b"head02", envelope_with(offset="9" * 5000), "bad_offset"),
    (b"head02", envelope_with(offset=1 << 70), "bad_offset"),
    (b"head02", envelope_with(line={"a": 1}), "bad_line"),
    (b"head02", json.dumps({"host": "head02", "path": DPM, "offset": 3}).encode(), "bad_line"),
]


def test_records_the_worker_cannot_use_are_counted_logged_with_their_place_and_committed_past(
        kafka_broker, sims, engine, caplog):
    t = topics("hostile")
    kafka_broker.create_topics([t["lines"]], partitions=1)
    good = host_records(sims["head02"], "head02")
    hostile = [(key, value) for key, value, _reason in HOSTILE]
    produce(kafka_broker.bootstrap, t["lines"], good[:300] + hostile + good[300:])
    total = len(good) + len(hostile)
    metrics = PipelineMetrics()
    with caplog.at_level(logging.WARNING, logger="dpmstream.worker"):
        run_worker(kafka_broker, t, total, metrics=metrics)
    assert canonical(worker_output(kafka_broker, t)) == canonical(as_json(core_records(good)))
    assert committed_offsets(kafka_broker.bootstrap, t["group"]) == {0: total}
    by_reason = {}
    for _key, _value, reason in HOSTILE:
        by_reason[reason] = by_reason.get(reason, 0) + 1
    for reason, n in by_reason.items():
        assert sample(metrics, "dpmstream_bad_records_total", reason=reason) == n, reason
    assert sample(metrics, "dpmstream_lines_total", host="head02", daemon="unknown",
                  result="malformed") + sample(metrics, "dpmstream_lines_total", host="unknown",
                                               daemon="unknown", result="malformed") == len(hostile)
    # The poison record's place is in the log, once; no record's content is.
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert f"{t['lines']} partition 0 offset 300: too_deep" in logged
    assert len(re.findall(r"offset 300:", logged)) == 1
    assert "[[[[" not in logged and "hhhhhhhh" not in logged
    # A restart resumes after them: it feeds the one line published since, and nothing else.
    produce(kafka_broker.bootstrap, t["lines"], good[:1])
    again = run_worker(kafka_broker, t, 1, metrics=PipelineMetrics())
    assert again.lines_seen == 1 and again.report.bad_records == 0
    assert committed_offsets(kafka_broker.bootstrap, t["group"]) == {0: total + 1}


@pytest.mark.parametrize("ahead", [100_000_000_000, 300 << 10], ids=["1e11", "300KiB-ahead"])
def test_one_implausible_offset_does_not_make_the_later_lines_of_its_file_duplicates(
        kafka_broker, sims, engine, ahead):
    """An envelope whose offset is 1e11 once made every later line of its host and file
    count as a duplicate: 96 % of the requests were dropped, without a word. One 300 KiB
    past the line before it made the real lines of those 300 KiB duplicates."""
    t = topics("jump")
    kafka_broker.create_topics([t["lines"]], partitions=2)
    recs = host_records(sims["head01"], "head01")
    other = host_records(sims["head02"], "head02")
    poisoned = json.loads(recs[500][1])
    poisoned["offset"] += ahead
    bogus = (b"head01", json.dumps(poisoned).encode())      # that line again, its offset bad
    produce(kafka_broker.bootstrap, t["lines"], recs[:501] + [bogus] + recs[501:] + other)
    metrics = PipelineMetrics()
    run_worker(kafka_broker, t, len(recs) + len(other) + 1, metrics=metrics)
    want = as_json(core_records(recs)) + as_json(core_records(other))
    assert canonical(worker_output(kafka_broker, t)) == canonical(want)
    assert sample(metrics, "dpmstream_duplicate_lines_total", host="head01") == 0
    assert sample(metrics, "dpmstream_bad_records_total", reason="offset_jump") == 1
    parsed = sum(sample(metrics, "dpmstream_lines_total", host="head01", daemon=d, result="parsed")
                 for d in ("dpm", "dpns"))
    assert parsed == len(recs)


def test_a_file_that_really_skipped_ahead_loses_no_line_through_the_worker(kafka_broker, sims, engine):
    """rsyslog dropped a stretch of a file (its queue full): the line after the gap is more
    than 1 MiB past the one before. It used to be skipped as an offset jump, one real line
    lost at every real gap; it is held until the next line confirms the jump, then fed."""
    t = topics("gap")
    kafka_broker.create_topics([t["lines"]], partitions=1)
    recs = host_records(sims["head01"], "head01")
    gap = 50 << 20
    moved = recs[:700] + [(key, json.dumps({**json.loads(value), "offset": json.loads(value)["offset"] + gap})
                           .encode()) for key, value in recs[700:]]
    produce(kafka_broker.bootstrap, t["lines"], moved)
    metrics = PipelineMetrics()
    run_worker(kafka_broker, t, len(moved), metrics=metrics)
    assert canonical(worker_output(kafka_broker, t)) == canonical(as_json(core_records(recs)))
    assert sample(metrics, "dpmstream_bad_records_total", reason="offset_jump") == 0
    assert sample(metrics, "dpmstream_duplicate_lines_total", host="head01") == 0
    parsed = sum(sample(metrics, "dpmstream_lines_total", host="head01", daemon=d, result="parsed")
                 for d in ("dpm", "dpns"))
    assert parsed == len(recs)


def test_duplicate_lines_of_thousands_of_hosts_stay_under_the_host_cap_on_metrics(
        kafka_broker, engine):
    """Bad envelopes once gave dpmstream_duplicate_lines_total{host} 3,000 series and a
    100 KB label value: it now takes the host cap and form of every other family."""
    t = topics("hosts")
    kafka_broker.create_topics([t["lines"]], partitions=2)
    line = "08/12 14:00:00.000 12345,3 dpm_srv_proc_put: request started"
    hosts = [f"host{i:05d}" for i in range(3000)] + ["x" * 200, "y" * 253]
    once = [(h.encode(), envelope_with(host=h, offset=0, line=line)) for h in hosts]
    produce(kafka_broker.bootstrap, t["lines"], once + once)    # every line delivered twice
    metrics = PipelineMetrics(max_hosts=256)
    server = serve(0, "127.0.0.1", registry=metrics.registry)
    try:
        run_worker(kafka_broker, t, 2 * len(once), metrics=metrics)
        body = urllib.request.urlopen(server.url, timeout=10).read().decode()
    finally:
        server.close()
    series = re.findall(r'^dpmstream_duplicate_lines_total\{host="([^"]*)"\} (\S+)$', body, re.M)
    assert 0 < len(series) <= 256 + 1
    assert max(len(host) for host, _n in series) <= 64
    assert sum(float(n) for _host, n in series) == len(hosts)   # every duplicate still counted
    for family in ("dpmstream_lines_total", "dpm_requests_in_flight"):
        labels = re.findall(rf'^{family}\{{[^}}]*host="([^"]*)"', body, re.M)
        assert len(set(labels)) <= 256 + 1 and all(len(host) <= 64 for host in labels), family


def test_a_record_whose_processing_raises_is_skipped_and_the_partition_goes_on(
        kafka_broker, sims, engine, monkeypatch):
    """No input known today makes the pipeline raise; should one, the worker must not
    stop on it for good. The failure is injected at PartitionState's seam (its batch and
    record feeding raise on one marked record, after feeding the records before it), on
    a real broker."""
    poison = b"POISON-FOR-THE-PIPELINE"
    real_batch, real_record = state_module.PartitionState.feed_batch, state_module.PartitionState.feed_record

    def feed_batch(self, messages):
        for i, msg in enumerate(messages):
            if msg.value() and poison in msg.value():
                real_batch(self, messages[:i]) if i else None
                raise RuntimeError("injected")
        real_batch(self, messages)

    def feed_record(self, key, value, kafka_offset=None):
        if value and poison in value:
            raise RuntimeError("injected")
        real_record(self, key, value, kafka_offset)

    monkeypatch.setattr(state_module.PartitionState, "feed_batch", feed_batch)
    monkeypatch.setattr(state_module.PartitionState, "feed_record", feed_record)
    t = topics("raises")
    kafka_broker.create_topics([t["lines"]], partitions=1)
    good = host_records(sims["head02"], "head02")
    bad = (b"head02", envelope_with(line=poison.decode(), offset=10**9))
    produce(kafka_broker.bootstrap, t["lines"], good[:400] + [bad] + good[400:])
    metrics = PipelineMetrics()
    worker = run_worker(kafka_broker, t, len(good) + 1, metrics=metrics, batch_records=300)
    assert canonical(worker_output(kafka_broker, t)) == canonical(as_json(core_records(good)))
    assert sample(metrics, "dpmstream_bad_records_total", reason="failed") == 1
    assert committed_offsets(kafka_broker.bootstrap, t["group"]) == {0: len(good) + 1}
    # The lines fed before the failing batch come again with it (the partition is taken
    # again from its last commit); each record is still counted once.
    assert worker.lines_seen == len(good) + 1
