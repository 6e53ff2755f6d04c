"""Each named scenario produces the feature of real logs it is named after."""

from __future__ import annotations

import re

import pytest

from dpmstream.simulator import SCENARIOS, SimConfig, scenario, simulate

STAMP = re.compile(r"^(\d\d)/(\d\d) (\d\d):(\d\d):(\d\d)")


def stamps(path):
    with open(path, encoding="utf-8") as fh:
        return [STAMP.match(line).groups() for line in fh]


def test_every_scenario_name_builds_a_valid_config():
    for name in SCENARIOS:
        scenario(name).validate()
    with pytest.raises(ValueError, match="unknown scenario"):
        scenario("no-such-thing")


def test_year_end_rolls_over_into_january(tmp_path):
    result = simulate(scenario("year-end", requests=1500), tmp_path / "ye")
    months = [s[0] for s in stamps(result.log_path)]
    assert months[0] == "12" and months[-1] == "01"
    assert "12" in [s[0] for s in stamps(result.dpns_log_path)]
    # The truth is in UTC: requests started before and after midnight local time.
    midnight = SimConfig(start="2012-01-01 00:00:00").start_ms()
    assert any(r["started"] < midnight for r in result.requests)
    assert any(r["started"] > midnight for r in result.requests)
    spanning = [r for r in result.requests if r["started"] < midnight < r["ended"]]
    assert spanning and all(0 <= r["total_ms"] < 60_000 for r in spanning)
    # Like a live log, each file's mtime is its last line's time, in the new year.
    for path in (result.log_path, result.dpns_log_path):
        mtime_ms = path.stat().st_mtime_ns // 1_000_000
        assert midnight < mtime_ms <= result.end_ms
    assert result.log_path.stat().st_mtime_ns // 1_000_000 >= max(r["ended"] for r in result.requests)


def test_dst_end_repeats_the_local_hour(tmp_path):
    result = simulate(scenario("dst-end", requests=1500), tmp_path / "dst")
    minutes = [f"{s[2]}:{s[3]}" for s in stamps(result.log_path)]
    first_back = next(i for i, (a, b) in enumerate(zip(minutes, minutes[1:])) if b < a)
    assert minutes[first_back] == "02:59" and minutes[first_back + 1] == "02:00"
    assert set(minutes) == {"02:59", "02:00"}
    # Requests spanning the change last seconds, not minus an hour.
    change = SimConfig(start="2011-10-30 01:00:00", tz="UTC").start_ms()
    spanning = [r for r in result.requests if r["started"] < change < r["ended"]]
    assert spanning and all(0 <= r["total_ms"] < 60_000 for r in spanning)


def test_restart_changes_the_pid_and_the_new_daemon_announces_itself(tmp_path):
    result = simulate(scenario("restart", requests=1200), tmp_path / "rs")
    old, new = result.dpm_pids
    lines = result.log_path.read_text(encoding="utf-8").splitlines()
    pids = [int(re.match(r"^\S+ \S+ +(\d+)", line)[1]) for line in lines]
    switch = pids.index(new)
    assert set(pids[:switch]) == {old} and set(pids[switch:]) == {new}
    assert re.fullmatch(rf"\S+ \S+ {new} dpm_serv: started", lines[switch])
    assert result.killed_calls > 0
    # The daemon was down for the configured 3 s: no DPM line in between.
    def seconds(line):
        _, _, h, m, s = STAMP.match(line).groups()
        return int(h) * 3600 + int(m) * 60 + int(s)
    assert seconds(lines[switch]) - seconds(lines[switch - 1]) >= 2


def test_no_accept_lines_means_no_accepted_times(tmp_path):
    result = simulate(scenario("no-accept", requests=500), tmp_path / "na")
    assert "request accepted" not in result.log_path.read_text(encoding="utf-8")
    assert all(r["accepted"] is None and r["auth_ms"] is None for r in result.requests)
    assert all(r["total_ms"] == r["ended"] - r["started"] for r in result.requests)
    assert all(c["auth_ms"] is None for c in result.calls)


