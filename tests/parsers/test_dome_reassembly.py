"""parsers/dome_reassembly.py: the DOME call and put rules of docs/dome.md, one test each,
on DomeEvents as parsers/dome_lines.py gives them (the whole sites: tests/scenarios/test_dome_truth.py)."""

import json

from dpmstream.parsers.dome_lines import DomeEvent
from dpmstream.parsers.dome_reassembly import DomeReassembler, merge_by_time
from dpmstream.parsers.dome_records import DOME_CALL_COLUMNS, DOME_PUT_COLUMNS, csv_line, json_text, to_json_dict

HEAD, DISK = "dpmhead01", "dpmdisk01"
SERVER = "dpmdisk01.example.org"
T0 = 1_496_126_645_000
LFN = "/dpm/example.org/home/atlas/data/f.root"


def ev(t, role, host=HEAD, pid=2345, tid=7, whole=False, **fields):
    return DomeEvent(T0 + t, host, "dome", pid, tid, -1 if role == "putdone_error" else 1,
                     role == "putdone_error", role, fields, whole)


def call_lines(t, command, code, host=HEAD, pid=2345, tid=7, whole=False, accept=True, body=()):
    node = "domehead" if host == HEAD else "domedisk"
    lines = [ev(t, "accept", host, pid, tid, whole)] if accept else []
    lines += [ev(t, "call", host, pid, tid, whole, client_dn="/CN=fe", client_host="fe.example.org",
                 remote_dn="/CN=user", remote_host="192.0.2.5"),
              ev(t + 1, "command", host, pid, tid, whole, method="POST", op=command,
                 query=f"/{node}/command/{command}")]
    lines += list(body)
    if code is not None:
        lines.append(ev(t + 9, "returns", host, pid, tid, whole, code=code))
    return lines


def run(lines, timeout_ms=120_000, **caps):
    r = DomeReassembler(timeout_ms=timeout_ms, **caps)
    out = []
    for line in lines:
        out += r.feed(line)
    return r, out, r.finish()


def of(kind, records):
    return [rec for rec in records if rec["kind"] == kind]


def test_a_call_runs_from_its_accept_line_to_its_exiting_line_with_command_caller_remote_client_and_role():
    r, out, end = run(call_lines(0, "dome_getspaceinfo", 200))
    (call,) = of("dome_call", out)
    assert call == {"kind": "dome_call", "host": HEAD, "pid": 2345, "tid": 7, "role": "head",
                    "command": "dome_getspaceinfo", "http_code": 200, "caller": "fe.example.org",
                    "remote_client": "192.0.2.5", "start": T0, "end": T0 + 9, "duration": 9, "cut": 0,
                    "whole_seconds": 0}
    assert end == [] and r.stats.calls == 1 and r.stats.cut_calls == 0


def test_without_an_accept_line_the_clientdn_line_opens_the_call():
    _, out, _ = run(call_lines(0, "dome_statpfn", 404, host=DISK, accept=False))
    (call,) = of("dome_call", out)
    assert (call["start"], call["http_code"], call["role"], call["cut"]) == (T0, 404, "disk", 0)


def test_a_new_call_on_a_thread_before_its_exiting_cuts_the_old_one_and_counts_it():
    lines = call_lines(0, "dome_get", None) + call_lines(50, "dome_put", 200)
    r, out, _ = run(lines)
    first, second = of("dome_call", out)
    assert (first["command"], first["cut"], first["end"], first["http_code"], first["duration"]) == \
        ("dome_get", 1, None, None, None)
    assert (second["command"], second["cut"], second["start"]) == ("dome_put", 0, T0 + 50)
    assert r.stats.cut_calls == 1


def test_a_new_call_without_accept_line_also_cuts_the_open_one():
    lines = call_lines(0, "dome_get", None, accept=False) + call_lines(50, "dome_put", 200, accept=False)
    _, out, _ = run(lines)
    assert [c["cut"] for c in of("dome_call", out)] == [1, 0]


def test_an_exiting_line_with_no_open_call_is_a_counted_stray_end_and_no_record():
    r, out, end = run([ev(0, "returns", code=200)])
    assert out == end == [] and r.stats.stray_call_ends == 1


def test_a_call_whose_opening_lines_were_lost_gives_no_record_and_its_lines_are_counted():
    r, out, end = run(call_lines(0, "dome_get", 200)[2:])
    assert out == end == [] and r.stats.commands_without_call == 1 and r.stats.stray_call_ends == 1


