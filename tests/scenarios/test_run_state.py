"""`dpmstream run --state` across a restart: a damaged state is refused with a clear
message, and LiveFeed's checkpoint with the records sink carries open requests into the
next process and writes no record twice. Driven in-process on real files; and `run`
killed (kill -9) at any moment, the first records included, then started again: the
records file ends equal to `dpmstream replay` of the same log (issue 26, item 4)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from dpmstream.streams.live.follow import Follower
from dpmstream.streams.live.feed import LiveFeed
from dpmstream.streams.live.registry import Registry
from dpmstream.streams.sinks.jsonlines import JsonLinesSink
from tests.commands.test_run import (
    COMMON, RunProcess, record_rows, truth_rows, append, canonical, put_lines, puts,
    read_records, replayed)
from tests.helpers import dpmstream_in_process
from tests.scenarios.test_run_exactly_once import wait_caught_up


def test_run_refuses_a_damaged_state_file_with_a_clear_message(tmp_path):
    state = tmp_path / "run.state"
    state.write_text("[]")
    done = subprocess.run(
        [sys.executable, "-m", "dpmstream", "run", "--no-metrics", "--state", str(state),
         str(tmp_path / "log")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "cannot use the state" in done.stderr and "move it away" in done.stderr


def test_a_checkpoint_carries_open_requests_into_the_next_process(tmp_path):
    log, rec = tmp_path / "dpm.log", tmp_path / "records.jsonl"
    lines = puts(0, 6)
    first, rest = lines[:47], lines[47:]    # cut in the middle of requests 2 and 3
    append(log, first)
    opts = dict(host="head01", tz="UTC", year=2011, keep_state=True)
    sink = JsonLinesSink(rec)
    feed = LiveFeed([Follower(log)], records=sink, **opts)
    feed.poll_once()
    assert feed.open_requests() > 0
    saved = json.loads(json.dumps(feed.checkpoint()))      # as the registry stores it
    assert any(key.startswith("r|") for key in saved["pipeline"])
    feed.close()
    sink.close()
    append(log, rest)
    sink = JsonLinesSink(rec, written_since=saved["records"]["size"])
    feed = LiveFeed([Follower(log, resume=saved["files"][str(log)])], records=sink,
                    state=saved["pipeline"], **opts)
    feed.poll_once()
    feed.finish()
    feed.close()
    sink.close()
    assert canonical(read_records(rec)) == canonical(replayed(lines))


def test_records_made_again_after_a_crash_are_not_written_twice(tmp_path):
    log, rec = tmp_path / "dpm.log", tmp_path / "records.jsonl"
    lines = puts(0, 5) + put_lines(5, 15_000, putdone=False)
    append(log, lines[:30])
    opts = dict(host="head01", tz="UTC", year=2011, keep_state=True)
    sink = JsonLinesSink(rec)
    feed = LiveFeed([Follower(log)], records=sink, **opts)
    feed.poll_once()
    saved = json.loads(json.dumps(feed.checkpoint()))
    saved_count = len(read_records(rec))
    append(log, lines[30:])
    feed.poll_once()                         # records written, then a crash: no save
    assert len(read_records(rec)) > 1
    sink.close()
    sink = JsonLinesSink(rec, written_since=saved["records"]["size"])
    assert sink.to_replay == len(read_records(rec)) - saved_count > 0
    feed = LiveFeed([Follower(log, resume=saved["files"][str(log)])], records=sink,
                    state=saved["pipeline"], **opts)
    feed.poll_once()
    feed.finish()
    sink.close()
    assert sink.replayed > 0
    assert canonical(read_records(rec)) == canonical(replayed(lines))


@pytest.mark.parametrize("idle_polls", [0, 1, 3])
def test_a_flush_at_a_stop_whose_save_failed_is_recognised_after_idle_polls(
        tmp_path, idle_polls):
    """`--flush-on-exit` wrote the open requests as `incomplete`, then the save at that
    stop failed: the state holds them open. The next process, caught up at once, polls
    idle a while (how long the machine takes to deliver the stop: the race behind
    test_a_flush_at_the_stop_whose_save_fails_writes_no_request_twice failing under
    load), then flushes at its own stop: what it makes again is recognised, not written
    twice. No line makes those records again, so being caught up must not end that."""
    log, rec = tmp_path / "dpm.log", tmp_path / "records.jsonl"
    lines = puts(0, 3) + puts(3, 2, putdone=False)
    append(log, lines)
    opts = dict(host="head01", tz="UTC", year=2011, keep_state=True)
    sink = JsonLinesSink(rec)
    feed = LiveFeed([Follower(log)], records=sink, **opts)
    while feed.poll_once():
        pass
    saved = json.loads(json.dumps(feed.checkpoint()))      # the last save that worked
    feed.finish()                                           # the flush; its save fails
    feed.close()
    sink.close()
    sink = JsonLinesSink(rec, written_since=saved["records"]["size"])
    assert sink.to_replay == 2
    feed = LiveFeed([Follower(log, resume=saved["files"][str(log)])], records=sink,
                    state=saved["pipeline"], **opts)
    for _ in range(idle_polls):
        assert not feed.poll_once()
    assert sink.sync() == saved["records"]["size"], "its requests are open in the state"
    feed.finish()
    feed.close()
    sink.close()
    assert sink.replayed == 2
    assert canonical(read_records(rec)) == canonical(replayed(lines))


def test_run_refuses_a_state_with_a_damaged_file_entry(tmp_path):
    state = tmp_path / "run.state"
    Registry(state).save({"files": {str(tmp_path / "log"): {"offset": "x"}}, "pipeline": {}})
    done = subprocess.run(
        [sys.executable, "-m", "dpmstream", "run", "--no-metrics", "--state", str(state),
         str(tmp_path / "log")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "damaged entries" in done.stderr and "Traceback" not in done.stderr


# -- kill -9 at any moment ------------------------------------------------------------

REQUESTS = 12_000   # 240,000 lines: a few seconds of reading, a kill lands mid-way
# The Python engine reads about a quarter as fast as the compiled one: a quarter of the
# backlog gives it as many seconds of reading for a kill to land in.
REQUESTS_READ_BY = {"compiled": REQUESTS, "python": REQUESTS // 4}


@pytest.fixture(scope="module")
def backlogs(tmp_path_factory):
    """backlog(requests): a log with that many puts, and what `dpmstream replay` makes of
    it; each size made once for the module."""
    made = {}

    def backlog(requests: int) -> dict:
        if requests not in made:
            where = tmp_path_factory.mktemp("backlog")
            log = where / "dpm.log"
            append(log, puts(0, requests))
            out = where / "replay"
            done = dpmstream_in_process("replay", "--quiet", "--out", str(out), "--host", "head01",
                                        "--tz", "UTC", "--year", "2011", str(log), text=True)
            assert done.returncode == 0, done.stderr
            made[requests] = {"log": log, "requests": truth_rows(out / "requests.csv"),
                              "calls": truth_rows(out / "calls.csv")}
        return made[requests]
    return backlog


def _start(log, rec, state) -> RunProcess:
    started = time.time_ns()
    proc = RunProcess(["--metrics-port", "0", "--records", str(rec), "--state", str(state),
                       *COMMON, str(log)])
    proc.started_ns = started
    return proc


def _records_appear(rec, proc: RunProcess, timeout: float = 60) -> None:
    """Polls, without sleeping, until the records file holds its first bytes."""
    deadline = time.monotonic() + timeout
    while not (rec.exists() and rec.stat().st_size > 0):
        assert time.monotonic() < deadline and proc.proc.poll() is None, "no record written"


def _kill_then_finish(log, rec, state, *kills) -> list[dict]:
    """Start `run`, kill -9 it at each moment of `kills` in turn (starting it again after
    each), then let the last start read to the end; the records file then."""
    for kill_at in kills:
        proc = _start(log, rec, state)
        kill_at(rec, state, proc)
        proc.proc.kill()               # kill -9: nothing is saved or flushed
        proc.proc.wait()
    assert rec.stat().st_size > 0
    again = _start(log, rec, state)
    wait_caught_up(state, [log], proc=again)
    rc, _, err = again.stop()
    assert rc == 0, err
    return read_records(rec)


def at_the_first_records(rec, state, proc):
    _records_appear(rec, proc)


def a_few_polls_later(rec, state, proc):
    _records_appear(rec, proc)
    time.sleep(0.3)                    # records written, the first periodic save (1 s) not due


def after_a_periodic_save(rec, state, proc):
    _records_appear(rec, proc)
    written = state.stat().st_mtime_ns if state.exists() else 0
    deadline = time.monotonic() + 60
    while not (state.exists() and state.stat().st_mtime_ns > written):
        assert time.monotonic() < deadline and proc.proc.poll() is None
        time.sleep(0.005)


def at_its_first_save(rec, state, proc):
    """Started again after a kill: killed once it saved, while the records written before
    are still being recognised."""
    started = proc.started_ns
    deadline = time.monotonic() + 60
    while not (state.exists() and state.stat().st_mtime_ns > started):
        assert time.monotonic() < deadline and proc.proc.poll() is None
        time.sleep(0.001)


# The engine matters to the restored state only: one moment for the Python engine.
KILLS = [((at_the_first_records,), "compiled"),
         ((at_the_first_records,), "python"),
         ((a_few_polls_later,), "compiled"),
         ((after_a_periodic_save,), "compiled"),
         ((at_the_first_records, at_its_first_save), "compiled")]
# The fast loop (`make check`) runs the two kills in a row (records written and no state
# saved, then killed once it saved); `make test` runs every moment (the rest are marked
# slow: a read of the backlog each). The Python engine's part, its state through JSON
# into a new engine, the fast loop checks in
# tests/parsers/test_engines_agree.py::test_the_python_engine_cut_in_two_gives_the_records_of_one_run.
FAST_LOOP = {((at_the_first_records, at_its_first_save), "compiled")}


@pytest.mark.parametrize("kills, engine", [
    pytest.param(kills, engine, id="-then-".join(k.__name__ for k in kills) + f"-{engine}",
                 marks=() if (kills, engine) in FAST_LOOP else pytest.mark.slow)
    for kills, engine in KILLS])
def test_kill_9_at_any_moment_then_a_restart_writes_every_record_once(
        tmp_path, backlogs, kills, engine, monkeypatch):
    """Killed at each moment of KILLS, started again, read to the end: the records of
    `replay`, each once. The fast loop runs
    at_the_first_records-then-at_its_first_save-compiled (FAST_LOOP)."""
    backlog = backlogs(REQUESTS_READ_BY[engine])
    if engine == "python":
        monkeypatch.setenv("DPMSTREAM_PURE_PYTHON", "1")
    rec, state = tmp_path / "records.jsonl", tmp_path / "run.state"
    got = _kill_then_finish(backlog["log"], rec, state, *kills)
    assert len(got) == len(backlog["requests"]) + len(backlog["calls"])
    assert record_rows(got, "request") == backlog["requests"]
    assert record_rows(got, "call") == backlog["calls"]


# -- one process per state; a full disk ----------------------------------------------------

def test_a_second_run_on_the_same_state_exits_at_once_naming_the_holder(tmp_path):
    log, state = tmp_path / "dpm.log", tmp_path / "run.state"
    append(log, puts(0, 2))
    first = RunProcess(["--metrics-port", "0", "--state", str(state), *COMMON, str(log)])
    try:
        second = subprocess.run(
            [sys.executable, "-m", "dpmstream", "run", "--no-metrics", "--state", str(state),
             *COMMON, str(log)], capture_output=True, text=True, timeout=60)
        assert second.returncode == 2
        assert second.stderr.count("\n") == 1, second.stderr
        assert f"pid {first.proc.pid}" in second.stderr and str(state) in second.stderr
        assert first.proc.poll() is None, "the first one runs on"
    finally:
        first.kill()
    # kill -9 ends the lock with the process: the next start takes it.
    third = RunProcess(["--metrics-port", "0", "--state", str(state), *COMMON, str(log)])
    rc, _, err = third.stop()
    assert rc == 0, err


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs mounted for the test (needs root), unmounted after it."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    where = tmp_path / "small"
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def _fill(folder) -> None:
    """Write into `folder` until its file system is full."""
    with open(folder / "filler", "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\0" * 4096)
        except OSError:
            pass


def test_a_full_disk_while_saving_the_state_stops_with_one_line_and_doubles_nothing(
        tmp_path, small_disk):
    log, rec, state = tmp_path / "dpm.log", tmp_path / "records.jsonl", small_disk / "run.state"
    lines = puts(0, 200) + puts(200, 200, putdone=False) + puts(400, 200)
    first_part = len(puts(0, 200))
    append(log, lines[:first_part])
    args = ["--metrics-port", "0", "--records", str(rec), "--state", str(state),
            "--state-interval", "0.05", "--flush-on-exit", *COMMON, str(log)]
    run = RunProcess(args)
    wait_caught_up(state, [log], proc=run)
    _fill(small_disk)
    append(log, lines[first_part:])            # open requests: the state grows, cannot be saved
    run.proc.wait(timeout=60)
    rc, _, err = run.stop()
    assert rc == 2, err
    told = [line for line in err.splitlines() if "metrics on" not in line]
    assert len(told) == 1, err
    assert str(state) in told[0] and "No space left on device" in told[0], err
    assert sorted(os.listdir(small_disk)) == ["filler", "run.state", "run.state.lock"]

    os.unlink(small_disk / "filler")
    again = RunProcess(args)
    wait_caught_up(state, [log], proc=again)
    rc, _, err = again.stop()
    assert rc == 0, err
    assert canonical(read_records(rec)) == canonical(replayed(lines))


# -- rotation while it was down, by a swapped symlink ---------------------------------------

def test_a_symlink_swapped_to_a_new_daily_file_while_down_doubles_nothing(tmp_path):
    day1, day2, log = tmp_path / "log-20261101", tmp_path / "log-20261102", tmp_path / "log"
    rec, state = tmp_path / "records.jsonl", tmp_path / "run.state"
    # More lines than the reassembler remembers to tell a line read twice (131,072).
    first, second = puts(0, 100), puts(100, 7000)
    append(day1, first[:1000])
    os.symlink(day1.name, log)
    args = ["--metrics-port", "0", "--records", str(rec), "--state", str(state),
            "--flush-on-exit", *COMMON, str(log)]
    run = RunProcess(args)
    wait_caught_up(state, [log], proc=run)
    rc, _, err = run.stop()                         # open requests emitted as incomplete
    assert rc == 0, err
    append(day1, first[1000:])                      # the rest of day 1, written while down
    append(day2, second)
    os.symlink(day2.name, f"{log}.new")
    os.replace(f"{log}.new", log)                   # the swap: log -> log-20261102
    again = RunProcess(args)
    wait_caught_up(state, [log], proc=again)
    rc, _, err = again.stop()
    assert rc == 0, err
    assert canonical(read_records(rec)) == canonical(replayed(first + second))


def test_a_flush_at_the_stop_whose_save_fails_writes_no_request_twice(tmp_path, small_disk):
    """A way to issue 26 item 4's last shape (an `input_end` record beside another record
    of the same token) looked for and not found: `--flush-on-exit` writes the open
    requests as they stand, then the save at the stop fails (a full disk). The state saved
    before stands with those requests open; the next start continues them, and the
    records it makes again are recognised, not written twice."""
    log, rec, state = tmp_path / "dpm.log", tmp_path / "records.jsonl", small_disk / "run.state"
    lines = puts(0, 50) + puts(50, 5, putdone=False)
    append(log, lines)
    args = ["--metrics-port", "0", "--records", str(rec), "--state", str(state),
            "--state-interval", "0.05", "--flush-on-exit", *COMMON, str(log)]
    run = RunProcess(args)
    wait_caught_up(state, [log], proc=run)
    _fill(small_disk)
    rc, _, err = run.stop()
    assert rc == 2 and "No space left on device" in err, err
    os.unlink(small_disk / "filler")
    again = RunProcess(args)
    wait_caught_up(state, [log], proc=again)
    rc, _, err = again.stop()
    assert rc == 0, err
    assert canonical(read_records(rec)) == canonical(replayed(lines))
