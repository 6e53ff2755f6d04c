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

from dpmstream.streams.sinks.summary import StatedOffsets, moment_text, time_range_text
from dpmstream.parsers.clock import load_zone
from tests.helpers import dpmstream_in_process


def dpmstream(*args, stdin=None):
    """`dpmstream ARGS` run in this process (tests.helpers.dpmstream_in_process): the labels
    and warnings it writes are what is tested; `stdin`: a file opened for it."""
    return dpmstream_in_process(*args, stdin=stdin.read() if stdin else b"", text=True)


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


def replay_on_a_utc_machine(*args):
    return subprocess.run([sys.executable, "-m", "dpmstream", "replay", *args],
                          capture_output=True, text=True, check=False,
                          env={**os.environ, "TZ": "UTC"})


@pytest.fixture(scope="module")
def syslog_summer(tmp_path_factory):
    prefix = str(tmp_path_factory.mktemp("syslog") / "t20")
    assert dpmstream("simulate", "--out", prefix, "--requests", "60", "--syslog-file",
                     "--quiet").returncode == 0
    return prefix + ".messages"


def test_an_rsyslog_file_without_tz_is_labelled_in_the_offset_its_prefixes_state(syslog_summer):
    """Issue 27: rsyslog wrote 14:31:40+02:00 before each stamp. With no --tz on a UTC
    machine the stamps are read, and labelled, in that offset: not two hours off as UTC,
    and with nothing to warn about."""
    res = replay_on_a_utc_machine(syslog_summer)
    assert res.returncode == 0 and "WARNING" not in res.stderr, res.stderr
    assert re.fullmatch(r"Records from 2011-08-12 14:31:40 to \d\d:\d\d:\d\d \+02:00",
                        records_line(res.stdout)), records_line(res.stdout)


def test_with_tz_an_rsyslog_file_is_labelled_in_that_zone(syslog_summer):
    res = replay_on_a_utc_machine("--tz", "Europe/Zurich", syslog_summer)
    assert res.returncode == 0 and "WARNING" not in res.stderr, res.stderr
    assert records_line(res.stdout).startswith("Records from 2011-08-12 14:31:40 to ")
    assert records_line(res.stdout).endswith(" CEST")


def test_a_tz_the_rsyslog_offsets_contradict_warns_once_and_is_followed(syslog_summer):
    """--tz Europe/London (+01:00 in August) where the prefixes say +02:00: a
    misconfiguration. The stamps are read in --tz as asked, and one line says so."""
    res = replay_on_a_utc_machine("--tz", "Europe/London", syslog_summer)
    warnings = [line for line in res.stderr.splitlines() if "WARNING" in line]
    assert warnings == [f"dpmstream: WARNING: {syslog_summer}: its rsyslog times carry +02:00 "
                        "but --tz Europe/London is +01:00 (BST) then: its stamps are read in "
                        "--tz (leave --tz out to read them in the lines' offset)"], res.stderr
    assert records_line(res.stdout).startswith("Records from 2011-08-12 14:31:40 to ")
    assert records_line(res.stdout).endswith(" BST")


def test_an_rsyslog_range_across_the_spring_change_names_each_ends_offset(tmp_path):
    prefix = str(tmp_path / "dst")
    assert dpmstream("simulate", "--out", prefix, "--start", "2011-03-27 01:59:59",
                     "--requests", "60", "--syslog-file", "--quiet").returncode == 0
    res = replay_on_a_utc_machine(prefix + ".messages")
    assert res.returncode == 0 and "WARNING" not in res.stderr, res.stderr
    assert re.fullmatch(r"Records from 2011-03-27 01:59:59 \+01:00 to 03:00:\d\d \+02:00",
                        records_line(res.stdout)), records_line(res.stdout)


def test_stated_offsets_label_each_instant_in_the_offset_it_was_read_in():
    change = 1301187600000   # 2011-03-27 01:00 UTC: Zurich goes from +01:00 to +02:00
    zone = StatedOffsets([(change - 3_600_000, 60), (change, 120)])
    assert moment_text(change - 1000, zone) == "2011-03-27 01:59:59 +01:00"
    assert moment_text(change + 1000, zone) == "2011-03-27 03:00:01 +02:00"
    assert moment_text(change - 86_400_000, zone) == "2011-03-26 02:00:00 +01:00"   # before all
    # a local time read back (a --since given in the page's zone) finds its offset too
    assert datetime(2011, 3, 27, 3, 0, 1, tzinfo=zone).timestamp() * 1000 == change + 1000
    assert moment_text(change, StatedOffsets([(change, 0)])) == "2011-03-27 01:00:00 UTC"


def test_stated_offsets_follow_a_change_read_after_the_label_zone_was_chosen():
    """The report chooses its zone at the first record; the parser reads the change later."""
    change = 1301187600000
    read_so_far = [(change - 3_600_000, 60)]
    zone = StatedOffsets(read_so_far)
    assert moment_text(change + 1000, zone) == "2011-03-27 02:00:01 +01:00"
    read_so_far.append((change, 120))
    assert moment_text(change + 1000, zone) == "2011-03-27 03:00:01 +02:00"
