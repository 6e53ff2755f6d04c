"""One rule dates a stream without a year (parsers/clock.stream_reference): `replay`, `run`,
`replay --to-kafka` and `check_dpm --log` give the same instant to the same line.

The file is a Zurich log of New Year's first minutes whose mtime, 2013-12-31 23:30 UTC,
is already 2014 in Zurich. Read in the log's zone the mtime dates the lines, 01/01 00:10
to 00:20, in 2014; read in UTC (the machine's zone here) it would date them a year early."""

from __future__ import annotations

import os
import time
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from dpmstream.parsers.pipeline import Pipeline
from dpmstream.probes.measurement import Wanted
from dpmstream.probes.sources_log import LogSource
from dpmstream.streams.inputs import describe
from dpmstream.streams.kafka.replay import LineTimes
from dpmstream.streams.live.feed import LiveFeed
from dpmstream.streams.live.follow import Follower
from dpmstream.streams.progress import Progress
from dpmstream.streams.replay_files import replay_inputs
from tests.dpmlog import T1, T2, put

ZONE = "Europe/Zurich"
MTIME = datetime(2013, 12, 31, 23, 30, tzinfo=timezone.utc)
LAST_LINE = int(datetime(2014, 1, 1, 0, 20, tzinfo=ZoneInfo(ZONE)).timestamp() * 1000)


@pytest.fixture
def log_file(tmp_path, monkeypatch):
    monkeypatch.setenv("TZ", "UTC")  # the machine's zone differs from the log's
    time.tzset()
    path = tmp_path / "log"
    lines = (put("01/01 00:10:00.000", 3, T1, end="01/01 00:10:00.002")
             + put("01/01 00:20:00.000", 4, T2, end="01/01 00:20:00.000"))
    path.write_text("\n".join(lines) + "\n")
    os.utime(path, (MTIME.timestamp(), MTIME.timestamp()))
    yield str(path)
    monkeypatch.undo()
    time.tzset()


def test_replay_dates_the_last_line_by_the_mtime_in_the_logs_zone(log_file):
    pipeline = Pipeline(lambda rec: None)
    replay_inputs(pipeline, [describe(log_file)], host="h", profile=None, tz=ZONE, year=None,
                  progress=Progress(None, enabled=False))
    assert pipeline.stats.latest_event_ms["h"] == LAST_LINE


def test_run_dates_it_the_same(log_file):
    feed = LiveFeed([Follower(log_file)], host="h", tz=ZONE)
    feed.read_to_end()
    feed.close()
    assert feed.pipeline.stats.latest_event_ms["h"] == LAST_LINE


def test_replay_to_kafka_dates_it_the_same(log_file):
    times = LineTimes(log_file, int(MTIME.timestamp() * 1000), None, ZONE)
    with open(log_file, "rb") as f:
        stamps = [times.of(raw) for raw in f]
    assert stamps[-1] == LAST_LINE


def test_check_dpm_log_dates_it_the_same(log_file):
    snap = LogSource(log_file, 3600, tz=ZONE).fetch(Wanted(phase_quantiles=(0.5,)))
    assert snap.end_ms == LAST_LINE
