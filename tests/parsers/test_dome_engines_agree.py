"""The compiled DOME engine agrees with the Python one (parsers/compiled_dome.py against
parsers/dome_lines.py and parsers/dome_reassembly.py, chosen in parsers/engines.py).

Python's DomeLineParser and DomeReassembler are the reference. Simulated DOME sites of
several shapes (both stamp styles, journalctl's `+0200`, the generation without {TID}, a
disk node down and back, the head restarting with PUTCOUNT from 1, a journald gap, cut
calls) at a site's size are read by each engine's parser, the nodes merged by event time,
and fed to each engine: every line must read alike, and the records must be the same,
record for record, in the same order, with the same counters. Snapshots written by one
engine restore in the other. Hostile lines are counted alike by both, never a crash.

Each sweep of shapes runs whole in `make test`; `make check` runs a sample of it
(tests/helpers.py sampled) on two shapes (tid-traditional, notid-rfc3339: both stamp
styles and both generations), and the caps and timeouts once each.

The compiled engine missing: these tests skip, unless DPMSTREAM_REQUIRE_NATIVE is set,
where they fail.
"""

import json
import os
import re
import time
from pathlib import Path

import pytest

from dpmstream.parsers import engines
from dpmstream.parsers.clock import EventClock
from dpmstream.parsers.dome_lines import DomeEvent
from dpmstream.parsers.compiled_dome import scan_plan
from dpmstream.parsers.dome_profiles import FORMS, dome_profile_from_dict, resolve_dome_profile
from dpmstream.parsers.lines import MAX_LINE_BYTES
from dpmstream.parsers.profiles import read_profile_file
from dpmstream.parsers.dome_reassembly import merge_by_time
from dpmstream.simulator.dome_config import DomeConfig
from dpmstream.simulator import simulate
from dpmstream.simulator.dome_run import simulate_dome
from dpmstream.simulator.scenarios import scenario
from dpmstream.streams.kafka.envelope import decode

from tests.helpers import sampled

PYTHON, COMPILED = engines.PYTHON, engines.COMPILED
REAL_SRM = Path(__file__).parents[1] / "data" / "real" / "srmv2-manpage-example.log"
REQUIRED = bool(os.environ.get("DPMSTREAM_REQUIRE_NATIVE"))
pytestmark = pytest.mark.skipif(
    not (engines.compiled_dome_available() or REQUIRED),
    reason="compiled DOME engine not built (parsers/compiled_dome.py, native/)")

# Site shapes: (stamp, envelope, generation, accept lines). A disk node down and back, the
# head restarting (PUTCOUNT from 1, a slow call cut) and a journald gap in every one.
SHAPES = {
    "tid-traditional": dict(stamp="traditional", envelope="dmlite-log", generation="tid", accept_lines=True),
    "tid-rfc3339-no-accept": dict(stamp="rfc3339", envelope="dmlite-log", generation="tid", accept_lines=False),
    "tid-journal-0200": dict(stamp="traditional", envelope="journal", generation="tid", accept_lines=True),
    "tid-messages-rfc3339": dict(stamp="rfc3339", envelope="messages", generation="tid", accept_lines=True),
    "notid-traditional": dict(stamp="traditional", envelope="dmlite-log", generation="notid", accept_lines=True),
    "notid-rfc3339": dict(stamp="rfc3339", envelope="kafka", generation="notid", accept_lines=True),
}


def test_the_compiled_dome_engine_is_built_where_the_install_could_build_it():
    if not REQUIRED:
        pytest.skip("DPMSTREAM_REQUIRE_NATIVE not set")
    assert engines.compiled_dome_available(), "the compiled DOME engine was not built by the install"
    assert engines.choose(None, engines.compiled_dome_available) == COMPILED


def site_config(shape: str, **more) -> DomeConfig:
    settings = dict(duration=600.0, rate=3.0, disks=4, disk_down_at=150.0, disk_down_s=120.0,
                    restart_at=380.0, gap_at=250.0, gap_s=4.0, timeout=120.0)
    settings.update(SHAPES[shape])
    settings.update(more)
    return DomeConfig(**settings)


def profile_of(cfg: DomeConfig):
    return resolve_dome_profile("dmlite-dome" if cfg.generation == "tid" else "dmlite-dome-notid")


