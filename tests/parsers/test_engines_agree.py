"""The compiled reassembly engine agrees with the Python one (parsers/engines.py).

Python's Reassembler is the reference. Each input (every simulator scenario, the real
name-server and SRM logs, two corpora of bad input: tests/engine_inputs.py) runs through
a pipeline of each engine, read the way `dpmstream replay` reads it (chunks, the hot
path) and the way the Kafka worker does (line by line, with receive times); the records
(in emission order) and every counter and gauge, along the way and at the end, must be
identical. State saved by one engine must restore in the other: cut in two, the run
gives what the Python engine cut at the same place gives, state included.

Emission order is exact: record for record, in order. The Python engine's own order
depends on no set's iteration (a replaced process's open calls are cut lowest thread id
first, as the compiled engine cuts them; engine_helpers.order_is_free checks it).

DPMSTREAM_PURE_PYTHON=1 turns the compiled engine off along with the compiled line
parser, so the pure-parser variant compares the Python engine with the pure parser
against the Python engine with the compiled parser.

The compiled engine missing: these tests skip, unless DPMSTREAM_REQUIRE_NATIVE is set
(`make test` where cargo exists), where they fail. To try the harness without it,
DPMSTREAM_DIFF_STANDIN=python serves "compiled" by the Python engine (all must pass), and
a name of STANDINS below by a deliberately wrong engine (the tests must fail).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dpmstream.parsers import engines, extension
from dpmstream.parsers.reassembly import Reassembler

from tests.engine_helpers import (
    SAME_RECORDS_OTHER_ORDER, cross_engines, differences, order_is_free,
    record_differences, run_engine,
)
from tests.engine_inputs import all_input_names, make_input, real_inputs
from tests.helpers import sampled

PYTHON, COMPILED = engines.PYTHON, engines.COMPILED
REQUIRED = bool(os.environ.get("DPMSTREAM_REQUIRE_NATIVE"))
STANDIN = os.environ.get("DPMSTREAM_DIFF_STANDIN")
MODES = ("replay", "lines")  # the chunked path of replay; the worker's line by line
REAL = {inp.name: inp for inp in real_inputs()}
REPO = Path(__file__).parents[2]
# `make check` runs each sweep below on a sample of these inputs (the corpora of bad input,
# two heads with rotation, a restart), each mode and direction once; `make test` on all.
CROSSINGS = {"python-to-compiled": (PYTHON, COMPILED), "compiled-to-python": (COMPILED, PYTHON)}


# -- deliberately wrong engines: the comparison must catch each ----------------------

class DropsARecord(Reassembler):
    """Loses the 100th record it emits (its counters stay right)."""

    @property
    def emit(self):
        return self._emit_but_one

    @emit.setter
    def emit(self, target):  # the Linker sets it after construction (Linker.attach)
        self._target, self._emitted = target, 0

    def _emit_but_one(self, record):
        self._emitted += 1
        if self._emitted != 100:
            self._target(record)


class SwapsTwoRecords(DropsARecord):
    """Emits its 100th record after the 101st."""

    def _emit_but_one(self, record):
        self._emitted += 1
        if self._emitted == 100:
            self._held = record
            return
        self._target(record)
        if self._emitted == 101:
            self._target(self._held)


class MiscountsLateLines(Reassembler):
    def finish(self):
        super().finish()
        self.stats.late_lines += 1


class MisreportsInFlight(Reassembler):
    def in_flight_by_host(self):
        return {host: n + 1 for host, n in super().in_flight_by_host().items()}


class CorruptsItsState(Reassembler):
    """Saves one poll too many for the first request of each take."""

    def take_changes(self):
        changes = super().take_changes()
        for state in changes.requests.values():
            if state is not None:
                state["polls"] += 1
                break
        return changes


STANDINS = {"python": Reassembler, "drops-a-record": DropsARecord,
            "swaps-two-records": SwapsTwoRecords, "miscounts-late-lines": MiscountsLateLines,
            "misreports-in-flight": MisreportsInFlight, "corrupts-its-state": CorruptsItsState}


def serve_compiled_by(monkeypatch, engine_class):
    monkeypatch.setattr(engines, "CompiledReassembler", engine_class)
    monkeypatch.setattr(engines, "compiled_available", lambda: True)


@pytest.fixture(scope="module", autouse=True)
def standin():
    if STANDIN is None:
        yield None
        return
    with pytest.MonkeyPatch.context() as mp:
        serve_compiled_by(mp, STANDINS[STANDIN])
        yield STANDIN


needs_compiled = pytest.mark.skipif(
    not (engines.compiled_available() or REQUIRED or STANDIN),
    reason="compiled engine not built (parsers/compiled_reassembly.py, native/)")
needs_compiled_parser = pytest.mark.skipif(
    extension.compiled("FastLines") is None, reason="compiled line parser not built: pure is all there is")


@pytest.fixture
def compiled():
    """The compiled engine's name, once it is sure to be there."""
    assert engines.compiled_available(), (
        "DPMSTREAM_REQUIRE_NATIVE is set but the compiled engine is not built "
        "(parsers/compiled_reassembly.py missing, native/ not built, or DPMSTREAM_PURE_PYTHON set)")
    return COMPILED


