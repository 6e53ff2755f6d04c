"""A DOME line's receive time dates its traditional stamp (docs/dome.md, section 6 item 4;
parsers/clock.py's rule, as for the DPM daemons): `Source.feed(line, received_ms)` and
`feed_received` (the Kafka worker) take the year nearest to the receive time, so a
traditional-stamp dmlite.log shipped across New Year, in a year other than the one its
file's mtime (or the stream's first line) says, is dated as the simulator's truth says.
The event time stays the line's own stamp. On both engines."""

from __future__ import annotations

import heapq
import os
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from dpmstream.parsers.settings import ReassemblySettings
from dpmstream.parsers import engines
from dpmstream.parsers.dome_profiles import resolve_dome_profile
from dpmstream.parsers.pipeline import Pipeline
from dpmstream.simulator.dome_config import DomeConfig
from dpmstream.simulator.dome_run import simulate_dome
from dpmstream.streams.kafka.envelope import decode, encode
from dpmstream.streams.kafka.state import PartitionState
from tests.scenarios.test_dome_truth import KIND, as_cells, in_truth_order, truth_rows
from tests.streams.kafka.test_state_dome import Message

ENGINES = [engines.PYTHON, pytest.param(engines.COMPILED, marks=pytest.mark.skipif(
    not engines.compiled_dome_available() and not os.environ.get("DPMSTREAM_REQUIRE_NATIVE"),
    reason="the compiled DOME engine is not built"))]
TZ = "Europe/Zurich"
TIMEOUT_S = 120.0
# A file whose mtime is mid-2026 (a live file, or a copy): it alone would date the lines
# 2025 and 2026.
MTIME_MS = int(datetime(2026, 6, 1, 12, tzinfo=ZoneInfo(TZ)).timestamp() * 1000)


@pytest.fixture(scope="module")
def new_year_site(tmp_path_factory):
    """Six minutes of a head and two disk nodes from 31 Dec 2016 23:57 local time, their
    dmlite.log in the traditional stamp (no year) shipped as rsyslog does (kafka envelopes:
    `received` a few ms after each line was written)."""
    cfg = DomeConfig(envelope="kafka", stamp="traditional", start="2016-12-31 23:57:00", tz=TZ,
                     duration=360.0, rate=3.0, disks=2, disk_down_at=None, restart_at=None,
                     gap_at=None, timeout=TIMEOUT_S, seed=7)
    return simulate_dome(cfg, tmp_path_factory.mktemp("newyear") / "site")


def envelopes(result) -> list[tuple[object, bytes]]:
    """Every node's envelopes (decoded, and as shipped) merged by receive time, as they
    reach one partition live."""
    def node(path):
        for text in path.read_text(encoding="utf-8").splitlines():
            raw = text.encode()
            env = decode(raw)
            yield env.received_ms, env, raw
    merged = heapq.merge(*(node(p) for p in result.logs.values()), key=lambda item: item[0])
    return [(env, raw) for _ms, env, raw in merged]


@pytest.fixture(scope="module")
def shipped(new_year_site) -> list[tuple[object, bytes]]:
    """The site's envelopes (envelopes()), decoded once for the module: every test only
    reads them."""
    return envelopes(new_year_site)


def assert_truth(result, records) -> dict:
    """Every call and put record equal to its truth row (every column), none missing."""
    matched = {}
    for name in ("calls", "puts"):
        truth = in_truth_order(truth_rows(result.paths[name]), name)
        columns = list(truth[0])
        mine = in_truth_order([as_cells(r, columns) for r in records if r["kind"] == KIND[name]], name)
        assert len(mine) == len(truth), name
        for got, want in zip(mine, truth):
            assert got == want, name
        matched[name] = len(mine)
    return matched


def years(records) -> set[int]:
    return {datetime.fromtimestamp(r["start"] / 1000, ZoneInfo(TZ)).year
            for r in records if r["kind"] == "dome_call"}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("feed", ["feed", pytest.param("feed_received", marks=pytest.mark.slow)])
