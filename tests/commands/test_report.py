"""`dpmstream report` on the command line: windows, inputs, clear errors, and the
replay's name-server time and hot directories carried onto the page."""

from __future__ import annotations

import csv
import gc
import html
import re

import pytest

from dpmstream.report.build import build_page
from dpmstream.report.sources import from_replay_dir

from tests.dpmlog import T1, T2, closing, proc, put, status
from tests.helpers import dpmstream_in_process

FIRST = (put("08/12 10:00:00.000", 3, T1, end="08/12 10:00:00.002")
         + proc("08/12 10:00:00.100", "08/12 10:00:00.300", 21, T1)
         + status("08/12 10:00:00.400", "08/12 10:00:00.401", 4, T1, "SUCCESS")
         + closing("08/12 10:00:01.000", "08/12 10:00:01.001", 6, "putdone", T1))
SECOND = (put("08/12 10:05:00.000", 3, T2, end="08/12 10:05:00.004")
          + proc("08/12 10:05:00.100", "08/12 10:05:00.900", 21, T2)
          + status("08/12 10:05:01.000", "08/12 10:05:01.001", 4, T2, "SUCCESS")
          + closing("08/12 10:05:02.000", "08/12 10:05:02.001", 6, "putdone", T2))
BASE = ("--tz", "UTC", "--year", "2011", "--host", "head01")


def dpmstream(*args):
    """`dpmstream ARGS` in this process (tests/helpers.py dpmstream_in_process)."""
    return dpmstream_in_process(*args, text=True)


def write(path, lines):
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_since_and_until_keep_the_requests_that_start_in_the_window(tmp_path):
    log = write(tmp_path / "log", FIRST + SECOND)
    res = dpmstream("report", *BASE, "--since", "10:03", "--until", "2011-08-12T10:10:00Z",
                    "--out", str(tmp_path / "w.html"), log)
    assert res.returncode == 0, res.stderr
    # The data's span within the window: the one request's start to its end.
    assert "1 request (1 put) between 10:05:00 and 10:05:02 on 2011-08-12 (UTC)" in res.stdout
    page = (tmp_path / "w.html").read_text()
    assert "Window asked for: 2011-08-12 10:03:00 UTC to 2011-08-12 10:10:00 UTC" in page


def test_the_records_report_froze_are_back_in_the_collections_when_it_is_done(tmp_path):
    """report freezes the records it read (gc.freeze: no collection walks them while it
    works); a caller in the same process (a test, a library user) keeps none frozen."""
    gc.unfreeze()   # whatever an earlier test left frozen
    log = write(tmp_path / "log", FIRST + SECOND)
    result = dpmstream("report", *BASE, "--no-whatif", "--out", str(tmp_path / "r.html"), log)
    assert result.returncode == 0, result.stderr
    assert gc.get_freeze_count() == 0


def test_the_window_may_be_given_as_the_logs_own_stamp(tmp_path):
    log = write(tmp_path / "log", FIRST + SECOND)
    res = dpmstream("report", *BASE, "--until", "08/12 10:03", "--out", str(tmp_path / "w.html"), log)
    assert res.returncode == 0, res.stderr
    assert "1 request (1 put) between 10:00:00 and 10:00:01" in res.stdout


def test_an_unreadable_window_is_a_clear_error_with_exit_status_2(tmp_path):
    log = write(tmp_path / "log", FIRST)
    res = dpmstream("report", *BASE, "--since", "last tuesday", "--out", str(tmp_path / "w.html"), log)
    assert res.returncode == 2 and "cannot read 'last tuesday'" in res.stderr
    assert "Traceback" not in res.stderr


def test_an_empty_window_still_writes_a_page_that_says_so(tmp_path):
    log = write(tmp_path / "log", FIRST)
    res = dpmstream("report", *BASE, "--since", "11:00", "--out", str(tmp_path / "w.html"), log)
    assert res.returncode == 0 and "no records in the window" in res.stderr
    assert "No records in this window." in (tmp_path / "w.html").read_text()


def test_a_directory_that_is_no_replay_output_is_a_clear_error(tmp_path):
    res = dpmstream("report", "--out", str(tmp_path / "w.html"), str(tmp_path))
    assert res.returncode == 2 and "no requests.csv" in res.stderr


