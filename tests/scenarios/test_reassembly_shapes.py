"""Reassembly on logs shaped differently from ours (issue 11): other processes, input read
twice, clock steps, far-ahead lines, bounded state. Hand-built lines; the simulator's
scenarios check the same rules record for record in test_against_simulator.py."""

import pytest

from dpmstream.parsers.settings import ReassemblySettings
from dpmstream.parsers.pipeline import Pipeline

from tests.dpmlog import T1, T2, T3, call, closing, line, proc, put, status
from tests.helpers import calls_of, reassemble, requests_of

DAY = 1313107200000  # 2011-08-12 00:00 UTC


@pytest.fixture(autouse=True, params=["compiled", "pure-python"])
def line_parser(request, monkeypatch):
    """Every behaviour here holds with either line parser."""
    if request.param == "pure-python":
        monkeypatch.setenv("DPMSTREAM_PURE_PYTHON", "1")
    return request.param


def at(hms_ms: str) -> int:
    h, m, rest = hms_ms.split(":")
    s, ms = rest.split(".")
    return DAY + ((int(h) * 60 + int(m)) * 60 + int(s)) * 1000 + int(ms)


def full_put(t0: str, token, tid=3, pid=12345):
    """A whole put in one second: put, proc, SUCCESS status, putdone (stamps t0 + ms)."""
    s = t0
    return (put(f"08/12 {s}.000", tid, token, end=f"08/12 {s}.002", pid=pid)
            + proc(f"08/12 {s}.010", f"08/12 {s}.100", 20 + tid, token, pid=pid)
            + status(f"08/12 {s}.200", f"08/12 {s}.201", tid, token, "SUCCESS", pid=pid)
            + closing(f"08/12 {s}.500", f"08/12 {s}.503", tid, "putdone", token, pid=pid))


def stray_ping(stamp: str, pid: int):
    return call(f"08/12 {stamp}", 0, "ping", end=f"08/12 {stamp}", pid=pid)


# -- processes ---------------------------------------------------------------------------

def test_stray_lines_of_another_pid_leave_the_real_daemons_calls_alone():
    lines = (put("08/12 10:00:00.000", 3, T1, end="08/12 10:00:00.002")
             + proc("08/12 10:00:00.010", None, 21, T1)              # open across the strays
             + stray_ping("10:00:00.050", pid=777)
             + stray_ping("10:00:00.060", pid=778)
             + [line("08/12 10:00:00.900", 21, "dpm_srv_proc_put", "returns 0")]
             + status("08/12 10:00:01.000", "08/12 10:00:01.001", 4, T1, "SUCCESS")
             + closing("08/12 10:00:02.000", "08/12 10:00:02.003", 5, "putdone", T1))
    records, pipeline = reassemble(lines)
    (req,) = requests_of(records)
    assert (req["status"], req["proc_ms"]) == ("success", 890)
    assert sorted(c["pid"] for c in calls_of(records)) == [777, 778]
    stats = pipeline.stats.reassembly
    assert (stats.restarts, stats.noreturn_calls) == (0, 0)


def test_an_overlapping_restart_keeps_the_old_calls_until_they_return_and_counts_once():
    lines = (put("08/12 10:00:00.000", 3, T1, end="08/12 10:00:00.002")
             + call("08/12 10:00:00.100", 7, "getpools", rc=None)          # finishes late
             + call("08/12 10:00:00.150", 8, "ping", rc=None)              # killed
             + [line("08/12 10:00:01.000", None, "dpm_serv", "started", pid=23456)]
             + proc("08/12 10:00:01.100", "08/12 10:00:01.400", 2, T1, pid=23456)
             + [line("08/12 10:00:01.500", 7, "dpm_srv_getpools", "returns 0")]  # old pid
             + status("08/12 10:00:02.000", "08/12 10:00:02.001", 4, T1, "SUCCESS", pid=23456)
             + closing("08/12 10:00:03.000", "08/12 10:00:03.003", 5, "putdone", T1, pid=23456)
             + stray_ping("10:01:10.000", pid=23456))                   # past the grace period
    records, pipeline = reassemble(lines)
    (req,) = requests_of(records)
    assert (req["status"], req["proc_ms"]) == ("success", 300)
    by_op = {c["op"]: c for c in calls_of(records)}
    assert (by_op["getpools"]["rc"], by_op["getpools"]["duration_ms"]) == (0, 1400)
    killed = [c for c in calls_of(records) if c["pid"] == 12345 and c["op"] == "ping"]
    assert [(c["rc"], c["ended"]) for c in killed] == [(None, None)]
    stats = pipeline.stats.reassembly
    assert (stats.restarts, stats.stray_returns, stats.noreturn_calls) == (1, 0, 1)


