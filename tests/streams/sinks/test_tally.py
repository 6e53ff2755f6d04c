"""streams/sinks/tally.py and native/src/tally.rs: the summary and the directory table
gathered in the extension are the ones the Python sinks (the reference) gather from the
same records: the same figures, the same order, the same reservoir sample."""

from __future__ import annotations

import os
import random
from array import array

import pytest

from dpmstream.parsers import engines
from dpmstream.streams.sinks import summary as summary_module
from dpmstream.parsers import extension
from dpmstream.streams.sinks.directories import DirectoryStats
from dpmstream.streams.sinks.fan_out import FanOut
from dpmstream.streams.sinks.summary import Summary
from dpmstream.streams.sinks.tally import Aggregates

from dpmstream.parsers.pipeline import Pipeline
from dpmstream.streams.inputs import describe
from dpmstream.streams.progress import Progress
from dpmstream.streams.replay_files import replay_inputs

from tests.engine_helpers import CHUNK_LINES, run_engine
from tests.engine_inputs import make_input, real_inputs

pytestmark = pytest.mark.skipif(
    extension.compiled("Tally") is None and not os.environ.get("DPMSTREAM_REQUIRE_NATIVE"),
    reason="the extension is not built here")


def python_sinks(records, max_dirs=100_000):
    summary, directories = Summary(), DirectoryStats(max_dirs=max_dirs)
    for record in records:
        summary.write(record)
        directories.write(record)
    return summary, directories


def tallied_sinks(records, max_dirs=100_000):
    summary, directories = Summary(), DirectoryStats(max_dirs=max_dirs)
    aggregates = Aggregates(summary, directories, compiled=True)
    assert aggregates.compiled
    for record in records:
        aggregates.write(record)
    aggregates.close()
    return summary, directories


def series_state(series):
    rng = series._rng.getstate() if series._rng is not None else None
    return (series.count, series.sum, series.max, list(series.values), rng)


def state_of(summary: Summary, directories: DirectoryStats) -> dict:
    """Everything both sinks hold, in their dicts' order."""
    return {
        "cover": (summary.first_ms, summary.last_ms),
        "statuses": dict(summary.statuses),
        "phases": [(k, series_state(s)) for k, s in summary.phases.items()],
        "polls": [(k, series_state(s)) for k, s in summary.polls.items()],
        "calls": [(k, series_state(s)) for k, s in summary.calls.items()],
        "call_errors": dict(summary.call_errors),
        "proc_ms": directories.proc_ms,
        "dropped": directories.dropped_dirs,
        "dirs": [(name, d.calls, d.ms, d.linked_ms, series_state(d.creats), list(d.starts),
                  list(d.ends), d.folded_peak, d.cutoff, d.fold_at, d.peak())
                 for name, d in directories.dirs.items()],
    }


SIMULATED = ("scenario:thesis", "scenario:multi-file", "bad-input")


@pytest.fixture(scope="module")
def reference_runs(tmp_path_factory):
    """Each simulated input's name -> (the input, the Python engine's records of it, the
    reference), made and run once for the module."""
    runs = {}
    for name in SIMULATED:
        inp = make_input(tmp_path_factory.mktemp("tally"), name)
        runs[name] = (inp, run_engine(engines.PYTHON, inp).records)
    return runs


@pytest.fixture(scope="module")
def simulated_records(reference_runs):
    """Requests and name-server calls of two scenarios (one with its DPNS log linked)."""
    records = [r for name in SIMULATED for r in reference_runs[name][1]]
    assert {r["kind"] for r in records} == {"request", "call"}
    assert any(r["daemon"] == "dpns" and r.get("token") for r in records if r["kind"] == "call")
    return records


def test_simulated_records_give_the_same_summary_and_directories(simulated_records):
    want, got = python_sinks(simulated_records), tallied_sinks(simulated_records)
    assert state_of(*got) == state_of(*want)
    assert got[0].render() == want[0].render()
    assert got[1].render() == want[1].render() and got[1].top(50) == want[1].top(50)


def replayed_into_the_tally(inp):
    """A replay as `dpmstream replay` without --out runs it: the compiled engine hands its
    records straight to the tally, which forwards them nowhere (no dict is made)."""
    summary, directories = Summary(), DirectoryStats(max_dirs=100_000)
    aggregates = Aggregates(summary, directories, compiled=True)
    pipeline = Pipeline(aggregates.on_record(FanOut([])), engine=engines.COMPILED,
                        expect_ns=any(".dpns" in p.name for p in inp.paths))
    replay_inputs(pipeline, [describe(str(p)) for p in inp.paths], host=inp.host, profile=None,
                  tz=inp.tz, year=inp.year, progress=Progress(None, enabled=False),
                  chunk_lines=CHUNK_LINES)
    handed = aggregates.tally.engine_records
    aggregates.close()
    return summary, directories, handed


@pytest.mark.skipif(not engines.compiled_available(), reason="the compiled engine is not built")
@pytest.mark.parametrize("name", [*SIMULATED, "real"])
def test_records_the_engine_hands_over_undicted_are_tallied_as_their_dicts(name, reference_runs):
    runs = ([(inp, run_engine(engines.PYTHON, inp).records) for inp in real_inputs()]
            if name == "real" else [reference_runs[name]])
    total = 0
    for inp, want_records in runs:
        want = python_sinks(want_records)
        summary, directories, handed = replayed_into_the_tally(inp)
        assert handed == len(want_records), inp.name
        assert state_of(summary, directories) == state_of(*want), inp.name
        assert summary.render() == want[0].render()
        assert directories.top(50) == want[1].top(50)
        total += handed
    assert total > 0, "no records: nothing was compared"


