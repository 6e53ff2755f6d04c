"""`dpmstream run` as a user runs it: a real subprocess following log files that are being
written, metrics scraped over HTTP from 127.0.0.1, the records file read back."""

from __future__ import annotations

import csv
import fcntl
import json
import os
import queue
import re
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
import uuid
from urllib.request import urlopen

import pytest
from prometheus_client.parser import text_string_to_metric_families

from dpmstream.parsers.lines import TOO_LONG
from dpmstream.parsers.records import CALL_COLUMNS, REQUEST_COLUMNS, ms_to_text, to_json_dict
from dpmstream.parsers.pipeline import Pipeline

from tests.helpers import dpmstream_in_process

DN = "/DC=ch/DC=cern/OU=Organic Units/OU=Users/CN=Grid User 001"
COMMON = ["--host", "head01", "--tz", "UTC", "--year", "2011", "--interval", "0.05"]


# -- log lines in the reference format (docs: dpm-log-format.md, sections 2 and 3) -----

def _stamp(ms: int) -> str:
    h, rem = divmod(ms, 3_600_000)
    m, rem = divmod(rem, 60_000)
    s, frac = divmod(rem, 1000)
    return f"08/12 {14 + h:02d}:{m:02d}:{s:02d}.{frac:03d}"


def token(i: int) -> str:
    return str(uuid.UUID(int=i + 1))


def put_lines(i: int, t: int, *, putdone: bool = True) -> list[str]:
    """The put of section 3, request number i, starting t ms after 14:00."""
    tok, surl = token(i), f"srm://dpmhead01.cern.ch/dpm/cern.ch/home/dteam/perf/f{i:04d}"
    fast, slow = 1 + i % 20, 30 + i % 10

    def line(dt, th, text):
        return f"{_stamp(t + dt)} 12345,{th} {text}"

    status_call = [
        f"dpm_srv_getstatus_putreq: DP092 - getstatus_putreq request by {DN} (1001,1001) from lxfsra01.cern.ch",
        f"dpm_srv_getstatus_putreq: DP098 - getstatus_putreq {tok} 1",
    ]
    out = [
        line(0, fast, "dpm_serv: [137.138.40.11] (lxfsra01.cern.ch): request accepted"),
        line(17, fast, f"dpm_srv_put: DP092 - put request by {DN} (1001,1001) from lxfsra01.cern.ch"),
        line(17, fast, f"dpm_srv_put: DP098 - put 1 {tok}"),
        line(17, fast, f"dpm_srv_put: DP098 - put 0 {surl}"),
        line(20, fast, "dpm_srv_put: returns 0"),
        line(49, slow, f"dpm_srv_proc_put: processing put request {tok}"),
        line(559, fast, status_call[0]),
        line(559, fast, status_call[1]),
        line(560, fast, "dpm_srv_getstatus_putreq: request status DPM_ACTIVE"),
        line(560, fast, "dpm_srv_getstatus_putreq: returns 0"),
        line(1279, slow, f"dpm_srv_proc_put: selected disk01.cern.ch:/srv/dpm/01 for {surl}"),
        line(1289, slow, "dpm_srv_proc_put: returns 0"),
        line(1500, fast, status_call[0]),
        line(1500, fast, status_call[1]),
        line(1501, fast, "dpm_srv_getstatus_putreq: request status DPM_SUCCESS"),
        line(1502, fast, "dpm_srv_getstatus_putreq: returns 0"),
    ]
    if putdone:
        out += [
            line(1919, fast, f"dpm_srv_putdone: DP092 - putdone request by {DN} (1001,1001) from lxfsra01.cern.ch"),
            line(1919, fast, f"dpm_srv_putdone: DP098 - putdone {tok} 1"),
            line(1919, fast, f"dpm_srv_putdone: DP098 - putdone 0 {surl}"),
            line(1930, fast, "dpm_srv_putdone: returns 0"),
        ]
    return out


def statg_lines(i: int, t: int, rc: int = 0) -> list[str]:
    """A name-server statg call of section 2."""
    return [
        f"{_stamp(t)} 20713,{i % 8} Cns_srv_statg: NS092 - statg request by {DN} (574,117,104) from wn{i:02d}.example.org",
        f"{_stamp(t)} 20713,{i % 8} Cns_srv_statg: NS098 - statg /dpm/cern.ch/home/dteam/f{i:04d}",
        f"{_stamp(t + 2)} 20713,{i % 8} Cns_srv_statg: returns {rc}",
    ]


