"""check_dpm is bounded whatever its input: -t is never exceeded (a big log, NULs,
/dev/zero, a FIFO, a Prometheus that never answers, trickles, redirects or sends a
huge body), memory stays bounded, and every give-up is UNKNOWN with the reason.

Timing bounds are generous (the machine is loaded): -t N must be answered within
N + 1.5 s, counted from the start of the process."""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.helpers import dpmstream_in_process
from tests.metrics_stack import simulate
from tests.probes.test_sources_prometheus import CHECK_DPM, PERF

TZ = "Europe/Zurich"
SLACK_S = 1.5
MEMORY_LIMIT = 1 << 30  # address space the probe gets: far below any file tried here


def _limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def timed_check(*args: str, t: int, env: dict | None = None):
    """(exit code, status line, perfdata, seconds taken) of check_dpm -t t, run with its
    address space limited, so that reading a huge input whole would fail."""
    started = time.monotonic()
    done = subprocess.run([CHECK_DPM, *args, "-t", str(t)], capture_output=True, text=True,
                          timeout=t + 30, preexec_fn=_limit_memory,
                          env={**os.environ, **(env or {})})
    took = time.monotonic() - started
    status, _, perf = done.stdout.partition("|")
    return done.returncode, status.strip(), {m.group(1): m.group(2) for m in PERF.finditer(perf)}, took


# -- files ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_log(tmp_path_factory) -> Path:
    """A simulated head node's log of about 110 MB over 67 minutes."""
    prefix = simulate(tmp_path_factory.mktemp("big") / "big", "--scenario", "mixed",
                      "--rate", "10", "--duration", "4000", "--tz", TZ)
    log = Path(f"{prefix}.log")
    assert log.stat().st_size > 100 << 20
    return log


@pytest.mark.slow   # the point is the log's size (its fixture simulates 110 MB)
def test_a_110_mb_log_is_read_from_its_tail_within_t(big_log):
    rc, status, perf, took = timed_check("--log", str(big_log), "--tz", TZ, "--window", "15m",
                                         "-v", t=60)
    assert rc == 0, status
    assert int(perf["requests"]) > 1000
    assert took < 60
    # 15m + 30m lookback + 2m margin of a 67-minute log: the first quarter is never read
    offset = int(re.search(r"from byte (\d+)", status).group(1))  # -v's second line
    assert 0.2 * big_log.stat().st_size < offset < 0.4 * big_log.stat().st_size


@pytest.mark.slow   # the 110 MB log again
@pytest.mark.parametrize("threshold", [(), ("-c", "total:p95=~:0.001")])
def test_a_log_whose_whole_span_is_in_the_window_is_answered_within_t_saying_what_was_read(
        big_log, threshold):
    """A whole log inside window and lookback (once UNKNOWN, timed out, for a 1.1 GB log):
    the answer comes within -t, measured on the lines read from the end, and says so, in
    the status line and the perfdata. It is UNKNOWN, with the figures and the thresholds
    crossed in the part read: the requests that fit whole in the newest lines are the
    short ones, a biased sample, whose state would not be the window's.
    The reference engine reads this log in about 7 s of CPU on the 2-core CI machine (the
    compiled one in about 1 s): "too big to read in time" holds on machines 3x faster."""
    size = big_log.stat().st_size
    rc, status, perf, took = timed_check("--log", str(big_log), "--tz", TZ, "--window", "2h",
                                         "--lookback", "100d", "-v", *threshold, t=3,
                                         env={"DPMSTREAM_ENGINE": "python"})
    assert took < 3 + SLACK_S
    assert rc == 3 and status.startswith("DPM UNKNOWN - the window not read whole within -t, "
                                         "no state told; measured on the part read: total "
                                         "p95 "), status
    crossed = re.search(r"; total_p95 = [\d.]+s \(outside range ~:0.001\) \(partial: ", status)
    assert bool(crossed) == bool(threshold), status
    assert int(perf["requests"]) > 100
    note = re.search(r"\(partial: read only the last ([\d.]+)m of the log, (\d+) lines, "
                     r"([\d.]+) MiB of its ([\d.]+) MiB, within -t\)", status)
    assert note, status
    minutes, lines, read_mib, size_mib = map(float, note.groups())
    assert size_mib == round(size / (1 << 20), 1)
    # what it says it read is what it read: the -v line's first byte and lines, the perfdata
    offset = int(re.search(r"from byte (\d+)", status).group(1))
    assert abs((size - offset) / (1 << 20) - read_mib) <= 0.1
    assert 0 < read_mib < size_mib and 0 < minutes < 67  # the log spans 67 minutes
    assert f"read {int(lines)} lines of " in status
    assert (perf["partial"], perf["read_lines"]) == ("1", str(int(lines)))
    assert abs(float(perf["read_span"]) / 60 - minutes) < 0.06


