"""A log of another program, as a user replays it by mistake: one warning with the count,
and the summary's "first bad lines" are the file's first lines (issue 27, item 10)."""

from __future__ import annotations

import re

import pytest

from tests.helpers import dpmstream_in_process

LINES = 1000   # five times the lines a source buffers to detect its profile


def dpmstream(*args):
    """`dpmstream ARGS` run in this process (tests.helpers.dpmstream_in_process): its
    warnings and summary are what is tested."""
    return dpmstream_in_process(*args, text=True)


@pytest.fixture
def dpkg_log(tmp_path):
    path = tmp_path / "dpkg.log"
    path.write_text("".join(f"2025-06-24 14:{n // 60 % 60:02d}:{n % 60:02d} status installed "
                            f"libfoo{n}:amd64 1.{n}\n" for n in range(LINES)))
    return str(path)


@pytest.mark.parametrize("command", [("replay",), ("run", "--once", "--no-metrics")])
def test_a_log_of_another_program_warns_once_with_the_count(dpkg_log, command):
    res = dpmstream(*command, "--tz", "UTC", dpkg_log)
    warnings = [line for line in res.stderr.splitlines() if "WARNING" in line]
    assert warnings == [f"dpmstream: WARNING: {dpkg_log}: no profile recognises {LINES} of "
                        "its lines (counted, not parsed)"], res.stderr
    assert f"malformed {LINES}" in res.stdout


def test_the_first_bad_lines_listed_are_the_first_of_the_file(dpkg_log):
    res = dpmstream("replay", "--tz", "UTC", dpkg_log)
    listed = re.findall(rf"^    {re.escape(dpkg_log)}:(\d+): .*libfoo(\d+):", res.stdout, re.M)
    assert listed == [(str(n), str(n - 1)) for n in range(1, 6)], res.stdout