def puts(first: int, n: int, **kw) -> list[str]:
    return [x for i in range(first, first + n) for x in put_lines(i, i * 3000, **kw)]


def append(path, lines: list[str]) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("".join(x + "\n" for x in lines))


# -- the process under test -------------------------------------------------------------

class RunProcess:
    def __init__(self, args: list[str]):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dpmstream", "run", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.stderr_lines: queue.Queue = queue.Queue()
        self.stderr_seen: list[str] = []
        self.stdout_seen: list[str] = []
        self._pumps = [threading.Thread(target=self._pump, daemon=True),
                       threading.Thread(target=self._pump_stdout, daemon=True)]
        for t in self._pumps:
            t.start()
        self.url = self._wait_for_url()

    def _pump(self) -> None:
        for line in self.proc.stderr:
            self.stderr_lines.put(line)

    def _pump_stdout(self) -> None:
        for line in self.proc.stdout:
            self.stdout_seen.append(line)

    def _wait_for_url(self, timeout: float = 20) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.stderr_lines.get(timeout=0.2)
            except queue.Empty:
                assert self.proc.poll() is None, f"dpmstream run exited: {self.stderr_seen}"
                continue
            self.stderr_seen.append(line)
            m = re.search(r"metrics on (http://127\.0\.0\.1:\d+/metrics)", line)
            if m:
                return m.group(1)
        raise AssertionError(f"no metrics URL on stderr: {self.stderr_seen}")

    def samples(self) -> dict:
        with urlopen(self.url, timeout=5) as resp:
            text = resp.read().decode()
        out = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
        return out

    def total(self, name: str, **labels) -> float:
        """Sum of a metric's samples whose labels include `labels`."""
        want = set(labels.items())
        return sum(v for (n, lab), v in self.samples().items() if n == name and want <= set(lab))

    def wait_for(self, name: str, expected: float, timeout: float = 30, **labels) -> None:
        deadline = time.monotonic() + timeout
        got = None
        while time.monotonic() < deadline:
            got = self.total(name, **labels)
            if got == expected:
                return
            assert self.proc.poll() is None, "dpmstream run exited early"
            time.sleep(0.05)
        raise AssertionError(f"{name}{labels}: {got}, expected {expected}")

    def wait_until_open(self, path, timeout: float = 20) -> None:
        """Until the process holds a descriptor on `path` (Linux /proc)."""
        fd_dir = f"/proc/{self.proc.pid}/fd"
        target = os.path.realpath(path)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for fd in os.listdir(fd_dir):
                try:
                    if os.readlink(os.path.join(fd_dir, fd)) == target:
                        return
                except OSError:
                    pass
            time.sleep(0.02)
        raise AssertionError(f"{path} never opened")

    def stop(self, sig=signal.SIGTERM, timeout: float = 20) -> tuple[int, str, str]:
        self.proc.send_signal(sig)
        self.proc.wait(timeout=timeout)
        for t in self._pumps:            # both pipes read to their end
            t.join(timeout=timeout)
        while not self.stderr_lines.empty():
            self.stderr_seen.append(self.stderr_lines.get())
        return self.proc.returncode, "".join(self.stdout_seen), "".join(self.stderr_seen)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def running():
    started: list[RunProcess] = []

    def start(*args):
        p = RunProcess([str(a) for a in args])
        started.append(p)
        return p

    yield start
    for p in started:
        p.kill()


def read_records(path) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def replayed(*files: list[str]) -> list[dict]:
    """What the core makes of the same lines in-process: the independent expectation (fed
    as replay feeds them, Source.feed_lines: the same records as line by line, a third
    cheaper on a 240,000-line backlog: tests/parsers/test_pipeline.py
    test_feed_lines_gives_the_records_and_counts_of_feeding_line_by_line)."""
    records: list[dict] = []
    pipeline = Pipeline(on_record=records.append)
    for n, lines in enumerate(files):
        src = pipeline.source(f"f{n}", host="head01", tz="UTC", year=2011)
        src.feed_lines(lines)
    pipeline.finish()
    return [to_json_dict(r) for r in records]


def canonical(records: list[dict]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in records)


# -- tests ------------------------------------------------------------------------------

