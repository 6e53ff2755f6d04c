"""The report's DOME section (report/dome_analysis.py, report/dome_page.py): its numbers
are the simulator's truth for the records the DOME engine gives (the compiled one where
built, as the report's replay runs it: record for record the reference's,
tests/parsers/test_dome_engines_agree.py), and the page says when durations are
whole-second rounded."""

from __future__ import annotations

from collections import Counter

import pytest

from dpmstream.parsers import engines
from dpmstream.parsers.quantiles import nearest_rank
from dpmstream.report.dome_analysis import dome_numbers
from dpmstream.report.dome_page import dome_section
from dpmstream.simulator.dome_config import DomeConfig
from dpmstream.simulator.dome_run import simulate_dome
from tests.scenarios.test_dome_truth import reassemble, truth_rows


@pytest.fixture(scope="module", params=["traditional", "rfc3339"])
def site(request, tmp_path_factory):
    cfg = DomeConfig(stamp=request.param, duration=400.0, rate=3.0, disks=2,
                     disk_down_at=150.0, disk_down_s=120.0, timeout=120.0)
    prefix = tmp_path_factory.mktemp("dome") / "site"
    result = simulate_dome(cfg, prefix)
    _, records = reassemble(result, cfg, engines.choose(None, engines.compiled_dome_available))
    truth = {name: truth_rows(f"{prefix}.{name}.csv")
             for name in ("calls", "puts", "capacity", "fs_events")}
    return request.param, records, truth


def _class(row: dict) -> str:
    return "none" if row["cut"] == "1" or not row["http_code"] else row["http_code"][0] + "xx"


def test_calls_per_command_and_code_class_are_the_truths(site):
    _, records, truth = site
    n = dome_numbers(records)
    assert n.calls == len(truth["calls"]) > 1000
    want = Counter((r["role"] or "?", r["command"] or "?", _class(r)) for r in truth["calls"])
    got = Counter({(row.role, row.command, cls): k for row in n.commands
                   for cls, k in row.classes.items() if k})
    assert got == want
    assert [row.calls for row in n.commands] == sorted((row.calls for row in n.commands), reverse=True)


def test_call_durations_come_only_from_sub_second_stamps(site):
    stamp, records, truth = site
    n = dome_numbers(records)
    timed = [r for r in truth["calls"] if r["duration"]]
    if stamp == "traditional":
        assert n.whole_second_calls == n.calls == len(truth["calls"])
        assert n.whole_second_puts == n.puts == len(truth["puts"])
        assert all(not row.durations.values for row in n.commands)
        return
    assert n.whole_second_calls == n.whole_second_puts == 0
    for row in n.commands:
        values = sorted(int(r["duration"]) for r in timed
                        if (r["role"] or "?", r["command"] or "?") == (row.role, row.command))
        assert row.durations.values == values
        assert row.durations.quantile(0.95) == nearest_rank(values, 0.95)


def test_puts_and_put_to_putdone_are_the_truths(site):
    _, records, truth = site
    n = dome_numbers(records)
    assert n.puts_by_status == {s: sum(1 for r in truth["puts"] if r["status"] == s)
                                for s in ("success", "failed", "incomplete")}
    assert n.put_to_putdone == sorted(int(r["put_to_putdone"]) for r in truth["puts"]
                                      if r["put_to_putdone"])
    assert n.puts_by_status["success"] > 100


def test_filesystems_are_the_latest_capacity_and_the_state_changes(site):
    _, records, truth = site
    n = dome_numbers(records)
    latest = {}
    for r in truth["capacity"]:
        latest[(r["host"], r["fs"])] = (int(r["time"]), int(r["phys"]), int(r["free"]))
    assert {(h, fs): (t, phys, free) for h, fs, t, phys, free in n.capacity} == latest
    changes = [(int(r["time"]), r["server"], r["fs"], r["event"])
               for r in truth["fs_events"] if r["transition"] == "1"]
    assert sorted(n.transitions) == sorted(changes)
    assert {e for *_, e in changes} == {"disabled", "enabled"}  # the disk node came back
    assert n.disabled_now == []
    assert n.fs_event_lines == len(truth["fs_events"])


def test_the_section_says_when_durations_are_whole_second_rounded(site):
    stamp, records, _ = site
    html = dome_section(dome_numbers(records), None)
    for table in ("dome-calls-table", "dome-puts-table", "dome-fs-table", "dome-fs-events-table"):
        assert f'id="{table}"' in html
    assert ("whole-second rounded" in html) == (stamp == "traditional")


def test_no_dome_record_no_section():
    assert dome_section(dome_numbers([]), None) == ""


def test_every_dome_record_kind_is_dated_and_kept_apart_from_the_dpm_records():
    """A DOME kind the report did not know would be taken for a DPM call record."""
    from dpmstream.parsers.dome_records import KINDS
    from dpmstream.report.dome_analysis import TIME_OF, is_dome
    assert set(TIME_OF) == set(KINDS)
    assert all(is_dome({"kind": kind}) for kind in KINDS)
