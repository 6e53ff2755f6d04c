"""One daemon log file, written in the order a real one would be.

A line is stamped with the simulated instant it is logged, but written at `write key`
= that instant, or a few ms later for a share of lines (`jitter`), so it can land after
a later-stamped line of another thread. Two orders are never broken: a thread's own
lines, and the lines of one request (its threads hand over in sequence: the put
returns before the status call that follows, ...). A min-heap holds lines until the
simulation clock passes their write key. A `tap` (the rsyslog file, syslog.py) sees
every line as it is written, with its write key.

A writer with no path (a model run whose logs nobody reads: predict.py) does everything
that shapes the run and its truth (the printed instant, the jitter draws, the gap, the
counts) but formats, orders and writes no text.
"""

from __future__ import annotations

import heapq
import os
import random

from dpmstream.simulator.stamps import StampFormatter

FLUSH_EVERY = 4096     # lines held before they are handed to the file


class LogWriter:
    def __init__(self, path, stamps: StampFormatter, jitter_rate: float = 0.0,
                 jitter_ms: int = 0, rng: random.Random | None = None, tap=None,
                 drop: tuple[int, int] | None = None):
        self.path = path
        self._tap = tap               # tap(write key, line) for each line written
        if path is None and tap is not None:
            raise ValueError("a log tapped (the rsyslog file) must be written")
        self._fh = open(path, "w", encoding="utf-8", newline="\n") if path is not None else None
        self._stamps = stamps
        self._jitter_rate = jitter_rate if jitter_ms > 0 else 0.0
        self._jitter_ms = jitter_ms
        self._rng = rng or random.Random(0)
        self._heap: list = []
        self._seq = 0
        self._thread_key: dict = {}   # "pid,tid" -> write key of its last line
        self._heads: dict = {}        # (pid, tid) -> "pid,tid" as printed (one per thread)
        self._out: list[str] = []
        self._drop = drop             # [a, b) UTC ms: lines stamped then are lost (a log gap)
        self.count = 0
        self.late = 0                 # lines written after their stamp
        self.last_ms = None           # latest instant stamped
        self.max_printed = None       # latest printed instant (a clock step may go back)
        # The printed instant is the true one (no clock step, milliseconds printed): the
        # model-only path skips the formatter.
        self._exact = not stamps.whole_seconds and stamps.clock.step_at is None
        if self._fh is None:
            self.emit = self._count

    def emit(self, now: int, pid: int, tid: int, func: str, msg: str, owner=None,
             ahead_ms: int = 0) -> int:
        """Log one line at instant `now`; returns the instant its stamp prints.
        `owner` (anything with a `write_key` attribute) keeps a request's lines in order.
        `ahead_ms` > 0: a stray line written now but stamped that far ahead (no jitter,
        and it does not date the file). A writer with no file counts instead (_count)."""
        printed, text = self._stamps.stamp(now + ahead_ms)
        if not ahead_ms:   # the latest instants logged (this is once per line)
            self.last_ms = now
            if self.max_printed is None or printed > self.max_printed:
                self.max_printed = printed
        key = now
        if not ahead_ms and self._jitter_rate and self._rng.random() < self._jitter_rate:
            key = self._jittered(now, printed)
            if key is None:
                return printed
        elif self._drop is not None and not self.kept(printed):
            return printed
        head = self._heads.get((pid, tid))
        if head is None:
            head = self._heads[pid, tid] = f"{pid:5d},{tid}" if tid >= 0 else f"{pid:5d}"
        last = self._thread_key.get(head, 0)
        if last > key:
            key = last
        if owner is not None:
            if owner.write_key > key:
                key = owner.write_key
            owner.write_key = key
        self._thread_key[head] = key
        heapq.heappush(self._heap, (key, self._seq, f"{text} {head} {func}: {msg}\n"))
        self._seq += 1
        self.count += 1
        return printed

    def _count(self, now: int, pid: int, tid: int, func: str, msg: str, owner=None,
               ahead_ms: int = 0) -> int:
        """emit() of a writer with no file: the same printed instant, draws, gap and
        counts, without the text or the write order (one call per line of a model run)."""
        at = now + ahead_ms
        printed = at if self._exact else self._stamps.printed(at)
        if not ahead_ms:
            self.last_ms = now
            if self.max_printed is None or printed > self.max_printed:
                self.max_printed = printed
            if self._jitter_rate and self._rng.random() < self._jitter_rate:
                if self._jittered(now, printed) is None:
                    return printed
            elif self._drop is not None and not self.kept(printed):
                return printed
        elif self._drop is not None and not self.kept(printed):
            return printed
        self.count += 1
        return printed

    def _jittered(self, now: int, printed: int) -> int | None:
        """The write key of a line drawn late (counted late), or None when the line is
        lost in the gap: the draw comes first either way, so the other log sharing the
        generator stays the same."""
        key = now + self._rng.randint(1, self._jitter_ms)
        if not self.kept(printed):
            return None
        self.late += 1
        return key

    def kept(self, printed: int) -> bool:
        """Whether a line stamped `printed` is in the file (not in the gap)."""
        drop = self._drop
        return drop is None or not drop[0] <= printed < drop[1]

    def flush_before(self, now: int) -> None:
        """Write every line whose write key is before `now`: nothing logged from now on
        can go before them."""
        heap, out, tap = self._heap, self._out, self._tap
        if self._fh is None:
            return
        while heap and heap[0][0] < now:
            key, _, text = heapq.heappop(heap)
            out.append(text)
            if tap is not None:
                tap(key, text)
        if len(out) >= FLUSH_EVERY:
            self._fh.writelines(out)
            out.clear()

    def close(self) -> None:
        if self._fh is None:
            return
        heap, out, tap = self._heap, self._out, self._tap
        while heap:
            key, _, text = heapq.heappop(heap)
            out.append(text)
            if tap is not None:
                tap(key, text)
        self._fh.writelines(out)
        out.clear()
        self._fh.close()
        if self.last_ms is not None:
            # Like a live log, the file's mtime is its last line's time (as the machine's
            # clock shows it): readers that take the year from the mtime get the right one.
            mtime = self._stamps.clock.shows(self.last_ms) * 1_000_000
            os.utime(self.path, ns=(mtime, mtime))
