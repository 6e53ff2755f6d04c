"""parsers/compiled_reassembly.py: the compiled engine as a Python object (what it does
is pinned against the Python engine in test_engines_agree.py)."""

import gc
import os
import sys
import threading

import pytest

from dpmstream.parsers import engines
from dpmstream.parsers.pipeline import Pipeline
from dpmstream.parsers.profiles import resolve_profile

pytestmark = pytest.mark.skipif(
    not engines.compiled_available() and not os.environ.get("DPMSTREAM_REQUIRE_NATIVE"),
    reason="the compiled engine is not built (no Rust toolchain at install time)")

PUT = b"08/12 10:00:00.000 1,1 dpm_srv_put: DP092 - put request by /DC=x from h\n"


def test_a_pipeline_freed_on_another_thread_is_freed_without_error(monkeypatch):
    # Python's cyclic GC frees objects on whichever thread allocates (a Kafka client's own
    # thread, in the worker): the engine must not refuse to be dropped there.
    errors = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: errors.append(u.exc_value))
    pipeline = Pipeline(lambda r: None, engine=engines.COMPILED)
    dpm = resolve_profile("lcgdm-dpm")
    pipeline.source("x", host="h", tz="UTC", year=2011, profile=dpm).feed_lines([PUT])
    assert sum(pipeline.stats.lines.values()) == 1
    held = [pipeline]
    del pipeline

    def drop():
        held.clear()
        gc.collect()  # the pipeline and its sources refer to each other: a cycle

    thread = threading.Thread(target=drop)
    thread.start()
    thread.join()
    assert errors == []


DOME_LINE = ("Jun 30 10:00:00 dpmhead01 dome[2345]: {140685573784640}[1] dmlite dome "
             "workerFunc : Accepted connection, ipcfd: 12, keepConnection: 1")


def test_a_dome_pipeline_freed_on_another_thread_is_freed_without_error(monkeypatch):
    # As above, for the DOME engine and its scanner: a worker's partition of DOME nodes
    # freed by a collection on its consumer's thread leaked them, with an error, instead.
    from dpmstream.parsers.dome_profiles import resolve_dome_profile

    monkeypatch.setenv("DPMSTREAM_ENGINE", engines.COMPILED)
    errors = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: errors.append(u.exc_value))
    pipeline = Pipeline(lambda r: None, on_dome_record=lambda r: None)
    assert pipeline.dome_engine == engines.COMPILED
    pipeline.source("n", host="dpmhead01", tz="UTC", year=2016,
                    profile=resolve_dome_profile("dmlite-dome")).feed(DOME_LINE)
    assert sum(pipeline.stats.lines.values()) == 1
    held = [pipeline]
    del pipeline

    def drop():
        held.clear()
        gc.collect()

    thread = threading.Thread(target=drop)
    thread.start()
    thread.join()
    assert errors == []