# -- inputs and the Python engine's outcomes, made once per module -------------------

@pytest.fixture(scope="module")
def made(tmp_path_factory):
    directory = tmp_path_factory.mktemp("engines")
    inputs = {}

    def get(name):
        if name in REAL:
            return REAL[name]
        if name not in inputs:
            inputs[name] = make_input(directory, name)
        return inputs[name]
    return get


@pytest.fixture(scope="module")
def reference(made):
    """The Python engine's outcome (compiled line parser where built), run once each."""
    cache = {}

    def get(name, mode="replay", how="run"):
        key = (name, mode, how)
        if key not in cache:
            inp = made(name)
            if how == "run":
                cache[key] = run_engine(PYTHON, inp, mode=mode)
            else:  # a state crossing python -> python, the control
                cache[key] = cross_engines(PYTHON, PYTHON, inp)
        return cache[key]
    return get


def explain(found):
    return "the engines differ:\n" + "\n".join(line[:600] for line in found)


# -- the two engines agree ------------------------------------------------------------

def test_the_compiled_engine_is_built_where_the_install_could_build_it():
    # `make test` sets DPMSTREAM_REQUIRE_NATIVE when cargo is on PATH: a compiled engine
    # that did not build or import must not pass as "pure Python".
    if not REQUIRED:
        pytest.skip("DPMSTREAM_REQUIRE_NATIVE not set")
    assert engines.compiled_available(), "the compiled engine was not built by the install"
    assert engines.choose(None) == COMPILED


@needs_compiled
@pytest.mark.parametrize("name,mode", sampled(
    [(name, mode) for name in all_input_names() for mode in MODES],
    keep=[("bad-input", "lines"), ("two-heads", "replay")]))
def test_both_engines_give_the_same_records_and_counters(made, reference, compiled, name, mode):
    # Every input in each mode (`make check`: the bad corpus line by line, two heads in chunks).
    inp = made(name)
    got = run_engine(compiled, inp, mode=mode)
    found = differences(reference(name, mode), got)
    assert not found, explain(found)


# Settings that make the bounds bite on small inputs: the in-flight cap evicts, the thread
# cap drops threads, the timeout expires requests, threads and sessions, the grace retires
# processes early.
TIGHT = {
    "in-flight-cap": {"max_in_flight": 25},
    "thread-cap": {"max_threads": 12},
    "short-timeout": {"timeout_s": 1.5},
    "short-grace": {"grace_s": 0.5},
}


CAPPED = ["scenario:mixed", "scenario:stray-pids", "scenario:restart", "scenario:same-dir",
          "bad-input"]


@needs_compiled
@pytest.mark.parametrize("name,tight", sampled(
    [(name, tight) for name in CAPPED for tight in sorted(TIGHT)],
    keep=[("bad-input", "in-flight-cap"), ("scenario:restart", "short-grace"),
          ("scenario:stray-pids", "short-timeout"), ("scenario:mixed", "thread-cap")]))
def test_both_engines_agree_where_caps_timeouts_and_grace_bite(made, compiled, name, tight):
    # Every bound on every input (`make check`: each bound once, on four of the inputs).
    inp = made(name)
    settings = TIGHT[tight]
    got = run_engine(compiled, inp, mode="replay", settings=settings)
    want = run_engine(PYTHON, inp, mode="replay", settings=settings)
    bit = {k: v for k, v in want.counters["reassembly"].items()
           if k in ("evictions", "thread_evictions", "expired", "expired_threads",
                    "stray_processes", "restarts") and v}
    assert bit or tight == "short-grace", f"{tight} changed nothing on {name}: {want.counters}"
    found = differences(want, got)
    assert not found, explain(found)


