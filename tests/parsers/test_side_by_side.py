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


def _turns_by_sorting_on_position(lanes, feed):
    """The order of turns by its definition: every lane's `position` read at each turn,
    the list sorted on it (stable), the first fed up to STEP_MS past the second."""
    active = list(lanes)
    while active:
        active.sort(key=lambda lane: lane.position)
        lane = active[0]
        limit = active[1].position + STEP_MS if len(active) > 1 else None
        if not feed(lane, limit):
            active.remove(lane)


def _turns(lanes, order) -> list[tuple[int, int | None]]:
    """(lane index, limit) of each turn `order` gives `lanes`, fed by feed_until."""
    turns = []

    def feed(lane, limit):
        turns.append((lanes.index(lane), limit))
        return lane.feed_until(limit)
    order(lanes, feed)
    return turns


@pytest.mark.parametrize("engine", ["python", "compiled"])
def test_dome_lanes_take_their_turns_as_sorting_every_lanes_position_each_turn_gives(site, engine):
    """feed_side_by_side reads again only the fed lane's position when every lane is a DOME
    source's (which no other lane's lines move): the turns and limits are the same."""
    def lanes():
        pipeline = Pipeline(lambda record: None, ReassemblySettings(timeout_s=120),
                            on_dome_record=lambda record: None, engine=engine)
        return [ChunkLane(pipeline.source(str(path), host="probe", path=str(path), year=2017,
                                          tz="Europe/Zurich"), _chunks(path)) for path in site]
    got, want = _turns(lanes(), feed_side_by_side), _turns(lanes(), _turns_by_sorting_on_position)
    assert got == want
    assert len(want) > 100 and len({lane for lane, _ in want}) == len(site)
    assert len({limit for _, limit in want}) > len(want) / 2   # ties, and most limits apart


class _SharedClock:
    """A source whose position is a stream's time that other lanes' turns move too (a
    DPM daemon's stream in the shared reassembler, with lines routed from other files)."""
    dome = False

    def __init__(self, times: dict, stream: str, moves: list[tuple[str, int]]):
        self.times, self.stream, self.moves = times, stream, iter(moves)

    @property
    def position(self) -> int:
        return self.times[self.stream]

    def feed_chunk(self, chunk, at, limit):
        for stream, step in next(self.moves, ()):   # this turn's lines, of any stream
            self.times[stream] += step
        return len(chunk)


class _OwnClock(_SharedClock):
    dome = True   # a DOME source: only its own lines move it


def _clock_lanes(kinds) -> list[ChunkLane]:
    """Lanes of `kinds`' sources (one stream each), each turn moving its own stream and,
    for some turns, another lane's shared one (never a DOME source's)."""
    times = {str(i): -1 for i in range(len(kinds))}
    shared = [str(i) for i, kind in enumerate(kinds) if kind is _SharedClock]
    lanes = []
    for i, kind in enumerate(kinds):
        moves = [[(str(i), 1 + (i * 7 + t * 13) % 900)] +
                 ([(shared[(i + t) % len(shared)], (t * 211) % 1500)] if shared and t % 2 == 0 else [])
                 for t in range(40)]
        lanes.append(ChunkLane(kind(times, str(i), moves), iter([[b"x"]] * 40)))
    return lanes


@pytest.mark.parametrize("kinds", [(_SharedClock,) * 3, (_OwnClock, _SharedClock, _OwnClock, _SharedClock),
                                   (_OwnClock,) * 4])
def test_lanes_whose_position_other_lanes_move_are_read_again_every_turn(kinds):
    got = _turns(_clock_lanes(kinds), feed_side_by_side)
    assert got == _turns(_clock_lanes(kinds), _turns_by_sorting_on_position)
    assert len(got) > 3 * len(kinds)
