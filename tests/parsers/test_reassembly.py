"""Reassembly of DPM requests and calls (docs/record-rules.md), on hand-built lines."""

from dpmstream.parsers.settings import ReassemblySettings
from dpmstream.parsers.records import REQUEST_FIELDS

from tests.dpmlog import T1, T2, T3, accept, call, closing, get, line, proc, put, status
from tests.helpers import calls_of, reassemble, requests_of

# 2011-08-12 00:00 UTC; the tests run with tz=UTC so stamps read as UTC.
DAY = 1313107200000


def at(hms_ms: str) -> int:
    """Epoch ms of an 08/12 stamp 'HH:MM:SS.mmm' read as UTC."""
    h, m, rest = hms_ms.split(":")
    s, ms = rest.split(".")
    return DAY + ((int(h) * 60 + int(m)) * 60 + int(s)) * 1000 + int(ms)


def one_request(lines, **kw):
    records, pipeline = reassemble(lines, **kw)
    (req,) = requests_of(records)
    return req, pipeline


REFERENCE_PUT = (
    accept("08/12 14:31:43.101", 3)
    + put("08/12 14:31:43.118", 3, T1, end="08/12 14:31:43.121")
    + proc("08/12 14:31:43.150", None, 27, T1)
    + accept("08/12 14:31:43.655", 5)
    + status("08/12 14:31:43.660", "08/12 14:31:43.661", 5, T1, "ACTIVE")
    + [line("08/12 14:31:44.380", 27, "dpm_srv_proc_put", "selected disk01.cern.ch:/srv/dpm/01 for srm://x"),
       line("08/12 14:31:44.390", 27, "dpm_srv_proc_put", "returns 0")]
    + status("08/12 14:31:44.700", "08/12 14:31:44.702", 5, T1, "SUCCESS")
    + closing("08/12 14:31:45.020", "08/12 14:31:45.031", 9, "putdone", T1)
)


def test_the_reference_put_gives_every_phase():
    req, _ = one_request(REFERENCE_PUT)
    assert req == {
        "kind": "request", "host": "head01", "token": T1, "op": "put",
        "client": "lxfsra01.cern.ch", "nfiles": 1, "status": "success",
        "accepted": at("14:31:43.101"), "started": at("14:31:43.118"), "ended": at("14:31:45.031"),
        "auth_ms": 17, "request_ms": 3, "queue_ms": 29, "proc_ms": 1240,
        "polls": 2, "poll_ms": 1 + 2, "ready_wait_ms": at("14:31:44.702") - at("14:31:43.121"),
        "transfer_ms": at("14:31:45.020") - at("14:31:44.702"), "done_ms": 11,
        "total_ms": at("14:31:45.031") - at("14:31:43.101"), "end_reason": "line",
        "ns_calls": None, "ns_ms": None,  # no name-server log was read
    }
    assert set(REQUEST_FIELDS) <= set(req)


def test_status_calls_are_not_call_records_but_other_dpm_calls_are():
    lines = REFERENCE_PUT + call("08/12 14:31:46.000", 4, "ping", end="08/12 14:31:46.002")
    records, _ = reassemble(lines)
    (ping,) = calls_of(records)
    assert (ping["op"], ping["duration_ms"], ping["rc"], ping["daemon"]) == ("ping", 2, 0, "dpm")


def test_an_accept_attaches_to_the_next_call_on_its_thread_only():
    lines = (accept("08/12 10:00:00.000", 4)
             + put("08/12 10:00:00.010", 3, T1, end="08/12 10:00:00.020")
             + call("08/12 10:00:00.050", 4, "ping", end="08/12 10:00:00.051"))
    records, _ = reassemble(lines)
    (req,) = requests_of(records)
    (ping,) = calls_of(records)
    assert req["accepted"] is None and req["auth_ms"] is None
    assert req["total_ms"] == req["ended"] - req["started"]
    assert ping["auth_ms"] == 50