def test_a_new_pid_for_the_hosts_program_cuts_the_calls_of_the_old_process():
    lines = call_lines(0, "dome_getdirspaces", None) + [ev(3000, "startup", pid=2399, tid=1, server=HEAD)]
    r, out, end = run(lines)
    (call,) = of("dome_call", out)
    assert (call["pid"], call["cut"]) == (2345, 1) and end == []
    assert r.stats.process_deaths == 1


def test_a_thread_silent_past_the_timeout_has_its_call_cut_by_event_time_of_its_own_host():
    lines = call_lines(0, "dome_get", None) + [ev(200_000, "capacity", host=DISK, pid=3101, tid=3,
                                                  fs="/srv/1", phys=10, free=5)]
    r, out, _ = run(lines, timeout_ms=60_000)
    assert of("dome_call", out) == []                 # another host's clock does not cut it
    r2, out2, _ = run(call_lines(0, "dome_get", None) + [ev(70_000, "other", tid=1)],
                      timeout_ms=60_000)
    (call,) = of("dome_call", out2)
    assert call["cut"] == 1 and r2.stats.expired_calls == 1


def test_advance_applies_the_timeout_without_a_line():
    r = DomeReassembler(timeout_ms=60_000)
    for line in call_lines(0, "dome_get", None):
        assert r.feed(line) == []
    assert r.advance(T0 + 61_000) == []              # within the 2 s allowance
    (call,) = r.advance(T0 + 70_000)
    assert call["cut"] == 1


def test_the_cap_on_open_calls_cuts_the_least_recently_active_and_counts_it():
    lines = call_lines(0, "dome_get", None, tid=1) + call_lines(10, "dome_get", None, tid=2) \
        + call_lines(20, "dome_get", None, tid=3)
    r, out, end = run(lines, max_calls=2)
    (evicted,) = of("dome_call", out)
    assert (evicted["tid"], evicted["cut"]) == (1, 1) and r.stats.call_evictions == 1
    assert [c["tid"] for c in end] == [2, 3]


def test_whole_second_stamps_mark_the_records_built_on_them():
    _, out, _ = run(call_lines(0, "dome_get", 200, whole=True))
    assert of("dome_call", out)[0]["whole_seconds"] == 1


def test_lines_without_a_thread_id_frame_no_call_and_are_counted():
    r, out, end = run(call_lines(0, "dome_get", 200, tid=-1))
    assert out == end == [] and r.stats.unframed_lines == 4


def put_lines(t, lfn=LFN, fs="/srv/dpm/01", tid=7, code=200, whole=False):
    body = [ev(t + 1, "put", tid=tid, whole=whole, lfn=lfn),
            ev(t + 5, "put_selected", tid=tid, whole=whole, server=SERVER, fs=fs, matchings=4, lfn=lfn)]
    return call_lines(t, "dome_put", code, tid=tid, whole=whole, body=body)


def pfn(n, t, fs="/srv/dpm/01", base="f.root"):
    return f"{fs}/atlas/2017-05-30/{base}.{n}.{(T0 + t) // 1000}"


def putdone_lines(t, name, size=100, head_code=200, error=False, tid=11):
    fields = {"server": SERVER, "pfn": name, "size": size}
    disk = call_lines(t, "dome_putdone", None, host=DISK, pid=3101, tid=tid,
                      body=[ev(t + 2, "putdone_disk", DISK, 3101, tid, **fields),
                            ev(t + 3, "putdone_forward", DISK, 3101, tid, **fields)])
    head_body = [ev(t + 6, "putdone_head", tid=tid + 1, **fields)]
    if error:
        head_body.append(ev(t + 8, "putdone_error", tid=tid + 1, reason="Invalid status for replica",
                            server=SERVER, pfn=name))
    head = call_lines(t + 5, "dome_putdone", head_code, tid=tid + 1, body=head_body)
    # the disk relays the head's code; then the head logs on, past the 2 s allowance
    return disk + head + [ev(t + 30, "returns", DISK, 3101, tid, code=head_code), ev(t + 2100, "other", tid=1)]


def test_a_put_joins_its_putdones_on_disk_and_head_by_the_pfn_name_and_ends_once_the_disk_call_returned():
    name = pfn(1, 10)
    r, out, end = run(put_lines(0) + putdone_lines(5000, name, size=777))
    (put,) = of("dome_put", out)
    assert put == {"kind": "dome_put", "head": HEAD, "lfn": LFN, "put_time": T0 + 1, "put_code": 200,
                   "server": SERVER, "fs": "/srv/dpm/01", "pfn": name, "size": 777,
                   "putdone_disk_time": T0 + 5002, "putdone_head_time": T0 + 5006, "putdone_code": 200,
                   "put_to_putdone": 5005, "status": "success", "end_reason": "line", "ended": T0 + 5006,
                   "whole_seconds": 0}
    assert end == [] and r.stats.orphan_putdones == 0