def node_lines(path, cfg: DomeConfig) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    if cfg.envelope == "kafka":
        lines = [decode(text.encode()).line for text in lines]
    return lines


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A simulated site per shape, made once: (config, [lines of each node])."""
    made = {}

    def get(shape):
        if shape not in made:
            cfg = site_config(shape)
            result = simulate_dome(cfg, tmp_path_factory.mktemp(shape) / "site")
            made[shape] = (cfg, [node_lines(path, cfg) for path in result.logs.values()])
        return made[shape]
    return get


@pytest.fixture(scope="module")
def python_events(site):
    """The Python parser's events of each node of a shape's site, parsed once per shape:
    the input most tests here feed both engines (the parsers themselves are compared
    line by line in test_both_parsers_read_every_simulated_line_alike)."""
    made = {}

    def get(shape):
        if shape not in made:
            cfg, nodes = site(shape)
            made[shape] = [tuple(events(PYTHON, cfg, lines)) for lines in nodes]
        return made[shape]
    return get


@pytest.fixture(scope="module")
def python_run(site, python_events):
    """The Python engine's (records, counters) over a shape's site, run once per shape:
    the reference most tests here hold the compiled engine to."""
    made = {}

    def get(shape):
        if shape not in made:
            cfg, _ = site(shape)
            made[shape] = run(PYTHON, cfg, python_events(shape))
        return made[shape]
    return get


def events(parser_engine: str, cfg: DomeConfig, lines: list[str]):
    parser = engines.new_dome_parser(parser_engine, profile_of(cfg), EventClock(cfg.tz, year=2017))
    for text in lines:
        ev = parser.parse(text)
        if ev is not None:
            yield ev


def compiled_events(cfg: DomeConfig, nodes) -> list:
    """Each node's lines read by the compiled parser, as the compiled engine reads them."""
    return [events(COMPILED, cfg, lines) for lines in nodes]


def run(engine: str, cfg: DomeConfig, streams, *, snapshot_every: int = 0,
        restore_in: str | None = None, advance_every: int = 0, **settings):
    """Records and counters of one engine over the nodes' event streams merged; with
    snapshot_every, the engine is rebuilt every so many events from its snapshot
    (through JSON) in `restore_in`'s engine, alternating."""
    settings = {"timeout_ms": int(cfg.timeout * 1000), **settings}
    current = engine
    r = engines.new_dome_reassembler(current, **settings)
    records = []
    for n, ev in enumerate(merge_by_time(streams), 1):
        records += r.feed(ev)
        if advance_every and n % advance_every == 0:
            records += r.advance(ev.ts - 5_000)
        if snapshot_every and n % snapshot_every == 0:
            state = json.loads(json.dumps(r.snapshot()))
            current = restore_in if current == engine else engine
            cls = type(engines.new_dome_reassembler(current, **settings))
            r = cls.from_snapshot(state, **settings)
    records += r.finish()
    return records, r.stats


def first_difference(want: list[dict], got: list[dict]) -> str:
    for i, (a, b) in enumerate(zip(want, got)):
        if a != b:
            return f"record {i}: python {a}\n compiled {b}"
    return f"lengths: python {len(want)}, compiled {len(got)}"


CHECKED = ("tid-traditional", "notid-rfc3339")


@pytest.mark.parametrize("shape", sampled(sorted(SHAPES), keep=CHECKED))
def test_both_engines_give_the_same_dome_records_in_the_same_order(site, python_run, shape):
    cfg, nodes = site(shape)
    want, want_stats = python_run(shape)
    got, got_stats = run(COMPILED, cfg, compiled_events(cfg, nodes))
    assert got == want, first_difference(want, got)
    assert got_stats == want_stats
    kinds = {k: sum(r["kind"] == k for r in want) for k in ("dome_call", "dome_put", "dome_capacity", "dome_fs_event")}
    print(f"{shape}: {kinds}; {want_stats.as_dict()}")
    assert kinds["dome_put"] > 1500 and kinds["dome_capacity"] > 50 and kinds["dome_fs_event"] > 0
    assert want_stats.process_deaths >= 2 and want_stats.putcount_joins > 0
    # the no-join warning's count (parsers/pipeline.py): the put records with a putdone time
    joined = [r for r in want if r["kind"] == "dome_put"
              and (r["putdone_disk_time"] is not None or r["putdone_head_time"] is not None)]
    assert 0 < want_stats.puts_joined == len(joined) < want_stats.puts
    if cfg.generation == "tid":
        assert kinds["dome_call"] > 5000 and want_stats.cut_calls > 0
    else:
        assert kinds["dome_call"] == 0 and want_stats.unframed_lines > 0


@pytest.mark.parametrize("shape", sampled(["tid-traditional", "tid-journal-0200", "notid-rfc3339"],
                                          keep=CHECKED))
def test_both_parsers_read_every_simulated_line_alike(site, shape):
    cfg, nodes = site(shape)
    read_alike(cfg, nodes, profile_of(cfg))


def read_alike(cfg: DomeConfig, nodes, profile) -> set[str]:
    """Each node's lines read by both parsers with `profile`, required alike line by line
    (event, result and reason); the roles and results the lines read as."""
    results = set()
    for lines in nodes:
        reference = engines.new_dome_parser(PYTHON, profile, EventClock(cfg.tz, year=2017))
        compiled = engines.new_dome_parser(COMPILED, profile, EventClock(cfg.tz, year=2017))
        for text in lines:
            want, got = reference.parse(text), compiled.parse(text)
            assert (None if got is None else got.event()) == want, text
            if got is not None:
                seen = (got.ts, got.host, got.program, got.pid, got.tid, got.role, got.whole_seconds)
                assert seen == (want.ts, want.host, want.program, want.pid, want.tid, want.role, want.whole_seconds)
            assert (compiled.result, compiled.reason) == (reference.result, reference.reason), text
            results.add(reference.result if want is None else want.role)
    return results


