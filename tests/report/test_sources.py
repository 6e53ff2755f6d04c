"""report/sources.py: the report's records, counts and restarts read from log files."""

from __future__ import annotations

from dpmstream.parsers.settings import ReassemblySettings
from dpmstream.report.sources import from_logs
from dpmstream.streams.inputs import describe
from dpmstream.streams.progress import Progress

from tests.commands.test_report import FIRST, SECOND, write
from tests.dpmlog import call

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
