"""The compiled engine's records straight to CSV bytes (native/src/records.rs CsvBlocks,
handed to the pipeline by streams/sinks/csv.py through FanOut.receiver): the files are
byte for byte those Python writes from the records' dicts, and no dict is made."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from dpmstream.parsers import engines
from dpmstream.parsers.pipeline import Pipeline
from dpmstream.parsers.records import python_csv_line
from dpmstream.streams.inputs import describe
from dpmstream.streams.progress import Progress
from dpmstream.streams.replay_files import replay_inputs
from dpmstream.streams.sinks.csv import CsvSink
from dpmstream.streams.sinks.directories import DirectoryStats
from dpmstream.streams.sinks.fan_out import FanOut
from dpmstream.streams.sinks.summary import Summary
from dpmstream.streams.sinks.tally import Aggregates

from tests.engine_helpers import CHUNK_LINES, run_engine
from tests.engine_inputs import make_input, real_inputs

compiled = pytest.mark.skipif(not engines.compiled_available(),
                              reason="the compiled engine is not built")
OUTPUTS = ("requests.csv", "calls.csv", "directories.csv")


# `dpmstream replay` of each (argv) in turn, in one process: the engine and the formatting
# are chosen at import time (DPMSTREAM_PURE_PYTHON), so one process per choice, not one per
# file (the real files are some thirty small ones, and a process start costs a second).
REPLAY_EACH = ("import json, sys\n"
               "from dpmstream.cli import main\n"
               "print(json.dumps([main(argv) for argv in json.loads(sys.argv[1])]))\n")


def replay_out(inputs, outs, *, pure: bool) -> None:
    """`dpmstream replay --out OUT` of each input into its OUT, as a user runs it; pure: the
    Python engine and Python's formatting (DPMSTREAM_PURE_PYTHON=1)."""
    env = dict(os.environ)
    env.pop("DPMSTREAM_PURE_PYTHON", None)
    if pure:
        env["DPMSTREAM_PURE_PYTHON"] = "1"
    argvs = []
    for inp, out in zip(inputs, outs):
        args = ["replay", "--quiet", "--out", str(out), "--host", inp.host]
        if inp.tz:
            args += ["--tz", inp.tz]
        if inp.year:
            args += ["--year", str(inp.year)]
        argvs.append([*args, *map(str, inp.paths)])
    done = subprocess.run([sys.executable, "-c", REPLAY_EACH, json.dumps(argvs)],
                          capture_output=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr.decode()
    codes = json.loads(done.stdout.decode().splitlines()[-1])
    for inp, code in zip(inputs, codes, strict=True):
        assert code in (0, 1), f"{inp.name}: exit {code}: {done.stderr.decode()}"  # 1: a bad line


REPLAYED = ("scenario:thesis", "scenario:multi-file", "scenario:restart", "bad-input",
            "bad-syslog", "real")


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    """Every input of the test below replayed into CSV files with the compiled engine and
    with Python's, all in two processes (one per choice) rather than two per input:
    {name: [(input, the compiled engine's OUT, Python's OUT)]}."""
    base = tmp_path_factory.mktemp("csv-blocks")
    named = {name: real_inputs() if name == "real"
             else [make_input(tmp_path_factory.mktemp("in"), name)] for name in REPLAYED}
    inputs = [inp for name in REPLAYED for inp in named[name]]
    compiled_outs = [base / f"compiled{i}" for i in range(len(inputs))]
    pure_outs = [base / f"pure{i}" for i in range(len(inputs))]
    replay_out(inputs, compiled_outs, pure=False)
    replay_out(inputs, pure_outs, pure=True)
    outs = iter(zip(inputs, compiled_outs, pure_outs))
    return {name: [next(outs) for _ in named[name]] for name in REPLAYED}


@compiled
@pytest.mark.parametrize("name", REPLAYED)
def test_replay_out_writes_the_same_bytes_with_and_without_the_compiled_engine(name, replayed):
    rows = 0
    for inp, compiled_out, pure_out in replayed[name]:
        for file in OUTPUTS:
            got, want = (compiled_out / file).read_bytes(), (pure_out / file).read_bytes()
            assert got == want, f"{inp.name}: {file} differs"
        rows += (compiled_out / "requests.csv").read_bytes().count(b"\n") - 1
        rows += (compiled_out / "calls.csv").read_bytes().count(b"\n") - 1
    assert rows > 0, "no record written: nothing was compared"


def replay_into_csv(inp, out):
    """replay --out's sinks, in process: (the CSV sink, the aggregates)."""
    aggregates = Aggregates(Summary(), DirectoryStats(), compiled=True)
    csv_sink = CsvSink(str(out))
    pipeline = Pipeline(aggregates.on_record(FanOut([csv_sink])), engine=engines.COMPILED,
                        expect_ns=any(".dpns" in p.name for p in inp.paths))
    replay_inputs(pipeline, [describe(str(p)) for p in inp.paths], host=inp.host, profile=None,
                  tz=inp.tz, year=inp.year, progress=Progress(None, enabled=False),
                  chunk_lines=CHUNK_LINES)
    FanOut([aggregates, csv_sink]).close()
    return csv_sink, aggregates


@compiled
@pytest.mark.parametrize("name", ["scenario:multi-file", "bad-input"])
def test_the_engine_hands_every_record_to_the_csv_writer_without_a_dict(name, tmp_path):
    inp = make_input(tmp_path, name)
    want = run_engine(engines.PYTHON, inp).records   # the reference, as dicts
    csv_sink, aggregates = replay_into_csv(inp, tmp_path / "out")
    assert csv_sink.compiled_receiver.engine_records == len(want) > 0
    assert aggregates.tally.engine_records == len(want)
    requests = "".join(python_csv_line(r) for r in want if r["kind"] == "request")
    calls = "".join(python_csv_line(r) for r in want if r["kind"] == "call")
    assert (tmp_path / "out" / "requests.csv").read_bytes().split(b"\r\n", 1)[1] == requests.encode()
    assert (tmp_path / "out" / "calls.csv").read_bytes().split(b"\r\n", 1)[1] == calls.encode()


class Writes:
    """A binary file that remembers each write (the blocks)."""

    def __init__(self):
        self.blocks: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.blocks.append(bytes(data))
        return len(data)


@compiled
def test_rows_are_written_in_blocks_in_the_order_they_came():
    from dpmstream.parsers._native import CsvBlocks

    requests, calls = Writes(), Writes()
    blocks = CsvBlocks(requests, calls, python_csv_line, block_bytes=40)   # a row: 31 bytes
    for token in ("t3", "t1", "t2"):
        blocks({"kind": "request", "host": "h", "token": token, "total_ms": 1250})
    blocks({"kind": "call", "host": "h", "client": "CN=a, O=b"})
    assert [block.count(b"\n") for block in requests.blocks] == [2]   # two rows filled one
    assert calls.blocks == []
    blocks.flush()
    assert [block.count(b"\n") for block in requests.blocks] == [2, 1]
    rows = b"".join(requests.blocks).decode().splitlines()
    assert [row.split(",")[1] for row in rows] == ["t3", "t1", "t2"]
    assert calls.blocks == [b'h,,,,,"CN=a, O=b",,,,,,,\r\n']
    blocks.flush()
    assert len(requests.blocks) == 2 and len(calls.blocks) == 1   # no empty block


@compiled
def test_a_value_the_compiled_rules_leave_to_python_is_formatted_by_csv_line():
    from dpmstream.parsers._native import CsvBlocks

    requests, calls = Writes(), Writes()
    blocks = CsvBlocks(requests, calls, python_csv_line)
    odd = {"kind": "request", "host": "h", "nfiles": True, "total_ms": 5}   # a bool: Python's
    blocks(odd)
    blocks.flush()
    assert b"".join(requests.blocks) == python_csv_line(odd).encode()
    assert "True" in python_csv_line(odd)
    assert blocks.engine_records == 0