def test_lines_no_envelope_may_start_are_read_alike(site):
    """The compiled scanner's verdict on a line no form's envelope can start (every line of
    a DPM log, which `profile check` hands each DOME profile) comes without the event it
    would make: the same result and reason as Python's, the long and NUL-holding ones too."""
    cfg, nodes = site("tid-traditional")
    dpm = "08/12 14:31:40.275 12345,21 dpm_srv_proc_put: selected disk03.cern.ch:/srv/dpm/02 for srm://h/f"
    odd = [dpm, dpm + "\r\n", "", "\r\n", "no syslog envelope at all", "x" * (MAX_LINE_BYTES + 1),
           dpm + " " + "x" * MAX_LINE_BYTES, dpm + "\x00 a NUL", "\x00", nodes[0][0] + "\x00"]
    assert read_alike(cfg, [odd], profile_of(cfg)) == {"malformed"}


@pytest.mark.parametrize("shape", sampled(["tid-traditional", "notid-traditional"],
                                          keep=["tid-traditional"]))
def test_the_compiled_engine_takes_the_python_parsers_events(site, python_events, python_run, shape):
    # `make check`: tid only; the snapshot test below feeds notid-rfc3339's Python events
    # to the compiled engine too (compiled-then-python).
    cfg, _ = site(shape)
    want, want_stats = python_run(shape)
    got, got_stats = run(COMPILED, cfg, python_events(shape))
    assert got == want, first_difference(want, got)
    assert got_stats == want_stats


TIGHT = {
    "caps": dict(max_calls=3, max_puts=25),
    "timeouts": dict(timeout_ms=5_000, allowance_ms=500),
}


@pytest.mark.parametrize("shape,tight", sampled(
    [(shape, tight) for shape in ("tid-rfc3339-no-accept", "notid-traditional") for tight in sorted(TIGHT)]
    + [("tid-traditional", "caps"), ("notid-rfc3339", "timeouts")],
    keep=[("tid-traditional", "caps"), ("notid-rfc3339", "timeouts")]))
def test_both_engines_agree_where_caps_timeouts_and_advances_bite(site, python_events, shape, tight):
    # Both bounds on two shapes of their own, and (the cells `make check` runs) each bound
    # once on a shape the other tests here simulate too.
    cfg, nodes = site(shape)
    want, want_stats = run(PYTHON, cfg, python_events(shape), advance_every=997, **TIGHT[tight])
    got, got_stats = run(COMPILED, cfg, compiled_events(cfg, nodes), advance_every=997, **TIGHT[tight])
    assert got == want, first_difference(want, got)
    assert got_stats == want_stats
    if tight == "caps":
        assert want_stats.put_evictions > 0
        assert want_stats.call_evictions > 0 or cfg.generation == "notid"
    else:
        assert want_stats.expired_puts > 0
        assert want_stats.expired_calls > 0 or cfg.generation == "notid"


ORDERS = {"python-then-compiled": (PYTHON, COMPILED), "compiled-then-python": (COMPILED, PYTHON)}


@pytest.mark.parametrize("shape,order", sampled(
    [(shape, order) for shape in CHECKED for order in ORDERS],
    keep=[("tid-traditional", "python-then-compiled"), ("notid-rfc3339", "compiled-then-python")]))
def test_a_snapshot_written_by_one_engine_restores_in_the_other(site, python_events, python_run, shape, order):
    """Stopped every 1,500 events, its snapshot through JSON rebuilt in the other engine
    (and back): the records, their order and the counters of one uninterrupted run."""
    first, second = ORDERS[order]
    cfg, _ = site(shape)
    want, want_stats = python_run(shape)
    got, got_stats = run(first, cfg, python_events(shape), snapshot_every=1_500, restore_in=second)
    assert got == want, first_difference(want, got)
    assert got_stats == want_stats


