"""Source.feed_chunk(lines, start, end=end): a run of a block fed where it lies (profile
check's runs of a daemon's own lines, no copy of them) is fed as the run alone, a list of
its lines, is: the same records, counts, event times and index returned, with the compiled
engine and the Python one, in runs of every length (one line, a few, longer than the sweep's
ADVANCE_EVERY) and with lines left out between runs."""

from __future__ import annotations

import pytest

from dpmstream.parsers import engines
from dpmstream.parsers.pipeline import ADVANCE_EVERY, Pipeline
from dpmstream.parsers.profiles import bundled_profiles
from dpmstream.streams.inputs import describe, iter_chunks, open_binary

from tests.helpers import dpmstream_in_process

RUN_LENGTHS = (1, 2, 7, 300, ADVANCE_EVERY + 5)


@pytest.fixture(scope="module")
def block(tmp_path_factory):
    """The first block of a simulated head node's log, as profile check reads it."""
    prefix = tmp_path_factory.mktemp("sim") / "head"
    done = dpmstream_in_process("simulate", "--out", str(prefix), "--requests", "500",
                                "--seed", "11", "--quiet")
    assert done.returncode == 0, done.stderr
    stream, _ = open_binary(describe(f"{prefix}.log"))
    lines = next(iter(iter_chunks(stream, size=3 * ADVANCE_EVERY)))
    assert len(lines) == 3 * ADVANCE_EVERY
    return lines


def runs(n: int):
    """[start, end) runs over n lines, of every length in turn, a line left out after each
    third run (profile check skips the lines not of its daemon)."""
    start, k = 0, 0
    while start < n:
        end = min(n, start + RUN_LENGTHS[k % len(RUN_LENGTHS)])
        yield start, end
        start = end + (1 if k % 3 == 2 else 0)
        k += 1


def fed(lines, engine: str, in_place: bool) -> dict:
    records: list[dict] = []
    profile = next(p for p in bundled_profiles() if p.daemon == "dpm")
    pipeline = Pipeline(records.append, profiles=[profile], engine=engine)
    source = pipeline.source("head", host="check", path="head", profile=profile)
    returned = []
    for start, end in runs(len(lines)):
        if in_place:
            returned.append(source.feed_chunk(lines, start, end=end) - start)
        else:
            returned.append(source.feed_chunk(list(lines[start:end])))
        returned.append(pipeline.reassembler.latest)
    pipeline.finish()
    return {"records": records, "returned": returned, "lines": dict(pipeline.stats.lines),
            "line_no": source.line_no, "latest": dict(source.latest_by_host)}


@pytest.mark.parametrize("engine", [engines.PYTHON, engines.COMPILED])
def test_a_run_fed_where_it_lies_is_fed_as_the_run_alone(block, engine):
    if engine == engines.COMPILED and not engines.compiled_available():
        pytest.skip("the extension is not built")
    alone, in_place = fed(block, engine, in_place=False), fed(block, engine, in_place=True)
    assert alone["records"], "the runs hold whole requests"
    assert in_place == alone