def test_live_run_counts_appended_lines_and_serves_them_over_http(tmp_path, running):
    dpm, dpns, rec = tmp_path / "dpm.log", tmp_path / "dpns.log", tmp_path / "records.jsonl"
    first = puts(0, 3)
    append(dpm, first)
    run = running("--metrics-port", 0, "--records", rec, *COMMON, dpm, dpns)
    run.wait_for("dpmstream_lines_total", len(first), daemon="dpm", result="parsed")
    # Published with the lines that made them: while the second file has given no line,
    # the requests wait for it (it may be the name server's, with calls to link).
    assert run.total("dpm_requests_total") == 0

    # The DPNS log appears after the start; both files grow while it runs.
    later = puts(3, 4)
    calls = [x for i in range(5) for x in statg_lines(i, 20_000 + i * 10, rc=2 if i == 4 else 0)]
    # A ping 70 s after the last put moves event time on: with a name-server log read,
    # request records wait until their host's event time is 5 s past them in both logs
    # (linking), or the quiet one is over 60 s behind (record-rules.md, "Event time").
    tail = [f"{_stamp(90_000)} 12345,5 dpm_srv_ping: DP092 - ping request by {DN} (1001,1001) from lxfsra01.cern.ch",
            f"{_stamp(90_001)} 12345,5 dpm_srv_ping: returns 0"]
    later += tail
    append(dpm, later[:30])
    append(dpns, calls)
    append(dpm, later[30:])
    run.wait_for("dpmstream_lines_total", len(first) + len(later), daemon="dpm", result="parsed")
    run.wait_for("dpmstream_lines_total", len(calls), daemon="dpns", result="parsed")
    run.wait_for("dpm_requests_total", 7, status="success")
    run.wait_for("dpm_call_seconds_count", 4, daemon="dpns", op="statg", result="ok")
    run.wait_for("dpm_call_seconds_count", 1, daemon="dpns", op="statg", result="error")
    assert run.total("dpm_request_phase_seconds_count", phase="proc") == 7
    assert run.total("dpm_request_phase_seconds_sum", phase="proc") == pytest.approx(7 * 1.240)
    assert run.total("dpm_request_polls_sum", op="put") == 7 * 2
    assert run.total("dpmstream_lines_total", result="unmatched") == 0
    assert run.total("dpmstream_lines_total", result="malformed") == 0

    rc, _, err = run.stop()
    assert rc == 0, err
    got = read_records(rec)
    # What a replay of the two files makes, name-server counts included: the requests
    # that ended before the DPNS log appeared waited for it (0 calls each: its statg
    # calls are the worker nodes', not the head node's).
    assert canonical(got) == canonical(replayed(first + later, calls))
    ns = {r["token"]: (r["ns_calls"], r["ns_s"]) for r in got if r["kind"] == "request"}
    assert ns == {token(i): (0, 0.0) for i in range(7)}


