"""The DOME reassembler's state as keyed net changes (parsers/dome_state.py): what the Kafka
worker's compacted state topic keeps, one record per call and per put."""

import json

import pytest

from dpmstream.parsers.dome_profiles import resolve_dome_profile
from dpmstream.parsers.dome_reassembly import DomeReassembler, merge_by_time
from dpmstream.parsers.dome_state import DomeStateTracker, snapshot_of
from dpmstream.simulator.dome_config import DomeConfig
from dpmstream.simulator.dome_run import simulate_dome
from tests.scenarios.test_dome_truth import node_events, reassemble


def stored(store: dict, changes: dict) -> None:
    """What a compacted topic keeps: the latest value of every key, through JSON."""
    for key, value in json.loads(json.dumps(changes)).items():
        if value is None:
            store.pop(key, None)
        else:
            store[key] = value


def site(tmp_path, generation="tid"):
    cfg = DomeConfig(duration=400.0, rate=4.0, disks=3, generation=generation, disk_down_at=100.0,
                     restart_at=250.0, gap_at=180.0)
    return cfg, simulate_dome(cfg, tmp_path / "site")


def events(cfg, result):
    profile = resolve_dome_profile("dmlite-dome" if cfg.generation == "tid" else "dmlite-dome-notid")
    return merge_by_time([node_events(path, cfg, profile) for path in result.logs.values()])


@pytest.mark.parametrize("generation", ["tid", "notid"])
def test_a_reassembler_rebuilt_from_its_stored_changes_goes_on_as_one_that_never_stopped(tmp_path, generation):
    """Changes taken every 300 lines into a store (latest per key, through JSON); every
    2,400 lines, right after a take, the reassembler is dropped and rebuilt from the store
    alone: the same records in the same order, and the same counters, as the
    uninterrupted run."""
    cfg, result = site(tmp_path, generation)
    whole, records = reassemble(result, cfg)
    settings = {"timeout_ms": int(cfg.timeout * 1000)}
    engine, tracker, store, resumed, rebuilt = DomeReassembler(**settings), DomeStateTracker(), {}, [], 0
    for n, ev in enumerate(events(cfg, result), 1):
        resumed += engine.feed(ev)
        if n % 300 == 0:
            stored(store, tracker.take(engine.snapshot()))
            if n % 2400 == 0:
                engine = DomeReassembler.from_snapshot(snapshot_of(store), **settings)
                tracker = DomeStateTracker()
                tracker.restored(store)
                rebuilt += 1
    resumed += engine.finish()
    assert rebuilt > 8 and sum(r["kind"] == "dome_put" for r in records) > 1400
    assert resumed == records
    assert engine.stats == whole.stats


def test_a_take_names_only_the_calls_and_puts_that_changed(tmp_path):
    """Thousands of lines in, with calls and puts open: the next take after one more line
    holds that line's call (and the bounded rest), not the tables."""
    cfg, result = site(tmp_path)
    engine, tracker = DomeReassembler(timeout_ms=int(cfg.timeout * 1000)), DomeStateTracker()
    stream = iter(events(cfg, result))
    for _ in range(5000):
        engine.feed(next(stream))
    first = tracker.take(engine.snapshot())
    snap = engine.snapshot()
    open_calls = sum(len(rows) for rows in snap["calls"].values())
    open_puts = len(snap["puts"]["open"])
    assert open_puts > 50 and open_calls > 0
    assert len(first) >= open_puts + open_calls + 1   # everything, the first time
    ev = next(ev for ev in stream if ev.tid >= 0 and ev.role == "call")
    engine.feed(ev)
    changes = tracker.take(engine.snapshot())
    calls = [k for k in changes if k.startswith("c|")]
    puts = [k for k in changes if k.startswith("p|")]
    assert calls == [f'c|{json.dumps([ev.host, ev.pid, ev.tid], separators=(",", ":"))}']
    assert len(puts) <= 1 and len(changes) <= 6, sorted(changes)


def test_a_tracker_restored_from_the_store_takes_nothing_when_nothing_changed(tmp_path):
    """Tuples the engine holds and the lists JSON gives back must not read as changes."""
    cfg, result = site(tmp_path)
    settings = {"timeout_ms": int(cfg.timeout * 1000)}
    engine, tracker, store = DomeReassembler(**settings), DomeStateTracker(), {}
    for n, ev in enumerate(events(cfg, result), 1):
        engine.feed(ev)
        if n == 6000:
            break
    stored(store, tracker.take(engine.snapshot()))
    again = DomeReassembler.from_snapshot(snapshot_of(store), **settings)
    fresh = DomeStateTracker()
    fresh.restored(store)
    assert fresh.take(again.snapshot()) == {}
    assert len(store) > 50


def test_calls_and_puts_come_back_in_their_order_of_activity(tmp_path):
    """The order the caps and timeouts take them in: a call touched last is last again."""
    cfg, result = site(tmp_path)
    engine, tracker, store = DomeReassembler(timeout_ms=int(cfg.timeout * 1000)), DomeStateTracker(), {}
    for n, ev in enumerate(events(cfg, result), 1):
        engine.feed(ev)
        if n % 97 == 0:
            stored(store, tracker.take(engine.snapshot()))
        if n == 7000:
            break
    stored(store, tracker.take(engine.snapshot()))
    assert json.loads(json.dumps(snapshot_of(store))) == json.loads(json.dumps(engine.snapshot()))


def test_an_empty_store_gives_a_fresh_reassembler():
    engine = DomeReassembler.from_snapshot(snapshot_of({}))
    assert engine.snapshot() == DomeReassembler().snapshot()