def test_past_the_reservoir_the_sample_is_pythons_and_goes_on_after_loading(
        simulated_records, monkeypatch):
    monkeypatch.setattr(summary_module, "RESERVOIR", 7)
    half = len(simulated_records) // 2
    want, got = python_sinks(simulated_records[:half]), tallied_sinks(simulated_records[:half])
    assert any(s.sampled for s in want[0].phases.values())
    assert state_of(*got) == state_of(*want)
    # the loaded series draw on from where the tally's twister stopped
    for record in simulated_records[half:]:
        for summary, directories in (want, got):
            summary.write(record)
            directories.write(record)
    assert state_of(*got) == state_of(*want)
    assert got[0].render() == want[0].render()


def test_past_the_directory_cap_the_same_directories_are_dropped(simulated_records):
    want = python_sinks(simulated_records + ODD_RECORDS, max_dirs=1)
    got = tallied_sinks(simulated_records + ODD_RECORDS, max_dirs=1)
    assert want[1].dropped_dirs > 0
    assert state_of(*got) == state_of(*want)


def ns_call(path, started, ended, **extra):
    record = {"kind": "call", "host": "h", "daemon": "dpns", "op": "creat", "path": path,
              "started": started, "ended": ended, "duration_ms": ended and ended - started,
              "rc": 0, "token": None}
    record.update(extra)
    return record


ODD_RECORDS = [
    {"kind": "request", "op": None, "status": "incomplete", "accepted": None, "started": 5,
     "ended": 9, "total_ms": 4, "polls": 0, "proc_ms": None},
    {"kind": "request", "op": "", "status": "failed", "started": 1, "ended": 2, "polls": 3,
     "auth_ms": 0, "proc_ms": 7},
    ns_call("top-level-name", 10, 20),
    ns_call("/", 10, 20),
    ns_call("/f", 10, 30, token="t"),
    ns_call("/d/f", 30, 10),                     # ends before it starts: 0 ms
    ns_call("/d/g", 10, None, rc=None),          # no return: no directory, an error
    ns_call("", 10, 20),                         # no path: no directory
    ns_call("/d/h", 10, 20, daemon="dpm", op="dpm_get"),
    ns_call("/d/i", 10, 20, op="stat", token=""),
    ns_call("/d/j", 10, 20, rc=2, duration_s=None),
]


def test_closing_twice_keeps_the_figures_and_the_values_are_compact_arrays(simulated_records):
    summary, directories = Summary(), DirectoryStats()
    aggregates = Aggregates(summary, directories, compiled=True)
    for record in simulated_records:
        aggregates.write(record)
    aggregates.close()
    aggregates.close()
    assert state_of(summary, directories) == state_of(*python_sinks(simulated_records))
    assert all(isinstance(s.values, array) for s in summary.phases.values())


def test_odd_records_are_counted_as_the_python_sinks_count_them():
    want, got = python_sinks(ODD_RECORDS), tallied_sinks(ODD_RECORDS)
    assert state_of(*got) == state_of(*want)
    assert ("?", "incomplete") in got[0].statuses and ("?", "failed") in got[0].statuses
    assert [name for name, *_ in state_of(*got)["dirs"]] == ["top-level-name", "/", "/d"]


def test_a_record_without_its_kind_is_an_error_in_both():
    with pytest.raises(KeyError):
        Summary().write({"op": "put"})
    aggregates = Aggregates(Summary(), DirectoryStats(), compiled=True)
    with pytest.raises(KeyError):
        aggregates.write({"op": "put"})


def test_the_tally_forwards_each_record_to_the_other_sinks_after_counting_it():
    seen = []

    class Recorder:
        def write(self, record):
            seen.append(record)

        def close(self):
            pass

    aggregates = Aggregates(Summary(), DirectoryStats(), compiled=True)
    on_record = aggregates.on_record(FanOut([Recorder()]))
    for record in ODD_RECORDS:
        on_record(record)
    aggregates.close()
    assert seen == ODD_RECORDS
    assert sum(aggregates.summary.statuses.values()) == 2


def test_without_the_extension_or_with_a_live_window_the_python_sinks_do_it():
    assert not Aggregates(Summary(), DirectoryStats(), compiled=False).compiled
    assert not Aggregates(Summary(), DirectoryStats(keep_ms=60_000), compiled=True).compiled
    summary = Summary()
    python = Aggregates(summary, DirectoryStats(), compiled=False)
    python.on_record(FanOut([]))(ODD_RECORDS[0])
    assert summary.statuses[("?", "incomplete")] == 1


def test_a_restored_series_samples_on_as_the_original():
    original = summary_module.Series()
    rng = random.Random(1)
    for _ in range(3):
        rng.random()
    original._rng = rng
    copy = summary_module.Series.restored(0, 0, None, b"", rng.getstate()[1])
    assert copy._rng.getstate() == original._rng.getstate()


def test_a_year_of_creats_is_folded_alike_and_keeps_the_peak(monkeypatch):
    """Creat intervals older than FOLD_MS are folded into the peak by both tallies at the
    same points (small FOLD_AT here: a long replay's bound, in a second)."""
    from dpmstream.streams.sinks import directories as directories_module
    monkeypatch.setattr(directories_module, "FOLD_AT", 64)
    rng = random.Random(7)
    records, t = [], 0
    for _ in range(5_000):
        t += rng.randrange(0, 120_000)
        records.append(ns_call(f"/d/{rng.randrange(3)}/f", t, t + rng.randrange(0, 300_000)))
    want, got = python_sinks(records), tallied_sinks(records)
    assert any(d.cutoff is not None for d in want[1].dirs.values())
    assert state_of(*got) == state_of(*want)