def test_an_old_process_silent_for_the_grace_period_is_ended_while_the_stream_goes_on():
    records: list = []
    pipeline = Pipeline(records.append)
    src = pipeline.source("t", host="head01", tz="UTC", year=2011)
    for text in (call("08/12 10:00:00.000", 7, "ping", rc=None)
                 + [line("08/12 10:00:05.000", None, "dpm_serv", "started", pid=23456)]
                 + stray_ping("10:01:06.000", pid=23456)):
        src.feed(text)
    src.settle()
    pipeline.advance()  # no end of input: the grace period alone ends the old process
    killed = [c for c in calls_of(records) if c["pid"] == 12345]
    assert [(c["op"], c["rc"]) for c in killed] == [("ping", None)]
    assert pipeline.stats.reassembly.restarts == 1


def test_a_started_line_of_the_same_pid_ends_its_earlier_calls():
    lines = (call("08/12 10:00:00.000", 7, "getpools", rc=None)
             + [line("08/12 10:00:02.000", None, "dpm_serv", "started")]
             + [line("08/12 10:00:02.100", 7, "dpm_srv_getpools", "returns 0")])
    records, pipeline = reassemble(lines)
    (getpools,) = calls_of(records)
    assert (getpools["rc"], getpools["ended"]) == (None, None)
    stats = pipeline.stats.reassembly
    assert (stats.restarts, stats.stray_returns) == (1, 1)


# -- input read twice, clock steps, far-ahead lines ---------------------------------------

def test_the_same_lines_read_twice_give_each_record_once():
    once = full_put("10:00:00", T1) + full_put("10:00:01", T2, tid=4) + stray_ping("10:00:01.700", 12345)
    single, _ = reassemble(once)
    records, pipeline = reassemble(once + once)
    key = lambda r: (r["kind"], r.get("token"), r["started"])
    assert sorted(records, key=key) == sorted(single, key=key)
    assert pipeline.stats.reassembly.duplicate_lines == len(once)


def test_an_overlapping_rotated_copy_counts_the_overlap_once():
    lines = full_put("10:00:00", T1) + full_put("10:00:01", T2, tid=4) + full_put("10:00:02", T3, tid=5)
    cut = len(lines) // 2
    first, second = lines[:cut + 6], lines[cut - 6:]  # 12 lines in both files
    single, _ = reassemble(lines)
    records: list = []
    pipeline = Pipeline(records.append)
    for name, part in (("log.1", first), ("log", second)):
        src = pipeline.source(name, host="head01", tz="UTC", year=2011)
        for text in part:
            src.feed(text)
        src.settle()
    pipeline.finish()
    assert len(requests_of(records)) == 3
    assert sorted(r["token"] for r in requests_of(records)) == sorted([T1, T2, T3])
    assert [r for r in records if r["kind"] == "request"] == [r for r in single if r["kind"] == "request"]
    assert pipeline.stats.reassembly.duplicate_lines == 12


def test_a_clock_stepped_back_is_counted_and_gives_no_negative_duration():
    lines = (put("08/12 10:00:30.000", 3, T1, end="08/12 10:00:30.002")
             + proc("08/12 10:00:30.010", None, 21, T1)
             + [line("08/12 10:00:00.500", 21, "dpm_srv_proc_put", "returns 0")]  # 30 s back
             + status("08/12 10:00:01.000", "08/12 10:00:01.001", 4, T1, "SUCCESS")
             + closing("08/12 10:00:02.000", "08/12 10:00:02.003", 5, "putdone", T1))
    req, = requests_of(reassemble(lines)[0])
    records, pipeline = reassemble(lines)
    assert pipeline.stats.reassembly.clock_steps == 1
    durations = [v for k, v in req.items() if k.endswith("_ms") and v is not None]
    assert durations and min(durations) >= 0
    assert req["proc_ms"] == 0 and req["status"] == "success"