@needs_compiled
@pytest.mark.parametrize("mode,memory", sampled(
    [(mode, memory) for mode in MODES for memory in (2, 30, 400)],
    keep=[("replay", 2), ("lines", 30), ("replay", 400)]))
def test_both_engines_forget_the_same_lines_with_a_short_duplicate_memory(
        made, compiled, memory, mode):
    # The bad-input corpus repeats chunks and holds an overlapping copy: with a memory of a
    # few lines some repeats are no longer recognised, and which must not depend on the engine.
    inp = made("bad-input")
    short = {"duplicate_memory": memory}
    want = run_engine(PYTHON, inp, mode=mode, settings=short)
    if memory == 2:
        full = run_engine(PYTHON, inp, mode=mode)
        assert (want.counters["reassembly"]["duplicate_lines"]
                < full.counters["reassembly"]["duplicate_lines"]), "the short memory forgot nothing"
    got = run_engine(compiled, inp, mode=mode, settings=short)
    found = differences(want, got)
    assert not found, explain(found)


@needs_compiled
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(REAL))
def test_both_engines_agree_on_real_name_server_and_srm_logs(made, reference, compiled, name, mode):
    got = run_engine(compiled, made(name), mode=mode)
    found = differences(reference(name, mode), got)
    assert not found, explain(found)
    assert reference(name, mode).counters["lines"], "nothing read"


@needs_compiled_parser
@pytest.mark.parametrize("name,mode", sampled(
    [(name, mode) for name in all_input_names() + sorted(REAL) for mode in MODES],
    keep=[("bad-input", "replay"), ("bad-syslog", "lines"), ("real:lfc/*", "replay")]))
def test_the_pure_python_parser_gives_the_python_engine_the_same_input(made, reference, name, mode):
    # DPMSTREAM_PURE_PYTHON turns the compiled engine off too: Python engine both sides.
    # Every input in each mode (`make check`: both bad corpora and the real LFC files).
    got = run_engine(PYTHON, made(name), mode=mode, pure=True)
    found = differences(reference(name, mode), got)
    assert not found, explain(found)


# -- state saved by one engine restores in the other ----------------------------------

@needs_compiled
@pytest.mark.parametrize("name,crossing", sampled(
    [(name, crossing) for name in all_input_names() for crossing in CROSSINGS],
    keep=[("two-heads", "python-to-compiled"), ("scenario:restart", "compiled-to-python")]))
def test_state_saved_by_one_engine_restores_in_the_other(made, reference, compiled, name,
                                                         crossing):
    # Against the Python engine cut at the same place: the same records, the same state
    # at every take (threads, requests, ended groups, clock, sources, linker), the same
    # counters after the restore. Every input both ways (`make check`: two heads one way,
    # a restart the other).
    first, second = CROSSINGS[crossing]
    inp = made(name)
    got = cross_engines(first, second, inp)
    found = differences(reference(name, how="cross"), got)
    assert not found, explain(found)


# The Python engine's state does not carry everything (its recent-lines memory for
# duplicates, held far-ahead lines, the order of activity): cut where the bad input
# puts duplicated and far-ahead lines, it gives other records than straight through.
STATE_GAPS = {"bad-input": "duplicate memory, held lines and activity order are not state"}


def _cut_in_two(name):
    # Every input in `make test`; `make check`: two heads, a restart, and the bad corpus
    # (which must not give the records of one run).
    marks = [] if name in ("two-heads", "scenario:restart", "bad-input") else [pytest.mark.slow]
    if name in STATE_GAPS:
        marks.append(pytest.mark.xfail(reason=STATE_GAPS[name], strict=True))
    return pytest.param(name, marks=marks)


@pytest.mark.parametrize("name", [_cut_in_two(n) for n in all_input_names()])
def test_the_python_engine_cut_in_two_gives_the_records_of_one_run(made, reference, name):
    # The control the crossings are held to: restored, the Python engine gives the
    # records of an uninterrupted run. In another order, like tests/parsers/
    # test_pipeline.py allows: a restore lays open threads and requests out by their
    # latest line, not in the order they were last active.
    straight = run_engine(PYTHON, made(name), mode="chunks")
    crossed = reference(name, how="cross")
    found = record_differences(straight.records, crossed.records, order="multiset")
    assert not found, explain(found)
    assert straight.records


# -- the comparison can fail ----------------------------------------------------------

