"""check_dpm --dome --log: the last window of a simulated DOME site's logs (each node's,
or one node's alone), read through the pipeline side by side (probes/sources_dome_log.py),
against the simulator's truth, on both DOME engines."""

from __future__ import annotations

import csv
import glob
import re
import time

import pytest

from dpmstream.parsers.clock import EventClock
from dpmstream.parsers.dome_lines import DomeLineParser
from dpmstream.parsers.dome_profiles import resolve_dome_profile
from dpmstream.parsers.quantiles import nearest_rank
from tests.helpers import sampled
from tests.metrics_stack import simulate
from tests.probes.test_sources_prometheus import COUNTING_TIME, check_dpm_in_process

TZ = "Europe/Zurich"
WINDOW_MS = 300_000
TIMEOUT_MS = 120_000
# No restart and no journald gap: the only cut calls are those open at the end of the
# file, which the probe leaves out as in progress. The first disk node goes down at 400 s
# and stays down: its two filesystems are disabled at the end.
SITE = ("--duration", "600", "--rate", "3", "--restart-at", "100000", "--gap-at", "100000",
        "--disk-down-at", "400", "--disk-down-s", "100000")


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    """The site of each stamp, simulated once for the module, whatever order pytest sets
    `site` up in (a test parametrized on it, below, sets it up again)."""
    made = {}

    def site_of(stamp: str):
        if stamp not in made:
            prefix = simulate(tmp_path_factory.mktemp("dome-log") / "site", "--dome",
                                         "--stamp", stamp, *SITE)
            truth = {}
            for name in ("calls", "puts", "capacity", "fs_events"):
                with open(f"{prefix}.{name}.csv", newline="") as fh:
                    truth[name] = list(csv.DictReader(fh))
            made[stamp] = stamp, prefix, truth
        return made[stamp]
    return site_of


@pytest.fixture(scope="module", params=["traditional", "rfc3339"])
def site(request, sites):
    return sites(request.param)


def _newest_ms(path) -> int:
    parser = DomeLineParser(resolve_dome_profile("dmlite-dome"), EventClock(TZ, year=2017))
    stamps = [ev.ts for ev in map(parser.parse, open(path).read().splitlines()[-200:]) if ev]
    return max(stamps)


def _puts_over(truth, end: int) -> list[dict]:
    """The truth's puts ended in the window that the end of the logs does not leave in
    progress: not those it cut (`input_end`), nor those joined whose putdone had no
    answer yet while still within their timeout (the probe counts a put whose putdone
    call was answered: its status is told by its lines)."""
    return [p for p in truth["puts"] if end - WINDOW_MS < int(p["ended"]) <= end
            and p["end_reason"] != "input_end"
            and not (p["pfn"] and not p["putdone_code"] and int(p["put_time"]) + TIMEOUT_MS > end)]