@pytest.mark.parametrize("engine", [PYTHON, COMPILED])
def test_a_snapshot_stored_before_puts_joined_was_counted_restores_with_it_from_zero(
        site, python_events, python_run, engine):
    """A snapshot whose counters have no `puts_joined` (stored before DomeStats counted
    it) restores in either engine: the same records, every other counter as in one
    uninterrupted run, and puts_joined counting the puts joined since the restore."""
    shape = "tid-traditional"
    cfg, _ = site(shape)
    want, want_stats = python_run(shape)
    settings = {"timeout_ms": int(cfg.timeout * 1000)}
    events = list(merge_by_time(python_events(shape)))
    half = len(events) // 2
    r = engines.new_dome_reassembler(PYTHON, **settings)
    got = [record for ev in events[:half] for record in r.feed(ev)]
    state = json.loads(json.dumps(r.snapshot()))
    joined_before = state["stats"].pop("puts_joined")
    assert joined_before > 0
    r = type(engines.new_dome_reassembler(engine, **settings)).from_snapshot(state, **settings)
    assert r.stats.puts_joined == 0
    for ev in events[half:]:
        got += r.feed(ev)
    got += r.finish()
    assert got == want, first_difference(want, got)
    assert r.stats == want_stats.replace(puts_joined=want_stats.puts_joined - joined_before)


# Snapshot lists made from a dict or a set: their order is the engine's own business.
UNORDERED = ("put_threads", "done_threads", "unselected", "by_name", "selected_count", "offset")


def comparable(state: dict) -> dict:
    state = json.loads(json.dumps(state))
    for name in UNORDERED:
        state["puts"][name] = sorted(state["puts"][name], key=json.dumps)
    return state


@pytest.mark.parametrize("shape", sampled(list(CHECKED), keep=["tid-traditional"]))
def test_both_engines_hold_the_same_state_in_the_same_snapshot_shape(site, python_events, shape):
    """Fed the same events, the two snapshots are equal every 1,500 events (open calls and
    puts in activity order, indices, PUTCOUNT counts and offsets, waiting putdones,
    clocks, counters), the lists built from a dict compared as sets. (`make check`: tid;
    a notid snapshot of the compiled engine restores in the Python one in
    test_a_snapshot_written_by_one_engine_restores_in_the_other[notid-rfc3339-compiled-then-python].)"""
    cfg, _ = site(shape)
    settings = {"timeout_ms": int(cfg.timeout * 1000)}
    reference = engines.new_dome_reassembler(PYTHON, **settings)
    compiled = engines.new_dome_reassembler(COMPILED, **settings)
    compared = 0
    for n, ev in enumerate(merge_by_time(python_events(shape)), 1):
        assert compiled.feed(ev) == reference.feed(ev)
        if n % 1_500 == 0:
            want = comparable(reference.snapshot())
            assert comparable(compiled.snapshot()) == want, n
            compared += bool(want["puts"]["open"]) and bool(want["calls"] or cfg.generation == "notid")
    assert compared > 20


def test_the_compiled_engine_reads_one_streams_lines_without_python_per_line(site):
    """feed_lines (scanner and reassembler in one call) gives what the Python parser and
    engine give, line by line, on one node's log; the lines/s of each, for information."""
    cfg, nodes = site("tid-traditional")
    head = nodes[0]
    profile = profile_of(cfg)
    settings = {"timeout_ms": int(cfg.timeout * 1000)}
    started = time.perf_counter()
    want, want_stats = run(PYTHON, cfg, [events(PYTHON, cfg, head)])
    python_s = time.perf_counter() - started
    parser = engines.new_dome_parser(COMPILED, profile, EventClock(cfg.tz, year=2017))
    engine = engines.new_dome_reassembler(COMPILED, **settings)
    started = time.perf_counter()
    got = []
    for at in range(0, len(head), 5_000):
        got += engine.feed_lines(parser, head[at:at + 5_000])
    got += engine.finish()
    compiled_s = time.perf_counter() - started
    assert got == want, first_difference(want, got)
    assert engine.stats == want_stats
    assert parser.counts()["parsed"] == want_stats.lines
    print(f"{len(head)} lines of one head node: python {len(head) / python_s:,.0f} lines/s, "
          f"compiled {len(head) / compiled_s:,.0f} lines/s (a loaded machine: information only)")