def test_an_accept_whose_connection_failed_is_dropped():
    lines = (accept("08/12 10:00:00.000", 3)
             + [line("08/12 10:00:01.000", 3, "dpm_serv",
                     "[137.138.40.11] (x.cern.ch): Could not establish an authenticated connection: bad proxy !")]
             + put("08/12 10:00:05.000", 3, T1, end="08/12 10:00:05.004"))
    req, pipeline = one_request(lines)
    assert req["accepted"] is None and req["auth_ms"] is None
    assert pipeline.stats.reassembly.dropped_accepts == 1


def test_multi_file_put_counts_its_files():
    surls = [f"srm://head/dpm/x/f{i}" for i in range(3)]
    req, _ = one_request(put("08/12 10:00:00.000", 3, T1, surls=surls, end="08/12 10:00:00.005"))
    assert req["nfiles"] == 3 and req["status"] == "incomplete"


def test_a_put_returning_an_error_fails_there_and_later_lines_are_late():
    lines = (put("08/12 10:00:00.000", 3, T1, end="08/12 10:00:00.007", rc=28)
             + status("08/12 10:00:01.000", "08/12 10:00:01.001", 4, T1, "FAILED"))
    req, pipeline = one_request(lines)
    assert (req["status"], req["ended"], req["request_ms"], req["polls"]) == (
        "failed", at("10:00:00.007"), 7, 0)
    assert pipeline.stats.reassembly.late_lines >= 1


def test_a_status_answering_failed_fails_the_request_at_its_returns():
    lines = (put("08/12 10:00:00.000", 3, T1, end="08/12 10:00:00.002")
             + proc("08/12 10:00:00.010", "08/12 10:00:00.500", 21, T1, rc=1)
             + status("08/12 10:00:01.000", "08/12 10:00:01.003", 4, T1, "FAILED"))
    req, _ = one_request(lines)
    assert (req["status"], req["ended"], req["proc_ms"], req["polls"], req["poll_ms"]) == (
        "failed", at("10:00:01.003"), 490, 1, 3)
    assert req["transfer_ms"] is None and req["done_ms"] is None


def test_abortreq_ends_the_request_as_aborted():
    lines = (put("08/12 10:00:00.000", 3, T1, end="08/12 10:00:00.002")
             + closing("08/12 10:00:02.000", "08/12 10:00:02.004", 5, "abortreq", T1))
    req, _ = one_request(lines)
    assert (req["status"], req["done_ms"], req["ended"], req["queue_ms"]) == (
        "aborted", 4, at("10:00:02.004"), None)


def test_a_get_ends_with_relfiles_when_it_comes():
    lines = (get("08/12 10:00:00.000", 3, T1, end="08/12 10:00:00.002")
             + proc("08/12 10:00:00.100", "08/12 10:00:00.300", 21, T1, op="get")
             + status("08/12 10:00:00.400", "08/12 10:00:00.401", 4, T1, "SUCCESS", op="get")
             + closing("08/12 10:00:09.000", "08/12 10:00:09.002", 6, "relfiles", T1))
    req, _ = one_request(lines)
    assert (req["op"], req["status"], req["ended"], req["done_ms"], req["transfer_ms"],
            req["ready_wait_ms"], req["queue_ms"]) == (
        "get", "success", at("10:00:09.002"), 2, None, 399, 98)


def test_a_get_answered_success_without_relfiles_ends_at_that_answer():
    lines = (get("08/12 10:00:00.000", 3, T1, end="08/12 10:00:00.002")
             + proc("08/12 10:00:00.100", "08/12 10:00:00.300", 21, T1, op="get")
             + status("08/12 10:00:00.400", "08/12 10:00:00.401", 4, T1, "SUCCESS", op="get"))
    req, _ = one_request(lines)
    assert (req["status"], req["ended"], req["total_ms"]) == ("success", at("10:00:00.401"), 401)


def test_a_sync_get_has_no_queue_nor_processing():
    lines = (get("08/12 10:00:00.000", 3, T1, end="08/12 10:00:00.250")
             + status("08/12 10:00:00.300", "08/12 10:00:00.301", 4, T1, "SUCCESS", op="get")
             + closing("08/12 10:00:03.000", "08/12 10:00:03.001", 6, "relfiles", T1))
    req, pipeline = one_request(lines)
    assert (req["queue_ms"], req["proc_ms"], req["request_ms"], req["status"]) == (None, None, 250, "success")
    assert pipeline.stats.slow_queue_depth == 0


