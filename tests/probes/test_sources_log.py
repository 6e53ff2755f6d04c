"""check_dpm --log: the last window of a simulated log, against the simulator's truth,
across a year end, a month end and a daemon restart; the tail of a long file is found
by seeking; bad sources are UNKNOWN with the reason."""

from __future__ import annotations

import csv
import os
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from dpmstream.parsers.records import PHASES, column_of, text_to_ms
from dpmstream.parsers.quantiles import nearest_rank
from tests.metrics_stack import simulate
from tests.probes.test_sources_prometheus import COUNTING_TIME, check_dpm_in_process

TZ = "Europe/Zurich"


def check_dpm(*args: str):
    """The probe's answer, read in this process (test_check_dpm runs its process), with a
    -t these reads are sure to fit in: these tests are about what is counted in a window
    read whole, which under -t may be partial (UNKNOWN)."""
    return check_dpm_in_process(*args, *COUNTING_TIME)


STAMP = re.compile(r"^(\d\d)/(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{3}))?")


def latest_event_ms(path: Path, year_of_last_line: int) -> int:
    """The latest stamp among the last lines (threads interleave), in UTC ms."""
    lines = path.read_text().splitlines()[-300:]
    last_month = int(STAMP.match(lines[-1]).group(1))
    best = 0
    for line in lines:
        m = STAMP.match(line)
        if not m:
            continue
        mo, d, h, mi, s, ms = (int(g or 0) for g in m.groups())
        year = year_of_last_line if mo <= last_month else year_of_last_line - 1
        t = datetime(year, mo, d, h, mi, s, ms * 1000, tzinfo=ZoneInfo(TZ))
        best = max(best, int(t.timestamp() * 1000))
    return best


def truth(prefix: Path, window_s: float, end_ms: int):
    """What the probe must report for the DPM log: finished requests and dpm calls whose
    `ended` lies in (end - window, end]; requests still open at the end (incomplete in
    the truth, since the simulation stops) are in progress, not counted."""
    begin = end_ms - int(window_s * 1000)
    with open(f"{prefix}.requests.csv", newline="") as fh:
        reqs = [r for r in csv.DictReader(fh)
                if r["status"] != "incomplete" and r["ended"] and begin < text_to_ms(r["ended"]) <= end_ms]
    with open(f"{prefix}.calls.csv", newline="") as fh:
        calls = [c for c in csv.DictReader(fh)
                 if c["daemon"] == "dpm" and c["ended"] and begin < text_to_ms(c["ended"]) <= end_ms]
    return reqs, calls


def assert_probe_matches_truth(prefix: Path, window: str, window_s: float, year_of_last: int, *extra):
    log = Path(f"{prefix}.log")
    rc, status, perf = check_dpm("--log", str(log), "--tz", TZ, "--window", window, *extra)
    assert rc == 0, status
    end_ms = latest_event_ms(log, year_of_last)
    reqs, calls = truth(prefix, window_s, end_ms)
    assert len(reqs) > 50
    assert int(perf["requests"][0]) == len(reqs)
    assert int(perf["calls"][0]) == len(calls)
    failed = sum(1 for r in reqs if r["status"] == "failed")
    assert float(perf["failed_rate"][0]) == pytest.approx(failed / len(reqs), rel=1e-5)
    for field, phase in PHASES:
        values = sorted(text_to_ms(r[column_of(field)]) / 1000 for r in reqs
                        if r[column_of(field)] != "")
        for label, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
            got = perf[f"{phase}_{label}"][0]
            expected = nearest_rank(values, q)
            if expected is None:
                assert got == "U", (phase, label)
            else:
                assert float(got) == pytest.approx(expected, rel=1e-5, abs=1e-9), (phase, label)
    return status


def test_window_across_the_year_end_matches_the_truth(tmp_path):
    # One request a second (as the other dated windows): the window still holds some 900.
    prefix = simulate(tmp_path / "ye", "--scenario", "mixed", "--rate", "1",
                                 "--duration", "1200", "--start", "2011-12-31 23:50:00", "--tz", TZ)
    # The last line is in 2012 (00:10 local), the window reaches back into 2011.
    status = assert_probe_matches_truth(prefix, "15m", 900, 2012)
    assert "up to 2011-12-31 23:09:" in status  # 00:09/00:10 local = 23:09/23:10 UTC
    # --year names the year of the last line: same answer as the file's mtime gives.
    assert_probe_matches_truth(prefix, "15m", 900, 2012, "--last-line-year", "2012")


