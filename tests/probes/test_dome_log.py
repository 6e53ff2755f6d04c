"""check_dpm --dome --log: the last window of a simulated DOME node's log, read through
the pipeline (probes/sources_dome_log.py), against the simulator's truth."""

from __future__ import annotations

import csv
import re

import pytest

from dpmstream.parsers.clock import EventClock
from dpmstream.parsers.dome_lines import DomeLineParser
from dpmstream.parsers.dome_profiles import resolve_dome_profile
from dpmstream.parsers.dome_reassembly import DomeReassembler
from dpmstream.parsers.quantiles import nearest_rank
from tests.metrics_stack import simulate
from tests.probes.test_sources_prometheus import check_dpm

TZ = "Europe/Zurich"
WINDOW_MS = 300_000
# No restart and no journald gap: the only cut calls are those open at the end of the
# file, which the probe leaves out as in progress. The first disk node goes down at 400 s
# and stays down: its two filesystems are disabled at the end.
SITE = ("--duration", "600", "--rate", "3", "--restart-at", "100000", "--gap-at", "100000",
        "--disk-down-at", "400", "--disk-down-s", "100000")


@pytest.fixture(scope="module", params=["traditional", "rfc3339"])
def site(request, tmp_path_factory):
    prefix = simulate(tmp_path_factory.mktemp("dome-log") / "site", "--dome", "--stamp",
                      request.param, *SITE)
    truth = {}
    for name in ("calls", "puts", "capacity", "fs_events"):
        with open(f"{prefix}.{name}.csv", newline="") as fh:
            truth[name] = list(csv.DictReader(fh))
    return request.param, prefix, truth


def _newest_ms(path) -> int:
    parser = DomeLineParser(resolve_dome_profile("dmlite-dome"), EventClock(TZ, year=2017))
    stamps = [ev.ts for ev in map(parser.parse, open(path).read().splitlines()[-200:]) if ev]
    return max(stamps)


def _head_alone_puts(path, end: int) -> list[dict]:
    """The puts the head's log gives alone (the reference reassembler, every line of it):
    without the disk node's Exiting line a joined put ends at its timeout (docs/dome.md,
    "When a joined put ends"), so the site's truth, built from every node, is not the
    head's. Those ended in the window; not those the end of the file forces out."""
    parser = DomeLineParser(resolve_dome_profile("dmlite-dome"), EventClock(TZ, year=2017))
    engine = DomeReassembler(timeout_ms=120_000)
    ended = []
    for line in open(path).read().splitlines():
        ev = parser.parse(line)
        if ev is not None:
            ended += engine.feed(ev)
    return [r for r in ended if r["kind"] == "dome_put" and end - WINDOW_MS < r["ended"] <= end]


def _probe(path, *args):
    return check_dpm("--dome", "--log", str(path), "--tz", TZ, "--last-line-year", "2017",
                     "--window", "5m", "--request-timeout", "120", *args)


def test_the_heads_window_is_the_truths(site):
    stamp, prefix, truth = site
    head = f"{prefix}.dpmhead01.log"
    end = _newest_ms(head)
    calls = [c for c in truth["calls"] if c["host"] == "dpmhead01" and c["end"]
             and end - WINDOW_MS < int(c["end"]) <= end]
    puts = _head_alone_puts(head, end)
    rc, status, perf = _probe(head, "-w", "dome_call:p95=10")
    assert rc == 0, status
    assert int(perf["calls"][0]) == len(calls) > 1000
    assert int(perf["puts"][0]) == len(puts) > 200
    answered = [c for c in calls if c["http_code"]]
    errors = sum(1 for c in answered if c["http_code"][0] in "45")
    assert float(perf["dome_error_rate"][0]) == pytest.approx(errors / len(answered), rel=1e-5)
    failed = sum(1 for p in puts if p["status"] == "failed")
    assert float(perf["failed_rate"][0]) == pytest.approx(failed / len(puts), rel=1e-5)
    if stamp == "traditional":
        assert perf["dome_call_p95"][0] == "U" and "no call duration (whole-second stamps)" in status
    else:
        durations = sorted(int(c["duration"]) for c in calls)
        assert float(perf["dome_call_p95"][0]) == nearest_rank(durations, 0.95) / 1000


def test_the_heads_disabled_filesystems_page(site):
    _, prefix, truth = site
    state = {}
    for e in truth["fs_events"]:
        state[(e["server"], e["fs"])] = e["event"]
    disabled = sum(1 for event in state.values() if event == "disabled")
    assert disabled == 2
    rc, status, perf = _probe(f"{prefix}.dpmhead01.log", "-c", "dome_fs_disabled=0")
    assert rc == 2 and status.startswith(f"DOME CRITICAL - dome_fs_disabled = {disabled} "), status
    assert perf["dome_fs_disabled"][0] == str(disabled)


def test_a_disk_nodes_free_space_is_its_latest_capacity_lines(site):
    _, prefix, truth = site
    latest = {}
    for row in truth["capacity"]:
        if row["host"] == "dpmdisk02":
            latest[row["fs"]] = (int(row["free"]), int(row["phys"]))
    ratio = min(free / phys for free, phys in latest.values())
    rc, status, perf = _probe(f"{prefix}.dpmdisk02.log", "-w", f"dome_fs_free_ratio={ratio + 0.01}:")
    assert rc == 1 and status.startswith("DOME WARNING - dome_fs_free_ratio = "), status
    assert float(perf["dome_fs_free_ratio"][0]) == pytest.approx(ratio, rel=1e-5)
    assert perf["dome_fs_free_bytes"][0] == str(min(f for f, _ in latest.values()))


def test_a_dpm_profile_with_dome_is_unknown_saying_so(site):
    _, prefix, _ = site
    rc, status, _ = _probe(f"{prefix}.dpmhead01.log", "--profile", "lcgdm-dpm")
    assert rc == 3 and "a DPM daemon's profile, not a DOME one" in status, status
