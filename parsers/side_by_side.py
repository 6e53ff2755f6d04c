"""Several sources read side by side in event time: the one rule for the order in which
the lines of several streams (daemons, DOME nodes) go into one Pipeline.

Pure: a lane is a Source and the chunks of lines it is given (lists of lines, from
wherever the caller reads them: replay's archives, the probe's tails). The lane whose
latest event time (`Source.position`) is earliest is fed next, up to `STEP_MS` past the
next lane's time, so the lanes never drift further apart than that: the name-server
calls of a DPM request meet it within the linker's allowance, the putdone of a DOME
put on a disk node meets the head's put.
"""

from __future__ import annotations

from operator import attrgetter
from collections.abc import Callable, Iterator

STEP_MS = 500          # how far one lane runs ahead of the others per turn
_NOTED = attrgetter("noted")   # the sort's key: no Python frame of its own per lane and turn


class ChunkLane:
    """One stream fed from chunks of lines: `src` (a pipeline Source) and `lines` (an
    iterator of lists of lines), set by the caller, possibly again for the next input."""

    def __init__(self, src=None, lines: Iterator[list] | None = None):
        self.src = src
        self.lines = lines
        self.chunk: list | None = None   # the chunk being fed, from index `at`
        self.at = 0
        # feed_side_by_side's note of `position`, and whether it moves only while this
        # lane is fed (`alone`): read again after its turn, not every turn
        self.noted = -1
        self.alone = False

    def note_position(self) -> None:
        """Note `position` in `noted`, and in `alone` whether it moves only while this lane
        is fed: a DOME source's is the latest stamp it read; a DPM source's is its
        stream's time in the shared reassembler, which a routed line of its daemon in
        another lane's file moves too; a lane with no source yet gets one in its own
        turn."""
        src = self.src
        if src is None:
            self.noted, self.alone = -1, True
        else:   # `position`, without its frame
            self.noted, self.alone = src.position, getattr(src, "dome", False) is True

    @property
    def position(self) -> int:
        """The latest event time fed from this lane (-1 before its first line)."""
        src = self.src
        return -1 if src is None else src.position

    def feed_until(self, limit: int | None) -> bool:
        """Feed lines until the lane's time passes `limit` (None: to the end of its
        lines). False when its lines are exhausted."""
        src = self.src
        while True:
            if self.chunk is None or self.at >= len(self.chunk):
                self.chunk, self.at = next(self.lines, None), 0
                if self.chunk is None:
                    return False
            self.at = src.feed_chunk(self.chunk, self.at, limit)
            if limit is not None and src.position > limit:
                return True


def feed_side_by_side(lanes: list, feed: Callable[[ChunkLane, int | None], bool]) -> None:
    """Feed every lane to its end, the one furthest behind in event time first.
    `feed(lane, limit)` feeds it up to `limit` (lane.feed_until, or a driver's wrapper
    of it) and says whether the lane has more to give."""
    active = list(lanes)
    for lane in active:
        lane.note_position()
    # lanes whose position another lane's turn may move: while there is one, every
    # lane's is read again after each turn (as before a sort on `position` itself);
    # else only the fed lane's (the others' have not moved): ~10 Python frames fewer a
    # turn of a DOME site's replay (issue 30)
    shared = sum(not lane.alone for lane in active)
    while active:
        active.sort(key=_NOTED)   # stable: lanes at one time stay in the order they were
        lane = active[0]
        # Up to a little past the next lane (a lane not started yet stops it at its first
        # parsed line, so that every lane starts before any runs ahead).
        limit = active[1].noted + STEP_MS if len(active) > 1 else None
        alone = lane.alone
        if feed(lane, limit):
            lane.note_position()
            shared += alone - lane.alone
        else:
            active.remove(lane)
            shared -= not alone
        if shared:
            for other in active:
                if other is not lane:   # (its `alone` changes only in its own turn)
                    other.noted = other.position