def test_window_across_a_month_end_matches_the_truth(tmp_path):
    prefix = simulate(tmp_path / "me", "--scenario", "mixed", "--rate", "1",
                                 "--duration", "600", "--start", "2011-08-31 23:55:00", "--tz", TZ)
    assert_probe_matches_truth(prefix, "8m", 480, 2011)


def test_window_across_a_daemon_restart_matches_the_truth(tmp_path):
    prefix = simulate(tmp_path / "rs", "--scenario", "mixed", "--rate", "1",
                                 "--duration", "400", "--restart-at", "200", "--tz", TZ)
    pids = {line.split()[2].split(",")[0] for line in Path(f"{prefix}.log").read_text().splitlines()}
    assert len(pids) == 2  # the restart did change the pid inside the window
    assert_probe_matches_truth(prefix, "5m", 300, 2011)


@pytest.fixture(scope="module")
def mixed_10min(tmp_path_factory):
    """Ten minutes of a mixed site, simulated once for the tests that only read it (one
    that changes its log works on a copy)."""
    return simulate(tmp_path_factory.mktemp("mixed") / "m", "--scenario", "mixed",
                               "--rate", "3", "--duration", "600", "--tz", TZ)


def test_a_long_file_is_read_from_near_its_end_with_the_same_result(long_log):
    log = str(long_log) + ".log"
    args = ("--log", log, "--tz", TZ, "--window", "10m")
    rc, status, perf = check_dpm(*args, "--lookback", "5m", "-v")   # -v: where it read from
    offset = int(re.search(r"from byte (\d+)", status).group(1))
    # 10m + 5m + a 2m margin of a 150-minute log: about the last 11% is read
    size = os.path.getsize(log)
    assert 0.80 * size < offset < 0.95 * size
    rc_all, _, perf_all = check_dpm(*args, "--lookback", "4h")
    assert rc == rc_all == 0
    assert perf == perf_all
    assert_probe_matches_truth(long_log, "10m", 600, 2011, "--lookback", "5m")


def test_thresholds_apply_to_the_log_source(long_log):
    rc, status, perf = check_dpm("--log", str(long_log) + ".log", "--tz", TZ, "--window", "10m",
                                 "-w", "proc:p95=~:0.01", "-c", "failed_rate=0.5",
                                 "-c", "ns:getpools:p95=10")
    assert rc == 1 and "proc_p95" in status


def test_every_range_left_is_in_the_log_source_text_the_worst_first(long_log):
    rc, status, _ = check_dpm("--log", str(long_log) + ".log", "--tz", TZ, "--window", "10m",
                              "-w", "proc:p95=~:0.01", "-w", "failed_rate=0.0001",
                              "-c", "total:p99=~:0.001", "-c", "queue:p50=~:3600")
    assert rc == 2
    named = [part.split(" = ")[0] for part in status.removeprefix("DPM CRITICAL - ").split("; ")]
    assert named == ["total_p99", "failed_rate", "proc_p95"]  # critical, then the warnings


def test_a_host_regex_selects_a_native_log_whose_lines_name_no_host(long_log):
    """Native lines carry no host: --host names them, and, a regex, must still select
    them (it once counted nothing for 'dpmhead0[12]': the text did not match itself)."""
    args = ("--log", str(long_log) + ".log", "--tz", TZ, "--window", "10m")
    _, _, plain = check_dpm(*args)
    for host in ("dpmhead01", "dpmhead0[12]", "dpmhead.*"):
        rc, status, perf = check_dpm(*args, "--host", host)
        assert rc == 0 and perf == plain, (host, status)


def test_missing_file_is_unknown():
    rc, status, _ = check_dpm("--log", "/nonexistent/dpm/log")
    assert rc == 3 and "cannot read /nonexistent/dpm/log" in status


def test_a_file_without_dpm_lines_is_unknown(tmp_path):
    junk = tmp_path / "log"
    junk.write_text("hello\nworld\n")
    rc, status, _ = check_dpm("--log", str(junk))
    assert rc == 3 and "no DPM log line" in status


