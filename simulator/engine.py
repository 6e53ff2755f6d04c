"""The discrete-event core: a heap of (instant, sequence, callback, args).

Instants are integer UTC milliseconds. Callbacks at the same instant run in the order
they were scheduled, so a run is a pure function of the seed.
"""

from __future__ import annotations

import heapq


class Engine:
    def __init__(self, start_ms: int, writers=()):
        self.start = start_ms
        self.now = start_ms
        self._queue: list = []
        self._seq = 0
        self._writers = list(writers)

    def at(self, when: int, fn, *args) -> None:
        heapq.heappush(self._queue, (when, self._seq, fn, args))
        self._seq += 1

    def after(self, delay_ms: int, fn, *args) -> None:
        self.at(self.now + delay_ms, fn, *args)

    def run(self, until: int | None = None) -> None:
        """Run events in time order, stopping before the first one later than `until`."""
        queue, writers = self._queue, self._writers
        pop = heapq.heappop
        while queue:
            when = queue[0][0]
            if until is not None and when > until:
                self.now = until
                break
            _, _, fn, args = pop(queue)
            if when != self.now:
                self.now = when
                for writer in writers:
                    writer.flush_before(when)
            fn(*args)
