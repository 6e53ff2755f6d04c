"""Helpers of the end-to-end tests and the latency bench: a simulated head node whose log
lines are appended to real files over time, and the records that come out of Kafka.

The chain under test is the one a site runs: files -> rsyslog (shipped config) -> Kafka
-> `dpmstream worker` -> dpm.requests / dpm.calls (+ /metrics -> Prometheus).
"""

from __future__ import annotations

import heapq
import threading
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from dpmstream.parsers.records import (
    CALL_MS_FIELDS, REQUEST_MS_FIELDS, call_row, key_of, request_row,
)
from dpmstream.simulator import SimConfig
from dpmstream.commands.stack.process import tail
from tests.worker_helpers import committed_offsets, end_offsets, read_topic

SIM_TZ = "Europe/Zurich"


def live_sim_config(**changes) -> SimConfig:
    """A simulation whose log reads as written an hour ago.

    Log stamps carry no year: the worker takes it from rsyslog's receive time (now), so
    the simulated day must be near today for the truth's times to be the records' times.
    No abandoned requests: a request that ends only by timeout or at the end of input
    never ends in a stream that does not end.
    """
    start = datetime.now(ZoneInfo(SIM_TZ)) - timedelta(hours=1)
    base = dict(start=start.strftime("%Y-%m-%d %H:%M:%S"), tz=SIM_TZ, abandon_rate=0.0,
                get_fraction=0.3)
    base.update(changes)
    return SimConfig(**base)


def _stamp(line: bytes) -> bytes:
    return line[:18]  # "MM/DD hh:mm:ss.mmm"


def ordered_lines(sim, dpm_file: Path, dpns_file: Path) -> list[tuple[Path, bytes]]:
    """The simulator's DPM and DPNS lines as the daemons write them: each file in its own
    order, the two merged by stamp. Lines are without their newline."""
    def lines(src, dest):
        with open(src, "rb") as fh:
            return [(dest, raw.rstrip(b"\n")) for raw in fh]
    return list(heapq.merge(lines(sim.log_path, dpm_file), lines(sim.dpns_log_path, dpns_file),
                            key=lambda item: _stamp(item[1])))


# The client of the call that ends a test's log (end_tick): not part of the truth.
TICK_CLIENT = "end-of-test.invalid"


def end_tick(lines: list[tuple[Path, bytes]], dpm_file: Path, dpns_file: Path, seconds: int = 10,
             pid: int = 12345) -> list[tuple[Path, bytes]]:
    """A ping in each log `seconds` after the last line. A head node never stops logging;
    a test's log does, and records wait (for name-server linking) until event time has
    moved a few seconds past them in both the DPM and the name-server log (or one log has
    been quiet for over a minute while the other went on): these lines move both on, as
    the daemons' next calls would."""
    last = datetime.strptime("2000/" + _stamp(lines[-1][1]).decode(), "%Y/%m/%d %H:%M:%S.%f")
    stamp = (last + timedelta(seconds=seconds)).strftime("%m/%d %H:%M:%S.%f")[:18].encode()
    by = b"request by /CN=tick (0,0) from " + TICK_CLIENT.encode()
    dpm = b"%s %5d,0 dpm_srv_ping: " % (stamp, pid)
    dpns = b"%s %5d,0 Cns_srv_ping: " % (stamp, pid + 1)
    return [(dpm_file, dpm + b"DP092 - ping " + by), (dpm_file, dpm + b"returns 0"),
            (dpns_file, dpns + b"NS092 - ping " + by), (dpns_file, dpns + b"returns 0")]


def without_tick(records: list[dict]) -> list[dict]:
    return [r for r in records if r.get("client") != TICK_CLIENT]


