"""check_dpm --prometheus against a real Prometheus scraping a real `dpmstream run`."""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from dpmstream.parsers.records import PHASES
from dpmstream.commands.stack.process import free_port, wait_for
from dpmstream.probes.sources_prometheus import counted_increase
from tests.helpers import dpmstream_in_process
from tests.metrics_stack import DPMSTREAM, HOST, simulate, start_live_stack

pytestmark = pytest.mark.services  # Prometheus and `dpmstream run` (tests/metrics_stack.py)

CHECK_DPM = str(Path(sys.executable).with_name("check_dpm"))
PERF = re.compile(r"'?([\w.]+)'?=([-\d.eE+]+|U)(s?)(?:;([^;\s]*))?(?:;([^;\s]*))?")


def check_dpm(*args: str, timeout: float = 30,
              env: dict | None = None) -> tuple[int, str, dict[str, tuple[str, str, str, str]]]:
    """`check_dpm ARGS` as Nagios runs it, a process: (exit code, status, perfdata)."""
    done = subprocess.run([CHECK_DPM, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    return answer(done)


def answer(done: subprocess.CompletedProcess) -> tuple[int, str, dict[str, tuple[str, str, str, str]]]:
    """The probe's exit code, status (the output before the perfdata) and perfdata."""
    status, _, perf = done.stdout.partition("|")
    perfdata = {m.group(1): m.group(2, 3, 4, 5) for m in PERF.finditer(perf)}
    return done.returncode, status.strip(), perfdata


def check_dpm_run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`check_dpm ARGS` run by its entry point's function in this process (tests.helpers.
    dpmstream_in_process, text), for tests of the probe's answer rather than of its process
    (no interpreter start); `env`: variables set for the call. As in a new process, -t
    counts from the call, and nagiosplugin's runtime (one a process) is a new one."""
    import nagiosplugin
    from dpmstream.probes import check_dpm as entry

    with pytest.MonkeyPatch.context() as patch:
        for name, value in (env or {}).items():
            patch.setenv(name, value)
        patch.setattr(entry, "_STARTED", time.monotonic())
        patch.setattr(nagiosplugin.Runtime, "instance", None)
        try:
            return dpmstream_in_process(*args, main=entry.main, text=True)
        finally:
            runtime = nagiosplugin.Runtime.instance
            if runtime is not None:  # its log handler, else each run's log reads the last's
                logging.getLogger("nagiosplugin").removeHandler(runtime.logchan)


def check_dpm_in_process(*args: str, env: dict | None = None):
    """As check_dpm(ARGS), run in this process (check_dpm_run)."""
    return answer(check_dpm_run(*args, env=env))


# The -t of the tests of what a log source counts (tests/scenarios/test_probe_bounds.py
# tests -t itself). -t is wall-clock time: a window not read whole within it is a partial
# answer, UNKNOWN (exit 3), and at the default 10 s a loaded machine does not read it
# whole (a rsyslog-wrapped 7 MiB log, parsed line by line in Python, took 4 s of wall for
# 0.6 s of CPU at load 10, and make check's 3 workers add to that). 60 s is some hundred
# times the CPU the slowest of those reads takes.
COUNTING_TIME = ("-t", "60")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    work = tmp_path_factory.mktemp("probe")
    live = start_live_stack(work, run_args=("--year", "2011", "--records", str(work / "records.jsonl")))
    live.records_file = work / "records.jsonl"
    yield live
    live.stop()


def test_ok_reports_every_phase_quantile_in_seconds(stack):
    rc, status, perf = check_dpm("--prometheus", stack.prometheus.url, "--window", "2m",
                                 "-c", "total:p99=~:3600")
    assert rc == 0, status
    assert status.startswith("DPM OK")
    for _, phase in PHASES:
        for q in ("p50", "p95", "p99"):
            value, uom, _, _ = perf[f"{phase}_{q}"]
            assert value == "U" or (uom == "s" and float(value) >= 0), (phase, q, value, uom)
    assert float(perf["total_p95"][0]) > 0 and perf["total_p99"][3] == "~:3600"
    assert float(perf["requests"][0]) > 0
    assert 0 < float(perf["failed_rate"][0]) < 1  # the mixed scenario fails some requests


def test_probe_quantile_is_prometheus_histogram_quantile(stack):
    rc, status, perf = check_dpm("--prometheus", stack.prometheus.url, "--window", "2m")
    direct = stack.prometheus.value(
        "histogram_quantile(0.95, sum by (le) (rate(dpm_request_phase_seconds_bucket{phase=\"proc\"}[120s])))")
    assert rc == 0
    assert float(perf["proc_p95"][0]) == pytest.approx(direct, rel=1e-3)


def test_critical_when_a_phase_quantile_leaves_its_range(stack):
    rc, status, perf = check_dpm("--prometheus", stack.prometheus.url, "--window", "2m",
                                 "-w", "proc:p95=~:100", "-c", "proc:p95=~:0.001")
    assert rc == 2
    assert status.startswith("DPM CRITICAL") and "proc_p95" in status
    assert perf["proc_p95"][2:] == ("~:100", "~:0.001")


def test_warning_on_the_failure_rate(stack):
    rc, status, _ = check_dpm("--prometheus", stack.prometheus.url, "--window", "2m",
                              "-w", "failed_rate=0.0001", "-c", "failed_rate=0.9")
    assert rc == 1
    assert "failed_rate" in status


def test_every_range_left_is_in_the_text_the_worst_first(stack):
    rc, status, perf = check_dpm("--prometheus", stack.prometheus.url, "--window", "2m",
                                 "-w", "failed_rate=0.0001", "-c", "proc:p95=~:0.001",
                                 "-w", "total:p99=~:0.001", "-c", "total:p50=~:3600")
    assert rc == 2
    text = status.removeprefix("DPM CRITICAL - ")
    named = [part.split(" = ")[0] for part in text.split("; ")]
    assert named[0] == "proc_p95"  # the critical one first
    assert set(named[1:]) == {"failed_rate", "total_p99"}  # then both warnings
    assert "total_p50" not in status  # within its range: not an alert


def test_a_pipeline_whose_newest_event_is_too_old_is_critical(stack):
    # The stack replays a 2011 log: the newest event is years old.
    rc, status, perf = check_dpm("--prometheus", stack.prometheus.url, "--window", "2m",
                                 "--max-age", "10m")
    assert rc == 2, status
    assert status.startswith("DPM CRITICAL - stale source: newest event is"), status
    assert "None" not in status and "over --max-age 10m" in status
    ages = []  # read directly; a scrape the loaded machine failed leaves no instant value
    assert wait_for(lambda: ages.append(stack.prometheus.value(
        "min(dpmstream_event_lag_seconds + time() - timestamp(dpmstream_event_lag_seconds))"))
        or ages[-1] is not None, timeout=20, interval=0.2)
    age = ages[-1]
    assert float(perf["age"][0]) == pytest.approx(age, abs=120)
    assert float(perf["age"][0]) > 10 * 365 * 86400
    rc, status, _ = check_dpm("--prometheus", stack.prometheus.url, "--window", "2m",
                              "--max-age", "10m", "--max-age-state", "unknown")
    assert rc == 3 and "over --max-age 10m" in status


def test_request_and_call_counts_are_the_records_the_pipeline_wrote(stack):
    """Counts a user can check: the counters' samples at the window's edges, not
    increase()'s extrapolation (which gave 3,247 or 3,267 requests for 2,794 records).
    The window (1 h) holds the whole run: every record the pipeline wrote is in it."""
    records = [json.loads(line) for line in stack.records_file.read_text().splitlines()]
    requests = Counter(r["status"] for r in records if r["kind"] == "request")
    calls = sum(1 for r in records if r["kind"] == "call")
    assert sum(requests.values()) > 1000 and calls > 100
    rc, status, perf = check_dpm("--prometheus", stack.prometheus.url, "--window", "1h")
    assert rc == 0, status
    assert int(perf["requests"][0]) == sum(requests.values())
    assert int(perf["calls"][0]) == calls
    assert f"{sum(requests.values())} requests" in status and f"{calls} calls" in status
    failed = requests["failed"] / sum(requests.values())
    assert float(perf["failed_rate"][0]) == pytest.approx(failed, rel=1e-5)
    extrapolated = stack.prometheus.value("sum(increase(dpm_requests_total[1h]))")
    assert extrapolated != sum(requests.values())  # what the probe used to print


def test_a_hung_daemon_with_an_empty_window_is_critical_not_unknown(stack):
    """The stack's log stopped (a hung daemon); the pipeline runs on and is scraped, its
    counters still: the last seconds hold no request. --max-age is for this case."""
    answers = []  # until the stack's last counts have left the 5 s window
    assert wait_for(lambda: answers.append(check_dpm(
        "--prometheus", stack.prometheus.url, "--window", "5s", "--max-age", "10m"))
        or all(answers[-1][2].get(n, ("",))[0] == "0" for n in ("requests", "calls")),
        timeout=60, interval=1), answers[-1]
    rc, status, perf = answers[-1]
    assert rc == 2, status
    assert status.startswith("DPM CRITICAL - stale source: newest event is"), status
    assert "over --max-age 10m, and no DPM request or call in the last 5s" in status
    assert "None" not in status and perf["requests"][0] == "0"
    rc, status, _ = check_dpm("--prometheus", stack.prometheus.url, "--window", "5s")
    assert rc == 3 and "no DPM request or call in the last 5s" in status  # no --max-age


def test_a_max_age_the_pipeline_meets_is_ok(stack):
    rc, status, perf = check_dpm("--prometheus", stack.prometheus.url, "--window", "2m",
                                 "--max-age", "36500d")
    assert rc == 0, status
    assert perf["age"][1] == "s" and perf["age"][3] == "3153600000"


def test_a_pipeline_whose_log_stops_growing_ages_past_max_age(tmp_path):
    """A live `dpmstream run` on a log written up to now, then no more lines (a hung
    daemon): the age the probe reads keeps growing while the pipeline runs on."""
    now = datetime.now(timezone.utc)
    start = (now - timedelta(seconds=200)).strftime("%Y-%m-%d %H:%M:%S")
    live = start_live_stack(tmp_path, sim_args=("--scenario", "mixed", "--rate", "3",
                                                 "--duration", "200", "--start", start, "--tz", "UTC"),
                            run_args=("--year", str(now.year), "--tz", "UTC"))
    try:
        rc, status, perf = check_dpm("--prometheus", live.prometheus.url, "--window", "10m",
                                     "--max-age", "10m")
        assert rc == 0, status
        first = float(perf["age"][0])
        assert 0 < first < 600
        assert wait_for(lambda: float(check_dpm("--prometheus", live.prometheus.url,
                                                "--max-age", "10m")[2]["age"][0]) > first + 3,
                        timeout=30, interval=1)
        rc, status, _ = check_dpm("--prometheus", live.prometheus.url, "--window", "10m",
                                  "--max-age", f"{int(first)}s")
        assert rc == 2 and "newest event is" in status
    finally:
        live.stop()


def test_name_server_op_latency_threshold(stack):
    rc, status, perf = check_dpm("--prometheus", stack.prometheus.url, "--window", "2m",
                                 "-c", "ns:statg:p95=~:0.0000001")
    assert "ns_statg_p95" in perf
    assert rc == 2 and "ns_statg_p95" in status


def test_host_and_op_filters_narrow_the_data(stack):
    rc, _, perf_put = check_dpm("--prometheus", stack.prometheus.url, "--window", "2m", "--op", "put")
    rc2, _, perf_all = check_dpm("--prometheus", stack.prometheus.url, "--window", "2m")
    assert rc == rc2 == 0
    assert 0 < float(perf_put["requests"][0]) < float(perf_all["requests"][0])
    rc, status, _ = check_dpm("--prometheus", stack.prometheus.url, "--host", "no-such-host")
    assert rc == 3 and "no dpm_requests_total" in status


def test_unknown_when_prometheus_is_down():
    rc, status, _ = check_dpm("--prometheus", f"http://127.0.0.1:{free_port()}")
    assert rc == 3
    assert status.startswith("DPM UNKNOWN") and "cannot reach Prometheus" in status


def test_timeout_is_honoured_against_a_server_that_never_answers():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(5)  # accepts connections, never answers a byte
        port = server.getsockname()[1]
        started = time.monotonic()
        # -t counts from the process's start, which under load takes 1-2 s itself: at
        # -t 2 no time was left to query the server (load 15-17: "no time left to query
        # Prometheus", the server never asked, and 2.4-3.1 s in all).
        rc, status, _ = check_dpm("--prometheus", f"http://127.0.0.1:{port}", "-t", "4")
        took = time.monotonic() - started
    assert rc == 3 and status.startswith("DPM UNKNOWN - timed out waiting for Prometheus"), status
    assert took < 4.9


@pytest.mark.parametrize("bad", ["proc:p95", "nosuch:p95=1", "proc:q95=1", "proc:p95=5:1", "failed=0.1"])
def test_bad_threshold_is_unknown_with_the_reason(bad):
    rc, status, _ = check_dpm("--prometheus", "http://127.0.0.1:9", "-w", bad)
    assert rc == 3
    assert "UNKNOWN" in status


def test_counted_increase_counts_each_rise_and_after_a_restart_what_follows():
    def c(*values, created=1.0):
        return [(v, created) for v in values]
    assert counted_increase((10, 1.0), c(10, 12, 15)) == 5
    assert counted_increase((0, None), c(3, 3, 4)) == 4  # born in the window: from 0
    assert counted_increase((10, 1.0), c(12, 2, 5)) == 2 + 2 + 3  # dropped to 2: restarted
    assert counted_increase((10, 1.0), c(4)) == 4  # restarted before the window's first sample
    # a new process counted past the old value before its first scrape: no drop, a new
    # created time
    assert counted_increase((10, 1.0), c(12) + c(30, 31, created=2.0)) == 2 + 30 + 1
    assert counted_increase((10, None), [(12, None), (15, None)]) == 5  # no _created exported
    assert counted_increase((10, 1.0), []) == 0


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.services
def test_counts_run_across_a_pipeline_restart_in_the_window(tmp_path, prometheus_factory):
    """`dpmstream run` stopped and started again on the same port within the window: its
    counters drop to zero; the probe counts what each process wrote, from the raw
    samples (increase() would extrapolate, a plain difference of the edges would be
    short by the first process' counts)."""
    prefix = simulate(tmp_path / "sim" / "head", "--scenario", "mixed", "--rate", "5",
                      "--duration", "300")
    lines = Path(f"{prefix}.log").read_text().splitlines(keepends=True)
    log = tmp_path / "live" / "dpm.log"
    log.parent.mkdir()
    log.write_text("".join(lines[:len(lines) // 2]))
    port = free_port()
    prom = prometheus_factory([f"127.0.0.1:{port}"])
    metrics = f"http://127.0.0.1:{port}/metrics"

    def run(records: Path, *extra: str) -> subprocess.Popen:
        return subprocess.Popen([DPMSTREAM, "run", "--metrics-port", str(port), "--host", HOST,
                                 "--year", "2011", "--records", str(records), *extra, str(log)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def scraped(count: int) -> bool:  # Prometheus holds this process' final count
        return prom.value("sum(dpm_requests_total)") == count

    first_records, second_records = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first = run(first_records)
    try:
        assert wait_for(lambda: len(_records(first_records)) > 100 and scraped(
            sum(r["kind"] == "request" for r in _records(first_records))), timeout=90, interval=1)
    finally:
        first.terminate()
        first.wait(timeout=20)
    second = run(second_records, "--from-end")  # the same target, counting from zero
    try:
        assert wait_for(lambda: _exported_ready(metrics), timeout=60, interval=0.5)
        with open(log, "a") as fh:
            fh.writelines(lines[len(lines) // 2:])
        assert wait_for(lambda: len(_records(second_records)) > 100 and scraped(
            sum(r["kind"] == "request" for r in _records(second_records))), timeout=90, interval=1)
        # it did restart: a new created time (often without a drop: the new process
        # counted past the old value before its first scrape)
        assert prom.value("max(changes(dpm_requests_created[1h]))") >= 1
        written = [r for r in _records(first_records) + _records(second_records)
                   if r["kind"] == "request"]
        rc, status, perf = check_dpm("--prometheus", prom.url, "--window", "1h", "-v")
        assert rc == 0, status
        assert int(perf["requests"][0]) == len(written)
        assert "requests and calls: per series the last sample in the window less" in status
        # -v lists the queries: the restarted target was counted from its raw samples
        assert re.search(r'query: dpm_requests_total\{job="[^"]+",instance="[^"]+"\}\[3600s\]',
                         status), status
    finally:
        second.terminate()
        second.wait(timeout=20)


def _exported_ready(metrics_url: str) -> bool:
    try:
        return b"dpmstream_lines_total" in urllib.request.urlopen(metrics_url, timeout=2).read()
    except OSError:
        return False
