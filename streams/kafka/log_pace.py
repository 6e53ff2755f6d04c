"""A bound on how fast the worker's log grows when one thing goes wrong again and again.

    pace = Pace(every_s=10)
    held = pace.admit(key)     # None: hold this line back (counted); else lines held before it

    quiet = RepeatFilter(every_s=10)     # on the process's log handlers (faust_app.run_worker)
    handler.addFilter(quiet)
    quiet.flush()                        # from the worker's loop: "no more since ..." lines

A broker outage makes aiokafka log the same connection error for every node, fetch and
metadata refresh, many times a second (6,532 lines in 21 s were seen). RepeatFilter lets
the first WARNING-or-worse line of each kind (logger and message template) through, then
at most one line per `every_s` of that kind, which says how many alike it held back and
for how long the trouble has lasted; once a kind has been quiet for `every_s`, flush()
writes one line saying it stopped (the broker is back). So an outage of S seconds costs
at most 2 + S / every_s lines per kind of message. Lines below WARNING pass untouched.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

log = logging.getLogger("dpmstream.worker")

EVERY_S = 10.0    # the least time between two lines of one kind
KINDS_KEPT = 1024   # kinds remembered at once (a bound on this filter's own memory)


@dataclass
class _Kind:
    first: float        # when this kind was first seen in its current run
    last_out: float     # when a line of it last went out
    last_seen: float
    held: int = 0       # lines held back since the last that went out
    held_total: int = 0


class Pace:
    """At most one line per `every_s` for each key; the lines held back are counted."""

    def __init__(self, every_s: float = EVERY_S, clock: Callable[[], float] = time.monotonic):
        self.every_s = every_s
        self.clock = clock
        self.kinds: dict[Hashable, _Kind] = {}

    def admit(self, key: Hashable) -> int | None:
        """None if this line is to be held back; else how many were held back before it."""
        now = self.clock()
        kind = self.kinds.get(key)
        if kind is None:
            if len(self.kinds) >= KINDS_KEPT:
                self.kinds.pop(next(iter(self.kinds)))
            self.kinds[key] = _Kind(now, now, now)
            return 0
        kind.last_seen = now
        if now - kind.last_out < self.every_s:
            kind.held += 1
            kind.held_total += 1
            return None
        held, kind.held, kind.last_out = kind.held, 0, now
        return held

    def hold(self, key: Hashable, n: int) -> None:
        """Count n more lines of `key` held back (one admitted before)."""
        kind = self.kinds.get(key)
        if kind is not None and n > 0:
            kind.held += n
            kind.held_total += n

    def quiet(self) -> list[tuple[Hashable, _Kind]]:
        """The kinds not seen for `every_s` (forgotten here): their run is over."""
        now = self.clock()
        over = [(key, kind) for key, kind in self.kinds.items()
                if now - kind.last_seen >= self.every_s]
        for key, _kind in over:
            del self.kinds[key]
        return over


class RepeatFilter(logging.Filter):
    """Holds back repeats of a WARNING-or-worse log line (see the module's doc)."""

    def __init__(self, every_s: float = EVERY_S, clock: Callable[[], float] = time.monotonic):
        super().__init__()
        self.pace = Pace(every_s, clock)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or getattr(record, "_paced", False):
            return True
        key = (record.name, str(record.msg))
        held = self.pace.admit(key)
        if held is None:
            return False
        if held:   # no "%" added: the message is formatted with its args as it was
            kind = self.pace.kinds[key]
            record.msg = (f"{record.msg} [and {held} more like it held back; this for "
                          f"{kind.last_out - kind.first:.0f} s]")
        record._paced = True   # another handler with this filter lets it through
        return True

    def flush(self) -> None:
        """One line for each kind that repeated and has now been quiet for a while."""
        for (name, msg), kind in self.pace.quiet():
            if kind.held_total:
                log.warning("%s: no more of %r since %.0f s (it lasted %.0f s; %d more like "
                            "it were held back)", name, msg[:120], self.pace.clock() - kind.last_seen,
                            kind.last_seen - kind.first, kind.held_total,
                            extra={"_paced": True})   # one per kind and run: never held


_installed: list[RepeatFilter] = []


def install(handlers, every_s: float = EVERY_S) -> RepeatFilter:
    """Put one RepeatFilter on these log handlers (the process's); a handler that has
    one already keeps it (a second worker run in the same process)."""
    quiet = RepeatFilter(every_s)
    for handler in handlers:
        if not any(isinstance(f, RepeatFilter) for f in handler.filters):
            handler.addFilter(quiet)
    _installed.append(quiet)
    return quiet


def flush_installed() -> None:
    """RepeatFilter.flush() of each filter install() put in place (the worker's loop)."""
    for quiet in _installed:
        quiet.flush()