def test_a_replay_directory_and_log_files_together_are_refused(tmp_path):
    log = write(tmp_path / "log", FIRST)
    res = dpmstream("report", "--out", str(tmp_path / "w.html"), str(tmp_path), log)
    assert res.returncode == 2 and "one replay output directory" in res.stderr


def test_a_replay_directory_with_name_server_time_splits_processing(tmp_path):
    out = tmp_path / "replay"
    assert dpmstream("replay", *BASE, "--out", str(out), write(tmp_path / "log", FIRST)).returncode == 0
    html, _ = build_page(from_replay_dir(str(out), "UTC", None, None))
    assert "carry no ns_s column" in html
    # A later reassembler adds ns_calls/ns_s after the reference columns.
    lines = (out / "requests.csv").read_text().splitlines()
    (out / "requests.csv").write_text(lines[0] + ",ns_calls,ns_s\n" + lines[1] + ",2,0.120\n")
    data = from_replay_dir(str(out), "UTC", None, None)
    assert data.requests[0]["ns_ms"] == 120 and data.requests[0]["ns_calls"] == 2
    html, _ = build_page(data)
    assert "carry no ns_s column" not in html


def test_a_damaged_replay_csv_is_a_clear_error(tmp_path):
    (tmp_path / "requests.csv").write_text("host,token,total_s\nhead01,t1,abc\n")
    res = dpmstream("report", "--out", str(tmp_path / "w.html"), str(tmp_path))
    assert res.returncode == 2 and "requests.csv:2: not a record row" in res.stderr


def test_hot_directories_are_drawn_with_the_replays_own_numbers(tmp_path):
    prefix = str(tmp_path / "sd")
    assert dpmstream("simulate", "--out", prefix, "--same-dir", "--requests", "300",
                     "--quiet").returncode == 0
    logs = [prefix + ".log", prefix + ".dpns.log"]
    common = ("--tz", "Europe/Zurich", "--host", "dpmhead01.cern.ch")
    assert dpmstream("replay", *common, "--quiet", "--out", str(tmp_path / "r"), *logs).returncode == 0
    with open(tmp_path / "r" / "directories.csv", newline="") as f:
        (hot,) = list(csv.DictReader(f))          # the thesis's one shared directory
    assert dpmstream("report", *common, "--no-whatif", "--out", str(tmp_path / "p.html"),
                     *logs).returncode == 0
    html = (tmp_path / "p.html").read_text()
    assert 'id="fig-dirs"' in html and "Hot directories cannot be shown" not in html
    assert f"{int(hot['creats']):,} creats, p50 {float(hot['creat_p50_s']):.3f} s" in html
    assert f"up to {hot['peak_creats']} at once" in html and int(hot["peak_creats"]) > 1
    # From the replay's directory too (its directories.csv).
    assert dpmstream("report", "--tz", "Europe/Zurich", "--out", str(tmp_path / "d.html"),
                     str(tmp_path / "r")).returncode == 0
    assert 'id="fig-dirs"' in (tmp_path / "d.html").read_text()


def test_an_output_path_in_a_missing_directory_is_refused_before_any_work(tmp_path):
    log = write(tmp_path / "log", FIRST)
    res = dpmstream("report", *BASE, "--out", str(tmp_path / "nodir" / "x.html"), log)
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip().splitlines() == [
        f"dpmstream report: --out {tmp_path / 'nodir' / 'x.html'}: no directory "
        f"{tmp_path / 'nodir'} to write it in"]
    assert res.stdout == ""   # refused before reading: no summary printed


def test_an_output_path_that_is_a_directory_is_refused(tmp_path):
    log = write(tmp_path / "log", FIRST)
    res = dpmstream("report", *BASE, "--out", str(tmp_path), log)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.strip().splitlines() == [
        f"dpmstream report: --out {tmp_path}: is a directory, not a file"]


def test_a_file_with_no_dpm_line_is_an_error_and_writes_no_page(tmp_path):
    other = write(tmp_path / "dpkg.log", [
        f"2026-11-25 21:57:{s:02d} status installed libfoo:amd64 1.{s}" for s in range(50)])
    res = dpmstream("report", *BASE, "--out", str(tmp_path / "w.html"), other)
    assert res.returncode == 2, res.stderr
    assert "no DPM, DPNS, SRM or DOME line was parsed" in res.stderr
    assert not (tmp_path / "w.html").exists()