def test_a_lone_line_an_hour_ahead_is_set_aside_and_times_nothing_out():
    records: list = []
    pipeline = Pipeline(records.append, ReassemblySettings(timeout_s=600))
    src = pipeline.source("t", host="head01", tz="UTC", year=2011)
    lines = (put("08/12 10:00:00.000", 3, T1, end="08/12 10:00:00.002")
             + [line("08/12 11:00:00.000", None, "dpm_serv", "DP002 - a line stamped an hour ahead")]
             + stray_ping("10:00:01.000", 12345)
             + status("08/12 10:00:02.000", "08/12 10:00:02.001", 4, T1, "SUCCESS"))
    for text in lines:
        src.feed(text)
    src.settle()
    pipeline.advance()
    assert requests_of(records) == []        # still open: nothing timed out
    pipeline.finish()
    (req,) = requests_of(records)
    assert req["polls"] == 1 and req["end_reason"] == "input_end"
    assert pipeline.stats.reassembly.future_lines == 1


def test_a_real_gap_in_time_is_confirmed_by_the_next_lines():
    records: list = []
    pipeline = Pipeline(records.append, ReassemblySettings(timeout_s=600))
    src = pipeline.source("t", host="head01", tz="UTC", year=2011)
    for text in (put("08/12 10:00:00.000", 3, T1, end="08/12 10:00:00.002")
                 + stray_ping("11:00:00.000", 12345) + stray_ping("11:00:00.500", 12345)):
        src.feed(text)
    src.settle()
    pipeline.advance()
    (req,) = requests_of(records)
    assert (req["token"], req["end_reason"]) == (T1, "timeout")
    assert len(calls_of(records)) == 2 and pipeline.stats.reassembly.future_lines == 0


# -- no token twice ----------------------------------------------------------------------

def test_a_timed_out_request_is_never_emitted_again_by_its_later_lines():
    records: list = []
    pipeline = Pipeline(records.append, ReassemblySettings(timeout_s=600))
    src = pipeline.source("t", host="head01", tz="UTC", year=2011)
    for text in (put("08/12 10:00:00.000", 3, T1, end="08/12 10:00:00.002")
                 + stray_ping("10:20:00.000", 12345) + stray_ping("10:20:00.500", 12345)):
        src.feed(text)
    src.settle()
    pipeline.advance()
    for text in (status("08/12 10:20:01.000", "08/12 10:20:01.001", 4, T1, "SUCCESS")
                 + closing("08/12 10:20:02.000", "08/12 10:20:02.003", 5, "putdone", T1)):
        src.feed(text)
    pipeline.finish()
    assert [r["token"] for r in requests_of(records)] == [T1]
    assert pipeline.stats.reassembly.late_lines > 0 and pipeline.stats.reassembly.orphans == 0


def test_an_evicted_request_says_so_and_is_never_emitted_twice():
    lines = (put("08/12 10:00:00.000", 3, T1, end="08/12 10:00:00.002")
             + put("08/12 10:00:01.000", 4, T2, end="08/12 10:00:01.002")
             + status("08/12 10:00:01.500", "08/12 10:00:01.501", 5, T1, "SUCCESS")
             + closing("08/12 10:00:02.000", "08/12 10:00:02.003", 6, "putdone", T2))
    records, pipeline = reassemble(lines, settings=ReassemblySettings(max_in_flight=1))
    reqs = requests_of(records)
    assert sorted((r["token"], r["end_reason"]) for r in reqs) == sorted(
        [(T1, "evicted"), (T2, "line")])  # T1's status answer came after it was evicted
    stats = pipeline.stats.reassembly
    assert (stats.evictions, stats.orphans, stats.late_lines) == (1, 0, 3)


# -- event time per host -----------------------------------------------------------------

def test_a_host_whose_clock_is_an_hour_ahead_times_out_no_other_hosts_requests():
    records: list = []
    pipeline = Pipeline(records.append, ReassemblySettings(timeout_s=600))
    near = pipeline.source("near", host="head01", tz="UTC", year=2011)
    ahead = pipeline.source("ahead", host="head02", tz="UTC", year=2011)
    for text in put("08/12 10:00:00.000", 3, T1, end="08/12 10:00:00.002"):
        near.feed(text)
    for text in stray_ping("11:00:00.000", 12345) + stray_ping("11:00:01.000", 12345):
        ahead.feed(text)
    near.settle()
    ahead.settle()
    pipeline.advance()
    assert requests_of(records) == []


