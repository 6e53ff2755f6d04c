"""Real LFC name-server lines (CESNET 2013, Europe/Prague): every expected value below was
worked out by hand from the lines (local CEST/CET stamp -> UTC -> epoch seconds)."""

import os

import pytest

from dpmstream.parsers.profiles import detect_profile

from tests.helpers import REAL, calls_of, reassemble


def lfc(name):
    with open(os.path.join(REAL, "lfc", name), encoding="utf-8") as f:
        return f.read().splitlines()


def run(name):
    records, pipeline = reassemble(lfc(name), tz="Europe/Prague", year=2013, host="lfc")
    return calls_of(records), pipeline


def test_every_real_file_is_detected_as_the_name_server_profile():
    for name in sorted(os.listdir(os.path.join(REAL, "lfc"))):
        assert detect_profile(lfc(name)).name == "lcgdm-ns", name


def test_every_real_line_is_recognised():
    for name in sorted(os.listdir(os.path.join(REAL, "lfc"))):
        _, pipeline = run(name)
        assert pipeline.stats.total("parsed") == len(lfc(name)), name


def test_mkdir_duration_and_rc():
    # 07/10 19:21:50.736 CEST = 2013-07-10 17:21:50.736 UTC = 1373414400 + 62510 s
    (call,), _ = run("lfc-mkdir.log")
    assert (call["op"], call["started"], call["ended"], call["duration_ms"], call["rc"]) == (
        "mkdir", 1373476910736, 1373476910740, 4, 0)
    assert (call["daemon"], call["pid"], call["thread"], call["client"]) == (
        "dpns", 20713, 4, "ui1.egee.cesnet.cz")


def test_mkdir_of_an_existing_directory_returns_eexist():
    # 07/17 13:43:58.752 CEST = 1374019200 + 42238 s; returns 17 (EEXIST) 3 ms later
    (call,), _ = run("lfc-mkdir-exists-yet.log")
    assert (call["started"], call["duration_ms"], call["rc"]) == (1374061438752, 3, 17)


def test_closedir_takes_its_op_from_the_request_line_not_the_function():
    # Cns_srv_readdir: NS092 - closedir request ... at 12:57:32.210, returns at .212,
    # with a netread error before it and a send error inside it on the same thread.
    calls, pipeline = run("lfc-ls-broken-pipe.log")
    assert [c["op"] for c in calls] == ["lstat", "opendir", "readdir", "readdir", "readdir", "closedir"]
    closedir = calls[-1]
    assert (closedir["started"], closedir["duration_ms"], closedir["rc"], closedir["thread"]) == (
        1374145052210, 2, 0, 3)
    assert [c["duration_ms"] for c in calls] == [3, 5, 0, 0, 1, 2]
    assert pipeline.stats.reassembly.stray_returns == 0


def test_calls_inside_a_transaction_are_marked_trans():
    # starttrans .939/.939, statg .939/.940, getpath .976/.978, symlink 29.016/29.048,
    # endtrans 29.049/29.134; 07/18 14:54:28.939 CEST = 1374105600 + 46468 s
    calls, _ = run("lfc-aa.log")
    assert [(c["op"], c["duration_ms"], c["session"]) for c in calls] == [
        ("starttrans", 0, "trans"), ("statg", 1, "trans"), ("getpath", 2, "trans"),
        ("symlink", 32, "trans"), ("endtrans", 85, "trans")]
    assert calls[0]["started"] == 1374152068939


def test_calls_inside_a_session_are_marked_sess_and_none_after_it():
    # 07/09 16:12:11.803 CEST = 1373328000 + 51131 s
    calls, _ = run("lfc-cp.log")
    assert [(c["op"], c["duration_ms"], c["session"]) for c in calls] == [
        ("startsess", 0, "sess"), ("statg", 2, "sess"), ("getreplica", 3, "sess"),
        ("endsess", 0, "sess")]
    assert calls[0]["started"] == 1373379131803


def test_session_in_november_uses_central_european_time():
    # 11/09 04:14:47.908 CET (UTC+1) = 2013-11-09 03:14:47.908 UTC = 1383955200 + 11687 s
    calls, pipeline = run("unknown1.log")
    assert [(c["op"], c["started"], c["duration_ms"], c["rc"], c["session"]) for c in calls] == [
        ("startsess", 1383966887908, 0, 0, "sess"), ("getreplica", 1383966887922, 1, 0, "sess"),
        ("endsess", 1383966887953, 0, 0, "sess")]


def test_connection_failure_lines_are_recognised_and_make_no_call():
    for name in ("lfc-serv-bad-auth.log", "lfc-serv-timed-out.log"):
        calls, pipeline = run(name)
        assert calls == [] and pipeline.stats.total("parsed") == len(lfc(name)), name


def test_pingdb_lines_are_housekeeping_not_calls():
    calls, pipeline = run("lfc-pingdb.log")
    assert calls == [] and pipeline.stats.total("parsed") == 2


def test_srm_manpage_example_is_one_call_with_whole_second_stamps():
    with open(os.path.join(REAL, "srmv2-manpage-example.log"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    records, _ = reassemble(lines, tz="Europe/Rome", year=2011, host="srm")
    (call,) = calls_of(records)
    # 08/04 21:18:47 CEST = 2011-08-04 19:18:47 UTC = 1312485527
    assert (call["daemon"], call["op"], call["client"], call["started"], call["duration_ms"],
            call["rc"], call["thread"]) == (
        "srmv2.2", "PrepareToPut", "testbed006.cnaf.infn.it", 1312485527000, 0, 0, 0)


@pytest.mark.parametrize("name,calls_expected", [("lfc-del-all.log", None), ("lfc-rep.log", None)])
def test_every_call_in_real_files_returns_with_a_non_negative_duration(name, calls_expected):
    calls, pipeline = run(name)
    assert calls, name
    assert all(c["rc"] is not None and c["duration_ms"] >= 0 for c in calls)
    assert pipeline.stats.reassembly.noreturn_calls == 0
