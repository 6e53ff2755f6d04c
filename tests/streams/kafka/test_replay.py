"""streams/kafka/replay.py: `replay --to-kafka` publishing log files to a real broker as
envelopes, at full speed or paced by event time."""

from __future__ import annotations

import gzip
import time
import uuid

import pytest

from dpmstream.simulator import SimConfig, simulate
from dpmstream.streams.kafka.replay import publish_files
from tests.worker_helpers import read_topic

pytestmark = pytest.mark.services


@pytest.fixture(scope="module")
def sims(tmp_path_factory):
    """head02's log of test_worker's simulated pair."""
    base = tmp_path_factory.mktemp("replay-sims")
    return {"head02": simulate(SimConfig(requests=200, seed=4, get_fraction=0.3), base / "b")}


def test_replay_to_kafka_publishes_envelopes_with_byte_offsets_keyed_by_host(kafka_broker, tmp_path, sims):
    src = sims["head02"].log_path
    archive = tmp_path / "log-20110812.gz"
    data = src.read_bytes()
    archive.write_bytes(gzip.compress(data))
    topic = f"replay-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topics([topic], partitions=1)
    n = publish_files([str(archive)], kafka_broker.url, topic=topic, host="head02")
    lines = data.split(b"\n")[:-1]
    assert n == len(lines)
    got = read_topic(kafka_broker.bootstrap, topic)
    assert len(got) == n
    offsets = [0]
    for line in lines[:-1]:
        offsets.append(offsets[-1] + len(line) + 1)
    assert [v["offset"] for _k, v in got] == offsets
    assert [v["line"] for _k, v in got] == [line.decode() for line in lines]
    assert {k for k, _v in got} == {b"head02"}
    assert {v["path"] for _k, v in got} == {str(archive)}
    # The year comes from the rotated file's name, as `dpmstream replay` dates it.
    assert all(v["received"].startswith("2011-08-12T") for _k, v in got)


def _seconds_of_day(line):
    hh, mm, ss = line[6:18].split(":")
    return int(hh) * 3600 + int(mm) * 60 + float(ss)


def test_paced_replay_follows_event_time_at_the_given_speed(kafka_broker, tmp_path, sims):
    lines = sims["head02"].log_path.read_text().splitlines()
    t0 = _seconds_of_day(lines[0])
    cut = [ln for ln in lines if _seconds_of_day(ln) <= t0 + 6.0]
    span_s = _seconds_of_day(cut[-1]) - t0
    assert span_s > 5.0
    path = tmp_path / "slice.log"
    path.write_text("\n".join(cut) + "\n")
    topic = f"paced-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topics([topic], partitions=1)
    started = time.monotonic()
    publish_files([str(path)], kafka_broker.url, topic=topic, host="h", speed=4.0, year=2011)
    elapsed = time.monotonic() - started
    # 6 s of event time at 4x: 1.5 s of wall time, plus connecting and flushing.
    assert span_s / 4.0 * 0.9 <= elapsed <= span_s / 4.0 + 2.0
    assert len(read_topic(kafka_broker.bootstrap, topic)) == len(cut)
