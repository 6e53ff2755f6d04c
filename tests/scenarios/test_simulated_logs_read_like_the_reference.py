"""The simulated logs read like the reference: envelope, messages, threads, pids, and the
shapes of issue 11 (stray processes, lines far ahead, the rsyslog file, a clock step, an
overlapping restart). What the simulator's writers print together, read from its files."""

from __future__ import annotations

import re

import pytest

from dpmstream.simulator import SimConfig, scenario, simulate

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"
SURL = r"srm://dpmhead01\.cern\.ch/dpm/cern\.ch/home/dteam/perf/\S+"
DN = r"/DC=ch/DC=cern/OU=Organic Units/OU=Users/CN=.+"
IDS = r"\(\d+(?:,\d+)+\)"
CLIENT = r"lxfsra\d\d\.cern\.ch"
ENVELOPE = re.compile(
    r"^(?P<stamp>\d\d/\d\d \d\d:\d\d:\d\d(?:\.\d{3})?) (?P<pid>[ \d]{4}\d)(?:,(?P<tid>\d+))? "
    r"(?P<func>\w+): (?P<msg>.+)$"
)

# Every message a function may log, per the format reference (sections 2 and 3).
MESSAGES = {
    "dpm_serv": [rf"\[137\.138\.\d+\.\d+\] \({CLIENT}\): request accepted",
                 rf"\[137\.138\.\d+\.\d+\] \({CLIENT}\): Could not establish an authenticated connection: .+ !",
                 rf"\[137\.138\.\d+\.\d+\] \({CLIENT}\): Failure getting the request: Timed out"],
    "dpm_srv_put": [rf"DP092 - put request by {DN} {IDS} from {CLIENT}",
                    rf"DP098 - put \d+ {UUID}", rf"DP098 - put \d+ {SURL}", r"returns \d+"],
    "dpm_srv_get": [rf"DP092 - get request by {DN} {IDS} from {CLIENT}",
                    rf"DP098 - get \d+ {UUID}", rf"DP098 - get \d+ {SURL}", r"returns \d+",
                    rf"selected disk\d\d\.cern\.ch:/srv/dpm/\d\d for {SURL}"],
    "dpm_srv_proc_put": [rf"processing put request {UUID}",
                         rf"selected disk\d\d\.cern\.ch:/srv/dpm/\d\d for {SURL}", r"returns \d+"],
    "dpm_srv_proc_get": [rf"processing get request {UUID}",
                         rf"selected disk\d\d\.cern\.ch:/srv/dpm/\d\d for {SURL}", r"returns \d+"],
    "dpm_srv_getstatus_putreq": [rf"DP092 - getstatus_putreq request by {DN} {IDS} from {CLIENT}",
                                 rf"DP098 - getstatus_putreq {UUID} \d+",
                                 r"request status DPM_(QUEUED|ACTIVE|SUCCESS|FAILED)", r"returns 0"],
    "dpm_srv_getstatus_getreq": [rf"DP092 - getstatus_getreq request by {DN} {IDS} from {CLIENT}",
                                 rf"DP098 - getstatus_getreq {UUID} \d+",
                                 r"request status DPM_(QUEUED|ACTIVE|SUCCESS|FAILED)", r"returns 0"],
    "dpm_srv_putdone": [rf"DP092 - putdone request by {DN} {IDS} from {CLIENT}",
                        rf"DP098 - putdone {UUID} \d+", rf"DP098 - putdone \d+ {SURL}", r"returns \d+"],
    "dpm_srv_relfiles": [rf"DP092 - relfiles request by {DN} {IDS} from {CLIENT}",
                         rf"DP098 - relfiles {UUID} \d+", rf"DP098 - relfiles \d+ {SURL}", r"returns \d+"],
    "dpm_srv_abortreq": [rf"DP092 - abortreq request by {DN} {IDS} from {CLIENT}",
                         rf"DP098 - abortreq {UUID} \d+", r"returns 0"],
    "dpm_srv_ping": [rf"DP092 - ping request by {DN} {IDS} from {CLIENT}", r"returns 0"],
    "dpm_srv_getpools": [rf"DP092 - getpools request by {DN} {IDS} from {CLIENT}", r"returns 0"],
    "Cns_srv_creat": [rf"NS092 - creat request by {DN} {IDS} from dpmhead01\.cern\.ch",
                      rf"NS098 - creat /dpm/cern\.ch/home/dteam/perf/\S+ {UUID} 664 22",
                      r"file \d+ created", r"returns 0"],
    "Cns_srv_statg": [rf"NS092 - statg request by {DN} {IDS} from dpmhead01\.cern\.ch",
                      rf"NS098 - statg /dpm/cern\.ch/home/dteam/perf/\S+ {UUID}", r"returns 0"],
}
COMPILED = {func: [re.compile(p + "$") for p in pats] for func, pats in MESSAGES.items()}


