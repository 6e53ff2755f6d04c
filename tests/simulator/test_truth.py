"""The ground truth obeys docs/record-rules.md and stands for what the log prints."""

from __future__ import annotations

import csv
import re
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from dpmstream.parsers.records import (
    CALL_COLUMNS, REQUEST_COLUMNS, STATUSES, call_row, request_row,
)
from dpmstream.simulator import SimConfig, scenario, simulate

DURATIONS = ("auth_ms", "request_ms", "proc_ms", "poll_ms", "ready_wait_ms", "transfer_ms", "done_ms", "total_ms")


def local_stamp(ms: int, tz: str, whole_seconds: bool = False) -> str:
    """How a DPM line stamped at UTC instant `ms` reads (written here, not imported)."""
    local = datetime.fromtimestamp(ms / 1000, timezone.utc).astimezone(ZoneInfo(tz))
    text = f"{local.month:02d}/{local.day:02d} {local.hour:02d}:{local.minute:02d}:{local.second:02d}"
    return text if whole_seconds else f"{text}.{ms % 1000:03d}"


def read_rows(path):
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh))


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    return simulate(scenario("mixed", requests=2000), tmp_path_factory.mktemp("truth") / "mixed")


@pytest.fixture(scope="module")
def cut(tmp_path_factory):
    """Stopped mid-flight, with a restart: open requests and calls that never returned."""
    cfg = scenario("mixed", requests=None, duration=25.0, restart_at=12.0, get_fraction=0.5)
    return simulate(cfg, tmp_path_factory.mktemp("truth") / "cut")


def test_csv_files_hold_the_records_under_the_record_columns(mixed):
    rows = read_rows(mixed.requests_path)
    assert tuple(rows[0]) == REQUEST_COLUMNS
    assert rows[1:] == [request_row(r) for r in mixed.requests]
    rows = read_rows(mixed.calls_path)
    assert tuple(rows[0]) == CALL_COLUMNS
    assert rows[1:] == [call_row(c) for c in mixed.calls]
    assert len(mixed.requests) > 1900 and len(mixed.calls) > 1000


def test_requests_are_sorted_by_start_then_token_and_calls_by_start_host_pid_thread(mixed, cut):
    for result in (mixed, cut):
        keys = [(r["started"], r["token"]) for r in result.requests]
        assert keys == sorted(keys)
        keys = [(c["started"], c["host"], c["pid"], c["thread"]) for c in result.calls]
        assert keys == sorted(keys)


@pytest.mark.parametrize("run", ["mixed", "cut"])
def test_durations_are_never_negative_and_total_spans_the_request(run, request):
    result = request.getfixturevalue(run)
    for r in result.requests:
        assert r["status"] in STATUSES
        for name in DURATIONS + ("queue_ms",):
            assert r[name] is None or r[name] >= 0, (name, r)
        origin = r["accepted"] if r["accepted"] is not None else r["started"]
        assert r["total_ms"] == r["ended"] - origin
        assert r["polls"] >= 0 and r["poll_ms"] >= 0 and (r["polls"] > 0 or r["poll_ms"] == 0)


def _processing_stamps(result):
    """token -> printed instant of its first `processing` line, read from the log."""
    offset = result.start_ms - _naive_ms("08/12 14:31:40.000")     # local = UTC + offset
    first = {}
    for line in result.log_path.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^(\S+ \S+) +\d+,\d+ dpm_srv_proc_\w+: processing \w+ request (\S+)$", line)
        if m and m[2] not in first:
            first[m[2]] = _naive_ms(m[1]) + offset
    return first


def test_queue_is_zero_when_the_slow_thread_logs_before_the_put_returns(mixed):
    processing = _processing_stamps(mixed)
    early = 0
    for r in mixed.requests:
        if r["queue_ms"] is None:
            continue
        put_returns = r["started"] + r["request_ms"]
        if processing[r["token"]] < put_returns:          # queued just before `returns`
            assert r["queue_ms"] == 0, r
            early += 1
        else:
            assert r["queue_ms"] == processing[r["token"]] - put_returns, r
    assert early > 0


