"""The discrete-event core: a heap of (instant, sequence, callback, args).

Instants are integer UTC milliseconds. Callbacks at the same instant run in the order
they were scheduled, so a run is a pure function of the seed.

It is the inner loop of every model run (a what-if runs several): scheduling pushes one
tuple straight onto the heap, and a run that writes no log (no writers) and has no end
instant pops and calls with nothing else per event.
"""

from __future__ import annotations

from heapq import heappop, heappush
from itertools import count


class Engine:
    def __init__(self, start_ms: int, writers=()):
        self.start = start_ms
        self.now = start_ms
        self._queue: list = []
        self._seq = count()
        self._writers = list(writers)

    def at(self, when: int, fn, *args) -> None:
        heappush(self._queue, (when, next(self._seq), fn, args))

    def after(self, delay_ms: int, fn, *args) -> None:
        heappush(self._queue, (self.now + delay_ms, next(self._seq), fn, args))

    def run(self, until: int | None = None) -> None:
        """Run events in time order, stopping before the first one later than `until`."""
        queue, writers = self._queue, self._writers
        if until is None and not writers:
            while queue:
                when, _, fn, args = heappop(queue)
                self.now = when
                fn(*args)
            return
        while queue:
            when = queue[0][0]
            if until is not None and when > until:
                self.now = until
                break
            _, _, fn, args = heappop(queue)
            if when != self.now:
                self.now = when
                for writer in writers:
                    writer.flush_before(when)
            fn(*args)