def test_since_after_until_is_an_error_and_writes_no_page(tmp_path):
    log = write(tmp_path / "log", FIRST + SECOND)
    res = dpmstream("report", *BASE, "--since", "10:06", "--until", "10:03",
                    "--out", str(tmp_path / "w.html"), log)
    assert res.returncode == 2
    assert "--since 10:06 (2011-08-12 10:06:00 UTC) is not before --until 10:03" in res.stderr
    assert not (tmp_path / "w.html").exists()


@pytest.fixture(scope="module")
def thesis_logs(tmp_path_factory):
    prefix = str(tmp_path_factory.mktemp("thesis") / "t20")
    assert dpmstream("simulate", "--out", prefix, "--requests", "400", "--quiet").returncode == 0
    return [prefix + ".log", prefix + ".dpns.log"]


def busy_sentence(stdout):
    return re.search(r"All 20 slow threads were busy (\d+)% of the time between (.*?);",
                     stdout).groups()


def test_a_wide_window_measures_utilisation_over_the_datas_span_and_says_so(thesis_logs, tmp_path):
    """An hour's window around 10 s of data: the figures are over the data's span within
    the window, as without a window, not over the empty minutes around it."""
    common = ("--tz", "Europe/Zurich", "--host", "dpmhead01", "--no-whatif")
    whole = dpmstream("report", *common, "--out", str(tmp_path / "all.html"), *thesis_logs)
    wide = dpmstream("report", *common, "--since", "2011-08-12 14:00", "--until",
                     "2011-08-12T15:00:00+02:00", "--out", str(tmp_path / "w.html"), *thesis_logs)
    assert whole.returncode == 0 and wide.returncode == 0, (whole.stderr, wide.stderr)
    share, between = busy_sentence(wide.stdout)
    assert (share, between) == busy_sentence(whole.stdout)
    assert int(share) > 50 and between.startswith("14:31:40 and 14:31:")
    page = html.unescape((tmp_path / "w.html").read_text())
    assert ("Every figure covers the data's span within the window: 2011-08-12 14:31:40 to "
            "14:31:") in page
    assert "Window asked for: 2011-08-12 14:00:00 CEST to 2011-08-12 15:00:00 CEST" in page
    # The numbers table states the same range, not one of its own.
    ranges = re.findall(r"2011-08-12 14:31:40 to 14:31:\d\d(?:\.\d+)? CEST", page)
    assert len(ranges) >= 2 and len(set(ranges)) == 1, ranges


def test_the_wait_for_a_poll_and_the_records_ready_wait_have_different_names(thesis_logs, tmp_path):
    """Figure 1's part after processing (31% of a put) is not the record's ready_wait (92%,
    from the put's reply to the SUCCESS answer): two names, and the page says why the
    table's shares add up past 100% (its phases overlap; one denominator for all)."""
    res = dpmstream("report", "--tz", "Europe/Zurich", "--no-whatif",
                    "--out", str(tmp_path / "p.html"), *thesis_logs)
    assert res.returncode == 0, res.stderr
    page = html.unescape((tmp_path / "p.html").read_text())
    caption = re.search(r"<b>Figure 1\..*?</figcaption>", page, re.S).group(0)
    assert '"after processing: until the client\'s next poll"' in caption
    assert "ready wait" not in caption.replace("ready_wait", "")
    assert "ready_wait in the table is longer" in caption
    assert ("The shares add up past 100% because phases overlap: queue, proc and the wait "
            "after processing (Figure 1) make up ready_wait, and poll falls within it") in page
    # ... which holds for these records: each phase's share is of one total, and the
    # phases that do not overlap add up to at most 100%.
    share = {phase: float(value) for phase, value in re.findall(
        r'<tr><td class="l">put</td><td class="l">(\w+)</td>.*?<td>([\d.]+)%</td></tr>', page)}
    assert len(share) == 9, share
    del share["total"]
    assert sum(share.values()) > 100
    assert share["queue"] + share["proc"] <= share["ready_wait"]
    assert sum(share[p] for p in ("auth", "request", "ready_wait", "transfer", "done")) <= 100.05
