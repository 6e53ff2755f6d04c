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


class ChunkLane:
    """One stream fed from chunks of lines: `src` (a pipeline Source) and `lines` (an
    iterator of lists of lines), set by the caller, possibly again for the next input."""

    def __init__(self, src=None, lines: Iterator[list] | None = None):
        self.src = src
        self.lines = lines
        self.chunk: list | None = None   # the chunk being fed, from index `at`
        self.at = 0

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
    position = attrgetter("position")   # no Python frame of its own per lane and turn
    while active:
        active.sort(key=position)
        lane = active[0]
        # Up to a little past the next lane (a lane not started yet stops it at its first
        # parsed line, so that every lane starts before any runs ahead).
        limit = active[1].position + STEP_MS if len(active) > 1 else None
        if not feed(lane, limit):
            active.remove(lane)