HOSTILE = [
    "May 30 08:44:05 dpmhead01 dome[2345]: {140685573784640}[1] dmlite dome workerFunc : req:POS",  # truncated
    "May 30 08:44:05 dpmhead01 dome[2345]: {1406855",
    "May 30 08:44",
    "",
    "May 30 08:44:05 dpmhead01 dome[2345]: {140685573784640}[1] dmlite dome dome_put : Entering. lfn: '"
    + "x" * 70_000 + "' addreplica: 0 pool: '' host: '' fs: ''",                             # huge
    "May 30 08:44:05 dpmhead01 dome[2345]: {140685573784640}[1] dmlite dome dome_put : Entering. lfn: '"
    + "é" * 33_000 + "' addreplica: 0 pool: '' host: '' fs: ''",                             # huge in bytes only
    b"May 30 08:44:06 dpmhead01 dome[2345]: {140685573784640}[1] dmlite dome workerFunc : clientdn: "
    b"'\xff\xfe/CN=x' clienthost: 'h' remoteclient: '' remoteclienthost: ''".decode("utf-8", "replace"),
    "May 30 08:44:06 dpmhead01 dome[2345]: {18446744073709551616}[1] dmlite dome SendSimpleResp : Exiting: code: 200",
    "May 30 08:44:06 dpmhead01 dome[2345]: {18446744073709551615}[1] dmlite dome SendSimpleResp : Exiting: code: 200",
    "May 30 08:44:06 dpmhead01 dome[99999999999999999999]: {1}[1] dmlite dome SendSimpleResp : Exiting: code: 200",
    "May 30 08:44:06 dpmhead01 dome[2345]: {1}[1] dmlite dome SendSimpleResp : Exiting: code: 200\x00",
    "May 30 08:44:06 dpmhead01 dome[2345]: {١٢٣}[1] dmlite dome SendSimpleResp : Exiting: code: 200",
    "Feb 30 08:44:06 dpmhead01 dome[2345]: {1}[1] dmlite dome SendSimpleResp : Exiting: code: 200",
    "2017-02-29T08:44:06.000001+02:00 dpmhead01 dome[2345]: {1}[1] dmlite dome SendSimpleResp : Exiting: code: 200",
    "2017-05-30T08:44:06+24:00 dpmhead01 dome[2345]: {1}[1] dmlite dome SendSimpleResp : Exiting: code: 200",
    "2017-05-30T08:44:06+02:60 dpmhead01 dome[2345]: {1}[1] dmlite dome SendSimpleResp : Exiting: code: 200",
    "2017-05-30T08:44:06Z dpmhead01 dome: {1}[1] dmlite dome SendSimpleResp : Exiting: code: 200",
    "2017-05-30T08:44:06Z dpmhead01 dome[1]: {1}[1] dmlite dome SendSimpleResp : Exiting: code: 200\n",
    "2017-05-30T08:44:06Z dpmhead01 dome[1]: {1}[1] dmlite dome SendSimpleResp : Exiting: code: 200 \u00a0",
    "2017-05-30T08:44:06Z dpmhead01 sshd[1]: Accepted publickey for root",
    "2017-05-30T08:44:06Z dpmhead01 dome[1]: Suppressed 12 messages",
    "2017-05-30T08:44:06Z dpmhead01 systemd-journald[412]: Suppressed 12 messages from /system.slice/dome.service",
    "2017-05-30T08:44:06Z dpmhead01 systemd-journald[412]: Suppressed 99999999999999999999 messages from dome.service",
    "2017-05-30T08:44:06Z dpmhead01 systemd-journald[412]: Suppressed  messages from dome.service",
    "2017-05-30T08:44:06Z dpmhead01 systemd-journald: Suppressed 3 messages from xrootd@dpm.service trailing",
    "Feb 30 08:44:06 dpmhead01 journal: Suppressed 3 messages from /system.slice/xrootd@dpm.service",
    "May 30 08:44:06 dpmhead01 journal: Suppressed 3 messages from /system.slice/xrootd@dpm.service \t",
    "2017-05-30T08:44:06Z dpmhead01 dome[1]: {1}[1] dmlite some thing nobody : knows",
    "2017-05-30T08:44:06Z dpmhead01 dome[1]: {1}[1] dmlite ",
    "2017-05-30T08:44:07Z dpmhead01 dome[1]: {2}[1] dmlite dome dome_put : Selected fs: 'd1:/fs1 from 2 "
    "matchings for lfn: '/dpm/cern.ch/home/atlas/f'",
    "2017-05-30T08:44:08Z dpmdisk01 dome[7]: {3}[1] dmlite dome dome_putdone_disk :  server: 'd1' "
    "pfn: '/fs1/atlas/2017-05-30/f.².1496126647'  size: 1 cksumt: '' cksumv: ''",
    "2017-05-30T08:44:08Z dpmdisk01 dome[7]: {3}[1] dmlite dome dome_putdone_disk :  server: 'd1' "
    "pfn: '/fs1/atlas/2017-05-30/f.1.99999999999999999999999999'  size: 1 cksumt: '' cksumv: ''",
    "2017-05-30T08:44:08Z dpmdisk01 dome[7]: {3}[1] dmlite dome dome_putdone_disk :  server: 'd1' "
    "pfn: '/fs1/atlas/2017-05-30/f.1.1496126647'  size: 99999999999999999999 cksumt: '' cksumv: ''",
    "2017-05-30T08:44:08Z dpmdisk01 dome[7]: {3}[1] dmlite dome dome_putdone_disk :  server: 'd1' "
    "pfn: '/fs1/atlas/2017-05-30/f.1.1496126647'  size: 5 cksumt: '' cksumv: ''",   # no put of that second
]