@pytest.fixture(scope="module")
def big_dome_site(tmp_path_factory) -> list[Path]:
    """A simulated DOME site's logs, a head and three disk nodes, of about 2 M lines over
    an hour (some 340 MB; the simulator writes it in about 80 s of CPU)."""
    prefix = simulate(tmp_path_factory.mktemp("big-dome") / "site", "--dome", "--rate", "23",
                      "--duration", "3600")
    logs = sorted(prefix.parent.glob(f"{prefix.name}.dpm*.log"))
    assert len(logs) == 4
    return logs


@pytest.mark.slow   # the point is the logs' size (their fixture simulates 2 M lines)
@pytest.mark.parametrize("engine", ["python", "compiled"])
def test_a_dome_sites_logs_too_big_for_t_are_answered_within_t_saying_what_was_read(
        big_dome_site, engine):
    """check_dpm --dome with every node's log, the whole hour inside window and lookback,
    and -t 3 (as the legacy log's test: the start-up of the process takes its part of
    -t on a loaded machine): no engine reads 2 M DOME lines in 3 s (the compiled one,
    at some 60 k lines/s, would take half a minute), so the answer is on the newest
    lines read, UNKNOWN, saying what it read in the status line, the perfdata and -v."""
    lines_total = sum(1 for log in big_dome_site for _ in open(log, "rb"))
    assert lines_total > 2_000_000
    size = sum(log.stat().st_size for log in big_dome_site)
    logs = [arg for log in big_dome_site for arg in ("--log", str(log))]
    rc, status, perf, took = timed_check("--dome", *logs, "--tz", TZ, "--last-line-year", "2017",
                                         "--window", "2h", "--lookback", "100d", "-v", t=3,
                                         env={"DPMSTREAM_ENGINE": engine})
    assert took < 3 + SLACK_S
    assert rc == 3 and status.startswith("DOME UNKNOWN - the window not read whole within -t, "
                                         "no state told; measured on the part read: "), status
    note = re.search(r"\(partial: read only (?:the last ([\d.]+)m|part) of the 4 logs"
                     r"(?: up to the lines read when time ran out)?, (\d+) lines, "
                     r"([\d.]+) MiB of their ([\d.]+) MiB, within -t\)", status)
    assert note, status
    lines, read_mib, size_mib = int(note.group(2)), float(note.group(3)), float(note.group(4))
    assert size_mib == round(size / (1 << 20), 1) and 0 < read_mib < size_mib
    assert 0 < lines < lines_total
    if note.group(1) is not None:  # the hour's end was reached: its last minutes read
        assert 0 < float(note.group(1)) < 60
        assert abs(float(perf["read_span"]) / 60 - float(note.group(1))) < 0.06
    # what it says it read is what it read: -v's lines of each log, the perfdata
    per_log = re.findall(r"read (\d+) lines of (\S+) from byte \d+ \(of \d+\); .*?; "
                         rf"{engine} DOME engine", status)
    assert sorted(path for _, path in per_log) == [str(log) for log in big_dome_site]
    assert sum(int(n) for n, _ in per_log) == lines
    assert (perf["partial"], perf["read_lines"]) == ("1", str(lines))


