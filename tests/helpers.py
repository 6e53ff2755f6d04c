"""Small helpers shared by the core tests (no fixtures with services here)."""

from __future__ import annotations

import csv
import os
import subprocess
import sys

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