def test_end_reason_is_line_for_requests_ended_by_their_lines_and_input_end_otherwise(mixed, cut):
    for result in (mixed, cut):
        for r in result.requests:
            ended_by_line = r["status"] in ("failed", "aborted") or r["done_ms"] is not None
            if ended_by_line:
                assert r["end_reason"] == "line", r
            elif r["status"] == "incomplete" or r["op"] == "get":
                assert r["end_reason"] == "input_end", r
    assert {r["end_reason"] for r in cut.requests} == {"line", "input_end"}
    assert tuple(read_rows(cut.requests_path)[0])[-3:] == ("end_reason", "ns_calls", "ns_s")


def test_requests_idle_longer_than_the_timeout_end_by_timeout(tmp_path):
    cfg = SimConfig(rate=0.2, duration=3700.0, abandon_rate=0.4, sthreads=5, plain_rate=0.0)
    result = simulate(cfg, tmp_path / "long")
    watermark = max(max(r["ended"] for r in result.requests), max(c["started"] for c in result.calls)) - 2000
    reasons = {"timeout": [], "input_end": []}
    for r in result.requests:
        if r["end_reason"] in reasons:
            reasons[r["end_reason"]].append(r)
    # Abandoned in the first 100 s: idle past the hour when the input ends; later: not.
    assert reasons["timeout"] and reasons["input_end"]
    for r in reasons["timeout"]:
        assert watermark - r["ended"] > 3_600_000, r
    for r in reasons["input_end"]:
        assert watermark - r["ended"] <= 3_600_000, r

def test_phases_present_match_how_each_request_ended(mixed):
    by = {}
    for r in mixed.requests:
        by.setdefault((r["op"], r["status"]), []).append(r)
    assert {("put", s) for s in STATUSES} <= set(by)
    for r in by[("put", "success")]:        # rule 3: putdone returned
        assert None not in (r["request_ms"], r["queue_ms"], r["proc_ms"], r["ready_wait_ms"],
                            r["transfer_ms"], r["done_ms"])
        assert r["polls"] >= 1
        assert r["ended"] == r["started"] + r["request_ms"] + r["ready_wait_ms"] + r["transfer_ms"] + r["done_ms"]
    for r in by[("put", "aborted")]:        # rule 4: abortreq returned, no SUCCESS before
        assert r["done_ms"] is not None and r["ready_wait_ms"] is None and r["transfer_ms"] is None
    for r in by[("put", "failed")]:          # rules 1 and 2
        assert r["done_ms"] is None and r["transfer_ms"] is None
        if r["polls"] == 0:                  # the put itself failed
            assert r["ended"] == r["started"] + r["request_ms"] and r["queue_ms"] is None
    for r in by[("put", "incomplete")]:      # rule 6: no putdone
        assert r["done_ms"] is None
    for r in by.get(("get", "success"), []):
        assert r["transfer_ms"] is None       # transfer is a put phase


def test_a_get_answered_success_and_never_released_is_a_success_ending_there(tmp_path):
    cfg = SimConfig(requests=400, get_fraction=1.0, abandon_rate=0.3, seed=5)
    result = simulate(cfg, tmp_path / "gets")
    unreleased = [r for r in result.requests if r["status"] == "success" and r["done_ms"] is None]
    assert unreleased                        # rule 5
    for r in unreleased:
        assert r["ended"] == r["started"] + r["request_ms"] + r["ready_wait_ms"]


def test_truth_instants_are_the_printed_stamps(mixed, tmp_path):
    whole = simulate(SimConfig(requests=300, whole_seconds=True), tmp_path / "w")
    for result in (mixed, whole):
        cfg = result.config
        text = result.log_path.read_text(encoding="utf-8")
        for r in result.requests[::37]:
            stamp = local_stamp(r["started"], cfg.tz, cfg.whole_seconds)
            assert re.search(rf"^{re.escape(stamp)} 12345,\d+ dpm_srv_{r['op']}: DP098 - {r['op']} "
                             rf"\d+ {r['token']}$", text, re.M), r
            if r["accepted"] is not None:
                assert local_stamp(r["accepted"], cfg.tz, cfg.whole_seconds) + " 12345," in text
        if cfg.whole_seconds:
            assert all(r["started"] % 1000 == 0 and r["ended"] % 1000 == 0 for r in result.requests)