def test_a_gigabyte_of_nuls_is_unknown_in_time_and_memory(tmp_path):
    nuls = tmp_path / "nuls.log"
    with open(nuls, "wb") as fh:
        fh.truncate(2 << 30)  # sparse: 2 GiB of NUL bytes, not one newline
    rc, status, _, took = timed_check("--log", str(nuls), t=5)
    assert rc == 3, status
    assert "UNKNOWN" in status and ("no DPM log line" in status or "timed out" in status)
    assert "MemoryError" not in status
    assert took < 5 + SLACK_S


def test_nul_lines_are_counted_as_bad_lines_not_parsed(tmp_path):
    log = tmp_path / "log"
    log.write_bytes(b"\0" * 1000 + b"\n" + b"08/12 14:31:43.101 12345 dpm_serv: started\n")
    rc, status, _, took = timed_check("--log", str(log), "--tz", TZ, t=5)
    assert rc == 3 and "no DPM request or call" in status
    assert took < 5 + SLACK_S


def test_dev_zero_is_refused_at_once():
    rc, status, _, took = timed_check("--log", "/dev/zero", t=3)
    assert rc == 3 and "/dev/zero is a character device, not a regular file" in status
    assert took < 3 + SLACK_S


def test_a_fifo_that_never_writes_is_refused_at_once(tmp_path):
    fifo = tmp_path / "log"
    os.mkfifo(fifo)
    rc, status, _, took = timed_check("--log", str(fifo), t=3)
    assert rc == 3 and "is a FIFO, not a regular file" in status
    assert took < 3 + SLACK_S


def test_lines_over_the_bound_are_skipped_and_counted_with_the_same_result(tmp_path):
    prefix = tmp_path / "long"   # simulated in this process: the probe's runs are what is bounded
    made = dpmstream_in_process("simulate", "--out", str(prefix), "--quiet", "--scenario", "mixed",
                                "--rate", "3", "--duration", "600", "--tz", TZ, text=True)
    assert made.returncode == 0, made.stderr
    log = Path(f"{prefix}.log")
    lines = log.read_bytes().splitlines(keepends=True)
    polluted = tmp_path / "polluted.log"
    middle = len(lines) // 2
    polluted.write_bytes(b"".join(lines[:middle]) + b"A" * 200_000 + b"\n"
                         + b"".join(lines[middle:]) + b"\0" * 100_000 + b"\n")
    os.utime(polluted, (log.stat().st_atime, log.stat().st_mtime))
    rc, status, perf, _ = timed_check("--log", str(log), "--tz", TZ, "--window", "5m", t=20)
    rc2, status2, perf2, _ = timed_check("--log", str(polluted), "--tz", TZ, "--window", "5m", t=20)
    assert rc == rc2 == 0, (status, status2)
    assert perf == perf2
    assert "(2 lines over 64 KiB skipped)" in status2 and "skipped" not in status
    rc, status, _, _ = timed_check("--log", str(polluted), "--tz", TZ, "--window", "5m",
                                   "-c", "proc:p95=~:0.001", t=20)
    assert rc == 2 and status.endswith("(2 lines over 64 KiB skipped)")  # said in alerts too


# -- Prometheus over HTTP -----------------------------------------------------------------