SMALL = "scenario:mixed"  # no restart: its emission order is the Python engine's own


@pytest.fixture(scope="module")
def small(made):
    return made(SMALL)


@pytest.mark.parametrize("wrong,what", [
    (DropsARecord, "records: "), (SwapsTwoRecords, SAME_RECORDS_OTHER_ORDER),
    (MiscountsLateLines, "counters: reassembly"),
    (MisreportsInFlight, "snapshot 0: in_flight_by_host")])
def test_the_comparison_catches_a_wrong_engine(monkeypatch, small, reference, wrong, what):
    serve_compiled_by(monkeypatch, wrong)
    got = run_engine(COMPILED, small, mode="replay")
    found = differences(reference(SMALL), got)
    assert found and found[0].startswith(what), found[:3]


def test_the_comparison_catches_a_dropped_record(monkeypatch, small, reference):
    serve_compiled_by(monkeypatch, DropsARecord)
    got = run_engine(COMPILED, small, mode="lines")
    want = reference(SMALL, "lines")
    found = differences(want, got)
    # One record fewer (a linked call dropped also changes its request's ns_calls).
    n = len(want.records)
    assert found[0] == f"records: {n} wanted, {n - 1} got", found[:3]


@pytest.mark.parametrize("first,second", [(PYTHON, COMPILED), (COMPILED, PYTHON)])
def test_the_comparison_catches_state_that_does_not_restore(monkeypatch, small, reference,
                                                             first, second):
    serve_compiled_by(monkeypatch, CorruptsItsState)
    got = cross_engines(first, second, small)
    found = differences(reference(SMALL, how="cross"), got)
    assert any(line.startswith("state take") and "polls" in line for line in found), found[:5]


def test_a_python_stand_in_agrees_everywhere_the_compiled_engine_is_held_to(monkeypatch, small,
                                                                            reference):
    # The harness itself: the same engine on both sides finds nothing, in every mode and
    # across a cut, and the run saw something to compare.
    serve_compiled_by(monkeypatch, Reassembler)
    for mode in ("replay", "lines", "chunks"):
        found = differences(run_engine(PYTHON, small, mode=mode),
                            run_engine(COMPILED, small, mode=mode))
        assert not found, explain(found)
    for first, second in ((PYTHON, COMPILED), (COMPILED, PYTHON)):
        assert not differences(reference(SMALL, how="cross"),
                               cross_engines(first, second, small))
    want = reference(SMALL)
    assert len(want.records) > 300 and want.snapshots and want.spans
    assert want.counters["linking"]["ns_calls_linked"] and want.counters["in_flight"] == 0
    crossed = reference(SMALL, how="cross")
    assert len(crossed.states) >= 4 and any(take for take in crossed.states)


@pytest.mark.parametrize("name", ["scenario:restart", "scenario:stray-pids", SMALL])
def test_the_python_engines_order_depends_on_no_set_iteration(made, name):
    # A restart (or a stray process retired) cuts the old process's open calls, one
    # record each: walked from a set of thread ids, its order was CPython's and the
    # engines could only be compared as multisets. Lowest thread id first, iterating the
    # set the other way round changes nothing, so the records are compared in order.
    inp = made(name)
    assert not order_is_free(lambda: run_engine(PYTHON, inp))


def test_the_python_engines_order_of_two_hosts_depends_on_no_hash_seed(made, tmp_path):
    # The linker releases what each host holds host by host; walked from a set of host
    # names, the order of two heads' records was the string hash's, which PYTHONHASHSEED
    # changes from run to run. Hosts are released in name order, by both engines.
    inp = made("two-heads")
    script = (
        "import sys, json\n"
        "from pathlib import Path\n"
        "from tests.engine_helpers import LogInput, run_engine\n"
        "inp = LogInput('two-heads', tuple(map(Path, sys.argv[1:])), host=%r, tz=%r, year=%r)\n"
        "print(json.dumps([[r.get('host'), r.get('token'), r.get('started')] "
        "for r in run_engine('python', inp).records]))\n" % (inp.host, inp.tz, inp.year))
    orders = set()
    for seed in ("0", "1", "2", "3"):
        out = subprocess.run([sys.executable, "-c", script, *map(str, inp.paths)],
                             capture_output=True, text=True, check=True, cwd=REPO,
                             env={**os.environ, "PYTHONHASHSEED": seed})
        orders.add(out.stdout)
    assert len(json.loads(next(iter(orders)))) > 100
    assert len(orders) == 1