def parse(path):
    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            m = ENVELOPE.match(line.rstrip("\n"))
            assert m, f"line breaks the envelope: {line!r}"
            out.append(m)
    return out


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    cfg = scenario("mixed", requests=1500, files=2, done_fail_rate=0.01)
    return simulate(cfg, tmp_path_factory.mktemp("fmt") / "mixed")


@pytest.fixture(scope="module")
def sync_run(tmp_path_factory):
    return simulate(scenario("sync-get", requests=600), tmp_path_factory.mktemp("fmt") / "sync")


def test_every_line_has_the_envelope_and_a_known_message(mixed, sync_run):
    for result in (mixed, sync_run):
        for path in (result.log_path, result.dpns_log_path):
            for m in parse(path):
                if m["tid"] is None:   # the main thread only announces the start
                    assert (m["func"], m["msg"]) == ("dpm_serv", "started")
                    continue
                patterns = COMPILED.get(m["func"])
                assert patterns, f"unexpected function {m['func']}"
                assert any(p.match(m["msg"]) for p in patterns), m.group(0)


def test_stamps_carry_milliseconds_and_pids_are_five_wide(mixed):
    lines = parse(mixed.log_path)
    assert all(len(m["stamp"]) == len("08/12 14:31:43.118") for m in lines)
    assert {m["pid"] for m in lines} == {"12345"}
    assert {m["pid"] for m in parse(mixed.dpns_log_path)} == {" 9876"}


def test_a_four_digit_pid_is_printed_with_two_spaces_before_it(tmp_path):
    result = simulate(SimConfig(requests=20, pid=4321), tmp_path / "p")
    first = result.log_path.read_text().splitlines()[:3]
    assert first[0] == "08/12 14:31:40.000  4321 dpm_serv: started"
    assert re.match(r"^08/12 14:31:40\.\d{3}  4321,\d+ dpm_serv: ", first[1])


def test_whole_second_builds_print_no_milliseconds(tmp_path):
    result = simulate(SimConfig(requests=100, whole_seconds=True), tmp_path / "w")
    for path in (result.log_path, result.dpns_log_path):
        assert all(re.fullmatch(r"\d\d/\d\d \d\d:\d\d:\d\d", m["stamp"]) for m in parse(path))