def test_calls_are_plain_dpm_calls_and_name_server_calls(mixed):
    ops = {(c["daemon"], c["op"]) for c in mixed.calls}
    assert {("dpns", "creat"), ("dpns", "statg"), ("dpm", "ping"), ("dpm", "getpools")} <= ops
    assert ops <= {("dpns", "creat"), ("dpns", "statg"), ("dpm", "ping"), ("dpm", "getpools"),
                   ("dpm", "put"), ("dpm", "get")}        # put/get refused before a token
    for c in mixed.calls:
        assert c["session"] is None
        assert c["duration_ms"] == c["ended"] - c["started"] and c["duration_ms"] >= 0
        if c["daemon"] == "dpns":
            assert c["pid"] == 9876 and c["client"] == "dpmhead01.cern.ch" and c["auth_ms"] is None
        else:
            assert c["auth_ms"] is not None and c["auth_ms"] > 0
    refused = [c for c in mixed.calls if c["op"] in ("put", "get")]
    assert refused and all(c["rc"] == 22 for c in refused)


def test_a_stopped_run_leaves_open_requests_incomplete_and_calls_without_returns(cut):
    open_requests = [r for r in cut.requests if r["status"] == "incomplete"]
    assert len(open_requests) >= 20
    last = max(r["ended"] for r in cut.requests)
    assert last <= cut.end_ms
    unreturned = [c for c in cut.calls if c["ended"] is None]
    assert unreturned and all(c["rc"] is None and c["duration_ms"] is None for c in unreturned)
    assert {c["pid"] for c in unreturned if c["daemon"] == "dpm"} <= set(cut.dpm_pids)


def _naive_ms(stamp: str) -> int:
    """A stamp of August 2011 (no DST change, no new year) as naive local ms."""
    d = datetime.strptime("2011/" + stamp, "%Y/%m/%d %H:%M:%S.%f")
    return int((d - datetime(1970, 1, 1)).total_seconds() * 1000)


def test_restart_counts_the_first_run_for_queue_and_the_returned_run_for_proc(cut):
    offset = cut.start_ms - _naive_ms("08/12 14:31:40.000")     # local = UTC + offset
    old, new = cut.dpm_pids
    runs, returns, open_run = {}, {}, {}
    for line in cut.log_path.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^(\S+ \S+) +(\d+),(\d+) dpm_srv_proc_\w+: (.*)$", line)
        if not m:
            continue
        key, at = (int(m[2]), m[3]), _naive_ms(m[1]) + offset
        done = re.fullmatch(r"processing \w+ request (\S+)", m[4])
        if done:
            runs.setdefault(done[1], []).append((int(m[2]), at))
            open_run[key] = (done[1], at)
        elif m[4].startswith("returns") and key in open_run:
            token, began = open_run.pop(key)
            returns[token] = at - began
    twice = {tok: r for tok, r in runs.items() if len(r) == 2}
    assert twice and all(r[0][0] == old and r[1][0] == new for r in twice.values())
    records = {r["token"]: r for r in cut.requests}
    checked = 0
    for tok, ((_, first_at), _) in twice.items():
        r = records[tok]
        if r["request_ms"] is not None:        # the put returned before the restart
            assert r["started"] + r["request_ms"] + r["queue_ms"] == first_at
        if tok in returns and r["status"] != "aborted":
            assert r["proc_ms"] == returns[tok]   # the run under the new pid
            checked += 1
    assert checked


def test_the_same_seed_gives_the_same_files_and_another_seed_does_not(tmp_path):
    cfg = scenario("mixed", requests=300, restart_at=4.0)
    a = simulate(cfg, tmp_path / "a")
    b = simulate(cfg, tmp_path / "b")
    c = simulate(cfg.replace(seed=2), tmp_path / "c")
    for suffix in (".log", ".dpns.log", ".requests.csv", ".calls.csv"):
        assert (tmp_path / f"a{suffix}").read_bytes() == (tmp_path / f"b{suffix}").read_bytes()
    assert a.log_path.read_bytes() != c.log_path.read_bytes()
    assert a.requests == b.requests


