"""The pieces of `dpmstream run --state`: the registry file, the records sink that
recognises what it already wrote, and LiveFeed's checkpoint that carries open requests
across a restart. Driven in-process on real files."""

from __future__ import annotations

import json
import os

import pytest

from dpmstream.streams.live.follow import Follower
from dpmstream.streams.live.feed import LiveFeed
from dpmstream.parsers.pipeline import Pipeline
from dpmstream.streams.live.registry import Registry, RegistryError
from dpmstream.streams.sinks.jsonlines import JsonLinesSink
from tests.commands.test_run import (
    append, canonical, put_lines, puts, read_records, replayed, statg_lines)


def test_registry_save_replaces_the_file_whole_and_private(tmp_path):
    reg = Registry(tmp_path / "sub" / "run.state")
    reg.save({"files": {"a": 1}})
    reg.save({"files": {"a": 2}})
    assert reg.load() == {"files": {"a": 2}, "version": 1}
    assert os.stat(reg.path).st_mode & 0o777 == 0o600
    assert os.listdir(tmp_path / "sub") == ["run.state"]     # no temporary left


def test_registry_absent_is_a_first_start_and_garbage_a_clear_error(tmp_path):
    assert Registry(tmp_path / "none").load() is None
    (tmp_path / "bad").write_text("{not json")
    with pytest.raises(RegistryError, match="not a dpmstream registry"):
        Registry(tmp_path / "bad").load()


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


def _calls(n):
    """n distinct call records, as the pipeline makes them."""
    out = []
    pipeline = Pipeline(on_record=out.append)
    src = pipeline.source("dpns", host="head01", tz="UTC", year=2011)
    for i in range(n):
        for line in statg_lines(i, 1000 * i):
            src.feed(line)
    pipeline.finish()
    return out


def test_sink_recognises_each_record_written_after_the_checkpoint_once(tmp_path):
    path = tmp_path / "records.jsonl"
    calls = _calls(4)
    with JsonLinesSink(path) as sink:
        sink.write(calls[0])
        size = sink.sync()
        for record in calls[1:3]:
            sink.write(record)
        sink.flush()
    with open(path, "ab") as fh:
        fh.write(b'{"kind":"call","ho')                      # cut by the crash
    with JsonLinesSink(path, written_since=size) as sink:
        assert sink.to_replay == 2
        assert [sink.is_replayed(calls[i]) for i in (1, 1, 2, 3)] == [True, False, True, False]
        assert not sink.replaying
    lines = path.read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(x) for x in lines)   # the cut line is gone


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


def test_a_checkpoint_keeps_only_the_newest_groups_of_ended_tokens(tmp_path, monkeypatch):
    import dpmstream.streams.live.feed as livefeed
    monkeypatch.setattr(livefeed, "FINISHED_GROUPS_SAVED", 2)
    log = tmp_path / "dpm.log"
    append(log, puts(0, 4 * 1024 + 10))             # five groups of ended tokens
    feed = LiveFeed([Follower(log)], host="head01", tz="UTC", year=2011, keep_state=True)
    while feed.poll_once():
        pass
    saved = feed.checkpoint()["pipeline"]
    feed.close()
    assert sorted(k for k in saved if k.startswith("f|")) == ["f|3", "f|4"]


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