class AppendingWriter(threading.Thread):
    """Appends lines to their files in order, in chunks every `chunk_s` spread evenly over
    `duration_s`, flushing each chunk as a daemon's log would be. `written` is the progress.
    """

    def __init__(self, lines: list[tuple[Path, bytes]], *, duration_s: float, chunk_s: float = 0.05):
        super().__init__(name="log-writer", daemon=True)
        self.lines = lines
        self.rate = len(lines) / max(duration_s, 1e-3)
        self.chunk_s = chunk_s
        self.written = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        handles: dict[Path, object] = {}
        try:
            for path in {p for p, _ in self.lines}:
                path.parent.mkdir(parents=True, exist_ok=True)
                handles[path] = open(path, "ab")
            start = time.monotonic()
            n = len(self.lines)
            tick = 0
            while self.written < n:
                tick += 1
                # Lines due by the end of this tick (a schedule, so a slow tick catches up).
                due = min(n, int(round(tick * self.chunk_s * self.rate)))
                touched = set()
                for path, line in self.lines[self.written:due]:
                    handles[path].write(line + b"\n")
                    touched.add(path)
                for path in touched:
                    handles[path].flush()
                self.written = max(self.written, due)
                delay = start + tick * self.chunk_s - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
        except BaseException as exc:  # noqa: BLE001 - reported by the test that joins
            self.error = exc
        finally:
            for fh in handles.values():
                fh.close()

    def wait_for(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.written < count:
            if self.error is not None:
                raise AssertionError(f"log writer failed: {self.error!r}")
            if not self.is_alive() or time.monotonic() > deadline:
                raise AssertionError(f"log writer at {self.written} lines, waited for {count}")
            time.sleep(0.02)

    def finish(self, timeout: float = 120.0) -> None:
        self.join(timeout)
        if self.is_alive():
            raise AssertionError(f"log writer still running after {timeout:.0f} s")
        if self.error is not None:
            raise AssertionError(f"log writer failed: {self.error!r}")


# -- records from Kafka ---------------------------------------------------------------------

def _ms(value):
    return None if value is None else int(round(value * 1000))


def from_json(record: dict) -> dict:
    """A published record (by column, float seconds) back to the truth's keys and integer
    milliseconds."""
    fields = REQUEST_MS_FIELDS if record["kind"] == "request" else CALL_MS_FIELDS
    return {key_of(c): (_ms(v) if key_of(c) in fields else v) for c, v in record.items()}


def topic_records(bootstrap: str, topic: str, kind: str) -> list[dict]:
    """Committed records of an output topic (read_committed), checked for kind and key."""
    out = []
    for key, value in read_topic(bootstrap, topic):
        assert value["kind"] == kind, value
        expected_key = value["token"] if kind == "request" else value["host"]
        assert key.decode() == expected_key, (key, value)
        out.append(from_json(value))
    return out


def compare_rows(got: list[dict], truth: list[dict], kind: str) -> str:
    """'' when the records equal the truth as CSV rows (multiset); else what differs."""
    row = request_row if kind == "request" else call_row
    ours, theirs = Counter(tuple(row(r)) for r in got), Counter(tuple(row(r)) for r in truth)
    if ours == theirs:
        return ""
    missing, extra = theirs - ours, ours - theirs
    lines = [f"{kind}: {sum(ours.values())} records, truth {sum(theirs.values())}: "
             f"{sum(missing.values())} missing, {sum(extra.values())} extra"]
    if kind == "request":
        tokens = Counter(r["token"] for r in got)
        doubled = [t for t, n in tokens.items() if n > 1]
        lines.append(f"tokens published more than once: {len(doubled)} {doubled[:3]}")
    lines += [f"  missing {m}" for m in list(missing)[:3]]
    lines += [f"  extra   {e}" for e in list(extra)[:3]]
    return "\n".join(lines)


def lines_on_topic(bootstrap: str, topic: str) -> set[tuple[str, int]]:
    """Distinct (path, offset) of the line envelopes on the lines topic."""
    return {(v["path"], v["offset"]) for _k, v in read_topic(bootstrap, topic, "read_uncommitted")
            if isinstance(v, dict)}


def file_line_offsets(paths) -> set[tuple[str, int]]:
    """(path, byte offset) of every line start in the files, as imfile reports them."""
    out = set()
    for path in paths:
        pos = 0
        with open(path, "rb") as fh:
            for raw in fh:
                out.add((str(path), pos))
                pos += len(raw)
    return out


def group_caught_up(bootstrap: str, lines_topic: str, group: str) -> tuple[bool, dict, dict]:
    """(committed == end for every partition of the lines topic, committed, end)."""
    end = end_offsets(bootstrap, lines_topic)
    done = committed_offsets(bootstrap, group)
    return all(done.get(p, 0) >= off for p, off in end.items()), done, end


def service_logs(*services) -> str:
    """The last lines of each service's logs, for a failure message."""
    parts = []
    for svc in services:
        proc = getattr(svc, "process", None)
        if proc is None:
            continue
        for log in [proc.log_file, *proc.other_logs]:
            text = tail(log, 25)
            if text:
                parts.append(f"--- {proc.name}: {log} ---\n{text}")
    return "\n".join(parts)
