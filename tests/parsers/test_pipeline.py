"""parsers/pipeline.py: saving the pipeline's state every K lines and restoring it into a
fresh pipeline gives exactly the records of one uninterrupted pipeline (what the Kafka
worker relies on); lines fed in chunks give what they give fed one by one; the pipeline
imports only the domain."""

import json
import random

import pytest

from dpmstream.simulator import simulate
from dpmstream.simulator.scenarios import scenario
from dpmstream.parsers import engines
from dpmstream.parsers.pipeline import MAX_DUPLICATE_MEMORY, Pipeline, StateChanges
from dpmstream.parsers.reassembly import RequestKey, ThreadKey
from tests.parsers.test_fastpath import run_pipeline, scenario_logs


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    cfg = scenario("restart", requests=300, abandon_rate=0.05, abort_rate=0.03)
    result = simulate(cfg, tmp_path_factory.mktemp("state") / "sim")
    lines = []
    for name, path in (("dpm", result.log_path), ("dpns", result.dpns_log_path)):
        lines += [(name, line) for line in path.read_bytes().splitlines()]
    # interleave the two daemons' logs as a collector would
    lines.sort(key=lambda item: item[1][:18])
    return cfg, lines


def canonical(record):
    return json.dumps(record, sort_keys=True)


def new_pipeline(records, cfg):
    pipeline = Pipeline(records.append)
    pipeline.track_changes()
    return pipeline


def stored(changes: StateChanges) -> StateChanges:
    """The changes as a store gives them back: every value through JSON."""
    return StateChanges(**{name: json.loads(json.dumps(value))
                           if name in ("clock", "linker", "dome") else
                           {k: json.loads(json.dumps(v)) for k, v in value.items()}
                           for name, value in changes.as_dict().items()})


def feed(pipeline, cfg, name, line):
    src = pipeline.sources.get(name) or pipeline.source(name, host=cfg.host, tz=cfg.tz, year=2011)
    src.feed(line)


@pytest.fixture(scope="module")
def uninterrupted(sim):
    """The records of one pipeline that never stopped: the same for every interval K, so
    computed once for the module."""
    cfg, lines = sim
    expected = []
    straight = Pipeline(expected.append)
    for name, line in lines:
        feed(straight, cfg, name, line)
    straight.finish()
    return expected


# A checkpoint after every one of the 10,000 lines is the thorough case and takes minutes
# (a new pipeline, its parser and the JSON round trip per line): `make test` runs it, the
# fast loop runs the unaligned and the long interval.
@pytest.mark.parametrize("every", [pytest.param(1, marks=pytest.mark.slow), 97, 5000])
def test_state_saved_every_k_lines_and_restored_gives_the_same_records(sim, uninterrupted, every):
    cfg, lines = sim
    expected = uninterrupted

    records, store = [], StateChanges()
    pipeline = new_pipeline(records, cfg)
    for i, (name, line) in enumerate(lines, 1):
        feed(pipeline, cfg, name, line)
        if i % every == 0:
            store.merge(stored(pipeline.take_changes()))
            pipeline = new_pipeline(records, cfg)
            pipeline.restore(store)
    pipeline.finish()
    # Emission order may differ (a checkpoint settles profile detection earlier, which
    # changes how the two daemons' first lines interleave); the records may not.
    assert sorted(map(canonical, records)) == sorted(map(canonical, expected))
    assert len(expected) > 300


def test_take_changes_omits_keys_created_and_removed_between_takes(sim):
    cfg, lines = sim
    pipeline = new_pipeline([], cfg)
    for name, line in lines[:2000]:
        feed(pipeline, cfg, name, line)
    first = pipeline.take_changes()
    assert first.threads and first.requests and first.sources and first.clock
    for kind in ("threads", "requests", "finished"):
        assert all(state is not None for state in getattr(first, kind).values())
    for name, line in lines[2000:4000]:
        feed(pipeline, cfg, name, line)
    second = pipeline.take_changes()
    gone = {kind: {key for key, state in getattr(second, kind).items() if state is None}
            for kind in ("threads", "requests", "finished")}
    assert any(gone.values())
    assert all(gone[kind] <= set(getattr(first, kind)) for kind in gone)