def test_no_activity_in_the_window_follows_no_data(tmp_path):
    quiet = tmp_path / "log"
    quiet.write_text("08/12 14:31:43.101 12345 dpm_serv: started\n")
    rc, status, _ = check_dpm("--log", str(quiet), "--tz", TZ)
    assert rc == 3 and "no DPM request or call in the last 15m" in status
    rc, _, _ = check_dpm("--log", str(quiet), "--tz", TZ, "--no-data", "ok")
    assert rc == 0


def test_a_stale_log_with_no_request_in_its_window_is_critical_not_unknown(tmp_path):
    """A hung daemon: its log stopped long ago, the window before its last line holds no
    request. That is what --max-age is for: the staleness decides, not --no-data."""
    quiet = tmp_path / "log"
    quiet.write_text("08/12 14:31:43.101 12345 dpm_serv: started\n")
    os.utime(quiet, (datetime(2026, 8, 12, 13).timestamp(),) * 2)  # dates the line: 2026
    rc, status, perf = check_dpm("--log", str(quiet), "--tz", "UTC", "--max-age", "10m")
    assert rc == 2, status
    assert status.startswith("DPM CRITICAL - stale source: newest line is"), status
    assert "over --max-age 10m, and no DPM request or call in the last 15m" in status
    assert "None" not in status and perf["requests"][0] == "0"
    rc, status, _ = check_dpm("--log", str(quiet), "--tz", "UTC", "--max-age", "10m",
                              "--max-age-state", "warning")
    assert rc == 1 and "stale source" in status
    rc, status, _ = check_dpm("--log", str(quiet), "--tz", "UTC", "--max-age", "36500d")
    assert rc == 3 and status.startswith("DPM UNKNOWN - no DPM request or call")  # fresh: --no-data


def _simulate_ending(tmp_path, name: str, ago: timedelta, duration_s: int = 300) -> Path:
    """A UTC log whose last line was written `ago` before now."""
    start = datetime.now(timezone.utc) - ago - timedelta(seconds=duration_s)
    prefix = simulate(tmp_path / name, "--scenario", "mixed", "--rate", "1",
                                 "--duration", str(duration_s),
                                 "--start", start.strftime("%Y-%m-%d %H:%M:%S"), "--tz", "UTC")
    return Path(f"{prefix}.log")


def test_a_log_written_up_to_now_passes_max_age(tmp_path):
    log = _simulate_ending(tmp_path, "fresh", timedelta(0))
    rc, status, perf = check_dpm("--log", str(log), "--tz", "UTC", "--window", "5m",
                                 "--max-age", "10m")
    assert rc == 0, status
    assert 0 <= float(perf["age"][0]) < 600 and perf["age"][3] == "600"


def test_a_log_that_stopped_growing_is_critical_or_as_configured(tmp_path):
    log = _simulate_ending(tmp_path, "stopped", timedelta(minutes=30))
    rc, status, perf = check_dpm("--log", str(log), "--tz", "UTC", "--window", "5m",
                                 "--max-age", "10m")
    assert rc == 2, status
    # the summary names what is wrong (it once read "DPM CRITICAL - None (newest line ...")
    assert status.startswith("DPM CRITICAL - stale source: newest line is 3"), status
    assert "None" not in status and "m old, over --max-age 10m" in status
    assert float(perf["age"][0]) == pytest.approx(1800, abs=120)
    assert int(perf["requests"][0]) > 50  # the last window is still measured and shown
    rc, status, _ = check_dpm("--log", str(log), "--tz", "UTC", "--window", "5m",
                              "--max-age", "10m", "--max-age-state", "unknown")
    assert rc == 3 and "over --max-age 10m" in status
    rc, _, _ = check_dpm("--log", str(log), "--tz", "UTC", "--window", "5m")
    assert rc == 0  # without --max-age, an old log is measured as it is


def test_an_rsyslog_written_log_gives_the_same_window_as_the_native_one(tmp_path, mixed_10min):
    native = Path(f"{mixed_10min}.log")
    wrapped = tmp_path / "messages"
    with open(native) as src, open(wrapped, "w") as out:
        for text in src:  # RSYSLOG_FileFormat: RFC 3339 receive time, host, tag
            mo, d, time_of_day = text[0:2], text[3:5], text[6:14]
            out.write(f"2011-{mo}-{d}T{time_of_day}.500000+02:00 dpmhead01 dpm: {text}")
    os.utime(wrapped, (native.stat().st_atime, native.stat().st_mtime))
    rc, status, perf = check_dpm("--log", str(native), "--tz", TZ, "--window", "5m",
                                 "--lookback", "1m", "-v")
    rc2, status2, perf2 = check_dpm("--log", str(wrapped), "--tz", TZ, "--window", "5m",
                                    "--lookback", "1m", "--host", "dpmhead01", "-v")
    assert rc == rc2 == 0, (status, status2)
    assert int(perf["requests"][0]) > 50
    assert perf == perf2
    offset = int(re.search(r"from byte (\d+)", status2).group(1))
    assert offset > 0  # 5m + 1m + 2m of 10m: the start was found by the rsyslog form's stamps


