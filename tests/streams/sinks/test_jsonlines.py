"""streams/sinks/jsonlines.py: the records file, and how it recognises after a crash what
it had already written."""

from __future__ import annotations

import json

from dpmstream.parsers.pipeline import Pipeline
from dpmstream.streams.sinks.jsonlines import JsonLinesSink
from tests.commands.test_run import statg_lines


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
