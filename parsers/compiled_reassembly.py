"""The compiled reassembler (native/src/engine.rs) behind Reassembler's interface.

The rules are parsers/reassembly.py's, line for line; this module only shapes what the
extension returns into the same Python types (ReassemblyStats, ThreadKey, RequestKey,
ReassemblyChanges), so that callers, sinks and the state stores cannot tell the engines
apart. Its own entry point is `feed_lines` (Source.feed_chunk): whole lists of lines
parsed and reassembled without Python per line.
"""

from __future__ import annotations

from collections import deque

from ._fastlines import Core
from .reassembly import ReassemblyChanges, ReassemblyStats, RequestKey, ThreadKey

# Why Core.feed_lines stopped (native/src/engine.rs).
DONE, SLOW, LIMIT, BUDGET = 0, 1, 2, 3


class CompiledReassembler(Core):
    """Reassembler's twin: the same constructor, methods and state."""

    @property
    def stats(self) -> ReassemblyStats:
        """A snapshot of the counters (the Python engine's are live; nothing writes these
        but the engine: count_duplicates() is how a caller adds to them)."""
        return ReassemblyStats(**self.stats_dict())

    @property
    def restart_log(self) -> deque:
        return deque(self.restarts(), maxlen=10_000)

    def take_changes(self) -> ReassemblyChanges:
        threads, requests, groups = self.take_changes_raw()
        return ReassemblyChanges(
            {ThreadKey(*k): v for k, v in threads.items()},
            {RequestKey(*k): v for k, v in requests.items()},
            {g: None if keys is None else [RequestKey(*k) for k in keys]
             for g, keys in groups.items()},
        )

    def restore(self, threads: dict, requests: dict, clock: dict | None = None,
                finished: dict | None = None) -> None:
        clock = clock and {part: [tuple(row) for row in clock.get(part, ())]
                           for part in ("processes", "hosts")}
        super().restore({tuple(k): v for k, v in threads.items()},
                        {tuple(k): v for k, v in requests.items()}, clock,
                        {int(g): [tuple(k) for k in keys]
                         for g, keys in (finished or {}).items() if keys is not None})
