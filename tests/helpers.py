"""Small helpers shared by the core tests (no fixtures with services here)."""

from __future__ import annotations

import contextlib
import csv
import io
import logging
import os
import signal
import subprocess
import sys

import pytest

from dpmstream.parsers.pipeline import Pipeline

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
REAL = os.path.join(DATA, "real")


def reassemble(lines, *, host="head01", tz="UTC", year=2011, profile=None, **kw):
    """Run lines through one pipeline source; return (records, pipeline)."""
    records: list[dict] = []
    pipeline = Pipeline(records.append, **kw)
    src = pipeline.source("test", host=host, tz=tz, year=year, profile=profile)
    for line in lines:
        src.feed(line)
    pipeline.finish()
    return records, pipeline


def requests_of(records):
    return [r for r in records if r["kind"] == "request"]


def calls_of(records):
    return [r for r in records if r["kind"] == "call"]


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


def dpmstream(*args) -> str:
    """`python -m dpmstream ARGS` as a user runs it; its standard output. It must succeed."""
    res = subprocess.run([sys.executable, "-m", "dpmstream", *args], capture_output=True,
                         text=True, check=False)
    assert res.returncode == 0, res.stderr
    return res.stdout


def dpmstream_in_process(*args, stdin: bytes = b"", text: bool = False,
                         main=None) -> subprocess.CompletedProcess:
    """`dpmstream ARGS` run by the entry point's own function (dpmstream.cli.main) in this
    process, for tests of what the command says and returns rather than of the process
    (no interpreter start: a tenth of the time). Like `subprocess.run(..., capture_output=
    True, text=text)`: the exit code and stdout and stderr (bytes, or str). As in a new process, the
    command's logging goes to its stderr (the root logger's handlers are set aside for the
    call) and the signal handlers it sets are put back after it. `main`: another entry
    point's function (check_dpm's, tests/probes/test_sources_prometheus.check_dpm_run)."""
    if main is None:
        from dpmstream.cli import main

    out, err = (io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
                for _ in range(2))
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    signals = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP,
                                                      signal.SIGALRM)}
    stdin_was = sys.stdin
    root.handlers.clear()
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse's exit (a bad option, --help)
                code = exc.code
                if code is not None and not isinstance(code, int):
                    print(code, file=sys.stderr)
                    code = 1
    finally:
        sys.stdin = stdin_was
        root.handlers[:] = handlers
        root.setLevel(level)
        for sig, handler in signals.items():
            if handler is not None:
                signal.signal(sig, handler)
    streams = [out.buffer.getvalue(), err.buffer.getvalue()]
    if text:
        streams = [stream.decode() for stream in streams]
    return subprocess.CompletedProcess(args, code or 0, *streams)


def sampled(cells, keep, ids=None):
    """The cells of a sweep that is long by what it tests, for `pytest.mark.parametrize`:
    `make test` runs every cell, `make check` only those in `keep` (a sample in which each
    value of each parameter appears, where the test says so), the others marked slow.
    A cell is a value or a tuple of values (one per parameter); `ids` names a cell."""
    keep = set(keep)
    unknown = keep - set(cells)
    assert not unknown, f"kept cells not in the sweep: {unknown}"
    return [pytest.param(*(cell if isinstance(cell, tuple) else (cell,)),
                         id=None if ids is None else ids(cell),
                         marks=() if cell in keep else pytest.mark.slow)
            for cell in cells]
