"""Histogram bucket bounds dense enough that histogram_quantile() can be paged on.

Prometheus estimates a quantile by linear interpolation inside the bucket that holds it,
so its error is bounded by the width of that bucket. Log-spaced bounds with a ratio of
1.15 keep the estimate within 10% of the exact quantile on the thesis and heavy
workloads (tests/scenarios/test_quantile_agreement.py), where the 1-2-5 bounds used before were
30-70% off. Native histograms would adapt their buckets by themselves, but
prometheus-client (0.26) cannot expose them in the protobuf format that Prometheus
(2.42, behind --enable-feature=native-histograms) needs to scrape them, so the bounds
are explicit.

Log stamps have a resolution of 1 ms, so below 10 ms the bounds sit half-way between
whole milliseconds (a value of 3 ms lies alone in (2.5, 3.5] ms), and a bound at 0 makes
a quantile of zero waits exactly 0. Each phase's bounds stop at the longest duration the
phase plausibly has: past it the quantile reads as the top bound, itself an alarm.
"""

from __future__ import annotations

RATIO = 1.15


def log_buckets(top_s: float, ratio: float = RATIO) -> tuple[float, ...]:
    """0, the half milliseconds up to 10.5 ms, then bounds `ratio` apart (3 significant
    digits) up to the first one at or above `top_s`."""
    bounds = [0.0, 0.0005] + [(ms + 0.5) / 1000 for ms in range(1, 11)]
    x = bounds[-1]
    while bounds[-1] < top_s:
        x *= ratio
        bounds.append(float(f"{x:.3g}"))
    return tuple(bounds)


_SHORT = log_buckets(120.0)         # a call-like phase: milliseconds, seconds if hung
_MEDIUM = log_buckets(3600.0)       # waiting for and being processed by a slow thread
_LONG = log_buckets(4 * 3600.0)     # up to the client's transfer of a big file

PHASE_BUCKETS: dict[str, tuple[float, ...]] = {
    "auth": _SHORT, "request": _SHORT, "poll": _SHORT, "done": _SHORT,
    "queue": _MEDIUM, "proc": _MEDIUM,
    "ready_wait": _LONG, "transfer": _LONG, "total": _LONG,
}
# Synchronous calls (name server, SRM, other DPM calls): a slow `rm` of a big directory
# may take minutes.
CALL_BUCKETS = log_buckets(600.0)
