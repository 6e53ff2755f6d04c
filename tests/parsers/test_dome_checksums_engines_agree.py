"""The compiled checksum stage agrees with the Python one (native/src/dome_checksums.rs,
run inside the compiled DOME engine, against parsers/dome_checksums.ChecksumWaits, the
reference and the Python engine's stage).

Both engines wrapped by WithChecksumWaits, as a driver wraps them, are fed the same
simulated DOME sites (both stamp styles, a disk node down and back, the head restarting,
a journald gap, frontends giving up, clients polling two files at once): every record,
the checksum waits among them, must come out the same and in the same order, with the
same checksum counters; with the stage's caps and timeouts tight; and the stage's
snapshot, written by either engine, must restore in the other as a stage that never
stopped. (The chunked feed, Source's way, is held to the Python engine with the checksum
counters in tests/parsers/test_dome_feed_chunk.py.)
"""

import json

import pytest

from dpmstream.parsers import engines
from dpmstream.parsers.dome_checksums import ChecksumWaits, WithChecksumWaits
from dpmstream.parsers.dome_reassembly import merge_by_time

from tests.helpers import sampled
from tests.parsers.test_dome_engines_agree import (
    COMPILED, PYTHON, compiled_events, events, first_difference, pytestmark, site_config)

assert pytestmark  # the same skip: the compiled DOME engine not built

