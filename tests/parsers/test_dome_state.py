"""The DOME reassembler's state as keyed net changes (parsers/dome_state.py): what the Kafka
worker's compacted state topic keeps, one record per call and per put, taken from what
the reassembler of either engine says changed (track_changes, take_changes)."""

import json
import os

import pytest

from dpmstream.parsers import engines
from dpmstream.parsers.dome_profiles import resolve_dome_profile
from dpmstream.parsers.dome_reassembly import merge_by_time
from dpmstream.parsers.dome_state import DomeStateTracker, snapshot_of
from dpmstream.simulator.dome_config import DomeConfig
from dpmstream.simulator.dome_run import simulate_dome
from tests.helpers import sampled
from tests.scenarios.test_dome_truth import node_events


COMPILED_MISSING = not (engines.compiled_dome_available() or os.environ.get("DPMSTREAM_REQUIRE_NATIVE"))
ENGINES = [engines.PYTHON, pytest.param(engines.COMPILED, marks=pytest.mark.skipif(
    COMPILED_MISSING, reason="compiled DOME engine not built"))]


def needs_compiled():
    if COMPILED_MISSING:
        pytest.skip("compiled DOME engine not built")


def new_engine(engine: str, state: dict | None = None, **settings):
    """A reassembler of `engine` (from `state` when given) that tracks its changes, none
    taken yet but what it was built from."""
    r = engines.new_dome_reassembler(engine, state=state, **settings)
    r.track_changes()
    if state is not None:
        r.take_changes()   # what is stored now
    return r


def take(tracker: DomeStateTracker, engine) -> dict:
    return tracker.take(engine.take_changes())


def comparable(snapshot: dict) -> dict:
    """A snapshot through JSON, its index lists (dicts in the engines: no order) sorted."""
    snap = json.loads(json.dumps(snapshot))
    for name in ("put_threads", "done_threads", "unselected", "by_name"):
        snap["puts"][name].sort(key=json.dumps)
    return snap


