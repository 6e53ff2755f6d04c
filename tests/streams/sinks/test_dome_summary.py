"""The DOME section of the summary (streams/sinks/dome_summary.py): a call's row labels."""

from dpmstream.parsers.dome_records import code_class, command_label
from dpmstream.streams.sinks import dome_summary
from dpmstream.streams.sinks.dome_summary import DomeSummary


def call(command, code, role="head", start=1_000, end=1_500):
    return {"kind": "dome_call", "host": "dpmhead01", "pid": 1, "tid": 2, "role": role,
            "command": command, "http_code": code, "caller": None, "remote_client": None,
            "start": start, "end": end, "duration": None if end is None else end - start,
            "cut": int(end is None), "whole_seconds": 0}


def test_calls_are_counted_by_bounded_labels_past_the_combinations_it_remembers(monkeypatch):
    monkeypatch.setattr(dome_summary, "MAX_CALL_LABELS", 4)
    summary = DomeSummary()
    calls = [call(f"dome_x{i % 7}", 200 + i % 400, role=None if i % 5 == 0 else "head")
             for i in range(300)] + [call("dome_put", 201), call("dome_put", None, end=None)]
    for record in calls:
        summary.write(record)
    expected = {}
    for r in calls:
        key = (r["role"] or "?", command_label(r["command"]), code_class(r["http_code"]))
        expected[key] = expected.get(key, 0) + 1
    assert dict(summary.calls) == expected
    assert list(summary.calls) == list(expected)   # in the order first seen: rows tie so


def test_a_call_covers_its_start_and_end_and_a_cut_call_its_start():
    summary = DomeSummary()
    summary.write(call("dome_put", 201, start=5_000, end=7_000))
    summary.write(call("dome_put", None, start=4_000, end=None))
    summary.write(call("dome_get", 200, start=6_000, end=9_000))
    assert (summary.first_ms, summary.last_ms) == (4_000, 9_000)
