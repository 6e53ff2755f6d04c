"""The envelope's timestamp: UTC milliseconds -> the local `MM/DD HH:MM:SS[.mmm]` a
DPM daemon prints, and the instant that printed text stands for.

With whole-second stamps the printed instant is the true one truncated to the second;
the ground truth uses the printed instant, exactly as a reader of the log must. The
head node's clock may be stepped back (NTP): from the step on, every stamp of the
machine (DPM, DPNS, rsyslog) shows the true instant less the step.
"""

from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo


class Clock:
    """The head node's clock: the instant it shows for a true instant (UTC ms)."""

    def __init__(self, step_at_ms: int | None = None, step_ms: int = 0):
        self.step_at = step_at_ms
        self.step = step_ms

    def shows(self, ms: int) -> int:
        if self.step_at is not None and ms >= self.step_at:
            return ms - self.step
        return ms


class StampFormatter:
    def __init__(self, tz: str, whole_seconds: bool = False, clock: Clock | None = None):
        self.zone = ZoneInfo(tz)
        self.whole_seconds = whole_seconds
        self.clock = clock or Clock()
        # A clock never stepped shows the true instant: the per-line call is skipped.
        self._shows = self.clock.shows if self.clock.step_at is not None else None
        self._sec = None
        self._text = ""

    def _second_text(self, sec: int) -> str:
        # Lines come in (nearly) time order: one cached second covers most of them.
        if sec != self._sec:
            local = datetime.fromtimestamp(sec, timezone.utc).astimezone(self.zone)
            self._sec = sec
            self._text = local.strftime("%m/%d %H:%M:%S")
        return self._text

    def printed(self, ms: int) -> int:
        """The instant the stamp for true instant `ms` prints (stamp()'s first), without
        its text."""
        ms = self.clock.shows(ms)
        return ms - ms % 1000 if self.whole_seconds else ms

    def stamp(self, ms: int) -> tuple[int, str]:
        """(printed instant in UTC ms, stamp text) for the true instant `ms`."""
        if self._shows is not None:
            ms = self._shows(ms)
        sec, frac = divmod(ms, 1000)
        text = self._text if sec == self._sec else self._second_text(sec)
        if self.whole_seconds:
            return ms - frac, text
        return ms, f"{text}.{frac:03d}"