def _compiled_or_skip(engine: str) -> None:
    from dpmstream.parsers import engines

    if engine == "compiled" and not engines.compiled_available():
        pytest.skip("the compiled engine is not built here")


@pytest.mark.parametrize("engine", ["python", "compiled"])
def test_each_reassembly_engine_reads_the_window_as_the_truth(monkeypatch, engine, mixed_10min):
    _compiled_or_skip(engine)
    monkeypatch.setenv("DPMSTREAM_ENGINE", engine)
    status = assert_probe_matches_truth(mixed_10min, "5m", 300, 2011, "-v")
    assert f"; {engine} engine" in status


def test_the_engines_agree_on_lines_the_compiled_parser_leaves_to_python(tmp_path, monkeypatch,
                                                                        mixed_10min):
    """Latin-1 DNs (not UTF-8, not ASCII) in the window: the compiled engine hands each such
    line to the Python parser and carries on; answer and counts are the Python engine's."""
    _compiled_or_skip("compiled")
    simulated = Path(f"{mixed_10min}.log")
    data = simulated.read_bytes()
    cut = len(data) * 3 // 4
    tail_part = data[cut:].replace(b"/CN=", b"/CN=Jos\xe9 ")
    assert tail_part.count(b"\xe9") > 20
    log = tmp_path / "l1.log"   # the shared log's copy, changed (written now, as it was)
    log.write_bytes(data[:cut] + tail_part)
    args = ("--log", str(log), "--tz", TZ, "--window", "5m")
    answers = {}
    for engine in ("python", "compiled"):
        monkeypatch.setenv("DPMSTREAM_ENGINE", engine)
        rc, status, perf = check_dpm(*args, "-v")   # -v: the lines read, as each engine counts them
        answers[engine] = (rc, status.replace(f"; {engine} engine", ""), perf)
    assert answers["python"][0] == 0
    assert answers["compiled"] == answers["python"]
    assert " not UTF-8" in answers["python"][1] and "; 0 not UTF-8" not in answers["python"][1]


@pytest.mark.parametrize("engine", ["python", "compiled"])
def test_name_server_calls_the_linker_still_holds_at_the_end_of_the_log_are_counted(
        tmp_path, monkeypatch, engine):
    # The window is read through a Pipeline, whose linker holds a call of the head node
    # a few seconds (it may yet link to a request): the calls of the log's last seconds
    # reach the probe only when the input ends, and are as finished as any other.
    from dpmstream.probes.measurement import Wanted
    from dpmstream.probes.sources_log import LogSource
    from tests.dpmlog import DN, line

    _compiled_or_skip(engine)
    monkeypatch.setenv("DPMSTREAM_ENGINE", engine)
    head, lines = "dpmhead01.cern.ch", []
    for i in range(30):  # one statg a second, each taking 200 ms
        start, end = f"08/12 10:00:{i:02d}.000", f"08/12 10:00:{i:02d}.200"
        func = "Cns_srv_statg"
        lines += [line(start, 4, func, f"NS092 - statg request by {DN} (1,1) from {head}", 9876),
                  line(start, 4, func, f"NS098 - statg /dpm/cern.ch/home/f{i} 0 0 0", 9876),
                  line(end, 4, func, "returns 0", 9876)]
    log = tmp_path / "log"
    log.write_text("\n".join(lines) + "\n")
    source = LogSource(str(log), 60, host=head, profile="lcgdm-ns", tz="UTC", year=2011)
    snap = source.fetch(Wanted(phase_quantiles=(0.5,), ns={"statg": (0.5, 1.0)}))
    assert source.lines["parsed"] == 90 and source.engine == engine
    assert snap.calls == 30
    assert snap.ns[("statg", 1.0)] == pytest.approx(0.2)