def test_a_put_without_putdone_is_incomplete_at_the_end_of_input():
    lines = (put("08/12 10:00:00.000", 3, T1, end="08/12 10:00:00.002")
             + proc("08/12 10:00:00.100", "08/12 10:00:00.300", 21, T1)
             + status("08/12 10:00:00.400", "08/12 10:00:00.401", 4, T1, "SUCCESS"))
    req, _ = one_request(lines)
    assert (req["status"], req["ended"], req["ready_wait_ms"]) == ("incomplete", at("10:00:00.401"), 399)


def test_slow_queue_depth_counts_requests_waiting_for_a_slow_thread():
    records, pipeline = [], None
    from dpmstream.parsers.pipeline import Pipeline
    pipeline = Pipeline(records.append)
    src = pipeline.source("t", host="h", tz="UTC", year=2011)
    lines = (put("08/12 10:00:00.000", 3, T1, end="08/12 10:00:00.002")
             + put("08/12 10:00:00.010", 4, T2, end="08/12 10:00:00.012")
             + put("08/12 10:00:00.020", 5, T3, end="08/12 10:00:00.022")
             + proc("08/12 10:00:00.100", None, 21, T1))
    src.settle()
    for text in lines:
        src.feed(text)
    src.settle()
    assert (pipeline.stats.slow_queue_depth, pipeline.stats.in_flight) == (2, 3)


def test_a_processing_line_logged_before_the_put_returns_gives_no_negative_queue_time():
    lines = (put("08/12 10:00:00.000", 3, T1, rc=None)
             + proc("08/12 10:00:00.001", "08/12 10:00:00.200", 21, T1)
             + [line("08/12 10:00:00.003", 3, "dpm_srv_put", "returns 0")]
             + closing("08/12 10:00:01.000", "08/12 10:00:01.001", 6, "putdone", T1))
    req, _ = one_request(lines)
    assert (req["queue_ms"], req["request_ms"], req["status"]) == (0, 3, "success")


def test_lines_out_of_order_across_threads_keep_every_duration():
    # The status call's DP092 is written before an earlier-stamped proc line of another thread.
    lines = (put("08/12 10:00:00.000", 3, T1, end="08/12 10:00:00.002")
             + [line("08/12 10:00:00.105", 4, "dpm_srv_getstatus_putreq",
                     "DP092 - getstatus_putreq request by /CN=x (1,1) from c")]
             + proc("08/12 10:00:00.100", None, 21, T1)
             + [line("08/12 10:00:00.105", 4, "dpm_srv_getstatus_putreq", f"DP098 - getstatus_putreq {T1} 1"),
                line("08/12 10:00:00.106", 4, "dpm_srv_getstatus_putreq", "request status DPM_QUEUED"),
                line("08/12 10:00:00.106", 4, "dpm_srv_getstatus_putreq", "returns 0")]
             + [line("08/12 10:00:00.500", 21, "dpm_srv_proc_put", "returns 0")]
             + closing("08/12 10:00:01.000", "08/12 10:00:01.001", 6, "putdone", T1))
    req, _ = one_request(lines)
    assert (req["queue_ms"], req["proc_ms"], req["polls"], req["poll_ms"]) == (98, 400, 1, 1)


def test_a_daemon_restart_closes_open_calls_and_the_request_survives():
    lines = (put("08/12 10:00:00.000", 3, T1, end="08/12 10:00:00.002")
             + proc("08/12 10:00:00.100", None, 21, T1)
             + call("08/12 10:00:00.200", 7, "ping", rc=None)  # never returns: the daemon dies
             + [line("08/12 10:01:00.000", None, "dpm_serv", "started", pid=23456)]
             + proc("08/12 10:01:00.100", "08/12 10:01:00.400", 2, T1, pid=23456)
             + status("08/12 10:01:01.000", "08/12 10:01:01.001", 4, T1, "SUCCESS", pid=23456)
             + closing("08/12 10:01:02.000", "08/12 10:01:02.003", 5, "putdone", T1, pid=23456))
    records, pipeline = reassemble(lines)
    (req,) = requests_of(records)
    (ping,) = calls_of(records)
    assert (req["status"], req["queue_ms"], req["proc_ms"]) == ("success", 98, 300)
    assert (ping["rc"], ping["ended"], ping["duration_ms"]) == (None, None, None)
    assert pipeline.stats.reassembly.restarts == 1


