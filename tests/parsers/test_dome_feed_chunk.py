"""A DOME source fed in chunks through the compiled DOME engine's feed_chunk (no Python
per line: parsers/pipeline.py Source._feed_dome_compiled) gives what the Python engine
gives fed line by line: the same records in the same order, and every counter the same
(lines by host, daemon and result, foreign lines, the bad lines remembered, decode
errors, the DOME and checksum counters, each source's line numbers and event times).

The input: simulated DOME sites (`dpmstream simulate --dome`: a head and disk nodes) of
several shapes, both stamp styles, the nodes' files read side by side by the replay loop
(streams/replay_files.py: lanes, LineBlocks, a limit per chunk), with hostile lines
planted in the head's file (NUL bytes, no envelope, not UTF-8, longer than a line may be,
CRLF, another node's line); and the same lines fed as lists in small chunks, the nodes
interleaved, as `run` and the worker feed them.

`make test` runs every shape and chunk size; `make check` a sample (tests/helpers.py
sampled) on two shapes: the traditional one through the replay loop, each chunk size once
as lists (both shapes among them).

The compiled DOME engine missing: these tests skip, unless DPMSTREAM_REQUIRE_NATIVE is
set, where they fail.
"""

from __future__ import annotations

import os

import pytest

from dpmstream.parsers.settings import ReassemblySettings
from dpmstream.parsers import engines
from dpmstream.parsers.dome_profiles import resolve_dome_profile
from dpmstream.parsers.lines import MAX_LINE_BYTES
from dpmstream.parsers.pipeline import ADVANCE_EVERY, Pipeline
from dpmstream.simulator.dome_config import DomeConfig
from dpmstream.simulator.dome_run import simulate_dome
from dpmstream.streams.inputs import describe
from dpmstream.streams.progress import Progress
from dpmstream.streams.replay_files import replay_inputs

from tests.helpers import sampled

REQUIRED = bool(os.environ.get("DPMSTREAM_REQUIRE_NATIVE"))
pytestmark = pytest.mark.skipif(
    not (engines.compiled_dome_available() or REQUIRED),
    reason="compiled DOME engine not built (parsers/compiled_dome.py, native/)")

# (stamp, envelope, generation): the shapes a site's files come in.
SHAPES = {
    "traditional-dmlite-log": dict(stamp="traditional", envelope="dmlite-log", generation="tid"),
    "rfc3339-messages": dict(stamp="rfc3339", envelope="messages", generation="tid"),
    "traditional-journal": dict(stamp="traditional", envelope="journal", generation="tid"),
    "rfc3339-notid": dict(stamp="rfc3339", envelope="dmlite-log", generation="notid"),
}


