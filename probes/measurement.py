"""What a probe source measures over a window, independent of where it came from.

Both sources (Prometheus, a log file) fill a Snapshot; check_dpm turns it into
nagiosplugin metrics. Latencies are float seconds, None where the window holds no value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


class SourceError(RuntimeError):
    """The source cannot be read (service down, file missing, bad answer): UNKNOWN."""


@dataclass(frozen=True)
class Wanted:
    """What to measure: quantiles for every phase, and quantiles per name-server op."""

    phase_quantiles: tuple[float, ...]
    ns: dict[str, tuple[float, ...]] = field(default_factory=dict)
    age: bool = False  # also how old the newest line or sample is (--max-age)
    # A DOME site (--dome): its calls, puts and filesystems instead of requests; these
    # quantiles of its call durations.
    dome: bool = False
    dome_call_quantiles: tuple[float, ...] = ()


# The HTTP code classes of a DOME call that are errors, and those that were answered at
# all (a cut call, class "none", has no code).
DOME_ERROR_CLASSES = ("4xx", "5xx")
DOME_ANSWERED_CLASSES = ("2xx", "3xx", "4xx", "5xx")


@dataclass
class Snapshot:
    window_s: float
    source: str  # for the status line: the Prometheus URL or the file name
    by_status: dict[str, float] = field(default_factory=dict)  # finished requests
    phases: dict[tuple[str, float], float | None] = field(default_factory=dict)
    ns: dict[tuple[str, float], float | None] = field(default_factory=dict)
    calls: float = 0.0  # synchronous calls finished in the window (any daemon)
    end_ms: int | None = None  # log source: latest event time (the window's end)
    # Seconds from the newest line (log) or sample (Prometheus) to now; None if unknown.
    age_s: float | None = None
    long_lines: int = 0  # log source: lines over the length bound, skipped
    # log source: event seconds from the first line read to the newest; what was read
    # when -t allowed only the end of the window's lines ("" when all was read)
    read_s: float | None = None
    partial: str = ""
    lines_read: int | None = None  # log source: the lines the answer was measured on
    # log source: what the logs given could not show (a DOME site's disk nodes unread)
    unseen: str = ""
    dome: bool = False
    # A DOME site (Wanted.dome): by_status counts its puts, `calls` its calls, and these
    # its calls by HTTP code class, call-duration quantiles, and filesystems now (None:
    # none known).
    calls_by_class: dict[str, float] = field(default_factory=dict)
    dome_call: dict[float, float | None] = field(default_factory=dict)
    fs_disabled: float | None = None
    fs_free_ratio: float | None = None
    fs_free_bytes: float | None = None
    # log source: the calls' stamps were whole seconds (no duration measured)
    whole_seconds: bool = False

    @property
    def requests(self) -> float:
        return sum(self.by_status.values())

    def rate(self, status: str) -> float | None:
        total = self.requests
        return self.by_status.get(status, 0.0) / total if total > 0 else None

    @property
    def error_rate(self) -> float | None:
        """DOME calls answered 4xx or 5xx over the calls answered; None with none answered."""
        answered = sum(self.calls_by_class.get(c, 0.0) for c in DOME_ANSWERED_CLASSES)
        errors = sum(self.calls_by_class.get(c, 0.0) for c in DOME_ERROR_CLASSES)
        return errors / answered if answered > 0 else None

    @property
    def empty(self) -> bool:
        return self.requests <= 0 and self.calls <= 0


def parse_duration(text: str) -> float:
    """`15m` -> 900.0; units s, m, h, d; a bare number is seconds."""
    text = text.strip()
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    try:
        if text and text[-1] in units:
            value = float(text[:-1]) * units[text[-1]]
        else:
            value = float(text)
    except ValueError:
        raise ValueError(f"bad duration {text!r}: use e.g. 90s, 15m, 2h, 1d") from None
    if not value > 0 or math.isinf(value):
        raise ValueError(f"bad duration {text!r}: must be positive")
    return value


def prom_duration(seconds: float) -> str:
    """A PromQL range duration: whole seconds."""
    return f"{max(1, int(round(seconds)))}s"