def test_a_new_call_on_a_thread_closes_one_that_never_returned():
    lines = call("08/12 10:00:00.000", 3, "ping", rc=None) + call("08/12 10:00:01.000", 3, "getpools",
                                                                     end="08/12 10:00:01.004")
    records, pipeline = reassemble(lines)
    assert [(c["op"], c["rc"], c["duration_ms"]) for c in calls_of(records)] == [
        ("ping", None, None), ("getpools", 0, 4)]
    assert pipeline.stats.reassembly.noreturn_calls == 1


def test_requests_silent_past_the_timeout_are_emitted_as_incomplete_on_event_time():
    lines = (put("08/12 10:00:00.000", 3, T1, end="08/12 10:00:00.002")
             + put("08/12 11:30:00.000", 4, T2, end="08/12 11:30:00.002"))
    records: list = []
    from dpmstream.parsers.pipeline import Pipeline
    pipeline = Pipeline(records.append, ReassemblySettings(timeout_s=3600))
    src = pipeline.source("t", host="h", tz="UTC", year=2011)
    for text in lines:
        src.feed(text)
    src.settle()
    pipeline.advance()
    (req,) = requests_of(records)  # only the first: the second is recent in event time
    assert (req["token"], req["status"], req["ended"]) == (T1, "incomplete", at("10:00:00.002"))
    assert pipeline.stats.expired == 1


def test_the_in_flight_cap_evicts_the_least_recently_active_request_and_counts_it():
    lines = (put("08/12 10:00:00.000", 3, T1, end="08/12 10:00:00.002")
             + put("08/12 10:00:01.000", 4, T2, end="08/12 10:00:01.002")
             + status("08/12 10:00:01.500", "08/12 10:00:01.501", 5, T1, "QUEUED")
             + put("08/12 10:00:02.000", 6, T3, end="08/12 10:00:02.002"))
    records, pipeline = [], None
    from dpmstream.parsers.pipeline import Pipeline
    pipeline = Pipeline(records.append, ReassemblySettings(max_in_flight=2))
    src = pipeline.source("t", host="h", tz="UTC", year=2011)
    for text in lines:
        src.feed(text)
    src.settle()
    (evicted,) = requests_of(records)
    assert (evicted["token"], evicted["status"]) == (T2, "incomplete")
    assert pipeline.stats.evictions == 1 and pipeline.stats.in_flight == 2


def test_a_status_call_for_an_unknown_token_makes_an_orphan_request():
    lines = (status("08/12 10:00:00.400", "08/12 10:00:00.401", 4, T1, "SUCCESS")
             + closing("08/12 10:00:01.000", "08/12 10:00:01.001", 6, "putdone", T1))
    req, pipeline = one_request(lines)
    assert (req["op"], req["started"], req["status"], req["polls"], req["total_ms"]) == (
        "put", None, "success", 1, None)
    assert pipeline.stats.reassembly.orphans == 1


def test_whole_second_stamps_are_accepted():
    lines = [text.replace(".000 ", " ").replace(".002 ", " ")
             for text in put("08/12 10:00:00.000", 3, T1, end="08/12 10:00:02.002")]
    assert "10:00:00 12345,3" in lines[0]
    req, pipeline = one_request(lines)
    assert req["request_ms"] == 2000 and pipeline.stats.total("parsed") == len(lines)