def test_traditional_stamps_take_the_year_of_their_receive_time_not_the_files_mtime(
        new_year_site, shipped, engine, feed):
    """A source per node dated by a file mtime of 2026, fed each line with its receive
    time (one by one, or as the worker groups them): the records of 2016 and 2017.
    (`make check` feeds them one by one here; the worker's test below feeds them grouped,
    through feed_received.)"""
    records = []
    pipeline = Pipeline(records.append, ReassemblySettings(timeout_s=TIMEOUT_S), engine=engine, on_dome_record=records.append)
    assert pipeline.dome_engine == engine
    profile = resolve_dome_profile("dmlite-dome")
    sources = {}
    for env, _raw in shipped:
        src = sources.get(env.host)
        if src is None:
            src = sources[env.host] = pipeline.source(env.host, host=env.host, path=env.path,
                                                      profile=profile, tz=TZ, year_hint_ms=MTIME_MS)
        if feed == "feed":
            src.feed(env.line, received_ms=env.received_ms)
        else:
            src.feed_received([env.line], env.received_ms)
    pipeline.finish()
    matched = assert_truth(new_year_site, records)
    assert matched["calls"] > 1000 and matched["puts"] > 500
    assert years(records) == {2016, 2017}   # the truth's, across midnight
    head = new_year_site.config.head
    assert pipeline.stats.latest_received_ms[head] == max(
        env.received_ms for env, _raw in shipped if env.host == head)


@pytest.mark.parametrize("engine", ENGINES)
def test_the_worker_dates_a_traditional_dmlite_log_shipped_across_new_year(new_year_site, shipped, engine, monkeypatch):
    """The worker's partition (streams/kafka/state.py, the loop `dpmstream worker` runs per
    partition) fed the envelopes in batches: every record is its truth's."""
    monkeypatch.setenv("DPMSTREAM_ENGINE", engine)
    part = PartitionState(0, ReassemblySettings(timeout_s=TIMEOUT_S), tz=TZ)
    assert part.pipeline.dome_engine == engine
    msgs = [Message(env.host.encode(), raw, i) for i, (env, raw) in enumerate(shipped)]
    out = []
    for start in range(0, len(msgs), 500):
        part.feed_batch(msgs[start:start + 500])
        out += part.checkpoint()[0]
    part.finish()   # the end of input a streaming worker never reaches
    out += part.checkpoint()[0]
    assert_truth(new_year_site, out)
    assert years(out) == {2016, 2017}


@pytest.mark.parametrize("engine", ENGINES)
def test_the_worker_dates_a_node_silent_for_seven_months_by_its_receive_time(engine, monkeypatch):
    """A node's dmlite.log falls silent in June and speaks again in January: the month went
    back by five only, which the stream's own roll over (12 -> 01) cannot tell from a
    stray line; the receive time can. (Before receive times dated DOME lines, January's
    call was dated January of the year before, seven months before June's.)"""
    monkeypatch.setenv("DPMSTREAM_ENGINE", engine)
    part = PartitionState(0, ReassemblySettings(timeout_s=TIMEOUT_S), tz="UTC")
    head = "dome[2345]: {140685573784640}[1] dmlite dome "
    calls = [("2016-06-30T10:00:00.500000Z", "Jun 30 10:00:00"), ("2017-01-15T10:00:00.500000Z", "Jan 15 10:00:00")]
    msgs, offset = [], 0
    for received, stamp in calls:
        for text in ("workerFunc : Accepted connection, ipcfd: 12, keepConnection: 1",
                     "SendSimpleResp : Exiting: code: 200"):
            line = f"{stamp} dpmhead01 {head}{text}"
            msgs.append(Message(b"dpmhead01", encode("dpmhead01", "/var/log/dmlite/dmlite.log",
                                                     offset, received, line), len(msgs)))
            offset += len(line) + 1
    part.feed_batch(msgs)
    part.finish()
    starts = [r["start"] for r in part.checkpoint()[0] if r["kind"] == "dome_call"]
    assert starts == [int(datetime(2016, 6, 30, 10, tzinfo=ZoneInfo("UTC")).timestamp() * 1000),
                      int(datetime(2017, 1, 15, 10, tzinfo=ZoneInfo("UTC")).timestamp() * 1000)]
