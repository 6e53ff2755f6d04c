"""The compiled DOME CSV line (native/src/dome_csv.rs) against the Python reference
(parsers/dome_records.python_csv_line): the same bytes for every record of a simulated
DOME site (every kind, both engines' dicts), for awkward texts, and Python's line for a
value no record holds (the compiled one declines it)."""

import os

import pytest

from dpmstream.parsers import dome_records
from dpmstream.parsers.dome_checksums import ChecksumWaits, with_checksums
from dpmstream.simulator.dome_config import DomeConfig
from dpmstream.simulator.dome_run import simulate_dome

from tests.parsers.test_records import AWKWARD_TEXTS
from tests.scenarios.test_dome_truth import ENGINES, reassemble

needs_compiled = pytest.mark.skipif(
    dome_records._compiled_csv is None and not os.environ.get("DPMSTREAM_REQUIRE_NATIVE"),
    reason="the compiled formatting is not built (no Rust toolchain at install time)")


def awkward_records() -> list[dict]:
    """A record of every kind per awkward text, with None, zero and negative cells."""
    out = []
    for i, text in enumerate(AWKWARD_TEXTS):
        out += [
            {"kind": "dome_call", "host": text or "h", "pid": 100 + i, "tid": 140685573784640 + i,
             "role": None if i % 2 else "head", "command": text, "http_code": None if i % 3 else 200,
             "caller": text, "remote_client": None if i % 2 else text, "start": 1496133845000 + i,
             "end": None if i % 4 == 3 else 1496133845999, "duration": None if i % 4 == 3 else -i,
             "cut": i % 2, "whole_seconds": 1 - i % 2},
            {"kind": "dome_put", "head": "dpmhead01", "lfn": text, "put_time": -1500 - i, "put_code": 200,
             "server": text, "fs": "/srv/fs1", "pfn": text, "size": 10 ** i,
             "putdone_disk_time": None, "putdone_head_time": 0, "putdone_code": None,
             "put_to_putdone": 999, "status": "success", "end_reason": "putdone", "ended": 1001,
             "whole_seconds": 0},
            {"kind": "dome_checksum", "head": "h", "caller": text, "remote_client": text, "start": 5,
             "end": 6, "wait": 1, "polls": i, "outcome": "done", "http_code": None, "endings": 1,
             "overlap": 0, "whole_seconds": 1},
            {"kind": "dome_capacity", "time": 7, "host": "d1", "fs": text, "phys": 2 ** 40, "free": text},
            {"kind": "dome_fs_event", "time": 8, "host": "h", "server": text, "fs": None,
             "event": "enabled", "transition": 1},
            {"kind": "dome_journald_gap", "time": 9, "host": "h", "program": text, "lines": i},
        ]
    out.append({"kind": "dome_put", "head": "h"})   # keys missing: empty cells
    return out


@needs_compiled
def test_compiled_dome_csv_lines_are_what_the_csv_module_writes():
    for record in awkward_records():
        assert dome_records._compiled_csv(record) == dome_records.python_csv_line(record), record


SITE = DomeConfig(duration=300.0, rate=4.0, disks=2, disk_down_at=100.0, restart_at=200.0,
                  gap_at=150.0, timeout=120.0)


@pytest.fixture(scope="module")
def simulated_site(tmp_path_factory):
    """SITE simulated once for the module (each engine reads it)."""
    return simulate_dome(SITE, tmp_path_factory.mktemp("dome-csv") / "site")


@needs_compiled
@pytest.mark.parametrize("engine", ENGINES)
def test_every_record_of_a_simulated_site_has_the_reference_line(simulated_site, engine):
    _, records = reassemble(simulated_site, SITE, engine)
    records = with_checksums(records, ChecksumWaits())
    assert {r["kind"] for r in records} >= {"dome_call", "dome_put", "dome_checksum",
                                            "dome_capacity", "dome_fs_event"}
    for record in records:
        assert dome_records._compiled_csv(record) == dome_records.python_csv_line(record), record


@needs_compiled
@pytest.mark.parametrize("odd", [{"cut": True}, {"pid": 1.5}, {"pid": 10 ** 30}])
def test_a_value_no_record_holds_is_left_to_python(odd):
    record = dict(awkward_records()[0], **odd)
    assert dome_records._compiled_csv(record) is None
    assert dome_records.csv_line(record) == dome_records.python_csv_line(record)


@needs_compiled
def test_a_kind_it_does_not_know_is_left_to_python():
    assert dome_records._compiled_csv({"kind": "request", "host": "h"}) is None
    assert dome_records._compiled_csv({"host": "h"}) is None