# -- bounded state -----------------------------------------------------------------------

def test_threads_past_the_cap_are_evicted_and_counted():
    lines = []
    for tid in range(50):
        lines += call(f"08/12 10:00:{tid:02d}.000", tid, "ping", rc=None)
    records, pipeline = reassemble(lines, settings=ReassemblySettings(max_threads=10))
    stats = pipeline.stats.reassembly
    assert stats.thread_evictions == 40
    assert len(calls_of(records)) == 50 and all(c["rc"] is None for c in calls_of(records))


def test_a_session_silent_past_the_timeout_is_cut_and_counted():
    ns = [line("08/12 10:00:00.000", 3, "Cns_srv_startsess",
               "NS092 - startsess request by /CN=x (1,1) from h", pid=900),
          line("08/12 10:00:00.001", 3, "Cns_srv_startsess", "returns 0", pid=900)]
    later = [line("08/12 11:00:00.000", 4, "Cns_srv_statg", "NS092 - statg request by /CN=x (1,1) from h", pid=900),
             line("08/12 11:00:00.001", 4, "Cns_srv_statg", "returns 0", pid=900),
             line("08/12 11:00:00.002", 4, "Cns_srv_statg", "NS092 - statg request by /CN=x (1,1) from h", pid=900),
             line("08/12 11:00:00.003", 4, "Cns_srv_statg", "returns 0", pid=900)]
    records: list = []
    pipeline = Pipeline(records.append, ReassemblySettings(timeout_s=600))
    src = pipeline.source("ns", host="head01", tz="UTC", year=2011)
    for text in ns + later:
        src.feed(text)
    src.settle()
    pipeline.advance()
    stats = pipeline.stats.reassembly
    assert (stats.expired_sessions, stats.expired_threads) == (1, 1)
    assert ("head01", "dpns", 900, 3) not in pipeline.reassembler.thread_keys()


@pytest.mark.parametrize("bad", [{"timeout_s": -5}, {"max_in_flight": 0}, {"max_threads": 0}])
def test_impossible_settings_are_refused(bad):
    with pytest.raises(ValueError):
        Pipeline(lambda r: None, ReassemblySettings(**bad))


# -- several daemons in one syslog file ----------------------------------------------------

def test_dpm_and_dpns_lines_in_one_syslog_file_give_the_records_of_the_files_apart():
    from tests.dpmlog import proc as proc_lines
    dpm = (put("08/12 10:00:00.000", 3, T1, end="08/12 10:00:00.002")
           + proc_lines("08/12 10:00:00.010", "08/12 10:00:00.100", 21, T1)
           + status("08/12 10:00:00.200", "08/12 10:00:00.201", 3, T1, "SUCCESS")
           + closing("08/12 10:00:00.500", "08/12 10:00:00.503", 3, "putdone", T1))
    ns = [line("08/12 10:00:00.020", 3, "Cns_srv_creat",
               "NS092 - creat request by /CN=x (1,1) from head01", pid=900),
          line("08/12 10:00:00.030", 3, "Cns_srv_creat", "returns 0", pid=900)]
    apart = reassemble(dpm)[0] + reassemble(ns)[0]
    for rec in apart:  # read together, the DPNS log is known: nothing linked, not unknown
        if rec["kind"] == "request":
            rec["ns_calls"] = rec["ns_ms"] = 0

    def wrap(tag, text):
        return f"2011-08-12T{text[6:18]}412+00:00 head01 {tag}: {text}"

    foreign = ["2011-08-12T10:00:00.300000+00:00 head01 sshd[2211]: Accepted publickey for root",
               "2011-08-12T10:00:00.301000+00:00 head01 kernel: eth0: link up"]
    mixed = sorted([wrap("dpm", t) for t in dpm] + [wrap("dpns[900]", t) for t in ns] + foreign)
    records, pipeline = reassemble(mixed, year=None)
    key = lambda r: (r["kind"], r["started"])
    assert sorted(records, key=key) == sorted(apart, key=key)
    lines = pipeline.stats.lines
    assert lines[("head01", "dpns", "parsed")] == 2 and lines[("head01", "other", "foreign")] == 2
    assert not [k for k in lines if k[2] in ("malformed", "unmatched")]
