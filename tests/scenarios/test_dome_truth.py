"""The DOME reassembler (parsers/dome_reassembly.py) against the DOME simulator's truth:
every envelope x stamp x generation `dpmstream simulate --dome` writes, at a site's size
(thousands of calls and puts, several disk nodes, a disk node down and back with a new
pid, the head restarting with PUTCOUNT from 1, a journald gap on the head), each node's
log read by parsers/dome_lines.py, the nodes merged by event time, and every record
compared with PREFIX.calls.csv, PREFIX.puts.csv, PREFIX.capacity.csv and
PREFIX.fs_events.csv, record for record, in the truth's order. Each on both engines
(parsers/engines.py: the Python reference, and the compiled twin with its own line parser)."""

import csv
import json
import os

import pytest

from dpmstream.parsers import engines
from dpmstream.parsers.clock import EventClock
from dpmstream.parsers.dome_profiles import resolve_dome_profile
from dpmstream.parsers.dome_reassembly import merge_by_time
from dpmstream.simulator.dome_config import ENVELOPES, DomeConfig
from dpmstream.simulator.dome_run import simulate_dome
from dpmstream.streams.kafka.envelope import decode

CASES = [(env, gen, stamp) for env in ENVELOPES for gen in ("tid", "notid")
         for stamp in (("traditional",) if env == "journal" else ("traditional", "rfc3339"))]
# The truth files' order (simulator/dome_truth.py), as integers where the cell is one.
ORDER = {
    "calls": ("start", "host", "pid", "tid"),
    "puts": ("put_time", "lfn"),
    "capacity": ("time", "host", "fs"),
    "fs_events": ("time", "host", "server", "fs"),
}
KIND = {"calls": "dome_call", "puts": "dome_put", "capacity": "dome_capacity", "fs_events": "dome_fs_event"}
INTS = frozenset(("start", "pid", "tid", "put_time", "time"))
ENGINES = [engines.PYTHON, pytest.param(engines.COMPILED, marks=pytest.mark.skipif(
    not engines.compiled_dome_available() and not os.environ.get("DPMSTREAM_REQUIRE_NATIVE"),
    reason="the compiled DOME engine is not built"))]


def node_events(path, cfg: DomeConfig, profile, engine: str = engines.PYTHON):
    parser = engines.new_dome_parser(engine, profile, EventClock(cfg.tz, year=2017))
    for text in path.read_text(encoding="utf-8").splitlines():
        if cfg.envelope == "kafka":
            text = decode(text.encode()).line
        ev = parser.parse(text)
        if ev is not None:
            yield ev


def each_nodes_events(result, cfg: DomeConfig, engine_name: str = engines.PYTHON) -> list:
    """Each node's events as `engine_name`'s parser reads them (an iterator a node, in the
    site's order of its logs)."""
    profile = resolve_dome_profile("dmlite-dome" if cfg.generation == "tid" else "dmlite-dome-notid")
    return [node_events(path, cfg, profile, engine_name) for path in result.logs.values()]


def nodes_events(result, cfg: DomeConfig, engine_name: str = engines.PYTHON) -> list[list]:
    """each_nodes_events as lists: for the tests that feed the same events more than once,
    or merged otherwise (events are not changed by the reassemblers they are fed to)."""
    return [list(events) for events in each_nodes_events(result, cfg, engine_name)]


def merged_events(result, cfg: DomeConfig, engine_name: str = engines.PYTHON) -> list:
    """Every node's events (nodes_events) merged by event time, as a list."""
    return list(merge_by_time(nodes_events(result, cfg, engine_name)))