def test_real_name_server_lines_followed_live_give_the_records_of_a_replay(tmp_path, running):
    real = os.path.join(os.path.dirname(__file__), "../data", "real", "lfc", "lfc-cp.log")
    with open(real, encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    log, rec = tmp_path / "dpns.log", tmp_path / "records.jsonl"
    run = running("--metrics-port", 0, "--records", rec, *COMMON, log)
    for chunk in (lines[:4], lines[4:7], lines[7:]):
        append(log, chunk)
    run.wait_for("dpmstream_lines_total", len(lines), daemon="dpns", result="parsed")
    rc, _, err = run.stop()
    assert rc == 0, err
    got = read_records(rec)
    assert got and all(r["kind"] == "call" for r in got)
    assert canonical(got) == canonical(replayed(lines))


def test_rotation_by_rename_during_a_run_loses_no_line(tmp_path, running):
    log, rec = tmp_path / "dpm.log", tmp_path / "records.jsonl"
    lines = puts(0, 6)
    a, b, c, d = lines[:25], lines[25:50], lines[50:70], lines[70:]
    append(log, a)
    run = running("--metrics-port", 0, "--records", rec, *COMMON, log)
    run.wait_for("dpmstream_lines_total", len(a), result="parsed")
    append(log, b)                               # not yet read when the file is renamed
    os.rename(log, tmp_path / "dpm.log.1")
    append(tmp_path / "dpm.log.1", c)            # a late write into the renamed file
    append(log, d)                               # the new file at the path
    run.wait_for("dpmstream_lines_total", len(lines), result="parsed")
    run.wait_for("dpm_requests_total", 6, status="success")
    rc, _, err = run.stop()
    assert rc == 0, err
    assert "rotated" in err
    assert canonical(read_records(rec)) == canonical(replayed(lines))


def test_copytruncate_during_a_run_reads_the_new_lines_from_the_start(tmp_path, running):
    log, rec = tmp_path / "dpm.log", tmp_path / "records.jsonl"
    lines = puts(0, 4)
    append(log, lines[:40])
    run = running("--metrics-port", 0, "--records", rec, *COMMON, log)
    run.wait_for("dpmstream_lines_total", 40, result="parsed")
    with open(log, "r+b") as fh:
        fh.truncate(0)
    append(log, lines[40:])
    run.wait_for("dpmstream_lines_total", len(lines), result="parsed")
    run.wait_for("dpm_requests_total", 4, status="success")
    rc, _, err = run.stop()
    assert rc == 0 and "truncated" in err, err


def test_a_live_stop_does_not_emit_open_requests_as_incomplete(tmp_path, running):
    log, rec = tmp_path / "dpm.log", tmp_path / "records.jsonl"
    lines = puts(0, 2) + put_lines(2, 6000, putdone=False)
    append(log, lines)
    run = running("--metrics-port", 0, "--records", rec, *COMMON, log)
    run.wait_for("dpm_requests_total", 2, status="success")
    run.wait_for("dpm_requests_in_flight", 1)
    rc, _, err = run.stop(signal.SIGINT)
    assert rc == 0, err
    assert "1 open request(s) not emitted" in err
    assert [r["status"] for r in read_records(rec)] == ["success", "success"]


def test_flush_on_exit_emits_open_requests_as_incomplete(tmp_path, running):
    log, rec = tmp_path / "dpm.log", tmp_path / "records.jsonl"
    append(log, puts(0, 1) + put_lines(1, 3000, putdone=False))
    run = running("--metrics-port", 0, "--records", rec, "--flush-on-exit", *COMMON, log)
    run.wait_for("dpm_requests_total", 1, status="success")
    rc, _, err = run.stop()
    assert rc == 0, err
    statuses = {r["token"]: r["status"] for r in read_records(rec)}
    assert statuses == {token(0): "success", token(1): "incomplete"}


def test_from_end_reports_only_lines_written_after_the_start(tmp_path, running):
    log, rec = tmp_path / "dpm.log", tmp_path / "records.jsonl"
    append(log, puts(0, 2))
    run = running("--metrics-port", 0, "--records", rec, "--from-end", *COMMON, log)
    new = puts(5, 1)
    # Until the process has opened the file, an append could still be taken as old.
    run.wait_until_open(log)
    append(log, new)
    run.wait_for("dpmstream_lines_total", len(new), result="parsed")
    run.wait_for("dpm_requests_total", 1, status="success")
    rc, _, err = run.stop()
    assert rc == 0, err
    assert [r["token"] for r in read_records(rec)] == [token(5)]


def test_once_reads_to_the_end_prints_the_summary_and_the_metrics_url(tmp_path):
    dpm, dpns, rec = tmp_path / "dpm.log", tmp_path / "dpns.log", tmp_path / "records.jsonl"
    requests = puts(0, 5) + put_lines(5, 15_000, putdone=False)
    calls = [x for i in range(3) for x in statg_lines(i, 30_000 + i)]
    append(dpm, requests)
    # An unterminated last line still counts: the file will not grow any more.
    append(dpns, calls[:-1])
    with open(dpns, "a") as fh:
        fh.write(calls[-1])
    done = _run_here("--once", "--metrics-port", "0", "--records", rec, *COMMON, dpm, dpns)
    assert done.returncode == 0, done.stderr
    assert re.search(r"^Metrics: http://127\.0\.0\.1:\d+/metrics", done.stdout, re.M)
    assert re.search(r"^\s+put\s+6\s+5\s+0\s+0\s+1\s*$", done.stdout, re.M), done.stdout
    assert "parsed %d, unmatched 0, malformed 0" % (len(requests) + len(calls)) in done.stdout
    got = read_records(rec)
    assert canonical(got) == canonical(replayed(requests, calls))
    assert sum(r["kind"] == "call" for r in got) == 3


def test_once_keeps_serving_the_final_metrics_while_holding(tmp_path, running):
    log = tmp_path / "dpm.log"
    append(log, puts(0, 3))
    run = running("--once", "--hold", 60, "--metrics-port", 0, *COMMON, log)
    run.wait_for("dpm_requests_total", 3, status="success")
    rc, out, err = run.stop()
    assert rc == 0, err            # SIGTERM ends the hold early; the run itself was complete
    assert "served for 60 s more" in out


def _peak_rss_mib_of_once(tmp_path, log) -> tuple[float, str]:
    """Peak resident memory (VmHWM, from /proc) of `run --once` over `log`, taken while it
    holds its final metrics; and its stdout."""
    run = RunProcess(["--once", "--hold", "60", "--metrics-port", "0", *COMMON, str(log)])
    try:
        deadline = time.monotonic() + 300
        while not any(line.startswith("Metrics:") for line in run.stdout_seen):
            assert time.monotonic() < deadline and run.proc.poll() is None, run.stderr_seen
            time.sleep(0.05)
        with open(f"/proc/{run.proc.pid}/status") as fh:
            peak_kib = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
        rc, out, err = run.stop()
        assert rc == 0, err
    finally:
        run.kill()
    return peak_kib / 1024, out


@pytest.mark.parametrize("engine", ["compiled", "python"])
def test_once_skips_a_100_mb_line_and_a_100_mb_nul_hole_as_one_bad_line_each_in_bounded_memory(
        tmp_path, engine, monkeypatch):
    if engine == "python":
        monkeypatch.setenv("DPMSTREAM_PURE_PYTHON", "1")     # the line bound is the parser's
    small, big = tmp_path / "small.log", tmp_path / "big.log"
    append(small, puts(0, 6))
    append(big, puts(0, 2))
    with open(big, "ab") as fh:                       # a runaway line, 100 MB
        for _ in range(100):
            fh.write(b"x" * (1 << 20))
        fh.write(b"\n")
    append(big, puts(2, 2))
    with open(big, "r+b") as fh:                      # a crashed writer's hole: 100 MB of NULs
        fh.truncate(os.path.getsize(big) + 100 * (1 << 20))
    append(big, puts(4, 2))                           # written after the restart, no newline before
    baseline, _ = _peak_rss_mib_of_once(tmp_path, small)
    peak, out = _peak_rss_mib_of_once(tmp_path, big)
    n = len(puts(0, 6))
    assert f"parsed {n}, unmatched 0, malformed 2" in out, out
    assert re.search(r"^\s+put\s+6\s+6\s", out, re.M), out      # all six, whole
    assert TOO_LONG in out                                        # the runaway line's place
    print(f"peak RSS {peak:.0f} MiB, {baseline:.0f} MiB on the small log")
    assert peak - baseline < 40, (peak, baseline)                 # not the 100 MB line


def test_once_with_a_missing_file_is_a_clear_error(tmp_path):
    done = _run_here("--once", "--no-metrics", tmp_path / "absent.log")
    assert done.returncode == 2
    assert "no such file" in done.stderr and "absent.log" in done.stderr


def truth_rows(path) -> list[list[str]]:
    with open(path, newline="") as fh:
        return sorted(list(csv.reader(fh))[1:])


def record_rows(records: list[dict], kind: str) -> list[list[str]]:
    """Records read back from JSON, as the simulator's truth CSV shows them."""
    columns = REQUEST_COLUMNS if kind == "request" else CALL_COLUMNS
    rows = []
    for r in records:
        if r["kind"] == kind:
            rows.append(["" if r[c] is None else
                         ms_to_text(round(r[c] * 1000)) if isinstance(r[c], float) else str(r[c])
                         for c in columns])
    return sorted(rows)


def test_simulated_head_node_followed_through_rotation_and_truncation_matches_its_truth(
        tmp_path, running):
    sim = tmp_path / "sim"
    made = dpmstream_in_process("simulate", "--out", str(sim), "--scenario", "mixed",
                                "--requests", "300", "--seed", "7", "--tz", "UTC", "--quiet")
    assert made.returncode == 0, made.stderr.decode()
    with open(f"{sim}.log", encoding="utf-8") as fh:
        dpm_lines = fh.read().splitlines()
    with open(f"{sim}.dpns.log", encoding="utf-8") as fh:
        dpns_lines = fh.read().splitlines()
    truth_requests = truth_rows(f"{sim}.requests.csv")
    truth_calls = truth_rows(f"{sim}.calls.csv")

    live = tmp_path / "live"
    live.mkdir()
    dpm, dpns, rec = live / "dpm.log", live / "dpns.log", tmp_path / "records.jsonl"
    run = running("--metrics-port", 0, "--records", rec, "--flush-on-exit",
                  "--host", "dpmhead01.cern.ch", "--tz", "UTC", "--year", "2011",
                  "--interval", "0.05", dpm, dpns)
    n = len(dpm_lines)
    cut1, cut2 = n * 2 // 5, n * 7 // 10
    append(dpm, dpm_lines[:cut1])
    append(dpns, dpns_lines[: len(dpns_lines) // 2])
    run.wait_for("dpmstream_lines_total", cut1, daemon="dpm")
    os.rename(dpm, live / "dpm.log.1")                  # logrotate, rename style
    append(dpm, dpm_lines[cut1:cut2])
    append(dpns, dpns_lines[len(dpns_lines) // 2:])
    run.wait_for("dpmstream_lines_total", cut2, daemon="dpm")
    with open(dpm, "r+b") as fh:                        # logrotate, copytruncate style
        fh.truncate(0)
    append(dpm, dpm_lines[cut2:])
    run.wait_for("dpmstream_lines_total", n, daemon="dpm", result="parsed")
    run.wait_for("dpmstream_lines_total", len(dpns_lines), daemon="dpns", result="parsed")

    # Failures and aborts are decided by a line, so they are out before the end once the
    # host's event time is 5 s past them (2 s allowance, 3 s waiting for name-server lines).
    status_col, ended_col = REQUEST_COLUMNS.index("status"), REQUEST_COLUMNS.index("ended")
    last = max(float(row[ended_col]) for row in truth_requests if row[ended_col])
    for status in ("failed", "aborted"):
        ended = [float(row[ended_col]) for row in truth_requests if row[status_col] == status]
        surely_out = sum(t <= last - 5.5 for t in ended)
        assert surely_out <= run.total("dpm_requests_total", status=status) <= len(ended)
        assert surely_out > 0
    rc, _, err = run.stop()
    assert rc == 0, err
    got = read_records(rec)
    assert record_rows(got, "request") == truth_requests
    assert record_rows(got, "call") == truth_calls


# -- stopping within 5 s of SIGTERM, having saved what it could --------------------------

def _saved(state) -> dict:
    with open(state, encoding="utf-8") as fh:
        return json.load(fh)


def test_sigterm_while_reading_a_large_backlog_stops_within_5_s_and_resumes_exactly(
        tmp_path, running):
    log, rec, state = tmp_path / "dpm.log", tmp_path / "records.jsonl", tmp_path / "run.state"
    lines = puts(0, 12_000)                       # 240,000 lines to read at the start
    append(log, lines)
    args = ("--metrics-port", 0, "--records", rec, "--state", state, "--state-interval", "0.2",
            *COMMON, log)
    run = running(*args)
    deadline = time.monotonic() + 60
    while run.total("dpm_requests_total") < 100:     # busy reading
        assert time.monotonic() < deadline and run.proc.poll() is None
        time.sleep(0.02)
    started = time.monotonic()
    rc, _, err = run.stop(timeout=30)
    took = time.monotonic() - started
    assert rc == 0 and took < 5, (rc, took, err)
    saved = _saved(state)["files"][str(log)]
    assert 0 < saved["offset"] < os.path.getsize(log), "stopped in the middle"
    assert "open request(s) saved in the state" in err

    # Counted before the restart: once it runs, it appends to the same file.
    written_before = len(read_records(rec))
    again = running(*args)
    again.wait_for("dpm_requests_total", 12_000 - written_before, timeout=120,
                   status="success")
    rc, _, err = again.stop()
    assert rc == 0, err
    got = read_records(rec)
    assert len(got) == 12_000
    assert canonical(got) == canonical(replayed(lines))


# `dpmstream run ARGS` whose stop event has SIGTERM delivered while it holds its lock, at
# its first wait(): as a signal landing between two of Event.wait's bytecodes does, which
# a loaded machine makes likelier (the thread is preempted there). Fault injection: run's
# own threading.Event only.
_SIGTERM_INSIDE_STOP_WAIT = """
import os, signal, sys, threading, types
from dpmstream.cli import main
from dpmstream.commands import run

class Event(threading.Event):
    signalled = False

    def wait(self, timeout=None):
        if not Event.signalled:
            Event.signalled = True
            with self._cond:
                os.kill(os.getpid(), signal.SIGTERM)   # the handler runs here
        return super().wait(timeout)

run.threading = types.SimpleNamespace(Event=Event, Thread=threading.Thread)
sys.exit(main(sys.argv[1:]))
"""


def test_sigterm_while_the_loop_waits_on_its_stop_event_stops_cleanly(tmp_path):
    log, rec = tmp_path / "dpm.log", tmp_path / "records.jsonl"
    append(log, puts(0, 1) + put_lines(1, 3000, putdone=False))
    done = subprocess.run(
        [sys.executable, "-c", _SIGTERM_INSIDE_STOP_WAIT, "run", "--no-metrics", "--records",
         str(rec), "--flush-on-exit", *COMMON, str(log)],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "not stopped cleanly" not in done.stderr
    statuses = {r["token"]: r["status"] for r in read_records(rec)}
    assert statuses == {token(0): "success", token(1): "incomplete"}


def _open_files(pid: int) -> set[str]:
    """The paths a process has open; an fd closed while we look is simply not there."""
    paths = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            paths.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except FileNotFoundError:
            pass
    return paths


def _unread_bytes(pipe) -> int:
    """How many bytes wait in a pipe for its reader."""
    return struct.unpack("i", fcntl.ioctl(pipe.fileno(), termios.FIONREAD, b"\0" * 4))[0]


def test_sigterm_while_blocked_on_a_full_records_pipe_exits_within_5_s(tmp_path):
    log, state = tmp_path / "dpm.log", tmp_path / "run.state"
    append(log, puts(0, 3000))
    # stdout is a pipe nobody reads: writing the records blocks once it is full.
    proc = subprocess.Popen(
        [sys.executable, "-m", "dpmstream", "run", "--no-metrics", "--records", "-",
         "--state", str(state), "--state-interval", "0.2", *COMMON, str(log)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        opened = False
        while not opened:                      # it started and opened the log
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
            opened = str(log) in _open_files(proc.pid)
        # 1,000 records: far more than a pipe holds. Once every page of the pipe holds
        # records (more unread than all pages but one could hold), its writes block.
        full = fcntl.fcntl(proc.stdout.fileno(), fcntl.F_GETPIPE_SZ) - os.sysconf("SC_PAGE_SIZE")
        while _unread_bytes(proc.stdout) <= full:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        assert proc.poll() is None, "blocked on its output"
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        took = time.monotonic() - started
        err = proc.stderr.read().decode()
    finally:
        proc.kill()
        proc.wait()
    assert took < 5, took
    assert proc.returncode == 128 + signal.SIGTERM
    assert "not stopped cleanly" in err
    assert not state.exists() or "files" in _saved(state)   # none, or a whole one


def test_the_state_is_not_rewritten_while_the_files_are_idle(tmp_path, running):
    log, state = tmp_path / "dpm.log", tmp_path / "run.state"
    append(log, puts(0, 2))
    run = running("--metrics-port", 0, "--state", state, "--state-interval", "0.05", *COMMON, log)
    run.wait_for("dpm_requests_total", 2, status="success")
    deadline = time.monotonic() + 30
    while not (state.exists() and _saved(state)["files"][str(log)]["offset"] == os.path.getsize(log)):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    before = os.stat(state).st_mtime_ns
    time.sleep(1.0)                               # twenty intervals, nothing new
    assert os.stat(state).st_mtime_ns == before
    append(log, puts(2, 1))
    run.wait_for("dpm_requests_total", 3, status="success")
    deadline = time.monotonic() + 30
    while os.stat(state).st_mtime_ns == before:   # new lines: saved again
        assert time.monotonic() < deadline
        time.sleep(0.05)
    rc, _, err = run.stop()
    assert rc == 0, err


# -- inputs that are not log files, options out of range (issue 26, items 10 and 11) -----

def _run(*args, timeout=30) -> subprocess.CompletedProcess:
    """`dpmstream run ARGS` in a process of its own: one that could hang on a bug (a device
    or FIFO read for ever) fails at `timeout` instead."""
    return subprocess.run([sys.executable, "-m", "dpmstream", "run", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


def _run_here(*args) -> subprocess.CompletedProcess:
    """`dpmstream run ARGS` on regular files or refused by its options, that ends by itself,
    in this process (tests/helpers.py dpmstream_in_process): what it says and returns is
    the test, not the process."""
    return dpmstream_in_process("run", *map(str, args), text=True)


def test_once_on_a_fifo_reads_what_its_writer_writes_until_it_closes(tmp_path):
    fifo, rec = tmp_path / "dpm.pipe", tmp_path / "records.jsonl"
    os.mkfifo(fifo)
    lines = puts(0, 20)

    def write():
        with open(fifo, "w") as fh:        # waits for the reader, as a shell's > does
            for i in range(0, len(lines), 50):
                fh.write("".join(x + "\n" for x in lines[i:i + 50]))
                fh.flush()
                time.sleep(0.01)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    done = _run("--once", "--no-metrics", "--records", rec, *COMMON, fifo, timeout=60)
    writer.join(timeout=10)
    assert done.returncode == 0, done.stderr
    assert canonical(read_records(rec)) == canonical(replayed(lines))


@pytest.mark.parametrize("mode", [["--once"], []])
def test_a_character_device_is_refused_at_the_start_in_one_line(mode):
    started = time.monotonic()
    done = _run(*mode, "--no-metrics", "/dev/zero")
    assert time.monotonic() - started < 20
    assert done.returncode == 2
    assert done.stderr == ("dpmstream run: /dev/zero: is a character device, not a log file "
                           "(regular files and FIFOs are read)\n")


@pytest.mark.parametrize("mode", [["--once"], []])
def test_a_file_that_cannot_be_read_is_one_line_and_exit_2(mode):
    # /proc/self/mem opens, and its first byte cannot be read (address 0: EIO).
    done = _run(*mode, "--no-metrics", "/proc/self/mem")
    assert done.returncode == 2, done.stderr
    assert done.stderr == "dpmstream run: /proc/self/mem: cannot read it: Input/output error\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="drops root's capabilities with setpriv")
def test_following_a_file_without_read_permission_is_one_line_and_exit_2(tmp_path):
    log = tmp_path / "dpm.log"
    append(log, puts(0, 1))
    log.chmod(0)
    # root without CAP_DAC_OVERRIDE: the permission bits hold, as for any other user
    done = subprocess.run(
        ["setpriv", "--inh-caps=-dac_override,-dac_read_search",
         "--bounding-set=-dac_override,-dac_read_search",
         sys.executable, "-m", "dpmstream", "run", "--no-metrics", str(log)],
        capture_output=True, text=True, timeout=30)
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"dpmstream run: {log}: cannot read it: Permission denied\n"


@pytest.mark.parametrize("interval", ["0", "-1"])
def test_a_poll_interval_that_is_not_positive_is_refused(interval):
    done = _run_here("--no-metrics", "--interval", interval, "/tmp/whatever.log")
    assert done.returncode == 2
    assert f"argument --interval: must be > 0 and <= 3.16224e+07, not {interval}" in done.stderr


def test_a_metrics_port_out_of_range_is_one_line_and_exit_2(tmp_path):
    log = tmp_path / "dpm.log"
    append(log, puts(0, 1))
    done = _run_here("--once", "--metrics-port", 99999, log)
    assert done.returncode == 2
    assert done.stderr == ("dpmstream run: error: argument --metrics-port: must be >= 0 and "
                           "<= 65535, not 99999 (see dpmstream run --help)\n")


# -- `make run`: the README's first command -------------------------------------------

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def make_run(out_prefix) -> subprocess.CompletedProcess:
    """`make run` as the README gives it, with its output elsewhere, metrics on a free port,
    no hold, and the install taken as done (the test runs inside that install)."""
    venv_bin = os.path.dirname(sys.executable)
    return subprocess.run(
        ["make", "-C", REPO, "-o", f"{venv_bin}/.installed", "-o", "install", "run",
         f"OUT={out_prefix}", "PORT=0", "HOLD=0", f"BIN={venv_bin}"],
        capture_output=True, text=True, timeout=600, check=False)


def test_make_run_over_an_earlier_records_file_leaves_only_its_own_records(tmp_path):
    """The fast loop's sibling of test_make_run_twice_leaves_each_record_once (slow: two
    whole `make run`s): one `make run` over a records file an earlier run left does not
    append to it."""
    prefix = tmp_path / "out" / "demo"
    records = tmp_path / "out" / "demo.records.jsonl"
    records.parent.mkdir()
    earlier = '{"kind": "request", "token": "left by an earlier run"}\n'
    records.write_text(earlier)
    done = make_run(prefix)
    assert done.returncode == 0, done.stderr
    lines = records.read_text().splitlines(keepends=True)
    assert earlier not in lines
    assert len(lines) > 1000  # the thesis setup: 3000 request cycles and their calls
    assert all(json.loads(line)["kind"] in ("request", "call") for line in lines)
    assert "Metrics: http://127.0.0.1:" in done.stdout


@pytest.mark.slow
def test_make_run_twice_leaves_each_record_once(tmp_path):
    """Two whole `make run`s (slow; make check runs
    test_make_run_over_an_earlier_records_file_leaves_only_its_own_records)."""
    prefix = tmp_path / "out" / "demo"
    first = make_run(prefix)
    assert first.returncode == 0, first.stderr
    once = (tmp_path / "out" / "demo.records.jsonl").read_text().splitlines()
    second = make_run(prefix)
    assert second.returncode == 0, second.stderr
    again = (tmp_path / "out" / "demo.records.jsonl").read_text().splitlines()
    assert len(once) > 1000  # the thesis setup: 3000 request cycles and their calls
    assert again == once     # a run is a function of its options: the same records, once
    assert "Metrics: http://127.0.0.1:" in second.stdout