def test_one_put_reads_like_the_reference_sequence(mixed):
    lines = parse(mixed.log_path)
    done = next(r for r in mixed.requests if r["op"] == "put" and r["status"] == "success"
                and r["accepted"] is not None and r["polls"] >= 2)
    token = done["token"]
    # The put call: from the accept line to `returns` on the thread that named the token.
    at = next(i for i, m in enumerate(lines) if m["msg"].startswith(f"DP098 - put 2 {token}"))
    tid = lines[at]["tid"]
    call = [m for m in lines[:at + 40] if m["tid"] == tid and m["pid"] == "12345"]
    k = next(i for i, m in enumerate(call) if m is lines[at])
    accept, opened, named, file0, file1 = call[k - 2:k + 3]
    assert re.fullmatch(rf"\[137\.138\.40\.\d+\] \({done['client']}\): request accepted", accept["msg"])
    assert re.fullmatch(rf"DP092 - put request by {DN} {IDS} from {done['client']}", opened["msg"])
    assert named["msg"] == f"DP098 - put 2 {token}"
    assert re.fullmatch(rf"DP098 - put 0 {SURL}", file0["msg"])
    assert re.fullmatch(rf"DP098 - put 1 {SURL}", file1["msg"])
    surls = [file0["msg"].split()[-1], file1["msg"].split()[-1]]
    after = [m for m in call[k + 3:] if m["func"] == "dpm_srv_put"]
    assert after[0]["msg"] == "returns 0"
    # The slow thread: processing, one `selected` per file, returns.
    proc = [m for m in lines if m["func"] == "dpm_srv_proc_put" and m["msg"].endswith(token)]
    assert len(proc) == 1 and int(proc[0]["tid"]) >= mixed.config.fthreads
    run = [m for m in lines if m["tid"] == proc[0]["tid"]]
    j = next(i for i, m in enumerate(run) if m is proc[0])
    assert [m["msg"] for m in run[j + 1:j + 4]] == [
        f"selected {run[j + 1]['msg'].split()[1]} for {surls[0]}",
        f"selected {run[j + 2]['msg'].split()[1]} for {surls[1]}", "returns 0"]
    # Status answers come with `returns 0` in the same millisecond.
    answers = [i for i, m in enumerate(lines) if m["func"] == "dpm_srv_getstatus_putreq"
               and m["msg"] == "request status DPM_SUCCESS"]
    assert answers
    for i in answers[:50]:
        nxt = next(m for m in lines[i + 1:] if m["tid"] == lines[i]["tid"])
        assert nxt["msg"] == "returns 0" and nxt["stamp"] == lines[i]["stamp"]
    # putdone names the token first, then lists the files.
    putdone = [m["msg"] for m in lines if m["func"] == "dpm_srv_putdone" and m["msg"].startswith("DP098")
               and (token in m["msg"] or m["msg"].split()[-1] in surls)]
    assert putdone == [f"DP098 - putdone {token} 2", f"DP098 - putdone 0 {surls[0]}",
                       f"DP098 - putdone 1 {surls[1]}"]


def test_threads_come_from_their_pools(mixed):
    cfg = mixed.config
    for m in parse(mixed.log_path):
        if m["tid"] is None:
            continue
        tid = int(m["tid"])
        if m["func"].startswith("dpm_srv_proc_"):
            assert cfg.fthreads <= tid < cfg.fthreads + cfg.sthreads
        else:
            assert 0 <= tid < cfg.fthreads
    assert all(0 <= int(m["tid"]) < cfg.dpns_threads for m in parse(mixed.dpns_log_path))


def test_name_server_creates_files_for_puts_and_stats_them_for_gets(mixed):
    dpns = parse(mixed.dpns_log_path)
    creates = [m for m in dpns if m["msg"].startswith("NS098 - creat ")]
    stats = [m for m in dpns if m["msg"].startswith("NS098 - statg ")]
    puts = [r for r in mixed.requests if r["op"] == "put"]
    gets = [r for r in mixed.requests if r["op"] == "get"]
    assert len(creates) >= 2 * sum(1 for r in puts if r["proc_ms"] is not None)
    assert len(stats) >= 2 * sum(1 for r in gets if r["proc_ms"] is not None)
    created = [m for m in dpns if re.fullmatch(r"file \d+ created", m["msg"])]
    assert len(created) == len(creates)


def test_sync_get_is_served_in_the_fast_thread(sync_run):
    lines = parse(sync_run.log_path)
    assert not [m for m in lines if m["func"] == "dpm_srv_proc_get"]
    selected = [m for m in lines if m["func"] == "dpm_srv_get" and m["msg"].startswith("selected ")]
    assert selected and all(int(m["tid"]) < sync_run.config.fthreads for m in selected)


# -- logs shaped differently (issue 11) ------------------------------------------------

