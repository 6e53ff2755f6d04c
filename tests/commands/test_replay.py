"""`dpmstream replay` as an admin runs it: files in several compressions, stdin, the CSV
columns of the format reference, a summary, and clear errors."""

import bz2
import gzip
import os
import shutil
import subprocess
import sys

import pytest

from dpmstream.parsers.records import CALL_COLUMNS, REQUEST_COLUMNS

from tests.dpmlog import T1, T2, call, closing, proc, put, status
from tests.helpers import REAL, dpmstream_in_process, read_csv, sampled

LOG = (put("08/12 10:00:00.000", 3, T1, end="08/12 10:00:00.002")
       + proc("08/12 10:00:00.100", "08/12 10:00:00.300", 21, T1)
       + status("08/12 10:00:00.400", "08/12 10:00:00.401", 4, T1, "SUCCESS")
       + closing("08/12 10:00:01.000", "08/12 10:00:01.001", 6, "putdone", T1)
       + call("08/12 10:00:02.000", 5, "ping", end="08/12 10:00:02.003"))
SECOND = put("08/12 10:05:00.000", 3, T2, end="08/12 10:05:00.009", rc=28)


def dpmstream(*args, stdin=b"", check=True):
    """`dpmstream ARGS` in this process (tests/helpers.py dpmstream_in_process): what a
    replay writes, says and returns is what these tests read."""
    proc_ = dpmstream_in_process(*args, stdin=stdin)
    if check:
        assert proc_.returncode == 0, proc_.stderr.decode()
    return proc_


def write(path, lines, opener=open):
    with opener(path, "wt") as f:
        f.write("\n".join(lines) + "\n")
    return str(path)


def test_replay_writes_the_reference_columns_in_order(tmp_path):
    log = write(tmp_path / "log", LOG)
    dpmstream("replay", "--tz", "UTC", "--year", "2011", "--host", "head01", "--out", str(tmp_path / "o"), log)
    requests = read_csv(tmp_path / "o" / "requests.csv")
    calls = read_csv(tmp_path / "o" / "calls.csv")
    assert tuple(requests[0]) == REQUEST_COLUMNS and tuple(calls[0]) == CALL_COLUMNS
    assert requests[1] == ["head01", T1, "put", "lxfsra01.cern.ch", "1", "success", "",
                           "1313143200.000", "1313143201.001", "", "0.002", "0.098", "0.200",
                           "1", "0.001", "0.399", "0.599", "0.001", "1.001", "line",
                           "", ""]  # ns_calls, ns_s: no name-server log read
    assert calls[1] == ["head01", "dpm", "12345", "5", "ping", "lxfsra01.cern.ch",
                        "1313143202.000", "1313143202.003", "0.003", "0", "", "", ""]


def test_gzip_bzip2_and_stdin_inputs_are_read_in_order_as_one_stream(tmp_path):
    first = write(tmp_path / "log-20110812.gz", LOG[:5], gzip.open)
    second = write(tmp_path / "log.bz2", LOG[5:], bz2.open)
    out = dpmstream("replay", "--tz", "UTC", "--year", "2011", "--out", str(tmp_path / "o"),
                    first, second, "-", stdin=("\n".join(SECOND) + "\n").encode())
    rows = read_csv(tmp_path / "o" / "requests.csv")
    assert sorted(r[5] for r in rows[1:]) == ["failed", "success"]
    assert b"put          2          1          1" in out.stdout


def test_the_year_comes_from_a_rotated_file_name(tmp_path):
    log = write(tmp_path / "log-20120105", [l.replace("08/12", "12/31") for l in LOG])
    dpmstream("replay", "--tz", "UTC", "--out", str(tmp_path / "o"), log)
    rows = read_csv(tmp_path / "o" / "requests.csv")
    assert rows[1][7] == "1325325600.000"  # 2011-12-31 10:00:00 UTC


def test_the_summary_reports_phases_and_bad_lines(tmp_path):
    log = write(tmp_path / "log", LOG + ["garbage line", "08/12 10:00:09.000 12345,1 dpm_srv_x: odd words"])
    out = dpmstream("replay", "--tz", "UTC", "--year", "2011", log).stdout.decode()
    assert "put   proc                  1     0.200     0.200     0.200     0.200" in out
    assert len(LOG) == 16
    assert "parsed 16, unmatched 1, malformed 1" in out
    assert "garbage line" in out


def test_the_summary_gives_each_phase_its_share_of_the_total_and_the_time_range(tmp_path):
    log = write(tmp_path / "log", LOG)
    out = dpmstream("replay", "--tz", "Europe/Zurich", "--year", "2011", log).stdout.decode()
    assert "Records from 2011-08-12 10:00:00 to 10:00:02 CEST" in out
    # proc 0.200 s of a 1.001 s put
    assert "put   proc                  1     0.200     0.200     0.200     0.200  20.0%" in out
    assert "put   total                 1     1.001     1.001     1.001     1.001 100.0%" in out


def test_a_missing_file_is_a_clear_error_with_exit_status_2(tmp_path):
    res = dpmstream("replay", str(tmp_path / "nope.log"), check=False)
    assert res.returncode == 2 and b"nope.log" in res.stderr and b"Traceback" not in res.stderr