def test_changes_name_threads_and_requests_by_typed_keys():
    from tests.dpmlog import T1, put
    pipeline = Pipeline(lambda r: None)
    pipeline.track_changes()
    src = pipeline.source("dpm", host="h", tz="UTC", year=2011)
    for line in put("08/12 10:00:00.000", 3, T1, end="08/12 10:00:00.002"):
        src.feed(line)
    changes = pipeline.take_changes()
    assert list(changes.requests) == [RequestKey("h", T1)]
    assert all(isinstance(key, ThreadKey) and key.host == "h" and key.daemon == "dpm"
               for key in changes.threads)
    assert set(changes.sources) == {"dpm"} and changes.clock["hosts"][0][0] == "h"
    assert not pipeline.take_changes()  # nothing happened since


def test_a_late_line_after_a_restore_is_known_late_not_a_new_orphan_request():
    from tests.dpmlog import T1, closing, put, status
    lines = (put("08/12 10:00:00.000", 3, T1, end="08/12 10:00:00.002")
             + closing("08/12 10:00:01.000", "08/12 10:00:01.001", 6, "putdone", T1))
    late = status("08/12 10:00:02.000", "08/12 10:00:02.001", 4, T1, "SUCCESS")
    records = []
    pipeline = Pipeline(records.append)
    pipeline.track_changes()
    src = pipeline.source("dpm", host="h", tz="UTC", year=2011)
    for line in lines:
        src.feed(line)
    restored = Pipeline(records.append)
    restored.restore(stored(pipeline.take_changes()))
    for line in late:
        restored.sources["dpm"].feed(line)
    restored.finish()
    stats = restored.reassembler.stats
    assert stats.orphans == 0 and stats.late_lines > 0
    assert [r["status"] for r in records if r["kind"] == "request"] == ["success"]


def test_the_finished_memory_is_bounded_in_the_store_too():
    from tests.dpmlog import closing, put
    pipeline = Pipeline(lambda r: None)
    pipeline.reassembler.finished_memory = 2
    pipeline.track_changes()
    src = pipeline.source("dpm", host="h", tz="UTC", year=2011)
    store = StateChanges()
    tokens = [f"{i:08x}-0000-0000-0000-000000000000" for i in range(5)]
    for i, token in enumerate(tokens):
        for line in (put(f"08/12 10:00:0{i}.000", 3, token, end=f"08/12 10:00:0{i}.002")
                     + closing(f"08/12 10:00:0{i}.100", f"08/12 10:00:0{i}.101", 6, "putdone", token)):
            src.feed(line)
        store.merge(pipeline.take_changes())
    assert not store.requests  # none open
    remembered = sorted(token for keys in store.finished.values() for _, token in keys)
    assert remembered == tokens[-2:]


def test_a_restored_pipeline_takes_its_changes_against_the_restored_state():
    from tests.dpmlog import T1, T2, put
    pipeline = Pipeline(lambda r: None)
    pipeline.track_changes()
    src = pipeline.source("dpm", host="h", tz="UTC", year=2011)
    for line in put("08/12 10:00:00.000", 3, T1, end="08/12 10:00:00.002"):
        src.feed(line)
    restored = Pipeline(lambda r: None)
    restored.track_changes()
    restored.restore(stored(pipeline.take_changes()))
    assert not restored.take_changes()  # nothing happened since: nothing to store again
    for line in put("08/12 10:00:01.000", 4, T2, end="08/12 10:00:01.002"):
        restored.sources["dpm"].feed(line)
    changes = restored.take_changes()
    assert set(changes.requests) == {RequestKey("h", T2)} and changes.clock is not None


_DOMAIN_ONLY = """
import sys

class EdgesBlocked:
    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if (name.startswith(("dpmstream.streams", "dpmstream.probes", "dpmstream.commands"))
                or top in ("faust", "aiokafka", "kafka", "prometheus_client")):
            raise ImportError(f"the domain imported {name}")
        return None

sys.meta_path.insert(0, EdgesBlocked())
import dpmstream.parsers.pipeline
"""


