"""parsers/dome_checksums.py: the checksum wait rules of docs/dome.md, one test each, on
dome_call records as the DOME reassembler emits them (whole sites against the simulator's
truth: tests/scenarios/test_dome_checksums_truth.py)."""

import json

import pytest

from dpmstream.parsers.dome_checksums import ChecksumWaits, WithChecksumWaits, with_checksums
from dpmstream.parsers.dome_records import DOME_CHECKSUM_COLUMNS, csv_line, to_json_dict
from dpmstream.parsers.dome_reassembly import DomeReassembler

from tests.parsers.test_dome_reassembly import call_lines

HEAD = "dpmhead01"
FE, FE2 = "dpmdisk01.example.org", "dpmdisk02.example.org"
CLIENT = "192.0.2.5"
T0 = 1_496_126_645_000


def call(t, code, command="dome_chksum", caller=FE, client=CLIENT, host=HEAD, duration=4, whole=False):
    return {"kind": "dome_call", "host": host, "pid": 2345, "tid": 7, "role": "head", "command": command,
            "http_code": code, "caller": caller, "remote_client": client, "start": T0 + t,
            "end": None if code is None else T0 + t + duration,
            "duration": None if code is None else duration, "cut": int(code is None),
            "whole_seconds": int(whole)}


def polls(first, codes, every=5_000, **kw):
    return [call(first + i * every, code, **kw) for i, code in enumerate(codes)]


def run(records, **settings):
    waits = ChecksumWaits(**settings)
    out = []
    for record in records:
        out += waits.feed(record)
    return waits, out, waits.finish()


def test_a_run_of_202_polls_ended_by_200_is_one_done_wait_from_the_first_poll_to_the_answer():
    waits, out, end = run(polls(0, [202, 202, 202, 200]))
    assert out == [{"kind": "dome_checksum", "head": HEAD, "caller": FE, "remote_client": CLIENT,
                    "start": T0, "end": T0 + 15_004, "wait": 15_004, "polls": 4, "outcome": "done",
                    "http_code": 200, "endings": 1, "overlap": 0, "whole_seconds": 0}]
    assert end == [] and waits.stats.waits == 1 and waits.stats.polls == 4


def test_an_error_answer_ends_the_wait_failed_with_its_code():
    _, out, _ = run(polls(0, [202, 202, 500]))
    assert [(w["outcome"], w["http_code"], w["polls"]) for w in out] == [("failed", 500, 3)]


def test_a_frontend_that_stops_polling_gives_a_timeout_once_its_head_is_past_the_timeout():
    """The wait ends at its last 202; other calls of the head move its clock."""
    waits = ChecksumWaits(timeout_ms=30_000)
    out = [w for r in polls(0, [202, 202]) + [call(36_000, 200, command="dome_put")] for w in waits.feed(r)]
    assert out == []          # 36 s - 2 s allowance is not past 5 s + 30 s
    out = waits.feed(call(38_000, 200, command="dome_put"))
    assert [(w["outcome"], w["start"], w["end"], w["http_code"], w["endings"]) for w in out] == \
        [("timeout", T0, T0 + 5_004, None, 0)]
    assert waits.stats.timeouts == 1


def test_advance_times_out_a_silent_run_without_any_other_call():
    waits = ChecksumWaits(timeout_ms=30_000)
    assert waits.feed(call(0, 202)) == [] and waits.advance(T0 + 32_000) == []   # less the 2 s allowance
    assert [w["outcome"] for w in waits.advance(T0 + 32_005)] == ["timeout"]


def test_at_the_end_of_input_an_unanswered_run_is_input_end_or_timeout_by_its_heads_last_call():
    _, _, end = run(polls(0, [202, 202]))
    assert [w["outcome"] for w in end] == ["input_end"]
    _, _, end = run(polls(0, [202, 202]) + [call(35_004, 200, command="dome_put", duration=0)])
    assert [w["outcome"] for w in end] == ["timeout"]


def test_a_poll_after_the_timeout_starts_a_new_wait_and_times_the_old_one_out():
    _, out, _ = run(polls(0, [202]) + polls(40_000, [202, 200]), timeout_ms=30_000)
    assert [(w["outcome"], w["start"]) for w in out] == [("timeout", T0), ("done", T0 + 40_000)]


