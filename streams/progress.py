"""A one-line progress bar on stderr for long replays (only on a terminal)."""

from __future__ import annotations

import sys
import time

LONG_INPUT_BYTES = 20 * 1024 * 1024  # below this a replay is over before a bar helps


class Progress:
    def __init__(self, total_bytes: int | None, enabled: bool | None = None, stream=sys.stderr):
        if enabled is None:
            enabled = stream.isatty() and (total_bytes or 0) >= LONG_INPUT_BYTES
        self.enabled = enabled
        self.total = total_bytes
        self.stream = stream
        self.started = time.monotonic()
        self._next = 0.0

    def update(self, done_bytes: int, lines: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + 0.5
        rate = lines / max(now - self.started, 1e-6)
        if self.total:
            frac = min(done_bytes / self.total, 1.0)
            bar = "#" * int(frac * 30)
            text = f"\r[{bar:<30}] {frac:6.1%} {lines:>11,} lines {rate:>9,.0f} lines/s"
        else:
            text = f"\r{lines:>11,} lines {rate:>9,.0f} lines/s"
        self.stream.write(text)
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