def test_hostile_dome_lines_are_counted_alike_by_both_engines_never_a_crash():
    """Truncated, huge (in characters, or in UTF-8 bytes only), non-UTF-8 (as the sources
    decode it), a TID past 64 bits, NUL bytes, non-ASCII digits, impossible dates and
    offsets, a PFN whose PUTCOUNT is `²` or whose EPOCH has 26 digits: each line reads
    alike (result and reason) in both parsers, both engines go on and agree."""
    cfg = DomeConfig(tz="Europe/Zurich")
    profile = profile_of(cfg)
    outcomes = {}
    for engine in (PYTHON, COMPILED):
        parser = engines.new_dome_parser(engine, profile, EventClock(cfg.tz, year=2017))
        r = engines.new_dome_reassembler(engine, timeout_ms=60_000)
        results, records = [], []
        for text in HOSTILE:
            ev = parser.parse(text)
            results.append((parser.result, parser.reason))
            if ev is not None:
                records += r.feed(ev)
        records += r.finish()
        outcomes[engine] = (results, records, r.stats)
    (want_results, want_records, want_stats), (got_results, got_records, got_stats) = outcomes[PYTHON], outcomes[COMPILED]
    for text, want, got in zip(HOSTILE, want_results, got_results):
        assert got == want, text[:200]
    assert got_records == want_records and got_stats == want_stats
    results = [res for res, _ in want_results]
    assert results.count("malformed") >= 10 and "foreign" in results and "unmatched" in results
    assert want_stats.unusable_lines == 2 and want_stats.orphan_putdones == 1
    # The same lines in one feed_lines call: each counted by its result, the same records.
    parser = engines.new_dome_parser(COMPILED, profile, EventClock(cfg.tz, year=2017))
    r = engines.new_dome_reassembler(COMPILED, timeout_ms=60_000)
    assert r.feed_lines(parser, HOSTILE) + r.finish() == want_records
    assert parser.counts() == {res: results.count(res) for res in ("parsed", "unmatched", "foreign", "malformed")}


def test_a_pfn_whose_putcount_is_no_ascii_number_is_unusable_not_a_crash():
    """`str.isdigit` takes `²` and int() refuses it: the Python engine crashed on such a
    PFN (found writing the compiled twin); now both count it as an unusable line."""
    for engine in (PYTHON, COMPILED):
        r = engines.new_dome_reassembler(engine)
        ev = DomeEvent(1_000, "dpmdisk01", "dome", 7, 3, 1, False, "putdone_disk",
                       {"server": "d1", "pfn": "/fs1/atlas/2017-05-30/f.².1496126647", "size": 1}, False)
        assert r.feed(ev) == []
        assert r.stats.unusable_lines == 1, engine


# A site's wording that captures more than digits where a number belongs (phys, free).
LOOSE_NUMBERS = {"capacity": r"dome checkDiskSpaces : fs: (?P<fs>\S+) phys: (?P<phys>\S+) free: (?P<free>\S+)"}


@pytest.mark.parametrize("shape", CHECKED)
def test_a_number_field_a_sites_profile_reads_as_text_is_a_malformed_line_in_both_parsers(site, shape):
    """A profile may let a number field take any text: the Python parser crashed on int()
    of it and the compiled one read it as 0; both now count the line as malformed, and
    the other lines read as before."""
    cfg, nodes = site(shape)
    profile = variant(profile_of(cfg), LOOSE_NUMBERS)
    capacity = next(line for lines in nodes for line in lines if " phys: " in line and " free: " in line)
    odd = [capacity.replace(" free: ", " free: x"), capacity.replace(" phys: ", " phys: -"),
           capacity.replace(" free: ", " free: \N{SUPERSCRIPT TWO}"), capacity]
    assert "capacity" in read_alike(cfg, [*nodes, odd], profile)
    for engine in (PYTHON, COMPILED):
        parser = engines.new_dome_parser(engine, profile, EventClock(cfg.tz, year=2017))
        read = [(parser.parse(line) is None, parser.result) for line in odd]
        assert read == [(True, "malformed")] * 3 + [(False, "parsed")], engine


# A site's own wording: role patterns changed so that the leads the compiled scanner reads
# from them (regex_lead.py) differ from the bundled ones'; some no longer fit every line.
REWORDED = {
    "accept": r"\S+ workerFunc : Accepted connection, ipcfd: \d+, keepConnection: \d+",   # no lead
    "command": [r"dome workerFunc : req:GET cmd:(?P<op>\w+) query:(?P<query>\S*) bodyitems: \d+",
                r"(?:dome workerFunc) : req:(?P<method>POST|PUT) cmd:(?P<op>\w+) query:(?P<query>\S*) bodyitems: \d+"],
    "returns": r"dome SendSimpleResp : Exiting: code: (?P<code>2\d\d)",   # 4xx, 5xx and other WHEREs: other
    "put": r"(?i:DOME dome_put : entering)\. lfn: '(?P<lfn>.*)' addreplica: \d+ pool: '[^']*' host: '[^']*' fs: '[^']*'",
    "putdone_disk": r"(?x: dome \s dome_putdone_disk \s : \s\s server: \s )'(?P<server>[^']*)'.*? size: (?P<size>\d+) .*",
    "other": [r"dome (?P<fs>\w+) : .*"],
}
# ... and a pattern naming an envelope group, which cannot be matched alone.
BACKREFERENCE = {"startup": r"dome DomeStatus : My automatically detected hostname is: (?P<server>(?P=host)\S*)"}


