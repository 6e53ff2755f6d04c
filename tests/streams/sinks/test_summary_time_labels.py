"""The summary's time labels as a user reads them: one rule for `replay`, `run --once` and
the report (docs/report.md, "Time labels"): the --tz zone when given, else the zone the
stamps are read in, each time with the abbreviation valid at that instant."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from dpmstream.streams.sinks.summary import time_range_text
from dpmstream.parsers.clock import load_zone


def dpmstream(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "dpmstream", *args], capture_output=True,
                          text=True, check=False, stdin=stdin)


def records_line(stdout: str) -> str:
    return re.search(r"^Records from .*$", stdout, re.M).group(0)


@pytest.fixture(scope="module")
def summer(tmp_path_factory):
    prefix = str(tmp_path_factory.mktemp("summer") / "t20")
    assert dpmstream("simulate", "--out", prefix, "--requests", "60", "--quiet").returncode == 0
    return prefix


def test_run_once_and_replay_label_the_same_files_alike(summer):
    replay = dpmstream("replay", "--tz", "Europe/Zurich", summer + ".log")
    run = dpmstream("run", "--once", "--no-metrics", "--tz", "Europe/Zurich", summer + ".log")
    assert replay.returncode == 0 and run.returncode == 0, (replay.stderr, run.stderr)
    assert records_line(run.stdout) == records_line(replay.stdout)
    assert records_line(run.stdout).startswith("Records from 2011-08-12 14:31:40 to ")
    assert records_line(run.stdout).endswith(" CEST")


def test_a_range_across_the_spring_change_names_each_ends_abbreviation(tmp_path):
    prefix = str(tmp_path / "dst")
    assert dpmstream("simulate", "--out", prefix, "--start", "2011-03-27 01:59:59",
                     "--requests", "60", "--quiet").returncode == 0
    res = dpmstream("replay", "--tz", "Europe/Zurich", prefix + ".log")
    assert res.returncode == 0, res.stderr
    assert re.fullmatch(r"Records from 2011-03-27 01:59:59 CET to 03:00:\d\d CEST",
                        records_line(res.stdout)), records_line(res.stdout)


def test_one_abbreviation_when_both_ends_share_it():
    zurich = load_zone("Europe/Zurich")
    july = 1310473900000      # 2011-07-12 14:31:40 CEST
    assert time_range_text(july, july + 60_000, zurich) == "2011-07-12 14:31:40 to 14:32:40 CEST"
    january = 1294839100000   # 2011-01-12 14:31:40 CET
    assert time_range_text(january, july, zurich) == \
        "2011-01-12 14:31:40 CET to 2011-07-12 14:31:40 CEST"