def _stamps_by_thread(path):
    order, per_thread = [], {}
    for line in open(path, encoding="utf-8"):
        m = re.match(r"^(\d\d/\d\d \d\d:\d\d:\d\d\.\d{3}) +(\d+(?:,\d+)?) ", line)
        order.append(m[1])
        per_thread.setdefault(m[2], []).append(m[1])
    return order, per_thread


def test_some_lines_land_after_later_stamped_lines_but_never_within_a_thread(mixed, tmp_path):
    order, per_thread = _stamps_by_thread(mixed.log_path)
    backwards = sum(1 for a, b in zip(order, order[1:]) if b < a)
    assert backwards > 10
    assert all(s == sorted(s) for s in per_thread.values())
    calm = simulate(SimConfig(requests=300, jitter_rate=0.0), tmp_path / "calm")
    order, _ = _stamps_by_thread(calm.log_path)
    assert order == sorted(order)


# -- logs shaped differently (issue 11): the truth of each shape ------------------------

def _without(records, drop):
    return [r for r in records if not drop(r)]


def test_a_stray_process_adds_its_pings_as_call_records_and_changes_nothing_else(tmp_path):
    plain = simulate(scenario("mixed", requests=600), tmp_path / "plain")
    stray = simulate(scenario("mixed", requests=600, stray_lines=6), tmp_path / "stray")
    pings = [c for c in stray.calls if c["pid"] == 23456]
    assert len(pings) == 4 == stray.stats["stray_calls"]      # 6 events, every third a main-thread line
    for c in pings:
        assert (c["daemon"], c["op"], c["client"], c["rc"]) == ("dpm", "ping", "nagios01.cern.ch", 0)
        assert c["auth_ms"] > 0 and c["duration_ms"] >= 0 and c["thread"] >= 0
    assert _without(stray.calls, lambda c: c["pid"] == 23456) == plain.calls
    assert stray.requests == plain.requests


def test_lines_stamped_far_ahead_have_no_record_and_change_nothing_else(tmp_path):
    plain = simulate(scenario("mixed", requests=600), tmp_path / "plain")
    future = simulate(scenario("mixed", requests=600, future_lines=3), tmp_path / "future")
    assert future.stats["future_lines"] == 3
    assert future.requests == plain.requests and future.calls == plain.calls
    assert future.log_path.read_text().count("\n") == plain.log_path.read_text().count("\n") + 3


def test_the_rsyslog_file_changes_no_record(tmp_path):
    plain = simulate(scenario("mixed", requests=400), tmp_path / "plain")
    mixed = simulate(scenario("mixed", requests=400, syslog_file=True), tmp_path / "syslog")
    assert mixed.requests == plain.requests and mixed.calls == plain.calls
    assert mixed.log_path.read_bytes() == plain.log_path.read_bytes()


def test_after_a_clock_step_instants_are_the_printed_ones_and_durations_stop_at_zero(tmp_path):
    step_at, step = 8_000, 30_000
    plain = simulate(scenario("mixed", requests=600), tmp_path / "plain")
    stepped = simulate(scenario("mixed", requests=600, clock_step_at=8.0, clock_step_s=30.0),
                       tmp_path / "step")
    boundary = plain.start_ms + step_at
    before = {r["token"]: r for r in plain.requests}
    spanning = 0
    assert len(stepped.requests) == len(plain.requests)
    for r in stepped.requests:
        p = before[r["token"]]                       # the model's run is the same
        for name in DURATIONS + ("queue_ms",):
            assert r[name] is None or r[name] >= 0, (name, r)
        if p["ended"] < boundary:                    # all before the step: unchanged
            assert r == p
        elif (p["accepted"] or p["started"]) >= boundary:     # all after: 30 s earlier
            assert r["started"] == p["started"] - step and r["ended"] == p["ended"] - step
            assert all(r[n] == p[n] for n in DURATIONS + ("queue_ms",))
        else:                                        # across the step: negative spans are 0
            spanning += 1
            assert r["started"] == p["started"] or r["started"] == p["started"] - step
            if r["ended"] < (r["accepted"] or r["started"]):
                assert r["total_ms"] == 0
    assert spanning > 20
    assert any(r["total_ms"] == 0 and r["ended"] < r["started"] for r in stepped.requests)
    for c in stepped.calls:
        assert c["duration_ms"] is None or c["duration_ms"] >= 0