def test_sync_gets_skip_the_slow_queue(tmp_path):
    result = simulate(scenario("sync-get", requests=800), tmp_path / "sg")
    gets = [r for r in result.requests if r["op"] == "get"]
    assert len(gets) > 300
    assert all(r["queue_ms"] is None and r["proc_ms"] is None for r in gets)
    assert sum(r["status"] == "success" for r in gets) > 0.9 * len(gets)
    assert "dpm_srv_proc_get" not in result.log_path.read_text(encoding="utf-8")


def test_heavy_load_writes_over_100k_lines(tmp_path):
    result = simulate(scenario("heavy"), tmp_path / "heavy")
    assert result.dpm_lines >= 100_000
    assert sum(1 for _ in open(result.log_path, encoding="utf-8")) == result.dpm_lines


# -- logs shaped differently (issue 11): each shows within 600 requests ----------------

ISSUE11 = ("stray-pids", "overlap-restart", "mixed-syslog", "clock-step", "future-line", "future-lines")


def pids_of(path):
    with open(path, encoding="utf-8") as fh:
        return [int(re.match(r"^\S+ \S+ +(\d+)", line)[1]) for line in fh]


@pytest.mark.parametrize("name", ISSUE11)
def test_issue11_scenarios_keep_their_defaults_off_elsewhere(name):
    changed = set(SCENARIOS[name][1])
    knobs = {"stray_lines", "restart_overlap", "syslog_file", "clock_step_at", "future_lines"}
    assert changed & knobs
    defaults = SimConfig()
    assert all(getattr(defaults, knob) in (0, 0.0, False, None) for knob in knobs)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("issue11")
    return {name: simulate(scenario(name, requests=600), base / name) for name in ISSUE11}


def test_stray_pids_has_a_second_pid_with_four_call_records(runs):
    result = runs["stray-pids"]
    assert set(pids_of(result.log_path)) == {12345, 23456}
    assert result.dpm_pids == [12345]
    assert len(result.requests) == 600
    assert sum(1 for c in result.calls if c["pid"] == 23456) == 4


def test_overlap_restart_has_two_pids_whose_lines_interleave(runs):
    result = runs["overlap-restart"]
    old, new = result.dpm_pids
    pids = pids_of(result.log_path)
    first_new, last_old = pids.index(new), len(pids) - 1 - pids[::-1].index(old)
    assert first_new < last_old
    assert len(result.requests) == 600
    assert result.killed_calls + result.stats["killed_runs"] > 0


def test_mixed_syslog_writes_the_messages_file_with_every_daemon_line(runs):
    result = runs["mixed-syslog"]
    lines = result.messages_path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == result.dpm_lines + result.dpns_lines + result.stats["foreign_lines"]
    assert sum(" dpmhead01.cern.ch dpm: " in line for line in lines) == result.dpm_lines
    assert sum(" dpmhead01.cern.ch dpns: " in line for line in lines) == result.dpns_lines
    assert len(result.requests) == 600


def test_clock_step_takes_the_stamps_back_within_the_run(runs):
    result = runs["clock-step"]
    seconds = [int(h) * 3600 + int(m) * 60 + int(s) for _, _, h, m, s in stamps(result.log_path)]
    assert min(b - a for a, b in zip(seconds, seconds[1:])) <= -29
    assert any(r["ended"] < r["started"] and r["total_ms"] == 0 for r in result.requests)


@pytest.mark.parametrize("name, count", [("future-line", 1), ("future-lines", 3)])
def test_future_line_scenarios_hold_lines_an_hour_ahead(runs, name, count):
    result = runs[name]
    hours = [int(s[2]) for s in stamps(result.log_path)]
    assert sum(1 for h in hours if h == 15) == count       # the run is within 14:31..14:32
    assert result.stats["future_lines"] == count