def test_a_joined_put_waits_for_head_lines_of_the_disks_second_before_it_ends():
    name = pfn(1, 10)
    lines = put_lines(0) + putdone_lines(5000, name)[:-1]   # the head has not logged past the allowance
    r = DomeReassembler(timeout_ms=120_000)
    assert of("dome_put", [rec for line in lines for rec in r.feed(line)]) == []
    (put,) = r.advance(T0 + 7100)
    assert (put["status"], put["end_reason"]) == ("success", "line")


def test_a_disk_putdone_read_before_the_heads_selected_line_of_its_second_still_joins():
    fields = {"server": SERVER, "pfn": pfn(1, 10), "size": 3}
    lines = [ev(900, "putdone_disk", DISK, 3101, 11, whole=True, **fields)] + put_lines(0, whole=True) \
        + [ev(960, "putdone_head", tid=12, whole=True, **fields), ev(9000, "other", tid=1)]
    r, out, end = run(lines)
    (put,) = of("dome_put", out + end)
    assert (put["putdone_disk_time"], put["putdone_head_time"], put["status"]) == (T0 + 900, T0 + 960, "success")
    assert r.stats.orphan_putdones == 0


def test_a_putdone_waiting_for_its_put_is_an_orphan_once_the_heads_are_past_it():
    fields = {"server": SERVER, "pfn": pfn(1, 10), "size": 3}
    r = DomeReassembler(timeout_ms=120_000)
    r.feed(ev(0, "other", tid=1))
    r.feed(ev(10, "putdone_disk", DISK, 3101, 11, **fields))
    r.feed(ev(1000, "put", tid=2, lfn="/dpm/x/other.root"))
    assert r.stats.orphan_putdones == 0
    r.feed(ev(2100, "other", tid=1))
    assert r.stats.orphan_putdones == 1


def test_a_put_refused_by_the_head_is_failed_at_its_exiting_line():
    body = [ev(1, "put", lfn=LFN)]
    _, out, _ = run(call_lines(0, "dome_put", 403, body=body))
    (put,) = of("dome_put", out)
    assert (put["status"], put["put_code"], put["end_reason"], put["ended"]) == ("failed", 403, "line", T0 + 9)


def test_a_putdone_answered_not_200_or_with_an_error_line_fails_the_put():
    _, out, _ = run(put_lines(0) + putdone_lines(5000, pfn(1, 10), head_code=422, error=True))
    (put,) = of("dome_put", out)
    assert (put["status"], put["putdone_code"]) == ("failed", 422)


def test_a_put_with_no_putdone_within_the_timeout_is_incomplete_by_timeout_or_at_input_end():
    lines = put_lines(0) + [ev(130_000, "other", tid=1)]
    r, out, _ = run(lines, timeout_ms=120_000)
    (put,) = of("dome_put", out)
    assert (put["status"], put["end_reason"], put["ended"], put["pfn"]) == ("incomplete", "timeout", T0 + 9, None)
    assert r.stats.expired_puts == 1
    _, out, end = run(put_lines(0), timeout_ms=120_000)
    assert of("dome_put", out) == [] and [(p["status"], p["end_reason"]) for p in end] == [("incomplete", "input_end")]


def test_a_putdone_after_the_timeout_joins_nothing_and_is_an_orphan():
    r, out, end = run(put_lines(0) + putdone_lines(121_000, pfn(1, 10)), timeout_ms=120_000)
    puts = of("dome_put", out + end)
    assert [p["status"] for p in puts] == ["incomplete"] and r.stats.orphan_putdones == 2


def test_the_epoch_may_be_the_second_after_the_selected_line_but_no_later():
    _, out, _ = run(put_lines(0) + putdone_lines(5000, pfn(1, 1010)))
    assert of("dome_put", out)[0]["status"] == "success"
    r, out, end = run(put_lines(0) + putdone_lines(5000, pfn(1, 2010)))
    assert r.stats.orphan_putdones == 2 and of("dome_put", out + end)[0]["status"] == "incomplete"


def test_two_puts_of_one_name_in_one_second_are_told_apart_by_putcount_once_calibrated():
    other = "/dpm/example.org/home/atlas/data/g.root"
    lines = put_lines(0, lfn=other, tid=5) + put_lines(20, tid=6) + put_lines(40, tid=7) \
        + putdone_lines(3000, pfn(1, 10, base="g.root"), tid=21) \
        + putdone_lines(6000, pfn(3, 50), tid=31) + putdone_lines(9000, pfn(2, 30), size=5, tid=41)
    r, out, end = run(lines)
    by_time = {p["put_time"]: p for p in of("dome_put", out)}
    assert by_time[T0 + 41]["pfn"] == pfn(3, 50) and by_time[T0 + 21]["pfn"] == pfn(2, 30)
    assert r.stats.ambiguous_putdones == 0 and r.stats.putcount_joins == 1 and end == []