def variant(profile, roles: dict):
    data = read_profile_file(profile.source)
    data["roles"] = {**data["roles"], **roles}
    return dome_profile_from_dict(data, source=f"{profile.source} (a site's wording)")


@pytest.mark.parametrize("shape", CHECKED)
@pytest.mark.parametrize("wording,split,seen", [(REWORDED, True, "unmatched"), (BACKREFERENCE, False, "startup")],
                         ids=["reworded", "backreference"])
def test_a_profile_of_other_wording_reads_alike_in_both_parsers(site, shape, wording, split, seen):
    """The compiled scanner's prefilter and its one pattern per role are built from the
    profile it is given: a site's own wording (other leads, none, a case-insensitive or
    verbose group, a role that no longer takes every line) reads every line as the
    Python parser does; a pattern naming an envelope group keeps the one regex."""
    cfg, nodes = site(shape)
    profile = variant(profile_of(cfg), wording)
    assert all((scan_plan(form)[1][0][1] is not None) == split for form in profile.forms.values())
    assert {"command", "returns", "other", seen} <= read_alike(cfg, nodes, profile)


# A site's envelope that starts otherwise: a syslog priority before either stamp (a first
# byte PCRE2 reads as one literal), or a case-insensitive lookahead before the month.
PRIORITY = "<13>"
ENVELOPE_STARTS = {
    "priority": lambda env: {form: re.escape(PRIORITY) + env[form] for form in ("traditional", "rfc3339")},
    "caseless-lookahead": lambda env: {"traditional": "(?i:(?=[jfmasond]))" + env["traditional"]},
}
# Lines at the edge of the forms' first bytes: empty, one byte, a month's other case, a
# non-ASCII first character, a year, a priority; and a line of each form with each of its
# first places changed or cut there (the scanner passes over a line without the bytes of
# the envelope's lead, compiled_dome.envelope_lead, which ends within them).
STAMPED = ["2017-05-30T08:44:05.123456+02:00 h dome[1]: {1}[1] dmlite dome x : y",
           "May 30 08:44:05 h dome[1]: {1}[1] dmlite dome x : y"]
EDGES = ["", "M", "may 30 08:44:05 h dome[1]: {1}[1] dmlite x", "É", "2", "<", PRIORITY,
         PRIORITY + "May 30 08:44:05 h cron[1]: x", "\tMay 30 08:44:05 h dome[1]: x",
         *(text[:i] + c + text[i + 1:] for text in STAMPED for i in range(24) for c in "0/ -T:aé"),
         *(text[:i] for text in STAMPED for i in range(24))]


@pytest.fixture(scope="module")
def dpm_lines(tmp_path_factory) -> list[str]:
    """A simulated DPM head's lines (both daemons) and the real SRM example's."""
    result = simulate(scenario("thesis", requests=60), tmp_path_factory.mktemp("dpm") / "thesis")
    lines = []
    for path in (result.log_path, result.dpns_log_path, REAL_SRM):
        lines += path.read_text(encoding="utf-8", errors="replace").splitlines()
    return lines


@pytest.mark.parametrize("shape", CHECKED)
@pytest.mark.parametrize("starts", [None, *ENVELOPE_STARTS])
def test_lines_a_form_cannot_start_read_alike_in_both_parsers(site, dpm_lines, shape, starts):
    """The compiled scanner passes over a form whose envelope cannot start with a line's
    first bytes (regex_lead's reading of the profile's own envelope) without matching it: a DPM
    head's lines, a DOME site's and the edge cases read as the Python parser reads them
    (event, result and reason), with the bundled profile and with a site's envelope that
    starts otherwise."""
    cfg, nodes = site(shape)
    profile, prefix = profile_of(cfg), ""
    if starts is not None:
        data = read_profile_file(profile.source)
        data["envelope"] = {**data["envelope"], **ENVELOPE_STARTS[starts](data["envelope"])}
        profile = dome_profile_from_dict(data, source=f"{profile.source} ({starts})")
        prefix = PRIORITY if starts == "priority" else ""
    dome = [prefix + text for lines in nodes for text in lines]
    results = read_alike(cfg, [dpm_lines, dome, EDGES, [text.lower() for text in dome[:200]]], profile)
    assert {"malformed", "command"} <= results
    if starts is None or starts == "priority":
        assert len(read_alike(cfg, [dpm_lines], profile)) == 1, "a DPM line is never a DOME profile's"