@pytest.fixture(scope="module")
def overlap(tmp_path_factory):
    return simulate(scenario("overlap-restart", requests=600, seed=3),
                    tmp_path_factory.mktemp("truth") / "overlap")


def _new_pid_start(result):
    offset = result.start_ms - _naive_ms("08/12 14:31:40.000")
    new = result.dpm_pids[1]
    for line in result.log_path.read_text(encoding="utf-8").splitlines():
        m = re.match(rf"^(\S+ \S+) +{new} dpm_serv: started$", line)
        if m:
            return _naive_ms(m[1]) + offset
    raise AssertionError("no started line of the new pid")


def test_an_overlapping_restart_keeps_the_old_process_calls_that_returned(overlap):
    old, new = overlap.dpm_pids
    switch = _new_pid_start(overlap)
    assert switch == overlap.start_ms + 6000
    old_calls = [c for c in overlap.calls if c["daemon"] == "dpm" and c["pid"] == old]
    finished_late = [c for c in old_calls if c["ended"] is not None and c["ended"] > switch]
    # The old process accepts nothing new (it may still serve what it accepted before).
    assert all(c["started"] - c["auth_ms"] < switch for c in old_calls)
    assert all(c["ended"] is None or c["ended"] <= switch + 4000 for c in old_calls)
    # Requests served by both processes: put under the old pid, status or done under the new.
    both = [r for r in overlap.requests if r["started"] < switch < r["ended"]]
    assert both and all(r["status"] in STATUSES for r in both)
    assert sum(r["status"] == "success" for r in both) > 0.8 * len(both)
    # Old processing runs that began before the switch and returned during the overlap.
    spanning_runs = [r for r in overlap.requests if r["proc_ms"] is not None and r["queue_ms"] is not None
                     and r["started"] + r["request_ms"] + r["queue_ms"] < switch
                     < r["started"] + r["request_ms"] + r["queue_ms"] + r["proc_ms"]]
    assert len(spanning_runs) >= 5
    assert all(c["rc"] is not None for c in finished_late)


def test_an_overlapping_restart_kills_what_is_still_running_when_the_old_process_dies(overlap):
    old, new = overlap.dpm_pids
    assert overlap.killed_calls + overlap.stats["killed_runs"] > 0
    killed = [c for c in overlap.calls if c["pid"] == old and c["ended"] is None]
    assert len(killed) <= overlap.killed_calls
    for c in killed:
        assert c["rc"] is None and c["duration_ms"] is None
    # A killed processing run's request is processed again by the new process.
    text = overlap.log_path.read_text(encoding="utf-8")
    runs = {}
    for m in re.finditer(r"^\S+ \S+ +(\d+),\d+ dpm_srv_proc_\w+: processing \w+ request (\S+)$", text, re.M):
        runs.setdefault(m[2], []).append(int(m[1]))
    again = {tok: pids for tok, pids in runs.items() if len(pids) > 1}
    assert len(again) == overlap.stats["killed_runs"]
    assert all(pids == [old, new] for pids in again.values())
    records = {r["token"]: r for r in overlap.requests}
    assert all(records[tok]["proc_ms"] is not None for tok in again if records[tok]["status"] == "success")


# -- name-server linking: which call served which request ------------------------------

def test_the_truth_links_each_put_to_its_own_creats(tmp_path):
    result = simulate(scenario("multi-file", requests=300, get_fraction=0.0), tmp_path / "s")
    processed = [r for r in result.requests if r["proc_ms"] is not None]
    assert processed and all(r["ns_calls"] == 4 for r in processed)
    assert all(0 < r["ns_ms"] <= r["proc_ms"] for r in processed)
    linked = [c for c in result.calls if c["token"]]
    assert len(linked) == 4 * len(processed)
    assert {c["token"] for c in linked} == {r["token"] for r in processed}


def test_the_truth_leaves_ns_fields_empty_without_name_server_lines(tmp_path):
    result = simulate(SimConfig(requests=50, dpns_gap=(0.0, 3600.0)), tmp_path / "s")
    assert result.dpns_lines == 0
    assert all(r["ns_calls"] is None and r["ns_ms"] is None for r in result.requests)
