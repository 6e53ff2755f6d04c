"""Small statistics on measured durations and intervals (integer ms), for the
calibration (simulator/calibrate.py): quantiles and 95% intervals, quantile-by-quantile
subtraction, and how many intervals are open at once."""

from __future__ import annotations

import heapq
import math
from operator import itemgetter

from dpmstream.parsers import extension


def quantile(values, q: float) -> float:
    """Linear interpolation between order statistics; values need not be sorted."""
    return _interpolated(sorted(values), q)


def quantiles(values, qs) -> tuple[float, ...]:
    """`quantile` at each of `qs`, the values sorted once."""
    ordered = sorted(values)
    return tuple(_interpolated(ordered, q) for q in qs)


def _interpolated(ordered: list, q: float) -> float:
    if not ordered:
        return math.nan
    pos = q * (len(ordered) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def median_interval(values, z: float = 1.96):
    """95% interval of the median from the order statistics (distribution-free: the
    number of values under the median is binomial(n, 1/2))."""
    return sorted_median_interval(sorted(values), z)


def sorted_median_interval(ordered: list, z: float = 1.96):
    """`median_interval` of values already sorted (calibrate has them so: a sort more
    each was ~10% of its instructions, issue 30)."""
    n = len(ordered)
    if n < 2:
        return None, None
    half = z * math.sqrt(n) / 2
    lo = max(0, int(math.floor(n / 2 - half)))
    hi = min(n - 1, int(math.ceil(n / 2 + half)))
    return ordered[lo], ordered[hi]


def mean_interval(values, z: float = 1.96):
    """95% interval of the mean (normal approximation)."""
    n = len(values)
    if n < 2:
        return None, None
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return mean - z * sd / math.sqrt(n), mean + z * sd / math.sqrt(n)


def median(values) -> float:
    return quantile(values, 0.5)


def sorted_median(ordered: list) -> float:
    """`median` of values already sorted."""
    return _interpolated(ordered, 0.5)


def subtract_quantiles(total, part, offset: int = 0, floor: int = 0) -> tuple[int, ...]:
    """total - part, quantile by quantile: the i-th of n ordered totals less the part's
    quantile at the same level (and `offset`), never below `floor`. In the extension where
    it is built (native/src/estimators.rs, the same arithmetic in the same order), for
    ints; python_subtract_quantiles is the reference."""
    return tuple(_subtract_quantiles(total, part, offset, floor))


def python_subtract_quantiles(total, part, offset: int = 0, floor: int = 0) -> tuple[int, ...]:
    """`subtract_quantiles` in Python, the reference."""
    ordered = sorted(total)
    n = len(ordered)
    if not part:
        return tuple(max(floor, v - offset) for v in ordered)
    part_sorted = sorted(part)
    # _interpolated(part_sorted, (i + 0.5) / n) written out (the same arithmetic): one
    # call per total cost as much again as the rest.
    top = len(part_sorted) - 1
    out = []
    for i, v in enumerate(ordered):
        pos = (i + 0.5) / n * top
        lo = int(math.floor(pos))
        hi = lo + 1 if lo < top else top
        below = part_sorted[lo]
        out.append(max(floor, int(round(v - (below + (part_sorted[hi] - below) * (pos - lo))
                                        - offset))))
    return tuple(out)


def max_overlap(intervals) -> int:
    """The most intervals [start, end) open at one instant. In the extension where it is
    built (native/src/estimators.rs, the same walk), for ints; python_max_overlap is the
    reference."""
    pairs = intervals if isinstance(intervals, list) else list(intervals)
    return _max_overlap(pairs)


def python_max_overlap(intervals) -> int:
    """`max_overlap` in Python, the reference."""
    pairs = intervals if isinstance(intervals, list) else list(intervals)
    # The starts and the ends taken out in C (itemgetter mapped; issue 30: a Python step
    # per interval appending to both was a third of this function).
    starts = sorted(map(itemgetter(0), pairs))
    ends = sorted(map(itemgetter(1), pairs))
    # The count peaks just after a start: the starts so far less the ends at or before it
    # (an end at the same instant closes first). Two sorted lists, walked once: a third of
    # sorting (instant, step) events (it runs on every model run of whatif). (A bisection
    # into the ends for each start, mapped in C, cost more: ~14 comparisons a start.)
    most = closed = 0
    last = len(ends)
    for opened, start in enumerate(starts, 1):
        while closed < last and ends[closed] <= start:
            closed += 1
        if opened - closed > most:
            most = opened - closed
    return most


# Compiled where the extension is built (native/src/estimators.rs, the same arithmetic
# in the same order), the references taking what it cannot read as ints.
_subtract_quantiles = extension.compiled_else("subtract_quantiles", python_subtract_quantiles)
_max_overlap = extension.compiled_else("max_overlap", python_max_overlap)


def in_flight_at_start(calls) -> list[tuple[int, int]]:
    """(other calls in flight when each began, its duration), for (start, end) calls."""
    ordered = sorted(calls)
    ends: list[int] = []            # a heap of the ends of calls begun before
    out = []
    for start, end in ordered:
        while ends and ends[0] <= start:
            heapq.heappop(ends)
        out.append((len(ends), end - start))
        heapq.heappush(ends, end)
    return out


def in_flight_at_arrivals(spans) -> list[int]:
    """For (start, end) spans sorted by start: how many are open (itself included) at
    each start."""
    ends: list[int] = []
    out = []
    for start, end in spans:
        while ends and ends[0] <= start:
            heapq.heappop(ends)
        heapq.heappush(ends, end)
        out.append(len(ends))
    return out


def wilson_interval(k: int, n: int, z: float = 1.96):
    """95% Wilson interval of a share k / n."""
    if n == 0:
        return None, None
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)
