"""`dpmstream run` on DOME logs (docs/dome.md): every node's dmlite log of a site
`dpmstream simulate --dome` wrote, followed by a real `run` process: the records file
equals the simulator's truth; the DOME metrics scraped over HTTP count the truth's calls,
puts and filesystems with bounded labels only; and `--state` keeps every record once
across a kill -9 (the DomeReassembler's snapshot in the state file).

The DOME engine is the Python reference (parsers/engines.new_dome_reassembler); the
compiled one, when built, is chosen there and these tests run it unchanged."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import time
from collections import Counter

import pytest

from dpmstream.parsers.dome_records import KINDS

from tests.commands.test_run import RunProcess, read_records
from tests.helpers import dpmstream_in_process
from tests.scenarios.test_dome_truth import INTS, ORDER

TRUTH = {"calls": "dome_call", "puts": "dome_put", "capacity": "dome_capacity",
         "fs_events": "dome_fs_event"}
SETTINGS = ("--year", "2017", "--tz", "Europe/Zurich", "--request-timeout", "120")
# Labels that could carry a DN, LFN, PFN or token if a label took a record's text.
FORBIDDEN_IN_LABELS = ("/dpm/example.org", "CN=", ".root", "/atlas/", "/cms/", "/domehead", "/domedisk")


def truth(prefix: str, name: str) -> list[dict]:
    with open(f"{prefix}.{name}.csv", newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def in_order(rows: list[dict], name: str) -> list[dict]:
    return sorted(rows, key=lambda r: (tuple(int(r[c]) if c in INTS else r[c] for c in ORDER[name]),
                                       tuple(r.values())))


def as_truth_cells(record: dict, columns) -> dict:
    """A JSON record (seconds) as the truth CSV writes it (integer ms, None empty)."""
    ms_fields = KINDS[record["kind"]][1]
    out = {}
    for c in columns:
        v = record.get(c)
        out[c] = "" if v is None else str(round(v * 1000) if c in ms_fields else v)
    return out


def assert_the_records_are_the_truth(records: list[dict], prefix: str) -> dict:
    matched = {}
    for name, kind in TRUTH.items():
        want = in_order(truth(prefix, name), name)
        got = in_order([as_truth_cells(r, want[0]) for r in records if r["kind"] == kind], name)
        assert len(got) == len(want), name
        for a, b in zip(got, want):
            assert a == b, name
        matched[name] = len(got)
    return matched


def test_run_once_on_every_node_of_a_dome_site_writes_the_truths_records(tmp_path, dome_site):
    prefix, logs = dome_site("--stamp", "traditional")
    rec = tmp_path / "records.jsonl"
    done = dpmstream_in_process("run", "--once", "--records", str(rec), *SETTINGS, *logs, text=True)
    assert done.returncode == 0, done.stderr
    matched = assert_the_records_are_the_truth(read_records(rec), prefix)
    assert matched["calls"] > 5000 and matched["puts"] > 1500 and matched["fs_events"] > 0
    assert "DOME puts" in done.stdout and "DOME calls" in done.stdout


def scraped(run: RunProcess) -> list[tuple[str, dict, float]]:
    return [(name, dict(labels), value) for (name, labels), value in run.samples().items()]


@pytest.mark.parametrize("stamp", ["traditional", "rfc3339"])
def test_the_dome_metrics_served_by_run_count_the_truth_with_bounded_labels(dome_site, stamp):
    prefix, logs = dome_site("--stamp", stamp)
    run = RunProcess(["--once", "--hold", "120", "--metrics-port", "0", *SETTINGS, *logs])
    try:
        deadline = time.monotonic() + 900
        want_puts = Counter(r["status"] for r in truth(prefix, "puts"))
        while run.total("dpm_dome_puts_total") < sum(want_puts.values()):
            assert time.monotonic() < deadline and run.proc.poll() is None
            time.sleep(0.1)
        samples = scraped(run)
    finally:
        run.stop()
    calls = truth(prefix, "calls")

    def total(name, **labels):
        return sum(v for n, lab, v in samples if n == name and labels.items() <= lab.items())

    for status, n in want_puts.items():
        assert total("dpm_dome_puts_total", host="dpmhead01", status=status) == n
    assert total("dpm_dome_calls_total") == len(calls)
    by_class = Counter("none" if r["http_code"] == "" else r["http_code"][0] + "xx" for r in calls)
    for code_class, n in by_class.items():
        assert total("dpm_dome_calls_total", code_class=code_class) == n
    assert total("dpm_dome_calls_total", command="dome_put", role="head") == sum(
        r["command"] == "dome_put" for r in calls)
    joined = [r for r in truth(prefix, "puts") if r["put_to_putdone"] != ""]
    assert total("dpm_dome_put_to_putdone_seconds_count", host="dpmhead01") == len(joined)
    assert total("dpm_dome_put_to_putdone_seconds_sum") == pytest.approx(
        sum(int(r["put_to_putdone"]) for r in joined) / 1000)
    timed = [r for r in calls if r["duration"] != ""]
    if stamp == "traditional":   # whole seconds: counted, never observed as durations
        assert total("dpm_dome_call_seconds_count") == 0
    else:
        assert total("dpm_dome_call_seconds_count") == len(timed) > 5000
    last = {}
    for r in truth(prefix, "capacity"):
        last[(r["host"], r["fs"])] = r
    for (host, fs), r in last.items():
        assert total("dpm_dome_fs_free_bytes", server=host, fs=fs) == int(r["free"])
        assert total("dpm_dome_fs_size_bytes", server=host, fs=fs) == int(r["phys"])
    events = truth(prefix, "fs_events")
    assert total("dpm_dome_fs_events_total") == len(events)
    now = {(r["server"], r["fs"]): r["event"] for r in events}   # the last event is the state
    assert "disabled" in {r["event"] for r in events}
    for (server, fs), event in now.items():
        assert total("dpm_dome_fs_enabled", server=server, fs=fs) == (event == "enabled")
    for name, labels, _ in samples:
        if name.startswith("dpm_dome_"):
            assert not any(bad in value for value in labels.values() for bad in FORBIDDEN_IN_LABELS), (name, labels)
            if "command" in labels:
                assert labels["command"].startswith("dome_") or labels["command"] == "other"


# -- --state across kill -9 ----------------------------------------------------------------

def stamp_of(line: bytes) -> bytes:
    return line[:15]   # the traditional stamp "May 30 08:49:00": one day, ordered as text


def split_at(lines: list[bytes], cut: bytes) -> tuple[list[bytes], list[bytes]]:
    i = next((n for n, line in enumerate(lines) if stamp_of(line) >= cut), len(lines))
    return lines[:i], lines[i:]


def saved(state) -> dict:
    with open(state, encoding="utf-8") as fh:
        return json.load(fh)


def caught_up(state, paths) -> bool:
    try:
        files = saved(state)["files"]
    except (OSError, ValueError):
        return False
    return all(files.get(os.path.abspath(p), {}).get("offset") == os.path.getsize(p) for p in paths)


def test_run_state_keeps_every_dome_record_once_across_kill_9(tmp_path, dome_site):
    """A kill -9 while the followed nodes' logs grow: the restart goes on from the saved
    DOME state (open calls, puts waiting for their putdone, PUTCOUNT offsets) and the
    offsets; the records file then holds the truth, none doubled or lost."""
    prefix, logs = dome_site("--stamp", "traditional")
    followed = [tmp_path / os.path.basename(p) for p in logs]
    contents = [open(p, "rb").read().splitlines(keepends=True) for p in logs]
    parts = []
    for lines in contents:   # before 08:47, 08:47 to 08:50, after: each node cut by time
        first, rest = split_at(lines, b"May 30 08:47:00")
        second, third = split_at(rest, b"May 30 08:50:00")
        parts.append((first, second, third))
    for path, (first, _, _) in zip(followed, parts):
        path.write_bytes(b"".join(first))
    rec, state = tmp_path / "records.jsonl", tmp_path / "run.state"
    args = ["--metrics-port", "0", "--records", str(rec), "--state", str(state),
            "--state-interval", "0.2", "--flush-on-exit", *SETTINGS, *map(str, followed)]

    run = RunProcess(args)
    deadline = time.monotonic() + 600
    while not caught_up(state, followed):
        assert time.monotonic() < deadline and run.proc.poll() is None
        time.sleep(0.1)
    for path, (_, second, _) in zip(followed, parts):   # more lines, then a kill mid-way
        with open(path, "ab") as fh:
            fh.write(b"".join(second))
    size = os.path.getsize(rec)
    while os.path.getsize(rec) <= size:    # it is reading them: records are being written
        assert time.monotonic() < deadline and run.proc.poll() is None
        time.sleep(0.01)
    run.proc.send_signal(signal.SIGKILL)
    run.proc.wait(timeout=30)
    pipeline_keys = saved(state)["pipeline"]   # per call and put (parsers/dome_state.py)
    assert "d|x" in pipeline_keys and any(k.startswith("d|p|") for k in pipeline_keys), \
        "the DOME state is saved"

    for path, (_, _, third) in zip(followed, parts):    # written while it was down
        with open(path, "ab") as fh:
            fh.write(b"".join(third))
    again = RunProcess(args)
    while not caught_up(state, followed):
        assert time.monotonic() < deadline and again.proc.poll() is None
        time.sleep(0.1)
    rc, _, err = again.stop(timeout=60)
    assert rc == 0, err
    assert "resuming from" in err
    matched = assert_the_records_are_the_truth(read_records(rec), prefix)
    # The stop line counts what this run emitted (the restart's share, none twice).
    emitted = re.search(r"(\d+) DOME calls, (\d+) DOME puts emitted", err)
    assert emitted and 0 < int(emitted.group(2)) < matched["puts"]