def test_a_truncated_gzip_keeps_the_lines_before_the_damage(tmp_path):
    good = tmp_path / "log.gz"
    write(good, LOG * 50, gzip.open)
    data = good.read_bytes()
    (tmp_path / "cut.gz").write_bytes(data[: len(data) * 2 // 3])
    res = dpmstream("replay", "--tz", "UTC", "--year", "2011", str(tmp_path / "cut.gz"), check=False)
    assert res.returncode == 1 and b"ends early" in res.stderr
    assert b"parsed " in res.stdout and b"parsed 0," not in res.stdout


def test_an_unknown_profile_or_zone_is_a_clear_error(tmp_path):
    log = write(tmp_path / "log", LOG)
    res = dpmstream("replay", "--profile", "nonesuch", log, check=False)
    assert res.returncode != 0 and b"no profile 'nonesuch'" in res.stderr
    res = dpmstream("replay", "--tz", "Mars/Base", log, check=False)
    assert res.returncode != 0 and b"unknown time zone" in res.stderr


def test_real_name_server_files_replay_with_a_forced_profile(tmp_path):
    files = [os.path.join(REAL, "lfc", n) for n in ("lfc-mkdir.log", "lfc-cp.log")]
    dpmstream("replay", "--profile", "lcgdm-ns", "--tz", "Europe/Prague", "--year", "2013",
              "--out", str(tmp_path / "o"), *files)
    calls = read_csv(tmp_path / "o" / "calls.csv")
    assert [c[4] for c in calls[1:]] == ["mkdir", "startsess", "statg", "getreplica", "endsess"]


def one_line_error(proc_) -> str:
    err = proc_.stderr.decode()
    assert "Traceback" not in err, err
    return err


def test_an_unusable_out_directory_is_one_clear_line_not_a_traceback(tmp_path):
    log = write(tmp_path / "log", LOG)
    existing_file = write(tmp_path / "not-a-dir", ["x"])
    for out in (existing_file, "/proc/dpmstream-cannot-write-here"):
        proc_ = dpmstream("replay", "--tz", "UTC", "--year", "2011", "--out", out, log, check=False)
        err = one_line_error(proc_)
        assert proc_.returncode == 2 and err.startswith("dpmstream replay: ") and out in err


def test_a_longer_copy_of_a_large_archive_adds_exactly_its_new_calls(tmp_path):
    """Past 64 KiB an input that starts like an earlier one is compared line by line
    (streams/inputs.repeated_prefix): the first line after the shared part is read too."""
    pings = [ln for i in range(1200)
             for ln in call(f"08/12 10:{i // 60:02d}:{i % 60:02d}.000", 5, "ping",
                            end=f"08/12 10:{i // 60:02d}:{i % 60:02d}.002")]
    extra = call("08/12 11:00:00.000", 6, "getpools", end="08/12 11:00:00.004")
    log = write(tmp_path / "log", pings)
    assert os.path.getsize(log) > 64 * 1024
    longer = write(tmp_path / "log.longer", pings + extra)
    common = ("replay", "--quiet", "--tz", "UTC", "--year", "2011", "--host", "head01")
    dpmstream(*common, "--out", str(tmp_path / "out"), log, longer)
    ops = [row[4] for row in read_csv(tmp_path / "out" / "calls.csv")[1:]]
    assert ops.count("ping") == 1200 and ops.count("getpools") == 1, \
        "the longer copy's first new line (the getpools call) was lost"


def test_impossible_options_are_refused_with_the_option_named(tmp_path):
    log = write(tmp_path / "log", LOG)
    for option, value in (("--timeout", "-5"), ("--max-in-flight", "0"), ("--max-threads", "0")):
        proc_ = dpmstream("replay", option, value, log, check=False)
        err = one_line_error(proc_)
        assert proc_.returncode == 2 and option in err, err


def test_a_run_in_which_no_line_parsed_exits_non_zero(tmp_path):
    junk = write(tmp_path / "junk", ["hello world", "this is not a DPM log"])
    proc_ = dpmstream("replay", "--quiet", junk, check=False)
    assert proc_.returncode == 1 and "no DPM, DPNS, SRM or DOME line was parsed" in one_line_error(proc_)


def test_the_same_archive_given_twice_gives_each_record_once(tmp_path):
    log = write(tmp_path / "log", LOG + SECOND)
    copy = write(tmp_path / "log.gz", LOG + SECOND, opener=gzip.open)
    longer = write(tmp_path / "log.longer", LOG + SECOND + call("08/12 10:06:00.000", 5, "ping",
                                                                 end="08/12 10:06:00.001"))
    common = ("replay", "--quiet", "--tz", "UTC", "--year", "2011", "--host", "head01")
    dpmstream(*common, "--out", str(tmp_path / "once"), log)
    dpmstream(*common, "--out", str(tmp_path / "twice"), log, copy, longer)
    once = read_csv(tmp_path / "once" / "requests.csv")
    assert read_csv(tmp_path / "twice" / "requests.csv") == once and len(once) == 3
    calls = read_csv(tmp_path / "twice" / "calls.csv")
    assert sorted(row[4] for row in calls[1:]) == ["ping", "ping"]  # the longer copy's new call


# -- a huge line and a NUL hole (issue 26 item 8) -------------------------------------------

LONG_LINE_BYTES = 150 << 20   # a runaway line, written a MiB at a time
HOLE_BYTES = 100 << 20        # a crashed writer's hole: a sparse run of NULs
THIRD = call("08/12 10:06:00.000", 7, "ping", end="08/12 10:06:00.004")
# Peak RSS of a replay of the damaged file over that of the same log without the damage:
# a few read buffers (the reading holds about 2 MiB at most), nowhere near the line's size.
EXTRA_RSS_BOUND_KIB = 64 << 10
# Runs the replay given in argv[2:] and writes its peak RSS (KiB) to argv[1].
PEAK_RSS = ("import resource, subprocess, sys; "
            "rc = subprocess.run(sys.argv[2:]).returncode; "
            "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN)"
            ".ru_maxrss)); sys.exit(rc)")


def lines_bytes(lines):
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture(scope="module")
def damaged_logs(tmp_path_factory):
    """(the damaged log, the same log without its damage); removed after the tests."""
    folder = tmp_path_factory.mktemp("long-line")
    clean, damaged = folder / "clean.log", folder / "damaged.log"
    clean.write_bytes(lines_bytes(LOG) + lines_bytes(SECOND) + lines_bytes(THIRD)
                      + b"garbage line\n")
    with open(damaged, "wb") as f:
        f.write(lines_bytes(LOG))
        f.write(b"08/12 10:00:03.000 12345,3 dpm_srv_put: ")
        mib = b"x" * (1 << 20)
        for _ in range(LONG_LINE_BYTES >> 20):
            f.write(mib)
        f.write(b"\n" + lines_bytes(SECOND))
        f.truncate(f.tell() + HOLE_BYTES)   # the hole, without a line break after it
        f.seek(0, os.SEEK_END)
        f.write(lines_bytes(THIRD) + b"garbage line\n")
    for log in (clean, damaged):  # and each gzipped, a MiB at a time
        with open(log, "rb") as src, gzip.open(f"{log}.gz", "wb", compresslevel=1) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    yield clean, damaged
    shutil.rmtree(folder)


def replay_measured(log, out, engine, via):
    """(stdout, peak RSS in KiB) of `dpmstream replay` of `log`, as a file or on stdin."""
    env = dict(os.environ)
    env.pop("DPMSTREAM_PURE_PYTHON", None)
    if engine == "pure":
        env["DPMSTREAM_PURE_PYTHON"] = "1"
    peak = out.with_suffix(".peak")
    if via == "gzip":
        log = f"{log}.gz"
    args = ["replay", "--tz", "UTC", "--year", "2011", "--out", str(out),
            "-" if via == "stdin" else str(log)]
    with open(log, "rb") as stdin:
        done = subprocess.run([sys.executable, "-c", PEAK_RSS, str(peak), sys.executable,
                               "-m", "dpmstream", *args], stdin=stdin, capture_output=True,
                              env=env, timeout=600)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode(), int(peak.read_text())


@pytest.mark.parametrize("engine,via", sampled(
    [(engine, via) for via in ("file", "stdin", "gzip") for engine in ("compiled", "pure")],
    keep=[("pure", "file"), ("compiled", "stdin"), ("compiled", "gzip")]))
def test_a_huge_line_and_a_nul_hole_are_one_bad_line_each_and_cost_no_memory(
        damaged_logs, tmp_path, engine, via):
    # Each engine by each way in (`make check`: each engine and each way once).
    clean, damaged = damaged_logs
    want, clean_peak = replay_measured(clean, tmp_path / "clean", engine, via)
    got, peak = replay_measured(damaged, tmp_path / "damaged", engine, via)
    for name in ("requests.csv", "calls.csv"):  # every record of the good lines, whole
        assert read_csv(tmp_path / "damaged" / name) == read_csv(tmp_path / "clean" / name)
    assert len(read_csv(tmp_path / "damaged" / "requests.csv")) == 3
    assert len(read_csv(tmp_path / "damaged" / "calls.csv")) == 3
    parsed = len(LOG) + len(SECOND) + len(THIRD)
    assert f"parsed {parsed}, unmatched 0, malformed 1," in want
    assert f"parsed {parsed}, unmatched 0, malformed 3," in got
    # Each at its place: the long line is line 17, the hole one line after SECOND, and
    # the numbers of the lines after them are right.
    name = {"stdin": "-", "gzip": f"{damaged}.gz"}.get(via, str(damaged))
    hole = len(LOG) + 1 + len(SECOND) + 1
    assert f"{name}:{len(LOG) + 1}: line longer than 65536 bytes" in got
    assert f"{name}:{hole}: " in got
    assert f"{name}:{hole + len(THIRD) + 1}: no envelope" in got
    assert peak - clean_peak < EXTRA_RSS_BOUND_KIB, (peak, clean_peak)
