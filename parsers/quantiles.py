"""The one quantile definition of dpmstream: nearest rank, a value that was observed.

    nearest_rank(sorted_values, 0.95)    # None for no values

The replay summary (streams/sinks/summary.py), the report (report/) and the Nagios probe
(probes/) all read quantiles through this, so that a p95 in the replay's table, in the
report and in check_dpm's log source is the same number for the same records. Pure: the
probe may import it (it imports only parsers/ and probes/).

Nearest rank, not interpolation: durations are whole milliseconds from log stamps, and a
quantile that was observed can be looked up in the records.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def nearest_rank(sorted_values: Sequence, q: float):
    """The smallest value with at least q of the values at or below it (None if empty).

    `sorted_values` must be sorted ascending; 0 < q <= 1 (q = 0 gives the minimum)."""
    n = len(sorted_values)
    if n == 0:
        return None
    # 1e-9: q * n is a whole rank that floating point may put a hair above (0.95 * 20).
    rank = max(1, math.ceil(q * n - 1e-9))
    return sorted_values[min(rank, n) - 1]
