"""report/spans.py: the threads' busy intervals the report reads, gathered by the Python
BusySpans from the Python engine's on_span and by the compiled twin inside the compiled
engine (native/src/busy_spans.rs) must be the same spans, in the same order, cut to any
window the same way."""

from __future__ import annotations

import pytest

from dpmstream.parsers import engines, extension
from dpmstream.parsers.pipeline import Pipeline
from dpmstream.parsers.settings import ReassemblySettings
from dpmstream.report.analysis import FAST_DAEMON, NS_DAEMONS, python_concurrency
from dpmstream.report.spans import BusySpans, busy_spans
from dpmstream.streams.inputs import describe
from dpmstream.streams.progress import Progress
from dpmstream.streams.replay_files import replay_inputs

from tests.engine_inputs import real_inputs, scenario_input

CompiledBusySpans = extension.compiled("BusySpans")   # the compiled twin, or None
needs_compiled = pytest.mark.skipif(
    not engines.compiled_available() or CompiledBusySpans is None,
    reason="compiled engine not built (native/)")


def spans_of(engine: str, inp, spans):
    pipeline = Pipeline(lambda record: None, ReassemblySettings(), engine=engine)
    pipeline.reassembler.on_span = spans
    replay_inputs(pipeline, [describe(str(p)) for p in inp.paths], host=inp.host, profile=None,
                  tz=inp.tz, year=inp.year, progress=Progress(None, enabled=False))
    return spans


def windows(found: dict) -> list[tuple]:
    """No window, and windows cutting the data's span at its quarters, one end open or not."""
    every = sorted(t for spans in found.values() for span in spans for t in span)
    q1, mid, q3 = (every[len(every) * k // 4] for k in (1, 2, 3))
    return [(None, None), (mid, None), (None, mid), (q1, q3), (mid, mid)]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    directory = tmp_path_factory.mktemp("spans")
    lfc = next(i for i in real_inputs() if i.name == "real:lfc/*")
    return {"thesis": scenario_input(directory, "thesis"),
            "restart": scenario_input(directory, "restart"), "real:lfc/*": lfc}


@needs_compiled
@pytest.mark.parametrize("name", ["thesis", "restart", "real:lfc/*"])
def test_the_compiled_engines_spans_are_the_python_engines(inputs, name):
    inp = inputs[name]
    want = spans_of(engines.PYTHON, inp, BusySpans())
    got = spans_of(engines.COMPILED, inp, CompiledBusySpans(FAST_DAEMON, sorted(NS_DAEMONS)))
    # the compiled engine calling a Python BusySpans (the path of any other on_span)
    called = spans_of(engines.COMPILED, inp, BusySpans())
    found = want.windowed()
    if name == "real:lfc/*":
        assert found["ns"] and not found["slow"]
    else:
        assert all(found.values()), {k: len(v) for k, v in found.items()}
    for since, until in windows(found):
        assert got.windowed(since, until) == want.windowed(since, until), (since, until)
        assert called.windowed(since, until) == want.windowed(since, until), (since, until)
    assert got.fast_thread_ids() == called.fast_thread_ids() == want.fast_thread_ids()
    for since, until in windows(found):
        assert got.busy(since, until) == want.busy(since, until) == read(want, since, until), (
            since, until)
        assert held(got, since, until) == held(want, since, until) == want.busy(since, until)
    if found["fast"] and name != "real:lfc/*":
        assert want.fast_thread_ids()


@needs_compiled
def test_the_compiled_twin_called_as_the_python_engine_calls_it_keeps_the_same_spans():
    python, compiled = BusySpans(), CompiledBusySpans(FAST_DAEMON, sorted(NS_DAEMONS))
    calls = [("h", "dpm", 1, 2, "proc", 10, 20), ("h", "dpm", 1, 3, "call", 5, 6),
             ("h", "lfc", 4, 5, "call", 30, 40), ("h", "dpns", 4, 6, "call", 41, 42),
             ("h", "srm", 7, 8, "call", 1, 2), ("h", "dpm", 1, None, "call", 50, 50),
             ("h", "dpm", 1, -1, "call", 51, 52), ("h", "dpm", 1, 3, "call", 53, 54)]
    for span in calls:
        python(*span)
        compiled(*span)
    assert compiled.windowed() == python.windowed() == {
        "slow": [(10, 20)], "fast": [(5, 6), (50, 50), (51, 52), (53, 54)],
        "ns": [(30, 40), (41, 42)]}
    # A call's thread, once, when known: not a processing run's (2), nor another daemon's.
    assert compiled.fast_thread_ids() == python.fast_thread_ids() == [3]
    assert compiled.windowed(20, 41) == python.windowed(20, 41) == {
        "slow": [(10, 20)], "fast": [], "ns": [(30, 40), (41, 42)]}


def read(spans, since, until) -> dict:
    """What the report reads of the windowed spans, in Python: each kind's concurrency
    steps, how many spans, their summed lengths."""
    out = {}
    for kind, found in spans.windowed(since, until).items():
        steps = python_concurrency(found)
        out[kind] = (steps.times, steps.levels, len(found), sum(b - a for a, b in found))
    return out


def held(spans, since, until) -> dict:
    """`held`'s steps (the compiled twin's kept in the extension) read out as `busy` gives them."""
    return {kind: (steps.times, steps.levels, count, ms)
            for kind, (steps, count, ms) in spans.held(since, until).items()}


@needs_compiled
def test_the_compiled_twin_reads_its_spans_as_the_report_does():
    python, compiled = BusySpans(), CompiledBusySpans(FAST_DAEMON, sorted(NS_DAEMONS))
    calls = [("h", "dpm", 1, 2, "proc", 10, 20), ("h", "dpm", 1, 3, "call", 5, 9),
             ("h", "dpm", 1, 3, "call", 7, 8), ("h", "dpm", 1, 3, "call", 9, 9),
             ("h", "dpm", 1, 4, "call", 12, 11),    # ends before it starts: no step, -1 ms
             ("h", "lfc", 4, 5, "call", 30, 40)]
    for span in calls:
        python(*span)
        compiled(*span)
    want = {"slow": ([10, 20], [1, 0], 1, 10), "fast": ([5, 7, 8, 9], [1, 2, 1, 0], 4, 4),
            "ns": ([30, 40], [1, 0], 1, 10)}
    assert compiled.busy() == python.busy() == read(python, None, None) == want
    assert held(compiled, None, None) == held(python, None, None) == want
    assert compiled.busy(8, 10) == python.busy(8, 10) == {
        "slow": ([10, 20], [1, 0], 1, 10), "fast": ([5, 7, 8, 9], [1, 2, 1, 0], 3, 5),
        "ns": ([], [], 0, 0)}


def test_each_engine_gets_its_own_kind_of_spans():
    assert isinstance(busy_spans(compiled=False), BusySpans)
    if CompiledBusySpans is not None:
        assert isinstance(busy_spans(compiled=True), CompiledBusySpans)