def _probe(*paths, engine: str | None = None, args=()):
    logs = [arg for path in paths for arg in ("--log", str(path))]
    # These tests are about what is counted; under -t the answer may be partial.
    # The answer is the probe's, read in this process (test_check_dpm runs its process).
    return check_dpm_in_process("--dome", *logs, "--tz", TZ, "--last-line-year", "2017",
                                "--window", "5m", "--request-timeout", str(TIMEOUT_MS // 1000),
                                *COUNTING_TIME, *args,
                                env={"DPMSTREAM_ENGINE": engine} if engine else None)


def _nodes(prefix) -> list[str]:
    return sorted(glob.glob(f"{prefix}.dpm*.log"))


# Python's DOME engine reads a site's logs in four times the compiled one's time: make
# check reads the rfc3339 site with both, the traditional one with the compiled engine
# (tests.helpers.sampled); `make test` every pair.
@pytest.mark.parametrize("site, engine", sampled(
    [(stamp, engine) for stamp in ("traditional", "rfc3339") for engine in ("python", "compiled")],
    keep=[("traditional", "compiled"), ("rfc3339", "python"), ("rfc3339", "compiled")],
    ids=lambda cell: f"{cell[0]}-{cell[1]}"), indirect=["site"])
def test_the_sites_logs_read_side_by_side_count_the_truths_calls_and_puts(site, engine):
    stamp, prefix, truth = site
    nodes = _nodes(prefix)
    assert len(nodes) == 4  # the head and three disk nodes
    end = max(map(_newest_ms, nodes))
    calls = [c for c in truth["calls"] if c["end"] and end - WINDOW_MS < int(c["end"]) <= end]
    puts = _puts_over(truth, end)
    rc, status, perf = _probe(*nodes, engine=engine, args=("-v",))
    assert rc == 0, status
    assert f"{engine} DOME engine" in status
    assert "not seen" not in status and "partial" not in status
    assert int(perf["calls"][0]) == len(calls) > 1000
    assert {c["host"] for c in calls} == {"dpmhead01", "dpmdisk01", "dpmdisk02", "dpmdisk03"}
    assert int(perf["puts"][0]) == len(puts) > 200
    for status_name in ("failed", "incomplete"):
        n = sum(1 for p in puts if p["status"] == status_name)
        assert n > 0 and float(perf[f"{status_name}_rate"][0]) == pytest.approx(n / len(puts), rel=1e-5)
    assert perf["partial"][0] == "0" and "read_lines" not in perf
    # the logs span less than window and lookback: -v says each was read whole
    assert sorted(map(int, re.findall(r"read (\d+) lines of \S+ from byte 0 ", status))) == \
        sorted(sum(1 for _ in open(node)) for node in nodes)
    if stamp == "rfc3339":
        durations = sorted(int(c["duration"]) for c in calls)
        assert float(perf["dome_call_p95"][0]) == nearest_rank(durations, 0.95) / 1000


def test_a_quoted_glob_reads_the_nodes_it_matches_as_if_each_were_named(site):
    _, prefix, _ = site
    assert _probe(f"{prefix}.dpm*.log") == _probe(*_nodes(prefix))


def test_the_heads_log_alone_counts_its_puts_at_the_putdone_answer_and_says_the_disk_side_was_not_read(site):
    """From the head's log alone a put never sees the disk's Exiting line that ends it;
    counted at its head's putdone answer, its puts are the site's: failed_rate no longer
    leans to the failures (which end at their line) and a put with no putdone is
    incomplete, not failed."""
    stamp, prefix, truth = site
    head = f"{prefix}.dpmhead01.log"
    end = _newest_ms(head)
    assert end == max(map(_newest_ms, _nodes(prefix)))
    calls = [c for c in truth["calls"] if c["host"] == "dpmhead01" and c["end"]
             and end - WINDOW_MS < int(c["end"]) <= end]
    puts = _puts_over(truth, end)
    rc, status, perf = _probe(head, args=("-w", "dome_call:p95=10"))
    assert rc == 0, status
    assert status.endswith("(no disk node's log read: puts counted at the head's putdone "
                           "answer, their disk side not seen)"), status
    assert int(perf["calls"][0]) == len(calls) > 1000
    assert int(perf["puts"][0]) == len(puts) > 200
    answered = [c for c in calls if c["http_code"]]
    errors = sum(1 for c in answered if c["http_code"][0] in "45")
    assert float(perf["dome_error_rate"][0]) == pytest.approx(errors / len(answered), rel=1e-5)
    failed = sum(1 for p in puts if p["status"] == "failed")
    assert float(perf["failed_rate"][0]) == pytest.approx(failed / len(puts), rel=1e-5)
    no_putdone = sum(1 for p in puts if not p["pfn"])
    assert no_putdone > 0 and float(perf["incomplete_rate"][0]) == pytest.approx(
        sum(1 for p in puts if p["status"] == "incomplete") / len(puts), rel=1e-5)
    if stamp == "traditional":
        assert perf["dome_call_p95"][0] == "U" and "no call duration (whole-second stamps)" in status
    else:
        durations = sorted(int(c["duration"]) for c in calls)
        assert float(perf["dome_call_p95"][0]) == nearest_rank(durations, 0.95) / 1000


def test_a_disk_nodes_log_alone_says_it_saw_no_put(site):
    _, prefix, _ = site
    rc, status, perf = _probe(f"{prefix}.dpmdisk02.log")
    assert rc == 0 and status.endswith("(no head node's log read: puts not seen)"), status
    assert perf["puts"][0] == "0" and int(perf["calls"][0]) > 100


def test_the_heads_disabled_filesystems_page(site):
    _, prefix, truth = site
    state = {}
    for e in truth["fs_events"]:
        state[(e["server"], e["fs"])] = e["event"]
    disabled = sum(1 for event in state.values() if event == "disabled")
    assert disabled == 2
    rc, status, perf = _probe(f"{prefix}.dpmhead01.log", args=("-c", "dome_fs_disabled=0"))
    assert rc == 2 and status.startswith(f"DOME CRITICAL - dome_fs_disabled = {disabled} "), status
    assert perf["dome_fs_disabled"][0] == str(disabled)


def test_a_disk_nodes_free_space_is_its_latest_capacity_lines(site):
    _, prefix, truth = site
    latest = {}
    for row in truth["capacity"]:
        if row["host"] == "dpmdisk02":
            latest[row["fs"]] = (int(row["free"]), int(row["phys"]))
    ratio = min(free / phys for free, phys in latest.values())
    rc, status, perf = _probe(f"{prefix}.dpmdisk02.log", args=("-w", f"dome_fs_free_ratio={ratio + 0.01}:"))
    assert rc == 1 and status.startswith("DOME WARNING - dome_fs_free_ratio = "), status
    assert float(perf["dome_fs_free_ratio"][0]) == pytest.approx(ratio, rel=1e-5)
    assert perf["dome_fs_free_bytes"][0] == str(min(f for f, _ in latest.values()))


def test_a_dpm_profile_with_dome_is_unknown_saying_so(site):
    _, prefix, _ = site
    rc, status, _ = _probe(f"{prefix}.dpmhead01.log", args=("--profile", "lcgdm-dpm"))
    assert rc == 3 and "a DPM daemon's profile, not a DOME one" in status, status


def test_the_sites_logs_are_stale_by_the_newest_line_of_any_node(site):
    """--max-age against the newest stamp of the logs' last lines (the site's 2017 logs
    are years old), whatever part of them -t lets the probe read."""
    _, prefix, _ = site
    end = max(map(_newest_ms, _nodes(prefix)))
    rc, status, perf = _probe(*_nodes(prefix), args=("--max-age", "1d"))
    assert rc == 2 and status.startswith("DOME CRITICAL - stale source: newest line is "), status
    age = float(perf["age"][0])
    assert abs(age - (time.time() - end / 1000)) < 120