def test_the_pipeline_imports_only_the_domain():
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-c", _DOMAIN_ONLY], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr


def test_feed_lines_gives_the_records_and_counts_of_feeding_line_by_line(tmp_path):
    cfg, paths = scenario_logs(tmp_path, "mixed")
    lines = paths[0].read_bytes().splitlines(keepends=True)
    rng = random.Random(3)
    for i in range(40):  # bad input scattered through it
        lines.insert(rng.randrange(len(lines)), rng.choice([b"\xff\xfe garbage\n", b"\x00\x01\n", b"12/3\n"]))
    by_line = run_pipeline(lines, chunked=False)
    chunked = run_pipeline(lines, chunked=True)
    assert by_line[1] == chunked[1] and by_line[2] == chunked[2]
    assert by_line[0] == chunked[0] and by_line[0]


@pytest.mark.parametrize("engine", [e for e in engines.ENGINES
                                    if e == engines.PYTHON or engines.compiled_available()])
@pytest.mark.parametrize("memory", [0, -1, MAX_DUPLICATE_MEMORY + 1])
def test_a_duplicate_memory_out_of_range_is_refused_by_either_engine(engine, memory):
    want = f"duplicate memory must be 1 to {MAX_DUPLICATE_MEMORY} lines, not {memory}"
    with pytest.raises(ValueError, match=want):
        Pipeline(lambda record: None, engine=engine, duplicate_memory=memory)


@pytest.mark.skipif(not engines.compiled_available(), reason="extension not built")
def test_the_compiled_engine_refuses_an_out_of_range_memory_itself():
    # Its window holds ring positions in 32 bits: a larger memory would wrap them.
    from dpmstream.parsers._native import Core
    with pytest.raises(ValueError, match="duplicate memory must be 1 to"):
        Core(lambda record: None, duplicate_memory=MAX_DUPLICATE_MEMORY + 1)
    with pytest.raises(ValueError, match="duplicate memory must be 1 to"):
        Core(lambda record: None, duplicate_memory=0)


HUGE_LINE_BYTES = 96 * 1024 * 1024  # garbage a site's log may hold: a line of 96 MB


@pytest.mark.parametrize("engine", [e for e in engines.ENGINES
                                    if e == engines.PYTHON or engines.compiled_available()])
@pytest.mark.parametrize("as_block", [False, True])
def test_a_huge_line_is_one_malformed_line_counted_with_its_place_and_the_stream_goes_on(
        engine, as_block):
    """Issue 26 item 8: a line of tens of megabytes is refused by its length before any
    pattern, decoding or copy of it (lines.MAX_LINE_BYTES): one malformed line, its place
    remembered, and the lines around it read as without it."""
    from dpmstream.parsers.lines import MAX_LINE_BYTES, TOO_LONG
    from dpmstream.parsers.profiles import resolve_profile
    from tests.dpmlog import T1, put

    if as_block and not engines.compiled_available():
        pytest.skip("LineBlock is the extension's")
    good = [text.encode() for text in put("08/12 10:00:01.000", 3, T1, end="08/12 10:00:01.010")]
    huge = good[0][:40] + b"x" * HUGE_LINE_BYTES
    data = b"\n".join(good[:2] + [huge] + good[2:]) + b"\n"
    del huge
    if as_block:
        from dpmstream.parsers._native import LineBlock
        lines = LineBlock.split(data, 1000, True)[0][0]
    else:
        lines = data.splitlines(keepends=True)
    records: list[dict] = []
    pipeline = Pipeline(records.append, engine=engine)
    src = pipeline.source("dpm", host="h", tz="UTC", year=2011, profile=resolve_profile("lcgdm-dpm"))
    src.feed_lines(lines)
    pipeline.finish()
    assert MAX_LINE_BYTES < HUGE_LINE_BYTES
    assert (src.n_parsed, src.n_unmatched, src.n_malformed) == (len(good), 0, 1)
    (example,) = pipeline.stats.bad_examples
    assert example[:3] == ("dpm", 3, TOO_LONG) and len(example[3]) <= 160
    assert [r["op"] for r in records] == ["put"]