def test_polls_of_another_caller_or_client_or_head_are_another_wait():
    records = sorted(polls(0, [202, 200]) + polls(1_000, [202, 200], caller=FE2)
                     + polls(2_000, [202, 500], client="192.0.2.6")
                     + polls(3_000, [202, 200], host="dpmhead02"), key=lambda r: r["start"])
    _, out, _ = run(records)
    assert [(w["caller"], w["remote_client"], w["head"], w["overlap"]) for w in out] == [
        (FE, CLIENT, HEAD, 0), (FE2, CLIENT, HEAD, 0), (FE, "192.0.2.6", HEAD, 0), (FE, CLIENT, "dpmhead02", 0)]


def test_a_client_polling_two_files_at_once_gives_one_overlap_wait_spanning_both_and_counting_both_answers():
    """File A polled from 0 s, file B from 2 s on the same key: intervals of 2 and 3 s break
    the 5 s cadence. A's answer does not end the run (B still polls); it ends when the key
    has been silent for the timeout, with B's answer."""
    records = sorted(polls(0, [202, 202, 200]) + polls(2_000, [202, 202, 202, 500]), key=lambda r: r["start"])
    waits, out, end = run(records, timeout_ms=30_000)
    assert out == []
    (w,) = end
    assert (w["overlap"], w["start"], w["end"], w["polls"], w["endings"], w["outcome"], w["http_code"]) == \
        (1, T0, T0 + 17_004, 7, 2, "failed", 500)
    assert waits.stats.overlaps == 1


def test_an_overlap_run_ends_by_time_with_the_outcome_of_its_last_call():
    records = sorted(polls(0, [202, 200]) + polls(1_000, [202, 202, 202]), key=lambda r: r["start"])
    waits, out, _ = run(records + [call(60_000, 200, command="dome_put")], timeout_ms=30_000)
    assert [(w["overlap"], w["outcome"], w["endings"], w["end"]) for w in out] == [(1, "timeout", 1, T0 + 11_004)]


def test_a_second_wait_starting_after_the_answer_is_a_new_wait_not_an_overlap():
    _, out, _ = run(polls(0, [202, 200]) + polls(6_000, [202, 200]))
    assert [(w["start"], w["overlap"]) for w in out] == [(T0, 0), (T0 + 6_000, 0)]


def test_a_lost_poll_does_not_break_the_run():
    records = [call(0, 202), call(5_000, 202), call(15_000, 202), call(20_000, 200)]
    _, out, _ = run(records)
    assert [(w["polls"], w["overlap"], w["wait"]) for w in out] == [(4, 0, 20_004)]


def test_whole_second_stamps_keep_the_cadence_and_say_so():
    """Under whole-second stamps a 5 s interval may show as 4 or 6 s: not an overlap."""
    records = [call(0, 202, whole=True, duration=0), call(4_000, 202, whole=True, duration=0),
               call(10_000, 202, whole=True, duration=0), call(14_000, 200, whole=True, duration=0)]
    _, out, _ = run(records)
    assert [(w["overlap"], w["whole_seconds"], w["wait"]) for w in out] == [(0, 1, 14_000)]


def test_an_answer_with_no_202_before_it_is_counted_and_no_wait():
    waits, out, end = run([call(0, 200)])
    assert out == end == [] and waits.stats.answers_without_wait == 1


def test_cut_polls_and_polls_without_a_caller_are_counted_and_left_out():
    waits, out, end = run([call(0, 202), call(5_000, None), call(10_000, 202, caller=None), call(15_000, 200)])
    assert [w["polls"] for w in out] == [2]
    assert (waits.stats.cut_polls, waits.stats.unattributed_polls) == (1, 1)


def test_other_kinds_and_commands_are_not_read_as_polls():
    waits, out, end = run([{"kind": "dome_put", "head": HEAD}, call(0, 202, command="dome_dochksum")])
    assert out == end == [] and waits.stats.polls == 0


