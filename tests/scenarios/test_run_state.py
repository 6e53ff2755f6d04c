"""`dpmstream run --state` across a restart: a damaged state is refused with a clear
message, and LiveFeed's checkpoint with the records sink carries open requests into the
next process and writes no record twice. Driven in-process on real files."""

from __future__ import annotations

import json

from dpmstream.streams.live.follow import Follower
from dpmstream.streams.live.feed import LiveFeed
from dpmstream.streams.live.registry import Registry
from dpmstream.streams.sinks.jsonlines import JsonLinesSink
from tests.commands.test_run import append, canonical, put_lines, puts, read_records, replayed


def test_run_refuses_a_damaged_state_file_with_a_clear_message(tmp_path):
    import subprocess
    import sys
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


def test_run_refuses_a_state_with_a_damaged_file_entry(tmp_path):
    import subprocess
    import sys
    state = tmp_path / "run.state"
    Registry(state).save({"files": {str(tmp_path / "log"): {"offset": "x"}}, "pipeline": {}})
    done = subprocess.run(
        [sys.executable, "-m", "dpmstream", "run", "--no-metrics", "--state", str(state),
         str(tmp_path / "log")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "damaged entries" in done.stderr and "Traceback" not in done.stderr