def test_rsyslog_wrapped_lines_give_host_and_year():
    wrapped = [f"2012-01-01T00:00:01.118402+01:00 dpmhead07 dpm: {text}"
               for text in put("12/31 23:59:59.990", 3, T1, end="12/31 23:59:59.995")]
    req, _ = one_request(wrapped, year=None, tz="Europe/Zurich")
    # 2011-12-31 23:59:59.990 CET = 22:59:59.990 UTC: the year before the rsyslog stamp
    assert (req["host"], req["started"], req["request_ms"]) == ("dpmhead07", 1325372399990, 5)


def test_the_pid_may_be_space_padded():
    lines = put("08/12 10:00:00.000", 3, T1, end="08/12 10:00:00.002", pid=4321)
    assert " 4321,3 " in lines[0] and "  4321,3" in lines[0]
    req, _ = one_request(lines)
    assert req["request_ms"] == 2


def test_a_putdone_cut_by_a_restart_and_sent_again_keeps_the_first_as_end_of_transfer():
    lines = (put("08/12 10:00:00.000", 3, T1, end="08/12 10:00:00.002")
             + proc("08/12 10:00:00.100", "08/12 10:00:00.300", 21, T1)
             + status("08/12 10:00:00.400", "08/12 10:00:00.401", 4, T1, "SUCCESS")
             + closing("08/12 10:00:01.000", None, 6, "putdone", T1)[:-1]  # cut: no returns
             + [line("08/12 10:00:05.000", None, "dpm_serv", "started", pid=23456)]
             + closing("08/12 10:00:06.000", "08/12 10:00:06.004", 2, "putdone", T1, pid=23456))
    req, _ = one_request(lines)
    assert (req["status"], req["transfer_ms"], req["done_ms"], req["ended"]) == (
        "success", 599, 4, at("10:00:06.004"))


def test_in_flight_and_slow_queue_are_counted_per_host():
    from dpmstream.parsers.pipeline import Pipeline
    pipeline = Pipeline(lambda r: None)
    src = pipeline.source("t", host="collector", tz="UTC", year=2011)
    wrap = lambda host, text: f"2011-08-12T10:00:01.000000+00:00 {host} dpm: {text}"
    lines = ([wrap("head01", t) for t in put("08/12 10:00:00.000", 3, T1, end="08/12 10:00:00.002")]
             + [wrap("head02", t) for t in put("08/12 10:00:00.010", 3, T2, end="08/12 10:00:00.012")]
             + [wrap("head02", t) for t in put("08/12 10:00:00.020", 4, T3, end="08/12 10:00:00.022")]
             + [wrap("head02", t) for t in proc("08/12 10:00:00.100", None, 21, T3)])
    for text in lines:
        src.feed(text)
    src.settle()
    assert pipeline.stats.in_flight_by_host == {"head01": 1, "head02": 2}
    assert pipeline.stats.slow_queue_by_host == {"head01": 1, "head02": 1}


def test_changes_are_typed_snapshots_of_what_a_line_touched():
    from dpmstream.parsers.pipeline import Pipeline
    from dpmstream.parsers.reassembly import RequestKey, ThreadKey
    pipeline = Pipeline(lambda r: None)
    reassembler = pipeline.reassembler
    reassembler.track_changes()
    src = pipeline.source("test", host="h", tz="UTC", year=2011)
    for ln in put("08/12 10:00:00.000", 3, T1, end="08/12 10:00:00.002"):
        src.feed(ln)
    src.settle()  # the profile is detected: the lines reach the reassembler
    changes = reassembler.take_changes()
    assert list(changes.threads) == [ThreadKey("h", "dpm", 12345, 3)]
    assert changes.threads[ThreadKey("h", "dpm", 12345, 3)]["call"] is None  # it returned
    assert changes.requests[RequestKey("h", T1)]["op"] == "put" and not changes.finished
    for ln in closing("08/12 10:00:01.000", "08/12 10:00:01.001", 6, "putdone", T1):
        src.feed(ln)
    changes = reassembler.take_changes()
    assert changes.requests == {RequestKey("h", T1): None}       # ended: gone
    assert changes.finished == {0: [RequestKey("h", T1)]}          # and remembered
    assert not any(reassembler.take_changes())                     # nothing since