class _Server:
    """A local HTTP server whose GET handler is given: redirects, huge or slow bodies."""

    def __init__(self, handle):
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                try:
                    handle(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the probe hung up, as it should

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(request):
    servers = []

    def start(handle):
        servers.append(_Server(handle))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def test_a_redirect_is_refused_and_said(server):
    hits = []

    def redirect(h):
        hits.append(h.path)
        h.send_response(302)
        h.send_header("Location", "http://127.0.0.1:9/elsewhere")
        h.send_header("Content-Length", "0")
        h.end_headers()

    srv = server(redirect)
    rc, status, _, took = timed_check("--prometheus", srv.url, t=5)
    assert rc == 3 and "HTTP 302" in status and "redirects are not followed" in status
    assert "http://127.0.0.1:9/elsewhere" in status
    assert len(hits) == 1


def test_a_huge_body_is_refused_before_it_is_read_whole(server):
    sent = []

    def huge(h):  # 1 GiB announced without Content-Length: only reading tells the size
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Connection", "close")
        h.end_headers()
        chunk = b" " * (1 << 20)
        for _ in range(1024):
            h.wfile.write(chunk)
            sent.append(len(chunk))

    srv = server(huge)
    rc, status, _, took = timed_check("--prometheus", srv.url, t=10)
    assert rc == 3 and "sent more than 4 MiB" in status, status
    assert took < 10 + SLACK_S
    assert sum(sent) < 512 << 20  # it hung up long before the end


def test_a_huge_content_length_is_refused_without_reading(server):
    def announced(h):
        h.send_response(200)
        h.send_header("Content-Length", str(3 << 30))
        h.end_headers()
        h.wfile.write(b"{")

    srv = server(announced)
    rc, status, _, _ = timed_check("--prometheus", srv.url, t=5)
    assert rc == 3 and "sent more than 4 MiB (Content-Length 3221225472)" in status


def test_a_trickling_answer_gives_up_within_t(server):
    def trickle(h):
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Connection", "close")
        h.end_headers()
        for _ in range(600):
            h.wfile.write(b" ")
            h.wfile.flush()
            time.sleep(0.1)

    srv = server(trickle)
    rc, status, _, took = timed_check("--prometheus", srv.url, t=3)
    assert rc == 3 and "timed out" in status, status
    assert took < 3 + SLACK_S


def test_trickled_headers_give_up_within_t(server):
    def slow_headers(h):
        h.wfile.write(b"HTTP/1.1 200 OK\r\n")
        for i in range(600):
            h.wfile.write(b"X-Slow-%d: 1\r\n" % i)
            h.wfile.flush()
            time.sleep(0.1)

    srv = server(slow_headers)
    rc, status, _, took = timed_check("--prometheus", srv.url, t=3)
    assert rc == 3 and "timed out" in status, status
    assert took < 3 + SLACK_S


def _answering(result: list) -> callable:
    """A handler answering every query with this vector, as Prometheus' API frames it."""
    def handle(h):
        body = json.dumps({"status": "success",
                           "data": {"resultType": "vector", "result": result}}).encode()
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)
    return handle


@pytest.mark.parametrize("sample, named", [
    ({"metric": {}, "value": [1795600000, "many"]}, "sent a sample that 'many' is not a number"),
    ({"metric": {}, "value": [1795600000, None]}, "sent a sample that None is not a number"),
    ({"metric": {}}, "sent a sample that has no 'value'"),
    ({"value": [1795600000, "1"]}, "sent a sample that has no 'metric'"),
    ({"metric": {}, "value": "1"}, "sent a sample that is malformed"),
])
def test_a_sample_that_is_no_number_is_one_unknown_line_naming_it(server, sample, named):
    srv = server(_answering([sample]))
    for extra in ([], ["--max-age", "10m"]):  # the counts' query, the age's query
        rc, status, _, _ = timed_check("--prometheus", srv.url, *extra, t=5)
        assert rc == 3 and status.startswith(f"DPM UNKNOWN - Prometheus at {srv.url} {named}: "), status
        assert "\n" not in status and "Error" not in status


def test_no_lag_sample_and_an_empty_window_is_the_max_age_state_not_no_data(server):
    """A pipeline no longer scraped: series in the window, no event-lag sample for 5
    minutes, nothing counted. Its age cannot be told: stale, not "no data"."""
    def answer(h):
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(h.path).query)["query"][0]
        series = [{"metric": {}, "value": [1795600000, "6"]}] if query.startswith("count(") else []
        _answering(series)(h)

    srv = server(answer)
    rc, status, _, _ = timed_check("--prometheus", srv.url, "--window", "5m", "--max-age", "10m",
                                   t=5)
    assert rc == 2, status
    assert status.startswith("DPM CRITICAL - no dpmstream_event_lag_seconds sample in the last "
                             "5 minutes to tell the age of the newest event, and no DPM request "
                             "or call in the last 5m"), status
    rc, status, _, _ = timed_check("--prometheus", srv.url, "--window", "5m", t=5)
    assert rc == 3 and "no DPM request or call in the last 5m" in status  # no --max-age