def hostile_lines(disk_line: bytes) -> list[bytes]:
    """Lines a real file may hold among a node's own: each must be counted alike."""
    return [
        b"May 30 08:44:05 dpmhead01 dome[2345]: \x00\x00\x00 a hole of NULs\n",
        b"no syslog envelope at all\n",
        disk_line.replace(b"dmlite", b"dml\xe9ite", 1),          # not UTF-8 (Latin-1)
        b"May 30 08:44:05 dpmhead01 dome[2345]: " + b"x" * (MAX_LINE_BYTES + 10) + b"\n",
        disk_line.rstrip(b"\n") + b"\r\n",                        # CRLF
        disk_line,                                                # another node's line
        b"\n",
    ]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A simulated site per shape, made once, hostile lines planted in its head's file
    every 997 lines: (config, [the nodes' files]). Some 27,000 lines: what is tested is
    how chunks are cut and counted, not a site's size (several sweeps, hundreds of puts,
    thousands of records: the tests check it)."""
    made = {}

    def get(shape):
        if shape not in made:
            cfg = DomeConfig(duration=400.0, rate=3.0, disks=3, disk_down_at=100.0,
                             disk_down_s=60.0, restart_at=250.0, gap_at=180.0, tz="UTC",
                             timeout=60.0, **SHAPES[shape])
            result = simulate_dome(cfg, tmp_path_factory.mktemp(shape) / "site")
            paths = list(result.logs.values())
            head = result.logs[cfg.head]
            disk = next(path for host, path in result.logs.items() if host != cfg.head)
            disk_line = disk.read_bytes().splitlines(keepends=True)[50]
            lines = head.read_bytes().splitlines(keepends=True)
            planted = []
            for n, line in enumerate(lines):
                planted.append(line)
                if n % 997 == 500:
                    planted += hostile_lines(disk_line)
            head.write_bytes(b"".join(planted))
            made[shape] = (cfg, paths)
        return made[shape]
    return get


def outcome(pipeline: Pipeline, records: list[dict]) -> dict:
    """Everything a pipeline shows of what it read."""
    stats = pipeline.stats
    return {
        "records": records,
        "lines": dict(stats.lines),
        "bad_examples": list(stats.bad_examples),
        "decode_errors": stats.decode_errors,
        "dome": stats.dome,
        "checksums": pipeline.dome.checksum_stats,
        "latest_event_ms": stats.latest_event_ms,
        "sources": {name: (src.line_no, src.position, dict(src.latest_by_host))
                    for name, src in pipeline.sources.items()},
    }


@pytest.fixture
def chunk_calls(monkeypatch) -> list:
    """The calls of the compiled chunked feed, counted (each still runs)."""
    calls: list = []
    from dpmstream.parsers.compiled_dome import CompiledDomeReassembler  # here: needs the extension
    chunked = CompiledDomeReassembler.feed_chunk

    def counting(self, *args):
        calls.append(1)
        return chunked(self, *args)
    monkeypatch.setattr(CompiledDomeReassembler, "feed_chunk", counting)
    return calls


def replayed(engine: str, paths, chunk_lines: int) -> dict:
    records: list[dict] = []
    pipeline = Pipeline(records.append, ReassemblySettings(timeout_s=60), on_dome_record=records.append, engine=engine)
    failures, _ = replay_inputs(pipeline, [describe(str(p)) for p in paths], host="dpmhead01",
                                profile=None, tz="UTC", year=2017,
                                progress=Progress(None, enabled=False), chunk_lines=chunk_lines)
    assert failures == 0
    return outcome(pipeline, records)


def fed_in_chunks(engine: str, paths, profile_name: str, chunk: int) -> dict:
    """The nodes' lines as lists (str) of `chunk` lines, the nodes taking turns, with an
    event-time sweep between turns now and then (run's and the worker's way)."""
    records: list[dict] = []
    pipeline = Pipeline(records.append, ReassemblySettings(timeout_s=60), on_dome_record=records.append, engine=engine)
    profile = resolve_dome_profile(profile_name)
    nodes = [(pipeline.source(p.name, host=p.stem, profile=profile, tz="UTC", year=2017),
              p.read_bytes().decode("utf-8", "replace").splitlines())
             for p in paths]
    at, turn = 0, 0
    while any(at < len(lines) for _, lines in nodes):
        for src, lines in nodes:
            src.feed_lines(lines[at:at + chunk])
        at += chunk
        turn += 1
        if turn % 7 == 0:
            pipeline.advance()
    pipeline.finish()
    return outcome(pipeline, records)


def assert_same(want: dict, got: dict) -> None:
    for name in want:
        if name == "records":
            continue
        assert got[name] == want[name], name
    assert len(got["records"]) == len(want["records"])
    for n, (w, g) in enumerate(zip(want["records"], got["records"])):
        assert g == w, f"record {n}"


@pytest.mark.parametrize("shape", sampled(list(SHAPES), keep=["traditional-dmlite-log"]))
def test_the_replay_loop_gives_the_same_records_and_counts_through_the_compiled_chunked_feed(
        site, chunk_calls, shape):
    cfg, paths = site(shape)
    want = replayed(engines.PYTHON, paths, chunk_lines=1000)
    assert chunk_calls == []   # the Python engine: line by line
    got = replayed(engines.COMPILED, paths, chunk_lines=1000)
    assert len(chunk_calls) > 0
    puts = [r for r in want["records"] if r["kind"] == "dome_put"]
    assert sum(want["lines"].values()) > 3 * ADVANCE_EVERY    # several sweeps
    assert len(puts) > 500 and any(r["putdone_disk_time"] is not None for r in puts)
    assert want["bad_examples"] and want["decode_errors"] > 0
    assert any(result == "foreign" for (_, _, result) in want["lines"])
    assert_same(want, got)


@pytest.mark.parametrize("chunk,shape", sampled(
    [(chunk, shape) for shape in ("traditional-dmlite-log", "rfc3339-messages") for chunk in (1, 333, 5000)],
    keep=[(1, "rfc3339-messages"), (333, "traditional-dmlite-log"), (5000, "rfc3339-messages")]))
def test_lines_fed_as_lists_give_the_same_records_and_counts_through_the_compiled_chunked_feed(
        site, chunk_calls, shape, chunk):
    cfg, paths = site(shape)
    profile = "dmlite-dome" if cfg.generation == "tid" else "dmlite-dome-notid"
    want = fed_in_chunks(engines.PYTHON, paths, profile, chunk)
    got = fed_in_chunks(engines.COMPILED, paths, profile, chunk)
    assert len(chunk_calls) > 0
    assert len(want["records"]) > 1000
    assert_same(want, got)