def stored(store: dict, changes: dict) -> None:
    """What a compacted topic keeps: the latest value of every key, through JSON."""
    for key, value in json.loads(json.dumps(changes)).items():
        if value is None:
            store.pop(key, None)
        else:
            store[key] = value


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The simulated site of a generation (its config and result), simulated once for the
    module: every test only reads its logs."""
    made = {}

    def of(generation="tid"):
        if generation not in made:
            cfg = DomeConfig(duration=400.0, rate=4.0, disks=3, generation=generation,
                             disk_down_at=100.0, restart_at=250.0, gap_at=180.0)
            made[generation] = cfg, simulate_dome(cfg, tmp_path_factory.mktemp(generation) / "site")
        return made[generation]
    return of


@pytest.fixture(scope="module")
def events(site):
    """events(generation) -> (config, the site's events merged by event time): each node's
    log read by the Python parser once for the module (what is tested here is the
    reassembler's state, not the parsing), merged afresh for each run."""
    parsed = {}

    def of(generation="tid"):
        cfg, result = site(generation)
        if generation not in parsed:
            profile = resolve_dome_profile("dmlite-dome" if cfg.generation == "tid" else "dmlite-dome-notid")
            parsed[generation] = [tuple(node_events(path, cfg, profile)) for path in result.logs.values()]
        return cfg, merge_by_time(parsed[generation])
    return of


@pytest.fixture(scope="module")
def uninterrupted(events):
    """The Python engine's (reassembler, records) straight through a generation's site,
    run once for the module: what every rebuilt or crossed run must give."""
    made = {}

    def of(generation="tid"):
        if generation not in made:
            cfg, merged = events(generation)
            engine = engines.new_dome_reassembler(engines.PYTHON, timeout_ms=int(cfg.timeout * 1000))
            records = [record for ev in merged for record in engine.feed(ev)]
            made[generation] = engine, records + engine.finish()
        return made[generation]
    return of


@pytest.mark.parametrize("generation,engine", sampled(
    [(generation, engine) for engine in (engines.PYTHON, engines.COMPILED) for generation in ("tid", "notid")],
    keep=[("tid", engines.COMPILED), ("notid", engines.PYTHON)]))
def test_a_reassembler_rebuilt_from_its_stored_changes_goes_on_as_one_that_never_stopped(
        events, uninterrupted, generation, engine):
    """Changes taken every 300 lines into a store (latest per key, through JSON); every
    2,400 lines, right after a take, the reassembler is dropped and rebuilt from the store
    alone: the same records in the same order, and the same counters, as the
    uninterrupted run. Each engine on each generation (`make check`: the compiled engine
    on tid, the Python one on notid)."""
    if engine == engines.COMPILED:
        needs_compiled()
    cfg, merged = events(generation)
    whole, records = uninterrupted(generation)
    settings = {"timeout_ms": int(cfg.timeout * 1000)}
    r, tracker, store, resumed, rebuilt = new_engine(engine, **settings), DomeStateTracker(), {}, [], 0
    for n, ev in enumerate(merged, 1):
        resumed += r.feed(ev)
        if n % 300 == 0:
            stored(store, take(tracker, r))
            if n % 2400 == 0:
                r = new_engine(engine, snapshot_of(store), **settings)
                tracker = DomeStateTracker()
                tracker.restored(store)
                rebuilt += 1
    resumed += r.finish()
    assert rebuilt > 8 and sum(r["kind"] == "dome_put" for r in records) > 1400
    assert resumed == records
    assert r.stats == whole.stats


@pytest.mark.parametrize("stored_by, restored_in", [(engines.PYTHON, engines.COMPILED),
                                                    (engines.COMPILED, engines.PYTHON)])
def test_changes_stored_by_one_engine_restore_in_the_other(events, uninterrupted, stored_by, restored_in):
    if not engines.compiled_dome_available():
        pytest.skip("compiled DOME engine not built")
    cfg, merged = events()
    whole, records = uninterrupted()
    settings = {"timeout_ms": int(cfg.timeout * 1000)}
    current = stored_by
    r, tracker, store, resumed = new_engine(current, **settings), DomeStateTracker(), {}, []
    for n, ev in enumerate(merged, 1):
        resumed += r.feed(ev)
        if n % 500 == 0:
            stored(store, take(tracker, r))
        if n % 3000 == 0:
            current = restored_in if current == stored_by else stored_by
            r = new_engine(current, snapshot_of(store), **settings)
            tracker = DomeStateTracker()
            tracker.restored(store)
    resumed += r.finish()
    assert resumed == records
    assert r.stats == whole.stats


@pytest.mark.parametrize("engine", ENGINES)
def test_a_take_names_only_the_calls_and_puts_that_changed(events, engine):
    """Thousands of lines in, with calls and puts open: the next take after one more line
    holds that line's call (and the bounded rest), not the tables; the reassembler
    itself hands out only that (its cost follows the changes)."""
    cfg, stream = events()
    r, tracker = new_engine(engine, timeout_ms=int(cfg.timeout * 1000)), DomeStateTracker()
    for _ in range(5000):
        r.feed(next(stream))
    first = take(tracker, r)
    snap = r.snapshot()
    open_calls = sum(len(rows) for rows in snap["calls"].values())
    open_puts = len(snap["puts"]["open"])
    assert open_puts > 50 and open_calls > 0
    assert len(first) >= open_puts + open_calls + 1   # everything, the first time
    ev = next(ev for ev in stream if ev.tid >= 0 and ev.role == "call")
    r.feed(ev)
    handed = r.take_changes()
    assert len(handed["calls"]) <= 2 and len(handed["puts"]) <= 1   # the call, maybe one it cut
    changes = tracker.take(handed)
    calls = [k for k in changes if k.startswith("c|")]
    puts = [k for k in changes if k.startswith("p|")]
    assert calls == [f'c|{json.dumps([ev.host, ev.pid, ev.tid], separators=(",", ":"))}']
    assert len(puts) <= 1 and len(changes) <= 6, sorted(changes)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_tracker_restored_from_the_store_takes_nothing_when_nothing_changed(events, engine):
    """Tuples the engine holds and the lists JSON gives back must not read as changes."""
    cfg, merged = events()
    settings = {"timeout_ms": int(cfg.timeout * 1000)}
    r, tracker, store = new_engine(engine, **settings), DomeStateTracker(), {}
    for n, ev in enumerate(merged, 1):
        r.feed(ev)
        if n == 6000:
            break
    stored(store, take(tracker, r))
    again = new_engine(engine, snapshot_of(store), **settings)
    fresh = DomeStateTracker()
    fresh.restored(store)
    assert take(fresh, again) == {}
    assert len(store) > 50


@pytest.mark.parametrize("engine", ENGINES)
def test_calls_and_puts_come_back_in_their_order_of_activity(events, engine):
    """The order the caps and timeouts take them in: a call touched last is last again,
    a put whose codes changed in place stays where it was."""
    cfg, merged = events()
    r, tracker, store = new_engine(engine, timeout_ms=int(cfg.timeout * 1000)), DomeStateTracker(), {}
    for n, ev in enumerate(merged, 1):
        r.feed(ev)
        if n % 97 == 0:
            stored(store, take(tracker, r))
        if n == 7000:
            break
    stored(store, take(tracker, r))
    assert comparable(snapshot_of(store)) == comparable(r.snapshot())


@pytest.mark.parametrize("engine", ENGINES)
def test_an_empty_store_gives_a_fresh_reassembler(engine):
    r = engines.new_dome_reassembler(engine, state=snapshot_of({}))
    assert r.snapshot() == engines.new_dome_reassembler(engine).snapshot()


def comparable_changes(changes: dict) -> dict:
    """take_changes() through JSON, with the order only where it means something: the
    moved calls and puts in activity order; what is gone, changed in place, and the
    index keys, as sets."""
    changes = json.loads(json.dumps(changes))
    calls, puts = changes["calls"], changes["puts"]
    rest = changes["rest"]
    for name in ("selected_count", "offset"):
        rest[name].sort(key=json.dumps)
    return {
        "calls gone": sorted((c[:3] for c in calls if c[3] is None), key=json.dumps),
        "calls": [c for c in calls if c[3] is not None],
        "puts gone": sorted(p[0] for p in puts if p[1] is None),
        "puts moved": [p for p in puts if p[1] is not None and p[3]],
        "puts changed in place": sorted((p for p in puts if p[1] is not None and not p[3]), key=json.dumps),
        "unselected": sorted(changes["unselected"], key=json.dumps),
        "by_name": sorted(changes["by_name"], key=json.dumps),
        "rest": rest,
    }


@pytest.mark.parametrize("generation", ["tid", "notid"])
def test_both_engines_hand_out_the_same_changes(events, generation):
    if not engines.compiled_dome_available():
        pytest.skip("compiled DOME engine not built")
    cfg, merged = events(generation)
    settings = {"timeout_ms": int(cfg.timeout * 1000)}
    reference, compiled = new_engine(engines.PYTHON, **settings), new_engine(engines.COMPILED, **settings)
    compared = 0
    for n, ev in enumerate(merged, 1):
        assert compiled.feed(ev) == reference.feed(ev)
        if n % 250 == 0:
            want = comparable_changes(reference.take_changes())
            assert comparable_changes(compiled.take_changes()) == want, n
            compared += bool(want["puts moved"]) and bool(want["puts gone"])
    assert compared > 20