PROBE_DN = "/DC=ch/DC=cern/OU=computers/CN=nagios01.cern.ch"
HOUSEKEEPING = "DP002 - dpm_pingdb error : Lost connection to MySQL server during query"
RSYSLOG = re.compile(
    r"^(?P<rtime>(?P<date>\d{4}-\d\d-\d\d)T(?P<hms>\d\d:\d\d:\d\d)\.(?P<us>\d{6})(?P<zone>[+-]\d\d:\d\d)) "
    r"(?P<host>\S+) (?P<tag>[^\s:]+): (?P<msg>.*)$"
)


def _ms_of_day(stamp: str) -> int:
    """`MM/DD HH:MM:SS.mmm` of one day as ms since midnight."""
    h, m, s = stamp[6:].split(":")
    return (int(h) * 3600 + int(m) * 60) * 1000 + int(round(float(s) * 1000))


@pytest.fixture(scope="module")
def strays(tmp_path_factory):
    return simulate(scenario("stray-pids", requests=600), tmp_path_factory.mktemp("fmt") / "stray")


def test_a_stray_process_logs_probe_pings_on_its_own_threads_and_main_thread_lines(strays):
    lines = parse(strays.log_path)
    other = [m for m in lines if m["pid"] == "23456"]
    assert {m["pid"] for m in lines} == {"12345", "23456"}
    main = [m for m in other if m["tid"] is None]
    assert [(m["func"], m["msg"]) for m in main] == [("dpm_serv", HOUSEKEEPING)] * 2
    calls = [m for m in other if m["tid"] is not None]
    by_thread = {}
    for m in calls:
        by_thread.setdefault(m["tid"], []).append(m["msg"])
    pings = [msgs[i:i + 3] for msgs in by_thread.values() for i in range(0, len(msgs), 3)]
    assert len(pings) == 4
    for accept, opened, returned in pings:
        assert accept == "[137.138.99.10] (nagios01.cern.ch): request accepted"
        assert opened == f"DP092 - ping request by {PROBE_DN} (0,0) from nagios01.cern.ch"
        assert returned == "returns 0"
    # Each stray comes while the real daemon logs on both sides of it.
    first = lines.index(other[0])
    last = lines.index(other[-1])
    assert 1000 < first and last < len(lines) - 1000
    assert not any(m["func"] == "dpm_serv" and m["msg"] == "started" for m in other)


def test_lines_stamped_far_ahead_stand_out_from_both_neighbours(tmp_path):
    result = simulate(scenario("future-lines", requests=600), tmp_path / "fut")
    lines = parse(result.log_path)
    ahead = [i for i, m in enumerate(lines)
             if i > 0 and _ms_of_day(m["stamp"]) - _ms_of_day(lines[i - 1]["stamp"]) > 3_600_000]
    assert len(ahead) == 3 == result.stats["future_lines"]
    for i in ahead:
        m = lines[i]
        gap = _ms_of_day(m["stamp"]) - _ms_of_day(lines[i - 1]["stamp"])
        assert 3_660_000 - 10 <= gap <= 3_660_000 + 10
        assert abs(_ms_of_day(lines[i + 1]["stamp"]) - _ms_of_day(lines[i - 1]["stamp"])) < 1000
        assert m["pid"] == "12345"
    kinds = [(lines[i]["tid"] is None, lines[i]["func"], lines[i]["msg"]) for i in ahead]
    assert kinds[0] == (False, "dpm_srv_ping", f"DP092 - ping request by {PROBE_DN} (0,0) from nagios01.cern.ch")
    assert kinds[1] == (True, "dpm_serv", HOUSEKEEPING)
    assert kinds[2] == kinds[0]
    # The far-ahead DP092 lines are the only ping lines with no call record.
    assert sum(1 for m in lines if m["func"] == "dpm_srv_ping" and m["msg"].startswith("DP092")) \
        == 2 + sum(1 for c in result.calls if c["op"] == "ping")


@pytest.fixture(scope="module")
def syslog_run(tmp_path_factory):
    return simulate(scenario("mixed-syslog", requests=600), tmp_path_factory.mktemp("fmt") / "sys")


