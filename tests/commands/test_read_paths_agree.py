"""`replay`, `report` and `whatif` read logs through one loop (streams/replay_files):
the same files give the same records, in the same order, whichever command reads them
(issue 25 item 2, issue 30). The input has what a site's archive directory has: two head
nodes (one in an rsyslog file naming its host on each line, one in native logs named by
--host), a rotated DPM log, and a longer copy of the first rotated piece (its repeated
lines counted once), beside the name-server log."""

from __future__ import annotations

import os

import pytest

from dpmstream.cli import build_parser
from dpmstream.commands.whatif import read_records
from dpmstream.parsers.records import call_row, request_row
from dpmstream.report.sources import from_logs
from dpmstream.simulator import SimConfig, simulate
from dpmstream.streams.inputs import describe
from dpmstream.streams.progress import Progress

from tests.helpers import dpmstream, read_csv

REQUESTS = 300
NATIVE_HOST = "dpmhead02.cern.ch"
TZ = "Europe/Zurich"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The files of two head nodes: head 1's rsyslog file; head 2's DPM log rotated into
    three pieces, the middle one a longer copy of the first, and its DPNS log."""
    tmp = tmp_path_factory.mktemp("site")
    rsyslog = simulate(SimConfig(requests=REQUESTS, seed=3, syslog_file=True, tz=TZ,
                                 get_fraction=0.3), tmp / "head1")
    native = simulate(SimConfig(requests=REQUESTS, seed=4, host=NATIVE_HOST, tz=TZ,
                                get_fraction=0.3, abort_rate=0.02), tmp / "head2")
    lines = native.log_path.read_text().splitlines(keepends=True)
    dated = native.log_path.stat()   # a file's date gives its year (no year in its stamps)
    first, copy_end = len(lines) * 2 // 5, len(lines) * 3 // 5
    rotated = [tmp / "head2.log.2", tmp / "head2.log.1", tmp / "head2.log"]
    for path, part in zip(rotated, (lines[:first], lines[:copy_end], lines[copy_end:])):
        path.write_text("".join(part))
        os.utime(path, ns=(dated.st_atime_ns, dated.st_mtime_ns))
    files = [str(tmp / "head1.messages"), *map(str, rotated), str(native.dpns_log_path)]
    return files, first


def rows_of(records: list[dict]) -> tuple[list, list]:
    """The CSV rows replay writes for these records, in their order."""
    requests = [request_row(r) for r in records if r["kind"] == "request"]
    calls = [call_row(r) for r in records if r["kind"] == "call"]
    return requests, calls


def replayed(site, out) -> tuple[list, list]:
    dpmstream("replay", "--quiet", "--tz", TZ, "--host", NATIVE_HOST, "--out", str(out), *site)
    return read_csv(out / "requests.csv")[1:], read_csv(out / "calls.csv")[1:]


def test_replay_report_and_whatif_see_the_same_records_from_the_same_files(site, tmp_path):
    site, repeated = site
    requests, calls = replayed(site, tmp_path / "replay")
    assert len({r[0] for r in requests}) == 2, "both head nodes' requests are read"
    assert len(requests) > REQUESTS and calls

    data = from_logs([describe(f) for f in site], host=NATIVE_HOST, profile=None, tz=TZ,
                     year=None, settings={}, since=None, until=None,
                     progress=Progress(None, enabled=False))
    assert data.stats.reassembly.duplicate_lines == repeated, "the copy's first lines count once"
    assert rows_of(data.requests + data.calls) == (requests, calls)

    args = build_parser(["whatif"]).parse_args(
        ["whatif", "--host", NATIVE_HOST, "--tz", TZ, "--sthreads", "9",
         "--out", str(tmp_path / "whatif"), *site])
    got_requests, got_calls, _, _ = read_records(site, args)
    assert rows_of(got_requests + got_calls) == (requests, calls)
