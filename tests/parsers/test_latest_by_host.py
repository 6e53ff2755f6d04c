"""A source's latest event time of a host (Source.latest_by_host, over the sources
PipelineStats.latest_event_ms) is the latest stamp among the lines of that host read so
far: it never goes back. Its readers: the probe's window end (probes/sources_log.py,
sources_dome_log.py), replay's check of the inputs' years (streams/replay_files.py),
report's dating of unparsed lines (report/sources.py), the metrics' event lag.

The shape that tests it: an rsyslog file of one head node holding the DPM daemon's and
the name server's lines (the name server's read by their own profile, routed by tag),
whose stamps interleave a few milliseconds out of order; fed line by line and in runs
of a few lines, by the compiled engine, the Python engine and Python alone."""

from __future__ import annotations

import re
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from dpmstream.parsers import fastpath
from dpmstream.parsers.pipeline import Pipeline
from dpmstream.parsers.profiles import resolve_profile
from dpmstream.simulator import simulate
from dpmstream.simulator.scenarios import scenario

TZ = "Europe/Zurich"
STAMP = re.compile(rb" (?:dpm|dpns): (\d\d)/(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{3}) ")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """(head node, the lines of its rsyslog file, each line's daemon stamp in UTC ms or
    None for another program's line)."""
    cfg = scenario("mixed-syslog", requests=400, tz=TZ)
    prefix = tmp_path_factory.mktemp("latest") / "m"
    simulate(cfg, prefix)
    lines = prefix.with_suffix(".messages").read_bytes().splitlines()
    stamps = []
    for line in lines:
        m = STAMP.search(line)
        if m is None:
            stamps.append(None)
            continue
        mo, d, h, mi, s, ms = map(int, m.groups())
        stamps.append(int(datetime(2011, mo, d, h, mi, s, ms * 1000, tzinfo=ZoneInfo(TZ))
                          .timestamp() * 1000))
    return cfg.host, lines, stamps


def test_the_name_servers_and_the_daemons_stamps_interleave_out_of_order(site):
    """What makes the shape: a name-server line later than a daemon's line after it (and
    the other way round), so each daemon's lines alone would leave the host's latest
    time where the other's had already passed it."""
    _, lines, stamps = site
    latest = {b" dpm: ": -1, b" dpns: ": -1}
    passed = {tag: 0 for tag in latest}  # lines of one daemon below the other's latest
    for line, ts in zip(lines, stamps):
        if ts is None:
            continue
        tag, other = (b" dpm: ", b" dpns: ") if b" dpm: " in line else (b" dpns: ", b" dpm: ")
        if latest[tag] < ts < latest[other]:
            passed[tag] += 1
        latest[tag] = max(latest[tag], ts)
    assert all(n > 10 for n in passed.values()), passed


ENGINES = ["compiled", "python", "pure-python"]


@pytest.mark.parametrize("step", [1, 3, 64])
@pytest.mark.parametrize("engine", ENGINES)
def test_a_hosts_latest_time_is_the_latest_stamp_of_its_lines_read_so_far(site, monkeypatch, engine, step):
    host, lines, stamps = site
    if engine == "pure-python":
        monkeypatch.setenv("DPMSTREAM_PURE_PYTHON", "1")
        assert not fastpath.available()
    elif not fastpath.available():
        pytest.skip("the compiled line parser is not built here")
    else:
        monkeypatch.setenv("DPMSTREAM_ENGINE", engine)
    pipeline = Pipeline(lambda record: None)
    # the daemon's profile given: no lines buffered to detect it
    src = pipeline.source("m", host=host, tz=TZ, year=2011, profile=resolve_profile("lcgdm-dpm"))
    latest = -1
    for i in range(0, len(lines), step):
        src.feed_lines(lines[i:i + step])
        latest = max([latest, *(ts for ts in stamps[i:i + step] if ts is not None)])
        assert src.latest_by_host[host] == latest, i
        assert pipeline.stats.latest_event_ms == {host: latest}
    pipeline.finish()
    assert pipeline.stats.lines[(host, "dpns", "parsed")] > 1000  # the name server's were read