def test_the_rsyslog_file_holds_both_daemons_lines_in_file_order_under_their_tags(syslog_run):
    entries = [RSYSLOG.match(line) for line in syslog_run.messages_path.read_text().splitlines()]
    assert all(entries)
    assert {e["host"] for e in entries} == {"dpmhead01.cern.ch"}
    for tag, path in (("dpm", syslog_run.log_path), ("dpns", syslog_run.dpns_log_path)):
        mine = [e["msg"] for e in entries if e["tag"] == tag]
        assert mine == path.read_text().splitlines()
        assert all(ENVELOPE.match(msg) for msg in mine)
    tags = [e["tag"] for e in entries]
    switches = sum(1 for a, b in zip(tags, tags[1:]) if a != b)
    assert switches > 1000                     # interleaved, not one file after the other


def test_rsyslog_stamps_are_the_read_time_a_few_ms_after_the_line_in_time_order(syslog_run):
    entries = [RSYSLOG.match(line) for line in syslog_run.messages_path.read_text().splitlines()]
    assert {e["zone"] for e in entries} == {"+02:00"} and {e["date"] for e in entries} == {"2011-08-12"}
    times = [e["rtime"] for e in entries]
    assert times == sorted(times)
    lags = []
    for e in entries:
        if e["tag"] in ("dpm", "dpns"):
            h, m, s = e["hms"].split(":")
            read_us = ((int(h) * 60 + int(m)) * 60 + int(s)) * 1_000_000 + int(e["us"])
            lags.append(read_us - _ms_of_day(e["msg"][:18]) * 1000)
    assert min(lags) >= 300 and max(lags) < 50_000
    assert len({lag % 1000 for lag in lags}) > 100      # microseconds, not whole ms


def test_the_rsyslog_file_carries_other_programs_lines(syslog_run):
    entries = [RSYSLOG.match(line) for line in syslog_run.messages_path.read_text().splitlines()]
    foreign = [e for e in entries if e["tag"] not in ("dpm", "dpns")]
    assert len(foreign) == syslog_run.stats["foreign_lines"] >= 10
    assert {e["tag"] for e in foreign} <= {"sshd[2211]", "kernel", "CRON[99]", "systemd[1]"}
    assert len({e["tag"] for e in foreign}) >= 3
    assert any(e["msg"] == "Accepted publickey for root from 10.0.0.1 port 22 ssh2" for e in foreign)


def test_a_clock_step_takes_every_stamp_of_the_machine_back_once(tmp_path):
    result = simulate(scenario("clock-step", requests=600, syslog_file=True), tmp_path / "cs")
    for path in (result.log_path, result.dpns_log_path):
        stamps = [_ms_of_day(m["stamp"]) for m in parse(path)]
        steps = [b - a for a, b in zip(stamps, stamps[1:]) if b - a < -1000]
        assert len(steps) == 1 and -30_000 - 100 < steps[0] < -30_000 + 100
    times = [RSYSLOG.match(line)["hms"] for line in result.messages_path.read_text().splitlines()]
    back = [(a, b) for a, b in zip(times, times[1:]) if b < a]
    assert back == [("14:31:47", "14:31:18")]


def test_an_overlapping_restart_interleaves_both_pids_for_seconds(tmp_path):
    result = simulate(scenario("overlap-restart", requests=600), tmp_path / "ov")
    old, new = (f"{p:5d}" for p in result.dpm_pids)
    lines = parse(result.log_path)
    start = next(i for i, m in enumerate(lines) if m["pid"] == new)
    assert (lines[start]["tid"], lines[start]["func"], lines[start]["msg"]) == (None, "dpm_serv", "started")
    assert all(m["pid"] == old for m in lines[:start])
    after_old = [m for m in lines[start:] if m["pid"] == old]
    assert sum(1 for m in after_old if m["msg"].startswith("returns")) >= 10
    last_old = lines.index(after_old[-1])
    assert sum(1 for m in lines[start:last_old] if m["pid"] == new) > 100
    span = _ms_of_day(after_old[-1]["stamp"]) - _ms_of_day(lines[start]["stamp"])
    assert 1000 < span <= 4000
    assert not any(m["tid"] is None for m in after_old)     # the old process logs no `started`
