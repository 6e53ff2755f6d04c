"""The compiled DOME engine's records straight to CSV text (native/src/dome_csv.rs
DomeCsvBlocks, the CSV sink's `compiled_dome_receiver`, which the DOME tally forwards to
in `replay --out`): every DOME file holds byte for byte the reference's lines
(parsers/dome_records.python_csv_line of the Python engine's dicts), in the order the
records came, and the engine handed every record over with no dict made. Simulated sites
of both stamp kinds, every DOME kind, odd lines mixed in: capacities with empty cells,
HTTP codes outside 200..599."""

from __future__ import annotations

import os
import re

import pytest

from dpmstream.parsers import dome_records, engines
from dpmstream.parsers.dome_profiles import dome_profile_from_dict, resolve_dome_profile
from dpmstream.parsers.pipeline import Pipeline
from dpmstream.parsers.profiles import read_profile_file
from dpmstream.parsers.settings import ReassemblySettings
from dpmstream.simulator.dome_run import simulate_dome
from dpmstream.streams.sinks.csv import DOME_FILES, CsvSink, _header
from dpmstream.streams.sinks.directories import DirectoryStats
from dpmstream.streams.sinks.fan_out import FanOut
from dpmstream.streams.sinks.summary import Summary
from dpmstream.streams.sinks.tally import Aggregates

from tests.streams.sinks.test_dome_summary_tally import SITES, TIMEOUT_S, feed_site, site_config

pytestmark = pytest.mark.skipif(
    not engines.compiled_dome_available() and not os.environ.get("DPMSTREAM_REQUIRE_NATIVE"),
    reason="the compiled DOME engine is not built here")

# A site's wording where a capacity's phys and free may be missing: the records' None
# cells, which the bundled wording never gives.
ODD_CAPACITY = r"dome checkDiskSpaces : fs: (?P<fs>\S+)(?: phys: (?P<phys>\d+))?(?: free: (?P<free>\d+))?"


def profile():
    data = read_profile_file(resolve_dome_profile("dmlite-dome").source)
    data["roles"] = {**data["roles"], "capacity": ODD_CAPACITY}
    return dome_profile_from_dict(data, source="dmlite-dome, capacity cells optional")


def odd(lines: list[str]) -> list[str]:
    """Some capacities with cells missing, some responses with odd codes."""
    out = []
    for i, line in enumerate(lines):
        if "checkDiskSpaces : fs:" in line and i % 3:
            line = re.sub(r" phys: \d+ free: \d+", [" free: 5", ""][i % 3 - 1], line)
        elif "Exiting: code:" in line and i % 7 == 0:
            line = re.sub(r"code: \d+", ["code: 999", "code: 000", "code: 199"][i % 3], line)
        out.append(line)
    return out


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    """Each stamp kind's simulated site (the DOME tally's test's), odd lines mixed in:
    {node: its lines}."""
    made = {}
    for stamp in SITES:
        result = simulate_dome(site_config(stamp), tmp_path_factory.mktemp(stamp) / "site")
        made[stamp] = {host: odd(path.read_text(encoding="utf-8").splitlines())
                       for host, path in result.logs.items()}
    return made


def replay(lines: dict, engine: str, on_dome_record, on_record) -> None:
    feed_site(Pipeline(on_record, ReassemblySettings(timeout_s=TIMEOUT_S), engine=engine,
                       on_dome_record=on_dome_record), lines, profile())


@pytest.mark.parametrize("stamp", list(SITES))
def test_the_engines_records_are_written_as_the_reference_lines_without_a_dict(sites, stamp, tmp_path):
    want: list[dict] = []
    replay(sites[stamp], engines.PYTHON, want.append, want.append)
    kinds = {r["kind"] for r in want}
    assert kinds == set(DOME_FILES), kinds   # every DOME kind, so every file is compared
    capacities = [r for r in want if r["kind"] == "dome_capacity"]
    assert {type(r["free"]) for r in capacities} == {int, type(None)}
    assert {None, 0, 199, 999} <= {r["http_code"] for r in want if r["kind"] == "dome_call"}

    # replay --out's wiring: the DOME tally, then the CSV sink alone
    aggregates = Aggregates(Summary(), DirectoryStats(), compiled=True)
    csv_sink = CsvSink(str(tmp_path))
    others = FanOut([csv_sink])
    replay(sites[stamp], engines.COMPILED, aggregates.on_dome_record(others), aggregates.on_record(others))
    FanOut([aggregates, csv_sink]).close()

    assert csv_sink.compiled_dome_receiver.engine_records == len(want)
    assert list(csv_sink.dome_paths) == list(dict.fromkeys(r["kind"] for r in want))  # opened in order
    for kind, name in DOME_FILES.items():
        lines = "".join(dome_records.python_csv_line(r) for r in want if r["kind"] == kind)
        header = _header(dome_records.KINDS[kind][0])
        assert (tmp_path / name).read_bytes() == header + lines.encode(), name


class Text:
    """A text file that remembers each write (the blocks)."""

    def __init__(self, header: str):
        self.writes = [header]

    def write(self, text: str) -> int:
        self.writes.append(text)
        return len(text)


def blocks(block_bytes: int):
    from dpmstream.parsers._native import DomeCsvBlocks
    files: dict[str, Text] = {}

    def open_kind(kind):
        files[kind] = Text(f"header of {kind}\n")
        return files[kind]

    return DomeCsvBlocks(dome_records.KINDS, open_kind, dome_records.python_csv_line, block_bytes), files


def test_dicts_are_written_in_blocks_per_kind_in_the_order_they_came():
    from tests.parsers.test_dome_csv import awkward_records

    records = awkward_records() + [dict(awkward_records()[0], cut=True)]   # a bool: Python's line
    writer, files = blocks(block_bytes=300)
    for record in records:
        writer(record)
    assert any(len(f.writes) > 1 for f in files.values())   # some blocks went before the flush
    writer.flush()
    assert list(files) == list(dict.fromkeys(r["kind"] for r in records))
    for kind, f in files.items():
        assert f.writes[0] == f"header of {kind}\n"
        assert all(len(block.encode()) >= 300 for block in f.writes[1:-1])
        assert "".join(f.writes[1:]) == "".join(dome_records.python_csv_line(r)
                                                for r in records if r["kind"] == kind)
    assert writer.engine_records == 0


def test_the_writer_refuses_columns_other_than_the_engines_records():
    kinds = dict(dome_records.KINDS)
    columns, ms = kinds["dome_capacity"]
    kinds["dome_capacity"] = (columns[::-1], ms)
    from dpmstream.parsers._native import DomeCsvBlocks
    with pytest.raises(ValueError, match="dome_capacity"):
        DomeCsvBlocks(kinds, print, print)


class FailingFlush:
    def flush(self):
        raise OSError("disk full")


def test_a_run_cut_by_an_error_keeps_the_dome_rows_written_before_it(tmp_path):
    """The DPM writer's flush failing at close still leaves the DOME files whole."""
    from tests.parsers.test_dome_csv import awkward_records

    csv_sink = CsvSink(str(tmp_path))
    records = awkward_records()[:6]
    for record in records:
        csv_sink.write(record)
    csv_sink.compiled_receiver = FailingFlush()
    with pytest.raises(OSError, match="disk full"):
        csv_sink.close()
    for record in records:
        text = (tmp_path / DOME_FILES[record["kind"]]).read_bytes().decode()
        assert text == _header(dome_records.KINDS[record["kind"]][0]).decode() + dome_records.python_csv_line(record)
