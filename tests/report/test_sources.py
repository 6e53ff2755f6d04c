"""report/sources.py: the report's records, counts and restarts read from log files."""

from __future__ import annotations

import pytest

from dpmstream.parsers.settings import ReassemblySettings
from dpmstream.report.sources import from_logs
from dpmstream.streams.inputs import describe
from dpmstream.streams.progress import Progress

from tests.commands.test_report import FIRST, SECOND, write
from tests.dpmlog import T3, call, closing

# The daemon comes back with a new pid; one line no profile pattern knows.
RESTARTED = (["08/12 10:06:00.000 23456 dpm_serv: started", "08/12 10:06:00.500 23456,1 dpm_srv_x: odd words"]
             + call("08/12 10:06:01.000", 5, "ping", end="08/12 10:06:01.003", pid=23456))


def test_unparsed_lines_and_restarts_are_placed_in_event_time_and_all_counted(tmp_path):
    log = write(tmp_path / "log", FIRST + SECOND + ["garbage line"] + RESTARTED)
    data = from_logs([describe(log)], host="head01", profile=None, tz="UTC", year=2011,
                     settings=ReassemblySettings(timeout_s=3600, max_in_flight=1000), since=None, until=None,
                     progress=Progress(None, enabled=False))
    assert data.lines["unmatched"] + data.lines["malformed"] == 2
    assert sum(n for _, n in data.unparsed) == 2
    assert data.restarts_total == 1 and len(data.restarts) == 1
    first_ms = data.requests[0]["started"]
    assert all(first_ms <= t <= first_ms + 400_000 for t, _ in data.unparsed + data.restarts)



def test_an_open_window_keeps_the_records_and_counts_a_window_around_them_keeps(tmp_path):
    """Without --since/--until the compiled tally takes each request and call from the
    engine and hands its dict on to be kept; a window keeps and tallies each dict in
    Python. A window that holds everything must give the same dataset: the same records
    in the same order (an orphan abortreq's op "?" too), the same table, directories and
    zone (read from the files where no --tz is given). Two heads' files (rsyslog, native
    logs rotated, the name server's: tests/engine_inputs.py), and a log of two puts and
    an abortreq of a token never put."""
    from dpmstream.parsers import engines
    from tests.engine_inputs import two_heads_input

    if engines.choose() != engines.COMPILED:
        pytest.skip("the compiled engine is not built: both reads take the Python way")
    heads = two_heads_input(tmp_path)
    orphan = write(tmp_path / "orphan.log", FIRST + SECOND + closing(
        "08/12 10:06:00.000", "08/12 10:06:00.002", 7, "abortreq", T3))
    for paths, host, tz, year in ((heads.paths, heads.host, None, None),
                                  ([orphan], "head01", "UTC", 2011)):
        def read(since):
            return from_logs([describe(str(p)) for p in paths], host=host, profile=None,
                             tz=tz, year=year, settings=ReassemblySettings(), since=since,
                             until=None, progress=Progress(None, enabled=False))

        open_, windowed = read(None), read("2000-01-01 00:00")
        assert windowed.since is not None and open_.requests
        assert open_.requests == windowed.requests and open_.calls == windowed.calls
        assert all(r["op"] for r in open_.requests)
        assert repr(open_.zone) == repr(windowed.zone)
        assert open_.summary.render(open_.stats, zone=open_.zone) == \
            windowed.summary.render(windowed.stats, zone=windowed.zone)
        assert open_.directories == windowed.directories
    assert [r["op"] for r in open_.requests] == ["put", "put", "?"]