def test_a_startup_line_starts_putcount_again_from_one_so_it_tells_apart_puts_of_one_name():
    lines = put_lines(0) + [ev(1000, "startup", pid=2345, tid=1, server=HEAD)] + put_lines(2000, tid=8) \
        + put_lines(2020, tid=9) + putdone_lines(5000, pfn(2, 2010))
    r, out, end = run(lines)
    assert [p["put_time"] for p in of("dome_put", out)] == [T0 + 2021]
    assert r.stats.ambiguous_putdones == 0


def test_a_putdone_naming_a_file_the_head_did_not_name_is_counted_unusable():
    fields = {"server": SERVER, "pfn": "/srv/dpm/01/some/odd-name", "size": 1}
    r, out, end = run([ev(0, "putdone_disk", DISK, 3101, 3, **fields)])
    assert out == end == [] and r.stats.unusable_lines == 1


def test_the_cap_on_open_puts_emits_the_least_recent_as_evicted_and_counts_it():
    lines = put_lines(0, tid=1) + put_lines(100, lfn=LFN + "2", tid=2)
    r, out, _ = run(lines, max_puts=1)
    (put,) = of("dome_put", out)
    assert (put["lfn"], put["status"], put["end_reason"]) == (LFN, "incomplete", "evicted")
    assert r.stats.put_evictions == 1


def test_without_a_thread_id_the_put_pairs_its_lines_by_lfn_and_a_putdone_error_fails_it():
    body = [ev(1, "put", tid=-1, lfn=LFN), ev(5, "put_selected", tid=-1, server=SERVER, fs="/srv/dpm/01",
                                              matchings=2, lfn=LFN)]
    fields = {"server": SERVER, "pfn": pfn(1, 10), "size": 9}
    lines = body + [ev(5000, "putdone_disk", DISK, 3101, -1, **fields), ev(5010, "putdone_head", tid=-1, **fields),
                    ev(5012, "putdone_error", tid=-1, reason="Invalid status for replica", server=SERVER,
                       pfn=pfn(1, 10)),
                    ev(200_000, "other", tid=-1)]
    _, out, _ = run(lines)
    (put,) = of("dome_put", out)
    assert (put["put_time"], put["status"], put["put_code"], put["putdone_code"], put["end_reason"]) == \
        (T0 + 1, "failed", None, None, "line")


def test_capacity_lines_and_filesystem_transitions_are_records():
    lines = [ev(0, "capacity", DISK, 3101, 3, fs="/srv/dpm/01", phys=100, free=40),
             ev(10, "fs_disabled", tid=4, server=SERVER, fs="/srv/dpm/01"),
             ev(60_010, "fs_disabled", tid=4, server=SERVER, fs="/srv/dpm/01"),
             ev(120_010, "fs_enabled", tid=4, server=SERVER, fs="/srv/dpm/01")]
    _, out, _ = run(lines)
    assert of("dome_capacity", out) == [{"kind": "dome_capacity", "time": T0, "host": DISK,
                                         "fs": "/srv/dpm/01", "phys": 100, "free": 40}]
    assert [(e["event"], e["transition"]) for e in of("dome_fs_event", out)] == \
        [("disabled", 1), ("disabled", 0), ("enabled", 1)]


def test_node_streams_merge_by_time_keeping_each_streams_order():
    a = [ev(0, "fs_count", tid=1, count=1), ev(0, "fs_count", tid=2, count=2), ev(5, "fs_count", tid=3, count=3)]
    b = [ev(0, "fs_count", DISK, tid=9, count=9), ev(3, "fs_count", DISK, tid=8, count=8)]
    assert [e.tid for e in merge_by_time([a, b])] == [1, 2, 9, 8, 3]


def test_records_show_their_times_as_seconds_with_three_decimals_in_their_declared_columns():
    _, out, _ = run(put_lines(0) + putdone_lines(5000, pfn(1, 10)))
    call = of("dome_call", out)[0]
    put = of("dome_put", out)[0]
    assert csv_line(call).split(",")[8:11] == [f"{T0 // 1000}.000", f"{T0 // 1000}.009", "0.009"]
    assert list(to_json_dict(put))[1:] == list(DOME_PUT_COLUMNS)
    assert to_json_dict(put)["put_to_putdone"] == 5.005
    assert list(to_json_dict(call))[1:] == list(DOME_CALL_COLUMNS)
    assert json.loads(json_text(put)) == to_json_dict(put)
