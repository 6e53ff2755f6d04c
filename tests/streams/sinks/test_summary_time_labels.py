"""The summary's time labels as a user reads them: one rule for `replay`, `run --once` and
the report (docs/report.md, "Time labels"): the --tz zone when given, else the zone the
stamps are read in, each time with the abbreviation valid at that instant."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import datetime, timezone

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


def test_stdin_warns_once_that_its_year_is_a_guess_and_that_the_inputs_disagree(summer):
    """`cat t20.log | dpmstream replay - t20.dpns.log`: stdin has no file date, so its
    year is this machine's, a year the DPNS log (dated by its mtime) does not share."""
    with open(summer + ".log", "rb") as stdin:
        res = dpmstream("replay", "--tz", "Europe/Zurich", "-", summer + ".dpns.log",
                        stdin=stdin)
    warnings = [line for line in res.stderr.splitlines() if "WARNING" in line]
    this_year = datetime.now(timezone.utc).year
    year_warnings = [w for w in warnings if "year" in w]
    assert len(year_warnings) == 2, res.stderr
    assert f"-: no year in its stamps and no file date: read as {this_year}" in year_warnings[0]
    assert "give --year" in year_warnings[0]
    assert (f"the inputs disagree on the year: {summer}.dpns.log ends "
            f"2011-08-12, - ends {this_year}-08-12") in year_warnings[1]
    # What the wrong year costs is said too, once: calls 15 years apart link to nothing.
    others = [w for w in warnings if "year" not in w]
    assert len(others) == 1 and "no name-server call was linked to a request" in others[0], res.stderr


def test_files_dated_by_their_mtime_or_a_given_year_warn_nothing(summer):
    res = dpmstream("replay", "--tz", "Europe/Zurich", summer + ".log", summer + ".dpns.log")
    assert res.returncode == 0 and "WARNING" not in res.stderr, res.stderr
    with open(summer + ".log", "rb") as stdin:
        res = dpmstream("replay", "--tz", "Europe/Zurich", "--year", "2011", "-",
                        summer + ".dpns.log", stdin=stdin)
    assert res.returncode == 0 and "WARNING" not in res.stderr, res.stderr
    assert "Records from 2011-08-12 14:31:40 to " in res.stdout


def test_an_rsyslog_file_whose_offset_is_not_the_zone_its_stamps_are_read_in_warns(tmp_path):
    """rsyslog wrote 14:31:40+02:00 before each stamp: read in UTC (no --tz, this machine's
    zone UTC), the stamps would be labelled UTC and two hours off. One warning per input
    says so; with --tz the stamps are read and labelled in the head node's zone."""
    prefix = str(tmp_path / "t20")
    assert dpmstream("simulate", "--out", prefix, "--requests", "60", "--syslog-file",
                     "--quiet").returncode == 0
    env = {**os.environ, "TZ": "UTC"}
    res = subprocess.run([sys.executable, "-m", "dpmstream", "replay", prefix + ".messages"],
                         capture_output=True, text=True, check=False, env=env)
    warnings = [line for line in res.stderr.splitlines() if "WARNING" in line]
    assert warnings == [f"dpmstream: WARNING: {prefix}.messages: its rsyslog times carry "
                        "+02:00 but its stamps are read in UTC (UTC): give --tz with the head "
                        "node's zone"], res.stderr
    res = dpmstream("replay", "--tz", "Europe/Zurich", prefix + ".messages")
    assert "WARNING" not in res.stderr, res.stderr
    assert records_line(res.stdout).startswith("Records from 2011-08-12 14:31:40 to ")
    assert records_line(res.stdout).endswith(" CEST")
