"""The compiled reassembler (native/src/py_engine.rs) behind Reassembler's interface.

The rules are parsers/reassembly.py's, line for line; this module only shapes what the
extension returns into the same Python types (ReassemblyStats, ThreadKey, RequestKey,
ReassemblyChanges), so that callers, sinks and the state stores cannot tell the engines
apart. Its own entry point is `feed_lines` (Source.feed_chunk): whole lists of lines
parsed and reassembled without Python per line.
"""

from __future__ import annotations

from collections import deque

from ._native import Core
from .linking import LinkStats, with_current_keys
from .reassembly import ReassemblyChanges, ReassemblyStats, RequestKey, ThreadKey


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

    def thread_keys(self) -> list[ThreadKey]:
        return [ThreadKey(*k) for k in self.thread_keys_raw()]

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
                           for part in ("processes", "hosts", "streams")}
        super().restore({tuple(k): v for k, v in threads.items()},
                        {tuple(k): v for k, v in requests.items()}, clock,
                        {int(g): [tuple(k) for k in keys]
                         for g, keys in (finished or {}).items() if keys is not None})


class CompiledLinker:
    """parsers/linking.Linker's twin, run inside the compiled engine it is attached to:
    records and processing runs reach it without Python. The same interface and state."""

    def __init__(self, emit, head_aliases=(), delay_ms: int = 3000, slack_ms: int = 5,
                 expect_ns: bool = False, learn_head: bool = True):
        self._emit = emit
        self._aliases = [a.lower() for a in head_aliases]
        self._learn_head = learn_head and not self._aliases
        self._delay_ms, self._slack_ms = delay_ms, slack_ms
        self._expect_ns = expect_ns
        self._detecting = None
        self.reassembler: CompiledReassembler | None = None

    def attach(self, reassembler: CompiledReassembler) -> None:
        self.reassembler = reassembler
        reassembler.attach_linker(self._emit, self._aliases, self._delay_ms, self._slack_ms,
                                  self._learn_head)
        reassembler.link_expect_ns = self._expect_ns
        if self._detecting is not None:
            reassembler.link_detecting = self._detecting

    @property
    def expect_ns(self) -> bool:
        return self.reassembler.link_expect_ns if self.reassembler else self._expect_ns

    @expect_ns.setter
    def expect_ns(self, value: bool) -> None:
        self._expect_ns = bool(value)
        if self.reassembler is not None:
            self.reassembler.link_expect_ns = self._expect_ns

    @property
    def detecting(self):
        return self._detecting

    @detecting.setter
    def detecting(self, f) -> None:
        self._detecting = f
        if self.reassembler is not None:
            self.reassembler.link_detecting = f

    @property
    def stats(self) -> LinkStats:
        linked, ambiguous = self.reassembler.link_stats()
        return LinkStats(ns_calls_linked=linked, ns_calls_ambiguous=ambiguous)

    @property
    def held(self) -> int:
        return self.reassembler.link_held()

    @property
    def unlinked_clients(self) -> list[str]:
        return self.reassembler.link_unlinked_clients()

    def advance(self) -> None:
        self.reassembler.link_advance()

    def finish(self) -> None:
        self.reassembler.link_finish()

    def state(self) -> dict | None:
        return self.reassembler.link_state()

    def restore(self, state: dict | None) -> None:
        if state:
            self.reassembler.link_restore(with_current_keys(state))
