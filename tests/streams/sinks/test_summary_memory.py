"""Issue 30: the end of a replay (the tally's figures loaded into the summary, then
rendered) holds the summary's values once, not two or five times (docs/sizing.md).

Measured with tracemalloc, which sees the bytes and arrays the values travel in: the
tally's figures are gathered by the extension (native/src/tally.rs) from real records."""

from __future__ import annotations

import os
import tracemalloc

import pytest

from dpmstream.parsers import extension
from dpmstream.streams.sinks.directories import Directory, DirectoryStats
from dpmstream.streams.sinks.summary import Summary
from dpmstream.streams.sinks.tally import Aggregates

pytestmark = pytest.mark.skipif(
    extension.compiled("Tally") is None and not os.environ.get("DPMSTREAM_REQUIRE_NATIVE"),
    reason="the extension is not built here")

REQUESTS = 60_000
PHASE_FIELDS = ("auth_ms", "request_ms", "queue_ms", "proc_ms", "poll_ms", "ready_wait_ms",
                "transfer_ms", "done_ms", "total_ms")


def request(i: int) -> dict:
    """A put whose phases are all above 256 ms (Python's cached small ints would hide a
    list's cost) and all distinct."""
    record = {"kind": "request", "op": "put", "status": "success", "accepted": i,
              "started": i, "ended": i + 10_000, "polls": 1000 + i}
    record.update((field, 1000 + i + k) for k, field in enumerate(PHASE_FIELDS))
    return record


def values_bytes(summary: Summary) -> int:
    every = [*summary.phases.values(), *summary.polls.values(), *summary.calls.values()]
    return sum(len(s.values) * s.values.itemsize for s in every)


@pytest.fixture
def tallied():
    """Aggregates whose tally gathered REQUESTS requests: 10 series of REQUESTS values."""
    summary, directories = Summary(), DirectoryStats()
    aggregates = Aggregates(summary, directories, compiled=True)
    assert aggregates.compiled
    for i in range(REQUESTS):
        aggregates.write(request(i))
    return aggregates


def test_loading_the_tallys_figures_frees_each_series_bytes_as_its_array_is_made(tallied):
    tracemalloc.start()
    try:
        tallied.close()  # take_summary_state() and Summary.load()
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    values = values_bytes(tallied.summary)
    assert values == 10 * REQUESTS * 8
    assert held < 1.1 * values
    # All of the series as bytes, then one array at a time: not all bytes beside all arrays.
    one_series = REQUESTS * 8
    assert peak < values + 3 * one_series, (peak, values)


def test_rendering_the_summary_keeps_no_sorted_copy_of_its_series(tallied):
    tallied.close()
    summary = tallied.summary
    tracemalloc.start()
    try:
        text = summary.render()
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "polls/request" in text
    assert held < 0.05 * values_bytes(summary)
    # One series sorted at a time (the list sorted() makes, then its array).
    assert peak < 6 * REQUESTS * 8 * 8, peak


def test_the_peak_of_creats_is_counted_as_the_sorted_steps_count_it():
    d = Directory()
    intervals = [(0, 10), (10, 20), (5, 15), (5, 5), (30, 40), (31, 39), (32, 33), (20, 20),
                 (40, 50), (8, 3)]
    for start, end in intervals:
        d.starts.append(start)
        d.ends.append(end)
    steps = sorted([(e, -1) for _, e in intervals] + [(s, 1) for s, _ in intervals])
    now = want = 0
    for _, step in steps:
        now += step
        want = max(want, now)
    assert d.peak() == want == 3
