"""parsers/side_by_side.py: several streams fed into one Pipeline in event time (the
lanes of replay, the probe's DOME logs), on both DOME engines."""

from __future__ import annotations

import csv

import pytest

from dpmstream.parsers.settings import ReassemblySettings
from dpmstream.parsers.pipeline import Pipeline
from dpmstream.parsers.side_by_side import STEP_MS, ChunkLane, feed_side_by_side
from tests.metrics_stack import simulate

CHUNK = 1000  # lines per chunk: far more event time than STEP_MS


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    prefix = simulate(tmp_path_factory.mktemp("side") / "site", "--dome", "--duration", "300",
                      "--rate", "3")
    return [prefix.parent / f"{prefix.name}.{node}.log" for node in ("dpmhead01", "dpmdisk01",
                                                                      "dpmdisk02", "dpmdisk03")]


def _chunks(path):
    lines = path.read_bytes().splitlines()
    return iter([lines[i:i + CHUNK] for i in range(0, len(lines), CHUNK)])


def _read(site, engine, side_by_side: bool) -> list[dict]:
    records = []
    pipeline = Pipeline(lambda record: None, ReassemblySettings(timeout_s=120),
                        on_dome_record=records.append, engine=engine)
    lanes = [ChunkLane(pipeline.source(str(path), host="probe", path=str(path), year=2017,
                                       tz="Europe/Zurich"), _chunks(path)) for path in site]
    if side_by_side:
        exhausted = set()

        def feed(lane, limit):
            # each turn goes to the lane furthest behind, up to a step past the next one
            assert lane.position == min(other.position for other in lanes
                                        if id(other) not in exhausted)
            assert limit is None or limit == sorted(
                other.position for other in lanes if id(other) not in exhausted)[1] + STEP_MS
            more = lane.feed_until(limit)
            if not more:
                exhausted.add(id(lane))
            return more
        feed_side_by_side(lanes, feed)
        assert len(exhausted) == len(lanes)
    else:
        for lane in lanes:
            lane.feed_until(None)
    pipeline.finish()
    return [r for r in records if r["kind"] == "dome_put"]


@pytest.mark.parametrize("engine", ["python", "compiled"])
def test_puts_meet_their_putdones_on_other_nodes_only_when_the_nodes_are_fed_side_by_side(
        site, engine):
    truth = list(csv.DictReader(open(f"{site[0].parent}/site.puts.csv", newline="")))
    joined_truth = sum(1 for p in truth if p["putdone_disk_time"])
    puts = _read(site, engine, side_by_side=True)
    one_after_another = _read(site, engine, side_by_side=False)
    assert len(puts) == len(one_after_another) == len(truth) > 500
    assert sum(1 for p in puts if p["putdone_disk_time"] is not None) == joined_truth > 500
    # the head read whole before the disk nodes: most putdones came after their puts timed out
    assert sum(1 for p in one_after_another if p["putdone_disk_time"] is not None) < joined_truth / 2
