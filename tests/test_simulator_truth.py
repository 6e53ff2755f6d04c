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

DURATIONS = ("auth_s", "request_s", "proc_s", "poll_s", "ready_wait_s", "transfer_s", "done_s", "total_s")


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
def test_durations_are_non_negative_except_queue_and_total_spans_the_request(run, request):
    result = request.getfixturevalue(run)
    for r in result.requests:
        assert r["status"] in STATUSES
        for name in DURATIONS:
            assert r[name] is None or r[name] >= 0, (name, r)
        origin = r["accepted"] if r["accepted"] is not None else r["started"]
        assert r["total_s"] == r["ended"] - origin
        assert r["polls"] >= 0 and r["poll_s"] >= 0 and (r["polls"] > 0 or r["poll_s"] == 0)
        assert r["queue_s"] is None or r["queue_s"] > -50      # queued just before `returns`
    assert any(r["queue_s"] is not None and r["queue_s"] < 0 for r in result.requests)


def test_phases_present_match_how_each_request_ended(mixed):
    by = {}
    for r in mixed.requests:
        by.setdefault((r["op"], r["status"]), []).append(r)
    assert {("put", s) for s in STATUSES} <= set(by)
    for r in by[("put", "success")]:        # rule 3: putdone returned
        assert None not in (r["request_s"], r["queue_s"], r["proc_s"], r["ready_wait_s"],
                            r["transfer_s"], r["done_s"])
        assert r["polls"] >= 1
        assert r["ended"] == r["started"] + r["request_s"] + r["ready_wait_s"] + r["transfer_s"] + r["done_s"]
    for r in by[("put", "aborted")]:        # rule 4: abortreq returned, no SUCCESS before
        assert r["done_s"] is not None and r["ready_wait_s"] is None and r["transfer_s"] is None
    for r in by[("put", "failed")]:          # rules 1 and 2
        assert r["done_s"] is None and r["transfer_s"] is None
        if r["polls"] == 0:                  # the put itself failed
            assert r["ended"] == r["started"] + r["request_s"] and r["queue_s"] is None
    for r in by[("put", "incomplete")]:      # rule 6: no putdone
        assert r["done_s"] is None
    for r in by.get(("get", "success"), []):
        assert r["transfer_s"] is None       # transfer is a put phase


def test_a_get_answered_success_and_never_released_is_a_success_ending_there(tmp_path):
    cfg = SimConfig(requests=400, get_fraction=1.0, abandon_rate=0.3, seed=5)
    result = simulate(cfg, tmp_path / "gets")
    unreleased = [r for r in result.requests if r["status"] == "success" and r["done_s"] is None]
    assert unreleased                        # rule 5
    for r in unreleased:
        assert r["ended"] == r["started"] + r["request_s"] + r["ready_wait_s"]


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
        assert c["duration_s"] == c["ended"] - c["started"] and c["duration_s"] >= 0
        if c["daemon"] == "dpns":
            assert c["pid"] == 9876 and c["client"] == "dpmhead01.cern.ch" and c["auth_s"] is None
        else:
            assert c["auth_s"] is not None and c["auth_s"] > 0
    refused = [c for c in mixed.calls if c["op"] in ("put", "get")]
    assert refused and all(c["rc"] == 22 for c in refused)


def test_a_stopped_run_leaves_open_requests_incomplete_and_calls_without_returns(cut):
    open_requests = [r for r in cut.requests if r["status"] == "incomplete"]
    assert len(open_requests) >= 20
    last = max(r["ended"] for r in cut.requests)
    assert last <= cut.end_ms
    unreturned = [c for c in cut.calls if c["ended"] is None]
    assert unreturned and all(c["rc"] is None and c["duration_s"] is None for c in unreturned)
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
        if r["request_s"] is not None:        # the put returned before the restart
            assert r["started"] + r["request_s"] + r["queue_s"] == first_at
        if tok in returns and r["status"] != "aborted":
            assert r["proc_s"] == returns[tok]   # the run under the new pid
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