def reassemble(result, cfg: DomeConfig, engine_name: str = engines.PYTHON, events=None):
    """(reassembler, records) of the site's logs read and merged, or of `events` (from
    merged_events) where given."""
    if events is None:
        events = merge_by_time(each_nodes_events(result, cfg, engine_name))
    engine = engines.new_dome_reassembler(engine_name, timeout_ms=int(cfg.timeout * 1000))
    records = []
    for ev in events:
        records += engine.feed(ev)
    records += engine.finish()
    return engine, records


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    """simulated(cfg): the site of `cfg`, simulated once for the module (a simulation is
    seeded, so a copy is the same site): every engine, and every test of one
    configuration, reads the same logs."""
    sites = {}

    def site(cfg: DomeConfig):
        if repr(cfg) not in sites:
            sites[repr(cfg)] = simulate_dome(cfg, tmp_path_factory.mktemp("site") / "site")
        return sites[repr(cfg)]
    return site


def truth_rows(path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def in_truth_order(rows: list[dict], name: str) -> list[dict]:
    """The truth's order; records equal in it (two calls of one thread in one whole second)
    by their cells, which the truth's order leaves to the simulator's true instants."""
    return sorted(rows, key=lambda r: (tuple(int(r[c]) if c in INTS else r[c] for c in ORDER[name]),
                                       tuple(r.values())))


def as_cells(record: dict, columns) -> dict:
    """A record as the truth CSV writes it: integer ms, None as an empty cell."""
    return {c: "" if record.get(c) is None else str(record[c]) for c in columns}


# A site's size: thousands of calls and puts (`make test`, every case: each a 900 s site),
# and a smaller one, that of the interleaving and snapshot tests below, for the fast loop
# (`make check`); each with the counts its records must reach.
SITE = dict(duration=900.0, rate=4.0, disks=4, disk_down_at=200.0, restart_at=500.0, gap_at=300.0,
            gap_s=4.0, timeout=120.0)
SITE_AT_LEAST = {"puts": 2500, "capacity": 100, "calls": 8000}
SMALL_SITE = dict(duration=400.0, rate=4.0, disks=3, disk_down_at=100.0, restart_at=250.0, gap_at=180.0)
SMALL_SITE_AT_LEAST = {"puts": 1400, "capacity": 30, "calls": 6000}
# The fast loop's cover of the matrix at the small size: each envelope, generation and
# stamp at least once, on each engine. Its dmlite-log sites are those of the tests below:
# simulated once for all of them.
SMALL_LOOP = [("dmlite-log", "tid", "traditional"), ("dmlite-log", "notid", "traditional"),
              ("messages", "notid", "rfc3339"), ("journal", "tid", "traditional"),
              ("kafka", "tid", "rfc3339")]
assert all({c[i] for c in SMALL_LOOP} == {c[i] for c in CASES} for i in range(3))


def site_config(size: dict, envelope: str, generation: str, stamp: str) -> DomeConfig:
    return DomeConfig(envelope=envelope, generation=generation, stamp=stamp,
                      accept_lines=stamp == "traditional", **size)


def assert_the_records_are_the_truths(result, cfg: DomeConfig, engine: str, at_least: dict) -> None:
    reassembler, records = reassemble(result, cfg, engine)
    matched = {}
    for name, kind in KIND.items():
        truth = in_truth_order(truth_rows(result.paths[name]), name)
        columns = list(truth[0]) if truth else []
        mine = in_truth_order([as_cells(r, columns) for r in records if r["kind"] == kind], name)
        assert len(mine) == len(truth), name
        for got, want in zip(mine, truth):
            assert got == want, name
        matched[name] = len(mine)
    s, stats = result.summary, reassembler.stats
    print(f"{engine} {cfg.envelope}-{cfg.generation}-{cfg.stamp}: matched {matched}; {stats.as_dict()}")
    assert matched["puts"] > at_least["puts"] and matched["capacity"] > at_least["capacity"]
    assert matched["fs_events"] > 0
    if cfg.generation == "tid":
        assert matched["calls"] > at_least["calls"] and s["cut_calls"] > 0
        assert stats.stray_call_ends == s.get("stray_call_ends", 0)
    else:
        assert matched["calls"] == 0
    assert stats.orphan_putdones == s.get("orphan_putdones", 0)
    assert stats.putcount_joins > 0 and stats.ambiguous_putdones == 0   # a common name twice in a second
    assert stats.process_deaths >= 2                          # the disk node and the head
    assert {r["whole_seconds"] for r in records if r["kind"] in ("dome_call", "dome_put")} == {int(cfg.whole_seconds)}


@pytest.mark.slow   # a 900 s site each; the fast loop runs the small sibling below
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("envelope, generation, stamp", [pytest.param(*c, id="-".join(c)) for c in CASES])
def test_every_simulated_site_gives_exactly_the_records_of_its_truth(simulated, envelope, generation, stamp, engine):
    """Every case at a site's size. Its fast-loop sibling:
    test_every_small_simulated_site_gives_exactly_the_records_of_its_truth."""
    cfg = site_config(SITE, envelope, generation, stamp)
    assert_the_records_are_the_truths(simulated(cfg), cfg, engine, SITE_AT_LEAST)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("envelope, generation, stamp", [pytest.param(*c, id="-".join(c)) for c in SMALL_LOOP])
def test_every_small_simulated_site_gives_exactly_the_records_of_its_truth(simulated, envelope, generation, stamp,
                                                                          engine):
    """The fast loop's sibling of the test above: the same checks on a cover of its cases
    (SMALL_LOOP), each on a 400 s site with the same events (a disk node down and back, the
    head restarting, a journald gap)."""
    cfg = site_config(SMALL_SITE, envelope, generation, stamp)
    assert_the_records_are_the_truths(simulated(cfg), cfg, engine, SMALL_SITE_AT_LEAST)


@pytest.mark.parametrize("engine_name", ENGINES)
def test_the_records_do_not_depend_on_how_the_nodes_lines_of_one_second_interleave(simulated, engine_name):
    """Whole-second stamps tie across nodes: the merge puts the first stream first on a
    tie. Feeding the disk nodes first gives the same records; the same input twice gives
    the same sequence."""
    cfg = DomeConfig(**SMALL_SITE)
    result = simulated(cfg)
    nodes = nodes_events(result, cfg, engine_name)
    events = list(merge_by_time(nodes))
    _, records = reassemble(result, cfg, engine_name, events)
    _, again = reassemble(result, cfg, engine_name, events)
    assert again == records
    engine = engines.new_dome_reassembler(engine_name, timeout_ms=int(cfg.timeout * 1000))
    reversed_records = []
    for ev in merge_by_time(reversed(nodes)):
        reversed_records += engine.feed(ev)
    reversed_records += engine.finish()
    def canonical(recs):
        return sorted(tuple(sorted((k, str(v)) for k, v in r.items())) for r in recs)
    assert len(records) > 5000
    assert canonical(reversed_records) == canonical(records)


@pytest.mark.parametrize("engine_name", ENGINES)
@pytest.mark.parametrize("generation", ["tid", "notid"])
def test_a_reassembler_rebuilt_from_its_json_snapshot_goes_on_as_one_that_never_stopped(simulated, generation,
                                                                                      engine_name):
    """Stopped every 2,500 lines, its snapshot through JSON, rebuilt: the same records in
    the same order, and the same counters, as the uninterrupted run."""
    cfg = DomeConfig(generation=generation, **SMALL_SITE)
    result = simulated(cfg)
    events = merged_events(result, cfg, engine_name)
    whole, records = reassemble(result, cfg, engine_name, events)
    settings = {"timeout_ms": int(cfg.timeout * 1000)}
    engine, resumed, restarts = engines.new_dome_reassembler(engine_name, **settings), [], 0
    for n, ev in enumerate(events, 1):
        resumed += engine.feed(ev)
        if n % 2500 == 0:
            engine = type(engine).from_snapshot(json.loads(json.dumps(engine.snapshot())), **settings)
            restarts += 1
    resumed += engine.finish()
    assert restarts > 8 and sum(r["kind"] == "dome_put" for r in records) > 1400
    assert resumed == records
    assert engine.stats == whole.stats
