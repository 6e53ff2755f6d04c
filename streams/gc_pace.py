"""The garbage collector's pace while a long pass runs (the Kafka worker, `report`, `whatif`).

Each Kafka record the worker reads becomes several short-lived container objects (the
consumer's record, the decoded envelope), all freed within the batch. CPython collects
its youngest generation every 700 net allocations, so a 20,000-record batch ran some 200
collections, and every tenth of those also walked the older generation: 8 to 10 % of the
worker's CPU time in bench/bench_worker.py. Collecting every 50,000 allocations instead
keeps the same cycles collectable (gen0 holds a few MB at most) at a fraction of the cost.
`report` makes short-lived containers by the thousand beside the records it keeps, and
takes the same pace (dpmstream/commands/report.py); it also freezes the records once read
(gc.freeze), inside thawed_after(), which puts them back in the collections at its end.
`whatif` keeps its records and calibrates and runs the model beside them: the same pace.

    with relaxed_gc():
        await worker_loop()
"""

from __future__ import annotations

import contextlib
import gc

GEN0_THRESHOLD = 50_000


@contextlib.contextmanager
def relaxed_gc(gen0: int = GEN0_THRESHOLD):
    """Collect the youngest generation every `gen0` allocations (never more often than
    now) until the block ends, then restore the thresholds it found."""
    before = gc.get_threshold()
    gc.set_threshold(max(gen0, before[0]), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


@contextlib.contextmanager
def thawed_after():
    """A block that may freeze what it keeps out of the collections (gc.freeze): at its
    end what is frozen goes back to the oldest generation (gc.unfreeze), so an in-process
    caller (the tests, a library user) does not keep it out of every collection for good.
    gc unfreezes all or nothing: where objects were frozen before the block (a caller's),
    the block leaves the frozen ones frozen rather than thaw the caller's too."""
    before = gc.get_freeze_count()
    try:
        yield
    finally:
        if before == 0:
            gc.unfreeze()