@pytest.mark.parametrize("name", ["dmlite-dome", "dmlite-dome-notid"])
def test_every_bundled_dome_profile_has_each_forms_head_read_by_hand(name):
    # native/src/dome_head.rs reads these heads where PCRE2's JIT code spent ~1,140
    # instructions a line; a bundled envelope or dmlite prefix reworded even by a byte
    # would lose it (the tests above still hold then: the pattern reads it), and with it
    # ~4% of a DOME replay's instructions
    parser = engines.new_dome_parser(COMPILED, resolve_dome_profile(name), EventClock("UTC", year=2017))
    assert parser.scanner.heads_read_by_hand == [True, True]
    data = read_profile_file(resolve_dome_profile(name).source)
    data["envelope"] = {**data["envelope"], **ENVELOPE_STARTS["priority"](data["envelope"])}
    other = dome_profile_from_dict(data, source="a site's")
    assert engines.new_dome_parser(COMPILED, other, EventClock("UTC", year=2017)).scanner.heads_read_by_hand == [False, False]


# The roles a DOME site's lines nearly all have (and `other`, the catch-all's patterns):
# native/src/dome_roles.rs reads them where PCRE2's JIT code spent ~1,200 instructions a
# line (~2,170 on a `call` line). The rarer roles stay the pattern's.
ROLES_READ_BY_HAND = {"accept", "call", "command", "returns", "put", "put_selected", "putdone_disk",
                      "putdone_forward", "putdone_head", "putdone_size", "other"}


@pytest.mark.parametrize("name", ["dmlite-dome", "dmlite-dome-notid"])
def test_every_bundled_dome_profile_has_its_common_roles_read_by_hand(name):
    # a bundled role pattern reworded even by a byte would lose it (the tests above
    # still hold then: the pattern reads it); a site's rewording is the pattern's
    profile = resolve_dome_profile(name)
    parser = engines.new_dome_parser(COMPILED, profile, EventClock("UTC", year=2017))
    for form, by_hand in zip([profile.forms[n] for n in FORMS], parser.scanner.roles_read_by_hand, strict=True):
        _, alternatives = scan_plan(form)
        assert {role for (role, *_), hand in zip(alternatives, by_hand) if hand} == \
            ROLES_READ_BY_HAND & set(profile.roles)
    data = read_profile_file(profile.source)
    data["roles"] = {**data["roles"], "call": data["roles"]["call"].replace("[^']*", "[^']+")}
    site = dome_profile_from_dict(data, source="a site's")
    other = engines.new_dome_parser(COMPILED, site, EventClock("UTC", year=2017))
    for form, by_hand in zip([site.forms[n] for n in FORMS], other.scanner.roles_read_by_hand, strict=True):
        _, alternatives = scan_plan(form)
        assert {role for (role, *_), hand in zip(alternatives, by_hand) if hand} == \
            (ROLES_READ_BY_HAND & set(site.roles)) - {"call"}


def test_traditional_stamps_across_daylight_saving_and_the_year_turn_read_alike_in_both_parsers():
    """The compiled parser dates a traditional stamp once a minute where the clock says
    each second of it is that minute's second 0 plus its seconds (EventClock.minute_ms),
    else once a second; the Python parser once a line. Through Zurich's spring gap, its
    repeated hour (stamps going back, read in the second occurrence), the year's turn with
    a stray December line after it, a leap second and an impossible date: alike."""
    stamps = ["Mar 31 01:59:58", "Mar 31 01:59:59", "Mar 31 02:00:00", "Mar 31 02:30:17",
              "Mar 31 03:00:01", "Oct 27 01:59:59", "Oct 27 02:00:00", "Oct 27 02:59:59",
              "Oct 27 02:00:01", "Oct 27 02:00:30", "Oct 27 02:59:58", "Oct 27 03:00:00",
              "Oct 27 03:00:59", "Oct 27 03:00:60", "Dec 31 23:59:59", "Jan  1 00:00:00",
              "Dec 31 23:59:58", "Jan  1 00:00:01", "Jan  1 00:01:02", "Feb 30 10:00:00",
              "Feb 28 10:00:00", "Feb 28 10:00:59"]
    profile = resolve_dome_profile("dmlite-dome")
    for line_ref in (None, (2014, 1)):
        reference = engines.new_dome_parser(PYTHON, profile, EventClock("Europe/Zurich", year=2013))
        compiled = engines.new_dome_parser(COMPILED, profile, EventClock("Europe/Zurich", year=2013))
        reference.line_ref = compiled.line_ref = line_ref
        read = []
        for stamp in stamps:
            text = f"{stamp} dpmhead01 dome[2345]: {{1}}[1] dmlite dome SendSimpleResp : Exiting: code: 200"
            want, got = reference.parse(text), compiled.parse(text)
            assert (None if got is None else got.event()) == want, text
            assert (compiled.result, compiled.reason) == (reference.result, reference.reason), text
            read.append(reference.result if want is None else want.ts)
        assert read.count("malformed") == 2
