"""`replay`, `report` and `whatif` read logs through one loop (streams/replay_files):
the same files give the same records, in the same order, whichever command reads them
(issue 25 item 2, issue 30). The input has what a site's archive directory has: two head
nodes (one in an rsyslog file naming its host on each line, one in native logs named by
--host), a rotated DPM log, and a longer copy of the first rotated piece (its repeated
lines counted once), beside the name-server log."""

from __future__ import annotations

import pytest

from dpmstream.cli import build_parser
from dpmstream.commands.whatif import read_records
from dpmstream.parsers.records import call_row, request_row
from dpmstream.parsers.settings import ReassemblySettings
from dpmstream.report.sources import from_logs
from dpmstream.streams.inputs import describe
from dpmstream.streams.progress import Progress

from tests.engine_inputs import DEFAULT_REQUESTS, two_heads_input
from tests.helpers import dpmstream_in_process, read_csv


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The two heads' files the engines are compared on (tests/engine_inputs.py): head 1's
    rsyslog file; head 2's DPM log rotated into three pieces, the middle one a longer copy
    of the first, and its DPNS log. With the first piece's line count: the lines repeated."""
    inp = two_heads_input(tmp_path_factory.mktemp("site"))
    repeated = len(inp.paths[1].read_bytes().splitlines())
    return inp, repeated


def rows_of(records: list[dict]) -> tuple[list, list]:
    """The CSV rows replay writes for these records, in their order."""
    requests = [request_row(r) for r in records if r["kind"] == "request"]
    calls = [call_row(r) for r in records if r["kind"] == "call"]
    return requests, calls


def replayed(inp, out) -> tuple[list, list]:
    done = dpmstream_in_process("replay", "--quiet", "--tz", inp.tz, "--host", inp.host,
                                "--out", str(out), *map(str, inp.paths))
    assert done.returncode == 0, done.stderr.decode()
    return read_csv(out / "requests.csv")[1:], read_csv(out / "calls.csv")[1:]


def test_replay_report_and_whatif_see_the_same_records_from_the_same_files(site, tmp_path):
    inp, repeated = site
    files = [str(path) for path in inp.paths]
    requests, calls = replayed(inp, tmp_path / "replay")
    assert len({r[0] for r in requests}) == 2, "both head nodes' requests are read"
    assert len(requests) > DEFAULT_REQUESTS and calls

    data = from_logs([describe(f) for f in files], host=inp.host, profile=None, tz=inp.tz,
                     year=None, settings=ReassemblySettings(), since=None, until=None,
                     progress=Progress(None, enabled=False))
    assert data.stats.reassembly.duplicate_lines == repeated, "the copy's first lines count once"
    assert rows_of(data.requests + data.calls) == (requests, calls)

    args = build_parser(["whatif"]).parse_args(
        ["whatif", "--host", inp.host, "--tz", inp.tz, "--sthreads", "9",
         "--out", str(tmp_path / "whatif"), *files])
    got_requests, got_calls, _, _ = read_records(files, args)
    assert rows_of(got_requests + got_calls) == (requests, calls)
