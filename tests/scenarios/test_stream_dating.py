"""One rule dates a stream without a year (parsers/clock.stream_reference): `replay`, `run`,
`replay --to-kafka` and `check_dpm --log` give the same instant to the same line.

The file is a Zurich log of New Year's first minutes whose mtime, 2013-12-31 23:30 UTC,
is already 2014 in Zurich. Read in the log's zone the mtime dates the lines, 01/01 00:10
to 00:20, in 2014; read in UTC (the machine's zone here) it would date them a year early."""

from __future__ import annotations

import os
import time
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from dpmstream.parsers import engines
from dpmstream.parsers.pipeline import Pipeline
from dpmstream.probes.measurement import Wanted
from dpmstream.probes.sources_log import LogSource
from dpmstream.streams.inputs import describe
from dpmstream.streams.kafka.replay import LineTimes
from dpmstream.streams.live.feed import LiveFeed
from dpmstream.streams.live.follow import Follower
from dpmstream.streams.progress import Progress
from dpmstream.streams.replay_files import replay_inputs
from tests import dpmlog
from tests.dpmlog import T1, T2, put
from tests.engine_helpers import LogInput, run_engine

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


# -- an rsyslog file dates its stamps in the offset its prefixes state (issue 27) --------

ENGINES = [engines.PYTHON, pytest.param(engines.COMPILED, marks=pytest.mark.skipif(
    not engines.compiled_available() and not os.environ.get("DPMSTREAM_REQUIRE_NATIVE"),
    reason="the compiled engine is not built"))]
HEAD = "dpmhead01.cern.ch"
ZURICH = ZoneInfo(ZONE)
RECEIPT_LAG = timedelta(milliseconds=3)   # rsyslog stamps a line just after it is written


class TwoWritings:
    """One Zurich head node's log as the daemon writes it (local stamps, no zone) and as
    rsyslog writes the same lines (each behind an RFC 3339 prefix in Zurich's offset then)."""

    def __init__(self):
        self.plain: list[str] = []
        self.prefixed: list[str] = []

    def add(self, lines_at):
        """lines_at: (UTC instant, builder(stamp text) -> lines)."""
        at, build = lines_at
        stamp = at.astimezone(ZURICH)
        for text in build(f"{stamp:%m/%d %H:%M:%S}.{stamp.microsecond // 1000:03d}"):
            received = (at + RECEIPT_LAG).astimezone(ZURICH).isoformat(timespec="microseconds")
            self.plain.append(text)
            self.prefixed.append(f"{received} {HEAD} dpm[12345]: {text}")

    def request(self, start: datetime, tid: int, token: str, seconds: float = 1.5):
        """put -> proc_put -> putdone, `seconds` from the put to the putdone."""
        t = lambda s: start + timedelta(seconds=s)   # noqa: E731 (a local shorthand)
        self.add((t(0), lambda s: dpmlog.put(s, tid, token)))
        self.add((t(0.004), lambda s: dpmlog.proc(s, None, tid + 1, token)))
        self.add((t(0.040), lambda s: dpmlog.proc(s, s, tid + 1, token)[1:]))
        self.add((t(seconds), lambda s: dpmlog.closing(s, s, tid, "putdone", token)))

    def write(self, tmp_path) -> tuple[LogInput, LogInput]:
        """The plain log read with --tz and --year, the rsyslog one with neither."""
        inputs = []
        for kind, lines, tz, year in (("plain", self.plain, ZONE, 2011),
                                      ("rsyslog", self.prefixed, None, None)):
            (tmp_path / kind).mkdir()
            path = tmp_path / kind / "log"
            path.write_text("\n".join(lines) + "\n")
            inputs.append(LogInput(kind, (path,), host=HEAD, tz=tz, year=year))
        return tuple(inputs)


def tokens(n: int) -> list[str]:
    return [f"{i:08x}-1111-4c2d-8e3f-aaaaaaaaaaaa" for i in range(n)]


@pytest.fixture
def machine_in_utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")   # this machine's zone is not the log's
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def request_times(outcome) -> list[tuple]:
    return sorted((r["token"], r["started"], r["ended"], r["total_ms"]) for r in outcome.records
                  if r["kind"] == "request")


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("season", ["summer", "winter"])
def test_an_rsyslog_file_without_tz_gives_the_records_of_the_plain_file_read_in_its_zone(
        tmp_path, machine_in_utc, engine, season):
    start = datetime(2011, 8, 12, 12, 31, 40, tzinfo=timezone.utc) if season == "summer" \
        else datetime(2011, 1, 12, 13, 31, 40, tzinfo=timezone.utc)
    log = TwoWritings()
    for i, token in enumerate(tokens(6)):
        log.request(start + timedelta(seconds=7 * i), 10 + 2 * i, token)
    plain, prefixed = log.write(tmp_path)
    read_plain, read_prefixed = run_engine(engine, plain), run_engine(engine, prefixed)
    assert len(read_plain.records) >= 6
    assert read_prefixed.records == read_plain.records
    first = min(r["started"] for r in read_prefixed.records)
    assert first == int(start.timestamp() * 1000)   # 14:31:40 CEST or CET, not UTC


@pytest.mark.parametrize("engine", ENGINES)
def test_an_rsyslog_file_across_the_autumn_change_dates_each_line_by_its_prefixs_offset(
        tmp_path, machine_in_utc, engine):
    """Zurich, 2011-10-30: 03:00 CEST goes back to 02:00 CET (01:00 UTC). Requests every
    40 s from 02:50 CEST to 02:10 CET, one of them open across the change."""
    change = datetime(2011, 10, 30, 1, 0, tzinfo=timezone.utc)
    log = TwoWritings()
    starts = [change + timedelta(seconds=40 * i) for i in range(-15, 16)]
    for at, token in zip(starts, tokens(len(starts))):
        log.request(at, 20, token, seconds=30)
    plain, prefixed = log.write(tmp_path)
    read_prefixed = run_engine(engine, prefixed)
    assert [r[1] for r in request_times(read_prefixed)] == [int(t.timestamp() * 1000) for t in starts]
    assert all(r[3] == 30_000 for r in request_times(read_prefixed)), request_times(read_prefixed)
    assert read_prefixed.records == run_engine(engine, plain).records