# Both stamp styles of the generation with call records (without {TID} there are none).
SHAPES = ("tid-traditional", "tid-rfc3339-no-accept")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A simulated site per shape, 12 clients on the frontends so that keys are busy
    (overlaps), made once: (config, [lines of each node])."""
    from dpmstream.simulator.dome_run import simulate_dome
    from tests.parsers.test_dome_engines_agree import node_lines
    made = {}

    def get(shape):
        if shape not in made:
            cfg = site_config(shape, clients=12, chksum_give_up_rate=0.1, chksum_pair_rate=0.1)
            result = simulate_dome(cfg, tmp_path_factory.mktemp(shape) / "site")
            made[shape] = (cfg, [node_lines(path, cfg) for path in result.logs.values()])
        return made[shape]
    return get


def streams(engine: str, cfg, nodes):
    """Each node's events as `engine`'s own parser reads them."""
    if engine == COMPILED:
        return compiled_events(cfg, nodes)
    return [events(PYTHON, cfg, lines) for lines in nodes]


def stage(engine: str, cfg, waits_state: dict | None = None, **checksum_settings) -> WithChecksumWaits:
    reassembler = engines.new_dome_reassembler(engine, timeout_ms=int(cfg.timeout * 1000))
    waits = (ChecksumWaits(**checksum_settings) if waits_state is None
             else ChecksumWaits.from_snapshot(waits_state, **checksum_settings))
    dome = WithChecksumWaits(reassembler, waits)
    # The compiled engine runs the stage itself: not this Python one over its records.
    assert isinstance(dome.waits, ChecksumWaits) == (engine == PYTHON)
    return dome


def run(engine: str, cfg, nodes, *, advance_every: int = 0, snapshot_every: int = 0,
        restore_in: str | None = None, **checksum_settings):
    """Records and checksum counters of `engine` wrapped by WithChecksumWaits; with
    snapshot_every, rebuilt every so many events from its snapshot (through JSON) in
    `restore_in`'s engine, alternating (fed the Python parser's events, which both take)."""
    dome, current, records = stage(engine, cfg, **checksum_settings), engine, []
    for n, ev in enumerate(merge_by_time(streams(PYTHON if restore_in else engine, cfg, nodes)), 1):
        records += dome.feed(ev)
        if advance_every and n % advance_every == 0:
            records += dome.advance(ev.ts - 5_000)
        if snapshot_every and n % snapshot_every == 0:
            state = json.loads(json.dumps(dome.snapshot()))
            current = restore_in if current == engine else engine
            dome = WithChecksumWaits.from_snapshot(
                state, type(engines.new_dome_reassembler(current)), checksum_settings,
                timeout_ms=int(cfg.timeout * 1000))
            assert isinstance(dome.waits, ChecksumWaits) == (current == PYTHON)
    records += dome.finish()
    return records, dome.checksum_stats


def outcomes(records: list[dict]) -> dict:
    waits = [r for r in records if r["kind"] == "dome_checksum"]
    counted = {}
    for r in waits:
        counted[r["outcome"]] = counted.get(r["outcome"], 0) + 1
    counted["overlap"] = sum(r["overlap"] for r in waits)
    return counted


@pytest.mark.parametrize("shape", SHAPES)
def test_both_stages_give_the_same_records_waits_and_counters(site, shape):
    cfg, nodes = site(shape)
    want, want_stats = run(PYTHON, cfg, nodes, advance_every=997)
    got, got_stats = run(COMPILED, cfg, nodes, advance_every=997)
    assert got == want, first_difference(want, got)
    assert got_stats == want_stats
    seen = outcomes(want)
    print(f"{shape}: {seen}; {want_stats.as_dict()}")
    assert seen.get("done", 0) > 100 and seen.get("failed", 0) > 0 and seen.get("timeout", 0) > 0
    assert seen["overlap"] > 0 and seen.get("input_end", 0) > 0


TIGHT = {
    "cap": dict(max_open=2),
    "timeout": dict(timeout_ms=6_000, allowance_ms=0),
}


@pytest.mark.parametrize("shape,tight", sampled(
    [(shape, tight) for shape in SHAPES for tight in sorted(TIGHT)],
    keep=[("tid-traditional", "cap"), ("tid-rfc3339-no-accept", "timeout")]))
def test_both_stages_agree_where_the_cap_and_the_timeout_bite(site, shape, tight):
    cfg, nodes = site(shape)
    want, want_stats = run(PYTHON, cfg, nodes, **TIGHT[tight])
    got, got_stats = run(COMPILED, cfg, nodes, **TIGHT[tight])
    assert got == want, first_difference(want, got)
    assert got_stats == want_stats
    if tight == "cap":
        assert want_stats.evictions > 100
    else:
        assert want_stats.timeouts > 20   # the default timeout's run has 13 on tid-traditional


ORDERS = {"python-then-compiled": (PYTHON, COMPILED), "compiled-then-python": (COMPILED, PYTHON)}


@pytest.mark.parametrize("shape,order", sampled(
    [(shape, order) for shape in SHAPES for order in ORDERS],
    keep=[("tid-traditional", "python-then-compiled"), ("tid-rfc3339-no-accept", "compiled-then-python")]))
def test_a_stage_snapshot_written_by_one_engine_restores_in_the_other(site, shape, order):
    """Stopped every 1,500 events, its snapshot through JSON rebuilt in the other engine
    (and back): the records, their order and the counters of one uninterrupted run."""
    first, second = ORDERS[order]
    cfg, nodes = site(shape)
    want, want_stats = run(PYTHON, cfg, nodes)
    got, got_stats = run(first, cfg, nodes, snapshot_every=1_500, restore_in=second)
    assert got == want, first_difference(want, got)
    assert got_stats == want_stats


def test_both_stages_hold_the_same_state_in_the_same_snapshot_shape(site):
    """Fed the same events, the stages' snapshots (open runs in activity order, clocks,
    counters, seq) are equal every 500 events, and some hold open runs."""
    cfg, nodes = site("tid-traditional")
    reference, compiled = stage(PYTHON, cfg), stage(COMPILED, cfg)
    held = 0
    for n, ev in enumerate(merge_by_time(streams(PYTHON, cfg, nodes)), 1):
        assert compiled.feed(ev) == reference.feed(ev)
        if n % 500 == 0:
            want = json.loads(json.dumps(reference.snapshot()["checksums"]))
            assert json.loads(json.dumps(compiled.snapshot()["checksums"])) == want, n
            held += bool(want["open"])
    assert held > 10