def test_the_cap_on_open_runs_emits_the_least_recently_active_evicted_and_counts_it():
    records = [call(0, 202, client="192.0.2.1"), call(100, 202, client="192.0.2.2"),
               call(5_000, 202, client="192.0.2.1"), call(5_100, 202, client="192.0.2.3")]
    waits, out, end = run(records, max_open=2)
    assert [(w["remote_client"], w["outcome"], w["polls"]) for w in out] == [("192.0.2.2", "evicted", 1)]
    assert waits.stats.evictions == 1 and [w["remote_client"] for w in end] == ["192.0.2.1", "192.0.2.3"]


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="longer than the poll interval"):
        ChecksumWaits(timeout_ms=5_000)
    with pytest.raises(ValueError, match="max_open"):
        ChecksumWaits(max_open=0)


def test_a_stage_rebuilt_from_its_json_snapshot_goes_on_as_one_that_never_stopped():
    records = sorted(polls(0, [202] * 6 + [200]) + polls(2_000, [202, 202, 200]) + polls(500, [202] * 3, client="192.0.2.9")
                     + polls(800, [202, 202, 500], caller=FE2) + [call(90_000, 200, command="dome_put")],
                     key=lambda r: r["start"])
    whole, expected, expected_end = run(records)
    got = []
    waits = ChecksumWaits()
    for n, record in enumerate(records):
        got += waits.feed(record)
        waits = ChecksumWaits.from_snapshot(json.loads(json.dumps(waits.snapshot())))
    assert got == expected and waits.finish() == expected_end
    assert waits.stats == whole.stats
    assert [(w["caller"], w["remote_client"], w["outcome"], w["overlap"]) for w in expected] == [
        (FE2, CLIENT, "failed", 0), (FE, "192.0.2.9", "timeout", 0), (FE, CLIENT, "done", 1)]


def test_the_record_is_written_in_seconds_with_its_columns_declared_once():
    _, out, _ = run(polls(0, [202, 200]))
    assert list(to_json_dict(out[0]))[1:] == list(DOME_CHECKSUM_COLUMNS)
    assert to_json_dict(out[0])["wait"] == 5.004
    assert csv_line(out[0]).split(",")[3:6] == ["1496126645.000", "1496126650.004", "5.004"]


def test_with_checksums_follows_the_reassemblers_records_with_the_waits_they_end():
    """The hook a driver calls on what the reassembler gives: calls built from lines."""
    lines = []
    for i, code in enumerate((202, 202, 200)):
        lines += call_lines(i * 5_000, "dome_chksum", code)
    reassembler, waits, out = DomeReassembler(), ChecksumWaits(), []
    for line in lines:
        out += with_checksums(reassembler.feed(line), waits)
    assert [r["kind"] for r in out] == ["dome_call"] * 3 + ["dome_checksum"]
    assert (out[-1]["start"], out[-1]["end"], out[-1]["caller"], out[-1]["remote_client"]) == \
        (out[0]["start"], out[2]["end"], "fe.example.org", "192.0.2.5")


def chksum_run_lines():
    lines = []
    for i, code in enumerate((202, 202, 200)):
        lines += call_lines(i * 5_000, "dome_chksum", code)
    return lines + call_lines(20_000, "dome_chksum", 202, tid=8)


def test_a_wrapped_reassembler_gives_its_records_and_the_waits_they_end_through_feed_advance_and_finish():
    dome = WithChecksumWaits(DomeReassembler())
    out = [r for line in chksum_run_lines() for r in dome.feed(line)]
    assert [r["kind"] for r in out] == ["dome_call"] * 3 + ["dome_checksum", "dome_call"]
    timed_out = dome.advance(T0 + 60_000)
    assert [(r["kind"], r["outcome"]) for r in timed_out] == [("dome_checksum", "timeout")]
    assert dome.finish() == [] and dome.stats.calls == 4 and dome.checksum_stats.waits == 2


def test_a_wrapped_reassembler_rebuilt_from_its_json_snapshot_goes_on_as_one_that_never_stopped():
    lines = chksum_run_lines()
    whole = WithChecksumWaits(DomeReassembler())
    expected = [r for line in lines for r in whole.feed(line)] + whole.finish()
    got, dome = [], WithChecksumWaits(DomeReassembler())
    for line in lines:
        got += dome.feed(line)
        dome = WithChecksumWaits.from_snapshot(json.loads(json.dumps(dome.snapshot())), DomeReassembler)
    assert got + dome.finish() == expected and [r["outcome"] for r in expected if r["kind"] == "dome_checksum"] \
        == ["done", "input_end"]
